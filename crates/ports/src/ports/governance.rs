//! HyperPod task governance as SageMaker keeps it: a cluster's scheduler config (priority
//! classes, fair share, idle-resource sharing) and its teams' compute quotas
//! (`CreateClusterSchedulerConfig`, `CreateComputeQuota` and their Describe/List/Update/Delete).
//! SageMaker turns them into Kueue objects on the cluster: per team the namespace
//! `hyperpod-ns-<team>` with its LocalQueue and ClusterQueue, per class a WorkloadPriorityClass.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::common::*;

/// The EKS add-on task governance runs on (Kueue and SageMaker's controllers for it).
pub const TASK_GOVERNANCE_ADDON: &str = "amazon-sagemaker-hyperpod-taskgovernance";
/// A team's namespace, as SageMaker names it.
pub fn team_namespace(team: &str) -> String {
    format!("hyperpod-ns-{team}")
}
/// The LocalQueue a team's workloads name (`kueue.x-k8s.io/queue-name`).
pub fn team_queue(team: &str) -> String {
    format!("hyperpod-ns-{team}-localqueue")
}
/// The ClusterQueue holding a team's quota.
pub fn team_cluster_queue(team: &str) -> String {
    format!("hyperpod-ns-{team}-clusterqueue")
}
/// The WorkloadPriorityClass a priority class of the policy becomes.
pub fn priority_label(class: &str) -> String {
    format!("{class}-priority")
}

/// One priority class of the cluster policy; workloads name it as `<name>-priority`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClass {
    /// Lower-case DNS label, at most 40 characters.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub name: String,
    /// 0 (lowest) to 100 (highest).
    #[schema(minimum = 0, maximum = 100)]
    pub weight: u8,
}

/// The cluster's scheduling policy (`SchedulerConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerPolicy {
    pub priority_classes: Vec<PriorityClass>,
    /// `FairShare`: idle compute is lent by the teams' fair-share weights (else first come,
    /// first served).
    pub fair_share: bool,
    /// `IdleResourceSharing`: compute no team was given is lent too.
    pub idle_resource_sharing: bool,
}

/// A scheduler config as DescribeClusterSchedulerConfig reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    pub id: String,
    pub arn: String,
    pub name: String,
    /// What an update names as its `TargetVersion`.
    pub version: i32,
    /// `Creating`, `Created`, `CreateFailed`, `Updating`, `Updated`, `Deleting`, …
    pub status: String,
    pub failure_reason: Option<String>,
    pub policy: SchedulerPolicy,
}

/// How a team shares compute it is not using (`ResourceSharingConfig.Strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum Sharing {
    Lend,
    DontLend,
    LendAndBorrow,
}

impl Sharing {
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Lend => "Lend",
            Sharing::DontLend => "DontLend",
            Sharing::LendAndBorrow => "LendAndBorrow",
        }
    }
}

/// Whether a team's higher-priority work may preempt its own lower-priority work
/// (`PreemptTeamTasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum Preempt {
    Never,
    LowerPriority,
}

impl Preempt {
    pub fn as_str(self) -> &'static str {
        match self {
            Preempt::Never => "Never",
            Preempt::LowerPriority => "LowerPriority",
        }
    }
}

/// A team's share of one instance type: whole instances or accelerators (GPUs, Neuron
/// devices), exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuotaResource {
    /// An instance type of the cluster's instance groups (`ml.g5.12xlarge`).
    #[schema(pattern = r"^ml\.[a-z0-9]+\.[a-z0-9]+$")]
    pub instance_type: String,
    #[schema(minimum = 1, maximum = 10000)]
    pub count: Option<u32>,
    #[schema(minimum = 1, maximum = 100000)]
    pub accelerators: Option<u32>,
}

/// A team's compute quota (`ComputeQuotaConfig` with its target's fair-share weight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamQuota {
    pub resources: Vec<QuotaResource>,
    pub sharing: Sharing,
    /// Percent of idle compute the team may borrow (1–500); with `LendAndBorrow` only.
    pub borrow_limit: Option<u32>,
    pub preempt: Preempt,
    pub fair_share_weight: u8,
    /// `ActivationState` `Enabled`.
    pub active: bool,
}

/// The most instance types one compute quota may name (botocore's
/// `ComputeQuotaResourceConfigList`, `max: 15`, in `sagemaker/2017-07-24/service-2.json`).
pub const MAX_QUOTA_RESOURCES: usize = 15;

impl TeamQuota {
    /// The same quota as SageMaker may report it back: its resources in any order, a borrow
    /// limit only where the team borrows (SageMaker may fill one in for the others).
    pub fn same_as(&self, other: &TeamQuota) -> bool {
        fn normal(q: &TeamQuota) -> TeamQuota {
            let mut n = q.clone();
            n.resources
                .sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
            if n.sharing != Sharing::LendAndBorrow {
                n.borrow_limit = None;
            }
            n
        }
        normal(self) == normal(other)
    }
}

impl SchedulerPolicy {
    /// Its priority classes highest weight first (then by name): SageMaker lists them in no
    /// promised order, and a person reads them best this way.
    pub fn by_weight(&self) -> Vec<PriorityClass> {
        let mut c = self.priority_classes.clone();
        c.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
        c
    }

    /// The same policy whatever order its priority classes are listed in (a set, by name).
    pub fn same_as(&self, other: &SchedulerPolicy) -> bool {
        let classes = |p: &SchedulerPolicy| {
            let mut c = p.priority_classes.clone();
            c.sort_by(|a, b| a.name.cmp(&b.name));
            c
        };
        classes(self) == classes(other)
            && self.fair_share == other.fair_share
            && self.idle_resource_sharing == other.idle_resource_sharing
    }
}

/// A compute quota as ListComputeQuotas reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeQuota {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub team: String,
    pub version: i32,
    pub status: String,
    pub failure_reason: Option<String>,
    pub quota: TeamQuota,
}

/// Whether a scheduler resource's status is an end state, and whether a failed one.
pub fn scheduler_status_done(status: &str) -> Option<bool> {
    match status {
        "Created" | "Updated" | "Deleted" => Some(true),
        s if s.ends_with("Failed") => Some(false),
        _ => None,
    }
}

#[async_trait]
pub trait Governance: Send + Sync {
    /// The cluster's scheduler configs that are not deleted (SageMaker keeps one per cluster).
    async fn scheduler_configs(&self, cluster_arn: &str) -> CloudResult<Vec<SchedulerConfig>>;
    /// Starts creating one; returns its id.
    async fn create_scheduler_config(
        &self,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
    ) -> CloudResult<String>;
    async fn update_scheduler_config(
        &self,
        id: &str,
        version: i32,
        policy: &SchedulerPolicy,
    ) -> CloudResult<()>;
    async fn delete_scheduler_config(&self, id: &str) -> CloudResult<()>;
    /// The cluster's compute quotas that are not deleted.
    async fn compute_quotas(&self, cluster_arn: &str) -> CloudResult<Vec<ComputeQuota>>;
    /// Starts creating a team's quota; returns its id.
    async fn create_compute_quota(
        &self,
        name: &str,
        cluster_arn: &str,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<String>;
    /// `team` is the quota's team (the target SageMaker takes back whole with its weight).
    async fn update_compute_quota(
        &self,
        id: &str,
        version: i32,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<()>;
    async fn delete_compute_quota(&self, id: &str) -> CloudResult<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(types: &[&str], sharing: Sharing, borrow: Option<u32>) -> TeamQuota {
        TeamQuota {
            resources: types
                .iter()
                .map(|t| QuotaResource {
                    instance_type: (*t).into(),
                    count: Some(1),
                    accelerators: None,
                })
                .collect(),
            sharing,
            borrow_limit: borrow,
            preempt: Preempt::LowerPriority,
            fair_share_weight: 10,
            active: true,
        }
    }

    #[test]
    fn a_quota_reported_back_in_another_order_or_with_a_filled_default_is_the_same() {
        let asked = quota(
            &["ml.g5.8xlarge", "ml.p5.48xlarge"],
            Sharing::DontLend,
            None,
        );
        let reported = quota(
            &["ml.p5.48xlarge", "ml.g5.8xlarge"],
            Sharing::DontLend,
            Some(50),
        );
        assert!(asked.same_as(&reported));
        let borrowing = quota(&["ml.g5.8xlarge"], Sharing::LendAndBorrow, Some(100));
        assert!(!borrowing.same_as(&quota(&["ml.g5.8xlarge"], Sharing::LendAndBorrow, Some(50))));
        let class = |n: &str, w: u8| PriorityClass {
            name: n.into(),
            weight: w,
        };
        let policy = |c: Vec<PriorityClass>| SchedulerPolicy {
            priority_classes: c,
            fair_share: true,
            idle_resource_sharing: false,
        };
        let a = policy(vec![class("training", 50), class("inference", 90)]);
        let b = policy(vec![class("inference", 90), class("training", 50)]);
        assert!(a.same_as(&b));
        assert_eq!(a.by_weight()[0].name, "inference");
    }
}
