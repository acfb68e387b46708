//! Warm-pool pods changing hands: a pod is given to a model (or back to its pool) by patching
//! its assignment label in place, with a pod-deletion cost that makes its ReplicaSet remove
//! free pods first when the pool shrinks. The pool's selector never names the assignment, so
//! no pod restarts and none leaves its ReplicaSet.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::kube_target;
use crate::cloud::{KubeTarget, ListQuery, ObjectRef};
use crate::ops::{Poll, Reconcile, StepCx, StepResult};
use crate::service::shared::labels::WORKLOAD_NAMESPACE;

/// Label naming a pool's pods (and the pool's own objects).
pub const POOL_LABEL: &str = "instantstart.io/pool";
/// Label naming the model a pod serves; a model's Service selects on it.
pub const SERVES_LABEL: &str = "instantstart.io/serves";
/// What [`SERVES_LABEL`] says of a pod that serves no model.
pub const UNASSIGNED: &str = "unassigned";
/// Kubernetes' ReplicaSet removes pods with the lowest cost first when it scales down.
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Parameters of a `pool-assign` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssignParams {
    /// `pool/<pool>`: a pool's operations never overlap (a scale-down never races a relabel).
    pub workload: String,
    pub pod: String,
    /// The model, or [`UNASSIGNED`].
    pub serves: String,
    /// The pool's namespace (default, or a team's); operations persisted before pools could
    /// run as teams have none and mean default.
    #[serde(default = "default_namespace")]
    pub namespace: String,
}

fn default_namespace() -> String {
    WORKLOAD_NAMESPACE.to_string()
}

pub fn pod_ref(namespace: &str, pod: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some(namespace.into()),
        name: pod.into(),
    }
}

/// The label and annotation that say what a pod serves.
fn assignment(serves: &str) -> (Value, Value) {
    let cost = if serves == UNASSIGNED { "0" } else { "1000" };
    (
        json!({ SERVES_LABEL: serves }),
        json!({ DELETION_COST: cost }),
    )
}

/// Hands every pod a selector matches back to its pool; how many were handed back.
pub(super) async fn release(
    cx: &StepCx<'_>,
    target: &KubeTarget,
    namespace: &str,
    selector: &str,
) -> StepResult<usize> {
    let pods = cx
        .cloud
        .kube
        .list(
            target,
            &ListQuery::of("v1", "Pod")
                .namespace(namespace)
                .labels(selector),
        )
        .await?;
    let (labels, annotations) = assignment(UNASSIGNED);
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        cx.cloud
            .kube
            .patch_metadata(target, &pod_ref(namespace, name), &labels, &annotations)
            .await?;
    }
    Ok(pods.len())
}

/// Relabels one pod and watches the label read back.
pub struct AssignStep;

#[async_trait]
impl Reconcile for AssignStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Patch"]
    }
    fn phase(&self) -> &'static str {
        "assign"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: AssignParams = cx.param()?;
        let target = kube_target(cx)?;
        let (labels, annotations) = assignment(&p.serves);
        cx.cloud
            .kube
            .patch_metadata(
                &target,
                &pod_ref(&p.namespace, &p.pod),
                &labels,
                &annotations,
            )
            .await?;
        Ok(json!({"pod": p.pod, "serves": p.serves}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: AssignParams = cx.param()?;
        let target = kube_target(cx)?;
        let pod = cx
            .cloud
            .kube
            .get(&target, &pod_ref(&p.namespace, &p.pod))
            .await?;
        let now = pod
            .as_ref()
            .and_then(|o| o.pointer("/metadata/labels"))
            .and_then(|l| l.get(SERVES_LABEL))
            .and_then(Value::as_str);
        match (pod.is_some(), now) {
            (false, _) => Err(crate::ops::StepError::fatal(
                "pod-gone",
                format!(
                    "pod {} is gone (the pool was scaled or it was replaced)",
                    p.pod
                ),
            )),
            (true, Some(s)) if s == p.serves => Ok(Poll::Ready(out.clone())),
            (true, s) => Ok(Poll::Pending(format!(
                "pod {} still says {}",
                p.pod,
                s.unwrap_or("nothing")
            ))),
        }
    }
}
