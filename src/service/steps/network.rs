//! Phases of the `cluster` stage: the VPC and its network, then the EKS control plane.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{find_tagged, net_tags, ClusterParams};
use crate::cloud::{
    CreateEksCluster, CreateRouteTable, CreateSecurityGroup, CreateSubnet, EksStatus, NetKind,
    ResourceState,
};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::cluster::subnets::free_vpc_cidr;
use crate::service::shared::arn::{managed_policy, partition_of_region};
use crate::service::shared::resources::Recorded;

pub struct VpcStep;

#[async_trait]
impl Step for VpcStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateVpc"]
    }
    fn name(&self) -> &'static str {
        "vpc"
    }

    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let Some(id) = find_tagged(cx, NetKind::Vpc, "vpc").await? else {
            return Ok(None);
        };
        let vpc = cx
            .cloud
            .network
            .describe_vpcs()
            .await?
            .into_iter()
            .find(|v| v.id == id);
        Ok(vpc.map(|v| json!({"vpcId": v.id, "vpcCidr": v.cidrs.first()})))
    }

    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: ClusterParams = cx.param()?;
        let cidr = match p.vpc_cidr {
            Some(c) => c,
            None => free_vpc_cidr(&cx.cloud.network.describe_vpcs().await?).ok_or_else(|| {
                StepError::fatal(
                    "no-address-space",
                    "no free /16 left in 10.0.0.0/8; pass vpcCidr",
                )
            })?,
        };
        let vpc = cx
            .cloud
            .network
            .create_vpc(cidr, &net_tags(cx, "vpc"))
            .await?;
        Ok(json!({"vpcId": vpc.id, "vpcCidr": cidr}))
    }
}

/// A second block for the VPC (what AWS's templates add for large fleets): compute subnets are
/// placed in it first, so a big compute subnet does not compete with the first /20.
pub struct SecondaryCidrStep;

impl SecondaryCidrStep {
    async fn associated(cx: &StepCx<'_>, cidr: ipnet::Ipv4Net) -> StepResult<bool> {
        let vpc_id = cx.recorded().vpc_id()?;
        Ok(cx
            .cloud
            .network
            .describe_vpcs()
            .await?
            .iter()
            .any(|v| v.id == vpc_id && v.cidrs.contains(&cidr)))
    }

    fn wanted(cx: &StepCx<'_>) -> StepResult<ipnet::Ipv4Net> {
        let p: ClusterParams = cx.param()?;
        p.secondary_cidr
            .ok_or_else(|| StepError::fatal("bad-params", "no secondaryCidr in the parameters"))
    }
}

#[async_trait]
impl Step for SecondaryCidrStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:AssociateVpcCidrBlock"]
    }
    fn name(&self) -> &'static str {
        "secondary-cidr"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let cidr = Self::wanted(cx)?;
        Ok(Self::associated(cx, cidr)
            .await?
            .then(|| json!({"secondaryCidr": cidr})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let cidr = Self::wanted(cx)?;
        cx.cloud
            .network
            .associate_vpc_cidr(&cx.recorded().vpc_id()?, cidr)
            .await?;
        Ok(json!({"secondaryCidr": cidr}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        if Self::associated(cx, Self::wanted(cx)?).await? {
            Ok(Poll::Ready(out.clone()))
        } else {
            Ok(Poll::Pending("secondary CIDR associating".into()))
        }
    }
}

/// The four subnets of the network stage: a public and a private /24 in each of two AZs, in the
/// first /20 of the VPC (the compute subnets take the /20s after it).
pub struct SubnetsStep;

#[async_trait]
impl Step for SubnetsStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateSubnet"]
    }
    fn name(&self) -> &'static str {
        "subnets"
    }

    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: ClusterParams = cx.param()?;
        let vpc_id = cx.recorded().vpc_id()?;
        let vpc_cidr: ipnet::Ipv4Net = cx
            .recorded()
            .vpc_cidr()?
            .parse()
            .map_err(|_| StepError::fatal("bad-state", "recorded vpcCidr is not a CIDR"))?;
        let mut blocks = vpc_cidr
            .subnets(24)
            .map_err(|_| StepError::fatal("bad-state", "VPC block smaller than /24"))?;
        let layout = [
            ("public-a", &p.zones[0], true),
            ("public-b", &p.zones[1], true),
            ("private-a", &p.zones[0], false),
            ("private-b", &p.zones[1], false),
        ];
        let mut public = Vec::new();
        let mut private = Vec::new();
        for (role, zone, is_public) in layout {
            let cidr = blocks
                .next()
                .ok_or_else(|| StepError::fatal("no-address-space", "VPC too small"))?;
            // Each subnet is looked up by tag first: this phase may be resuming half-done.
            let id = match find_tagged(cx, NetKind::Subnet, role).await? {
                Some(id) => id,
                None => {
                    let mut tags = net_tags(cx, role);
                    let elb_tag = if is_public {
                        "kubernetes.io/role/elb"
                    } else {
                        "kubernetes.io/role/internal-elb"
                    };
                    tags.insert(elb_tag.into(), "1".into());
                    let req = CreateSubnet {
                        vpc_id: vpc_id.clone(),
                        cidr,
                        zone_id: zone.id.clone(),
                        map_public_ip: is_public,
                        tags,
                    };
                    cx.cloud.network.create_subnet(&req).await?.id
                }
            };
            if is_public {
                public.push(id)
            } else {
                private.push(id)
            }
        }
        Ok(json!({"publicSubnetIds": public, "privateSubnetIds": private}))
    }
}

pub struct InternetGatewayStep;

#[async_trait]
impl Step for InternetGatewayStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateInternetGateway", "ec2:AttachInternetGateway"]
    }
    fn name(&self) -> &'static str {
        "internet-gateway"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let Some(id) = find_tagged(cx, NetKind::InternetGateway, "igw").await? else {
            return Ok(None);
        };
        // An interrupted attempt may have created the gateway but not attached it.
        let vpc = cx.recorded().vpc_id()?;
        cx.cloud.network.attach_internet_gateway(&id, &vpc).await?;
        Ok(Some(json!({"internetGatewayId": id})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let id = cx
            .cloud
            .network
            .create_internet_gateway(&cx.recorded().vpc_id()?, &net_tags(cx, "igw"))
            .await?;
        Ok(json!({"internetGatewayId": id}))
    }
}

pub struct NatGatewayStep;

#[async_trait]
impl Step for NatGatewayStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:AllocateAddress", "ec2:CreateNatGateway"]
    }
    fn name(&self) -> &'static str {
        "nat-gateway"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(find_tagged(cx, NetKind::NatGateway, "nat")
            .await?
            .map(|id| json!({"natGatewayId": id})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let public = cx.recorded().public_subnet_ids()?;
        let subnet = public
            .first()
            .ok_or_else(|| StepError::fatal("missing-prerequisite", "no public subnet"))?;
        let id = cx
            .cloud
            .network
            .create_nat_gateway(subnet, &net_tags(cx, "nat"))
            .await?;
        Ok(json!({"natGatewayId": id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let id = out["natGatewayId"].as_str().unwrap_or_default();
        match cx.cloud.network.nat_gateway_state(id).await? {
            ResourceState::Available => Ok(Poll::Ready(out.clone())),
            ResourceState::Pending => Ok(Poll::Pending("NAT gateway pending".into())),
            other => Err(StepError::fatal(
                "nat-gateway-failed",
                format!("NAT gateway {id} is {other:?}"),
            )),
        }
    }
}

pub struct RouteTablesStep;

#[async_trait]
impl Step for RouteTablesStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateRouteTable",
            "ec2:CreateRoute",
            "ec2:AssociateRouteTable",
        ]
    }
    fn name(&self) -> &'static str {
        "route-tables"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let vpc_id = cx.recorded().vpc_id()?;
        let mut out = json!({});
        let r = cx.recorded();
        for (role, target, subnets, out_key) in [
            (
                "public-rt",
                r.internet_gateway_id()?,
                r.public_subnet_ids()?,
                "publicRouteTableId",
            ),
            (
                "private-rt",
                r.nat_gateway_id()?,
                r.private_subnet_ids()?,
                "privateRouteTableId",
            ),
        ] {
            let id = match find_tagged(cx, NetKind::RouteTable, role).await? {
                Some(id) => {
                    // Adopted: finish what an interrupted attempt may have left undone.
                    cx.cloud.network.ensure_default_route(&id, &target).await?;
                    for subnet in &subnets {
                        cx.cloud.network.associate_route_table(&id, subnet).await?;
                    }
                    id
                }
                None => {
                    let req = CreateRouteTable {
                        vpc_id: vpc_id.clone(),
                        default_route_target: target,
                        subnet_ids: subnets,
                        tags: net_tags(cx, role),
                    };
                    cx.cloud.network.create_route_table(&req).await?
                }
            };
            out[out_key] = json!(id);
        }
        Ok(out)
    }
}

/// One security group for the EKS control plane and every HyperPod node, as AWS's templates
/// make it: all traffic within the group in and out (kubelet → API server on 443, API server →
/// kubelets and webhooks, and EFA, which needs self-referencing egress as well as ingress), plus
/// EC2's default egress to anywhere. Two groups that each reference only themselves would leave
/// nodes unable to join.
pub struct SecurityGroupsStep;

#[async_trait]
impl Step for SecurityGroupsStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateSecurityGroup",
            "ec2:AuthorizeSecurityGroupIngress",
        ]
    }
    fn name(&self) -> &'static str {
        "security-groups"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let role = "cluster-sg";
        let id = match find_tagged(cx, NetKind::SecurityGroup, role).await? {
            Some(id) => {
                cx.cloud.network.ensure_self_referencing(&id).await?;
                id
            }
            None => {
                let req = CreateSecurityGroup {
                    vpc_id: cx.recorded().vpc_id()?,
                    name: format!("{}-{role}", cx.op.cluster),
                    description: "EKS control plane and HyperPod nodes: all traffic within the group (API, kubelet, EFA)".into(),
                    self_referencing: true,
                    tags: net_tags(cx, role),
                };
                cx.cloud.network.create_security_group(&req).await?
            }
        };
        Ok(json!({"clusterSecurityGroupId": id}))
    }
}

pub struct S3EndpointStep;

#[async_trait]
impl Step for S3EndpointStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateVpcEndpoint"]
    }
    fn name(&self) -> &'static str {
        "s3-endpoint"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(find_tagged(cx, NetKind::VpcEndpoint, "s3-endpoint")
            .await?
            .map(|id| json!({"s3EndpointId": id})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let rts = [cx.recorded().private_route_table_id()?];
        let id = cx
            .cloud
            .network
            .create_s3_endpoint(&cx.recorded().vpc_id()?, &rts, &net_tags(cx, "s3-endpoint"))
            .await?;
        Ok(json!({"s3EndpointId": id}))
    }
}

pub fn eks_role_name(cluster: &str) -> String {
    format!("{cluster}-eks-cluster")
}

pub const EKS_CLUSTER_POLICY: &str = "AmazonEKSClusterPolicy";

/// The EKS cluster role's managed policy, in this account's partition.
fn eks_cluster_policy(cx: &StepCx<'_>) -> String {
    let region = cx.cloud.network.region();
    managed_policy(partition_of_region(&region), EKS_CLUSTER_POLICY)
}

pub struct EksRoleStep;

#[async_trait]
impl Step for EksRoleStep {
    fn calls(&self) -> &'static [&'static str] {
        &["iam:CreateRole", "iam:AttachRolePolicy"]
    }
    fn name(&self) -> &'static str {
        "eks-role"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let name = eks_role_name(&cx.op.cluster);
        let Some(role) = super::ownership::own_role(cx, &name).await? else {
            return Ok(None);
        };
        // The attachment may be what an interrupted attempt did not reach; it is idempotent.
        cx.cloud
            .iam
            .attach_role_policy(&name, &eks_cluster_policy(cx))
            .await?;
        Ok(Some(json!({"eksRoleArn": role.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let name = eks_role_name(&cx.op.cluster);
        let trust = json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"]}]});
        let tags = net_tags(cx, "eks-role");
        let role =
            super::ownership::create_role(cx, &name, &trust, &tags, Some(&cx.op.cluster)).await?;
        cx.cloud
            .iam
            .attach_role_policy(&name, &eks_cluster_policy(cx))
            .await?;
        Ok(json!({"eksRoleArn": role.arn}))
    }
}

pub struct EksClusterStep;

#[async_trait]
impl Step for EksClusterStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:CreateCluster"]
    }
    fn name(&self) -> &'static str {
        "eks-cluster"
    }
    /// Longer than the default: EKS takes 10-15 minutes to create a control plane.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(25 * 60)
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(cx
            .cloud
            .eks
            .describe_cluster(&cx.op.cluster)
            .await?
            .filter(|c| c.status != EksStatus::Deleting)
            .map(|c| json!({"eksClusterArn": c.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: ClusterParams = cx.param()?;
        let mut subnets = cx.recorded().private_subnet_ids()?;
        subnets.extend(cx.recorded().public_subnet_ids()?);
        let req = CreateEksCluster {
            name: cx.op.cluster.clone(),
            version: p.kubernetes_version,
            role_arn: cx.recorded().eks_role_arn()?,
            subnet_ids: subnets,
            security_group_ids: vec![cx.recorded().cluster_security_group_id()?],
            authentication_mode: "API_AND_CONFIG_MAP".into(),
            // The control plane creates the cluster, so this is its own cluster-admin access entry.
            bootstrap_creator_admin: true,
            tags: net_tags(cx, "eks"),
        };
        let cluster = cx.cloud.eks.create_cluster(&req).await?;
        Ok(json!({"eksClusterArn": cluster.arn}))
    }
    async fn poll(&self, cx: &StepCx<'_>, _out: &Value) -> StepResult<Poll> {
        let Some(c) = cx.cloud.eks.describe_cluster(&cx.op.cluster).await? else {
            return Err(StepError::fatal(
                "eks-cluster-missing",
                "the EKS cluster no longer exists",
            ));
        };
        match c.status {
            EksStatus::Active => Ok(Poll::Ready(json!({
                "eksClusterArn": c.arn, "eksClusterName": c.name, "eksEndpoint": c.endpoint,
                "eksCertificateAuthority": c.certificate_authority, "oidcIssuer": c.oidc_issuer,
                "kubernetesVersion": c.version,
                "adminPrincipalArn": crate::service::shared::arn::principal_arn(&cx.cloud.iam.caller_identity().await?.arn),
            }))),
            EksStatus::Creating | EksStatus::Updating => Ok(Poll::Pending(
                format!("EKS cluster {:?}", c.status).to_uppercase(),
            )),
            other => Err(StepError::fatal(
                "eks-cluster-failed",
                format!("EKS cluster is {other:?}; see the EKS console for the cause"),
            )),
        }
    }
}

pub struct OidcProviderStep;

#[async_trait]
impl Step for OidcProviderStep {
    fn calls(&self) -> &'static [&'static str] {
        &["iam:CreateOpenIDConnectProvider"]
    }
    fn name(&self) -> &'static str {
        "oidc-provider"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let issuer = cx.recorded().oidc_issuer()?;
        Ok(cx
            .cloud
            .iam
            .find_oidc_provider(&issuer)
            .await?
            .map(|arn| json!({"oidcProviderArn": arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let issuer = cx.recorded().oidc_issuer()?;
        let arn = cx
            .cloud
            .iam
            .create_oidc_provider(&issuer, &net_tags(cx, "oidc"))
            .await?;
        Ok(json!({"oidcProviderArn": arn}))
    }
}
