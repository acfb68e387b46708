//! Workloads on a cluster: model downloads (a Kubernetes Job writing a Hugging Face model into
//! a storage claim), self-managed inference (a Deployment and its Service), removing either,
//! and the HyperPod software update. Each applies named objects (so a repeat changes nothing)
//! and watches them to a terminal state.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::kube_target;
use super::hyperpod::hyperpod_of;
use crate::cloud::{json_contains, HyperPodStatus, ObjectRef, MANAGED_BY};
use crate::ops::{Poll, Reconcile, Step, StepCx, StepError, StepResult};

pub use crate::service::shared::labels::{WORKLOAD_LABEL, WORKLOAD_NAMESPACE};

/// Parameters of a workload operation: the manifests to apply, in order, and the object whose
/// state decides completion. Manifests never carry secrets (only Secret references).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyParams {
    /// `<what>/<name>`: operations on the same workload never overlap.
    pub workload: String,
    pub manifests: Vec<Value>,
    pub watch: ObjectRef,
    /// Companions the workload no longer has (a router or autoscaler taken off): deleted after
    /// the apply, when they exist and are ours.
    #[serde(default)]
    pub prune: Vec<ObjectRef>,
    /// More objects that must be ready too (a model's router beside its workers).
    #[serde(default)]
    pub also_watch: Vec<ObjectRef>,
}

/// Whether an object carries the label every object of this control plane has.
pub fn ours(obj: &Value) -> bool {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY.0))
        .and_then(Value::as_str)
        == Some(MANAGED_BY.1)
}

/// Applies what differs from the cluster (an object that already holds every field asked for
/// is not written), refusing to touch an object of the same name someone else made; then
/// removes the pruned companions.
pub(super) async fn apply_all(cx: &StepCx<'_>) -> StepResult<ApplyParams> {
    let p: ApplyParams = cx.param()?;
    let target = kube_target(cx)?;
    for m in &p.manifests {
        let r = ObjectRef::to_apply(m)?;
        match cx.cloud.kube.get(&target, &r).await? {
            Some(existing) if !ours(&existing) => {
                return Err(StepError::fatal(
                    "not-ours",
                    format!(
                        "{} {}/{} exists and was not made by InstantStart: it is left as it is; \
                         choose another name or remove it yourself",
                        r.kind,
                        r.namespace.as_deref().unwrap_or(""),
                        r.name
                    ),
                ))
            }
            Some(existing) if json_contains(&existing, m) => {}
            _ => cx.cloud.kube.apply(&target, m).await?,
        }
    }
    for r in &p.prune {
        if let Some(existing) = cx.cloud.kube.get(&target, r).await? {
            if ours(&existing) {
                cx.cloud.kube.delete(&target, r).await?;
            }
        }
    }
    Ok(p)
}

/// The object the operation watches, as it is now; gone is an error.
pub(super) async fn watched(cx: &StepCx<'_>) -> StepResult<Value> {
    let p: ApplyParams = cx.param()?;
    watched_one(cx, &p.watch).await
}

async fn watched_one(cx: &StepCx<'_>, r: &ObjectRef) -> StepResult<Value> {
    let target = kube_target(cx)?;
    cx.cloud.kube.get(&target, r).await?.ok_or_else(|| {
        StepError::fatal(
            "object-missing",
            format!("{} {} disappeared", r.kind, r.name),
        )
    })
}

/// Applies the manifests and watches the object: a Job to `Complete`, a Deployment to all
/// replicas ready.
pub struct ApplyStep;

#[async_trait]
impl Reconcile for ApplyStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Apply", "k8s:Delete"]
    }
    fn phase(&self) -> &'static str {
        "apply"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p = apply_all(cx).await?;
        Ok(json!({"applied": p.manifests.len()}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: ApplyParams = cx.param()?;
        for r in std::iter::once(&p.watch).chain(&p.also_watch) {
            match workload_state(&watched_one(cx, r).await?) {
                WorkloadState::Succeeded | WorkloadState::Ready => {}
                WorkloadState::Failed(why) => return Err(StepError::fatal("workload-failed", why)),
                WorkloadState::Pending(what) if p.also_watch.is_empty() => {
                    return Ok(Poll::Pending(what))
                }
                WorkloadState::Pending(what) => {
                    return Ok(Poll::Pending(format!("{} {}: {what}", r.kind, r.name)))
                }
            }
        }
        Ok(Poll::Ready(out.clone()))
    }
}

/// Where a Job or Deployment stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadState {
    Pending(String),
    /// A Deployment with every replica ready.
    Ready,
    /// A Job that completed.
    Succeeded,
    Failed(String),
}

impl WorkloadState {
    pub fn as_str(&self) -> &'static str {
        match self {
            WorkloadState::Pending(_) => "pending",
            WorkloadState::Ready => "ready",
            WorkloadState::Succeeded => "succeeded",
            WorkloadState::Failed(_) => "failed",
        }
    }
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
}

/// Reads the state of a Job (`Complete`/`Failed` conditions, active pods) or a Deployment
/// (ready replicas; `ProgressDeadlineExceeded`).
pub fn workload_state(obj: &Value) -> WorkloadState {
    let n = |p: &str| obj.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    match obj["kind"].as_str() {
        Some("Job") => {
            if condition(obj, "Complete").is_some() || n("/status/succeeded") > 0 {
                WorkloadState::Succeeded
            } else if let Some(c) = condition(obj, "Failed") {
                WorkloadState::Failed(format!(
                    "the job failed: {} {}",
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default()
                ))
            } else if n("/status/active") > 0 {
                WorkloadState::Pending(format!("running ({} failed attempts)", n("/status/failed")))
            } else {
                WorkloadState::Pending("waiting for a pod".into())
            }
        }
        Some("Deployment") => {
            let want = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let ready = n("/status/readyReplicas");
            let stuck = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c["reason"] == "ProgressDeadlineExceeded")
                });
            if ready >= want {
                WorkloadState::Ready
            } else if let Some(c) = stuck {
                WorkloadState::Failed(format!(
                    "the deployment made no progress: {}",
                    c["message"].as_str().unwrap_or_default()
                ))
            } else {
                WorkloadState::Pending(format!("{ready}/{want} replicas ready"))
            }
        }
        Some("InferenceEndpointConfig" | "JumpStartModel") => {
            // The HyperPod inference operator's own account of the deployment.
            let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
            match s("/status/state") {
                "DeploymentComplete" => WorkloadState::Ready,
                "DeploymentFailed" => WorkloadState::Failed(format!(
                    "the inference operator failed the deployment: {}",
                    [
                        s("/status/deploymentStatus/reason"),
                        s("/status/deploymentStatus/message")
                    ]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ")
                )),
                "" => WorkloadState::Pending("waiting for the inference operator".into()),
                state => WorkloadState::Pending(format!(
                    "{state}, {} of {} replicas",
                    n("/status/replicas"),
                    obj.pointer("/spec/replicas")
                        .and_then(Value::as_u64)
                        .unwrap_or(1)
                )),
            }
        }
        // A model served by warm-pool pods: its Service is the whole workload.
        Some("Service") => WorkloadState::Ready,
        // A space: running or stopped as asked, by the controller's conditions.
        Some("Workspace") => match crate::service::spaces::state::space_state(obj) {
            ("running" | "stopped", _) => WorkloadState::Ready,
            ("failed", why) => WorkloadState::Failed(format!(
                "the spaces controller reports the space degraded: {}",
                why.unwrap_or_else(|| "no reason given".into())
            )),
            (state, why) => WorkloadState::Pending(match why {
                Some(w) => format!("{state}: {w}"),
                None => state.to_string(),
            }),
        },
        _ => WorkloadState::Pending("unknown kind".into()),
    }
}

/// Parameters of a removal: the objects, deleted in order and watched until gone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteParams {
    pub workload: String,
    pub objects: Vec<ObjectRef>,
    /// Warm-pool pods serving the removed model (a label selector): handed back to their pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

pub struct DeleteObjectsStep;

#[async_trait]
impl Reconcile for DeleteObjectsStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Delete", "k8s:Patch"]
    }
    fn phase(&self) -> &'static str {
        "delete"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: DeleteParams = cx.param()?;
        let target = kube_target(cx)?;
        for o in &p.objects {
            cx.cloud.kube.delete(&target, o).await?;
        }
        // A pool-served model's objects live in its pool's namespace, where its pods are.
        let namespace = p
            .objects
            .iter()
            .find_map(|o| o.namespace.as_deref())
            .unwrap_or(WORKLOAD_NAMESPACE);
        let released = match &p.release {
            Some(selector) => super::pools::release(cx, &target, namespace, selector).await?,
            None => 0,
        };
        Ok(json!({"deleted": p.objects.len(), "released": released}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: DeleteParams = cx.param()?;
        let target = kube_target(cx)?;
        for o in &p.objects {
            if cx.cloud.kube.get(&target, o).await?.is_some() {
                return Ok(Poll::Pending(format!("{} {} terminating", o.kind, o.name)));
            }
        }
        Ok(Poll::Ready(out.clone()))
    }
}

/// `UpdateClusterSoftware` (the latest HyperPod AMI on every node, rolling), watched until the
/// cluster is back in service. Its plan is the operation's parameters, or one of them
/// (`plan_at`) in an operation that runs several (an upgrade's canary, then the rest).
pub struct SoftwareUpdateStep {
    pub phase: &'static str,
    pub plan_at: Option<&'static str>,
}

/// The software update operation's one phase.
pub const SOFTWARE_UPDATE: SoftwareUpdateStep = SoftwareUpdateStep {
    phase: "update-software",
    plan_at: None,
};

#[async_trait]
impl Step for SoftwareUpdateStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:UpdateClusterSoftware"]
    }
    fn name(&self) -> &'static str {
        self.phase
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        // An update already rolling (ours, resumed after a crash) is watched, not restarted.
        let c = super::hyperpod::described(cx).await?;
        Ok(matches!(c.status, HyperPodStatus::SystemUpdating).then(|| json!({"resumed": true})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        // An operation started before updates were planned has empty parameters: the default.
        let plan: crate::cloud::SoftwareUpdate = match self.plan_at {
            Some(at) => serde_json::from_value(cx.op.params[at].clone())
                .map_err(|e| StepError::fatal("bad-params", format!("{at}: {e}")))?,
            None if cx.op.params == json!({}) => Default::default(),
            None => cx.param()?,
        };
        cx.cloud
            .hyperpod
            .update_cluster_software(&hyperpod_of(cx), &plan)
            .await?;
        Ok(json!({"requested": true}))
    }
    /// Back in service, each group it covered says how its update went: one rolled back (an
    /// alarm fired) or failed fails the phase, naming the group and the alarms it watched.
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let c = super::hyperpod::described(cx).await?;
        let plan = match self.plan_at {
            Some(at) => &cx.op.params[at],
            None => &cx.op.params,
        };
        let covered: Vec<String> =
            serde_json::from_value(plan["instanceGroups"].clone()).unwrap_or_default();
        if c.status == crate::cloud::HyperPodStatus::InService {
            let back = c.instance_groups.iter().find(|g| {
                (covered.is_empty() || covered.contains(&g.name)) && g.software.rolled_back()
            });
            if let Some(g) = back {
                return Err(StepError::fatal(
                    "software-rolled-back",
                    format!(
                        "HyperPod's software update of group {} ended {}: its nodes run {} again (rollback alarms: {})",
                        g.name,
                        g.software.update_status.as_deref().unwrap_or("rolled back"),
                        g.software.current_release.as_deref().unwrap_or("their previous release"),
                        plan["rollbackAlarms"]
                            .as_array()
                            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        super::hyperpod::back_in_service(c, out)
    }
    fn records_resources(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_and_deployment_states_are_read_from_their_status() {
        let job = |status: Value| json!({"kind": "Job", "status": status});
        assert_eq!(
            workload_state(&job(json!({"succeeded": 1}))),
            WorkloadState::Succeeded
        );
        assert!(matches!(
            workload_state(&job(json!({"failed": 3, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}))),
            WorkloadState::Failed(m) if m.contains("BackoffLimitExceeded")
        ));
        assert_eq!(
            workload_state(&job(json!({"active": 1}))).as_str(),
            "pending"
        );
        let dep = |ready: u64| json!({"kind": "Deployment", "spec": {"replicas": 2}, "status": {"readyReplicas": ready}});
        assert_eq!(workload_state(&dep(2)), WorkloadState::Ready);
        assert_eq!(workload_state(&dep(1)).as_str(), "pending");
        let stuck = json!({"kind": "Deployment", "spec": {"replicas": 1}, "status": {
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "timed out"}]}});
        assert_eq!(workload_state(&stuck).as_str(), "failed");
    }
}
