//! The OpenAPI document, derived from the same declarations as the router: each handler's
//! `#[utoipa::path]` is registered once with `routes!` in its resource's `router()`, which
//! gives both the axum route and the document's entry. The MCP tools are checked against it.

use std::sync::OnceLock;

use axum::Json;
use utoipa::OpenApi;

use crate::error::Problem;
use crate::service::{
    self, Accepted, ActiveClusterRequest, ClusterView, CreateClusterRequest, CreateHyperPodRequest,
    EmptyRequest, PipelineRequest,
};
use crate::store::{ClusterRecord, OpState, Operation, Phase, PhaseState};

/// What no route declares by itself: the title, and schemas named for clients.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "InstantStart",
        description = "Control plane for SageMaker HyperPod clusters on EKS. Errors are application/problem+json."
    ),
    components(schemas(
        Problem,
        Accepted,
        Operation,
        Phase,
        OpState,
        PhaseState,
        ClusterRecord,
        ClusterView,
        CreateClusterRequest,
        CreateHyperPodRequest,
        PipelineRequest,
        EmptyRequest,
        ActiveClusterRequest,
        crate::cloud::Zone,
        super::aws::Health,
        super::clusters::ActiveCluster,
        super::aws::InstanceTypes,
        crate::cloud::sandbox::CallCounts,
        service::Preflight,
        service::QuotaCheck,
        crate::cloud::TrainingPlan,
        crate::cloud::ClusterNode,
        service::NodeList,
        service::GroupView,
        service::UpdateGroupRequest,
        super::groups::Unchanged,
    ))
)]
pub struct ApiDoc;

/// The document, built once from the routers.
static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();

pub fn document() -> &'static utoipa::openapi::OpenApi {
    DOC.get_or_init(|| super::rest().split_for_parts().1)
}

/// Keeps the document the router was built with, so start-up builds it once.
pub(crate) fn keep(doc: utoipa::openapi::OpenApi) {
    let _ = DOC.set(doc);
}

pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(document().clone())
}
