//! Request tracing: every matched request runs in a span with its request id, method and route,
//! and ends with one event giving status and latency. The id comes from a well-formed
//! `X-Request-Id` the caller sent, or is made here; it is answered in the same header, and
//! whatever the request starts (an operation's "submitted" event) is logged inside its span.
//! Each answered request is counted in the metrics by route template and status.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::metrics::{RequestLabels, RouteLabels};

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
    let method = request.method().to_string();
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    span.in_scope(|| {
        tracing::info!(status, latency_ms = elapsed * 1000.0, "request finished");
    });
    let m = crate::metrics::global();
    m.request_seconds
        .get_or_create(&RouteLabels {
            method: method.clone(),
            route: route.clone(),
        })
        .observe(elapsed);
    m.requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .inc();
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, v);
    }
    response
}
