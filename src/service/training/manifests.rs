//! The custom resources a training job is made of: a `HyperPodPyTorchJob` (replicas on one
//! instance type, the recovery budget and hang detection as the training operator reads them)
//! or a `RayJob` (a head and one GPU worker per node). Both mount the cluster's S3 claim at
//! `/s3`: the one data contract.

use serde_json::{json, Map, Value};

use super::{Elastic, HangDetection, RecoveryBudget};
use crate::cloud::{efa_interfaces, MANAGED_BY};
use crate::service::shared::labels::Placement;
use crate::service::steps::mlflow::TRACKING_SA;
use crate::service::steps::workloads::WORKLOAD_LABEL;

/// The service account managed tiered checkpointing trusts.
const CHECKPOINT_SA: &str = "hyperpod-checkpointing";

/// The storage claim every training pod mounts at `/s3`.
pub const DATA_CLAIM: &str = "s3-claim";
/// Label carrying the job name on its pods (pods of one job spread over nodes by it).
pub const JOB_LABEL: &str = "instantstart.io/training-job";
/// The HyperPod elastic agent's port, which the operator talks to.
pub const AGENT_PORT: u16 = 8080;

/// Everything a manifest is made from (validated by the caller).
pub struct JobSpec<'a> {
    pub name: &'a str,
    pub recipe: &'a str,
    pub image: &'a str,
    pub instance_type: &'a str,
    pub nodes: u32,
    pub gpus: u32,
    pub command: Vec<String>,
    /// Recorded on the job as annotations and shown by the views.
    pub paths: Vec<(&'static str, String)>,
    pub recovery: Option<&'a RecoveryBudget>,
    pub monitoring: Option<&'a HangDetection>,
    pub elastic: Option<&'a Elastic>,
    /// Managed tiered checkpointing: the pods run as the service account its role trusts.
    pub tiered_checkpointing: bool,
    /// The MLflow tracking URI (the app's ARN) the job reports to, if any.
    pub tracking: Option<String>,
    /// Installs the elastic agent at pod start (the image does not carry it).
    pub install_agent: bool,
    /// The package index the pods install from (`None`: PyPI).
    pub package_index: Option<&'a str>,
    /// The team it runs as (its namespace and Kueue labels), if any.
    pub placement: &'a Placement,
}

/// Where the init container installs the HyperPod elastic agent: a user site
/// (`PYTHONUSERBASE`) the training container shares, so pip resolves the agent's dependencies
/// against the image's own packages (its torch stays the image's) and installs only what is
/// missing.
pub const AGENT_DIR: &str = "/opt/instantstart/agent";
/// The launcher the init container installs.
pub const INSTALLED_LAUNCHER: &str = "/opt/instantstart/agent/bin/hyperpodrun";

/// The init container that installs the elastic agent into [`AGENT_DIR`] with the image's own
/// Python (its console script then runs with that interpreter). No shell: an argument list.
fn agent_container(spec: &JobSpec<'_>) -> Value {
    let mut command = vec![
        "python".to_string(),
        "-m".into(),
        "pip".into(),
        "install".into(),
        "--user".into(),
        "--quiet".into(),
        "--no-cache-dir".into(),
        "--no-warn-script-location".into(),
    ];
    if let Some(index) = spec.package_index {
        command.extend(["--index-url".into(), index.to_string()]);
    }
    command.push(crate::cloud::images::ELASTIC_AGENT_PACKAGE.into());
    json!({"name": "elastic-agent", "image": spec.image, "command": command,
           "env": [{"name": "PYTHONUSERBASE", "value": AGENT_DIR}],
           "volumeMounts": [{"name": "elastic-agent", "mountPath": AGENT_DIR}]})
}

/// Where the MLflow client and AWS's `sagemaker-mlflow` plugin are installed for the pods.
const PLUGIN_DIR: &str = "/opt/instantstart/mlflow";
/// Installs the plugin into a volume the training container shares. The image's own packages
/// win: the `sitecustomize` appends the plugin's directory to `sys.path` after them, so nothing
/// the image pins is shadowed. A constant: no request field reaches it.
const PLUGIN_SCRIPT: &str = r#"import pathlib, subprocess, sys
root = pathlib.Path("/opt/instantstart/mlflow")
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir",
                       "--target", str(root / "lib"), "mlflow-skinny>=3,<4", "sagemaker-mlflow>=0.2,<1"])
(root / "sitecustomize.py").write_text("import sys
sys.path.append(%r)
" % str(root / "lib"))
print("MLflow client and sagemaker-mlflow plugin ready in", root)
"#;

/// The init container that provides the MLflow plugin (from the configured index, if any:
/// pip reads `PIP_INDEX_URL`).
fn plugin_container(spec: &JobSpec<'_>) -> Value {
    let mut c = json!({"name": "mlflow-plugin", "image": spec.image,
           "command": ["python", "-c", PLUGIN_SCRIPT],
           "volumeMounts": [{"name": "mlflow-plugin", "mountPath": PLUGIN_DIR}]});
    if let Some(index) = spec.package_index {
        c["env"] = json!([{"name": "PIP_INDEX_URL", "value": index}]);
    }
    c
}

fn metadata(spec: &JobSpec<'_>) -> Value {
    let annotations: Map<String, Value> = spec
        .paths
        .iter()
        .map(|(k, v)| (format!("instantstart.io/{k}"), json!(v)))
        .chain([("instantstart.io/recipe".to_string(), json!(spec.recipe))])
        .collect();
    let mut labels = labels(spec);
    spec.placement.label(&mut labels);
    json!({"name": spec.name, "namespace": spec.placement.namespace(), "labels": labels,
           "annotations": annotations})
}

fn labels(spec: &JobSpec<'_>) -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1, WORKLOAD_LABEL: "training", JOB_LABEL: spec.name})
}

/// A HyperPodPyTorchJob's pods carry the Kueue labels too, as the HyperPod CLI's template
/// writes them; KubeRay's pods do not (Kueue admits the RayJob as a whole).
fn pod_labels(spec: &JobSpec<'_>) -> Value {
    let mut labels = labels(spec);
    spec.placement.label(&mut labels);
    labels
}

fn env(spec: &JobSpec<'_>) -> Vec<Value> {
    let mut env: Vec<Value> = spec
        .paths
        .iter()
        .map(|(k, v)| json!({"name": format!("{}_DIR", k.to_ascii_uppercase()), "value": v}))
        .collect();
    env.push(json!({"name": "JOB_NAME", "value": spec.name}));
    if efa_interfaces(spec.instance_type) > 0 {
        env.extend([
            json!({"name": "FI_PROVIDER", "value": "efa"}),
            json!({"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}),
        ]);
    }
    env.push(json!({"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"}));
    if spec.install_agent {
        // The agent's user site joins sys.path after the image's own site-packages.
        env.push(json!({"name": "PYTHONUSERBASE", "value": AGENT_DIR}));
    }
    if let Some(uri) = &spec.tracking {
        // The recipes' trainers report to MLflow when these are set (the experiment and run
        // are named after the job, which is how the job page finds its metrics).
        env.extend([
            json!({"name": "MLFLOW_TRACKING_URI", "value": uri}),
            json!({"name": "MLFLOW_EXPERIMENT_NAME", "value": spec.name}),
            json!({"name": "MLFLOW_RUN_NAME", "value": spec.name}),
            json!({"name": "PYTHONPATH", "value": PLUGIN_DIR}),
        ]);
    }
    env
}

fn resources(spec: &JobSpec<'_>) -> Value {
    let mut r = json!({"nvidia.com/gpu": spec.gpus});
    let efa = efa_interfaces(spec.instance_type);
    if efa > 0 {
        r["vpc.amazonaws.com/efa"] = json!(efa);
    }
    json!({"requests": r, "limits": r})
}

fn volumes(spec: &JobSpec<'_>) -> Value {
    let mut v = json!([{"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}},
                       {"name": "shm", "emptyDir": {"medium": "Memory"}}]);
    if let Some(a) = v.as_array_mut() {
        if spec.tracking.is_some() {
            a.push(json!({"name": "mlflow-plugin", "emptyDir": {}}));
        }
        if spec.install_agent {
            a.push(json!({"name": "elastic-agent", "emptyDir": {}}));
        }
    }
    v
}

fn mounts(spec: &JobSpec<'_>) -> Value {
    let mut m =
        json!([{"name": "data", "mountPath": "/s3"}, {"name": "shm", "mountPath": "/dev/shm"}]);
    if let Some(a) = m.as_array_mut() {
        if spec.tracking.is_some() {
            a.push(json!({"name": "mlflow-plugin", "mountPath": PLUGIN_DIR}));
        }
        if spec.install_agent {
            a.push(json!({"name": "elastic-agent", "mountPath": AGENT_DIR}));
        }
    }
    m
}

/// A pod's identity (tiered checkpointing keeps its own service account, whose role the MLflow
/// setup also lets report) and its init containers: the elastic agent, the MLflow plugin.
fn tracked(spec: &JobSpec<'_>, pod: &mut Value) {
    if spec.tiered_checkpointing {
        pod["serviceAccountName"] = json!(CHECKPOINT_SA);
    } else if spec.tracking.is_some() {
        pod["serviceAccountName"] = json!(TRACKING_SA.1);
    }
    let mut init = Vec::new();
    if spec.install_agent {
        init.push(agent_container(spec));
    }
    if spec.tracking.is_some() {
        init.push(plugin_container(spec));
    }
    if !init.is_empty() {
        pod["initContainers"] = json!(init);
    }
}

fn pod_spec(spec: &JobSpec<'_>, container: Value) -> Value {
    let mut pod = json!({
        "nodeSelector": {"node.kubernetes.io/instance-type": spec.instance_type},
        // One pod per node: the job's pods spread over distinct hosts (as AWS's samples do;
        // the SDK's model has no pod anti-affinity term shape).
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {JOB_LABEL: spec.name}}}],
        "containers": [container],
        "volumes": volumes(spec),
    });
    tracked(spec, &mut pod);
    pod
}

/// A `HyperPodPyTorchJob`.
pub fn pytorch_job(spec: &JobSpec<'_>) -> Value {
    let container = json!({
        "name": "pytorch",
        "image": spec.image,
        "command": spec.command,
        "env": env(spec),
        "ports": [{"containerPort": AGENT_PORT}],
        "resources": resources(spec),
        "volumeMounts": mounts(spec),
    });
    let mut run_policy = json!({"cleanPodPolicy": "None"});
    if let Some(b) = spec.recovery {
        run_policy["jobMaxRetryCount"] = json!(b.job_max_retry_count);
        let mut restart = json!({"evalPeriodSeconds": b.eval_period_seconds});
        if let Some(n) = b.restarts_before_full_job_restart {
            restart["numRestartBeforeFullJobRestart"] = json!(n);
        }
        if let Some(n) = b.max_full_job_restarts {
            restart["maxFullJobRestarts"] = json!(n);
        }
        if let Some(n) = b.repeat_offenders_to_avoid {
            restart["maxNumRepeatOffendersToAvoid"] = json!(n);
        }
        run_policy["restartPolicy"] = restart;
    }
    if let Some(m) = spec.monitoring {
        let mut rule = json!({"name": "progress", "logPattern": m.log_pattern});
        if let Some(s) = m.start_cutoff_seconds {
            rule["expectedStartCutOffInSeconds"] = json!(s);
        }
        if let Some(s) = m.recurring_frequency_seconds {
            rule["expectedRecurringFrequencyInSeconds"] = json!(s);
        }
        if let (Some(t), Some(op)) = (m.metric_threshold, &m.operator) {
            rule["metricThreshold"] = json!(t);
            rule["operator"] = json!(op);
        }
        run_policy["logMonitoringConfiguration"] = json!([rule]);
    }
    let mut job_spec = json!({
        "nprocPerNode": spec.gpus.to_string(),
        "replicaSpecs": [{
            "name": "pods",
            "replicas": spec.nodes,
            "template": {"metadata": {"labels": pod_labels(spec)}, "spec": pod_spec(spec, container)},
        }],
        "runPolicy": run_policy,
    });
    if let Some(e) = spec.elastic {
        job_spec["replicaSpecs"][0]["maxReplicas"] = json!(e.max_nodes);
        job_spec["elasticPolicy"] = json!({"minReplicas": e.min_nodes, "maxReplicas": e.max_nodes});
    }
    json!({"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
           "metadata": metadata(spec), "spec": job_spec})
}

/// Words as one shell line in which each is a single argument: a word of only safe characters
/// as it is, any other in single quotes (a `'` inside closed, escaped and reopened).
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    words
        .iter()
        .map(|w| {
            let w = w.as_ref();
            if !w.is_empty() && w.chars().all(safe) {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `RayJob`: the recipe's command is the driver's entrypoint; the head runs no GPU work.
pub fn ray_job(spec: &JobSpec<'_>) -> Value {
    let ray = |name: &str, gpus: bool| {
        let mut c = json!({"name": name, "image": spec.image, "env": env(spec),
                           "volumeMounts": mounts(spec)});
        if gpus {
            c["resources"] = resources(spec);
        } else {
            c["resources"] = json!({"requests": {"cpu": "4", "memory": "16Gi"}});
            c["ports"] = json!([{"containerPort": 6379, "name": "gcs"},
                                {"containerPort": 8265, "name": "dashboard"},
                                {"containerPort": 10001, "name": "client"}]);
        }
        c
    };
    let worker_pod = pod_spec(spec, ray("ray-worker", true));
    let mut head_pod = json!({"containers": [ray("ray-head", false)], "volumes": volumes(spec)});
    tracked(spec, &mut head_pod);
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata(spec),
    "spec": {
        // RayJob's entrypoint is one string that Ray runs through a shell (the CRD has no
        // argument list): each word, validated already, is also quoted, so none can have a
        // shell meaning whatever validation lets through.
        "entrypoint": shell_words(&spec.command),
        "shutdownAfterJobFinishes": true,
        "ttlSecondsAfterFinished": 3600,
        "submissionMode": "K8sJobMode",
        "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
                "template": {"metadata": {"labels": labels(spec)}, "spec": head_pod}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": spec.nodes,
                "minReplicas": spec.nodes, "maxReplicas": spec.nodes, "rayStartParams": {},
                "template": {"metadata": {"labels": labels(spec)}, "spec": worker_pod}}],
        },
    }})
}

#[cfg(test)]
mod tests {
    use super::shell_words;

    #[test]
    fn each_word_of_a_ray_entrypoint_stays_one_argument() {
        assert_eq!(
            shell_words(&["python3", "-m", "verl.trainer.main_ppo", "data.path=/s3/x"]),
            "python3 -m verl.trainer.main_ppo data.path=/s3/x"
        );
        assert_eq!(
            shell_words(&["echo", "a b", "$(id)", "it's", ""]),
            r#"echo 'a b' '$(id)' 'it'\''s' ''"#
        );
    }
}
