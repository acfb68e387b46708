//! SQLite persistence (sqlx): clusters, durable operations and their phases, settings, the
//! audit trail and cost history.
//!
//! One file in the data directory, WAL mode, foreign keys on, migrations embedded and applied at
//! start-up. Writes that read before they write take a lock in the process instead of racing for
//! SQLite's lock upgrade: a submission its cluster's ([`Store::cluster_locks`]), the rest
//! [`Store::write_lock`].

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

#[derive(Clone)]
pub struct Store {
    /// Read-only connections: any number of reads at once, never blocked by a write (WAL).
    pub pool: SqlitePool,
    /// The one connection that writes. Every write of the process goes through it, so writers
    /// queue in the process (fairly, without a timer) instead of meeting inside SQLite, whose
    /// busy handler waits by sleeping (1, 2, 5, … 100 ms): under a burst of submissions those
    /// sleeps were most of the time to accept.
    pub writer: SqlitePool,
    /// Serialises the read-then-write transactions that are not a cluster's (see module docs).
    pub write_lock: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Read queries of the paths that must cost the same whatever the data (see `pages`).
    reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Bumped after every committed write (see `pages`): what was read at an older revision
    /// may be stale, what was read at the current one is not.
    revision: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Cluster records by name, kept until that name is written (see `records`).
    records: std::sync::Arc<std::sync::Mutex<records::Memo>>,
    /// Audit rows waiting for their group commit.
    audit: std::sync::Arc<audit::AuditQueue>,
    /// Accepted submissions waiting for their group commit.
    submissions: std::sync::Arc<submissions::SubmissionQueue>,
    /// Serialise the read-then-write of submissions on the same cluster (see [`ClusterLocks`]).
    pub cluster_locks: std::sync::Arc<ClusterLocks>,
}

impl Store {
    /// Opens (creating if needed) `instantstart.db` in `data_dir` and applies migrations.
    pub async fn open(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating data directory {}", data_dir.display()))?;
        let path = data_dir.join("instantstart.db");
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL survives a process kill; only an OS crash can lose the last commit.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        // No ping before each use (sqlx's default): the connection is a file, not a socket that
        // could have gone stale, and the ping was one more hand-off to SQLite's thread and back
        // for every query.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .with_context(|| format!("opening {}", path.display()))?;
        sqlx::migrate!("./migrations")
            .run(&writer)
            .await
            .context("applying migrations")?;
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await
            .with_context(|| format!("opening {} to read", path.display()))?;
        let store = Self {
            pool,
            writer,
            write_lock: Default::default(),
            reads: Default::default(),
            revision: Default::default(),
            records: Default::default(),
            audit: Default::default(),
            submissions: Default::default(),
            cluster_locks: Default::default(),
        };
        store
            .know_names()
            .await
            .context("reading the names of the clusters recorded")?;
        Ok(store)
    }

    // --- operations ---------------------------------------------------------------------------

    /// The id and request hash of the operation holding an idempotency key.
    pub async fn find_by_key(&self, key: &str) -> sqlx::Result<Option<(String, Option<String>)>> {
        let row = sqlx::query("SELECT id, request_hash FROM operations WHERE idempotency_key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| (r.get("id"), r.get("request_hash"))))
    }

    pub async fn get_operation(&self, id: &str) -> anyhow::Result<Option<Operation>> {
        let row = sqlx::query("SELECT * FROM operations WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let mut op = operation_of(&row)?;
        op.phases = self.phases(id).await?;
        Ok(Some(op))
    }

    /// Whether a cancel was asked for (one column: a watch reads it every tick).
    pub async fn cancel_requested(&self, id: &str) -> sqlx::Result<bool> {
        let on: Option<bool> =
            sqlx::query_scalar("SELECT cancel_requested FROM operations WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(on.unwrap_or(false))
    }

    pub async fn phases(&self, id: &str) -> anyhow::Result<Vec<Phase>> {
        let rows = sqlx::query("SELECT * FROM phases WHERE operation_id = ? ORDER BY seq")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(phase_of).collect()
    }

    /// Operations, newest first, optionally filtered.
    pub async fn list_operations(
        &self,
        cluster: Option<&str>,
        state: Option<OpState>,
        limit: i64,
    ) -> anyhow::Result<Vec<Operation>> {
        let rows = sqlx::query(
            "SELECT * FROM operations
             WHERE (?1 IS NULL OR cluster = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY id DESC LIMIT ?3",
        )
        .bind(cluster)
        .bind(state.map(OpState::as_str))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        self.with_phases(&rows).await
    }

    /// A cluster's operations of the given kinds, oldest first, without their phases: what the
    /// product itself was asked to do (its own record, not what the cluster says).
    pub async fn operations_of_kinds(
        &self,
        cluster: &str,
        kinds: &[&str],
    ) -> anyhow::Result<Vec<Operation>> {
        let kinds = serde_json::to_string(kinds)?;
        let rows = sqlx::query(
            "SELECT * FROM operations
             WHERE cluster = ?1 AND kind IN (SELECT value FROM json_each(?2))
             ORDER BY id",
        )
        .bind(cluster)
        .bind(kinds)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(operation_of).collect()
    }

    /// The newest operation of each kind for a cluster.
    pub async fn latest_per_kind(&self, cluster: &str) -> anyhow::Result<Vec<Operation>> {
        let rows = self.latest_rows(cluster).await?;
        self.with_phases(&rows).await
    }

    /// The same without their phases (left empty), in one query: what conflict rules read.
    pub async fn latest_heads(&self, cluster: &str) -> anyhow::Result<Vec<Operation>> {
        self.latest_rows(cluster)
            .await?
            .iter()
            .map(operation_of)
            .collect()
    }

    async fn latest_rows(&self, cluster: &str) -> sqlx::Result<Vec<sqlx::sqlite::SqliteRow>> {
        self.count_read();
        sqlx::query(
            "SELECT * FROM operations o WHERE cluster = ? AND id = (
                 SELECT id FROM operations i WHERE i.cluster = o.cluster AND i.kind = o.kind
                 ORDER BY id DESC LIMIT 1)
             ORDER BY id",
        )
        .bind(cluster)
        .fetch_all(&self.pool)
        .await
    }

    pub(super) async fn with_phases(
        &self,
        rows: &[sqlx::sqlite::SqliteRow],
    ) -> anyhow::Result<Vec<Operation>> {
        let mut ops = rows
            .iter()
            .map(operation_of)
            .collect::<anyhow::Result<Vec<_>>>()?;
        if ops.is_empty() {
            return Ok(ops);
        }
        // One query for every listed operation's phases, not one per operation.
        self.count_read();
        let mut query = sqlx::QueryBuilder::new("SELECT * FROM phases WHERE operation_id IN (");
        let mut ids = query.separated(", ");
        for op in &ops {
            ids.push_bind(op.id.clone());
        }
        query.push(") ORDER BY operation_id, seq");
        let phase_rows = query.build().fetch_all(&self.pool).await?;
        let mut by_op: std::collections::HashMap<String, Vec<Phase>> =
            std::collections::HashMap::new();
        for row in &phase_rows {
            let id: String = row.try_get("operation_id")?;
            by_op.entry(id).or_default().push(phase_of(row)?);
        }
        for op in &mut ops {
            op.phases = by_op.remove(&op.id).unwrap_or_default();
        }
        Ok(ops)
    }

    /// Ids of every operation that has not reached a terminal state (resumed at start-up).
    pub async fn unfinished(&self) -> sqlx::Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT id FROM operations WHERE state IN ('pending', 'running') ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
    }

    pub async fn set_state(
        &self,
        id: &str,
        state: OpState,
        error: Option<&Value>,
    ) -> sqlx::Result<()> {
        sqlx::query("UPDATE operations SET state = ?, error_json = ?, updated_at = ? WHERE id = ?")
            .bind(state.as_str())
            .bind(error.map(Value::to_string))
            .bind(now())
            .bind(id)
            .execute(&self.writer)
            .await?;
        self.changed();
        Ok(())
    }

    pub async fn set_cancel_requested(&self, id: &str, on: bool) -> sqlx::Result<()> {
        sqlx::query("UPDATE operations SET cancel_requested = ?, updated_at = ? WHERE id = ?")
            .bind(on)
            .bind(now())
            .bind(id)
            .execute(&self.writer)
            .await?;
        self.changed();
        Ok(())
    }

    pub async fn update_phase(&self, id: &str, seq: i64, u: PhaseUpdate) -> sqlx::Result<()> {
        let now = now();
        sqlx::query(
            "UPDATE phases SET
                state = COALESCE(?, state),
                attempt = attempt + ?,
                progress = CASE WHEN ? THEN ? ELSE progress END,
                outputs_json = COALESCE(?, outputs_json),
                error_json = CASE WHEN ? THEN ? ELSE error_json END,
                started_at = CASE WHEN ? THEN ? ELSE started_at END,
                finished_at = CASE WHEN ? THEN ? WHEN ? IS NOT NULL THEN NULL ELSE finished_at END
             WHERE operation_id = ? AND seq = ?",
        )
        .bind(u.state.map(PhaseState::as_str))
        .bind(i64::from(u.bump_attempt))
        .bind(u.progress.is_some())
        .bind(&u.progress)
        .bind(u.outputs.as_ref().map(Value::to_string))
        .bind(u.error.is_some())
        .bind(u.error.flatten().map(|e| e.to_string()))
        .bind(u.started)
        .bind(&now)
        .bind(u.finished)
        .bind(&now)
        .bind(u.state.map(PhaseState::as_str))
        .bind(id)
        .bind(seq)
        .execute(&self.writer)
        .await?;
        sqlx::query("UPDATE operations SET updated_at = ? WHERE id = ?")
            .bind(&now)
            .bind(id)
            .execute(&self.writer)
            .await?;
        self.changed();
        Ok(())
    }

    /// Stage operations of a pipeline.
    pub async fn children(&self, parent: &str) -> anyhow::Result<Vec<Operation>> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM operations WHERE parent_id = ? ORDER BY id")
                .bind(parent)
                .fetch_all(&self.pool)
                .await?;
        let mut ops = Vec::new();
        for id in ids {
            if let Some(op) = self.get_operation(&id).await? {
                ops.push(op);
            }
        }
        Ok(ops)
    }

    // --- clusters -----------------------------------------------------------------------------

    pub async fn list_clusters(&self) -> anyhow::Result<Vec<ClusterRecord>> {
        let rows =
            sqlx::query("SELECT * FROM clusters WHERE status != 'deleted' ORDER BY created_at")
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(cluster_of).collect()
    }

    /// Merges top-level keys of `outputs` into the cluster's recorded resources.
    pub async fn merge_resources(&self, name: &str, outputs: &Value) -> sqlx::Result<()> {
        if !outputs.is_object() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE clusters SET resources_json = json_patch(resources_json, ?), updated_at = ?
             WHERE name = ?",
        )
        .bind(outputs.to_string())
        .bind(now())
        .bind(name)
        .execute(&self.writer)
        .await?;
        self.record_written(name);
        self.changed();
        Ok(())
    }

    pub async fn set_cluster_status(&self, name: &str, status: Lifecycle) -> sqlx::Result<()> {
        sqlx::query("UPDATE clusters SET status = ?, updated_at = ? WHERE name = ?")
            .bind(status.as_str())
            .bind(now())
            .bind(name)
            .execute(&self.writer)
            .await?;
        self.record_written(name);
        self.changed();
        Ok(())
    }

    // --- settings -----------------------------------------------------------------------------

    pub async fn setting(&self, key: &str) -> sqlx::Result<Option<String>> {
        self.count_read();
        sqlx::query_scalar("SELECT value FROM settings WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
    }

    /// A setting written inside a caller's transaction (the store's revision moves when the
    /// caller, having committed, calls [`Store::changed`]).
    pub async fn put_setting(tx: &mut Tx<'_>, key: &str, value: &str) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES (?, ?)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    pub async fn set_setting(&self, key: &str, value: Option<&str>) -> sqlx::Result<()> {
        match value {
            Some(v) => {
                sqlx::query(
                    "INSERT INTO settings (key, value) VALUES (?, ?)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                )
                .bind(key)
                .bind(v)
                .execute(&self.writer)
                .await?
            }
            None => {
                sqlx::query("DELETE FROM settings WHERE key = ?")
                    .bind(key)
                    .execute(&self.writer)
                    .await?
            }
        };
        self.changed();
        Ok(())
    }
}

mod audit;
mod costs;
mod group;
mod locks;
mod pages;
mod people;
mod records;
mod rows;
mod states;
mod submissions;
mod types;
pub use audit::{AuditEntry, AuditFilter, NewAudit};
pub use costs::{GpuSeconds, HeldGpus, NodeLifetime, SeenNode};
pub use locks::ClusterLocks;
pub use pages::StageRow;
pub use people::{Admin, AgentTokenId, Holder, NewAgentToken};
use rows::{cluster_of, operation_of, phase_of};
pub use states::{Lifecycle, OpState, PhaseState};
pub use submissions::NewSubmission;
pub use types::*;

#[cfg(test)]
mod tests;
