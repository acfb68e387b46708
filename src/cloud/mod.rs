//! Ports: the traits through which the domain reaches AWS and Kubernetes.
//!
//! ```text
//!   service/, ops/  ──►  Cloud { network, eks, hyperpod, iam, objects, quotas, kube }
//!                              │
//!                 ┌────────────┼─────────────┐
//!              aws/ (SDK)   kube/ (kube-rs)  sandbox/ (in-process, SQLite-backed)
//! ```
//!
//! The shapes follow the real APIs (EC2, EKS, SageMaker, IAM, S3, Service Quotas, the Kubernetes
//! API) so that each SDK adapter is a thin translation; no SDK type crosses this boundary.

pub mod aws;
pub mod kube;
pub mod sandbox;
pub mod unavailable;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Resource tags, as EC2/EKS/SageMaker/IAM carry them.
pub type Tags = BTreeMap<String, String>;

/// Tag key that marks every resource the control plane creates with its cluster name.
pub const CLUSTER_TAG: &str = "instantstart:cluster";
/// Tag key naming the logical role of a resource inside its cluster (e.g. `public-a`).
pub const ROLE_TAG: &str = "instantstart:role";

/// Builds the standard tag set for one resource of a cluster.
pub fn cluster_tags(cluster: &str, role: &str) -> Tags {
    Tags::from([
        (CLUSTER_TAG.to_string(), cluster.to_string()),
        (ROLE_TAG.to_string(), role.to_string()),
        ("Name".to_string(), format!("{cluster}-{role}")),
    ])
}

/// A failed call to a cloud API, classified so the engine can decide whether to retry.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq)]
#[error("{service}:{operation} failed: {code}: {message}")]
#[serde(rename_all = "camelCase")]
pub struct CloudError {
    /// Service name as in the API's signing name (`ec2`, `eks`, `sagemaker`, `iam`, `s3`, `k8s`).
    pub service: String,
    /// API operation (`CreateCluster`, `DescribeVpcs` ...).
    pub operation: String,
    /// Error code as the service returned it (`ThrottlingException`, `ResourceLimitExceeded`).
    pub code: String,
    /// Service message.
    pub message: String,
    /// Whether repeating the same call may succeed (throttling, 5xx). Never true for a
    /// rejected validation.
    pub retryable: bool,
}

impl CloudError {
    /// A non-retryable error.
    pub fn new(service: &str, operation: &str, code: &str, message: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            operation: operation.into(),
            code: code.into(),
            message: message.into(),
            retryable: false,
        }
    }

    /// Marks the error as transient.
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }
}

pub type CloudResult<T> = Result<T, CloudError>;

// ---------------------------------------------------------------------------------------------
// EC2 networking
// ---------------------------------------------------------------------------------------------

/// An Availability Zone of the region.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Zone {
    /// Account-specific name, e.g. `us-west-2a`.
    pub name: String,
    /// Stable zone id, e.g. `usw2-az1` (the same physical zone in every account).
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Vpc {
    pub id: String,
    /// Every associated IPv4 CIDR (primary first).
    pub cidrs: Vec<Ipv4Net>,
    pub tags: Tags,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    pub id: String,
    pub vpc_id: String,
    pub cidr: Ipv4Net,
    pub zone: String,
    pub tags: Tags,
}

/// The EC2 resource families the network stage creates; each maps to one `Describe*`/`Delete*`
/// pair with a `tag:` filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetKind {
    Vpc,
    Subnet,
    InternetGateway,
    NatGateway,
    ElasticIp,
    RouteTable,
    SecurityGroup,
    VpcEndpoint,
}

impl NetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NetKind::Vpc => "vpc",
            NetKind::Subnet => "subnet",
            NetKind::InternetGateway => "internet-gateway",
            NetKind::NatGateway => "nat-gateway",
            NetKind::ElasticIp => "elastic-ip",
            NetKind::RouteTable => "route-table",
            NetKind::SecurityGroup => "security-group",
            NetKind::VpcEndpoint => "vpc-endpoint",
        }
    }
}

/// Lifecycle of resources that are not usable the moment they are created (NAT gateways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceState {
    Pending,
    Available,
    Deleting,
    Deleted,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSubnet {
    pub vpc_id: String,
    pub cidr: Ipv4Net,
    /// Zone id, not name: ids are stable across accounts.
    pub zone_id: String,
    pub map_public_ip: bool,
    pub tags: Tags,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateRouteTable {
    pub vpc_id: String,
    /// Target of the default route: an internet gateway or NAT gateway id.
    pub default_route_target: String,
    pub subnet_ids: Vec<String>,
    pub tags: Tags,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSecurityGroup {
    pub vpc_id: String,
    pub name: String,
    pub description: String,
    /// All traffic allowed between members of the group (what EFA requires), in and out.
    pub self_referencing: bool,
    pub tags: Tags,
}

/// EC2: zones, offerings and the VPC resources of a cluster.
#[async_trait]
pub trait Network: Send + Sync {
    /// The region this adapter talks to.
    fn region(&self) -> String;
    async fn describe_availability_zones(&self) -> CloudResult<Vec<Zone>>;
    /// EC2 instance types (without the `ml.` prefix) offered in one zone, by zone name.
    async fn describe_instance_type_offerings(&self, zone: &str) -> CloudResult<Vec<String>>;
    async fn describe_vpcs(&self) -> CloudResult<Vec<Vpc>>;
    async fn describe_subnets(&self, vpc_id: &str) -> CloudResult<Vec<Subnet>>;
    /// Ids of resources of `kind` whose tags include every pair of `tags`.
    async fn find_tagged(&self, kind: NetKind, tags: &Tags) -> CloudResult<Vec<String>>;
    async fn create_vpc(&self, cidr: Ipv4Net, tags: &Tags) -> CloudResult<Vpc>;
    /// Associates a secondary IPv4 block with the VPC (it is listed by `describe_vpcs` once
    /// associated).
    async fn associate_vpc_cidr(&self, vpc_id: &str, cidr: Ipv4Net) -> CloudResult<()>;
    async fn create_subnet(&self, req: &CreateSubnet) -> CloudResult<Subnet>;
    /// Creates and attaches an internet gateway.
    async fn create_internet_gateway(&self, vpc_id: &str, tags: &Tags) -> CloudResult<String>;
    /// Attaches a gateway to the VPC; already attached is success.
    async fn attach_internet_gateway(&self, igw_id: &str, vpc_id: &str) -> CloudResult<()>;
    /// Allocates an Elastic IP and creates a public NAT gateway in `subnet_id`.
    async fn create_nat_gateway(&self, subnet_id: &str, tags: &Tags) -> CloudResult<String>;
    async fn nat_gateway_state(&self, id: &str) -> CloudResult<ResourceState>;
    /// Creates the table, its default route and its subnet associations.
    async fn create_route_table(&self, req: &CreateRouteTable) -> CloudResult<String>;
    /// Adds the `0.0.0.0/0` route to `target` if the table lacks it.
    async fn ensure_default_route(&self, route_table_id: &str, target: &str) -> CloudResult<()>;
    async fn associate_route_table(&self, route_table_id: &str, subnet_id: &str)
        -> CloudResult<()>;
    async fn create_security_group(&self, req: &CreateSecurityGroup) -> CloudResult<String>;
    /// Allows all traffic from the group to itself, as ingress and as egress; already allowed
    /// is success.
    async fn ensure_self_referencing(&self, group_id: &str) -> CloudResult<()>;
    /// Gateway endpoint for S3 on the given route tables.
    async fn create_s3_endpoint(
        &self,
        vpc_id: &str,
        route_table_ids: &[String],
        tags: &Tags,
    ) -> CloudResult<String>;
    /// Deletes one resource; deleting what is already gone succeeds.
    async fn delete(&self, kind: NetKind, id: &str) -> CloudResult<()>;
}

// ---------------------------------------------------------------------------------------------
// EKS
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EksStatus {
    Creating,
    Active,
    Updating,
    Deleting,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateEksCluster {
    pub name: String,
    pub version: String,
    pub role_arn: String,
    pub subnet_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
    /// `API` or `API_AND_CONFIG_MAP`.
    pub authentication_mode: String,
    /// Give the creating principal (this control plane) a cluster-admin access entry.
    pub bootstrap_creator_admin: bool,
    pub tags: Tags,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EksCluster {
    pub name: String,
    pub arn: String,
    pub status: EksStatus,
    pub version: String,
    pub endpoint: Option<String>,
    pub certificate_authority: Option<String>,
    pub oidc_issuer: Option<String>,
    pub vpc_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AddonStatus {
    Creating,
    Active,
    CreateFailed,
    Updating,
    Deleting,
    DeleteFailed,
    Degraded,
    UpdateFailed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateAddon {
    pub cluster: String,
    pub name: String,
    pub version: Option<String>,
    pub service_account_role_arn: Option<String>,
    /// JSON configuration values, as EKS takes them.
    pub configuration_values: Option<String>,
    /// `OVERWRITE` | `NONE` | `PRESERVE`.
    pub resolve_conflicts: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Addon {
    pub name: String,
    pub arn: String,
    pub status: AddonStatus,
    pub version: Option<String>,
    /// The health issues EKS reports (`code: message`, joined), when there are any.
    #[serde(default)]
    pub health: Option<String>,
}

#[async_trait]
pub trait Eks: Send + Sync {
    async fn create_cluster(&self, req: &CreateEksCluster) -> CloudResult<EksCluster>;
    /// `None` when no cluster has that name.
    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<EksCluster>>;
    async fn delete_cluster(&self, name: &str) -> CloudResult<()>;
    /// Whether `principal_arn` has an access entry on the cluster.
    async fn has_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<bool>;
    /// Creates an access entry and associates `policy_arn` with cluster scope.
    async fn create_access_entry(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()>;
    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon>;
    async fn describe_addon(&self, cluster: &str, name: &str) -> CloudResult<Option<Addon>>;
    async fn delete_addon(&self, cluster: &str, name: &str) -> CloudResult<()>;
    /// Changes an add-on's version, role or configuration (`resolve_conflicts` as in create).
    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()>;
    /// The association id binding `namespace/service_account` to a role, if one exists.
    async fn find_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> CloudResult<Option<String>>;
    async fn create_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
        role_arn: &str,
    ) -> CloudResult<String>;
    /// Removes a pod identity association (absent is fine).
    async fn delete_pod_identity(&self, cluster: &str, association_id: &str) -> CloudResult<()>;
}

// ---------------------------------------------------------------------------------------------
// SageMaker HyperPod
// ---------------------------------------------------------------------------------------------

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
    /// Replaces the cluster's instance groups. Every group must be sent, in the accepted shape:
    /// a group left out of the request is not kept as it was.
    /// `continuous` also sets `NodeProvisioningMode` `Continuous` (needed once a group is Spot).
    async fn update_cluster(
        &self,
        name: &str,
        groups: &[InstanceGroupSpec],
        continuous: bool,
    ) -> CloudResult<()>;
    async fn update_cluster_software(&self, name: &str) -> CloudResult<()>;
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
}

// ---------------------------------------------------------------------------------------------
// IAM / STS
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallerIdentity {
    pub account: String,
    pub arn: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    pub name: String,
    pub arn: String,
    /// The trust policy document (JSON).
    pub trust_policy: Value,
}

#[async_trait]
pub trait Iam: Send + Sync {
    async fn caller_identity(&self) -> CloudResult<CallerIdentity>;
    async fn get_role(&self, name: &str) -> CloudResult<Option<Role>>;
    async fn create_role(&self, name: &str, trust_policy: &Value, tags: &Tags)
        -> CloudResult<Role>;
    /// Replaces one inline policy (idempotent by name).
    async fn put_role_policy(
        &self,
        role: &str,
        policy_name: &str,
        document: &Value,
    ) -> CloudResult<()>;
    /// Attaches an AWS-managed policy (idempotent).
    async fn attach_role_policy(&self, role: &str, policy_arn: &str) -> CloudResult<()>;
    async fn delete_role(&self, name: &str) -> CloudResult<()>;
    /// Adds one statement to a role's trust policy, keeping every existing statement (a trust
    /// policy is never replaced wholesale). No call when the statement is already there.
    async fn add_trust_statement(&self, role: &str, statement: &Value) -> CloudResult<()>;
    /// ARN of the IAM OIDC provider for `issuer_url`, if one exists.
    async fn find_oidc_provider(&self, issuer_url: &str) -> CloudResult<Option<String>>;
    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> CloudResult<String>;
}

/// The trust policy with `statement` added, or `None` when an equal statement is already in it.
pub fn merge_trust(policy: &Value, statement: &Value) -> Option<Value> {
    let mut merged = match policy {
        Value::Object(_) => policy.clone(),
        _ => serde_json::json!({"Version": "2012-10-17", "Statement": []}),
    };
    let statements = match merged.get_mut("Statement") {
        Some(Value::Array(list)) => list,
        Some(single) => {
            *single = Value::Array(vec![single.clone()]);
            single.as_array_mut()?
        }
        None => {
            merged["Statement"] = Value::Array(Vec::new());
            merged["Statement"].as_array_mut()?
        }
    };
    if statements.iter().any(|s| s == statement) {
        return None;
    }
    statements.push(statement.clone());
    Some(merged)
}

// ---------------------------------------------------------------------------------------------
// S3
// ---------------------------------------------------------------------------------------------

#[async_trait]
pub trait ObjectStore: Send + Sync {
    async fn bucket_exists(&self, bucket: &str) -> CloudResult<bool>;
    /// Creates an encrypted bucket with all public access blocked.
    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()>;
    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()>;
    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>>;
}

// ---------------------------------------------------------------------------------------------
// Service Quotas
// ---------------------------------------------------------------------------------------------

#[async_trait]
pub trait Quotas: Send + Sync {
    /// The HyperPod "cluster usage" quota for an `ml.` instance type, if the account has one.
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>>;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes
// ---------------------------------------------------------------------------------------------

/// How to reach one cluster's API server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeTarget {
    /// EKS cluster name (used to mint the bearer token).
    pub cluster: String,
    pub endpoint: String,
    pub certificate_authority: String,
}

/// Identifies one object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// The reference of a manifest about to be applied; a manifest without one is refused.
    pub fn to_apply(manifest: &Value) -> CloudResult<Self> {
        Self::of(manifest).ok_or_else(|| {
            CloudError::new(
                "k8s",
                "Apply",
                "Invalid",
                "manifest lacks apiVersion, kind or name",
            )
        })
    }

    /// Reads the reference out of a manifest.
    pub fn of(manifest: &Value) -> Option<Self> {
        Some(Self {
            api_version: manifest.get("apiVersion")?.as_str()?.to_string(),
            kind: manifest.get("kind")?.as_str()?.to_string(),
            namespace: manifest
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
            name: manifest.pointer("/metadata/name")?.as_str()?.to_string(),
        })
    }
}

/// Label the control plane puts on every object it owns.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "instantstart");

/// One Kubernetes node as the status routes show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// Kubernetes node name (`hyperpod-i-…` on HyperPod).
    pub name: String,
    /// EC2 instance id, when the node name or provider id carries one.
    pub instance_id: Option<String>,
    pub instance_type: Option<String>,
    /// HyperPod instance group (`sagemaker.amazonaws.com/instance-group-name`).
    pub instance_group: Option<String>,
    /// `on-demand` | `spot` | `training-plan` when a label says so.
    pub capacity_type: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Why the node is not ready (the `Ready` condition's reason and message), when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready_reason: Option<String>,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    pub gpus: GpuUsage,
    /// HyperPod health labels (`…/node-health-status`, `…/deep-health-check-status`).
    pub health: BTreeMap<String, String>,
}

/// GPU accounting for one node, from `nvidia.com/gpu` capacity, allocatable and pod requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuUsage {
    pub total: u32,
    pub allocatable: u32,
    /// Requested by pods bound to the node that have not finished.
    pub requested: u32,
    /// `allocatable - requested`, never negative.
    pub free: u32,
}

/// Where a [`ClusterState`] came from and how fresh it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheInfo {
    /// `watch` (kube-runtime reflectors) or `sandbox` (the simulated cluster).
    pub source: String,
    /// Milliseconds since the cache last heard from the API server (an event or the initial list).
    pub age_ms: u64,
    pub nodes: usize,
    pub pods: usize,
}

/// One call through the service proxy.
#[derive(Debug, Clone, Copy)]
pub struct ServiceCall<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub port: u16,
    /// Path on the service, without the leading slash.
    pub path: &'a str,
}

/// Nodes and GPU demand of one cluster.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    pub nodes: Vec<NodeState>,
    /// Pods not yet bound to a node that request GPUs.
    pub pending_gpu_pods: u32,
    /// GPUs those pods request in total.
    pub pending_gpus: u32,
    pub cache: CacheInfo,
}

#[async_trait]
pub trait Kube: Send + Sync {
    /// Server-side apply with field manager `instantstart`.
    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()>;
    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>>;
    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()>;
    /// Objects of one kind, optionally in one namespace and matching a label selector.
    async fn list(
        &self,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> CloudResult<Vec<Value>>;
    /// Nodes and GPU demand, from a watch-backed cache (started on first use, kept live after).
    async fn cluster_state(&self, target: &KubeTarget) -> CloudResult<ClusterState>;
    /// POSTs JSON to a Service through the API server's service proxy
    /// (`/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}`): the only way the
    /// control plane talks to a workload, so it never dials an address a request names.
    async fn service_post(
        &self,
        target: &KubeTarget,
        service: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value>;
    /// Drops the client, discovered kinds and caches of a cluster that no longer exists (a new
    /// cluster of the same name has another endpoint and CA).
    async fn forget(&self, _cluster: &str) {}
}

/// Whether every field `desired` sets has the same value in `actual` (fields the server adds are
/// ignored). Lists must match element by element. This is how reconciliation decides that an
/// object is already as wanted and no apply is needed.
pub fn json_contains(actual: &Value, desired: &Value) -> bool {
    match (actual, desired) {
        (Value::Object(a), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| a.get(k).is_some_and(|av| json_contains(av, dv))),
        (Value::Array(a), Value::Array(d)) => {
            a.len() == d.len() && a.iter().zip(d).all(|(av, dv)| json_contains(av, dv))
        }
        (Value::Number(a), Value::Number(d)) => a.as_f64() == d.as_f64(),
        (a, d) => a == d,
    }
}

/// GPUs per instance of the accelerated types we offer (`ml.` prefix optional).
pub fn gpus_per_instance(instance_type: &str) -> u32 {
    let t = instance_type.trim_start_matches("ml.");
    match t {
        "p5.48xlarge" | "p5e.48xlarge" | "p5en.48xlarge" | "p4d.24xlarge" | "p4de.24xlarge"
        | "p6-b200.48xlarge" | "g5.48xlarge" | "g6.48xlarge" | "g6e.48xlarge" => 8,
        "g5.12xlarge" | "g5.24xlarge" | "g6.12xlarge" | "g6.24xlarge" | "g6e.12xlarge"
        | "g6e.24xlarge" => 4,
        _ if t.starts_with("g5.") || t.starts_with("g6.") || t.starts_with("g6e.") => 1,
        _ => 0,
    }
}

/// Whether an instance type can carry an EFA interface (`ml.` prefix optional). A static
/// table, like [`gpus_per_instance`]: the accelerated families HyperPod offers.
pub fn efa_supported(instance_type: &str) -> bool {
    let t = instance_type.trim_start_matches("ml.");
    let Some((family, size)) = t.split_once('.') else {
        return false;
    };
    match family {
        "p4d" | "p4de" | "p5" | "p5e" | "p5en" | "p6-b200" | "trn1" | "trn1n" | "trn2" => true,
        "g5" | "g6" | "g6e" => matches!(
            size,
            "8xlarge" | "12xlarge" | "16xlarge" | "24xlarge" | "48xlarge"
        ),
        _ => false,
    }
}

/// Every port, as one handle the engine and services share.
#[derive(Clone)]
pub struct Cloud {
    /// `sandbox` or `aws`: shown on `/healthz` and in a response header.
    pub mode: CloudMode,
    pub network: Arc<dyn Network>,
    pub eks: Arc<dyn Eks>,
    pub hyperpod: Arc<dyn HyperPod>,
    pub iam: Arc<dyn Iam>,
    pub objects: Arc<dyn ObjectStore>,
    pub quotas: Arc<dyn Quotas>,
    pub kube: Arc<dyn Kube>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CloudMode {
    /// The real AWS account from the standard credential chain.
    Aws,
    /// The built-in simulated account and clusters.
    Sandbox,
}

impl CloudMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CloudMode::Aws => "aws",
            CloudMode::Sandbox => "sandbox",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_trust;
    use serde_json::json;

    #[test]
    fn trust_statements_are_added_never_replaced() {
        let sagemaker = json!({"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"});
        let pods = json!({"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]});
        let policy = json!({"Version": "2012-10-17", "Statement": [sagemaker.clone()]});
        let merged = merge_trust(&policy, &pods).unwrap();
        assert_eq!(merged["Statement"], json!([sagemaker, pods]));
        assert!(
            merge_trust(&merged, &pods).is_none(),
            "adding twice is a no-op"
        );
        // A single statement object (allowed by IAM) becomes a list and is kept.
        let single = json!({"Version": "2012-10-17", "Statement": sagemaker.clone()});
        assert_eq!(
            merge_trust(&single, &pods).unwrap()["Statement"],
            json!([sagemaker, pods])
        );
    }
}
