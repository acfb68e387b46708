//! The `Workspace` a space is (`workspace.jupyter.org/v1alpha1`, jupyter-k8s's custom resource
//! that the `amazon-sagemaker-spaces` add-on serves): a pure function of the validated request,
//! so what is applied, diffed and tested is one value.

use serde_json::{json, Map, Value};

use crate::cloud::MANAGED_BY;
use crate::service::shared::labels::{Placement, WORKLOAD_LABEL};

pub const API_VERSION: &str = "workspace.jupyter.org/v1alpha1";
pub const KIND: &str = "Workspace";
/// Where AWS's Spaces add-on keeps its system templates, the one shared namespace its webhook
/// admits (`jupyter-infra/jupyter-k8s-aws` `charts/aws-hyperpod/values.yaml`, `namespace`).
pub const TEMPLATE_NAMESPACE: &str = "jupyter-k8s-system";
/// The home directory the add-on's templates mount the space's own volume at.
pub const HOME: &str = "/home/sagemaker-user";
/// The port both applications serve (and answer idle checks) on.
pub const PORT: u16 = 8888;
/// Where the cluster's S3 claim is mounted, as in every training pod and model server.
pub const S3_MOUNT: &str = "/s3";
/// Where an FSx for Lustre claim is mounted, when the namespace has one.
pub const FSX_MOUNT: &str = "/fsx";

/// The application a space runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum App {
    #[serde(rename = "jupyterlab")]
    JupyterLab,
    #[serde(rename = "code-editor")]
    CodeEditor,
}

impl App {
    pub const ALL: [App; 2] = [App::JupyterLab, App::CodeEditor];

    pub fn as_str(self) -> &'static str {
        match self {
            App::JupyterLab => "jupyterlab",
            App::CodeEditor => "code-editor",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The add-on's system template for it.
    pub fn template(self) -> &'static str {
        match self {
            App::JupyterLab => "sagemaker-jupyter-template",
            App::CodeEditor => "sagemaker-code-editor-template",
        }
    }
}

/// What a space asks for: whole GPUs, or one MIG slice of one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Accelerators {
    Gpus(u32),
    Mig(String),
}

/// A validated space.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpaceSpec {
    pub name: String,
    pub app: App,
    pub instance_type: String,
    pub accelerators: Accelerators,
    pub storage_gib: u32,
    /// Minutes without activity before it stops itself; `None`: never.
    pub idle_minutes: Option<u32>,
    /// The template's image when `None`.
    pub image: Option<String>,
    pub placement: Placement,
    /// The storage claims in its namespace mounted beside its home: `(claim, mount path)`.
    pub claims: Vec<(String, String)>,
    pub running: bool,
}

/// The resource name of a MIG slice (`1g.10gb` → `nvidia.com/mig-1g.10gb`).
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{profile}")
}

/// The `Workspace` for a space.
pub fn workspace(s: &SpaceSpec) -> Value {
    let mut labels = json!({MANAGED_BY.0: MANAGED_BY.1, WORKLOAD_LABEL: "space",
                            "app.kubernetes.io/name": s.name});
    s.placement.label(&mut labels);
    let (resource, count) = match &s.accelerators {
        Accelerators::Gpus(n) => ("nvidia.com/gpu".to_string(), *n),
        Accelerators::Mig(p) => (mig_resource(p), 1),
    };
    let mut resources =
        json!({"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}});
    if count > 0 {
        resources["requests"][&resource] = json!(count.to_string());
        resources["limits"][&resource] = json!(count.to_string());
    }
    let mut spec = Map::new();
    spec.insert("displayName".into(), json!(s.name));
    spec.insert("appType".into(), json!(s.app.as_str()));
    spec.insert(
        "templateRef".into(),
        json!({"name": s.app.template(), "namespace": TEMPLATE_NAMESPACE}),
    );
    if let Some(i) = &s.image {
        spec.insert("image".into(), json!(i));
    }
    spec.insert(
        "desiredStatus".into(),
        json!(if s.running { "Running" } else { "Stopped" }),
    );
    spec.insert("ownershipType".into(), json!("Public"));
    spec.insert("accessType".into(), json!("Public"));
    spec.insert("resources".into(), resources);
    spec.insert(
        "nodeSelector".into(),
        json!({"node.kubernetes.io/instance-type": s.instance_type}),
    );
    spec.insert(
        "storage".into(),
        json!({"size": format!("{}Gi", s.storage_gib), "mountPath": HOME}),
    );
    if !s.claims.is_empty() {
        spec.insert(
            "volumes".into(),
            s.claims
                .iter()
                .map(|(claim, path)| {
                    json!({"name": format!("data-{claim}"), "mountPath": path,
                           "persistentVolumeClaimName": claim})
                })
                .collect(),
        );
    }
    if let Some(m) = s.idle_minutes {
        // The idle endpoint SageMaker Distribution images serve (jupyter-k8s's samples).
        spec.insert(
            "idleShutdown".into(),
            json!({"enabled": true, "idleTimeoutInMinutes": m,
                   "detection": {"httpGet": {"path": "/api/idle", "port": PORT}}}),
        );
    }
    json!({"apiVersion": API_VERSION, "kind": KIND,
           "metadata": {"name": s.name, "namespace": s.placement.namespace(), "labels": labels},
           "spec": Value::Object(spec)})
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> SpaceSpec {
        SpaceSpec {
            name: "lab".into(),
            app: App::JupyterLab,
            instance_type: "ml.g5.8xlarge".into(),
            accelerators: Accelerators::Gpus(1),
            storage_gib: 20,
            idle_minutes: Some(60),
            image: None,
            placement: Placement::default(),
            claims: vec![("s3-claim".into(), S3_MOUNT.into())],
            running: true,
        }
    }

    #[test]
    fn a_space_mounts_the_clusters_claim_at_s3_beside_its_home() {
        let w = workspace(&sample());
        assert_eq!(w["metadata"]["namespace"], "default");
        assert_eq!(
            w["spec"]["volumes"],
            json!([{"name": "data-s3-claim", "mountPath": "/s3", "persistentVolumeClaimName": "s3-claim"}])
        );
        assert_eq!(
            w["spec"]["storage"],
            json!({"size": "20Gi", "mountPath": HOME})
        );
        assert_eq!(
            w["spec"]["templateRef"]["name"],
            "sagemaker-jupyter-template"
        );
        assert_eq!(w["spec"]["resources"]["limits"]["nvidia.com/gpu"], "1");
        assert_eq!(w["spec"]["idleShutdown"]["idleTimeoutInMinutes"], 60);
    }

    #[test]
    fn a_mig_slice_a_team_and_no_idle_shutdown_are_spelled_as_the_controller_reads_them() {
        let mut s = sample();
        s.accelerators = Accelerators::Mig("1g.10gb".into());
        s.idle_minutes = None;
        s.app = App::CodeEditor;
        s.placement = Placement {
            team: Some("team-a".into()),
            priority: Some("inference".into()),
        };
        s.running = false;
        let w = workspace(&s);
        assert_eq!(w["metadata"]["namespace"], "hyperpod-ns-team-a");
        assert_eq!(
            w["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            "hyperpod-ns-team-a-localqueue"
        );
        assert_eq!(
            w["spec"]["resources"]["requests"]["nvidia.com/mig-1g.10gb"],
            "1"
        );
        assert!(w["spec"]["resources"]["requests"]
            .get("nvidia.com/gpu")
            .is_none());
        assert!(w["spec"].get("idleShutdown").is_none());
        assert_eq!(w["spec"]["desiredStatus"], "Stopped");
        assert_eq!(w["spec"]["appType"], "code-editor");
    }
}
