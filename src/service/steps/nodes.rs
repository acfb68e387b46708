//! The `node-action` operation: reboot, replace or delete one HyperPod node, watched until the
//! node is back in service (or gone).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::hyperpod::hyperpod_name;
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
    loop {
        let page = cloud.hyperpod.list_cluster_nodes(hyperpod, token).await?;
        nodes.extend(page.nodes);
        token = page.next_token;
        if token.is_none() {
            return Ok(nodes);
        }
    }
}

pub struct NodeActionStep;

#[async_trait]
impl Step for NodeActionStep {
    fn name(&self) -> &'static str {
        "node-action"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: NodeParams = cx.param()?;
        let result = cx
            .cloud
            .hyperpod
            .node_action(
                &hyperpod_name(&cx.op.cluster),
                p.action,
                std::slice::from_ref(&p.node_id),
            )
            .await?;
        if let Some((id, code, message)) = result.failed.first() {
            return Err(StepError::fatal(
                "node-action-refused",
                format!("{id}: {code}: {message}"),
            ));
        }
        Ok(json!({"nodeId": p.node_id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: NodeParams = cx.param()?;
        let nodes = all_nodes(cx.cloud, &hyperpod_name(&cx.op.cluster)).await?;
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
            // A replaced node may come back under a new id in some regions; its slot is what
            // matters, and the group's count is watched by the cluster view.
            (_, None) => Ok(Poll::Pending("node not listed yet".into())),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}
