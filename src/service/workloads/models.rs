//! Model downloads: a Hugging Face model into a storage claim by an in-cluster Job (its token
//! only in a Secret), and the models downloaded so far.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ListQuery;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::workloads::{
    cloud_err, labels, list_storage, obj, put_token_secret, slug, workload_state, ApplyParams,
    DOWNLOAD_IMAGE, DOWNLOAD_SCRIPT, MODEL_LABEL, WORKLOAD_LABEL, WORKLOAD_NAMESPACE,
};

/// The name of the Job that downloads `model` at `rev` (its token Secret is `<name>-token`).
pub fn download_job_name(model: &str, rev: &str) -> String {
    slug("hf-download", &format!("{model}@{rev}"), 63)
}

/// `POST /api/clusters/{name}/models`: download a Hugging Face model into a storage claim.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelDownloadRequest {
    /// Hugging Face repository id, `owner/name` (e.g. `Qwen/Qwen3-8B`).
    #[schema(
        pattern = r"^[A-Za-z0-9_](\.?[A-Za-z0-9_-]){0,47}/[A-Za-z0-9_](\.?[A-Za-z0-9_-]){0,47}$"
    )]
    pub model_id: String,
    /// Branch, tag or commit (default `main`).
    #[schema(pattern = r"^[A-Za-z0-9_](/?[A-Za-z0-9_-]|\.[A-Za-z0-9_-]){0,63}$")]
    pub revision: Option<String>,
    /// Storage claim in namespace `default` to write to (default `s3-claim`); the model lands
    /// under `models/<modelId>/`.
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub claim: Option<String>,
    /// For gated or private models. Kept in a Kubernetes Secret only: never stored here,
    /// logged or put in a manifest.
    pub hf_token: Option<String>,
}

/// A model download and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelView {
    pub model_id: String,
    pub revision: String,
    pub claim: String,
    /// Path inside the claim.
    pub path: String,
    /// The Kubernetes Job doing it.
    pub job: String,
    /// `pending`, `succeeded` or `failed`.
    pub state: String,
    pub message: Option<String>,
}

pub(super) fn model_id(field: &str, id: &str) -> ApiResult<()> {
    let part = |p: &str| {
        (1..=96).contains(&p.len())
            && !p.starts_with(['.', '-'])
            && !p.contains("..")
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    let ok = id.split_once('/').is_some_and(|(o, n)| part(o) && part(n));
    validate::require(
        ok,
        field,
        format!(
            "`{}` is not a Hugging Face model id",
            validate::truncate(id)
        ),
        json!("owner/name, e.g. Qwen/Qwen3-8B"),
    )
}

pub(super) fn revision(field: &str, rev: &str) -> ApiResult<()> {
    let ok = (1..=128).contains(&rev.len())
        && !rev.starts_with(['-', '/'])
        && !rev.contains("..")
        && rev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    validate::require(
        ok,
        field,
        format!("`{}` is not a revision", validate::truncate(rev)),
        json!("a branch, tag or commit, e.g. main"),
    )
}

/// Validates a download and makes its operation's parameters (the Job, which reads the token
/// from a Secret when one is given).
pub async fn model_params(
    engine: &Engine,
    name: &str,
    req: &ModelDownloadRequest,
) -> ApiResult<Value> {
    model_id("modelId", &req.model_id)?;
    let rev = req.revision.as_deref().unwrap_or("main");
    revision("revision", rev)?;
    let claim = req.claim.as_deref().unwrap_or("s3-claim");
    validate::dns_label("claim", "claim name", claim)?;
    // The download runs as a Job in namespace default.
    crate::service::people::access::require_write(
        engine,
        name,
        WORKLOAD_NAMESPACE,
        "download models",
    )
    .await?;
    let claims = list_storage(engine, name).await?;
    if !claims
        .iter()
        .any(|c| c.claim_name == claim && c.namespace == WORKLOAD_NAMESPACE)
    {
        return Err(ApiError::validation_hint(
            "claim",
            format!("`{claim}` is not a storage claim of `{name}` in namespace default: create it first (storage_create)"),
            json!(claims.iter().filter(|c| c.namespace == WORKLOAD_NAMESPACE).map(|c| &c.claim_name).collect::<Vec<_>>()),
        ));
    }
    let job = download_job_name(&req.model_id, rev);
    let target = kube_target(engine, name).await?;
    let job_ref = obj("batch/v1", "Job", &job);
    if let Some(existing) = engine
        .cloud()
        .kube
        .get(&target, &job_ref)
        .await
        .map_err(cloud_err)?
    {
        let state = workload_state(&existing);
        return Err(ApiError::Conflict {
            slug: ProblemType::DownloadExists,
            detail: format!(
                "{} @ {rev} was already downloaded or is downloading (job {job}, {}); to download it again, delete that job first (job_delete)",
                req.model_id,
                state.as_str()
            ),
            field: Some("modelId".into()),
            operation_id: None,
        });
    }
    let secret = format!("{job}-token");
    if let Some(token) = &req.hf_token {
        put_token_secret(
            engine,
            &target,
            WORKLOAD_NAMESPACE,
            &secret,
            token,
            "model-download",
        )
        .await?;
    }
    let path = format!("models/{}", req.model_id);
    let model_label = slug("m", &req.model_id, 63);
    let job_labels = labels("model-download", &[(MODEL_LABEL, &model_label)]);
    let manifest = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job, "namespace": WORKLOAD_NAMESPACE, "labels": job_labels,
                     "annotations": {"instantstart.io/model-id": req.model_id, "instantstart.io/revision": rev,
                                     "instantstart.io/claim": claim, "instantstart.io/path": path}},
        "spec": {"backoffLimit": 2,
            "template": {"metadata": {"labels": job_labels},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "download", "image": DOWNLOAD_IMAGE,
                        "command": ["python", "-c", DOWNLOAD_SCRIPT],
                        "env": [
                            {"name": "MODEL_ID", "value": req.model_id},
                            {"name": "REVISION", "value": rev},
                            {"name": "TARGET", "value": format!("/s3/{path}")},
                            {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
                            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token", "optional": true}}}],
                        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/s3"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}}});
    let params = ApplyParams {
        workload: format!("model/{job}"),
        manifests: vec![manifest],
        watch: job_ref,
        prune: vec![],
        also_watch: vec![],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

pub async fn list_models(engine: &Engine, name: &str) -> ApiResult<Vec<ModelView>> {
    // The downloads are Jobs of namespace default: seen by who may read it.
    if !crate::service::people::access::may_read(engine, name, WORKLOAD_NAMESPACE).await? {
        return Ok(Vec::new());
    }
    let target = kube_target(engine, name).await?;
    let jobs = engine
        .cloud()
        .kube
        .list(
            &target,
            &ListQuery::of("batch/v1", "Job")
                .namespace(WORKLOAD_NAMESPACE)
                .labels(&format!("{WORKLOAD_LABEL}=model-download")),
        )
        .await
        .map_err(cloud_err)?;
    let mut out: Vec<ModelView> = jobs
        .iter()
        .map(|j| {
            let a = |k: &str| {
                j.pointer(&format!("/metadata/annotations/instantstart.io~1{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let state = workload_state(j);
            ModelView {
                model_id: a("model-id"),
                revision: a("revision"),
                claim: a("claim"),
                path: a("path"),
                job: j["metadata"]["name"].as_str().unwrap_or_default().into(),
                state: state.as_str().into(),
                message: match state {
                    crate::service::steps::workloads::WorkloadState::Failed(m) => Some(m),
                    _ => None,
                },
            }
        })
        .collect();
    out.sort_by(|a, b| a.model_id.cmp(&b.model_id));
    Ok(out)
}
