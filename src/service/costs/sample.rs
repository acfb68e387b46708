//! The cost sampler: what each cluster's nodes are and who requests their GPUs, written to the
//! store as it happens — on a timer, and before every cost report so a report is never older
//! than its request.

use std::collections::HashMap;
use std::time::Duration;

use crate::cloud::{GpuClaim, Labels};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::shared::labels::WORKLOAD_LABEL;
use crate::service::shared::resources::ClusterResources;
use crate::service::steps::nodes::all_nodes;
use crate::service::steps::pools::POOL_LABEL;
use crate::service::training::JOB_LABEL;
use crate::store::{HeldGpus, SeenNode};

/// How often every cluster is sampled.
pub const EVERY: Duration = Duration::from_secs(60);
/// The most one sample credits: a server that was down does not credit its absence to whoever
/// holds the GPUs when it comes back (that time is reported as not observed).
const MAX_GAP_MS: i64 = 2 * 60_000;
/// The workload of idle GPUs (with an empty namespace).
pub const IDLE: &str = "idle";

/// The workload a holder's pods are of, by the labels their controller (or this control plane)
/// put on them: `training/<job>`, `pool/<pool>`, `space/<space>`, `ray/<cluster>`, `job/<job>`,
/// `deployment/<name>`, or `unlabelled`.
pub fn workload_of(labels: &Labels) -> String {
    let get = |k: &str| labels.get(k).map(String::as_str);
    if let Some(job) = get("HPJob").or(get(JOB_LABEL)) {
        return format!("training/{job}");
    }
    if let Some(pool) = get(POOL_LABEL) {
        return format!("pool/{pool}");
    }
    let app = get("app.kubernetes.io/name").or(get("app"));
    if let (Some("space"), Some(name)) = (get(WORKLOAD_LABEL), app) {
        return format!("space/{name}");
    }
    if let Some(cluster) = get("ray.io/cluster") {
        return format!("ray/{cluster}");
    }
    if let Some(job) = get("job-name") {
        return format!("job/{job}");
    }
    match app {
        Some(name) => format!("deployment/{name}"),
        None => "unlabelled".into(),
    }
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// The UTC day (`YYYY-MM-DD`) of a moment.
pub fn day_of(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .map(|t| t.date().to_string())
        .unwrap_or_default()
}

fn launched_ms(launch_time: &str, now_ms: i64) -> i64 {
    time::OffsetDateTime::parse(launch_time, &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(now_ms)
}

/// What each node's GPUs are held by now: its claims, and the rest of its allocatable GPUs as
/// idle. Nodes without an instance id HyperPod lists (not HyperPod's) are left out.
pub fn held_now(
    state: &crate::cloud::ClusterState,
    listed: &HashMap<String, SeenNode>,
) -> Vec<HeldGpus> {
    let mut by_node: HashMap<&str, Vec<&GpuClaim>> = HashMap::new();
    for c in &state.claims {
        by_node.entry(&*c.node).or_default().push(c);
    }
    let mut out = Vec::new();
    for node in &state.nodes {
        let Some(id) = node
            .instance_id
            .as_deref()
            .filter(|i| listed.contains_key(*i))
        else {
            continue;
        };
        let claims = by_node.remove(node.name.as_str()).unwrap_or_default();
        let mut requested = 0u32;
        for c in claims {
            requested += c.gpus;
            out.push(HeldGpus {
                instance_id: id.to_string(),
                namespace: c.namespace.to_string(),
                workload: workload_of(&c.labels),
                gpus: f64::from(c.gpus),
            });
        }
        let idle = node.gpus.allocatable.saturating_sub(requested);
        if idle > 0 {
            out.push(HeldGpus {
                instance_id: id.to_string(),
                namespace: String::new(),
                workload: IDLE.into(),
                gpus: f64::from(idle),
            });
        }
    }
    out
}

/// Samples one cluster (a record already read): its HyperPod nodes' lifetimes, then (once its
/// EKS cluster is known) who holds their GPUs. A cluster without a HyperPod cluster yet, or a
/// deleted one, has nothing to sample.
pub async fn sample_record(engine: &Engine, record: &crate::store::ClusterRecord) -> ApiResult<()> {
    if record.status == crate::store::Lifecycle::Deleted {
        return Ok(());
    }
    let cluster = record.name.as_str();
    let r = ClusterResources::of(&record.resources);
    let Some(hyperpod) = r.hyperpod_cluster_name.clone() else {
        return Ok(());
    };
    let now = now_ms();
    let nodes = all_nodes(engine.cloud(), &hyperpod).await?;
    let listed: HashMap<String, SeenNode> = nodes
        .into_iter()
        .map(|n| {
            let seen = SeenNode {
                launched_ms: launched_ms(&n.launch_time, now),
                instance_id: n.instance_id,
                instance_group: n.instance_group,
                instance_type: n.instance_type,
            };
            (seen.instance_id.clone(), seen)
        })
        .collect();
    let seen: Vec<SeenNode> = listed.values().cloned().collect();
    engine.store().record_nodes(cluster, now, &seen).await?;
    let Some(target) = crate::service::target_of(record) else {
        return Ok(());
    };
    let state = engine.cloud().kube.cluster_state(&target).await?;
    let held = held_now(&state, &listed);
    engine
        .store()
        .add_gpu_sample(cluster, now, MAX_GAP_MS, &day_of(now), &held)
        .await?;
    Ok(())
}

/// Samples every cluster every [`EVERY`], for as long as the process runs. A cluster that
/// cannot be read this time is tried again next time (its gap is then reported as not
/// observed).
pub fn spawn(engine: Engine) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let clusters = match engine.store().list_clusters().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "cost sampler: listing clusters");
                    continue;
                }
            };
            for c in clusters
                .iter()
                .filter(|c| c.status != crate::store::Lifecycle::Deleted)
            {
                if let Err(e) = sample_record(&engine, c).await {
                    tracing::debug!(cluster = %c.name, error = ?e, "cost sampler");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_pods_workload_is_named_by_its_most_specific_label() {
        assert_eq!(
            workload_of(&labels(&[("HPJob", "llama"), ("app", "x")])),
            "training/llama"
        );
        assert_eq!(
            workload_of(&labels(&[(JOB_LABEL, "r1"), ("ray.io/cluster", "r1-abc")])),
            "training/r1"
        );
        assert_eq!(
            workload_of(&labels(&[
                (WORKLOAD_LABEL, "space"),
                ("app.kubernetes.io/name", "nb")
            ])),
            "space/nb"
        );
        assert_eq!(
            workload_of(&labels(&[("app.kubernetes.io/name", "chat")])),
            "deployment/chat"
        );
        assert_eq!(workload_of(&labels(&[("job-name", "dl")])), "job/dl");
        assert_eq!(workload_of(&labels(&[])), "unlabelled");
    }

    #[test]
    fn days_are_utc() {
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(86_400_000 - 1), "1970-01-01");
        assert_eq!(day_of(86_400_000), "1970-01-02");
    }
}
