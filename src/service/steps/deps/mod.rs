//! The cluster's dependencies as a declared, ordered graph of components, each knowing how to
//! install itself (an EKS add-on, or manifests applied with server-side apply), how to read its
//! actual state, when it is ready, and how to remove it. One phase per component reconciles:
//! read actual → apply only what differs → wait for ready. On a converged cluster a run reads
//! and makes no mutating call.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{json, Value};

pub mod manifests;
pub mod operators;
mod state;

pub use state::*;

use manifests::{efa_device_plugin, hyperpod_dependencies, namespaces, nvidia_device_plugin};
use operators::{keda, kuberay_operator};

use super::addons::kube_target;
use super::s3_access::S3CsiRoleStep;
use crate::cloud::{json_contains, CreateAddon, ObjectRef};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::shared::resources::Recorded;

/// How a component is installed.
pub enum Install {
    /// An EKS add-on (the AWS port), optionally with an IRSA role made first.
    Addon {
        configuration: Option<&'static str>,
        s3_csi_role: bool,
        /// The lowest version HyperPod supports (`v1.18.3`), when it names one.
        min_version: Option<&'static str>,
    },
    /// Kubernetes objects for a region, applied in order.
    Manifests(fn(&str) -> Vec<Value>),
}

/// One dependency.
pub struct Component {
    pub name: &'static str,
    /// Components that must be ready first (each appears earlier in [`COMPONENTS`]).
    pub requires: &'static [&'static str],
    pub install: Install,
    /// Custom resource definitions the component's controller serves; reported as `degraded`
    /// when absent.
    pub crds: &'static [&'static str],
    /// The upstream release the CRDs come from, fetched and checked before anything is applied.
    pub release: Option<Release>,
    /// An EKS add-on that brings this component itself: while it is on the cluster, ours is
    /// neither applied nor waited for (two copies would fight over the same API registration).
    pub provided_by: Option<&'static str>,
}

/// A pinned upstream release: its files (each CRDs only) under an HTTPS base URL. A configured
/// mirror serves the same file names.
pub struct Release {
    pub base: &'static str,
    pub files: &'static [&'static str],
}

/// Per-component state, as `GET /api/clusters/{name}/dependencies` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ComponentState {
    Pending,
    Installing,
    Ready,
    Degraded,
    Failed,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub name: String,
    /// `eks-addon` or `manifests`.
    pub install: &'static str,
    pub requires: Vec<String>,
    pub state: ComponentState,
    pub reason: String,
}

/// An EKS add-on at the version EKS picks, with no configuration and no role of its own.
const fn addon(name: &'static str) -> Component {
    Component {
        name,
        requires: &[],
        install: Install::Addon {
            configuration: None,
            s3_csi_role: false,
            min_version: None,
        },
        crds: &[],
        release: None,
        provided_by: None,
    }
}

/// The declared graph, in install order.
pub static COMPONENTS: &[Component] = &[
    // The cluster's own networking and DNS as managed add-ons, as AWS's HyperPod templates make
    // them. HyperPod's prerequisites name the lowest VPC CNI version it supports.
    Component {
        name: "vpc-cni",
        requires: &[],
        install: Install::Addon {
            configuration: None,
            s3_csi_role: false,
            min_version: Some(MIN_VPC_CNI),
        },
        crds: &[],
        release: None,
        provided_by: None,
    },
    addon("kube-proxy"),
    addon("coredns"),
    // Resource metrics for autoscaling; the inference operator requires it.
    addon("metrics-server"),
    Component {
        name: "hyperpod-namespaces",
        requires: &[],
        install: Install::Manifests(namespaces),
        crds: &[],
        release: None,
        provided_by: None,
    },
    // AWS's HyperPod dependencies chart: required when the cluster is made through the APIs.
    Component {
        name: "hyperpod-dependencies",
        requires: &["hyperpod-namespaces"],
        install: Install::Manifests(hyperpod_dependencies),
        crds: &[],
        release: None,
        provided_by: None,
    },
    addon("eks-pod-identity-agent"),
    Component {
        name: "cert-manager",
        requires: &[],
        install: Install::Addon {
            configuration: Some(
                r#"{"replicaCount":1,"cainjector":{"replicaCount":1},"webhook":{"replicaCount":1}}"#,
            ),
            s3_csi_role: false,
            min_version: None,
        },
        crds: &[],
        release: None,
        provided_by: None,
    },
    Component {
        name: "aws-mountpoint-s3-csi-driver",
        requires: &[],
        install: Install::Addon {
            configuration: None,
            s3_csi_role: true,
            min_version: None,
        },
        crds: &[],
        release: None,
        provided_by: None,
    },
    Component {
        name: "nvidia-device-plugin",
        requires: &[],
        install: Install::Manifests(nvidia_device_plugin),
        crds: &[],
        release: None,
        provided_by: None,
    },
    Component {
        name: "efa-device-plugin",
        requires: &[],
        install: Install::Manifests(efa_device_plugin),
        crds: &[],
        release: None,
        provided_by: None,
    },
    Component {
        name: "kuberay-operator",
        requires: &["hyperpod-namespaces"],
        install: Install::Manifests(kuberay_operator),
        crds: &["rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"],
        release: Some(operators::KUBERAY_CRDS),
        provided_by: None,
    },
    Component {
        name: "keda",
        requires: &["cert-manager"],
        install: Install::Manifests(keda),
        crds: &[
            "scaledobjects.keda.sh",
            "scaledjobs.keda.sh",
            "triggerauthentications.keda.sh",
            "clustertriggerauthentications.keda.sh",
            "cloudeventsources.eventing.keda.sh",
            "clustercloudeventsources.eventing.keda.sh",
        ],
        release: Some(operators::KEDA_CRDS),
        // Only one metrics server can be registered for `external.metrics.k8s.io`: the
        // inference operator's own KEDA takes over from ours (see `features::handover`).
        provided_by: Some(INFERENCE_OPERATOR_ADDON),
    },
];

/// The inference operator's add-on (the `inferenceOperator` managed feature). It brings its own
/// KEDA (its chart's `keda` dependency, on by default).
pub const INFERENCE_OPERATOR_ADDON: &str = "amazon-sagemaker-hyperpod-inference";

/// The lowest VPC CNI add-on version HyperPod on EKS supports (its prerequisites page).
pub const MIN_VPC_CNI: &str = "v1.18.3";

/// Whether an add-on version (`v1.19.2-eksbuild.1`) is at least `min` (`v1.18.3`).
pub fn version_at_least(version: &str, min: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> {
        v.trim_start_matches('v')
            .split(['-', '+'])
            .next()
            .unwrap_or_default()
            .split('.')
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    parse(version) >= parse(min)
}

pub fn component(name: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.name == name)
}

/// The last phase of the HyperPod stage: once nodes have joined, every installed dependency
/// must be serving (the dependency stage, which ran before any node existed, could only apply).
/// Components that are not installed are not waited for.
pub struct DependenciesReadyStep;

#[async_trait]
impl crate::ops::Reconcile for DependenciesReadyStep {
    fn phase(&self) -> &'static str {
        "dependencies-ready"
    }
    async fn reconcile(&self, _cx: &StepCx<'_>) -> StepResult<Value> {
        Ok(json!({}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: super::HyperPodParams = cx.param()?;
        if p.verify_dependencies == Some(false) {
            return Ok(Poll::Ready(
                json!({"skipped": "no dependency stage in this pipeline"}),
            ));
        }
        let target = kube_target(cx)?;
        let state = cx.cloud.kube.cluster_state(&target).await?;
        if !state.nodes.iter().any(|n| n.ready) {
            let why = state
                .nodes
                .iter()
                .find_map(|n| {
                    n.not_ready_reason
                        .as_ref()
                        .map(|r| format!("node {} is NotReady: {r}", n.name))
                })
                .unwrap_or_else(|| "waiting for the first node to register".into());
            return Ok(Poll::Pending(why));
        }
        let mut serving = Vec::new();
        for c in COMPONENTS {
            if left_alone(cx, c.name) {
                continue;
            }
            match readiness(cx.cloud, &cx.op.cluster, &target, c).await? {
                Readiness::Absent => {}
                Readiness::Ready => serving.push(c.name),
                Readiness::Waiting(why) => return Ok(Poll::Pending(why)),
                Readiness::Failed(why) => return Err(StepError::fatal("dependency-failed", why)),
            }
        }
        let mut out = out.clone();
        out["serving"] = json!(serving);
        Ok(Poll::Ready(out))
    }
}

/// Parameters of a `dependencies` operation.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DependencyParams {
    /// Also reconcile components that were present when the cluster was imported.
    pub manage_existing: bool,
}

/// Whether a component found at import time is to be left as it is.
fn left_alone(cx: &StepCx<'_>, name: &str) -> bool {
    let manage = cx
        .param::<DependencyParams>()
        .map(|p| p.manage_existing)
        .unwrap_or(false);
    !manage
        && cx
            .recorded()
            .preexisting_components
            .is_some_and(|names| names.iter().any(|n| n == name))
}

/// The CRDs of a component's release: every file fetched, every document a CRD the component
/// declares, every declared CRD present. Anything else is refused before a single apply.
///
/// CRDs applied from this very release carry its base URL as an annotation: when every declared
/// CRD does, nothing is fetched (megabytes per reconcile otherwise), and nothing is reapplied.
async fn release_crds(cx: &StepCx<'_>, c: &Component, r: &Release) -> StepResult<Vec<Value>> {
    let target = kube_target(cx)?;
    let mut current = true;
    for name in c.crds {
        let crd = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: name.to_string(),
        };
        let applied = cx.cloud.kube.get(&target, &crd).await?;
        if applied.is_none_or(|o| o.pointer(RELEASE_ANNOTATION) != Some(&json!(r.base))) {
            current = false;
            break;
        }
    }
    if current {
        return Ok(Vec::new());
    }
    let mut crds = Vec::new();
    for file in r.files {
        let text = cx.cloud.releases.fetch(r.base, file).await?;
        crds.extend(crds_in(c, file, &text)?);
    }
    for crd in &mut crds {
        crd["metadata"]["annotations"]["instantstart.io/release"] = json!(r.base);
    }
    for want in c.crds {
        if !crds.iter().any(|d| d["metadata"]["name"] == *want) {
            return Err(StepError::fatal(
                "release-incomplete",
                format!("{}: no release file defines the CRD {want}", c.name),
            ));
        }
    }
    Ok(crds)
}

/// Where an applied CRD names the release it came from.
const RELEASE_ANNOTATION: &str = "/metadata/annotations/instantstart.io~1release";

/// The documents of one release file, each checked to be a CRD the component declares.
pub fn crds_in(c: &Component, file: &str, text: &str) -> StepResult<Vec<Value>> {
    let refuse =
        |why: String| StepError::fatal("release-unexpected", format!("{}: {file}: {why}", c.name));
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v: Value =
            serde::Deserialize::deserialize(doc).map_err(|e| refuse(format!("not YAML ({e})")))?;
        if v.is_null() {
            continue;
        }
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        if v["apiVersion"] != "apiextensions.k8s.io/v1" || v["kind"] != "CustomResourceDefinition" {
            return Err(refuse(format!(
                "holds a {} {name}, not only CRDs",
                v["kind"]
            )));
        }
        if !c.crds.contains(&name) {
            return Err(refuse(format!(
                "defines {name}, which {} does not serve",
                c.name
            )));
        }
        docs.push(v);
    }
    if docs.is_empty() {
        return Err(refuse("no CRD in it".into()));
    }
    Ok(docs)
}

/// One phase: reconcile one component.
pub struct ComponentStep(pub &'static Component);

#[async_trait]
impl Step for ComponentStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:CreateAddon", "eks:UpdateAddon", "k8s:Apply"]
    }
    fn name(&self) -> &'static str {
        self.0.name
    }

    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let c = self.0;
        if left_alone(cx, c.name) {
            return Ok(json!({"changed": false, "preexisting": true}));
        }
        if let Some(a) = provider(cx.cloud, &cx.op.cluster, c).await? {
            return Ok(json!({"changed": false, "providedBy": a.name}));
        }
        match &c.install {
            Install::Addon {
                configuration,
                s3_csi_role,
                ..
            } => {
                if let Some(a) = cx.cloud.eks.describe_addon(&cx.op.cluster, c.name).await? {
                    return Ok(json!({"addonArn": a.arn, "changed": false}));
                }
                let role = if *s3_csi_role {
                    Some(S3CsiRoleStep::ensure(cx).await?)
                } else {
                    None
                };
                let req = CreateAddon {
                    cluster: cx.op.cluster.clone(),
                    name: c.name.to_string(),
                    version: None,
                    service_account_role_arn: role,
                    configuration_values: configuration.map(str::to_string),
                    resolve_conflicts: "OVERWRITE".into(),
                    pod_identity_associations: vec![],
                };
                let addon = cx.cloud.eks.create_addon(&req).await?;
                Ok(json!({"addonArn": addon.arn, "changed": true}))
            }
            Install::Manifests(f) => {
                let target = kube_target(cx)?;
                let mut applied = Vec::new();
                // CRDs first (fetched and checked whole, or nothing is applied), then the
                // controller that serves them.
                let mut objects = match &c.release {
                    Some(r) => release_crds(cx, c, r).await?,
                    None => Vec::new(),
                };
                objects.extend(f(&cx.cloud.network.region()));
                for m in objects {
                    let Some(r) = ObjectRef::of(&m) else { continue };
                    let same = cx
                        .cloud
                        .kube
                        .get(&target, &r)
                        .await?
                        .is_some_and(|actual| json_contains(&actual, &m));
                    if !same {
                        cx.cloud.kube.apply(&target, &m).await?;
                        applied.push(format!("{}/{}", r.kind, r.name));
                    }
                }
                Ok(json!({"applied": applied, "changed": !applied.is_empty()}))
            }
        }
    }

    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        // `act` reads before it writes, so repeating it after a crash is safe.
        self.act(cx).await.map(Some)
    }

    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let c = self.0;
        if out["preexisting"] == json!(true) || out.get("providedBy").is_some() {
            return Ok(Poll::Ready(out.clone()));
        }
        match readiness(cx.cloud, &cx.op.cluster, &kube_target(cx)?, c).await? {
            Readiness::Absent => match c.install {
                Install::Addon { .. } => Err(StepError::fatal(
                    "addon-missing",
                    format!("add-on {} disappeared while it was being installed", c.name),
                )),
                Install::Manifests(_) => Ok(Poll::Pending(format!("waiting for {}", c.name))),
            },
            Readiness::Ready => Ok(Poll::Ready(out.clone())),
            Readiness::Waiting(why) => {
                // This stage runs before the HyperPod nodes exist: what waits only for a node
                // is applied now and verified by the HyperPod stage once nodes have joined.
                if any_node_ready(cx.cloud, &kube_target(cx)?).await? {
                    Ok(Poll::Pending(why))
                } else {
                    let mut out = out.clone();
                    out["awaitingNodes"] = json!(true);
                    out["waitingFor"] = json!(why);
                    Ok(Poll::Ready(out))
                }
            }
            Readiness::Failed(why) => Err(StepError::fatal("addon-failed", why)),
        }
    }

    fn records_resources(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_requirement_is_declared_earlier() {
        for (i, c) in COMPONENTS.iter().enumerate() {
            for r in c.requires {
                let at = COMPONENTS.iter().position(|d| d.name == *r);
                assert!(
                    at.is_some_and(|at| at < i),
                    "{} requires {r}, which does not come before it",
                    c.name
                );
            }
        }
    }

    #[test]
    fn every_manifest_is_named_and_labelled_as_ours() {
        for c in COMPONENTS {
            if let Install::Manifests(f) = c.install {
                for m in f("us-west-2") {
                    let r = ObjectRef::of(&m).expect("apiVersion, kind and name");
                    assert_eq!(
                        m.pointer("/metadata/labels/app.kubernetes.io~1managed-by"),
                        Some(&json!("instantstart")),
                        "{}/{} in {}",
                        r.kind,
                        r.name,
                        c.name
                    );
                }
            }
        }
    }

    #[test]
    fn add_on_versions_compare_numerically() {
        assert!(version_at_least("v1.19.2-eksbuild.1", MIN_VPC_CNI));
        assert!(version_at_least("v1.18.3-eksbuild.2", MIN_VPC_CNI));
        assert!(!version_at_least("v1.18.1-eksbuild.3", MIN_VPC_CNI));
        assert!(!version_at_least("v1.9.10", MIN_VPC_CNI));
    }

    #[test]
    fn networking_and_dns_are_managed_add_ons() {
        for name in ["vpc-cni", "kube-proxy", "coredns"] {
            assert!(
                matches!(
                    component(name).map(|c| &c.install),
                    Some(Install::Addon { .. })
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn readiness_reads_deployment_and_daemonset_status() {
        let dep = |ready| json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}, "status": {"readyReplicas": ready}});
        assert!(object_ready(&dep(1)).is_err());
        assert!(object_ready(&dep(2)).is_ok());
        let ds = json!({"kind": "DaemonSet", "metadata": {"name": "x"}});
        assert_eq!(
            object_ready(&ds),
            Err("DaemonSet x: not yet scheduled".into())
        );
        let ds = json!({"kind": "DaemonSet", "metadata": {"name": "x"}, "status": {"desiredNumberScheduled": 3, "numberReady": 3}});
        assert!(object_ready(&ds).is_ok());
    }
}
