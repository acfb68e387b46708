//! `GET /api/events`: a WebSocket that pushes operation changes to the UI. After every change
//! the engine signals, the recent operations whose content changed since the last message are
//! sent as `{"type": "operations", "operations": [...]}` (the first message is a snapshot).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use crate::AppState;

/// How many of the most recent operations each message considers.
const WINDOW: i64 = 50;

pub async fn events(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.protocols(["instantstart.events"])
        .on_upgrade(move |socket| push(state, socket))
}

async fn push(state: AppState, mut socket: WebSocket) {
    let _open = crate::metrics::global().stream_opened("events");
    let mut changes = state.engine.subscribe();
    let mut seen: HashMap<String, u64> = HashMap::new();
    loop {
        let ops = match state
            .engine
            .store()
            .list_operations(None, None, WINDOW)
            .await
        {
            Ok(ops) => ops,
            Err(e) => {
                tracing::warn!(error = %e, "events: reading operations");
                return;
            }
        };
        let fresh: Vec<_> = ops
            .into_iter()
            .filter(|o| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                serde_json::to_string(o).unwrap_or_default().hash(&mut h);
                seen.insert(o.id.clone(), h.finish()) != Some(h.finish())
            })
            .collect();
        if !fresh.is_empty() {
            let msg = json!({"type": "operations", "operations": fresh}).to_string();
            if socket.send(Message::Text(msg.into())).await.is_err() {
                return;
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
