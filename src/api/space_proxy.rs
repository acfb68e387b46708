//! Opening a space through the control plane's own address, so it needs no public endpoint: a
//! space is served at `http://<space>.<cluster>.spaces.<host>/` — a host of its own, so its pages
//! never share an origin (storage, cookies) with the control plane's UI — proxied to its pod over
//! a port-forward, HTTP and WebSocket alike. `*.localhost` reaches the loopback port-forward in
//! browsers with no DNS; a name the server is reached by elsewhere needs a wildcard record.
//!
//! Access: `POST …/spaces/{space}/open` (behind the API's token) returns a one-use ticket in the
//! space's URL; the space's host exchanges it for an HttpOnly cookie good for that space only.
//! Requests from another origin are refused, and only spaces made here are reachable.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;

use super::space_sessions::{PodKey, Upstream, MAX_FORWARDS};
use crate::error::{ApiError, ApiResult};
use crate::problem::ProblemType;
use crate::service::spaces::SpacePod;
use crate::AppState;

/// The query parameter carrying a ticket, and the cookie a ticket becomes.
const TICKET: &str = "instantstart-ticket";
const COOKIE: &str = "instantstart-space";
fn label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The `(cluster, space)` a space host names (`<space>.<cluster>.spaces.<allowed host>`), where
/// `allowed` are the hosts the server answers to (`host:port`, lowercase).
pub fn space_host(allowed: &[String], host: &str) -> Option<(String, String)> {
    // Every request's Host passes here first: most name no space, and cost no copy.
    const MARK: &[u8] = b".spaces.";
    if !host
        .as_bytes()
        .windows(MARK.len())
        .any(|w| w.eq_ignore_ascii_case(MARK))
    {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let (names, rest) = host.split_once(".spaces.")?;
    let (space, cluster) = names.split_once('.')?;
    let allowed = allowed
        .iter()
        .any(|h| *h == rest || h.strip_suffix(":80") == Some(rest));
    (allowed && label(space) && label(cluster)).then(|| (cluster.to_string(), space.to_string()))
}

/// The URL that opens a space (with its ticket), on the host the control plane was reached by.
pub fn open_url(host: &str, cluster: &str, space: &str, ticket: &str) -> String {
    // An address has no subdomains: a browser reaching the loopback by one gets `localhost`.
    let host = match host.rsplit_once(':') {
        Some((name, port)) if name.parse::<std::net::IpAddr>().is_ok() || name.starts_with('[') => {
            format!("localhost:{port}")
        }
        _ if host.parse::<std::net::IpAddr>().is_ok() => "localhost".to_string(),
        _ => host.to_string(),
    };
    format!("http://{space}.{cluster}.spaces.{host}/?{TICKET}={ticket}")
}

fn cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            kv.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        })
}

fn refusal(e: ApiError) -> Response {
    e.into_response()
}

/// Serves a request to a space's host: its own checks (origin, ticket or session), then the
/// space's server.
pub async fn serve(state: AppState, cluster: String, space: String, request: Request) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = [format!("http://{host}"), format!("https://{host}")];
        if !origin
            .to_str()
            .is_ok_and(|o| own.iter().any(|x| x == &o.to_ascii_lowercase()))
        {
            return refusal(ApiError::Forbidden {
                slug: ProblemType::ForbiddenOrigin,
                detail: "a space answers its own pages only".into(),
            });
        }
    }
    let query = request.uri().query().unwrap_or_default();
    if let Some(ticket) = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{TICKET}=")))
    {
        return match state.space_sessions.redeem(ticket, &cluster, &space) {
            Some(session) => {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = StatusCode::SEE_OTHER;
                r.headers_mut()
                    .insert(header::LOCATION, HeaderValue::from_static("/"));
                if let Ok(v) = HeaderValue::from_str(&format!(
                    "{COOKIE}={session}; Path=/; HttpOnly; SameSite=Lax"
                )) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            }
            None => refusal(ApiError::Unauthorized),
        };
    }
    if !cookie(headers).is_some_and(|s| state.space_sessions.valid(&s, &cluster, &space)) {
        return refusal(ApiError::Unauthorized);
    }
    let at = match located(&state, &cluster, &space).await {
        Ok(at) => at,
        Err(e) => return refusal(e),
    };
    if request.uri().path() == "/" {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::FOUND;
        if let Ok(v) = HeaderValue::from_str(&format!("{}/", at.base)) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return r;
    }
    let key = (cluster.clone(), at.namespace.clone(), at.pod.clone());
    let upstream = match state.space_sessions.pooled(&key) {
        Some(u) => u,
        None => match open(&state, &cluster, &space, &at).await {
            Ok(u) => u,
            Err(e) => return refusal(e),
        },
    };
    forward(&state, key, upstream, request)
        .await
        .unwrap_or_else(|why| {
            refusal(ApiError::Cloud(Box::new(crate::cloud::CloudError::new(
                "k8s",
                "PortForward",
                "Unreachable",
                format!("the space `{space}` did not answer: {why}"),
            ))))
        })
}

/// Where the space's server is: the pod found a moment ago, else the one looked up now.
async fn located(state: &AppState, cluster: &str, space: &str) -> ApiResult<SpacePod> {
    let key = (cluster.to_string(), space.to_string());
    if let Some(at) = state.space_sessions.located(&key) {
        return Ok(at);
    }
    let at = crate::service::spaces::locate(&state.engine, cluster, space).await?;
    state.space_sessions.remember(key, Some(at.clone()));
    Ok(at)
}

/// A new connection to the space's server, over a new port-forward held under the cap; when
/// the pod found a moment ago is gone, the space is looked up again once.
async fn open(state: &AppState, cluster: &str, space: &str, at: &SpacePod) -> ApiResult<Upstream> {
    use crate::service::spaces::{connect, locate};
    let sessions = &state.space_sessions;
    let permit = sessions
        .forwards
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::Busy {
            slug: ProblemType::TooManySpaceConnections,
            detail: format!(
                "this server already holds {MAX_FORWARDS} connections to spaces, its limit"
            ),
            hint: Some(Box::new(serde_json::json!(
                "close a space's tab, or try again in a moment: idle connections close after 30 seconds"
            ))),
        })?;
    let conn = match connect(&state.engine, cluster, at).await {
        Ok(c) => c,
        Err(_) => {
            let key = (cluster.to_string(), space.to_string());
            sessions.remember(key.clone(), None);
            let fresh = locate(&state.engine, cluster, space).await?;
            let c = connect(&state.engine, cluster, &fresh).await?;
            sessions.remember(key, Some(fresh));
            c
        }
    };
    let unreachable = |why: String| {
        ApiError::Cloud(Box::new(crate::cloud::CloudError::new(
            "k8s",
            "PortForward",
            "Unreachable",
            format!("the space `{space}` did not answer: {why}"),
        )))
    };
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(conn.stream))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    // The port-forward lives as long as its connection, and holds its place under the cap.
    tokio::spawn(async move {
        let _place = permit;
        let _ = connection.with_upgrades().await;
    });
    Ok(sender)
}

/// Sends the request over a connection to the space's server, HTTP/1.1; a WebSocket upgrade is
/// then joined end to end.
async fn forward(
    state: &AppState,
    key: PodKey,
    mut sender: Upstream,
    mut request: Request,
) -> Result<Response, String> {
    let upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|u| u.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let client_side = upgrade.then(|| hyper::upgrade::on(&mut request));
    // What the browser sent for this control plane stays here: its session, its origin; and
    // what was for this hop only goes no further (the upgrade of a WebSocket excepted).
    for h in [header::COOKIE, header::AUTHORIZATION, header::ORIGIN] {
        request.headers_mut().remove(h);
    }
    strip_hop_by_hop(request.headers_mut(), upgrade);
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if let (Some(client_side), StatusCode::SWITCHING_PROTOCOLS) = (client_side, response.status()) {
        let server_side = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            if let (Ok(c), Ok(s)) = (client_side.await, server_side.await) {
                let (mut c, mut s) = (TokioIo::new(c), TokioIo::new(s));
                let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
            }
        });
    }
    let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    // A plain exchange leaves the connection for the space's next request (ready once this
    // answer's body has been read); an upgraded one now carries the WebSocket.
    if !switching && !upgrade {
        state.space_sessions.keep(key, sender);
    }
    strip_hop_by_hop(response.headers_mut(), switching);
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1: `Connection`, those it names, and the
/// fixed list), keeping `Connection` and `Upgrade` only for a WebSocket upgrade.
fn strip_hop_by_hop(headers: &mut axum::http::HeaderMap, upgrade: bool) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty() && (!upgrade || h != "upgrade"))
        .collect();
    for h in named {
        headers.remove(h.as_str());
    }
    for h in [
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
    ] {
        headers.remove(h);
    }
    if !upgrade {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hosts a server on port 3099 of the loopback answers to.
    fn policy() -> Vec<String> {
        ["localhost:3099", "127.0.0.1:3099", "[::1]:3099"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn hop_by_hop_headers_go_no_further_but_a_websocket_upgrade() {
        let mut h = axum::http::HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic x"),
            ("te", "trailers"),
            ("accept", "text/html"),
        ] {
            h.insert(
                axum::http::HeaderName::from_static(k),
                HeaderValue::from_static(v),
            );
        }
        strip_hop_by_hop(&mut h, false);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"]);
        let mut ws = axum::http::HeaderMap::new();
        ws.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        ws.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        strip_hop_by_hop(&mut ws, true);
        assert_eq!(ws.len(), 2, "{ws:?}");
    }

    #[test]
    fn a_space_host_is_read_in_any_case_and_other_hosts_name_no_space() {
        let p = policy();
        let want = Some(("demo".to_string(), "a1".to_string()));
        assert_eq!(space_host(&p, "a1.demo.spaces.localhost:3099"), want);
        assert_eq!(space_host(&p, "A1.Demo.SPACES.LocalHost:3099"), want);
        assert_eq!(space_host(&p, "localhost:3099"), None);
        assert_eq!(space_host(&p, "127.0.0.1:3099"), None);
        // The rest must be a host this server answers to.
        assert_eq!(space_host(&p, "a1.demo.spaces.evil.example:3099"), None);
        assert_eq!(space_host(&p, "a1.-demo.spaces.localhost:3099"), None);
    }
}
