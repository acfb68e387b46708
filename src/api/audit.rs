//! The audit trail over HTTP: a layer that records every mutating request once it is answered
//! (REST, the browser and an agent's MCP tool calls alike, since MCP dispatches into this router),
//! and `GET /api/audit` to read it.

use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{header, Method};
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::trace::REQUEST_ID;
use super::ACTOR_HEADER;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service;
use crate::store::{AuditEntry, AuditFilter, Holder, NewAudit};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

/// Whether a request of this method is recorded: one that could change anything.
pub fn records(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Records the request if it could change anything (POST, PUT, PATCH, DELETE).
pub async fn record<F, Fut>(state: &AppState, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let method = request.method().clone();
    if !records(&method) {
        return inner(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let path = request.uri().path().to_string();
    let holder = request.extensions().get::<Holder>().cloned();
    // An unknown actor is refused by the handler; the trail keeps what was claimed, bounded.
    // An agent token is an agent's, whatever the request says.
    let actor = match &holder {
        Some(h) if h.agent_token.is_some() => "agent".to_string(),
        _ => request
            .headers()
            .get(ACTOR_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(16).collect::<String>())
            .unwrap_or_else(|| "api".into()),
    };
    // Operations this request starts wait for it (and the others in flight) to be answered.
    let _in_flight = state.engine.foreground();
    // The person when people sign in (`anonymous` for a refused stranger), else how the
    // caller got in.
    let principal = match (&state.people, holder) {
        (Some(_), Some(h)) => h.arn,
        (Some(_), None) => "anonymous".into(),
        (None, _) if state.edge.token.is_some() => "token".into(),
        (None, _) => "loopback".into(),
    };
    let response = inner(request).await;
    // Read in a block: a borrow of the response must not live across the await below.
    let (location, request_id, status) = {
        let header = |name: header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        (
            header(header::LOCATION),
            header(header::HeaderName::from_static(REQUEST_ID)).unwrap_or_default(),
            response.status().as_u16(),
        )
    };
    let operation_id = location
        .and_then(|l| l.strip_prefix("/api/operations/").map(str::to_string))
        .or_else(|| {
            path.strip_prefix("/api/operations/")
                .and_then(|rest| rest.split('/').next())
                .map(str::to_string)
        });
    service::audit::record(
        &state.engine,
        &NewAudit {
            actor: &actor,
            principal: &principal,
            method: method.as_str(),
            route: &route,
            path: &path,
            status,
            request_id: &request_id,
            operation_id: operation_id.as_deref(),
        },
    )
    .await;
    response
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    /// `api`, `browser` or `agent`.
    #[param(pattern = "^(api|browser|agent)$")]
    actor: Option<String>,
    /// `ok`, `refused` or `error`.
    #[param(pattern = "^(ok|refused|error)$")]
    outcome: Option<String>,
    /// `POST`, `PUT`, `PATCH` or `DELETE`.
    #[param(pattern = "^(POST|PUT|PATCH|DELETE)$")]
    method: Option<String>,
    /// Whose requests: a person's ARN when people sign in (`token` or `loopback` otherwise).
    /// When people sign in, someone who does not administer the deployment sees their own only.
    #[param(max_length = 2048)]
    principal: Option<String>,
    /// Requests on this cluster.
    #[param(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    cluster: Option<String>,
    /// At most this many, newest first (default 100, max 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Where the previous page ended (from its `Link: <…>; rel="next"` header).
    #[param(pattern = "^[1-9][0-9]{0,17}$")]
    cursor: Option<String>,
}

/// The audit trail, newest first: every mutating request through REST, the UI or MCP — time,
/// actor, principal (token or loopback, never the token), route, status, outcome, request id
/// and the operation it started, if any — whether or not it started an operation.
#[utoipa::path(get, path = "/api/audit", operation_id = "audit_list", params(AuditQuery),
    responses((status = 200, body = [AuditEntry],
               headers(("Link" = String, description = "`<…?cursor=…>; rel=\"next\"` when more follow"))),
              (status = 422, body = Problem)))]
async fn list_audit(
    State(state): State<AppState>,
    holder: Option<axum::Extension<Holder>>,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    use axum::response::IntoResponse as _;
    let Query(mut q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    if let Some(cluster) = &q.cluster {
        crate::service::validate::cluster_name("cluster", cluster)?;
    }
    // A person reads their own trail; an administrator reads everyone's.
    if let Some(axum::Extension(h)) = holder {
        if !h.admin {
            q.principal = Some(h.arn);
        }
    }
    let filter = AuditFilter {
        actor: q.actor.as_deref(),
        outcome: q.outcome.as_deref(),
        method: q.method.as_deref(),
        principal: q.principal.as_deref(),
        cluster: q.cluster.as_deref(),
    };
    let (entries, next) =
        service::audit::page(&state.engine, &filter, q.limit, q.cursor.as_deref()).await?;
    let mut response = axum::Json(entries).into_response();
    if let Some(cursor) = next {
        let mut url = format!(
            "/api/audit?limit={}&cursor={cursor}",
            q.limit.unwrap_or(100)
        );
        for (k, v) in [
            ("actor", &q.actor),
            ("outcome", &q.outcome),
            ("method", &q.method),
            ("principal", &q.principal),
            ("cluster", &q.cluster),
        ] {
            if let Some(v) = v {
                let v =
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC);
                url.push_str(&format!("&{k}={v}"));
            }
        }
        if let Ok(v) = axum::http::HeaderValue::from_str(&format!("<{url}>; rel=\"next\"")) {
            response.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(response)
}
