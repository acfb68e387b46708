//! The AWS Price List, read only: the on-demand hourly price HyperPod bills each instance type at
//! in a region.
//!
//! HyperPod's instances are billed under the `AmazonSageMaker` offer with the usage type
//! `<region code>-Cluster:ml.<type>` (the same string a Cost and Usage Report carries in
//! `line_item_usage_type`); `…-ReservedCluster:…`, `…-Studio:…` and the other components of the
//! offer are other products, and [`hyperpod_instance_type`] tells them apart.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::CloudResult;

/// The Price List offer HyperPod is billed under.
pub const PRICE_LIST_SERVICE: &str = "AmazonSageMaker";
/// The part of a HyperPod instance's usage type after the region code.
pub const CLUSTER_USAGE: &str = "Cluster:ml.";

/// One instance type's on-demand price, as the Price List gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedPrice {
    /// `ml.…`.
    pub instance_type: String,
    /// USD per instance-hour.
    pub hourly_usd: f64,
    /// `USW2-Cluster:ml.…`: the line a bill carries it on.
    pub usage_type: String,
    pub sku: String,
    /// When the price took effect (the on-demand term's `effectiveDate`, RFC 3339).
    pub effective: String,
}

/// The instance type (`ml.…`) of a HyperPod instance's usage type, `None` for any other usage
/// type of the offer: the region code before the first `-` (absent in some regions' usage
/// types), then exactly `Cluster:ml.<type>`.
pub fn hyperpod_instance_type(usage_type: &str) -> Option<&str> {
    let rest = match usage_type.split_once('-') {
        Some((region, rest)) if region.chars().all(|c| c.is_ascii_alphanumeric()) => rest,
        _ => usage_type,
    };
    let name = rest.strip_prefix(CLUSTER_USAGE)?;
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    valid.then(|| &rest["Cluster:".len()..])
}

#[async_trait]
pub trait PriceList: Send + Sync {
    /// The on-demand price of every HyperPod instance type the Price List has for `region`
    /// (`GetProducts` on [`PRICE_LIST_SERVICE`], every page).
    async fn hyperpod_prices(&self, region: &str) -> CloudResult<Vec<ListedPrice>>;
}

#[cfg(test)]
mod tests {
    use super::hyperpod_instance_type as t;

    #[test]
    fn only_a_cluster_instance_usage_type_is_hyperpods() {
        assert_eq!(t("USE1-Cluster:ml.p5.48xlarge"), Some("ml.p5.48xlarge"));
        assert_eq!(t("EU-Cluster:ml.g5.8xlarge"), Some("ml.g5.8xlarge"));
        assert_eq!(
            t("Cluster:ml.p6-b200.48xlarge"),
            Some("ml.p6-b200.48xlarge")
        );
        for other in [
            "USE1-ReservedCluster:ml.p5.48xlarge",
            "USE1-Studio:ml.g5.8xlarge",
            "USE1-Cluster:VolumeUsage.gp2",
            "USE1-Hosting:ml.g5.8xlarge",
            "USE1-Cluster:ml.",
            "USE1-Cluster:ml.p5 48xlarge",
            "",
        ] {
            assert_eq!(t(other), None, "{other}");
        }
    }
}
