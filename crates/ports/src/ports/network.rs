//! EC2: zones, instance-type offerings and the VPC resources of a cluster.

use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::common::*;

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
