//! Which team a workload runs as, at which priority: `team` and `priority` of a submission
//! checked against the cluster's compute quotas and scheduling policy before anything is made.
//! A governed cluster with teams names them when `team` is missing; an unknown team or class is
//! refused with the valid values.

use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::validate;
use crate::service::shared::labels::Placement;

/// Resolves a submission's `team` and `priority` on a cluster.
pub async fn placement(
    engine: &Engine,
    cluster: &str,
    team: Option<&str>,
    priority: Option<&str>,
) -> ApiResult<Placement> {
    if let Some(t) = team {
        validate::dns_label("team", "team name", t)?;
    }
    if let Some(p) = priority {
        validate::dns_label("priority", "priority class", p)?;
    }
    let record = crate::service::cluster::records::live_cluster(engine, cluster).await?;
    let arn = crate::service::ClusterResources::of(&record.resources).hyperpod_cluster_arn;
    let governed = match &arn {
        Some(_) => {
            crate::service::features::addon_active(
                engine,
                cluster,
                crate::cloud::TASK_GOVERNANCE_ADDON,
            )
            .await?
        }
        None => false,
    };
    let (Some(arn), true) = (arn, governed) else {
        // Not governed: Kueue is not there to read a queue or a class.
        for (field, given) in [("team", team.is_some()), ("priority", priority.is_some())] {
            if given {
                return Err(ApiError::validation_hint(
                    field,
                    format!("`{cluster}` has no task governance: its workloads run in namespace default, with no team or priority"),
                    json!(format!("leave `{field}` out, or enable taskGovernance and create teams (teams_create)")),
                ));
            }
        }
        return Ok(Placement::default());
    };
    let gov = &engine.cloud().governance;
    let err = |e| ApiError::Cloud(Box::new(e));
    let teams: Vec<String> = gov
        .compute_quotas(&arn)
        .await
        .map_err(err)?
        .into_iter()
        .map(|q| q.team)
        .collect();
    let team = match team {
        Some(t) if teams.iter().any(|n| n == t) => Some(t.to_string()),
        Some(t) => {
            return Err(ApiError::validation_hint(
                "team",
                format!("`{cluster}` has no team `{t}`"),
                json!(teams),
            ))
        }
        None if teams.is_empty() => None,
        None => {
            return Err(ApiError::validation_hint(
                "team",
                format!(
                    "`{cluster}` is shared by teams ({}): say which one this runs as",
                    teams.join(", ")
                ),
                json!(teams),
            ))
        }
    };
    let priority = match priority {
        None => None,
        Some(p) => {
            let classes: Vec<String> = gov
                .scheduler_configs(&arn)
                .await
                .map_err(err)?
                .into_iter()
                .flat_map(|c| c.policy.by_weight())
                .map(|c| c.name)
                .collect();
            if team.is_none() {
                return Err(ApiError::validation_hint(
                    "priority",
                    "a priority orders a team's queue: name the `team` too",
                    json!(teams),
                ));
            }
            if !classes.iter().any(|c| c == p) {
                return Err(ApiError::validation_hint(
                    "priority",
                    format!("`{p}` is not a priority class of `{cluster}`'s scheduling policy"),
                    json!(classes),
                ));
            }
            Some(p.to_string())
        }
    };
    Ok(Placement { team, priority })
}
