//! The space proxy's sessions: one-use tickets, the cookies they become (idle and absolute
//! expiry, revoked when the space stops), where each space's pod was last found, and the pooled
//! port-forwards to them under a server-wide cap. A leaf of the server's state: the proxy's
//! handlers (`space_proxy`) use it, and it knows no handler.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;

use crate::service::spaces::SpacePod;

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
pub(super) const MAX_FORWARDS: usize = 64;
/// How long an idle port-forward is kept for the next request of its space, and how many per
/// space: a page's many requests share a few instead of opening one each.
const IDLE_FORWARD: Duration = Duration::from_secs(30);
const IDLE_PER_SPACE: usize = 6;

/// An HTTP/1.1 connection to a space's server over a port-forward, ready for another request.
pub(super) type Upstream = hyper::client::conn::http1::SendRequest<Body>;
/// The pod a connection reaches: (cluster, namespace, pod).
pub(super) type PodKey = (String, String, String);

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
    pub(super) forwards: std::sync::Arc<tokio::sync::Semaphore>,
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
    let key = crate::service::shared::new_secret();
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
    pub(super) fn redeem(&self, ticket: &str, cluster: &str, space: &str) -> Option<String> {
        let g = self
            .tickets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(ticket);
        holds(g.as_ref(), cluster, space)
            .then(|| grant(&self.sessions, cluster, space, SESSION_IDLE, SESSION_MAX))
    }

    pub(super) fn located(&self, key: &(String, String)) -> Option<SpacePod> {
        let mut m = self.located.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, (_, until)| *until > Instant::now());
        m.get(key).map(|(at, _)| at.clone())
    }

    pub(super) fn remember(&self, key: (String, String), at: Option<SpacePod>) {
        let mut m = self.located.lock().unwrap_or_else(|e| e.into_inner());
        match at {
            Some(at) => m.insert(key, (at, Instant::now() + LOCATED_TTL)),
            None => m.remove(&key),
        };
    }

    /// An idle connection to the pod, ready for a request; stale and closed ones are dropped
    /// (which ends their port-forwards).
    pub(super) fn pooled(&self, key: &PodKey) -> Option<Upstream> {
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
    pub(super) fn keep(&self, key: PodKey, upstream: Upstream) {
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
    pub(super) fn valid(&self, session: &str, cluster: &str, space: &str) -> bool {
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
