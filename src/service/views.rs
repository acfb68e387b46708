//! What is read: cluster views, the active cluster, operations, instance types; and retry and
//! cancel of operations.

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::kind::OpKind;
use crate::service::records::{cluster_not_found, live_cluster};
use crate::service::submit::load;
use crate::service::{validate, ACTIVE_CLUSTER};
use crate::store::{ClusterRecord, Operation};

/// A cluster with the latest operation of every stage.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    #[serde(flatten)]
    pub record: ClusterRecord,
    /// Stage kind → the newest operation of that kind.
    #[schema(value_type = Object)]
    pub stages: Value,
    /// Whether this is the active cluster.
    pub active: bool,
}

pub async fn cluster_view(engine: &Engine, name: &str) -> ApiResult<ClusterView> {
    let store = engine.store();
    let record = live_cluster(engine, name).await?;
    let mut stages = serde_json::Map::new();
    for op in store.latest_per_kind(name).await? {
        stages.insert(
            op.kind.clone(),
            serde_json::to_value(&op).map_err(anyhow::Error::from)?,
        );
    }
    let active = store.setting(ACTIVE_CLUSTER).await?.as_deref() == Some(name);
    Ok(ClusterView {
        record,
        stages: Value::Object(stages),
        active,
    })
}

/// Every cluster that is not deleted, as its view.
pub async fn list_clusters(engine: &Engine) -> ApiResult<Vec<ClusterView>> {
    let mut views = Vec::new();
    for c in engine.store().list_clusters().await? {
        views.push(cluster_view(engine, &c.name).await?);
    }
    Ok(views)
}

/// The cluster used when a request names none.
pub async fn active_cluster(engine: &Engine) -> ApiResult<Option<String>> {
    Ok(engine.store().setting(ACTIVE_CLUSTER).await?)
}

/// Chooses the active cluster (it must exist).
pub async fn set_active_cluster(engine: &Engine, name: &str) -> ApiResult<String> {
    validate::cluster_name("name", name)?;
    let store = engine.store();
    store
        .get_cluster(name)
        .await?
        .filter(|c| c.status != crate::store::Lifecycle::Deleted)
        .ok_or_else(|| cluster_not_found(name))?;
    store.set_setting(ACTIVE_CLUSTER, Some(name)).await?;
    Ok(name.to_string())
}

/// Operations, newest first, optionally of one cluster and in one state.
pub async fn list_operations(
    engine: &Engine,
    cluster: Option<&str>,
    state: Option<&str>,
    limit: Option<i64>,
) -> ApiResult<Vec<Operation>> {
    let state = state
        .map(|s| {
            s.parse::<crate::store::OpState>().map_err(|_| {
                ApiError::validation_hint(
                    "state",
                    format!("`{s}` is not an operation state"),
                    json!(["pending", "running", "succeeded", "failed", "cancelled"]),
                )
            })
        })
        .transpose()?;
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::validation_hint(
            "limit",
            format!("{limit} is out of range"),
            json!("1 to 1000"),
        ));
    }
    Ok(engine
        .store()
        .list_operations(cluster, state, limit)
        .await?)
}

/// The accelerated SageMaker instance types offered in a zone (validated), sorted.
pub async fn instance_types(engine: &Engine, zone: &str) -> ApiResult<(String, Vec<String>)> {
    let cloud = engine.cloud();
    let zones = cloud.network.describe_availability_zones().await?;
    let zone = validate::zone("zone", zone, &zones)?;
    let mut types: Vec<String> = cloud
        .network
        .describe_instance_type_offerings(&zone.name)
        .await?
        .into_iter()
        .filter(|t| ["p", "g", "trn", "inf"].iter().any(|f| t.starts_with(f)))
        .map(|t| format!("ml.{t}"))
        .collect();
    types.sort();
    Ok((zone.name, types))
}

/// Retries a failed or cancelled operation (for a pipeline: its failed stage first).
pub async fn retry(engine: &Engine, id: &str) -> ApiResult<Operation> {
    let store = engine.store();
    let _guard = store.write_lock.lock().await;
    let op = load(store, id).await?;
    if !matches!(
        op.state,
        crate::store::OpState::Failed | crate::store::OpState::Cancelled
    ) {
        return Err(ApiError::Conflict {
            slug: "not-retryable",
            detail: format!(
                "operation {id} is {}; only failed or cancelled operations can be retried",
                op.state.as_str()
            ),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    if op.kind == OpKind::Pipeline {
        for child in store.children(id).await? {
            if matches!(
                child.state,
                crate::store::OpState::Failed | crate::store::OpState::Cancelled
            ) {
                engine.reset_for_retry(&child).await?;
                engine.spawn(child.id.clone());
            }
        }
    }
    engine.reset_for_retry(&op).await?;
    engine.spawn(id.to_string());
    load(store, id).await
}

/// Asks a running operation (and a pipeline's running stage) to stop at its next safe point:
/// never in the middle of a mutating call.
pub async fn cancel(engine: &Engine, id: &str) -> ApiResult<Operation> {
    let store = engine.store();
    let op = load(store, id).await?;
    if op.state.is_terminal() {
        return Err(ApiError::Conflict {
            slug: "already-finished",
            detail: format!("operation {id} already {}", op.state.as_str()),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    store.set_cancel_requested(id, true).await?;
    for child in store.children(id).await? {
        if !child.state.is_terminal() {
            store.set_cancel_requested(&child.id, true).await?;
        }
    }
    engine.changed();
    load(store, id).await
}
