//! Managed capabilities as reconciled state: each feature's actual state is read from its
//! sources of truth (EKS add-ons and pod identity; for tiered checkpointing the HyperPod
//! cluster's `TieredStorageConfig`, the IAM role and the Kubernetes service account); a change is
//! one operation per feature (`feature-<key>`), enabling or disabling exactly that chain.
//!
//! Managed autoscaling (HyperPod-managed Karpenter) is the cluster's `AutoScaling` setting, a
//! role HyperPod assumes to add and remove nodes of this cluster only, and the
//! `HyperpodNodeClass` + `NodePool` naming the instance groups it governs.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::{irsa_trust, kube_target, IrsaRole};
use super::hyperpod::{execution_role_name, hyperpod_name};
use crate::cloud::{
    AddonStatus, Cloud, CloudResult, CreateAddon, KubeTarget, ObjectRef, TieredStorage, MANAGED_BY,
};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};

/// One feature.
pub struct Feature {
    /// Field name in the API (camelCase).
    pub key: &'static str,
    /// Operation kind that changes it.
    pub kind: &'static str,
    /// The EKS add-on, for add-on features; empty for tiered checkpointing.
    pub addon: &'static str,
    /// EKS add-ons that must be ACTIVE before enabling.
    pub requires: &'static [&'static str],
    /// `(namespace, service account)` bound by pod identity to the feature's first own role.
    pub pod_identity: Option<(&'static str, &'static str)>,
    /// Roles of the feature's own (`<cluster>-<suffix>`), never the cluster's execution role:
    /// each with the trust and the policies AWS documents for it.
    pub own_roles: &'static [OwnRole],
    /// The add-on's configuration values, built from its roles, bucket and cluster.
    pub configuration: Option<fn(&AddonInputs) -> Value>,
    pub description: &'static str,
}

/// How a feature's own role is trusted.
pub enum Trust {
    /// EKS pod identity (the role is bound to a service account by an association).
    PodIdentity,
    /// One AWS service principal.
    Service(&'static str),
    /// IRSA: exactly one service account through the cluster's OIDC provider; with `sagemaker`
    /// SageMaker may assume it too (the inference operator's execution role).
    Irsa {
        namespace: &'static str,
        service_account: &'static str,
        sagemaker: bool,
    },
}

/// A feature's own role: name suffix, trust, an inline policy for (bucket, HyperPod cluster
/// ARN) and the AWS-managed policies attached to it.
pub struct OwnRole {
    pub suffix: &'static str,
    pub trust: Trust,
    pub policy: Option<fn(&str, &str) -> Value>,
    /// Names under `arn:<partition>:iam::aws:policy/`.
    pub managed: &'static [&'static str],
}

/// What an add-on's configuration values are built from.
pub struct AddonInputs {
    /// Own role ARNs by suffix.
    pub roles: std::collections::BTreeMap<&'static str, String>,
    pub bucket: String,
    pub hyperpod_cluster_arn: String,
}

fn autoscaling_role_policy(_bucket: &str, cluster_arn: &str) -> Value {
    autoscaling_policy(cluster_arn)
}

/// The inference operator's add-on configuration, field by field as AWS documents it for
/// `amazon-sagemaker-hyperpod-inference`: its execution role, the bucket for its TLS
/// certificates, the HyperPod cluster, and the roles of its load balancer controller and KEDA.
pub fn inference_configuration(i: &AddonInputs) -> Value {
    let role = |s: &str| i.roles.get(s).cloned().unwrap_or_default();
    json!({
        "executionRoleArn": role(INFERENCE_EXEC),
        "tlsCertificateS3Bucket": i.bucket,
        "hyperpodClusterArn": i.hyperpod_cluster_arn,
        "alb": {"serviceAccount": {"create": true, "roleArn": role(INFERENCE_ALB)}},
        "keda": {"auth": {"aws": {"irsa": {"roleArn": role(INFERENCE_KEDA)}}}}
    })
}

/// Suffixes of the inference operator's roles.
pub const INFERENCE_EXEC: &str = "inference";
pub const INFERENCE_KEDA: &str = "inference-keda";
pub const INFERENCE_ALB: &str = "inference-alb";
/// Where the inference operator writes its TLS certificates in the cluster's bucket.
pub const TLS_PREFIX: &str = "inference-tls/";

impl OwnRole {
    pub fn name(&self, cluster: &str) -> String {
        format!("{cluster}-{}", self.suffix)
    }
}

/// The inference operator's execution role, next to AWS's `AmazonSageMakerHyperPodInferenceAccess`:
/// reads models from the cluster's bucket and keeps its TLS certificates under one prefix of it,
/// reads this HyperPod cluster. Models are never written.
fn inference_policy(bucket: &str, cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ModelsList", "Effect": "Allow", "Action": ["s3:ListBucket"],
         "Resource": [format!("arn:aws:s3:::{bucket}")]},
        {"Sid": "ModelsRead", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [format!("arn:aws:s3:::{bucket}/*")]},
        {"Sid": "TlsCertificates", "Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"],
         "Resource": [format!("arn:aws:s3:::{bucket}/{TLS_PREFIX}*")]},
        {"Sid": "ThisCluster", "Effect": "Allow",
         "Action": ["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"],
         "Resource": [cluster_arn]}]})
}

/// KEDA's role inside the inference operator: reads metrics (CloudWatch, Amazon Managed
/// Service for Prometheus) to scale endpoints; nothing else.
fn inference_keda_policy(_bucket: &str, _cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadMetrics", "Effect": "Allow",
         "Action": ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                    "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
         "Resource": "*"}]})
}

/// The load balancer controller's role inside the inference operator: the AWS Load Balancer
/// Controller's documented permissions, with writes limited to load balancers it tagged.
fn inference_alb_policy(_bucket: &str, _cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ServiceLinkedRole", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": "*",
         "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}},
        {"Sid": "Describe", "Effect": "Allow",
         "Action": ["ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
                    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
                    "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:GetCoipPoolUsage",
                    "ec2:DescribeCoipPools", "ec2:GetSecurityGroupsForVpc", "ec2:DescribeIpamPools",
                    "elasticloadbalancing:Describe*", "acm:ListCertificates", "acm:DescribeCertificate",
                    "wafv2:GetWebACL", "wafv2:GetWebACLForResource", "shield:GetSubscriptionState"],
         "Resource": "*"},
        {"Sid": "SecurityGroups", "Effect": "Allow",
         "Action": ["ec2:CreateSecurityGroup", "ec2:CreateTags", "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"],
         "Resource": "*",
         "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}},
        {"Sid": "CreateLoadBalancers", "Effect": "Allow",
         "Action": ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
         "Resource": "*",
         "Condition": {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}},
        {"Sid": "ChangeOwnLoadBalancers", "Effect": "Allow",
         "Action": ["elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
                    "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule",
                    "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags",
                    "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
                    "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
                    "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
                    "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
                    "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets",
                    "elasticloadbalancing:ModifyListener", "elasticloadbalancing:ModifyRule"],
         "Resource": "*",
         "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}}]})
}

/// Key of the managed tiered checkpointing feature (not an add-on).
pub const TIERED: &str = "tieredCheckpointing";
/// The service account checkpointing clients run as, in the namespace our workloads use.
pub const CHECKPOINT_SA: (&str, &str) = ("default", "hyperpod-checkpointing");
/// Default share of instance memory for checkpoints.
pub const DEFAULT_MEMORY_PERCENT: u32 = 20;

pub fn checkpoint_role_name(cluster: &str) -> String {
    format!("{cluster}-checkpoints")
}

/// Key of the managed autoscaling feature (not an add-on).
pub const AUTOSCALING: &str = "managedAutoscaling";
/// Name of the `HyperpodNodeClass` and the `NodePool` we manage.
pub const NODE_CLASS: &str = "instantstart";
/// AWS documents at most 10 instance groups in one `HyperpodNodeClass`.
pub const MAX_AUTOSCALED_GROUPS: usize = 10;
pub const NODE_CLASS_GROUP: &str = "karpenter.sagemaker.amazonaws.com";

pub fn autoscaling_role_name(cluster: &str) -> String {
    format!("{cluster}-autoscaling")
}

pub fn node_class_ref() -> ObjectRef {
    ObjectRef {
        api_version: format!("{NODE_CLASS_GROUP}/v1"),
        kind: "HyperpodNodeClass".into(),
        namespace: None,
        name: NODE_CLASS.into(),
    }
}

pub fn node_pool_ref() -> ObjectRef {
    ObjectRef {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        namespace: None,
        name: NODE_CLASS.into(),
    }
}

/// The `HyperpodNodeClass` naming the instance groups Karpenter may scale.
pub fn node_class(groups: &[String]) -> Value {
    json!({"apiVersion": format!("{NODE_CLASS_GROUP}/v1"), "kind": "HyperpodNodeClass",
           "metadata": {"name": NODE_CLASS, "labels": { MANAGED_BY.0: MANAGED_BY.1 }},
           "spec": {"instanceGroups": groups}})
}

/// The `NodePool` over that node class: any of its instance types; empty nodes are removed
/// after ten minutes (that is how a group returns to zero).
pub fn node_pool() -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
           "metadata": {"name": NODE_CLASS, "labels": { MANAGED_BY.0: MANAGED_BY.1 }},
           "spec": {
               "template": {"spec": {
                   "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": "HyperpodNodeClass", "name": NODE_CLASS},
                   "expireAfter": "Never",
                   "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "Exists"}]}},
               "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}}})
}

/// The instance groups the managed node class names (empty when there is none).
pub async fn autoscaled_groups(cloud: &Cloud, target: &KubeTarget) -> CloudResult<Vec<String>> {
    Ok(cloud
        .kube
        .get(target, &node_class_ref())
        .await?
        .and_then(|nc| serde_json::from_value(nc["spec"]["instanceGroups"].clone()).ok())
        .unwrap_or_default())
}

pub static FEATURES: &[Feature] = &[
    Feature {
        key: "trainingOperator",
        kind: "feature-training-operator",
        addon: "amazon-sagemaker-hyperpod-training-operator",
        requires: &["cert-manager", "eks-pod-identity-agent"],
        pod_identity: Some(("aws-hyperpod", "hp-training-operator-controller-manager")),
        own_roles: &[OwnRole {
            suffix: "training-operator",
            trust: Trust::PodIdentity,
            policy: None,
            managed: &["AmazonSageMakerHyperPodTrainingOperatorAccess"],
        }],
        configuration: None,
        description: "HyperPod training operator (HyperPodPyTorchJob), with its own role <cluster>-training-operator (AWS's AmazonSageMakerHyperPodTrainingOperatorAccess) bound by pod identity",
    },
    Feature {
        key: "containerInsights",
        kind: "feature-container-insights",
        addon: "amazon-cloudwatch-observability",
        requires: &["eks-pod-identity-agent"],
        pod_identity: Some(("amazon-cloudwatch", "cloudwatch-agent")),
        own_roles: &[OwnRole {
            suffix: "cloudwatch-agent",
            trust: Trust::PodIdentity,
            policy: None,
            managed: &["CloudWatchAgentServerPolicy"],
        }],
        configuration: None,
        description: "CloudWatch Container Insights (the amazon-cloudwatch-observability add-on), with its own role <cluster>-cloudwatch-agent (AWS's CloudWatchAgentServerPolicy) bound by pod identity to the CloudWatch agent",
    },
    Feature {
        key: TIERED,
        kind: "feature-tiered-checkpointing",
        addon: "",
        requires: &[],
        pod_identity: None,
        own_roles: &[],
        configuration: None,
        description: "Managed tiered checkpointing: TieredStorageConfig on the HyperPod cluster, plus the service account default/hyperpod-checkpointing with an IRSA role limited to checkpoints/ in the cluster's bucket",
    },
    Feature {
        key: "inferenceOperator",
        kind: "feature-inference-operator",
        addon: "amazon-sagemaker-hyperpod-inference",
        // The add-ons AWS names as required before the inference operator installs.
        requires: &["cert-manager", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "metrics-server"],
        pod_identity: None,
        own_roles: &[
            OwnRole {
                suffix: INFERENCE_EXEC,
                trust: Trust::Irsa {
                    namespace: "hyperpod-inference-system",
                    service_account: "hyperpod-inference-controller-manager",
                    sagemaker: true,
                },
                policy: Some(inference_policy),
                managed: &["AmazonSageMakerHyperPodInferenceAccess"],
            },
            OwnRole {
                suffix: INFERENCE_KEDA,
                trust: Trust::Irsa {
                    namespace: "hyperpod-inference-system",
                    service_account: "keda-operator",
                    sagemaker: false,
                },
                policy: Some(inference_keda_policy),
                managed: &[],
            },
            OwnRole {
                suffix: INFERENCE_ALB,
                trust: Trust::Irsa {
                    namespace: "hyperpod-inference-system",
                    service_account: "aws-load-balancer-controller",
                    sagemaker: false,
                },
                policy: Some(inference_alb_policy),
                managed: &[],
            },
        ],
        configuration: Some(inference_configuration),
        description: "HyperPod inference operator (InferenceEndpointConfig): the add-on with the configuration AWS documents, its execution role <cluster>-inference (AWS's AmazonSageMakerHyperPodInferenceAccess, trusted by SageMaker and its controller's service account) and the roles of its load balancer controller and KEDA",
    },
    Feature {
        key: AUTOSCALING,
        kind: "feature-managed-autoscaling",
        addon: "",
        requires: &[],
        pod_identity: None,
        // The role HyperPod assumes to add and remove this cluster's nodes.
        own_roles: &[OwnRole {
            suffix: "autoscaling",
            trust: Trust::Service("hyperpod.sagemaker.amazonaws.com"),
            policy: Some(autoscaling_role_policy),
            managed: &[],
        }],
        configuration: None,
        description: "Managed autoscaling (HyperPod-managed Karpenter): scales the chosen HyperPod instance groups (on-demand or Spot, without deep health checks) from zero with pending pods. It governs HyperPod instance groups only, not general EC2 capacity.",
    },
    Feature {
        key: "fsxCsi",
        kind: "feature-fsx-csi",
        addon: "aws-fsx-csi-driver",
        requires: &[],
        pod_identity: None,
        own_roles: &[],
        configuration: None,
        description: "FSx for Lustre CSI driver, for FSx storage claims (static volumes need no IAM role)",
    },
];

pub fn feature(key: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.key == key)
}

pub fn by_kind(kind: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.kind == kind)
}

/// A feature's actual state.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureState {
    pub key: String,
    pub enabled: bool,
    /// `disabled`, `enabling`, `enabled`, `degraded`, `failed`, `disabling`.
    pub state: String,
    pub addon: String,
    pub description: String,
    /// Pod identity association id, when the feature uses one.
    pub pod_identity_association: Option<String>,
    /// Tiered checkpointing: share of instance memory for checkpoints.
    pub memory_percent: Option<u32>,
    /// Managed autoscaling: the instance groups it governs.
    pub instance_groups: Option<Vec<String>>,
    /// Why the state is `degraded` or `failed`, when known.
    pub reason: Option<String>,
    /// The operation changing it right now (its state is then `enabling` or `disabling`).
    pub operation_id: Option<String>,
}

/// Reads a feature from its sources of truth.
pub async fn actual(
    cloud: &Cloud,
    cluster: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    if f.key == TIERED {
        return tiered_actual(cloud, cluster, target, f).await;
    }
    if f.key == AUTOSCALING {
        return autoscaling_actual(cloud, cluster, target, f).await;
    }
    let addon = cloud.eks.describe_addon(cluster, f.addon).await?;
    let association = match f.pod_identity {
        Some((ns, sa)) => cloud.eks.find_pod_identity(cluster, ns, sa).await?,
        None => None,
    };
    let state = match addon.as_ref().map(|a| a.status) {
        None => "disabled",
        Some(AddonStatus::Creating | AddonStatus::Updating) => "enabling",
        Some(AddonStatus::Active) if f.pod_identity.is_some() && association.is_none() => {
            "degraded"
        }
        Some(AddonStatus::Active) => "enabled",
        Some(AddonStatus::Degraded) => "degraded",
        Some(AddonStatus::Deleting) => "disabling",
        Some(_) => "failed",
    };
    Ok(FeatureState {
        key: f.key.into(),
        enabled: !matches!(state, "disabled" | "disabling"),
        state: state.into(),
        addon: f.addon.into(),
        description: f.description.into(),
        reason: (state == "degraded" && association.is_none() && f.pod_identity.is_some())
            .then(|| "the add-on is active but its pod identity association is missing".into()),
        pod_identity_association: association,
        memory_percent: None,
        instance_groups: None,
        operation_id: None,
    })
}

/// Enabled when the cluster's autoscaling is on, its role exists and the node class and pool
/// are applied; `degraded` when only part of that is there.
async fn autoscaling_actual(
    cloud: &Cloud,
    cluster: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    let hp = cloud
        .hyperpod
        .describe_cluster(&hyperpod_name(cluster))
        .await?;
    let config = hp.and_then(|c| c.autoscaling).filter(|a| a.enabled);
    let role = cloud
        .iam
        .get_role(&autoscaling_role_name(cluster))
        .await?
        .is_some();
    let groups = autoscaled_groups(cloud, target).await?;
    let class = cloud.kube.get(target, &node_class_ref()).await?.is_some();
    let pool = cloud.kube.get(target, &node_pool_ref()).await?.is_some();
    let failed = config.as_ref().is_some_and(|a| a.status == "Failed");
    let on = config.is_some();
    let complete = role && class && pool;
    let state = match (on, complete, role || class || pool) {
        _ if failed => "failed",
        (true, true, _) => "enabled",
        (false, _, false) => "disabled",
        _ => "degraded",
    };
    let reason = match state {
        "failed" => config.and_then(|a| a.failure_message),
        "degraded" => Some(format!(
            "incomplete: autoscaling {}, role {}, node class {}, node pool {}",
            if on { "on" } else { "off" },
            if role { "present" } else { "missing" },
            if class { "present" } else { "missing" },
            if pool { "present" } else { "missing" },
        )),
        _ => None,
    };
    Ok(FeatureState {
        key: f.key.into(),
        enabled: on,
        state: state.into(),
        addon: String::new(),
        description: f.description.into(),
        pod_identity_association: None,
        memory_percent: None,
        instance_groups: Some(groups),
        reason,
        operation_id: None,
    })
}

/// The checkpointing service account, bound to its IRSA role by the annotation.
pub fn checkpoint_service_account(role_arn: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": CHECKPOINT_SA.1, "namespace": CHECKPOINT_SA.0,
                     "labels": { MANAGED_BY.0: MANAGED_BY.1 },
                     "annotations": {"eks.amazonaws.com/role-arn": role_arn}}})
}

pub fn checkpoint_sa_ref() -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ServiceAccount".into(),
        namespace: Some(CHECKPOINT_SA.0.into()),
        name: CHECKPOINT_SA.1.into(),
    }
}

/// Enabled when the HyperPod cluster says so; `degraded` when the identity chain is incomplete
/// (or left over after disabling).
async fn tiered_actual(
    cloud: &Cloud,
    cluster: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    let hp = cloud
        .hyperpod
        .describe_cluster(&hyperpod_name(cluster))
        .await?;
    let config = hp
        .as_ref()
        .and_then(|c| c.tiered_storage)
        .filter(|t| t.enabled);
    let role = cloud
        .iam
        .get_role(&checkpoint_role_name(cluster))
        .await?
        .is_some();
    let sa = cloud
        .kube
        .get(target, &checkpoint_sa_ref())
        .await?
        .is_some();
    let state = match (config.is_some(), role && sa, role || sa) {
        (true, true, _) => "enabled",
        (false, _, false) => "disabled",
        _ => "degraded",
    };
    Ok(FeatureState {
        key: f.key.into(),
        enabled: config.is_some(),
        state: state.into(),
        addon: String::new(),
        description: f.description.into(),
        pod_identity_association: None,
        memory_percent: config.and_then(|c| c.memory_percent),
        instance_groups: None,
        reason: (state == "degraded").then(|| {
            format!(
                "incomplete: cluster setting {}, role {}, service account {}",
                if config.is_some() { "on" } else { "off" },
                if role { "present" } else { "missing" },
                if sa { "present" } else { "missing" },
            )
        }),
        operation_id: None,
    })
}

/// Parameters of a `feature-*` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureParams {
    pub enable: bool,
    /// Tiered checkpointing only.
    #[serde(default)]
    pub memory_percent: Option<u32>,
    /// Managed autoscaling only: the instance groups it governs.
    #[serde(default)]
    pub instance_groups: Option<Vec<String>>,
}

fn feature_of(cx: &StepCx<'_>) -> StepResult<&'static Feature> {
    by_kind(&cx.op.kind)
        .ok_or_else(|| StepError::fatal("bad-params", format!("no feature for {}", cx.op.kind)))
}

/// Enables or disables the add-on, watched to ACTIVE or gone.
pub struct FeatureAddonStep;

#[async_trait]
impl Reconcile for FeatureAddonStep {
    fn phase(&self) -> &'static str {
        "addon"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let existing = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
        match (p.enable, existing) {
            (true, Some(a)) => Ok(json!({"addonArn": a.arn, "changed": false})),
            (true, None) => {
                let configuration_values = match f.configuration {
                    Some(build) => Some(build(&addon_inputs(cx, f).await?).to_string()),
                    None => None,
                };
                let a = cx
                    .cloud
                    .eks
                    .create_addon(&CreateAddon {
                        cluster: cx.op.cluster.clone(),
                        name: f.addon.into(),
                        version: None,
                        service_account_role_arn: None,
                        configuration_values,
                        resolve_conflicts: "OVERWRITE".into(),
                    })
                    .await?;
                Ok(json!({"addonArn": a.arn, "changed": true}))
            }
            (false, Some(_)) => {
                cx.cloud.eks.delete_addon(&cx.op.cluster, f.addon).await?;
                Ok(json!({"changed": true}))
            }
            (false, None) => Ok(json!({"changed": false})),
        }
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let a = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
        match (p.enable, a.map(|a| a.status)) {
            (true, Some(AddonStatus::Active)) | (false, None) => Ok(Poll::Ready(out.clone())),
            (true, Some(AddonStatus::Creating | AddonStatus::Updating))
            | (false, Some(AddonStatus::Deleting)) => Ok(Poll::Pending(format!(
                "add-on {}",
                if p.enable { "creating" } else { "deleting" }
            ))),
            (true, None) => Err(StepError::fatal(
                "addon-missing",
                format!("add-on {} disappeared while it was being created", f.addon),
            )),
            (_, Some(other)) => Err(StepError::fatal(
                "addon-failed",
                format!("add-on {} is {other:?}", f.addon),
            )),
        }
    }
}

/// What the feature's add-on configuration is built from: its own roles (which the role phase
/// made first), the cluster's bucket and the HyperPod cluster.
async fn addon_inputs(cx: &StepCx<'_>, f: &Feature) -> StepResult<AddonInputs> {
    let mut roles = std::collections::BTreeMap::new();
    for own in f.own_roles {
        let name = own.name(&cx.op.cluster);
        let Some(r) = cx.cloud.iam.get_role(&name).await? else {
            return Err(StepError::fatal(
                "missing-prerequisite",
                format!("the role {name} is missing"),
            ));
        };
        roles.insert(own.suffix, r.arn);
    }
    Ok(AddonInputs {
        roles,
        bucket: bucket_of(cx).await?,
        hyperpod_cluster_arn: super::hyperpod::described(cx).await?.arn,
    })
}

/// Binds (or unbinds) the feature's service account to its own role, then watches the add-on
/// get credentials through it (a node role without `eks-auth:AssumeRoleForPodIdentity` leaves
/// it degraded with AccessDenied).
pub struct FeatureIdentityStep;

#[async_trait]
impl Reconcile for FeatureIdentityStep {
    fn phase(&self) -> &'static str {
        "pod-identity"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let Some((ns, sa)) = f.pod_identity else {
            return Ok(json!({"changed": false}));
        };
        let existing = cx
            .cloud
            .eks
            .find_pod_identity(&cx.op.cluster, ns, sa)
            .await?;
        match (p.enable, existing) {
            (true, Some(id)) => Ok(json!({"associationId": id, "changed": false})),
            (true, None) => {
                let role = match f.own_roles.first() {
                    Some(own) => own.name(&cx.op.cluster),
                    None => execution_role_name(&cx.op.cluster),
                };
                let Some(r) = cx.cloud.iam.get_role(&role).await? else {
                    return Err(StepError::fatal(
                        "missing-prerequisite",
                        format!("the role {role} does not exist: create the HyperPod cluster (or enable the feature) first"),
                    ));
                };
                let trust = json!({"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                                   "Action": ["sts:AssumeRole", "sts:TagSession"]});
                cx.cloud.iam.add_trust_statement(&role, &trust).await?;
                let id = cx
                    .cloud
                    .eks
                    .create_pod_identity(&cx.op.cluster, ns, sa, &r.arn)
                    .await?;
                Ok(json!({"associationId": id, "changed": true}))
            }
            (false, Some(id)) => {
                cx.cloud
                    .eks
                    .delete_pod_identity(&cx.op.cluster, &id)
                    .await?;
                Ok(json!({"changed": true}))
            }
            (false, None) => Ok(json!({"changed": false})),
        }
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        if !p.enable || f.pod_identity.is_none() {
            return Ok(Poll::Ready(out.clone()));
        }
        match cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await? {
            Some(a) if a.status == AddonStatus::Active => Ok(Poll::Ready(out.clone())),
            Some(a)
                if a.health
                    .as_deref()
                    .is_some_and(|h| h.contains("AccessDenied")) =>
            {
                Err(StepError::fatal(
                    "pod-identity-denied",
                    format!(
                        "{} cannot get credentials through pod identity: {}",
                        f.addon,
                        a.health.unwrap_or_default()
                    ),
                ))
            }
            Some(a) => Ok(Poll::Pending(format!(
                "add-on {:?}{}",
                a.status,
                a.health.map(|h| format!(": {h}")).unwrap_or_default()
            ))),
            None => Err(StepError::fatal(
                "addon-missing",
                format!("add-on {} disappeared", f.addon),
            )),
        }
    }
}

/// The IRSA role of the checkpointing service account: only `checkpoints/` in the cluster's
/// bucket.
pub struct CheckpointRoleStep;

#[async_trait]
impl Reconcile for CheckpointRoleStep {
    fn phase(&self) -> &'static str {
        "role"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let name = checkpoint_role_name(&cx.op.cluster);
        if !p.enable {
            let existed = cx.cloud.iam.get_role(&name).await?.is_some();
            if existed {
                cx.cloud.iam.delete_role(&name).await?;
            }
            return Ok(json!({"changed": existed}));
        }
        let bucket = cx.resource("bucketName")?;
        let doc = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [format!("arn:aws:s3:::{bucket}")],
             "Condition": {"StringLike": {"s3:prefix": ["checkpoints/*"]}}},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
             "Resource": [format!("arn:aws:s3:::{bucket}/checkpoints/*")]}]});
        let role = IrsaRole {
            name,
            namespace: CHECKPOINT_SA.0,
            service_account: CHECKPOINT_SA.1,
            tag_role: "checkpoints-role",
            policy_name: "instantstart-checkpoints",
        };
        let arn = role.ensure(cx, &doc).await?;
        Ok(json!({"roleArn": arn}))
    }
}

/// The service account, annotated with the role (applied), or removed.
pub struct CheckpointServiceAccountStep;

#[async_trait]
impl Reconcile for CheckpointServiceAccountStep {
    fn phase(&self) -> &'static str {
        "service-account"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let target = kube_target(cx)?;
        if !p.enable {
            cx.cloud.kube.delete(&target, &checkpoint_sa_ref()).await?;
            return Ok(json!({"deleted": true}));
        }
        let Some(role) = cx
            .cloud
            .iam
            .get_role(&checkpoint_role_name(&cx.op.cluster))
            .await?
        else {
            return Err(StepError::fatal(
                "missing-prerequisite",
                "the checkpointing role is missing",
            ));
        };
        cx.cloud
            .kube
            .apply(&target, &checkpoint_service_account(&role.arn))
            .await?;
        Ok(json!({"serviceAccount": format!("{}/{}", CHECKPOINT_SA.0, CHECKPOINT_SA.1)}))
    }
}

/// `TieredStorageConfig` on the HyperPod cluster, watched until the cluster is back in service
/// with the wanted setting.
pub struct TieredConfigStep;

impl TieredConfigStep {
    fn wanted(p: &FeatureParams) -> TieredStorage {
        TieredStorage {
            enabled: p.enable,
            memory_percent: p
                .enable
                .then(|| p.memory_percent.unwrap_or(DEFAULT_MEMORY_PERCENT)),
        }
    }
}

#[async_trait]
impl Reconcile for TieredConfigStep {
    fn phase(&self) -> &'static str {
        "tiered-storage-config"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let wanted = Self::wanted(&p);
        let name = hyperpod_name(&cx.op.cluster);
        let current = super::hyperpod::described(cx).await?;
        let now = current.tiered_storage.filter(|t| t.enabled);
        let same = match (now, wanted.enabled) {
            (None, false) => true,
            (Some(t), true) => t.memory_percent == wanted.memory_percent,
            _ => false,
        };
        if !same {
            cx.cloud.hyperpod.set_tiered_storage(&name, wanted).await?;
        }
        Ok(json!({"changed": !same}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        super::hyperpod::back_in_service(super::hyperpod::described(cx).await?, out)
    }
}

/// The autoscaling role's trust: HyperPod alone.
pub fn autoscaling_trust() -> Value {
    service_trust("hyperpod.sagemaker.amazonaws.com", &["sts:AssumeRole"])
}

/// A trust policy for exactly one AWS service principal.
pub fn service_trust(service: &str, actions: &[&str]) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]})
}

async fn bucket_of(cx: &StepCx<'_>) -> StepResult<String> {
    let account = cx.cloud.iam.caller_identity().await?.account;
    Ok(super::hyperpod::bucket_name(&cx.op.cluster, &account))
}

/// A feature's own roles (the training operator's, the CloudWatch agent's, the inference
/// operator's three, the autoscaling role): each created with its documented trust when
/// missing, its inline policy put and its AWS-managed policies attached either way; or deleted.
pub struct OwnRoleStep;

impl OwnRoleStep {
    async fn trust(cx: &StepCx<'_>, trust: &Trust) -> StepResult<Value> {
        Ok(match trust {
            Trust::PodIdentity => service_trust(
                "pods.eks.amazonaws.com",
                &["sts:AssumeRole", "sts:TagSession"],
            ),
            Trust::Service(principal) => service_trust(principal, &["sts:AssumeRole"]),
            Trust::Irsa {
                namespace,
                service_account,
                sagemaker,
            } => {
                let mut doc = irsa_trust(cx, namespace, service_account).await?;
                if *sagemaker {
                    if let Some(list) = doc["Statement"].as_array_mut() {
                        list.push(json!({"Effect": "Allow",
                            "Principal": {"Service": "sagemaker.amazonaws.com"},
                            "Action": "sts:AssumeRole"}));
                    }
                }
                doc
            }
        })
    }

    async fn ensure(
        cx: &StepCx<'_>,
        own: &OwnRole,
        bucket: &str,
        cluster_arn: &str,
    ) -> StepResult<String> {
        let name = own.name(&cx.op.cluster);
        let arn = match cx.cloud.iam.get_role(&name).await? {
            Some(role) => role.arn,
            None => {
                let trust = Self::trust(cx, &own.trust).await?;
                cx.cloud
                    .iam
                    .create_role(&name, &trust, &super::net_tags(cx, own.suffix))
                    .await?
                    .arn
            }
        };
        if let Some(policy) = own.policy {
            cx.cloud
                .iam
                .put_role_policy(&name, "instantstart-feature", &policy(bucket, cluster_arn))
                .await?;
        }
        let partition = cluster_arn.split(':').nth(1).unwrap_or("aws");
        for managed in own.managed {
            cx.cloud
                .iam
                .attach_role_policy(&name, &format!("arn:{partition}:iam::aws:policy/{managed}"))
                .await?;
        }
        Ok(arn)
    }
}

#[async_trait]
impl Reconcile for OwnRoleStep {
    fn phase(&self) -> &'static str {
        "role"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        if !p.enable {
            let mut removed = 0;
            for own in f.own_roles {
                let name = own.name(&cx.op.cluster);
                if cx.cloud.iam.get_role(&name).await?.is_some() {
                    cx.cloud.iam.delete_role(&name).await?;
                    removed += 1;
                }
            }
            return Ok(json!({"changed": removed > 0}));
        }
        let cluster_arn = super::hyperpod::described(cx).await?.arn;
        let bucket = bucket_of(cx).await?;
        let mut arns = serde_json::Map::new();
        for own in f.own_roles {
            let arn = Self::ensure(cx, own, &bucket, &cluster_arn).await?;
            arns.insert(own.suffix.to_string(), json!(arn));
        }
        Ok(json!({"roleArns": arns}))
    }
}

/// The autoscaling role's permissions, for one cluster ARN.
pub fn autoscaling_policy(cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{
        "Sid": "ScaleThisClusterOnly", "Effect": "Allow",
        "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
        "Resource": [cluster_arn]}]})
}

/// `AutoScaling` on the HyperPod cluster, watched until the cluster is back in service with
/// the wanted mode.
pub struct AutoscalingConfigStep;

#[async_trait]
impl Reconcile for AutoscalingConfigStep {
    fn phase(&self) -> &'static str {
        "autoscaling-config"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let current = super::hyperpod::described(cx).await?;
        let on = current.autoscaling.as_ref().is_some_and(|a| a.enabled);
        if on == p.enable {
            return Ok(json!({"changed": false}));
        }
        let role = if p.enable {
            let name = autoscaling_role_name(&cx.op.cluster);
            match cx.cloud.iam.get_role(&name).await? {
                Some(r) => Some(r.arn),
                None => {
                    return Err(StepError::fatal(
                        "missing-prerequisite",
                        format!("the autoscaling role {name} is missing"),
                    ))
                }
            }
        } else {
            None
        };
        cx.cloud
            .hyperpod
            .set_autoscaling(&hyperpod_name(&cx.op.cluster), role.as_deref())
            .await?;
        Ok(json!({"changed": true}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let c = super::hyperpod::described(cx).await?;
        if let Some(a) = c.autoscaling.as_ref().filter(|a| a.status == "Failed") {
            return Err(StepError::fatal(
                "autoscaling-failed",
                format!(
                    "HyperPod could not turn on autoscaling: {}",
                    a.failure_message.clone().unwrap_or_default()
                ),
            ));
        }
        super::hyperpod::back_in_service(c, out)
    }
}

/// The `HyperpodNodeClass` and `NodePool` (applied when enabling, removed when disabling).
pub struct NodeClassStep;

#[async_trait]
impl Reconcile for NodeClassStep {
    fn phase(&self) -> &'static str {
        "node-class"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let target = kube_target(cx)?;
        if !p.enable {
            // The pool first: it references the class.
            cx.cloud.kube.delete(&target, &node_pool_ref()).await?;
            cx.cloud.kube.delete(&target, &node_class_ref()).await?;
            return Ok(json!({"deleted": true}));
        }
        let groups = p.instance_groups.clone().unwrap_or_default();
        cx.cloud.kube.apply(&target, &node_class(&groups)).await?;
        cx.cloud.kube.apply(&target, &node_pool()).await?;
        Ok(json!({"instanceGroups": groups}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_autoscaling_role_may_only_add_and_delete_nodes_of_its_cluster() {
        let arn = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123def456";
        let doc = autoscaling_policy(arn);
        let statements = doc["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 1);
        let s = &statements[0];
        assert_eq!(s["Effect"], "Allow");
        assert_eq!(
            s["Action"],
            json!([
                "sagemaker:BatchAddClusterNodes",
                "sagemaker:BatchDeleteClusterNodes"
            ])
        );
        assert_eq!(s["Resource"], json!([arn]));
        assert!(s.get("Condition").is_none());
    }

    #[test]
    fn the_autoscaling_role_is_trusted_by_hyperpod_alone() {
        assert_eq!(
            autoscaling_trust(),
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"},
                "Action": ["sts:AssumeRole"]}]})
        );
        let own = &feature(AUTOSCALING).unwrap().own_roles[0];
        assert!(matches!(
            own.trust,
            Trust::Service("hyperpod.sagemaker.amazonaws.com")
        ));
    }

    /// The add-on's configuration, field by field as AWS documents it for
    /// `amazon-sagemaker-hyperpod-inference`, and the roles it passes.
    #[test]
    fn the_inference_add_on_gets_the_documented_configuration_and_roles() {
        let f = feature("inferenceOperator").unwrap();
        let suffixes: Vec<&str> = f.own_roles.iter().map(|r| r.suffix).collect();
        assert_eq!(suffixes, [INFERENCE_EXEC, INFERENCE_KEDA, INFERENCE_ALB]);
        let inputs = AddonInputs {
            roles: f
                .own_roles
                .iter()
                .map(|r| (r.suffix, format!("arn:aws:iam::1:role/demo-{}", r.suffix)))
                .collect(),
            bucket: "sagemaker-instantstart-demo-1".into(),
            hyperpod_cluster_arn: "arn:aws:sagemaker:us-west-2:1:cluster/abc".into(),
        };
        let config = (f.configuration.unwrap())(&inputs);
        assert_eq!(
            config,
            json!({
                "executionRoleArn": "arn:aws:iam::1:role/demo-inference",
                "tlsCertificateS3Bucket": "sagemaker-instantstart-demo-1",
                "hyperpodClusterArn": "arn:aws:sagemaker:us-west-2:1:cluster/abc",
                "alb": {"serviceAccount": {"create": true, "roleArn": "arn:aws:iam::1:role/demo-inference-alb"}},
                "keda": {"auth": {"aws": {"irsa": {"roleArn": "arn:aws:iam::1:role/demo-inference-keda"}}}}
            })
        );
        // The execution role: trusted by SageMaker and exactly the controller's service
        // account, with AWS's managed policy for the operator.
        let exec = &f.own_roles[0];
        assert!(matches!(
            exec.trust,
            Trust::Irsa {
                namespace: "hyperpod-inference-system",
                service_account: "hyperpod-inference-controller-manager",
                sagemaker: true
            }
        ));
        assert_eq!(exec.managed, ["AmazonSageMakerHyperPodInferenceAccess"]);
        for (role, sa) in [
            (&f.own_roles[1], "keda-operator"),
            (&f.own_roles[2], "aws-load-balancer-controller"),
        ] {
            assert!(matches!(
                role.trust,
                Trust::Irsa { namespace: "hyperpod-inference-system", service_account, sagemaker: false }
                    if service_account == sa
            ));
        }
        assert!(f.pod_identity.is_none(), "the inference operator uses IRSA");
        for req in [
            "cert-manager",
            "aws-mountpoint-s3-csi-driver",
            "aws-fsx-csi-driver",
            "metrics-server",
        ] {
            assert!(f.requires.contains(&req), "{req}");
        }
    }

    /// The training operator and the CloudWatch agent each get a role of their own with AWS's
    /// managed policy for them, bound by pod identity, never the cluster's execution role.
    #[test]
    fn operators_get_their_own_roles_with_aws_managed_policies() {
        for (key, suffix, managed, sa) in [
            (
                "trainingOperator",
                "training-operator",
                "AmazonSageMakerHyperPodTrainingOperatorAccess",
                ("aws-hyperpod", "hp-training-operator-controller-manager"),
            ),
            (
                "containerInsights",
                "cloudwatch-agent",
                "CloudWatchAgentServerPolicy",
                ("amazon-cloudwatch", "cloudwatch-agent"),
            ),
        ] {
            let f = feature(key).unwrap();
            let own = &f.own_roles[0];
            assert_eq!(own.suffix, suffix);
            assert!(matches!(own.trust, Trust::PodIdentity));
            assert_eq!(own.managed, [managed]);
            assert_eq!(f.pod_identity, Some(sa));
            assert_ne!(own.name("demo"), execution_role_name("demo"));
        }
    }

    #[test]
    fn the_inference_role_reads_only_its_bucket_and_its_cluster() {
        let arn = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123def456";
        let doc = inference_policy("sagemaker-instantstart-demo", arn);
        for s in doc["Statement"].as_array().unwrap() {
            let actions: Vec<&str> = s["Action"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert!(actions.iter().all(|a| !a.contains('*')), "{s}");
            if actions
                .iter()
                .any(|a| a.starts_with("s3:Put") || a.starts_with("s3:Delete"))
            {
                assert_eq!(
                    s["Resource"],
                    json!([format!(
                        "arn:aws:s3:::sagemaker-instantstart-demo/{TLS_PREFIX}*"
                    )]),
                    "models are read, never written; only TLS certificates are: {s}"
                );
            }
            assert_ne!(s["Resource"], "*", "{s}");
            if actions.iter().any(|a| a.starts_with("sagemaker:")) {
                assert_eq!(s["Resource"], json!([arn]));
            }
        }
    }

    #[test]
    fn the_node_class_names_the_groups_and_the_pool_references_it() {
        let nc = node_class(&["workers".into()]);
        assert_eq!(nc["spec"]["instanceGroups"], json!(["workers"]));
        let pool = node_pool();
        let r = &pool["spec"]["template"]["spec"]["nodeClassRef"];
        assert_eq!(
            (r["group"].as_str(), r["kind"].as_str(), r["name"].as_str()),
            (
                Some(NODE_CLASS_GROUP),
                nc["kind"].as_str(),
                nc["metadata"]["name"].as_str()
            )
        );
    }
}
