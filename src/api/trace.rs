//! Request tracing: every matched request runs in a span with its request id, method and route,
//! and ends with one event giving status and latency: at info for a request that changes
//! something or is refused, at warn for a server error or a slow answer, and at debug for a
//! successful read (probes and status polls would otherwise fill the log of an idle server). The id comes from a well-formed
//! `X-Request-Id` the caller sent, or is made here; it is answered in the same header, and
//! whatever the request starts (an operation's "submitted" event) is logged inside its span.
//! Each answered request is counted in the metrics by route template and status.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method};
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

/// A new request id: a UUIDv7 (time-ordered, so ids in a log sort by when they came) whose
/// random bits come from the thread's generator. `Uuid::now_v7` asks the kernel for them on
/// every call: a system call on every request, a few percent of a cheap request's cost.
pub fn new_request_id() -> String {
    use rand::RngCore as _;
    let mut random = [0u8; 10];
    rand::thread_rng().fill_bytes(&mut random);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    uuid::Builder::from_unix_timestamp_millis(millis, &random)
        .into_uuid()
        .to_string()
}

/// An answer slower than this is logged at warn, whatever it was.
const SLOW_SECS: f64 = 1.0;

/// The level a request's "request finished" line is logged at.
fn access_level(method: &Method, status: u16, secs: f64) -> tracing::Level {
    if status >= 500 || secs >= SLOW_SECS {
        tracing::Level::WARN
    } else if !is_read(method) || status >= 400 {
        tracing::Level::INFO
    } else {
        tracing::Level::DEBUG
    }
}

/// A read: what a probe or a status poll sends.
fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A request being traced: begun when it is matched, finished with its answer. A read's span
/// is at debug, so at the default level it is never made (a probe or a poll costs no span);
/// when its answer is logged after all (refused, failed or slow), the line gets the same span
/// then, so every access line has the same fields.
pub struct Trace {
    id: String,
    route: Option<MatchedPath>,
    method: Method,
    started: Instant,
    during: tracing::Span,
}

impl Trace {
    pub fn begin(request: &Request) -> Self {
        let id = caller_id(request).unwrap_or_else(new_request_id);
        let route = request.extensions().get::<MatchedPath>().cloned();
        let method = request.method().clone();
        let level = if is_read(&method) {
            tracing::Level::DEBUG
        } else {
            tracing::Level::INFO
        };
        let during = span(level, &id, &method, route.as_ref());
        Self {
            id,
            route,
            method,
            started: Instant::now(),
            during,
        }
    }

    /// The span the request's work runs in.
    pub fn span(&self) -> tracing::Span {
        self.during.clone()
    }

    /// Logs the access line, counts the answer, and answers the request id.
    pub fn finish(self, response: &mut Response) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let status = response.status().as_u16();
        let latency_ms = elapsed * 1000.0;
        let level = access_level(&self.method, status, elapsed);
        if level != tracing::Level::DEBUG || !self.during.is_disabled() {
            let line = if self.during.is_disabled() {
                span(
                    tracing::Level::INFO,
                    &self.id,
                    &self.method,
                    self.route.as_ref(),
                )
            } else {
                self.during
            };
            line.in_scope(|| match level {
                tracing::Level::WARN => tracing::warn!(status, latency_ms, "request finished"),
                tracing::Level::INFO => tracing::info!(status, latency_ms, "request finished"),
                _ => tracing::debug!(status, latency_ms, "request finished"),
            });
        }
        let route = self.route.as_ref().map_or("", |p| p.as_str());
        crate::cloud::metrics::request(&self.method, route, status, elapsed);
        // The id's own bytes become the header's (no copy), under a name that is not copied.
        if let Ok(v) = HeaderValue::try_from(self.id) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(REQUEST_ID), v);
        }
    }
}

fn span(
    level: tracing::Level,
    id: &str,
    method: &Method,
    route: Option<&MatchedPath>,
) -> tracing::Span {
    let route = route.map_or("", |p| p.as_str());
    match level {
        tracing::Level::DEBUG => {
            tracing::debug_span!("request", request_id = %id, method = %method, route = %route)
        }
        _ => tracing::info_span!("request", request_id = %id, method = %method, route = %route),
    }
}

/// Runs `inner` in the request's span and logs its access line (see [`Trace`]).
pub async fn trace<F, Fut>(request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let trace = Trace::begin(&request);
    let mut response = inner(request).instrument(trace.span()).await;
    trace.finish(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn request_ids_are_distinct_time_ordered_v7_uuids() {
        let ids: Vec<uuid::Uuid> = (0..1000)
            .map(|_| new_request_id().parse().expect("a UUID"))
            .collect();
        assert!(ids.iter().all(|u| u.get_version_num() == 7));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        // The timestamp leads (so they sort by time), and it is now.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let (secs, _) = ids[0].get_timestamp().expect("a v7 timestamp").to_unix();
        assert!(now.abs_diff(secs) <= 1, "{secs} vs {now}");
    }

    #[test]
    fn changes_refusals_errors_and_slow_answers_are_logged_and_quick_reads_are_debug() {
        assert_eq!(access_level(&Method::GET, 200, 0.01), Level::DEBUG);
        assert_eq!(access_level(&Method::GET, 101, 0.01), Level::DEBUG);
        assert_eq!(access_level(&Method::POST, 202, 0.01), Level::INFO);
        assert_eq!(access_level(&Method::DELETE, 404, 0.01), Level::INFO);
        assert_eq!(access_level(&Method::GET, 422, 0.01), Level::INFO);
        assert_eq!(access_level(&Method::GET, 502, 0.01), Level::WARN);
        assert_eq!(access_level(&Method::GET, 200, 1.5), Level::WARN);
    }
}
