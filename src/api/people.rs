//! People over HTTP (docs/access.md): who a request is for — a browser session's cookie or a
//! personal agent token — decided before the audit trail records it, the refusal of anyone
//! else, and the routes to sign in and out, mint and revoke agent tokens, and keep the
//! administrators list. In local single-user mode (no `--identity`) none of it applies.

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::ApiJson;
use crate::error::{ApiError, ApiResult, Problem};
use crate::problem::ProblemType;
use crate::service::people::access::{RequestAccess, REQUEST};
use crate::service::people::{
    self as p, AdminRequest, AgentTokenRequest, NewAgentTokenView, SignInRequest,
};
use crate::store::{Admin, AgentTokenId, Holder};
use crate::AppState;

/// The browser session's cookie.
pub const SESSION_COOKIE: &str = "instantstart_session";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_session, sign_in, sign_out))
        .routes(routes!(list_agent_tokens, create_agent_token))
        .routes(routes!(revoke_agent_token))
        .routes(routes!(list_admins, add_admin))
        .routes(routes!(remove_admin))
}

/// The UI's files and the health probe: nobody's, so the routes do not look a session up for
/// them (the MCP endpoint, nested, sees its own paths and always looks).
pub fn nobodys(path: &str) -> bool {
    path == "/healthz" || path == "/" || path.starts_with("/ui/")
}

/// Requests served before anyone is known: those above, the API document and the sign-in.
fn open(method: &Method, path: &str) -> bool {
    nobodys(path)
        || path == "/api/openapi.json"
        || (path == "/api/session" && matches!(*method, Method::GET | Method::POST))
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Who the request is for, put in its extensions, when people sign in. Unknown: nothing put.
pub async fn identify(state: &AppState, mut request: Request) -> Result<Request, Response> {
    if state.people.is_none() {
        return Ok(request);
    }
    let headers = request.headers();
    match p::holder(
        &state.engine,
        cookie(headers, SESSION_COOKIE),
        bearer(headers),
    )
    .await
    {
        Ok(Some(holder)) => {
            request.extensions_mut().insert(holder);
            Ok(request)
        }
        Ok(None) => Ok(request),
        Err(e) => Err(e.into_response()),
    }
}

/// Lets the request through if it is for someone (or open, or nobody signs in here); a
/// read-only agent token only reads.
pub async fn admit<F, Fut>(state: &AppState, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    if state.people.is_none() || open(request.method(), request.uri().path()) {
        return inner(request).await;
    }
    let holder = request.extensions().get::<Holder>().cloned();
    match holder {
        None => ApiError::Unauthenticated {
            slug: ProblemType::SignInRequired,
            detail: "no session and no agent token: sign in first".into(),
        }
        .into_response(),
        Some(h)
            if h.agent_token.as_ref().is_some_and(|t| t.read_only)
                && super::audit::records(request.method()) =>
        {
            ApiError::Forbidden {
                slug: ProblemType::WritesDisabled,
                detail: format!(
                    "agent token `{}` is read-only",
                    h.agent_token
                        .as_ref()
                        .map(|t| t.name.as_str())
                        .unwrap_or_default()
                ),
            }
            .into_response()
        }
        Some(holder) => {
            let admin = holder.admin;
            let access = RequestAccess::new(holder);
            if !admin {
                if let Some(right) = admin_right(&request) {
                    if let Err(e) = p::require_admin(&state.engine, &access.holder, right).await {
                        return e.into_response();
                    }
                }
                if let Err(e) = cluster_right(state, &access, Asked::of(&request)).await {
                    return e.into_response();
                }
            }
            REQUEST.scope(access, inner(request)).await
        }
    }
}

/// The routes whose handlers check the namespace themselves, where they learn it (a job's
/// team, an existing job's namespace): the person needs to write there, not to administer the
/// cluster. Every other change to a cluster is its administrators'.
const NAMESPACED: &[&str] = &[
    "POST /api/clusters/{name}/training-jobs",
    "DELETE /api/clusters/{name}/training-jobs/{job}",
    "POST /api/clusters/{name}/endpoints",
    "PATCH /api/clusters/{name}/endpoints/{endpoint}",
    "DELETE /api/clusters/{name}/endpoints/{endpoint}",
    "POST /api/clusters/{name}/endpoints/{endpoint}/invoke",
    "POST /api/clusters/{name}/spaces",
    "PATCH /api/clusters/{name}/spaces/{space}",
    "DELETE /api/clusters/{name}/spaces/{space}",
    "POST /api/clusters/{name}/spaces/{space}/start",
    "POST /api/clusters/{name}/spaces/{space}/stop",
    "POST /api/clusters/{name}/spaces/{space}/open",
    "POST /api/clusters/{name}/spaces/{space}/connections",
    "DELETE /api/clusters/{name}/spaces/{space}/sessions",
    "POST /api/clusters/{name}/deployments",
    "DELETE /api/clusters/{name}/deployments/{deployment}",
    "POST /api/clusters/{name}/deployments/{deployment}/invoke",
    "POST /api/clusters/{name}/pools",
    "PATCH /api/clusters/{name}/pools/{pool}",
    "DELETE /api/clusters/{name}/pools/{pool}",
    "POST /api/clusters/{name}/pools/{pool}/assign",
    "POST /api/clusters/{name}/pools/{pool}/unassign",
    "POST /api/clusters/{name}/models",
];

/// What a person whose access is limited to namespaces may read of a cluster: the cluster,
/// and the routes that show them their namespaces only. Every other read of a cluster (other
/// workloads, logs, nodes, costs) shows every namespace, so it needs cluster-wide read.
const NAMESPACED_READS: &[&str] = &[
    "/api/clusters/{name}",
    "/api/clusters/{name}/training-jobs",
    "/api/clusters/{name}/training-jobs/{job}",
    "/api/clusters/{name}/endpoints",
    "/api/clusters/{name}/endpoints/{endpoint}",
    "/api/clusters/{name}/spaces",
    "/api/clusters/{name}/spaces/{space}",
    "/api/clusters/{name}/deployments",
    "/api/clusters/{name}/deployments/{deployment}",
    "/api/clusters/{name}/pools",
    "/api/clusters/{name}/pools/{pool}",
    "/api/clusters/{name}/models",
    // The teams a person works in (their namespaces'), so that they can submit as one.
    "/api/clusters/{name}/teams",
    "/api/clusters/{name}/teams/{team}",
];

/// What a request asks, read before anything is awaited (a request's body is not `Sync`).
struct Asked {
    method: Method,
    route: Option<String>,
    path: String,
}

impl Asked {
    fn of(request: &Request) -> Self {
        Self {
            method: request.method().clone(),
            route: request
                .extensions()
                .get::<axum::extract::MatchedPath>()
                .map(|m| m.as_str().to_string()),
            path: request.uri().path().to_string(),
        }
    }
}

/// What a request on a cluster needs of a person who does not administer the deployment:
/// any access to read it, write access in the namespace for a workload route (checked by its
/// handler), `AmazonEKSClusterAdminPolicy` for the cluster's own changes. A change outside a
/// cluster (an operation's retry or cancel) stays the administrators'.
async fn cluster_right(state: &AppState, access: &RequestAccess, asked: Asked) -> ApiResult<()> {
    let Asked {
        method,
        route,
        path,
    } = asked;
    let Some(route) = route else {
        return Ok(());
    };
    let writes = super::audit::records(&method);
    if !route.starts_with("/api/clusters/{name}") {
        if writes && route.starts_with("/api/operations/") {
            return Err(access
                .denied(
                    &state.engine,
                    "an administrator of this deployment".into(),
                    "retry or cancel operations",
                )
                .await);
        }
        return Ok(());
    }
    let cluster = path.split('/').nth(3).unwrap_or_default();
    let cluster = percent_encoding::percent_decode_str(cluster).decode_utf8_lossy();
    let on = access.on(&state.engine, &cluster).await?;
    if !writes {
        use crate::service::people::access::Reach;
        return match &on.read {
            Reach::Everywhere => Ok(()),
            Reach::Namespaces(_) if NAMESPACED_READS.contains(&route.as_str()) => Ok(()),
            Reach::Namespaces(_) => Err(access
                .denied(
                    &state.engine,
                    format!("AmazonEKSViewPolicy on the whole of cluster {cluster} (access to some namespaces reads the cluster and its training jobs only)"),
                    "read this",
                )
                .await),
            Reach::Nowhere => Err(access
                .denied(
                    &state.engine,
                    format!("an access entry on cluster {cluster}"),
                    "read this cluster",
                )
                .await),
        };
    }
    if on.cluster_admin || NAMESPACED.contains(&format!("{method} {route}").as_str()) {
        return Ok(());
    }
    Err(access
        .denied(
            &state.engine,
            format!("AmazonEKSClusterAdminPolicy on cluster {cluster}"),
            "change the cluster itself",
        )
        .await)
}

/// The right a control-plane-wide request needs, if it is one: making, importing or deleting a
/// cluster, and the deployment's shared MLflow, are an administrator's.
fn admin_right(request: &Request) -> Option<&'static str> {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()?
        .as_str();
    match (request.method().clone(), route) {
        (Method::POST, "/api/clusters" | "/api/pipelines") => Some("create clusters"),
        (Method::POST, "/api/clusters/import") => Some("import clusters"),
        (Method::DELETE, "/api/clusters/{name}") => Some("delete clusters"),
        (Method::POST, "/api/mlflow") => Some("set up the deployment's MLflow"),
        _ => None,
    }
}

/// The MCP endpoint's door when people sign in: an agent comes with its person's agent token
/// (or a session); each tool call is then that person's request (see `mcp::dispatch`).
pub async fn mcp_gate(
    State(state): State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    if state.people.is_none() {
        return next.run(request).await;
    }
    match identify(&state, request).await {
        Err(refused) => refused,
        Ok(r) if r.extensions().get::<Holder>().is_none() => ApiError::Unauthenticated {
            slug: ProblemType::SignInRequired,
            detail: "an agent needs its person's agent token: `Authorization: Bearer isat_…`"
                .into(),
        }
        .into_response(),
        Ok(r) => next.run(r).await,
    }
}

fn people(state: &AppState) -> ApiResult<&p::People> {
    state.people.as_deref().ok_or_else(|| ApiError::Conflict {
        slug: ProblemType::IdentitiesOff,
        detail: "this server runs in local single-user mode: nobody signs in".into(),
        field: None,
        operation_id: None,
    })
}

fn holder(h: Option<Extension<Holder>>) -> ApiResult<Holder> {
    h.map(|Extension(h)| h).ok_or(ApiError::Unauthenticated {
        slug: ProblemType::SignInRequired,
        detail: "not signed in".into(),
    })
}

/// Who is asking, as the server knows them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    /// `single-user` (nobody signs in) or `iam` (people sign in with their AWS identity).
    pub mode: &'static str,
    pub signed_in: bool,
    /// STS's ARN of the person (a role session names them).
    pub arn: Option<String>,
    /// The IAM user or role that access entries and the administrators list name.
    pub principal_arn: Option<String>,
    pub admin: bool,
    /// The agent token the request came with, if it came with one.
    pub agent_token: Option<AgentTokenId>,
    /// The command that makes a sign-in token for this deployment.
    pub sign_in_command: Option<String>,
}

async fn view(state: &AppState, h: Option<&Holder>) -> ApiResult<SessionView> {
    let Some(people) = state.people.as_deref() else {
        return Ok(SessionView {
            mode: "single-user",
            signed_in: false,
            arn: None,
            principal_arn: None,
            admin: true,
            agent_token: None,
            sign_in_command: None,
        });
    };
    let admin = h.is_some_and(|h| h.admin);
    Ok(SessionView {
        mode: "iam",
        signed_in: h.is_some(),
        arn: h.map(|h| h.arn.clone()),
        principal_arn: h.map(|h| h.principal_arn.clone()),
        admin,
        agent_token: h.and_then(|h| h.agent_token.clone()),
        sign_in_command: Some(format!(
            "aws eks get-token --cluster-name {} --query status.token --output text",
            people.deployment
        )),
    })
}

/// Who you are here: the mode, and when people sign in, your identity, whether you administer
/// the deployment, and the command that makes a sign-in token.
#[utoipa::path(get, path = "/api/session", operation_id = "session_get",
    responses((status = 200, body = SessionView)))]
async fn get_session(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
) -> ApiResult<Json<SessionView>> {
    Ok(Json(view(&state, h.as_ref().map(|Extension(h)| h)).await?))
}

/// Sign in with an AWS identity: the token `aws eks get-token --cluster-name <deployment>` makes.
/// Answers a session cookie (HttpOnly, SameSite=Strict, 8 hours). A token is accepted once.
#[utoipa::path(post, path = "/api/session", operation_id = "session_create",
    extensions(("x-mcp" = json!({"tool": false}))),
    request_body = SignInRequest,
    responses((status = 200, body = SessionView), (status = 401, body = Problem), (status = 409, body = Problem)))]
async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SignInRequest>,
) -> ApiResult<Response> {
    let signed = p::sign_in(&state.engine, people(&state)?, &req.token).await?;
    let holder = Holder {
        admin: state
            .engine
            .store()
            .is_admin(&signed.identity.principal_arn)
            .await?,
        principal_arn: signed.identity.principal_arn.clone(),
        arn: signed.identity.arn.clone(),
        agent_token: None,
    };
    let body = view(&state, Some(&holder)).await?;
    let cookie = session_cookie(&headers, &signed.secret, p::SESSION_SECS);
    Ok(([(header::SET_COOKIE, cookie)], Json(body)).into_response())
}

/// The cookie, `Secure` unless the browser reached a loopback name (an SSM port-forward or a
/// local run, served over plain HTTP).
fn session_cookie(headers: &HeaderMap, secret: &str, max_age: i64) -> HeaderValue {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let name = host.rsplit_once(':').map(|(n, _)| n).unwrap_or(host);
    let loopback = matches!(name, "localhost" | "127.0.0.1" | "[::1]");
    let secure = if loopback { "" } else { "; Secure" };
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("instantstart_session=; Max-Age=0"))
}

/// Sign out: the session ends on the server and its cookie is cleared.
#[utoipa::path(delete, path = "/api/session", operation_id = "session_delete",
    extensions(("x-mcp" = json!({"tool": false}))),
    responses((status = 204), (status = 401, body = Problem), (status = 409, body = Problem)))]
async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    people(&state)?;
    if let Some(secret) = cookie(&headers, SESSION_COOKIE) {
        p::sign_out(&state.engine, secret).await?;
    }
    let cleared = session_cookie(&headers, "", 0);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cleared)]).into_response())
}

/// Your agent tokens, newest first (never their secrets).
#[utoipa::path(get, path = "/api/session/agent-tokens", operation_id = "agent_token_list",
    extensions(("x-mcp" = json!({"tool": false}))),
    responses((status = 200, body = Vec<AgentTokenId>), (status = 401, body = Problem), (status = 409, body = Problem)))]
async fn list_agent_tokens(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
) -> ApiResult<Json<Vec<AgentTokenId>>> {
    people(&state)?;
    Ok(Json(p::agent_tokens(&state.engine, &holder(h)?).await?))
}

/// Make a personal agent token for Kiro CLI: the agent then acts as you, with your rights (or
/// only reads, when read-only), and is audited as you via the agent. The token is shown once.
#[utoipa::path(post, path = "/api/session/agent-tokens", operation_id = "agent_token_create",
    extensions(("x-mcp" = json!({"tool": false}))),
    request_body = AgentTokenRequest,
    responses((status = 201, body = NewAgentTokenView), (status = 401, body = Problem), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_agent_token(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
    ApiJson(req): ApiJson<AgentTokenRequest>,
) -> ApiResult<(StatusCode, Json<NewAgentTokenView>)> {
    people(&state)?;
    let made = p::mint_agent_token(&state.engine, &holder(h)?, &req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

/// Revoke one of your agent tokens: refused from the next request on.
#[utoipa::path(delete, path = "/api/session/agent-tokens/{id}", operation_id = "agent_token_delete",
    extensions(("x-mcp" = json!({"tool": false}))),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn revoke_agent_token(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    people(&state)?;
    p::revoke_agent_token(&state.engine, &holder(h)?, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The deployment's administrators: who may create clusters and change this list.
#[utoipa::path(get, path = "/api/admins", operation_id = "admin_list",
    responses((status = 200, body = Vec<Admin>), (status = 401, body = Problem), (status = 409, body = Problem)))]
async fn list_admins(State(state): State<AppState>) -> ApiResult<Json<Vec<Admin>>> {
    people(&state)?;
    Ok(Json(p::admins(&state.engine).await?))
}

/// Make an IAM user or role an administrator of the deployment (administrators only). A
/// person's act, never an agent's: no tool widens who administers the deployment.
#[utoipa::path(post, path = "/api/admins", operation_id = "admin_add",
    extensions(("x-mcp" = json!({"tool": false}))),
    request_body = AdminRequest,
    responses((status = 200, body = Admin), (status = 401, body = Problem), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn add_admin(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
    ApiJson(req): ApiJson<AdminRequest>,
) -> ApiResult<Json<Admin>> {
    people(&state)?;
    Ok(Json(p::add_admin(&state.engine, &holder(h)?, &req).await?))
}

/// Remove an administrator (administrators only; never the last one).
#[utoipa::path(delete, path = "/api/admins/{arn}", operation_id = "admin_remove",
    extensions(("x-mcp" = json!({"tool": false}))),
    params(("arn" = String, Path, description = "The IAM user or role ARN, percent-encoded")),
    responses((status = 204), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn remove_admin(
    State(state): State<AppState>,
    h: Option<Extension<Holder>>,
    Path(arn): Path<String>,
) -> ApiResult<StatusCode> {
    people(&state)?;
    p::remove_admin(&state.engine, &holder(h)?, &arn).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route named here that the API lacks would leave a real route to the administrators
    /// (or, in the reads, unlisted): every name is checked against the served document.
    #[test]
    fn every_route_named_here_is_one_the_api_serves() {
        let doc = crate::api::openapi::document();
        for entry in NAMESPACED {
            let (method, path) = entry.split_once(' ').unwrap();
            assert!(
                doc["paths"][path][method.to_ascii_lowercase()].is_object(),
                "{entry}"
            );
        }
        for path in NAMESPACED_READS {
            assert!(doc["paths"][*path]["get"].is_object(), "{path}");
        }
    }
}
