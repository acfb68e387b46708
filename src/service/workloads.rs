//! Workload requests at the edge: model downloads, self-managed inference deployments, jobs,
//! the HyperPod software update and a look into a storage claim. Validates every field, turns a
//! request into the named objects an operation applies, and reads what is running.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::incluster::{kube_target, list_storage};
use super::steps::workloads::{
    workload_state, ApplyParams, DeleteParams, WORKLOAD_LABEL, WORKLOAD_NAMESPACE,
};
use super::validate;
use crate::cloud::{KubeTarget, ObjectRef, ServiceCall, MANAGED_BY};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

const MODEL_LABEL: &str = "instantstart.io/model";
/// Image of the download job: Python only; `huggingface_hub` is installed at start.
const DOWNLOAD_IMAGE: &str = "public.ecr.aws/docker/library/python:3.12-slim";
/// The download program. Every input comes from the environment, never from the text, so a
/// model id cannot change what runs.
const DOWNLOAD_SCRIPT: &str = r#"import os, subprocess, sys
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "huggingface_hub"])
from huggingface_hub import snapshot_download
snapshot_download(repo_id=os.environ["MODEL_ID"], revision=os.environ["REVISION"],
                  local_dir=os.environ["TARGET"], token=os.environ.get("HF_TOKEN") or None)
print("downloaded", os.environ["MODEL_ID"], "to", os.environ["TARGET"])
"#;

fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

fn labels(workload: &str, extra: &[(&str, &str)]) -> Value {
    let mut m = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (WORKLOAD_LABEL.to_string(), workload.to_string()),
    ]);
    for (k, v) in extra {
        m.insert(k.to_string(), v.to_string());
    }
    json!(m)
}

fn obj(api_version: &str, kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: Some(WORKLOAD_NAMESPACE.into()),
        name: name.into(),
    }
}

/// A DNS-label slug of free text plus a short hash, so distinct inputs never share a name.
fn slug(prefix: &str, text: &str, max: usize) -> String {
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
async fn put_token_secret(
    engine: &Engine,
    target: &KubeTarget,
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
    let manifest = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "namespace": WORKLOAD_NAMESPACE, "labels": labels(workload, &[])},
        "stringData": {"token": token}});
    engine
        .cloud()
        .kube
        .apply(target, &manifest)
        .await
        .map_err(cloud_err)
}

// ---------------------------------------------------------------------------------------------
// Model download
// ---------------------------------------------------------------------------------------------

/// `POST /api/clusters/{name}/models`: download a Hugging Face model into a storage claim.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelDownloadRequest {
    /// Hugging Face repository id, `owner/name` (e.g. `Qwen/Qwen3-8B`).
    pub model_id: String,
    /// Branch, tag or commit (default `main`).
    pub revision: Option<String>,
    /// Storage claim in namespace `default` to write to (default `s3-claim`); the model lands
    /// under `models/<modelId>/`.
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

fn model_id(field: &str, id: &str) -> ApiResult<()> {
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

fn revision(field: &str, rev: &str) -> ApiResult<()> {
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
    let job = slug("hf-download", &format!("{}@{rev}", req.model_id), 63);
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
            slug: "download-exists",
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
        put_token_secret(engine, &target, &secret, token, "model-download").await?;
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
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

pub async fn list_models(engine: &Engine, name: &str) -> ApiResult<Vec<ModelView>> {
    let target = kube_target(engine, name).await?;
    let jobs = engine
        .cloud()
        .kube
        .list(
            &target,
            "batch/v1",
            "Job",
            Some(WORKLOAD_NAMESPACE),
            Some(&format!("{WORKLOAD_LABEL}=model-download")),
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
                    super::steps::workloads::WorkloadState::Failed(m) => Some(m),
                    _ => None,
                },
            }
        })
        .collect();
    out.sort_by(|a, b| a.model_id.cmp(&b.model_id));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

/// Job kinds: (API name, apiVersion, kind).
const JOB_KINDS: &[(&str, &str, &str)] = &[
    ("job", "batch/v1", "Job"),
    (
        "pytorch",
        "sagemaker.amazonaws.com/v1",
        "HyperPodPyTorchJob",
    ),
    ("ray", "ray.io/v1", "RayJob"),
];

/// A job in namespace `default`: a Kubernetes Job, a HyperPod PyTorch job or a Ray job.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub name: String,
    /// `job`, `pytorch` or `ray`.
    pub kind: String,
    /// `pending`, `running`, `succeeded`, `failed` (or the operator's own word).
    pub state: String,
    pub created: Option<String>,
    pub message: Option<String>,
    /// Made by this control plane (e.g. a model download).
    pub managed: bool,
}

fn job_view(kind: &str, j: &Value) -> JobView {
    let s = |p: &str| j.pointer(p).and_then(Value::as_str).map(str::to_string);
    let (state, message) = if kind == "job" {
        match workload_state(j) {
            super::steps::workloads::WorkloadState::Failed(m) => ("failed".to_string(), Some(m)),
            super::steps::workloads::WorkloadState::Pending(m) if m.starts_with("running") => {
                ("running".to_string(), Some(m))
            }
            other => (other.as_str().to_string(), None),
        }
    } else {
        // Operators report their own words (RayJob `jobStatus`, HyperPod conditions).
        let state = s("/status/jobStatus")
            .or_else(|| {
                j.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().rev().find(|c| c["status"] == "True"))
                    .and_then(|c| c["type"].as_str().map(str::to_lowercase))
            })
            .unwrap_or_else(|| "pending".into())
            .to_lowercase();
        (state, s("/status/message"))
    };
    JobView {
        name: s("/metadata/name").unwrap_or_default(),
        kind: kind.into(),
        state,
        created: s("/metadata/creationTimestamp"),
        message,
        managed: j
            .pointer(&format!(
                "/metadata/labels/{}",
                MANAGED_BY.0.replace('/', "~1")
            ))
            .is_some(),
    }
}

pub async fn list_jobs(engine: &Engine, name: &str) -> ApiResult<Vec<JobView>> {
    let target = kube_target(engine, name).await?;
    let mut out = Vec::new();
    for (kind, api_version, k8s_kind) in JOB_KINDS {
        let items = match engine
            .cloud()
            .kube
            .list(
                &target,
                api_version,
                k8s_kind,
                Some(WORKLOAD_NAMESPACE),
                None,
            )
            .await
        {
            Ok(items) => items,
            // No operator installed for this kind: no jobs of it.
            Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => continue,
            Err(e) => return Err(cloud_err(e)),
        };
        out.extend(items.iter().map(|j| job_view(kind, j)));
    }
    out.sort_by(|a, b| b.created.cmp(&a.created).then(a.name.cmp(&b.name)));
    Ok(out)
}

/// Query of `DELETE /api/clusters/{name}/jobs/{job}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobKindQuery {
    /// `job` (default), `pytorch` or `ray`.
    pub kind: Option<String>,
}

/// A job deletion: the job must exist; a model download's token Secret goes with it.
pub async fn job_delete_params(
    engine: &Engine,
    name: &str,
    job: &str,
    kind: Option<&str>,
) -> ApiResult<Value> {
    validate::dns_label("job", "job name", job)?;
    let kind = kind.unwrap_or("job");
    let Some((_, api_version, k8s_kind)) = JOB_KINDS.iter().find(|(k, _, _)| *k == kind) else {
        return Err(ApiError::validation_hint(
            "kind",
            format!("`{}` is not a job kind", validate::truncate(kind)),
            json!(JOB_KINDS.iter().map(|(k, _, _)| k).collect::<Vec<_>>()),
        ));
    };
    let jobs = list_jobs(engine, name).await?;
    if !jobs.iter().any(|j| j.name == job && j.kind == kind) {
        return Err(ApiError::NotFound {
            what: format!("{kind} `{job}` in namespace default of `{name}`"),
            hint: Some(Box::new(json!(jobs
                .iter()
                .map(|j| format!("{}/{}", j.kind, j.name))
                .collect::<Vec<_>>()))),
        });
    }
    let mut objects = vec![obj(api_version, k8s_kind, job)];
    if job.starts_with("hf-download-") {
        objects.push(obj("v1", "Secret", &format!("{job}-token")));
    }
    let params = DeleteParams {
        workload: format!("job/{kind}/{job}"),
        objects,
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

// ---------------------------------------------------------------------------------------------
// Self-managed inference
// ---------------------------------------------------------------------------------------------

/// `POST /api/clusters/{name}/deployments`: a model server (vLLM, SGLang or any image) as a
/// Deployment plus a Service.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentRequest {
    /// 1–40 lowercase letters, digits, hyphens: names the Deployment and its Service.
    pub deployment_name: String,
    /// Container image (default `vllm/vllm-openai:latest`).
    pub image: Option<String>,
    /// Container arguments, one per item (no shell), e.g. `["--model", "/s3/models/Qwen/Qwen3-8B"]`.
    pub args: Option<Vec<String>>,
    /// GPUs per replica, 1–8 (default 1).
    pub gpus: Option<i64>,
    /// 1–16 (default 1).
    pub replicas: Option<i64>,
    /// Port the server listens on (default 8000).
    pub port: Option<i64>,
    /// `cluster-ip` (default: reachable inside the cluster and through `deployment_invoke`) or
    /// `load-balancer` (an internal AWS load balancer in the VPC; never internet-facing).
    pub service: Option<String>,
    /// Pin replicas to an instance type of the cluster's groups.
    pub instance_type: Option<String>,
    /// Storage claim mounted read-only at `/s3` (default `s3-claim` when it exists).
    pub claim: Option<String>,
    /// For gated models; kept in a Kubernetes Secret only.
    pub hf_token: Option<String>,
}

/// A deployment and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentView {
    pub name: String,
    pub image: String,
    pub replicas: u64,
    pub ready_replicas: u64,
    /// `ready`, `pending` or `failed`.
    pub state: String,
    pub service: String,
    /// The service's port.
    pub port: Option<u16>,
    /// `http://<cluster IP>:<port>` or the load balancer's host, once known.
    pub endpoint: Option<String>,
}

fn image(field: &str, image: &str) -> ApiResult<()> {
    let ok = (1..=255).contains(&image.len())
        && !image.starts_with(['-', '.', '/', ':'])
        && image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@'));
    validate::require(
        ok,
        field,
        format!("`{}` is not a container image", validate::truncate(image)),
        json!("registry/repository:tag, e.g. vllm/vllm-openai:latest"),
    )
}

fn bounded(
    field: &str,
    v: Option<i64>,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
) -> ApiResult<i64> {
    let v = v.unwrap_or(default);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("{v} is out of range"),
            json!(format!("{} to {}", range.start(), range.end())),
        ))
    }
}

const SERVICE_TYPES: &[&str] = &["cluster-ip", "load-balancer"];

pub async fn deployment_params(
    engine: &Engine,
    name: &str,
    req: &DeploymentRequest,
) -> ApiResult<Value> {
    validate::dns_label("deploymentName", "deployment name", &req.deployment_name)?;
    if req.deployment_name.len() > 40 {
        return Err(ApiError::validation_hint(
            "deploymentName",
            "a deployment name has at most 40 characters",
            json!("e.g. qwen3-8b"),
        ));
    }
    let img = req.image.as_deref().unwrap_or("vllm/vllm-openai:latest");
    image("image", img)?;
    let args = req.args.clone().unwrap_or_default();
    if args.len() > 64 || args.iter().any(|a| a.len() > 1024 || a.contains('\0')) {
        return Err(ApiError::validation_hint(
            "args",
            "at most 64 arguments of at most 1024 characters each",
            json!(["--model", "/s3/models/owner/name"]),
        ));
    }
    let gpus = bounded("gpus", req.gpus, 1, 1..=8)?;
    let replicas = bounded("replicas", req.replicas, 1, 1..=16)?;
    let port = bounded("port", req.port, 8000, 1..=65535)?;
    let service = req.service.as_deref().unwrap_or("cluster-ip");
    if !SERVICE_TYPES.contains(&service) {
        return Err(ApiError::validation_hint(
            "service",
            format!("`{}` is not a service shape", validate::truncate(service)),
            json!(SERVICE_TYPES),
        ));
    }
    let groups = super::list_groups(engine, name).await?;
    if let Some(t) = &req.instance_type {
        if !groups.iter().any(|g| &g.instance_type == t) {
            return Err(ApiError::validation_hint(
                "instanceType",
                format!(
                    "no instance group of `{name}` has {}",
                    validate::truncate(t)
                ),
                json!(groups.iter().map(|g| &g.instance_type).collect::<Vec<_>>()),
            ));
        }
    }
    // A replica runs on one node: it cannot ask for more GPUs than the largest node has.
    let per_node = |t: &str| i64::from(crate::cloud::gpus_per_instance(t));
    let most = match &req.instance_type {
        Some(t) => per_node(t),
        None => groups
            .iter()
            .map(|g| per_node(&g.instance_type))
            .max()
            .unwrap_or(0),
    };
    if gpus > most {
        return Err(ApiError::validation_hint(
            "gpus",
            format!("a replica needs {gpus} GPUs but no node of `{name}` has more than {most}"),
            json!(format!(
                "1 to {most}, or add an instance group with larger instances"
            )),
        ));
    }
    let claims = list_storage(engine, name).await?;
    let in_default = |c: &str| {
        claims
            .iter()
            .any(|v| v.claim_name == c && v.namespace == WORKLOAD_NAMESPACE)
    };
    let claim = match req.claim.as_deref() {
        Some(c) if in_default(c) => Some(c.to_string()),
        Some(c) => {
            return Err(ApiError::validation_hint(
                "claim",
                format!(
                    "`{}` is not a storage claim in namespace default",
                    validate::truncate(c)
                ),
                json!(claims.iter().map(|c| &c.claim_name).collect::<Vec<_>>()),
            ))
        }
        None => in_default("s3-claim").then(|| "s3-claim".to_string()),
    };
    let target = kube_target(engine, name).await?;
    let secret = format!("{}-token", req.deployment_name);
    if let Some(token) = &req.hf_token {
        put_token_secret(engine, &target, &secret, token, "inference").await?;
    }
    let l = labels(
        "inference",
        &[("app.kubernetes.io/name", &req.deployment_name)],
    );
    let mut mounts = vec![json!({"name": "shm", "mountPath": "/dev/shm"})];
    let mut volumes =
        vec![json!({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}})];
    if let Some(c) = &claim {
        mounts.push(json!({"name": "data", "mountPath": "/s3", "readOnly": true}));
        volumes.push(
            json!({"name": "data", "persistentVolumeClaim": {"claimName": c, "readOnly": true}}),
        );
    }
    let mut pod = json!({
        "containers": [{"name": "server", "image": img, "args": args,
            "ports": [{"containerPort": port, "name": "http"}],
            "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token", "optional": true}}}],
            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10},
            "volumeMounts": mounts}],
        "volumes": volumes});
    if let Some(t) = &req.instance_type {
        pod["nodeSelector"] = json!({"node.kubernetes.io/instance-type": t});
    }
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": req.deployment_name, "namespace": WORKLOAD_NAMESPACE, "labels": l},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 3600,
            "selector": {"matchLabels": {"app.kubernetes.io/name": req.deployment_name}},
            "template": {"metadata": {"labels": l}, "spec": pod}}});
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": req.deployment_name, "namespace": WORKLOAD_NAMESPACE, "labels": l},
        "spec": {"type": if service == "load-balancer" { "LoadBalancer" } else { "ClusterIP" },
            "selector": {"app.kubernetes.io/name": req.deployment_name},
            "ports": [{"name": "http", "port": port, "targetPort": port}]}});
    if service == "load-balancer" {
        // Internal to the VPC: a model endpoint is never put on the internet by default.
        svc["metadata"]["annotations"] = json!({"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
                   "service.beta.kubernetes.io/aws-load-balancer-internal": "true"});
    }
    let params = ApplyParams {
        workload: format!("deployment/{}", req.deployment_name),
        manifests: vec![deployment, svc],
        watch: obj("apps/v1", "Deployment", &req.deployment_name),
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

pub async fn list_deployments(engine: &Engine, name: &str) -> ApiResult<Vec<DeploymentView>> {
    let target = kube_target(engine, name).await?;
    let selector = format!("{WORKLOAD_LABEL}=inference");
    let list = |api_version: &'static str, kind: &'static str| {
        let target = target.clone();
        let selector = selector.clone();
        async move {
            engine
                .cloud()
                .kube
                .list(
                    &target,
                    api_version,
                    kind,
                    Some(WORKLOAD_NAMESPACE),
                    Some(&selector),
                )
                .await
                .map_err(cloud_err)
        }
    };
    let deployments = list("apps/v1", "Deployment").await?;
    let services = list("v1", "Service").await?;
    let mut out: Vec<DeploymentView> = deployments
        .iter()
        .map(|d| {
            let name = d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let svc = services
                .iter()
                .find(|s| s["metadata"]["name"] == name.as_str());
            let port = svc
                .and_then(|s| s.pointer("/spec/ports/0/port"))
                .and_then(Value::as_u64);
            let endpoint = svc.and_then(|s| {
                let lb = s
                    .pointer("/status/loadBalancer/ingress/0/hostname")
                    .and_then(Value::as_str);
                let ip = s.pointer("/spec/clusterIP").and_then(Value::as_str);
                match (lb, ip, port) {
                    (Some(host), _, Some(p)) => Some(format!("http://{host}:{p}")),
                    (None, Some(ip), Some(p)) if ip != "None" => Some(format!("http://{ip}:{p}")),
                    _ => None,
                }
            });
            DeploymentView {
                image: d
                    .pointer("/spec/template/spec/containers/0/image")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
                replicas: d
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1),
                ready_replicas: d
                    .pointer("/status/readyReplicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                state: workload_state(d).as_str().into(),
                service: svc
                    .and_then(|s| s.pointer("/spec/type"))
                    .and_then(Value::as_str)
                    .unwrap_or("none")
                    .into(),
                endpoint,
                port: port.and_then(|p| u16::try_from(p).ok()),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

async fn known_deployment(engine: &Engine, name: &str, dep: &str) -> ApiResult<DeploymentView> {
    validate::dns_label("deployment", "deployment name", dep)?;
    let all = list_deployments(engine, name).await?;
    let names: Vec<String> = all.iter().map(|d| d.name.clone()).collect();
    all.into_iter()
        .find(|d| d.name == dep)
        .ok_or_else(|| ApiError::NotFound {
            what: format!("deployment `{dep}` of `{name}` (only deployments made here)"),
            hint: Some(Box::new(json!(names))),
        })
}

pub async fn deployment_delete_params(engine: &Engine, name: &str, dep: &str) -> ApiResult<Value> {
    known_deployment(engine, name, dep).await?;
    let params = DeleteParams {
        workload: format!("deployment/{dep}"),
        objects: vec![
            obj("v1", "Service", dep),
            obj("apps/v1", "Deployment", dep),
            obj("v1", "Secret", &format!("{dep}-token")),
        ],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

/// `POST /api/clusters/{name}/deployments/{deployment}/invoke`: one chat completion.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvokeRequest {
    /// The user message (1–16000 characters).
    pub prompt: String,
    /// 1–4096 (default 256).
    pub max_tokens: Option<i64>,
}

/// Sends one OpenAI-style chat request to a deployment this control plane made, through the
/// Kubernetes API server's service proxy — never to an address the request names.
pub async fn invoke(
    engine: &Engine,
    name: &str,
    dep: &str,
    req: &InvokeRequest,
) -> ApiResult<Value> {
    if req.prompt.is_empty() || req.prompt.chars().count() > 16_000 {
        return Err(ApiError::validation_hint(
            "prompt",
            "the prompt must have 1 to 16000 characters",
            json!("e.g. Say hello in one word."),
        ));
    }
    let max_tokens = bounded("maxTokens", req.max_tokens, 256, 1..=4096)?;
    let d = known_deployment(engine, name, dep).await?;
    if d.state != "ready" {
        return Err(ApiError::Conflict {
            slug: "deployment-not-ready",
            detail: format!(
                "`{dep}` has {}/{} replicas ready: wait for its operation (operation_get) first",
                d.ready_replicas, d.replicas
            ),
            field: None,
            operation_id: None,
        });
    }
    let target = kube_target(engine, name).await?;
    let Some(port) = d.port else {
        return Err(ApiError::Conflict {
            slug: "deployment-not-ready",
            detail: format!("`{dep}` has no service port: delete and deploy it again"),
            field: None,
            operation_id: None,
        });
    };
    let body = json!({"model": "", "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": req.prompt}]});
    let call = ServiceCall {
        namespace: WORKLOAD_NAMESPACE,
        name: dep,
        port,
        path: "v1/chat/completions",
    };
    engine
        .cloud()
        .kube
        .service_post(&target, &call, &body)
        .await
        .map_err(cloud_err)
}

// ---------------------------------------------------------------------------------------------
// Storage contents
// ---------------------------------------------------------------------------------------------

/// Query of `GET /api/clusters/{name}/storage/{claim}/objects`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ObjectsQuery {
    /// Only keys under this prefix (e.g. `models/`).
    pub prefix: Option<String>,
}

/// Keys in the bucket behind an S3 claim (at most 1000).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectList {
    pub claim: String,
    pub bucket: String,
    pub prefix: String,
    pub keys: Vec<String>,
    /// More keys exist than were returned.
    pub truncated: bool,
}

pub async fn list_objects(
    engine: &Engine,
    name: &str,
    claim: &str,
    prefix: Option<&str>,
) -> ApiResult<ObjectList> {
    validate::dns_label("claim", "claim name", claim)?;
    let prefix = prefix.unwrap_or("");
    if prefix.len() > 512 || prefix.starts_with('/') || prefix.contains("..") {
        return Err(ApiError::validation_hint(
            "prefix",
            "not a key prefix",
            json!("e.g. models/"),
        ));
    }
    let claims = list_storage(engine, name).await?;
    let Some(c) = claims.iter().find(|c| c.claim_name == claim) else {
        return Err(ApiError::NotFound {
            what: format!("claim `{claim}` of `{name}`"),
            hint: Some(Box::new(json!(claims
                .iter()
                .map(|c| &c.claim_name)
                .collect::<Vec<_>>()))),
        });
    };
    let Some(bucket) = c.bucket.clone() else {
        return Err(ApiError::Conflict {
            slug: "not-s3",
            detail: format!(
                "`{claim}` is an FSx for Lustre volume, not an S3 bucket: look into it from a pod"
            ),
            field: Some("claim".into()),
            operation_id: None,
        });
    };
    const LIMIT: usize = 1000;
    let mut keys = engine
        .cloud()
        .objects
        .list_objects(&bucket, prefix)
        .await
        .map_err(cloud_err)?;
    let truncated = keys.len() > LIMIT;
    keys.truncate(LIMIT);
    Ok(ObjectList {
        claim: claim.into(),
        bucket,
        prefix: prefix.into(),
        keys,
        truncated,
    })
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
