//! SageMaker HyperPod: clusters, instance groups, nodes and their settings.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::common::*;

/// How the instances of a group are paid for. Immutable for the group's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum Capacity {
    OnDemand,
    Spot,
    TrainingPlan {
        #[serde(rename = "trainingPlanArn")]
        arn: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupSpec {
    pub name: String,
    pub instance_type: String,
    pub instance_count: u32,
    pub execution_role_arn: String,
    /// `s3://` prefix holding the lifecycle scripts.
    pub lifecycle_source_s3_uri: String,
    pub lifecycle_on_create: String,
    pub threads_per_core: u8,
    pub ebs_volume_gb: u32,
    /// `InstanceStress`, `InstanceConnectivity`.
    pub deep_health_checks: Vec<String>,
    pub capacity: Capacity,
    pub subnet_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
    /// `efa` (EFA with ENA) or `efa-only`; `None` is a standard interface. Fixed for the
    /// group's life. Absent in records written before it existed.
    #[serde(default)]
    pub network_interface: Option<String>,
    /// When SageMaker rolls new HyperPod software onto the group by itself
    /// (`ScheduledUpdateConfig`); none: only when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_update: Option<ScheduledUpdate>,
}

/// A group's software update schedule (`ScheduledUpdateConfig`): the cron expression and the
/// rolling policy each scheduled update follows (`DeploymentConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledUpdate {
    pub schedule_expression: String,
    #[schema(value_type = Object)]
    pub batch: UpdateBatch,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
    #[serde(default)]
    pub rollback_alarms: Vec<String>,
}

/// Whether `s` is a `ScheduleExpression` SageMaker takes: `cron(minutes hours day-of-month month
/// day-of-week year)`, each field as the `AWS::SageMaker::Cluster` `ScheduledUpdateConfig`
/// pattern of the CloudFormation Template Reference allows it (1 to 256 characters).
pub fn is_schedule_expression(s: &str) -> bool {
    let Some(inner) = s.strip_prefix("cron(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let f: Vec<&str> = inner.split(' ').collect();
    let num = |v: &str, lo: u32, hi: u32, two: bool| {
        (v.len() == 1 || (two && v.len() == 2))
            && v.bytes().all(|b| b.is_ascii_digit())
            && v.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n))
    };
    let dow = |v: &str| {
        ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN", "?", "L"].contains(&v)
            || num(v, 1, 7, false)
            || v.split_once('#')
                .is_some_and(|(d, n)| num(d, 1, 7, false) && num(n, 1, 5, false))
            || v.strip_suffix('L').is_some_and(|d| num(d, 1, 7, false))
    };
    s.len() <= 256
        && f.len() == 6
        && (f[0].is_empty() || num(f[0], 0, 59, true))
        && num(f[1], 0, 23, true)
        && (f[2] == "?" || num(f[2], 1, 31, true) && f[2] != "00")
        && (f[3].is_empty()
            || f[3] == "*"
            || num(f[3], 1, 12, true) && f[3] != "00"
            || f[3]
                .strip_prefix("*/")
                .is_some_and(|n| num(n, 1, 12, true) && !n.starts_with('0')))
        && dow(f[4])
        && (f[5].is_empty()
            || f[5] == "*"
            || f[5].len() == 4 && f[5].starts_with("20") && num(&f[5][2..], 20, 99, true))
}

#[cfg(test)]
mod schedule_tests {
    #[test]
    fn a_schedule_is_the_cron_form_sagemaker_takes() {
        for ok in [
            "cron(0 3 ? * 2#1 *)",
            "cron(30 2 15 */3 ? 2027)",
            "cron(0 0 1 1 7L *)",
        ] {
            assert!(super::is_schedule_expression(ok), "{ok}");
        }
        for bad in [
            "0 3 * * *",
            "cron(0 3 * * ?)",
            "cron(60 3 ? * MON *)",
            "cron(0 24 ? * MON *)",
            "cron(0 3 ? * FUN *)",
            "rate(1 day)",
            "cron(0 3 ? * MON 1999)",
        ] {
            assert!(!super::is_schedule_expression(bad), "{bad}");
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateHyperPodCluster {
    pub name: String,
    pub eks_cluster_arn: String,
    /// Always `Automatic` for clusters we create.
    pub node_recovery: String,
    pub instance_groups: Vec<InstanceGroupSpec>,
    pub tags: Tags,
    /// `NodeProvisioningMode` `Continuous` (see [`continuous_provisioning`]).
    #[serde(default)]
    pub continuous_provisioning: bool,
}

/// Whether a cluster with these groups must run under continuous node provisioning: AWS runs
/// Spot capacity on HyperPod through it (desired counts provisioned in the background, retried
/// until reached).
pub fn continuous_provisioning(groups: &[InstanceGroupSpec]) -> bool {
    groups.iter().any(|g| g.capacity == Capacity::Spot)
}

/// Instances a software update takes out of service at once (`DeploymentConfig`'s
/// `RollingUpdatePolicy.MaximumBatchSize`, `INSTANCE_COUNT`), and rolls back at once.
pub const ROLLING_BATCH: i32 = 1;

/// How a software update rolls: `UpdateClusterSoftware`'s `InstanceGroups`, `DeploymentConfig`
/// (`RollingUpdatePolicy`, `WaitIntervalInSeconds`, `AutoRollbackConfiguration`) and `ImageId`,
/// as the SageMaker API Reference gives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SoftwareUpdate {
    /// The groups updated; empty: every group.
    #[serde(default)]
    pub instance_groups: Vec<String>,
    /// How many nodes at a time, forward and when rolled back (`MaximumBatchSize`,
    /// `RollbackMaximumBatchSize`).
    pub batch: UpdateBatch,
    /// Seconds between batches (`WaitIntervalInSeconds`, 0–3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
    /// CloudWatch alarms that roll the update back when they fire (`AutoRollbackConfiguration`,
    /// 1–10 names).
    #[serde(default)]
    pub rollback_alarms: Vec<String>,
    /// `default` (HyperPod's latest image) or an AMI of the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}

/// The Kubernetes versions of the EKS clusters HyperPod orchestrates with ("Getting started with
/// Amazon EKS support in SageMaker HyperPod", Kubernetes version support: 1.28 to 1.34).
pub const HYPERPOD_KUBERNETES_VERSIONS: &[&str] =
    &["1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34"];

/// Whether `id` is an EC2 image ID: `ami-` and 8 or 17 hexadecimal digits.
pub fn is_ami_id(id: &str) -> bool {
    id.strip_prefix("ami-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17) && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// A batch of a rolling update: a node count or a percentage of the group (`CapacitySizeConfig`:
/// `INSTANCE_COUNT` or `CAPACITY_PERCENTAGE`, at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UpdateBatch {
    Instances(u32),
    Percent(u32),
}

impl Default for SoftwareUpdate {
    /// Every group, [`ROLLING_BATCH`] node at a time, HyperPod's latest software.
    fn default() -> Self {
        Self {
            instance_groups: Vec::new(),
            batch: UpdateBatch::Instances(ROLLING_BATCH.unsigned_abs()),
            wait_seconds: None,
            rollback_alarms: Vec::new(),
            image_id: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HyperPodStatus {
    Creating,
    InService,
    Updating,
    Deleting,
    Failed,
    RollingBack,
    SystemUpdating,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupStatus {
    pub name: String,
    pub instance_type: String,
    pub target_count: u32,
    pub current_count: u32,
    /// The group's settings as HyperPod describes them (role, lifecycle scripts, storage,
    /// health checks, capacity, placement): the source of truth for a group this control
    /// plane did not make. `None` where the source reports only counts.
    #[serde(default)]
    pub spec: Option<InstanceGroupSpec>,
    /// Its software as `DescribeCluster` reports it.
    #[serde(default)]
    pub software: GroupSoftwareState,
}

/// A group's software (`ClusterInstanceGroupDetails`): the HyperPod release its nodes run and
/// the one they would get, whether a newer one exists, and how its last update went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSoftwareState {
    /// `CurrentImageReleaseVersion`.
    pub current_release: Option<String>,
    /// `DesiredImageReleaseVersion`: differs from the current one while an update is pending.
    pub desired_release: Option<String>,
    /// `ImageVersionStatus`: `UpToDate`, `UpdateAvailable`, `SecurityUpdateRequired`,
    /// `EndOfLife`.
    pub image_status: Option<String>,
    /// `SoftwareUpdateStatus`: `Pending`, `InProgress`, `Succeeded`, `RollbackInProgress`,
    /// `RollbackComplete`, `Failed`.
    pub update_status: Option<String>,
}

impl GroupSoftwareState {
    /// Whether its last update was rolled back or failed.
    pub fn rolled_back(&self) -> bool {
        matches!(
            self.update_status.as_deref(),
            Some("RollbackComplete" | "RollbackInProgress" | "Failed")
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HyperPodCluster {
    pub name: String,
    pub arn: String,
    pub status: HyperPodStatus,
    pub failure_message: Option<String>,
    pub instance_groups: Vec<InstanceGroupStatus>,
    /// Managed tiered checkpointing (`TieredStorageConfig`), when the cluster reports one.
    pub tiered_storage: Option<TieredStorage>,
    /// Managed autoscaling (HyperPod-managed Karpenter), when the cluster reports it.
    #[serde(default)]
    pub autoscaling: Option<AutoScaling>,
    /// `NodeProvisioningMode` is `Continuous`: only then does SageMaker keep the cluster's
    /// events (`ListClusterEvents`, botocore's documentation of the operation).
    #[serde(default)]
    pub continuous_provisioning: bool,
}

/// The cluster's `AutoScaling` setting as `DescribeCluster` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoScaling {
    pub enabled: bool,
    /// `InService`, `Creating`, `Updating`, `Failed`, ...
    pub status: String,
    pub failure_message: Option<String>,
    /// The role HyperPod assumes to add and remove nodes.
    pub cluster_role_arn: Option<String>,
}

/// `TieredStorageConfig` of a HyperPod cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TieredStorage {
    pub enabled: bool,
    /// Share of each instance's memory given to checkpoints.
    pub memory_percent: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNode {
    pub instance_id: String,
    pub instance_group: String,
    pub instance_type: String,
    /// `Pending` | `Running` | `ShuttingDown` | `Failure` ...
    pub status: String,
    pub launch_time: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodePage {
    pub nodes: Vec<ClusterNode>,
    pub next_token: Option<String>,
}

/// A node operation, in escalation order after investigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeAction {
    Reboot,
    Replace,
    Delete,
}

/// Per-node outcome of a batch node operation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeActionResult {
    pub successful: Vec<String>,
    /// (node id, error code, message)
    pub failed: Vec<(String, String, String)>,
}

/// A SageMaker training plan (reserved capacity) the account holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingPlan {
    pub arn: String,
    pub name: String,
    /// `Pending`, `Active`, `Scheduled`, `Expired`, `Failed`.
    pub status: String,
    pub total_instance_count: u32,
    pub available_instance_count: u32,
    /// Where and what the plan reserves (its reserved-capacity details): the AZ of a group
    /// using the plan comes from here.
    #[serde(default)]
    pub reservations: Vec<Reservation>,
    /// What the plan cost up front (a decimal string, as SageMaker answers it), when known.
    #[serde(default)]
    pub upfront_fee: Option<String>,
    /// The fee's currency (`USD`).
    #[serde(default)]
    pub currency_code: Option<String>,
    /// How long the plan reserves its instances, in hours.
    #[serde(default)]
    pub duration_hours: Option<f64>,
}

impl TrainingPlan {
    /// USD per instance-hour: the up-front fee over the plan's instance-hours, when the plan
    /// says all three (and in dollars).
    pub fn hourly_usd(&self) -> Option<f64> {
        let fee: f64 = self.upfront_fee.as_deref()?.parse().ok()?;
        let hours = self.duration_hours? * f64::from(self.total_instance_count);
        (self.currency_code.as_deref() == Some("USD") && hours > 0.0 && fee >= 0.0)
            .then(|| fee / hours)
    }
}

/// One reserved capacity of a training plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub availability_zone: String,
    pub instance_type: String,
    pub instance_count: u32,
}

#[async_trait]
pub trait HyperPod: Send + Sync {
    /// Returns the new cluster's ARN.
    async fn create_cluster(&self, req: &CreateHyperPodCluster) -> CloudResult<String>;
    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<HyperPodCluster>>;
    async fn list_cluster_nodes(
        &self,
        name: &str,
        next_token: Option<String>,
    ) -> CloudResult<NodePage>;
    async fn delete_cluster(&self, name: &str) -> CloudResult<()>;
    /// Tags the cluster `arn` (`AddTags`; an imported cluster gets the product's cluster tag).
    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()>;
    /// Replaces the cluster's instance groups. Every group must be sent, in the accepted shape:
    /// a group left out of the request is not kept as it was.
    /// `continuous` also sets `NodeProvisioningMode` `Continuous` (needed once a group is Spot).
    async fn update_cluster(
        &self,
        name: &str,
        groups: &[InstanceGroupSpec],
        continuous: bool,
    ) -> CloudResult<()>;
    /// New HyperPod software (or `image_id`) on the update's groups, rolling in its batches.
    async fn update_cluster_software(&self, name: &str, update: &SoftwareUpdate)
        -> CloudResult<()>;
    /// Removes whole instance groups (their nodes are terminated).
    async fn delete_instance_groups(&self, name: &str, groups: &[String]) -> CloudResult<()>;
    /// `UpdateCluster` with only `TieredStorageConfig` (mode and memory share).
    async fn set_tiered_storage(&self, name: &str, config: TieredStorage) -> CloudResult<()>;
    /// `UpdateCluster` with only `AutoScaling` (Karpenter), plus the cluster role and
    /// continuous node provisioning when enabling.
    async fn set_autoscaling(&self, name: &str, cluster_role_arn: Option<&str>) -> CloudResult<()>;
    async fn node_action(
        &self,
        name: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> CloudResult<NodeActionResult>;
    async fn list_training_plans(&self) -> CloudResult<Vec<TrainingPlan>>;
    /// One node as `DescribeClusterNode` has it (its status and HyperPod's message about it);
    /// `None` when the cluster has no such node.
    async fn describe_cluster_node(
        &self,
        name: &str,
        node_id: &str,
    ) -> CloudResult<Option<NodeDetail>>;
    /// The cluster's events, newest first, at most `limit`: of one node when `node_id` is given
    /// (`ListClusterEvents`).
    async fn list_cluster_events(
        &self,
        name: &str,
        node_id: Option<&str>,
        limit: usize,
    ) -> CloudResult<Vec<ClusterEvent>>;
}

/// A node as `DescribeClusterNode` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDetail {
    pub instance_id: String,
    pub instance_group: String,
    pub instance_type: String,
    /// `Pending` | `Running` | `ShuttingDown` | `SystemUpdating` | `DeepHealthCheckInProgress`
    /// | `Failure` ...
    pub status: String,
    /// HyperPod's words about that status (why a node failed), when it has any.
    pub message: Option<String>,
    pub launch_time: Option<String>,
    pub last_software_update_time: Option<String>,
}

/// One `ListClusterEvents` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEvent {
    /// RFC 3339.
    pub time: String,
    /// `Info` | `Warn` | `Error`.
    pub level: String,
    /// `Cluster` | `InstanceGroup` | `Instance`.
    pub resource_type: String,
    pub instance_group: Option<String>,
    pub instance_id: Option<String>,
    pub description: String,
}
