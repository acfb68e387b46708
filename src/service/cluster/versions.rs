//! What a cluster runs and what it could run (the first part of an upgrade plan): its
//! Kubernetes version and the next minor (EKS upgrades one minor at a time) when HyperPod
//! supports it, and each managed add-on installed with its version beside the newest EKS offers
//! for this Kubernetes version and for the next (`DescribeAddonVersions`).

use serde::Serialize;
use utoipa::ToSchema;

use crate::cloud::HYPERPOD_KUBERNETES_VERSIONS;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::steps::deps::{Install, COMPONENTS};
use crate::service::steps::features::FEATURES;

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionsView {
    /// The EKS cluster's Kubernetes version.
    pub kubernetes: String,
    /// The next minor version, when HyperPod supports it (EKS upgrades one minor at a time).
    pub next_kubernetes: Option<String>,
    /// The versions HyperPod supports ("Getting started with Amazon EKS support in SageMaker
    /// HyperPod").
    pub hyperpod_supports: Vec<String>,
    /// EKS's support of the version and of the next (`DescribeClusterVersions`): past its end of
    /// standard support a cluster is in extended support, billed extra per cluster hour, and
    /// past that EKS upgrades it itself.
    pub support: Vec<crate::cloud::KubernetesVersion>,
    pub addons: Vec<AddonVersions>,
    /// Each instance group's nodes and when HyperPod software was last rolled onto them.
    pub groups: Vec<GroupSoftware>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSoftware {
    pub name: String,
    pub nodes: usize,
    /// The nodes' `LastSoftwareUpdateTime`s, distinct, oldest first, then `never` for a node
    /// not patched since it launched.
    pub last_software_updates: Vec<String>,
    /// Whether the group's nodes were patched at different times (or some not at all).
    pub drift: bool,
    /// The HyperPod release it runs, the one it would get, whether a newer one exists and how
    /// its last update went (`DescribeCluster`).
    pub software: crate::cloud::GroupSoftwareState,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonVersions {
    pub name: String,
    /// As installed (none when EKS does not say).
    pub version: Option<String>,
    /// The newest EKS offers for the cluster's Kubernetes version.
    pub newest: Option<String>,
    /// The newest for the next minor version: what an upgrade would bring it to (none when EKS
    /// offers it nothing there, which blocks the upgrade).
    pub newest_for_next: Option<String>,
    /// Whether a newer version runs on the cluster's version now.
    pub behind: bool,
}

pub use crate::cloud::next_minor;

/// Every EKS add-on the product installs, in a safe order to change them: the dependencies' in
/// the order they are installed (what others need first), then the features'. An add-on both a
/// dependency and a feature name appears once, where it comes first.
pub(crate) fn managed_addons() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    let all = COMPONENTS
        .iter()
        .filter(|c| matches!(c.install, Install::Addon { .. }))
        .map(|c| c.name)
        .chain(FEATURES.iter().map(|f| f.addon).filter(|a| !a.is_empty()));
    for name in all {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

pub async fn versions(engine: &Engine, name: &str) -> ApiResult<VersionsView> {
    let record = super::records::live_cluster(engine, name).await?;
    let eks = &engine.cloud().eks;
    let Some(cluster) = eks.describe_cluster(name).await? else {
        return Err(ApiError::not_found(format!("the EKS cluster of `{name}`")));
    };
    let next =
        next_minor(&cluster.version).filter(|v| HYPERPOD_KUBERNETES_VERSIONS.contains(&v.as_str()));
    let mut addons = Vec::new();
    for addon in managed_addons() {
        let Some(installed) = eks.describe_addon(name, addon).await? else {
            continue;
        };
        let newest = eks
            .addon_versions(addon, &cluster.version)
            .await?
            .into_iter()
            .next()
            .map(|v| v.version);
        let newest_for_next = match &next {
            Some(v) => eks
                .addon_versions(addon, v)
                .await?
                .into_iter()
                .next()
                .map(|v| v.version),
            None => None,
        };
        addons.push(AddonVersions {
            name: addon.to_string(),
            behind: newest.is_some() && installed.version.is_some() && newest != installed.version,
            version: installed.version,
            newest,
            newest_for_next,
        });
    }
    let groups = group_software(engine, name, &record).await?;
    let asked: Vec<String> = std::iter::once(cluster.version.clone())
        .chain(next.clone())
        .collect();
    let support = eks.kubernetes_versions(&asked).await?;
    Ok(VersionsView {
        support,
        groups,
        kubernetes: cluster.version,
        next_kubernetes: next,
        hyperpod_supports: HYPERPOD_KUBERNETES_VERSIONS
            .iter()
            .map(|v| v.to_string())
            .collect(),
        addons,
    })
}

/// Each group's nodes and their last software updates (`DescribeClusterNode` per node).
async fn group_software(
    engine: &Engine,
    name: &str,
    record: &crate::store::ClusterRecord,
) -> ApiResult<Vec<GroupSoftware>> {
    let resources = crate::service::ClusterResources::of(&record.resources);
    if resources.hyperpod_cluster_arn.is_none() {
        return Ok(vec![]);
    }
    let hyperpod = resources.hyperpod_name_of(name);
    let cloud = engine.cloud();
    let described = cloud.hyperpod.describe_cluster(&hyperpod).await?;
    let state = |group: &str| {
        described
            .iter()
            .flat_map(|c| &c.instance_groups)
            .find(|g| g.name == group)
            .map(|g| g.software.clone())
            .unwrap_or_default()
    };
    let mut by_group: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for node in crate::service::steps::nodes::all_nodes(cloud, &hyperpod).await? {
        let detail = cloud
            .hyperpod
            .describe_cluster_node(&hyperpod, &node.instance_id)
            .await?;
        let at = detail
            .and_then(|d| d.last_software_update_time)
            .unwrap_or_else(|| "never".into());
        by_group.entry(node.instance_group).or_default().push(at);
    }
    Ok(by_group
        .into_iter()
        .map(|(name, times)| {
            let nodes = times.len();
            let mut distinct = times;
            distinct.sort();
            distinct.dedup();
            GroupSoftware {
                software: state(&name),
                name,
                nodes,
                drift: distinct.len() > 1,
                last_software_updates: distinct,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_next_minor_is_one_up() {
        assert_eq!(super::next_minor("1.33").as_deref(), Some("1.34"));
        assert_eq!(super::next_minor("1.9").as_deref(), Some("1.10"));
        assert_eq!(super::next_minor("x"), None);
    }
}
