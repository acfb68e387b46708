//! The REST face (axum): the routers of each resource merged in one place behind the edge
//! ([`edge`]: Host/Origin guard, bearer token, security headers) and the body limit, the layer every
//! matched route runs through (audit, trace, body read first), and the extractors (actor,
//! idempotency key, JSON, query) that turn every malformed input into the problem shape. A
//! handler extracts, makes one `service/` call and responds.

pub mod agent;
pub mod audit;
pub mod aws;
pub mod clusters;
pub mod costs;
pub mod edge;
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
pub mod serve;
pub mod space_proxy;
pub mod spaces;
pub mod stages;
pub mod teams;
pub mod trace;
pub mod training;
pub mod ui;
pub mod utilization;
pub mod workloads;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{header, request::Parts};
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub use edge::{Edge, EdgePolicy, BEARER_PROTOCOL, CSP};

/// Largest accepted request body.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Header naming who is acting: `browser` (the UI), `agent` (MCP) or `api` (default).
pub const ACTOR_HEADER: &str = "x-instantstart-actor";
pub const ACTORS: &[&str] = &["browser", "agent", "api"];
/// Header on every response of a sandbox server.
pub const CLOUD_HEADER: &str = "x-instantstart-cloud";

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

/// What every matched route runs through, as one layer: the audit trail of a change, outside
/// the request's span and access line (so the answer it records already carries its request
/// id), then the body read first. A read without a body — a probe, a status poll, a list —
/// has nothing to record or read first: it is only traced, in a future of its own, with no
/// allocation for the layer (an axum `from_fn` boxes the inner service and two futures).
#[derive(Clone)]
struct PerRoute<S> {
    state: AppState,
    inner: S,
}

#[derive(Clone)]
struct PerRouteLayer(AppState);

impl<S> tower::Layer<S> for PerRouteLayer {
    type Service = PerRoute<S>;
    fn layer(&self, inner: S) -> PerRoute<S> {
        PerRoute {
            state: self.0.clone(),
            inner,
        }
    }
}

impl<S> tower::Service<Request> for PerRoute<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = PerRouteFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        use axum::body::HttpBody as _;
        use tracing::Instrument as _;
        if !audit::records(request.method()) && request.body().size_hint().exact() == Some(0) {
            let trace = trace::Trace::begin(&request);
            return PerRouteFuture::Read {
                inner: self.inner.call(request).instrument(trace.span()),
                trace: Some(trace),
            };
        }
        // The service made ready is the one called; its clone waits for the next request.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        PerRouteFuture::Other {
            inner: Box::pin(async move {
                audit::record(&state, request, |request| {
                    trace::trace(request, |request| body_first(request, inner))
                })
                .await
            }),
        }
    }
}

pin_project_lite::pin_project! {
    #[project = PerRouteProj]
    enum PerRouteFuture<F> {
        Read { #[pin] inner: tracing::instrument::Instrumented<F>, trace: Option<trace::Trace> },
        Other { inner: futures::future::BoxFuture<'static, Response> },
    }
}

impl<F> Future for PerRouteFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            PerRouteProj::Read { inner, trace } => {
                let Ok(mut response) = std::task::ready!(inner.poll(cx));
                if let Some(trace) = trace.take() {
                    trace.finish(&mut response);
                }
                Poll::Ready(Ok(response))
            }
            PerRouteProj::Other { inner } => inner.as_mut().poll(cx).map(Ok),
        }
    }
}

/// Reads a request's body before any extractor may refuse the request. Refused on its path or
/// a header before its body had arrived, a request would otherwise be answered and its
/// connection then closed by hyper without a `Connection: close`, so a keep-alive client's
/// next request on that connection would get no answer at all.
async fn body_first<S>(req: Request, inner: S) -> Response
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    use axum::body::HttpBody as _;
    use tower::ServiceExt as _;
    let req = if req.body().size_hint().exact() == Some(0) {
        req
    } else {
        let (parts, body) = req.into_parts();
        let probe = Request::from_parts(parts.clone(), body);
        match read_body(probe, &()).await {
            Ok(bytes) => Request::from_parts(parts, axum::body::Body::from(bytes)),
            Err(e) => return axum::response::IntoResponse::into_response(e),
        }
    };
    let Ok(response) = inner.oneshot(req).await;
    response
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
        crate::cloud::metrics::global().render(&scraped),
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

/// The whole HTTP surface: REST, UI and the MCP endpoint, behind the edge.
pub type Http = Edge<<axum::extract::DefaultBodyLimit as tower::Layer<axum::Router>>::Service>;

/// The whole HTTP surface: REST, UI and the MCP endpoint, behind one edge layer.
pub fn router<M>(state: AppState, mcp: M) -> Http
where
    M: tower::Service<Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    M::Response: axum::response::IntoResponse,
    M::Future: Send + 'static,
{
    let (rest, doc) = rest().split_for_parts();
    openapi::keep(doc);
    let routes = rest
        .merge(ui::router())
        .route("/api/events", axum::routing::get(events::events))
        .route(
            "/api/clusters/{name}/workloads/{kind}/{workload}/logs/follow",
            axum::routing::get(logs::follow),
        )
        .route("/api/openapi.json", axum::routing::get(openapi::serve))
        .route("/metrics", axum::routing::get(metrics))
        .route_layer(PerRouteLayer(state.clone()))
        .nest_service("/mcp", mcp)
        .fallback(|| async { ApiError::not_found("route") })
        .with_state(state.clone());
    // Wrapped around the router, not layered onto it: `Router::layer` wraps every route
    // again, a boxed service and future per request for each layer.
    let limited = tower::Layer::layer(&axum::extract::DefaultBodyLimit::max(BODY_LIMIT), routes);
    Edge::new(state, limited)
}
