//! The report from stored history: instance-hours split by day and holder, idle and unobserved
//! time, and what each split adds up to.

use super::*;
use crate::store::SeenNode;
use std::collections::HashMap;

const DAY0: i64 = 20_000 * DAY_MS; // 2024-10-04, a UTC midnight
const HOUR: i64 = 3_600_000;

fn node(id: &str, group: &str, instance_type: &str, from: i64, to: Option<i64>) -> NodeLifetime {
    NodeLifetime {
        node: SeenNode {
            instance_id: id.into(),
            instance_group: group.into(),
            instance_type: instance_type.into(),
            launched_ms: from,
        },
        ended_ms: to,
    }
}

fn held(day: i64, id: &str, namespace: &str, workload: &str, gpu_hours: f64) -> GpuSeconds {
    GpuSeconds {
        day: day_of(day),
        instance_id: id.into(),
        namespace: namespace.into(),
        workload: workload.into(),
        seconds: gpu_hours * 3600.0,
    }
}

fn query(by: CostBy) -> CostQuery {
    CostQuery {
        cluster: "c".into(),
        by,
        since: None,
    }
}

fn first() -> time::Date {
    parse_day(&day_of(DAY0)).unwrap()
}

/// The report from the dated table's prices alone (no training plan).
fn on_table(
    by: CostBy,
    now: i64,
    lifetimes: &[NodeLifetime],
    seconds: &[GpuSeconds],
) -> CostReport {
    report(
        &query(by),
        first(),
        now,
        lifetimes,
        seconds,
        &HashMap::new(),
        &RegionPrices::table_only("us-east-1", "not read in this test"),
    )
}

fn total(r: &CostReport, key: &str, kind: CostKind) -> f64 {
    r.totals
        .iter()
        .filter(|t| t.key == key && t.kind == kind)
        .map(|t| t.usd)
        .sum()
}

/// One ml.g5.12xlarge (4 GPUs, $7.09/h) for two hours, fully sampled: team a held 2 GPUs the
/// whole time, team b 1 GPU for one hour, the rest idle. A CPU node ran too.
fn history() -> (Vec<NodeLifetime>, Vec<GpuSeconds>) {
    let lifetimes = vec![
        node(
            "i-gpu",
            "workers",
            "ml.g5.12xlarge",
            DAY0 + HOUR,
            Some(DAY0 + 3 * HOUR),
        ),
        node("i-cpu", "controllers", "ml.m5.xlarge", DAY0, None),
    ];
    let seconds = vec![
        held(DAY0, "i-gpu", "hyperpod-ns-a", "training/llama", 4.0),
        held(DAY0, "i-gpu", "hyperpod-ns-b", "deployment/chat", 1.0),
        held(DAY0, "i-gpu", "", IDLE, 3.0),
    ];
    (lifetimes, seconds)
}

#[test]
fn a_teams_share_is_its_gpu_hours_at_the_nodes_price_per_gpu() {
    let (lifetimes, seconds) = history();
    let now = DAY0 + 4 * HOUR;
    let r = on_table(CostBy::Team, now, &lifetimes, &seconds);
    let per_gpu_hour = 7.09 / 4.0;
    assert!((total(&r, "a", CostKind::Used) - 4.0 * per_gpu_hour).abs() < 1e-9);
    assert!((total(&r, "b", CostKind::Used) - per_gpu_hour).abs() < 1e-9);
    assert!((r.idle_usd - 3.0 * per_gpu_hour).abs() < 1e-9);
    assert!(total(&r, "", CostKind::Unobserved).abs() < 1e-9, "{r:#?}");
    // The CPU node's four hours are everyone's.
    assert!((total(&r, "", CostKind::NoGpus) - 4.0 * 0.23).abs() < 1e-9);
    // The parts add up to the nodes' cost.
    assert!((r.total_usd - (2.0 * 7.09 + 4.0 * 0.23)).abs() < 1e-9);
    assert!((r.instance_hours - 6.0).abs() < 1e-9);
    assert!(r.estimate && r.unpriced.is_empty());
    assert_eq!(r.totals[0].key, "a", "most expensive first");
}

#[test]
fn by_group_every_share_is_its_groups_and_by_job_its_workloads() {
    let (lifetimes, seconds) = history();
    let now = DAY0 + 4 * HOUR;
    let r = on_table(CostBy::Group, now, &lifetimes, &seconds);
    let workers: f64 = r
        .totals
        .iter()
        .filter(|t| t.key == "workers")
        .map(|t| t.usd)
        .sum();
    assert!((workers - 2.0 * 7.09).abs() < 1e-9);
    assert!((total(&r, "workers", CostKind::Idle) - 3.0 * 7.09 / 4.0).abs() < 1e-9);
    assert!((total(&r, "controllers", CostKind::NoGpus) - 4.0 * 0.23).abs() < 1e-9);
    let r = on_table(CostBy::Job, now, &lifetimes, &seconds);
    assert!(
        total(&r, "training/llama", CostKind::Used) > total(&r, "deployment/chat", CostKind::Used)
    );
    let r = on_table(CostBy::Endpoint, now, &lifetimes, &seconds);
    assert!(total(&r, "deployment/chat", CostKind::Used) > 0.0);
    assert!(total(&r, "(other workloads)", CostKind::Used) > 0.0);
}

#[test]
fn time_nobody_sampled_is_not_observed_and_a_lifetime_splits_at_midnight() {
    // Ten hours across midnight, sampled for one hour on the first day only.
    let lifetimes = vec![node(
        "i-1",
        "w",
        "ml.g5.xlarge",
        DAY0 + 20 * HOUR,
        Some(DAY0 + 30 * HOUR),
    )];
    let seconds = vec![held(DAY0, "i-1", "hyperpod-ns-a", "training/x", 1.0)];
    let r = on_table(CostBy::Team, DAY0 + 40 * HOUR, &lifetimes, &seconds);
    let days: Vec<&str> = r.rows.iter().map(|r| r.day.as_str()).collect();
    assert!(
        days.contains(&day_of(DAY0).as_str()) && days.contains(&day_of(DAY0 + DAY_MS).as_str())
    );
    assert!((total(&r, "a", CostKind::Used) - 1.408).abs() < 1e-9);
    assert!((total(&r, "", CostKind::Unobserved) - 9.0 * 1.408).abs() < 1e-9);
    // More sampled than the node ran (clock skew) is capped at what it ran.
    let seconds = vec![held(DAY0, "i-1", "hyperpod-ns-a", "training/x", 50.0)];
    let r = on_table(CostBy::Team, DAY0 + 40 * HOUR, &lifetimes, &seconds);
    assert!((r.total_usd - 10.0 * 1.408).abs() < 1e-9);
}

#[test]
fn a_type_without_a_price_counts_hours_and_says_so() {
    let lifetimes = vec![node("i-1", "w", "ml.x9.huge", DAY0, Some(DAY0 + HOUR))];
    let r = on_table(CostBy::Group, DAY0 + HOUR, &lifetimes, &[]);
    assert_eq!(r.unpriced, vec!["ml.x9.huge".to_string()]);
    assert!((r.instance_hours - 1.0).abs() < 1e-9 && r.total_usd == 0.0);
}

#[test]
fn since_is_a_day_not_in_the_future_nor_too_far_back() {
    let now = DAY0 + HOUR;
    assert_eq!(
        first_day(None, now).unwrap(),
        first() - time::Duration::days(6)
    );
    assert_eq!(first_day(Some(&day_of(DAY0)), now).unwrap(), first());
    for bad in [
        "yesterday",
        "2024-13-01",
        &day_of(DAY0 + DAY_MS),
        &day_of(DAY0 - 500 * DAY_MS),
    ] {
        let e = first_day(Some(bad), now).unwrap_err();
        assert!(
            matches!(e, ApiError::Validation { ref field, .. } if field == "since"),
            "{bad}"
        );
    }
}

#[test]
fn the_csv_has_a_line_per_row() {
    let (lifetimes, seconds) = history();
    let r = on_table(CostBy::Team, DAY0 + 4 * HOUR, &lifetimes, &seconds);
    let csv = csv(&r);
    assert_eq!(csv.lines().count(), r.rows.len() + 1);
    assert!(csv.starts_with("day,key,kind,usd,gpu_hours\n"));
    assert!(csv.contains(",\"a\",used,7.090000,4.000000"), "{csv}");
}

#[test]
fn a_training_plans_instances_are_priced_at_the_plans_fee_per_instance_hour() {
    let plan = crate::cloud::TrainingPlan {
        arn: "arn:aws:sagemaker:us-west-2:1:training-plan/p".into(),
        name: "p".into(),
        status: "Active".into(),
        total_instance_count: 2,
        available_instance_count: 0,
        reservations: vec![],
        upfront_fee: Some("3360".into()),
        currency_code: Some("USD".into()),
        duration_hours: Some(168.0),
    };
    // $3360 for 2 instances × 168 h: $10 an instance-hour.
    let price = prices::plan_price("ml.p5.48xlarge", &plan).unwrap();
    assert_eq!(price.hourly_usd, Some(10.0));
    let lifetimes = vec![
        node(
            "i-plan",
            "reserved",
            "ml.p5.48xlarge",
            DAY0,
            Some(DAY0 + HOUR),
        ),
        node("i-od", "workers", "ml.p5.48xlarge", DAY0, Some(DAY0 + HOUR)),
    ];
    let by_group = HashMap::from([("reserved".to_string(), price)]);
    let r = report(
        &query(CostBy::Group),
        first(),
        DAY0 + HOUR,
        &lifetimes,
        &[],
        &by_group,
        &RegionPrices::table_only("us-east-1", "not read in this test"),
    );
    let group = |g: &str| {
        r.totals
            .iter()
            .filter(|t| t.key == g)
            .map(|t| t.usd)
            .sum::<f64>()
    };
    assert!((group("reserved") - 10.0).abs() < 1e-9, "{r:#?}");
    assert!((group("workers") - 113.068).abs() < 1e-9, "{r:#?}");
    assert_eq!(
        r.prices.len(),
        2,
        "the plan's and the table's, side by side"
    );
    assert!(r.estimate, "the on-demand group is still an estimate");
    assert_eq!(
        r.price_list_unavailable.as_deref(),
        Some("not read in this test")
    );
    // A plan in another currency, or without a fee, is not priced from the plan.
    let euros = crate::cloud::TrainingPlan {
        currency_code: Some("EUR".into()),
        ..plan.clone()
    };
    assert!(prices::plan_price("ml.p5.48xlarge", &euros).is_none());
    let unknown = crate::cloud::TrainingPlan {
        upfront_fee: None,
        ..plan
    };
    assert!(prices::plan_price("ml.p5.48xlarge", &unknown).is_none());
}
