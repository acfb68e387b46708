//! The nodes of a HyperPod cluster and the parameters of a node action.

use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::hyperpod_of;
use crate::service::steps;

/// The nodes of a cluster's HyperPod cluster, with the escalation order for unhealthy ones.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeList {
    pub cluster: String,
    pub hyperpod_cluster: String,
    pub count: usize,
    pub nodes: Vec<NodeView>,
    /// Why the Kubernetes side of the nodes is missing, when it is.
    pub kubernetes_error: Option<String>,
    /// investigate → reboot → replace.
    pub hint: String,
}

/// A HyperPod node joined with its Kubernetes node (readiness, GPUs, health labels).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    #[serde(flatten)]
    pub node: crate::cloud::ClusterNode,
    /// The node as Kubernetes sees it; absent until the instance has joined the cluster.
    pub kubernetes: Option<crate::cloud::NodeState>,
}

pub async fn list_nodes(engine: &Engine, name: &str) -> ApiResult<NodeList> {
    let hyperpod = hyperpod_of(engine, name).await?;
    let nodes = steps::nodes::all_nodes(engine.cloud(), &hyperpod).await?;
    let (mut k8s, kubernetes_error) =
        match crate::service::cluster::live::live_state(engine, name).await {
            Ok(s) => (s.nodes.clone(), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
    let nodes: Vec<NodeView> = nodes
        .into_iter()
        .map(|node| {
            let at = k8s
                .iter()
                .position(|k| k.instance_id.as_deref() == Some(node.instance_id.as_str()));
            NodeView {
                kubernetes: at.map(|i| k8s.swap_remove(i)),
                node,
            }
        })
        .collect();
    Ok(NodeList {
        cluster: name.to_string(),
        hyperpod_cluster: hyperpod,
        count: nodes.len(),
        nodes,
        kubernetes_error,
        hint: "For an unhealthy node: investigate first (status, logs), then reboot; replace only if a reboot does not help, since replacing loses the instance's local volumes.".into(),
    })
}

/// Validates a node operation: the id's shape, and that the node is in this cluster.
pub async fn node_params(
    engine: &Engine,
    name: &str,
    node_id: &str,
    action: crate::cloud::NodeAction,
) -> ApiResult<steps::nodes::NodeParams> {
    crate::service::evidence::node_id(node_id)?;
    let hyperpod = hyperpod_of(engine, name).await?;
    let nodes = steps::nodes::all_nodes(engine.cloud(), &hyperpod).await?;
    if !nodes.iter().any(|n| n.instance_id == node_id) {
        return Err(ApiError::NotFound {
            what: format!("node {node_id} in `{name}`"),
            hint: Some(Box::new(
                json!({"nodes": nodes.iter().map(|n| &n.instance_id).collect::<Vec<_>>()}),
            )),
        });
    }
    Ok(steps::nodes::NodeParams {
        node_id: node_id.to_string(),
        action,
    })
}
