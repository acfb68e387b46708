//! REST handlers and the OpenAPI document. Each handler validates, calls one `service/`
//! function and returns JSON (or `202` with the operation it started).

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, OpenApi, ToSchema};

use super::{Actor, ApiJson, IdempotencyKey, OptionalJson};
use crate::cloud::Zone;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service::{
    self, steps::Catalog, Accepted, ActiveClusterRequest, ClusterView, CreateClusterRequest,
    CreateHyperPodRequest, EmptyRequest, PipelineRequest, Submission,
};
use crate::store::{ClusterRecord, OpState, Operation, Phase, PhaseState};
use crate::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(asset))
        .route("/api/events", get(super::events::events))
        .route("/api/aws/identity", get(identity))
        .route("/healthz", get(healthz))
        .route("/api/openapi.json", get(openapi))
        .route("/api/aws/zones", get(zones))
        .route("/api/aws/instance-types", get(instance_types))
        .route("/api/aws/preflight", get(preflight))
        .route("/api/clusters", get(list_clusters).post(create_cluster))
        .route("/api/clusters/import", post(import_cluster))
        .route(
            "/api/clusters/{name}",
            get(get_cluster).delete(delete_cluster),
        )
        .route(
            "/api/clusters/{name}/dependencies",
            get(get_dependencies).post(create_dependencies),
        )
        .route("/api/clusters/{name}/hyperpod", post(create_hyperpod))
        .route(
            "/api/clusters/{name}/storage",
            get(list_storage).post(create_storage),
        )
        .route(
            "/api/clusters/{name}/storage/{claim}",
            axum::routing::delete(delete_storage),
        )
        .route("/api/clusters/{name}/status", get(cluster_status))
        .route(
            "/api/clusters/{name}/features",
            get(get_features).patch(patch_features),
        )
        .route(
            "/api/clusters/{name}/instance-groups",
            get(list_groups).post(add_group),
        )
        .route(
            "/api/clusters/{name}/instance-groups/{group}",
            axum::routing::patch(update_group).delete(delete_group),
        )
        .route("/api/clusters/{name}/nodes", get(list_nodes))
        .route("/api/clusters/{name}/nodes/{id}/reboot", post(reboot_node))
        .route(
            "/api/clusters/{name}/nodes/{id}/replace",
            post(replace_node),
        )
        .route("/api/clusters/{name}/nodes/{id}/delete", post(delete_node))
        .route("/api/active-cluster", get(get_active).put(put_active))
        .route("/api/pipelines", post(create_pipeline))
        .route("/api/operations", get(list_operations))
        .route("/api/operations/{id}", get(get_operation))
        .route("/api/operations/{id}/retry", post(retry_operation))
        .route("/api/operations/{id}/cancel", post(cancel_operation))
        .route("/api/sandbox/calls", get(sandbox_calls))
        .route("/api/agent/config", get(agent_config))
        .merge(super::workloads::routes())
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "InstantStart",
        description = "Control plane for SageMaker HyperPod clusters on EKS. Errors are application/problem+json."
    ),
    paths(
        healthz,
        identity,
        zones,
        instance_types,
        preflight,
        agent_config,
        list_clusters,
        create_cluster,
        import_cluster,
        get_cluster,
        delete_cluster,
        get_dependencies,
        create_dependencies,
        create_hyperpod,
        list_storage,
        create_storage,
        delete_storage,
        cluster_status,
        get_features,
        patch_features,
        list_groups,
        add_group,
        update_group,
        delete_group,
        list_nodes,
        reboot_node,
        replace_node,
        delete_node,
        get_active,
        put_active,
        create_pipeline,
        list_operations,
        get_operation,
        retry_operation,
        cancel_operation,
        sandbox_calls,
        super::workloads::download_model,
        super::workloads::list_models,
        super::workloads::list_jobs,
        super::workloads::delete_job,
        super::workloads::create_deployment,
        super::workloads::list_deployments,
        super::workloads::delete_deployment,
        super::workloads::invoke_deployment,
        super::workloads::update_software,
        super::workloads::list_objects
    ),
    components(schemas(
        Problem,
        Accepted,
        Operation,
        Phase,
        OpState,
        PhaseState,
        ClusterRecord,
        ClusterView,
        CreateClusterRequest,
        CreateHyperPodRequest,
        PipelineRequest,
        EmptyRequest,
        ActiveClusterRequest,
        Zone,
        Health,
        ActiveCluster,
        InstanceTypes,
        crate::cloud::sandbox::CallCounts,
        service::Preflight,
        service::QuotaCheck,
        crate::cloud::TrainingPlan,
        crate::cloud::ClusterNode,
        service::NodeList,
        service::GroupView,
        service::UpdateGroupRequest,
        Unchanged,
    ))
)]
pub struct ApiDoc;

/// The operation started by a request, as `202 Accepted` (or `200` for a replayed key).
fn accepted(a: Accepted) -> Response {
    let status = if a.created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let location = a.status_url.clone();
    let mut r = (status, Json(a)).into_response();
    if let Ok(v) = header::HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// The web UI: plain HTML, CSS and ES modules embedded at build time (no build step, no
/// external host).
async fn index() -> Response {
    static_file(
        "text/html; charset=utf-8",
        include_str!("../../web/index.html"),
    )
}

const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/app.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/views.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../../web/app.css"),
    ),
];

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ct, body)) => static_file(ct, body),
        None => ApiError::not_found(format!("UI file `{file}`")).into_response(),
    }
}

fn static_file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub account: String,
    /// The IAM principal the control plane acts as.
    pub arn: String,
    pub region: String,
    /// `aws` or `sandbox`.
    pub cloud: String,
}

#[utoipa::path(get, path = "/api/aws/identity", responses((status = 200, body = Identity), (status = 502, body = Problem)))]
async fn identity(State(state): State<AppState>) -> ApiResult<Json<Identity>> {
    let cloud = state.engine.cloud();
    let me = cloud.iam.caller_identity().await?;
    Ok(Json(Identity {
        account: me.account,
        arn: me.arn,
        region: cloud.network.region(),
        cloud: cloud.mode.as_str().into(),
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` when the cloud answers, `degraded` otherwise.
    pub status: String,
    /// `aws` or `sandbox`.
    pub cloud: String,
    pub region: String,
    /// Why the cloud cannot be used, and what to do.
    pub warning: Option<String>,
    pub version: String,
}

#[utoipa::path(get, path = "/healthz", responses((status = 200, body = Health)))]
async fn healthz(State(state): State<AppState>) -> Json<Health> {
    let warning = state.cloud_warning.clone();
    Json(Health {
        status: if warning.is_some() { "degraded" } else { "ok" }.into(),
        cloud: state.engine.cloud().mode.as_str().into(),
        region: state.engine.cloud().network.region(),
        warning,
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[utoipa::path(get, path = "/api/aws/zones", responses((status = 200, body = [Zone]), (status = 502, body = Problem)))]
async fn zones(State(state): State<AppState>) -> ApiResult<Json<Vec<Zone>>> {
    Ok(Json(
        state
            .engine
            .cloud()
            .network
            .describe_availability_zones()
            .await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ZoneQuery {
    /// Availability Zone name, e.g. `us-west-2a`.
    zone: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypes {
    pub zone: String,
    /// Accelerated SageMaker instance types offered in the zone.
    pub instance_types: Vec<String>,
}

#[utoipa::path(get, path = "/api/aws/instance-types", params(ZoneQuery),
    responses((status = 200, body = InstanceTypes), (status = 422, body = Problem)))]
async fn instance_types(
    State(state): State<AppState>,
    query: Result<Query<ZoneQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<InstanceTypes>> {
    let Query(q) = query.map_err(|e| ApiError::validation("zone", e.body_text()))?;
    let cloud = state.engine.cloud();
    let zones = cloud.network.describe_availability_zones().await?;
    let zone = service::validate::zone("zone", &q.zone, &zones)?;
    let mut types: Vec<String> = cloud
        .network
        .describe_instance_type_offerings(&zone.name)
        .await?
        .into_iter()
        .filter(|t| ["p", "g", "trn", "inf"].iter().any(|f| t.starts_with(f)))
        .map(|t| format!("ml.{t}"))
        .collect();
    types.sort();
    Ok(Json(InstanceTypes {
        zone: zone.name,
        instance_types: types,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreflightQuery {
    /// e.g. `ml.p5.48xlarge`: check its HyperPod cluster-usage quota.
    instance_type: Option<String>,
    /// How many instances you plan (default 1).
    count: Option<i64>,
    /// `on-demand`, `spot` or `training-plan`: adds the caveats of that capacity.
    capacity_type: Option<String>,
}

#[utoipa::path(get, path = "/api/aws/preflight", params(PreflightQuery),
    responses((status = 200, body = service::Preflight), (status = 422, body = Problem)))]
async fn preflight(
    State(state): State<AppState>,
    query: Result<Query<PreflightQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<service::Preflight>> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    Ok(Json(
        service::preflight(
            &state.engine,
            q.instance_type.as_deref(),
            q.count,
            q.capacity_type.as_deref(),
        )
        .await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters", responses((status = 200, body = [ClusterView])))]
async fn list_clusters(State(state): State<AppState>) -> ApiResult<Json<Vec<ClusterView>>> {
    let mut views = Vec::new();
    for c in state.engine.store().list_clusters().await? {
        views.push(service::cluster_view(&state.engine, &c.name).await?);
    }
    Ok(Json(views))
}

#[utoipa::path(post, path = "/api/clusters", request_body = CreateClusterRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries of the same request")),
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_cluster(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    ApiJson(req): ApiJson<CreateClusterRequest>,
) -> ApiResult<Response> {
    let params = service::cluster_params(&state.engine, &req, None).await?;
    let body = serde_json::to_value(&req).map_err(anyhow::Error::from)?;
    let spec = serde_json::to_value(&params).map_err(anyhow::Error::from)?;
    let sub = Submission {
        kind: "cluster",
        cluster: req.name.clone(),
        request_hash: Some(service::request_hash("cluster", &req.name, &body)),
        params: spec.clone(),
        actor: actor.0,
        idempotency_key: key.0,
        parent_id: None,
        new_cluster: Some((params.region.clone(), spec)),
    };
    Ok(accepted(service::submit(&state.engine, sub).await?))
}

pub(super) fn check_name(name: &str) -> ApiResult<()> {
    service::validate::cluster_name("name", name)
}

#[utoipa::path(get, path = "/api/clusters/{name}", params(("name" = String, Path)),
    responses((status = 200, body = ClusterView), (status = 404, body = Problem)))]
async fn get_cluster(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<ClusterView>> {
    check_name(&name)?;
    Ok(Json(service::cluster_view(&state.engine, &name).await?))
}

#[utoipa::path(delete, path = "/api/clusters/{name}", params(("name" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_cluster(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    check_name(&name)?;
    stage(&state, "delete-cluster", name, json!({}), actor, key).await
}

pub(super) async fn stage(
    state: &AppState,
    kind: &'static str,
    name: String,
    params: Value,
    actor: Actor,
    key: IdempotencyKey,
) -> ApiResult<Response> {
    let sub = Submission {
        kind,
        request_hash: Some(service::request_hash(kind, &name, &params)),
        cluster: name,
        params,
        actor: actor.0,
        idempotency_key: key.0,
        parent_id: None,
        new_cluster: None,
    };
    Ok(accepted(service::submit(&state.engine, sub).await?))
}

#[utoipa::path(post, path = "/api/clusters/{name}/dependencies", params(("name" = String, Path)),
    request_body(content = service::DependenciesRequest, description = "optional"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn create_dependencies(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    OptionalJson(req): OptionalJson<service::DependenciesRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = json!({"manageExisting": req.manage_existing.unwrap_or(false)});
    stage(&state, "dependencies", name, params, actor, key).await
}

#[utoipa::path(post, path = "/api/clusters/import", request_body = service::ImportRequest,
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn import_cluster(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    ApiJson(req): ApiJson<service::ImportRequest>,
) -> ApiResult<Response> {
    let (region, params) = service::import_params(&state.engine, &req)?;
    let name = req.eks_cluster_name.clone();
    let sub = Submission {
        kind: "import",
        request_hash: Some(service::request_hash("import", &name, &params)),
        cluster: name,
        params: params.clone(),
        actor: actor.0,
        idempotency_key: key.0,
        parent_id: None,
        new_cluster: Some((region, params)),
    };
    Ok(accepted(service::submit(&state.engine, sub).await?))
}

#[utoipa::path(post, path = "/api/clusters/{name}/hyperpod", params(("name" = String, Path)),
    request_body = CreateHyperPodRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_hyperpod(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<CreateHyperPodRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = service::hyperpod_params(&state.engine, &req).await?;
    let params = serde_json::to_value(params).map_err(anyhow::Error::from)?;
    stage(&state, "hyperpod", name, params, actor, key).await
}

#[utoipa::path(post, path = "/api/clusters/{name}/storage", params(("name" = String, Path)),
    request_body(content = service::incluster::StorageRequest, description = "optional: omitted, the shared bucket is mounted as `s3-claim`"),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_storage(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    OptionalJson(req): OptionalJson<service::incluster::StorageRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = service::incluster::storage_params(&state.engine, &name, &req).await?;
    let params = serde_json::to_value(params).map_err(anyhow::Error::from)?;
    stage(&state, "storage", name, params, actor, key).await
}

#[utoipa::path(get, path = "/api/clusters/{name}/storage", params(("name" = String, Path)),
    responses((status = 200, body = [crate::service::steps::storage::ClaimView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_storage(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<crate::service::steps::storage::ClaimView>>> {
    check_name(&name)?;
    Ok(Json(
        service::incluster::list_storage(&state.engine, &name).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NamespaceQuery {
    /// Namespace of the claim (default `default`).
    namespace: Option<String>,
}

#[utoipa::path(delete, path = "/api/clusters/{name}/storage/{claim}", params(("name" = String, Path), ("claim" = String, Path), NamespaceQuery),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_storage(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, claim)): Path<(String, String)>,
    Query(q): Query<NamespaceQuery>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = service::incluster::storage_delete_params(
        &state.engine,
        &name,
        &claim,
        q.namespace.as_deref(),
    )
    .await?;
    stage(&state, "storage-delete", name, params, actor, key).await
}

#[utoipa::path(get, path = "/api/clusters/{name}/dependencies", params(("name" = String, Path)),
    responses((status = 200, body = service::incluster::DependencyReport), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_dependencies(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<service::incluster::DependencyReport>> {
    check_name(&name)?;
    Ok(Json(
        service::incluster::dependencies(&state.engine, &name).await?,
    ))
}

#[utoipa::path(get, path = "/api/clusters/{name}/features", params(("name" = String, Path)),
    responses((status = 200, body = service::incluster::FeaturesView), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_features(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<service::incluster::FeaturesView>> {
    check_name(&name)?;
    Ok(Json(
        service::incluster::features(&state.engine, &name, &state.allowed_features).await?,
    ))
}

/// Per feature: `{"result": "unchanged"}` or `{"result": "started", "operationId", "statusUrl"}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturesPatched {
    pub cluster: String,
    #[schema(value_type = Object)]
    pub features: Value,
}

#[utoipa::path(patch, path = "/api/clusters/{name}/features", params(("name" = String, Path)),
    request_body = service::incluster::FeaturesPatch,
    responses((status = 200, body = FeaturesPatched, description = "nothing to change"),
              (status = 202, body = FeaturesPatched, description = "at least one operation started"),
              (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn patch_features(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<service::incluster::FeaturesPatch>,
) -> ApiResult<Response> {
    use service::incluster::FeatureChange;
    check_name(&name)?;
    let plan =
        service::incluster::plan_features(&state.engine, &name, &req, &state.allowed_features)
            .await?;
    let mut out = serde_json::Map::new();
    let mut started = false;
    for (field, change) in plan {
        let FeatureChange::Change { kind, params } = change else {
            out.insert(field.into(), json!({"result": "unchanged"}));
            continue;
        };
        let enable = params.enable;
        let params = serde_json::to_value(&params).map_err(anyhow::Error::from)?;
        let sub = Submission {
            kind,
            request_hash: Some(service::request_hash(kind, &name, &params)),
            cluster: name.clone(),
            params,
            actor: actor.0.clone(),
            idempotency_key: key.0.as_ref().map(|k| format!("{k}:{field}")),
            parent_id: None,
            new_cluster: None,
        };
        let accepted = service::submit(&state.engine, sub).await?;
        started = true;
        out.insert(
            field.into(),
            json!({"result": "started", "enable": enable,
            "operationId": accepted.operation_id, "statusUrl": accepted.status_url}),
        );
    }
    let status = if started {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(FeaturesPatched {
            cluster: name,
            features: Value::Object(out),
        }),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/clusters/{name}/status", params(("name" = String, Path)),
    responses((status = 200, body = service::incluster::ClusterStatus), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn cluster_status(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<service::incluster::ClusterStatus>> {
    check_name(&name)?;
    Ok(Json(
        service::incluster::status(&state.engine, &name).await?,
    ))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveCluster {
    /// The cluster used when a request names none; null when none is chosen.
    pub name: Option<String>,
}

#[utoipa::path(get, path = "/api/active-cluster", responses((status = 200, body = ActiveCluster)))]
async fn get_active(State(state): State<AppState>) -> ApiResult<Json<ActiveCluster>> {
    Ok(Json(ActiveCluster {
        name: state
            .engine
            .store()
            .setting(service::ACTIVE_CLUSTER)
            .await?,
    }))
}

#[utoipa::path(put, path = "/api/active-cluster", request_body = ActiveClusterRequest,
    responses((status = 200, body = ActiveCluster), (status = 404, body = Problem)))]
async fn put_active(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ActiveClusterRequest>,
) -> ApiResult<Json<ActiveCluster>> {
    check_name(&req.name)?;
    let store = state.engine.store();
    store
        .get_cluster(&req.name)
        .await?
        .filter(|c| c.status != "deleted")
        .ok_or_else(|| service::cluster_not_found(&req.name))?;
    store
        .set_setting(service::ACTIVE_CLUSTER, Some(&req.name))
        .await?;
    Ok(Json(ActiveCluster {
        name: Some(req.name),
    }))
}

#[utoipa::path(post, path = "/api/pipelines", request_body = PipelineRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries of the same request")),
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_pipeline(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    ApiJson(req): ApiJson<PipelineRequest>,
) -> ApiResult<Response> {
    let params = service::pipeline_params(&state.engine, &req).await?;
    let body = serde_json::to_value(&req).map_err(anyhow::Error::from)?;
    let spec = serde_json::to_value(&params.cluster).map_err(anyhow::Error::from)?;
    let sub = Submission {
        kind: "pipeline",
        cluster: req.name.clone(),
        request_hash: Some(service::request_hash("pipeline", &req.name, &body)),
        params: serde_json::to_value(&params).map_err(anyhow::Error::from)?,
        actor: actor.0,
        idempotency_key: key.0,
        parent_id: None,
        new_cluster: Some((params.cluster.region.clone(), spec)),
    };
    let _ = Catalog;
    Ok(accepted(service::submit(&state.engine, sub).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct OperationsQuery {
    cluster: Option<String>,
    /// `pending`, `running`, `succeeded`, `failed` or `cancelled`.
    state: Option<String>,
    /// At most this many, newest first (default 100, max 1000).
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/operations", params(OperationsQuery),
    responses((status = 200, body = [Operation]), (status = 422, body = Problem)))]
async fn list_operations(
    State(state): State<AppState>,
    query: Result<Query<OperationsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<Operation>>> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let op_state = q
        .state
        .as_deref()
        .map(|s| {
            s.parse::<OpState>().map_err(|_| {
                ApiError::validation_hint(
                    "state",
                    format!("`{s}` is not an operation state"),
                    json!(["pending", "running", "succeeded", "failed", "cancelled"]),
                )
            })
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::validation_hint(
            "limit",
            format!("{limit} is out of range"),
            json!("1 to 1000"),
        ));
    }
    Ok(Json(
        state
            .engine
            .store()
            .list_operations(q.cluster.as_deref(), op_state, limit)
            .await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    /// Long-poll: seconds to wait for a change (0–60) before answering.
    wait: Option<u64>,
}

fn check_op_id(id: &str) -> ApiResult<()> {
    uuid::Uuid::parse_str(id).map(|_| ()).map_err(|_| {
        ApiError::validation(
            "id",
            format!(
                "`{}` is not an operation id",
                id.chars().take(64).collect::<String>()
            ),
        )
    })
}

#[utoipa::path(get, path = "/api/operations/{id}", params(("id" = String, Path), WaitQuery),
    responses((status = 200, body = Operation), (status = 404, body = Problem)))]
async fn get_operation(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Operation>> {
    check_op_id(&id)?;
    let Query(q) = query.map_err(|e| ApiError::validation("wait", e.body_text()))?;
    let wait = q.wait.unwrap_or(0);
    if wait > 60 {
        return Err(ApiError::validation_hint(
            "wait",
            format!("{wait} s is too long"),
            json!("0 to 60"),
        ));
    }
    state
        .engine
        .wait_for_change(&id, Duration::from_secs(wait))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("operation {id}")))
}

#[utoipa::path(post, path = "/api/operations/{id}/retry", params(("id" = String, Path)),
    responses((status = 202, body = Operation), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn retry_operation(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    check_op_id(&id)?;
    let op = service::retry(&state.engine, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(op)).into_response())
}

#[utoipa::path(post, path = "/api/operations/{id}/cancel", params(("id" = String, Path)),
    responses((status = 202, body = Operation), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn cancel_operation(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    check_op_id(&id)?;
    let op = service::cancel(&state.engine, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(op)).into_response())
}

#[utoipa::path(get, path = "/api/sandbox/calls",
    responses((status = 200, body = crate::cloud::sandbox::CallCounts), (status = 404, body = Problem)))]
async fn sandbox_calls(
    State(state): State<AppState>,
) -> ApiResult<Json<crate::cloud::sandbox::CallCounts>> {
    let Some(sandbox) = &state.sandbox else {
        return Err(ApiError::NotFound {
            what: "sandbox call counts".into(),
            hint: Some(Box::new(json!("only available with --cloud sandbox"))),
        });
    };
    Ok(Json(sandbox.call_counts().await?))
}

/// The agent kit: the Kiro CLI agent, its prompt, a generic MCP client configuration, the skills.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// `hypd-inst-agent` for Kiro CLI (save as `.kiro/agents/hypd-inst-agent.json`).
    #[schema(value_type = Object)]
    pub agent: Value,
    pub prompt: String,
    /// For other MCP clients (`mcpServers` with the HTTP URL).
    #[schema(value_type = Object)]
    pub mcp_client: Value,
    /// Skill name → SKILL.md text.
    #[schema(value_type = Object)]
    pub skills: Value,
}

#[utoipa::path(get, path = "/api/agent/config", responses((status = 200, body = AgentConfig)))]
async fn agent_config() -> ApiResult<Json<AgentConfig>> {
    let parse = |text: &str| serde_json::from_str::<Value>(text).map_err(anyhow::Error::from);
    let skills: serde_json::Map<String, Value> = crate::mcp::skills::SKILLS
        .iter()
        .map(|(name, text)| (name.to_string(), Value::String(text.to_string())))
        .collect();
    Ok(Json(AgentConfig {
        agent: parse(include_str!("../../skills/hypd-inst-agent/agent.json"))?,
        prompt: include_str!("../../skills/hypd-inst-agent/prompt.md").to_string(),
        mcp_client: parse(include_str!("../../skills/hypd-inst-agent/mcp.json"))?,
        skills: Value::Object(skills),
    }))
}

#[utoipa::path(get, path = "/api/clusters/{name}/nodes", params(("name" = String, Path)),
    responses((status = 200, body = service::NodeList), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_nodes(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<service::NodeList>> {
    check_name(&name)?;
    Ok(Json(service::list_nodes(&state.engine, &name).await?))
}

async fn node_action(
    state: AppState,
    actor: Actor,
    key: IdempotencyKey,
    name: String,
    id: String,
    action: crate::cloud::NodeAction,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = service::node_params(&state.engine, &name, &id, action).await?;
    let params = serde_json::to_value(params).map_err(anyhow::Error::from)?;
    let sub = Submission {
        kind: "node-action",
        request_hash: Some(service::request_hash("node-action", &name, &params)),
        cluster: name,
        params,
        actor: actor.0,
        idempotency_key: key.0,
        parent_id: None,
        new_cluster: None,
    };
    let mut accepted_op = service::submit(&state.engine, sub).await?;
    if action == crate::cloud::NodeAction::Replace {
        accepted_op.warning = Some("replacing a node loses its instance volumes (local NVMe and the EBS volume under /opt/sagemaker); data in /s3 and FSx is kept".into());
    }
    Ok(accepted(accepted_op))
}

#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/reboot", params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn reboot_node(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    node_action(
        state,
        actor,
        key,
        name,
        id,
        crate::cloud::NodeAction::Reboot,
    )
    .await
}

#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/replace", params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn replace_node(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    node_action(
        state,
        actor,
        key,
        name,
        id,
        crate::cloud::NodeAction::Replace,
    )
    .await
}

#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/delete", params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_node(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    node_action(
        state,
        actor,
        key,
        name,
        id,
        crate::cloud::NodeAction::Delete,
    )
    .await
}

#[utoipa::path(get, path = "/api/clusters/{name}/instance-groups", params(("name" = String, Path)),
    responses((status = 200, body = [service::GroupView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_groups(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<service::GroupView>>> {
    check_name(&name)?;
    Ok(Json(service::list_groups(&state.engine, &name).await?))
}

#[utoipa::path(post, path = "/api/clusters/{name}/instance-groups", params(("name" = String, Path)),
    request_body = CreateHyperPodRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn add_group(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<CreateHyperPodRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    let params = service::add_group_params(&state.engine, &name, &req).await?;
    let params = serde_json::to_value(params).map_err(anyhow::Error::from)?;
    stage(&state, "instance-group-add", name, params, actor, key).await
}

/// The answer to a PATCH that matches the current state: nothing was called.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unchanged {
    pub unchanged: bool,
    pub group: String,
}

#[utoipa::path(patch, path = "/api/clusters/{name}/instance-groups/{group}", params(("name" = String, Path), ("group" = String, Path)),
    request_body = service::UpdateGroupRequest,
    responses((status = 202, body = Accepted), (status = 200, body = Unchanged), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_group(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, group)): Path<(String, String)>,
    ApiJson(req): ApiJson<service::UpdateGroupRequest>,
) -> ApiResult<Response> {
    check_name(&name)?;
    service::validate::instance_group_name("group", &group)?;
    match service::scale_params(&state.engine, &name, &group, &req).await? {
        None => Ok(Json(Unchanged {
            unchanged: true,
            group,
        })
        .into_response()),
        Some(params) => {
            let params = serde_json::to_value(params).map_err(anyhow::Error::from)?;
            stage(&state, "instance-group-scale", name, params, actor, key).await
        }
    }
}

#[utoipa::path(delete, path = "/api/clusters/{name}/instance-groups/{group}", params(("name" = String, Path), ("group" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_group(
    State(state): State<AppState>,
    actor: Actor,
    key: IdempotencyKey,
    Path((name, group)): Path<(String, String)>,
) -> ApiResult<Response> {
    check_name(&name)?;
    service::validate::instance_group_name("group", &group)?;
    let params = service::delete_group_params(&state.engine, &name, &group).await?;
    stage(&state, "instance-group-delete", name, params, actor, key).await
}
