//! What a change to nodes would disturb, for a preview: the workloads holding GPUs on the nodes
//! it touches, read from the cluster's watch-backed view (no list per request), each with what
//! would happen to it.

use std::collections::BTreeSet;

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::shared::preview::{self, Affected};

/// The nodes a change touches.
pub enum NodesOf<'a> {
    /// One node, by its instance id.
    Instance(&'a str),
    /// The nodes of these groups; every node when empty.
    Groups(&'a [String]),
}

/// In a preview, notes each workload on the touched nodes with `outcome`; nothing otherwise.
/// A cluster whose view cannot be read notes nothing rather than refusing the preview.
pub async fn note(
    engine: &Engine,
    cluster: &str,
    nodes: NodesOf<'_>,
    outcome: &str,
) -> ApiResult<()> {
    if !preview::active() {
        return Ok(());
    }
    let Ok(target) = crate::service::cluster::records::kube_target(engine, cluster).await else {
        return Ok(());
    };
    let Ok(state) = engine.cloud().kube.cluster_state(&target).await else {
        return Ok(());
    };
    let touched: std::collections::HashMap<&str, &str> = state
        .nodes
        .iter()
        .filter(|n| match &nodes {
            NodesOf::Instance(id) => n.instance_id.as_deref() == Some(*id),
            NodesOf::Groups(groups) => {
                groups.is_empty()
                    || n.instance_group
                        .as_ref()
                        .is_some_and(|g| groups.iter().any(|x| x == g))
            }
        })
        .map(|n| (n.name.as_str(), n.instance_id.as_deref().unwrap_or(&n.name)))
        .collect();
    let mut seen = BTreeSet::new();
    for claim in &state.claims {
        let Some(node) = touched.get(&*claim.node) else {
            continue;
        };
        let workload = crate::service::costs::sample::workload_of(&claim.labels);
        if seen.insert((
            workload.clone(),
            claim.namespace.to_string(),
            node.to_string(),
        )) {
            preview::affects(Affected {
                workload,
                namespace: claim.namespace.to_string(),
                node: node.to_string(),
                outcome: outcome.to_string(),
            });
        }
    }
    Ok(())
}
