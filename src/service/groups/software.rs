//! A HyperPod software update as a person plans it: which groups, how many nodes at a time, how
//! long between batches, which CloudWatch alarms roll it back, which image — checked field by
//! field against the cluster's groups and SageMaker's limits (the SageMaker API Reference:
//! `UpdateClusterSoftware`, `DeploymentConfiguration`, `CapacitySizeConfig`) before anything is
//! sent.

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::cloud::{is_ami_id, SoftwareUpdate, UpdateBatch};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

/// `POST /api/clusters/{name}/hyperpod/software-update` (every field optional: an empty body
/// updates every group to HyperPod's latest software, one node at a time).
#[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SoftwareUpdateRequest {
    /// The instance groups to update (default: every group of the cluster).
    pub instance_groups: Option<Vec<String>>,
    /// Nodes updated at a time, and rolled back at a time (default 1). Not with `batchPercent`.
    #[schema(minimum = 1, maximum = 10000)]
    pub batch_instances: Option<u32>,
    /// Or a percentage of the nodes at a time, 1–100.
    #[schema(minimum = 1, maximum = 100)]
    pub batch_percent: Option<u32>,
    /// Seconds to wait between batches, 0–3600.
    #[schema(maximum = 3600)]
    pub wait_seconds: Option<u32>,
    /// CloudWatch alarms (1–10 names) that roll the update back when one fires.
    #[schema(min_items = 1, max_items = 10)]
    pub rollback_alarms: Option<Vec<String>>,
    /// `default` (HyperPod's latest image) or an AMI of this account (unencrypted): a group on a
    /// custom AMI needs one.
    #[schema(pattern = r"^(default|ami-([0-9a-fA-F]{8}|[0-9a-fA-F]{17}))$")]
    pub image_id: Option<String>,
}

/// The update SageMaker will be asked for, or the first field it would refuse.
pub async fn plan(
    engine: &Engine,
    name: &str,
    req: &SoftwareUpdateRequest,
) -> ApiResult<SoftwareUpdate> {
    let groups: Vec<String> = crate::service::list_groups(engine, name)
        .await?
        .into_iter()
        .map(|g| g.name)
        .collect();
    let chosen = req.instance_groups.clone().unwrap_or_default();
    for (i, g) in chosen.iter().enumerate() {
        if !groups.contains(g) {
            return Err(ApiError::validation_hint(
                &format!("instanceGroups[{i}]"),
                format!("`{name}` has no instance group `{}`", truncate(g)),
                json!(groups),
            ));
        }
    }
    let batch = match (req.batch_instances, req.batch_percent) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation(
                "batchPercent",
                "a batch is a node count or a percentage, not both",
            ))
        }
        (Some(n), None) if !(1..=10_000).contains(&n) => {
            return Err(ApiError::validation(
                "batchInstances",
                "at least 1 node at a time",
            ))
        }
        (None, Some(p)) if !(1..=100).contains(&p) => {
            return Err(ApiError::validation("batchPercent", "1 to 100 percent"))
        }
        (Some(n), None) => UpdateBatch::Instances(n),
        (None, Some(p)) => UpdateBatch::Percent(p),
        (None, None) => SoftwareUpdate::default().batch,
    };
    if req.wait_seconds.is_some_and(|w| w > 3600) {
        return Err(ApiError::validation("waitSeconds", "0 to 3600 seconds"));
    }
    let alarms = req.rollback_alarms.clone().unwrap_or_default();
    if req.rollback_alarms.is_some() && !(1..=10).contains(&alarms.len()) {
        return Err(ApiError::validation(
            "rollbackAlarms",
            "1 to 10 CloudWatch alarm names",
        ));
    }
    if let Some(i) = alarms
        .iter()
        .position(|a| a.trim().is_empty() || a.chars().count() > 255)
    {
        return Err(ApiError::validation(
            &format!("rollbackAlarms[{i}]"),
            "an alarm name of 1 to 255 characters",
        ));
    }
    if let Some(image) = req.image_id.as_deref() {
        if image != "default" && !is_ami_id(image) {
            return Err(ApiError::validation_hint(
                "imageId",
                format!("`{}` is neither default nor an AMI ID", truncate(image)),
                json!("default, or ami- and 8 or 17 hexadecimal digits"),
            ));
        }
    }
    Ok(SoftwareUpdate {
        instance_groups: chosen,
        batch,
        wait_seconds: req.wait_seconds,
        rollback_alarms: alarms,
        image_id: req.image_id.clone(),
    })
}

fn truncate(s: &str) -> String {
    crate::service::cluster::validate::truncate(s)
}
