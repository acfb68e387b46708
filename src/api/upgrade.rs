//! A cluster's upgrade: one operation for the Kubernetes version, the add-ons after it and the
//! HyperPod software of its groups.

use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::cluster::upgrade::UpgradeRequest;
use crate::service::start::Caller;
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(upgrade_cluster))
}

/// Upgrade a cluster, in EKS's order: the control plane to `kubernetesVersion` (the next minor:
/// see cluster_versions), then each managed add-on to the newest EKS offers for it (one whose
/// update fails goes back to its version and configuration), then, with `software`, HyperPod's
/// software on the groups (`canaryGroup` alone first). Preview it first (`dryRun`): the plan
/// names each phase, each add-on's versions and the running work on the nodes being patched.
/// Nodes restart: confirm with the user.
#[utoipa::path(post, path = "/api/clusters/{name}/upgrade", operation_id = "cluster_upgrade",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "10-20 minutes per phase on AWS; the software rolls node by node"}))),
    params(("name" = String, Path)),
    request_body = UpgradeRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn upgrade_cluster(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<UpgradeRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::upgrade(&state.engine, &name, &req, &caller).await?,
    ))
}
