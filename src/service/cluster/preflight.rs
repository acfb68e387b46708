//! Preflight: identity, quota and capacity advice before a cluster is made.

use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::requests::CapacityType;
use crate::service::cluster::validate;

/// The quota check of a preflight.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaCheck {
    pub instance_type: String,
    pub requested: u32,
    /// The account's HyperPod cluster-usage quota; null when none could be found.
    pub limit: Option<u32>,
    pub ok: bool,
}

/// What to settle before the first cluster: identity, region, quotas, reserved capacity.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    pub region: String,
    pub account: Option<String>,
    pub caller_arn: Option<String>,
    pub quota: Option<QuotaCheck>,
    pub training_plans: Vec<crate::cloud::TrainingPlan>,
    /// Plain-language advice, most important first.
    pub advice: Vec<String>,
}

pub async fn preflight(
    engine: &Engine,
    instance_type: Option<&str>,
    count: Option<i64>,
    capacity_type: Option<&str>,
) -> ApiResult<Preflight> {
    let capacity_type = match capacity_type {
        None => None,
        Some(c) => Some(CapacityType::parse(c).ok_or_else(|| {
            ApiError::validation_hint(
                "capacityType",
                format!("`{}` is not a capacity type", validate::truncate(c)),
                json!(CapacityType::ALL),
            )
        })?),
    };
    let cloud = engine.cloud();
    let requested = match count {
        None => 1,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                ApiError::validation_hint(
                    "count",
                    format!("{n} is not a valid instance count"),
                    json!("1 to 1000"),
                )
            })?,
    };
    if let Some(t) = instance_type {
        if !t.starts_with("ml.") || t.len() > 64 {
            return Err(ApiError::validation_hint(
                "instanceType",
                format!(
                    "`{}` is not a SageMaker instance type",
                    t.chars().take(64).collect::<String>()
                ),
                json!("e.g. ml.p5.48xlarge"),
            ));
        }
    }
    let mut advice = Vec::new();
    let (account, caller_arn) = match cloud.iam.caller_identity().await {
        Ok(id) => (Some(id.account), Some(id.arn)),
        Err(e) => {
            advice.push(format!(
                "AWS credentials are not usable ({}): fix them before anything else.",
                e.message
            ));
            (None, None)
        }
    };
    let training_plans = match crate::service::shared::reads::retrying(|| {
        cloud.hyperpod.list_training_plans()
    })
    .await
    {
        Ok(plans) => plans,
        Err(e) => {
            advice.push(format!("Training plans could not be listed ({}).", e.code));
            Vec::new()
        }
    };
    let quota = match instance_type {
        None => None,
        Some(t) => {
            let limit = match crate::service::shared::reads::retrying(|| {
                cloud.quotas.hyperpod_cluster_usage(t)
            })
            .await
            {
                Ok(limit) => limit,
                Err(e) => {
                    advice.push(format!("The Service Quotas API did not answer ({}); check '{t} for cluster usage' by hand.", e.code));
                    None
                }
            };
            let ok = limit.is_some_and(|l| l >= requested);
            match limit {
                Some(l) if l >= requested => advice.push(format!("Quota allows up to {l} × {t} in HyperPod clusters.")),
                Some(l) => advice.push(format!(
                    "Your HyperPod cluster-usage quota for {t} is {l}, below the {requested} you need: request an increase in Service Quotas (Amazon SageMaker › '{t} for cluster usage') before creating the cluster."
                )),
                None => advice.push(format!(
                    "No HyperPod cluster-usage quota was found for {t}: request one in Service Quotas (Amazon SageMaker › '{t} for cluster usage')."
                )),
            }
            if crate::cloud::high_end(t)
                && !training_plans
                    .iter()
                    .any(|p| p.status == "Active" && p.available_instance_count >= requested)
            {
                advice.push(format!(
                    "{t} capacity is scarce on demand: reserve it with a SageMaker training plan and create the cluster with capacityType `training-plan`."
                ));
            }
            Some(QuotaCheck {
                instance_type: t.to_string(),
                requested,
                limit,
                ok,
            })
        }
    };
    if capacity_type == Some(CapacityType::Spot) {
        advice.push("Spot capacity can be reclaimed at any time, and elastic training does not cover Spot, managed tiered checkpointing or checkpointless training: plan checkpoints accordingly.".into());
    }
    Ok(Preflight {
        region: cloud.network.region(),
        account,
        caller_arn,
        quota,
        training_plans,
        advice,
    })
}
