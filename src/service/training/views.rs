//! What the cluster runs for training, read from the operators' status: every job in namespace
//! default and the teams' namespaces (ours and those made elsewhere) with its restarts against
//! their limits and, under task governance, its admission; and the parameters of deleting one of
//! ours, with the end of the operation that follows it.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::{cloud_err, job_ref, Runtime};
use crate::cloud::ListQuery;
use crate::cloud::MANAGED_BY;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::shared::kind::OpKind;
use crate::service::shared::labels::{is_workload_namespace, Placement};
use crate::service::shared::submit::active_operations;
use crate::service::steps::training::{restarts, training_state};
use crate::service::steps::workloads::DeleteParams;
use crate::service::teams::{with_admission, Admission};
use crate::store::PhaseState;

/// A training job and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobView {
    pub name: String,
    /// `default`, or the team's namespace `hyperpod-ns-<team>`.
    pub namespace: String,
    /// The team it runs as (task governance), if any.
    pub team: Option<String>,
    /// Its priority class, if any.
    pub priority: Option<String>,
    /// Under task governance, where Kueue has it: admitted, or pending and why, and its place
    /// in the team's queue. None outside a team's namespace, or before Kueue has seen it.
    pub admission: Option<Admission>,
    /// `HyperPodPyTorchJob` or `RayJob`.
    pub kind: String,
    /// The recipe it was made from; none for jobs created elsewhere.
    pub recipe: Option<String>,
    /// `instantstart` (made here) or `external` (shown read-only).
    pub origin: String,
    /// `pending`, `running`, `succeeded` or `failed`.
    pub state: String,
    pub message: Option<String>,
    pub instance_type: Option<String>,
    pub nodes: Option<u64>,
    /// `count`, `limit` (jobMaxRetryCount), `fullJobRestarts`, `fullJobRestartLimit`.
    #[schema(value_type = Object)]
    pub restarts: Value,
    /// Pods and ranks of the latest restart.
    pub faulty_pods: Vec<String>,
    pub faulty_ranks: Vec<String>,
    #[schema(value_type = Vec<Object>)]
    pub conditions: Vec<Value>,
    /// The `/s3` paths it was made from (`script`, `model`, `dataset`, `output`).
    #[schema(value_type = Object)]
    pub paths: Value,
    pub created: Option<String>,
}

fn view_of(j: &Value) -> TrainingJobView {
    let s = |p: &str| j.pointer(p).and_then(Value::as_str).map(str::to_string);
    let list = |p: &str| -> Vec<String> {
        j.pointer(p)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let state = training_state(j);
    let annotation = |k: &str| s(&format!("/metadata/annotations/instantstart.io~1{k}"));
    let managed = j
        .pointer(&format!(
            "/metadata/labels/{}",
            MANAGED_BY.0.replace('/', "~1")
        ))
        .is_some();
    let pytorch = j["kind"] == "HyperPodPyTorchJob";
    let (pod, nodes) = if pytorch {
        (
            "/spec/replicaSpecs/0/template/spec",
            j.pointer("/spec/replicaSpecs")
                .and_then(Value::as_array)
                .map(|rs| rs.iter().filter_map(|r| r["replicas"].as_u64()).sum()),
        )
    } else {
        (
            "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec",
            j.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/replicas")
                .and_then(Value::as_u64),
        )
    };
    let placement = Placement::of(j);
    TrainingJobView {
        name: s("/metadata/name").unwrap_or_default(),
        namespace: s("/metadata/namespace").unwrap_or_else(|| "default".into()),
        team: placement.team,
        priority: placement.priority,
        admission: None,
        kind: s("/kind").unwrap_or_default(),
        recipe: annotation("recipe"),
        origin: if managed { "instantstart" } else { "external" }.into(),
        state: state.as_str().into(),
        message: state.message().map(str::to_string),
        instance_type: s(&format!(
            "{pod}/nodeSelector/node.kubernetes.io~1instance-type"
        )),
        nodes,
        restarts: if pytorch { restarts(j) } else { json!({}) },
        faulty_pods: list("/status/latestFaultyPodInstanceList/faultyPodList"),
        faulty_ranks: list("/status/latestFaultyPodInstanceList/faultyRankList"),
        conditions: j
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        paths: json!(["script", "model", "dataset", "output"]
            .iter()
            .filter_map(|k| annotation(k).map(|v| (k.to_string(), v)))
            .collect::<std::collections::BTreeMap<_, _>>()),
        created: s("/metadata/creationTimestamp"),
    }
}

/// Every training job in namespace default and the teams' namespaces, newest first: ours and
/// those created elsewhere.
pub async fn list_training_jobs(engine: &Engine, cluster: &str) -> ApiResult<Vec<TrainingJobView>> {
    let target = kube_target(engine, cluster).await?;
    let mut out = Vec::new();
    for runtime in [Runtime::HyperPodPytorch, Runtime::Ray] {
        let r = job_ref(runtime, "", "");
        match engine
            .cloud()
            .kube
            .list(&target, &ListQuery::of(&r.api_version, &r.kind))
            .await
        {
            Ok(items) => out.extend(
                items
                    .iter()
                    .filter(|j| {
                        j.pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .is_none_or(is_workload_namespace)
                    })
                    .map(view_of),
            ),
            // The operator is not installed: no jobs of its kind.
            Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => {}
            Err(e) => return Err(cloud_err(e)),
        }
    }
    with_admission(
        engine,
        &target,
        &mut out,
        |j| j.team.is_some(),
        |j, kueue| {
            j.admission = kueue.of(&j.namespace, &j.kind, &j.name);
            // A job Kueue holds has no pods, and its operator knows nothing of the quota: the
            // reason it waits is Kueue's, so that is what its message says.
            if j.state == "pending" {
                if let Some(why) = j.admission.as_ref().and_then(Admission::held_because) {
                    j.message = Some(why);
                }
            }
        },
    )
    .await?;
    // A person sees the jobs of the namespaces their access entry lets them read.
    let mut visible = Vec::with_capacity(out.len());
    for job in out {
        if crate::service::people::access::may_read(engine, cluster, &job.namespace).await? {
            visible.push(job);
        }
    }
    visible.sort_by(|a, b| b.created.cmp(&a.created).then(a.name.cmp(&b.name)));
    Ok(visible)
}

pub async fn get_training_job(
    engine: &Engine,
    cluster: &str,
    job: &str,
) -> ApiResult<TrainingJobView> {
    validate::dns_label("job", "job name", job)?;
    list_training_jobs(engine, cluster)
        .await?
        .into_iter()
        .find(|j| j.name == job)
        .ok_or_else(|| ApiError::not_found(format!("training job `{job}` on `{cluster}`")))
}

/// Deleting a job this control plane made (one created elsewhere is shown, never changed).
pub async fn training_delete_params(engine: &Engine, cluster: &str, job: &str) -> ApiResult<Value> {
    let view = get_training_job(engine, cluster, job).await?;
    crate::service::people::access::require_write(
        engine,
        cluster,
        &view.namespace,
        "delete its training jobs",
    )
    .await?;
    if view.origin != "instantstart" {
        return Err(ApiError::Conflict {
            slug: ProblemType::NotManaged,
            detail: format!("`{job}` was created outside this control plane: it is shown read-only, never deleted from here"),
            field: None,
            operation_id: None,
        });
    }
    let runtime = if view.kind == "RayJob" {
        Runtime::Ray
    } else {
        Runtime::HyperPodPytorch
    };
    let params = DeleteParams {
        workload: format!("training/{job}"),
        objects: vec![job_ref(runtime, &view.namespace, job)],
        release: None,
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

/// Ends the operation that follows one of our jobs, so deleting a running job needs no cancel
/// first. Once its job is applied the follower only reads, so stopping it is safe; one still
/// applying is left alone, and the deletion's conflict names it.
pub async fn end_following(engine: &Engine, cluster: &str, job: &str) -> ApiResult<()> {
    let workload = format!("training/{job}");
    let store = engine.store();
    let follower = active_operations(store, cluster)
        .await?
        .into_iter()
        .find(|o| {
            o.kind == OpKind::TrainingJob
                && o.params["workload"] == workload.as_str()
                && o.phases
                    .iter()
                    .any(|p| p.name == "train" && p.state == PhaseState::Submitted)
        });
    let Some(op) = follower else {
        return Ok(());
    };
    store.set_cancel_requested(&op.id, true).await?;
    engine.cancel_asked(&op.id);
    // The engine stops it at its next poll; bounded, so a stuck follower gives the conflict.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) {
        match engine.wait_for_change(&op.id, left).await? {
            Some(now) if !now.state.is_terminal() => continue,
            _ => break,
        }
    }
    Ok(())
}
