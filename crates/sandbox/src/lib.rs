//! The sandbox cloud: an in-process simulated AWS account and Kubernetes clusters behind the
//! same ports as the real adapters, embedded in the binary (`--cloud sandbox`; `aws` is the
//! default).
//!
//! State lives in the `sandbox_*` tables of the server's own SQLite file, so a restart (even a
//! kill -9) sees the same world. Lifecycles are a pure function of a resource's creation time and
//! the time scale (`INSTANTSTART_SANDBOX_TIME_SCALE`), so nothing needs a background ticker:
//! `describe` computes `CREATING → ACTIVE` from the clock. Every accepted mutating call is counted
//! in the same transaction as its effect (`GET /api/sandbox/calls`), which lets tests prove that
//! no mutation was ever replayed.
//!
//! # What it simulates
//!
//! - The account: EC2 networking (`network`), EKS clusters, add-ons, access entries and pod
//!   identity (`eks`), HyperPod clusters, groups, nodes and their lifecycles (`hyperpod`), IAM
//!   and STS (`iam`), S3 and Service Quotas (`objects`), task governance (`governance`), managed
//!   MLflow (`mlflow`), Managed Prometheus's GPU series (`metrics`), the Price List (`prices`),
//!   and upstream release files (`releases`).
//! - What a real account refuses, from its recorded state (`rules`, `verdicts`): IAM documents
//!   evaluated with the AWS-managed policies as published, security groups that would not let a
//!   node join, an execution role a node could not use, quotas, names taken.
//! - The clusters: the Kubernetes API's objects as applied, with the status their controllers
//!   would write (`kube`); a scheduler that places replicas on ready nodes with free GPUs
//!   (`scheduler`); Kueue admission and preemption (`kueue`, `queues`); the training operators
//!   (`training`), the inference operator (`endpoints`), Deployments, ReplicaSets and KEDA
//!   scaling (`serving`), the Spaces controller and a stand-in for JupyterLab (`spaces`,
//!   `space_app`, `space_files`); pods and the logs they write (`pods`, `log_text`).
//! - Faults on request (`faults`): failed creations, throttling, denied actions, unhealthy nodes,
//!   struck ranks, and what the evidence then says (`triage`).
//!
//! # What it deliberately does not
//!
//! - Run anything: no container, no GPU, no network traffic between pods; a job's progress and
//!   a model's answers are functions of time and the request, enough to drive every flow.
//! - Validate a custom resource's full schema (the tests check generated objects against the real
//!   CRDs) or an add-on's configuration values beyond what the product sends.
//! - Model AWS's eventual consistency, pagination limits, or every error code: the refusals are
//!   the ones a product change could trip over, each citing the rule it mirrors.
//! - Keep tables of its own: its two tables (`sandbox_resources`, `sandbox_calls`) were created by
//!   the server's migration `0002_sandbox.sql`, which history keeps; the sandbox only reads and
//!   writes them.

mod eks;
mod eks_control;
mod endpoints;
mod faults;
mod governance;
mod hyperpod;
mod iam;
mod identity;
mod kube;
mod kueue;
mod listing;
mod log_text;
mod metrics;
pub use metrics::GRAFANA_WORKSPACE;
mod mlflow;
mod network;
mod objects;
mod pods;
mod prices;
mod queues;
mod releases;
pub mod rules;
mod scheduler;
mod serving;
mod shared;
mod software;
mod space_app;
mod space_files;
mod spaces;
mod training;
mod triage;
mod verdicts;
mod workload;

pub use faults::Faults;

use std::sync::{Arc, Mutex};

use rand::Rng;
use serde::Serialize;
use serde_json::Value;
use sqlx::{Row, SqlitePool};

use cloud::retry::IDEMPOTENT_ATTEMPTS;
use cloud::{Cloud, CloudError, CloudMode, CloudResult};

/// Simulated durations at time scale 1, in seconds, taken from what the real services report.
pub mod durations {
    pub const EKS_CREATE: f64 = 600.0;
    pub const EKS_DELETE: f64 = 300.0;
    /// A control plane's Kubernetes version upgrade.
    pub const EKS_UPGRADE: f64 = 480.0;
    pub const ADDON_CREATE: f64 = 90.0;
    pub const NAT_CREATE: f64 = 90.0;
    pub const HYPERPOD_CREATE: f64 = 900.0;
    pub const HYPERPOD_DELETE: f64 = 300.0;
    /// Applied Deployments and DaemonSets report ready after this long.
    pub const K8S_WORKLOAD_READY: f64 = 45.0;
}

/// The version EKS picks for an add-on created without one (its default for Kubernetes 1.32).
pub fn default_addon_version(addon: &str) -> Option<&'static str> {
    Some(match addon {
        "vpc-cni" => "v1.19.2-eksbuild.1",
        "kube-proxy" => "v1.32.0-eksbuild.2",
        "coredns" => "v1.11.4-eksbuild.2",
        "eks-pod-identity-agent" => "v1.3.4-eksbuild.1",
        _ => return None,
    })
}

/// The simulated account id.
pub const ACCOUNT: &str = "123456789012";
/// The simulated region.
pub const REGION: &str = "us-west-2";

/// Zones of the simulated region: (name, id, EC2 instance types offered there).
/// Offerings differ per zone on purpose, as they do in real regions.
pub const ZONES: &[(&str, &str, &[&str])] = &[
    (
        "us-west-2a",
        "usw2-az2",
        &[
            "g5.8xlarge",
            "g5.12xlarge",
            "g6e.12xlarge",
            "p4d.24xlarge",
            "trn1.32xlarge",
        ],
    ),
    (
        "us-west-2b",
        "usw2-az1",
        &["g5.8xlarge", "g5.12xlarge", "g6e.12xlarge", "p5.48xlarge"],
    ),
    (
        "us-west-2c",
        "usw2-az3",
        &["g5.8xlarge", "p4d.24xlarge", "p5.48xlarge"],
    ),
    ("us-west-2d", "usw2-az4", &["g5.8xlarge", "trn1.32xlarge"]),
];

/// HyperPod cluster-usage quotas of the simulated account (instances per type).
pub const QUOTAS: &[(&str, u32)] = &[
    ("ml.g5.8xlarge", 16),
    ("ml.g5.12xlarge", 8),
    ("ml.g6e.12xlarge", 8),
    ("ml.p4d.24xlarge", 4),
    ("ml.p5.48xlarge", 2),
    ("ml.trn1.32xlarge", 4),
];

/// Settings of the simulated account.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Simulated seconds per real second (60 makes a 10-minute EKS creation take 10 s).
    pub time_scale: f64,
    pub faults: Faults,
}

/// A stored simulated resource.
#[derive(Debug, Clone)]
pub(crate) struct Res {
    pub id: String,
    pub data: Value,
    pub created_ms: i64,
    pub deleted_ms: Option<i64>,
}

/// Lifecycle position of a resource with a creation and deletion duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Life {
    /// Still being created; the fraction done.
    Creating(f64),
    Ready,
    Deleting,
    Gone,
}

/// The simulated account. One per process, shared by every port; a clone is a handle to the
/// same account (a space's pod keeps one to read and write its volumes).
#[derive(Clone)]
pub struct Sandbox {
    /// The store's read-only connections.
    pool: SqlitePool,
    /// The store's one writing connection (see `Store::writer`).
    writer: SqlitePool,
    time_scale: f64,
    faults: Arc<Mutex<Faults>>,
    /// Every mutating call asked for since start, accepted, refused or failed: what a preview
    /// must leave unchanged.
    attempts: Arc<Mutex<std::collections::BTreeMap<String, i64>>>,
}

/// Counts of simulated mutating calls, by API (`eks:CreateCluster`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallCounts {
    /// Calls that took effect.
    pub accepted: std::collections::BTreeMap<String, i64>,
    /// Calls refused by fault injection or throttling (no effect).
    pub rejected: std::collections::BTreeMap<String, i64>,
    /// Every mutating call asked for since the server started, whatever became of it.
    pub attempted: std::collections::BTreeMap<String, i64>,
}

impl Sandbox {
    pub async fn new(
        pool: SqlitePool,
        writer: SqlitePool,
        config: SandboxConfig,
    ) -> anyhow::Result<Arc<Self>> {
        let sandbox = Arc::new(Self {
            pool,
            writer,
            time_scale: config.time_scale.max(0.001),
            faults: Arc::new(Mutex::new(config.faults)),
            attempts: Default::default(),
        });
        sandbox.seed().await?;
        Ok(sandbox)
    }

    /// Wraps the sandbox in every port.
    pub fn cloud(self: &Arc<Self>) -> Cloud {
        Cloud {
            mode: CloudMode::Sandbox,
            network: self.clone(),
            eks: self.clone(),
            hyperpod: self.clone(),
            iam: self.clone(),
            objects: self.clone(),
            quotas: self.clone(),
            mlflow: self.clone(),
            governance: self.clone(),
            logs: self.clone(),
            metrics: self.clone(),
            prices: self.clone(),
            identity: self.clone(),
            kube: self.clone(),
            releases: Arc::new(releases::StandIns),
            shared_bucket: None,
            data_buckets: None,
        }
    }

    /// A fresh account has the default VPC every real account has.
    async fn seed(&self) -> anyhow::Result<()> {
        let existing: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sandbox_resources WHERE kind = 'vpc'")
                .fetch_one(&self.pool)
                .await?;
        if existing == 0 {
            let data = serde_json::json!({
                "cidrs": ["172.31.0.0/16"],
                "tags": {"Name": "default"},
            });
            sqlx::query(
                "INSERT INTO sandbox_resources (kind, id, name, data_json, created_ms)
                 VALUES ('vpc', 'vpc-0default0000000', NULL, ?, ?)",
            )
            .bind(data.to_string())
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        }
        Ok(())
    }

    pub async fn call_counts(&self) -> anyhow::Result<CallCounts> {
        let rows = sqlx::query("SELECT api, accepted, rejected FROM sandbox_calls ORDER BY api")
            .fetch_all(&self.pool)
            .await?;
        let mut counts = CallCounts {
            accepted: Default::default(),
            rejected: Default::default(),
            attempted: self
                .attempts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        };
        for row in rows {
            let api: String = row.get("api");
            let accepted: i64 = row.get("accepted");
            let rejected: i64 = row.get("rejected");
            if accepted > 0 {
                counts.accepted.insert(api.clone(), accepted);
            }
            if rejected > 0 {
                counts.rejected.insert(api, rejected);
            }
        }
        Ok(counts)
    }

    /// Gate for every call: throttling applies to reads and writes alike; injected faults to
    /// the named API. A refused mutating call is counted as rejected and has no effect.
    ///
    /// A throttled read is tried again here up to [`IDEMPOTENT_ATTEMPTS`] times in all, as the
    /// AWS adapter retries every idempotent call before its caller sees an error; a mutating
    /// call is refused at once, as the adapter never repeats a create.
    pub(crate) async fn gate(&self, api: &str, mutating: bool) -> CloudResult<()> {
        let (service, operation) = api.split_once(':').unwrap_or((api, ""));
        let metrics = cloud::metrics::global();
        if mutating {
            *self
                .attempts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(api.to_string())
                .or_default() += 1;
        }
        let mut attempt = 1;
        loop {
            let refusal = {
                let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
                faults.check(api, rand::thread_rng().gen::<f64>())
            };
            metrics.cloud_call(service, operation, refusal.as_ref().map_or(Ok(()), Err));
            let Some(err) = refusal else { return Ok(()) };
            if mutating {
                self.count(api, "rejected").await?;
                return Err(err);
            }
            if !err.retryable || attempt >= IDEMPOTENT_ATTEMPTS {
                return Err(err);
            }
            metrics.retried("sdk", Some(&err));
            // The sandbox answers at once; a short, growing pause keeps the order of events
            // an adapter's backoff would give without slowing anything down.
            tokio::time::sleep(std::time::Duration::from_millis(5 << attempt)).await;
            attempt += 1;
        }
    }

    async fn count(&self, api: &str, column: &str) -> CloudResult<()> {
        let sql = format!(
            "INSERT INTO sandbox_calls (api, {column}) VALUES (?, 1)
             ON CONFLICT(api) DO UPDATE SET {column} = {column} + 1"
        );
        sqlx::query(&sql)
            .bind(api)
            .execute(&self.writer)
            .await
            .map_err(|e| internal(api, e))?;
        Ok(())
    }

    /// Records the effect of an accepted mutating call (a new resource) and counts the call,
    /// atomically, so the count can never disagree with the state after a crash.
    pub(crate) async fn create(
        &self,
        api: &str,
        kind: &str,
        id: &str,
        name: Option<&str>,
        data: &Value,
    ) -> CloudResult<()> {
        let mut tx = self.writer.begin().await.map_err(|e| internal(api, e))?;
        let inserted = sqlx::query(
            "INSERT INTO sandbox_resources (kind, id, name, data_json, created_ms)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(kind)
        .bind(id)
        .bind(name)
        .bind(data.to_string())
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        if let Err(e) = inserted {
            if is_unique_violation(&e) {
                let (service, op) = split_api(api);
                return Err(CloudError::new(
                    service,
                    op,
                    already_exists_code(service),
                    format!("{kind} {} already exists", name.unwrap_or(id)),
                ));
            }
            return Err(internal(api, e));
        }
        bump(&mut tx, api).await?;
        tx.commit().await.map_err(|e| internal(api, e))?;
        Ok(())
    }

    /// Replaces a resource's data and counts the call, atomically.
    pub(crate) async fn update(
        &self,
        api: &str,
        kind: &str,
        id: &str,
        data: &Value,
    ) -> CloudResult<()> {
        let sql = "UPDATE sandbox_resources SET data_json = ?1 WHERE kind = ?2 AND id = ?3";
        self.counted(api, sql, data.to_string(), kind, id).await
    }

    /// Starts a deletion and counts the call, atomically. Deleting twice is a no-op.
    pub(crate) async fn remove(&self, api: &str, kind: &str, id: &str) -> CloudResult<()> {
        let sql = "UPDATE sandbox_resources SET deleted_ms = CAST(?1 AS INTEGER)
                   WHERE kind = ?2 AND id = ?3 AND deleted_ms IS NULL";
        self.counted(api, sql, now_ms().to_string(), kind, id).await
    }

    /// Runs one statement on a resource and counts the call, in one transaction.
    async fn counted(
        &self,
        api: &str,
        sql: &str,
        value: String,
        kind: &str,
        id: &str,
    ) -> CloudResult<()> {
        let mut tx = self.writer.begin().await.map_err(|e| internal(api, e))?;
        sqlx::query(sql)
            .bind(value)
            .bind(kind)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| internal(api, e))?;
        bump(&mut tx, api).await?;
        tx.commit().await.map_err(|e| internal(api, e))?;
        Ok(())
    }

    pub(crate) async fn get(&self, kind: &str, id: &str) -> CloudResult<Option<Res>> {
        let row = sqlx::query(
            "SELECT id, data_json, created_ms, deleted_ms FROM sandbox_resources
             WHERE kind = ? AND id = ?",
        )
        .bind(kind)
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| internal(kind, e))?;
        row.map(res_of).transpose()
    }

    /// The newest resource with this name, including one being deleted.
    pub(crate) async fn by_name(&self, kind: &str, name: &str) -> CloudResult<Option<Res>> {
        let row = sqlx::query(
            "SELECT id, data_json, created_ms, deleted_ms FROM sandbox_resources
             WHERE kind = ? AND name = ? ORDER BY created_ms DESC, rowid DESC LIMIT 1",
        )
        .bind(kind)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| internal(kind, e))?;
        row.map(res_of).transpose()
    }

    /// Every resource of a kind ever made, deleted ones too (with their deletion time): the
    /// history a simulation replays.
    pub(crate) async fn history(&self, kind: &str) -> CloudResult<Vec<Res>> {
        let rows = sqlx::query(
            "SELECT id, data_json, created_ms, deleted_ms FROM sandbox_resources
             WHERE kind = ? ORDER BY created_ms, rowid",
        )
        .bind(kind)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| internal(kind, e))?;
        rows.into_iter().map(res_of).collect()
    }

    /// Live (not deleted) resources of a kind.
    pub(crate) async fn list(&self, kind: &str) -> CloudResult<Vec<Res>> {
        let rows = sqlx::query(
            "SELECT id, data_json, created_ms, deleted_ms FROM sandbox_resources
             WHERE kind = ? AND deleted_ms IS NULL ORDER BY created_ms, rowid",
        )
        .bind(kind)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| internal(kind, e))?;
        rows.into_iter().map(res_of).collect()
    }

    /// Where a resource is in its lifecycle, from the clock.
    pub(crate) fn life(&self, res: &Res, create_secs: f64, delete_secs: f64) -> Life {
        let now = now_ms();
        if let Some(deleted) = res.deleted_ms {
            return if self.simulated_secs(deleted, now) < delete_secs {
                Life::Deleting
            } else {
                Life::Gone
            };
        }
        let done = self.simulated_secs(res.created_ms, now) / create_secs.max(f64::EPSILON);
        if done >= 1.0 {
            Life::Ready
        } else {
            Life::Creating(done)
        }
    }

    pub(crate) fn simulated_secs(&self, from_ms: i64, to_ms: i64) -> f64 {
        (to_ms - from_ms).max(0) as f64 / 1000.0 * self.time_scale
    }
}

async fn bump(tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>, api: &str) -> CloudResult<()> {
    sqlx::query(
        "INSERT INTO sandbox_calls (api, accepted) VALUES (?, 1)
         ON CONFLICT(api) DO UPDATE SET accepted = accepted + 1",
    )
    .bind(api)
    .execute(&mut **tx)
    .await
    .map_err(|e| internal(api, e))?;
    Ok(())
}

fn res_of(row: sqlx::sqlite::SqliteRow) -> CloudResult<Res> {
    let data: String = row.get("data_json");
    Ok(Res {
        id: row.get("id"),
        data: serde_json::from_str(&data).map_err(|e| internal("sandbox", e))?,
        created_ms: row.get("created_ms"),
        deleted_ms: row.get("deleted_ms"),
    })
}

fn already_exists_code(service: &str) -> &'static str {
    match service {
        "eks" => "ResourceInUseException",
        "sagemaker" => "ResourceInUse",
        "iam" => "EntityAlreadyExists",
        "s3" => "BucketAlreadyOwnedByYou",
        "k8s" => "AlreadyExists",
        _ => "AlreadyExists",
    }
}

pub(crate) fn split_api(api: &str) -> (&str, &str) {
    api.split_once(':').unwrap_or(("sandbox", api))
}

/// A storage failure inside the simulation: reported as a retryable 5xx-like error.
fn internal(api: &str, e: impl std::fmt::Display) -> CloudError {
    let (service, op) = split_api(api);
    CloudError::new(service, op, "InternalFailure", e.to_string()).retryable()
}

pub(crate) fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// A random AWS-style id: `vpc-0a1b2c3d4e5f60718`.
pub(crate) fn new_id(prefix: &str) -> String {
    let n: u64 = rand::thread_rng().gen();
    format!("{prefix}-0{:016x}", n)
}

/// Whether a write failed on a UNIQUE constraint (a twin committed first).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
