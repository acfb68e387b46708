//! Reads that cost the same whatever the number of clusters and operations: a page of
//! clusters with the newest operation of each of their stages in one more query, and pages of
//! operations, each in a stable order with a cursor. Every query here is counted, so a test can
//! prove the count does not grow with the data. The store's revision lets readers keep what
//! they built from a read until the next committed write.

use std::sync::atomic::Ordering;

use sqlx::Row as _;

use super::rows::cluster_of;
use super::{ClusterRecord, OpState, Operation, Store};

/// The newest operation of one stage of one cluster.
#[derive(Debug, Clone)]
pub struct StageRow {
    pub cluster: String,
    pub kind: String,
    pub id: String,
    pub state: OpState,
    pub updated_at: String,
}

impl Store {
    /// How many counted read queries this store has run (for tests and the benchmark).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    pub(super) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The revision of everything stored: it changes after every committed write, so a
    /// reader may keep what it built from a read for as long as this stays the same.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Acquire)
    }

    /// Marks a write as committed. Writes made in a caller's transaction call this after the
    /// commit (see `service::shared::submit`).
    pub fn changed(&self) {
        self.revision.fetch_add(1, Ordering::AcqRel);
    }

    /// Up to `limit` clusters that are not deleted, by name, after `after`.
    pub async fn cluster_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> anyhow::Result<Vec<ClusterRecord>> {
        self.count_read();
        let rows = sqlx::query(
            "SELECT * FROM clusters WHERE status != 'deleted' AND (?1 IS NULL OR name > ?1)
             ORDER BY name LIMIT ?2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(cluster_of).collect()
    }

    /// The newest operation of every kind of every named cluster, in one query.
    pub async fn latest_stages(&self, clusters: &[String]) -> anyhow::Result<Vec<StageRow>> {
        if clusters.is_empty() {
            return Ok(vec![]);
        }
        self.count_read();
        let mut q = sqlx::QueryBuilder::new(
            "SELECT cluster, kind, id, state, updated_at FROM operations WHERE id IN (
                 SELECT MAX(id) FROM operations WHERE cluster IN (",
        );
        let mut names = q.separated(", ");
        for c in clusters {
            names.push_bind(c.clone());
        }
        q.push(") GROUP BY cluster, kind) ORDER BY cluster, kind");
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                Ok(StageRow {
                    cluster: r.try_get("cluster")?,
                    kind: r.try_get("kind")?,
                    id: r.try_get("id")?,
                    state: state
                        .parse()
                        .map_err(|_| anyhow::anyhow!("bad state {state}"))?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

    /// Operations newest first, optionally of one cluster and in one state, older than the
    /// operation `before` (ids grow with time, so the order is stable under new submissions).
    pub async fn operation_page(
        &self,
        cluster: Option<&str>,
        state: Option<OpState>,
        before: Option<&str>,
        limit: i64,
    ) -> anyhow::Result<Vec<Operation>> {
        self.count_read();
        let rows = sqlx::query(
            "SELECT * FROM operations
             WHERE (?1 IS NULL OR cluster = ?1) AND (?2 IS NULL OR state = ?2)
               AND (?3 IS NULL OR id < ?3)
             ORDER BY id DESC LIMIT ?4",
        )
        .bind(cluster)
        .bind(state.map(OpState::as_str))
        .bind(before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        self.with_phases(&rows).await
    }

    /// How many operations there are of each kind in each state (one grouped scan; for the
    /// metrics).
    pub async fn operation_counts(&self) -> sqlx::Result<Vec<(String, String, i64)>> {
        self.count_read();
        let rows = sqlx::query(
            "SELECT kind, state, COUNT(*) AS n FROM operations GROUP BY kind, state ORDER BY kind, state",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("kind")?, r.try_get("state")?, r.try_get("n")?)))
            .collect()
    }
}
