//! What the summary reads of a node or a pod, taken as each arrives: a node's view, and a
//! pod's brief (its key, the GPUs it holds or waits for, its node, whose it is).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;

use cloud::{GpuUsage, Labels, NodeState};

pub(super) const GPU: &str = "nvidia.com/gpu";

/// Labels that carry a node's HyperPod health.
const HEALTH_LABELS: [&str; 2] = [
    "sagemaker.amazonaws.com/node-health-status",
    "sagemaker.amazonaws.com/deep-health-check-status",
];

/// Whose pods they are: a namespace and the pods' labels of `HOLDER_LABELS`.
pub type Holder = (String, Labels);

fn gpus(q: Option<&Quantity>) -> u32 {
    q.and_then(|q| q.0.parse::<u32>().ok()).unwrap_or(0)
}

/// GPUs a pod asks for: its containers' requests (or limits, which imply requests for extended
/// resources), or the largest init container's if that is larger.
pub(super) fn pod_gpus(pod: &Pod) -> u32 {
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

pub(super) fn finished(pod: &Pod) -> bool {
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

/// A node's view (GPUs requested 0: the summary adds them).
pub(super) fn node_view(n: &Node) -> NodeState {
    let name = n.name_any();
    let labels = n.labels();
    let status = n.status.as_ref();
    let total = gpus(status.and_then(|s| s.capacity.as_ref()?.get(GPU)));
    let allocatable = gpus(status.and_then(|s| s.allocatable.as_ref()?.get(GPU)));
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
            requested: 0,
            free: allocatable,
        },
        health: HEALTH_LABELS
            .iter()
            .filter_map(|k| labels.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect(),
        name,
    }
}

/// What a relist keeps of a pod until it completes: its key, GPUs (0 once finished), node,
/// holder.
pub type PodBrief = (String, u32, Option<String>, Holder);

pub fn pod_brief(p: &Pod) -> PodBrief {
    let gpus = if finished(p) { 0 } else { pod_gpus(p) };
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
    let holder = (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.labels()
            .iter()
            .filter(|(k, _)| cloud::HOLDER_LABELS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    (pod_key(p), gpus, node, holder)
}

pub fn node_brief(n: &Node) -> NodeState {
    node_view(n)
}

pub fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.name_any()
    )
}
