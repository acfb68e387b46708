//! The edge every request passes first, wrapped around the whole router (REST, MCP, UI): the
//! DNS-rebinding guard (Host and Origin), the bearer token, a space's own host handed to its
//! proxy, and the security headers on every answer. It is a tower service with its own future,
//! not an axum middleware: `from_fn` under `Router::layer` cost each request about eight
//! allocations (a boxed clone of the inner service, two boxed futures, a route wrapper) for what
//! is a few header comparisons.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use futures::future::BoxFuture;

use super::edge_policy::EdgePolicy;
use super::{space_proxy, CLOUD_HEADER};
use crate::error::ApiError;
use crate::problem::ProblemType;
use crate::AppState;

/// Paths served without the token: the health probe and the UI's static files (they hold no
/// data; the UI asks for the token and sends it on every API request).
fn is_public(path: &str) -> bool {
    path == "/healthz" || path == "/" || path.starts_with("/ui/")
}

/// The Content-Security-Policy on every response: only this origin's scripts, styles and
/// connections (WebSocket included), no inline code, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The refusal of a request the edge does not let through, if any.
fn refusal(policy: &EdgePolicy, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    if !policy.host_ok(headers) {
        Some(ApiError::Forbidden {
            slug: ProblemType::ForbiddenHost,
            detail: "the Host header does not name this server; add it with --allowed-host if it is a proxy or port-forward you trust".into(),
        })
    } else if !policy.origin_ok(headers) {
        Some(ApiError::Forbidden {
            slug: ProblemType::ForbiddenOrigin,
            detail: "cross-origin requests are refused".into(),
        })
    } else if !is_public(request.uri().path()) && !policy.token_ok(headers) {
        Some(ApiError::Unauthorized)
    } else if is_mcp(request.uri().path()) && declared_length(request) > super::BODY_LIMIT {
        // The MCP service reads its bodies itself, past the router's limit: held to REST's.
        Some(ApiError::PayloadTooLarge {
            limit: super::BODY_LIMIT,
        })
    } else {
        None
    }
}

/// A request that would open one more MCP session (a POST without `Mcp-Session-Id`) once the
/// server holds its cap of them: refused before rmcp makes a session and its worker. Idle
/// sessions end by themselves after five minutes, freeing their places.
fn mcp_sessions_full(state: &AppState, request: &Request) -> Option<ApiError> {
    let opens = is_mcp(request.uri().path())
        && request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens {
        return None;
    }
    let cap = state.caps.mcp_sessions;
    // A session being added or removed holds the lock for an instant: counted next time.
    let open = state
        .mcp_sessions
        .sessions
        .try_read()
        .map(|s| s.len())
        .ok()?;
    (open >= cap).then(|| ApiError::Busy {
        slug: ProblemType::TooManyMcpSessions,
        detail: format!("this server already holds {cap} MCP sessions, its limit"),
        hint: Some(Box::new(serde_json::json!(
            "end a session you no longer use (DELETE /mcp with its Mcp-Session-Id), or wait: an idle one ends after five minutes"
        ))),
    })
}

fn is_mcp(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// The body length a request declares (0 when it declares none).
fn declared_length(request: &Request) -> usize {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// An MCP request's body, ended with an error past [`super::BODY_LIMIT`] bytes: one sent
/// without a length (chunked) is held to the same limit as one that declares it.
fn limit_mcp_body(request: Request) -> Request {
    use futures::StreamExt as _;
    if !is_mcp(request.uri().path()) {
        return request;
    }
    let (parts, body) = request.into_parts();
    let mut seen = 0usize;
    let limited = body.into_data_stream().map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len();
        if seen > super::BODY_LIMIT {
            return Err(axum::Error::new(std::io::Error::other(
                "the request body is over the limit",
            )));
        }
        Ok(chunk)
    });
    Request::from_parts(parts, axum::body::Body::from_stream(limited))
}

/// The headers every answer carries (a space's proxied answers excepted: they are its own).
/// No answer is stored by a cache (`no-store`: API and MCP answers carry the account's state)
/// but the UI's assets, which say how they may be cached.
fn secure(mut response: Response, sandbox: bool, ui: bool) -> Response {
    let h = response.headers_mut();
    if !ui || !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
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
    if sandbox {
        // A static name is not copied, where a `&str` one would be on every answer.
        h.insert(
            HeaderName::from_static(CLOUD_HEADER),
            HeaderValue::from_static("sandbox"),
        );
    }
    response
}

/// Whether a path answers data (REST, MCP, events, metrics) rather than a UI asset.
fn is_data(path: &str) -> bool {
    ["/api", "/mcp", "/metrics", "/healthz"].iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// The edge around a service (the router): see the module's doc.
#[derive(Clone)]
pub struct Edge<S> {
    state: AppState,
    inner: S,
}

impl<S> Edge<S> {
    pub fn new(state: AppState, inner: S) -> Self {
        Self { state, inner }
    }
}

impl<S> tower::Service<Request> for Edge<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let state = &self.state;
        // A space's own host: its proxy checks origin and session itself.
        if let Some((cluster, space)) = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| space_proxy::space_host(&state.edge.hosts, h))
        {
            return EdgeFuture::Proxy {
                inner: Box::pin(space_proxy::serve(
                    AppState::clone(state),
                    cluster,
                    space,
                    request,
                )),
            };
        }
        let sandbox = state.sandbox.is_some();
        match refusal(&state.edge, &request).or_else(|| mcp_sessions_full(state, &request)) {
            Some(e) => {
                let mut response = secure(e.into_response(), sandbox, false);
                // Refused before its body was read, the connection cannot carry another
                // request: say so, or a keep-alive client sends its next one into a closing
                // socket and gets no answer.
                if declared_length(&request) > 0
                    || request.headers().contains_key(header::TRANSFER_ENCODING)
                {
                    response.headers_mut().insert(
                        header::CONNECTION,
                        header::HeaderValue::from_static("close"),
                    );
                }
                EdgeFuture::Refused { response }
            }
            None => EdgeFuture::Passed {
                ends_session: request.method() == axum::http::Method::DELETE
                    && request.uri().path() == "/mcp",
                ui: !is_data(request.uri().path()),
                inner: self.inner.call(limit_mcp_body(request)),
                sandbox,
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// What the edge answers: the inner service's answer with the edge's headers, a refusal,
    /// or a space's proxied answer.
    #[project = EdgeProj]
    pub enum EdgeFuture<F> {
        Passed { #[pin] inner: F, sandbox: bool, ends_session: bool, ui: bool },
        Refused { response: Response },
        Proxy { inner: BoxFuture<'static, Response> },
    }
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            EdgeProj::Passed {
                inner,
                sandbox,
                ends_session,
                ui,
            } => {
                let Ok(mut response) = std::task::ready!(inner.poll(cx));
                // rmcp answers an ended MCP session 202; the official MCP clients take only
                // 200 or 204 as a terminated session (the Python SDK's `terminate_session`).
                if *ends_session && response.status() == axum::http::StatusCode::ACCEPTED {
                    *response.status_mut() = axum::http::StatusCode::OK;
                }
                Poll::Ready(Ok(secure(response, *sandbox, *ui)))
            }
            EdgeProj::Refused { response } => Poll::Ready(Ok(std::mem::take(response))),
            EdgeProj::Proxy { inner } => inner.as_mut().poll(cx).map(Ok),
        }
    }
}
