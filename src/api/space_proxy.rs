//! Opening a space through the control plane's own address, so it needs no public endpoint: a
//! space is served at `http://<space>.<cluster>.spaces.<host>/` — a host of its own, so its pages
//! never share an origin (storage, cookies) with the control plane's UI — proxied to its pod over
//! a port-forward, HTTP and WebSocket alike. `*.localhost` reaches the loopback port-forward in
//! browsers with no DNS; a name the server is reached by elsewhere needs a wildcard record.
//!
//! Access: `POST …/spaces/{space}/open` (behind the API's token) returns a one-use ticket in the
//! space's URL; the space's host exchanges it for an HttpOnly cookie good for that space only.
//! Requests from another origin are refused, and only spaces made here are reachable.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;

use crate::error::{ApiError, ApiResult};
use crate::service::spaces::SpacePod;
use crate::AppState;

/// The query parameter carrying a ticket, and the cookie a ticket becomes.
const TICKET: &str = "instantstart-ticket";
const COOKIE: &str = "instantstart-space";
const TICKET_TTL: Duration = Duration::from_secs(60);
/// A session ends after this long without a request, and after [`SESSION_MAX`] in any case;
/// stopping or deleting the space, or `DELETE …/sessions`, ends it at once.
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
const SESSION_MAX: Duration = Duration::from_secs(8 * 3600);
/// How long a space's pod, once found, is reached without looking it up again: a page's many
/// requests cost one lookup, and a pod gone sooner is looked up at once.
const LOCATED_TTL: Duration = Duration::from_secs(10);
/// Sessions kept at most (the oldest expire first).
const MAX_SESSIONS: usize = 1024;
/// Port-forwards to spaces open at once, server-wide: one more request that needs a new one
/// is refused (`too-many-space-connections`) until one closes.
const MAX_FORWARDS: usize = 64;
/// How long an idle port-forward is kept for the next request of its space, and how many per
/// space: a page's many requests share a few instead of opening one each.
const IDLE_FORWARD: Duration = Duration::from_secs(30);
const IDLE_PER_SPACE: usize = 6;

/// An HTTP/1.1 connection to a space's server over a port-forward, ready for another request.
type Upstream = hyper::client::conn::http1::SendRequest<Body>;
/// The pod a connection reaches: (cluster, namespace, pod).
type PodKey = (String, String, String);

/// What a ticket or session grants: one cluster's space, until `until` (pushed on by use, never
/// past `ends`).
struct Grant {
    cluster: String,
    space: String,
    until: Instant,
    ends: Instant,
}

/// Tickets and sessions, each for one cluster's space; where each space's pod is; and the
/// port-forwards to them, kept for reuse under a server-wide cap.
pub struct Sessions {
    tickets: Mutex<HashMap<String, Grant>>,
    sessions: Mutex<HashMap<String, Grant>>,
    located: Mutex<HashMap<(String, String), (SpacePod, Instant)>>,
    idle: Mutex<HashMap<PodKey, Vec<(Upstream, Instant)>>>,
    forwards: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            tickets: Mutex::default(),
            sessions: Mutex::default(),
            located: Mutex::default(),
            idle: Mutex::default(),
            forwards: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_FORWARDS)),
        }
    }
}

fn secret() -> String {
    use rand::RngCore as _;
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn grant(
    map: &Mutex<HashMap<String, Grant>>,
    cluster: &str,
    space: &str,
    idle: Duration,
    max: Duration,
) -> String {
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    m.retain(|_, g| g.until > now);
    if m.len() >= MAX_SESSIONS {
        if let Some(oldest) = m
            .iter()
            .min_by_key(|(_, g)| g.until)
            .map(|(k, _)| k.clone())
        {
            m.remove(&oldest);
        }
    }
    let key = secret();
    m.insert(
        key.clone(),
        Grant {
            cluster: cluster.into(),
            space: space.into(),
            until: now + idle.min(max),
            ends: now + max,
        },
    );
    key
}

fn holds(g: Option<&Grant>, cluster: &str, space: &str) -> bool {
    g.is_some_and(|g| g.cluster == cluster && g.space == space && g.until > Instant::now())
}

impl Sessions {
    /// A one-use ticket for a space, good for a minute.
    pub fn ticket(&self, cluster: &str, space: &str) -> String {
        grant(&self.tickets, cluster, space, TICKET_TTL, TICKET_TTL)
    }

    /// Ends every ticket and session of a space (it was stopped or deleted, or someone asked);
    /// how many sessions ended.
    pub fn revoke(&self, cluster: &str, space: &str) -> usize {
        let other = |g: &Grant| g.cluster != cluster || g.space != space;
        self.tickets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, g| other(g));
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let before = sessions.len();
        sessions.retain(|_, g| other(g));
        let ended = before - sessions.len();
        drop(sessions);
        if let Some((at, _)) = self
            .located
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(cluster.to_string(), space.to_string()))
        {
            let key = (cluster.to_string(), at.namespace.clone(), at.pod.clone());
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }
        self.remember((cluster.to_string(), space.to_string()), None);
        ended
    }

    /// Trades a ticket for a session of the same space; `None` if it is unknown, used, expired
    /// or another space's.
    fn redeem(&self, ticket: &str, cluster: &str, space: &str) -> Option<String> {
        let g = self
            .tickets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(ticket);
        holds(g.as_ref(), cluster, space)
            .then(|| grant(&self.sessions, cluster, space, SESSION_IDLE, SESSION_MAX))
    }

    fn located(&self, key: &(String, String)) -> Option<SpacePod> {
        let mut m = self.located.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, (_, until)| *until > Instant::now());
        m.get(key).map(|(at, _)| at.clone())
    }

    fn remember(&self, key: (String, String), at: Option<SpacePod>) {
        let mut m = self.located.lock().unwrap_or_else(|e| e.into_inner());
        match at {
            Some(at) => m.insert(key, (at, Instant::now() + LOCATED_TTL)),
            None => m.remove(&key),
        };
    }

    /// An idle connection to the pod, ready for a request; stale and closed ones are dropped
    /// (which ends their port-forwards).
    fn pooled(&self, key: &PodKey) -> Option<Upstream> {
        let mut m = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        m.retain(|_, v| {
            v.retain(|(u, since)| !u.is_closed() && now.duration_since(*since) < IDLE_FORWARD);
            !v.is_empty()
        });
        let list = m.get_mut(key)?;
        let at = list.iter().position(|(u, _)| u.is_ready())?;
        Some(list.swap_remove(at).0)
    }

    /// Keeps a connection for the pod's next request (a few per space at most).
    fn keep(&self, key: PodKey, upstream: Upstream) {
        let mut m = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = m.entry(key).or_default();
        if list.len() < IDLE_PER_SPACE {
            list.push((upstream, Instant::now()));
        }
    }

    /// Port-forwards open now.
    pub fn forwards_open(&self) -> usize {
        MAX_FORWARDS - self.forwards.available_permits()
    }

    /// Whether a session holds the space; a use pushes its idle end on (never past its end).
    fn valid(&self, session: &str, cluster: &str, space: &str) -> bool {
        let mut m = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(g) = m.get_mut(session) else {
            return false;
        };
        if !holds(Some(g), cluster, space) {
            return false;
        }
        g.until = (Instant::now() + SESSION_IDLE).min(g.ends);
        true
    }
}

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
                slug: "forbidden-origin",
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
            slug: "too-many-space-connections",
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
