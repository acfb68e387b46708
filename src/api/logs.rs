//! Workload logs: a bounded snapshot across a workload's pods (REST and MCP), and the WebSocket
//! that follows them live (`…/logs/follow`; pause/resume from the client, an end with a reason).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::ClusterName;
use crate::error::{ApiError, ApiResult, Problem};
use crate::problem::ProblemType;
use crate::service::logs::{self as l, FollowEvent, LogsQuery, LogsView, Session};
use crate::AppState;

/// The subprotocol the follow WebSocket speaks (a browser also offers its token as
/// `instantstart.bearer.<token>`, since it cannot send an Authorization header).
pub const FOLLOW_PROTOCOL: &str = "instantstart.logs";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(workload_logs))
}

type LogsPath = Path<(String, String, String)>;

fn query(
    q: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<LogsQuery> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::validation("query", e.body_text()))
}

/// Logs of a workload's pods (kind job, pytorch, ray or deployment): the last `tail` lines per
/// pod (default 100), optionally only the last `since` (10m), one `pod`, a `container`, and lines
/// matching `grep` (`|`-separated alternatives, ignoring case, e.g. `NCCL|timeout|out of
/// memory`). Each line is prefixed with its pod and rank. Bounded; `truncated` says when lines
/// were left out. To follow live, open a WebSocket on the same path plus `/follow`.
#[utoipa::path(get, path = "/api/clusters/{name}/workloads/{kind}/{workload}/logs", operation_id = "workload_logs",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("kind" = l::WorkloadKind, Path), ("workload" = String, Path), LogsQuery),
    responses((status = 200, body = LogsView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 429, body = Problem)))]
async fn workload_logs(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    Path(path): LogsPath,
    q: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<LogsView>> {
    let (_, kind, workload) = path;
    let q = query(q)?;
    // Each snapshot may hold up to a MiB per pod while it is read: a place among the reads.
    let _reading = state.caps.log_snapshots.admit()?;
    Ok(Json(
        l::snapshot(&state.engine, &name, &kind, &workload, &q).await?,
    ))
}

/// `GET …/logs/follow`: upgrades to a WebSocket once the workload resolves and a place among
/// the server's follows is free (429 otherwise), so every refusal is a problem document.
pub async fn follow(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
    Path((_, kind, workload)): LogsPath,
    q: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let started = async {
        let ws = ws.map_err(|e| ApiError::BadRequest {
            slug: ProblemType::WebsocketRequired,
            field: None,
            detail: format!("this path follows logs over a WebSocket: {}", e.body_text()),
            hint: Some(Box::new(serde_json::json!(
                "open it with a WebSocket client, or read a snapshot with GET …/logs"
            ))),
        })?;
        let q = query(q)?;
        let permit = state.caps.log_follows.admit()?;
        let session = l::follow(&state.engine, &name, &kind, &workload, &q, permit).await?;
        Ok::<_, ApiError>((ws, session))
    };
    match started.await {
        Ok((ws, session)) => ws
            .protocols([FOLLOW_PROTOCOL])
            .on_upgrade(move |socket| pump(session, socket)),
        Err(e) => e.into_response(),
    }
}

fn text(event: &impl serde::Serialize) -> Message {
    Message::Text(serde_json::to_string(event).unwrap_or_default().into())
}

/// Client messages: `{"type":"pause"}` and `{"type":"resume"}`. While paused nothing is sent;
/// the session's buffer fills and then counts what it drops, reported on resume.
async fn pump(mut session: Session, mut socket: WebSocket) {
    let _open = crate::cloud::metrics::global().stream_opened("log-follow");
    let mut paused = false;
    loop {
        tokio::select! {
            batch = session.next(), if !paused => {
                let Some(batch) = batch else { break };
                for event in &batch {
                    if socket.send(text(event)).await.is_err() {
                        return;
                    }
                    if matches!(event, FollowEvent::End { .. }) {
                        let _ = socket.send(Message::Close(None)).await;
                        return;
                    }
                }
            }
            incoming = socket.recv() => match incoming {
                // The client left: returning drops the session, which closes every stream.
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(Message::Text(t))) => {
                    let kind = serde_json::from_str::<serde_json::Value>(&t)
                        .ok()
                        .and_then(|v| v["type"].as_str().map(str::to_string));
                    match kind.as_deref() {
                        Some("pause") => paused = true,
                        Some("resume") => paused = false,
                        _ => {}
                    }
                }
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
