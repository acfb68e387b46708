//! Starting training operations: submit a job, delete one. Each validates its request, then hands
//! one submission to `service::start`.

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{json_of, replayed, start, Caller};
use crate::service::{request_hash, submit, Accepted, OpKind, Submission};

pub async fn training_job(
    engine: &Engine,
    name: &str,
    req: &super::TrainingJobRequest,
    packages: &super::PodPackages,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let kind = OpKind::TrainingJob;
    let body = json_of(req)?;
    if let Some(earlier) = replayed(engine, kind, name, &body, caller).await? {
        return Ok(earlier);
    }
    let params = super::training_params(engine, name, req, packages).await?;
    let sub = Submission {
        request_hash: Some(request_hash(kind.as_str(), name, &body)),
        ..Submission::on(kind, name, params, caller)
    };
    submit(engine, sub).await
}

pub async fn training_job_delete(
    engine: &Engine,
    name: &str,
    job: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::training_delete_params(engine, name, job).await?;
    super::end_following(engine, name, job).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn job_delete(
    engine: &Engine,
    name: &str,
    job: &str,
    kind: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::workloads::job_delete_params(engine, name, job, kind).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}
