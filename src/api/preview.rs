//! `?dryRun=true` at the edge: which routes take it, how it is read off the query string (so no
//! handler's query sees it), how a previewed request's answer becomes its plan, and the
//! parameter and answer the OpenAPI document (and so every MCP tool) declares for it.
//!
//! One convention everywhere: a query parameter, as Kubernetes (`dryRun`) and the AWS APIs
//! (`DryRun`) spell it, rather than a `Prefer` header: an agent's tool takes it as one more
//! argument, a link or a log line shows it, and a proxy never drops it.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::{MatchedPath, Request};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::service::shared::preview;

/// The writing routes without a preview, and why: each changes nothing a plan could show.
pub const NOT_PREVIEWED: &[(&str, &str)] = &[
    (
        "session_create",
        "signing in changes nothing in the account or the clusters",
    ),
    (
        "session_delete",
        "signing out changes nothing but the session",
    ),
    (
        "endpoint_invoke",
        "an inference request: it sends a prompt and changes nothing",
    ),
    (
        "deployment_invoke",
        "an inference request: it sends a prompt and changes nothing",
    ),
];

/// What the query string asks for.
pub enum Asked {
    /// No `dryRun`, or `dryRun=false`: the request as sent (with `dryRun` taken off).
    Run(Request),
    Preview(Request),
    Refused(Response),
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
            return Asked::Refused(
                ApiError::validation_hint(
                    "dryRun",
                    "dryRun must be true or false",
                    json!(["true", "false"]),
                )
                .into_response(),
            )
        }
    };
    if preview {
        if let Some((_, why)) =
            operation_of(&request).and_then(|id| NOT_PREVIEWED.iter().find(|(n, _)| *n == id))
        {
            return Asked::Refused(
                ApiError::validation("dryRun", format!("this route has no preview: {why}"))
                    .into_response(),
            );
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

/// The document's operation id of a matched request.
fn operation_of(request: &Request) -> Option<&'static str> {
    static IDS: OnceLock<HashMap<(String, String), String>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let mut ids = HashMap::new();
        for (path, item) in super::openapi::document()["paths"]
            .as_object()
            .into_iter()
            .flatten()
        {
            for (method, op) in item.as_object().into_iter().flatten() {
                if let Some(id) = op["operationId"].as_str() {
                    ids.insert((method.to_uppercase(), path.clone()), id.to_string());
                }
            }
        }
        ids
    });
    let path = request.extensions().get::<MatchedPath>()?.as_str();
    ids.get(&(request.method().to_string(), path.to_string()))
        .map(String::as_str)
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

/// Whether the document's operation takes `dryRun`: every writing one but [`NOT_PREVIEWED`].
pub fn takes_dry_run(op_id: &str, method: &str) -> bool {
    ["post", "put", "patch", "delete"].contains(&method)
        && !NOT_PREVIEWED.iter().any(|(id, _)| *id == op_id)
}

/// Declares `dryRun` and its answer on a writing operation of the document.
pub fn declare(op: &mut Value) {
    let param = json!({
        "name": "dryRun",
        "in": "query",
        "required": false,
        "description": "true: answer with the plan (the operations and phases it would run, the mutating calls each makes, what it would change, the running workloads it would disturb) and write nothing.",
        "schema": {"type": "boolean"},
    });
    match op.get_mut("parameters").and_then(Value::as_array_mut) {
        Some(params) => params.push(param),
        None => op["parameters"] = json!([param]),
    }
    let plan = json!({"$ref": "#/components/schemas/Plan"});
    let ok = &mut op["responses"]["200"];
    match ok.pointer_mut("/content/application~1json/schema") {
        // A route that already answers 200 answers its own body or, previewed, the plan.
        Some(schema) => {
            let own = schema.take();
            *schema = json!({"anyOf": [own, plan]});
        }
        None => {
            *ok = json!({
                "description": "With `dryRun=true`: the plan; nothing was written",
                "content": {"application/json": {"schema": plan}},
            })
        }
    }
}
