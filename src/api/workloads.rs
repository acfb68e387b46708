//! Workloads: model downloads, jobs, self-managed inference deployments, the HyperPod software
//! update and the contents of a storage claim.

use axum::extract::State;

use super::ApiQuery;
use axum::Json;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::workloads::{self as w};
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_models, download_model))
        .routes(routes!(list_jobs))
        .routes(routes!(delete_job))
        .routes(routes!(list_deployments, create_deployment))
        .routes(routes!(get_deployment, delete_deployment))
        .routes(routes!(invoke_deployment))
        .routes(routes!(update_software))
        .routes(routes!(list_objects))
}

/// Download a Hugging Face model (modelId owner/name, optional revision) into a storage claim
/// (default s3-claim, under models/<modelId>/) with an in-cluster job. A token for gated models
/// goes to a Kubernetes Secret only. A model already downloaded (or downloading) is refused: see
/// model_list.
#[utoipa::path(post, path = "/api/clusters/{name}/models", operation_id = "model_download",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "minutes to an hour, by model size"}))),
    params(("name" = String, Path)),
    request_body = w::ModelDownloadRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn download_model(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<w::ModelDownloadRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::model_download(&state.engine, &name, &req, &caller)
            .await?,
    ))
}

/// Model downloads of a cluster: model id, revision, claim, path inside it, the job and its state
/// (pending, succeeded, failed with the reason).
#[utoipa::path(get, path = "/api/clusters/{name}/models", operation_id = "model_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [w::ModelView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_models(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::ModelView>>> {
    Ok(Json(w::list_models(&state.engine, &name).await?))
}

/// Jobs in namespace default: Kubernetes Jobs (model downloads among them), HyperPod PyTorch jobs
/// and Ray jobs, with state and message, newest first.
#[utoipa::path(get, path = "/api/clusters/{name}/jobs", operation_id = "job_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [w::JobView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_jobs(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::JobView>>> {
    Ok(Json(w::list_jobs(&state.engine, &name).await?))
}

/// Delete a job (kind job, pytorch or ray) and its pods; a model download's token Secret goes with
/// it. Its logs go too: confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/jobs/{job}", operation_id = "job_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("job" = String, Path), w::JobKindQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiQuery(q): ApiQuery<w::JobKindQuery>,
) -> ApiResult<Started> {
    let job = item;
    let kind = q.kind.as_deref();
    Ok(Started(
        crate::service::training::start::job_delete(&state.engine, &name, &job, kind, &caller)
            .await?,
    ))
}

/// Serve a model with your own container (default vllm/vllm-openai) as a Deployment and Service:
/// args as a list (no shell), GPUs per replica, replicas, port, service cluster-ip (default),
/// load-balancer (internal to the VPC) or external-load-balancer (internet, with
/// allowedSourceCidrs), optional instance type; the storage claim is mounted read-only at /s3.
/// Or serve it from a warm pool (pool; then assign pods with pool_assign). router puts an SGLang
/// router (cache-aware) of its own in front of two or more SGLang workers; autoscaling gives it
/// a KEDA ScaledObject of its own (min/max, target per replica on the engine's queue or the
/// router's requests). Posting again with the same name updates it (a router or autoscaling left
/// out is removed). Ask only for the model, GPUs and replicas.
#[utoipa::path(post, path = "/api/clusters/{name}/deployments", operation_id = "deployment_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "5-20 minutes (image pull and model load)"}))),
    params(("name" = String, Path)),
    request_body = w::DeploymentRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_deployment(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<w::DeploymentRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::workloads::start::deployment(
            &state.engine,
            &name,
            &req,
            state.prometheus_url.as_deref(),
            &caller,
        )
        .await?,
    ))
}

/// Inference deployments made here: image, replicas ready/wanted, state, service type and
/// endpoint, the warm pool and pods serving it, its router and its autoscaling.
#[utoipa::path(get, path = "/api/clusters/{name}/deployments", operation_id = "deployment_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [w::DeploymentView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_deployments(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<w::DeploymentView>>> {
    Ok(Json(w::list_deployments(&state.engine, &name).await?))
}

/// One inference deployment made here, as deployment_list shows it (with its team and
/// namespace on a cluster shared by teams).
#[utoipa::path(get, path = "/api/clusters/{name}/deployments/{deployment}", operation_id = "deployment_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("deployment" = String, Path)),
    responses((status = 200, body = w::DeploymentView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_deployment(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<w::DeploymentView>> {
    Ok(Json(w::get_deployment(&state.engine, &name, &item).await?))
}

/// Stop serving: removes the deployment, its service, router, ScaledObject and token Secret; pool
/// pods it had go back to their pool. Other models are not touched. Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/deployments/{deployment}", operation_id = "deployment_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("deployment" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_deployment(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let deployment = item;
    Ok(Started(
        crate::service::workloads::start::deployment_delete(
            &state.engine,
            &name,
            &deployment,
            &caller,
        )
        .await?,
    ))
}

/// Smoke-test a ready deployment made here: one chat completion for a prompt, through the
/// Kubernetes API server (never an arbitrary URL). Returns the server's answer as is.
#[utoipa::path(post, path = "/api/clusters/{name}/deployments/{deployment}/invoke", operation_id = "deployment_invoke",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("deployment" = String, Path)),
    request_body = w::InvokeRequest,
    responses((status = 200, description = "the model server's OpenAI-style chat completion", body = Object), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 502, body = Problem)))]
async fn invoke_deployment(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
    ApiJson(req): ApiJson<w::InvokeRequest>,
) -> ApiResult<Json<Value>> {
    let deployment = item;
    Ok(Json(
        w::invoke(&state.engine, &name, &deployment, &req).await?,
    ))
}

/// Update the HyperPod software (AMI) of the cluster's nodes, rolling: every group or the
/// `instanceGroups` named, `batchInstances` nodes (default 1) or `batchPercent` of them at a
/// time, `waitSeconds` between batches, rolled back when one of `rollbackAlarms` (CloudWatch
/// alarms) fires, to HyperPod's latest image or `imageId`. Nodes are re-imaged one batch at a
/// time (running jobs are interrupted; data only on a node's root volume is lost): confirm with
/// the user. The operation's parameters are the plan SageMaker is sent.
#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod/software-update", operation_id = "hyperpod_software_update",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "30-90 minutes on AWS (rolling, node by node)"}))),
    params(("name" = String, Path)),
    request_body = crate::service::groups::software::SoftwareUpdateRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_software(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    super::OptionalJson(req): super::OptionalJson<
        crate::service::groups::software::SoftwareUpdateRequest,
    >,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::groups::start::software_update(&state.engine, &name, &req, &caller).await?,
    ))
}

/// Keys in the bucket behind an S3 storage claim (at most 1000), optionally under a prefix such as
/// models/.
#[utoipa::path(get, path = "/api/clusters/{name}/storage/{claim}/objects", operation_id = "storage_objects_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("claim" = String, Path), w::ObjectsQuery),
    responses((status = 200, body = w::ObjectList), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn list_objects(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
    ApiQuery(q): ApiQuery<w::ObjectsQuery>,
) -> ApiResult<Json<w::ObjectList>> {
    let claim = item;
    Ok(Json(
        w::list_objects(&state.engine, &name, &claim, q.prefix.as_deref()).await?,
    ))
}
