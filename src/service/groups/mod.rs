//! Instance groups as HyperPod describes them (with the specs recorded for the ones this
//! control plane made), and the parameters of adding, changing and removing one.

pub mod affected;
pub mod software;
pub mod start;

mod nodes;

pub use nodes::*;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::params::hyperpod_params;
use crate::service::cluster::records::live_cluster;
use crate::service::cluster::requests::{CapacityType, CreateHyperPodRequest, NetworkInterface};
use crate::service::steps;
use crate::service::{validate, ClusterResources, HyperPodParams};

/// One instance group: what was asked for (fixed for its life) and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    pub name: String,
    pub instance_type: String,
    /// Fixed for the group's life.
    pub capacity_type: CapacityType,
    pub training_plan_arn: Option<String>,
    pub target_count: u32,
    pub current_count: u32,
    pub threads_per_core: u8,
    pub subnet_ids: Vec<String>,
    pub deep_health_checks: Vec<String>,
    pub volume_size_gb: u32,
    /// Fixed for the group's life.
    pub network_interface: NetworkInterface,
    /// Whether the instance type carries EFA.
    pub efa_supported: bool,
    /// The on-create lifecycle script (under the cluster's lifecycle prefix).
    pub lifecycle_on_create: String,
    /// When SageMaker rolls new HyperPod software onto it by itself, if it does.
    pub software_schedule: Option<crate::cloud::ScheduledUpdate>,
}

/// `PATCH /api/clusters/{name}/instance-groups/{group}`: only the fields being changed.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateGroupRequest {
    /// The group's target count (0 keeps the group with no nodes).
    #[schema(minimum = 0, maximum = 1000)]
    pub instance_count: Option<i64>,
    /// Run `InstanceStress` and `InstanceConnectivity` on the group's new nodes.
    pub deep_health_checks: Option<bool>,
    /// Accepted only when equal to the current one: capacity is fixed for a group's life.
    pub capacity_type: Option<CapacityType>,
    pub training_plan_arn: Option<String>,
    /// Accepted only when equal to the current one: fixed for the group's life.
    pub network_interface: Option<NetworkInterface>,
    /// Another on-create lifecycle script for new nodes: a `.sh` file already under the
    /// cluster's lifecycle prefix in its bucket.
    pub lifecycle_on_create: Option<String>,
    /// When SageMaker rolls new HyperPod software onto the group by itself, and how.
    pub software_schedule: Option<SoftwareSchedule>,
}

/// A group's software update schedule (`ScheduledUpdateConfig`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SoftwareSchedule {
    /// `cron(minutes hours day-of-month month day-of-week year)`, as SageMaker takes it, e.g.
    /// `cron(0 3 ? * 1#1 *)`: 03:00 UTC on each month's first Sunday.
    #[schema(
        max_length = 256,
        pattern = r"^cron\((?:[0-5][0-9]|[0-9]|) (?:[01][0-9]|2[0-3]|[0-9]) (?:[1-9]|0[1-9]|[12][0-9]|3[01]|\?) (?:[1-9]|0[1-9]|1[0-2]|\*|\*/(?:[1-9]|1[0-2])|) (?:MON|TUE|WED|THU|FRI|SAT|SUN|[1-7]|\?|L|(?:[1-7]#[1-5])|(?:[1-7]L)) (?:20[2-9][0-9]|\*|)\)$"
    )]
    pub schedule_expression: String,
    /// Nodes at a time (default 1), or `batchPercent`.
    #[schema(minimum = 1, maximum = 10000)]
    pub batch_instances: Option<u32>,
    #[schema(minimum = 1, maximum = 100)]
    pub batch_percent: Option<u32>,
    #[schema(maximum = 3600)]
    pub wait_seconds: Option<u32>,
    #[schema(min_items = 1, max_items = 10)]
    pub rollback_alarms: Option<Vec<String>>,
}

pub(super) fn interface_name(spec: &crate::cloud::InstanceGroupSpec) -> NetworkInterface {
    match spec.network_interface.as_deref() {
        Some("efa-only") => NetworkInterface::EfaOnly,
        _ => NetworkInterface::Standard,
    }
}

pub(super) fn capacity_name(c: &crate::cloud::Capacity) -> (CapacityType, Option<String>) {
    let plan = match c {
        crate::cloud::Capacity::TrainingPlan { arn } => Some(arn.clone()),
        _ => None,
    };
    (CapacityType::of(c), plan)
}

/// The cluster's groups as HyperPod has them now, with their specs (see
/// [`steps::groups::live_specs`]), and the description they were read from.
async fn described_groups(
    engine: &Engine,
    name: &str,
) -> ApiResult<(
    Vec<crate::cloud::InstanceGroupSpec>,
    Vec<crate::cloud::InstanceGroupStatus>,
)> {
    let not_ready = || ApiError::Conflict {
        slug: ProblemType::StageNotReady,
        detail: format!("`{name}` has no HyperPod cluster yet: run the hyperpod stage first"),
        field: None,
        operation_id: None,
    };
    let record = live_cluster(engine, name).await?;
    let recorded = ClusterResources::of(&record.resources);
    let hyperpod = recorded
        .hyperpod_cluster_name
        .clone()
        .ok_or_else(not_ready)?;
    let described = engine
        .cloud()
        .hyperpod
        .describe_cluster(&hyperpod)
        .await?
        .ok_or_else(not_ready)?
        .instance_groups;
    let specs = steps::groups::live_specs(
        recorded.instance_groups.as_deref().unwrap_or_default(),
        &described,
    );
    Ok((specs, described))
}

/// The cluster's groups, read live: a created cluster's and an imported one's alike.
pub(super) async fn live_groups(
    engine: &Engine,
    name: &str,
) -> ApiResult<Vec<crate::cloud::InstanceGroupSpec>> {
    Ok(described_groups(engine, name).await?.0)
}

pub async fn list_groups(engine: &Engine, name: &str) -> ApiResult<Vec<GroupView>> {
    let (specs, live) = described_groups(engine, name).await?;
    Ok(specs
        .into_iter()
        .map(|g| {
            let status = live.iter().find(|s| s.name == g.name);
            let (capacity_type, training_plan_arn) = capacity_name(&g.capacity);
            let network_interface = interface_name(&g);
            let efa_supported = crate::cloud::efa_supported(&g.instance_type);
            GroupView {
                target_count: status.map(|s| s.target_count).unwrap_or(g.instance_count),
                current_count: status.map(|s| s.current_count).unwrap_or(0),
                capacity_type,
                training_plan_arn,
                name: g.name,
                instance_type: g.instance_type,
                threads_per_core: g.threads_per_core,
                subnet_ids: g.subnet_ids,
                network_interface,
                efa_supported,
                lifecycle_on_create: g.lifecycle_on_create,
                software_schedule: g.scheduled_update,
                deep_health_checks: g.deep_health_checks,
                volume_size_gb: g.ebs_volume_gb,
            }
        })
        .collect())
}

/// Validates a new group: the same rules as the first one, plus a name not in use.
pub async fn add_group_params(
    engine: &Engine,
    name: &str,
    req: &CreateHyperPodRequest,
) -> ApiResult<HyperPodParams> {
    let Some(group) = req.instance_group_name.as_deref() else {
        return Err(ApiError::validation(
            "instanceGroupName",
            "a new instance group needs a name",
        ));
    };
    let existing = live_groups(engine, name).await?;
    if existing.iter().any(|g| g.name == group) {
        return Err(ApiError::validation_hint(
            "instanceGroupName",
            format!("instance group `{group}` already exists"),
            json!({"existing": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
        ));
    }
    if req.instance_count != 0 {
        return hyperpod_params(engine, req).await;
    }
    // A group Karpenter is to govern starts at zero: HyperPod provisions it from pending pods.
    let autoscaling = engine
        .cloud()
        .hyperpod
        .describe_cluster(&crate::service::cluster::records::hyperpod_name_of(engine, name).await?)
        .await?
        .and_then(|c| c.autoscaling)
        .is_some_and(|a| a.enabled);
    if !autoscaling {
        return Err(ApiError::validation_hint(
            "instanceCount",
            "a new instance group starts at zero only under managed autoscaling",
            json!(
                "enable managedAutoscaling first (features_update), or give a count of at least 1"
            ),
        ));
    }
    let mut params = hyperpod_params(
        engine,
        &CreateHyperPodRequest {
            instance_count: 1,
            ..req.clone()
        },
    )
    .await?;
    if params.deep_health_checks
        || matches!(params.capacity, crate::cloud::Capacity::TrainingPlan { .. })
    {
        return Err(ApiError::validation_hint(
            "instanceCount",
            "only a group managed autoscaling can govern starts at zero: on-demand or Spot, without deep health checks",
            json!("give a count of at least 1"),
        ));
    }
    params.instance_count = 0;
    Ok(params)
}

/// What a PATCH means: nothing to do, or a new count. Immutable fields are refused.
pub async fn scale_params(
    engine: &Engine,
    name: &str,
    group: &str,
    req: &UpdateGroupRequest,
) -> ApiResult<Option<steps::groups::ScaleParams>> {
    let existing = live_groups(engine, name).await?;
    let Some(spec) = existing.iter().find(|g| g.name == group) else {
        return Err(ApiError::NotFound {
            what: format!("instance group `{group}` in `{name}`"),
            hint: Some(Box::new(
                json!({"instanceGroups": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
            )),
        });
    };
    let (current_type, current_plan) = capacity_name(&spec.capacity);
    let type_changes = req.capacity_type.is_some_and(|t| t != current_type);
    let plan_changes = req.training_plan_arn.is_some() && req.training_plan_arn != current_plan;
    const REPLACE: &str = "to change it, add a new instance group with the setting you want, move the work, then delete this one";
    if type_changes || plan_changes {
        return Err(ApiError::validation_hint(
            if type_changes { "capacityType" } else { "trainingPlanArn" },
            format!("the capacity of instance group `{group}` is `{}` and is fixed for the group's life", current_type.as_str()),
            json!(REPLACE),
        ));
    }
    if let Some(wanted) = req.network_interface {
        if wanted != interface_name(spec) {
            return Err(ApiError::validation_hint(
                "networkInterface",
                format!(
                    "the network interface of instance group `{group}` is `{}` and is fixed for the group's life",
                    interface_name(spec).as_str()
                ),
                json!(REPLACE),
            ));
        }
    }
    let count = match req.instance_count {
        Some(0) => zero_count(engine, name, group).await?,
        Some(c) => {
            validate::instance_count("instanceCount", c, &spec.instance_type, engine.cloud())
                .await?
        }
        None => spec.instance_count,
    };
    // Only what differs from the group as recorded is sent.
    let checks = req
        .deep_health_checks
        .filter(|on| steps::hyperpod::deep_health_checks(*on) != spec.deep_health_checks);
    let lifecycle = match req.lifecycle_on_create.as_deref() {
        Some(script) if script != spec.lifecycle_on_create => {
            Some(lifecycle_script(engine, spec, script).await?)
        }
        _ => None,
    };
    let schedule = match &req.software_schedule {
        Some(s) => Some(schedule_of(engine, name, s).await?)
            .filter(|s| spec.scheduled_update.as_ref() != Some(s)),
        None => None,
    };
    if count == spec.instance_count && checks.is_none() && lifecycle.is_none() && schedule.is_none()
    {
        return Ok(None);
    }
    Ok(Some(steps::groups::ScaleParams {
        group: group.to_string(),
        instance_count: count,
        deep_health_checks: checks,
        lifecycle_on_create: lifecycle,
        scheduled_update: schedule,
    }))
}

/// A schedule checked as SageMaker would check it: the expression's cron form, and its rolling
/// policy as a software update's (fields named under `softwareSchedule`).
async fn schedule_of(
    engine: &Engine,
    name: &str,
    s: &SoftwareSchedule,
) -> ApiResult<crate::cloud::ScheduledUpdate> {
    if !crate::cloud::is_schedule_expression(s.schedule_expression.trim()) {
        return Err(ApiError::validation_hint(
            "softwareSchedule.scheduleExpression",
            "not a cron expression SageMaker takes: cron(minutes hours day-of-month month day-of-week year)",
            json!("cron(0 3 ? * 1#1 *)"),
        ));
    }
    let asked = software::SoftwareUpdateRequest {
        batch_instances: s.batch_instances,
        batch_percent: s.batch_percent,
        wait_seconds: s.wait_seconds,
        rollback_alarms: s.rollback_alarms.clone(),
        ..Default::default()
    };
    let plan = software::plan(engine, name, &asked)
        .await
        .map_err(|e| e.nested("softwareSchedule"))?;
    Ok(crate::cloud::ScheduledUpdate {
        schedule_expression: s.schedule_expression.trim().to_string(),
        batch: plan.batch,
        wait_seconds: plan.wait_seconds,
        rollback_alarms: plan.rollback_alarms,
    })
}

/// Zero instances is allowed only for a group managed autoscaling governs (Karpenter brings
/// it back when pods are pending).
pub(super) async fn zero_count(engine: &Engine, name: &str, group: &str) -> ApiResult<u32> {
    let target = crate::service::cluster::records::kube_target(engine, name).await?;
    let governed = steps::features::autoscaled_groups(engine.cloud(), &target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    if governed.iter().any(|g| g == group) {
        return Ok(0);
    }
    Err(ApiError::validation_hint(
        "instanceCount",
        format!("instance group `{group}` can scale to zero only under managed autoscaling"),
        json!(format!("1 or more; or enable managedAutoscaling for `{group}` (PATCH /api/clusters/{name}/features) and it scales from zero with demand")),
    ))
}

/// A new on-create script must be a `.sh` file already uploaded under the group's lifecycle
/// prefix: a typo would otherwise fail every new node.
pub(super) async fn lifecycle_script(
    engine: &Engine,
    spec: &crate::cloud::InstanceGroupSpec,
    script: &str,
) -> ApiResult<String> {
    let well_formed = script.len() <= 128
        && script.ends_with(".sh")
        && !script.starts_with('.')
        && script
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let (bucket, prefix) = spec
        .lifecycle_source_s3_uri
        .trim_start_matches("s3://")
        .split_once('/')
        .unwrap_or((spec.lifecycle_source_s3_uri.as_str(), ""));
    let present = engine.cloud().objects.list_objects(bucket, prefix).await?;
    let scripts: Vec<&str> = present
        .iter()
        .filter_map(|k| k.strip_prefix(prefix))
        .filter(|k| k.ends_with(".sh") && !k.contains('/'))
        .collect();
    validate::require(
        well_formed && scripts.contains(&script),
        "lifecycleOnCreate",
        format!(
            "`{}` is not a script under {}",
            validate::truncate(script),
            spec.lifecycle_source_s3_uri
        ),
        json!(scripts),
    )?;
    Ok(script.to_string())
}

/// Validates a group removal: it exists, and it is not the cluster's last group.
pub async fn delete_group_params(engine: &Engine, name: &str, group: &str) -> ApiResult<Value> {
    let existing = live_groups(engine, name).await?;
    if !existing.iter().any(|g| g.name == group) {
        return Err(ApiError::NotFound {
            what: format!("instance group `{group}` in `{name}`"),
            hint: Some(Box::new(
                json!({"instanceGroups": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
            )),
        });
    }
    let target = crate::service::cluster::records::kube_target(engine, name).await?;
    let governed = steps::features::autoscaled_groups(engine.cloud(), &target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    if governed.iter().any(|g| g == group) {
        // AWS: a group deleted while a node class names it makes the class unusable.
        return Err(ApiError::Conflict {
            slug: ProblemType::GroupAutoscaled,
            detail: format!("managed autoscaling governs `{group}`: take it out of managedAutoscalingInstanceGroups (features_update) first"),
            field: Some("group".into()),
            operation_id: None,
        });
    }
    if existing.len() == 1 {
        return Err(ApiError::Conflict {
            slug: ProblemType::LastInstanceGroup,
            detail: format!(
                "`{group}` is the last instance group of `{name}`; delete the cluster instead"
            ),
            field: Some("group".into()),
            operation_id: None,
        });
    }
    Ok(json!({"group": group}))
}
