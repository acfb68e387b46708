//! Clusters: list, create (network + EKS), import, view, delete, live status, and the active
//! cluster.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterName, Started};
use super::memo::AcceptsGzip;
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::{self, Accepted, ActiveClusterRequest, ClusterView, CreateClusterRequest};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_clusters, create_cluster))
        .routes(routes!(import_cluster))
        .routes(routes!(get_cluster, delete_cluster))
        .routes(routes!(forget_cluster))
        .routes(routes!(cluster_status))
        .routes(routes!(cluster_versions))
        .routes(routes!(get_active, put_active, clear_active))
}

/// Query of `GET /api/clusters`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ClustersQuery {
    /// At most this many, by name (default 100, max 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Where the previous page ended (from its `Link: <…>; rel="next"` header).
    #[param(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    cursor: Option<String>,
}

/// Every cluster in brief (name, region, state of each stage, whether it is active, links; the
/// full record is cluster_get), by name. Call first: never create what already exists.
#[utoipa::path(get, path = "/api/clusters", operation_id = "cluster_list", params(ClustersQuery),
    responses((status = 200, body = [service::ClusterSummary],
               headers(("Link" = String, description = "`<…?cursor=…>; rel=\"next\"` when more follow"),
                       ("Content-Encoding" = String, description = "`gzip` when the request's Accept-Encoding takes it (answers of 1 KiB or more)"),
                       ("Vary" = String, description = "`accept-encoding`"))),
              (status = 422, body = Problem)))]
async fn list_clusters(
    State(state): State<AppState>,
    uri: axum::http::Uri,
    gzip: AcceptsGzip,
    query: Result<axum::extract::Query<ClustersQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<axum::response::Response> {
    let axum::extract::Query(q) =
        query.map_err(|e| crate::error::ApiError::validation("query", e.body_text()))?;
    let revision = service::stored_revision(&state.engine);
    let page = async {
        let (list, next) =
            service::list_clusters(&state.engine, q.limit, q.cursor.as_deref()).await?;
        let next =
            next.map(|c| format!("/api/clusters?limit={}&cursor={c}", q.limit.unwrap_or(100)));
        Ok((list, next))
    };
    state
        .list_memo
        .page(&uri.to_string(), revision, gzip, page)
        .await
}

/// Create the network (VPC, subnets, NAT, security groups, S3 endpoint) and the EKS control plane.
/// CIDRs are computed: do not ask the user for them.
#[utoipa::path(post, path = "/api/clusters", operation_id = "cluster_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "10-15 minutes on AWS"}))),
    request_body = CreateClusterRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = r"^[\x21-\x7e]{1,255}$", description = "Deduplicates retries of the same request: 1–255 visible ASCII characters, e.g. a UUID")),
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_cluster(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateClusterRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::create_cluster(&state.engine, &req, &caller).await?,
    ))
}

/// Adopt an existing EKS cluster (and optionally its HyperPod cluster): records its endpoint, adds
/// an access entry for this control plane if missing, and records which dependencies are already
/// installed (those are never changed unless dependencies_install is called with manageExisting).
#[utoipa::path(post, path = "/api/clusters/import", operation_id = "cluster_import",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "under a minute"}))),
    request_body = service::ImportRequest,
    responses((status = 202, body = Accepted), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn import_cluster(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<service::ImportRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::import_cluster(&state.engine, &req, &caller).await?,
    ))
}

/// One cluster: its stages (cluster, dependencies, hyperpod, storage), their operations and phases,
/// and the resources recorded.
#[utoipa::path(get, path = "/api/clusters/{name}", operation_id = "cluster_get", params(("name" = String, Path)),
    responses((status = 200, body = ClusterView), (status = 404, body = Problem)))]
async fn get_cluster(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<ClusterView>> {
    Ok(Json(service::cluster_view(&state.engine, &name).await?))
}

/// Delete a cluster: HyperPod, EKS, network and roles — an imported cluster's too. Its objects in
/// S3 are kept. Ask the user to confirm first; to stop managing a cluster without deleting
/// anything, use cluster_forget.
#[utoipa::path(delete, path = "/api/clusters/{name}", operation_id = "cluster_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "15-25 minutes on AWS"}))),
    params(("name" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_cluster(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::delete_cluster(&state.engine, &name, &caller).await?,
    ))
}

/// Forget a cluster: drop its record here and touch nothing in the account (its EKS and HyperPod
/// clusters, network and roles keep running and billing; import it again to manage it). For an
/// imported cluster this hands it back. Ask the user to confirm first.
#[utoipa::path(post, path = "/api/clusters/{name}/forget", operation_id = "cluster_forget",
    extensions(("x-mcp" = json!({"destructive": true, "duration": "under a minute"}))),
    params(("name" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn forget_cluster(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::cluster::start::forget_cluster(&state.engine, &name, &caller).await?,
    ))
}

/// Live Kubernetes node state from a watch-backed cache: per node instance type, instance group,
/// capacity type, readiness, GPUs total/allocatable/requested/free, health labels; plus pending GPU
/// demand and the cache's revision (also the ETag: send it as If-None-Match to get 304 while
/// nothing changed).
#[utoipa::path(get, path = "/api/clusters/{name}/status", operation_id = "cluster_status",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("If-None-Match" = Option<String>, Header, pattern = r"^[\x21-\x7e]+( *, *[\x21-\x7e]+)*$", description = "an ETag of an earlier answer")),
    responses((status = 200, body = service::cluster::live::ClusterStatus, headers(("ETag" = String, description = "weak; changes with the view"),
                       ("Content-Encoding" = String, description = "`gzip` when the request's Accept-Encoding takes it (answers of 1 KiB or more)"),
                       ("Vary" = String, description = "`accept-encoding`"))),
               (status = 304, description = "unchanged since the ETag given"),
               (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn cluster_status(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    gzip: AcceptsGzip,
    headers: axum::http::HeaderMap,
) -> ApiResult<axum::response::Response> {
    use axum::http::header::{ETAG, IF_NONE_MATCH};
    use axum::response::IntoResponse as _;
    let live = service::cluster::live::live_state(&state.engine, &name).await?;
    let etag = format!("W/\"{}\"", live.cache.revision);
    let unchanged = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if unchanged {
        // With the headers a 200 would carry that describe it (RFC 9110 §15.4.5).
        let etag = axum::http::HeaderValue::try_from(etag).map_err(anyhow::Error::from)?;
        let headers = [(ETAG, etag), super::memo::VARY_ENCODING];
        return Ok((axum::http::StatusCode::NOT_MODIFIED, headers).into_response());
    }
    // Serialized once per change of the view, then the same bytes for every reader.
    let body = state.status_memo.body(&name, &etag, || {
        serde_json::to_vec(&service::cluster::live::status_of(&name, &live))
            .map_err(anyhow::Error::from)
    })?;
    let etag = axum::http::HeaderValue::try_from(etag).map_err(anyhow::Error::from)?;
    let mut response = body.response(gzip);
    response.headers_mut().insert(ETAG, etag);
    Ok(response)
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveCluster {
    /// The cluster used when a request names none; null when none is chosen.
    pub name: Option<String>,
}

/// The cluster used when a request names none.
#[utoipa::path(get, path = "/api/active-cluster", operation_id = "active_cluster_get", responses((status = 200, body = ActiveCluster)))]
async fn get_active(State(state): State<AppState>) -> ApiResult<Json<ActiveCluster>> {
    Ok(Json(ActiveCluster {
        name: service::active_cluster(&state.engine).await?,
    }))
}

/// Clear the active cluster: requests must name their cluster (and no cluster is picked for
/// being the only one) until one is chosen or created.
#[utoipa::path(delete, path = "/api/active-cluster", operation_id = "active_cluster_clear",
    responses((status = 200, body = ActiveCluster)))]
async fn clear_active(State(state): State<AppState>) -> ApiResult<Json<ActiveCluster>> {
    service::clear_active_cluster(&state.engine).await?;
    Ok(Json(ActiveCluster { name: None }))
}

/// Choose the active cluster.
#[utoipa::path(put, path = "/api/active-cluster", operation_id = "active_cluster_set", request_body = ActiveClusterRequest,
    responses((status = 200, body = ActiveCluster), (status = 404, body = Problem)))]
async fn put_active(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ActiveClusterRequest>,
) -> ApiResult<Json<ActiveCluster>> {
    Ok(Json(ActiveCluster {
        name: Some(service::set_active_cluster(&state.engine, &req.name).await?),
    }))
}

/// What the cluster runs and what it could: its Kubernetes version and the next minor (EKS
/// upgrades one minor at a time) when HyperPod supports it, and each managed add-on installed
/// with its version beside the newest EKS offers for this Kubernetes version and for the next
/// (none there blocks that upgrade).
#[utoipa::path(get, path = "/api/clusters/{name}/versions", operation_id = "cluster_versions",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = service::cluster::versions::VersionsView), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn cluster_versions(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<service::cluster::versions::VersionsView>> {
    Ok(Json(
        service::cluster::versions::versions(&state.engine, &name).await?,
    ))
}
