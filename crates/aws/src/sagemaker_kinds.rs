//! SageMaker HyperPod's request and answer shapes, translated to and from the port's: an
//! instance group as CreateCluster and UpdateCluster take it and DescribeCluster reports it, and
//! the deployment a software update rolls with.

use aws_sdk_sagemaker::types::{
    CapacitySizeConfig, ClusterCapacityRequirements, ClusterEbsVolumeConfig,
    ClusterInstanceGroupSpecification, ClusterInstanceStorageConfig, ClusterInstanceType,
    ClusterLifeCycleConfig, ClusterSpotOptions, DeepHealthCheckType, DeploymentConfiguration,
    NodeUnavailabilityType, RollingDeploymentPolicy, VpcConfig,
};

use cloud::*;

pub(super) fn vpc(subnets: &[String], groups: &[String]) -> VpcConfig {
    VpcConfig::builder()
        .set_subnets(Some(subnets.to_vec()))
        .set_security_group_ids(Some(groups.to_vec()))
        .build()
}

/// One instance group in the shape CreateCluster (and UpdateCluster) accept. `ThreadsPerCore`
/// is always sent.
/// A group's settings as DescribeCluster reports them, in the shape UpdateCluster takes back.
/// `None` when the answer lacks what a spec needs (the role or the lifecycle scripts).
pub(super) fn described_spec(
    g: &aws_sdk_sagemaker::types::ClusterInstanceGroupDetails,
) -> Option<InstanceGroupSpec> {
    let lifecycle = g.life_cycle_config()?;
    let capacity = match (g.training_plan_arn(), g.capacity_requirements()) {
        (Some(arn), _) if !arn.is_empty() => Capacity::TrainingPlan {
            arn: arn.to_string(),
        },
        (_, Some(c)) if c.spot().is_some() => Capacity::Spot,
        _ => Capacity::OnDemand,
    };
    let vpc = g.override_vpc_config();
    Some(InstanceGroupSpec {
        name: g.instance_group_name()?.to_string(),
        instance_type: g.instance_type()?.as_str().to_string(),
        instance_count: g
            .target_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        execution_role_arn: g.execution_role()?.to_string(),
        lifecycle_source_s3_uri: lifecycle.source_s3_uri()?.to_string(),
        lifecycle_on_create: lifecycle.on_create()?.to_string(),
        threads_per_core: g
            .threads_per_core()
            .and_then(|n| u8::try_from(n).ok())
            .unwrap_or(1),
        ebs_volume_gb: g
            .instance_storage_configs()
            .iter()
            .find_map(|c| c.as_ebs_volume_config().ok()?.volume_size_in_gb())
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        deep_health_checks: g
            .on_start_deep_health_checks()
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        capacity,
        subnet_ids: vpc.map(|v| v.subnets().to_vec()).unwrap_or_default(),
        security_group_ids: vpc
            .map(|v| v.security_group_ids().to_vec())
            .unwrap_or_default(),
        network_interface: g
            .network_interface()
            .and_then(|n| n.interface_type())
            .map(|t| t.as_str().to_string()),
        scheduled_update: g.scheduled_update_config().and_then(described_schedule),
    })
}

/// A group's `ScheduledUpdateConfig` as described: its expression and its rolling policy.
fn described_schedule(
    s: &aws_sdk_sagemaker::types::ScheduledUpdateConfig,
) -> Option<ScheduledUpdate> {
    let deployment = s.deployment_config();
    let size = deployment
        .and_then(|d| d.rolling_update_policy())
        .and_then(|p| p.maximum_batch_size());
    let value = size.and_then(|b| b.value()).unwrap_or(ROLLING_BATCH).max(1) as u32;
    let batch = match size.and_then(|b| b.r#type()) {
        Some(NodeUnavailabilityType::CapacityPercentage) => UpdateBatch::Percent(value),
        _ => UpdateBatch::Instances(value),
    };
    Some(ScheduledUpdate {
        schedule_expression: s.schedule_expression()?.to_string(),
        batch,
        wait_seconds: deployment
            .and_then(|d| d.wait_interval_in_seconds())
            .and_then(|w| u32::try_from(w).ok()),
        rollback_alarms: deployment
            .map(|d| {
                d.auto_rollback_configuration()
                    .iter()
                    .filter_map(|a| a.alarm_name().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

pub(super) fn group_spec(g: &InstanceGroupSpec) -> ClusterInstanceGroupSpecification {
    let mut b = ClusterInstanceGroupSpecification::builder()
        .instance_group_name(&g.name)
        .instance_type(ClusterInstanceType::from(g.instance_type.as_str()))
        .instance_count(i32::try_from(g.instance_count).unwrap_or(i32::MAX))
        .execution_role(&g.execution_role_arn)
        .life_cycle_config(
            ClusterLifeCycleConfig::builder()
                .source_s3_uri(&g.lifecycle_source_s3_uri)
                .on_create(&g.lifecycle_on_create)
                .build(),
        )
        .threads_per_core(i32::from(g.threads_per_core))
        .instance_storage_configs(ClusterInstanceStorageConfig::EbsVolumeConfig(
            ClusterEbsVolumeConfig::builder()
                .volume_size_in_gb(i32::try_from(g.ebs_volume_gb).unwrap_or(i32::MAX))
                .build(),
        ))
        .set_on_start_deep_health_checks((!g.deep_health_checks.is_empty()).then(|| {
            g.deep_health_checks
                .iter()
                .map(|c| DeepHealthCheckType::from(c.as_str()))
                .collect()
        }))
        .override_vpc_config(vpc(&g.subnet_ids, &g.security_group_ids));
    match &g.capacity {
        Capacity::OnDemand => {}
        Capacity::Spot => {
            b = b.capacity_requirements(
                ClusterCapacityRequirements::builder()
                    .spot(ClusterSpotOptions::builder().build())
                    .build(),
            )
        }
        Capacity::TrainingPlan { arn } => b = b.training_plan_arn(arn),
    }
    if let Some(s) = &g.scheduled_update {
        b = b.scheduled_update_config(
            aws_sdk_sagemaker::types::ScheduledUpdateConfig::builder()
                .schedule_expression(&s.schedule_expression)
                .deployment_config(rolling_deployment(&SoftwareUpdate {
                    instance_groups: Vec::new(),
                    batch: s.batch,
                    wait_seconds: s.wait_seconds,
                    rollback_alarms: s.rollback_alarms.clone(),
                    image_id: None,
                }))
                .build(),
        );
    }
    if let Some(kind) = &g.network_interface {
        b = b.network_interface(
            aws_sdk_sagemaker::types::ClusterNetworkInterface::builder()
                .interface_type(aws_sdk_sagemaker::types::ClusterInterfaceType::from(
                    kind.as_str(),
                ))
                .build(),
        );
    }
    b.build()
}

/// Rolling for real, always with an explicit policy (without a `DeploymentConfig`, SageMaker
/// chooses the batches): the update's batch forward and back, its wait and its alarms.
pub(super) fn rolling_deployment(update: &SoftwareUpdate) -> DeploymentConfiguration {
    let (kind, value) = match update.batch {
        UpdateBatch::Instances(n) => (NodeUnavailabilityType::InstanceCount, n),
        UpdateBatch::Percent(p) => (NodeUnavailabilityType::CapacityPercentage, p),
    };
    let value = i32::try_from(value).unwrap_or(ROLLING_BATCH);
    let batch = || {
        CapacitySizeConfig::builder()
            .r#type(kind.clone())
            .value(value)
            .build()
    };
    let alarms = update.rollback_alarms.iter().map(|a| {
        aws_sdk_sagemaker::types::AlarmDetails::builder()
            .alarm_name(a)
            .build()
    });
    let mut b = DeploymentConfiguration::builder()
        .set_wait_interval_in_seconds(update.wait_seconds.and_then(|w| i32::try_from(w).ok()));
    for a in alarms {
        b = b.auto_rollback_configuration(a);
    }
    b.rolling_update_policy(
        RollingDeploymentPolicy::builder()
            .maximum_batch_size(batch())
            .rollback_maximum_batch_size(batch())
            .build(),
    )
    .build()
}
