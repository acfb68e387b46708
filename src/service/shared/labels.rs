//! Where our in-cluster objects live and the label saying what each is for: spelled once, below
//! every file that makes or reads workloads (steps, training, endpoints, serving), so none of
//! them reaches into another for a name.

use crate::cloud::{priority_label, team_namespace, team_queue};

/// Namespace of the workloads we run (the default storage claims live there too).
pub const WORKLOAD_NAMESPACE: &str = "default";
/// Label naming what a workload object is for (`model-download` or `inference`).
pub const WORKLOAD_LABEL: &str = "instantstart.io/workload";
/// The label naming a workload's LocalQueue: Kueue admits only what names one.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The label naming a workload's WorkloadPriorityClass (`<class>-priority`).
pub const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Namespaces SageMaker makes for teams: `hyperpod-ns-<team>` ([`team_namespace`]).
pub const TEAM_NAMESPACE_PREFIX: &str = "hyperpod-ns-";

/// Whether workloads of ours may live in this namespace: the default one, or a team's.
pub fn is_workload_namespace(ns: &str) -> bool {
    ns == WORKLOAD_NAMESPACE || ns.starts_with(TEAM_NAMESPACE_PREFIX)
}

/// Where a workload runs and what Kueue reads from it: namespace `default` with no labels, or a
/// team's namespace with its LocalQueue and (optionally) a priority class.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (its name, without `-priority`).
    pub priority: Option<String>,
}

impl Placement {
    pub fn namespace(&self) -> String {
        match &self.team {
            Some(t) => team_namespace(t),
            None => WORKLOAD_NAMESPACE.to_string(),
        }
    }

    /// The Kueue labels, on the workload's object and its pod templates.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(t) = &self.team {
            out.push((QUEUE_LABEL, team_queue(t)));
            if let Some(p) = &self.priority {
                out.push((PRIORITY_LABEL, priority_label(p)));
            }
        }
        out
    }

    /// Adds the Kueue labels to a labels object.
    pub fn label(&self, labels: &mut serde_json::Value) {
        for (k, v) in self.labels() {
            labels[k] = serde_json::Value::String(v);
        }
    }

    /// The team a namespace belongs to, and the class its labels name: what an object says of
    /// its own placement.
    pub fn of(object: &serde_json::Value) -> Self {
        let ns = object
            .pointer("/metadata/namespace")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let priority = object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PRIORITY_LABEL))
            .and_then(|v| v.as_str())
            .and_then(|p| p.strip_suffix("-priority"))
            .map(str::to_string);
        Placement {
            team: ns.strip_prefix(TEAM_NAMESPACE_PREFIX).map(str::to_string),
            priority,
        }
    }
}
