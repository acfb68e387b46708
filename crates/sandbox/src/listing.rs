//! What a list of one kind returns from the simulated cluster: nodes and their events from the
//! schedule, pods as their controllers name them, Kueue's objects from the simulated admission,
//! and stored objects with the status their controllers would write; each filtered by namespace
//! and labels as the API server would.

use serde_json::Value;

use super::kube::{kueue_kind, matches_labels};
use super::scheduler::scheduled_kind;
use super::Sandbox;
use cloud::*;

impl Sandbox {
    /// The objects of one kind in the simulated cluster, as its controllers would report them.
    pub(super) async fn list_of_kind(
        &self,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> CloudResult<Vec<Value>> {
        self.gate("k8s:List", false).await?;
        match (api_version, kind) {
            ("v1", "Node") => {
                return Ok(self
                    .schedule(target)
                    .await?
                    .nodes
                    .iter()
                    .map(super::triage::node_manifest)
                    .filter(|o| matches_labels(o, labels))
                    .collect())
            }
            // The events HyperPod's health agent records, in `default` as a node's are.
            ("v1", "Event") if namespace.is_none_or(|ns| ns == "default") => {
                let now = super::now_ms();
                return Ok(self
                    .schedule(target)
                    .await?
                    .nodes
                    .iter()
                    .filter(|n| n.unschedulable && n.ready)
                    .flat_map(|n| super::triage::node_events(&n.name, now))
                    .collect());
            }
            _ => {}
        }
        if (api_version, kind) == ("v1", "Pod") {
            return Ok(self
                .sim_pods(target)
                .await?
                .into_iter()
                .filter(|(p, ..)| namespace.is_none_or(|ns| p.namespace == ns))
                .map(|(p, age, created)| p.manifest(age, &cloud::clock::rfc3339_ms(created)))
                .filter(|o| matches_labels(o, labels))
                .collect());
        }
        let in_ns = |o: &Value| {
            namespace.is_none_or(|ns| {
                o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
            })
        };
        if let Some(kueue) = kueue_kind(api_version, kind) {
            // What Kueue keeps, from the simulated admission.
            let s = self.schedule(target).await?.kueue;
            let objects = match kueue {
                "Workload" => s.workloads,
                "LocalQueue" => s.local_queues,
                _ => s.cluster_queues,
            };
            return Ok(objects
                .into_iter()
                .filter(|o| in_ns(o) && matches_labels(o, labels))
                .collect());
        }
        let schedule = if scheduled_kind(kind) {
            Some(self.schedule(target).await?)
        } else {
            None
        };
        Ok(self
            .stored_objects(&format!("{}/{api_version}/{kind}/", target.cluster))
            .await?
            .into_iter()
            .map(|r| self.k8s_status(r, schedule.as_ref()))
            .filter(|o| in_ns(o) && matches_labels(o, labels))
            .collect())
    }
}
