//! How much is each team's: its ClusterQueue as Kueue keeps it (`kueue.x-k8s.io/v1beta1`,
//! `hyperpod-ns-<team>-clusterqueue`) — per flavor, the GPUs of its quota, in use, borrowed from
//! the other teams and lent to them — and how many of its workloads are admitted and pending.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::cloud::{team_cluster_queue, KubeTarget, ListQuery};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

/// The accelerator Kueue counts a team's share in.
pub const GPU: &str = "nvidia.com/gpu";

/// One flavor (instance type) of a team's ClusterQueue, in GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// Kueue's ResourceFlavor (one per instance type).
    pub flavor: String,
    /// The team's quota (`nominalQuota`).
    pub nominal: f64,
    /// What its admitted workloads use (`flavorsUsage.total`), borrowed GPUs included.
    pub in_use: f64,
    /// Of that, what is borrowed from the other teams (`flavorsUsage.borrowed`).
    pub borrowed: f64,
    /// Of its idle quota, what the other teams borrow now: the cohort's borrowing shared among
    /// the lenders by their idle GPUs (Kueue counts borrowing, not who lent it).
    pub lent: f64,
}

/// A team's share as Kueue sees it now.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamUsage {
    pub admitted_workloads: u64,
    pub pending_workloads: u64,
    pub flavors: Vec<FlavorUsage>,
}

/// A Kubernetes quantity as a number (`4`, `1.5`, `500m`); 0 for what is not one.
fn quantity(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => match s.strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().map(|m| m / 1000.0).unwrap_or(0.0),
            None => s.parse().unwrap_or(0.0),
        },
        _ => 0.0,
    }
}

/// GPUs per flavor under `pointer` (`spec.resourceGroups[].flavors[].resources[]` or
/// `status.flavorsUsage[].resources[]`), taking `field` of each GPU resource.
fn per_flavor(flavors: Option<&Value>, field: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for f in flavors.and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = f["name"].as_str() else {
            continue;
        };
        for r in f["resources"].as_array().into_iter().flatten() {
            if r["name"] == GPU {
                *out.entry(name.to_string()).or_insert(0.0) += quantity(&r[field]);
            }
        }
    }
    out
}

/// Every team's usage, from the ClusterQueues of the teams named; none where Kueue is absent.
pub async fn usage(
    engine: &Engine,
    target: &KubeTarget,
    teams: &[String],
) -> ApiResult<BTreeMap<String, TeamUsage>> {
    let queues = match engine
        .cloud()
        .kube
        .list(
            target,
            &ListQuery::of("kueue.x-k8s.io/v1beta1", "ClusterQueue"),
        )
        .await
    {
        Ok(items) => items,
        Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => Vec::new(),
        Err(e) => return Err(ApiError::Cloud(Box::new(e))),
    };
    Ok(of_queues(&queues, teams))
}

/// The teams' usage from their ClusterQueues (pure, for the tests).
pub fn of_queues(queues: &[Value], teams: &[String]) -> BTreeMap<String, TeamUsage> {
    struct Row {
        team: String,
        admitted: u64,
        pending: u64,
        nominal: BTreeMap<String, f64>,
        total: BTreeMap<String, f64>,
        borrowed: BTreeMap<String, f64>,
    }
    let rows: Vec<Row> = teams
        .iter()
        .filter_map(|team| {
            let name = team_cluster_queue(team);
            let q = queues
                .iter()
                .find(|q| q.pointer("/metadata/name").and_then(Value::as_str) == Some(&name))?;
            let mut nominal = BTreeMap::new();
            for g in q
                .pointer("/spec/resourceGroups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for (f, n) in per_flavor(g.get("flavors"), "nominalQuota") {
                    *nominal.entry(f).or_insert(0.0) += n;
                }
            }
            let usage = q.pointer("/status/flavorsUsage");
            let count = |k: &str| {
                q.pointer(&format!("/status/{k}"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            };
            Some(Row {
                team: team.clone(),
                admitted: count("admittedWorkloads"),
                pending: count("pendingWorkloads"),
                total: per_flavor(usage, "total"),
                borrowed: per_flavor(usage, "borrowed"),
                nominal,
            })
        })
        .collect();
    let get = |m: &BTreeMap<String, f64>, f: &str| m.get(f).copied().unwrap_or(0.0);
    // Idle quota per team and flavor: nominal minus what it uses of its own.
    let idle =
        |r: &Row, f: &str| (get(&r.nominal, f) - (get(&r.total, f) - get(&r.borrowed, f))).max(0.0);
    rows.iter()
        .map(|r| {
            let mut flavors: Vec<String> =
                r.nominal.keys().chain(r.total.keys()).cloned().collect();
            flavors.sort();
            flavors.dedup();
            let flavors = flavors
                .into_iter()
                .map(|f| {
                    let others = rows.iter().filter(|o| o.team != r.team);
                    let borrowed_by_others: f64 =
                        others.clone().map(|o| get(&o.borrowed, &f)).sum();
                    let idle_all: f64 = rows.iter().map(|o| idle(o, &f)).sum();
                    let mine = idle(r, &f);
                    let lent = if idle_all > 0.0 {
                        (borrowed_by_others * mine / idle_all).min(mine)
                    } else {
                        0.0
                    };
                    FlavorUsage {
                        nominal: get(&r.nominal, &f),
                        in_use: get(&r.total, &f),
                        borrowed: get(&r.borrowed, &f),
                        lent,
                        flavor: f,
                    }
                })
                .collect();
            (
                r.team.clone(),
                TeamUsage {
                    admitted_workloads: r.admitted,
                    pending_workloads: r.pending,
                    flavors,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(team: &str, nominal: &str, total: &str, borrowed: &str) -> Value {
        json!({"metadata": {"name": format!("hyperpod-ns-{team}-clusterqueue")},
               "spec": {"cohort": "shared", "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"],
                   "flavors": [{"name": "ml.g5.8xlarge", "resources": [
                       {"name": "cpu", "nominalQuota": "32"}, {"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]},
               "status": {"admittedWorkloads": 1, "pendingWorkloads": 2, "flavorsUsage": [{"name": "ml.g5.8xlarge",
                   "resources": [{"name": "cpu", "total": "8", "borrowed": "0"},
                                 {"name": "nvidia.com/gpu", "total": total, "borrowed": borrowed}]}]}})
    }

    #[test]
    fn a_borrowers_gpus_are_counted_as_lent_by_the_idle_teams() {
        // a: 4 of its own + 2 borrowed; b: quota 4, uses 1 (3 idle); c: quota 2, idle.
        let queues = [
            queue("a", "4", "6", "2"),
            queue("b", "4", "1", "0"),
            queue("c", "2", "0", "0"),
        ];
        let teams = ["a", "b", "c", "gone"].map(String::from);
        let u = of_queues(&queues, &teams);
        assert_eq!(u.len(), 3, "a team without a ClusterQueue has no usage");
        let a = &u["a"].flavors[0];
        assert_eq!(
            (a.flavor.as_str(), a.nominal, a.in_use, a.borrowed, a.lent),
            ("ml.g5.8xlarge", 4.0, 6.0, 2.0, 0.0)
        );
        // The 2 borrowed GPUs come out of b's 3 idle and c's 2 idle, in that proportion.
        assert!((u["b"].flavors[0].lent - 1.2).abs() < 1e-9, "{:?}", u["b"]);
        assert!((u["c"].flavors[0].lent - 0.8).abs() < 1e-9, "{:?}", u["c"]);
        assert_eq!(
            (u["a"].admitted_workloads, u["a"].pending_workloads),
            (1, 2)
        );
        assert_eq!(quantity(&json!("500m")), 0.5);
        assert_eq!(quantity(&json!(3)), 3.0);
        assert_eq!(quantity(&json!("8Gi")), 0.0);
    }
}
