//! The engine against a fake step whose "cloud" is a counter: what a crash at each point of
//! record → act → record → watch leaves behind, and that resuming, retrying and cancelling from
//! there never replays the act.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::*;
use crate::cloud::unavailable::Unavailable;
use crate::store::{NewOperation, PhaseState, PhaseUpdate};

/// One resource in a fake cloud: `act` creates it (counted), `find` reports it once created.
#[derive(Default)]
struct World {
    created: AtomicBool,
    acts: AtomicUsize,
    finds: AtomicUsize,
    polls: AtomicUsize,
    /// `act` fails this many times first (fatally, or transiently with `transient`).
    failures: AtomicUsize,
    transient: AtomicBool,
    /// `poll` stays pending until this is set.
    ready: AtomicBool,
}

struct FakeStep(Arc<World>);

#[async_trait]
impl Step for FakeStep {
    fn name(&self) -> &'static str {
        "make-thing"
    }
    async fn find(&self, _cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.0.finds.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .0
            .created
            .load(Ordering::SeqCst)
            .then(|| json!({"thingId": "t-1", "adopted": true})))
    }
    async fn act(&self, _cx: &StepCx<'_>) -> StepResult<Value> {
        if self.0.failures.load(Ordering::SeqCst) > 0 {
            self.0.failures.fetch_sub(1, Ordering::SeqCst);
            let mut e = StepError::fatal("boom", "the cloud said no");
            e.retryable = self.0.transient.load(Ordering::SeqCst);
            return Err(e);
        }
        self.0.acts.fetch_add(1, Ordering::SeqCst);
        self.0.created.store(true, Ordering::SeqCst);
        Ok(json!({"thingId": "t-1"}))
    }
    async fn poll(&self, _cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        self.0.polls.fetch_add(1, Ordering::SeqCst);
        if self.0.ready.load(Ordering::SeqCst) {
            Ok(Poll::Ready(out.clone()))
        } else {
            Ok(Poll::Pending("converging".into()))
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// A second phase that always succeeds at once and counts its runs.
struct Counter(Arc<AtomicUsize>);

#[async_trait]
impl Step for Counter {
    fn name(&self) -> &'static str {
        "count"
    }
    async fn act(&self, _cx: &StepCx<'_>) -> StepResult<Value> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({}))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

struct FakeStages {
    first: Arc<AtomicUsize>,
    world: Arc<World>,
}

impl Stages for FakeStages {
    fn steps(&self, kind: &str, _params: &Value) -> Option<Vec<Arc<dyn Step>>> {
        (kind == "fake").then(|| {
            vec![
                Arc::new(Counter(self.first.clone())) as Arc<dyn Step>,
                Arc::new(FakeStep(self.world.clone())),
            ]
        })
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    engine: Engine,
    world: Arc<World>,
    first: Arc<AtomicUsize>,
}

async fn harness() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let cloud = Arc::new(Unavailable {
        region: "us-west-2".into(),
        reason: "not used".into(),
    })
    .cloud();
    let world = Arc::new(World::default());
    let first = Arc::new(AtomicUsize::new(0));
    let stages = Arc::new(FakeStages {
        first: first.clone(),
        world: world.clone(),
    });
    let config = EngineConfig {
        poll_interval: Duration::from_millis(5),
        max_transient_retries: 3,
        deadlines: Default::default(),
    };
    Harness {
        _dir: dir,
        engine: Engine::new(store, cloud, stages, config),
        world,
        first,
    }
}

impl Harness {
    async fn submit(&self, id: &str) {
        let store = self.engine.store();
        let mut tx = store.writer.begin().await.unwrap();
        let op = NewOperation {
            id: id.into(),
            kind: "fake".into(),
            cluster: "c".into(),
            params: json!({}),
            idempotency_key: None,
            request_hash: None,
            actor: "api".into(),
            principal: None,
            parent_id: None,
            phases: vec!["count".into(), "make-thing".into()],
        };
        Store::insert_operation(&mut tx, &op).await.unwrap();
        tx.commit().await.unwrap();
        store.changed();
    }

    /// What a process killed at some point left: phases written as they were.
    async fn leave(&self, id: &str, seq: i64, state: PhaseState, outputs: Option<Value>) {
        self.engine
            .store()
            .update_phase(
                id,
                seq,
                PhaseUpdate {
                    state: Some(state),
                    outputs,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }

    async fn state(&self, id: &str) -> (OpState, Vec<PhaseState>) {
        let op = self
            .engine
            .store()
            .get_operation(id)
            .await
            .unwrap()
            .unwrap();
        (op.state, op.phases.iter().map(|p| p.state).collect())
    }

    fn count(&self, c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_fresh_operation_acts_once_and_watches_to_the_end() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    h.engine.run("op-1").await.unwrap();
    assert_eq!(
        h.state("op-1").await,
        (OpState::Succeeded, vec![PhaseState::Succeeded; 2])
    );
    assert_eq!(h.count(&h.world.acts), 1);
    assert_eq!(
        h.count(&h.world.finds),
        0,
        "nothing to look for on a first run"
    );
}

#[tokio::test]
async fn a_crash_before_the_act_looks_then_acts_once() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    // Killed after persisting `submitting`, before the call went out.
    h.leave("op-1", 0, PhaseState::Succeeded, Some(json!({})))
        .await;
    h.leave("op-1", 1, PhaseState::Submitting, None).await;
    h.engine.run("op-1").await.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(h.count(&h.world.finds), 1, "looked before acting");
    assert_eq!(h.count(&h.world.acts), 1);
    assert_eq!(h.count(&h.first), 0, "a succeeded phase is skipped");
}

#[tokio::test]
async fn a_crash_after_the_act_adopts_what_was_made_and_never_acts_again() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    // Killed after the call took effect, before `submitted` was persisted.
    h.world.created.store(true, Ordering::SeqCst);
    h.leave("op-1", 0, PhaseState::Succeeded, Some(json!({})))
        .await;
    h.leave("op-1", 1, PhaseState::Submitting, None).await;
    h.engine.run("op-1").await.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(h.count(&h.world.acts), 0, "the act is never replayed");
    let op = h
        .engine
        .store()
        .get_operation("op-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        op.phases[1].outputs,
        Some(json!({"thingId": "t-1", "adopted": true}))
    );
}

#[tokio::test]
async fn a_submitted_phase_resumes_watching_without_looking_or_acting() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    h.leave("op-1", 0, PhaseState::Succeeded, Some(json!({})))
        .await;
    h.leave(
        "op-1",
        1,
        PhaseState::Submitted,
        Some(json!({"thingId": "t-1"})),
    )
    .await;
    h.engine.run("op-1").await.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(
        (h.count(&h.world.finds), h.count(&h.world.acts)),
        (0, 0),
        "resume only watches"
    );
    assert!(h.count(&h.world.polls) >= 1);
}

#[tokio::test]
async fn a_failed_phase_is_retried_alone_and_looks_before_acting() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.world.failures.store(1, Ordering::SeqCst);
    h.submit("op-1").await;
    h.engine.run("op-1").await.unwrap();
    let (state, phases) = h.state("op-1").await;
    assert_eq!(state, OpState::Failed);
    assert_eq!(phases, [PhaseState::Succeeded, PhaseState::Failed]);
    let op = h
        .engine
        .store()
        .get_operation("op-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(op.error.as_ref().unwrap()["phase"], "make-thing");

    h.engine.reset_for_retry(&op).await.unwrap();
    h.engine.run("op-1").await.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(h.count(&h.first), 1, "the succeeded phase is not run again");
    assert_eq!(h.count(&h.world.finds), 1, "a retry looks first");
    assert_eq!(h.count(&h.world.acts), 1);
}

#[tokio::test]
async fn a_transient_error_is_ridden_out_looking_before_each_new_act() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.world.failures.store(2, Ordering::SeqCst);
    h.world.transient.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    h.engine.run("op-1").await.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(h.count(&h.world.acts), 1);
    assert_eq!(h.count(&h.world.finds), 2, "each retry looked first");
}

#[tokio::test]
async fn a_cancel_request_stops_a_watch_and_the_operation_ends_cancelled() {
    let h = harness().await;
    h.submit("op-1").await;
    let engine = h.engine.clone();
    let runner = tokio::spawn(async move { engine.run("op-1").await });
    // Wait (bounded) until the watch is under way, then ask to cancel.
    let mut changes = h.engine.subscribe();
    for _ in 0..200 {
        if h.count(&h.world.polls) > 0 {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), changes.changed()).await;
    }
    assert!(h.count(&h.world.polls) > 0, "the phase is being watched");
    h.engine
        .store()
        .set_cancel_requested("op-1", true)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), runner)
        .await
        .expect("the runner stops")
        .unwrap()
        .unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Cancelled);
    assert_eq!(h.count(&h.world.acts), 1);
}

#[tokio::test]
async fn a_second_runner_for_the_same_operation_does_nothing() {
    let h = harness().await;
    h.world.ready.store(true, Ordering::SeqCst);
    h.submit("op-1").await;
    let (a, b) = tokio::join!(h.engine.run("op-1"), h.engine.run("op-1"));
    a.unwrap();
    b.unwrap();
    assert_eq!(h.state("op-1").await.0, OpState::Succeeded);
    assert_eq!(h.count(&h.world.acts), 1, "one runner per operation");
}
