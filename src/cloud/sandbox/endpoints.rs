//! The simulated HyperPod inference operator: an `InferenceEndpointConfig` goes
//! DeploymentPending → DeploymentInProgress → DeploymentComplete once a ready node of its
//! instance type exists, registers its SageMaker endpoint when it names one, and with an injected
//! failure (`k8s:EndpointFailure=1`) ends DeploymentFailed with the operator's reason.

use serde_json::{json, Value};

use super::workload::Schedule;
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

/// The status the operator would write now.
pub(super) fn status(obj: &Value, age: f64, schedule: Option<&Schedule>, failures: u64) -> Value {
    let name = obj["metadata"]["name"].as_str().unwrap_or("endpoint");
    let want = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let instance_type = obj
        .pointer("/spec/instanceType")
        .or_else(|| obj.pointer("/spec/server/instanceType"))
        .and_then(Value::as_str);
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
    if nodes == 0 || age < SERVING || failures > 0 {
        let message = if nodes == 0 {
            format!(
                "waiting for a ready node of {}",
                instance_type.unwrap_or("any type")
            )
        } else {
            format!("0 of {want} workers ready")
        };
        return json!({"state": "DeploymentInProgress", "replicas": 0,
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
