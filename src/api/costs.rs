//! `GET /api/costs`: what a cluster cost, split by group, team, job or endpoint, as JSON or CSV.

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::error::{ApiError, ApiResult, Problem};
use crate::service::costs::{self, CostBy, CostQuery, CostReport};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster_costs))
}

/// The answer's format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
enum CostFormat {
    #[default]
    Json,
    Csv,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct CostsQuery {
    /// The cluster (a deleted one's history can still be read).
    #[param(pattern = "^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$", max_length = 24)]
    cluster: String,
    /// What to split the cost by: `group`, `team`, `job` or `endpoint` (default `group`).
    #[param(inline)]
    by: Option<CostBy>,
    /// The first UTC day counted, `YYYY-MM-DD` (default: a week ago, today included; at most
    /// 400 days back).
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    since: Option<String>,
    /// `json` (default) or `csv` (`day,key,kind,usd,gpu_hours`, one line per row).
    #[param(inline)]
    format: Option<CostFormat>,
}

/// What a cluster cost and whom, per UTC day: instance-hours from its HyperPod nodes' lifetimes
/// (kept as nodes come and go, so history survives restarts and removed nodes) × the hourly
/// price of their type, split by the GPUs each holder requested — a group's, team's, job's or
/// endpoint's share — plus idle GPUs (allocatable, not requested), time not observed, and
/// nodes without GPUs. Prices come from the account's AWS Price List for the cluster's region
/// (`source: price-list`); when it cannot be read, from a dated table marked `estimate`, with
/// the reason in `priceListUnavailable`.
#[utoipa::path(get, path = "/api/costs", operation_id = "cluster_costs",
    params(CostsQuery),
    responses((status = 200, description = "The report, as JSON or (`format=csv`) CSV",
               content((CostReport = "application/json"), (String = "text/csv"))),
              (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn cluster_costs(
    State(state): State<AppState>,
    query: Result<Query<CostsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    crate::service::cluster::validate::cluster_name("cluster", &q.cluster)?;
    crate::service::people::access::require_read_whole(
        &state.engine,
        &q.cluster,
        "read the cluster's costs",
    )
    .await?;
    let report = costs::costs(
        &state.engine,
        &state.price_book,
        &CostQuery {
            cluster: q.cluster.clone(),
            by: q.by.unwrap_or(CostBy::Group),
            since: q.since,
        },
    )
    .await?;
    Ok(match q.format.unwrap_or_default() {
        CostFormat::Json => axum::Json(report).into_response(),
        CostFormat::Csv => (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!(
                        "attachment; filename=\"{}-costs-{}.csv\"",
                        report.cluster, report.since
                    ),
                ),
            ],
            costs::csv(&report),
        )
            .into_response(),
    })
}
