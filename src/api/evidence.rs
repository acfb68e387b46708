//! Failure evidence: a node's, and a cluster's failed creation's — read only, in one request.

use axum::extract::State;
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName};
use crate::error::{ApiResult, Problem};
use crate::service::evidence::{self, ClusterEvidence, NodeEvidence};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(node_evidence))
        .routes(routes!(cluster_evidence))
}

/// Everything known about why a node fares as it does, in one read: HyperPod's status and
/// message for it, its health and fault labels, taints, conditions and fault details, the events
/// of it and its pods, HyperPod's events for it, and the newest lines of its lifecycle-script,
/// health-agent and deep-health-check log streams; then findings in plain words and the next
/// step (investigate → reboot → replace). A part that cannot be read is listed under `unread`.
#[utoipa::path(get, path = "/api/clusters/{name}/nodes/{id}/evidence", operation_id = "node_evidence",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("id" = String, Path, pattern = "^i-[0-9a-fA-F]{8,17}$", description = "The instance id (i-…)")),
    responses((status = 200, body = NodeEvidence), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn node_evidence(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<NodeEvidence>> {
    Ok(Json(
        evidence::node_evidence(&state.engine, &name, &item).await?,
    ))
}

/// Everything known about why a cluster's creation (or any stage of it) failed, in one read:
/// each failed stage's error, HyperPod's status, failure message and events, and the newest
/// lines of the lifecycle-script streams (the ones the failure names first); then findings in
/// plain words and the next step.
#[utoipa::path(get, path = "/api/clusters/{name}/evidence", operation_id = "cluster_evidence",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = ClusterEvidence), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn cluster_evidence(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<ClusterEvidence>> {
    Ok(Json(
        evidence::cluster_evidence(&state.engine, &name).await?,
    ))
}
