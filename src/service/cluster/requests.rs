//! The request bodies of the REST routes (also the MCP tools' input schemas).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How an instance group's nodes are bought; fixed for the group's life. An unknown value is
/// refused by field, with these values as the hint (see `api::input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    OnDemand,
    Spot,
    /// Needs `trainingPlanArn`.
    TrainingPlan,
}

impl CapacityType {
    pub const ALL: [CapacityType; 3] = [Self::OnDemand, Self::Spot, Self::TrainingPlan];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on-demand",
            Self::Spot => "spot",
            Self::TrainingPlan => "training-plan",
        }
    }

    /// The wire value `s` names, for the query strings that carry one.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The kind of a group's capacity.
    pub fn of(capacity: &crate::cloud::Capacity) -> Self {
        match capacity {
            crate::cloud::Capacity::OnDemand => Self::OnDemand,
            crate::cloud::Capacity::Spot => Self::Spot,
            crate::cloud::Capacity::TrainingPlan { .. } => Self::TrainingPlan,
        }
    }
}

/// A new group's network interface; fixed for the group's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkInterface {
    /// HyperPod's default: EFA with ENA where the instance type supports EFA.
    Standard,
    /// EFA-capable instance types only.
    EfaOnly,
}

impl NetworkInterface {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::EfaOnly => "efa-only",
        }
    }
}

/// `POST /api/clusters`: network + EKS control plane.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateClusterRequest {
    /// 1–24 lowercase letters, digits, hyphens; starts with a letter.
    #[schema(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    pub name: String,
    /// Defaults to the control plane's region (the only one accepted).
    #[schema(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")]
    pub region: Option<String>,
    /// Two Availability Zones for the public and private subnets; default: the first two.
    #[schema(min_items = 2, max_items = 2)]
    pub zones: Option<Vec<String>>,
    /// VPC block override (RFC 1918, /16–/19); default: a free /16 in 10.0.0.0/8.
    pub vpc_cidr: Option<String>,
    /// `1.31`, `1.32` (default), `1.33` or `1.34`.
    pub kubernetes_version: Option<String>,
    /// A second VPC block (/16–/19) for the compute subnets of large fleets, as AWS's templates
    /// add one: in the VPC block's RFC 1918 range or in 100.64.0.0/10, overlapping nothing.
    pub secondary_cidr: Option<String>,
}

/// `POST /api/clusters/{name}/hyperpod`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateHyperPodRequest {
    /// e.g. `ml.g5.8xlarge`; must be offered in `zone`.
    pub instance_type: String,
    /// 1–1000 within the account's quota; a new group added under managed autoscaling may start
    /// at 0 (Karpenter provisions it once it is in the governed set).
    #[schema(minimum = 0, maximum = 1000)]
    pub instance_count: i64,
    /// Availability Zone of the instance group (its compute subnet goes there). May be omitted
    /// with `training-plan`: the plan's reservation decides it.
    #[schema(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$")]
    pub zone: Option<String>,
    pub capacity_type: CapacityType,
    /// Required with `training-plan`.
    pub training_plan_arn: Option<String>,
    /// Run `InstanceStress` and `InstanceConnectivity` deep health checks at start (default false).
    pub deep_health_checks: Option<bool>,
    /// EBS volume per instance in GB (default 500).
    #[schema(minimum = 1, maximum = 16384)]
    pub volume_size_gb: Option<i64>,
    /// Default `workers`.
    pub instance_group_name: Option<String>,
    /// `standard` (default: EFA with ENA where the instance type supports EFA) or `efa-only`
    /// (EFA-capable types only). Fixed for the group's life.
    pub network_interface: Option<NetworkInterface>,
    /// Prefix length (16–24, default 20) of the zone's compute subnet when this request creates
    /// it. A /20 holds roughly 30–40 p5-class nodes once the VPC CNI's warm IP pools are
    /// counted; larger fleets need a wider subnet, usually in a `secondaryCidr`.
    #[schema(minimum = 16, maximum = 24)]
    pub compute_subnet_size: Option<i64>,
}

/// `POST /api/pipelines`: the whole cluster in one request.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineRequest {
    /// The cluster's name (see `POST /api/clusters`).
    #[schema(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    pub name: String,
    #[schema(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")]
    pub region: Option<String>,
    /// Availability Zone of the first instance group; may be omitted with `training-plan`.
    #[schema(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$")]
    pub zone: Option<String>,
    pub instance_type: String,
    #[schema(minimum = 1, maximum = 1000)]
    pub instance_count: i64,
    pub capacity_type: CapacityType,
    pub training_plan_arn: Option<String>,
    /// Install the dependencies stage (default true).
    pub dependencies: Option<bool>,
    /// Mount the shared bucket as `s3-claim` (default true).
    pub storage: Option<bool>,
    pub deep_health_checks: Option<bool>,
    /// EBS volume per instance in GB (default 500).
    #[schema(minimum = 1, maximum = 16384)]
    pub volume_size_gb: Option<i64>,
    pub instance_group_name: Option<String>,
    pub vpc_cidr: Option<String>,
    pub kubernetes_version: Option<String>,
    /// `standard` (default) or `efa-only`.
    pub network_interface: Option<NetworkInterface>,
    /// A second VPC block for large fleets (see `POST /api/clusters`).
    pub secondary_cidr: Option<String>,
    /// Prefix length of the compute subnet, 16–24 (default 20).
    #[schema(minimum = 16, maximum = 24)]
    pub compute_subnet_size: Option<i64>,
}

/// Body of `POST /api/clusters/{name}/dependencies`; may be omitted.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DependenciesRequest {
    /// Also reconcile components that were already installed when the cluster was imported
    /// (default false: they are reported, never changed).
    pub manage_existing: Option<bool>,
}

/// Body of `POST /api/clusters/import`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportRequest {
    /// The existing EKS cluster; it becomes the InstantStart cluster name.
    #[schema(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    pub eks_cluster_name: String,
    /// Its HyperPod cluster, if it has one.
    #[schema(pattern = r"^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$")]
    pub hyperpod_cluster_name: Option<String>,
}

/// Body of stage routes that take no parameters (`dependencies`, `storage`); may be omitted.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// `PUT /api/active-cluster`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveClusterRequest {
    /// The cluster to work on when a request names none.
    #[schema(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    pub name: String,
}
