//! What the domain provides the engine: a [`Step`] per phase (look, act, watch), its context,
//! and the [`Stages`] table of operation kinds.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::outcome::{Poll, StepError, StepResult};
use super::Engine;
use crate::cloud::Cloud;
use crate::store::{ClusterRecord, Operation};

/// What a step sees.
pub struct StepCx<'a> {
    pub engine: &'a Engine,
    pub op: &'a Operation,
    /// The cluster record as of the start of this phase (resources recorded so far).
    pub cluster: Option<ClusterRecord>,
    pub cloud: &'a Cloud,
}

impl StepCx<'_> {
    pub fn param<T: serde::de::DeserializeOwned>(&self) -> StepResult<T> {
        serde_json::from_value(self.op.params.clone())
            .map_err(|e| StepError::fatal("bad-params", format!("operation parameters: {e}")))
    }
}

/// One phase of an operation kind.
#[async_trait]
pub trait Step: Send + Sync {
    fn name(&self) -> &'static str;
    /// Look for what [`Step::act`] would create, by deterministic name or tag. Called before
    /// acting again whenever an earlier attempt may have acted (resume, retry, transient error).
    async fn find(&self, _cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(None)
    }
    /// The mutating call(s); returns the identifiers to record.
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value>;
    /// Watch until terminal. The default: ready as soon as acted.
    async fn poll(&self, _cx: &StepCx<'_>, outputs: &Value) -> StepResult<Poll> {
        Ok(Poll::Ready(outputs.clone()))
    }
    /// The operation this phase waits for, named in its outputs: a change to it wakes the
    /// watch at once instead of at the next poll tick.
    fn waits_on(&self, _outputs: &Value) -> Option<String> {
        None
    }
    /// Whether the outputs are merged into the cluster's recorded resources.
    fn records_resources(&self) -> bool {
        true
    }
    /// How long the phase may take from its start, watching included (see `ops::deadline`).
    fn deadline(&self) -> std::time::Duration {
        DEFAULT_DEADLINE
    }
    /// The mutating calls this phase may make (`eks:CreateCluster`, `k8s:Apply`), for a
    /// preview's plan. A test runs each operation after its preview and fails when the real
    /// run made a call its plan did not name.
    fn calls(&self) -> &'static [&'static str] {
        &[]
    }
    /// The operation this phase starts and watches (a pipeline's stage): its kind and
    /// parameters, so a preview plans it too.
    fn starts(&self, _params: &Value) -> Option<(String, Value)> {
        None
    }
}

/// The deadline of a phase that does not say: enough for an add-on or a Kubernetes rollout.
pub const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// A phase whose single call reads the actual state first and changes only what differs, so
/// repeating it after a crash is safe: resuming runs it again instead of searching, and it
/// records nothing in the cluster's resources.
#[async_trait]
pub trait Reconcile: Send + Sync {
    fn phase(&self) -> &'static str;
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value>;
    async fn poll(&self, _cx: &StepCx<'_>, outputs: &Value) -> StepResult<Poll> {
        Ok(Poll::Ready(outputs.clone()))
    }
    fn deadline(&self) -> std::time::Duration {
        DEFAULT_DEADLINE
    }
    /// As [`Step::calls`]: what the reconciliation may change.
    fn calls(&self) -> &'static [&'static str] {
        &[]
    }
}

#[async_trait]
impl<T: Reconcile> Step for T {
    fn name(&self) -> &'static str {
        self.phase()
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.reconcile(cx).await.map(Some)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        self.reconcile(cx).await
    }
    async fn poll(&self, cx: &StepCx<'_>, outputs: &Value) -> StepResult<Poll> {
        Reconcile::poll(self, cx, outputs).await
    }
    fn records_resources(&self) -> bool {
        false
    }
    fn deadline(&self) -> std::time::Duration {
        Reconcile::deadline(self)
    }
    fn calls(&self) -> &'static [&'static str] {
        Reconcile::calls(self)
    }
}

/// The domain's catalogue of operation kinds.
pub trait Stages: Send + Sync {
    /// The phases of an operation kind, in order, given its parameters.
    fn steps(&self, kind: &str, params: &Value) -> Option<Vec<Arc<dyn Step>>>;

    /// The phases of a kind as a preview names them: each phase's name, its mutating calls
    /// and the operation it starts, if any.
    fn planned(&self, kind: &str, params: &Value) -> Option<Vec<PlannedStep>> {
        Some(
            self.steps(kind, params)?
                .iter()
                .map(|s| PlannedStep {
                    name: s.name().to_string(),
                    calls: s.calls(),
                    starts: s.starts(params),
                })
                .collect(),
        )
    }

    /// The phase names of a kind, for inserting its rows.
    fn phase_names(&self, kind: &str, params: &Value) -> Option<Vec<String>> {
        Some(
            self.steps(kind, params)?
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
        )
    }
}

/// One phase of a kind as a preview names it.
pub struct PlannedStep {
    pub name: String,
    pub calls: &'static [&'static str],
    /// The kind and parameters of the operation the phase starts.
    pub starts: Option<(String, Value)>,
}
