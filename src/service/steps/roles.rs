//! Every IAM role the control plane makes for a cluster, with the documents it gives each and
//! the workload that runs as it: the one inventory the teardown deletes by and the
//! effective-permissions test evaluates (each role's policies within the stack's boundary,
//! against what its workload calls).

use std::collections::BTreeSet;

use serde_json::Value;

use super::features::{checkpoint_policy, checkpoint_role_name, PolicyInputs, FEATURES};
use super::hyperpod::{execution_role_name, ExecutionRoleStep, INSTANCE_ROLE_POLICY};
use super::keda::{keda_policy, keda_role_name};
use super::mlflow::{app_role_policy, tracking_policy, tracking_role_name, APP_ROLE};
use super::network::{eks_role_name, EKS_CLUSTER_POLICY};
use super::s3_access::{s3_csi_role_name, S3CsiRoleStep};
use crate::service::shared::arn::{arn_scope, managed_policy};
use crate::service::storage::bucket::BucketPlace;

/// One role and what it is given.
#[derive(Debug, Clone)]
pub struct RoleDocs {
    pub name: String,
    /// Who runs as it (for the reader of a failed check).
    pub workload: &'static str,
    /// Its inline policies.
    pub inline: Vec<Value>,
    /// The AWS-managed policies attached to it (ARNs).
    pub managed: Vec<String>,
}

/// What the documents are made from.
pub struct RoleInputs<'a> {
    pub cluster: &'a str,
    pub place: &'a BucketPlace,
    pub eks_cluster_arn: &'a str,
    pub hyperpod_cluster_arn: &'a str,
    pub mlflow_app_arn: &'a str,
    /// Other buckets the cluster mounts.
    pub claimed: &'a BTreeSet<String>,
    /// AMP workspace ARNs KEDA queries.
    pub amp_workspaces: &'a BTreeSet<String>,
}

/// The roles of one cluster, as its stages and features make them.
pub fn cluster_roles(i: &RoleInputs<'_>) -> Vec<RoleDocs> {
    let c = i.cluster;
    let (partition, _, _) = arn_scope(i.hyperpod_cluster_arn);
    let tracking = tracking_policy(i.mlflow_app_arn, i.place);
    let mut roles = vec![
        RoleDocs {
            name: eks_role_name(c),
            workload: "the EKS control plane",
            inline: vec![],
            managed: vec![managed_policy(partition, EKS_CLUSTER_POLICY)],
        },
        RoleDocs {
            name: execution_role_name(c),
            workload: "the HyperPod nodes (kubelet, VPC CNI, pod identity agent)",
            inline: vec![ExecutionRoleStep::policy(i.place, i.eks_cluster_arn)],
            managed: vec![managed_policy(partition, INSTANCE_ROLE_POLICY)],
        },
        RoleDocs {
            name: s3_csi_role_name(c),
            workload: "the Mountpoint for S3 CSI driver",
            inline: vec![S3CsiRoleStep::policy(i.place, i.claimed)],
            managed: vec![],
        },
        RoleDocs {
            name: checkpoint_role_name(c),
            workload: "jobs with managed tiered checkpointing (and their MLflow reports)",
            inline: vec![checkpoint_policy(i.place), tracking.clone()],
            managed: vec![],
        },
        // The account's MLflow App and its role stay when a cluster goes: others may use them.
        RoleDocs {
            name: tracking_role_name(c),
            workload: "training pods reporting to MLflow",
            inline: vec![tracking],
            managed: vec![],
        },
        RoleDocs {
            name: keda_role_name(c),
            workload: "KEDA's operator querying Amazon Managed Service for Prometheus",
            inline: vec![keda_policy(i.amp_workspaces)],
            managed: vec![],
        },
    ];
    for f in FEATURES {
        for own in f.own_roles {
            roles.push(RoleDocs {
                name: own.name(c),
                workload: f.key,
                inline: own
                    .policy
                    .map(|p| {
                        p(&PolicyInputs {
                            place: i.place,
                            cluster_arn: i.hyperpod_cluster_arn,
                            // The cluster's workspace: the one its metrics go to and KEDA reads.
                            workspace_arn: i.amp_workspaces.iter().next().map(String::as_str),
                        })
                    })
                    .into_iter()
                    .collect(),
                managed: own
                    .managed
                    .iter()
                    .map(|m| managed_policy(partition, m))
                    .collect(),
            });
        }
    }
    roles
}

/// The roles the account keeps beyond any one cluster.
pub fn account_roles(place: &BucketPlace) -> Vec<RoleDocs> {
    vec![RoleDocs {
        name: APP_ROLE.into(),
        workload: "the MLflow App (its artifact store)",
        inline: vec![app_role_policy(place)],
        managed: vec![],
    }]
}

/// The names of a cluster's roles (what its teardown deletes).
pub fn cluster_role_names(cluster: &str) -> Vec<String> {
    let none = BTreeSet::new();
    cluster_roles(&RoleInputs {
        cluster,
        place: &BucketPlace::whole("-"),
        eks_cluster_arn: "",
        hyperpod_cluster_arn: "",
        mlflow_app_arn: "",
        claimed: &none,
        amp_workspaces: &none,
    })
    .into_iter()
    .map(|r| r.name)
    .collect()
}

/// The endings a cluster name may not have, so that no two clusters' roles share a name: where
/// one role's suffix ends with another's (`inference-keda` and `keda`), cluster `x`'s
/// `x-inference-keda` would be cluster `x-inference`'s `keda` role. Derived from the inventory,
/// so a new role suffix that would make names ambiguous adds its ending here by itself.
pub fn ambiguous_endings() -> BTreeSet<String> {
    const PROBE: &str = "c";
    let suffixes: Vec<String> = cluster_role_names(PROBE)
        .into_iter()
        .filter_map(|n| n.strip_prefix(&format!("{PROBE}-")).map(str::to_string))
        .collect();
    let mut endings = BTreeSet::new();
    for long in &suffixes {
        for short in &suffixes {
            if let Some(head) = long.strip_suffix(&format!("-{short}")) {
                endings.insert(format!("-{head}"));
            }
        }
    }
    endings
}

/// The ending of `cluster` that would give one of its roles another cluster's role name.
pub fn ambiguous_ending(cluster: &str) -> Option<String> {
    ambiguous_endings()
        .into_iter()
        .find(|e| cluster.ends_with(e.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name a cluster could take that ends in a piece of a role suffix, and a few others.
    fn candidates() -> Vec<String> {
        let mut names = vec!["x".to_string(), "x-y".to_string()];
        for role in cluster_role_names("x") {
            let suffix = role.trim_start_matches("x-");
            let words: Vec<&str> = suffix.split('-').collect();
            for i in 1..=words.len() {
                names.push(format!("x-{}", words[..i].join("-")));
            }
        }
        names.sort();
        names.dedup();
        names
    }

    #[test]
    fn no_two_clusters_the_product_accepts_share_a_role_name() {
        let accepted: Vec<String> = candidates()
            .into_iter()
            .filter(|n| ambiguous_ending(n).is_none())
            .collect();
        let mut owner: std::collections::BTreeMap<String, String> = Default::default();
        for cluster in &accepted {
            for role in cluster_role_names(cluster) {
                if let Some(other) = owner.insert(role.clone(), cluster.clone()) {
                    panic!("`{cluster}` and `{other}` would both have the role `{role}`");
                }
            }
        }
        // And the account's own roles are no cluster's.
        for role in account_roles(&BucketPlace::whole("-")) {
            assert!(!owner.contains_key(&role.name), "{}", role.name);
        }
    }

    #[test]
    fn the_ambiguous_endings_are_exactly_those_that_collide() {
        // Without the rule, a collision exists: `x` and `x-inference` share `x-inference-keda`.
        let x: BTreeSet<String> = cluster_role_names("x").into_iter().collect();
        let xi: BTreeSet<String> = cluster_role_names("x-inference").into_iter().collect();
        assert!(x.intersection(&xi).next().is_some());
        assert_eq!(
            ambiguous_ending("x-inference").as_deref(),
            Some("-inference")
        );
        assert_eq!(ambiguous_ending("inference"), None);
        assert_eq!(ambiguous_ending("x-keda"), None);
        assert_eq!(ambiguous_ending("demo"), None);
    }
}
