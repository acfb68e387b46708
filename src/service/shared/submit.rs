//! Submission: the idempotency key, the conflict rules and the one transaction that inserts an
//! operation (and its cluster record), all under the cluster's lock; the transaction is shared
//! with the submissions accepted at the same time on other clusters (group commit).

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::shared::kind::OpKind;
use crate::store::{is_unique_violation, NewOperation, NewSubmission, Operation, Store};

/// A request to start an operation.
pub struct Submission {
    pub kind: OpKind,
    pub cluster: String,
    pub params: Value,
    pub actor: String,
    /// The person who asked, when people sign in.
    pub principal: Option<String>,
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to refuse a reused key with another body.
    pub request_hash: Option<String>,
    pub parent_id: Option<String>,
    /// `Some((region, spec))` when the operation creates the cluster record.
    pub new_cluster: Option<(String, Value)>,
}

/// The answer to an accepted submission.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub operation_id: String,
    /// `GET` it (with `?wait=30` to long-poll) until `state` is terminal.
    pub status_url: String,
    /// The cluster the operation acts on.
    pub cluster: String,
    pub kind: String,
    /// False when an earlier submission with the same `Idempotency-Key` is returned.
    pub created: bool,
    /// What the caller should know before relying on the result (e.g. data lost by a replace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

pub fn request_hash(kind: &str, cluster: &str, body: &Value) -> String {
    let digest = Sha256::digest(format!("{kind}\n{cluster}\n{body}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts an operation: idempotency key first, then conflict rules, then one transaction that
/// inserts the operation (and the cluster record) — all under the cluster's lock, so two
/// concurrent submissions on one cluster can never both insert, and submissions on other
/// clusters do not wait for them.
pub async fn submit(engine: &Engine, sub: Submission) -> ApiResult<Accepted> {
    let store = engine.store();
    let phases = engine
        .phase_names(sub.kind.as_str(), &sub.params)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unknown kind {}", sub.kind)))?;
    // A preview is refused where the request would be, then noted instead of inserted (its key
    // is not looked up: a preview plans the request, it never answers an earlier one).
    if super::preview::active() {
        check_conflicts(store, &sub).await?;
        super::preview::plan_operation(engine, sub.kind.as_str(), &sub.cluster, &sub.params);
        return Ok(Accepted {
            operation_id: String::new(),
            status_url: String::new(),
            cluster: sub.cluster,
            kind: sub.kind.to_string(),
            created: false,
            warning: None,
        });
    }
    // Read first, outside the lock: a replayed key or a conflict already committed is answered
    // from what every reader sees, so a burst of refused submissions (a name taken, a cluster
    // busy) never queues behind the accepted ones. What passes is checked again under the lock.
    if let Some(replayed) = replay(store, &sub).await? {
        return Ok(replayed);
    }
    if let Err(conflict) = check_conflicts(store, &sub).await {
        // The conflict may be this request's twin, committed since the key was read: then it
        // is a replay (read after the conflict was seen, the key is there).
        return match replay(store, &sub).await? {
            Some(replayed) => Ok(replayed),
            None => Err(conflict),
        };
    }
    let guard = store.cluster_locks.lock(&sub.cluster).await;
    if let Some(replayed) = replay(store, &sub).await? {
        return Ok(replayed);
    }
    check_conflicts(store, &sub).await?;
    let id = uuid::Uuid::now_v7().to_string();
    let new = NewOperation {
        id: id.clone(),
        kind: sub.kind.to_string(),
        cluster: sub.cluster.clone(),
        params: sub.params.clone(),
        idempotency_key: sub.idempotency_key.clone(),
        request_hash: sub.request_hash.clone(),
        actor: sub.actor.clone(),
        principal: sub.principal.clone(),
        parent_id: sub.parent_id.clone(),
        phases,
    };
    // Written with the other submissions accepted meanwhile (one transaction for them all).
    let written = store
        .insert_submission(NewSubmission {
            operation: new,
            // A new cluster becomes the active one (what the user works on next), in the same
            // transaction: a replayed submission (same key) returned above changes nothing.
            setting: sub
                .new_cluster
                .as_ref()
                .map(|_| (crate::service::ACTIVE_CLUSTER, sub.cluster.clone())),
            creates: sub.new_cluster.clone(),
        })
        .await;
    if let Err(e) = written {
        // The key's twin on another cluster (whose lock this one did not take) won the race:
        // answered as if it had been read before.
        if is_unique_violation(&e) {
            if let Some(replayed) = replay(store, &sub).await? {
                return Ok(replayed);
            }
        }
        return Err(e.into());
    }
    store.changed();
    drop(guard);
    tracing::info!(operation_id = %id, kind = %sub.kind, cluster = %sub.cluster, actor = %sub.actor, "operation submitted");
    engine.changed();
    engine.spawn(id.clone());
    // Answered from what was inserted: reading it back would be two more queries per accept.
    Ok(Accepted {
        status_url: crate::store::status_url(&id),
        operation_id: id,
        cluster: sub.cluster,
        kind: sub.kind.to_string(),
        created: true,
        warning: None,
    })
}

/// The operation an earlier submission with the same `Idempotency-Key` started, if one did
/// (409 when that key came with another request).
async fn replay(store: &Store, sub: &Submission) -> ApiResult<Option<Accepted>> {
    let Some(key) = &sub.idempotency_key else {
        return Ok(None);
    };
    let Some((id, hash)) = store.find_by_key(key).await? else {
        return Ok(None);
    };
    if sub.request_hash.is_some() && hash != sub.request_hash {
        return Err(ApiError::Conflict {
            slug: ProblemType::IdempotencyKeyReused,
            detail: "this Idempotency-Key was used with a different request".into(),
            field: Some("Idempotency-Key".into()),
            operation_id: Some(id),
        });
    }
    Ok(Some(accepted(load(store, &id).await?, false)))
}

pub(in crate::service) async fn load(store: &Store, id: &str) -> ApiResult<Operation> {
    store
        .get_operation(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("operation {id}")))
}

pub(in crate::service) fn accepted(op: Operation, created: bool) -> Accepted {
    Accepted {
        operation_id: op.id,
        status_url: op.status_url,
        cluster: op.cluster,
        kind: op.kind,
        created,
        warning: None,
    }
}

/// 409 naming the operation that is in the way.
pub(in crate::service) fn still_running(busy: &Operation, cluster: &str, advice: &str) -> ApiError {
    ApiError::conflict(
        format!(
            "operation {} ({}) is still running on `{cluster}`: {advice}",
            busy.id, busy.kind
        ),
        Some(busy.id.clone()),
    )
}

/// Operations of a cluster that have not finished.
pub(in crate::service) async fn active_operations(
    store: &Store,
    cluster: &str,
) -> ApiResult<Vec<Operation>> {
    let mut ops = store
        .list_operations(Some(cluster), Some(crate::store::OpState::Running), 1000)
        .await?;
    ops.extend(
        store
            .list_operations(Some(cluster), Some(crate::store::OpState::Pending), 1000)
            .await?,
    );
    Ok(ops)
}

pub(in crate::service) async fn check_conflicts(store: &Store, sub: &Submission) -> ApiResult<()> {
    let existing = store.get_cluster(&sub.cluster).await?;
    // A new name needs no operation read: under a burst of creations, every query held under
    // the write lock is one more wait for the submissions queued behind it.
    if sub.new_cluster.is_some()
        && existing
            .as_ref()
            .is_none_or(|c| c.status == crate::store::Lifecycle::Deleted)
    {
        return Ok(());
    }
    if sub.new_cluster.is_some() {
        if let Some(c) = existing.filter(|c| c.status != crate::store::Lifecycle::Deleted) {
            // The operation that created it: remembered when this process wrote the record
            // (a burst of creations refuses three of every four without reading the
            // operations), else the latest that could have.
            let creator = match store.creator_of(&c.name) {
                Some(id) => Some(id),
                None => {
                    let latest = store.latest_heads(&sub.cluster).await?;
                    latest
                        .iter()
                        .find(|o| o.kind == OpKind::Pipeline)
                        .or_else(|| latest.iter().find(|o| o.kind == OpKind::Cluster))
                        .or(latest.first())
                        .map(|o| o.id.clone())
                }
            };
            return Err(ApiError::Conflict {
                slug: ProblemType::ClusterExists,
                detail: format!("cluster `{}` already exists", c.name),
                field: Some("name".into()),
                operation_id: creator,
            });
        }
        return Ok(());
    }
    let latest = store.latest_heads(&sub.cluster).await?;
    let running = |kind: OpKind| {
        latest
            .iter()
            .find(|o| o.kind == kind && !o.state.is_terminal())
    };
    let Some(cluster) = existing.filter(|c| c.status != crate::store::Lifecycle::Deleted) else {
        return Err(ApiError::not_found(format!("cluster `{}`", sub.cluster)));
    };
    if let Some(del) = running(OpKind::DeleteCluster).or_else(|| running(OpKind::ForgetCluster)) {
        return Err(ApiError::conflict(
            format!("cluster `{}` is being deleted", cluster.name),
            Some(del.id.clone()),
        ));
    }
    if sub.kind.ends_cluster() {
        if let Some(busy) = latest
            .iter()
            .find(|o| !o.state.is_terminal() && o.parent_id.is_none())
        {
            return Err(still_running(busy, &cluster.name, "cancel it first"));
        }
        return Ok(());
    }
    let recorded = super::resources::ClusterResources::of(&cluster.resources);
    // HyperPod takes one update at a time: group changes and the software update queue up.
    let updates_hyperpod = |k: &str| k.parse().is_ok_and(OpKind::updates_hyperpod);
    if sub.kind.updates_hyperpod() {
        if let Some(busy) = latest.iter().find(|o| {
            !o.state.is_terminal() && (updates_hyperpod(&o.kind) || o.kind == OpKind::HyperPod)
        }) {
            return Err(still_running(
                busy,
                &cluster.name,
                "HyperPod takes one update at a time",
            ));
        }
        return Ok(());
    }
    if sub.kind == OpKind::NodeAction {
        if recorded.hyperpod_cluster_name.is_none() {
            return Err(ApiError::Conflict {
                slug: ProblemType::StageNotReady,
                detail: format!("`{}` has no HyperPod cluster yet", cluster.name),
                field: None,
                operation_id: latest
                    .iter()
                    .find(|o| o.kind == OpKind::HyperPod)
                    .map(|o| o.id.clone()),
            });
        }
        let node = sub.params["nodeId"].as_str().unwrap_or_default();
        let busy = active_operations(store, &cluster.name)
            .await?
            .into_iter()
            .find(|o| o.kind == OpKind::NodeAction && o.params["nodeId"] == node);
        if let Some(busy) = busy {
            return Err(ApiError::conflict(
                format!("node {node} already has an operation running"),
                Some(busy.id),
            ));
        }
        return Ok(());
    }
    // Workloads conflict only with an operation on the same object; other kinds run one at a
    // time per cluster.
    if let Some(w) = sub.params.get("workload").and_then(Value::as_str) {
        let busy = active_operations(store, &cluster.name)
            .await?
            .into_iter()
            .find(|o| o.params["workload"] == w);
        if let Some(busy) = busy {
            return Err(ApiError::conflict(
                format!("{w} already has an operation running"),
                Some(busy.id),
            ));
        }
    } else if let Some(busy) = running(sub.kind) {
        return Err(ApiError::conflict(
            format!(
                "a {} operation is already running on `{}`",
                sub.kind, cluster.name
            ),
            Some(busy.id.clone()),
        ));
    }
    if sub.kind != OpKind::Cluster
        && !(recorded.eks_endpoint.is_some() && recorded.eks_certificate_authority.is_some())
    {
        let op = latest
            .iter()
            .find(|o| o.kind == OpKind::Cluster)
            .map(|o| o.id.clone());
        return Err(ApiError::Conflict {
            slug: ProblemType::StageNotReady,
            detail: format!(
                "the EKS cluster of `{}` is not ready yet: the cluster stage must succeed first",
                cluster.name
            ),
            field: None,
            operation_id: op,
        });
    }
    if sub.kind == OpKind::HyperPod && recorded.hyperpod_cluster_arn.is_some() {
        return Err(ApiError::Conflict {
            slug: ProblemType::HyperpodExists,
            detail: format!("`{}` already has a HyperPod cluster", cluster.name),
            field: None,
            operation_id: latest
                .iter()
                .find(|o| o.kind == OpKind::HyperPod)
                .map(|o| o.id.clone()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewOperation;
    use serde_json::json;

    async fn store_with(cluster: &str, running: &[(&str, Value)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let mut tx = store.writer.begin().await.unwrap();
        Store::create_cluster(&mut tx, cluster, "us-west-2", &json!({}))
            .await
            .unwrap();
        for (i, (kind, params)) in running.iter().enumerate() {
            let op = NewOperation {
                id: format!("op-{i}"),
                kind: kind.to_string(),
                cluster: cluster.into(),
                params: params.clone(),
                idempotency_key: None,
                request_hash: None,
                actor: "api".into(),
                principal: None,
                parent_id: None,
                phases: vec!["x".into()],
            };
            Store::insert_operation(&mut tx, &op).await.unwrap();
        }
        tx.commit().await.unwrap();
        store.changed();
        store
            .merge_resources(
                cluster,
                &json!({"eksEndpoint": "https://e", "eksCertificateAuthority": "ca"}),
            )
            .await
            .unwrap();
        (dir, store)
    }

    fn sub(kind: &str, params: Value) -> Submission {
        Submission {
            kind: kind.parse().unwrap(),
            cluster: "demo".into(),
            params,
            actor: "api".into(),
            principal: None,
            idempotency_key: None,
            request_hash: None,
            parent_id: None,
            new_cluster: None,
        }
    }

    fn conflicting_op(r: ApiResult<()>) -> Option<String> {
        match r {
            Err(ApiError::Conflict { operation_id, .. }) => operation_id,
            _ => None,
        }
    }

    #[tokio::test]
    async fn hyperpod_updates_queue_behind_each_other() {
        let (_d, store) = store_with("demo", &[("instance-group-scale", json!({}))]).await;
        let r = check_conflicts(&store, &sub("hyperpod-software-update", json!({}))).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-0"));
        let (_d, store) = store_with("demo", &[("hyperpod-software-update", json!({}))]).await;
        let r = check_conflicts(&store, &sub("instance-group-add", json!({}))).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-0"));
    }

    #[tokio::test]
    async fn workloads_conflict_only_on_the_same_object() {
        let (_d, store) = store_with(
            "demo",
            &[("model-download", json!({"workload": "model/hf-download-a"}))],
        )
        .await;
        let other = sub("model-download", json!({"workload": "model/hf-download-b"}));
        assert!(check_conflicts(&store, &other).await.is_ok());
        let same = sub(
            "workload-delete",
            json!({"workload": "model/hf-download-a"}),
        );
        assert_eq!(
            conflicting_op(check_conflicts(&store, &same).await).as_deref(),
            Some("op-0")
        );
    }

    #[tokio::test]
    async fn a_taken_name_is_refused_naming_its_creator_without_reading_the_operations() {
        // A record written before this process (no creator remembered): found by the query.
        let (_d, store) = store_with("demo", &[("pipeline", json!({}))]).await;
        let mut again = sub("pipeline", json!({}));
        again.new_cluster = Some(("us-west-2".into(), json!({})));
        let r = check_conflicts(&store, &again).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-0"));

        // A record this process created: its creator is named, and only the record is read.
        let op = |id: &str, cluster: &str| NewOperation {
            id: id.into(),
            kind: "pipeline".into(),
            cluster: cluster.into(),
            params: json!({}),
            idempotency_key: None,
            request_hash: None,
            actor: "api".into(),
            principal: None,
            parent_id: None,
            phases: vec!["x".into()],
        };
        let create = |id: &str| NewSubmission {
            operation: op(id, "fresh"),
            creates: Some(("us-west-2".into(), json!({}))),
            setting: None,
        };
        store.insert_submission(create("op-fresh")).await.unwrap();
        // A later operation of another kind on it does not change who created it.
        let mut tx = store.writer.begin().await.unwrap();
        let mut later = op("op-later", "fresh");
        later.kind = "features".into();
        Store::insert_operation(&mut tx, &later).await.unwrap();
        tx.commit().await.unwrap();
        let mut taken = sub("pipeline", json!({}));
        taken.cluster = "fresh".into();
        taken.new_cluster = Some(("us-west-2".into(), json!({})));
        store.get_cluster("fresh").await.unwrap();
        let before = store.reads();
        let r = check_conflicts(&store, &taken).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-fresh"));
        assert_eq!(
            store.reads(),
            before,
            "the record was memoized; nothing else is read"
        );

        // Deleted and created again by another operation: that one is named.
        store
            .set_cluster_status("fresh", crate::store::Lifecycle::Deleted)
            .await
            .unwrap();
        assert!(check_conflicts(&store, &taken).await.is_ok());
        store.insert_submission(create("op-again")).await.unwrap();
        let r = check_conflicts(&store, &taken).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-again"));
    }
}
