//! Training: recipes, and training jobs submitted from them (HyperPodPyTorchJob or RayJob),
//! listed with their recovery budget, and deleted.

use axum::extract::State;
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::training::{self as t, Recipe, TrainingJobRequest, TrainingJobView};
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_recipes))
        .routes(routes!(list_training_jobs, submit_training_job))
        .routes(routes!(get_training_job, delete_training_job))
}

/// The training recipes: plain PyTorch script, LLaMA-Factory and MS-Swift (HyperPod training
/// operator) and VERL (KubeRay), each with its pinned image and the few inputs it asks for. Call
/// before training_job_submit and ask the user only for those inputs.
#[utoipa::path(get, path = "/api/recipes", operation_id = "recipe_list",
    responses((status = 200, body = [Recipe])))]
async fn list_recipes() -> Json<&'static [Recipe]> {
    Json(t::RECIPES)
}

/// Submit a training job from a recipe: instanceType (one of the cluster's groups), nodeCount,
/// and the recipe's paths under /s3 (model, dataset, script; output defaults to
/// /s3/outputs/<name>). Optional: recovery budget (jobMaxRetryCount, restarts before a full-job
/// restart, full-job restarts, evaluation period), hang detection from a log pattern, elastic
/// node range (not with Spot or managed tiered checkpointing). Followed until the job succeeds
/// or fails; restarts show as they happen.
#[utoipa::path(post, path = "/api/clusters/{name}/training-jobs", operation_id = "training_job_submit",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "minutes to days, by the training"}))),
    params(("name" = String, Path)),
    request_body = TrainingJobRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn submit_training_job(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<TrainingJobRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::training::start::training_job(
            &state.engine,
            &name,
            &req,
            &state.pod_packages,
            &caller,
        )
        .await?,
    ))
}

/// Training jobs in namespace default (HyperPodPyTorchJob and RayJob), newest first: state,
/// restarts against their limits, faulty pods and ranks, the recipe and /s3 paths. Jobs created
/// elsewhere are listed with origin external (read-only).
#[utoipa::path(get, path = "/api/clusters/{name}/training-jobs", operation_id = "training_job_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [TrainingJobView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_training_jobs(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<TrainingJobView>>> {
    Ok(Json(t::list_training_jobs(&state.engine, &name).await?))
}

/// One training job: state and the operator's conditions, restart count against
/// jobMaxRetryCount, full-job restarts, the faulty pods and ranks of the latest restart, and the
/// recipe and /s3 paths it was made from.
#[utoipa::path(get, path = "/api/clusters/{name}/training-jobs/{job}", operation_id = "training_job_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("job" = String, Path)),
    responses((status = 200, body = TrainingJobView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_training_job(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<TrainingJobView>> {
    Ok(Json(
        t::get_training_job(&state.engine, &name, &item).await?,
    ))
}

/// Stop and delete a training job made here, with its pods (what it wrote under /s3 stays).
/// Jobs created elsewhere are never deleted from here. Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/training-jobs/{job}", operation_id = "training_job_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("job" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_training_job(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::training::start::training_job_delete(&state.engine, &name, &item, &caller)
            .await?,
    ))
}
