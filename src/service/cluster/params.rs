//! Validation of requests into stage parameters: a cluster, a HyperPod group, a pipeline,
//! an import.

use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::requests::{
    CreateClusterRequest, CreateHyperPodRequest, ImportRequest, PipelineRequest,
};
use crate::service::{validate, ClusterParams, HyperPodParams, PipelineParams};

/// Validates an import and returns (region, parameters).
pub fn import_params(engine: &Engine, req: &ImportRequest) -> ApiResult<(String, Value)> {
    validate::cluster_name("eksClusterName", &req.eks_cluster_name)?;
    unambiguous_roles("eksClusterName", &req.eks_cluster_name)?;
    if let Some(hp) = &req.hyperpod_cluster_name {
        let ok = !hp.is_empty()
            && hp.len() <= 63
            && hp.starts_with(|c: char| c.is_ascii_alphanumeric())
            && hp.ends_with(|c: char| c.is_ascii_alphanumeric())
            && hp.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !ok {
            return Err(ApiError::validation_hint(
                "hyperpodClusterName",
                "not a valid HyperPod cluster name",
                json!(
                    "1–63 letters, digits and hyphens, starting and ending with a letter or digit"
                ),
            ));
        }
    }
    let params = json!({"hyperpodClusterName": req.hyperpod_cluster_name, "imported": true});
    Ok((engine.cloud().network.region(), params))
}

/// Refuses a cluster name whose roles could be another cluster's (see
/// [`crate::service::steps::roles::ambiguous_endings`]).
fn unambiguous_roles(field: &str, name: &str) -> ApiResult<()> {
    match crate::service::steps::roles::ambiguous_ending(name) {
        None => Ok(()),
        Some(ending) => Err(ApiError::validation_hint(
            field,
            format!(
                "a cluster name may not end in `{ending}`: the IAM roles of `{name}` would share \
                 names with those of cluster `{}`",
                &name[..name.len() - ending.len()]
            ),
            json!(format!("any other name, e.g. `{}-1`", name)),
        )),
    }
}

pub async fn cluster_params(
    engine: &Engine,
    req: &CreateClusterRequest,
    first_zone: Option<&str>,
) -> ApiResult<ClusterParams> {
    let cloud = engine.cloud();
    validate::cluster_name("name", &req.name)?;
    unambiguous_roles("name", &req.name)?;
    let region = validate::region("region", req.region.as_deref(), cloud)?;
    let kubernetes_version =
        validate::kubernetes_version("kubernetesVersion", req.kubernetes_version.as_deref())?;
    let all =
        crate::service::shared::reads::retrying(|| cloud.network.describe_availability_zones())
            .await?;
    let zones = match &req.zones {
        Some(names) => {
            if names.len() != 2 || names[0] == names[1] {
                return Err(ApiError::validation_hint(
                    "zones",
                    "exactly two different Availability Zones are needed",
                    json!(all.iter().map(|z| &z.name).collect::<Vec<_>>()),
                ));
            }
            names
                .iter()
                .map(|n| validate::zone("zones", n, &all))
                .collect::<ApiResult<Vec<_>>>()?
        }
        None => {
            let mut zones = Vec::new();
            if let Some(first) = first_zone {
                zones.push(validate::zone("zone", first, &all)?);
            }
            zones.extend(
                all.iter()
                    .filter(|z| Some(z.name.as_str()) != first_zone)
                    .cloned(),
            );
            zones.truncate(2);
            zones
        }
    };
    if zones.len() < 2 {
        return Err(ApiError::validation(
            "zones",
            "the region has fewer than two Availability Zones",
        ));
    }
    let vpc_cidr = match &req.vpc_cidr {
        Some(c) => Some(validate::vpc_cidr("vpcCidr", c, cloud).await?),
        None => None,
    };
    let secondary_cidr = match &req.secondary_cidr {
        Some(c) => Some(validate::secondary_cidr("secondaryCidr", c, vpc_cidr, cloud).await?),
        None => None,
    };
    Ok(ClusterParams {
        region,
        zones,
        vpc_cidr,
        kubernetes_version,
        secondary_cidr,
    })
}

pub async fn hyperpod_params(
    engine: &Engine,
    req: &CreateHyperPodRequest,
) -> ApiResult<HyperPodParams> {
    let cloud = engine.cloud();
    let group = req
        .instance_group_name
        .clone()
        .unwrap_or_else(|| "workers".into());
    validate::instance_group_name("instanceGroupName", &group)?;
    let capacity = validate::capacity(req.capacity_type, req.training_plan_arn.as_deref())?;
    let zones =
        crate::service::shared::reads::retrying(|| cloud.network.describe_availability_zones())
            .await?;
    let plan_zone = match &capacity {
        crate::cloud::Capacity::TrainingPlan { arn } => {
            training_plan_zone(cloud, arn, &req.instance_type).await?
        }
        _ => None,
    };
    let zone_name = match (req.zone.as_deref(), plan_zone.as_deref()) {
        (Some(z), Some(p)) if z != p => {
            return Err(ApiError::validation_hint(
                "zone",
                format!("the training plan reserves its capacity in {p}, not in {}", validate::truncate(z)),
                json!([p]),
            ))
        }
        (Some(z), _) | (None, Some(z)) => z,
        (None, None) => {
            return Err(ApiError::validation_hint(
                "zone",
                "an Availability Zone is required (it may be omitted only with a training plan, whose reservation decides it)",
                json!(zones.iter().map(|z| &z.name).collect::<Vec<_>>()),
            ))
        }
    };
    let zone = validate::zone("zone", zone_name, &zones)?;
    validate::instance_type_in_zone("instanceType", &req.instance_type, &zone, &zones, cloud)
        .await?;
    let instance_count = validate::instance_count(
        "instanceCount",
        req.instance_count,
        &req.instance_type,
        cloud,
    )
    .await?;
    let volume_size_gb = validate::volume_size("volumeSizeGb", req.volume_size_gb)?;
    let network_interface = validate::network_interface(
        "networkInterface",
        req.network_interface,
        &req.instance_type,
    )?;
    Ok(HyperPodParams {
        instance_group_name: group,
        instance_type: req.instance_type.clone(),
        instance_count,
        zone: zone.name,
        zone_id: zone.id,
        capacity,
        deep_health_checks: req.deep_health_checks.unwrap_or(false),
        volume_size_gb,
        network_interface,
        verify_dependencies: None,
        compute_subnet_size: validate::compute_subnet_size(
            "computeSubnetSize",
            req.compute_subnet_size,
        )?,
    })
}

/// The AZ a training plan reserves for this instance type, from the plan's reservation
/// details (never from its ARN). `None` when the plan does not say.
pub(in crate::service) async fn training_plan_zone(
    cloud: &crate::cloud::Cloud,
    arn: &str,
    instance_type: &str,
) -> ApiResult<Option<String>> {
    let plans =
        crate::service::shared::reads::retrying(|| cloud.hyperpod.list_training_plans()).await?;
    let Some(plan) = plans.iter().find(|p| p.arn == arn) else {
        return Err(ApiError::validation_hint(
            "trainingPlanArn",
            format!(
                "the account has no training plan `{}`",
                validate::truncate(arn)
            ),
            json!(plans.iter().map(|p| &p.arn).collect::<Vec<_>>()),
        ));
    };
    if plan.reservations.is_empty() {
        return Ok(None);
    }
    let bare = |t: &str| t.trim_start_matches("ml.").to_string();
    match plan
        .reservations
        .iter()
        .find(|r| bare(&r.instance_type) == bare(instance_type))
    {
        Some(r) => Ok(Some(r.availability_zone.clone())),
        None => Err(ApiError::validation_hint(
            "instanceType",
            format!(
                "training plan `{}` reserves no {}",
                plan.name,
                validate::truncate(instance_type)
            ),
            json!(plan
                .reservations
                .iter()
                .map(|r| &r.instance_type)
                .collect::<Vec<_>>()),
        )),
    }
}

pub async fn pipeline_params(engine: &Engine, req: &PipelineRequest) -> ApiResult<PipelineParams> {
    let cluster_req = CreateClusterRequest {
        name: req.name.clone(),
        region: req.region.clone(),
        zones: None,
        vpc_cidr: req.vpc_cidr.clone(),
        kubernetes_version: req.kubernetes_version.clone(),
        secondary_cidr: req.secondary_cidr.clone(),
    };
    let hp_req = CreateHyperPodRequest {
        instance_type: req.instance_type.clone(),
        instance_count: req.instance_count,
        zone: req.zone.clone(),
        capacity_type: req.capacity_type,
        training_plan_arn: req.training_plan_arn.clone(),
        deep_health_checks: req.deep_health_checks,
        volume_size_gb: req.volume_size_gb,
        instance_group_name: req.instance_group_name.clone(),
        network_interface: req.network_interface,
        compute_subnet_size: req.compute_subnet_size,
    };
    // Name first, so the most basic mistake is the one reported.
    validate::cluster_name("name", &req.name)?;
    unambiguous_roles("name", &req.name)?;
    let hyperpod = hyperpod_params(engine, &hp_req).await?;
    let cluster = cluster_params(engine, &cluster_req, Some(&hyperpod.zone)).await?;
    validate::compute_subnet_fits(
        "computeSubnetSize",
        hyperpod.compute_subnet_size,
        cluster.vpc_cidr,
        cluster.secondary_cidr,
    )?;
    Ok(PipelineParams {
        cluster,
        hyperpod,
        dependencies: req.dependencies.unwrap_or(true),
        storage: req.storage.unwrap_or(true),
    })
}
