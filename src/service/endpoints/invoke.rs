//! A smoke test of a managed endpoint: one chat completion through the Kubernetes API server's
//! service proxy to the service in front of the endpoint's workers — never an address a
//! request names.

use serde_json::Value;

use super::views::get_endpoint;
use crate::cloud::ServiceCall;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::workloads::InvokeRequest;

pub async fn invoke_endpoint(
    engine: &Engine,
    cluster: &str,
    name: &str,
    req: &InvokeRequest,
) -> ApiResult<Value> {
    let body = req.chat_body(name)?;
    let e = get_endpoint(engine, cluster, name).await?;
    // Calling it goes through the API server's service proxy, which `edit` grants, not `view`.
    crate::service::people::access::require_write(
        engine,
        cluster,
        &e.namespace,
        "call its endpoints",
    )
    .await?;
    // An endpoint scaling (or with workers Kueue holds) still serves from its ready ones.
    if e.state != "DeploymentComplete" && e.ready_replicas == 0 {
        return Err(ApiError::Conflict {
            slug: ProblemType::EndpointNotReady,
            detail: format!(
                "`{name}` is {} with no worker ready: wait for its operation (operation_get) first",
                e.state
            ),
            field: None,
            operation_id: None,
        });
    }
    // The path is read back from the cluster: held to what a request may name.
    if !super::spec::invocation_path_ok(&e.invocation_path) {
        return Err(ApiError::Conflict {
            slug: ProblemType::EndpointPathUnsafe,
            detail: format!(
                "`{name}`'s invocation path in the cluster is not a plain relative path: it is not called. Redeploy the endpoint with a valid invocationPath"
            ),
            field: None,
            operation_id: None,
        });
    }
    let target = kube_target(engine, cluster).await?;
    let call = ServiceCall {
        namespace: &e.namespace,
        name,
        port: e.port,
        path: &e.invocation_path,
    };
    Ok(engine
        .cloud()
        .kube
        .service_post(&target, &call, &body)
        .await?)
}
