//! Task governance operations, each one phase watched to SageMaker's end state:
//!
//! ```text
//! scheduling-policy  scheduler-config-clear  a config left CreateFailed (made before the add-on
//!                                            was ready) deleted, watched until SageMaker no
//!                                            longer lists it (a create meanwhile is refused)
//!                    scheduler-config  create (or update by version) the cluster's one config
//! team-create        compute-quota-clear  the same for the team's quota
//!                    compute-quota     CreateComputeQuota for the team
//! team-update        compute-quota     UpdateComputeQuota at the version read
//! team-delete        compute-quota     DeleteComputeQuota, watched until it is gone
//! team-create        team-storage      (after compute-quota) the cluster's claims copied into
//!                                      hyperpod-ns-<team>, so /s3 there is the /s3 of default,
//!                                      and the training identity that reports to MLflow
//! team-delete        team-storage      (first) those copies removed
//! ```
//!
//! Every phase finds its effect before acting, so a resumed phase adopts what a crashed one
//! made instead of making it twice (SageMaker keeps one config per cluster, one quota per team).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cloud::{
    scheduler_status_done, ComputeQuota, ListQuery, SchedulerConfig, SchedulerPolicy, TeamQuota,
};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::shared::kind::OpKind;

/// Parameters of a `scheduling-policy` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyParams {
    pub hyperpod_arn: String,
    pub policy: SchedulerPolicy,
}

/// Parameters of a `team-*` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamParams {
    pub hyperpod_arn: String,
    pub team: String,
    /// `team/<name>`: operations on different teams run side by side.
    pub workload: String,
    /// The quota to create or update to; absent for a deletion.
    #[serde(default)]
    pub quota: Option<TeamQuota>,
}

/// The name of a cluster's scheduler config (SageMaker names: 63 characters at most).
pub fn policy_name(cluster: &str) -> String {
    let mut name = format!("{cluster}-policy");
    name.truncate(63);
    name
}

fn failed(what: &str, status: &str, reason: Option<&str>) -> StepError {
    StepError::fatal(
        "governance-failed",
        format!(
            "{what} is {status}: {}; retry the operation once the taskGovernance feature is enabled",
            reason.unwrap_or("SageMaker gave no reason")
        ),
    )
}

/// A listed config or quota SageMaker has finished deleting: as good as gone.
fn gone(status: &str) -> bool {
    status == "Deleted"
}

async fn config(cx: &StepCx<'_>, p: &PolicyParams) -> StepResult<Option<SchedulerConfig>> {
    Ok(cx
        .cloud
        .governance
        .scheduler_configs(&p.hyperpod_arn)
        .await?
        .into_iter()
        .find(|c| !gone(&c.status)))
}

/// What a predecessor phase clears: the cluster's scheduler config, or the team's quota.
#[derive(Clone, Copy)]
pub enum Predecessor {
    SchedulerConfig,
    ComputeQuota,
}

/// Clears the way for a create: a config or quota SageMaker left `CreateFailed` (made before the
/// add-on was ready) is deleted, and one `Deleting` is waited for, until SageMaker no longer
/// lists it (or lists it `Deleted`). SageMaker keeps one config per cluster and one quota per
/// team, and refuses a create while the predecessor is still `Deleting` (ConflictException), so
/// the deletion is a phase of its own, watched to its end before the create.
pub struct ClearPredecessorStep(pub Predecessor);

impl ClearPredecessorStep {
    /// `(id, status)` of the predecessor in the way, if there is one.
    async fn in_the_way(&self, cx: &StepCx<'_>) -> StepResult<Option<(String, String)>> {
        let found = match self.0 {
            Predecessor::SchedulerConfig => {
                let p: PolicyParams = cx.param()?;
                config(cx, &p).await?.map(|c| (c.id, c.status))
            }
            Predecessor::ComputeQuota => {
                let p: TeamParams = cx.param()?;
                quota(cx, &p).await?.map(|q| (q.id, q.status))
            }
        };
        Ok(found
            .filter(|(_, s)| matches!(s.as_str(), "CreateFailed" | "Deleting" | "DeleteFailed")))
    }

    fn what(&self) -> &'static str {
        match self.0 {
            Predecessor::SchedulerConfig => "the failed scheduler config",
            Predecessor::ComputeQuota => "the team's failed compute quota",
        }
    }
}

#[async_trait]
impl Step for ClearPredecessorStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "sagemaker:DeleteComputeQuota",
            "sagemaker:DeleteClusterSchedulerConfig",
        ]
    }
    fn name(&self) -> &'static str {
        match self.0 {
            Predecessor::SchedulerConfig => "scheduler-config-clear",
            Predecessor::ComputeQuota => "compute-quota-clear",
        }
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(match self.in_the_way(cx).await? {
            None => Some(json!({"cleared": false})),
            Some(_) => None,
        })
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let Some((id, status)) = self.in_the_way(cx).await? else {
            return Ok(json!({"cleared": false}));
        };
        if status == "CreateFailed" {
            let g = &cx.cloud.governance;
            match self.0 {
                Predecessor::SchedulerConfig => g.delete_scheduler_config(&id).await?,
                Predecessor::ComputeQuota => g.delete_compute_quota(&id).await?,
            }
        }
        Ok(json!({"cleared": true, "deleted": id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        match self.in_the_way(cx).await? {
            None => Ok(Poll::Ready(out.clone())),
            Some((_, status)) if status == "DeleteFailed" => {
                Err(failed(self.what(), &status, None))
            }
            Some((_, status)) => Ok(Poll::Pending(format!("{} is {status}", self.what()))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub struct SchedulerConfigStep;

#[async_trait]
impl Step for SchedulerConfigStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "sagemaker:CreateClusterSchedulerConfig",
            "sagemaker:UpdateClusterSchedulerConfig",
        ]
    }
    fn name(&self) -> &'static str {
        "scheduler-config"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let p: PolicyParams = cx.param()?;
        Ok(config(cx, &p)
            .await?
            .filter(|c| c.policy.same_as(&p.policy) && c.status != "CreateFailed")
            .map(|c| json!({"schedulerConfigId": c.id, "arn": c.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: PolicyParams = cx.param()?;
        let g = &cx.cloud.governance;
        match config(cx, &p).await? {
            // The phase before cleared it; one here now was made since, and is not ours to delete.
            Some(c) if matches!(c.status.as_str(), "CreateFailed" | "Deleting") => {
                return Err(failed(
                    "the scheduler config",
                    &c.status,
                    c.failure_reason.as_deref(),
                ));
            }
            Some(c) if c.policy.same_as(&p.policy) => {
                return Ok(json!({"schedulerConfigId": c.id, "arn": c.arn}));
            }
            Some(c) => {
                g.update_scheduler_config(&c.id, c.version, &p.policy)
                    .await?;
                return Ok(json!({"schedulerConfigId": c.id, "arn": c.arn, "updated": true}));
            }
            None => {}
        }
        let id = g
            .create_scheduler_config(&policy_name(&cx.op.cluster), &p.hyperpod_arn, &p.policy)
            .await?;
        Ok(json!({"schedulerConfigId": id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: PolicyParams = cx.param()?;
        let Some(c) = config(cx, &p).await? else {
            return Ok(Poll::Pending(
                "the scheduler config is not listed yet".into(),
            ));
        };
        match scheduler_status_done(&c.status) {
            Some(true) if c.policy.same_as(&p.policy) => Ok(Poll::Ready(out.clone())),
            Some(true) => Ok(Poll::Pending(
                "the scheduler config is not updated yet".into(),
            )),
            Some(false) => Err(failed(
                "the scheduler config",
                &c.status,
                c.failure_reason.as_deref(),
            )),
            None => Ok(Poll::Pending(format!("scheduler config {}", c.status))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

async fn quota(cx: &StepCx<'_>, p: &TeamParams) -> StepResult<Option<ComputeQuota>> {
    Ok(cx
        .cloud
        .governance
        .compute_quotas(&p.hyperpod_arn)
        .await?
        .into_iter()
        .find(|q| q.team == p.team && !gone(&q.status)))
}

pub struct ComputeQuotaStep;

#[async_trait]
impl Step for ComputeQuotaStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "sagemaker:CreateComputeQuota",
            "sagemaker:UpdateComputeQuota",
            "sagemaker:DeleteComputeQuota",
        ]
    }
    fn name(&self) -> &'static str {
        "compute-quota"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let p: TeamParams = cx.param()?;
        let found = quota(cx, &p).await?;
        Ok(match (&p.quota, found) {
            (None, None) => Some(json!({"team": p.team, "deleted": true})),
            (Some(want), Some(q)) if q.quota.same_as(want) && q.status != "CreateFailed" => {
                Some(json!({"team": p.team, "computeQuotaId": q.id}))
            }
            _ => None,
        })
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: TeamParams = cx.param()?;
        let g = &cx.cloud.governance;
        let found = quota(cx, &p).await?;
        let Some(want) = &p.quota else {
            if let Some(q) = found {
                g.delete_compute_quota(&q.id).await?;
            }
            return Ok(json!({"team": p.team, "deleted": true}));
        };
        match found {
            Some(q) if matches!(q.status.as_str(), "CreateFailed" | "Deleting") => {
                return Err(failed(
                    &format!("the compute quota of team {}", p.team),
                    &q.status,
                    q.failure_reason.as_deref(),
                ));
            }
            Some(q) if cx.op.kind == OpKind::TeamCreate && q.quota.same_as(want) => {
                return Ok(json!({"team": p.team, "computeQuotaId": q.id}));
            }
            Some(q) => {
                g.update_compute_quota(&q.id, q.version, &p.team, want)
                    .await?;
                return Ok(json!({"team": p.team, "computeQuotaId": q.id}));
            }
            None if cx.op.kind == OpKind::TeamUpdate => {
                return Err(StepError::fatal(
                    "team-missing",
                    format!("team {} has no compute quota any more", p.team),
                ));
            }
            None => {}
        }
        let id = g
            .create_compute_quota(&p.team, &p.hyperpod_arn, &p.team, want)
            .await?;
        Ok(json!({"team": p.team, "computeQuotaId": id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: TeamParams = cx.param()?;
        let found = quota(cx, &p).await?;
        let (Some(want), Some(q)) = (&p.quota, &found) else {
            return Ok(match found {
                None if p.quota.is_none() => Poll::Ready(out.clone()),
                None => Poll::Pending("the compute quota is not listed yet".into()),
                Some(q) => Poll::Pending(format!("compute quota {}", q.status)),
            });
        };
        match scheduler_status_done(&q.status) {
            Some(true) if q.quota.same_as(want) => Ok(Poll::Ready(out.clone())),
            Some(true) => Ok(Poll::Pending("the compute quota is not updated yet".into())),
            Some(false) => Err(failed(
                &format!("the compute quota of team {}", p.team),
                &q.status,
                q.failure_reason.as_deref(),
            )),
            None => Ok(Poll::Pending(format!("compute quota {}", q.status))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// The cluster's claims (ours, in namespace default) copied into the team's namespace, or, for
/// a deletion, those copies removed. Only what differs is applied.
///
/// The team's namespace is made by the task governance add-on, not by SageMaker's API: once the
/// compute quota is `Created`, the add-on makes `hyperpod-ns-<team>` and its LocalQueue a little
/// later (AWS guide, *HyperPod task governance*: "a namespace `hyperpod-ns-<team>` ... and a
/// local queue are created for each team"). Kubernetes refuses an object in a namespace that
/// does not exist, so the copies wait for the LocalQueue: the phase says what it waits for and
/// applies them when its poll sees the queue.
pub struct TeamStorageStep;

/// Whether the task governance add-on has made the team's namespace and LocalQueue.
async fn team_queue_ready(
    cx: &StepCx<'_>,
    target: &crate::cloud::KubeTarget,
    team: &str,
) -> StepResult<bool> {
    let ns = crate::cloud::team_namespace(team);
    let queues = cx
        .cloud
        .kube
        .list(
            target,
            &ListQuery::of("kueue.x-k8s.io/v1beta1", "LocalQueue").namespace(&ns),
        )
        .await?;
    let queue = crate::cloud::team_queue(team);
    Ok(queues
        .iter()
        .any(|q| q.pointer("/metadata/name").and_then(Value::as_str) == Some(queue.as_str())))
}

#[async_trait]
impl crate::ops::Reconcile for TeamStorageStep {
    fn phase(&self) -> &'static str {
        "team-storage"
    }
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Apply"]
    }
    /// While the team's namespace is missing, each look is the reconciliation itself: it
    /// applies the copies as soon as the LocalQueue is there.
    async fn poll(&self, cx: &StepCx<'_>, outputs: &Value) -> StepResult<Poll> {
        if outputs["waitingFor"].is_null() {
            return Ok(Poll::Ready(outputs.clone()));
        }
        let now = self.reconcile(cx).await?;
        Ok(match now["waitingFor"].as_str() {
            Some(ns) => Poll::Pending(format!(
                "waiting for the task governance add-on to make namespace {ns} and its LocalQueue"
            )),
            None => Poll::Ready(now),
        })
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        use crate::cloud::{json_contains, ObjectRef, MANAGED_BY};
        use crate::service::steps::mlflow::{tracking_sa, tracking_sa_ref};
        use crate::service::steps::storage::{namespace_copy, CLAIM_LABEL};
        let p: TeamParams = cx.param()?;
        let ns = crate::cloud::team_namespace(&p.team);
        let target = super::addons::kube_target(cx)?;
        if p.quota.is_some() && !team_queue_ready(cx, &target, &p.team).await? {
            return Ok(json!({"waitingFor": ns}));
        }
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let pvs = cx
            .cloud
            .kube
            .list(
                &target,
                &ListQuery::of("v1", "PersistentVolume").labels(&selector),
            )
            .await?;
        let label = CLAIM_LABEL.replace('/', "~1");
        let in_ns = |pv: &&Value, want: &str| {
            pv.pointer(&format!("/metadata/labels/{label}")).is_some()
                && pv
                    .pointer("/spec/claimRef/namespace")
                    .and_then(Value::as_str)
                    == Some(want)
        };
        let mut changed = Vec::new();
        if p.quota.is_none() {
            for pv in pvs.iter().filter(|pv| in_ns(pv, &ns)) {
                let claim = pv
                    .pointer("/spec/claimRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let name = pv
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let pvc = ObjectRef {
                    api_version: "v1".into(),
                    kind: "PersistentVolumeClaim".into(),
                    namespace: Some(ns.clone()),
                    name: claim.into(),
                };
                let vol = ObjectRef {
                    api_version: "v1".into(),
                    kind: "PersistentVolume".into(),
                    namespace: None,
                    name: name.into(),
                };
                cx.cloud.kube.delete(&target, &pvc).await?;
                cx.cloud.kube.delete(&target, &vol).await?;
                changed.push(format!("{ns}/{claim}"));
            }
            let sa = tracking_sa_ref(&ns);
            if cx.cloud.kube.get(&target, &sa).await?.is_some() {
                cx.cloud.kube.delete(&target, &sa).await?;
                changed.push(format!("{ns}/{}", sa.name));
            }
            return Ok(json!({"removed": changed}));
        }
        for pv in pvs.iter().filter(|pv| in_ns(pv, "default")) {
            for m in namespace_copy(pv, &ns).into_iter().flatten() {
                let Some(r) = ObjectRef::of(&m) else { continue };
                if let Some(actual) = cx.cloud.kube.get(&target, &r).await? {
                    if json_contains(&actual, &m) {
                        continue;
                    }
                }
                cx.cloud.kube.apply(&target, &m).await?;
                changed.push(format!("{}/{}", r.kind, r.name));
            }
        }
        // The identity training pods report to MLflow as, where MLflow is set up.
        let default = cx
            .cloud
            .kube
            .get(&target, &tracking_sa_ref("default"))
            .await?;
        if let Some(role) = default
            .as_ref()
            .and_then(|sa| sa.pointer("/metadata/annotations/eks.amazonaws.com~1role-arn"))
            .and_then(Value::as_str)
        {
            let m = tracking_sa(&ns, role);
            let actual = cx.cloud.kube.get(&target, &tracking_sa_ref(&ns)).await?;
            if !actual.is_some_and(|a| json_contains(&a, &m)) {
                cx.cloud.kube.apply(&target, &m).await?;
                changed.push(format!(
                    "ServiceAccount/{}",
                    crate::service::steps::mlflow::TRACKING_SA.1
                ));
            }
        }
        Ok(json!({"namespace": ns, "applied": changed}))
    }
}
