//! A training job's operation: apply its custom resource (server-side apply: a repeat changes
//! nothing), then follow the operator's status to a terminal state, showing restarts against
//! their budget as they happen.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::workloads::{apply_all, watched};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};

/// Where a training job stands, from its operator's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainingState {
    Pending(String),
    Running(String),
    Succeeded,
    Failed(String),
}

impl TrainingState {
    pub fn as_str(&self) -> &'static str {
        match self {
            TrainingState::Pending(_) => "pending",
            TrainingState::Running(_) => "running",
            TrainingState::Succeeded => "succeeded",
            TrainingState::Failed(_) => "failed",
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            TrainingState::Pending(m) | TrainingState::Running(m) | TrainingState::Failed(m) => {
                Some(m)
            }
            TrainingState::Succeeded => None,
        }
    }
}

/// Restarts so far against their limits (HyperPodPyTorchJob only).
pub fn restarts(obj: &Value) -> Value {
    let n = |p: &str| obj.pointer(p).and_then(Value::as_u64);
    json!({
        "count": n("/status/restartCount").unwrap_or(0),
        "limit": n("/spec/runPolicy/jobMaxRetryCount"),
        "fullJobRestarts": n("/status/restartStatus/fullJobRestartCount").unwrap_or(0),
        "fullJobRestartLimit": n("/spec/runPolicy/restartPolicy/maxFullJobRestarts"),
    })
}

fn true_condition<'a>(obj: &'a Value, types: &[&str]) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .rev()
        .find(|c| c["status"] == "True" && types.iter().any(|t| c["type"] == *t))
}

/// Reads a `HyperPodPyTorchJob` (conditions `Created`, `Running`, `Restarting`, `Completed`,
/// `Failed`, and `restartCount`) or a `RayJob` (`jobDeploymentStatus` and `jobStatus`).
pub fn training_state(obj: &Value) -> TrainingState {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match obj["kind"].as_str() {
        Some("RayJob") => match (s("/status/jobDeploymentStatus"), s("/status/jobStatus")) {
            (_, "SUCCEEDED") => TrainingState::Succeeded,
            ("Failed", _) | (_, "FAILED") | (_, "STOPPED") => {
                TrainingState::Failed(format!("the Ray job failed: {}", s("/status/message")))
            }
            (_, "RUNNING") => TrainingState::Running("the Ray job is running".into()),
            (deployment, _) => TrainingState::Pending(format!(
                "Ray cluster {}",
                if deployment.is_empty() {
                    "not started"
                } else {
                    deployment
                }
                .to_ascii_lowercase()
            )),
        },
        _ => {
            let r = restarts(obj);
            let budget = match r["limit"].as_u64() {
                Some(limit) => format!("restarts {}/{limit}", r["count"]),
                None => format!("restarts {}", r["count"]),
            };
            if true_condition(obj, &["Completed", "Succeeded"]).is_some() {
                TrainingState::Succeeded
            } else if let Some(c) = true_condition(obj, &["Failed"]) {
                TrainingState::Failed(format!(
                    "the training operator failed the job ({budget}): {} {}",
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default()
                ))
            } else if let Some(c) = true_condition(obj, &["Restarting"]) {
                TrainingState::Running(format!(
                    "restarting ({budget}): {}",
                    c["message"].as_str().unwrap_or_default()
                ))
            } else if true_condition(obj, &["Running", "PodsRunning"]).is_some() {
                TrainingState::Running(format!("running, {budget}"))
            } else {
                let waiting = s("/status/message");
                TrainingState::Pending(if waiting.is_empty() {
                    "waiting for its pods to be scheduled".into()
                } else {
                    waiting.to_string()
                })
            }
        }
    }
}

/// Applies the job and follows it: each poll's progress line carries the restart count, so
/// the operation's phase shows restarts as they happen.
pub struct TrainStep;

#[async_trait]
impl Reconcile for TrainStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Apply", "k8s:Delete"]
    }
    fn phase(&self) -> &'static str {
        "train"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p = apply_all(cx).await?;
        Ok(json!({"applied": p.manifests.len(), "job": p.watch.name}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let obj = watched(cx).await?;
        match training_state(&obj) {
            TrainingState::Succeeded => {
                let mut out = out.clone();
                out["restarts"] = restarts(&obj);
                Ok(Poll::Ready(out))
            }
            TrainingState::Failed(why) => Err(StepError::fatal("training-failed", why)),
            TrainingState::Pending(what) | TrainingState::Running(what) => Ok(Poll::Pending(what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_status_reads_as_states_with_the_budget() {
        let job = |status: Value| {
            json!({"kind": "HyperPodPyTorchJob", "spec": {"runPolicy": {"jobMaxRetryCount": 3}},
                   "status": status})
        };
        assert!(matches!(
            training_state(&job(json!({}))),
            TrainingState::Pending(_)
        ));
        let running = job(json!({"restartCount": 1, "conditions": [
            {"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}));
        assert_eq!(
            training_state(&running),
            TrainingState::Running("running, restarts 1/3".into())
        );
        let failed = job(json!({"restartCount": 3, "conditions": [
            {"type": "Running", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "JobMaxRetryCountExceeded", "message": "retries exhausted"}]}));
        let TrainingState::Failed(why) = training_state(&failed) else {
            panic!("not failed")
        };
        assert!(
            why.contains("restarts 3/3") && why.contains("JobMaxRetryCountExceeded"),
            "{why}"
        );
        let done = job(json!({"conditions": [{"type": "Completed", "status": "True"}]}));
        assert_eq!(training_state(&done), TrainingState::Succeeded);
        let ray = json!({"kind": "RayJob", "status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}});
        assert!(matches!(training_state(&ray), TrainingState::Running(_)));
        let ray_done = json!({"kind": "RayJob", "status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}});
        assert_eq!(training_state(&ray_done), TrainingState::Succeeded);
    }
}
