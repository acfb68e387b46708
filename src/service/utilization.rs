//! Are the GPUs busy: the DCGM exporter's `DCGM_FI_DEV_GPU_UTIL` series (what the HyperPod
//! observability add-on writes to Amazon Managed Service for Prometheus) for one cluster's
//! nodes, averaged per node, per team (the pods' namespace) or per pod — and, among a job's
//! pods, the ranks that lag the others (stragglers).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::cloud::{RangeQuery, Series, Workspace};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::shared::labels::TEAM_NAMESPACE_PREFIX;

/// The exporter's GPU utilization gauge, in percent.
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// A rank whose mean is below this share of its job's median is a straggler.
const STRAGGLER_SHARE: f64 = 0.8;
/// ...when the job is busy enough for the comparison to mean anything (percent).
const BUSY_ENOUGH: f64 = 20.0;

/// What utilization is averaged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UtilBy {
    /// The node (`Hostname`).
    Node,
    /// The team whose namespace the GPU's pod runs in; GPUs no pod holds are left out.
    Team,
    /// The pod holding the GPU; GPUs no pod holds are left out.
    Pod,
}

/// One line of a chart: a key's GPUs averaged at each moment.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UtilSeries {
    pub key: String,
    /// GPUs averaged.
    pub gpus: u32,
    /// Percent, over the whole window.
    pub mean: f64,
    /// `[unix seconds, percent]`.
    #[schema(value_type = Vec<Vec<f64>>)]
    pub points: Vec<(i64, f64)>,
}

/// A pod whose GPUs are markedly less busy than its job's others.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Straggler {
    pub key: String,
    pub mean: f64,
    /// The median of the job's pods' means.
    pub median: f64,
}

/// GPU utilization of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Utilization {
    pub cluster: String,
    pub by: UtilBy,
    /// Whether a workspace with the exporter's series could be read.
    pub available: bool,
    /// How to make it available, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub how_to_enable: Option<String>,
    /// The workspace read (`…/workspaces/ws-…`); in the sandbox, a simulated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub start: i64,
    pub end: i64,
    pub step: u32,
    pub series: Vec<UtilSeries>,
    /// With `by=pod`: the pods that lag the others.
    pub stragglers: Vec<Straggler>,
    /// AWS's observability dashboards for this cluster in the account's Grafana workspace
    /// (`INSTANTSTART_GRAFANA_WORKSPACE`), the one for this view first; empty without one.
    pub dashboards: Vec<crate::service::features::dashboards::DashboardLink>,
}

/// A validated query.
#[derive(Debug, Clone)]
pub struct UtilQuery {
    pub cluster: String,
    pub by: UtilBy,
    /// The window, 5–1440 (default 60).
    pub minutes: u32,
    /// Only the pods whose name starts with `<workload>-` (a job's ranks, a deployment's
    /// replicas).
    pub workload: Option<String>,
}

/// How to get the series, said wherever they are missing.
const HOW_TO_ENABLE: &str = "GPU utilization comes from the HyperPod observability add-on (amazon-sagemaker-hyperpod-observability), whose DCGM exporter writes DCGM_FI_DEV_GPU_UTIL to an Amazon Managed Service for Prometheus workspace: turn on the cluster's `observability` feature (PATCH /api/clusters/<name>/features {\"observability\": true}), which makes the workspace and installs the add-on, or point INSTANTSTART_PROMETHEUS_URL at the workspace an add-on installed elsewhere writes to (https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…)";

/// A workspace's query base from its `prometheusEndpoint` and ARN (its region).
fn of_endpoint(endpoint: &str, arn: &str) -> Option<Workspace> {
    let region = arn.split(':').nth(3).filter(|r| !r.is_empty())?;
    Some(Workspace {
        url: endpoint.trim_end_matches('/').to_string(),
        region: region.to_string(),
    })
}

/// A configured Amazon Managed Service for Prometheus workspace URL (an in-cluster
/// Prometheus is not where the add-on writes).
fn configured(prometheus_url: Option<&str>) -> Option<Workspace> {
    let u = prometheus_url?;
    let host = reqwest::Url::parse(u).ok()?.host_str()?.to_string();
    let region = host
        .strip_prefix("aps-workspaces.")?
        .strip_suffix(".amazonaws.com")?
        .to_string();
    Some(Workspace {
        url: u.trim_end_matches('/').to_string(),
        region,
    })
}

/// Where the exporter's series are: the workspace the cluster's observability feature made
/// (once ACTIVE), else the configured one (which KEDA reads too).
async fn workspace(
    engine: &Engine,
    cluster: &str,
    prometheus_url: Option<&str>,
) -> ApiResult<Option<Workspace>> {
    let alias = crate::service::steps::features::observability::workspace_alias(cluster);
    let own = engine.cloud().metrics.find_workspace(&alias).await?;
    let own = own
        .filter(|w| w.status == "ACTIVE")
        .and_then(|w| of_endpoint(w.prometheus_endpoint.as_deref()?, &w.arn));
    Ok(own.or_else(|| configured(prometheus_url)))
}

/// The key a GPU's series counts under, or `None` when the split leaves it out.
fn key_of(by: UtilBy, labels: &BTreeMap<String, String>) -> Option<String> {
    match by {
        UtilBy::Node => labels.get("Hostname").cloned(),
        UtilBy::Team => {
            let ns = labels.get("namespace").filter(|n| !n.is_empty())?;
            Some(
                ns.strip_prefix(TEAM_NAMESPACE_PREFIX)
                    .map_or_else(|| "(no team)".to_string(), str::to_string),
            )
        }
        UtilBy::Pod => labels.get("pod").filter(|p| !p.is_empty()).cloned(),
    }
}

/// Per-GPU series averaged per key and moment (pure: the tests feed it).
pub fn aggregate(by: UtilBy, series: &[Series]) -> Vec<UtilSeries> {
    // Per key: its GPUs, and per moment the sum and count of their values.
    type Moments = BTreeMap<i64, (f64, u32)>;
    let mut keys: BTreeMap<String, (u32, Moments)> = BTreeMap::new();
    for s in series {
        let Some(key) = key_of(by, &s.labels) else {
            continue;
        };
        let (gpus, at) = keys.entry(key).or_default();
        *gpus += 1;
        for (t, v) in &s.points {
            let e = at.entry(*t).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    keys.into_iter()
        .map(|(key, (gpus, at))| {
            let points: Vec<(i64, f64)> = at
                .into_iter()
                .map(|(t, (sum, n))| (t, sum / f64::from(n)))
                .collect();
            let mean = if points.is_empty() {
                0.0
            } else {
                points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64
            };
            UtilSeries {
                key,
                gpus,
                mean,
                points,
            }
        })
        .collect()
}

/// The pods of a job whose mean is below [`STRAGGLER_SHARE`] of the job's median, when the
/// job has two or more and its median is at least [`BUSY_ENOUGH`].
pub fn stragglers(pods: &[UtilSeries]) -> Vec<Straggler> {
    if pods.len() < 2 {
        return vec![];
    }
    let mut means: Vec<f64> = pods.iter().map(|p| p.mean).collect();
    means.sort_by(f64::total_cmp);
    let mid = means.len() / 2;
    let median = if means.len().is_multiple_of(2) {
        (means[mid - 1] + means[mid]) / 2.0
    } else {
        means[mid]
    };
    if median < BUSY_ENOUGH {
        return vec![];
    }
    pods.iter()
        .filter(|p| p.mean < STRAGGLER_SHARE * median)
        .map(|p| Straggler {
            key: p.key.clone(),
            mean: p.mean,
            median,
        })
        .collect()
}

/// The selector of the cluster's GPUs: the HyperPod cluster id the add-on's collector labels
/// every series with (`cluster_id`, what AWS's own dashboards select on:
/// `aws/sagemaker-hyperpod-cluster-setup` `…/dashboards/templates/cluster.json`), not a regex
/// of every node name in the URL; and a workload's pods by prefix.
fn selector(cluster_id: &str, workload: Option<&str>) -> String {
    let mut matchers = vec![format!("cluster_id=\"{cluster_id}\"")];
    if let Some(w) = workload {
        matchers.push(format!("pod=~\"{w}-.*\""));
    }
    format!("{GPU_UTIL}{{{}}}", matchers.join(","))
}

/// Where the series are, and where the dashboards are (the server's settings).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sources<'a> {
    /// `INSTANTSTART_PROMETHEUS_URL`.
    pub prometheus_url: Option<&'a str>,
    /// `INSTANTSTART_GRAFANA_WORKSPACE`.
    pub grafana_workspace: Option<&'a str>,
}

/// The cluster's GPU utilization over the last `minutes`.
pub async fn utilization(
    engine: &Engine,
    sources: Sources<'_>,
    q: &UtilQuery,
) -> ApiResult<Utilization> {
    if !(5..=1440).contains(&q.minutes) {
        return Err(ApiError::validation_hint(
            "minutes",
            format!("{} is not between 5 and 1440", q.minutes),
            serde_json::json!(60),
        ));
    }
    if let Some(w) = &q.workload {
        crate::service::cluster::validate::dns_label("workload", "a workload name", w)?;
    }
    let target = kube_target(engine, &q.cluster).await?;
    let end = time::OffsetDateTime::now_utc().unix_timestamp();
    let start = end - i64::from(q.minutes) * 60;
    // About 60 points a window, never under the exporter's 30 s.
    let step = (q.minutes * 60 / 60).max(30);
    let mut out = Utilization {
        cluster: q.cluster.clone(),
        by: q.by,
        available: false,
        how_to_enable: None,
        workspace: None,
        start,
        end,
        step,
        series: vec![],
        stragglers: vec![],
        dashboards: vec![],
    };
    let cloud = engine.cloud();
    if let Some(g) =
        crate::service::features::dashboards::active_workspace(cloud, sources.grafana_workspace)
            .await
    {
        let hyperpod =
            crate::service::cluster::records::hyperpod_name_of(engine, &q.cluster).await?;
        let first = match q.by {
            UtilBy::Node => "cluster",
            UtilBy::Team => "tasks",
            UtilBy::Pod => "training",
        };
        out.dashboards = crate::service::features::dashboards::links(
            &g,
            &hyperpod,
            first,
            q.workload.as_deref(),
        );
    }
    let Some(ws) = workspace(engine, &q.cluster, sources.prometheus_url).await? else {
        out.how_to_enable = Some(HOW_TO_ENABLE.to_string());
        return Ok(out);
    };
    let gpus = cloud
        .kube
        .cluster_state(&target)
        .await?
        .nodes
        .iter()
        .any(|n| n.gpus.total > 0);
    out.workspace = Some(ws.url.clone());
    out.available = true;
    let record = crate::service::live_cluster(engine, &q.cluster).await?;
    let cluster_id = crate::service::shared::resources::ClusterResources::of(&record.resources)
        .hyperpod_cluster_arn
        .and_then(|a| a.rsplit('/').next().map(str::to_string));
    let Some(cluster_id) = cluster_id.filter(|_| gpus) else {
        return Ok(out);
    };
    let series = cloud
        .metrics
        .query_range(
            &ws,
            &RangeQuery {
                query: selector(&cluster_id, q.workload.as_deref()),
                start,
                end,
                step,
            },
        )
        .await?;
    out.series = aggregate(q.by, &series);
    if q.by == UtilBy::Pod && q.workload.is_some() {
        out.stragglers = stragglers(&out.series);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(host: &str, ns: Option<&str>, pod: Option<&str>, values: &[f64]) -> Series {
        let mut labels = BTreeMap::from([("Hostname".to_string(), host.to_string())]);
        if let (Some(ns), Some(pod)) = (ns, pod) {
            labels.insert("namespace".into(), ns.into());
            labels.insert("pod".into(), pod.into());
        }
        Series {
            labels,
            points: values
                .iter()
                .enumerate()
                .map(|(i, v)| (i as i64 * 60, *v))
                .collect(),
        }
    }

    #[test]
    fn gpus_are_averaged_per_node_team_and_pod_at_each_moment() {
        let series = vec![
            gpu("n1", Some("hyperpod-ns-a"), Some("j-0"), &[80.0, 90.0]),
            gpu("n1", None, None, &[0.0, 0.0]),
            gpu("n2", Some("default"), Some("d-0"), &[60.0, 60.0]),
        ];
        let by_node = aggregate(UtilBy::Node, &series);
        assert_eq!(by_node[0].key, "n1");
        assert_eq!(
            (by_node[0].gpus, by_node[0].points.clone()),
            (2, vec![(0, 40.0), (60, 45.0)])
        );
        assert!((by_node[0].mean - 42.5).abs() < 1e-9);
        let by_team = aggregate(UtilBy::Team, &series);
        let keys: Vec<&str> = by_team.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, vec!["(no team)", "a"], "idle GPUs belong to no team");
        assert_eq!(aggregate(UtilBy::Pod, &series).len(), 2);
    }

    #[test]
    fn a_rank_well_below_its_jobs_median_is_a_straggler() {
        let pod = |key: &str, mean: f64| UtilSeries {
            key: key.into(),
            gpus: 8,
            mean,
            points: vec![],
        };
        let s = stragglers(&[
            pod("j-0", 92.0),
            pod("j-1", 90.0),
            pod("j-2", 55.0),
            pod("j-3", 91.0),
        ]);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].key.as_str(), s[0].median), ("j-2", 90.5));
        // Even ranks, an idle job, a single rank: nothing to flag.
        assert!(stragglers(&[pod("j-0", 90.0), pod("j-1", 88.0)]).is_empty());
        assert!(stragglers(&[pod("j-0", 5.0), pod("j-1", 1.0)]).is_empty());
        assert!(stragglers(&[pod("j-0", 90.0)]).is_empty());
    }

    #[test]
    fn a_workspace_is_read_from_its_endpoint_or_the_configured_url() {
        // An in-cluster Prometheus is not where the add-on writes.
        assert!(configured(Some("http://prometheus.monitoring.svc:9090")).is_none());
        assert!(configured(None).is_none());
        let w = configured(Some(
            "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1/",
        ))
        .unwrap();
        assert_eq!(
            (w.region.as_str(), w.url.as_str()),
            (
                "eu-west-1",
                "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1"
            )
        );
        let w = of_endpoint(
            "https://aps-workspaces.us-east-2.amazonaws.com/workspaces/ws-2/",
            "arn:aws:aps:us-east-2:123456789012:workspace/ws-2",
        )
        .unwrap();
        assert_eq!(w.region, "us-east-2");
        assert!(w.url.ends_with("/workspaces/ws-2"));
        assert!(
            HOW_TO_ENABLE.contains("observability")
                && HOW_TO_ENABLE.contains("INSTANTSTART_PROMETHEUS_URL")
        );
    }

    #[test]
    fn the_selector_names_the_hyperpod_cluster_and_the_workloads_pods() {
        assert_eq!(
            selector("abcdefghijkl", Some("job")),
            r#"DCGM_FI_DEV_GPU_UTIL{cluster_id="abcdefghijkl",pod=~"job-.*"}"#
        );
    }
}
