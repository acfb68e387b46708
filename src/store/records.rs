//! Cluster records read once and kept until their name is written: every request on a
//! cluster reads its record, and during a burst of creations a memo that any write anywhere
//! invalidated was read again by every request. Requests that ask for the same record while
//! it is being read wait for that one read: each query is a hand-off to a SQLite thread and
//! back, and four submissions arriving together for one new name made four. Two more reads
//! are not made at all: a name that has no record (every name that has one is known, read at
//! start and added by each write), and the record this process has just created (it is what
//! was inserted). In a burst of 50 creations those were 100 queries.

use std::collections::{HashMap, HashSet};
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
    /// Reads under way, by name, with the write count each started at.
    reading: HashMap<String, (u64, Reading)>,
    /// The operation that created each record this process wrote (names of clusters, like
    /// `written`): a refused creation names it without a query of the operations.
    creators: HashMap<String, String>,
    /// Every name that has a record, whatever its status (records are never removed), once
    /// read at start ([`Store::know_names`]); a name outside it has no record, and reading it
    /// needs no query. Names of clusters, like `written`.
    names: Option<HashSet<String>>,
}

/// One read of a record, shared by every caller asking for it meanwhile.
type Reading = Arc<tokio::sync::OnceCell<Option<Arc<ClusterRecord>>>>;

impl Memo {
    fn writes(&self, name: &str) -> u64 {
        self.written.get(name).copied().unwrap_or(0)
    }

    /// Counts a write of `name` (which now has a record); the name's new write count.
    fn wrote(&mut self, name: &str) -> u64 {
        if let Some(names) = &mut self.names {
            if !names.contains(name) {
                names.insert(name.to_string());
            }
        }
        let writes = self.written.entry(name.to_string()).or_default();
        *writes += 1;
        *writes
    }
}

impl Store {
    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads every name that has a record (at start, before any request): from then on a name
    /// outside them is answered as absent without a query.
    pub(super) async fn know_names(&self) -> sqlx::Result<()> {
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM clusters")
            .fetch_all(&self.writer)
            .await?;
        self.memo().names = Some(names.into_iter().collect());
        Ok(())
    }

    /// Marks `name`'s record as written (after the commit): the next read queries again.
    /// Every write to the clusters table calls this (or [`Store::record_created`]).
    pub fn record_written(&self, name: &str) {
        let mut memo = self.memo();
        memo.wrote(name);
        memo.read.remove(name);
    }

    /// [`Store::record_written`] for a record that `operation` created (after the commit that
    /// did, while the submission holds the cluster's lock, so no other write came between):
    /// the record as inserted is the one read from now on, and the operation is remembered
    /// with it.
    pub fn record_created(&self, record: ClusterRecord, operation: &str) {
        let mut memo = self.memo();
        let name = record.name.clone();
        let writes = memo.wrote(&name);
        memo.read
            .insert(name.clone(), (writes, Some(Arc::new(record))));
        memo.creators.insert(name, operation.to_string());
    }

    /// The operation that created `name`'s current record, when this process wrote it: a
    /// creation refused because the name is taken points at it. A record this process has not
    /// created (written before it started) has none here, and the caller asks the operations.
    pub fn creator_of(&self, name: &str) -> Option<String> {
        self.memo().creators.get(name).cloned()
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
        let (writes, reading) = {
            let mut memo = self.memo();
            let writes = memo.writes(name);
            if let Some((at, record)) = memo.read.get(name) {
                if *at == writes {
                    return Ok(record.clone());
                }
            }
            if memo.names.as_ref().is_some_and(|n| !n.contains(name)) {
                return Ok(None);
            }
            let reading = match memo.reading.get(name) {
                Some((at, reading)) if *at == writes => reading.clone(),
                _ => {
                    // Abandoned reads (their callers gone) must not pile up: names come from
                    // requests. Forgetting one only costs a read more.
                    if memo.reading.len() >= 1024 {
                        memo.reading.clear();
                    }
                    let reading = Reading::default();
                    memo.reading
                        .insert(name.to_string(), (writes, reading.clone()));
                    reading
                }
            };
            (writes, reading)
        };
        // The first caller queries; the others wait for its answer (or, if it fails, the
        // next one tries).
        let record = reading
            .get_or_try_init(|| async {
                self.count_read();
                let row = sqlx::query("SELECT * FROM clusters WHERE name = ?")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                anyhow::Ok(row.as_ref().map(cluster_of).transpose()?.map(Arc::new))
            })
            .await?
            .clone();
        let mut memo = self.memo();
        if memo
            .reading
            .get(name)
            .is_some_and(|(_, r)| Arc::ptr_eq(r, &reading))
        {
            memo.reading.remove(name);
        }
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

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn callers_asking_for_one_record_at_once_share_one_query() {
        let (_d, s) = crate::store::tests::store().await;
        let before = s.reads();
        // A name with no record: known absent, no query at all.
        let absent = futures::future::join_all((0..16).map(|_| s.get_cluster("new"))).await;
        assert!(absent.iter().all(|r| matches!(r, Ok(None))));
        assert_eq!(s.reads() - before, 0);
        let mut tx = s.writer.begin().await.unwrap();
        crate::store::Store::create_cluster(&mut tx, "new", "us-west-2", &serde_json::json!({}))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s.record_written("new");
        // Written since: read again, once, and every caller sees the record.
        let read = futures::future::join_all((0..16).map(|_| s.get_cluster("new"))).await;
        assert!(read.iter().all(|r| r
            .as_ref()
            .unwrap()
            .as_ref()
            .is_some_and(|c| c.name == "new")));
        assert_eq!(s.reads() - before, 1);
    }
}
