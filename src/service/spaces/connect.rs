//! Reaching a running space's server from the control plane: its pod found by the label the
//! controller gives it, then a port-forward through the Kubernetes API to its port — never an
//! address a request names, and only for a space made here.

use serde_json::Value;

use super::manifest::PORT;
use super::{actual, state::space_state};
use crate::cloud::ListQuery;
use crate::cloud::PodStream;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;

/// The label jupyter-k8s puts on a workspace's pod.
const WORKSPACE_LABEL: &str = "workspace.jupyter.org/workspace-name";

/// A stream to a space's server, and the path it serves under.
pub struct SpaceConnection {
    pub stream: PodStream,
    pub base: String,
}

fn not_running(space: &str, why: &str) -> ApiError {
    ApiError::Conflict {
        slug: ProblemType::SpaceNotRunning,
        detail: format!("`{space}` {why}: start it (space_start), then open it again"),
        field: None,
        operation_id: None,
    }
}

/// The space's namespace and base path, refused unless it runs.
pub async fn running(engine: &Engine, cluster: &str, space: &str) -> ApiResult<(String, String)> {
    let o = super::writable(engine, cluster, space, "open its spaces").await?;
    running_at(&o, space)
}

/// A running space's namespace and base path, as its Workspace says.
fn running_at(o: &Value, space: &str) -> ApiResult<(String, String)> {
    let (state, _) = space_state(o);
    if state != "running" {
        return Err(not_running(space, &format!("is {state}")));
    }
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    let namespace = s("/metadata/namespace")
        .unwrap_or_else(|| crate::service::shared::labels::WORKLOAD_NAMESPACE.to_string());
    let default = format!("/workspaces/{namespace}/{space}");
    let base = safe_base(s("/status/applicationBasePath"), &default);
    Ok((namespace, base.trim_end_matches('/').to_string()))
}

/// The path a space serves under, as its status says, only if it is a plain absolute path: it
/// is read back from the cluster and becomes the proxy's redirect, so `//evil.example` or any
/// scheme would send the browser elsewhere (an open redirect). Anything else is the default.
fn safe_base(said: Option<String>, default: &str) -> String {
    let plain = |p: &str| {
        p.starts_with('/')
            && !p.starts_with("//")
            && p.len() <= 256
            && !p.contains("/../")
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/-_.~".contains(c))
    };
    match said {
        Some(p) if plain(&p) => p,
        _ => default.to_string(),
    }
}

/// Where a running space's server is: its namespace, its pod, the path it serves under.
#[derive(Debug, Clone)]
pub struct SpacePod {
    pub namespace: String,
    pub pod: String,
    pub base: String,
}

/// Finds the running space's pod: the one the Workspace controller made for this Workspace
/// (its owner chain, [`super::owner`]), never merely the first pod with the space's label.
pub async fn locate(engine: &Engine, cluster: &str, space: &str) -> ApiResult<SpacePod> {
    use super::owner;
    let workspace = actual(engine, cluster, space).await?;
    let (namespace, base) = running_at(&workspace, space)?;
    let workspace_uid = workspace
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let target = kube_target(engine, cluster).await?;
    let kube = &engine.cloud().kube;
    let cloud = |e| ApiError::Cloud(Box::new(e));
    let get = |kind: &str, name: &str| crate::cloud::ObjectRef {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        namespace: Some(namespace.clone()),
        name: name.into(),
    };
    let deployment = kube
        .get(&target, &get("Deployment", &owner::deployment_name(space)))
        .await
        .map_err(cloud)?
        .filter(|d| {
            !workspace_uid.is_empty() && owner::deployment_is_the_workspaces(d, &workspace_uid)
        })
        .ok_or_else(|| not_running(space, "has no server of its own yet"))?;
    let pods = kube
        .list(
            &target,
            &ListQuery::of("v1", "Pod")
                .namespace(&namespace)
                .labels(&format!("{WORKSPACE_LABEL}={space}")),
        )
        .await
        .map_err(cloud)?;
    for pod in pods
        .iter()
        .filter(|p| p.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
    {
        let Some((rs_name, rs_uid)) = owner::pod_replica_set(pod) else {
            continue;
        };
        let rs = kube
            .get(&target, &get("ReplicaSet", rs_name))
            .await
            .map_err(cloud)?;
        if !rs.is_some_and(|rs| owner::replica_set_is_the_deployments(&rs, rs_uid, &deployment)) {
            continue;
        }
        if let Some(name) = pod.pointer("/metadata/name").and_then(Value::as_str) {
            return Ok(SpacePod {
                namespace,
                pod: name.to_string(),
                base,
            });
        }
    }
    Err(not_running(space, "has no running pod of its own yet"))
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

/// How a space is reached by a `WorkspaceConnection` of the add-on's own (its extension API).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema,
)]
pub enum ConnectionType {
    /// The add-on's own web UI (needs its domain and certificate set up on the cluster).
    #[serde(rename = "web-ui")]
    WebUi,
    /// VS Code over SSM, through the AWS Toolkit.
    #[serde(rename = "vscode-remote")]
    VsCode,
    /// Kiro over SSM, through the AWS Toolkit.
    #[serde(rename = "kiro-remote")]
    Kiro,
    /// Cursor over SSM, through the AWS Toolkit.
    #[serde(rename = "cursor-remote")]
    Cursor,
}

impl ConnectionType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WebUi => "web-ui",
            Self::VsCode => "vscode-remote",
            Self::Kiro => "kiro-remote",
            Self::Cursor => "cursor-remote",
        }
    }
}

/// Body of `POST …/spaces/{space}/connections` (optional).
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionRequest {
    /// `vscode-remote` (default), `kiro-remote`, `cursor-remote` or `web-ui`.
    #[serde(rename = "type")]
    pub kind: Option<ConnectionType>,
}

/// A connection the add-on made: a URL to open once.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpaceLink {
    #[serde(rename = "type")]
    pub kind: ConnectionType,
    /// For an IDE: paste it into a browser on the machine with the IDE and the AWS Toolkit; it
    /// opens the IDE connected to the space. For `web-ui`: the add-on's own page. It carries a
    /// session token: hand it to the user, do not log it.
    pub url: String,
    pub hint: String,
}

/// The manifest of a `WorkspaceConnection` request (create-only: the answer is not stored).
pub fn connection_manifest(namespace: &str, space: &str, kind: ConnectionType) -> Value {
    serde_json::json!({
        "apiVersion": "connection.workspace.jupyter.org/v1alpha1",
        "kind": "WorkspaceConnection",
        "metadata": {"namespace": namespace},
        "spec": {"workspaceName": space, "workspaceConnectionType": kind.as_str()}
    })
}

/// Whether the Spaces add-on was given remote access (`remoteAccess.enabled` in its
/// configuration, the key of `jupyter-infra/jupyter-k8s-aws` `charts/aws-hyperpod/values.yaml`
/// at b6adb6fd2797abc9c2d5cb7b2a674e208b563628): without it, and the SSM managed-node role and
/// agent sidecar it names, no `{ide}-remote` session can start (AWS's Spaces "Set up
/// permissions" page). This control plane does not set it up — the add-on's configuration
/// schema for it is not in a source it can follow — so an IDE connection is refused before any
/// call unless whoever runs the cluster configured it.
async fn remote_access_configured(
    engine: &Engine,
    cluster: &str,
    kind: ConnectionType,
) -> ApiResult<()> {
    let addon = engine
        .cloud()
        .eks
        .describe_addon(cluster, crate::service::steps::features::SPACES_ADDON)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    let enabled = addon
        .and_then(|a| a.configuration_values)
        .and_then(|c| serde_json::from_str::<Value>(&c).ok())
        .is_some_and(|c| c.pointer("/remoteAccess/enabled") == Some(&Value::Bool(true)));
    if enabled {
        return Ok(());
    }
    Err(ApiError::Conflict {
        slug: ProblemType::SpaceRemoteAccessUnsupported,
        detail: format!(
            "a {} connection needs the Spaces add-on's remote access (its `remoteAccess` \
             configuration: an SSM managed-node role and the SSM agent sidecar, see AWS's Spaces \
             \"Set up permissions\" page), which this control plane does not set up and which \
             `{cluster}`'s add-on does not have. Open the space through this control plane \
             instead (space_open), which needs nothing set up",
            kind.as_str()
        ),
        field: Some("type".into()),
        operation_id: None,
    })
}

/// Asks the add-on for a connection to a running space of `cluster`; what it refuses (web
/// access not set up, a type its access strategy lacks) comes back as a conflict naming the
/// way that always works: opening the space through this control plane.
pub async fn connection(
    engine: &Engine,
    cluster: &str,
    space: &str,
    kind: ConnectionType,
) -> ApiResult<SpaceLink> {
    let (namespace, _) = running(engine, cluster, space).await?;
    if kind != ConnectionType::WebUi {
        remote_access_configured(engine, cluster, kind).await?;
    }
    let target = kube_target(engine, cluster).await?;
    let manifest = connection_manifest(&namespace, space, kind);
    crate::service::shared::preview::stop(
        crate::service::shared::preview::Effect::Create,
        format!(
            "a {} WorkspaceConnection to space `{space}` in {namespace} (k8s:Create)",
            kind.as_str()
        ),
    )?;
    let answer = engine
        .cloud()
        .kube
        .create(&target, &manifest)
        .await
        .map_err(|e| match e.code.as_str() {
            "BadRequest" | "NotFound" | "Forbidden" | "Http400" => ApiError::Conflict {
                slug: ProblemType::SpaceConnectionRefused,
                detail: format!(
                    "the Spaces add-on refused a {} connection to `{space}`: {}. Open it through \
                     this control plane instead (space_open), which needs nothing set up",
                    kind.as_str(),
                    e.message
                ),
                field: Some("type".into()),
                operation_id: None,
            },
            _ => ApiError::Cloud(Box::new(e)),
        })?;
    let url = answer
        .pointer("/status/workspaceConnectionUrl")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ApiError::Conflict {
            slug: ProblemType::SpaceConnectionRefused,
            detail: format!(
                "the Spaces add-on answered a {} connection without a URL",
                kind.as_str()
            ),
            field: Some("type".into()),
            operation_id: None,
        })?
        .to_string();
    let hint = match kind {
        ConnectionType::WebUi => "Open it in a browser; it signs you in to the space once.".into(),
        ide => format!(
            "Open this URL in a browser on the machine where {} and the AWS Toolkit are installed: \
             it opens the IDE connected to `{space}` over SSM. The link works once.",
            match ide {
                ConnectionType::Kiro => "Kiro",
                ConnectionType::Cursor => "Cursor",
                _ => "VS Code",
            }
        ),
    };
    Ok(SpaceLink { kind, url, hint })
}

#[cfg(test)]
mod tests {
    use super::safe_base;

    #[test]
    fn a_base_path_read_from_the_cluster_never_leaves_the_space() {
        let d = "/workspaces/default/a1";
        let said = |p: &str| safe_base(Some(p.to_string()), d);
        assert_eq!(said("/workspaces/default/a1/"), "/workspaces/default/a1/");
        for bad in [
            "//evil.example",
            "https://evil.example/",
            "/a/../b",
            "/a b",
            "",
            "x/y",
        ] {
            assert_eq!(said(bad), d, "{bad}");
        }
        assert_eq!(safe_base(None, d), d);
    }
}
