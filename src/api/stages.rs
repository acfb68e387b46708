//! The stages of a cluster run on their own or as one pipeline: dependencies, HyperPod, storage.

use axum::extract::State;

use super::ApiQuery;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::{ApiJson, OptionalJson};
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::{self, Accepted, CreateHyperPodRequest, PipelineRequest};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_pipeline))
        .routes(routes!(get_dependencies, create_dependencies))
        .routes(routes!(create_hyperpod))
        .routes(routes!(list_storage, create_storage))
        .routes(routes!(delete_storage))
}

/// Create a whole cluster in one call: network + EKS, dependencies, HyperPod, storage, in order. A
/// failed stage stops the pipeline; operation_retry resumes it.
#[utoipa::path(post, path = "/api/pipelines", operation_id = "pipeline_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "30-45 minutes on AWS"}))),
    request_body = PipelineRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = r"^[\x21-\x7e]{1,255}$", description = "Deduplicates retries of the same request: 1–255 visible ASCII characters, e.g. a UUID")),
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_pipeline(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PipelineRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::create_pipeline(&state.engine, &req, &caller).await?,
    ))
}

/// Each dependency component's live state (pending, installing, ready, degraded, failed) with the
/// reason. dependencies_install reconciles: it changes only what differs.
#[utoipa::path(get, path = "/api/clusters/{name}/dependencies", operation_id = "dependencies_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = service::cluster::live::DependencyReport), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_dependencies(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<service::cluster::live::DependencyReport>> {
    Ok(Json(
        service::cluster::live::dependencies(&state.engine, &name).await?,
    ))
}

/// Reconcile the add-ons and in-cluster components HyperPod needs, in dependency order: reads each
/// component and changes only what differs (safe to re-run). Needs the cluster stage to have
/// succeeded; dependencies_get shows per-component state.
#[utoipa::path(post, path = "/api/clusters/{name}/dependencies", operation_id = "dependencies_install",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "3-5 minutes on AWS"}))),
    params(("name" = String, Path)),
    request_body(content = service::DependenciesRequest, description = "optional"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn create_dependencies(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    OptionalJson(req): OptionalJson<service::DependenciesRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::dependencies(&state.engine, &name, &req, &caller).await?,
    ))
}

/// Create the HyperPod cluster (node recovery Automatic) with its first instance group in the
/// chosen zone. Ask only for zone, instance type, count and capacity type.
#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod", operation_id = "hyperpod_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "15-25 minutes on AWS"}))),
    params(("name" = String, Path)),
    request_body = CreateHyperPodRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_hyperpod(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<CreateHyperPodRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::hyperpod(&state.engine, &name, &req, &caller).await?,
    ))
}

/// Create a storage claim: with no arguments the shared S3 bucket as `s3-claim` (mounted at /s3 by
/// workloads); or another S3 bucket, or an existing FSx for Lustre file system (kind `fsx`). Claim
/// names are unique per namespace.
#[utoipa::path(post, path = "/api/clusters/{name}/storage", operation_id = "storage_setup",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "1-2 minutes on AWS"}))),
    params(("name" = String, Path)),
    request_body(content = service::storage::StorageRequest, description = "optional: omitted, the shared bucket is mounted as `s3-claim`"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_storage(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    OptionalJson(req): OptionalJson<service::storage::StorageRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::storage::start::storage(&state.engine, &name, &req, &caller).await?,
    ))
}

/// The storage claims InstantStart made on the cluster: claim, namespace, S3 bucket or FSx file
/// system, capacity, phase.
#[utoipa::path(get, path = "/api/clusters/{name}/storage", operation_id = "storage_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [crate::service::steps::storage::ClaimView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_storage(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<crate::service::steps::storage::ClaimView>>> {
    Ok(Json(
        service::storage::list_storage(&state.engine, &name).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NamespaceQuery {
    /// Namespace of the claim (default `default`).
    #[param(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    namespace: Option<String>,
}

/// Remove a storage claim and its volume from the cluster (the bucket or file system and its data
/// stay). Pods using it keep it until they end. The cluster's own claim (namespace default) is
/// refused (409) while teams' namespaces mount copies of it. Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/storage/{claim}", operation_id = "storage_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("claim" = String, Path), NamespaceQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_storage(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiQuery(q): ApiQuery<NamespaceQuery>,
) -> ApiResult<Started> {
    let claim = item;
    let namespace = q.namespace.as_deref();
    Ok(Started(
        crate::service::storage::start::storage_delete(
            &state.engine,
            &name,
            &claim,
            namespace,
            &caller,
        )
        .await?,
    ))
}
