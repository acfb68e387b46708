//! The store on a real SQLite file: what the engine relies on for durability.

use serde_json::json;

use super::*;

pub(super) async fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).await.unwrap();
    (dir, s)
}

fn new_op(id: &str, key: Option<&str>) -> NewOperation {
    NewOperation {
        id: id.into(),
        kind: "cluster".into(),
        cluster: "demo".into(),
        params: json!({"a": 1}),
        idempotency_key: key.map(str::to_string),
        request_hash: Some("h".into()),
        actor: "api".into(),
        principal: None,
        parent_id: None,
        phases: vec!["vpc".into(), "subnets".into()],
    }
}

async fn insert(s: &Store, op: &NewOperation) -> sqlx::Result<()> {
    let mut tx = s.writer.begin().await?;
    Store::insert_operation(&mut tx, op).await?;
    tx.commit().await?;
    s.changed();
    Ok(())
}

#[tokio::test]
async fn an_operation_is_stored_with_its_phases_pending_in_order() {
    let (_d, s) = store().await;
    insert(&s, &new_op("op-1", None)).await.unwrap();
    let op = s.get_operation("op-1").await.unwrap().unwrap();
    assert_eq!(op.state, OpState::Pending);
    assert_eq!(op.params, json!({"a": 1}));
    let names: Vec<(i64, &str)> = op.phases.iter().map(|p| (p.seq, p.name.as_str())).collect();
    assert_eq!(names, [(0, "vpc"), (1, "subnets")]);
    assert!(op
        .phases
        .iter()
        .all(|p| p.state == PhaseState::Pending && p.attempt == 0));
    assert_eq!(s.unfinished().await.unwrap(), ["op-1"]);
}

#[tokio::test]
async fn an_idempotency_key_holds_one_operation_only() {
    let (_d, s) = store().await;
    insert(&s, &new_op("op-1", Some("k"))).await.unwrap();
    assert!(
        insert(&s, &new_op("op-2", Some("k"))).await.is_err(),
        "a second insert with the key is refused"
    );
    assert_eq!(
        s.find_by_key("k").await.unwrap(),
        Some(("op-1".to_string(), Some("h".to_string())))
    );
    // Nothing of the refused insert is left (its transaction rolled back).
    assert!(s.get_operation("op-2").await.unwrap().is_none());
}

#[tokio::test]
async fn phase_updates_change_only_what_they_name() {
    let (_d, s) = store().await;
    insert(&s, &new_op("op-1", None)).await.unwrap();
    let update = |u: PhaseUpdate| s.update_phase("op-1", 0, u);
    update(PhaseUpdate {
        state: Some(PhaseState::Submitting),
        bump_attempt: true,
        started: true,
        ..Default::default()
    })
    .await
    .unwrap();
    update(PhaseUpdate {
        state: Some(PhaseState::Submitted),
        outputs: Some(json!({"vpcId": "vpc-1"})),
        ..Default::default()
    })
    .await
    .unwrap();
    update(PhaseUpdate {
        progress: Some("waiting".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    let p = &s.get_operation("op-1").await.unwrap().unwrap().phases[0];
    assert_eq!(p.state, PhaseState::Submitted);
    assert_eq!(p.attempt, 1);
    assert_eq!(p.outputs, Some(json!({"vpcId": "vpc-1"})));
    assert_eq!(p.progress.as_deref(), Some("waiting"));
    assert!(p.started_at.is_some() && p.finished_at.is_none());
    // The other phase is untouched.
    let q = &s.get_operation("op-1").await.unwrap().unwrap().phases[1];
    assert_eq!((q.state, q.attempt), (PhaseState::Pending, 0));
}

#[tokio::test]
async fn a_cluster_record_replaces_a_deleted_one_and_never_a_live_one() {
    let (_d, s) = store().await;
    let create = |spec: serde_json::Value| {
        let s = s.clone();
        async move {
            let s: Store = s;
            let mut tx = s.writer.begin().await?;
            Store::create_cluster(&mut tx, "demo", "us-west-2", &spec).await?;
            tx.commit().await?;
            s.record_written("demo");
            s.changed();
            Ok::<(), sqlx::Error>(())
        }
    };
    create(json!({"v": 1})).await.unwrap();
    s.merge_resources("demo", &json!({"vpcId": "vpc-1"}))
        .await
        .unwrap();
    assert!(
        create(json!({"v": 2})).await.is_err(),
        "a live record stays"
    );
    let kept = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(
        (kept.spec["v"].as_i64(), kept.resources["vpcId"].as_str()),
        (Some(1), Some("vpc-1"))
    );
    s.set_cluster_status("demo", Lifecycle::Deleted)
        .await
        .unwrap();
    create(json!({"v": 3})).await.unwrap();
    let fresh = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(fresh.spec, json!({"v": 3}));
    assert_eq!(
        fresh.resources,
        json!({}),
        "nothing of the deleted cluster is kept"
    );
    assert_eq!(fresh.status, Lifecycle::Active);
}

#[tokio::test]
async fn terminal_operations_are_not_resumed() {
    let (_d, s) = store().await;
    insert(&s, &new_op("op-1", None)).await.unwrap();
    insert(&s, &new_op("op-2", None)).await.unwrap();
    s.set_state("op-1", OpState::Succeeded, None).await.unwrap();
    s.set_state("op-2", OpState::Running, None).await.unwrap();
    assert_eq!(s.unfinished().await.unwrap(), ["op-2"]);
}

#[tokio::test]
async fn recorded_resources_merge_key_by_key_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).await.unwrap();
        let mut tx = s.writer.begin().await.unwrap();
        Store::create_cluster(&mut tx, "demo", "us-west-2", &json!({}))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s.merge_resources("demo", &json!({"vpcId": "vpc-1", "subnets": ["a"]}))
            .await
            .unwrap();
        s.merge_resources("demo", &json!({"subnets": ["a", "b"]}))
            .await
            .unwrap();
        // Not an object: ignored, nothing lost.
        s.merge_resources("demo", &json!("x")).await.unwrap();
    }
    let s = Store::open(dir.path()).await.unwrap();
    let c = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(
        c.resources,
        json!({"vpcId": "vpc-1", "subnets": ["a", "b"]})
    );
}

#[tokio::test]
async fn a_cluster_record_is_read_once_per_revision_and_never_kept_past_a_write() {
    let (_d, s) = store().await;
    let mut tx = s.writer.begin().await.unwrap();
    Store::create_cluster(&mut tx, "demo", "us-west-2", &json!({}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    s.record_written("demo");
    s.changed();
    let before = s.reads();
    for _ in 0..5 {
        assert!(s
            .get_cluster("demo")
            .await
            .unwrap()
            .unwrap()
            .resources
            .get("eksEndpoint")
            .is_none());
    }
    assert_eq!(s.reads() - before, 1, "unchanged: one query for five reads");
    s.merge_resources("demo", &json!({"eksEndpoint": "https://x"}))
        .await
        .unwrap();
    let record = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(record.resources["eksEndpoint"], "https://x");
    s.set_cluster_status("demo", Lifecycle::Deleted)
        .await
        .unwrap();
    assert_eq!(
        s.get_cluster("demo").await.unwrap().unwrap().status,
        Lifecycle::Deleted
    );
    assert_eq!(s.reads() - before, 3);
    // A name that has no record is known to have none: no query.
    assert!(s.get_cluster("other").await.unwrap().is_none());
    assert_eq!(s.reads() - before, 3);
}

#[tokio::test]
async fn names_recorded_before_a_start_are_known_and_others_cost_no_query() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).await.unwrap();
        let mut tx = s.writer.begin().await.unwrap();
        Store::create_cluster(&mut tx, "before", "us-west-2", &json!({"v": 1}))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s.record_written("before");
    }
    let s = Store::open(dir.path()).await.unwrap();
    let before = s.reads();
    assert!(s.get_cluster("never").await.unwrap().is_none());
    assert_eq!(
        s.reads() - before,
        0,
        "an unknown name is answered from memory"
    );
    let found = s
        .get_cluster("before")
        .await
        .unwrap()
        .expect("read at start");
    assert_eq!(found.spec, json!({"v": 1}));
    assert_eq!(s.reads() - before, 1);
}

#[tokio::test]
async fn a_created_record_is_read_as_inserted_without_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).await.unwrap();
    let spec = json!({"zone": "us-west-2a", "count": 2, "ratio": 0.1});
    let mut tx = s.writer.begin().await.unwrap();
    let created = Store::create_cluster(&mut tx, "demo", "us-west-2", &spec)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    s.record_created(created, "op-1");
    let before = s.reads();
    let memoized = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(s.reads() - before, 0);
    assert_eq!(s.creator_of("demo").as_deref(), Some("op-1"));
    // Exactly what a query reads: another store on the same file has no memo.
    let read = Store::open(dir.path())
        .await
        .unwrap()
        .get_cluster("demo")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&memoized).unwrap(),
        serde_json::to_value(&read).unwrap()
    );
}

#[tokio::test]
async fn a_cluster_record_is_kept_across_writes_to_other_clusters() {
    let (_d, s) = store().await;
    for name in ["demo", "other"] {
        assert!(s.get_cluster(name).await.unwrap().is_none());
        let mut tx = s.writer.begin().await.unwrap();
        Store::create_cluster(&mut tx, name, "us-west-2", &json!({}))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s.record_written(name);
        s.changed();
    }
    let before = s.reads();
    assert!(
        s.get_cluster("demo").await.unwrap().is_some(),
        "read again once written"
    );
    s.merge_resources("other", &json!({"vpcId": "vpc-2"}))
        .await
        .unwrap();
    assert!(s.get_cluster("demo").await.unwrap().is_some());
    assert_eq!(
        s.reads() - before,
        1,
        "another cluster's write keeps this record"
    );
    s.merge_resources("demo", &json!({"vpcId": "vpc-1"}))
        .await
        .unwrap();
    let record = s.get_cluster("demo").await.unwrap().unwrap();
    assert_eq!(record.resources["vpcId"], "vpc-1");
    assert_eq!(s.reads() - before, 2);
}

#[tokio::test]
async fn queries_go_to_sqlite_without_a_ping_first() {
    // Each ping is a hand-off to a connection's thread and back before the query's own: on a
    // burst of submissions, one per query more of the wake-ups that bound it.
    let (_d, s) = store().await;
    assert!(!s.pool.options().get_test_before_acquire());
    assert!(!s.writer.options().get_test_before_acquire());
}
