//! Group commit: writes that arrive while the one writing connection is busy wait for one
//! write of them all, instead of one transaction (and its waits on that connection) each.

use tokio::sync::oneshot;

/// An item waiting for its group's write, with who to tell how it went.
pub(super) type Waiting<T, R> = (T, oneshot::Sender<R>);

/// Items queued for the next group write.
pub(super) struct GroupQueue<T, R> {
    pending: std::sync::Mutex<Vec<Waiting<T, R>>>,
    /// Held by the caller whose turn it is to write what is queued.
    flushing: tokio::sync::Mutex<()>,
}

impl<T, R> Default for GroupQueue<T, R> {
    fn default() -> Self {
        Self {
            pending: std::sync::Mutex::new(Vec::new()),
            flushing: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T: Send + 'static, R: Send + 'static> GroupQueue<T, R> {
    /// Queues `item` and waits until a group holding it is written. Whoever takes the turn
    /// writes every item waiting, in order, with `write` (which answers each); `None` when the
    /// write was lost before it answered this item.
    pub(super) async fn join<F, Fut>(&self, item: T, write: F) -> Option<R>
    where
        F: FnOnce(Vec<Waiting<T, R>>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (done, written) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((item, done));
        {
            let _turn = self.flushing.lock().await;
            let group =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            if !group.is_empty() {
                // In a task of its own: a caller dropped mid-write (its client gone) still lets
                // the group finish and every waiter hear of it.
                let _ = tokio::spawn(write(group)).await;
            }
        }
        written.await.ok()
    }
}
