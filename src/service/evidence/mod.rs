//! Evidence for a failure, gathered in one read. A node's: HyperPod's status and message for it,
//! its Kubernetes labels, taints, conditions and fault details, the events of it and its pods,
//! HyperPod's events for it, and the newest lines of its log streams. A failed creation's: the
//! failed stages' errors, HyperPod's failure message and events, and the lifecycle-script
//! streams. Every part is read on its own: one that cannot be read says why, and the rest is
//! still shown — evidence is wanted most when something is broken.

mod streams;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::{CloudError, ClusterEvent, ListQuery, LogLine, NodeDetail, ObjectRef};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::{hyperpod_of, kube_target, live_cluster};
use crate::service::shared::resources::ClusterResources;
use streams::{lifecycle_prefixes, tails};

/// Newest lines read of each stream, events kept, streams read.
const LINES: usize = 50;
const EVENTS: usize = 50;
const STREAMS: usize = 10;
/// Pods on a node whose events are read.
const PODS: usize = 20;

/// Labels and annotations where HyperPod says how a node fares. AWS's pages spell the fault
/// labels singular and its own skill files plural: both are read.
const HEALTH_PREFIXES: &[&str] = &[
    "sagemaker.amazonaws.com/node-health-status",
    "sagemaker.amazonaws.com/deep-health-check-status",
    "sagemaker.amazonaws.com/fault-type",
    "sagemaker.amazonaws.com/fault-reason",
];
const FAULT_DETAILS: &str = "sagemaker.amazonaws.com/fault-details";

/// A part of the evidence that could not be read, and why.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unread {
    pub part: String,
    pub reason: String,
}

/// The newest lines of one log stream, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamTail {
    pub stream: String,
    pub lines: Vec<LogLine>,
}

/// A Kubernetes event, in brief.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeEvent {
    /// RFC 3339 (its last occurrence).
    pub time: String,
    /// `Normal` | `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    /// `Node/hyperpod-i-…` or `Pod/<namespace>/<name>`.
    pub object: String,
    pub message: String,
    pub count: u64,
}

/// What Kubernetes says of a node.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeNode {
    pub name: String,
    /// HyperPod's health and fault labels only.
    pub health: BTreeMap<String, String>,
    #[schema(value_type = Vec<Object>)]
    pub taints: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub conditions: Vec<Value>,
    pub unschedulable: bool,
    /// The `fault-details` annotation, parsed when it is JSON.
    #[schema(value_type = Option<Object>)]
    pub fault_details: Option<Value>,
}

/// Everything known about why a node fares as it does.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeEvidence {
    pub cluster: String,
    pub node_id: String,
    /// As `DescribeClusterNode` has it.
    pub hyperpod: Option<NodeDetail>,
    pub kubernetes: Option<KubeNode>,
    /// Events of the node and the pods on it, newest first.
    pub events: Vec<KubeEvent>,
    /// HyperPod's events for the node, newest first.
    pub cluster_events: Vec<ClusterEvent>,
    /// Why there are no HyperPod events to read, when SageMaker keeps none for the cluster.
    pub cluster_events_note: Option<String>,
    pub log_group: Option<String>,
    /// Its lifecycle-script, health-agent and deep-health-check streams.
    pub logs: Vec<StreamTail>,
    /// What the evidence says, in plain words.
    pub findings: Vec<String>,
    pub unread: Vec<Unread>,
    /// What to do next, in the escalation order investigate → reboot → replace.
    pub hint: String,
}

/// A failed stage, in brief.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedStage {
    pub kind: String,
    pub operation_id: String,
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
}

/// Everything known about why a cluster's creation failed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEvidence {
    pub cluster: String,
    pub failed_stages: Vec<FailedStage>,
    /// HyperPod's status and `FailureMessage`, once the cluster exists.
    pub hyperpod_status: Option<String>,
    pub failure_message: Option<String>,
    pub cluster_events: Vec<ClusterEvent>,
    /// Why there are no HyperPod events to read, when SageMaker keeps none for the cluster.
    pub cluster_events_note: Option<String>,
    pub log_group: Option<String>,
    /// Lifecycle-script streams, the ones the failure names first.
    pub logs: Vec<StreamTail>,
    pub findings: Vec<String>,
    pub unread: Vec<Unread>,
    pub hint: String,
}

/// What is said instead of HyperPod's events for a cluster SageMaker keeps none for.
const NO_EVENTS: &str = "HyperPod keeps events only for clusters whose NodeProvisioningMode is Continuous (ListClusterEvents refuses the others); this cluster's is not, so none were asked for: read its lifecycle-script logs and Kubernetes events instead";

/// HyperPod's events (for one node, or the whole cluster), asked for only where SageMaker
/// keeps them; otherwise none, and why.
async fn hyperpod_events(
    cloud: &crate::cloud::Cloud,
    hyperpod: &str,
    node: Option<&str>,
    continuous: bool,
    unread_parts: &mut Vec<Unread>,
) -> (Vec<ClusterEvent>, Option<String>) {
    if !continuous {
        return (vec![], Some(NO_EVENTS.into()));
    }
    match cloud
        .hyperpod
        .list_cluster_events(hyperpod, node, EVENTS)
        .await
    {
        Ok(e) => (e, None),
        Err(e) => {
            unread_parts.push(unread("HyperPod events", &e));
            (vec![], None)
        }
    }
}

fn unread(part: &str, e: &CloudError) -> Unread {
    Unread {
        part: part.into(),
        reason: format!("{}:{} {}: {}", e.service, e.operation, e.code, e.message),
    }
}

/// `/aws/sagemaker/Clusters/<name>/<id>`, from the HyperPod cluster's ARN.
fn log_group(hyperpod: &str, arn: Option<&str>) -> Option<String> {
    let id = arn?.rsplit('/').next().filter(|id| !id.is_empty())?;
    Some(format!("/aws/sagemaker/Clusters/{hyperpod}/{id}"))
}

fn kube_event(e: &Value) -> KubeEvent {
    let s = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let object = match s("/involvedObject/kind") {
        "Pod" => format!(
            "Pod/{}/{}",
            s("/involvedObject/namespace"),
            s("/involvedObject/name")
        ),
        kind => format!("{kind}/{}", s("/involvedObject/name")),
    };
    let time = [
        "/lastTimestamp",
        "/eventTime",
        "/firstTimestamp",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .map(|p| s(p))
    .find(|t| !t.is_empty())
    .unwrap_or_default()
    .to_string();
    KubeEvent {
        time,
        kind: s("/type").to_string(),
        reason: s("/reason").to_string(),
        object,
        message: s("/message").to_string(),
        count: e["count"].as_u64().unwrap_or(1),
    }
}

fn kube_node(node: &Value) -> KubeNode {
    let labels = node["metadata"]["labels"].as_object();
    let health = labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| HEALTH_PREFIXES.iter().any(|p| k.starts_with(p)))
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let fault_details = node["metadata"]["annotations"][FAULT_DETAILS]
        .as_str()
        .map(|a| serde_json::from_str(a).unwrap_or_else(|_| json!(a)));
    let list = |p: &str| {
        node.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    KubeNode {
        name: node["metadata"]["name"].as_str().unwrap_or_default().into(),
        health,
        taints: list("/spec/taints"),
        conditions: list("/status/conditions"),
        unschedulable: node["spec"]["unschedulable"] == true,
        fault_details,
    }
}

/// What a node's evidence says, and what to do next.
fn read_node(e: &NodeEvidence) -> (Vec<String>, String) {
    let mut findings = vec![];
    let health = e.kubernetes.as_ref().map(|k| &k.health);
    let label = |suffix: &str| {
        health.and_then(|h| {
            h.iter()
                .find(|(k, _)| k.ends_with(suffix))
                .map(|(_, v)| v.as_str())
        })
    };
    if let Some(d) = &e.hyperpod {
        if d.status != "Running" {
            findings.push(format!("HyperPod reports the instance {}", d.status));
        }
        if let Some(m) = &d.message {
            findings.push(format!("HyperPod says: {m}"));
        }
    }
    if label("deep-health-check-status") == Some("Failed") {
        findings.push("its deep health check failed".into());
    }
    for suffix in ["fault-type", "fault-types", "fault-reason", "fault-reasons"] {
        if let Some(v) = label(suffix) {
            findings.push(format!("{suffix}: {v}"));
        }
    }
    let warnings = e.events.iter().filter(|ev| ev.kind == "Warning").count();
    if warnings > 0 {
        findings.push(format!("{warnings} warning events"));
    }
    let hint = match label("node-health-status") {
        Some("UnschedulablePendingReplacement") => "HyperPod marked it for replacement: with \
            automatic node recovery it is replaced by itself; otherwise replace it (node_replace) \
            after telling the user its local volumes are lost. A reboot does not mend failed hardware.",
        Some("UnschedulablePendingReboot") => "HyperPod marked it for a reboot: with automatic node \
            recovery it reboots by itself; otherwise reboot it (node_reboot), and replace it only if \
            that does not help.",
        _ if findings.is_empty() => "Nothing here says the node is unhealthy: look at the job's \
            logs (workload_logs) for the rank that failed before touching the node.",
        _ => "Read the findings and the log lines first; then reboot (node_reboot), and replace \
            (node_replace) only if a reboot does not help.",
    };
    (findings, hint.into())
}

/// Validates a node id's shape (`i-` and 8 to 17 hex digits).
pub fn node_id(id: &str) -> ApiResult<()> {
    let valid = id.strip_prefix("i-").is_some_and(|hex| {
        (8..=17).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit())
    });
    if valid {
        Ok(())
    } else {
        Err(ApiError::validation_hint(
            "id",
            format!(
                "`{}` is not an instance id",
                id.chars().take(64).collect::<String>()
            ),
            json!("i- followed by 8 to 17 hex digits"),
        ))
    }
}

/// The evidence about one node of `cluster`.
pub async fn node_evidence(engine: &Engine, cluster: &str, id: &str) -> ApiResult<NodeEvidence> {
    node_id(id)?;
    let hyperpod = hyperpod_of(engine, cluster).await?;
    let cloud = engine.cloud();
    let mut unread_parts = vec![];
    let detail = match cloud.hyperpod.describe_cluster_node(&hyperpod, id).await {
        Ok(Some(d)) => Some(d),
        Ok(None) => {
            return Err(ApiError::NotFound {
                what: format!("node {id} in `{cluster}`"),
                hint: Some(Box::new(json!("node_list lists the cluster's nodes"))),
            })
        }
        Err(e) => {
            unread_parts.push(unread("HyperPod node", &e));
            None
        }
    };
    // The Kubernetes side: the node HyperPod names after the instance, its events and its pods'.
    let name = format!("hyperpod-{id}");
    let (mut kubernetes, mut events) = (None, vec![]);
    match kube_target(engine, cluster).await {
        Ok(target) => {
            let node = ObjectRef {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: None,
                name: name.clone(),
            };
            match cloud.kube.get(&target, &node).await {
                Ok(n) => kubernetes = n.as_ref().map(kube_node),
                Err(e) => unread_parts.push(unread("Kubernetes node", &e)),
            }
            let of_node = format!("involvedObject.kind=Node,involvedObject.name={name}");
            match cloud
                .kube
                .list(&target, &ListQuery::of("v1", "Event").fields(&of_node))
                .await
            {
                Ok(list) => events.extend(list.iter().map(kube_event)),
                Err(e) => unread_parts.push(unread("node events", &e)),
            }
            let on_node = format!("spec.nodeName={name}");
            match cloud
                .kube
                .list(&target, &ListQuery::of("v1", "Pod").fields(&on_node))
                .await
            {
                Ok(pods) => {
                    for pod in pods.iter().take(PODS) {
                        let s =
                            |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
                        let of_pod = format!(
                            "involvedObject.kind=Pod,involvedObject.name={}",
                            s("/metadata/name")
                        );
                        let ns = Some(s("/metadata/namespace")).filter(|n| !n.is_empty());
                        match cloud
                            .kube
                            .list(
                                &target,
                                &ListQuery {
                                    namespace: ns,
                                    ..ListQuery::of("v1", "Event")
                                }
                                .fields(&of_pod),
                            )
                            .await
                        {
                            Ok(list) => events.extend(list.iter().map(kube_event)),
                            Err(e) => unread_parts.push(unread("pod events", &e)),
                        }
                    }
                }
                Err(e) => unread_parts.push(unread("pods on the node", &e)),
            }
        }
        Err(e) => unread_parts.push(Unread {
            part: "Kubernetes".into(),
            reason: e.to_string(),
        }),
    }
    events.sort_by(|a, b| b.time.cmp(&a.time));
    events.truncate(EVENTS);
    let continuous = match cloud.hyperpod.describe_cluster(&hyperpod).await {
        Ok(c) => c.is_some_and(|c| c.continuous_provisioning),
        Err(e) => {
            unread_parts.push(unread("HyperPod cluster", &e));
            false
        }
    };
    let (cluster_events, cluster_events_note) =
        hyperpod_events(cloud, &hyperpod, Some(id), continuous, &mut unread_parts).await;
    let record = live_cluster(engine, cluster).await?;
    let resources = ClusterResources::of(&record.resources);
    let group_name = log_group(&hyperpod, resources.hyperpod_cluster_arn.as_deref());
    let logs = match (&group_name, &detail) {
        (Some(group), Some(d)) => {
            let prefixes = [
                format!("LifecycleConfig/{}/{id}", d.instance_group),
                format!("SagemakerHealthMonitoringAgent/{}/{id}", d.instance_group),
            ];
            let mut logs = tails(engine, group, &prefixes, &mut unread_parts).await;
            // Deep health checks write a stream per run, `DeepHealthCheckResults/<log stream
            // id>`, naming the instance in its lines, not in its name: the node's are found by
            // what they say.
            let runs = ["DeepHealthCheckResults/".to_string()];
            logs.extend(
                tails(engine, group, &runs, &mut unread_parts)
                    .await
                    .into_iter()
                    .filter(|t| t.lines.iter().any(|l| l.message.contains(id))),
            );
            logs
        }
        _ => vec![],
    };
    let mut evidence = NodeEvidence {
        cluster: cluster.into(),
        node_id: id.into(),
        hyperpod: detail,
        kubernetes,
        events,
        cluster_events,
        cluster_events_note,
        log_group: group_name,
        logs,
        findings: vec![],
        unread: unread_parts,
        hint: String::new(),
    };
    (evidence.findings, evidence.hint) = read_node(&evidence);
    Ok(evidence)
}

/// The evidence about a cluster's failed creation (or any failed stage of it).
pub async fn cluster_evidence(engine: &Engine, cluster: &str) -> ApiResult<ClusterEvidence> {
    let record = live_cluster(engine, cluster).await?;
    let resources = ClusterResources::of(&record.resources);
    // Kind, state, id and error are read; phases are not.
    let failed_stages: Vec<FailedStage> = engine
        .store()
        .latest_heads(cluster)
        .await?
        .into_iter()
        .filter(|op| op.state == crate::store::OpState::Failed)
        .map(|op| FailedStage {
            kind: op.kind,
            operation_id: op.id,
            error: op.error,
        })
        .collect();
    let hyperpod = resources.hyperpod_name_of(cluster);
    let cloud = engine.cloud();
    let mut unread_parts = vec![];
    let described = match cloud.hyperpod.describe_cluster(&hyperpod).await {
        Ok(c) => c,
        Err(e) => {
            unread_parts.push(unread("HyperPod cluster", &e));
            None
        }
    };
    let arn = described
        .as_ref()
        .map(|c| c.arn.clone())
        .or(resources.hyperpod_cluster_arn.clone());
    let (cluster_events, cluster_events_note) = match &described {
        Some(c) => {
            hyperpod_events(
                cloud,
                &hyperpod,
                None,
                c.continuous_provisioning,
                &mut unread_parts,
            )
            .await
        }
        None => (vec![], None),
    };
    let failure_message = described.as_ref().and_then(|c| c.failure_message.clone());
    let group_name = log_group(&hyperpod, arn.as_deref());
    let logs = match &group_name {
        Some(group) => {
            let groups = described
                .as_ref()
                .map(|c| c.instance_groups.as_slice())
                .unwrap_or_default();
            let prefixes = lifecycle_prefixes(failure_message.as_deref(), groups);
            let mut seen = std::collections::HashSet::new();
            tails(engine, group, &prefixes, &mut unread_parts)
                .await
                .into_iter()
                .filter(|t| seen.insert(t.stream.clone()))
                .collect()
        }
        None => vec![],
    };
    let mut findings = vec![];
    for s in &failed_stages {
        let message = s
            .error
            .as_ref()
            .and_then(|e| e["message"].as_str())
            .unwrap_or("failed");
        findings.push(format!("the {} stage failed: {message}", s.kind));
    }
    if let Some(m) = &failure_message {
        findings.push(format!("HyperPod says: {m}"));
    }
    for e in cluster_events.iter().filter(|e| e.level == "Error").take(5) {
        findings.push(format!("HyperPod event: {}", e.description));
    }
    let lifecycle = findings.iter().any(|f| f.contains("ifecycle"));
    let hint = if lifecycle {
        "A lifecycle script failed: read its stream's last lines, fix the script in the cluster's \
         bucket, then retry the stage (operation_retry); nothing is created twice."
    } else if failed_stages.is_empty() {
        "No stage failed: nothing to diagnose here."
    } else {
        "Read each failed stage's error (operation_get) and fix its cause; then operation_retry \
         resumes it where it stopped."
    };
    Ok(ClusterEvidence {
        cluster: cluster.into(),
        failed_stages,
        hyperpod_status: described.as_ref().map(|c| format!("{:?}", c.status)),
        failure_message,
        cluster_events,
        cluster_events_note,
        log_group: group_name,
        logs,
        findings,
        unread: unread_parts,
        hint: hint.into(),
    })
}
