//! Simulated training operators: a `HyperPodPyTorchJob` or `RayJob` waits for ready nodes of its
//! instance type, runs, loses a pod for each injected failure (the restart count moves, the
//! faulty pod and rank are named) and completes — or fails with the operator's reason once the
//! failures exceed `jobMaxRetryCount`. Time is the sandbox's simulated time since the apply.

use serde_json::{json, Value};

use cloud::images::lacks_elastic_agent;

use super::kueue::{Queued, Standing};
use super::log_text::train_secs;
use super::workload::{fnv1a, Schedule, RESTART, START, STRIKE};

pub(super) fn is_training(obj: &Value) -> bool {
    matches!(obj["kind"].as_str(), Some("HyperPodPyTorchJob" | "RayJob"))
}

pub(super) fn pod_spec(obj: &Value) -> Option<&Value> {
    obj.pointer("/spec/replicaSpecs/0/template/spec")
        .or_else(|| obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec"))
}

/// When a training job's pods end (simulated seconds after they were admitted to start), and
/// whether they succeed: each failure costs its strike and a restart; past `limit` the job
/// fails.
pub(super) fn training_end(failures: u64, limit: u64, train: f64) -> (f64, bool) {
    if failures > limit {
        (START + STRIKE + (STRIKE + RESTART) * limit as f64, false)
    } else {
        (START + (STRIKE + RESTART) * failures as f64 + train, true)
    }
}

/// Simulated seconds a job runs from its start to its end (what Kueue holds its quota for).
pub(super) fn run_secs(obj: &Value, failures: u64) -> f64 {
    let train = train_secs(pod_spec(obj));
    if obj["kind"] == "RayJob" {
        return training_end(failures, u64::MAX, train).0;
    }
    if missing_launcher(obj).is_some() {
        return START;
    }
    let limit = obj
        .pointer("/spec/runPolicy/jobMaxRetryCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    training_end(failures, limit, train).0
}

/// Whether a job's status (as [`status`] or Kueue's hold writes it) says its pods run now.
pub(super) fn running(status: &Value) -> bool {
    status["jobStatus"] == "RUNNING"
        || status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Running" && c["status"] == "True")
        })
}

/// The label a job's pods carry that names the job, as its operator sets it: HyperPod's
/// `HPJob`, KubeRay's `ray.io/cluster` (the RayJob's cluster).
pub(super) fn holder_label(obj: &Value) -> (&'static str, String) {
    let name = obj["metadata"]["name"].as_str().unwrap_or("job");
    if obj["kind"] == "RayJob" {
        ("ray.io/cluster", ray_cluster_name(name))
    } else {
        ("HPJob", name.to_string())
    }
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
    if let Some(why) = missing_launcher(obj) {
        // The kubelet cannot start the container; the operator retries, then gives up.
        return if age < START {
            json!({"conditions": [{"type": "Created", "status": "True", "reason": "JobCreated"}],
                   "restartCount": 0, "message": "pods are starting"})
        } else {
            json!({"restartCount": 0, "conditions": [
                {"type": "Created", "status": "True", "reason": "JobCreated"},
                {"type": "Running", "status": "False"},
                {"type": "Failed", "status": "True", "reason": "PodStartError",
                 "message": format!("pod {name}-pods-0: {why}")}]})
        };
    }
    status_of(obj, name, age, schedule, failures, false)
}

/// The status of a job Kueue holds (pending quota, or preempted and requeued): created, no
/// pods, Kueue's reason as its message.
pub(super) fn held(obj: &Value, q: &Queued) -> Value {
    let message = match &q.verdict.standing {
        Standing::Preempted { .. } => format!("preempted by Kueue and requeued: {}", q.message),
        _ => format!("queued by Kueue: {}", q.message),
    };
    if obj["kind"] == "RayJob" {
        return json!({"jobDeploymentStatus": "Suspended", "jobStatus": "", "message": message,
                      "rayClusterName": ray_cluster_name(obj["metadata"]["name"].as_str().unwrap_or("job"))});
    }
    json!({"conditions": [{"type": "Created", "status": "True", "reason": "JobCreated"}],
           "restartCount": q.verdict.evictions, "message": message})
}

/// A readmitted job's pods restarted once per preemption: the count shows it.
pub(super) fn resumed(status: &mut Value, evictions: u32) {
    if evictions == 0 {
        return;
    }
    for p in ["/restartCount", "/restartStatus/restartCount"] {
        if let Some(n) = status.pointer_mut(p) {
            *n = json!(n.as_u64().unwrap_or(0) + u64::from(evictions));
        }
    }
}

/// Why a HyperPodPyTorchJob's container cannot start its launcher, if it cannot: `hyperpodrun`
/// from a stock image that carries no elastic agent, or the installed launcher with no init
/// container installing the agent.
pub(super) fn missing_launcher(obj: &Value) -> Option<String> {
    let pod = obj.pointer("/spec/replicaSpecs/0/template/spec")?;
    let container = pod.pointer("/containers/0")?;
    let launcher = container.pointer("/command/0")?.as_str()?;
    let image = container["image"].as_str().unwrap_or_default();
    let installed = pod["initContainers"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["command"].to_string().contains("hyperpod-elastic-agent"))
    });
    let not_found = |what: &str| {
        format!("exec: \"{what}\": executable file not found in $PATH: the image {image} does not carry the HyperPod elastic agent (hyperpod-elastic-agent)")
    };
    match launcher {
        "hyperpodrun" if lacks_elastic_agent(image) => Some(not_found("hyperpodrun")),
        l if l.ends_with("/hyperpodrun") && !installed => Some(not_found(l)),
        _ => None,
    }
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
    let train = train_secs(pod_spec(obj));
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
        let end = STRIKE * failures as f64 + RESTART * failures as f64 + train;
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
    let end = (STRIKE + RESTART) * failures as f64 + train;
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
