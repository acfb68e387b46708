//! What a sandbox space's pod serves on its port: a small HTTP and WebSocket app standing in for
//! JupyterLab or Code Editor, reached through a port-forward (an in-memory stream here), so the
//! control plane's proxy is exercised end to end — a page naming the space and what it mounts,
//! `api/status`, an echo WebSocket (as a kernel's channel would answer), and Jupyter's contents
//! API over the pod's file system (`api/contents/s3/code/train.py` is `/s3/code/train.py`).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde_json::{json, Value};

use super::space_files::{Entry, SpaceFiles};
use cloud::PodStream;

/// What the page shows of the space.
#[derive(Clone)]
pub(super) struct SpaceInfo {
    pub name: String,
    /// The path it serves under (`/workspaces/<namespace>/<name>`).
    pub base: String,
    /// `(path, claim)` of what it mounts beside its home.
    pub mounts: Vec<(String, String)>,
    /// What its pod reads and writes.
    pub files: SpaceFiles,
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

/// `GET api/contents/<path>`: a file's text or a directory's entries, as Jupyter's contents
/// API models them (`type`, `name`, `path`, `content`).
async fn read(State(files): State<SpaceFiles>, path: Option<Path<String>>) -> Response {
    let path = format!("/{}", path.map(|p| p.0).unwrap_or_default());
    let name = path.rsplit('/').next().unwrap_or_default().to_string();
    match files.read(&path).await {
        Ok(Some(Entry::File(text))) => Json(json!({"type": "file", "name": name, "path": path,
                                                   "format": "text", "content": text}))
        .into_response(),
        Ok(Some(Entry::Dir(entries))) => {
            let content: Vec<Value> = entries
                .into_iter()
                .map(|(n, dir)| {
                    json!({"type": if dir { "directory" } else { "file" }, "name": n,
                           "path": format!("{}/{n}", path.trim_end_matches('/'))})
                })
                .collect();
            Json(json!({"type": "directory", "name": name, "path": path, "content": content}))
                .into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            format!("No such file or directory: {path}"),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `PUT api/contents/<path>` with `{"content": "..."}`: saves a text file.
async fn write(
    State(files): State<SpaceFiles>,
    Path(path): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let path = format!("/{path}");
    let Some(text) = body["content"].as_str() else {
        return (StatusCode::BAD_REQUEST, "a text `content` is required").into_response();
    };
    match files.write(&path, text).await {
        Ok(true) => (
            StatusCode::CREATED,
            Json(json!({"type": "file", "path": path})),
        )
            .into_response(),
        Ok(false) => (StatusCode::FORBIDDEN, format!("Permission denied: {path}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
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
        .route(&format!("{base}/api/contents"), get(read))
        .route(&format!("{base}/api/contents/"), get(read))
        .route(
            &format!("{base}/api/contents/{{*path}}"),
            get(read).put(write),
        )
        .fallback(move || page(page_info.clone()))
        .with_state(info.files.clone());
    tokio::spawn(async move {
        let service = hyper_util::service::TowerToHyperService::new(router);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(theirs), service)
            .with_upgrades()
            .await;
    });
    Box::new(ours)
}
