//! Starting operations from requests: how a validated request becomes a [`Submission`] (kind,
//! cluster, typed parameters, who asked, idempotency key) handed to [`submit`]. Each topic's
//! `start.rs` (`cluster/start.rs`, `training/start.rs`, …) validates its requests and starts
//! their operations through here; a handler calls its topic's start, and nothing else builds a
//! submission.

use serde::Serialize;
use serde_json::Value;

use super::{request_hash, submit, Accepted, OpKind, Submission};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::problem::ProblemType;

/// Who asked, and the key that makes a repeat of the same request return the same operation.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: String,
    /// The person, when people sign in (STS's ARN: a role session names them).
    pub principal: Option<String>,
    pub idempotency_key: Option<String>,
}

pub(in crate::service) fn json_of(v: &impl Serialize) -> ApiResult<Value> {
    Ok(serde_json::to_value(v).map_err(anyhow::Error::from)?)
}

impl Submission {
    /// An operation on a cluster that exists; the request is identified by its parameters.
    pub fn on(kind: OpKind, cluster: &str, params: Value, caller: &Caller) -> Self {
        Self {
            kind,
            request_hash: Some(request_hash(kind.as_str(), cluster, &params)),
            cluster: cluster.to_string(),
            params,
            actor: caller.actor.clone(),
            principal: caller.principal.clone(),
            idempotency_key: caller.idempotency_key.clone(),
            parent_id: None,
            new_cluster: None,
        }
    }

    /// An operation that creates the cluster record (`region`, `spec`); the request is
    /// identified by its body.
    pub(in crate::service) fn creating(
        kind: OpKind,
        cluster: &str,
        body: &Value,
        params: Value,
        record: (String, Value),
        caller: &Caller,
    ) -> Self {
        Self {
            request_hash: Some(request_hash(kind.as_str(), cluster, body)),
            new_cluster: Some(record),
            ..Self::on(kind, cluster, params, caller)
        }
    }

    /// The idempotency key of a pipeline's stage: the pipeline finds its stage again by it.
    pub fn stage_key(pipeline_id: &str, stage: &str) -> String {
        format!("{pipeline_id}/{stage}")
    }

    /// A stage of a running pipeline, keyed by the pipeline so a resumed pipeline finds it.
    pub fn stage_of(
        kind: OpKind,
        cluster: &str,
        params: Value,
        parent: &crate::store::Operation,
    ) -> Self {
        Self {
            kind,
            cluster: cluster.to_string(),
            params,
            actor: parent.actor.clone(),
            principal: parent.principal.clone(),
            idempotency_key: Some(Self::stage_key(&parent.id, kind.as_str())),
            request_hash: None,
            parent_id: Some(parent.id.clone()),
            new_cluster: None,
        }
    }
}

/// Starts `kind` on an existing cluster with `params`.
pub async fn start(
    engine: &Engine,
    kind: OpKind,
    cluster: &str,
    params: &impl Serialize,
    caller: &Caller,
) -> ApiResult<Accepted> {
    submit(
        engine,
        Submission::on(kind, cluster, json_of(params)?, caller),
    )
    .await
}

/// A repeat of a keyed request returns its operation before anything is validated again:
/// validation reads state the first request changed (the job it created, say), so a retry
/// would otherwise be refused for its own success. The request is identified by its body.
pub(in crate::service) async fn replayed(
    engine: &Engine,
    kind: OpKind,
    cluster: &str,
    body: &Value,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    let Some(key) = &caller.idempotency_key else {
        return Ok(None);
    };
    if super::shared::preview::active() {
        return Ok(None);
    }
    let store = engine.store();
    let Some((id, hash)) = store.find_by_key(key).await? else {
        return Ok(None);
    };
    if hash.as_deref() != Some(request_hash(kind.as_str(), cluster, body).as_str()) {
        return Err(crate::error::ApiError::Conflict {
            slug: ProblemType::IdempotencyKeyReused,
            detail: "this Idempotency-Key was used with a different request".into(),
            field: Some("Idempotency-Key".into()),
            operation_id: Some(id),
        });
    }
    Ok(Some(super::shared::submit::accepted(
        super::shared::submit::load(store, &id).await?,
        false,
    )))
}
