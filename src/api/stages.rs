//! The stages of a cluster run on their own or as one pipeline: dependencies, HyperPod, storage.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterName, Started};
use super::{ApiJson, OptionalJson};
use crate::error::{ApiResult, Problem};
use crate::service::start::{self, Caller};
use crate::service::{self, Accepted, CreateHyperPodRequest, PipelineRequest};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_pipeline))
        .routes(routes!(get_dependencies, create_dependencies))
        .routes(routes!(create_hyperpod))
        .routes(routes!(list_storage, create_storage))
        .routes(routes!(delete_storage))
}

#[utoipa::path(post, path = "/api/pipelines", request_body = PipelineRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries of the same request")),
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_pipeline(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PipelineRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::create_pipeline(&state.engine, &req, &caller).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/dependencies", params(("name" = String, Path)),
    responses((status = 200, body = service::incluster::DependencyReport), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_dependencies(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<service::incluster::DependencyReport>> {
    Ok(Json(
        service::incluster::dependencies(&state.engine, &name).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/dependencies", params(("name" = String, Path)),
    request_body(content = service::DependenciesRequest, description = "optional"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn create_dependencies(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    OptionalJson(req): OptionalJson<service::DependenciesRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::dependencies(&state.engine, &name, &req, &caller).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod", params(("name" = String, Path)),
    request_body = CreateHyperPodRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_hyperpod(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<CreateHyperPodRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::hyperpod(&state.engine, &name, &req, &caller).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/storage", params(("name" = String, Path)),
    request_body(content = service::incluster::StorageRequest, description = "optional: omitted, the shared bucket is mounted as `s3-claim`"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_storage(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    OptionalJson(req): OptionalJson<service::incluster::StorageRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::storage(&state.engine, &name, &req, &caller).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/storage", params(("name" = String, Path)),
    responses((status = 200, body = [crate::service::steps::storage::ClaimView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_storage(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<crate::service::steps::storage::ClaimView>>> {
    Ok(Json(
        service::incluster::list_storage(&state.engine, &name).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NamespaceQuery {
    /// Namespace of the claim (default `default`).
    namespace: Option<String>,
}

#[utoipa::path(delete, path = "/api/clusters/{name}/storage/{claim}", params(("name" = String, Path), ("claim" = String, Path), NamespaceQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_storage(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    Path(path): Path<(String, String)>,
    Query(q): Query<NamespaceQuery>,
) -> ApiResult<Started> {
    let claim = path.1;
    let namespace = q.namespace.as_deref();
    Ok(Started(
        start::storage_delete(&state.engine, &name, &claim, namespace, &caller).await?,
    ))
}
