//! Managed inference endpoints (the HyperPod inference operator's `InferenceEndpointConfig`):
//! deploy, list, read, change with the diff contract, delete, smoke-test.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::endpoints::{self as e, EndpointPatch, EndpointRequest, EndpointView};
use crate::service::start::Caller;
use crate::service::workloads::InvokeRequest;
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_endpoints, deploy_endpoint))
        .routes(routes!(get_endpoint, update_endpoint, delete_endpoint))
        .routes(routes!(invoke_endpoint))
}

/// Deploy a model as a managed endpoint on the HyperPod inference operator: model (a /s3 path
/// of the cluster's S3 claim, s3://bucket/prefix or fsx://fs-id/path), instanceType, and
/// optionally replicas, GPUs, worker image and args (vLLM with LMCache by default), KV cache
/// tiers (L1 on by default; L2 tieredstorage or redis), intelligent routing (prefixaware,
/// kvaware, session, roundrobin; fixed for the endpoint's life) and autoscaling. Needs the
/// inferenceOperator feature. Followed until the operator reports the deployment complete.
#[utoipa::path(post, path = "/api/clusters/{name}/endpoints", operation_id = "endpoint_deploy",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "5–20 minutes"}))),
    params(("name" = String, Path)),
    request_body = EndpointRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn deploy_endpoint(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<EndpointRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::endpoints::start::endpoint(&state.engine, &name, &req, &caller).await?,
    ))
}

/// The cluster's managed endpoints: state, replicas, model, routing, KV cache tiers,
/// autoscaling and the SageMaker endpoint registration.
#[utoipa::path(get, path = "/api/clusters/{name}/endpoints", operation_id = "endpoint_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [EndpointView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_endpoints(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<EndpointView>>> {
    Ok(Json(e::list_endpoints(&state.engine, &name).await?))
}

/// One managed endpoint, with the operator's conditions.
#[utoipa::path(get, path = "/api/clusters/{name}/endpoints/{endpoint}", operation_id = "endpoint_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("endpoint" = String, Path)),
    responses((status = 200, body = EndpointView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_endpoint(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<EndpointView>> {
    Ok(Json(e::get_endpoint(&state.engine, &name, &item).await?))
}

/// Change an endpoint: only replicas and autoscaling (send only what changes). Equal to what it
/// is: 200 and nothing is done. Routing cannot be added, changed or removed (409 says how).
#[utoipa::path(patch, path = "/api/clusters/{name}/endpoints/{endpoint}", operation_id = "endpoint_update",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "minutes"}))),
    params(("name" = String, Path), ("endpoint" = String, Path)),
    request_body = EndpointPatch,
    responses((status = 202, body = Accepted), (status = 200, description = "already as asked: nothing changed", body = EndpointView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_endpoint(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(patch): ApiJson<EndpointPatch>,
) -> ApiResult<Response> {
    match crate::service::endpoints::start::endpoint_update(
        &state.engine,
        &name,
        &item,
        &patch,
        &caller,
    )
    .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok((
            StatusCode::OK,
            Json(e::get_endpoint(&state.engine, &name, &item).await?),
        )
            .into_response()),
    }
}

/// Delete a managed endpoint (the operator removes its workers, services and SageMaker
/// registration; the model's files stay). Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/endpoints/{endpoint}", operation_id = "endpoint_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("endpoint" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_endpoint(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::endpoints::start::endpoint_delete(&state.engine, &name, &item, &caller)
            .await?,
    ))
}

/// Smoke-test a deployed endpoint: one chat completion for a prompt, through the Kubernetes API
/// server to the endpoint's own service (never an arbitrary URL).
#[utoipa::path(post, path = "/api/clusters/{name}/endpoints/{endpoint}/invoke", operation_id = "endpoint_invoke",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("endpoint" = String, Path)),
    request_body = InvokeRequest,
    responses((status = 200, description = "the model server's OpenAI-style chat completion", body = Object), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 502, body = Problem)))]
async fn invoke_endpoint(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
    ApiJson(req): ApiJson<InvokeRequest>,
) -> ApiResult<Json<Value>> {
    Ok(Json(
        e::invoke_endpoint(&state.engine, &name, &item, &req).await?,
    ))
}
