//! What is read: cluster views, the active cluster, operations, instance types; and retry and
//! cancel of operations.

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::{cluster_not_found, live_cluster};
use crate::service::shared::kind::OpKind;
use crate::service::shared::preview::{self, Effect};
use crate::service::shared::submit::load;
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
    let active = active_cluster(engine).await?.as_deref() == Some(name);
    Ok(ClusterView {
        record,
        stages: Value::Object(stages),
        active,
    })
}

/// One stage of a cluster in a list: its newest operation, in brief.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageSummary {
    pub id: String,
    pub state: crate::store::OpState,
    pub updated_at: String,
}

/// Where a cluster's full record, status and operations are.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLinks {
    #[serde(rename = "self")]
    pub self_: String,
    pub status: String,
    pub operations: String,
}

/// A cluster in a list: the full record is one GET away (`links.self`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    pub name: String,
    pub region: String,
    pub status: crate::store::Lifecycle,
    pub created_at: String,
    /// Whether this is the active cluster.
    pub active: bool,
    /// Stage kind → its newest operation.
    #[schema(value_type = Object)]
    pub stages: std::collections::BTreeMap<String, StageSummary>,
    pub links: ClusterLinks,
}

/// A page size: 1–1000, 100 by default.
pub(crate) fn page_limit(limit: Option<i64>) -> ApiResult<i64> {
    let limit = limit.unwrap_or(100);
    if (1..=1000).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::validation_hint(
            "limit",
            format!("{limit} is out of range"),
            json!("1 to 1000"),
        ))
    }
}

/// The stored revision: lists read at the same revision are the same (see `store::pages`).
pub fn stored_revision(engine: &Engine) -> u64 {
    engine.store().revision()
}

/// Clusters that are not deleted, by name, `limit` at a time after `cursor` (the last name of the
/// previous page); the next page's cursor when there is one. Three queries whatever the count.
pub async fn list_clusters(
    engine: &Engine,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> ApiResult<(Vec<ClusterSummary>, Option<String>)> {
    let limit = page_limit(limit)?;
    if let Some(c) = cursor {
        validate::cluster_name("cursor", c)?;
    }
    let store = engine.store();
    let mut records = store.cluster_page(cursor, limit + 1).await?;
    let more = records.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    records.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let names: Vec<String> = records.iter().map(|r| r.name.clone()).collect();
    let mut stages: std::collections::HashMap<
        String,
        std::collections::BTreeMap<String, StageSummary>,
    > = std::collections::HashMap::new();
    for s in store.latest_stages(&names).await? {
        stages.entry(s.cluster).or_default().insert(
            s.kind,
            StageSummary {
                id: s.id,
                state: s.state,
                updated_at: s.updated_at,
            },
        );
    }
    let active = store.setting(ACTIVE_CLUSTER).await?;
    let next = more.then(|| names.last().cloned()).flatten();
    let list = records
        .into_iter()
        .map(|r| ClusterSummary {
            active: active.as_deref() == Some(r.name.as_str()),
            stages: stages.remove(&r.name).unwrap_or_default(),
            links: ClusterLinks {
                self_: format!("/api/clusters/{}", r.name),
                status: format!("/api/clusters/{}/status", r.name),
                operations: format!("/api/operations?cluster={}", r.name),
            },
            name: r.name,
            region: r.region,
            status: r.status,
            created_at: r.created_at,
        })
        .collect();
    Ok((list, next))
}

/// The cluster used when a request names none: the one chosen (the last one created, unless
/// another was chosen since), else the only one there is — unless the choice was cleared.
pub async fn active_cluster(engine: &Engine) -> ApiResult<Option<String>> {
    let store = engine.store();
    match store.setting(ACTIVE_CLUSTER).await? {
        Some(name) if name == NO_ACTIVE_CLUSTER => return Ok(None),
        Some(name) => return Ok(Some(name)),
        None => {}
    }
    let mut live = store
        .list_clusters()
        .await?
        .into_iter()
        .filter(|c| c.status != crate::store::Lifecycle::Deleted);
    Ok(match (live.next(), live.next()) {
        (Some(only), None) => Some(only.name),
        _ => None,
    })
}

/// The setting's value once the user cleared the choice: no cluster is active, not even the
/// only one, until one is chosen or created. (No cluster name is empty.)
const NO_ACTIVE_CLUSTER: &str = "";

/// Clears the choice: no cluster is active until one is chosen or created.
pub async fn clear_active_cluster(engine: &Engine) -> ApiResult<()> {
    preview::stop(Effect::Change, "the active cluster: none")?;
    engine
        .store()
        .set_setting(ACTIVE_CLUSTER, Some(NO_ACTIVE_CLUSTER))
        .await?;
    Ok(())
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
    preview::stop(Effect::Change, format!("the active cluster: `{name}`"))?;
    store.set_setting(ACTIVE_CLUSTER, Some(name)).await?;
    Ok(name.to_string())
}

/// Operations, newest first, optionally of one cluster and in one state, `limit` at a time
/// older than `cursor` (the last id of the previous page); the next cursor when there is more.
pub async fn list_operations(
    engine: &Engine,
    cluster: Option<&str>,
    state: Option<&str>,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> ApiResult<(Vec<Operation>, Option<String>)> {
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
    let limit = page_limit(limit)?;
    if let Some(c) = cursor {
        validate::require(
            (1..=64).contains(&c.len()) && c.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "cursor",
            "not a cursor of this list".into(),
            json!("the value of the previous page's next link"),
        )?;
    }
    let mut ops = engine
        .store()
        .operation_page(cluster, state, cursor, limit + 1)
        .await?;
    let more = ops.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    ops.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next = more.then(|| ops.last().map(|o| o.id.clone())).flatten();
    Ok((ops, next))
}

/// The accelerated SageMaker instance types offered in a zone (validated), sorted.
pub async fn instance_types(engine: &Engine, zone: &str) -> ApiResult<(String, Vec<String>)> {
    let cloud = engine.cloud();
    let zones =
        crate::service::shared::reads::retrying(|| cloud.network.describe_availability_zones())
            .await?;
    let zone = validate::zone("zone", zone, &zones)?;
    let mut types: Vec<String> = crate::service::shared::reads::retrying(|| {
        cloud.network.describe_instance_type_offerings(&zone.name)
    })
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
    // Under its cluster's lock, so no submission on that cluster decides on a stale state.
    let cluster = load(store, id).await?.cluster;
    let _guard = store.cluster_locks.lock(&cluster).await;
    let op = load(store, id).await?;
    if !matches!(
        op.state,
        crate::store::OpState::Failed | crate::store::OpState::Cancelled
    ) {
        return Err(ApiError::Conflict {
            slug: ProblemType::NotRetryable,
            detail: format!(
                "operation {id} is {}; only failed or cancelled operations can be retried",
                op.state.as_str()
            ),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    let again: Vec<&str> = op
        .phases
        .iter()
        .filter(|p| p.state != crate::store::PhaseState::Succeeded)
        .map(|p| p.name.as_str())
        .collect();
    preview::stop(
        Effect::Change,
        format!(
            "operation {id} ({}): run its phases {} again",
            op.kind,
            again.join(", ")
        ),
    )?;
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
            slug: ProblemType::AlreadyFinished,
            detail: format!("operation {id} already {}", op.state.as_str()),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    preview::stop(
        Effect::Change,
        format!("operation {id} ({}): stop at its next safe point", op.kind),
    )?;
    store.set_cancel_requested(id, true).await?;
    for child in store.children(id).await? {
        if !child.state.is_terminal() {
            store.set_cancel_requested(&child.id, true).await?;
            engine.cancel_asked(&child.id);
        }
    }
    engine.cancel_asked(id);
    load(store, id).await
}
