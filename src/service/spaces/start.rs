//! Starting space operations: create, change, start or stop, delete. Each validates its request,
//! then hands one submission to `service::start`.

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

/// A development space, made and followed until it runs.
pub async fn space(
    engine: &Engine,
    name: &str,
    req: &super::SpaceRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::space_params(engine, name, req).await?;
    start(engine, OpKind::SpaceCreate, name, &params, caller).await
}

/// A change to a space; `None` when it already is as asked (nothing is started).
pub async fn space_update(
    engine: &Engine,
    name: &str,
    space: &str,
    patch: &super::SpacePatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::patch_params(engine, name, space, patch).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::SpaceUpdate, name, &params, caller).await?,
        )),
    }
}

/// A space started or stopped; `None` when it already is.
pub async fn space_status(
    engine: &Engine,
    name: &str,
    space: &str,
    running: bool,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::status_params(engine, name, space, running).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::SpaceStatus, name, &params, caller).await?,
        )),
    }
}

/// Deletes a space (the controller removes its pod and service; its home volume goes with it).
pub async fn space_delete(
    engine: &Engine,
    name: &str,
    space: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let found = super::get_space(engine, name, space).await?;
    crate::service::people::access::require_write(
        engine,
        name,
        &found.namespace,
        "delete its spaces",
    )
    .await?;
    let params = crate::service::steps::workloads::DeleteParams {
        workload: format!("space/{space}"),
        objects: vec![super::ref_of(&found.namespace, space)],
        release: None,
    };
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}
