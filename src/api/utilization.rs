//! `GET /api/clusters/{name}/utilization`: how busy the cluster's GPUs are, per node, team or
//! pod, from the observability add-on's DCGM series.

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::ClusterName;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service::utilization::{self, UtilBy, UtilQuery, Utilization};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster_utilization))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct UtilizationQuery {
    /// Average per `node` (default), `team` or `pod`.
    #[param(inline)]
    by: Option<UtilBy>,
    /// The window in minutes, 5–1440 (default 60).
    #[param(minimum = 5, maximum = 1440)]
    minutes: Option<u32>,
    /// Only the pods named `<workload>-…` (a training job's ranks, a deployment's replicas);
    /// with `by=pod`, the ranks that lag the others are flagged as stragglers.
    #[param(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    workload: Option<String>,
}

/// GPU utilization (`DCGM_FI_DEV_GPU_UTIL`, percent) of the cluster's GPU nodes over the last
/// minutes, averaged per node, team or pod at each moment, with each line's mean; with
/// `workload` and `by=pod`, the pods whose mean is under 80 % of their job's median are
/// `stragglers`. Read from the Amazon Managed Service for Prometheus workspace the HyperPod
/// observability add-on writes to (the server's `INSTANTSTART_PROMETHEUS_URL`); without one,
/// `available` is false and `howToEnable` says what to do. With the server's Grafana workspace
/// (`INSTANTSTART_GRAFANA_WORKSPACE`), `dashboards` links to AWS's dashboards for the cluster.
#[utoipa::path(get, path = "/api/clusters/{name}/utilization", operation_id = "cluster_utilization",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), UtilizationQuery),
    responses((status = 200, body = Utilization), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn cluster_utilization(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    query: Result<Query<UtilizationQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Utilization>> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    Ok(Json(
        utilization::utilization(
            &state.engine,
            utilization::Sources {
                prometheus_url: state.prometheus_url.as_deref(),
                grafana_workspace: state.grafana_workspace.as_deref(),
            },
            &UtilQuery {
                cluster: name,
                by: q.by.unwrap_or(UtilBy::Node),
                minutes: q.minutes.unwrap_or(60),
                workload: q.workload,
            },
        )
        .await?,
    ))
}
