//! Cluster records read once and kept until their name is written: every request on a
//! cluster reads its record, and during a burst of creations a memo that any write anywhere
//! invalidated was read again by every request.

use std::collections::HashMap;
use std::sync::Arc;

use super::rows::cluster_of;
use super::{ClusterRecord, Store};

/// The records read, and how many times each name has been written.
#[derive(Default)]
pub(super) struct Memo {
    /// Record (or its absence) by name, with the name's write count it was read at.
    read: HashMap<String, (u64, Option<Arc<ClusterRecord>>)>,
    /// Writes per name. Never cleared: a count that went back to zero would make an old
    /// reading look current. It holds names written, so clusters, not request input.
    written: HashMap<String, u64>,
}

impl Memo {
    fn writes(&self, name: &str) -> u64 {
        self.written.get(name).copied().unwrap_or(0)
    }
}

impl Store {
    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `name`'s record as written (after the commit): the next read queries again.
    /// Every write to the clusters table calls this.
    pub fn record_written(&self, name: &str) {
        let mut memo = self.memo();
        *memo.written.entry(name.to_string()).or_default() += 1;
        memo.read.remove(name);
    }

    /// One cluster's record, read again only when that name was written since the last read.
    pub async fn get_cluster(&self, name: &str) -> anyhow::Result<Option<ClusterRecord>> {
        Ok(self
            .cluster_shared(name)
            .await?
            .map(|r| ClusterRecord::clone(&r)))
    }

    /// [`Store::get_cluster`] without the copy: the record as memoized (every status poll
    /// reads its cluster's record, and a deep copy of its JSON was most of the poll's cost).
    pub async fn cluster_shared(&self, name: &str) -> anyhow::Result<Option<Arc<ClusterRecord>>> {
        // The count is taken before the query: a write committed meanwhile moves it on, so
        // what this query read is never kept as current.
        let writes = {
            let memo = self.memo();
            let writes = memo.writes(name);
            if let Some((at, record)) = memo.read.get(name) {
                if *at == writes {
                    return Ok(record.clone());
                }
            }
            writes
        };
        self.count_read();
        let row = sqlx::query("SELECT * FROM clusters WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        let record = row.as_ref().map(cluster_of).transpose()?.map(Arc::new);
        let mut memo = self.memo();
        // Names come from requests: a flood of unknown ones must not grow the memo forever.
        if memo.read.len() >= 1024 {
            memo.read.clear();
        }
        if memo.writes(name) == writes {
            memo.read.insert(name.to_string(), (writes, record.clone()));
        }
        Ok(record)
    }
}
