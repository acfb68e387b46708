//! Phases of the `hyperpod` stage: compute subnet, execution role, shared bucket and lifecycle
//! script, then the HyperPod cluster itself (node recovery Automatic), watched to `InService`.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{net_tags, HyperPodParams};
use crate::cloud::{
    BucketOwner, Capacity, CreateHyperPodCluster, HyperPodStatus, InstanceGroupSpec, Zone,
};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::cluster::subnets::{
    ensure_compute_subnet, ComputeSubnetRequest, COMPUTE_PREFIX, PROCESS_SUBNET_LOCKS,
};
use crate::service::shared::arn::{arn_scope, managed_policy};
use crate::service::shared::resources::Recorded;
use crate::service::storage::bucket::{place_of, BucketPlace};

pub use crate::service::shared::resources::hyperpod_name;

/// The checks HyperPod runs on new nodes when deep health checks are on.
pub fn deep_health_checks(on: bool) -> Vec<String> {
    if on {
        vec!["InstanceStress".into(), "InstanceConnectivity".into()]
    } else {
        vec![]
    }
}

/// This operation's HyperPod cluster: the recorded one (an imported cluster's own name), else
/// the name of the one the hyperpod stage creates.
pub fn hyperpod_of(cx: &StepCx<'_>) -> String {
    cx.recorded().hyperpod_name_of(&cx.op.cluster)
}

/// This operation's HyperPod cluster as DescribeCluster reports it; gone is a fatal error.
pub async fn described(cx: &StepCx<'_>) -> StepResult<crate::cloud::HyperPodCluster> {
    cx.cloud
        .hyperpod
        .describe_cluster(&hyperpod_of(cx))
        .await?
        .ok_or_else(|| {
            StepError::fatal(
                "hyperpod-cluster-missing",
                "the HyperPod cluster no longer exists",
            )
        })
}

/// Watches a cluster-level change (a setting, a software update) until the cluster is back in
/// service; a failed or rolled-back cluster fails the phase with HyperPod's reason.
pub fn back_in_service(c: crate::cloud::HyperPodCluster, out: &Value) -> StepResult<Poll> {
    use crate::cloud::HyperPodStatus as S;
    match c.status {
        S::InService => Ok(Poll::Ready(out.clone())),
        S::Failed | S::RollingBack => Err(StepError::fatal(
            "hyperpod-failed",
            format!(
                "the HyperPod cluster is {:?} while applying the change: {}",
                c.status,
                c.failure_message.unwrap_or_default()
            ),
        )),
        s => Ok(Poll::Pending(format!("HyperPod cluster {s:?}"))),
    }
}

pub fn execution_role_name(cluster: &str) -> String {
    format!("{cluster}-hyperpod-exec")
}

/// 2 threads per core for p4/p5/p6 and for training-plan capacity, else 1 — always sent
/// explicitly so the API default never decides.
pub fn threads_per_core(instance_type: &str, capacity: &Capacity) -> u8 {
    if crate::cloud::high_end(instance_type) || matches!(capacity, Capacity::TrainingPlan { .. }) {
        2
    } else {
        1
    }
}

pub const LIFECYCLE_PREFIX: &str = "lifecycle/";
/// AWS-managed policy for HyperPod cluster instances.
/// The tag AWS's `AmazonSageMakerHyperPodTrainingOperatorAccess` (v3, `crates/ports/src/managed`)
/// requires on a cluster before the training operator may describe its nodes
/// (`aws:ResourceTag/SageMaker` = `true`): every HyperPod cluster the product makes or imports
/// carries it, or the operator's node-health reads are refused on a real account.
pub fn operator_tag() -> crate::cloud::Tags {
    crate::cloud::Tags::from([("SageMaker".to_string(), "true".to_string())])
}

pub const INSTANCE_ROLE_POLICY: &str = "AmazonSageMakerClusterInstanceRolePolicy";

/// The on-create script every node runs: it only records that it ran, so nothing in it can fail
/// a node for reasons outside the user's control.
pub const ON_CREATE_SCRIPT: &str = "#!/bin/bash\n\
# InstantStart lifecycle script: runs once on every HyperPod node at creation.\n\
set -euo pipefail\n\
echo \"[instantstart] on_create: node $(hostname) ready\"\n";

/// The compute subnet of the zone in this operation's [`HyperPodParams`], through the one
/// compute-subnet function (in the cluster's VPC, on its private route table).
pub async fn zone_compute_subnet(cx: &StepCx<'_>) -> StepResult<crate::cloud::Subnet> {
    let p: HyperPodParams = cx.param()?;
    let vpc_id = cx.recorded().vpc_id()?;
    let rt = cx.recorded().private_route_table_id()?;
    let zone = Zone {
        name: p.zone.clone(),
        id: p.zone_id.clone(),
    };
    let req = ComputeSubnetRequest {
        cluster: &cx.op.cluster,
        vpc_id: &vpc_id,
        zone: &zone,
        route_table_id: &rt,
        prefix: p.compute_subnet_size.unwrap_or(COMPUTE_PREFIX),
    };
    let (subnet, _) = ensure_compute_subnet(cx.cloud, &PROCESS_SUBNET_LOCKS, &req).await?;
    Ok(subnet)
}

pub struct ComputeSubnetStep;

#[async_trait]
impl Step for ComputeSubnetStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateSubnet", "ec2:AssociateRouteTable"]
    }
    fn name(&self) -> &'static str {
        "compute-subnet"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let subnet = zone_compute_subnet(cx).await?;
        Ok(json!({"computeSubnetId": subnet.id, "computeSubnetCidr": subnet.cidr}))
    }
}

pub struct ExecutionRoleStep;

impl ExecutionRoleStep {
    /// Least privilege: the cluster's place for objects only, what the VPC CNI needs for the nodes' network
    /// interfaces, image pulls and pod identity on this cluster, next to the AWS-managed instance
    /// policy (which grants logs, metrics, `sagemaker-*` reads and SSM messages only — AWS's own
    /// HyperPod templates add the same statements). No `s3:*`, no `*` resources for data.
    pub fn policy(place: &BucketPlace, eks_cluster_arn: &str) -> Value {
        let (partition, region, account) = arn_scope(eks_cluster_arn);
        let eni_arns = |p: &str| format!("arn:{partition}:ec2:{region}:{account}:{p}");
        let [list, objects] = place.read_write_statements("SharedBucket", "");
        json!({"Version": "2012-10-17", "Statement": [
            list,
            objects,
            {"Sid": "VpcCniNetworkInterfaces", "Effect": "Allow",
             "Action": ["ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface",
                        "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission",
                        "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
                        "ec2:UnassignPrivateIpAddresses"],
             "Resource": [eni_arns("instance/*"), eni_arns("network-interface/*"),
                          eni_arns("subnet/*"), eni_arns("security-group/*")]},
            {"Sid": "VpcCniDescribe", "Effect": "Allow",
             "Action": ["ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups"],
             "Resource": "*"},
            {"Sid": "TagOwnInterfaces", "Effect": "Allow", "Action": ["ec2:CreateTags"],
             "Resource": eni_arns("network-interface/*")},
            // The token has no resource type; the pulls name repositories of AWS's own
            // accounts (the VPC CNI's, the add-ons'), so any account, this region.
            {"Sid": "EcrToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"],
             "Resource": "*"},
            {"Sid": "PullImages", "Effect": "Allow",
             "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                        "ecr:BatchCheckLayerAvailability"],
             "Resource": [format!("arn:{partition}:ecr:{region}:*:repository/*")]},
            {"Sid": "PodIdentityOnThisCluster", "Effect": "Allow",
             "Action": ["eks-auth:AssumeRoleForPodIdentity"], "Resource": [eks_cluster_arn]}
        ]})
    }

    async fn ensure_policies(cx: &StepCx<'_>, name: &str) -> StepResult<()> {
        let place = place_of(cx).await?;
        let eks = cx.recorded().eks_cluster_arn()?;
        crate::cloud::ensure_role_policy(
            cx.cloud.iam.as_ref(),
            name,
            "instantstart-hyperpod",
            &Self::policy(&place, &eks),
        )
        .await?;
        cx.cloud
            .iam
            .attach_role_policy(name, &managed_policy(place.partition, INSTANCE_ROLE_POLICY))
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Step for ExecutionRoleStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "iam:AttachRolePolicy",
        ]
    }
    fn name(&self) -> &'static str {
        "execution-role"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let name = execution_role_name(&cx.op.cluster);
        let Some(role) = super::ownership::own_role(cx, &name).await? else {
            return Ok(None);
        };
        Self::ensure_policies(cx, &name).await?;
        Ok(Some(json!({"executionRoleArn": role.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let name = execution_role_name(&cx.op.cluster);
        let trust = json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole"}]});
        let tags = net_tags(cx, "hyperpod-exec");
        let role =
            super::ownership::create_role(cx, &name, &trust, &tags, Some(&cx.op.cluster)).await?;
        Self::ensure_policies(cx, &name).await?;
        Ok(json!({"executionRoleArn": role.arn}))
    }
}

/// Records where the cluster keeps its objects. Its own bucket is created when missing; the
/// deployment's shared bucket is never created here (the stack owns it), only checked.
pub struct SharedBucketStep;

impl SharedBucketStep {
    fn recorded(place: &BucketPlace) -> Value {
        json!({"bucketName": place.bucket, "bucketPrefix": place.prefix})
    }

    /// Bucket names are global: a name the product would use may belong to another account,
    /// which would then receive the lifecycle scripts every node runs as root. Never adopted.
    fn not_ours(bucket: &str) -> StepError {
        StepError::fatal(
            "bucket-not-ours",
            format!(
                "the bucket `{bucket}` belongs to another AWS account: this control plane never writes to a bucket it does not own \
                 (the lifecycle scripts every node runs as root are kept there). Name a shared bucket of this account \
                 (INSTANTSTART_SHARED_BUCKET), or delete the cluster and create it under another name"
            ),
        )
    }
}

#[async_trait]
impl Step for SharedBucketStep {
    fn calls(&self) -> &'static [&'static str] {
        &["s3:CreateBucket"]
    }
    fn name(&self) -> &'static str {
        "shared-bucket"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let place = place_of(cx).await?;
        match cx.cloud.objects.bucket_owner(&place.bucket).await? {
            BucketOwner::Ours => Ok(Some(Self::recorded(&place))),
            BucketOwner::Missing => Ok(None),
            BucketOwner::Foreign => Err(Self::not_ours(&place.bucket)),
        }
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        // A bucket left by an earlier run (or created by another stage) is adopted.
        if let Some(found) = self.find(cx).await? {
            return Ok(found);
        }
        let place = place_of(cx).await?;
        if !place.prefix.is_empty() {
            return Err(StepError::fatal(
                "shared-bucket-missing",
                format!(
                    "the deployment's shared bucket `{}` does not exist (or this control plane may not reach it): \
                     create it, or start the server without INSTANTSTART_SHARED_BUCKET to give each cluster a bucket of its own",
                    place.bucket
                ),
            ));
        }
        match cx
            .cloud
            .objects
            .create_bucket(&place.bucket, &net_tags(cx, "bucket"))
            .await
        {
            // Taken since the check above, by another account.
            Err(e) if e.code == "BucketAlreadyExists" => Err(Self::not_ours(&place.bucket)),
            other => other.map(|()| Self::recorded(&place)).map_err(Into::into),
        }
    }
}

pub struct LifecycleScriptStep;

#[async_trait]
impl Step for LifecycleScriptStep {
    fn calls(&self) -> &'static [&'static str] {
        &["s3:PutObject"]
    }
    fn name(&self) -> &'static str {
        "lifecycle-script"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let place = crate::service::storage::bucket::recorded_place(cx)?;
        cx.cloud
            .objects
            .put_object(
                &place.bucket,
                &place.key(&format!("{LIFECYCLE_PREFIX}on_create.sh")),
                ON_CREATE_SCRIPT.as_bytes().to_vec(),
            )
            .await?;
        Ok(json!({"lifecycleS3Uri": place.uri(LIFECYCLE_PREFIX)}))
    }
}

pub struct HyperPodClusterStep;

impl HyperPodClusterStep {
    fn request(cx: &StepCx<'_>, p: &HyperPodParams) -> StepResult<CreateHyperPodCluster> {
        let instance_groups = vec![InstanceGroupSpec {
            name: p.instance_group_name.clone(),
            instance_type: p.instance_type.clone(),
            instance_count: p.instance_count,
            execution_role_arn: cx.recorded().execution_role_arn()?,
            lifecycle_source_s3_uri: cx.recorded().lifecycle_s3_uri()?,
            lifecycle_on_create: "on_create.sh".into(),
            threads_per_core: threads_per_core(&p.instance_type, &p.capacity),
            ebs_volume_gb: p.volume_size_gb,
            deep_health_checks: deep_health_checks(p.deep_health_checks),
            capacity: p.capacity.clone(),
            subnet_ids: vec![cx.recorded().compute_subnet_id()?],
            security_group_ids: vec![cx.recorded().cluster_security_group_id()?],
            network_interface: p.network_interface.clone(),
            scheduled_update: None,
        }];
        Ok(CreateHyperPodCluster {
            name: hyperpod_name(&cx.op.cluster),
            eks_cluster_arn: cx.recorded().eks_cluster_arn()?,
            node_recovery: "Automatic".into(),
            continuous_provisioning: crate::cloud::continuous_provisioning(&instance_groups),
            instance_groups,
            tags: {
                let mut tags = net_tags(cx, "hyperpod");
                tags.extend(operator_tag());
                tags
            },
        })
    }
}

#[async_trait]
impl Step for HyperPodClusterStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:CreateCluster"]
    }
    fn name(&self) -> &'static str {
        "hyperpod-cluster"
    }
    /// Longer than the default: HyperPod provisions and health-checks every instance.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60 * 60)
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(cx
            .cloud
            .hyperpod
            .describe_cluster(&hyperpod_of(cx))
            .await?
            .filter(|c| c.status != HyperPodStatus::Deleting)
            .map(|c| json!({"hyperPodClusterArn": c.arn, "hyperPodClusterName": c.name})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: HyperPodParams = cx.param()?;
        let req = Self::request(cx, &p)?;
        let arn = cx.cloud.hyperpod.create_cluster(&req).await?;
        Ok(json!({"hyperPodClusterArn": arn, "hyperPodClusterName": req.name}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let name = hyperpod_name(&cx.op.cluster);
        let Some(c) = cx.cloud.hyperpod.describe_cluster(&name).await? else {
            return Err(StepError::fatal(
                "hyperpod-cluster-missing",
                "the HyperPod cluster no longer exists",
            ));
        };
        let current: u32 = c.instance_groups.iter().map(|g| g.current_count).sum();
        let target: u32 = c.instance_groups.iter().map(|g| g.target_count).sum();
        match c.status {
            HyperPodStatus::InService => {
                // Every group's full spec is recorded: UpdateCluster must resend them all.
                let p: HyperPodParams = cx.param()?;
                let groups = Self::request(cx, &p)?.instance_groups;
                let mut out = out.clone();
                out["instanceGroups"] =
                    serde_json::to_value(groups).map_err(anyhow::Error::from)?;
                Ok(Poll::Ready(out))
            }
            HyperPodStatus::Creating
            | HyperPodStatus::Updating
            | HyperPodStatus::SystemUpdating => Ok(Poll::Pending(format!(
                "{:?}: nodes {current}/{target}",
                c.status
            ))),
            other => Err(StepError::fatal(
                "hyperpod-cluster-failed",
                format!(
                    "HyperPod cluster is {other:?}: {}",
                    c.failure_message.unwrap_or_default()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_per_core_is_two_for_p_family_and_training_plans_only() {
        assert_eq!(threads_per_core("ml.p5.48xlarge", &Capacity::OnDemand), 2);
        assert_eq!(threads_per_core("ml.p4d.24xlarge", &Capacity::Spot), 2);
        assert_eq!(threads_per_core("ml.g5.8xlarge", &Capacity::OnDemand), 1);
        let plan = Capacity::TrainingPlan { arn: "arn".into() };
        assert_eq!(threads_per_core("ml.g5.8xlarge", &plan), 2);
    }

    #[test]
    fn the_execution_policy_never_grants_s3_on_everything() {
        let own = BucketPlace::whole("b");
        let doc = ExecutionRoleStep::policy(&own, "arn:aws:eks:us-west-2:1:cluster/c").to_string();
        assert!(!doc.contains("\"s3:*\""));
        assert!(doc.contains("arn:aws:s3:::b/*"));
        // In a shared bucket: the cluster's prefix only, for objects and for listing.
        let shared = BucketPlace::prefixed("shared", "c/");
        let doc = ExecutionRoleStep::policy(&shared, "arn:aws:eks:us-west-2:1:cluster/c");
        let s3: Vec<&Value> = doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Action"].to_string().contains("s3:"))
            .collect();
        assert_eq!(s3.len(), 2);
        assert_eq!(
            s3[0]["Condition"]["StringLike"]["s3:prefix"],
            json!(["c/*"])
        );
        assert_eq!(s3[1]["Resource"], json!(["arn:aws:s3:::shared/c/*"]));
    }

    /// What AWS's HyperPod templates grant the execution role beyond the managed policy,
    /// statement by statement: image pulls, pod identity on this cluster only, and the VPC CNI's
    /// network-interface actions inside this account and region.
    #[test]
    fn the_execution_policy_grants_image_pulls_pod_identity_and_the_cni() {
        let eks = "arn:aws-cn:eks:cn-north-1:111122223333:cluster/demo";
        let own = BucketPlace::whole("b");
        let doc = ExecutionRoleStep::policy(&own, eks);
        let find = |action: &str| {
            doc["Statement"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["Action"].as_array().unwrap().iter().any(|a| a == action))
                .unwrap_or_else(|| panic!("{action} is not granted"))
                .clone()
        };
        assert_eq!(
            find("ecr:GetAuthorizationToken")["Resource"],
            "*",
            "the token has no resource-level permissions"
        );
        // The pulls name a repository (any account: AWS's own registries), in this region.
        let repo = "arn:aws-cn:ecr:cn-north-1:918309763551:repository/amazon-k8s-cni";
        for a in [
            "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer",
            "ecr:BatchCheckLayerAvailability",
        ] {
            let resources = find(a)["Resource"].clone();
            assert!(
                resources.as_array().unwrap().iter().all(|r| r != "*")
                    && crate::cloud::policy::decide(
                        &doc,
                        &crate::cloud::policy::Request::new(a, repo)
                    ) == crate::cloud::policy::Decision::Allow,
                "{a} on {resources}"
            );
        }
        assert_eq!(
            find("eks-auth:AssumeRoleForPodIdentity")["Resource"],
            json!([eks])
        );
        let eni = find("ec2:CreateNetworkInterface");
        assert!(eni["Resource"].as_array().unwrap().iter().all(|r| r
            .as_str()
            .unwrap()
            .starts_with("arn:aws-cn:ec2:cn-north-1:111122223333:")));
        for a in [
            "ec2:AttachNetworkInterface",
            "ec2:ModifyNetworkInterfaceAttribute",
            "ec2:DescribeInstances",
            "ec2:DescribeInstanceTypes",
        ] {
            find(a);
        }
    }
}
