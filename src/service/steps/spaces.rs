//! Starting and stopping a space: its `Workspace`'s `desiredStatus` patched (no other field is
//! touched, so nothing of what the space is changes), then followed until the controller says
//! it runs or has stopped. Patching the same value again changes nothing, so a repeat after a
//! crash is safe.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::kube_target;
use super::workloads::{workload_state, WorkloadState};
use crate::cloud::ObjectRef;
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};

/// Parameters of a start or stop.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusParams {
    /// `space/<name>`: operations on the same space never overlap.
    pub workload: String,
    pub watch: ObjectRef,
    pub running: bool,
}

pub struct SpaceStatusStep;

#[async_trait]
impl Reconcile for SpaceStatusStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Patch"]
    }
    fn phase(&self) -> &'static str {
        "desired-status"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: StatusParams = cx.param()?;
        let target = kube_target(cx)?;
        let desired = if p.running { "Running" } else { "Stopped" };
        cx.cloud
            .kube
            .patch_spec(&target, &p.watch, &json!({ "desiredStatus": desired }))
            .await?;
        Ok(json!({ "desiredStatus": desired }))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: StatusParams = cx.param()?;
        let target = kube_target(cx)?;
        let Some(obj) = cx.cloud.kube.get(&target, &p.watch).await? else {
            return Err(StepError::fatal(
                "object-missing",
                format!("space {} disappeared", p.watch.name),
            ));
        };
        let (state, _) = crate::service::spaces::state::space_state(&obj);
        if p.running && state == "stopped" {
            // Asked to run, yet stopped again: it went idle before anyone used it.
            return Ok(Poll::Ready(
                json!({"desiredStatus": "Running", "stoppedIdle": true}),
            ));
        }
        match workload_state(&obj) {
            WorkloadState::Ready | WorkloadState::Succeeded => Ok(Poll::Ready(out.clone())),
            WorkloadState::Failed(why) => Err(StepError::fatal("workload-failed", why)),
            WorkloadState::Pending(what) => Ok(Poll::Pending(what)),
        }
    }
}
