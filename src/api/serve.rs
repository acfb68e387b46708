//! The accept loop: every connection served by hyper with a deadline for its request headers
//! (which is also how long a keep-alive connection may sit idle), at most so many connections
//! at once, and a graceful end on SIGINT/SIGTERM.
//!
//! `axum::serve` sets no timer on hyper, so hyper's header-read timeout never runs: a client
//! sending its headers a byte at a time (slowloris) held its connection, and its file
//! descriptor, for ever. Here a connection that has not sent a whole request head within
//! [`ConnLimits::header_timeout`] is closed, and one accepted beyond
//! [`ConnLimits::max_connections`] is closed at once, so the process keeps room to answer.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt as _;

use super::Http;
use crate::config::ConnLimits;

/// Serves `router` on `listener` until `shutdown` resolves, then lets the connections in
/// flight finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Http,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Dropped to ask every connection to finish; each holds a receiver until it has.
    let (stop_tx, stop_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors or a connection reset before accept: not the server's end.
                Err(e) => {
                    tracing::debug!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!("connection closed: {} are open", limits.max_connections);
            drop(tcp);
            continue;
        };
        // No Nagle: a pushed WebSocket message (an event, a log line) leaves at once instead of
        // waiting up to the peer's delayed ACK (40 ms) behind the previous one.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY");
        }
        let service =
            TowerToHyperService::new(router.clone().map_request(
                |r: hyper::Request<hyper::body::Incoming>| r.map(axum::body::Body::new),
            ));
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(error = %e, "connection ended");
                    }
                }
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    if let Err(e) = conn.await {
                        tracing::trace!(error = %e, "connection ended");
                    }
                }
            }
            drop(permit);
        });
    }
    drop(stop_tx);
    drop(stop_rx);
    // Every connection has finished once no permit is out.
    let _all = permits
        .acquire_many(u32::try_from(limits.max_connections).unwrap_or(u32::MAX))
        .await;
    Ok(())
}
