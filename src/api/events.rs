//! `GET /api/events`: a WebSocket that pushes changes to the UI as they happen.
//! - Operations: after every change the engine signals, the recent operations whose content
//!   changed since the last message, as `{"type": "operations", "operations": [...]}` (the
//!   first message is a snapshot).
//! - Clusters: what the watch caches notice (a node turning NotReady or Ready again, a GPU pod
//!   the scheduler cannot place), forwarded from the watch as it arrives, as
//!   `{"type": "cluster", "events": [...]}`; `missed` counts any a slow reader lost.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use crate::cloud::ClusterChange;
use crate::service::people::access::{self, RequestAccess};
use std::sync::Arc;

use crate::AppState;

/// How many of the most recent operations each message considers.
const WINDOW: i64 = 50;

pub async fn events(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    // A place among the server's event streams, held while the socket lives; none left is a
    // problem before the upgrade.
    let permit = match state.caps.event_streams.admit() {
        Ok(p) => p,
        Err(e) => return axum::response::IntoResponse::into_response(e),
    };
    // The person, when people sign in: the stream shows them what their reads would.
    let person = access::request_person();
    ws.protocols(["instantstart.events"])
        .on_upgrade(move |socket| push(state, socket, permit, person))
}

async fn push(
    state: AppState,
    mut socket: WebSocket,
    _permit: crate::service::caps::Permit,
    person: Option<Arc<RequestAccess>>,
) {
    let _open = crate::cloud::metrics::global().stream_opened("events");
    let mut changes = state.engine.subscribe();
    let mut noticed = Some(state.engine.cloud().kube.events());
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut operations_changed = true;
    loop {
        if std::mem::take(&mut operations_changed)
            && !send_operations(&state, &mut socket, &mut seen, person.as_deref()).await
        {
            return;
        }
        tokio::select! {
            changed = changes.changed() => match changed {
                Ok(()) => operations_changed = true,
                Err(_) => return,
            },
            event = recv(&mut noticed) => {
                let (mut events, missed) = match event {
                    Ok(first) => (drain(first, noticed.as_mut()), 0),
                    Err(RecvError::Lagged(n)) => (Vec::new(), n),
                    Err(RecvError::Closed) => {
                        noticed = None;
                        continue;
                    }
                };
                // What a watch notices spans namespaces: for those who may read it all.
                if let Some(r) = person.as_deref() {
                    let mut kept = Vec::new();
                    for e in events {
                        if access::reads_whole(r, &state.engine, &e.cluster).await {
                            kept.push(e);
                        }
                    }
                    events = kept;
                    if events.is_empty() && missed == 0 {
                        continue;
                    }
                }
                let msg = json!({"type": "cluster", "events": events, "missed": missed}).to_string();
                if socket.send(Message::Text(msg.into())).await.is_err() {
                    return;
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

/// Sends the recent operations whose content changed since the last message; false once the
/// socket is gone.
async fn send_operations(
    state: &AppState,
    socket: &mut WebSocket,
    seen: &mut HashMap<String, u64>,
    person: Option<&RequestAccess>,
) -> bool {
    let ops = match state
        .engine
        .store()
        .list_operations(None, None, WINDOW)
        .await
    {
        Ok(ops) => ops,
        Err(e) => {
            tracing::warn!(error = %e, "events: reading operations");
            return false;
        }
    };
    let mut fresh = Vec::new();
    for o in ops {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(&o).unwrap_or_default().hash(&mut h);
        if seen.insert(o.id.clone(), h.finish()) != Some(h.finish())
            && access::sees_operation(person, &state.engine, &o).await
        {
            fresh.push(o);
        }
    }
    if !fresh.is_empty() {
        let msg = json!({"type": "operations", "operations": fresh}).to_string();
        return socket.send(Message::Text(msg.into())).await.is_ok();
    }
    true
}

/// The next noticed change, or never once the adapter has none to tell.
async fn recv(rx: &mut Option<Receiver<ClusterChange>>) -> Result<ClusterChange, RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The first change and any that arrived with it, sent as one message.
fn drain(first: ClusterChange, rx: Option<&mut Receiver<ClusterChange>>) -> Vec<ClusterChange> {
    let mut all = vec![first];
    if let Some(rx) = rx {
        while let Ok(e) = rx.try_recv() {
            all.push(e);
        }
    }
    all
}
