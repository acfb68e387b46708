//! What a cluster's Kubernetes side says now: the dependencies report, and live node/GPU state
//! and the cluster's status from the watch-backed cache.

use serde::Serialize;
use utoipa::ToSchema;

use super::records::kube_target;
use crate::cloud::ClusterState;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::shared::kind::OpKind;
use crate::service::steps::deps::{self, ComponentState, ComponentStatus};
use crate::store::{OpState, PhaseState};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReport {
    pub cluster: String,
    /// In install order.
    pub components: Vec<ComponentStatus>,
    /// The latest `dependencies` operation, if any.
    pub operation_id: Option<String>,
    /// Every component is ready.
    pub ready: bool,
}

/// Each component's live state, with what the latest `dependencies` operation says layered on
/// top (a component whose phase failed is `failed` with the phase's reason until it is ready).
pub async fn dependencies(engine: &Engine, name: &str) -> ApiResult<DependencyReport> {
    let target = kube_target(engine, name).await?;
    let latest = engine
        .store()
        .list_operations(Some(name), None, 50)
        .await?
        .into_iter()
        .find(|o| o.kind == OpKind::Dependencies);
    let mut components = Vec::new();
    for c in deps::COMPONENTS {
        let mut status = deps::component_status(engine.cloud(), name, &target, c)
            .await
            .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        let phase = latest
            .as_ref()
            .and_then(|o| o.phases.iter().find(|p| p.name == c.name));
        if let (Some(op), Some(phase)) = (&latest, phase) {
            let running = matches!(op.state, OpState::Running | OpState::Pending);
            if status.state != ComponentState::Ready {
                if phase.state == PhaseState::Failed {
                    status.state = ComponentState::Failed;
                    if let Some(msg) = phase.error.as_ref().and_then(|e| e["message"].as_str()) {
                        status.reason = msg.to_string();
                    }
                } else if running && status.state == ComponentState::Pending {
                    status.state = ComponentState::Installing;
                    status.reason = phase
                        .progress
                        .clone()
                        .unwrap_or_else(|| "queued in the running reconciliation".into());
                }
            }
        }
        components.push(status);
    }
    Ok(DependencyReport {
        cluster: name.to_string(),
        ready: components.iter().all(|c| c.state == ComponentState::Ready),
        components,
        operation_id: latest.map(|o| o.id),
    })
}

/// Live node and GPU state, served from the watch-backed cache.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub cluster: String,
    pub ready_nodes: usize,
    pub gpus_total: u32,
    pub gpus_free: u32,
    #[serde(flatten)]
    pub state: ClusterState,
}

/// The watch-backed view as it is now (the same `Arc` until it changes).
pub async fn live_state(engine: &Engine, name: &str) -> ApiResult<std::sync::Arc<ClusterState>> {
    let target = kube_target(engine, name).await?;
    engine
        .cloud()
        .kube
        .cluster_state(&target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))
}

/// The status of a cluster from its view.
pub fn status_of(name: &str, state: &ClusterState) -> ClusterStatus {
    ClusterStatus {
        cluster: name.to_string(),
        ready_nodes: state.nodes.iter().filter(|n| n.ready).count(),
        gpus_total: state.nodes.iter().map(|n| n.gpus.total).sum(),
        gpus_free: state.nodes.iter().map(|n| n.gpus.free).sum(),
        state: state.clone(),
    }
}
