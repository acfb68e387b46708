//! Teams sharing a cluster (HyperPod task governance): the scheduling policy and each team's
//! compute quota, read from SageMaker and changed by diff; every field validated before any call
//! (a quota never larger than the instance groups hold, instance types of the cluster only,
//! team names that make valid namespaces).

pub mod start;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::cloud::{
    priority_label, team_cluster_queue, team_namespace, team_queue, Preempt, PriorityClass,
    QuotaResource, SchedulerPolicy, Sharing, TeamQuota, TASK_GOVERNANCE_ADDON,
};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::steps::governance::{PolicyParams, TeamParams};

mod admission;
mod checks;
mod placement;
mod usage;
pub use admission::{
    with_admission, workloads, Admission, AdmissionState, PodsAdmission, Workloads,
};
use checks::{check_name, check_policy, check_quota, instances_of};
pub use placement::placement;
pub use usage::{FlavorUsage, TeamUsage};

fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

/// `PUT /api/clusters/{name}/scheduling-policy`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRequest {
    /// Up to 10; a workload names one as its `priority`.
    #[schema(max_items = 10)]
    pub priority_classes: Vec<PriorityClass>,
    /// Idle compute is lent by the teams' fair-share weights (default true); else first come,
    /// first served.
    #[serde(default)]
    pub fair_share: Option<bool>,
    /// Compute given to no team is lent too (default false).
    #[serde(default)]
    pub idle_resource_sharing: Option<bool>,
}

/// `POST /api/clusters/{name}/teams`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamRequest {
    /// Lower-case DNS label of at most 40 characters; its namespace is `hyperpod-ns-<teamName>`.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team_name: String,
    /// The team's share per instance type: `count` instances or `accelerators` GPUs.
    #[schema(min_items = 1, max_items = 15)]
    pub resources: Vec<QuotaResource>,
    /// Default `LendAndBorrow`.
    #[serde(default)]
    pub sharing: Option<Sharing>,
    /// Percent of idle compute the team may borrow, 1–500 (default 100); `LendAndBorrow` only.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 500)]
    pub borrow_limit: Option<u32>,
    /// Default `LowerPriority`: the team's higher-priority work preempts its own lower.
    #[serde(default)]
    pub preempt: Option<Preempt>,
    /// 0–100 (default 0), used when the policy's fair share is on.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100)]
    pub fair_share_weight: Option<u8>,
    /// Default true; false keeps the quota but stops it being enforced.
    #[serde(default)]
    pub active: Option<bool>,
}

/// `PATCH /api/clusters/{name}/teams/{team}`: only the fields to change.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamPatch {
    #[schema(min_items = 1, max_items = 15)]
    pub resources: Option<Vec<QuotaResource>>,
    pub sharing: Option<Sharing>,
    #[schema(minimum = 1, maximum = 500)]
    pub borrow_limit: Option<u32>,
    pub preempt: Option<Preempt>,
    #[schema(minimum = 0, maximum = 100)]
    pub fair_share_weight: Option<u8>,
    pub active: Option<bool>,
}

/// A team as SageMaker keeps it, with where its workloads go.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamView {
    pub name: String,
    /// Where its workloads run.
    pub namespace: String,
    /// What its workloads name as `kueue.x-k8s.io/queue-name`.
    pub queue: String,
    pub cluster_queue: String,
    pub resources: Vec<QuotaResource>,
    pub sharing: Sharing,
    pub borrow_limit: Option<u32>,
    pub preempt: Preempt,
    pub fair_share_weight: u8,
    pub active: bool,
    /// SageMaker's status: `Creating`, `Created`, `CreateFailed`, `Updating`, `Updated`, …
    pub status: String,
    pub failure_reason: Option<String>,
    /// The operation changing it right now.
    pub operation_id: Option<String>,
    /// Its share as Kueue counts it now (quota, in use, borrowed, lent, per flavor); none
    /// until Kueue has its ClusterQueue.
    pub usage: Option<TeamUsage>,
}

/// The cluster's scheduling policy as SageMaker keeps it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    pub priority_classes: Vec<PriorityClass>,
    /// What a workload of each class is labelled `kueue.x-k8s.io/priority-class` with.
    pub priority_labels: Vec<String>,
    pub fair_share: bool,
    pub idle_resource_sharing: bool,
    pub status: String,
    pub failure_reason: Option<String>,
}

/// One instance type: what the instance groups hold and how much of it the teams were given.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityView {
    pub instance_type: String,
    pub instances: u32,
    pub accelerators: u32,
    /// Instances given to teams (accelerator quotas counted as the instances they fill).
    pub allocated_instances: f64,
}

/// `GET /api/clusters/{name}/teams`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GovernanceView {
    pub cluster: String,
    /// Whether the task governance add-on is active (the `taskGovernance` feature).
    pub enabled: bool,
    pub policy: Option<PolicyView>,
    pub teams: Vec<TeamView>,
    pub capacity: Vec<CapacityView>,
}

/// What the edge needs of a governed cluster: its HyperPod ARN and instance groups.
pub(super) struct Governed {
    pub(super) arn: String,
    /// Instances per instance type.
    pub(super) capacity: BTreeMap<String, u32>,
}

async fn governed(engine: &Engine, name: &str, need_addon: bool) -> ApiResult<(Governed, bool)> {
    // The ARN the hyperpod (or import) stage recorded: the groups below describe the cluster
    // once, and say so when it is not there.
    let record = super::cluster::records::live_cluster(engine, name).await?;
    let Some(arn) = super::ClusterResources::of(&record.resources).hyperpod_cluster_arn else {
        return Err(ApiError::Conflict {
            slug: ProblemType::StageNotReady,
            detail: format!("`{name}` has no HyperPod cluster yet: run the hyperpod stage first"),
            field: None,
            operation_id: None,
        });
    };
    let enabled =
        crate::service::features::addon_active(engine, name, TASK_GOVERNANCE_ADDON).await?;
    if need_addon && !enabled {
        return Err(ApiError::Conflict {
            slug: ProblemType::FeaturePrerequisite,
            detail: format!("task governance is off on `{name}`: enable taskGovernance first (features_update with {{\"taskGovernance\": true}})"),
            field: Some("taskGovernance".into()),
            operation_id: None,
        });
    }
    let mut capacity = BTreeMap::new();
    for g in super::live_groups(engine, name).await? {
        *capacity.entry(g.instance_type.clone()).or_insert(0) += g.instance_count;
    }
    Ok((Governed { arn, capacity }, enabled))
}

/// `GET /api/clusters/{name}/teams`: policy, teams and what the instance groups hold.
pub async fn view(engine: &Engine, name: &str) -> ApiResult<GovernanceView> {
    let (g, enabled) = governed(engine, name, false).await?;
    let gov = &engine.cloud().governance;
    let (configs, quotas) = if enabled {
        (
            gov.scheduler_configs(&g.arn).await.map_err(cloud_err)?,
            gov.compute_quotas(&g.arn).await.map_err(cloud_err)?,
        )
    } else {
        (vec![], vec![])
    };
    let running = super::shared::submit::active_operations(engine.store(), name).await?;
    let mut teams: Vec<TeamView> = quotas
        .into_iter()
        .map(|q| TeamView {
            namespace: team_namespace(&q.team),
            queue: team_queue(&q.team),
            cluster_queue: team_cluster_queue(&q.team),
            operation_id: running
                .iter()
                .find(|o| o.params["workload"] == format!("team/{}", q.team))
                .map(|o| o.id.clone()),
            name: q.team,
            resources: {
                // Reported in no promised order: by instance type here.
                let mut r = q.quota.resources;
                r.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
                r
            },
            sharing: q.quota.sharing,
            borrow_limit: q.quota.borrow_limit,
            preempt: q.quota.preempt,
            fair_share_weight: q.quota.fair_share_weight,
            active: q.quota.active,
            status: q.status,
            failure_reason: q.failure_reason,
            usage: None,
        })
        .collect();
    if !teams.is_empty() {
        let target = crate::service::cluster::records::kube_target(engine, name).await?;
        let names: Vec<String> = teams.iter().map(|t| t.name.clone()).collect();
        let mut usage = usage::usage(engine, &target, &names).await?;
        for t in &mut teams {
            t.usage = usage.remove(&t.name);
        }
    }
    let capacity = g
        .capacity
        .iter()
        .map(|(t, n)| CapacityView {
            instance_type: t.clone(),
            instances: *n,
            accelerators: n * crate::cloud::gpus_per_instance(t),
            allocated_instances: teams
                .iter()
                .flat_map(|t| t.resources.iter())
                .filter(|r| &r.instance_type == t)
                .map(instances_of)
                .sum(),
        })
        .collect();
    Ok(GovernanceView {
        cluster: name.to_string(),
        enabled,
        // SageMaker lists priority classes in no promised order: highest weight first here.
        policy: configs
            .into_iter()
            .next()
            .map(|mut c| {
                c.policy.priority_classes = c.policy.by_weight();
                c
            })
            .map(|c| PolicyView {
                priority_labels: c
                    .policy
                    .priority_classes
                    .iter()
                    .map(|p| priority_label(&p.name))
                    .collect(),
                priority_classes: c.policy.priority_classes,
                fair_share: c.policy.fair_share,
                idle_resource_sharing: c.policy.idle_resource_sharing,
                status: c.status,
                failure_reason: c.failure_reason,
            }),
        teams,
        capacity,
    })
}

pub async fn team(engine: &Engine, name: &str, team: &str) -> ApiResult<TeamView> {
    view(engine, name)
        .await?
        .teams
        .into_iter()
        .find(|t| t.name == team)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "team `{}` on `{name}`",
                super::cluster::validate::truncate(team)
            ))
        })
}

async fn quotas(engine: &Engine, g: &Governed) -> ApiResult<Vec<(String, TeamQuota)>> {
    Ok(engine
        .cloud()
        .governance
        .compute_quotas(&g.arn)
        .await
        .map_err(cloud_err)?
        .into_iter()
        .map(|q| (q.team, q.quota))
        .collect())
}

/// The parameters of a `team-create`, or why not.
pub async fn create_params(
    engine: &Engine,
    name: &str,
    req: &TeamRequest,
) -> ApiResult<TeamParams> {
    check_name(&req.team_name)?;
    let (g, _) = governed(engine, name, true).await?;
    let sharing = req.sharing.unwrap_or(Sharing::LendAndBorrow);
    let quota = TeamQuota {
        resources: req.resources.clone(),
        sharing,
        borrow_limit: req
            .borrow_limit
            .or((sharing == Sharing::LendAndBorrow).then_some(100)),
        preempt: req.preempt.unwrap_or(Preempt::LowerPriority),
        fair_share_weight: req.fair_share_weight.unwrap_or(0),
        active: req.active.unwrap_or(true),
    };
    let others = quotas(engine, &g).await?;
    if others.iter().any(|(t, _)| *t == req.team_name) {
        return Err(ApiError::Conflict {
            slug: ProblemType::TeamExists,
            detail: format!(
                "team `{}` already exists on `{name}`: change it with team_update",
                req.team_name
            ),
            field: Some("teamName".into()),
            operation_id: None,
        });
    }
    check_quota(&g, &req.team_name, &quota, &others)?;
    Ok(TeamParams {
        hyperpod_arn: g.arn,
        workload: format!("team/{}", req.team_name),
        team: req.team_name.clone(),
        quota: Some(quota),
    })
}

/// The parameters of a `team-update`; `None` when the patch changes nothing.
pub async fn update_params(
    engine: &Engine,
    name: &str,
    team: &str,
    patch: &TeamPatch,
) -> ApiResult<Option<TeamParams>> {
    let (g, _) = governed(engine, name, true).await?;
    let all = quotas(engine, &g).await?;
    let Some((_, current)) = all.iter().find(|(t, _)| t == team) else {
        return Err(ApiError::not_found(format!(
            "team `{}` on `{name}`",
            super::cluster::validate::truncate(team)
        )));
    };
    let sharing = patch.sharing.unwrap_or(current.sharing);
    let borrow_limit = match (sharing, patch.borrow_limit) {
        (_, Some(b)) => Some(b),
        (Sharing::LendAndBorrow, None) => current.borrow_limit.or(Some(100)),
        _ => None,
    };
    let quota = TeamQuota {
        resources: patch
            .resources
            .clone()
            .unwrap_or_else(|| current.resources.clone()),
        sharing,
        borrow_limit,
        preempt: patch.preempt.unwrap_or(current.preempt),
        fair_share_weight: patch.fair_share_weight.unwrap_or(current.fair_share_weight),
        active: patch.active.unwrap_or(current.active),
    };
    if quota.same_as(current) {
        return Ok(None);
    }
    check_quota(&g, team, &quota, &all)?;
    Ok(Some(TeamParams {
        hyperpod_arn: g.arn,
        workload: format!("team/{team}"),
        team: team.to_string(),
        quota: Some(quota),
    }))
}

pub async fn delete_params(engine: &Engine, name: &str, team: &str) -> ApiResult<TeamParams> {
    let (g, _) = governed(engine, name, true).await?;
    if !quotas(engine, &g).await?.iter().any(|(t, _)| t == team) {
        return Err(ApiError::not_found(format!(
            "team `{}` on `{name}`",
            super::cluster::validate::truncate(team)
        )));
    }
    Ok(TeamParams {
        hyperpod_arn: g.arn,
        workload: format!("team/{team}"),
        team: team.to_string(),
        quota: None,
    })
}

/// The parameters of a `scheduling-policy`; `None` when the policy is already so.
pub async fn policy_params(
    engine: &Engine,
    name: &str,
    req: &PolicyRequest,
) -> ApiResult<Option<PolicyParams>> {
    let policy = SchedulerPolicy {
        priority_classes: req.priority_classes.clone(),
        fair_share: req.fair_share.unwrap_or(true),
        idle_resource_sharing: req.idle_resource_sharing.unwrap_or(false),
    };
    check_policy(&policy)?;
    let (g, _) = governed(engine, name, true).await?;
    let current = engine
        .cloud()
        .governance
        .scheduler_configs(&g.arn)
        .await
        .map_err(cloud_err)?
        .into_iter()
        .next();
    if current.is_some_and(|c| c.policy.same_as(&policy) && !c.status.ends_with("Failed")) {
        return Ok(None);
    }
    Ok(Some(PolicyParams {
        hyperpod_arn: g.arn,
        policy,
    }))
}
