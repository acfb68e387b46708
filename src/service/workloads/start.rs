//! Starting workload operations: model downloads, deployments and warm pools. Each validates its
//! request, then hands one submission to `service::start`.

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

pub async fn model_download(
    engine: &Engine,
    name: &str,
    req: &super::ModelDownloadRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::model_params(engine, name, req).await?;
    start(engine, OpKind::ModelDownload, name, &params, caller).await
}

/// A self-managed deployment; `prometheus` is the server's default for its autoscaling.
pub async fn deployment(
    engine: &Engine,
    name: &str,
    req: &super::DeploymentRequest,
    prometheus: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::deployment_params(engine, name, req, prometheus).await?;
    start(engine, OpKind::InferenceDeploy, name, &params, caller).await
}

pub async fn deployment_delete(
    engine: &Engine,
    name: &str,
    deployment: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::deployment_delete_params(engine, name, deployment).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn pool(
    engine: &Engine,
    name: &str,
    req: &super::PoolRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::pool_params(engine, name, req).await?;
    start(engine, OpKind::PoolCreate, name, &params, caller).await
}

/// A new size for a pool; `None` when it already has it (nothing is started).
pub async fn pool_scale(
    engine: &Engine,
    name: &str,
    pool: &str,
    patch: &super::PoolPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::pool_scale_params(engine, name, pool, patch).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::PoolScale, name, &params, caller).await?,
        )),
    }
}

pub async fn pool_delete(
    engine: &Engine,
    name: &str,
    pool: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::pool_delete_params(engine, name, pool).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn pool_assign(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &super::AssignRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::assign_params(engine, name, pool, req).await?;
    start(engine, OpKind::PoolAssign, name, &params, caller).await
}

pub async fn pool_unassign(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &super::UnassignRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::unassign_params(engine, name, pool, req).await?;
    start(engine, OpKind::PoolAssign, name, &params, caller).await
}
