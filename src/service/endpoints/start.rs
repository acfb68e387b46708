//! Starting endpoint operations: deploy, change, delete. Each validates its request, then hands one
//! submission to `service::start`.

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

/// A managed inference endpoint, deployed through the HyperPod inference operator.
pub async fn endpoint(
    engine: &Engine,
    name: &str,
    req: &super::EndpointRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::endpoint_params(engine, name, req).await?;
    start(engine, OpKind::EndpointDeploy, name, &params, caller).await
}

/// A change to an endpoint; `None` when it already is as asked (nothing is started).
pub async fn endpoint_update(
    engine: &Engine,
    name: &str,
    endpoint: &str,
    patch: &super::EndpointPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::patch_params(engine, name, endpoint, patch).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::EndpointUpdate, name, &params, caller).await?,
        )),
    }
}

/// Deletes an endpoint (the operator removes its deployment, services and registration).
pub async fn endpoint_delete(
    engine: &Engine,
    name: &str,
    endpoint: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let found = super::get_endpoint(engine, name, endpoint).await?;
    crate::service::people::access::require_write(
        engine,
        name,
        &found.namespace,
        "delete its endpoints",
    )
    .await?;
    let params = crate::service::steps::workloads::DeleteParams {
        workload: format!("endpoint/{endpoint}"),
        objects: vec![super::ref_of(&found.kind, &found.namespace, endpoint)],
        release: None,
    };
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}
