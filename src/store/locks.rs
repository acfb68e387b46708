//! Per-cluster submission locks: a read-then-write on one cluster (conflict rules, then the
//! insert) excludes the others on that cluster only, so a burst over many clusters is not one
//! queue.

use std::hash::BuildHasher;

use tokio::sync::{Mutex, MutexGuard};

/// How many locks the names share. Two clusters on one stripe only wait for each other (never
/// wrong, just slower); a fixed set never grows or needs sweeping as clusters come and go.
const STRIPES: usize = 256;

pub struct ClusterLocks {
    stripes: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for ClusterLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: Default::default(),
        }
    }
}

impl ClusterLocks {
    /// Waits (fairly, first come first served) for `cluster`'s lock.
    pub async fn lock(&self, cluster: &str) -> MutexGuard<'_, ()> {
        self.stripes[self.stripe(cluster)].lock().await
    }

    fn stripe(&self, cluster: &str) -> usize {
        // The remainder is below STRIPES, so the cast back cannot truncate.
        (self.hasher.hash_one(cluster) % STRIPES as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cluster_waits_for_its_own_lock_and_not_for_another() {
        let locks = ClusterLocks::default();
        let held = locks.lock("alpha").await;
        let other = (0..)
            .map(|i| format!("c-{i}"))
            .find(|n| locks.stripe(n) != locks.stripe("alpha"))
            .unwrap();
        // Free at once while `alpha` is held ...
        let free = locks.lock(&other);
        tokio::pin!(free);
        assert!(futures::poll!(&mut free).is_ready());
        // ... where `alpha` itself waits until it is released.
        let same = locks.lock("alpha");
        tokio::pin!(same);
        assert!(futures::poll!(&mut same).is_pending());
        drop(held);
        assert!(futures::poll!(&mut same).is_ready());
    }
}
