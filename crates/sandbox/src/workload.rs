//! The vocabulary the simulated workload files share, one level below them all: where a stored
//! object keeps its simulation state, the fault keys, the training timeline, how objects are
//! keyed, and the scheduler's view of a cluster. Kept here so the operators (training,
//! endpoints, serving), the pods, the scheduler and the Kubernetes port depend on it, never on
//! each other in a circle.

use serde_json::Value;

use cloud::{KubeTarget, NodeState, ObjectRef};

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
/// The names of a Deployment's first `n` replicas: those its ReplicaSet gave (kept with the
/// stored object), then more as it grows.
pub(super) fn replica_names(obj: &Value, n: u64) -> Vec<String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let given: Vec<String> = obj
        .get(super::workload::PODS)
        .and_then(|p| serde_json::from_value(p.clone()).ok())
        .unwrap_or_default();
    (0..n)
        .map(|i| {
            usize::try_from(i)
                .ok()
                .and_then(|i| given.get(i).cloned())
                .unwrap_or_else(|| format!("{name}-sbx-{i}"))
        })
        .collect()
}

/// Where a stored Deployment or endpoint keeps when its replica count changed, `[[ms, n], …]`:
/// a replica Kueue queues arrives when it was asked for, not when the object was made.
pub(super) const SCALED: &str = "__scaled";

/// The replicas a Deployment or endpoint asks for in its spec.
fn replicas_of(obj: &Value) -> Option<u64> {
    obj.pointer("/spec/replicas").and_then(Value::as_u64)
}

/// Notes a change of the replica count in what is about to be stored (`previous`: the object
/// stored before).
pub(super) fn note_scale(data: &mut Value, previous: Option<&Value>) {
    let mut history = previous
        .and_then(|p| p.get(SCALED))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(n) = replicas_of(data) else {
        data[SCALED] = Value::Array(history);
        return;
    };
    if previous.and_then(replicas_of) != Some(n) || history.is_empty() {
        history.push(serde_json::json!([super::now_ms(), n]));
    }
    data[SCALED] = Value::Array(history);
}

/// When replica `i` of a stored object was last asked for: the change that last raised the count
/// past `i`, or its creation when it always existed.
pub(super) fn replica_since(data: &Value, i: u64, created_ms: i64) -> i64 {
    let history: Vec<(i64, u64)> = data
        .get(SCALED)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e[0].as_i64()?, e[1].as_u64()?)))
        .collect();
    let mut since = created_ms;
    let mut exists = history.is_empty();
    for (k, (at, n)) in history.iter().enumerate() {
        if *n > i && !exists {
            exists = true;
            since = if k == 0 { created_ms } else { *at };
        } else if *n <= i {
            exists = false;
        }
    }
    since
}

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
    /// Who holds the GPUs placed, per node, sorted.
    pub claims: Vec<cloud::GpuClaim>,
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
    /// Why the EBS CSI driver cannot attach a volume to a node now, if it cannot.
    pub volume_attach: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replica_arrives_when_the_count_last_rose_past_it() {
        let data = json!({"__scaled": [[100, 1], [200, 3], [300, 2], [400, 4]]});
        assert_eq!(replica_since(&data, 0, 90), 90, "there from the start");
        assert_eq!(
            replica_since(&data, 1, 90),
            200,
            "asked for at the first scale-up"
        );
        assert_eq!(
            replica_since(&data, 2, 90),
            400,
            "gone at 300, asked for again at 400"
        );
        assert_eq!(
            replica_since(&json!({}), 5, 90),
            90,
            "no history: its creation"
        );
    }
}
