//! Why a workload is pending: its admission as Kueue writes it on the `Workload` it makes for
//! each queued job (`kueue.x-k8s.io/v1beta1`, owned by the job) — admitted, pending with Kueue's
//! reason and message, preempted and by which workload — and its place in the team's queue.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::cloud::KubeTarget;
use crate::cloud::ListQuery;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

/// Where a queued workload stands with Kueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AdmissionState {
    /// Quota reserved and admitted: its pods may run.
    Admitted,
    /// Waiting for quota (Kueue's reason and message say which).
    Pending,
    /// Evicted to make room for another workload; requeued.
    Preempted,
    /// Ran to its end.
    Finished,
}

/// A workload's admission, from its Kueue Workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub state: AdmissionState,
    /// The ClusterQueue it was admitted to or waits in, when Kueue says.
    pub cluster_queue: Option<String>,
    /// Kueue's reason (e.g. `Pending`, `Preempted`, `InCohortReclamation`).
    pub reason: Option<String>,
    /// Kueue's message, e.g. `couldn't assign flavors to pod set pods: insufficient unused quota
    /// for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed`.
    pub message: Option<String>,
    /// The job whose workload preempted this one, when it is still there.
    pub preempted_by: Option<String>,
    /// 1-based place among the pending workloads of its queue (higher priority first, then
    /// older first, as Kueue orders them); none unless pending.
    pub position: Option<u32>,
    /// Why it waits for quota now (the `QuotaReserved` condition's message): for a preempted
    /// workload this differs from `message`, which says why it was evicted.
    #[serde(skip)]
    pub waiting: Option<String>,
}

/// How Kueue stands with a workload whose pods it admits one by one: a deployment's replicas or
/// a pool's pods (Kueue's pod integration makes a Workload for each pod).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodsAdmission {
    /// Pods admitted: they may run.
    pub admitted: u32,
    /// Pods waiting for quota.
    pub pending: u32,
    /// Pods evicted for another workload and requeued.
    pub preempted: u32,
    /// The one of its pods first in the team's queue: why it waits (Kueue's reason and message)
    /// and where.
    pub waiting: Option<Admission>,
}

/// The cluster's Kueue Workloads, read once per listing.
pub struct Workloads(Vec<Value>);

/// Every Workload of the cluster; none where Kueue is not installed.
pub async fn workloads(engine: &Engine, target: &KubeTarget) -> ApiResult<Workloads> {
    match engine
        .cloud()
        .kube
        .list(target, &ListQuery::of("kueue.x-k8s.io/v1beta1", "Workload"))
        .await
    {
        Ok(items) => Ok(Workloads(items)),
        Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => {
            Ok(Workloads(Vec::new()))
        }
        Err(e) => Err(ApiError::Cloud(Box::new(e))),
    }
}

/// Fills the admission of the views of a team's workload (`of_team`), reading Kueue's Workloads
/// once and only when one of them needs it: a cluster without teams never pays for the read.
pub async fn with_admission<V>(
    engine: &Engine,
    target: &KubeTarget,
    views: &mut [V],
    of_team: impl Fn(&V) -> bool,
    mut fill: impl FnMut(&mut V, &Workloads),
) -> ApiResult<()> {
    if views.iter().any(&of_team) {
        let kueue = workloads(engine, target).await?;
        for v in views.iter_mut().filter(|v| of_team(v)) {
            fill(v, &kueue);
        }
    }
    Ok(())
}

fn s<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn condition<'a>(w: &'a Value, kind: &str) -> Option<&'a Value> {
    w.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn is_true(w: &Value, kind: &str) -> bool {
    condition(w, kind).is_some_and(|c| c["status"] == "True")
}

fn owner(w: &Value) -> Option<(&str, &str)> {
    w.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find_map(|o| Some((o["kind"].as_str()?, o["name"].as_str()?)))
}

fn pending(w: &Value) -> bool {
    !is_true(w, "QuotaReserved") && !is_true(w, "Finished")
}

impl Workloads {
    /// The admission of the job `kind`/`name` in `namespace`, if Kueue made a Workload for it.
    pub fn of(&self, namespace: &str, kind: &str, name: &str) -> Option<Admission> {
        let mine = |w: &&Value| {
            s(w, "/metadata/namespace") == Some(namespace) && owner(w) == Some((kind, name))
        };
        let w = self.0.iter().find(mine)?;
        let queue = s(w, "/spec/queueName");
        let (state, cond) = if is_true(w, "Finished") {
            (AdmissionState::Finished, condition(w, "Finished"))
        } else if is_true(w, "Admitted") {
            (AdmissionState::Admitted, condition(w, "Admitted"))
        } else if condition(w, "Evicted")
            .is_some_and(|c| c["status"] == "True" && c["reason"] == "Preempted")
        {
            (AdmissionState::Preempted, condition(w, "Preempted"))
        } else {
            (AdmissionState::Pending, condition(w, "QuotaReserved"))
        };
        let text = |k: &str| cond.and_then(|c| c[k].as_str()).map(str::to_string);
        let message = text("message");
        let preempted_by = (state == AdmissionState::Preempted)
            .then(|| message.as_deref().and_then(preemptor_uid))
            .flatten()
            .and_then(|uid| {
                self.0
                    .iter()
                    .find(|o| s(o, "/metadata/uid") == Some(uid))
                    .and_then(owner)
                    .map(|(_, n)| n.to_string())
            });
        let position = (state != AdmissionState::Admitted && state != AdmissionState::Finished)
            .then(|| {
                let key = |o: &Value| {
                    (
                        -o.pointer("/spec/priority")
                            .and_then(Value::as_i64)
                            .unwrap_or(0),
                        s(o, "/metadata/creationTimestamp")
                            .unwrap_or("")
                            .to_string(),
                    )
                };
                let ahead = self
                    .0
                    .iter()
                    .filter(|o| {
                        s(o, "/metadata/namespace") == Some(namespace)
                            && s(o, "/spec/queueName") == queue
                            && pending(o)
                            && key(o) < key(w)
                    })
                    .count();
                ahead as u32 + 1
            });
        Some(Admission {
            state,
            cluster_queue: s(w, "/status/admission/clusterQueue").map(str::to_string),
            reason: text("reason"),
            message,
            preempted_by,
            position,
            waiting: condition(w, "QuotaReserved")
                .filter(|c| c["status"] == "False")
                .and_then(|c| c["message"].as_str())
                .filter(|m| !m.is_empty())
                .map(str::to_string),
        })
    }
}

impl Admission {
    /// Why Kueue holds the workload, in a sentence, while it does (pending or preempted, with
    /// Kueue's message); none once admitted or before Kueue has said.
    pub fn held_because(&self) -> Option<String> {
        let why = self
            .waiting
            .as_deref()
            .or(self.message.as_deref())
            .filter(|m| !m.is_empty())?;
        match self.state {
            AdmissionState::Pending => Some(format!("queued by Kueue: {why}")),
            AdmissionState::Preempted => Some(match &self.preempted_by {
                Some(by) => format!("preempted by Kueue for {by} and requeued: {why}"),
                None => format!("preempted by Kueue and requeued: {why}"),
            }),
            AdmissionState::Admitted | AdmissionState::Finished => None,
        }
    }
}

impl Workloads {
    /// The admission of the pods named, in `namespace`, if Kueue made a Workload for any.
    pub fn of_pods<'a>(
        &self,
        namespace: &str,
        pods: impl IntoIterator<Item = &'a str>,
    ) -> Option<PodsAdmission> {
        let mut out = PodsAdmission {
            admitted: 0,
            pending: 0,
            preempted: 0,
            waiting: None,
        };
        let mut any = false;
        for pod in pods {
            let Some(a) = self.of(namespace, "Pod", pod) else {
                continue;
            };
            any = true;
            match a.state {
                AdmissionState::Admitted => out.admitted += 1,
                AdmissionState::Pending => out.pending += 1,
                AdmissionState::Preempted => out.preempted += 1,
                AdmissionState::Finished => continue,
            }
            let first = |w: &Admission| w.position.unwrap_or(u32::MAX);
            if a.state != AdmissionState::Admitted
                && out.waiting.as_ref().is_none_or(|w| first(&a) < first(w))
            {
                out.waiting = Some(a);
            }
        }
        any.then_some(out)
    }
}

/// Whether `pod` is named as a Deployment `deployment`'s ReplicaSet names its pods:
/// `<deployment>-<template hash>-<five characters>`.
fn replica_of(pod: &str, deployment: &str) -> bool {
    let alnum = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    pod.strip_prefix(deployment)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(hash, suffix)| alnum(hash) && alnum(suffix) && suffix.len() == 5)
}

impl Workloads {
    /// The admission of the pods of the Deployment `deployment` in `namespace`, found by the
    /// pods that own Kueue's Workloads: for a Deployment made by an operator (a managed
    /// endpoint's workers), whose pods' labels are the operator's.
    pub fn of_deployment(&self, namespace: &str, deployment: &str) -> Option<PodsAdmission> {
        let pods: Vec<&str> = self
            .0
            .iter()
            .filter(|w| s(w, "/metadata/namespace") == Some(namespace))
            .filter_map(owner)
            .filter(|(kind, pod)| *kind == "Pod" && replica_of(pod, deployment))
            .map(|(_, pod)| pod)
            .collect();
        self.of_pods(namespace, pods)
    }
}

/// The preemptor's Workload UID in Kueue's message: `Preempted to accommodate a workload (UID:
/// <uid>, JobUID: <uid>) due to …`.
fn preemptor_uid(message: &str) -> Option<&str> {
    let rest = message.split_once("(UID: ")?.1;
    let uid = rest.split([',', ')']).next()?.trim();
    (!uid.is_empty() && uid != "UNKNOWN").then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wl(name: &str, uid: &str, priority: i64, created: &str, conditions: Value) -> Value {
        json!({"metadata": {"name": format!("hyperpodpytorchjob-{name}-1a2b3"), "namespace": "hyperpod-ns-a",
                            "uid": uid, "creationTimestamp": created,
                            "ownerReferences": [{"kind": "HyperPodPyTorchJob", "name": name}]},
               "spec": {"queueName": "hyperpod-ns-a-localqueue", "priority": priority},
               "status": {"conditions": conditions}})
    }

    #[test]
    fn admission_is_read_from_the_conditions_and_the_queue_is_ordered_by_priority_then_age() {
        let quota = "couldn't assign flavors to pod set pods: insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed";
        let all = Workloads(vec![
            wl(
                "big",
                "u1",
                100,
                "2026-01-01T00:00:00Z",
                json!([
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}]),
            ),
            wl(
                "old",
                "u2",
                10,
                "2026-01-01T00:01:00Z",
                json!([
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quota}]),
            ),
            wl(
                "urgent",
                "u3",
                90,
                "2026-01-01T00:02:00Z",
                json!([
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quota}]),
            ),
            wl(
                "bumped",
                "u4",
                10,
                "2026-01-01T00:00:30Z",
                json!([
                {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
                {"type": "Evicted", "status": "True", "reason": "Preempted"},
                {"type": "Preempted", "status": "True", "reason": "InClusterQueue",
                 "message": "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to prioritization in the ClusterQueue; preemptor path: /q; preemptee path: /q"}]),
            ),
        ]);
        let of = |n| all.of("hyperpod-ns-a", "HyperPodPyTorchJob", n).unwrap();
        assert_eq!(of("big").state, AdmissionState::Admitted);
        assert_eq!(of("big").position, None);
        let old = of("old");
        assert_eq!(
            (old.state, old.reason.as_deref(), old.message.as_deref()),
            (AdmissionState::Pending, Some("Pending"), Some(quota))
        );
        // urgent (90) first; then bumped (10, older), then old.
        assert_eq!(of("urgent").position, Some(1));
        assert_eq!(of("bumped").position, Some(2));
        assert_eq!(old.position, Some(3));
        let bumped = of("bumped");
        assert_eq!(
            (
                bumped.state,
                bumped.reason.as_deref(),
                bumped.preempted_by.as_deref()
            ),
            (
                AdmissionState::Preempted,
                Some("InClusterQueue"),
                Some("big")
            )
        );
        assert!(all
            .of("hyperpod-ns-b", "HyperPodPyTorchJob", "big")
            .is_none());
        assert!(all.of("hyperpod-ns-a", "RayJob", "big").is_none());
        // What a held job's message says: Kueue's, while Kueue holds it.
        assert_eq!(
            old.held_because().as_deref(),
            Some(format!("queued by Kueue: {quota}").as_str())
        );
        // Preempted and waiting without a quota message: why it was evicted, and by which job.
        assert!(bumped.held_because().is_some_and(
            |m| m.starts_with("preempted by Kueue for big and requeued: Preempted to")
        ));
        assert_eq!(of("big").held_because(), None);
        // Pods admitted one by one: counted, and the first of them in the queue says why.
        let pod = |name: &str, state: &str, priority: i64, created: &str| {
            let cond = match state {
                "admitted" => {
                    json!([{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}])
                }
                _ => {
                    json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quota}])
                }
            };
            let mut w = wl(name, &format!("p-{name}"), priority, created, cond);
            w["metadata"]["ownerReferences"] = json!([{"kind": "Pod", "name": name}]);
            w
        };
        let pods = Workloads(vec![
            pod("chat-1", "admitted", 90, "2026-01-01T00:00:00Z"),
            pod("chat-2", "pending", 90, "2026-01-01T00:02:00Z"),
            pod("chat-3", "pending", 90, "2026-01-01T00:01:00Z"),
        ]);
        let a = pods
            .of_pods("hyperpod-ns-a", ["chat-1", "chat-2", "chat-3", "chat-4"])
            .unwrap();
        assert_eq!((a.admitted, a.pending, a.preempted), (1, 2, 0));
        let waiting = a.waiting.unwrap();
        assert_eq!(
            (waiting.position, waiting.message.as_deref()),
            (Some(1), Some(quota))
        );
        assert_eq!(pods.of_pods("hyperpod-ns-a", ["other"]), None);
        // A Deployment's pods found by their names alone: `chat-1` is no ReplicaSet's pod.
        let replicas = Workloads(vec![
            pod(
                "qwen-5f6d7c8b9-x2k4p",
                "admitted",
                90,
                "2026-01-01T00:00:00Z",
            ),
            pod(
                "qwen-5f6d7c8b9-b7m2q",
                "pending",
                90,
                "2026-01-01T00:01:00Z",
            ),
            pod(
                "qwen-big-6c7d8-aaaaa",
                "pending",
                90,
                "2026-01-01T00:01:00Z",
            ),
            pod("qwen-x-y", "pending", 90, "2026-01-01T00:01:00Z"),
        ]);
        let a = replicas.of_deployment("hyperpod-ns-a", "qwen").unwrap();
        assert_eq!((a.admitted, a.pending, a.preempted), (1, 1, 0));
        assert_eq!(replicas.of_deployment("hyperpod-ns-b", "qwen"), None);
        assert_eq!(
            preemptor_uid("Preempted to accommodate a workload (UID: UNKNOWN, JobUID: x)"),
            None
        );
    }
}
