//! The simulated Amazon Managed Service for Prometheus: what the observability add-on's DCGM
//! exporter would have written for the account's clusters — `DCGM_FI_DEV_GPU_UTIL` per GPU,
//! labelled as the exporter labels it (`Hostname`, `gpu`, `UUID`, `modelName`, and for a GPU a
//! pod holds, its `namespace`, `pod` and `container`), following what is scheduled now: a held
//! GPU busy (a deterministic 70–95 %), an idle one at 0. And the account's Grafana workspace.

use async_trait::async_trait;

use super::workload::fnv1a;
use super::{new_id, Life, Sandbox, ACCOUNT, REGION};
use cloud::*;

/// The DCGM exporter's GPU utilization gauge (percent).
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";

/// A label matcher of the simulated PromQL: `=` compares; `=~` takes alternatives, each a
/// literal or a prefix ending in `.*`.
fn matches(value: &str, regex: bool, pattern: &str) -> bool {
    if !regex {
        return value == pattern;
    }
    pattern.split('|').any(|alt| match alt.strip_suffix(".*") {
        Some(prefix) => value.starts_with(prefix),
        None => value == alt,
    })
}

/// The utilization of one GPU at one moment: busy when held, with a wiggle that is a pure
/// function of the GPU and the time, so two reads agree.
fn utilization(key: &str, held: bool, t: i64) -> f64 {
    if !held {
        return 0.0;
    }
    let h = fnv1a(&format!("{key}@{t}"));
    70.0 + (h % 2500) as f64 / 100.0
}

/// The account's one Amazon Managed Grafana workspace in the sandbox (AMG needs IAM Identity
/// Center, so a workspace is something an account has, not something the control plane makes).
pub const GRAFANA_WORKSPACE: &str = "g-5a9db1e0c2";

/// The pod holding GPU `k` of a claim: a training job's rank `<job>-pods-<rank>` (HyperPod's
/// naming; a rank per node, in the order the ranks were placed), a replica `<workload>-sbx-<k>`.
fn pod_name(claims: &[GpuClaim], c: &GpuClaim, k: u32) -> String {
    if let Some(job) = c.labels.get("HPJob") {
        let rank = claims
            .iter()
            .filter(|o| o.labels.get("HPJob") == Some(job))
            .position(|o| std::ptr::eq(o, c))
            .unwrap_or(0);
        return format!("{job}-pods-{rank}");
    }
    let workload = [
        "ray.io/cluster",
        "app.kubernetes.io/name",
        "app",
        "instantstart.io/pool",
    ]
    .iter()
    .find_map(|l| c.labels.get(l))
    .map_or("pod", String::as_str);
    format!("{workload}-sbx-{k}")
}

/// Simulated seconds AMP takes to make a workspace ACTIVE.
const WORKSPACE_CREATE: f64 = 60.0;

impl Sandbox {
    fn amp_workspace(&self, r: &super::Res) -> AmpWorkspace {
        let id = r.id.clone();
        let status = match self.life(r, WORKSPACE_CREATE, 1.0) {
            Life::Ready => "ACTIVE",
            _ => "CREATING",
        };
        AmpWorkspace {
            arn: format!("arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{id}"),
            alias: r.data["alias"].as_str().map(str::to_string),
            status: status.into(),
            prometheus_endpoint: Some(format!(
                "https://aps-workspaces.{REGION}.amazonaws.com/workspaces/{id}/"
            )),
            id,
        }
    }
}

#[async_trait]
impl Metrics for Sandbox {
    async fn find_workspace(&self, alias: &str) -> CloudResult<Option<AmpWorkspace>> {
        self.gate("aps:ListWorkspaces", false).await?;
        Ok(self
            .by_name("amp-workspace", alias)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| self.amp_workspace(&r)))
    }

    async fn create_workspace(&self, alias: &str, tags: &Tags) -> CloudResult<AmpWorkspace> {
        let api = "aps:CreateWorkspace";
        self.gate(api, true).await?;
        // AMP's ids: `ws-` and a UUID.
        let id = new_id("ws");
        let data = serde_json::json!({"alias": alias, "tags": tags});
        self.create(api, "amp-workspace", &id, Some(alias), &data)
            .await?;
        let r = self
            .by_name("amp-workspace", alias)
            .await?
            .ok_or_else(|| CloudError::new("aps", "CreateWorkspace", "InternalError", "lost"))?;
        Ok(self.amp_workspace(&r))
    }

    async fn describe_grafana(&self, id: &str) -> CloudResult<Option<GrafanaWorkspace>> {
        self.gate("grafana:DescribeWorkspace", false).await?;
        Ok((id == GRAFANA_WORKSPACE).then(|| GrafanaWorkspace {
            id: id.to_string(),
            name: Some("sandbox-dashboards".into()),
            status: "ACTIVE".into(),
            endpoint: format!("{id}.grafana-workspace.{REGION}.amazonaws.com"),
        }))
    }

    async fn query_range(&self, _w: &Workspace, q: &RangeQuery) -> CloudResult<Vec<Series>> {
        self.gate("aps:QueryMetrics", false).await?;
        let Some((name, matchers)) = selector(&q.query) else {
            return Err(CloudError::new(
                "aps",
                "QueryMetrics",
                "bad_data",
                "the simulated Prometheus answers plain selectors (metric{label=\"v\", label=~\"a|b.*\"}) only",
            ));
        };
        if name != GPU_UTIL || q.step == 0 || q.end < q.start {
            return Ok(vec![]);
        }
        let step = i64::from(q.step);
        let times: Vec<i64> = (0..=((q.end - q.start) / step).min(11_000))
            .map(|i| q.start + i * step)
            .collect();
        let mut out = Vec::new();
        for cluster in self.list("eks-cluster").await? {
            if cluster.deleted_ms.is_some() {
                continue;
            }
            let Some(name) = cluster.data["name"].as_str().map(str::to_string) else {
                continue;
            };
            let target = KubeTarget {
                cluster: name,
                endpoint: String::new(),
                certificate_authority: String::new(),
            };
            let schedule = self.schedule(&target).await?;
            // The HyperPod cluster id the add-on's collector labels every series with
            // (`cluster_id`, what AWS's dashboards select on).
            let eks = super::eks_control::eks_arn(&target.cluster);
            let cluster_id = self
                .list("hyperpod-cluster")
                .await?
                .into_iter()
                .find(|r| r.data["eksClusterArn"] == eks.as_str())
                .map(|r| {
                    super::hyperpod::hyperpod_arn(&r.id)
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_string()
                })
                .unwrap_or_default();
            for node in &schedule.nodes {
                // The node's GPUs in order: each claim's, then the idle ones.
                let mut gpus: Vec<Option<(&GpuClaim, String)>> = Vec::new();
                for c in schedule.claims.iter().filter(|c| *c.node == *node.name) {
                    gpus.extend((0..c.gpus).map(|k| Some((c, pod_name(&schedule.claims, c, k)))));
                }
                while (gpus.len() as u32) < node.gpus.allocatable {
                    gpus.push(None);
                }
                for (i, held) in gpus.iter().enumerate() {
                    let mut labels = std::collections::BTreeMap::from([
                        ("__name__".to_string(), GPU_UTIL.to_string()),
                        ("Hostname".to_string(), node.name.clone()),
                        ("cluster_id".to_string(), cluster_id.clone()),
                        ("gpu".to_string(), i.to_string()),
                        ("device".to_string(), format!("nvidia{i}")),
                        (
                            "UUID".to_string(),
                            format!("GPU-{:016x}", fnv1a(&format!("{}/{i}", node.name))),
                        ),
                        ("modelName".to_string(), "NVIDIA A10G".to_string()),
                    ]);
                    if let Some((c, pod)) = held {
                        labels.insert("namespace".into(), c.namespace.to_string());
                        labels.insert("pod".into(), pod.clone());
                        labels.insert("container".into(), "main".into());
                    }
                    if !matchers.iter().all(|(l, regex, p)| {
                        matches(labels.get(l).map_or("", String::as_str), *regex, p)
                    }) {
                        continue;
                    }
                    let key = format!("{}/{i}", node.name);
                    let points = times
                        .iter()
                        .map(|t| (*t, utilization(&key, held.is_some(), *t)))
                        .collect();
                    out.push(Series { labels, points });
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_matchers_compare_and_take_alternatives_and_prefixes() {
        assert!(matches("a", false, "a") && !matches("ab", false, "a"));
        assert!(matches("b", true, "a|b") && !matches("c", true, "a|b"));
        assert!(matches("chat-sbx-0", true, "chat-.*") && !matches("other", true, "chat-.*"));
    }

    #[test]
    fn a_held_gpu_is_busy_and_an_idle_one_is_not_and_reads_agree() {
        let busy = utilization("n/0", true, 60);
        assert!((70.0..95.0).contains(&busy));
        assert_eq!(busy, utilization("n/0", true, 60));
        assert_eq!(utilization("n/1", false, 60), 0.0);
    }
}
