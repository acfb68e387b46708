//! What the sandbox says about why a node or a cluster failed. Two injected faults — a deep
//! health check that fails on the first nodes of the next cluster
//! (`sagemaker:DeepHealthCheckFailure=N`) and a lifecycle script that fails on its creation
//! (`sagemaker:LifecycleScriptFailure=1`) — and the evidence HyperPod leaves of them: the
//! cluster's events, its log group's streams (lifecycle scripts, health agent, deep health
//! checks), and the Kubernetes Node's labels, taints, annotation and events.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{durations as d, Life, Res, Sandbox};
use cloud::*;

pub(super) const DHC_FAULT: &str = "sagemaker:DeepHealthCheckFailure";
pub(super) const LIFECYCLE_FAULT: &str = "sagemaker:LifecycleScriptFailure";

/// What the cluster record keeps of the faults taken at its creation.
const FAULTED_NODES: &str = "faultedNodes";
const LIFECYCLE_FAILS: &str = "lifecycleFails";

/// The labels and annotation HyperPod's health agent writes on a node that failed its checks.
const HEALTH: &str = "sagemaker.amazonaws.com/node-health-status";
const DEEP_HEALTH: &str = "sagemaker.amazonaws.com/deep-health-check-status";
const FAULT_TYPE: &str = "sagemaker.amazonaws.com/fault-type";
const FAULT_REASON: &str = "sagemaker.amazonaws.com/fault-reason";
const FAULT_DETAILS: &str = "sagemaker.amazonaws.com/fault-details";

/// HyperPod's message about a node whose deep health check failed.
const DHC_MESSAGE: &str = "Deep health check failed: DCGM diagnostic (level 2) found a GPU \
    memory error on GPU 3 (Xid 48, double-bit ECC). The node needs to be replaced.";

/// The instance id node `index` of a cluster record starts with.
pub(super) fn initial_instance_id(res: &Res, index: u32) -> String {
    format!("i-0{:016x}", (res.created_ms as u64) ^ u64::from(index))
}

/// The cluster's id, as in its log group's name (the last part of its ARN).
fn cluster_id(res: &Res) -> &str {
    res.id.get(4..).unwrap_or_default()
}

/// `/aws/sagemaker/Clusters/<name>/<id>`, where HyperPod writes a cluster's logs.
pub(super) fn log_group(name: &str, res: &Res) -> String {
    format!("/aws/sagemaker/Clusters/{name}/{}", cluster_id(res))
}

/// Takes the faults a new cluster is created with into its record: a failing lifecycle script
/// first (that cluster never has nodes to check); else failing deep health checks.
pub(super) fn take_faults(sandbox: &Sandbox, data: &mut Value) {
    let mut faults = sandbox.faults.lock().unwrap_or_else(|e| e.into_inner());
    if faults.take_one(LIFECYCLE_FAULT) {
        data[LIFECYCLE_FAILS] = json!(true);
        return;
    }
    let dhc = faults.take(DHC_FAULT);
    if dhc > 0 {
        data[FAULTED_NODES] = json!(dhc);
    }
}

/// Whether the cluster's lifecycle script fails on creation.
pub(super) fn lifecycle_fails(res: &Res) -> bool {
    res.data[LIFECYCLE_FAILS] == true
}

/// The first instance group and node a failing lifecycle script ran on.
fn first_node(res: &Res) -> (String, String) {
    let group = res.data["instanceGroups"][0]["name"]
        .as_str()
        .unwrap_or("workers")
        .to_string();
    (group, initial_instance_id(res, 0))
}

/// HyperPod's `FailureMessage` for a cluster whose lifecycle script failed.
pub(super) fn lifecycle_failure_message(name: &str, res: &Res) -> String {
    let (group, instance) = first_node(res);
    format!(
        "Lifecycle scripts did not run successfully on instance group {group}: on_create.sh \
         exited with status 1. See CloudWatch Logs group {}, stream LifecycleConfig/{group}/{instance}.",
        log_group(name, res)
    )
}

/// Whether the node now `instance_id` failed its deep health check (a replacement is new,
/// healthy hardware; a reboot does not mend it).
pub(super) fn dhc_failed(res: &Res, instance_id: &str) -> bool {
    let n = res.data[FAULTED_NODES].as_u64().unwrap_or(0);
    (0..n).any(|i| initial_instance_id(res, u32::try_from(i).unwrap_or(u32::MAX)) == instance_id)
}

/// The health labels HyperPod puts on a node.
pub(super) fn health_labels(failed: bool, ready: bool) -> Vec<(&'static str, &'static str)> {
    if failed {
        vec![
            (HEALTH, "UnschedulablePendingReplacement"),
            (DEEP_HEALTH, "Failed"),
            (FAULT_TYPE, "DeepHealthCheckFailure"),
            (FAULT_REASON, "GpuMemoryError"),
        ]
    } else {
        vec![
            (
                HEALTH,
                if ready {
                    "Schedulable"
                } else {
                    "Unschedulable"
                },
            ),
            (DEEP_HEALTH, if ready { "Passed" } else { "InProgress" }),
        ]
    }
}

/// A Node as the API server has it, from the scheduler's view of it.
pub(super) fn node_manifest(n: &NodeState) -> Value {
    let failed = n.health.get(DEEP_HEALTH).map(String::as_str) == Some("Failed");
    let mut labels = json!({
        "node.kubernetes.io/instance-type": n.instance_type,
        "sagemaker.amazonaws.com/instance-group-name": n.instance_group,
    });
    for (k, v) in health_labels(failed, n.ready) {
        labels[k] = json!(v);
    }
    let mut annotations = json!({});
    let mut taints = vec![];
    if failed {
        annotations[FAULT_DETAILS] = json!(json!({"faults": [{
            "type": "DeepHealthCheckFailure", "reason": "GpuMemoryError",
            "message": DHC_MESSAGE}]})
        .to_string());
        taints.push(
            json!({"key": HEALTH, "value": "UnschedulablePendingReplacement",
                           "effect": "NoSchedule"}),
        );
    }
    let gpus = n.gpus.total.to_string();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": format!("aws:///{}", n.instance_id.as_deref().unwrap_or_default()),
                 "taints": taints, "unschedulable": n.unschedulable},
        "status": {
            "capacity": {"nvidia.com/gpu": gpus}, "allocatable": {"nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": if n.ready { "True" } else { "False" },
                            "reason": if n.ready { "KubeletReady" } else { "KubeletNotReady" },
                            "message": n.not_ready_reason.clone().unwrap_or_else(|| "kubelet is posting ready status".into())}]
        }
    })
}

/// The events recorded for a node that failed its deep health check.
pub(super) fn node_events(node: &str, at_ms: i64) -> Vec<Value> {
    let at = cloud::clock::rfc3339_ms(at_ms);
    vec![json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{node}.dhc"), "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node},
        "type": "Warning", "reason": "DeepHealthCheckFailed", "message": DHC_MESSAGE,
        "count": 1, "firstTimestamp": at, "lastTimestamp": at,
        "source": {"component": "sagemaker-hyperpod-health-monitoring-agent"}
    })]
}

impl Sandbox {
    /// The cluster record a log group names, if it exists.
    async fn cluster_of_group(&self, group: &str) -> CloudResult<Option<(String, Res)>> {
        let Some((name, id)) = group
            .strip_prefix("/aws/sagemaker/Clusters/")
            .and_then(|rest| rest.split_once('/'))
        else {
            return Ok(None);
        };
        Ok(self
            .by_name("hyperpod-cluster", name)
            .await?
            .filter(|r| cluster_id(r) == id)
            .map(|r| (name.to_string(), r)))
    }

    /// Every stream of a cluster's log group, with its lines, as HyperPod would have written
    /// them by now.
    fn cluster_streams(&self, name: &str, res: &Res) -> Vec<(String, i64, Vec<String>)> {
        let Some((_, nodes)) = self.hyperpod_view(name, res) else {
            return vec![];
        };
        let mut out = vec![];
        if lifecycle_fails(res) {
            let (group, instance) = first_node(res);
            out.push((
                format!("LifecycleConfig/{group}/{instance}"),
                res.created_ms,
                vec![
                    "[on_create.sh] starting lifecycle configuration".into(),
                    "+ bash ./install_packages.sh".into(),
                    "E: Unable to locate package nvidia-fabricmanager-535".into(),
                    "[on_create.sh] install_packages.sh failed with exit code 100".into(),
                    "[on_create.sh] exiting with status 1".into(),
                ],
            ));
        }
        for n in &nodes {
            let launched = chrono_ms(&n.launch_time).unwrap_or(res.created_ms);
            out.push((
                format!("LifecycleConfig/{}/{}", n.instance_group, n.instance_id),
                launched,
                vec![
                    "[on_create.sh] starting lifecycle configuration".into(),
                    "[on_create.sh] mounted /opt/sagemaker and configured containerd".into(),
                    "[on_create.sh] done".into(),
                ],
            ));
            if dhc_failed(res, &n.instance_id) {
                out.push((
                    format!(
                        "SagemakerHealthMonitoringAgent/{}/{}",
                        n.instance_group, n.instance_id
                    ),
                    launched,
                    vec![
                        "NVRM: Xid (PCI:0000:53:00): 48, pid=0, DBE (double bit error) detected"
                            .into(),
                        "health check GpuHealth failed on GPU 3: marking node for replacement"
                            .into(),
                    ],
                ));
                // As HyperPod writes them: one stream per check run, named by its log stream
                // id, the instance named in each line (SageMaker Developer Guide, HyperPod EKS
                // deep health checks: `DeepHealthCheckResults/<log_stream_id>`).
                out.push((
                    format!(
                        "DeepHealthCheckResults/{:016x}",
                        super::workload::fnv1a(&format!("dhc/{}", n.instance_id))
                    ),
                    launched,
                    vec![
                        format!(
                            "{}: DCGM diagnostic level 2: Memory test FAIL on GPU 3",
                            n.instance_id
                        ),
                        format!("{}: {DHC_MESSAGE}", n.instance_id),
                    ],
                ));
            }
        }
        out
    }

    /// A node as `DescribeClusterNode` reports it.
    pub(super) fn node_detail(&self, res: &Res, node: &ClusterNode) -> NodeDetail {
        let failed = dhc_failed(res, &node.instance_id);
        NodeDetail {
            instance_id: node.instance_id.clone(),
            instance_group: node.instance_group.clone(),
            instance_type: node.instance_type.clone(),
            status: node.status.clone(),
            message: failed.then(|| DHC_MESSAGE.to_string()),
            launch_time: Some(node.launch_time.clone()),
            // The group's last patch, for a node that was there to be patched (one launched
            // since runs its image already and reports none).
            last_software_update_time: super::software::last_patched(
                self,
                res,
                &node.instance_group,
            )
            .filter(|at| node.launch_time.as_str() <= at.as_str()),
        }
    }

    /// The cluster's events, newest first: its creation, each node joining, and what failed.
    pub(super) fn cluster_events(
        &self,
        name: &str,
        res: &Res,
        node_id: Option<&str>,
    ) -> Vec<ClusterEvent> {
        let mut events = vec![];
        let at = |ms: i64| cloud::clock::rfc3339_ms(ms);
        let event = |ms: i64,
                     level: &str,
                     kind: &str,
                     group: Option<&str>,
                     id: Option<&str>,
                     text: String| ClusterEvent {
            time: at(ms),
            level: level.into(),
            resource_type: kind.into(),
            instance_group: group.map(str::to_string),
            instance_id: id.map(str::to_string),
            description: text,
        };
        events.push(event(
            res.created_ms,
            "Info",
            "Cluster",
            None,
            None,
            format!("Cluster {name} creation started"),
        ));
        let created = res.created_ms + (d::HYPERPOD_CREATE * 1000.0 / self.time_scale) as i64;
        if lifecycle_fails(res) {
            let (group, instance) = first_node(res);
            events.push(event(
                res.created_ms,
                "Error",
                "Instance",
                Some(&group),
                Some(&instance),
                "Lifecycle script on_create.sh exited with status 1".into(),
            ));
            if matches!(
                self.life(res, d::HYPERPOD_CREATE, d::HYPERPOD_DELETE),
                Life::Ready
            ) {
                events.push(event(
                    created,
                    "Error",
                    "Cluster",
                    None,
                    None,
                    lifecycle_failure_message(name, res),
                ));
            }
        }
        if let Some((_, nodes)) = self.hyperpod_view(name, res) {
            for n in &nodes {
                let ms = chrono_ms(&n.launch_time).unwrap_or(res.created_ms);
                events.push(event(
                    ms,
                    "Info",
                    "Instance",
                    Some(&n.instance_group),
                    Some(&n.instance_id),
                    format!(
                        "Instance {} joined instance group {}",
                        n.instance_id, n.instance_group
                    ),
                ));
                if dhc_failed(res, &n.instance_id) {
                    events.push(event(
                        ms + 1,
                        "Error",
                        "Instance",
                        Some(&n.instance_group),
                        Some(&n.instance_id),
                        DHC_MESSAGE.into(),
                    ));
                }
            }
        }
        events.retain(|e| node_id.is_none_or(|id| e.instance_id.as_deref() == Some(id)));
        events.sort_by(|a, b| b.time.cmp(&a.time));
        events
    }
}

/// Milliseconds of an RFC 3339 time the sandbox wrote.
fn chrono_ms(t: &str) -> Option<i64> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[async_trait]
impl Logs for Sandbox {
    async fn streams(
        &self,
        group: &str,
        prefix: &str,
        limit: usize,
    ) -> CloudResult<Vec<LogStream>> {
        self.gate("logs:DescribeLogStreams", false).await?;
        let Some((name, res)) = self.cluster_of_group(group).await? else {
            return Ok(vec![]);
        };
        let mut streams: Vec<LogStream> = self
            .cluster_streams(&name, &res)
            .into_iter()
            .filter(|(s, ..)| s.starts_with(prefix))
            .map(|(name, at, _)| LogStream {
                name,
                last_event_ms: Some(at),
            })
            .collect();
        streams.sort_by(|a, b| a.name.cmp(&b.name));
        streams.truncate(limit);
        Ok(streams)
    }

    async fn tail(&self, group: &str, stream: &str, limit: usize) -> CloudResult<Vec<LogLine>> {
        self.gate("logs:GetLogEvents", false).await?;
        let Some((name, res)) = self.cluster_of_group(group).await? else {
            return Ok(vec![]);
        };
        let Some((_, at, lines)) = self
            .cluster_streams(&name, &res)
            .into_iter()
            .find(|(s, ..)| s == stream)
        else {
            return Ok(vec![]);
        };
        let skip = lines.len().saturating_sub(limit);
        Ok((0..)
            .zip(lines)
            .skip(skip)
            .map(|(i, message)| LogLine {
                timestamp_ms: at + i,
                message,
            })
            .collect())
    }
}
