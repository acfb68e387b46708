//! The vocabulary the simulated workload files share, one level below them all: where a stored
//! object keeps its simulation state, the fault keys, the training timeline, how objects are
//! keyed, and the scheduler's view of a cluster. Kept here so the operators (training,
//! endpoints, serving), the pods, the scheduler and the Kubernetes port depend on it, never on
//! each other in a circle.

use serde_json::Value;

use crate::cloud::{KubeTarget, NodeState, ObjectRef};

pub(super) fn object_key(target: &KubeTarget, obj: &ObjectRef) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        target.cluster,
        obj.api_version,
        obj.kind,
        obj.namespace.as_deref().unwrap_or(""),
        obj.name
    )
}

/// Where a stored Deployment keeps its pods' names.
/// FNV-1a: a stable hash for the sandbox's stand-ins of a controller's random choices.
pub(super) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The service account KEDA's operator runs as, whose pod identity signs AWS queries.
pub(super) const KEDA_IDENTITY: (&str, &str) = ("keda", "keda-operator");

pub(super) const PODS: &str = "__pods";
/// Where an object read back for its pods carries the replicas Kueue holds (never stored).
pub(super) const GATED: &str = "__gated";

/// Fault key: pod failures the next training job applied suffers (`k8s:PodFailure=N`).
pub(super) const POD_FAILURE: &str = "k8s:PodFailure";
/// Where a stored job keeps its injected failures (removed from what is read back).
pub(super) const FAILURES: &str = "__podFailures";

/// Seconds from apply until the pods run, of training, and of one restart.
pub(super) const START: f64 = 45.0;
pub(super) const TRAIN: f64 = 120.0;
pub(super) const RESTART: f64 = 30.0;
/// Seconds into a run at which an injected failure strikes.
pub(super) const STRIKE: f64 = 20.0;

/// Fault key: the next endpoint applied fails its deployment.
pub(super) const ENDPOINT_FAILURE: &str = "k8s:EndpointFailure";

/// What KEDA would make of one ScaledObject now.
#[derive(Debug, Clone)]
pub(crate) struct Scaled {
    pub target: String,
    pub replicas: u64,
    /// The simulated queue: requests within the cooldown period.
    pub queue: f64,
    pub active: bool,
    /// Why KEDA cannot read the trigger's metric (an Amazon Managed Service for Prometheus
    /// query its identity may not make): it then scales nothing.
    pub denied: Option<String>,
}

/// The simulated scheduler's view of one cluster.
pub(crate) struct Schedule {
    /// The HyperPod nodes, with the GPUs placed replicas request.
    pub nodes: Vec<NodeState>,
    /// Deployment resource id → replicas that found a node.
    pub placed: std::collections::HashMap<String, u64>,
    pub pending_pods: u32,
    pub pending_gpus: u32,
    pub pods: usize,
    /// The role the nodes run as (the first instance group's execution role).
    pub node_role: Option<String>,
    /// KEDA's decisions, by ScaledObject name.
    pub scaled: std::collections::HashMap<String, Scaled>,
    /// Kueue's decisions and objects, where task governance runs.
    pub kueue: super::kueue::Kueue,
}

impl Schedule {
    /// The replicas KEDA gives a Deployment, when a ScaledObject targets it.
    pub(super) fn autoscaled(&self, deployment: &str) -> Option<u64> {
        Self::autoscaled_in(&self.scaled, deployment)
    }

    pub(super) fn autoscaled_in(
        scaled: &std::collections::HashMap<String, Scaled>,
        deployment: &str,
    ) -> Option<u64> {
        scaled
            .values()
            .find(|s| s.target == deployment)
            .map(|s| s.replicas)
    }
}

/// GPUs one pod of a template spec asks for: each container's `nvidia.com/gpu` request (or
/// its limit, which Kubernetes makes the request for an extended resource).
pub(super) fn pod_gpus(spec: &Value) -> u32 {
    spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.pointer("/resources/requests/nvidia.com~1gpu")
                .or_else(|| c.pointer("/resources/limits/nvidia.com~1gpu"))
        })
        .map(|g| match g {
            Value::Number(n) => n.as_u64().unwrap_or(0),
            Value::String(s) => s.parse().unwrap_or(0),
            _ => 0,
        })
        .map(|g| u32::try_from(g).unwrap_or(u32::MAX))
        .sum()
}
