//! The web UI: plain HTML, CSS and ES modules embedded at build time (no build step, no
//! external host). [`ASSETS`] is the one list of its files: serving and tests read it.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;
use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(asset))
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file under `/ui/`: (name, content type, body). The shell (`app.js`), the shared kit,
/// one module per page, the stylesheet.
pub const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../web/app.js")),
    ("kit.js", JS, include_str!("../../web/kit.js")),
    ("clusters.js", JS, include_str!("../../web/clusters.js")),
    ("create.js", JS, include_str!("../../web/create.js")),
    ("cluster.js", JS, include_str!("../../web/cluster.js")),
    ("nodes.js", JS, include_str!("../../web/nodes.js")),
    ("evidence.js", JS, include_str!("../../web/evidence.js")),
    ("storage.js", JS, include_str!("../../web/storage.js")),
    ("tokens.js", JS, include_str!("../../web/tokens.js")),
    ("operations.js", JS, include_str!("../../web/operations.js")),
    ("features.js", JS, include_str!("../../web/features.js")),
    ("teams.js", JS, include_str!("../../web/teams.js")),
    ("workloads.js", JS, include_str!("../../web/workloads.js")),
    ("training.js", JS, include_str!("../../web/training.js")),
    ("logs.js", JS, include_str!("../../web/logs.js")),
    ("chart.js", JS, include_str!("../../web/chart.js")),
    ("endpoints.js", JS, include_str!("../../web/endpoints.js")),
    ("pools.js", JS, include_str!("../../web/pools.js")),
    ("spaces.js", JS, include_str!("../../web/spaces.js")),
    ("costs.js", JS, include_str!("../../web/costs.js")),
    (
        "utilization.js",
        JS,
        include_str!("../../web/utilization.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../../web/app.css"),
    ),
];

async fn index() -> Response {
    static_file(
        "text/html; charset=utf-8",
        include_str!("../../web/index.html"),
    )
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ct, body)) => static_file(ct, body),
        None => ApiError::not_found(format!("UI file `{file}`")).into_response(),
    }
}

fn static_file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
