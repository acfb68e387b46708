//! The REST face (axum): the routers of each resource merged in one place, the edge middleware
//! (Host/Origin guard, bearer token, actor, sandbox header, body limit) and the JSON extractor
//! that turns every malformed body into the problem shape. A handler extracts, makes one
//! `service/` call and responds.

pub mod agent;
pub mod audit;
pub mod aws;
pub mod clusters;
pub mod costs;
pub mod endpoints;
pub mod events;
pub mod evidence;
pub mod extract;
pub mod features;
pub mod groups;
pub mod logs;
pub mod memo;
pub mod mlflow;
pub mod openapi;
pub mod operations;
pub mod pools;
pub mod space_proxy;
pub mod spaces;
pub mod stages;
pub mod teams;
pub mod trace;
pub mod training;
pub mod ui;
pub mod utilization;
pub mod workloads;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Largest accepted request body.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Header naming who is acting: `browser` (the UI), `agent` (MCP) or `api` (default).
pub const ACTOR_HEADER: &str = "x-instantstart-actor";
pub const ACTORS: &[&str] = &["browser", "agent", "api"];
/// Header on every response of a sandbox server.
pub const CLOUD_HEADER: &str = "x-instantstart-cloud";

/// What the edge checks against, fixed once the listener is bound.
#[derive(Debug, Clone)]
pub struct EdgePolicy {
    /// Accepted `Host` values (`host:port`), lowercase.
    pub hosts: Vec<String>,
    /// Accepted `Origin` values (`http://host:port`).
    pub origins: Vec<String>,
    pub token: Option<crate::config::Secret>,
}

impl EdgePolicy {
    pub fn new(
        port: u16,
        bind_ip: std::net::IpAddr,
        extra: &[String],
        token: Option<crate::config::Secret>,
    ) -> Self {
        let mut hosts: Vec<String> = vec![
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        if !bind_ip.is_unspecified() && !bind_ip.is_loopback() {
            hosts.push(match bind_ip {
                std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                v4 => format!("{v4}:{port}"),
            });
        }
        hosts.extend(
            extra
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty()),
        );
        let origins = hosts
            .iter()
            .flat_map(|h| [format!("http://{h}"), format!("https://{h}")])
            .collect();
        Self {
            hosts,
            origins,
            token,
        }
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        // A browser's default port is implicit in Host; the allow-list may name it either way.
        // (Compared without a lowercased copy: this runs on every request.)
        self.hosts.iter().any(|h| {
            h.eq_ignore_ascii_case(host)
                || h.strip_suffix(":80")
                    .is_some_and(|h| h.eq_ignore_ascii_case(host))
        })
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        match headers.get(header::ORIGIN).map(|o| o.to_str()) {
            None => true,
            Some(Ok(origin)) => self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)),
            Some(Err(_)) => false,
        }
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        // A browser cannot send Authorization on a WebSocket; it offers the token as a
        // subprotocol instead (the server never echoes that one back).
        let offered = || {
            headers
                .get(header::SEC_WEBSOCKET_PROTOCOL)
                .and_then(|v| v.to_str().ok())?
                .split(',')
                .find_map(|p| p.trim().strip_prefix(BEARER_PROTOCOL))
        };
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(offered)
        else {
            return false;
        };
        given.as_bytes().ct_eq(expected.0.as_bytes()).into()
    }
}

/// Prefix of the WebSocket subprotocol that carries the token (`instantstart.bearer.<token>`).
pub const BEARER_PROTOCOL: &str = "instantstart.bearer.";

/// Paths served without the token: the health probe and the UI's static files (they hold no
/// data; the UI asks for the token and sends it on every API request).
fn is_public(path: &str) -> bool {
    path == "/healthz" || path == "/" || path.starts_with("/ui/")
}

/// The Content-Security-Policy on every response: only this origin's scripts, styles and
/// connections (WebSocket included), no inline code, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// DNS-rebinding guard, token check and the sandbox header, for every route (REST, MCP, UI).
pub async fn edge(State(state): State<AppState>, request: Request, next: Next) -> Response {
    use axum::response::IntoResponse;
    let policy = &state.edge;
    let headers = request.headers();
    // A space's own host: its proxy checks origin and session itself.
    if let Some((cluster, space)) = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| space_proxy::space_host(policy, h))
    {
        return space_proxy::serve(AppState::clone(&state), cluster, space, request).await;
    }
    let refusal = if !policy.host_ok(headers) {
        Some(ApiError::Forbidden {
            slug: "forbidden-host",
            detail: "the Host header does not name this server; add it with --allowed-host if it is a proxy or port-forward you trust".into(),
        })
    } else if !policy.origin_ok(headers) {
        Some(ApiError::Forbidden {
            slug: "forbidden-origin",
            detail: "cross-origin requests are refused".into(),
        })
    } else if !is_public(request.uri().path()) && !policy.token_ok(headers) {
        Some(ApiError::Unauthorized)
    } else {
        None
    };
    let mut response = match refusal {
        Some(e) => e.into_response(),
        None => next.run(request).await,
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Some(mode) = state.sandbox.as_ref().map(|_| "sandbox") {
        response
            .headers_mut()
            .insert(CLOUD_HEADER, HeaderValue::from_static(mode));
    }
    response
}

/// The actor of a request (`X-InstantStart-Actor`), validated.
pub struct Actor(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.headers.get(ACTOR_HEADER).map(|v| v.to_str()) {
            None => Ok(Actor("api".into())),
            Some(Ok(v)) if ACTORS.contains(&v) => Ok(Actor(v.to_string())),
            Some(_) => Err(ApiError::BadRequest {
                slug: "invalid-header",
                field: Some("X-InstantStart-Actor".into()),
                detail: "unknown actor".into(),
                hint: Some(Box::new(json!(ACTORS))),
            }),
        }
    }
}

/// The `Idempotency-Key` header, validated (1–255 visible ASCII characters).
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(v) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        match v.to_str() {
            Ok(k) if !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()) => {
                Ok(IdempotencyKey(Some(format!("client:{k}"))))
            }
            _ => Err(ApiError::BadRequest {
                slug: "invalid-header",
                field: Some("Idempotency-Key".into()),
                detail: "Idempotency-Key must be 1–255 visible ASCII characters".into(),
                hint: Some(Box::new(json!("e.g. a UUID"))),
            }),
        }
    }
}

/// JSON body extractor whose every failure is a problem body naming the field.
pub struct ApiJson<T>(pub T);

/// A query string read into `T`; one that cannot be (a duplicate, unknown or mistyped field)
/// is the problem answer every route gives, never axum's plain-text rejection.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e| ApiError::validation("query", e.body_text()))
    }
}

/// Like [`ApiJson`], but an empty body means `T::default()`.
pub struct OptionalJson<T>(pub T);

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        let quoted = |prefix: &str| {
            msg.strip_prefix(prefix)
                .and_then(|rest| rest.split('`').next())
                .map(str::to_string)
        };
        if let Some(field) = quoted("unknown field `") {
            let expected = msg
                .split("expected one of ")
                .nth(1)
                .map(|s| s.split(" at line").next().unwrap_or(s).replace('`', ""));
            return ApiError::BadRequest {
                slug: "unknown-field",
                field: Some(field.clone()),
                detail: format!("unknown field `{field}`"),
                hint: expected.map(|e| {
                    Box::new(json!(e.split(", ").map(str::to_string).collect::<Vec<_>>()))
                }),
            };
        }
        if let Some(field) = quoted("missing field `") {
            return ApiError::BadRequest {
                slug: "missing-field",
                field: Some(field.clone()),
                detail: format!("missing required field `{field}`"),
                hint: None,
            };
        }
        let syntax = inner.is_syntax() || inner.is_eof();
        ApiError::BadRequest {
            slug: if syntax {
                "malformed-json"
            } else {
                "invalid-type"
            },
            field: Some(if path == "." || syntax {
                "body".into()
            } else {
                path
            }),
            detail: msg,
            hint: None,
        }
    })
}

/// The whole body, within [`BODY_LIMIT`].
async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge { limit: BODY_LIMIT }
        } else {
            ApiError::BadRequest {
                slug: "malformed-json",
                field: Some("body".into()),
                detail: e.body_text(),
                hint: None,
            }
        }
    })
}

/// What every matched route runs through, as one layer (each layer costs a request its own
/// boxed service and future): the audit trail of a change, outside the request's span and
/// access line (so the answer it records already carries its request id), then the body read
/// first.
async fn per_route(State(state): State<AppState>, request: Request, next: Next) -> Response {
    audit::record(&state, request, |request| {
        trace::trace(request, |request| body_first(request, next))
    })
    .await
}

/// Reads a request's body before any extractor may refuse the request. Refused on its path or
/// a header before its body had arrived, a request would otherwise be answered and its
/// connection then closed by hyper without a `Connection: close`, so a keep-alive client's
/// next request on that connection would get no answer at all.
async fn body_first(req: Request, next: Next) -> Response {
    use axum::body::HttpBody as _;
    if req.body().size_hint().exact() == Some(0) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let probe = Request::from_parts(parts.clone(), body);
    match read_body(probe, &()).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(e) => axum::response::IntoResponse::into_response(e),
    }
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            let mime = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        });
    let bytes = read_body(req, state).await?;
    if !bytes.is_empty() && is_json != Some(true) {
        return Err(ApiError::BadRequest {
            slug: "unsupported-media-type",
            field: Some("Content-Type".into()),
            detail: "send the body as JSON".into(),
            hint: Some(Box::new(json!("application/json"))),
        });
    }
    Ok(bytes)
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Err(ApiError::BadRequest {
                slug: "malformed-json",
                field: Some("body".into()),
                detail: "a JSON body is required".into(),
                hint: None,
            });
        }
        parse_json(&bytes).map(ApiJson)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&bytes).map(OptionalJson)
    }
}

/// `GET /metrics`: the Prometheus text exposition (behind the same edge and token as the API).
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    use axum::response::IntoResponse as _;
    let scraped = crate::service::gauges::scrape(&state.engine).await?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::global().render(&scraped),
    )
        .into_response())
}

/// Every documented REST operation, each declared once in its resource's router.
pub fn rest() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa::OpenApi;
    utoipa_axum::router::OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(aws::router())
        .merge(agent::router())
        .merge(audit::router())
        .merge(clusters::router())
        .merge(costs::router())
        .merge(stages::router())
        .merge(features::router())
        .merge(groups::router())
        .merge(evidence::router())
        .merge(operations::router())
        .merge(workloads::router())
        .merge(training::router())
        .merge(logs::router())
        .merge(mlflow::router())
        .merge(endpoints::router())
        .merge(spaces::router())
        .merge(pools::router())
        .merge(teams::router())
        .merge(utilization::router())
}

/// The whole HTTP surface: REST, UI and the MCP endpoint, behind one edge layer.
pub fn router<M>(state: AppState, mcp: M) -> axum::Router
where
    M: tower::Service<Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    M::Response: axum::response::IntoResponse,
    M::Future: Send + 'static,
{
    let (rest, doc) = rest().split_for_parts();
    openapi::keep(doc);
    let api = rest
        .merge(ui::router())
        .route("/api/events", axum::routing::get(events::events))
        .route(
            "/api/clusters/{name}/workloads/{kind}/{workload}/logs/follow",
            axum::routing::get(logs::follow),
        )
        .route("/api/openapi.json", axum::routing::get(openapi::serve))
        .route("/metrics", axum::routing::get(metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            per_route,
        ))
        .nest_service("/mcp", mcp)
        .fallback(|| async { ApiError::not_found("route") })
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT));
    api.layer(axum::middleware::from_fn_with_state(state.clone(), edge))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_origin_are_compared_without_regard_to_case() {
        let p = EdgePolicy::new(3099, "127.0.0.1".parse().unwrap(), &[], None);
        let headers = |host: &'static str, origin: Option<&'static str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static(host));
            if let Some(o) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_static(o));
            }
            h
        };
        assert!(p.host_ok(&headers("LocalHost:3099", None)));
        assert!(p.host_ok(&headers("127.0.0.1:3099", None)));
        assert!(!p.host_ok(&headers("localhost:3098", None)));
        assert!(!p.host_ok(&headers("evil.example:3099", None)));
        assert!(p.origin_ok(&headers("localhost:3099", Some("HTTP://LOCALHOST:3099"))));
        assert!(!p.origin_ok(&headers("localhost:3099", Some("http://evil.example"))));
        // A browser's default port is implicit in Host.
        let port80 = EdgePolicy::new(80, "127.0.0.1".parse().unwrap(), &[], None);
        assert!(port80.host_ok(&headers("LOCALHOST", None)));
    }
}
