//! Starting the operations of a cluster's long-running workloads: self-managed deployments and
//! warm pools, the software update, MLflow, managed endpoints and development spaces.

use serde_json::json;

use super::{start, Caller};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::{Accepted, OpKind};

/// A self-managed deployment; `prometheus` is the server's default for its autoscaling.
pub async fn deployment(
    engine: &Engine,
    name: &str,
    req: &crate::service::workloads::DeploymentRequest,
    prometheus: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params =
        crate::service::workloads::deployment_params(engine, name, req, prometheus).await?;
    start(engine, OpKind::InferenceDeploy, name, &params, caller).await
}

pub async fn pool(
    engine: &Engine,
    name: &str,
    req: &crate::service::workloads::PoolRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::workloads::pool_params(engine, name, req).await?;
    start(engine, OpKind::PoolCreate, name, &params, caller).await
}

/// A new size for a pool; `None` when it already has it (nothing is started).
pub async fn pool_scale(
    engine: &Engine,
    name: &str,
    pool: &str,
    patch: &crate::service::workloads::PoolPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match crate::service::workloads::pool_scale_params(engine, name, pool, patch).await? {
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
    let params = crate::service::workloads::pool_delete_params(engine, name, pool).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn pool_assign(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &crate::service::workloads::AssignRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::workloads::assign_params(engine, name, pool, req).await?;
    start(engine, OpKind::PoolAssign, name, &params, caller).await
}

pub async fn pool_unassign(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &crate::service::workloads::UnassignRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::workloads::unassign_params(engine, name, pool, req).await?;
    start(engine, OpKind::PoolAssign, name, &params, caller).await
}

pub async fn deployment_delete(
    engine: &Engine,
    name: &str,
    deployment: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params =
        crate::service::workloads::deployment_delete_params(engine, name, deployment).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn software_update(engine: &Engine, name: &str, caller: &Caller) -> ApiResult<Accepted> {
    // The cluster must have a HyperPod cluster: the same lookup the group routes use.
    crate::service::list_groups(engine, name).await?;
    start(
        engine,
        OpKind::HyperPodSoftwareUpdate,
        name,
        &json!({}),
        caller,
    )
    .await
}

/// The account's managed MLflow, set up from one cluster (its bucket, its training identity).
pub async fn mlflow_setup(
    engine: &Engine,
    req: &crate::service::mlflow::MlflowSetupRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let cluster = crate::service::mlflow::setup_cluster(engine, req).await?;
    start(engine, OpKind::MlflowSetup, &cluster, &json!({}), caller).await
}

/// A managed inference endpoint, deployed through the HyperPod inference operator.
pub async fn endpoint(
    engine: &Engine,
    name: &str,
    req: &crate::service::endpoints::EndpointRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::endpoints::endpoint_params(engine, name, req).await?;
    start(engine, OpKind::EndpointDeploy, name, &params, caller).await
}

/// A change to an endpoint; `None` when it already is as asked (nothing is started).
pub async fn endpoint_update(
    engine: &Engine,
    name: &str,
    endpoint: &str,
    patch: &crate::service::endpoints::EndpointPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match crate::service::endpoints::patch_params(engine, name, endpoint, patch).await? {
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
    let found = crate::service::endpoints::get_endpoint(engine, name, endpoint).await?;
    let params = crate::service::steps::workloads::DeleteParams {
        workload: format!("endpoint/{endpoint}"),
        objects: vec![crate::service::endpoints::ref_of(
            &found.kind,
            &found.namespace,
            endpoint,
        )],
        release: None,
    };
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

/// A development space, made and followed until it runs.
pub async fn space(
    engine: &Engine,
    name: &str,
    req: &crate::service::spaces::SpaceRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::spaces::space_params(engine, name, req).await?;
    start(engine, OpKind::SpaceCreate, name, &params, caller).await
}

/// A change to a space; `None` when it already is as asked (nothing is started).
pub async fn space_update(
    engine: &Engine,
    name: &str,
    space: &str,
    patch: &crate::service::spaces::SpacePatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match crate::service::spaces::patch_params(engine, name, space, patch).await? {
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
    match crate::service::spaces::status_params(engine, name, space, running).await? {
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
    let found = crate::service::spaces::get_space(engine, name, space).await?;
    let params = crate::service::steps::workloads::DeleteParams {
        workload: format!("space/{space}"),
        objects: vec![crate::service::spaces::ref_of(&found.namespace, space)],
        release: None,
    };
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}
