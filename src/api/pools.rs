//! Warm GPU pools: create, list, read, resize and delete a pool, and give its pods to models
//! (or back) by label.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::workloads::{
    self as w, AssignRequest, PoolPatch, PoolRequest, PoolView, UnassignRequest,
};
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_pools, create_pool))
        .routes(routes!(get_pool, scale_pool, delete_pool))
        .routes(routes!(assign_pod))
        .routes(routes!(unassign_pod))
}

/// Create a warm GPU pool: size model-server pods (image, args, GPUs, port, optional instance
/// type; the storage claim read-only at /s3) kept running and serving nothing until a pod is
/// assigned to a model (deployment_create with pool, then pool_assign). Followed until every
/// pod is ready.
#[utoipa::path(post, path = "/api/clusters/{name}/pools", operation_id = "pool_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "5-20 minutes (image pull and model load)"}))),
    params(("name" = String, Path)),
    request_body = PoolRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_pool(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<PoolRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::pool(&state.engine, &name, &req, &caller).await?,
    ))
}

/// The cluster's warm pools: size, ready pods, how many are assigned and free, and which model
/// each pod serves.
#[utoipa::path(get, path = "/api/clusters/{name}/pools", operation_id = "pool_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [PoolView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_pools(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<PoolView>>> {
    Ok(Json(w::list_pools(&state.engine, &name).await?))
}

/// One warm pool and its pods.
#[utoipa::path(get, path = "/api/clusters/{name}/pools/{pool}", operation_id = "pool_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("pool" = String, Path)),
    responses((status = 200, body = PoolView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_pool(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<PoolView>> {
    Ok(Json(w::get_pool(&state.engine, &name, &item).await?))
}

/// Resize a warm pool. Shrinking removes free pods only, and never below the pods assigned to
/// models (409 says how many are free). The same size: 200 and nothing is done.
#[utoipa::path(patch, path = "/api/clusters/{name}/pools/{pool}", operation_id = "pool_scale",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "minutes (new pods load the model)"}))),
    params(("name" = String, Path), ("pool" = String, Path)),
    request_body = PoolPatch,
    responses((status = 202, body = Accepted), (status = 200, description = "already that size: nothing changed", body = PoolView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn scale_pool(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(patch): ApiJson<PoolPatch>,
) -> ApiResult<Response> {
    match crate::service::workloads::start::pool_scale(&state.engine, &name, &item, &patch, &caller)
        .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok((
            StatusCode::OK,
            Json(w::get_pool(&state.engine, &name, &item).await?),
        )
            .into_response()),
    }
}

/// Delete a warm pool and its pods. Refused while any pod serves a model. Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/pools/{pool}", operation_id = "pool_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("pool" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_pool(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::pool_delete(&state.engine, &name, &item, &caller).await?,
    ))
}

/// Give a ready pool pod to a model served from the pool (moving it from the model it served, if
/// any): its label changes in place, no restart, and the model's service starts sending it
/// requests. Followed until the pod carries the new label.
#[utoipa::path(post, path = "/api/clusters/{name}/pools/{pool}/assign", operation_id = "pool_assign",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "seconds"}))),
    params(("name" = String, Path), ("pool" = String, Path)),
    request_body = AssignRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn assign_pod(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(req): ApiJson<AssignRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::pool_assign(&state.engine, &name, &item, &req, &caller)
            .await?,
    ))
}

/// Take a pod back from its model into the pool's free pods (still warm). The model loses that
/// replica: confirm with the user when it is the model's last one.
#[utoipa::path(post, path = "/api/clusters/{name}/pools/{pool}/unassign", operation_id = "pool_unassign",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "seconds"}))),
    params(("name" = String, Path), ("pool" = String, Path)),
    request_body = UnassignRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn unassign_pod(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(req): ApiJson<UnassignRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::pool_unassign(&state.engine, &name, &item, &req, &caller)
            .await?,
    ))
}
