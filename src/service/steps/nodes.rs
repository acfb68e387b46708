//! The `node-action` operation: reboot, replace or delete one HyperPod node, watched until the
//! node is back in service (or gone).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::hyperpod::hyperpod_of;
use crate::cloud::{Cloud, CloudResult, ClusterNode, NodeAction};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};

/// Parameters of a node operation (validated).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeParams {
    pub node_id: String,
    pub action: NodeAction,
}

/// Every node of a HyperPod cluster, following `ListClusterNodes` pages.
pub async fn all_nodes(cloud: &Cloud, hyperpod: &str) -> CloudResult<Vec<ClusterNode>> {
    let mut nodes = Vec::new();
    let mut token = None;
    let mut seen = std::collections::HashSet::new();
    loop {
        let page = cloud.hyperpod.list_cluster_nodes(hyperpod, token).await?;
        nodes.extend(page.nodes);
        token = page.next_token;
        match &token {
            None => return Ok(nodes),
            // A token seen before would page forever (emulators have done it): stop instead.
            Some(t) if !seen.insert(t.clone()) => {
                return Err(crate::cloud::CloudError::new(
                    "sagemaker",
                    "ListClusterNodes",
                    "PaginationLoop",
                    "the node list returned a page token it had already returned",
                ))
            }
            Some(_) => {}
        }
    }
}

/// Watches a replacement: the old instance leaves the group and a new one (an id that was not
/// there before the call) runs in its place. Done when the replacement is `Running`.
fn watch_replacement(old: &str, nodes: &[ClusterNode], out: &Value) -> StepResult<Poll> {
    let group = out["instanceGroup"].as_str();
    let before: Vec<&str> = out["nodesBefore"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let replacement = nodes.iter().find(|n| {
        group.is_none_or(|g| n.instance_group == g) && !before.contains(&n.instance_id.as_str())
    });
    match replacement {
        Some(n) if n.status == "Running" => {
            let mut out = out.clone();
            out["replacementId"] = json!(n.instance_id);
            Ok(Poll::Ready(out))
        }
        Some(n) if n.status == "Failure" => Err(StepError::fatal(
            "node-failed",
            format!("the replacement {} for {old} is in Failure", n.instance_id),
        )),
        Some(n) => Ok(Poll::Pending(format!(
            "replacement {} {}",
            n.instance_id, n.status
        ))),
        None => match nodes.iter().find(|n| n.instance_id == old) {
            Some(n) => Ok(Poll::Pending(format!("node {old} {}", n.status))),
            None => Ok(Poll::Pending(format!(
                "{old} is gone; waiting for its replacement to be listed"
            ))),
        },
    }
}

pub struct NodeActionStep;

#[async_trait]
impl Step for NodeActionStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "sagemaker:BatchRebootClusterNodes",
            "sagemaker:BatchReplaceClusterNodes",
            "sagemaker:BatchDeleteClusterNodes",
        ]
    }
    fn name(&self) -> &'static str {
        "node-action"
    }
    /// Longer than the default: a replacement is a new instance, provisioned and health-checked.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(30 * 60)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: NodeParams = cx.param()?;
        let hp = hyperpod_of(cx);
        // A replacement is new hardware with a new instance id: remember who was there, so the
        // watch can tell the replacement from the rest of the group.
        let nodes = all_nodes(cx.cloud, &hp).await?;
        let group = nodes
            .iter()
            .find(|n| n.instance_id == p.node_id)
            .map(|n| n.instance_group.clone());
        let before: Vec<&str> = nodes.iter().map(|n| n.instance_id.as_str()).collect();
        let result = cx
            .cloud
            .hyperpod
            .node_action(&hp, p.action, std::slice::from_ref(&p.node_id))
            .await?;
        if let Some((id, code, message)) = result.failed.first() {
            return Err(StepError::fatal(
                "node-action-refused",
                format!("{id}: {code}: {message}"),
            ));
        }
        Ok(json!({"nodeId": p.node_id, "instanceGroup": group, "nodesBefore": before}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: NodeParams = cx.param()?;
        let nodes = all_nodes(cx.cloud, &hyperpod_of(cx)).await?;
        if p.action == NodeAction::Replace {
            return watch_replacement(&p.node_id, &nodes, out);
        }
        let node = nodes.iter().find(|n| n.instance_id == p.node_id);
        match (p.action, node) {
            (NodeAction::Delete, None) => Ok(Poll::Ready(out.clone())),
            (NodeAction::Delete, Some(n)) => Ok(Poll::Pending(format!("node {}", n.status))),
            (_, Some(n)) if n.status == "Running" => Ok(Poll::Ready(out.clone())),
            (_, Some(n)) if n.status == "Failure" => Err(StepError::fatal(
                "node-failed",
                format!("node {} is in Failure", p.node_id),
            )),
            (_, Some(n)) => Ok(Poll::Pending(format!("node {}", n.status))),
            (_, None) => Ok(Poll::Pending("node not listed yet".into())),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}
