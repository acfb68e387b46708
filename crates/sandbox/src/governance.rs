//! Simulated task governance: scheduler configs and compute quotas kept per HyperPod cluster,
//! refused where SageMaker refuses them (one config per cluster, one quota per team, instance
//! types of the cluster only, the documented ranges), and ending `CreateFailed` when the task
//! governance add-on is not active on the cluster's EKS cluster — what AWS's walkthrough warns
//! of for a config made before the add-on is ready.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::hyperpod::hyperpod_arn;
use super::{new_id, now_ms, Life, Res, Sandbox, ACCOUNT, REGION};
use cloud::*;

/// Fault key: the next config or quota created ends `CreateFailed` as if the add-on were not
/// ready yet (`sagemaker:GovernanceNotReady=1`), the race AWS's walkthrough describes.
pub(super) const NOT_READY: &str = "sagemaker:GovernanceNotReady";
/// Simulated seconds a create or an update takes.
const SETTLE: f64 = 30.0;

/// The instance types of a HyperPod cluster's groups, as its record holds them.
pub(super) fn instance_types(record: &Res) -> Vec<String> {
    record.data["instanceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["instanceType"].as_str().map(str::to_string))
        .collect()
}

fn invalid(op: &str, message: impl Into<String>) -> CloudError {
    CloudError::new("sagemaker", op, "ValidationException", message)
}

fn conflict(op: &str, message: impl Into<String>) -> CloudError {
    CloudError::new("sagemaker", op, "ConflictException", message)
}

impl Sandbox {
    /// The HyperPod cluster of an ARN: (its EKS cluster's name, its instance types).
    async fn governed(&self, cluster_arn: &str, op: &str) -> CloudResult<(String, Vec<String>)> {
        for r in self.list("hyperpod-cluster").await? {
            if hyperpod_arn(&r.id) != cluster_arn {
                continue;
            }
            let eks = r.data["eksClusterArn"]
                .as_str()
                .and_then(|a| a.rsplit('/').next())
                .unwrap_or_default()
                .to_string();
            return Ok((eks, instance_types(&r)));
        }
        Err(CloudError::new(
            "sagemaker",
            op,
            "ResourceNotFound",
            format!("Cluster {cluster_arn} not found"),
        ))
    }

    /// Whether the task governance add-on answers on the cluster: what a config's creation
    /// needs to go through.
    async fn governance_ready(&self, eks: &str) -> CloudResult<bool> {
        let raced = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(NOT_READY)
            > 0;
        Ok(!raced
            && Eks::describe_addon(self, eks, TASK_GOVERNANCE_ADDON)
                .await?
                .is_some_and(|a| a.status == AddonStatus::Active))
    }

    fn settled_status(&self, r: &Res) -> String {
        if r.deleted_ms.is_some() {
            return "Deleting".into();
        }
        if r.data["failureReason"].is_string() {
            return "CreateFailed".into();
        }
        let version = r.data["version"].as_i64().unwrap_or(1);
        if let Life::Creating(_) = self.life(r, SETTLE, 1.0) {
            return "Creating".into();
        }
        if version > 1 {
            let since = self.simulated_secs(r.data["updatedMs"].as_i64().unwrap_or(0), now_ms());
            return if since < SETTLE {
                "Updating"
            } else {
                "Updated"
            }
            .into();
        }
        "Created".into()
    }

    /// What SageMaker lists of a cluster's configs or quotas: the live ones, and the ones still
    /// `Deleting` (for [`SETTLE`] simulated seconds after their deletion). SageMaker keeps one
    /// config per cluster and one quota per team, and a predecessor still `Deleting` counts:
    /// a create then is refused (ConflictException) — the delete must end first.
    async fn listed(&self, kind: &str, cluster_arn: &str) -> CloudResult<Vec<Res>> {
        Ok(self
            .history(kind)
            .await?
            .into_iter()
            .filter(|r| r.data["clusterArn"] == cluster_arn)
            .filter(|r| r.deleted_ms.is_none() || self.life(r, SETTLE, SETTLE) == Life::Deleting)
            .collect())
    }

    async fn of_cluster(&self, kind: &str, cluster_arn: &str) -> CloudResult<Vec<Res>> {
        Ok(self
            .list(kind)
            .await?
            .into_iter()
            .filter(|r| r.data["clusterArn"] == cluster_arn)
            .collect())
    }

    async fn bump_version(
        &self,
        api: &str,
        kind: &str,
        id: &str,
        version: i32,
        patch: Value,
    ) -> CloudResult<()> {
        let op = api.split_once(':').map_or(api, |(_, o)| o);
        let Some(r) = self.get(kind, id).await?.filter(|r| r.deleted_ms.is_none()) else {
            return Err(CloudError::new(
                "sagemaker",
                op,
                "ResourceNotFound",
                format!("{id} not found"),
            ));
        };
        let current = r.data["version"].as_i64().unwrap_or(1);
        if i64::from(version) != current {
            return Err(conflict(
                op,
                format!("TargetVersion {version} is not the current version {current}"),
            ));
        }
        let status = self.settled_status(&r);
        if !matches!(status.as_str(), "Created" | "Updated") {
            return Err(conflict(
                op,
                format!("{id} is {status}; only a Created or Updated resource can be updated"),
            ));
        }
        let mut data = r.data.clone();
        if let (Some(d), Some(p)) = (data.as_object_mut(), patch.as_object()) {
            d.extend(p.clone());
        }
        data["version"] = json!(current + 1);
        data["updatedMs"] = json!(now_ms());
        self.update(api, kind, id, &data).await
    }
}

/// A compute quota's earlier versions, oldest first.
fn stored_history(r: Option<&Res>) -> Vec<Value> {
    r.and_then(|r| r.data["history"].as_array().cloned())
        .unwrap_or_default()
}

fn check_policy(op: &str, p: &SchedulerPolicy) -> CloudResult<()> {
    if p.priority_classes.len() > 10 {
        return Err(invalid(op, "PriorityClasses: at most 10"));
    }
    let mut names = std::collections::BTreeSet::new();
    for c in &p.priority_classes {
        if c.weight > 100 || c.name.is_empty() || c.name.len() > 40 || !names.insert(&c.name) {
            return Err(invalid(
                op,
                format!("PriorityClass {} is invalid or repeated", c.name),
            ));
        }
    }
    Ok(())
}

fn check_quota(op: &str, q: &TeamQuota, types: &[String]) -> CloudResult<()> {
    if q.resources.is_empty() {
        return Err(invalid(op, "ComputeQuotaResources must not be empty"));
    }
    if q.resources.len() > MAX_QUOTA_RESOURCES {
        return Err(invalid(
            op,
            format!("1 validation error detected: Value at 'computeQuotaConfig.computeQuotaResources' failed to satisfy constraint: Member must have length less than or equal to {MAX_QUOTA_RESOURCES}"),
        ));
    }
    for r in &q.resources {
        if !types.contains(&r.instance_type) {
            return Err(invalid(
                op,
                format!("InstanceType {} is not in the cluster", r.instance_type),
            ));
        }
        if r.count.is_some() == r.accelerators.is_some() {
            return Err(invalid(
                op,
                "give Count or Accelerators for each instance type",
            ));
        }
    }
    match (q.sharing, q.borrow_limit) {
        (Sharing::LendAndBorrow, Some(b)) if !(1..=500).contains(&b) => {
            Err(invalid(op, "BorrowLimit must be 1 to 500"))
        }
        (Sharing::Lend | Sharing::DontLend, Some(_)) => {
            Err(invalid(op, "BorrowLimit applies to LendAndBorrow only"))
        }
        _ if q.fair_share_weight > 100 => Err(invalid(op, "FairShareWeight must be 0 to 100")),
        _ => Ok(()),
    }
}

/// A policy as SageMaker reports it back: its priority classes in an order of its own (the
/// API promises none), so a reader compares them as a set.
fn reported_policy(mut p: SchedulerPolicy) -> SchedulerPolicy {
    p.priority_classes.sort_by(|a, b| b.name.cmp(&a.name));
    p
}

/// A quota as SageMaker reports it back: its resources in an order of its own, and the
/// service's default borrow limit (`BorrowLimit`, 100 in the sandbox) where a borrowing team
/// was given none — so a reader compares what it asked for, normalised, not field by field.
fn reported_quota(mut q: TeamQuota) -> TeamQuota {
    q.resources
        .sort_by(|a, b| b.instance_type.cmp(&a.instance_type));
    if q.sharing == Sharing::LendAndBorrow && q.borrow_limit.is_none() {
        q.borrow_limit = Some(100);
    }
    q
}

fn config_of(s: &Sandbox, r: &Res) -> SchedulerConfig {
    SchedulerConfig {
        id: r.id.clone(),
        arn: format!(
            "arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster-scheduler-config/{}",
            r.id
        ),
        name: r.data["name"].as_str().unwrap_or_default().into(),
        version: r.data["version"].as_i64().unwrap_or(1) as i32,
        status: s.settled_status(r),
        failure_reason: r.data["failureReason"].as_str().map(str::to_string),
        policy: reported_policy(serde_json::from_value(r.data["policy"].clone()).unwrap_or(
            SchedulerPolicy {
                priority_classes: vec![],
                fair_share: true,
                idle_resource_sharing: true,
            },
        )),
    }
}

fn not_ready(eks: &str) -> String {
    format!("the {TASK_GOVERNANCE_ADDON} add-on is not active on EKS cluster {eks}")
}

#[async_trait]
impl Governance for Sandbox {
    async fn scheduler_configs(&self, cluster_arn: &str) -> CloudResult<Vec<SchedulerConfig>> {
        self.gate("sagemaker:ListClusterSchedulerConfigs", false)
            .await?;
        let rows = self.listed("scheduler-config", cluster_arn).await?;
        Ok(rows.iter().map(|r| config_of(self, r)).collect())
    }

    async fn create_scheduler_config(
        &self,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
    ) -> CloudResult<String> {
        let (api, op) = (
            "sagemaker:CreateClusterSchedulerConfig",
            "CreateClusterSchedulerConfig",
        );
        self.gate(api, true).await?;
        let (eks, _) = self.governed(cluster_arn, op).await?;
        check_policy(op, policy)?;
        if !self
            .listed("scheduler-config", cluster_arn)
            .await?
            .is_empty()
        {
            return Err(conflict(
                op,
                format!("cluster {cluster_arn} already has a scheduler config"),
            ));
        }
        let id = new_id("csc");
        let mut data =
            json!({"name": name, "clusterArn": cluster_arn, "policy": policy, "version": 1});
        if !self.governance_ready(&eks).await? {
            data["failureReason"] = json!(not_ready(&eks));
        }
        self.create(api, "scheduler-config", &id, Some(name), &data)
            .await?;
        Ok(id)
    }

    async fn update_scheduler_config(
        &self,
        id: &str,
        version: i32,
        policy: &SchedulerPolicy,
    ) -> CloudResult<()> {
        let api = "sagemaker:UpdateClusterSchedulerConfig";
        self.gate(api, true).await?;
        check_policy("UpdateClusterSchedulerConfig", policy)?;
        self.bump_version(
            api,
            "scheduler-config",
            id,
            version,
            json!({"policy": policy}),
        )
        .await
    }

    async fn delete_scheduler_config(&self, id: &str) -> CloudResult<()> {
        let api = "sagemaker:DeleteClusterSchedulerConfig";
        self.gate(api, true).await?;
        match self.get("scheduler-config", id).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "scheduler-config", id).await,
            _ => Ok(()),
        }
    }

    async fn compute_quotas(&self, cluster_arn: &str) -> CloudResult<Vec<ComputeQuota>> {
        self.gate("sagemaker:ListComputeQuotas", false).await?;
        let rows = self.listed("compute-quota", cluster_arn).await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(ComputeQuota {
                    id: r.id.clone(),
                    arn: format!(
                        "arn:aws:sagemaker:{REGION}:{ACCOUNT}:compute-quota/{}",
                        r.id
                    ),
                    name: r.data["name"].as_str()?.into(),
                    team: r.data["team"].as_str()?.into(),
                    version: r.data["version"].as_i64().unwrap_or(1) as i32,
                    status: self.settled_status(r),
                    failure_reason: r.data["failureReason"].as_str().map(str::to_string),
                    quota: reported_quota(serde_json::from_value(r.data["quota"].clone()).ok()?),
                })
            })
            .collect())
    }

    async fn create_compute_quota(
        &self,
        name: &str,
        cluster_arn: &str,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<String> {
        let (api, op) = ("sagemaker:CreateComputeQuota", "CreateComputeQuota");
        self.gate(api, true).await?;
        let (eks, types) = self.governed(cluster_arn, op).await?;
        check_quota(op, quota, &types)?;
        let existing = self.listed("compute-quota", cluster_arn).await?;
        if existing
            .iter()
            .any(|r| r.data["team"] == team || r.data["name"] == name)
        {
            return Err(conflict(
                op,
                format!("team {team} already has a compute quota on this cluster"),
            ));
        }
        let id = new_id("cq");
        let mut data = json!({"name": name, "clusterArn": cluster_arn, "team": team,
                              "quota": quota, "version": 1});
        if !self.governance_ready(&eks).await? {
            data["failureReason"] = json!(not_ready(&eks));
        }
        self.create(api, "compute-quota", &id, Some(name), &data)
            .await?;
        Ok(id)
    }

    async fn update_compute_quota(
        &self,
        id: &str,
        version: i32,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<()> {
        let (api, op) = ("sagemaker:UpdateComputeQuota", "UpdateComputeQuota");
        self.gate(api, true).await?;
        let stored = self.get("compute-quota", id).await?;
        // A quota's team is fixed: its target comes back whole, with the same team name.
        if let Some(r) = stored.as_ref().filter(|r| r.data["team"] != team) {
            return Err(invalid(
                op,
                format!(
                    "ComputeQuotaTarget.TeamName cannot change from {}",
                    r.data["team"]
                ),
            ));
        }
        let cluster_arn = stored
            .as_ref()
            .map(|r| {
                r.data["clusterArn"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default();
        let (_, types) = self.governed(&cluster_arn, op).await?;
        check_quota(op, quota, &types)?;
        // Kueue keeps what the old quota admitted: the sandbox's replay needs when it changed.
        let mut history = stored_history(stored.as_ref());
        if let Some(r) = &stored {
            history.push(json!({"untilMs": now_ms(), "quota": r.data["quota"]}));
        }
        self.bump_version(
            api,
            "compute-quota",
            id,
            version,
            json!({"quota": quota, "history": history}),
        )
        .await
    }

    async fn delete_compute_quota(&self, id: &str) -> CloudResult<()> {
        let api = "sagemaker:DeleteComputeQuota";
        self.gate(api, true).await?;
        match self.get("compute-quota", id).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "compute-quota", id).await,
            _ => Ok(()),
        }
    }
}

/// What Kueue runs on a governed cluster: the teams whose quota is in force (created or being
/// updated, activation enabled) and the scheduling policy, if its config is in force.
pub(super) struct InForce {
    /// Team, its quota, and when its ClusterQueue was made.
    pub quotas: Vec<(String, TeamQuota, i64)>,
    /// Each team's quotas before its latest changes: until when (wall ms) each held.
    pub earlier: std::collections::HashMap<String, Vec<(i64, TeamQuota)>>,
    pub policy: Option<SchedulerPolicy>,
}

impl Sandbox {
    /// The cluster's quotas and policy as its Kueue objects stand now, read without a
    /// SageMaker call (Kueue reads its own objects, not the API).
    pub(super) async fn in_force(&self, cluster_arn: &str) -> CloudResult<InForce> {
        let live = |s: &str| matches!(s, "Created" | "Updated" | "Updating");
        let mut quotas = Vec::new();
        let mut earlier = std::collections::HashMap::new();
        for r in self.of_cluster("compute-quota", cluster_arn).await? {
            let Ok(quota) = serde_json::from_value::<TeamQuota>(r.data["quota"].clone()) else {
                continue;
            };
            if let (true, Some(team)) = (
                live(&self.settled_status(&r)) && quota.active,
                r.data["team"].as_str(),
            ) {
                let history: Vec<(i64, TeamQuota)> = r.data["history"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| {
                        Some((
                            h["untilMs"].as_i64()?,
                            serde_json::from_value(h["quota"].clone()).ok()?,
                        ))
                    })
                    .collect();
                earlier.insert(team.to_string(), history);
                quotas.push((team.to_string(), quota, r.created_ms));
            }
        }
        let policy = self
            .of_cluster("scheduler-config", cluster_arn)
            .await?
            .iter()
            .find(|r| live(&self.settled_status(r)))
            .map(|r| config_of(self, r).policy);
        Ok(InForce {
            quotas,
            earlier,
            policy,
        })
    }
}
