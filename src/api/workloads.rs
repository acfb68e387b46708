//! Workloads: model downloads, jobs, self-managed inference deployments, the HyperPod software
//! update and the contents of a storage claim.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::start::{self, Caller};
use crate::service::workloads::{self as w};
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_models, download_model))
        .routes(routes!(list_jobs))
        .routes(routes!(delete_job))
        .routes(routes!(list_deployments, create_deployment))
        .routes(routes!(delete_deployment))
        .routes(routes!(invoke_deployment))
        .routes(routes!(update_software))
        .routes(routes!(list_objects))
}

#[utoipa::path(post, path = "/api/clusters/{name}/models", params(("name" = String, Path)),
    request_body = w::ModelDownloadRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn download_model(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<w::ModelDownloadRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::model_download(&state.engine, &name, &req, &caller).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/models", params(("name" = String, Path)),
    responses((status = 200, body = [w::ModelView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_models(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::ModelView>>> {
    Ok(Json(w::list_models(&state.engine, &name).await?))
}

#[utoipa::path(get, path = "/api/clusters/{name}/jobs", params(("name" = String, Path)),
    responses((status = 200, body = [w::JobView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_jobs(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::JobView>>> {
    Ok(Json(w::list_jobs(&state.engine, &name).await?))
}

#[utoipa::path(delete, path = "/api/clusters/{name}/jobs/{job}", params(("name" = String, Path), ("job" = String, Path), w::JobKindQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    Path(path): Path<(String, String)>,
    Query(q): Query<w::JobKindQuery>,
) -> ApiResult<Started> {
    let job = path.1;
    let kind = q.kind.as_deref();
    Ok(Started(
        start::job_delete(&state.engine, &name, &job, kind, &caller).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/deployments", params(("name" = String, Path)),
    request_body = w::DeploymentRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_deployment(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<w::DeploymentRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        start::deployment(&state.engine, &name, &req, &caller).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/deployments", params(("name" = String, Path)),
    responses((status = 200, body = [w::DeploymentView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_deployments(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::DeploymentView>>> {
    Ok(Json(w::list_deployments(&state.engine, &name).await?))
}

#[utoipa::path(delete, path = "/api/clusters/{name}/deployments/{deployment}", params(("name" = String, Path), ("deployment" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_deployment(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    Path(path): Path<(String, String)>,
) -> ApiResult<Started> {
    let deployment = path.1;
    Ok(Started(
        start::deployment_delete(&state.engine, &name, &deployment, &caller).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/deployments/{deployment}/invoke", params(("name" = String, Path), ("deployment" = String, Path)),
    request_body = w::InvokeRequest,
    responses((status = 200, description = "the model server's OpenAI-style chat completion", body = Object), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 502, body = Problem)))]
async fn invoke_deployment(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    Path(path): Path<(String, String)>,
    ApiJson(req): ApiJson<w::InvokeRequest>,
) -> ApiResult<Json<Value>> {
    let deployment = path.1;
    Ok(Json(
        w::invoke(&state.engine, &name, &deployment, &req).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod/software-update", params(("name" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn update_software(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
) -> ApiResult<Started> {
    Ok(Started(
        start::software_update(&state.engine, &name, &caller).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/storage/{claim}/objects", params(("name" = String, Path), ("claim" = String, Path), w::ObjectsQuery),
    responses((status = 200, body = w::ObjectList), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn list_objects(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    Path(path): Path<(String, String)>,
    Query(q): Query<w::ObjectsQuery>,
) -> ApiResult<Json<w::ObjectList>> {
    let claim = path.1;
    Ok(Json(
        w::list_objects(&state.engine, &name, &claim, q.prefix.as_deref()).await?,
    ))
}
