//! Managed capabilities delivered as EKS add-ons, as reconciled state: each feature's actual
//! state is read from EKS (the add-on, and the pod identity association it needs); a change is
//! one operation per feature (`feature-<key>`), enabling or disabling exactly that chain.
//!
//! Tiered checkpointing and managed autoscaling (HyperPod cluster settings plus their identity
//! chains) are not in this catalogue yet.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::hyperpod::execution_role_name;
use crate::cloud::{AddonStatus, Cloud, CloudResult, CreateAddon};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};

/// One feature.
pub struct Feature {
    /// Field name in the API (camelCase).
    pub key: &'static str,
    /// Operation kind that changes it.
    pub kind: &'static str,
    pub addon: &'static str,
    /// EKS add-ons that must be ACTIVE before enabling.
    pub requires: &'static [&'static str],
    /// `(namespace, service account)` bound to the HyperPod execution role by pod identity.
    pub pod_identity: Option<(&'static str, &'static str)>,
    pub description: &'static str,
}

pub static FEATURES: &[Feature] = &[
    Feature {
        key: "trainingOperator",
        kind: "feature-training-operator",
        addon: "amazon-sagemaker-hyperpod-training-operator",
        requires: &["cert-manager", "eks-pod-identity-agent"],
        pod_identity: Some(("aws-hyperpod", "hp-training-operator-controller-manager")),
        description: "HyperPod training operator (HyperPodPyTorchJob), with its pod identity association to the cluster's execution role",
    },
    Feature {
        key: "containerInsights",
        kind: "feature-container-insights",
        addon: "amazon-cloudwatch-observability",
        requires: &[],
        pod_identity: None,
        description: "CloudWatch Container Insights (the amazon-cloudwatch-observability add-on)",
    },
    Feature {
        key: "fsxCsi",
        kind: "feature-fsx-csi",
        addon: "aws-fsx-csi-driver",
        requires: &[],
        pod_identity: None,
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
}

/// Reads a feature from EKS.
pub async fn actual(cloud: &Cloud, cluster: &str, f: &Feature) -> CloudResult<FeatureState> {
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
        pod_identity_association: association,
    })
}

/// Parameters of a `feature-*` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureParams {
    pub enable: bool,
}

fn feature_of(cx: &StepCx<'_>) -> StepResult<&'static Feature> {
    by_kind(&cx.op.kind)
        .ok_or_else(|| StepError::fatal("bad-params", format!("no feature for {}", cx.op.kind)))
}

/// Enables or disables the add-on, watched to ACTIVE or gone.
pub struct FeatureAddonStep;

#[async_trait]
impl Step for FeatureAddonStep {
    fn name(&self) -> &'static str {
        "addon"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let existing = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
        match (p.enable, existing) {
            (true, Some(a)) => Ok(json!({"addonArn": a.arn, "changed": false})),
            (true, None) => {
                let a = cx
                    .cloud
                    .eks
                    .create_addon(&CreateAddon {
                        cluster: cx.op.cluster.clone(),
                        name: f.addon.into(),
                        version: None,
                        service_account_role_arn: None,
                        configuration_values: None,
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
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        // `act` reads first, so repeating it after a crash is safe.
        self.act(cx).await.map(Some)
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
    fn records_resources(&self) -> bool {
        false
    }
}

/// Binds (or unbinds) the feature's service account to the HyperPod execution role.
pub struct FeatureIdentityStep;

#[async_trait]
impl Step for FeatureIdentityStep {
    fn name(&self) -> &'static str {
        "pod-identity"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
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
                let role = execution_role_name(&cx.op.cluster);
                let Some(r) = cx.cloud.iam.get_role(&role).await? else {
                    return Err(StepError::fatal(
                        "missing-prerequisite",
                        format!("the HyperPod execution role {role} does not exist: create the HyperPod cluster first"),
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
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
    fn records_resources(&self) -> bool {
        false
    }
}
