//! Simulated pods: the pods each stored workload has now (named and labelled as its controller
//! would), and the logs they write — progress lines with step, loss and throughput, a model
//! server's request statistics, and the NCCL timeout an injected pod failure leaves behind.
//! A pod's log is a pure function of its workload and the simulated time, so a snapshot and a
//! followed stream agree line for line.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{json, Value};

use super::durations as d;
use super::log_text::train_secs;
use super::log_text::{after, cursor_after, select, trainer_lines};
use super::training::{missing_launcher, nodes_wanted, ray_cluster_name, training_end};
use super::workload::START;
use cloud::{LogLines, LogQuery};

/// Simulated seconds between two statistics lines of a model server.
const SERVER_EVERY: f64 = 10.0;
/// Statistics lines a model server keeps (its log is rotated, as a kubelet's would be).
const SERVER_KEEP: f64 = 1000.0;

/// What a simulated pod runs, which decides what it writes.
#[derive(Debug, Clone, PartialEq)]
enum Program {
    /// A rank of a training job: `failures` injected pod failures strike rank 0, the job
    /// gives up after `limit` restarts.
    Trainer {
        rank: u64,
        ranks: u64,
        failures: u64,
        limit: u64,
        /// Seconds one uninterrupted attempt trains.
        train: f64,
    },
    /// A model server (a Deployment's replica).
    Server,
    /// A batch Job's pod (a model download).
    Batch { model: String, target: String },
    /// A container that could not start: the runtime's one line.
    Crash(String),
    /// A pod Kueue has not admitted: it waits behind its scheduling gate, never started.
    Gated,
    /// A space's server (JupyterLab or Code Editor), serving under its base path.
    Space(String),
}

/// One simulated pod.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SimPod {
    pub name: String,
    pub namespace: String,
    pub container: String,
    image: String,
    pub(super) labels: Value,
    pub(super) annotations: Value,
    /// Its `ownerReferences` (a space's pod names its ReplicaSet), or null.
    pub(super) owners: Value,
    program: Program,
    /// Simulated seconds after the workload's apply at which the pod started.
    pub(super) start: f64,
    /// When the pod's containers ended, if they do; and whether they succeeded.
    end: Option<(f64, bool)>,
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn first_container(template_spec: Option<&Value>) -> String {
    template_spec
        .and_then(|p| p.pointer("/containers/0/name"))
        .and_then(Value::as_str)
        .unwrap_or("main")
        .to_string()
}

/// The pods a workload has at `age` simulated seconds after its apply; `obj` carries the
/// status the sandbox computed for it.
pub(super) fn pods_of(obj: &Value, age: f64, failures: u64) -> Vec<SimPod> {
    let name = s(obj, "/metadata/name").to_string();
    let namespace = match s(obj, "/metadata/namespace") {
        "" => "default".to_string(),
        ns => ns.to_string(),
    };
    let image = s(obj, "/spec/template/spec/containers/0/image").to_string();
    let pod = |pod: String, container: String, labels: Value, program, start, end| SimPod {
        name: pod,
        namespace: namespace.clone(),
        container,
        image: image.clone(),
        labels,
        annotations: json!({}),
        owners: Value::Null,
        program,
        start,
        end,
    };
    match obj["kind"].as_str() {
        Some("HyperPodPyTorchJob") => {
            let running = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] != "Created"));
            if !running || age < START {
                return vec![];
            }
            let limit = obj
                .pointer("/spec/runPolicy/jobMaxRetryCount")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let ranks = nodes_wanted(obj);
            let train = train_secs(obj.pointer("/spec/replicaSpecs/0/template/spec"));
            let container = first_container(obj.pointer("/spec/replicaSpecs/0/template/spec"));
            if let Some(why) = missing_launcher(obj) {
                return (0..ranks)
                    .map(|rank| {
                        pod(
                            format!("{name}-pods-{rank}"),
                            container.clone(),
                            json!({"HPJob": name}),
                            Program::Crash(why.clone()),
                            START,
                            Some((START, false)),
                        )
                    })
                    .collect();
            }
            (0..ranks)
                .map(|rank| {
                    pod(
                        format!("{name}-pods-{rank}"),
                        container.clone(),
                        json!({"HPJob": name}),
                        Program::Trainer {
                            rank,
                            ranks,
                            failures,
                            limit,
                            train,
                        },
                        START,
                        Some(training_end(failures, limit, train)),
                    )
                })
                .collect()
        }
        Some("RayJob") => {
            if !matches!(
                s(obj, "/status/jobDeploymentStatus"),
                "Running" | "Complete" | "Failed"
            ) {
                return vec![];
            }
            let ranks = nodes_wanted(obj);
            let train =
                train_secs(obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec"));
            let end = Some(training_end(failures, u64::MAX, train));
            // KubeRay's `labelPod`: the template's own labels, then the ones it owns.
            let cluster = ray_cluster_name(&name);
            let labels = |node_type: &str, group: &str, template: Option<&Value>| {
                let mut l = template
                    .and_then(|t| t.pointer("/metadata/labels"))
                    .cloned()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                for (k, v) in [
                    ("ray.io/is-ray-node", "yes".to_string()),
                    ("ray.io/cluster", cluster.clone()),
                    ("ray.io/node-type", node_type.to_string()),
                    ("ray.io/group", group.to_string()),
                    ("ray.io/identifier", format!("{cluster}-{node_type}")),
                    ("app.kubernetes.io/name", "kuberay".to_string()),
                    (
                        "app.kubernetes.io/created-by",
                        "kuberay-operator".to_string(),
                    ),
                ] {
                    l[k] = json!(v);
                }
                l
            };
            let head_template = obj.pointer("/spec/rayClusterSpec/headGroupSpec/template");
            let worker_template = obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template");
            let group = s(obj, "/spec/rayClusterSpec/workerGroupSpecs/0/groupName").to_string();
            let head =
                first_container(obj.pointer("/spec/rayClusterSpec/headGroupSpec/template/spec"));
            let worker = first_container(
                obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec"),
            );
            let trainer = |rank| Program::Trainer {
                rank,
                ranks: ranks + 1,
                failures,
                limit: u64::MAX,
                train,
            };
            std::iter::once(pod(
                format!("{cluster}-head"),
                head,
                labels("head", "headgroup", head_template),
                trainer(0),
                START,
                end,
            ))
            .chain((0..ranks).map(|i| {
                pod(
                    format!("{cluster}-{group}-worker-{i}"),
                    worker.clone(),
                    labels("worker", &group, worker_template),
                    trainer(i + 1),
                    START,
                    end,
                )
            }))
            .collect()
        }
        Some("Deployment") => {
            let want = obj
                .pointer("/status/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let mut ready = obj
                .pointer("/status/readyReplicas")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            // The replicas Kueue holds (kept with the object read back, as its pod names are).
            let gated: Vec<u64> = obj
                .get(super::workload::GATED)
                .and_then(|g| serde_json::from_value(g.clone()).ok())
                .unwrap_or_default();
            let labels = obj
                .pointer("/spec/template/metadata/labels")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let container = first_container(obj.pointer("/spec/template/spec"));
            let names = super::workload::replica_names(obj, want.max(ready));
            let mut out = Vec::new();
            for (i, name) in (0..).zip(names) {
                let (program, start) = if gated.contains(&i) {
                    (Program::Gated, f64::INFINITY)
                } else if ready > 0 {
                    ready -= 1;
                    (Program::Server, d::K8S_WORKLOAD_READY)
                } else {
                    // Admitted but not yet placed: the scheduler has no node for it.
                    continue;
                };
                out.push(pod(
                    name,
                    container.clone(),
                    labels.clone(),
                    program,
                    start,
                    None,
                ));
            }
            out
        }
        Some("Workspace") => {
            let available = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Available" && c["status"] == "True")
                });
            if !available {
                return vec![];
            }
            // As jupyter-k8s labels a workspace's pod: its own labels and the controller's.
            let mut labels = obj
                .pointer("/metadata/labels")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            labels["app"] = json!("jupyter");
            labels["workspace.jupyter.org/workspace-name"] = json!(name);
            labels["workspace.jupyter.org/component"] = json!("workspace");
            let base = s(obj, "/status/applicationBasePath").to_string();
            let mut p = pod(
                super::spaces::pod_name(obj),
                "workspace".into(),
                labels,
                Program::Space(base),
                0.0,
                None,
            );
            let (_, replica_set) = super::spaces::owner_chain(obj);
            p.owners = super::spaces::controlled_by(&replica_set);
            vec![p]
        }
        Some("Job") => {
            let mut labels = obj
                .pointer("/spec/template/metadata/labels")
                .cloned()
                .unwrap_or_else(|| json!({}));
            labels["job-name"] = json!(name);
            labels["batch.kubernetes.io/job-name"] = json!(name);
            let spec = obj.pointer("/spec/template/spec");
            let env = |key: &str| {
                spec.and_then(|p| p.pointer("/containers/0/env"))
                    .and_then(Value::as_array)
                    .and_then(|env| env.iter().find(|e| e["name"] == key))
                    .and_then(|e| e["value"].as_str())
                    .unwrap_or("")
                    .to_string()
            };
            vec![pod(
                format!("{name}-sbx"),
                first_container(spec),
                labels,
                Program::Batch {
                    model: env("MODEL_ID"),
                    target: env("TARGET"),
                },
                0.0,
                Some((d::K8S_WORKLOAD_READY, true)),
            )]
        }
        _ => vec![],
    }
}

impl SimPod {
    /// The base path a space's server serves under, for a space's pod.
    pub(super) fn space_base(&self) -> Option<&str> {
        match &self.program {
            Program::Space(base) => Some(base),
            _ => None,
        }
    }

    /// Whether Kueue holds the pod behind its scheduling gate.
    pub(super) fn gated(&self) -> bool {
        self.program == Program::Gated
    }

    /// The Pod object the API server would return.
    pub(super) fn manifest(&self, age: f64, created: &str) -> Value {
        if self.gated() {
            return json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels,
                             "annotations": self.annotations, "creationTimestamp": created},
                "spec": {"containers": [{"name": self.container, "image": self.image}],
                         "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                     "message": "Scheduling is blocked due to non-empty scheduling gates"}]}});
        }
        let phase = match self.end {
            Some((end, ok)) if age >= end => {
                if ok {
                    "Succeeded"
                } else {
                    "Failed"
                }
            }
            _ => "Running",
        };
        let ready = if phase == "Running" { "True" } else { "False" };
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels,
                            "annotations": self.annotations, "creationTimestamp": created},
               "spec": {"containers": [{"name": self.container, "image": self.image}]},
               "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}});
        if !self.owners.is_null() {
            pod["metadata"]["ownerReferences"] = self.owners.clone();
        }
        pod
    }

    /// Whether the pod's container is still writing at `age`.
    pub(super) fn done(&self, age: f64) -> bool {
        self.end.is_some_and(|(end, _)| age >= end)
    }

    /// Every line written up to `age` simulated seconds after the workload's apply, with the
    /// simulated second each was written at.
    fn lines_until(&self, age: f64) -> Vec<(f64, String)> {
        let mut out = Vec::new();
        let until = self.end.map_or(age, |(end, _)| age.min(end));
        match &self.program {
            Program::Trainer {
                rank,
                ranks,
                failures,
                limit,
                train,
            } => trainer_lines(&mut out, until, *rank, *ranks, *failures, *limit, *train),
            Program::Server => {
                out.push((self.start, "INFO:     Started server process [1]".into()));
                out.push((
                    self.start,
                    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
                        .into(),
                ));
                // Only the last lines: a server that runs for days must not cost more per read.
                let skipped =
                    (((until - self.start) / SERVER_EVERY).floor() - SERVER_KEEP).max(0.0);
                let mut t = self.start + SERVER_EVERY * (skipped + 1.0);
                while t <= until {
                    let prompt = 40.0 + 25.0 * (t / 37.0).sin().abs();
                    let generation = 180.0 + 60.0 * (t / 23.0).cos().abs();
                    out.push((t, format!("INFO: Avg prompt throughput: {prompt:.1} tokens/s, Avg generation throughput: {generation:.1} tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%")));
                    t += SERVER_EVERY;
                }
            }
            Program::Crash(why) => out.push((self.start, why.clone())),
            Program::Gated => {}
            Program::Space(base) => out.push((
                self.start,
                format!("[I ServerApp] Jupyter Server is running at: http://0.0.0.0:8888{base}/"),
            )),
            Program::Batch { model, target } => {
                out.push((0.0, "Collecting huggingface_hub".into()));
                if until >= 5.0 {
                    out.push((5.0, format!("Fetching files of {model}")));
                }
                if self.done(age) {
                    out.push((until, format!("downloaded {model} to {target}")));
                }
            }
        }
        out.retain(|(t, _)| *t <= until);
        out
    }

    /// What the progress lines report up to `age`: (simulated second, step, loss, throughput),
    /// read back from the lines themselves, so metrics and logs always agree.
    pub(super) fn progress_points(&self, age: f64) -> Vec<(f64, u64, f64, f64)> {
        self.lines_until(age)
            .into_iter()
            .filter_map(|(t, line)| {
                let field = |key: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(key))
                        .map(str::to_string)
                };
                Some((
                    t,
                    field("step=")?.parse().ok()?,
                    field("loss=")?.parse().ok()?,
                    field("throughput=")?.parse().ok()?,
                ))
            })
            .collect()
    }

    /// Whether the pod ended by `age`, and if so whether it succeeded.
    pub(super) fn outcome(&self, age: f64) -> Option<bool> {
        self.end.filter(|(end, _)| age >= *end).map(|(_, ok)| ok)
    }

    /// The log as the `log` subresource returns it for `query` at `age`.
    pub(super) fn log(&self, age: f64, query: &LogQuery) -> String {
        select(self.lines_until(age), age, query).join("\n")
    }

    /// A followed log: the lines so far (per the query), then each line as the simulated time
    /// reaches it, until the pod ends. `created_ms` anchors the workload's simulated time.
    pub(super) fn follow(self, query: &LogQuery, created_ms: i64, time_scale: f64) -> LogLines {
        let age = move || (super::now_ms() - created_ms).max(0) as f64 / 1000.0 * time_scale;
        let now = age();
        let lines = self.lines_until(now);
        // Where the follow is: the time of the last line sent, and how many lines of that time.
        let cursor = cursor_after(&lines, (f64::NEG_INFINITY, 0));
        let first = select(lines, now, query);
        let tick = Duration::from_millis(200);
        let head = futures::stream::iter(first.into_iter().map(Ok));
        let rest = futures::stream::unfold((self, cursor), move |(pod, cursor)| async move {
            loop {
                let now = age();
                let lines = pod.lines_until(now);
                let fresh = after(&lines, cursor);
                if !fresh.is_empty() {
                    let cursor = cursor_after(&lines, cursor);
                    let fresh: Vec<_> = fresh.into_iter().map(|(_, l)| Ok(l)).collect();
                    return Some((futures::stream::iter(fresh), (pod, cursor)));
                }
                if pod.done(now) {
                    return None;
                }
                tokio::time::sleep(tick).await;
            }
        })
        .flatten();
        head.chain(rest).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(replicas: u64, limit: u64) -> Value {
        json!({"kind": "HyperPodPyTorchJob", "metadata": {"name": "t1", "namespace": "default"},
               "spec": {"runPolicy": {"jobMaxRetryCount": limit},
                        "replicaSpecs": [{"replicas": replicas, "template": {"spec": {"containers": [{"name": "pytorch"}]}}}]},
               "status": {"conditions": [{"type": "Created"}, {"type": "Running"}]}})
    }

    #[test]
    fn a_faulted_rank_writes_the_nccl_timeout_and_the_others_wait() {
        let pods = pods_of(&job(2, 3), 200.0, 1);
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0].name, "t1-pods-0");
        assert_eq!(pods[0].labels["HPJob"], "t1");
        let log = pods[0].log(200.0, &LogQuery::default());
        assert!(
            log.contains("Watchdog caught collective operation timeout"),
            "{log}"
        );
        assert!(log.contains("(attempt 2)"), "{log}");
        let other = pods[1].log(200.0, &LogQuery::default());
        assert!(!other.contains("Watchdog"), "{other}");
        assert!(other.contains("waits for the restart"), "{other}");
        assert!(other.contains("step="), "{other}");
    }

    #[test]
    fn tail_since_and_limit_select_the_end_of_a_log() {
        let pod = &pods_of(&job(1, 0), 120.0, 0)[0];
        let all = pod.log(120.0, &LogQuery::default());
        let tail = pod.log(
            120.0,
            &LogQuery {
                tail_lines: Some(2),
                ..Default::default()
            },
        );
        assert_eq!(tail.lines().count(), 2);
        assert!(all.ends_with(&tail));
        let recent = pod.log(
            120.0,
            &LogQuery {
                since_seconds: Some(10),
                ..Default::default()
            },
        );
        assert_eq!(recent.lines().count(), 3, "{recent}");
        let small = pod.log(
            120.0,
            &LogQuery {
                limit_bytes: Some(100),
                ..Default::default()
            },
        );
        assert!(small.len() <= 100);
    }

    #[test]
    fn a_replica_kueue_holds_waits_behind_its_gate_and_an_unplaced_one_has_no_pod() {
        let d = json!({"kind": "Deployment", "metadata": {"name": "d", "namespace": "hyperpod-ns-a"},
                       "spec": {"template": {"metadata": {"labels": {"app": "d"}}}},
                       "status": {"replicas": 3, "readyReplicas": 1}, "__gated": [1]});
        let pods = pods_of(&d, 100.0, 0);
        let names: Vec<(&str, bool)> = pods.iter().map(|p| (p.name.as_str(), p.gated())).collect();
        assert_eq!(names, [("d-sbx-0", false), ("d-sbx-1", true)]);
        let held = pods[1].manifest(100.0, "");
        assert_eq!(held["status"]["phase"], "Pending");
        assert_eq!(held["status"]["conditions"][0]["reason"], "SchedulingGated");
        assert_eq!(
            held["spec"]["schedulingGates"][0]["name"],
            "kueue.x-k8s.io/admission"
        );
        assert!(!pods[1].running(100.0) && pods[1].lines_until(100.0).is_empty());
        assert!(pods[0].running(100.0));
    }

    #[test]
    fn a_long_running_server_keeps_its_last_lines_and_a_cursor_sends_each_line_once() {
        let d = json!({"kind": "Deployment", "metadata": {"name": "d"},
                       "spec": {"template": {"metadata": {"labels": {"app": "d"}}}},
                       "status": {"readyReplicas": 1}});
        let pod = &pods_of(&d, 0.0, 0)[0];
        assert_eq!(pod.labels["app"], "d");
        let day = pod.lines_until(86_400.0);
        assert!(day.len() <= SERVER_KEEP as usize + 2, "{}", day.len());
        let earlier = pod.lines_until(86_000.0);
        let cursor = cursor_after(&earlier, (f64::NEG_INFINITY, 0));
        let fresh = after(&day, cursor);
        assert_eq!(fresh.len(), 40);
        assert!(fresh.iter().all(|(t, _)| *t > 86_000.0));
        // Lines written at the same second are sent once each.
        let burst = vec![(1.0, "a".to_string()), (2.0, "b".into()), (2.0, "c".into())];
        let partial = cursor_after(&burst[..2], (f64::NEG_INFINITY, 0));
        assert_eq!(after(&burst, partial), vec![(2.0, "c".to_string())]);
    }

    #[test]
    fn a_job_that_runs_out_of_retries_fails_its_pods() {
        let pods = pods_of(&job(1, 0), 1000.0, 2);
        let pod = &pods[0];
        assert_eq!(pod.manifest(1000.0, "")["status"]["phase"], "Failed");
        assert!(pod.done(1000.0));
        assert_eq!(pods_of(&job(1, 0), 10.0, 0), vec![]);
    }
}
