//! Jobs of every kind the cluster runs (Jobs, HyperPod PyTorch jobs, Ray jobs): listed, deleted.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ListQuery;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::workloads::{
    cloud_err, obj, workload_state, DeleteParams, MANAGED_BY, WORKLOAD_NAMESPACE,
};

/// Job kinds: (API name, apiVersion, kind).
pub(super) const JOB_KINDS: &[(&str, &str, &str)] = &[
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

pub(super) fn job_view(kind: &str, j: &Value) -> JobView {
    let s = |p: &str| j.pointer(p).and_then(Value::as_str).map(str::to_string);
    let (state, message) = if kind == "job" {
        match workload_state(j) {
            crate::service::steps::workloads::WorkloadState::Failed(m) => {
                ("failed".to_string(), Some(m))
            }
            crate::service::steps::workloads::WorkloadState::Pending(m)
                if m.starts_with("running") =>
            {
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
                &ListQuery::of(api_version, k8s_kind).namespace(WORKLOAD_NAMESPACE),
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
    #[param(pattern = "^(job|pytorch|ray)$")]
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
        release: None,
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}
