//! Phases of the `delete-cluster` operation: HyperPod, EKS, network, roles, then the record.
//! The shared bucket is kept: it holds the user's data.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{find_all_tagged, hyperpod::hyperpod_of};
use crate::cloud::{EksStatus, HyperPodStatus, NetKind, ResourceState};
use crate::ops::{Poll, Step, StepCx, StepResult};

pub struct DeleteHyperPodStep;

#[async_trait]
impl Step for DeleteHyperPodStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:DeleteCluster"]
    }
    fn name(&self) -> &'static str {
        "delete-hyperpod"
    }
    /// Longer than the default: HyperPod terminates every instance first.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60 * 60)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let name = hyperpod_of(cx);
        match cx.cloud.hyperpod.describe_cluster(&name).await? {
            Some(c) if c.status != HyperPodStatus::Deleting => {
                cx.cloud.hyperpod.delete_cluster(&name).await?
            }
            _ => {}
        }
        Ok(json!({}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        match cx.cloud.hyperpod.describe_cluster(&hyperpod_of(cx)).await? {
            None => Ok(Poll::Ready(out.clone())),
            Some(c) => Ok(Poll::Pending(format!("HyperPod cluster {:?}", c.status))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub struct DeleteEksStep;

#[async_trait]
impl Step for DeleteEksStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:DeleteCluster"]
    }
    fn name(&self) -> &'static str {
        "delete-eks"
    }
    /// Longer than the default: EKS takes 10-15 minutes to delete a control plane.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(25 * 60)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        match cx.cloud.eks.describe_cluster(&cx.op.cluster).await? {
            Some(c) if c.status != EksStatus::Deleting => {
                cx.cloud.eks.delete_cluster(&cx.op.cluster).await?
            }
            _ => {}
        }
        Ok(json!({}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        match cx.cloud.eks.describe_cluster(&cx.op.cluster).await? {
            None => Ok(Poll::Ready(out.clone())),
            Some(c) => Ok(Poll::Pending(
                format!("EKS cluster {:?}", c.status).to_uppercase(),
            )),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// Endpoint and NAT gateway go first: subnets cannot be deleted while the NAT holds an address.
pub struct DeleteGatewaysStep;

#[async_trait]
impl Step for DeleteGatewaysStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "ec2:DeleteNatGateway",
            "ec2:ReleaseAddress",
            "ec2:DeleteInternetGateway",
        ]
    }
    fn name(&self) -> &'static str {
        "delete-gateways"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        for kind in [NetKind::VpcEndpoint, NetKind::NatGateway] {
            for id in find_all_tagged(cx, kind).await? {
                cx.cloud.network.delete(kind, &id).await?;
            }
        }
        Ok(json!({}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        for id in find_all_tagged(cx, NetKind::NatGateway).await? {
            if cx.cloud.network.nat_gateway_state(&id).await? != ResourceState::Deleted {
                return Ok(Poll::Pending("NAT gateway deleting".into()));
            }
        }
        Ok(Poll::Ready(out.clone()))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub struct DeleteVpcStep;

#[async_trait]
impl Step for DeleteVpcStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "ec2:DeleteVpcEndpoints",
            "ec2:DeleteSubnet",
            "ec2:DeleteRouteTable",
            "ec2:DeleteSecurityGroup",
            "ec2:DeleteVpc",
        ]
    }
    fn name(&self) -> &'static str {
        "delete-vpc"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        for kind in [
            NetKind::ElasticIp,
            NetKind::InternetGateway,
            NetKind::Subnet,
            NetKind::RouteTable,
            NetKind::SecurityGroup,
            NetKind::Vpc,
        ] {
            for id in find_all_tagged(cx, kind).await? {
                cx.cloud.network.delete(kind, &id).await?;
            }
        }
        Ok(json!({}))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub struct DeleteRolesStep;

#[async_trait]
impl Step for DeleteRolesStep {
    fn calls(&self) -> &'static [&'static str] {
        &["iam:DeleteRole"]
    }
    fn name(&self) -> &'static str {
        "delete-roles"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let c = &cx.op.cluster;
        // Every role the cluster's stages and features make (absent is fine); the account's
        // MLflow App and its role stay: other clusters may report to it.
        let roles = super::roles::cluster_role_names(c);
        for role in roles {
            super::ownership::delete_own_role(cx, &role).await?;
        }
        Ok(json!({}))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// Marks the record deleted (its operations stay as the audit trail) and clears the active
/// cluster if it was this one.
pub struct ForgetStep;

#[async_trait]
impl Step for ForgetStep {
    fn name(&self) -> &'static str {
        "forget"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let store = cx.engine.store();
        cx.cloud.kube.forget(&cx.op.cluster).await;
        store
            .set_cluster_status(&cx.op.cluster, crate::store::Lifecycle::Deleted)
            .await?;
        if store
            .setting(crate::service::ACTIVE_CLUSTER)
            .await?
            .as_deref()
            == Some(cx.op.cluster.as_str())
        {
            store
                .set_setting(crate::service::ACTIVE_CLUSTER, None)
                .await?;
        }
        Ok(json!({}))
    }
    fn records_resources(&self) -> bool {
        false
    }
}
