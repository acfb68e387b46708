//! Simulated training operators: a `HyperPodPyTorchJob` or `RayJob` waits for ready nodes of its
//! instance type, runs, loses a pod for each injected failure (the restart count moves, the
//! faulty pod and rank are named) and completes — or fails with the operator's reason once the
//! failures exceed `jobMaxRetryCount`. Time is the sandbox's simulated time since the apply.

use serde_json::{json, Value};

use super::workload::{fnv1a, Schedule, RESTART, START, STRIKE, TRAIN};

pub(super) fn is_training(obj: &Value) -> bool {
    matches!(obj["kind"].as_str(), Some("HyperPodPyTorchJob" | "RayJob"))
}

fn pod_spec(obj: &Value) -> Option<&Value> {
    obj.pointer("/spec/replicaSpecs/0/template/spec")
        .or_else(|| obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec"))
}

pub(super) fn nodes_wanted(obj: &Value) -> u64 {
    obj.pointer("/spec/replicaSpecs/0/replicas")
        .or_else(|| obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/replicas"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// The status the operator would write now.
pub(super) fn status(obj: &Value, age: f64, schedule: Option<&Schedule>, failures: u64) -> Value {
    let ray = obj["kind"] == "RayJob";
    let name = obj["metadata"]["name"].as_str().unwrap_or("job");
    if ray {
        let mut status = status_of(obj, name, age, schedule, failures, true);
        // KubeRay names the RayJob's cluster in its status as soon as it makes it.
        status["rayClusterName"] = json!(ray_cluster_name(name));
        return status;
    }
    status_of(obj, name, age, schedule, failures, false)
}

/// The RayCluster KubeRay makes for a RayJob: the job's name and five random characters
/// (`utils.GenerateRayClusterName`); here derived from the name, so it is stable.
pub(super) fn ray_cluster_name(job: &str) -> String {
    let h = fnv1a(job);
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..5)
        .map(|i| alphabet[((h >> (i * 8)) % alphabet.len() as u64) as usize] as char)
        .collect();
    format!("{job}-{suffix}")
}

fn status_of(
    obj: &Value,
    name: &str,
    age: f64,
    schedule: Option<&Schedule>,
    failures: u64,
    ray: bool,
) -> Value {
    let instance_type = pod_spec(obj)
        .and_then(|p| p.pointer("/nodeSelector/node.kubernetes.io~1instance-type"))
        .and_then(Value::as_str);
    let want = nodes_wanted(obj);
    let ready: Vec<_> = schedule
        .map(|s| {
            s.nodes
                .iter()
                .filter(|n| {
                    n.ready && instance_type.is_none_or(|t| n.instance_type.as_deref() == Some(t))
                })
                .collect()
        })
        .unwrap_or_default();
    let created = json!({"type": "Created", "status": "True", "reason": "JobCreated"});
    if (ready.len() as u64) < want || age < START {
        let message = if (ready.len() as u64) < want {
            format!(
                "waiting for {want} ready node(s) of {}: {} ready",
                instance_type.unwrap_or("any type"),
                ready.len()
            )
        } else {
            "pods are starting".to_string()
        };
        return if ray {
            json!({"jobDeploymentStatus": "Initializing", "jobStatus": "PENDING", "message": message})
        } else {
            json!({"conditions": [created], "restartCount": 0, "message": message})
        };
    }
    let limit = obj
        .pointer("/spec/runPolicy/jobMaxRetryCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let run = age - START;
    // Failure i strikes STRIKE seconds into attempt i, which began after i restarts.
    let strikes = (0..failures)
        .take_while(|i| run >= STRIKE + (STRIKE + RESTART) * *i as f64)
        .count() as u64;
    let faulty = json!({"restartType": "PLR",
        "faultyPodList": [format!("{name}-pods-0")], "faultyRankList": ["0"],
        "faultyInstanceIdList": [ready[0].instance_id.clone().unwrap_or_default()]});
    if ray {
        let end = STRIKE * failures as f64 + RESTART * failures as f64 + TRAIN;
        return if run >= end {
            json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "Job finished successfully."})
        } else {
            json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "message": format!("{want} worker(s) running")})
        };
    }
    let mut status = json!({"startTime": "", "restartCount": strikes.min(limit),
        "restartStatus": {"currentEvalPeriod": 0, "fullJobRestartCount": 0, "restartCount": strikes.min(limit)}});
    if strikes > 0 {
        status["latestFaultyPodInstanceList"] = faulty;
    }
    if strikes > limit {
        status["conditions"] = json!([created,
            {"type": "Running", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "JobMaxRetryCountExceeded",
             "message": format!("pod {name}-pods-0 failed (exit code 1) and the job already used its {limit} retries")}]);
        return status;
    }
    let last_strike = STRIKE + (STRIKE + RESTART) * strikes.saturating_sub(1) as f64;
    let restarting = strikes > 0 && run < last_strike + RESTART;
    let end = (STRIKE + RESTART) * failures as f64 + TRAIN;
    status["conditions"] = if run >= end {
        json!([created, {"type": "Running", "status": "False"},
               {"type": "Completed", "status": "True", "reason": "JobCompleted"}])
    } else if restarting {
        json!([created, {"type": "Running", "status": "False"},
               {"type": "Restarting", "status": "True", "reason": "PodFailed",
                "message": format!("pod {name}-pods-0 failed; restarting (restart {strikes} of {limit})")}])
    } else {
        json!([created, {"type": "Running", "status": "True", "reason": "PodsRunning"}])
    };
    status
}
