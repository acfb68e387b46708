//! Watch-backed caches of one cluster's nodes and pods (kube-runtime reflectors), and the
//! summary the status routes serve from them without a request to the API server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client, ResourceExt as _};

use crate::cloud::{CacheInfo, CloudError, CloudResult, ClusterState, GpuUsage, NodeState};

const GPU: &str = "nvidia.com/gpu";
/// How long the first request waits for the initial lists before answering with an error.
const SYNC_TIMEOUT: Duration = Duration::from_secs(15);

/// Labels that carry a node's HyperPod health.
const HEALTH_LABELS: [&str; 2] = [
    "sagemaker.amazonaws.com/node-health-status",
    "sagemaker.amazonaws.com/deep-health-check-status",
];

/// Reflectors for nodes and pods, fed by background watch tasks that end with the cache.
pub struct Cache {
    nodes: Store<Node>,
    pods: Store<Pod>,
    started: Instant,
    /// Milliseconds after `started` of the last watch event.
    last_event_ms: Arc<AtomicU64>,
    stopped: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Cache {
    pub fn start(client: Client) -> Self {
        let started = Instant::now();
        let last_event_ms = Arc::new(AtomicU64::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let (nodes, node_writer) = reflector::store::<Node>();
        let (pods, pod_writer) = reflector::store::<Pod>();
        let node_task = {
            let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
                .default_backoff()
                .modify(|n: &mut Node| n.managed_fields_mut().clear())
                .reflect(node_writer);
            tokio::spawn(drain(
                stream,
                started,
                last_event_ms.clone(),
                stopped.clone(),
            ))
        };
        let pod_task = {
            let stream = watcher(Api::<Pod>::all(client), watcher::Config::default())
                .default_backoff()
                .modify(|p: &mut Pod| p.managed_fields_mut().clear())
                .reflect(pod_writer);
            tokio::spawn(drain(
                stream,
                started,
                last_event_ms.clone(),
                stopped.clone(),
            ))
        };
        Self {
            nodes,
            pods,
            started,
            last_event_ms,
            stopped,
            tasks: vec![node_task, pod_task],
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    pub async fn snapshot(&self) -> CloudResult<ClusterState> {
        let ready = async {
            self.nodes.wait_until_ready().await.ok()?;
            self.pods.wait_until_ready().await.ok()
        };
        if tokio::time::timeout(SYNC_TIMEOUT, ready)
            .await
            .ok()
            .flatten()
            .is_none()
        {
            return Err(CloudError::new(
                "k8s",
                "Watch",
                "CacheNotSynced",
                "the node and pod lists did not arrive from the Kubernetes API server in time",
            )
            .retryable());
        }
        let nodes = self.nodes.state();
        let pods = self.pods.state();
        let since_start = self.started.elapsed().as_millis() as u64;
        let age_ms = since_start.saturating_sub(self.last_event_ms.load(Ordering::Relaxed));
        Ok(summarize(&nodes, &pods, age_ms))
    }
}

async fn drain<S, E>(stream: S, started: Instant, last: Arc<AtomicU64>, stopped: Arc<AtomicBool>)
where
    S: futures::Stream<Item = Result<watcher::Event<E>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(_) => last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed),
            Err(e) => tracing::debug!(error = %e, "watch error (retrying with backoff)"),
        }
    }
    stopped.store(true, Ordering::Relaxed);
}

fn gpus(q: Option<&Quantity>) -> u32 {
    q.and_then(|q| q.0.parse::<u32>().ok()).unwrap_or(0)
}

/// GPUs a pod asks for: its containers' requests (or limits, which imply requests for extended
/// resources), or the largest init container's if that is larger.
fn pod_gpus(pod: &Pod) -> u32 {
    let Some(spec) = &pod.spec else { return 0 };
    let one = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref();
        let req = r.and_then(|r| r.requests.as_ref()).and_then(|m| m.get(GPU));
        let lim = r.and_then(|r| r.limits.as_ref()).and_then(|m| m.get(GPU));
        gpus(req.or(lim))
    };
    let main: u32 = spec.containers.iter().map(one).sum();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(one)
        .max()
        .unwrap_or(0);
    main.max(init)
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn label(labels: &BTreeMap<String, String>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| labels.get(*k).cloned())
}

/// Normalises the capacity labels of HyperPod, EKS node groups and Karpenter.
fn capacity_type(labels: &BTreeMap<String, String>) -> Option<String> {
    let raw = label(
        labels,
        &[
            "sagemaker.amazonaws.com/capacity-type",
            "karpenter.sh/capacity-type",
            "eks.amazonaws.com/capacityType",
        ],
    )?;
    Some(match raw.to_ascii_lowercase().as_str() {
        "spot" => "spot".into(),
        "on_demand" | "on-demand" | "ondemand" => "on-demand".into(),
        "training-plan" | "training_plan" | "capacity_block" | "reserved" => "training-plan".into(),
        other => other.to_string(),
    })
}

/// Per-node GPU accounting and pending demand, in one pass over the pods.
pub fn summarize(nodes: &[Arc<Node>], pods: &[Arc<Pod>], age_ms: u64) -> ClusterState {
    let mut requested: HashMap<&str, u32> = HashMap::new();
    let (mut pending_gpu_pods, mut pending_gpus) = (0, 0);
    for pod in pods {
        if finished(pod) {
            continue;
        }
        let g = pod_gpus(pod);
        if g == 0 {
            continue;
        }
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(node) => *requested.entry(node).or_default() += g,
            None => {
                pending_gpu_pods += 1;
                pending_gpus += g;
            }
        }
    }
    let mut out: Vec<NodeState> = nodes
        .iter()
        .map(|n| {
            let name = n.name_any();
            let labels = n.labels();
            let status = n.status.as_ref();
            let total = gpus(status.and_then(|s| s.capacity.as_ref()?.get(GPU)));
            let allocatable = gpus(status.and_then(|s| s.allocatable.as_ref()?.get(GPU)));
            let used = requested.get(name.as_str()).copied().unwrap_or(0);
            let ready_condition = status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "Ready");
            let ready = ready_condition.is_some_and(|c| c.status == "True");
            let not_ready_reason = (!ready).then(|| match ready_condition {
                None => "the node has not reported a Ready condition".to_string(),
                Some(c) => [c.reason.as_deref(), c.message.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(": "),
            });
            let instance_id = name
                .strip_prefix("hyperpod-")
                .map(str::to_string)
                .or_else(|| {
                    n.spec
                        .as_ref()?
                        .provider_id
                        .as_deref()?
                        .rsplit('/')
                        .next()
                        .filter(|s| s.starts_with("i-"))
                        .map(str::to_string)
                });
            NodeState {
                instance_id,
                instance_type: label(
                    labels,
                    &[
                        "node.kubernetes.io/instance-type",
                        "beta.kubernetes.io/instance-type",
                    ],
                ),
                instance_group: label(labels, &["sagemaker.amazonaws.com/instance-group-name"]),
                capacity_type: capacity_type(labels),
                ready,
                not_ready_reason,
                unschedulable: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false),
                gpus: GpuUsage {
                    total,
                    allocatable,
                    requested: used,
                    free: allocatable.saturating_sub(used),
                },
                health: HEALTH_LABELS
                    .iter()
                    .filter_map(|k| labels.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect(),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    ClusterState {
        cache: CacheInfo {
            source: "watch".into(),
            age_ms,
            nodes: nodes.len(),
            pods: pods.len(),
        },
        nodes: out,
        pending_gpu_pods,
        pending_gpus,
    }
}
