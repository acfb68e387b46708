//! New operations and cluster records, and accepted submissions written in groups: each
//! waits for one transaction holding every submission queued meanwhile. Every statement is a wait on the one writing connection, so a
//! burst of 50 creations cost 50 transactions of five statements each, one after another,
//! and the last one accepted waited for all of them; a group costs the same six statements
//! whatever its size.

use serde_json::{json, Value};

use super::group::{GroupQueue, Waiting};
use super::{now, ClusterRecord, Lifecycle, NewOperation, Store, Tx};

/// An accepted submission, as written.
pub struct NewSubmission {
    pub operation: NewOperation,
    /// The cluster record it creates: region and spec.
    pub creates: Option<(String, Value)>,
    /// A setting written with it (a new cluster becomes the active one).
    pub setting: Option<(&'static str, String)>,
}

pub(super) type SubmissionQueue = GroupQueue<NewSubmission, sqlx::Result<()>>;

/// Submissions per group transaction: 10 parameters each in the widest statement, well under
/// SQLite's 32,766.
const GROUP: usize = 500;

impl Store {
    /// Writes an accepted submission (its operation, phases, and the cluster record and setting
    /// it brings) in one transaction, answering once that is committed. A submission that
    /// cannot be written with its group (an idempotency key or a cluster name taken meanwhile)
    /// is written alone, so its error is its own and the others are not held back by it.
    /// A cluster record it creates is memoized as inserted, with its creator
    /// ([`Store::record_created`]), by the group's write: before anyone is answered, and even
    /// if this caller is gone by then.
    pub async fn insert_submission(&self, sub: NewSubmission) -> sqlx::Result<()> {
        let store = self.clone();
        self.submissions
            .join(sub, |group| write_groups(store, group))
            .await
            .unwrap_or_else(|| {
                Err(sqlx::Error::Protocol(
                    "the group holding this submission was dropped".into(),
                ))
            })
    }
}

impl Store {
    /// One operation and its phases (all pending).
    pub async fn insert_operation(tx: &mut Tx<'_>, op: &NewOperation) -> sqlx::Result<()> {
        Self::insert_operations(tx, &[op]).await
    }

    /// Operations and their phases (all pending): one statement for each table, however many
    /// (each statement is a wait on the one connection that writes).
    pub async fn insert_operations(tx: &mut Tx<'_>, ops: &[&NewOperation]) -> sqlx::Result<()> {
        let now = now();
        let sql = format!(
            "INSERT INTO operations (id, kind, cluster, params_json, idempotency_key, request_hash,
                                     state, actor, principal, parent_id, created_at, updated_at)
             VALUES {}",
            vec!["(?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)"; ops.len()].join(", ")
        );
        let mut query = sqlx::query(&sql);
        for op in ops {
            query = query
                .bind(&op.id)
                .bind(&op.kind)
                .bind(&op.cluster)
                .bind(op.params.to_string())
                .bind(&op.idempotency_key)
                .bind(&op.request_hash)
                .bind(&op.actor)
                .bind(&op.principal)
                .bind(&op.parent_id)
                .bind(&now)
                .bind(&now);
        }
        query.execute(&mut **tx).await?;
        // Every operation's phases: `[[id, [names…]], …]`, numbered by their position.
        let phases = json!(ops
            .iter()
            .map(|op| json!([op.id, op.phases]))
            .collect::<Vec<_>>());
        sqlx::query(
            "INSERT INTO phases (operation_id, seq, name, state)
             SELECT json_extract(o.value, '$[0]'), CAST(p.key AS INTEGER), p.value, 'pending'
             FROM json_each(?) AS o, json_each(o.value, '$[1]') AS p",
        )
        .bind(phases.to_string())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// The record of a cluster being created, in one statement: a new name, or one whose
    /// earlier cluster was deleted (its record is replaced). A record that is not `deleted` is
    /// never overwritten: that is refused, as a plain insert would be. The caller, having
    /// committed, calls [`Store::record_created`] (or [`Store::record_written`]) and
    /// [`Store::changed`]. Answers the record as inserted.
    pub async fn create_cluster(
        tx: &mut Tx<'_>,
        name: &str,
        region: &str,
        spec: &Value,
    ) -> sqlx::Result<ClusterRecord> {
        let mut created = Self::create_clusters(tx, &[(name, region, spec)]).await?;
        Ok(created.remove(0))
    }

    /// [`Store::create_cluster`] for several (name, region, spec), in one statement; refused
    /// as a whole if any of them has a record that is not deleted.
    pub async fn create_clusters(
        tx: &mut Tx<'_>,
        new: &[(&str, &str, &Value)],
    ) -> sqlx::Result<Vec<ClusterRecord>> {
        let now = now();
        // Every column is set (to its default where the insert leaves it), so the replaced
        // record keeps nothing of the deleted one.
        let sql = format!(
            "INSERT INTO clusters (name, region, spec_json, created_at, updated_at) VALUES {}
             ON CONFLICT(name) DO UPDATE SET region = excluded.region,
                 spec_json = excluded.spec_json, resources_json = '{{}}', status = 'active',
                 created_at = excluded.created_at, updated_at = excluded.updated_at
             WHERE clusters.status = 'deleted'",
            vec!["(?, ?, ?, ?, ?)"; new.len()].join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (name, region, spec) in new {
            query = query
                .bind(*name)
                .bind(*region)
                .bind(spec.to_string())
                .bind(&now)
                .bind(&now);
        }
        let done = query.execute(&mut **tx).await?;
        if done.rows_affected() != new.len() as u64 {
            let names: Vec<_> = new.iter().map(|(n, _, _)| format!("`{n}`")).collect();
            return Err(sqlx::Error::Protocol(format!(
                "cluster {} exists and is not deleted",
                names.join(" or ")
            )));
        }
        // What a read would answer now: every column was set above.
        Ok(new
            .iter()
            .map(|(name, region, spec)| ClusterRecord {
                name: name.to_string(),
                region: region.to_string(),
                spec: (*spec).clone(),
                resources: json!({}),
                status: Lifecycle::Active,
                created_at: now.clone(),
                updated_at: now.clone(),
            })
            .collect())
    }
}

/// Writes the queued submissions, a group at a time, and answers each once its group is
/// committed (or its own write failed); the records created are memoized before anyone hears.
async fn write_groups(store: Store, waiting: Vec<Waiting<NewSubmission, sqlx::Result<()>>>) {
    let mut waiting = waiting.into_iter().peekable();
    while waiting.peek().is_some() {
        let chunk: Vec<_> = waiting.by_ref().take(GROUP).collect();
        let subs: Vec<&NewSubmission> = chunk.iter().map(|(s, _)| s).collect();
        if subs.len() > 1 {
            if let Ok(created) = write_together(&store.writer, &subs).await {
                for (record, sub) in created {
                    store.record_created(record, &sub.operation.id);
                }
                for (_, done) in chunk {
                    let _ = done.send(Ok(()));
                }
                continue;
            }
        }
        for (sub, done) in chunk {
            let written = write_alone(&store.writer, &sub).await.map(|created| {
                if let Some(record) = created {
                    store.record_created(record, &sub.operation.id);
                }
            });
            let _ = done.send(written);
        }
    }
}

/// One submission in a transaction of its own, with the error that is its own; the record it
/// created, if it did.
async fn write_alone(
    writer: &sqlx::SqlitePool,
    sub: &NewSubmission,
) -> sqlx::Result<Option<ClusterRecord>> {
    let mut tx = writer.begin().await?;
    let mut created = None;
    if let Some((region, spec)) = &sub.creates {
        created = Some(Store::create_cluster(&mut tx, &sub.operation.cluster, region, spec).await?);
    }
    if let Some((key, value)) = &sub.setting {
        Store::put_setting(&mut tx, key, value).await?;
    }
    Store::insert_operation(&mut tx, &sub.operation).await?;
    tx.commit().await?;
    Ok(created)
}

/// Every submission of the group in one transaction, a statement per table; any failure
/// rolls it all back (the caller then writes each alone). The records created, each with the
/// submission that created it.
async fn write_together<'s>(
    writer: &sqlx::SqlitePool,
    subs: &[&'s NewSubmission],
) -> sqlx::Result<Vec<(ClusterRecord, &'s NewSubmission)>> {
    let mut tx = writer.begin().await?;
    // Each submission that creates a record, with what it creates.
    let (creators, creating): (Vec<&NewSubmission>, Vec<_>) = subs
        .iter()
        .filter_map(|s| {
            let (region, spec) = s.creates.as_ref()?;
            Some((*s, (s.operation.cluster.as_str(), region.as_str(), spec)))
        })
        .unzip();
    let mut created = Vec::new();
    if !creating.is_empty() {
        created = Store::create_clusters(&mut tx, &creating).await?;
    }
    // The last value of each setting wins, as if written one after another.
    let mut settings: Vec<(&str, &str)> = Vec::new();
    for (key, value) in subs.iter().filter_map(|s| s.setting.as_ref()) {
        settings.retain(|(k, _)| k != key);
        settings.push((key, value));
    }
    for (key, value) in settings {
        Store::put_setting(&mut tx, key, value).await?;
    }
    let ops: Vec<_> = subs.iter().map(|s| &s.operation).collect();
    Store::insert_operations(&mut tx, &ops).await?;
    tx.commit().await?;
    Ok(created.into_iter().zip(creators).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::is_unique_violation;

    fn sub(cluster: &str, key: Option<&str>) -> NewSubmission {
        NewSubmission {
            operation: NewOperation {
                id: format!("op-{cluster}"),
                kind: "pipeline".into(),
                cluster: cluster.into(),
                params: json!({"name": cluster}),
                idempotency_key: key.map(str::to_string),
                request_hash: None,
                actor: "api".into(),
                principal: None,
                parent_id: None,
                phases: vec!["cluster".into(), "hyperpod".into(), "storage".into()],
            },
            creates: Some(("us-west-2".into(), json!({"name": cluster}))),
            setting: Some(("active-cluster", cluster.into())),
        }
    }

    /// Writes `subs` as one group, as the turn-taker would: each one's answer, in order.
    async fn group(s: &Store, subs: Vec<NewSubmission>) -> Vec<sqlx::Result<()>> {
        let (waiting, answers): (Vec<_>, Vec<_>) = subs
            .into_iter()
            .map(|sub| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                ((sub, tx), rx)
            })
            .unzip();
        write_groups(s.clone(), waiting).await;
        let mut out = Vec::new();
        for a in answers {
            out.push(a.await.expect("every submission is answered"));
        }
        out
    }

    #[tokio::test]
    async fn a_group_writes_every_operation_its_phases_in_order_and_its_cluster() {
        let (_d, s) = crate::store::tests::store().await;
        let answers = group(&s, ["a", "b", "c"].map(|c| sub(c, None)).into()).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        for c in ["a", "b", "c"] {
            let op = s.get_operation(&format!("op-{c}")).await.unwrap().unwrap();
            assert_eq!(op.cluster, c);
            assert_eq!(op.params, json!({"name": c}));
            let phases: Vec<_> = op.phases.iter().map(|p| (p.seq, p.name.as_str())).collect();
            assert_eq!(phases, [(0, "cluster"), (1, "hyperpod"), (2, "storage")]);
            let record = s.get_cluster(c).await.unwrap().expect("recorded");
            assert_eq!(record.region, "us-west-2");
        }
        // The last one written is the active cluster, as if written one after another.
        assert_eq!(
            s.setting("active-cluster").await.unwrap().as_deref(),
            Some("c")
        );
    }

    #[tokio::test]
    async fn a_submission_that_cannot_join_its_group_fails_alone() {
        let (_d, s) = crate::store::tests::store().await;
        // A cluster recorded already, and an idempotency key used twice in the group.
        assert!(group(&s, vec![sub("taken", None)]).await[0].is_ok());
        let mut again = sub("taken", None);
        again.operation.id = "op-taken-2".into();
        let answers = group(
            &s,
            vec![
                sub("a", Some("k")),
                again,
                sub("b", Some("k")),
                sub("c", None),
            ],
        )
        .await;
        assert!(answers[0].is_ok() && answers[3].is_ok(), "{answers:?}");
        assert!(answers[1].is_err(), "the cluster exists");
        assert!(answers[2].as_ref().is_err_and(is_unique_violation));
        for (id, written) in [
            ("op-a", true),
            ("op-taken-2", false),
            ("op-b", false),
            ("op-c", true),
        ] {
            assert_eq!(
                s.get_operation(id).await.unwrap().is_some(),
                written,
                "{id}"
            );
        }
        assert!(
            s.get_cluster("b").await.unwrap().is_none(),
            "nothing of a refused one is kept"
        );
    }

    #[tokio::test]
    async fn submissions_at_once_are_each_answered_once_written() {
        let (_d, s) = crate::store::tests::store().await;
        let names: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
        let written =
            futures::future::join_all(names.iter().map(|n| s.insert_submission(sub(n, None))))
                .await;
        assert!(written.iter().all(Result::is_ok), "{written:?}");
        for n in &names {
            assert!(
                s.get_operation(&format!("op-{n}")).await.unwrap().is_some(),
                "{n}"
            );
        }
    }
}
