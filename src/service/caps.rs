//! Server-wide caps on what clients hold open: log follows and snapshots, event streams,
//! operation long-polls and MCP sessions. Each is a counted place, freed when its permit drops; one more
//! than the cap is refused with a problem that says which cap and what to do, so a few
//! clients cannot hold the process's memory or tasks. (The server speaks HTTP/1.1, so one
//! connection holds at most one of them at a time; the connection cap bounds the rest.)

use std::sync::Arc;

use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ApiError, ApiResult};
use crate::problem::ProblemType;

/// One cap: how many places, and what a refusal says.
pub struct Cap {
    permits: Arc<Semaphore>,
    max: usize,
    slug: ProblemType,
    /// What is counted, plural (`log streams`).
    what: &'static str,
    hint: &'static str,
}

/// A place under a cap; freed when dropped.
pub struct Permit(#[allow(dead_code)] OwnedSemaphorePermit);

impl Cap {
    pub fn new(max: usize, slug: ProblemType, what: &'static str, hint: &'static str) -> Self {
        let max = max.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            slug,
            what,
            hint,
        }
    }

    /// A place, or the refusal that says why there is none.
    pub fn admit(&self) -> ApiResult<Permit> {
        self.try_admit().ok_or_else(|| self.refusal())
    }

    /// A place, if one is free.
    pub fn try_admit(&self) -> Option<Permit> {
        self.permits.clone().try_acquire_owned().ok().map(Permit)
    }

    /// The refusal a client gets once the cap is reached.
    pub fn refusal(&self) -> ApiError {
        ApiError::Busy {
            slug: self.slug,
            detail: format!(
                "this server already holds {} {}, its limit",
                self.max, self.what
            ),
            hint: Some(Box::new(json!(self.hint))),
        }
    }

    /// Places taken now.
    pub fn active(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

/// Every cap of the server.
pub struct Caps {
    pub log_follows: Cap,
    pub event_streams: Cap,
    pub waiters: Cap,
    pub log_snapshots: Cap,
    pub mcp_sessions: usize,
}

impl Caps {
    pub fn new(limits: &crate::config::ConnLimits, max_log_follows: usize) -> Self {
        Self {
            log_follows: Cap::new(
                max_log_follows,
                ProblemType::TooManyLogStreams,
                "log streams",
                "close another log view, read a snapshot with GET …/logs instead, or raise --max-log-follows",
            ),
            event_streams: Cap::new(
                limits.max_event_streams,
                ProblemType::TooManyEventStreams,
                "event streams",
                "close another browser tab of this control plane, or poll GET /api/operations",
            ),
            waiters: Cap::new(
                limits.max_waiters,
                ProblemType::TooManyWaiters,
                "operation long-polls",
                "poll without ?wait",
            ),
            log_snapshots: Cap::new(
                limits.max_log_snapshots,
                ProblemType::TooManyLogReads,
                "log snapshots being read",
                "try again in a moment, or narrow the read (pod, tail, since)",
            ),
            mcp_sessions: limits.max_mcp_sessions.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_admits_its_count_and_frees_a_place_when_a_permit_drops() {
        let cap = Cap::new(2, ProblemType::TooManyWaiters, "xs", "close one");
        let a = cap.admit().unwrap();
        let _b = cap.admit().unwrap();
        assert_eq!(cap.active(), 2);
        let refused = cap.admit().err().unwrap();
        assert!(matches!(
            refused,
            ApiError::Busy {
                slug: ProblemType::TooManyWaiters,
                ..
            }
        ));
        drop(a);
        assert!(cap.try_admit().is_some());
    }
}
