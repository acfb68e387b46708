//! The store's records as the rest of the process reads them (operations, their phases,
//! clusters) and the small helpers every query file shares: a leaf, so the query files and the
//! `Store` that ties them together depend on it and not on each other.

use serde::Serialize;
use serde_json::Value;

use super::states::{Lifecycle, OpState, PhaseState};

pub type Tx<'a> = sqlx::Transaction<'a, sqlx::Sqlite>;

pub use crate::cloud::clock::{now, rfc3339_ms};

/// Where an operation is watched.
pub fn status_url(id: &str) -> String {
    format!("/api/operations/{id}")
}

/// Whether a write failed on a UNIQUE constraint (a twin committed first).
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// One phase of an operation, as stored and as returned by the API.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub seq: i64,
    pub name: String,
    pub state: PhaseState,
    /// How many times the phase was started (1 on a clean run).
    pub attempt: i64,
    /// Latest progress line while watching (e.g. `nodes 1/2`).
    pub progress: Option<String>,
    /// Identifiers the phase created or adopted.
    #[schema(value_type = Option<Object>)]
    pub outputs: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

/// A durable operation, as stored and as returned by the API.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub id: String,
    /// `cluster`, `dependencies`, `hyperpod`, `storage`, `pipeline`, `delete-cluster`.
    pub kind: String,
    pub cluster: String,
    pub state: OpState,
    /// `browser`, `agent` or `api`.
    pub actor: String,
    /// Who started it, when people sign in (STS's ARN of the person).
    pub principal: Option<String>,
    #[schema(value_type = Object)]
    pub params: Value,
    /// The pipeline this stage belongs to.
    pub parent_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
    pub cancel_requested: bool,
    pub created_at: String,
    pub updated_at: String,
    /// Where to watch it: `GET` this URL with `?wait=30` to long-poll.
    pub status_url: String,
    pub phases: Vec<Phase>,
}

/// A cluster record.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRecord {
    pub name: String,
    pub region: String,
    #[schema(value_type = Object)]
    pub spec: Value,
    /// Identifiers recorded by the stages (VPC, subnets, EKS ARN, HyperPod ARN ...).
    #[schema(value_type = Object)]
    pub resources: Value,
    pub status: Lifecycle,
    pub created_at: String,
    pub updated_at: String,
}

/// What to insert for a new operation.
#[derive(Debug, Clone)]
pub struct NewOperation {
    pub id: String,
    pub kind: String,
    pub cluster: String,
    pub params: Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    pub actor: String,
    pub principal: Option<String>,
    pub parent_id: Option<String>,
    pub phases: Vec<String>,
}

/// A partial update to a phase row; `None` leaves a column unchanged.
#[derive(Debug, Default, Clone)]
pub struct PhaseUpdate {
    pub state: Option<PhaseState>,
    pub bump_attempt: bool,
    pub progress: Option<String>,
    pub outputs: Option<Value>,
    pub error: Option<Option<Value>>,
    pub started: bool,
    pub finished: bool,
}
