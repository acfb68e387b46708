//! Request tracing: every matched request runs in a span with its request id, method and route,
//! and ends with one event giving status and latency. The id comes from a well-formed
//! `X-Request-Id` the caller sent, or is made here; it is answered in the same header, and
//! whatever the request starts (an operation's "submitted" event) is logged inside its span.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub const REQUEST_ID: &str = "x-request-id";

/// A caller's id is kept only if it is short and plain (it ends up in logs).
fn caller_id(request: &Request) -> Option<String> {
    let v = request.headers().get(REQUEST_ID)?.to_str().ok()?;
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    ok.then(|| v.to_string())
}

pub async fn trace(request: Request, next: Next) -> Response {
    let id = caller_id(&request).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), route = %route);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request finished"
        );
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, v);
    }
    response
}
