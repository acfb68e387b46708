//! The durable operations engine: runs each operation's phases with
//! **record → act → record → watch**, resumes unfinished operations at start-up, and retries
//! only what failed.
//!
//! ```text
//!  pending ──persist `submitting`──► act (one mutating call) ──persist `submitted` + ids──►
//!  watch (poll until terminal, persisting progress) ──► succeeded | failed
//!
//!  resume/retry:  succeeded → skipped;  submitted → watch again;
//!                 submitting/failed → look the resource up (find) → adopt it, or act again
//! ```
//!
//! The engine knows nothing about clusters: what each phase does is a [`Step`] provided by the
//! domain (`service/`) through [`Stages`].
//!
//! Words (as in `docs/architecture.md`): an **operation** has a **kind** and ordered
//! **phases**; a phase is one persisted row, run by its **step**; a **stage** is an operation a
//! person can run on its own as part of making a cluster.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::cloud::Cloud;
use crate::store::{OpState, Operation, PhaseState, PhaseUpdate, Store};

pub mod deadline;
mod outcome;
mod step;
mod wake;
pub use deadline::Deadlines;
pub use outcome::*;
pub use step::*;
pub use wake::InFlight;

/// Tuning of the engine's waits.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How often to look at a resource being watched.
    pub poll_interval: Duration,
    /// How many transient errors in a row a phase absorbs before failing; its deadline
    /// bounds the retries too, and is the only bound in production (`u32::MAX` here).
    pub max_transient_retries: u32,
    /// Operator overrides of the phases' deadlines.
    pub deadlines: Deadlines,
}

/// When a phase was started, as recorded (a phase resumed after a restart keeps that start).
fn recorded_start(phase: &crate::store::Phase) -> Option<time::OffsetDateTime> {
    let t = phase.started_at.as_deref()?;
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
}

/// A phase being watched: its row and when it must be done.
struct Watch {
    seq: i64,
    limit: Duration,
    due: time::OffsetDateTime,
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    cloud: Cloud,
    stages: Arc<dyn Stages>,
    config: EngineConfig,
    /// Bumped on every persisted change, so long-polls and event streams wake without polling.
    changes: watch::Sender<u64>,
    /// The phases being watched, by the operations whose changes wake them.
    wakes: wake::Wakes,
    /// Requests in flight, which new runners let go first.
    foreground: wake::Foreground,
    /// Operations with a live runner in this process.
    running: Mutex<HashSet<String>>,
}

/// Removes an operation from the running set when its runner ends, however it ends.
struct RunGuard<'a>(&'a Inner, String);

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.0
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}

enum Outcome {
    Done,
    Cancelled,
    Failed(String, StepError),
}

impl Engine {
    pub fn new(store: Store, cloud: Cloud, stages: Arc<dyn Stages>, config: EngineConfig) -> Self {
        let (changes, _) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                store,
                cloud,
                stages,
                config,
                changes,
                wakes: Default::default(),
                foreground: Default::default(),
                running: Mutex::new(HashSet::new()),
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn cloud(&self) -> &Cloud {
        &self.inner.cloud
    }

    /// The phases an operation of `kind` with `params` will run, from the engine's own table.
    pub fn phase_names(&self, kind: &str, params: &Value) -> Option<Vec<String>> {
        self.inner.stages.phase_names(kind, params)
    }

    /// The phases of `kind` with `params` as a preview names them (see [`Stages::planned`]).
    pub fn planned(&self, kind: &str, params: &Value) -> Option<Vec<PlannedStep>> {
        self.inner.stages.planned(kind, params)
    }

    /// A receiver that changes whenever any operation or phase is persisted.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Signals watchers that something was persisted.
    pub fn changed(&self) {
        self.inner.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Signals that operation `id` changed: everyone watching anything, and the phases that
    /// wait on `id` itself.
    pub fn changed_op(&self, id: &str) {
        self.changed();
        self.inner.wakes.happened(wake::Event::Changed, id);
    }

    /// Signals that a cancel of operation `id` was persisted: its watch looks at once.
    pub fn cancel_asked(&self, id: &str) {
        self.changed_op(id);
        self.inner.wakes.happened(wake::Event::CancelAsked, id);
    }

    /// Starts a runner for every operation that has not reached a terminal state.
    pub async fn resume_all(&self) -> anyhow::Result<usize> {
        let ids = self.inner.store.unfinished().await?;
        for id in &ids {
            tracing::info!(operation_id = %id, "resuming operation");
            self.spawn(id.clone());
        }
        Ok(ids.len())
    }

    /// Counts a request that may change something as in flight until the result is dropped.
    pub fn foreground(&self) -> InFlight {
        wake::Foreground::enter(&self.inner)
    }

    /// Runs an operation in the background unless it already has a runner.
    pub fn spawn(&self, id: String) {
        let engine = self.clone();
        tokio::spawn(async move {
            engine
                .inner
                .foreground
                .yield_to_requests(wake::YIELD_AT_MOST)
                .await;
            if let Err(e) = engine.run(&id).await {
                tracing::error!(operation_id = %id, error = %format!("{e:#}"), "operation runner stopped");
            }
        });
    }

    #[tracing::instrument(skip_all, fields(operation_id = %id))]
    async fn run(&self, id: &str) -> anyhow::Result<()> {
        let inner = &*self.inner;
        if !inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string())
        {
            return Ok(());
        }
        let _guard = RunGuard(inner, id.to_string());
        let Some(op) = inner.store.get_operation(id).await? else {
            return Ok(());
        };
        if op.state.is_terminal() {
            return Ok(());
        }
        let Some(steps) = inner.stages.steps(&op.kind, &op.params) else {
            let err = json!({"code": "unknown-kind", "message": format!("unknown operation kind {}", op.kind)});
            inner
                .store
                .set_state(id, OpState::Failed, Some(&err))
                .await?;
            self.changed_op(id);
            return Ok(());
        };
        inner.store.set_state(id, OpState::Running, None).await?;
        self.changed_op(id);
        let outcome = self.run_steps(id, &steps).await?;
        match outcome {
            Outcome::Done => {
                inner.store.set_state(id, OpState::Succeeded, None).await?;
                tracing::info!("operation succeeded");
            }
            Outcome::Cancelled => {
                inner.store.set_state(id, OpState::Cancelled, None).await?;
                tracing::info!("operation cancelled");
            }
            Outcome::Failed(phase, err) => {
                let mut body = serde_json::to_value(&err)?;
                body["phase"] = json!(phase);
                inner
                    .store
                    .set_state(id, OpState::Failed, Some(&body))
                    .await?;
                tracing::warn!(phase = %phase, error = %err.message, "operation failed");
            }
        }
        self.changed_op(id);
        Ok(())
    }

    async fn run_steps(&self, id: &str, steps: &[Arc<dyn Step>]) -> anyhow::Result<Outcome> {
        for (seq, step) in steps.iter().enumerate() {
            let seq = seq as i64;
            let Some(op) = self.inner.store.get_operation(id).await? else {
                anyhow::bail!("operation vanished");
            };
            if op.cancel_requested {
                return Ok(Outcome::Cancelled);
            }
            let Some(phase) = op.phases.iter().find(|p| p.seq == seq).cloned() else {
                anyhow::bail!("operation has no phase {seq} ({})", step.name());
            };
            if phase.state == PhaseState::Succeeded {
                continue;
            }
            let begun = recorded_start(&phase).unwrap_or_else(time::OffsetDateTime::now_utc);
            let ended = self.run_phase(&op, &phase, step.as_ref()).await;
            let outcome = match &ended {
                Ok(PhaseEnd::Succeeded) => "succeeded",
                Ok(PhaseEnd::Cancelled) => "cancelled",
                Err(_) => "failed",
            };
            let took = (time::OffsetDateTime::now_utc() - begun).as_seconds_f64();
            crate::cloud::metrics::global()
                .phase_seconds
                .get_or_create(&crate::cloud::metrics::PhaseLabels {
                    phase: step.name().to_string(),
                    outcome,
                })
                .observe(took.max(0.0));
            match ended {
                Ok(PhaseEnd::Succeeded) => {}
                Ok(PhaseEnd::Cancelled) => return Ok(Outcome::Cancelled),
                Err(err) => {
                    self.update_phase(
                        id,
                        seq,
                        PhaseUpdate {
                            state: Some(PhaseState::Failed),
                            error: Some(Some(serde_json::to_value(&err)?)),
                            finished: true,
                            ..Default::default()
                        },
                    )
                    .await?;
                    return Ok(Outcome::Failed(step.name().to_string(), err));
                }
            }
        }
        Ok(Outcome::Done)
    }

    async fn update_phase(&self, id: &str, seq: i64, u: PhaseUpdate) -> sqlx::Result<()> {
        self.inner.store.update_phase(id, seq, u).await?;
        self.changed_op(id);
        Ok(())
    }

    async fn cx<'a>(&'a self, op: &'a Operation) -> StepResult<StepCx<'a>> {
        Ok(StepCx {
            engine: self,
            op,
            cluster: self.inner.store.get_cluster(&op.cluster).await?,
            cloud: &self.inner.cloud,
        })
    }

    /// Backoff before the `n`th retry of a transient error.
    /// Capped exponential backoff with jitter (up to half again), so retries of many phases
    /// throttled at once spread out instead of arriving together.
    fn backoff(&self, n: u32) -> Duration {
        use rand::Rng as _;
        let base = self
            .inner
            .config
            .poll_interval
            .max(Duration::from_millis(50));
        let capped = (base * 2u32.saturating_pow(n.min(6))).min(Duration::from_secs(30));
        capped.mul_f64(1.0 + rand::thread_rng().gen_range(0.0..0.5))
    }

    async fn run_phase(
        &self,
        op: &Operation,
        phase: &crate::store::Phase,
        step: &dyn Step,
    ) -> StepResult<PhaseEnd> {
        let (seq, state) = (phase.seq, phase.state);
        let id = op.id.as_str();
        let cx = self.cx(op).await?;
        let limit = self.inner.config.deadlines.of(step.name(), step.deadline());
        let now = time::OffsetDateTime::now_utc();
        let (outputs, due) = match (state, phase.outputs.clone()) {
            (PhaseState::Submitted, Some(outputs)) => {
                // Resumed while watching: the deadline runs from the phase's recorded start.
                let started = recorded_start(phase).unwrap_or(now);
                (outputs, started + limit)
            }
            _ => {
                // An earlier attempt may have acted if the phase was left `submitting`/`failed`.
                let mut adopt = state != PhaseState::Pending;
                self.update_phase(
                    id,
                    seq,
                    PhaseUpdate {
                        state: Some(PhaseState::Submitting),
                        bump_attempt: true,
                        started: true,
                        error: Some(None),
                        ..Default::default()
                    },
                )
                .await?;
                let due = now + limit;
                let mut transient = 0;
                let outputs = loop {
                    let attempt = async {
                        if adopt {
                            if let Some(found) = step.find(&cx).await? {
                                tracing::info!(phase = step.name(), "adopted existing resource");
                                return Ok(found);
                            }
                        }
                        step.act(&cx).await
                    };
                    match attempt.await {
                        Ok(v) => break v,
                        Err(e)
                            if e.retryable
                                && transient < self.inner.config.max_transient_retries
                                && time::OffsetDateTime::now_utc() < due =>
                        {
                            tracing::warn!(phase = step.name(), error = %e.message, "transient error; looking again before acting");
                            crate::cloud::metrics::global().retried("phase", e.cloud.as_deref());
                            tokio::time::sleep(self.backoff(transient)).await;
                            transient += 1;
                            adopt = true;
                        }
                        Err(e) => return Err(e),
                    }
                };
                self.update_phase(
                    id,
                    seq,
                    PhaseUpdate {
                        state: Some(PhaseState::Submitted),
                        outputs: Some(outputs.clone()),
                        ..Default::default()
                    },
                )
                .await?;
                (outputs, due)
            }
        };
        let watch = Watch { seq, limit, due };
        self.watch_phase(op, &cx, outputs, step, watch).await
    }

    async fn watch_phase(
        &self,
        op: &Operation,
        cx: &StepCx<'_>,
        outputs: Value,
        step: &dyn Step,
        watch: Watch,
    ) -> StepResult<PhaseEnd> {
        let seq = watch.seq;
        // Woken early by a cancel of this operation or a change to the one the step waits on
        // (not by this operation's own writes, which would only make it look again at once).
        let mut wakes = vec![(wake::Event::CancelAsked, op.id.clone())];
        wakes.extend(step.waits_on(&outputs).map(|id| (wake::Event::Changed, id)));
        let interest = self.inner.wakes.interest(wakes);
        let mut last_progress: Option<String> = None;
        let mut transient = 0;
        loop {
            match step.poll(cx, &outputs).await {
                Ok(Poll::Ready(final_outputs)) => {
                    if step.records_resources() {
                        self.inner
                            .store
                            .merge_resources(&op.cluster, &final_outputs)
                            .await?;
                    }
                    self.update_phase(
                        &op.id,
                        seq,
                        PhaseUpdate {
                            state: Some(PhaseState::Succeeded),
                            outputs: Some(final_outputs),
                            progress: last_progress.as_ref().map(|_| "done".to_string()),
                            finished: true,
                            ..Default::default()
                        },
                    )
                    .await?;
                    return Ok(PhaseEnd::Succeeded);
                }
                Ok(Poll::Pending(progress)) => {
                    transient = 0;
                    if time::OffsetDateTime::now_utc() >= watch.due {
                        return Err(deadline::exceeded(
                            step.name(),
                            watch.limit,
                            Some(&progress),
                        ));
                    }
                    if last_progress.as_deref() != Some(progress.as_str()) {
                        self.update_phase(
                            &op.id,
                            seq,
                            PhaseUpdate {
                                progress: Some(progress.clone()),
                                ..Default::default()
                            },
                        )
                        .await?;
                        last_progress = Some(progress);
                    }
                }
                Err(e)
                    if e.retryable
                        && transient < self.inner.config.max_transient_retries
                        && time::OffsetDateTime::now_utc() < watch.due =>
                {
                    tracing::warn!(phase = step.name(), error = %e.message, "transient error while watching");
                    crate::cloud::metrics::global().retried("phase", e.cloud.as_deref());
                    tokio::time::sleep(self.backoff(transient)).await;
                    transient += 1;
                    continue;
                }
                Err(e) => return Err(e),
            }
            if self.cancel_requested(&op.id).await? {
                return Ok(PhaseEnd::Cancelled);
            }
            let _ =
                tokio::time::timeout(self.inner.config.poll_interval, interest.notify.notified())
                    .await;
        }
    }

    async fn cancel_requested(&self, id: &str) -> StepResult<bool> {
        Ok(self.inner.store.cancel_requested(id).await?)
    }

    /// Makes a failed or cancelled operation runnable again: failed phases go back to
    /// `submitting`, so they look before they act; succeeded phases are kept.
    pub async fn reset_for_retry(&self, op: &Operation) -> anyhow::Result<()> {
        let store = &self.inner.store;
        for phase in op.phases.iter().filter(|p| p.state == PhaseState::Failed) {
            store
                .update_phase(
                    &op.id,
                    phase.seq,
                    PhaseUpdate {
                        state: Some(PhaseState::Submitting),
                        error: Some(None),
                        ..Default::default()
                    },
                )
                .await?;
        }
        store.set_cancel_requested(&op.id, false).await?;
        store.set_state(&op.id, OpState::Pending, None).await?;
        self.changed_op(&op.id);
        Ok(())
    }

    /// Long-poll: returns the operation once its state or phases change after `since`, or when
    /// `wait` elapses.
    pub async fn wait_for_change(
        &self,
        id: &str,
        wait: Duration,
    ) -> anyhow::Result<Option<Operation>> {
        let mut changes = self.subscribe();
        let Some(first) = self.inner.store.get_operation(id).await? else {
            return Ok(None);
        };
        if wait.is_zero() || first.state.is_terminal() {
            return Ok(Some(first));
        }
        let fingerprint = |op: &Operation| (op.state, op.updated_at.clone());
        let before = fingerprint(&first);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                break;
            }
            if let Some(now) = self.inner.store.get_operation(id).await? {
                if fingerprint(&now) != before {
                    return Ok(Some(now));
                }
            }
        }
        self.inner.store.get_operation(id).await
    }
}

enum PhaseEnd {
    Succeeded,
    Cancelled,
}

#[cfg(test)]
mod tests;
