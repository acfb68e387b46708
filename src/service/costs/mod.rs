//! What a cluster costs, and whom: instance-hours from its HyperPod nodes' lifetimes × the hourly
//! price of their type, split by what ran on them (the GPUs each holder requested, sampled from
//! the watch summary) into a group's, a team's, a job's or an endpoint's share — and the share
//! nobody requested (idle GPUs) or that this server did not see (not observed).

pub mod prices;
pub mod sample;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::cloud::instances::gpus_per_instance;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::shared::labels::TEAM_NAMESPACE_PREFIX;
use crate::store::{GpuSeconds, NodeLifetime};
pub use prices::{Price, PriceBook, PriceSource, RegionPrices};
use sample::{day_of, now_ms, IDLE};

const DAY_MS: i64 = 86_400_000;
/// The longest report: a year and a bit.
const MAX_DAYS: i64 = 400;

/// What a report splits the cost by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CostBy {
    /// The instance group of the nodes.
    Group,
    /// The team whose namespace (`hyperpod-ns-<team>`) the GPUs' pods ran in.
    Team,
    /// The workload the pods were of (`training/<job>`, `deployment/<name>`, `space/<name>`, …).
    Job,
    /// The serving workloads (`deployment/<name>`, `pool/<name>`); every other is one row.
    Endpoint,
}

/// What a share of the cost paid for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CostKind {
    /// GPUs the key's pods requested.
    Used,
    /// Allocatable GPUs nobody requested.
    Idle,
    /// Node time this server did not sample (it was not running, or could not read the cluster).
    Unobserved,
    /// Nodes without GPUs (controllers, CPU groups): shared by everyone.
    NoGpus,
}

/// One day's share of one key.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostRow {
    /// UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// The group, team or workload; empty for the idle, not-observed and no-GPU shares when
    /// the report is not by group.
    pub key: String,
    pub kind: CostKind,
    pub usd: f64,
    pub gpu_hours: f64,
}

/// One key's share over the whole report.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostTotal {
    pub key: String,
    pub kind: CostKind,
    pub usd: f64,
    pub gpu_hours: f64,
}

/// A cost report.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostReport {
    pub cluster: String,
    pub by: CostBy,
    /// The first UTC day counted.
    pub since: String,
    /// The moment the report was made (RFC 3339).
    pub until: String,
    pub currency: &'static str,
    /// True while any price used is an estimate (the dated table, used when the AWS Price List
    /// cannot be read or lacks the type): the figures are then not a bill. A training plan's
    /// instances are priced at the plan's fee over its instance-hours.
    pub estimate: bool,
    /// Why the AWS Price List was not used, when it was not (the prices are then the table's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_list_unavailable: Option<String>,
    pub total_usd: f64,
    /// Of the total, allocatable GPUs nobody requested.
    pub idle_usd: f64,
    pub instance_hours: f64,
    /// By day, then key.
    pub rows: Vec<CostRow>,
    /// By key over the whole report, most expensive first.
    pub totals: Vec<CostTotal>,
    /// The price of every instance type counted.
    pub prices: Vec<Price>,
    /// Instance types counted without a price (their hours are in `instanceHours`, not in USD).
    pub unpriced: Vec<String>,
}

/// A report's query, validated.
#[derive(Debug, Clone)]
pub struct CostQuery {
    pub cluster: String,
    pub by: CostBy,
    /// `YYYY-MM-DD`; a week ago (today included) when absent.
    pub since: Option<String>,
}

fn parse_day(day: &str) -> Option<time::Date> {
    time::Date::parse(
        day,
        time::macros::format_description!("[year]-[month]-[day]"),
    )
    .ok()
}

fn day_start_ms(day: time::Date) -> i64 {
    day.midnight().assume_utc().unix_timestamp() * 1000
}

/// The first day a report counts, from `since` (validated) or a week back from `today`.
fn first_day(since: Option<&str>, now: i64) -> ApiResult<time::Date> {
    let today = parse_day(&day_of(now)).unwrap_or(time::Date::MIN);
    let Some(since) = since else {
        return Ok(today - time::Duration::days(6));
    };
    let invalid = |detail: String| {
        ApiError::validation_hint(
            "since",
            detail,
            serde_json::json!("a UTC day, YYYY-MM-DD, at most 400 days back and not after today"),
        )
    };
    let day =
        parse_day(since).ok_or_else(|| invalid(format!("`{since}` is not a day (YYYY-MM-DD)")))?;
    if day > today {
        return Err(invalid(format!("`{since}` is after today ({today})")));
    }
    if (today - day).whole_days() > MAX_DAYS {
        return Err(invalid(format!(
            "`{since}` is more than {MAX_DAYS} days back"
        )));
    }
    Ok(day)
}

/// Whose a share is, as the report splits it.
fn key_of(by: CostBy, group: &str, namespace: &str, workload: &str) -> String {
    match by {
        CostBy::Group => group.to_string(),
        _ if namespace.is_empty() && workload == IDLE => String::new(),
        CostBy::Team => namespace
            .strip_prefix(TEAM_NAMESPACE_PREFIX)
            .map_or_else(|| "(no team)".to_string(), str::to_string),
        CostBy::Job => workload.to_string(),
        CostBy::Endpoint
            if workload.starts_with("deployment/") || workload.starts_with("pool/") =>
        {
            workload.to_string()
        }
        CostBy::Endpoint => "(other workloads)".into(),
    }
}

/// Seconds of `[from, to)` in each UTC day it touches.
fn seconds_by_day(from: i64, to: i64) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let end = (start.div_euclid(DAY_MS) + 1) * DAY_MS;
        let end = end.min(to);
        out.push((day_of(start), (end - start) as f64 / 1000.0));
        start = end;
    }
    out
}

/// The report, from stored history only (pure: the tests feed it). `group_prices` prices the
/// instances of the groups that run on a training plan, `region_prices` every other.
pub fn report(
    q: &CostQuery,
    first: time::Date,
    now: i64,
    lifetimes: &[NodeLifetime],
    seconds: &[GpuSeconds],
    group_prices: &HashMap<String, Price>,
    region_prices: &RegionPrices,
) -> CostReport {
    let since_ms = day_start_ms(first);
    let mut held: HashMap<(&str, &str), Vec<&GpuSeconds>> = HashMap::new();
    for s in seconds {
        held.entry((s.day.as_str(), s.instance_id.as_str()))
            .or_default()
            .push(s);
    }
    let mut acc: BTreeMap<(String, String, CostKind), (f64, f64)> = BTreeMap::new();
    let mut add = |day: &str, key: String, kind, usd: f64, gpu_seconds: f64| {
        let e = acc.entry((day.to_string(), key, kind)).or_default();
        e.0 += usd;
        e.1 += gpu_seconds / 3600.0;
    };
    // By instance type and plan: a plan's instances and on-demand ones of the same type differ.
    let mut prices: BTreeMap<(String, Option<String>), Price> = BTreeMap::new();
    let mut instance_hours = 0.0;
    for l in lifetimes {
        let n = &l.node;
        let price = group_prices
            .get(&n.instance_group)
            .cloned()
            .unwrap_or_else(|| region_prices.price(&n.instance_type));
        prices
            .entry((price.instance_type.clone(), price.training_plan.clone()))
            .or_insert_with(|| price.clone());
        let hourly = price.hourly_usd.unwrap_or(0.0);
        let gpus = f64::from(gpus_per_instance(&n.instance_type));
        let from = n.launched_ms.max(since_ms);
        let to = l.ended_ms.unwrap_or(now).min(now);
        for (day, secs) in seconds_by_day(from, to) {
            instance_hours += secs / 3600.0;
            let node_usd = secs / 3600.0 * hourly;
            let group_key = |ns: &str, w: &str| key_of(q.by, &n.instance_group, ns, w);
            if gpus == 0.0 {
                add(&day, group_key("", IDLE), CostKind::NoGpus, node_usd, 0.0);
                continue;
            }
            let per_gpu_second = hourly / 3600.0 / gpus;
            let mut seen = 0.0;
            for h in held
                .get(&(day.as_str(), n.instance_id.as_str()))
                .into_iter()
                .flatten()
            {
                // A sample never credits more than the node's GPUs for the time it ran.
                let s = h.seconds.min(gpus * secs - seen).max(0.0);
                seen += s;
                let kind = if h.namespace.is_empty() && h.workload == IDLE {
                    CostKind::Idle
                } else {
                    CostKind::Used
                };
                add(
                    &day,
                    group_key(&h.namespace, &h.workload),
                    kind,
                    s * per_gpu_second,
                    s,
                );
            }
            let unseen = (gpus * secs - seen).max(0.0);
            if unseen > 0.0 {
                add(
                    &day,
                    group_key("", IDLE),
                    CostKind::Unobserved,
                    unseen * per_gpu_second,
                    unseen,
                );
            }
        }
    }
    let rows: Vec<CostRow> = acc
        .into_iter()
        .map(|((day, key, kind), (usd, gpu_hours))| CostRow {
            day,
            key,
            kind,
            usd,
            gpu_hours,
        })
        .collect();
    let mut totals: BTreeMap<(String, CostKind), (f64, f64)> = BTreeMap::new();
    for r in &rows {
        let t = totals.entry((r.key.clone(), r.kind)).or_default();
        t.0 += r.usd;
        t.1 += r.gpu_hours;
    }
    let mut totals: Vec<CostTotal> = totals
        .into_iter()
        .map(|((key, kind), (usd, gpu_hours))| CostTotal {
            key,
            kind,
            usd,
            gpu_hours,
        })
        .collect();
    totals.sort_by(|a, b| b.usd.total_cmp(&a.usd));
    let unpriced = prices
        .values()
        .filter(|p| p.hourly_usd.is_none())
        .map(|p| p.instance_type.clone())
        .collect();
    CostReport {
        cluster: q.cluster.clone(),
        by: q.by,
        since: first.to_string(),
        until: crate::store::rfc3339_ms(now),
        currency: "USD",
        estimate: prices.values().any(|p| p.source == PriceSource::Estimate),
        price_list_unavailable: region_prices.unavailable.clone(),
        // Sums start at +0 (an empty `sum` of floats is -0).
        total_usd: rows.iter().map(|r| r.usd).fold(0.0, |a, b| a + b),
        idle_usd: rows
            .iter()
            .filter(|r| r.kind == CostKind::Idle)
            .map(|r| r.usd)
            .fold(0.0, |a, b| a + b),
        instance_hours,
        rows,
        totals,
        prices: prices.into_values().collect(),
        unpriced,
    }
}

/// The prices of the cluster's groups that run on a training plan the account can read (its
/// fee over its instance-hours); the others are priced from the region's prices.
async fn plan_prices(
    engine: &Engine,
    record: &crate::store::ClusterRecord,
) -> HashMap<String, Price> {
    let groups = crate::service::shared::resources::ClusterResources::of(&record.resources)
        .instance_groups
        .unwrap_or_default();
    let planned: Vec<_> = groups
        .iter()
        .filter_map(|g| match &g.capacity {
            crate::cloud::Capacity::TrainingPlan { arn } => Some((g, arn)),
            _ => None,
        })
        .collect();
    if planned.is_empty() {
        return HashMap::new();
    }
    let plans = match engine.cloud().hyperpod.list_training_plans().await {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(error = ?e, "cost report: the training plans could not be read");
            return HashMap::new();
        }
    };
    planned
        .into_iter()
        .filter_map(|(g, arn)| {
            let plan = plans.iter().find(|p| &p.arn == arn)?;
            Some((g.name.clone(), prices::plan_price(&g.instance_type, plan)?))
        })
        .collect()
}

/// The report of a cluster now: the cluster is sampled first (when it can be read), so what
/// runs this moment is counted; its region's prices come from `book`.
pub async fn costs(engine: &Engine, book: &PriceBook, q: &CostQuery) -> ApiResult<CostReport> {
    let now = now_ms();
    let first = first_day(q.since.as_deref(), now)?;
    // History outlives the cluster: a deleted cluster's costs can still be read.
    let Some(record) = engine.store().get_cluster(&q.cluster).await? else {
        return Err(crate::service::cluster::records::cluster_not_found(
            &q.cluster,
        ));
    };
    // The record just read is the one sampled: no second read of it.
    if let Err(e) = sample::sample_record(engine, &record).await {
        tracing::debug!(cluster = %q.cluster, error = ?e, "cost report: the cluster could not be sampled");
    }
    let store = engine.store();
    let lifetimes = store
        .node_lifetimes(&q.cluster, day_start_ms(first))
        .await?;
    let seconds = store.gpu_seconds(&q.cluster, &first.to_string()).await?;
    let group_prices = plan_prices(engine, &record).await;
    let region_prices = book
        .region(engine.cloud().prices.as_ref(), &record.region)
        .await;
    Ok(report(
        q,
        first,
        now,
        &lifetimes,
        &seconds,
        &group_prices,
        &region_prices,
    ))
}

/// The report as CSV: one line per row, `day,key,kind,usd,gpu_hours`.
pub fn csv(r: &CostReport) -> String {
    let mut out = String::from("day,key,kind,usd,gpu_hours\n");
    for row in &r.rows {
        let kind = serde_json::to_value(row.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        // Keys are DNS labels and paths: no comma or quote to escape, but quote anyway.
        out.push_str(&format!(
            "{},\"{}\",{kind},{:.6},{:.6}\n",
            row.day,
            row.key.replace('"', "\"\""),
            row.usd,
            row.gpu_hours
        ));
    }
    out
}

#[cfg(test)]
mod tests;
