//! Process metrics in the Prometheus text format (`GET /metrics`): one registry for the whole
//! process, filled where things happen (requests, MCP tool calls) and read on scrape.
//!
//! Labels are bounded by construction: routes are templates, never raw paths; tools and
//! outcomes come from fixed lists. Nothing secret is ever a label.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    /// The matched route template, e.g. `/api/clusters/{name}/status`.
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: &'static str,
}

/// A route template as a `&'static str`, kept once per template: labels then cost no copy per
/// request. Bounded: templates come from the router, never from raw paths.
fn interned(route: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::RwLock;
    static ROUTES: OnceLock<RwLock<HashSet<&'static str>>> = OnceLock::new();
    let routes = ROUTES.get_or_init(Default::default);
    if let Some(r) = routes.read().unwrap_or_else(|e| e.into_inner()).get(route) {
        return r;
    }
    let mut w = routes.write().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = w.get(route) {
        return r;
    }
    let r: &'static str = Box::leak(route.to_string().into_boxed_str());
    w.insert(r);
    r
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub tool: String,
    /// `ok`, `problem` (the REST call answered an error) or `error` (the call did not run).
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub service: String,
    pub operation: String,
    /// `ok`, `throttled`, `retryable` (another transient fault) or `error`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// Where the retry happened: `phase` (the engine, inside a phase), `request` (a read made
    /// while validating a request) or `sdk` (the AWS adapter's own retry of a safe call).
    pub layer: &'static str,
    pub service: String,
    pub operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
    /// `succeeded`, `failed` or `cancelled`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabels {
    /// `events` (the UI's WebSocket) or `log-follow` (a followed workload log).
    pub kind: &'static str,
}

/// Every metric family of the process.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_seconds: Family<RouteLabels, Histogram>,
    pub tool_calls: Family<ToolLabels, Counter>,
    /// Time an MCP tool call spends outside the REST handler it runs (argument mapping,
    /// request building, reading and wrapping the answer).
    pub tool_overhead_seconds: Histogram,
    pub cloud_calls: Family<CallLabels, Counter>,
    pub retries: Family<RetryLabels, Counter>,
    /// How long phases took, from their recorded start to their end.
    pub phase_seconds: Family<PhaseLabels, Histogram>,
    pub open_streams: Family<StreamLabels, Gauge>,
}

fn latency_buckets() -> Histogram {
    // 100 µs … ~13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// What one route answered with one method counts into, found in the families once per thread.
struct RouteMetrics {
    seconds: Histogram,
    /// By status: a route answers a handful.
    requests: Vec<(u16, Counter)>,
}

/// A method's label: the standard ones by name, any other as `OTHER` (bounded).
const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER",
];

/// Where a method's label is in [`METHODS`].
fn method_index(m: &axum::http::Method) -> usize {
    use axum::http::Method;
    match *m {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::PATCH => 4,
        Method::DELETE => 5,
        Method::OPTIONS => 6,
        _ => 7,
    }
}

thread_local! {
    /// Each route's metrics by method, as this thread first counted them: a request then
    /// costs one hash of its route template, with no lock and no label set hashed (looking
    /// both families up took two locks and three hashes). Bounded like the labels: templates
    /// come from the router, methods and statuses from fixed sets.
    static ROUTE_METRICS: std::cell::RefCell<
        std::collections::HashMap<Box<str>, [Option<RouteMetrics>; METHODS.len()]>,
    > = Default::default();
}

/// Counts one answered request and its latency in the process's registry, by method, route
/// template and status.
pub fn request(method: &axum::http::Method, route: &str, status: u16, secs: f64) {
    let m = method_index(method);
    ROUTE_METRICS.with_borrow_mut(|routes| {
        // One hash of the route once it is known; a second only the first time.
        if let Some(by_method) = routes.get_mut(route) {
            return count(&mut by_method[m], m, route, status, secs);
        }
        let by_method = routes.entry(route.into()).or_default();
        count(&mut by_method[m], m, route, status, secs);
    });
}

/// Counts into one route's and method's metrics, looking them up in the families the first
/// time (and a status the first time it is answered).
fn count(slot: &mut Option<RouteMetrics>, m: usize, route: &str, status: u16, secs: f64) {
    let metrics = global();
    let labels = || (METHODS[m], interned(route));
    let counted = slot.get_or_insert_with(|| {
        let (method, route) = labels();
        RouteMetrics {
            seconds: metrics
                .request_seconds
                .get_or_create(&RouteLabels { method, route })
                .clone(),
            requests: Vec::new(),
        }
    });
    counted.seconds.observe(secs);
    if let Some((_, c)) = counted.requests.iter().find(|(s, _)| *s == status) {
        c.inc();
        return;
    }
    let (method, route) = labels();
    let c = metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .clone();
    c.inc();
    counted.requests.push((status, c));
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("instantstart");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            requests.clone(),
        );
        let request_seconds =
            Family::<RouteLabels, Histogram>::new_with_constructor(latency_buckets as fn() -> _);
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency, by method and route template",
            request_seconds.clone(),
        );
        let tool_calls = Family::<ToolLabels, Counter>::default();
        registry.register(
            "mcp_tool_calls",
            "MCP tool calls, by tool and outcome",
            tool_calls.clone(),
        );
        // 10 µs … ~20 ms.
        let tool_overhead_seconds = Histogram::new(exponential_buckets(0.00001, 2.0, 12));
        registry.register(
            "mcp_tool_overhead_seconds",
            "Time an MCP tool call spends outside the REST handler it dispatches to",
            tool_overhead_seconds.clone(),
        );
        let cloud_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "cloud_calls",
            "Cloud calls (AWS APIs, or the sandbox's), by service, operation and outcome",
            cloud_calls.clone(),
        );
        let retries = Family::<RetryLabels, Counter>::default();
        registry.register(
            "retries",
            "Transient cloud errors ridden out by retrying, by layer, service and operation",
            retries.clone(),
        );
        // 100 ms … ~3.6 h.
        let phase_seconds = Family::<PhaseLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.1, 2.0, 18))) as fn() -> _,
        );
        registry.register(
            "phase_duration_seconds",
            "Phases of operations, from their recorded start to their end, by phase and outcome",
            phase_seconds.clone(),
        );
        let open_streams = Family::<StreamLabels, Gauge>::default();
        registry.register(
            "open_streams",
            "WebSockets open now, by kind",
            open_streams.clone(),
        );
        Self {
            registry,
            requests,
            request_seconds,
            tool_calls,
            tool_overhead_seconds,
            cloud_calls,
            retries,
            phase_seconds,
            open_streams,
        }
    }

    /// Counts a stream as open until the guard is dropped.
    pub fn stream_opened(&self, kind: &'static str) -> StreamGuard {
        let gauge = self
            .open_streams
            .get_or_create(&StreamLabels { kind })
            .clone();
        gauge.inc();
        StreamGuard(gauge)
    }

    /// Counts one cloud call's outcome.
    pub fn cloud_call(
        &self,
        service: &str,
        operation: &str,
        result: Result<(), &crate::CloudError>,
    ) {
        let outcome = match result {
            Ok(()) => "ok",
            Err(e)
                if e.code.contains("Throttl")
                    || e.code == "SlowDown"
                    || e.code == "RequestLimitExceeded" =>
            {
                "throttled"
            }
            Err(e) if e.retryable => "retryable",
            Err(_) => "error",
        };
        self.cloud_calls
            .get_or_create(&CallLabels {
                service: service.to_string(),
                operation: operation.to_string(),
                outcome,
            })
            .inc();
    }

    /// Counts one retry of a transient error.
    pub fn retried(&self, layer: &'static str, e: Option<&crate::CloudError>) {
        let (service, operation) =
            e.map_or(("", ""), |e| (e.service.as_str(), e.operation.as_str()));
        self.retries
            .get_or_create(&RetryLabels {
                layer,
                service: service.to_string(),
                operation: operation.to_string(),
            })
            .inc();
    }

    /// The text exposition of every family, then of `scraped` (families read from the app's
    /// state at scrape time), then the end marker.
    pub fn render(&self, scraped: &Registry) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, scraped);
        let _ = encode_eof(&mut out);
        out
    }
}

/// An open stream, counted in `open_streams` while it lives.
pub struct StreamGuard(Gauge);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The process's metrics (one registry however many apps a process builds, as in tests).
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_method_route_and_status_from_every_thread() {
        use axum::http::Method;
        // A template of this test's own: the registry is the process's.
        let route = "/test/counted/{id}";
        for _ in 0..3 {
            request(&Method::GET, route, 200, 0.001);
        }
        request(&Method::GET, route, 404, 0.001);
        std::thread::spawn(move || request(&Method::GET, route, 200, 0.001))
            .join()
            .expect("counted on another thread");
        request(&Method::POST, route, 202, 0.001);
        request(
            &Method::from_bytes(b"PROPFIND").expect("a method"),
            route,
            207,
            0.001,
        );
        let text = global().render(&Registry::default());
        let line = |family: &str, labels: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{family}{{{labels}}} ")))
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
        };
        let counted = |method: &str, status: u16| {
            line(
                "instantstart_http_requests_total",
                &format!(r#"method="{method}",route="{route}",status="{status}""#),
            )
        };
        assert_eq!(counted("GET", 200).as_deref(), Some("4"), "{text}");
        assert_eq!(counted("GET", 404).as_deref(), Some("1"));
        assert_eq!(counted("POST", 202).as_deref(), Some("1"));
        assert_eq!(counted("OTHER", 207).as_deref(), Some("1"));
        let timed = line(
            "instantstart_http_request_duration_seconds_count",
            &format!(r#"method="GET",route="{route}""#),
        );
        assert_eq!(timed.as_deref(), Some("5"), "{text}");
    }

    #[test]
    fn a_stream_is_counted_while_its_guard_lives() {
        let m = Metrics::new();
        let open = |m: &Metrics| {
            m.open_streams
                .get_or_create(&StreamLabels { kind: "events" })
                .get()
        };
        let a = m.stream_opened("events");
        let b = m.stream_opened("events");
        assert_eq!(open(&m), 2);
        drop(a);
        assert_eq!(open(&m), 1);
        drop(b);
        assert_eq!(open(&m), 0);
        let text = m.render(&Registry::default());
        assert!(
            text.contains(r#"instantstart_open_streams{kind="events"} 0"#),
            "{text}"
        );
    }
}
