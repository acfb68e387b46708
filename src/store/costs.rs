//! Cost history: HyperPod nodes' lifetimes and the GPU-seconds each holder requested on them,
//! per UTC day, written by the cost sampler and read back by the cost report.

use sqlx::Row as _;

use super::Store;

/// A node as the sampler saw it in HyperPod's node list.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenNode {
    pub instance_id: String,
    pub instance_group: String,
    pub instance_type: String,
    pub launched_ms: i64,
}

/// One stored node lifetime.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLifetime {
    pub node: SeenNode,
    /// `None` while it runs.
    pub ended_ms: Option<i64>,
}

/// GPUs one holder requested on one node at the moment of a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldGpus {
    pub instance_id: String,
    /// Empty for idle GPUs.
    pub namespace: String,
    pub workload: String,
    pub gpus: f64,
}

/// GPU-seconds stored for one day, node and holder.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSeconds {
    pub day: String,
    pub instance_id: String,
    pub namespace: String,
    pub workload: String,
    pub seconds: f64,
}

impl Store {
    /// Records the nodes HyperPod lists now: new ones from their launch time, and the end of
    /// those no longer listed (a node listed again — a list that briefly missed it — runs on).
    pub async fn record_nodes(
        &self,
        cluster: &str,
        now_ms: i64,
        nodes: &[SeenNode],
    ) -> sqlx::Result<()> {
        let _serial = self.write_lock.lock().await;
        let mut tx = self.writer.begin().await?;
        for n in nodes {
            sqlx::query(
                "INSERT INTO node_lifetimes (cluster, instance_id, instance_group, instance_type, launched_ms)
                 VALUES (?, ?, ?, ?, ?)
                 ON CONFLICT (cluster, instance_id) DO UPDATE SET ended_ms = NULL",
            )
            .bind(cluster)
            .bind(&n.instance_id)
            .bind(&n.instance_group)
            .bind(&n.instance_type)
            .bind(n.launched_ms)
            .execute(&mut *tx)
            .await?;
        }
        let listed = serde_json::to_string(
            &nodes
                .iter()
                .map(|n| n.instance_id.as_str())
                .collect::<Vec<_>>(),
        )
        .unwrap_or_else(|_| "[]".into());
        sqlx::query(
            "UPDATE node_lifetimes SET ended_ms = ?
             WHERE cluster = ? AND ended_ms IS NULL
               AND instance_id NOT IN (SELECT value FROM json_each(?))",
        )
        .bind(now_ms)
        .bind(cluster)
        .bind(listed)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// Credits the time since the cluster's previous sample — at most `max_gap_ms` — to what
    /// each holder requests now, on `day`; returns the seconds credited (0 on a first sample).
    pub async fn add_gpu_sample(
        &self,
        cluster: &str,
        now_ms: i64,
        max_gap_ms: i64,
        day: &str,
        held: &[HeldGpus],
    ) -> sqlx::Result<f64> {
        let _serial = self.write_lock.lock().await;
        let mut tx = self.writer.begin().await?;
        let previous: Option<i64> =
            sqlx::query_scalar("SELECT at_ms FROM cost_samples WHERE cluster = ?")
                .bind(cluster)
                .fetch_optional(&mut *tx)
                .await?;
        let credited = previous.map_or(0, |p| (now_ms - p).clamp(0, max_gap_ms)) as f64 / 1000.0;
        if credited > 0.0 {
            for h in held.iter().filter(|h| h.gpus > 0.0) {
                sqlx::query(
                    "INSERT INTO gpu_seconds (cluster, day, instance_id, namespace, workload, seconds)
                     VALUES (?, ?, ?, ?, ?, ?)
                     ON CONFLICT (cluster, day, instance_id, namespace, workload)
                     DO UPDATE SET seconds = seconds + excluded.seconds",
                )
                .bind(cluster)
                .bind(day)
                .bind(&h.instance_id)
                .bind(&h.namespace)
                .bind(&h.workload)
                .bind(h.gpus * credited)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "INSERT INTO cost_samples (cluster, at_ms) VALUES (?, ?)
             ON CONFLICT (cluster) DO UPDATE SET at_ms = max(at_ms, excluded.at_ms)",
        )
        .bind(cluster)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(credited)
    }

    /// The cluster's node lifetimes that had not ended by `since_ms`.
    pub async fn node_lifetimes(
        &self,
        cluster: &str,
        since_ms: i64,
    ) -> sqlx::Result<Vec<NodeLifetime>> {
        let rows = sqlx::query(
            "SELECT * FROM node_lifetimes WHERE cluster = ? AND (ended_ms IS NULL OR ended_ms > ?)
             ORDER BY launched_ms, instance_id",
        )
        .bind(cluster)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeLifetime {
                    node: SeenNode {
                        instance_id: r.try_get("instance_id")?,
                        instance_group: r.try_get("instance_group")?,
                        instance_type: r.try_get("instance_type")?,
                        launched_ms: r.try_get("launched_ms")?,
                    },
                    ended_ms: r.try_get("ended_ms")?,
                })
            })
            .collect()
    }

    /// The cluster's GPU-seconds from `since_day` (`YYYY-MM-DD`) on.
    pub async fn gpu_seconds(
        &self,
        cluster: &str,
        since_day: &str,
    ) -> sqlx::Result<Vec<GpuSeconds>> {
        let rows = sqlx::query(
            "SELECT day, instance_id, namespace, workload, seconds FROM gpu_seconds
             WHERE cluster = ? AND day >= ? ORDER BY day, instance_id, namespace, workload",
        )
        .bind(cluster)
        .bind(since_day)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GpuSeconds {
                    day: r.try_get("day")?,
                    instance_id: r.try_get("instance_id")?,
                    namespace: r.try_get("namespace")?,
                    workload: r.try_get("workload")?,
                    seconds: r.try_get("seconds")?,
                })
            })
            .collect()
    }
}
