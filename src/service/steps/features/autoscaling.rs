//! Managed autoscaling (HyperPod-managed Karpenter): the cluster's `AutoScaling` setting, the role
//! HyperPod assumes, and the `HyperpodNodeClass` + `NodePool` naming the governed groups.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::{Cloud, CloudResult, KubeTarget, ObjectRef, MANAGED_BY};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};
use crate::service::steps::addons::kube_target;
use crate::service::steps::features::{Feature, FeatureParams, FeatureState};
use crate::service::steps::hyperpod::hyperpod_of;

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

/// Enabled when the cluster's autoscaling is on, its role exists and the node class and pool
/// are applied; `degraded` when only part of that is there.
pub(super) async fn autoscaling_actual(
    cloud: &Cloud,
    cluster: &str,
    hyperpod: &str,
    target: &KubeTarget,
    f: &Feature,
) -> CloudResult<FeatureState> {
    let hp = cloud.hyperpod.describe_cluster(hyperpod).await?;
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

/// `AutoScaling` on the HyperPod cluster, watched until the cluster is back in service with
/// the wanted mode.
pub struct AutoscalingConfigStep;

#[async_trait]
impl Reconcile for AutoscalingConfigStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:UpdateCluster"]
    }
    fn phase(&self) -> &'static str {
        "autoscaling-config"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let current = crate::service::steps::hyperpod::described(cx).await?;
        let on = current.autoscaling.as_ref().is_some_and(|a| a.enabled);
        if on == p.enable {
            return Ok(json!({"changed": false}));
        }
        let role = if p.enable {
            let name = autoscaling_role_name(&cx.op.cluster);
            match crate::service::steps::ownership::own_role(cx, &name).await? {
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
            .set_autoscaling(&hyperpod_of(cx), role.as_deref())
            .await?;
        Ok(json!({"changed": true}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let c = crate::service::steps::hyperpod::described(cx).await?;
        if let Some(a) = c.autoscaling.as_ref().filter(|a| a.status == "Failed") {
            return Err(StepError::fatal(
                "autoscaling-failed",
                format!(
                    "HyperPod could not turn on autoscaling: {}",
                    a.failure_message.clone().unwrap_or_default()
                ),
            ));
        }
        crate::service::steps::hyperpod::back_in_service(c, out)
    }
}

/// The `HyperpodNodeClass` and `NodePool` (applied when enabling, removed when disabling).
pub struct NodeClassStep;

#[async_trait]
impl Reconcile for NodeClassStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Apply", "k8s:Delete"]
    }
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
