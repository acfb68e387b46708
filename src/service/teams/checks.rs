//! The checks of a team's quota, name and the scheduling policy, field by field, against the
//! cluster's instance groups and the other teams' quotas: what the edge refuses before any call.

use serde_json::json;

use super::Governed;
use crate::cloud::{QuotaResource, SchedulerPolicy, Sharing, TeamQuota};
use crate::error::{ApiError, ApiResult};
use crate::service::cluster::validate::truncate;

/// At most this many priority classes (SageMaker's limit).
pub const MAX_CLASSES: usize = 10;

pub(super) fn instances_of(r: &QuotaResource) -> f64 {
    match (r.count, r.accelerators) {
        (Some(n), _) => f64::from(n),
        (None, Some(a)) => {
            let per = crate::cloud::gpus_per_instance(&r.instance_type).max(1);
            f64::from(a) / f64::from(per)
        }
        _ => 0.0,
    }
}

/// Every field of a quota, checked against the cluster and the other teams' quotas.
pub(super) fn check_quota(
    g: &Governed,
    team: &str,
    q: &TeamQuota,
    others: &[(String, TeamQuota)],
) -> ApiResult<()> {
    if q.resources.len() > crate::cloud::MAX_QUOTA_RESOURCES {
        return Err(ApiError::validation_hint(
            "resources",
            format!(
                "a compute quota names at most {} instance types, not {}",
                crate::cloud::MAX_QUOTA_RESOURCES,
                q.resources.len()
            ),
            json!(format!("1 to {}", crate::cloud::MAX_QUOTA_RESOURCES)),
        ));
    }
    let types: Vec<&String> = g.capacity.keys().collect();
    let mut seen = std::collections::BTreeSet::new();
    for (i, r) in q.resources.iter().enumerate() {
        let field = format!("resources[{i}]");
        let Some(&instances) = g.capacity.get(&r.instance_type) else {
            return Err(ApiError::validation_hint(
                &format!("{field}.instanceType"),
                format!(
                    "`{}` is not an instance type of this cluster's instance groups",
                    truncate(&r.instance_type)
                ),
                json!(types),
            ));
        };
        if !seen.insert(&r.instance_type) {
            return Err(ApiError::validation(
                &format!("{field}.instanceType"),
                format!(
                    "{} appears twice: give one share per instance type",
                    r.instance_type
                ),
            ));
        }
        match (r.count, r.accelerators) {
            (Some(0), _) | (_, Some(0)) => {
                return Err(ApiError::validation(&field, "a share is at least 1"));
            }
            (Some(_), None) | (None, Some(_)) => {}
            _ => {
                return Err(ApiError::validation_hint(
                    &field,
                    "give exactly one of count (instances) and accelerators (GPUs)",
                    json!({"instanceType": r.instance_type, "count": 1}),
                ));
            }
        }
        let gpus = crate::cloud::gpus_per_instance(&r.instance_type);
        if r.accelerators.is_some() && gpus == 0 {
            return Err(ApiError::validation(
                &format!("{field}.accelerators"),
                format!(
                    "{} has no accelerators: give count instead",
                    r.instance_type
                ),
            ));
        }
        let given: f64 = others
            .iter()
            .filter(|(t, _)| t != team)
            .flat_map(|(_, o)| o.resources.iter())
            .filter(|o| o.instance_type == r.instance_type)
            .map(instances_of)
            .sum();
        let total = given + instances_of(r);
        if total > f64::from(instances) + 1e-9 {
            return Err(ApiError::validation_hint(
                &field,
                format!(
                    "the teams' quotas of {} would come to {total} instances, and the instance groups hold {instances}: {} too many",
                    r.instance_type,
                    total - f64::from(instances)
                ),
                json!({"available": (f64::from(instances) - given).max(0.0),
                       "availableAccelerators": ((f64::from(instances) - given).max(0.0) * f64::from(gpus)).floor()}),
            ));
        }
    }
    if q.resources.is_empty() {
        return Err(ApiError::validation(
            "resources",
            "give the team a share of at least one instance type",
        ));
    }
    match (q.sharing, q.borrow_limit) {
        (Sharing::LendAndBorrow, Some(b)) if !(1..=500).contains(&b) => {
            Err(ApiError::validation_hint(
                "borrowLimit",
                format!("{b} is not a borrow limit"),
                json!("1 to 500 (percent of idle compute)"),
            ))
        }
        (Sharing::Lend | Sharing::DontLend, Some(_)) => Err(ApiError::validation_hint(
            "borrowLimit",
            format!(
                "a team that does not borrow ({}) has no borrow limit",
                q.sharing.as_str()
            ),
            json!("sharing LendAndBorrow, or leave borrowLimit out"),
        )),
        _ if q.fair_share_weight > 100 => Err(ApiError::validation_hint(
            "fairShareWeight",
            format!("{} is not a weight", q.fair_share_weight),
            json!("0 to 100"),
        )),
        _ => Ok(()),
    }
}

pub(super) fn check_name(name: &str) -> ApiResult<()> {
    check_name_at("teamName", name)
}

fn check_name_at(field: &str, name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        return Ok(());
    }
    Err(ApiError::validation_hint(
        field,
        format!("`{}` cannot name a team: its namespace would be hyperpod-ns-<name>", truncate(name)),
        json!("lower-case letters, digits and '-', 1 to 40 characters, starting and ending with a letter or digit"),
    ))
}

pub(super) fn check_policy(p: &SchedulerPolicy) -> ApiResult<()> {
    if p.priority_classes.len() > MAX_CLASSES {
        return Err(ApiError::validation(
            "priorityClasses",
            format!("at most {MAX_CLASSES} priority classes"),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in p.priority_classes.iter().enumerate() {
        let field = format!("priorityClasses[{i}]");
        if check_name(&c.name).is_err() {
            return Err(ApiError::validation_hint(
                &format!("{field}.name"),
                format!("`{}` cannot name a priority class", truncate(&c.name)),
                json!("lower-case letters, digits and '-', 1 to 40 characters (a workload names it as <name>-priority)"),
            ));
        }
        if c.weight > 100 {
            return Err(ApiError::validation_hint(
                &format!("{field}.weight"),
                format!("{} is not a weight", c.weight),
                json!("0 to 100"),
            ));
        }
        if !seen.insert(&c.name) {
            return Err(ApiError::validation(
                &format!("{field}.name"),
                format!("{} appears twice", c.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{team_namespace, team_queue, Preempt, PriorityClass};
    use std::collections::BTreeMap;

    fn cluster() -> Governed {
        Governed {
            arn: "arn:aws:sagemaker:us-west-2:1:cluster/abc".into(),
            capacity: BTreeMap::from([("ml.g5.12xlarge".to_string(), 2)]),
        }
    }

    fn quota(count: Option<u32>, accelerators: Option<u32>) -> TeamQuota {
        TeamQuota {
            resources: vec![QuotaResource {
                instance_type: "ml.g5.12xlarge".into(),
                count,
                accelerators,
            }],
            sharing: Sharing::LendAndBorrow,
            borrow_limit: Some(100),
            preempt: Preempt::LowerPriority,
            fair_share_weight: 0,
            active: true,
        }
    }

    #[test]
    fn a_quota_never_exceeds_what_the_groups_hold_and_says_by_how_much() {
        let g = cluster();
        assert!(check_quota(&g, "a", &quota(Some(2), None), &[]).is_ok());
        let others = vec![("b".to_string(), quota(Some(1), None))];
        let err = check_quota(&g, "a", &quota(Some(2), None), &others).unwrap_err();
        let text = format!("{err:?}");
        assert!(
            text.contains("3 instances") && text.contains("hold 2") && text.contains("1 too many"),
            "{text}"
        );
        // Accelerators count as the instances they fill (4 GPUs each on a g5.12xlarge).
        assert!(check_quota(&g, "a", &quota(None, Some(4)), &others).is_ok());
        assert!(check_quota(&g, "a", &quota(None, Some(5)), &others).is_err());
        // A team's own earlier quota is replaced, not added.
        let own = vec![("a".to_string(), quota(Some(2), None))];
        assert!(check_quota(&g, "a", &quota(Some(2), None), &own).is_ok());
        assert!(check_quota(&g, "a", &quota(Some(1), Some(4)), &[]).is_err());
    }

    #[test]
    fn unknown_types_borrow_limits_and_names_are_refused_by_field() {
        let g = cluster();
        let mut q = quota(Some(1), None);
        q.resources[0].instance_type = "ml.p5.48xlarge".into();
        assert!(format!("{:?}", check_quota(&g, "a", &q, &[]).unwrap_err())
            .contains("resources[0].instanceType"));
        let mut q = quota(Some(1), None);
        q.borrow_limit = Some(501);
        assert!(format!("{:?}", check_quota(&g, "a", &q, &[]).unwrap_err()).contains("borrowLimit"));
        q.sharing = Sharing::DontLend;
        q.borrow_limit = Some(10);
        assert!(check_quota(&g, "a", &q, &[]).is_err());
        for bad in ["", "Team", "-a", "a-", "a_b", &"x".repeat(41)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["a", "team-a", &"x".repeat(40)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        assert_eq!(team_namespace("team-a"), "hyperpod-ns-team-a");
        assert_eq!(team_queue("team-a"), "hyperpod-ns-team-a-localqueue");
    }

    #[test]
    fn priority_classes_are_unique_named_weighted_and_at_most_ten() {
        let class = |n: &str, w| PriorityClass {
            name: n.into(),
            weight: w,
        };
        let policy = |classes| SchedulerPolicy {
            priority_classes: classes,
            fair_share: true,
            idle_resource_sharing: false,
        };
        assert!(check_policy(&policy(vec![class("training", 70), class("inference", 90)])).is_ok());
        assert!(check_policy(&policy(vec![class("a", 1), class("a", 2)])).is_err());
        assert!(check_policy(&policy(vec![class("a", 101)])).is_err());
        assert!(check_policy(&policy(vec![class("A", 1)])).is_err());
        let many = (0..11).map(|i| class(&format!("c{i}"), 1)).collect();
        assert!(check_policy(&policy(many)).is_err());
    }
}
