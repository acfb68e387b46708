//! The simulated SageMaker's checks of a HyperPod software update (`UpdateClusterSoftware`):
//! what it refuses of the groups, the batches, the wait, the alarms and the image.

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
