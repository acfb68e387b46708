//! The cluster record as the domain reads it: one that exists (404 otherwise, with the names
//! that do), and what its HyperPod stage recorded.

use serde_json::json;

use crate::cloud::KubeTarget;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::shared::resources::ClusterResources;

pub fn cluster_not_found(name: &str) -> ApiError {
    ApiError::NotFound {
        what: format!("cluster `{name}`"),
        hint: Some(Box::new(json!("GET /api/clusters lists the clusters"))),
    }
}

/// The name of the cluster's HyperPod cluster, recorded or (before one exists) the one it
/// will be given.
pub async fn hyperpod_name_of(engine: &Engine, name: &str) -> ApiResult<String> {
    let record = live_cluster(engine, name).await?;
    Ok(ClusterResources::of(&record.resources).hyperpod_name_of(name))
}

/// The cluster's record, unless it does not exist or was deleted (404).
pub async fn live_cluster(engine: &Engine, name: &str) -> ApiResult<crate::store::ClusterRecord> {
    let record = live_shared(engine, name).await?;
    Ok(crate::store::ClusterRecord::clone(&record))
}

/// [`live_cluster`] as memoized, without a copy: what a hot path reads.
async fn live_shared(
    engine: &Engine,
    name: &str,
) -> ApiResult<std::sync::Arc<crate::store::ClusterRecord>> {
    engine
        .store()
        .cluster_shared(name)
        .await?
        .filter(|c| c.status != crate::store::Lifecycle::Deleted)
        .ok_or_else(|| cluster_not_found(name))
}

/// Where the cluster's API server is, from what the `cluster` stage recorded.
pub async fn kube_target(engine: &Engine, name: &str) -> ApiResult<KubeTarget> {
    // Every status poll passes here: the memoized record is read, not copied.
    let record = live_shared(engine, name).await?;
    target_of(&record).ok_or_else(|| ApiError::Conflict {
        slug: ProblemType::StageNotReady,
        detail: format!("`{name}` has no EKS cluster yet: run the cluster stage first"),
        field: None,
        operation_id: None,
    })
}

/// The record's API server, once its EKS stage has recorded one.
pub fn target_of(record: &crate::store::ClusterRecord) -> Option<KubeTarget> {
    let r = ClusterResources::of(&record.resources);
    Some(KubeTarget {
        cluster: record.name.clone(),
        endpoint: r.eks_endpoint?,
        certificate_authority: r.eks_certificate_authority?,
    })
}

pub async fn hyperpod_of(engine: &Engine, name: &str) -> ApiResult<String> {
    let record = live_cluster(engine, name).await?;
    ClusterResources::of(&record.resources)
        .hyperpod_cluster_name
        .ok_or_else(|| ApiError::Conflict {
            slug: ProblemType::StageNotReady,
            detail: format!("`{name}` has no HyperPod cluster yet"),
            field: None,
            operation_id: None,
        })
}

/// Starts the watch of every recorded cluster that has an API server, without waiting for any:
/// the server answers at once, each cache fills in the background (its `cache.synced` says when),
/// and what the watches notice reaches the event stream from the start. A cluster made or
/// imported later is watched from its first read (the cost sampler reads every cluster each
/// minute).
pub fn warm_caches(engine: Engine) {
    tokio::spawn(async move { warm_all(&engine).await });
}

async fn warm_all(engine: &Engine) {
    let clusters = match engine.store().list_clusters().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "warming the watch caches: listing clusters");
            return;
        }
    };
    // A cluster without an EKS stage yet has nothing to watch.
    for target in clusters.iter().filter_map(target_of) {
        if let Err(e) = engine.cloud().kube.warm(&target).await {
            tracing::warn!(cluster = %target.cluster, error = %e, "starting the watch cache");
        }
    }
}
