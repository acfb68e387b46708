//! Workload requests at the edge: model downloads, self-managed inference deployments, jobs,
//! the HyperPod software update and a look into a storage claim. Validates every field, turns a
//! request into the named objects an operation applies, and reads what is running.

pub mod start;

mod autoscale;
mod deployments;
mod jobs;
mod listing;
mod models;
mod objects;
mod pools;
mod router;
mod server;

pub use autoscale::{check_prometheus_setting, AutoscalingRequest, AutoscalingView};
pub use deployments::*;
pub use jobs::*;
pub use listing::*;
pub use models::*;
pub use objects::*;
pub use pools::*;
pub use router::{RouterRequest, RouterView, ROUTER_IMAGE};
pub(crate) use server::{bounded, image};

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::steps::workloads::{
    workload_state, ApplyParams, DeleteParams, WORKLOAD_LABEL, WORKLOAD_NAMESPACE,
};
use crate::cloud::{KubeTarget, ObjectRef, ServiceCall, MANAGED_BY};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::storage::list_storage;

pub(super) const MODEL_LABEL: &str = "instantstart.io/model";
/// Image of the download job: Python only; `huggingface_hub` is installed at start.
pub(super) const DOWNLOAD_IMAGE: &str = "public.ecr.aws/docker/library/python:3.12-slim";
/// The download program. Every input comes from the environment, never from the text, so a
/// model id cannot change what runs.
pub(super) const DOWNLOAD_SCRIPT: &str = r#"import os, subprocess, sys
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "huggingface_hub"])
from huggingface_hub import snapshot_download
snapshot_download(repo_id=os.environ["MODEL_ID"], revision=os.environ["REVISION"],
                  local_dir=os.environ["TARGET"], token=os.environ.get("HF_TOKEN") or None)
print("downloaded", os.environ["MODEL_ID"], "to", os.environ["TARGET"])
"#;

pub(super) fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

pub(super) fn labels(workload: &str, extra: &[(&str, &str)]) -> Value {
    let mut m = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (WORKLOAD_LABEL.to_string(), workload.to_string()),
    ]);
    for (k, v) in extra {
        m.insert(k.to_string(), v.to_string());
    }
    json!(m)
}

pub(super) fn obj(api_version: &str, kind: &str, name: &str) -> ObjectRef {
    obj_in(WORKLOAD_NAMESPACE, api_version, kind, name)
}

/// An object of ours in `namespace` (default, or a team's).
pub(super) fn obj_in(namespace: &str, api_version: &str, kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// A DNS-label slug of free text plus a short hash, so distinct inputs never share a name.
pub(super) fn slug(prefix: &str, text: &str, max: usize) -> String {
    let mut s: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let hash: String = Sha256::digest(text.as_bytes())[..3]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let room = max - prefix.len() - hash.len() - 2;
    let body: String = s.trim_matches('-').chars().take(room).collect();
    format!("{prefix}-{}-{hash}", body.trim_end_matches('-'))
}

/// Stores a Hugging Face token in a Secret the workload reads. The token goes to the cluster
/// only: never into an operation's parameters, the database or a log line.
pub(super) async fn put_token_secret(
    engine: &Engine,
    target: &KubeTarget,
    namespace: &str,
    secret: &str,
    token: &str,
    workload: &str,
) -> ApiResult<()> {
    let well_formed =
        (8..=256).contains(&token.len()) && token.chars().all(|c| c.is_ascii_graphic());
    if !well_formed {
        return Err(ApiError::validation_hint(
            "hfToken",
            "the Hugging Face token is not a token (8–256 printable characters, no spaces)",
            json!("hf_…, from huggingface.co/settings/tokens"),
        ));
    }
    // A Secret of that name that is not this workload's (someone else's credentials) is never
    // overwritten: the request is refused, and nothing is applied.
    let kube = &engine.cloud().kube;
    let existing = kube
        .get(target, &obj_in(namespace, "v1", "Secret", secret))
        .await
        .map_err(cloud_err)?;
    if let Some(found) = existing {
        let labels = &found["metadata"]["labels"];
        let ours = labels[MANAGED_BY.0] == MANAGED_BY.1 && labels[WORKLOAD_LABEL] == workload;
        if !ours {
            return Err(ApiError::Conflict {
                slug: ProblemType::SecretExists,
                detail: format!("a Secret `{namespace}/{secret}` exists and is not this workload's: it is never overwritten. Delete or rename it, or give the workload another name"),
                field: Some("hfToken".into()),
                operation_id: None,
            });
        }
    }
    let manifest = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "namespace": namespace, "labels": labels(workload, &[])},
        "stringData": {"token": token}});
    kube.apply(target, &manifest).await.map_err(cloud_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_and_distinct_inputs_never_share_one() {
        let a = slug("hf-download", "Qwen/Qwen3-8B@main", 63);
        let b = slug("hf-download", "qwen/qwen3-8b@main", 63);
        assert_ne!(a, b);
        let long = slug("hf-download", &"x".repeat(300), 63);
        for s in [&a, &b, &long] {
            assert!(s.len() <= 63, "{s}");
            assert!(s
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            assert!(!s.ends_with('-') && !s.contains("--"), "{s}");
        }
    }

    #[test]
    fn model_ids_and_revisions_are_checked() {
        assert!(model_id("f", "Qwen/Qwen3-8B").is_ok());
        for bad in ["qwen", "a/b/c", "../x", "a/..", "-a/b", "a b/c", "a/$(id)"] {
            assert!(model_id("f", bad).is_err(), "{bad}");
        }
        assert!(revision("f", "main").is_ok());
        assert!(revision("f", "refs/pr/1").is_ok());
        assert!(revision("f", "--upload").is_err());
    }
}
