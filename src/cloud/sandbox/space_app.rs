//! What a sandbox space's pod serves on its port: a small HTTP and WebSocket app standing in for
//! JupyterLab or Code Editor, reached through a port-forward (an in-memory stream here), so the
//! control plane's proxy is exercised end to end — a page naming the space and what it mounts,
//! `api/status`, and an echo WebSocket (as a kernel's channel would answer).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde_json::json;

use crate::cloud::PodStream;

/// What the page shows of the space.
#[derive(Clone)]
pub(super) struct SpaceInfo {
    pub name: String,
    /// The path it serves under (`/workspaces/<namespace>/<name>`).
    pub base: String,
    /// `(path, claim)` of what it mounts beside its home.
    pub mounts: Vec<(String, String)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn page(info: SpaceInfo) -> Response {
    let mounts: String = info
        .mounts
        .iter()
        .map(|(path, claim)| format!("<li><code>{}</code> ({})</li>", escape(path), escape(claim)))
        .collect();
    Html(format!(
        "<!doctype html><html><head><title>{name} · JupyterLab (sandbox)</title></head>\
         <body><h1 id=\"space\">{name}</h1><p>A sandbox space, served through the control plane.</p>\
         <ul id=\"mounts\">{mounts}</ul></body></html>",
        name = escape(&info.name)
    ))
    .into_response()
}

async fn echo(mut socket: WebSocket) {
    while let Some(Ok(message)) = socket.recv().await {
        let reply = match message {
            Message::Text(t) => Message::Text(format!("echo: {}", t.as_str()).into()),
            Message::Binary(b) => Message::Binary(b),
            Message::Close(_) => break,
            _ => continue,
        };
        if socket.send(reply).await.is_err() {
            break;
        }
    }
}

/// Serves one connection of the space's app on an in-memory stream; returns the other end.
pub(super) fn connect(info: SpaceInfo) -> PodStream {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let base = info.base.trim_end_matches('/').to_string();
    let status = json!({"started": true, "space": info.name});
    let page_info = info.clone();
    let router = axum::Router::new()
        .route(
            &format!("{base}/api/status"),
            get(move || async move { Json(status) }),
        )
        .route(
            &format!("{base}/api/echo"),
            get(|ws: WebSocketUpgrade| async move { ws.on_upgrade(echo) }),
        )
        .fallback(move || page(page_info.clone()));
    tokio::spawn(async move {
        let service = hyper_util::service::TowerToHyperService::new(router);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(theirs), service)
            .with_upgrades()
            .await;
    });
    Box::new(ours)
}
