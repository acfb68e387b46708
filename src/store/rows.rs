//! Rows read back as the store's types (JSON columns parsed, states checked).

use anyhow::Context;
use serde_json::Value;
use sqlx::Row;

use super::{ClusterRecord, Operation, Phase};

fn json_col(row: &sqlx::sqlite::SqliteRow, col: &str) -> anyhow::Result<Option<Value>> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| serde_json::from_str(&t).with_context(|| format!("column {col}")))
        .transpose()
}

pub(super) fn operation_of(row: &sqlx::sqlite::SqliteRow) -> anyhow::Result<Operation> {
    let id: String = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    Ok(Operation {
        status_url: super::status_url(&id),
        kind: row.try_get("kind")?,
        cluster: row.try_get("cluster")?,
        state: state.parse().map_err(anyhow::Error::msg)?,
        actor: row.try_get("actor")?,
        principal: row.try_get("principal")?,
        params: json_col(row, "params_json")?.unwrap_or(Value::Null),
        parent_id: row.try_get("parent_id")?,
        error: json_col(row, "error_json")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        phases: Vec::new(),
        id,
    })
}

pub(super) fn phase_of(row: &sqlx::sqlite::SqliteRow) -> anyhow::Result<Phase> {
    let state: String = row.try_get("state")?;
    Ok(Phase {
        seq: row.try_get("seq")?,
        name: row.try_get("name")?,
        state: state.parse().map_err(anyhow::Error::msg)?,
        attempt: row.try_get("attempt")?,
        progress: row.try_get("progress")?,
        outputs: json_col(row, "outputs_json")?,
        error: json_col(row, "error_json")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

pub(super) fn cluster_of(row: &sqlx::sqlite::SqliteRow) -> anyhow::Result<ClusterRecord> {
    Ok(ClusterRecord {
        name: row.try_get("name")?,
        region: row.try_get("region")?,
        spec: json_col(row, "spec_json")?.unwrap_or(Value::Null),
        resources: json_col(row, "resources_json")?.unwrap_or(Value::Null),
        status: row
            .try_get::<String, _>("status")?
            .parse()
            .map_err(anyhow::Error::msg)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
