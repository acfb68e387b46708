//! Reading a component's actual state: an add-on's status and version, each applied object's
//! presence, drift and readiness, the CRDs an operator serves.

use serde_json::Value;

use crate::cloud::{json_contains, AddonStatus, Cloud, CloudResult, KubeTarget, ObjectRef};
use crate::service::steps::deps::{
    version_at_least, Component, ComponentState, ComponentStatus, Install,
};

/// Readiness of one applied object from its status (Deployment replicas, DaemonSet pods).
pub(super) fn object_ready(obj: &Value) -> Result<(), String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let n = |p: &str| obj.pointer(p).and_then(Value::as_u64);
    match obj["kind"].as_str() {
        Some("Deployment") => {
            let want = n("/spec/replicas").unwrap_or(1);
            let ready = n("/status/readyReplicas").unwrap_or(0);
            if ready >= want {
                Ok(())
            } else {
                Err(format!("Deployment {name}: {ready}/{want} replicas ready"))
            }
        }
        Some("DaemonSet") => match (
            n("/status/desiredNumberScheduled"),
            n("/status/numberReady"),
        ) {
            (Some(want), Some(ready)) if ready >= want => Ok(()),
            (Some(want), ready) => Err(format!(
                "DaemonSet {name}: {}/{want} pods ready",
                ready.unwrap_or(0)
            )),
            _ => Err(format!("DaemonSet {name}: not yet scheduled")),
        },
        _ => Ok(()),
    }
}

/// What reading a component's actual state found.
pub(super) enum Actual {
    Absent,
    /// Present, differs from what we would apply (object names).
    Drifted(Vec<String>),
    Present,
}

pub(super) async fn read_manifests(
    cloud: &Cloud,
    target: &KubeTarget,
    manifests: &[Value],
) -> CloudResult<(Actual, Vec<Value>)> {
    let (mut missing, mut drifted, mut found) = (0, Vec::new(), Vec::new());
    for m in manifests {
        let Some(r) = ObjectRef::of(m) else { continue };
        match cloud.kube.get(target, &r).await? {
            None => missing += 1,
            Some(actual) => {
                if !json_contains(&actual, m) {
                    drifted.push(format!("{}/{}", r.kind, r.name));
                }
                found.push(actual);
            }
        }
    }
    let actual = if found.is_empty() {
        Actual::Absent
    } else if missing > 0 || !drifted.is_empty() {
        Actual::Drifted(drifted)
    } else {
        Actual::Present
    };
    Ok((actual, found))
}

pub(super) fn addon_state(status: AddonStatus) -> (ComponentState, String) {
    match status {
        AddonStatus::Active => (ComponentState::Ready, "add-on ACTIVE".into()),
        AddonStatus::Creating | AddonStatus::Updating => {
            (ComponentState::Installing, format!("add-on {status:?}"))
        }
        AddonStatus::Degraded => (
            ComponentState::Degraded,
            "add-on DEGRADED: see its health issues in the EKS console".into(),
        ),
        other => (ComponentState::Failed, format!("add-on {other:?}")),
    }
}

pub(super) async fn crds_missing(
    cloud: &Cloud,
    target: &KubeTarget,
    c: &Component,
) -> CloudResult<Vec<String>> {
    let mut missing = Vec::new();
    for crd in c.crds {
        let r = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: crd.to_string(),
        };
        if cloud.kube.get(target, &r).await?.is_none() {
            missing.push(crd.to_string());
        }
    }
    Ok(missing)
}

/// The add-on that serves this component in place of ours, when it is on the cluster (in any
/// state but gone: while it is created or deleted, ours must not be applied either).
pub async fn provider(
    cloud: &Cloud,
    cluster: &str,
    c: &Component,
) -> CloudResult<Option<crate::cloud::Addon>> {
    match c.provided_by {
        Some(addon) => cloud.eks.describe_addon(cluster, addon).await,
        None => Ok(None),
    }
}

/// The live state of one component, read from EKS and the cluster.
pub async fn component_status(
    cloud: &Cloud,
    cluster: &str,
    target: &KubeTarget,
    c: &Component,
) -> CloudResult<ComponentStatus> {
    if let Some(a) = provider(cloud, cluster, c).await? {
        let (state, why) = addon_state(a.status);
        return Ok(ComponentStatus {
            name: c.name.to_string(),
            install: "eks-addon",
            requires: c.requires.iter().map(|s| s.to_string()).collect(),
            state,
            reason: format!("provided by the {} add-on ({why})", a.name),
        });
    }
    let (install, (state, reason)) = match &c.install {
        Install::Addon { .. } => (
            "eks-addon",
            match cloud.eks.describe_addon(cluster, c.name).await? {
                None => (ComponentState::Pending, "not installed".to_string()),
                Some(a) => addon_state(a.status),
            },
        ),
        Install::Manifests(f) => {
            let manifests = f(&cloud.network.region());
            let (actual, found) = read_manifests(cloud, target, &manifests).await?;
            let unready: Vec<String> = found.iter().filter_map(|o| object_ready(o).err()).collect();
            (
                "manifests",
                match actual {
                    Actual::Absent => (ComponentState::Pending, "not installed".to_string()),
                    Actual::Drifted(objs) if objs.is_empty() => (
                        ComponentState::Degraded,
                        "some objects are missing; reconcile to restore them".into(),
                    ),
                    Actual::Drifted(objs) => (
                        ComponentState::Degraded,
                        format!(
                            "changed outside InstantStart: {}; reconcile to restore",
                            objs.join(", ")
                        ),
                    ),
                    Actual::Present if !unready.is_empty() => {
                        (ComponentState::Installing, unready.join("; "))
                    }
                    Actual::Present => {
                        let missing = crds_missing(cloud, target, c).await?;
                        if missing.is_empty() {
                            (
                                ComponentState::Ready,
                                "all objects applied and ready".into(),
                            )
                        } else {
                            (
                                ComponentState::Degraded,
                                format!("controller ready, but its CustomResourceDefinitions are not installed: {}", missing.join(", ")),
                            )
                        }
                    }
                },
            )
        }
    };
    Ok(ComponentStatus {
        name: c.name.to_string(),
        install,
        requires: c.requires.iter().map(|s| s.to_string()).collect(),
        state,
        reason,
    })
}

/// Whether a component is serving.
pub enum Readiness {
    /// Not installed: no add-on, none of its objects.
    Absent,
    Ready,
    /// Still coming up (or waiting for a node to run on): why.
    Waiting(String),
    Failed(String),
}

/// Whether any node of the cluster is `Ready`.
pub async fn any_node_ready(cloud: &Cloud, target: &KubeTarget) -> CloudResult<bool> {
    Ok(cloud
        .kube
        .cluster_state(target)
        .await?
        .nodes
        .iter()
        .any(|n| n.ready))
}

/// Reads whether a component is serving: an add-on ACTIVE (at a supported version), every
/// object of a manifest component present and ready. One read of each source.
pub async fn readiness(
    cloud: &Cloud,
    cluster: &str,
    target: &KubeTarget,
    c: &Component,
) -> CloudResult<Readiness> {
    // The add-on that provides it is watched by its own feature operation.
    if provider(cloud, cluster, c).await?.is_some() {
        return Ok(Readiness::Ready);
    }
    match &c.install {
        Install::Addon { min_version, .. } => {
            let Some(a) = cloud.eks.describe_addon(cluster, c.name).await? else {
                return Ok(Readiness::Absent);
            };
            if let (Some(min), Some(v)) = (min_version, a.version.as_deref()) {
                if !version_at_least(v, min) {
                    return Ok(Readiness::Failed(format!(
                        "{} is at {v}; HyperPod requires {min} or later: update the add-on (UpdateAddon) and reconcile",
                        c.name
                    )));
                }
            }
            let health = a.health.map(|h| format!(" ({h})")).unwrap_or_default();
            Ok(match addon_state(a.status) {
                (ComponentState::Ready, _) => Readiness::Ready,
                (ComponentState::Installing, why) => {
                    Readiness::Waiting(format!("{}: {why}{health}", c.name))
                }
                // DEGRADED is what EKS reports for an add-on with no node to run on.
                (ComponentState::Degraded, why) => {
                    Readiness::Waiting(format!("{}: {why}{health}", c.name))
                }
                (_, why) => Readiness::Failed(format!("{}: {why}{health}", c.name)),
            })
        }
        Install::Manifests(f) => {
            let (mut found, mut waiting) = (0, None);
            for m in f(&cloud.network.region()) {
                let Some(r) = ObjectRef::of(&m) else { continue };
                match cloud.kube.get(target, &r).await? {
                    None => {
                        waiting.get_or_insert(format!("waiting for {}/{}", r.kind, r.name));
                    }
                    Some(actual) => {
                        found += 1;
                        if let Err(why) = object_ready(&actual) {
                            waiting.get_or_insert(why);
                        }
                    }
                }
            }
            Ok(match waiting {
                _ if found == 0 => Readiness::Absent,
                Some(why) => Readiness::Waiting(why),
                None => Readiness::Ready,
            })
        }
    }
}
