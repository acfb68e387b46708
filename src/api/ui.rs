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

/// Every file under `/ui/`: (name, content type, body).
pub const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/app.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/views.js"),
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
