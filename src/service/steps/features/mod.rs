//! Managed capabilities as reconciled state: each feature's actual state is read from its
//! sources of truth (EKS add-ons and pod identity; for tiered checkpointing the HyperPod
//! cluster's `TieredStorageConfig`, the IAM role and the Kubernetes service account); a change is
//! one operation per feature (`feature-<key>`), enabling or disabling exactly that chain.
//!
//! Managed autoscaling (HyperPod-managed Karpenter) is the cluster's `AutoScaling` setting, a
//! role HyperPod assumes to add and remove nodes of this cluster only, and the
//! `HyperpodNodeClass` + `NodePool` naming the instance groups it governs.

mod addon;
mod autoscaling;
mod chain;
mod handover;
pub mod observability;
pub mod policies;
mod prerequisites;
mod tiered;

pub use addon::*;
pub use autoscaling::*;
pub use chain::*;
pub use policies::*;
pub use tiered::*;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cloud::{AddonStatus, Cloud, CloudResult, KubeTarget};
use crate::ops::{StepCx, StepError, StepResult};
use crate::service::shared::kind::{FeatureId, OpKind};

/// One feature.
pub struct Feature {
    /// Field name in the API (camelCase).
    pub key: &'static str,
    /// Names the operation kind that changes it.
    pub id: FeatureId,
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

/// A feature's own role: name suffix, trust, an inline policy for (the cluster's place for
/// objects, HyperPod cluster
/// ARN) and the AWS-managed policies attached to it.
pub struct OwnRole {
    pub suffix: &'static str,
    pub trust: Trust,
    pub policy: Option<fn(&PolicyInputs<'_>) -> Value>,
    /// Names under `arn:<partition>:iam::aws:policy/`.
    pub managed: &'static [&'static str],
}

/// What a feature's own role's policy is built from.
pub struct PolicyInputs<'a> {
    /// The cluster's place for objects.
    pub place: &'a crate::service::storage::bucket::BucketPlace,
    /// The HyperPod cluster's ARN (its partition, region and account scope the policy).
    pub cluster_arn: &'a str,
    /// The cluster's Amazon Managed Service for Prometheus workspace, for a feature that
    /// writes to it.
    pub workspace_arn: Option<&'a str>,
}

/// What an add-on's configuration values are built from.
pub struct AddonInputs {
    /// Own role ARNs by suffix.
    pub roles: std::collections::BTreeMap<&'static str, String>,
    /// The cluster's place for objects.
    pub place: crate::service::storage::bucket::BucketPlace,
    pub hyperpod_cluster_arn: String,
    /// The cluster's Amazon Managed Service for Prometheus workspace, for a feature that
    /// writes to it.
    pub workspace: Option<crate::cloud::AmpWorkspace>,
    /// The add-on's `amgWorkspace`, for the observability feature with a Grafana workspace.
    pub amg_workspace: Option<Value>,
}

impl OwnRole {
    pub fn name(&self, cluster: &str) -> String {
        format!("{cluster}-{}", self.suffix)
    }
}

pub static FEATURES: &[Feature] = &[
    Feature {
        key: "trainingOperator",
        id: FeatureId::TrainingOperator,
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
        id: FeatureId::ContainerInsights,
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
        id: FeatureId::TieredCheckpointing,
        addon: "",
        requires: &[],
        pod_identity: None,
        own_roles: &[],
        configuration: None,
        description: "Managed tiered checkpointing: TieredStorageConfig on the HyperPod cluster, plus the service account default/hyperpod-checkpointing with an IRSA role limited to checkpoints/ in the cluster's bucket",
    },
    Feature {
        key: "inferenceOperator",
        id: FeatureId::InferenceOperator,
        addon: INFERENCE_OPERATOR_ADDON,
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
        id: FeatureId::ManagedAutoscaling,
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
        id: FeatureId::FsxCsi,
        addon: "aws-fsx-csi-driver",
        requires: &[],
        pod_identity: None,
        own_roles: &[],
        configuration: None,
        description: "FSx for Lustre CSI driver, for FSx storage claims (static volumes need no IAM role)",
    },
    Feature {
        key: "taskGovernance",
        id: FeatureId::TaskGovernance,
        addon: crate::cloud::TASK_GOVERNANCE_ADDON,
        requires: &[],
        pod_identity: None,
        own_roles: &[],
        configuration: None,
        description: "HyperPod task governance (Kueue, by the amazon-sagemaker-hyperpod-taskgovernance add-on): the cluster's scheduling policy and the teams' compute quotas, lending and borrowing idle compute",
    },
    Feature {
        key: "ebsCsi",
        id: FeatureId::EbsCsi,
        addon: EBS_CSI_ADDON,
        requires: &["eks-pod-identity-agent"],
        // The driver's controller, as the EKS add-on runs it.
        pod_identity: Some(("kube-system", "ebs-csi-controller-sa")),
        own_roles: &[OwnRole {
            suffix: "ebs-csi",
            trust: Trust::PodIdentity,
            policy: Some(ebs_csi_policy),
            managed: &["service-role/AmazonEBSCSIDriverPolicy"],
        }],
        configuration: None,
        description: "Amazon EBS CSI driver, for volumes made on demand (a space's home directory), with its own role <cluster>-ebs-csi (AWS's AmazonEBSCSIDriverPolicy, plus attaching and detaching volumes to this HyperPod cluster's nodes through SageMaker) bound by pod identity to its controller",
    },
    Feature {
        key: "spaces",
        id: FeatureId::Spaces,
        addon: SPACES_ADDON,
        // AWS's Spaces setup: pod identity, cert-manager for its webhooks, EBS for home storage.
        requires: &["eks-pod-identity-agent", "cert-manager", EBS_CSI_ADDON],
        // The jupyter-k8s controller the add-on installs (its chart's namespace and account).
        pod_identity: Some(("jupyter-k8s-system", "jupyter-k8s-controller-manager")),
        own_roles: &[OwnRole {
            suffix: "spaces",
            trust: Trust::PodIdentity,
            policy: None,
            managed: &["AmazonSageMakerSpacesControllerPolicy"],
        }],
        configuration: None,
        description: "SageMaker Spaces (the amazon-sagemaker-spaces add-on, jupyter-k8s's Workspace): JupyterLab and Code Editor on the cluster, with its execution role <cluster>-spaces (AWS's AmazonSageMakerSpacesControllerPolicy) bound by pod identity to its controller",
    },
    Feature {
        key: "observability",
        id: FeatureId::Observability,
        addon: observability::ADDON,
        requires: &["eks-pod-identity-agent"],
        // The add-on's OpenTelemetry collector, which writes to the workspace.
        pod_identity: Some(observability::COLLECTOR),
        own_roles: &[OwnRole {
            suffix: "observability",
            trust: Trust::PodIdentity,
            policy: Some(observability::collector_policy),
            managed: &[],
        }],
        configuration: Some(observability::configuration),
        description: "HyperPod observability (the amazon-sagemaker-hyperpod-observability add-on): its DCGM, node and training metrics written to the cluster's Amazon Managed Service for Prometheus workspace (instantstart-<cluster>, found or made, kept when the feature is turned off), by its collector under its own role <cluster>-observability (remote write to that workspace only, logs to the cluster's log groups) bound by pod identity; GPU utilization is read from there",
    },
];

/// The Amazon EBS CSI driver's add-on (the `ebsCsi` managed feature).
pub const EBS_CSI_ADDON: &str = "aws-ebs-csi-driver";
/// SageMaker Spaces' add-on (the `spaces` managed feature).
pub const SPACES_ADDON: &str = "amazon-sagemaker-spaces";

pub fn feature(key: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.key == key)
}

impl Feature {
    /// The operation kind that changes it.
    pub fn kind(&self) -> OpKind {
        OpKind::Feature(self.id)
    }
}

/// The feature an operation kind changes (every id has its row: a unit test walks them).
pub fn of(id: FeatureId) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.id == id)
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
    hyperpod: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    if f.key == TIERED {
        return tiered_actual(cloud, cluster, hyperpod, target, f).await;
    }
    if f.key == AUTOSCALING {
        return autoscaling_actual(cloud, cluster, hyperpod, target, f).await;
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
    /// Features enabled by the same request that this one needs first (`fsxCsi` for the
    /// inference operator): the chain starts by waiting for their add-ons to be ACTIVE.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Observability only: the Amazon Managed Grafana workspace (`g-…`) the add-on is told of
    /// (`amgWorkspace`), as the server was configured when the operation started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grafana_workspace: Option<String>,
}

pub(super) fn feature_of(cx: &StepCx<'_>) -> StepResult<&'static Feature> {
    let id = match cx.op.kind.parse() {
        Ok(OpKind::Feature(id)) => Some(id),
        _ => None,
    };
    id.and_then(of)
        .ok_or_else(|| StepError::fatal("bad-params", format!("no feature for {}", cx.op.kind)))
}

#[cfg(test)]
mod tests;
