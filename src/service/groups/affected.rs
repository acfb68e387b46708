//! What a change to nodes would disturb, for a preview: the workloads holding GPUs on the nodes
//! it touches, read from the cluster's watch-backed view (no list per request), each with what
//! would happen to it.

use std::collections::BTreeSet;

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::shared::preview::{self, Affected};

/// The nodes a change touches.
pub enum NodesOf<'a> {
    /// One node, by its instance id.
    Instance(&'a str),
    /// The nodes of these groups; every node when empty.
    Groups(&'a [String]),
}

/// In a preview, notes each workload on the touched nodes with `outcome`; nothing otherwise.
/// A cluster whose view cannot be read notes nothing rather than refusing the preview.
pub async fn note(
    engine: &Engine,
    cluster: &str,
    nodes: NodesOf<'_>,
    outcome: &str,
) -> ApiResult<()> {
    if !preview::active() {
        return Ok(());
    }
    let Ok(target) = crate::service::cluster::records::kube_target(engine, cluster).await else {
        return Ok(());
    };
    let Ok(state) = engine.cloud().kube.cluster_state(&target).await else {
        return Ok(());
    };
    let touched = touched(&state, &nodes);
    let workload_of = |c: &crate::cloud::GpuClaim| {
        (
            crate::service::costs::sample::workload_of(&c.labels),
            c.namespace.to_string(),
        )
    };
    // Where each workload also runs, on nodes the change leaves alone.
    let mut elsewhere: std::collections::HashMap<(String, String), usize> = Default::default();
    for claim in state
        .claims
        .iter()
        .filter(|c| !touched.contains_key(&*c.node))
    {
        *elsewhere.entry(workload_of(claim)).or_default() += 1;
    }
    // A training job's restart budget: what is left of it says whether it survives.
    let trains = state
        .claims
        .iter()
        .any(|c| touched.contains_key(&*c.node) && workload_of(c).0.starts_with("training/"));
    let mut budgets: std::collections::HashMap<(String, String), (u64, u64)> = Default::default();
    if trains {
        let jobs = crate::service::training::list_training_jobs(engine, cluster)
            .await
            .unwrap_or_default();
        for j in jobs {
            if let Some(b) = budget(&j) {
                budgets.insert((format!("training/{}", j.name), j.namespace), b);
            }
        }
    }
    let mut seen = BTreeSet::new();
    for claim in &state.claims {
        let Some(node) = touched.get(&*claim.node) else {
            continue;
        };
        let (workload, namespace) = workload_of(claim);
        if !seen.insert((workload.clone(), namespace.clone(), node.to_string())) {
            continue;
        }
        let others = elsewhere
            .get(&(workload.clone(), namespace.clone()))
            .copied()
            .unwrap_or(0);
        let budget = budgets.get(&(workload.clone(), namespace.clone())).copied();
        preview::affects(Affected {
            outcome: of_kind(&workload, others, budget, outcome),
            workload,
            namespace,
            node: node.to_string(),
        });
    }
    Ok(())
}

/// The nodes a change touches, by name, with the instance id each is known by.
fn touched<'s>(
    state: &'s crate::cloud::ClusterState,
    nodes: &NodesOf<'_>,
) -> std::collections::HashMap<&'s str, &'s str> {
    state
        .nodes
        .iter()
        .filter(|n| match nodes {
            NodesOf::Instance(id) => n.instance_id.as_deref() == Some(*id),
            NodesOf::Groups(groups) => {
                groups.is_empty()
                    || n.instance_group
                        .as_ref()
                        .is_some_and(|g| groups.iter().any(|x| x == g))
            }
        })
        .map(|n| (n.name.as_str(), n.instance_id.as_deref().unwrap_or(&n.name)))
        .collect()
}

/// A training job's restart budget, used and allowed (`restartCount` of `jobMaxRetryCount`),
/// when it has one.
fn budget(j: &crate::service::training::TrainingJobView) -> Option<(u64, u64)> {
    Some((j.restarts["count"].as_u64()?, j.restarts["limit"].as_u64()?))
}

/// A training job holding GPUs on nodes a change would patch.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobOnNodes {
    pub name: String,
    pub namespace: String,
    /// Its object (`HyperPodPyTorchJob` or `RayJob`), to stop it.
    pub object: crate::cloud::ObjectRef,
    /// Restarts left of its budget (`jobMaxRetryCount` less `restartCount`), when it has one.
    pub restarts_left: Option<u64>,
}

/// The training jobs running on the nodes of `groups` (every group when empty).
pub async fn training_jobs_on(
    engine: &Engine,
    cluster: &str,
    groups: &[String],
) -> ApiResult<Vec<JobOnNodes>> {
    let target = crate::service::cluster::records::kube_target(engine, cluster).await?;
    let state = engine.cloud().kube.cluster_state(&target).await?;
    let nodes = touched(&state, &NodesOf::Groups(groups));
    let running: BTreeSet<(String, String)> = state
        .claims
        .iter()
        .filter(|c| nodes.contains_key(&*c.node))
        .filter_map(|c| {
            let w = crate::service::costs::sample::workload_of(&c.labels);
            w.strip_prefix("training/")
                .map(|job| (job.to_string(), c.namespace.to_string()))
        })
        .collect();
    if running.is_empty() {
        return Ok(vec![]);
    }
    let jobs = crate::service::training::list_training_jobs(engine, cluster).await?;
    Ok(jobs
        .into_iter()
        .filter(|j| running.contains(&(j.name.clone(), j.namespace.clone())))
        .filter_map(|j| {
            let left = budget(&j).map(|(used, limit)| limit.saturating_sub(used));
            Some(JobOnNodes {
                object: crate::service::training::job_object(&j.kind, &j.namespace, &j.name)?,
                name: j.name,
                namespace: j.namespace,
                restarts_left: left,
            })
        })
        .collect())
}

/// What happens to a workload of this kind (`training/…`, `space/…`, a server) when its node
/// goes, given how many of its pods run on nodes the change leaves alone and, for a training
/// job, the restarts it has used of its budget (`restartCount` of `jobMaxRetryCount`).
fn of_kind(workload: &str, others: usize, budget: Option<(u64, u64)>, outcome: &str) -> String {
    let kind = workload.split('/').next().unwrap_or_default();
    match (kind, budget) {
        ("training", Some((used, limit))) if used >= limit => format!(
            "{outcome}; it has no restart left ({used} of {limit} used): the interruption fails it — let it finish first, or stop it"
        ),
        ("training", Some((used, limit))) => format!(
            "{outcome}; HyperPod resumes it from its last checkpoint: {} of {limit} restarts left",
            limit - used
        ),
        ("training", None) => format!(
            "{outcome}; HyperPod resumes the job from its last checkpoint while its restart budget lasts"
        ),
        ("space", _) => format!("{outcome}; the space stops and starts again, its home volume kept"),
        ("deployment" | "pool" | "ray", _) if others > 0 => {
            format!("{outcome}; it keeps serving from {others} pod(s) on other nodes")
        }
        ("deployment" | "pool" | "ray", _) => format!(
            "{outcome}; it has no pod on another node: it is unavailable until this one is back"
        ),
        _ => outcome.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_happens_depends_on_the_kind_and_on_the_other_pods() {
        let says = |w: &str, others: usize| super::of_kind(w, others, None, "interrupted");
        assert!(says("training/sft", 0).contains("last checkpoint"));
        let job = |used, limit| super::of_kind("training/sft", 0, Some((used, limit)), "x");
        assert!(job(1, 3).contains("2 of 3 restarts left"), "{}", job(1, 3));
        assert!(
            job(3, 3).contains("no restart left (3 of 3 used)"),
            "{}",
            job(3, 3)
        );
        assert!(says("space/lab", 0).contains("home volume kept"));
        assert!(says("deployment/chat", 1).contains("keeps serving from 1 pod(s)"));
        assert!(says("deployment/chat", 0).contains("unavailable until"));
        assert_eq!(says("job/x", 0), "interrupted");
    }
}
