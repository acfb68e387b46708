//! The REST face (axum): the routers of each resource merged in one place behind the edge
//! ([`edge`]: Host/Origin guard, bearer token, security headers) and the body limit, the layer every
//! matched route runs through (a preview's plan, audit, trace, body read first), and the extractors (actor,
//! idempotency key, JSON, query) that turn every malformed input into the problem shape. A
//! handler extracts, makes one `service/` call and responds.

pub mod access;
pub mod agent;
pub mod audit;
pub mod aws;
pub mod clusters;
pub mod costs;
pub mod edge;
pub mod edge_policy;
pub mod endpoints;
pub mod events;
pub mod evidence;
pub mod extract;
pub mod features;
pub mod groups;
pub mod input;
pub mod logs;
pub mod memo;
pub mod mlflow;
pub mod openapi;
pub mod operations;
pub mod people;
pub mod pools;
pub mod preview;
pub mod serve;
pub mod space_proxy;
pub mod space_sessions;
pub mod spaces;
pub mod stages;
pub mod teams;
pub mod trace;
pub mod training;
pub mod ui;
pub mod upgrade;
pub mod utilization;
pub mod workloads;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::{Request, State};
use axum::response::Response;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub use edge::{Edge, CSP};
pub use edge_policy::{EdgePolicy, BEARER_PROTOCOL};
pub use input::*;

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
        if self.state.people.is_none()
            && !audit::records(request.method())
            && request.body().size_hint().exact() == Some(0)
        {
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
                let request = if people::nobodys(request.uri().path()) {
                    request
                } else {
                    match people::identify(&state, request).await {
                        Ok(request) => request,
                        Err(refused) => return refused,
                    }
                };
                let request = if audit::records(request.method()) {
                    match preview::asked(request) {
                        preview::Asked::Run(request) => request,
                        preview::Asked::Refused(request, refused) => {
                            // Called once (by `body_first`, after the body is read).
                            let mut slot = Some(refused);
                            let answer = tower::service_fn(move |_: Request| {
                                let refused = slot.take().unwrap_or_default();
                                async move { Ok::<_, Infallible>(refused) }
                            });
                            return body_first(request, answer).await;
                        }
                        // A preview writes nothing, so the audit trail has nothing to record.
                        preview::Asked::Preview(request) => {
                            return trace::trace(request, |request| {
                                people::admit(&state, request, |request| {
                                    preview::serve(request, |request| body_first(request, inner))
                                })
                            })
                            .await
                        }
                    }
                } else {
                    request
                };
                audit::record(&state, request, |request| {
                    trace::trace(request, |request| {
                        people::admit(&state, request, |request| body_first(request, inner))
                    })
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
        .merge(people::router())
        .merge(workloads::router())
        .merge(training::router())
        .merge(logs::router())
        .merge(mlflow::router())
        .merge(endpoints::router())
        .merge(spaces::router())
        .merge(pools::router())
        .merge(teams::router())
        .merge(access::router())
        .merge(upgrade::router())
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
        .nest_service(
            "/mcp",
            tower::Layer::layer(
                &axum::middleware::from_fn_with_state(state.clone(), people::mcp_gate),
                mcp,
            ),
        )
        .fallback(|| async { ApiError::not_found("route") })
        .with_state(state.clone());
    // Wrapped around the router, not layered onto it: `Router::layer` wraps every route
    // again, a boxed service and future per request for each layer.
    let limited = tower::Layer::layer(&axum::extract::DefaultBodyLimit::max(BODY_LIMIT), routes);
    Edge::new(state, limited)
}
