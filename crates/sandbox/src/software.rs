//! The simulated SageMaker's HyperPod software updates (`UpdateClusterSoftware`): what it
//! refuses of the groups, the batches, the wait, the alarms and the image; then the rollout,
//! batch by batch with the wait between, the `SoftwareUpdateStatus` and image releases each group
//! reports (`ClusterInstanceGroupDetails`), and an alarm that fires during a batch rolling the
//! update back (`AutoRollbackConfiguration`).

use serde_json::{json, Value};

use super::{now_ms, Res, Sandbox};
use cloud::*;

/// What SageMaker refuses of an `UpdateClusterSoftware` (the SageMaker API Reference:
/// `UpdateClusterSoftware`, `DeploymentConfiguration`, `CapacitySizeConfig`, `AlarmDetails`): a
/// group the cluster lacks, a batch under 1 (or a percentage over 100), a wait over 3600 s,
/// more than 10 alarms or an empty name, an image that is neither `default` nor an AMI ID.
pub(super) fn check_software_update(
    name: &str,
    u: &SoftwareUpdate,
    groups: &[String],
) -> CloudResult<()> {
    let invalid = |why: String| {
        Err(CloudError::new(
            "sagemaker",
            "UpdateClusterSoftware",
            "ValidationException",
            why,
        ))
    };
    if let Some(g) = u.instance_groups.iter().find(|g| !groups.contains(g)) {
        return invalid(format!(
            "Instance group {g} does not exist in cluster {name}"
        ));
    }
    match u.batch {
        UpdateBatch::Instances(0) | UpdateBatch::Percent(0) => {
            return invalid("MaximumBatchSize.Value must be at least 1".into())
        }
        UpdateBatch::Percent(p) if p > 100 => {
            return invalid(format!("MaximumBatchSize of {p}% is over 100%"))
        }
        _ => {}
    }
    if u.wait_seconds.is_some_and(|w| w > 3600) {
        return invalid("WaitIntervalInSeconds must be between 0 and 3600".into());
    }
    if u.rollback_alarms.len() > 10 || u.rollback_alarms.iter().any(|a| a.trim().is_empty()) {
        return invalid("AutoRollbackConfiguration takes 1 to 10 alarms, each named".into());
    }
    if let Some(image) = u.image_id.as_deref() {
        if image != "default" && !cloud::is_ami_id(image) {
            return invalid(format!("ImageId {image} is neither default nor an AMI ID"));
        }
    }
    Ok(())
}

/// What SageMaker refuses of a group's `ScheduledUpdateConfig`: a `ScheduleExpression` outside
/// the cron form its pattern allows, or a rolling policy it would refuse of an update.
pub(super) fn check_schedules(op: &str, groups: &[InstanceGroupSpec]) -> CloudResult<()> {
    for g in groups {
        let Some(s) = &g.scheduled_update else {
            continue;
        };
        if !cloud::is_schedule_expression(&s.schedule_expression) {
            return Err(CloudError::new(
                "sagemaker",
                op,
                "ValidationException",
                format!(
                    "1 validation error detected: Value '{}' at 'instanceGroups.{}.member.scheduledUpdateConfig.scheduleExpression' failed to satisfy constraint: Member must satisfy regular expression pattern: cron\\(...\\)",
                    s.schedule_expression, g.name
                ),
            ));
        }
        let as_update = SoftwareUpdate {
            instance_groups: Vec::new(),
            batch: s.batch,
            wait_seconds: s.wait_seconds,
            rollback_alarms: s.rollback_alarms.clone(),
            image_id: None,
        };
        check_software_update(&g.name, &as_update, &[])?;
    }
    Ok(())
}

/// `cloudwatch:AlarmFires=N`: the next software update that names rollback alarms sees its
/// first alarm fire during its Nth batch, and rolls back (`AutoRollbackConfiguration`).
pub(super) const ALARM_FAULT: &str = "cloudwatch:AlarmFires";
/// The HyperPod release clusters launch with, and the newest one an update brings.
pub(super) const LAUNCH_RELEASE: &str = "2026.11.10";
pub(super) const NEWEST_RELEASE: &str = "2026.12.01";
/// A batch of nodes re-imaged, and a rollback of the batches patched so far.
const PATCH_SECS: f64 = 600.0;

/// Where a rolling update is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Rolling,
    Done,
    RollingBack,
    RolledBack,
}

/// Starts an update on the cluster's record: its plan, the groups and batches it covers, and
/// (with the alarm fault, and alarms to watch) the batch whose alarm fires. What the update
/// before it ended with is settled first.
pub(super) fn begin(sandbox: &Sandbox, data: &mut Value, u: &SoftwareUpdate, groups: &[String]) {
    settle(sandbox, data);
    let scope: Vec<String> = groups
        .iter()
        .filter(|g| u.instance_groups.is_empty() || u.instance_groups.contains(g))
        .cloned()
        .collect();
    let nodes: u32 = data["instanceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| scope.iter().any(|s| g["name"] == s.as_str()))
        .filter_map(|g| g["instanceCount"].as_u64())
        .sum::<u64>() as u32;
    let size = match u.batch {
        UpdateBatch::Instances(n) => n.max(1),
        UpdateBatch::Percent(p) => (nodes * p).div_ceil(100).max(1),
    };
    let batches = nodes.max(1).div_ceil(size);
    let alarm_batch = match u.rollback_alarms.is_empty() {
        true => 0,
        false => sandbox
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(ALARM_FAULT),
    };
    data["softwareUpdate"] = json!({
        "plan": u, "scope": scope, "startedMs": now_ms(), "batches": batches,
        "waitSeconds": u.wait_seconds.unwrap_or(0),
        "alarmBatch": (alarm_batch > 0 && alarm_batch <= batches).then_some(alarm_batch),
        "alarm": u.rollback_alarms.first(),
    });
}

/// Records what the last update ended with: a finished one's groups run the newest release,
/// patched when it finished; a rolled-back one changed nothing.
fn settle(sandbox: &Sandbox, data: &mut Value) {
    if phase(sandbox, data) != Some(Phase::Done) {
        return;
    }
    let at = clock::rfc3339_ms(finished_ms(sandbox, &data["softwareUpdate"]));
    for g in scope(data) {
        data["release"][&g] = json!(NEWEST_RELEASE);
        data["softwareUpdates"][&g] = json!(at);
    }
}

fn scope(data: &Value) -> Vec<String> {
    serde_json::from_value(data["softwareUpdate"]["scope"].clone()).unwrap_or_default()
}

/// Simulated seconds: the rollout's length, and when its alarm fires (if it does).
fn timeline(u: &Value) -> (f64, Option<f64>) {
    let batches = u["batches"].as_f64().unwrap_or(1.0);
    let wait = u["waitSeconds"].as_f64().unwrap_or(0.0);
    let done = batches * PATCH_SECS + (batches - 1.0) * wait;
    let fires = u["alarmBatch"]
        .as_f64()
        .map(|k| (k - 1.0) * (PATCH_SECS + wait) + PATCH_SECS / 2.0);
    (done, fires)
}

fn phase(sandbox: &Sandbox, data: &Value) -> Option<Phase> {
    let u = &data["softwareUpdate"];
    let started = u["startedMs"].as_i64()?;
    let elapsed = sandbox.simulated_secs(started, now_ms());
    Some(match timeline(u) {
        (_, Some(fires)) if elapsed >= fires + PATCH_SECS => Phase::RolledBack,
        (_, Some(fires)) if elapsed >= fires => Phase::RollingBack,
        (done, _) if elapsed >= done => Phase::Done,
        _ => Phase::Rolling,
    })
}

fn finished_ms(sandbox: &Sandbox, u: &Value) -> i64 {
    let started = u["startedMs"].as_i64().unwrap_or_default();
    started + (timeline(u).0 * 1000.0 / sandbox.time_scale) as i64
}

/// Whether an update is rolling forward or back (the cluster is `SystemUpdating`).
pub(super) fn rolling(sandbox: &Sandbox, res: &Res) -> bool {
    matches!(
        phase(sandbox, &res.data),
        Some(Phase::Rolling | Phase::RollingBack)
    )
}

/// A group's software as `DescribeCluster` reports it.
pub(super) fn group_state(sandbox: &Sandbox, res: &Res, group: &str) -> GroupSoftwareState {
    let data = &res.data;
    let settled = data["release"][group]
        .as_str()
        .unwrap_or(LAUNCH_RELEASE)
        .to_string();
    let covered = scope(data).iter().any(|g| g == group);
    let now = phase(sandbox, data).filter(|_| covered);
    let current = match now {
        Some(Phase::Done) => NEWEST_RELEASE.to_string(),
        _ => settled,
    };
    let desired = match now {
        Some(Phase::Rolling) => NEWEST_RELEASE.to_string(),
        _ => current.clone(),
    };
    GroupSoftwareState {
        image_status: Some(
            match current == NEWEST_RELEASE {
                true => "UpToDate",
                false => "UpdateAvailable",
            }
            .into(),
        ),
        current_release: Some(current),
        desired_release: Some(desired),
        update_status: now.map(|p| {
            match p {
                Phase::Rolling => "InProgress",
                Phase::Done => "Succeeded",
                Phase::RollingBack => "RollbackInProgress",
                Phase::RolledBack => "RollbackComplete",
            }
            .into()
        }),
    }
}

/// When a group's nodes were last patched (`LastSoftwareUpdateTime`): a finished update's end,
/// else what was settled before (a rolled-back update patched nothing that stayed).
pub(super) fn last_patched(sandbox: &Sandbox, res: &Res, group: &str) -> Option<String> {
    let data = &res.data;
    if phase(sandbox, data) == Some(Phase::Done) && scope(data).iter().any(|g| g == group) {
        return Some(clock::rfc3339_ms(finished_ms(
            sandbox,
            &data["softwareUpdate"],
        )));
    }
    data["softwareUpdates"][group].as_str().map(str::to_string)
}
