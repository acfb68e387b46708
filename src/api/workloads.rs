//! REST handlers for workloads: model downloads, jobs, self-managed inference deployments, the
//! HyperPod software update and the contents of a storage claim.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;

use super::routes::{check_name, stage};
use super::{Actor, ApiJson, IdempotencyKey};
use crate::error::{ApiResult, Problem};
use crate::service::workloads::{self as w};
use crate::service::Accepted;
use crate::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/clusters/{name}/models",
            get(list_models).post(download_model),
        )
        .route("/api/clusters/{name}/jobs", get(list_jobs))
        .route(
            "/api/clusters/{name}/jobs/{job}",
            axum::routing::delete(delete_job),
        )
        .route(
            "/api/clusters/{name}/deployments",
            get(list_deployments).post(create_deployment),
        )
        .route(
            "/api/clusters/{name}/deployments/{deployment}",
            axum::routing::delete(delete_deployment),
        )
        .route(
            "/api/clusters/{name}/deployments/{deployment}/invoke",
            post(invoke_deployment),
        )
        .route(
            "/api/clusters/{name}/hyperpod/software-update",
            post(update_software),
        )
        .route(
            "/api/clusters/{name}/storage/{claim}/objects",
            get(list_objects),
        )
}

#[utoipa::path(post, path = "/api/clusters/{name}/models", params(("name" = String, Path)),
    request_body = w::ModelDownloadRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn download_model(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<w::ModelDownloadRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = w::model_params(&state.engine, &name, &req).await?;
    stage(&state, "model-download", name, params, actor, key).await
}

#[utoipa::path(get, path = "/api/clusters/{name}/models", params(("name" = String, Path)),
    responses((status = 200, body = [w::ModelView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn list_models(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<w::ModelView>>> {
    check_name(&name)?;
    Ok(Json(w::list_models(&state.engine, &name).await?))
}

#[utoipa::path(get, path = "/api/clusters/{name}/jobs", params(("name" = String, Path)),
    responses((status = 200, body = [w::JobView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn list_jobs(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<w::JobView>>> {
    check_name(&name)?;
    Ok(Json(w::list_jobs(&state.engine, &name).await?))
}

#[utoipa::path(delete, path = "/api/clusters/{name}/jobs/{job}", params(("name" = String, Path), ("job" = String, Path), w::JobKindQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn delete_job(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, job)): Path<(String, String)>,
    Query(q): Query<w::JobKindQuery>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = w::job_delete_params(&state.engine, &name, &job, q.kind.as_deref()).await?;
    stage(&state, "workload-delete", name, params, actor, key).await
}

#[utoipa::path(post, path = "/api/clusters/{name}/deployments", params(("name" = String, Path)),
    request_body = w::DeploymentRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn create_deployment(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<w::DeploymentRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = w::deployment_params(&state.engine, &name, &req).await?;
    stage(&state, "inference-deploy", name, params, actor, key).await
}

#[utoipa::path(get, path = "/api/clusters/{name}/deployments", params(("name" = String, Path)),
    responses((status = 200, body = [w::DeploymentView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn list_deployments(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<w::DeploymentView>>> {
    check_name(&name)?;
    Ok(Json(w::list_deployments(&state.engine, &name).await?))
}

#[utoipa::path(delete, path = "/api/clusters/{name}/deployments/{deployment}", params(("name" = String, Path), ("deployment" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn delete_deployment(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, deployment)): Path<(String, String)>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = w::deployment_delete_params(&state.engine, &name, &deployment).await?;
    stage(&state, "workload-delete", name, params, actor, key).await
}

#[utoipa::path(post, path = "/api/clusters/{name}/deployments/{deployment}/invoke", params(("name" = String, Path), ("deployment" = String, Path)),
    request_body = w::InvokeRequest,
    responses((status = 200, description = "the model server's OpenAI-style chat completion", body = Object), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 502, body = Problem)))]
pub async fn invoke_deployment(
    State(state): State<AppState>,
    Path((name, deployment)): Path<(String, String)>,
    ApiJson(req): ApiJson<w::InvokeRequest>,
) -> ApiResult<Json<Value>> {
    check_name(&name)?;
    Ok(Json(
        w::invoke(&state.engine, &name, &deployment, &req).await?,
    ))
}

#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod/software-update", params(("name" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn update_software(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    check_name(&name)?;
    // The cluster must have a HyperPod cluster: the same lookup the group routes use.
    crate::service::list_groups(&state.engine, &name).await?;
    stage(
        &state,
        "hyperpod-software-update",
        name,
        serde_json::json!({}),
        actor,
        key,
    )
    .await
}

#[utoipa::path(get, path = "/api/clusters/{name}/storage/{claim}/objects", params(("name" = String, Path), ("claim" = String, Path), w::ObjectsQuery),
    responses((status = 200, body = w::ObjectList), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn list_objects(
    State(state): State<AppState>,
    Path((name, claim)): Path<(String, String)>,
    Query(q): Query<w::ObjectsQuery>,
) -> ApiResult<Json<w::ObjectList>> {
    check_name(&name)?;
    Ok(Json(
        w::list_objects(&state.engine, &name, &claim, q.prefix.as_deref()).await?,
    ))
}
