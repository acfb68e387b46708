//! Reaching a running space's server from the control plane: its pod found by the label the
//! controller gives it, then a port-forward through the Kubernetes API to its port — never an
//! address a request names, and only for a space made here.

use serde_json::Value;

use super::manifest::PORT;
use super::{actual, state::space_state};
use crate::cloud::PodStream;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::incluster::kube_target;

/// The label jupyter-k8s puts on a workspace's pod.
const WORKSPACE_LABEL: &str = "workspace.jupyter.org/workspace-name";

/// A stream to a space's server, and the path it serves under.
pub struct SpaceConnection {
    pub stream: PodStream,
    pub base: String,
}

fn not_running(space: &str, why: &str) -> ApiError {
    ApiError::Conflict {
        slug: "space-not-running",
        detail: format!("`{space}` {why}: start it (space_start), then open it again"),
        field: None,
        operation_id: None,
    }
}

/// The space's namespace and base path, refused unless it runs.
pub async fn running(engine: &Engine, cluster: &str, space: &str) -> ApiResult<(String, String)> {
    let o = actual(engine, cluster, space).await?;
    let (state, _) = space_state(&o);
    if state != "running" {
        return Err(not_running(space, &format!("is {state}")));
    }
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    let namespace = s("/metadata/namespace")
        .unwrap_or_else(|| crate::service::labels::WORKLOAD_NAMESPACE.to_string());
    let base = s("/status/applicationBasePath")
        .unwrap_or_else(|| format!("/workspaces/{namespace}/{space}"));
    Ok((namespace, base.trim_end_matches('/').to_string()))
}

/// Where a running space's server is: its namespace, its pod, the path it serves under.
#[derive(Debug, Clone)]
pub struct SpacePod {
    pub namespace: String,
    pub pod: String,
    pub base: String,
}

/// Finds the running space's pod (a read of the space and a list of its pods).
pub async fn locate(engine: &Engine, cluster: &str, space: &str) -> ApiResult<SpacePod> {
    let (namespace, base) = running(engine, cluster, space).await?;
    let target = kube_target(engine, cluster).await?;
    let pods = engine
        .cloud()
        .kube
        .list(
            &target,
            "v1",
            "Pod",
            Some(&namespace),
            Some(&format!("{WORKSPACE_LABEL}={space}")),
        )
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    let pod = pods
        .iter()
        .find(|p| p.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
        .and_then(|p| p.pointer("/metadata/name").and_then(Value::as_str))
        .ok_or_else(|| not_running(space, "has no running pod yet"))?
        .to_string();
    Ok(SpacePod {
        namespace,
        pod,
        base,
    })
}

/// Opens a stream to the server of a located space of `cluster`.
pub async fn connect(engine: &Engine, cluster: &str, at: &SpacePod) -> ApiResult<SpaceConnection> {
    let target = kube_target(engine, cluster).await?;
    let stream = engine
        .cloud()
        .kube
        .port_forward(&target, &at.namespace, &at.pod, PORT)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    Ok(SpaceConnection {
        stream,
        base: at.base.clone(),
    })
}
