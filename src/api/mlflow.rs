//! Managed MLflow on SageMaker AI: set it up, see it (with a short-lived link to its UI), and
//! read runs and metric histories from its tracking server.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::Started;
use super::ApiJson;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service::mlflow::{self as m, MetricsView, MlflowSetupRequest, MlflowView, RunView};
use crate::service::start::Caller;
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_mlflow, setup_mlflow))
        .routes(routes!(list_runs))
        .routes(routes!(run_metrics))
}

/// Set up the account's managed MLflow (a SageMaker AI MLflow App) from a cluster: its artifact
/// store is mlflow/ of that cluster's bucket (a role limited to it), and the cluster's training
/// pods get an identity that may call only this MLflow. Found, not duplicated, when it exists.
/// Training jobs submitted afterwards report to it.
#[utoipa::path(post, path = "/api/mlflow", operation_id = "mlflow_setup",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "3–5 minutes"}))),
    request_body = MlflowSetupRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn setup_mlflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<MlflowSetupRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::mlflow::start::mlflow_setup(&state.engine, &req, &caller).await?,
    ))
}

/// The account's managed MLflow: ARN (the tracking URI jobs report to), state, artifact store,
/// and once created a single-use link to its UI valid for 5 minutes. 404 until mlflow_setup.
#[utoipa::path(get, path = "/api/mlflow", operation_id = "mlflow_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    responses((status = 200, body = MlflowView), (status = 404, body = Problem)))]
async fn get_mlflow(State(state): State<AppState>) -> ApiResult<Json<MlflowView>> {
    Ok(Json(m::view(&state.engine).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct RunsQuery {
    /// The experiment: a training job reports to the one named after the job.
    #[param(pattern = r"^[\x20-\x7e]{1,200}$")]
    experiment: String,
}

/// Runs of an MLflow experiment (a training job's is named after the job), newest first, with
/// each metric's latest value (throughput, loss). Empty until the job logs its first metric.
#[utoipa::path(get, path = "/api/mlflow/runs", operation_id = "mlflow_run_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(RunsQuery),
    responses((status = 200, body = [RunView]), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn list_runs(
    State(state): State<AppState>,
    q: Result<Query<RunsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<RunView>>> {
    let Query(q) = q.map_err(|e| ApiError::validation("experiment", e.body_text()))?;
    Ok(Json(m::runs(&state.engine, &q.experiment).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct MetricsQuery {
    /// Metric names, comma-separated (default `throughput,loss`).
    #[param(pattern = r"^[A-Za-z0-9_./-]{1,250}(,[A-Za-z0-9_./-]{1,250}){0,9}$")]
    keys: Option<String>,
}

/// The history of a run's metrics (step, value, time), for charts: default throughput and loss.
#[utoipa::path(get, path = "/api/mlflow/runs/{run}/metrics", operation_id = "mlflow_run_metrics",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("run" = String, Path), MetricsQuery),
    responses((status = 200, body = MetricsView), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn run_metrics(
    State(state): State<AppState>,
    Path(run): Path<String>,
    q: Result<Query<MetricsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<MetricsView>> {
    let Query(q) = q.map_err(|e| ApiError::validation("keys", e.body_text()))?;
    Ok(Json(
        m::metrics(&state.engine, &run, q.keys.as_deref()).await?,
    ))
}
