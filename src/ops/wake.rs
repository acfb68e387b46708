//! When runners wake and start. A phase being watched waits for its poll tick, or for what it
//! cares about (a cancel of its own operation; a change to the stage it waits for) — never for
//! every change in the process, which with many operations running made each change wake them
//! all, nor for its own writes. A new runner lets the requests being answered go first (see [`Foreground`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// What happened to an operation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Event {
    /// Its state or a phase was persisted.
    Changed,
    /// A cancel was asked for.
    CancelAsked,
}

type Key = (Event, String);

/// Who waits for what on which operation.
#[derive(Default)]
pub(super) struct Wakes {
    by_op: Mutex<HashMap<Key, Vec<Arc<Notify>>>>,
}

/// One watcher's interest, withdrawn when dropped.
pub(super) struct Interest<'a> {
    wakes: &'a Wakes,
    ids: Vec<Key>,
    pub notify: Arc<Notify>,
}

impl Wakes {
    /// Registers a watcher of `ids`; its `notify` holds a permit once any of them happens, so
    /// what happened while the watcher was busy is not missed.
    pub fn interest(&self, ids: Vec<Key>) -> Interest<'_> {
        let notify = Arc::new(Notify::new());
        let mut by_op = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        for id in &ids {
            by_op.entry(id.clone()).or_default().push(notify.clone());
        }
        Interest {
            wakes: self,
            ids,
            notify,
        }
    }

    /// Wakes the watchers of `event` on operation `id`.
    pub fn happened(&self, event: Event, id: &str) {
        let by_op = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        for n in by_op.get(&(event, id.to_string())).into_iter().flatten() {
            n.notify_one();
        }
    }
}

impl Drop for Interest<'_> {
    fn drop(&mut self) {
        let mut by_op = self.wakes.by_op.lock().unwrap_or_else(|e| e.into_inner());
        for id in &self.ids {
            if let Some(list) = by_op.get_mut(id) {
                list.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if list.is_empty() {
                    by_op.remove(id);
                }
            }
        }
    }
}

/// Requests being answered that may change something. A runner starting meanwhile waits for
/// them (up to [`YIELD_AT_MOST`]): a burst of submissions is answered before the operations it
/// started compete with it for the CPU and the one connection that writes, and an operation
/// starts a few milliseconds later, never at all later than that bound.
#[derive(Default)]
pub(super) struct Foreground {
    in_flight: AtomicUsize,
    quiet: Notify,
}

/// How long a new runner waits for the requests in flight.
pub(super) const YIELD_AT_MOST: Duration = Duration::from_millis(500);

/// One request in flight; counted until dropped.
pub struct InFlight(Arc<super::Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let fg = &self.0.foreground;
        if fg.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            fg.quiet.notify_waiters();
        }
    }
}

impl Foreground {
    pub(super) fn enter(inner: &Arc<super::Inner>) -> InFlight {
        inner.foreground.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(inner.clone())
    }

    /// Returns once no request is in flight, or after `at_most`.
    pub async fn yield_to_requests(&self, at_most: Duration) {
        let deadline = tokio::time::Instant::now() + at_most;
        loop {
            let quiet = self.quiet.notified();
            tokio::pin!(quiet);
            // Registered before the count is read: a drop to zero in between is not missed.
            quiet.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, quiet).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_runner_waits_for_the_requests_in_flight_and_never_longer_than_its_bound() {
        let fg = Foreground::default();
        // Nothing in flight: at once.
        let idle = fg.yield_to_requests(YIELD_AT_MOST);
        tokio::pin!(idle);
        assert!(futures::poll!(&mut idle).is_ready());
        // One in flight: waits until it is answered.
        fg.in_flight.store(1, Ordering::Release);
        let waiting = fg.yield_to_requests(YIELD_AT_MOST);
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending());
        fg.in_flight.store(0, Ordering::Release);
        fg.quiet.notify_waiters();
        assert!(futures::poll!(&mut waiting).is_ready());
        // Requests that never stop: the bound.
        fg.in_flight.store(1, Ordering::Release);
        let bound = Duration::from_millis(20);
        let started = tokio::time::Instant::now();
        fg.yield_to_requests(bound).await;
        assert!(started.elapsed() >= bound);
    }

    #[tokio::test]
    async fn a_watcher_hears_of_its_operations_only_and_leaves_nothing_behind() {
        let wakes = Wakes::default();
        {
            let interest = wakes.interest(vec![
                (Event::CancelAsked, "parent".into()),
                (Event::Changed, "child".into()),
            ]);
            wakes.happened(Event::Changed, "another");
            // Its own operation's writes do not wake it; a cancel of it would.
            wakes.happened(Event::Changed, "parent");
            let woken = interest.notify.notified();
            tokio::pin!(woken);
            assert!(futures::poll!(&mut woken).is_pending());
            // A change made before the watcher waits is kept for it.
            wakes.happened(Event::Changed, "child");
            assert!(futures::poll!(&mut woken).is_ready());
        }
        assert!(wakes.by_op.lock().unwrap().is_empty());
    }
}
