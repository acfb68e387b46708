//! Previews (`?dryRun=true` on every mutating route): while a previewed request's handler runs,
//! every write stops short and is noted instead — the operations it would start (kind,
//! parameters, phases and the mutating calls each phase makes, a pipeline's stages planned in
//! turn) and the changes it would make directly — so the edge answers with the plan and nothing
//! was written. Validation, conflict checks and reads run as for the real request, so a preview
//! is refused exactly where the request would be.

use std::future::Future;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

tokio::task_local! {
    static PREVIEW: Collector;
}

/// What a preview noted so far.
#[derive(Default)]
struct Collector(Mutex<Plan>);

/// Runs `request` as a preview: its writes are noted, not made. Returns its answer and the plan.
pub async fn scope<F: Future>(request: F) -> (F::Output, Plan) {
    let collector = Collector::default();
    let (answer, collector) = PREVIEW
        .scope(collector, async move {
            let answer = request.await;
            (answer, PREVIEW.with(|c| std::mem::take(&mut *lock(c))))
        })
        .await;
    (answer, collector)
}

fn lock(c: &Collector) -> std::sync::MutexGuard<'_, Plan> {
    c.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the request being served is a preview.
pub fn active() -> bool {
    PREVIEW.try_with(|_| ()).is_ok()
}

fn note(f: impl FnOnce(&mut Plan)) {
    let _ = PREVIEW.try_with(|c| f(&mut lock(c)));
}

/// Where a request would write directly (not through an operation): in a preview the change is
/// noted and the request stops here, with [`ApiError::Previewed`] for the edge to answer with the
/// plan; otherwise nothing happens and the write goes ahead.
pub fn stop(effect: Effect, resource: impl Into<String>) -> ApiResult<()> {
    if !active() {
        return Ok(());
    }
    let resource = resource.into();
    note(|p| p.changes.push(Change { effect, resource }));
    Err(ApiError::Previewed)
}

/// Notes a workload a previewed request would disturb, and what would happen to it.
pub fn affects(affected: Affected) {
    note(|p| p.affects.push(affected));
}

/// Notes the operation a previewed submission would start, its stages planned in turn.
pub(crate) fn plan_operation(engine: &Engine, kind: &str, cluster: &str, params: &Value) {
    let mut planned = Vec::new();
    plan_into(engine, kind, cluster, params, None, &mut planned);
    note(|p| p.operations.extend(planned));
}

fn plan_into(
    engine: &Engine,
    kind: &str,
    cluster: &str,
    params: &Value,
    parent: Option<usize>,
    out: &mut Vec<PlannedOperation>,
) {
    let index = out.len();
    let steps = engine.planned(kind, params).unwrap_or_default();
    out.push(PlannedOperation {
        kind: kind.to_string(),
        cluster: cluster.to_string(),
        params: params.clone(),
        parent,
        phases: Vec::new(),
    });
    for step in steps {
        let starts = step.starts.as_ref().map(|(k, _)| k.clone());
        out[index].phases.push(PlannedPhase {
            name: step.name,
            calls: step
                .calls
                .iter()
                .map(|api| PlannedCall {
                    api: api.to_string(),
                    effect: Effect::of(api),
                })
                .collect(),
            starts,
        });
        if let Some((kind, params)) = step.starts {
            plan_into(engine, &kind, cluster, &params, Some(index), out);
        }
    }
}

/// The answer to a preview: what the request would do, nothing of which was done.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Always true: nothing was written.
    pub dry_run: bool,
    /// One line saying what the request would do.
    pub summary: String,
    /// The operations it would start, each followed by the stages it would start in turn.
    pub operations: Vec<PlannedOperation>,
    /// What it would change directly, without an operation.
    pub changes: Vec<Change>,
    /// Running workloads it would disturb.
    pub affects: Vec<Affected>,
}

impl Plan {
    /// Closes the plan: the flag and the one-line summary.
    pub fn finish(mut self) -> Self {
        self.dry_run = true;
        let calls: usize = self
            .operations
            .iter()
            .flat_map(|o| &o.phases)
            .map(|p| p.calls.len())
            .sum();
        self.summary = match (self.operations.first(), self.changes.first()) {
            (Some(op), _) => format!(
                "would start a `{}` operation on `{}`: {} operation(s), {} phase(s), {} kind(s) of mutating call",
                op.kind,
                op.cluster,
                self.operations.len(),
                self.operations.iter().map(|o| o.phases.len()).sum::<usize>(),
                calls
            ),
            (None, Some(c)) => format!("would {} {}", c.effect.verb(), c.resource),
            (None, None) => "nothing to change".into(),
        };
        if !self.affects.is_empty() {
            self.summary.push_str(&format!(
                "; {} running workload(s) affected",
                self.affects.len()
            ));
        }
        self
    }
}

/// An operation a preview would start.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedOperation {
    pub kind: String,
    pub cluster: String,
    /// Its parameters, exactly as the real request would record them.
    pub params: Value,
    /// The index (in `operations`) of the operation that would start this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<usize>,
    pub phases: Vec<PlannedPhase>,
}

/// A phase of a planned operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPhase {
    pub name: String,
    /// The mutating calls it may make (a phase that finds its work done makes none).
    pub calls: Vec<PlannedCall>,
    /// The kind of the operation it starts (planned below it in `operations`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<String>,
}

/// A mutating AWS or Kubernetes call (`eks:CreateCluster`, `k8s:Apply`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedCall {
    pub api: String,
    pub effect: Effect,
}

/// A change made without an operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub effect: Effect,
    pub resource: String,
}

/// A running workload a request would disturb.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Affected {
    /// `job/<name>`, `deployment/<name>`, `endpoint/<name>`, `space/<name>` or `pod/<name>`.
    pub workload: String,
    pub namespace: String,
    /// The node it runs on.
    pub node: String,
    /// What would happen to it.
    pub outcome: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Create,
    Change,
    Delete,
}

impl Effect {
    /// What a call does, by its verb: `Delete…`, `Disassociate…`, `Detach…`, `Terminate…`
    /// remove; `Create…`, `Run…`, `Allocate…` make; anything else changes.
    pub fn of(api: &str) -> Self {
        let op = api.split_once(':').map_or(api, |(_, op)| op);
        let starts = |verbs: &[&str]| verbs.iter().any(|v| op.starts_with(v));
        if starts(&[
            "Delete",
            "Disassociate",
            "Detach",
            "Terminate",
            "Remove",
            "Release",
        ]) {
            Effect::Delete
        } else if starts(&["Create", "Run", "Allocate"]) {
            Effect::Create
        } else {
            Effect::Change
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Effect::Create => "create",
            Effect::Change => "change",
            Effect::Delete => "delete",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_effect_is_read_from_its_verb() {
        assert_eq!(Effect::of("eks:CreateCluster"), Effect::Create);
        assert_eq!(Effect::of("eks:DisassociateAccessPolicy"), Effect::Delete);
        assert_eq!(Effect::of("k8s:Delete"), Effect::Delete);
        assert_eq!(
            Effect::of("sagemaker:UpdateClusterSoftware"),
            Effect::Change
        );
        assert_eq!(Effect::of("k8s:Apply"), Effect::Change);
    }

    #[tokio::test]
    async fn a_write_outside_a_preview_goes_ahead_and_inside_one_is_noted_and_stopped() {
        assert!(stop(Effect::Create, "x").is_ok());
        let (answer, plan) = scope(async { stop(Effect::Delete, "admin a") }).await;
        assert!(matches!(answer, Err(ApiError::Previewed)));
        let plan = plan.finish();
        assert!(plan.dry_run);
        assert_eq!(plan.summary, "would delete admin a");
    }
}
