//! `?dryRun=true` at the edge: which writing routes take it, how it is read off the query string
//! (so no handler's query sees it) and how a previewed request's answer becomes its plan. What
//! the OpenAPI document (and so every MCP tool) declares for it is the document's (`openapi`).
//!
//! One convention everywhere: a query parameter, as Kubernetes (`dryRun`) and the AWS APIs
//! (`DryRun`) spell it, rather than a `Prefer` header: an agent's tool takes it as one more
//! argument, a link or a log line shows it, and a proxy never drops it.

use axum::extract::{MatchedPath, Request};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ApiError;
use crate::service::shared::preview;

/// The writing routes without a preview (method, path template), and why: each changes nothing
/// a plan could show.
pub const NOT_PREVIEWED: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/api/session",
        "signing in changes nothing in the account or the clusters",
    ),
    (
        "DELETE",
        "/api/session",
        "signing out changes nothing but the session",
    ),
    (
        "POST",
        "/api/clusters/{name}/endpoints/{endpoint}/invoke",
        "an inference request: it sends a prompt and changes nothing",
    ),
    (
        "POST",
        "/api/clusters/{name}/deployments/{deployment}/invoke",
        "an inference request: it sends a prompt and changes nothing",
    ),
];

/// What the query string asks for.
pub enum Asked {
    /// No `dryRun`, or `dryRun=false`: the request as sent (with `dryRun` taken off).
    Run(Request),
    Preview(Request),
    /// The refusal, with the request: its body is read before the answer goes out, as every
    /// refusal's is (`body_first`), so a keep-alive connection stays usable.
    Refused(Request, Response),
}

/// Reads `dryRun` off a writing request's query string.
pub fn asked(mut request: Request) -> Asked {
    let Some(query) = request.uri().query() else {
        return Asked::Run(request);
    };
    let mut dry = None;
    let mut rest = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("dryRun", value) => dry = Some(value.to_string()),
            _ => rest.push(pair),
        }
    }
    let Some(dry) = dry else {
        return Asked::Run(request);
    };
    let preview = match dry.as_str() {
        "true" => true,
        "false" => false,
        _ => {
            let refused = ApiError::validation_hint(
                "dryRun",
                "dryRun must be true or false",
                json!(["true", "false"]),
            );
            return Asked::Refused(request, refused.into_response());
        }
    };
    if preview {
        let matched = request
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        if let Some((_, _, why)) = NOT_PREVIEWED
            .iter()
            .find(|(m, p, _)| *m == request.method().as_str() && Some(*p) == matched)
        {
            let refused =
                ApiError::validation("dryRun", format!("this route has no preview: {why}"));
            return Asked::Refused(request, refused.into_response());
        }
    }
    let path = request.uri().path().to_string();
    let uri = if rest.is_empty() {
        path
    } else {
        format!("{path}?{}", rest.join("&"))
    };
    if let Ok(uri) = uri.parse::<Uri>() {
        *request.uri_mut() = uri;
    }
    if preview {
        Asked::Preview(request)
    } else {
        Asked::Run(request)
    }
}

/// Serves a preview: the request runs with its writes noted instead of made; an answer the real
/// request would have succeeded with becomes the plan, and a refusal stays what it is.
pub async fn serve<F, Fut>(request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let (response, plan) = preview::scope(inner(request)).await;
    if !response.status().is_success() {
        return response;
    }
    axum::Json(plan.finish()).into_response()
}
