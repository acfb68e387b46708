//! The simulated HyperPod inference operator: an `InferenceEndpointConfig` goes
//! DeploymentPending → DeploymentInProgress → DeploymentComplete once a ready node of its
//! instance type exists (and, for a team's endpoint, once Kueue admits every worker), registers
//! its SageMaker endpoint when it names one, and with an injected failure
//! (`k8s:EndpointFailure=1`) ends DeploymentFailed with the operator's reason.

use serde_json::{json, Value};

use super::workload::{fnv1a, Schedule};
use super::{ACCOUNT, REGION};

/// Simulated seconds from apply until the workers start, and until they serve.
const PENDING: f64 = 30.0;
const SERVING: f64 = 150.0;

pub(super) fn is_endpoint(obj: &Value) -> bool {
    matches!(
        obj["kind"].as_str(),
        Some("InferenceEndpointConfig" | "JumpStartModel")
    )
}

fn instance_type(obj: &Value) -> Option<&str> {
    obj.pointer("/spec/instanceType")
        .or_else(|| obj.pointer("/spec/server/instanceType"))
        .and_then(Value::as_str)
}

/// Workers the endpoint asks for.
pub(super) fn workers(obj: &Value) -> u64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// One worker's pod spec as the operator's Deployment makes it (as far as Kueue looks): the
/// instance type it is pinned to and the GPUs it asks for (a JumpStart model's: the instance's).
pub(super) fn worker_spec(obj: &Value) -> Value {
    let it = instance_type(obj).unwrap_or_default();
    let resources = obj
        .pointer("/spec/worker/resources")
        .cloned()
        .unwrap_or_else(|| json!({"limits": {"nvidia.com/gpu": cloud::gpus_per_instance(it)}}));
    json!({"nodeSelector": {"node.kubernetes.io/instance-type": it},
           "containers": [{"name": "worker", "image": obj.pointer("/spec/worker/image"),
                           "resources": resources}]})
}

/// The names of the first `n` worker pods of the endpoint stored as `id`: the operator's
/// Deployment is named after the endpoint, so its pods are `<name>-<hash>-<suffix>`.
pub(super) fn worker_names(obj: &Value, id: &str, n: u64) -> Vec<String> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("endpoint");
    let hash = fnv1a(id) & 0xf_ffff_ffff;
    (0..n)
        .map(|i| {
            let suffix = fnv1a(&format!("{id}#{i}")) & 0xf_ffff;
            format!("{name}-{hash:09x}-{suffix:05x}")
        })
        .collect()
}

/// The status the operator would write now, with `held` of its workers waiting for Kueue.
pub(super) fn status(
    obj: &Value,
    age: f64,
    schedule: Option<&Schedule>,
    failures: u64,
    held: u64,
) -> Value {
    let name = obj["metadata"]["name"].as_str().unwrap_or("endpoint");
    let want = workers(obj);
    let instance_type = instance_type(obj);
    let nodes = schedule
        .map(|s| {
            s.nodes
                .iter()
                .filter(|n| {
                    n.ready && instance_type.is_none_or(|t| n.instance_type.as_deref() == Some(t))
                })
                .count()
        })
        .unwrap_or(0);
    let deployment = |reason: &str, message: String, state: &str| {
        json!({"name": name, "lastUpdated": "", "reason": reason, "message": message,
               "deploymentObjectOverallState": state})
    };
    let condition = |t: &str, status: &str, reason: &str| json!({"type": t, "status": status, "reason": reason, "lastTransitionTime": ""});
    if age < PENDING {
        return json!({"state": "DeploymentPending", "replicas": 0,
                      "conditions": [condition("DeploymentInProgress", "False", "Pending")]});
    }
    if failures > 0 && age >= PENDING * 2.0 {
        return json!({"state": "DeploymentFailed", "replicas": 0,
            "deploymentStatus": deployment("ProgressDeadlineExceeded",
                format!("worker container of {name} crashed: torch.OutOfMemoryError: CUDA out of memory while loading the model"),
                "Failed"),
            "conditions": [condition("DeploymentFailed", "True", "ProgressDeadlineExceeded")]});
    }
    if nodes == 0 || age < SERVING || failures > 0 || held > 0 {
        let message = if held > 0 {
            format!("{held} of {want} workers held by Kueue until their team's queue admits them")
        } else if nodes == 0 {
            format!(
                "waiting for a ready node of {}",
                instance_type.unwrap_or("any type")
            )
        } else {
            format!("0 of {want} workers ready")
        };
        // Workers Kueue admitted serve once up, while the rest wait.
        let serving = if held > 0 && nodes > 0 && age >= SERVING && failures == 0 {
            want.saturating_sub(held)
        } else {
            0
        };
        return json!({"state": "DeploymentInProgress", "replicas": serving,
            "deploymentStatus": deployment("Progressing", message, "InProgress"),
            "conditions": [condition("DeploymentInProgress", "True", "Progressing")]});
    }
    let mut status = json!({"state": "DeploymentComplete", "replicas": want,
        "deploymentStatus": deployment("NewReplicaSetAvailable", format!("{want} of {want} workers ready"), "Available"),
        "conditions": [condition("DeploymentComplete", "True", "NewReplicaSetAvailable")]});
    let registered = obj
        .pointer("/spec/endpointName")
        .or_else(|| obj.pointer("/spec/sageMakerEndpoint/name"))
        .and_then(Value::as_str);
    if let Some(e) = registered {
        status["endpoints"] = json!({"sagemaker": {"state": "CreationCompleted",
            "endpointArn": format!("arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{e}")}});
    }
    status
}
