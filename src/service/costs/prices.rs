//! Hourly prices of HyperPod instances: a dated table of on-demand list prices, every figure of
//! it an *estimate* and said to be one wherever it is shown.
//!
//! Why a table: the AWS Price List (`pricing:GetProducts`, service `AmazonSageMaker`) is where
//! the account's real rates live, but its HyperPod filters are not yet pinned by a test here; until
//! they are, a report built on this table says so (`estimate: true`, the date below) rather than
//! pass a guess off as a bill.

use serde::Serialize;
use utoipa::ToSchema;

/// The date the table's figures were taken.
pub const AS_OF: &str = "2025-06-01";
/// The region they are for.
pub const REGION: &str = "us-east-1";

/// `(instance type, USD per instance-hour)`: SageMaker on-demand list prices, us-east-1.
const TABLE: &[(&str, f64)] = &[
    ("ml.p4d.24xlarge", 37.688),
    ("ml.p4de.24xlarge", 47.11),
    ("ml.p5.48xlarge", 113.068),
    ("ml.p5e.48xlarge", 124.37),
    ("ml.p5en.48xlarge", 124.37),
    ("ml.p6-b200.48xlarge", 137.0),
    ("ml.g5.xlarge", 1.408),
    ("ml.g5.2xlarge", 1.515),
    ("ml.g5.4xlarge", 2.03),
    ("ml.g5.8xlarge", 3.06),
    ("ml.g5.12xlarge", 7.09),
    ("ml.g5.16xlarge", 5.12),
    ("ml.g5.24xlarge", 10.18),
    ("ml.g5.48xlarge", 20.36),
    ("ml.g6.xlarge", 1.01),
    ("ml.g6.2xlarge", 1.222),
    ("ml.g6.4xlarge", 1.646),
    ("ml.g6.8xlarge", 2.492),
    ("ml.g6.12xlarge", 5.752),
    ("ml.g6.16xlarge", 4.184),
    ("ml.g6.24xlarge", 8.326),
    ("ml.g6.48xlarge", 16.653),
    ("ml.g6e.xlarge", 2.336),
    ("ml.g6e.2xlarge", 2.810),
    ("ml.g6e.4xlarge", 3.758),
    ("ml.g6e.8xlarge", 5.655),
    ("ml.g6e.12xlarge", 12.242),
    ("ml.g6e.16xlarge", 9.449),
    ("ml.g6e.24xlarge", 15.066),
    ("ml.g6e.48xlarge", 30.131),
    ("ml.trn1.32xlarge", 28.497),
    ("ml.trn1n.32xlarge", 32.77),
    ("ml.trn2.48xlarge", 55.0),
    ("ml.m5.large", 0.115),
    ("ml.m5.xlarge", 0.23),
    ("ml.m5.2xlarge", 0.461),
    ("ml.m5.4xlarge", 0.922),
    ("ml.m5.12xlarge", 2.765),
    ("ml.c5.xlarge", 0.204),
    ("ml.c5.2xlarge", 0.408),
    ("ml.c5.4xlarge", 0.816),
    ("ml.t3.medium", 0.05),
    ("ml.t3.large", 0.1),
    ("ml.t3.xlarge", 0.2),
];

/// The price one report used for one instance type.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// `ml.…`.
    pub instance_type: String,
    /// USD per instance-hour; `None` when the table has no figure for the type (its hours are
    /// then counted and listed under `unpriced`, never guessed).
    pub hourly_usd: Option<f64>,
    /// `estimate` (the dated table) or `training-plan` (the plan's up-front fee over its
    /// instance-hours).
    pub source: PriceSource,
    /// When the table's figure was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<&'static str>,
    /// Where the table's figure is the price of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<&'static str>,
    /// The training plan whose price it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training_plan: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PriceSource {
    Estimate,
    TrainingPlan,
}

/// The price of one instance type (`ml.` prefix optional).
pub fn price(instance_type: &str) -> Price {
    let name = format!("ml.{}", instance_type.trim_start_matches("ml."));
    Price {
        hourly_usd: TABLE.iter().find(|(t, _)| *t == name).map(|(_, p)| *p),
        instance_type: name,
        source: PriceSource::Estimate,
        as_of: Some(AS_OF),
        region: Some(REGION),
        training_plan: None,
    }
}

/// The price of a group's instances from the training plan they run on.
pub fn plan_price(instance_type: &str, plan: &crate::cloud::TrainingPlan) -> Option<Price> {
    Some(Price {
        instance_type: format!("ml.{}", instance_type.trim_start_matches("ml.")),
        hourly_usd: Some(plan.hourly_usd()?),
        source: PriceSource::TrainingPlan,
        as_of: None,
        region: None,
        training_plan: Some(plan.arn.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accelerated_type_the_control_plane_offers_has_a_price() {
        for t in crate::cloud::instances::INSTANCE_TYPES {
            let p = price(t.name);
            assert!(
                p.hourly_usd.is_some_and(|usd| usd > 0.0),
                "{} has no price",
                t.name
            );
            assert_eq!(p.instance_type, format!("ml.{}", t.name));
        }
        assert_eq!(price("ml.x9.huge").hourly_usd, None);
    }

    #[test]
    fn a_type_of_more_gpus_in_a_family_costs_more() {
        let usd = |t: &str| price(t).hourly_usd.unwrap();
        assert!(usd("ml.g5.48xlarge") > usd("ml.g5.12xlarge"));
        assert!(usd("ml.g5.12xlarge") > usd("ml.g5.xlarge"));
        assert!(usd("ml.p5.48xlarge") > usd("ml.p4d.24xlarge"));
    }
}
