//! AWS's Spaces workspace templates and the rules jupyter-k8s's admission webhook holds a
//! `Workspace` to against them: the one definition both the REST edge (refusals by field, before
//! any call) and the sandbox's simulated webhook (refusals as the API server answers) read.
//!
//! Sources, read line by line:
//! - the templates: `jupyter-infra/jupyter-k8s-aws` `charts/aws-hyperpod/templates/
//!   sagemaker-{jupyter,code-editor}-template.yaml` at b6adb6fd2797abc9c2d5cb7b2a674e208b563628,
//!   installed in the chart's `namespace` (`values.yaml`: `jupyter-k8s-system`), with the
//!   controller's `--default-template-namespace` set to that same namespace (`Makefile`, the
//!   `deploy-controller` targets: `workspaceTemplates.defaultNamespace=jupyter-k8s-system`);
//! - the rules: `jupyter-infra/jupyter-k8s` `internal/webhook/v1alpha1/template_validator.go`
//!   (`validateTemplateNamespace`, `ValidateCreateWorkspace`), `image_validator.go`
//!   (`validateImageAllowed`) and the storage bound check beside them, at
//!   f2670353e769c58b4164d0a08c6f296a1e4e9b3e.
//!
//! `tests/fixtures/aws/jupyter-k8s-aws-templates.yaml` is the same two templates as the chart
//! renders them; a test holds the values here to that file.

use serde_json::Value;

/// Where AWS's Spaces add-on keeps its templates, and the controller's shared template
/// namespace: the webhook admits a template there or in the workspace's own namespace, nowhere
/// else. The rule's constant, kept apart from the one the product's `Workspace` names
/// (`service::spaces`), so that a product naming another namespace fails against it.
pub const SHARED_TEMPLATE_NAMESPACE: &str = "jupyter-k8s-system";
pub const TEMPLATE_KIND: &str = "WorkspaceTemplate";
pub const TEMPLATE_API_VERSION: &str = "workspace.jupyter.org/v1alpha1";

const CPU_IMAGE: &str = "public.ecr.aws/sagemaker/sagemaker-distribution:latest-cpu";
const GPU_IMAGE: &str = "public.ecr.aws/sagemaker/sagemaker-distribution:latest-gpu";
const GIB: u64 = 1 << 30;

/// What a template lets a workspace choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateBounds {
    pub name: String,
    pub default_image: String,
    /// Empty: only the default image (`validateImageAllowed`'s fallback).
    pub allowed_images: Vec<String>,
    pub allow_custom_images: bool,
    /// Home volume bounds and default, in bytes (`primaryStorage`).
    pub min_storage: Option<u64>,
    pub max_storage: Option<u64>,
    pub default_storage: Option<u64>,
}

impl TemplateBounds {
    /// AWS's template of this name, as the add-on installs it.
    pub fn aws(name: &str) -> Option<Self> {
        matches!(
            name,
            "sagemaker-jupyter-template" | "sagemaker-code-editor-template"
        )
        .then(|| Self {
            name: name.to_string(),
            default_image: CPU_IMAGE.into(),
            allowed_images: vec![CPU_IMAGE.into(), GPU_IMAGE.into()],
            allow_custom_images: false,
            min_storage: Some(GIB),
            max_storage: Some(100 * GIB),
            default_storage: Some(5 * GIB),
        })
    }

    /// A `WorkspaceTemplate` object as the cluster serves it.
    pub fn from_object(obj: &Value) -> Option<Self> {
        let spec = obj.get("spec")?;
        let size = |k: &str| {
            spec.pointer(&format!("/primaryStorage/{k}"))
                .and_then(Value::as_str)
                .and_then(quantity_bytes)
        };
        Some(Self {
            name: obj.pointer("/metadata/name")?.as_str()?.to_string(),
            default_image: spec.get("defaultImage")?.as_str()?.to_string(),
            allowed_images: spec
                .get("allowedImages")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            allow_custom_images: spec
                .get("allowCustomImages")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            min_storage: size("minSize"),
            max_storage: size("maxSize"),
            default_storage: size("defaultSize"),
        })
    }

    /// The images a workspace may name (`validateImageAllowed`).
    pub fn effective_images(&self) -> Vec<String> {
        if self.allowed_images.is_empty() {
            vec![self.default_image.clone()]
        } else {
            self.allowed_images.clone()
        }
    }

    pub fn image_allowed(&self, image: &str) -> bool {
        self.allow_custom_images || self.effective_images().iter().any(|i| i == image)
    }

    /// The template's GPU image, for a space with GPUs: the allowed image tagged `…-gpu`.
    pub fn gpu_image(&self) -> Option<&str> {
        self.allowed_images
            .iter()
            .map(String::as_str)
            .find(|i| i.rsplit(':').next().is_some_and(|t| t.ends_with("gpu")))
    }

    /// Home storage bounds in whole GiB `(min, max)`, rounded inwards.
    pub fn storage_gib(&self) -> (u64, u64) {
        (
            self.min_storage.map_or(1, |b| b.div_ceil(GIB)),
            self.max_storage.map_or(u64::from(u32::MAX), |b| b / GIB),
        )
    }

    /// What the webhook refuses of a workspace naming this template (image and home storage),
    /// each as its message.
    pub fn violations(&self, workspace: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(image) = workspace
            .pointer("/spec/image")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty())
        {
            if !self.image_allowed(image) {
                out.push(format!(
                    "Image '{image}' is not allowed by template '{}'. Allowed images: [{}]",
                    self.name,
                    self.effective_images().join(" ")
                ));
            }
        }
        if let Some(size) = workspace
            .pointer("/spec/storage/size")
            .and_then(Value::as_str)
            .and_then(quantity_bytes)
        {
            if let Some(max) = self.max_storage.filter(|m| size > *m) {
                out.push(format!(
                    "storage size {size} exceeds maximum {max} allowed by template '{}'",
                    self.name
                ));
            }
            if let Some(min) = self.min_storage.filter(|m| size < *m) {
                out.push(format!(
                    "storage size {size} is below minimum {min} required by template '{}'",
                    self.name
                ));
            }
        }
        out
    }
}

/// Why the webhook refuses a workspace's `templateRef.namespace`
/// (`validateTemplateNamespace`), if it does.
pub fn namespace_violation(workspace: &Value) -> Option<String> {
    let ns = workspace
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let template_ns = workspace
        .pointer("/spec/templateRef/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    (!template_ns.is_empty() && template_ns != ns && template_ns != SHARED_TEMPLATE_NAMESPACE).then(|| {
        format!("templateRef.namespace \"{template_ns}\" is not allowed: templates must be in the workspace namespace \"{ns}\" or the shared namespace \"{SHARED_TEMPLATE_NAMESPACE}\"")
    })
}

/// A Kubernetes quantity in bytes (`5Gi`, `100G`, `512Mi`, `1073741824`); `None` when it is none.
pub fn quantity_bytes(q: &str) -> Option<u64> {
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (n, unit) = q.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_webhook_admits_the_shared_or_own_namespace_only() {
        let w = |ns: &str, tns: &str| json!({"metadata": {"namespace": ns}, "spec": {"templateRef": {"name": "t", "namespace": tns}}});
        assert_eq!(
            namespace_violation(&w("default", SHARED_TEMPLATE_NAMESPACE)),
            None
        );
        assert_eq!(namespace_violation(&w("team", "team")), None);
        assert_eq!(namespace_violation(&w("team", "")), None);
        let refused = namespace_violation(&w("default", "jupyter-k8s-shared")).unwrap();
        assert!(refused.contains("jupyter-k8s-shared"), "{refused}");
    }

    #[test]
    fn the_pinned_templates_are_the_charts() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/aws/jupyter-k8s-aws-templates.yaml"
        ));
        let mut seen = 0;
        for doc in serde_yaml::Deserializer::from_str(text) {
            let obj: Value = serde::Deserialize::deserialize(doc).unwrap();
            assert_eq!(obj["metadata"]["namespace"], SHARED_TEMPLATE_NAMESPACE);
            let served = TemplateBounds::from_object(&obj).unwrap();
            assert_eq!(TemplateBounds::aws(&served.name), Some(served));
            seen += 1;
        }
        assert_eq!(seen, 2);
    }

    #[test]
    fn aws_templates_bound_images_and_home_storage() {
        let t = TemplateBounds::aws("sagemaker-jupyter-template").unwrap();
        assert_eq!(t.storage_gib(), (1, 100));
        assert_eq!(t.gpu_image(), Some(GPU_IMAGE));
        let w =
            |image: &str, size: &str| json!({"spec": {"image": image, "storage": {"size": size}}});
        assert!(t.violations(&w(GPU_IMAGE, "100Gi")).is_empty());
        assert_eq!(t.violations(&w("my/image:1", "101Gi")).len(), 2);
        assert_eq!(quantity_bytes("5Gi"), Some(5 * GIB));
        assert_eq!(quantity_bytes("x"), None);
    }
}
