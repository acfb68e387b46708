//! Managed capabilities as reconciled state: each feature's actual state is read from its
//! sources of truth (EKS add-ons and pod identity; for tiered checkpointing the HyperPod
//! cluster's `TieredStorageConfig`, the IAM role and the Kubernetes service account); a change is
//! one operation per feature (`feature-<key>`), enabling or disabling exactly that chain.
//!
//! Managed autoscaling (HyperPod-managed Karpenter) is not in this catalogue yet.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::{kube_target, IrsaRole};
use super::hyperpod::{execution_role_name, hyperpod_name};
use crate::cloud::{
    AddonStatus, Cloud, CloudResult, CreateAddon, HyperPodStatus, KubeTarget, ObjectRef,
    TieredStorage, MANAGED_BY,
};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};

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
    /// `(namespace, service account)` bound to the HyperPod execution role by pod identity.
    pub pod_identity: Option<(&'static str, &'static str)>,
    pub description: &'static str,
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
        key: TIERED,
        kind: "feature-tiered-checkpointing",
        addon: "",
        requires: &[],
        pod_identity: None,
        description: "Managed tiered checkpointing: TieredStorageConfig on the HyperPod cluster, plus the service account default/hyperpod-checkpointing with an IRSA role limited to checkpoints/ in the cluster's bucket",
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
    /// Tiered checkpointing: share of instance memory for checkpoints.
    pub memory_percent: Option<u32>,
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
        memory_percent: None,
    })
}

fn checkpoint_sa_ref() -> ObjectRef {
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

/// The IRSA role of the checkpointing service account: only `checkpoints/` in the cluster's
/// bucket.
pub struct CheckpointRoleStep;

#[async_trait]
impl Step for CheckpointRoleStep {
    fn name(&self) -> &'static str {
        "role"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
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
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// The service account, annotated with the role (applied), or removed.
pub struct CheckpointServiceAccountStep;

#[async_trait]
impl Step for CheckpointServiceAccountStep {
    fn name(&self) -> &'static str {
        "service-account"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
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
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": CHECKPOINT_SA.1, "namespace": CHECKPOINT_SA.0,
                         "labels": { MANAGED_BY.0: MANAGED_BY.1 },
                         "annotations": {"eks.amazonaws.com/role-arn": role.arn}}});
        cx.cloud.kube.apply(&target, &sa).await?;
        Ok(json!({"serviceAccount": format!("{}/{}", CHECKPOINT_SA.0, CHECKPOINT_SA.1)}))
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
    fn records_resources(&self) -> bool {
        false
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
impl Step for TieredConfigStep {
    fn name(&self) -> &'static str {
        "tiered-storage-config"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
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
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        match super::hyperpod::described(cx).await?.status {
            HyperPodStatus::InService => Ok(Poll::Ready(out.clone())),
            HyperPodStatus::Failed => Err(StepError::fatal(
                "hyperpod-failed",
                "the HyperPod cluster failed while applying the setting",
            )),
            s => Ok(Poll::Pending(format!("HyperPod cluster {s:?}"))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}
