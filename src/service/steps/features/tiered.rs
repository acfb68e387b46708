//! Managed tiered checkpointing: the cluster's `TieredStorageConfig`, plus the checkpointing
//! service account and its IRSA role limited to `checkpoints/`.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::{Cloud, CloudResult, KubeTarget, ObjectRef, TieredStorage, MANAGED_BY};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};
use crate::service::steps::addons::{kube_target, IrsaRole};
use crate::service::steps::features::{Feature, FeatureParams, FeatureState};
use crate::service::steps::hyperpod::hyperpod_of;

/// Key of the managed tiered checkpointing feature (not an add-on).
pub const TIERED: &str = "tieredCheckpointing";
/// The service account checkpointing clients run as, in the namespace our workloads use.
pub const CHECKPOINT_SA: (&str, &str) = ("default", "hyperpod-checkpointing");
/// Where in the cluster's place checkpoints are kept.
pub const CHECKPOINT_PREFIX: &str = "checkpoints/";
/// Default share of instance memory for checkpoints.
pub const DEFAULT_MEMORY_PERCENT: u32 = 20;

pub fn checkpoint_role_name(cluster: &str) -> String {
    format!("{cluster}-checkpoints")
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
pub(super) async fn tiered_actual(
    cloud: &Cloud,
    cluster: &str,
    hyperpod: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    let hp = cloud.hyperpod.describe_cluster(hyperpod).await?;
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

/// The checkpointing role's policy: `checkpoints/` of the cluster's place only.
pub fn checkpoint_policy(place: &crate::service::storage::bucket::BucketPlace) -> Value {
    json!({"Version": "2012-10-17",
           "Statement": place.read_write_statements("Checkpoints", CHECKPOINT_PREFIX)})
}

/// The IRSA role of the checkpointing service account: only `checkpoints/` in the cluster's
/// bucket.
pub struct CheckpointRoleStep;

#[async_trait]
impl Reconcile for CheckpointRoleStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "iam:AttachRolePolicy",
            "iam:DeleteRole",
        ]
    }
    fn phase(&self) -> &'static str {
        "role"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let name = checkpoint_role_name(&cx.op.cluster);
        if !p.enable {
            let existed = crate::service::steps::ownership::delete_own_role(cx, &name).await?;
            return Ok(json!({"changed": existed}));
        }
        let place = crate::service::storage::bucket::place_of(cx).await?;
        let doc = checkpoint_policy(&place);
        let role = IrsaRole {
            name,
            namespace: CHECKPOINT_SA.0,
            service_account: CHECKPOINT_SA.1,
            teams: false,
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
    fn calls(&self) -> &'static [&'static str] {
        &[
            "k8s:Apply",
            "k8s:Delete",
            "eks:CreatePodIdentityAssociation",
            "eks:DeletePodIdentityAssociation",
        ]
    }
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
        let Some(role) =
            crate::service::steps::ownership::own_role(cx, &checkpoint_role_name(&cx.op.cluster))
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
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:UpdateCluster"]
    }
    fn phase(&self) -> &'static str {
        "tiered-storage-config"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let wanted = Self::wanted(&p);
        let name = hyperpod_of(cx);
        let current = crate::service::steps::hyperpod::described(cx).await?;
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
        crate::service::steps::hyperpod::back_in_service(
            crate::service::steps::hyperpod::described(cx).await?,
            out,
        )
    }
}
