//! Hourly prices of HyperPod instances: the account's AWS Price List for the cluster's region
//! (read at most twice a day, kept in memory), a training plan's fee over its instance-hours, or,
//! when the Price List cannot be read, a dated table whose every figure is an *estimate* and said
//! to be one — with the reason the Price List was not used.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use crate::cloud::list_prices::{self, list_price};
use crate::cloud::{ListedPrice, PriceList};

/// How long a region's Price List is kept: AWS publishes a new one a few times a month.
const KEEP: Duration = Duration::from_secs(12 * 3600);
/// How long a failure to read it is remembered before the next report tries again.
const KEEP_FAILURE: Duration = Duration::from_secs(300);
/// The longest a report waits on the Price List before it uses the table.
const WAIT: Duration = Duration::from_secs(5);

/// The price one report used for one instance type.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// `ml.…`.
    pub instance_type: String,
    /// USD per instance-hour; `None` when no source has a figure for the type (its hours are
    /// then counted and listed under `unpriced`, never guessed).
    pub hourly_usd: Option<f64>,
    /// `price-list` (the account's AWS Price List), `estimate` (the dated table) or
    /// `training-plan` (the plan's up-front fee over its instance-hours).
    pub source: PriceSource,
    /// When the figure took effect (the Price List's on-demand term) or was taken (the table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// The region the figure is the price in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The Price List's usage type (`USW2-Cluster:ml.…`): the line a bill carries the hours on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_type: Option<String>,
    /// The training plan whose price it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training_plan: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PriceSource {
    PriceList,
    Estimate,
    TrainingPlan,
}

fn ml(instance_type: &str) -> String {
    format!("ml.{}", instance_type.trim_start_matches("ml."))
}

/// The table's price of one instance type (`ml.` prefix optional): an estimate.
pub fn estimate(instance_type: &str) -> Price {
    Price {
        hourly_usd: list_price(instance_type),
        instance_type: ml(instance_type),
        source: PriceSource::Estimate,
        as_of: Some(list_prices::AS_OF.into()),
        region: Some(list_prices::REGION.into()),
        usage_type: None,
        training_plan: None,
    }
}

/// A Price List figure, for `region`.
fn listed(p: &ListedPrice, region: &str) -> Price {
    Price {
        instance_type: ml(&p.instance_type),
        hourly_usd: Some(p.hourly_usd),
        source: PriceSource::PriceList,
        as_of: Some(p.effective.clone()),
        region: Some(region.into()),
        usage_type: Some(p.usage_type.clone()),
        training_plan: None,
    }
}

/// The price of a group's instances from the training plan they run on.
pub fn plan_price(instance_type: &str, plan: &crate::cloud::TrainingPlan) -> Option<Price> {
    Some(Price {
        instance_type: ml(instance_type),
        hourly_usd: Some(plan.hourly_usd()?),
        source: PriceSource::TrainingPlan,
        as_of: None,
        region: None,
        usage_type: None,
        training_plan: Some(plan.arn.clone()),
    })
}

/// The on-demand prices of one region a report uses.
#[derive(Debug, Clone, Default)]
pub struct RegionPrices {
    region: String,
    /// By `ml.…` type.
    listed: Arc<HashMap<String, ListedPrice>>,
    /// Why the Price List was not used, when it was not.
    pub unavailable: Option<String>,
}

/// Whether a region is in AWS's commercial partition, the one the table's USD figures are from.
/// GovCloud (`us-gov-…`) prices differ and China's (`cn-…`) are in CNY: neither is estimated.
pub fn commercial(region: &str) -> bool {
    crate::service::shared::arn::partition_of_region(region) == "aws"
}

/// Why a region outside the commercial partition has no estimates.
fn outside_commercial(region: &str) -> String {
    format!("{region} is outside AWS's commercial partition (GovCloud prices differ, China's are in CNY): its instance-hours are counted, and only the Price List's own USD figures are priced — nothing is estimated from the commercial table")
}

impl RegionPrices {
    /// Prices from the table alone, for `reason`.
    pub fn table_only(region: &str, reason: impl Into<String>) -> Self {
        let reason = match commercial(region) {
            true => reason.into(),
            false => format!("{}; {}", reason.into(), outside_commercial(region)),
        };
        Self {
            region: region.into(),
            listed: Arc::default(),
            unavailable: Some(reason),
        }
    }

    /// Prices from a Price List (the table for a type it does not have).
    pub fn from_list(region: &str, list: &[ListedPrice]) -> Self {
        Self {
            region: region.into(),
            listed: Arc::new(
                list.iter()
                    .map(|p| (ml(&p.instance_type), p.clone()))
                    .collect(),
            ),
            unavailable: (!commercial(region)).then(|| outside_commercial(region)),
        }
    }

    /// The price of one instance type: the Price List's, else the table's estimate — in the
    /// commercial partition only; elsewhere none (its hours are listed unpriced).
    pub fn price(&self, instance_type: &str) -> Price {
        match self.listed.get(&ml(instance_type)) {
            Some(p) => listed(p, &self.region),
            None if !commercial(&self.region) => Price {
                hourly_usd: None,
                region: Some(self.region.clone()),
                as_of: None,
                ..estimate(instance_type)
            },
            None => estimate(instance_type),
        }
    }
}

/// Each region's Price List as last read, shared by every report of this process.
#[derive(Default)]
pub struct PriceBook {
    /// One slot per region, each with a lock of its own: a region being read (up to [`WAIT`])
    /// holds up the reports of that region only.
    regions: std::sync::Mutex<HashMap<String, Slot>>,
}

/// A region's prices and when they were read (`None` until the first read ends).
type Slot = Arc<tokio::sync::Mutex<Option<(Instant, RegionPrices)>>>;

impl PriceBook {
    /// The prices of `region`: from memory while fresh, else read from `list` (one reader per
    /// region at a time; a failure or a silence of [`WAIT`] falls back on the table, and is
    /// remembered for a few minutes so every report does not wait on it again).
    pub async fn region(&self, list: &dyn PriceList, region: &str) -> RegionPrices {
        let slot = {
            let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
            regions.entry(region.to_string()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some((at, prices)) = slot.as_ref() {
            let keep = if prices.unavailable.is_some() {
                KEEP_FAILURE
            } else {
                KEEP
            };
            if at.elapsed() < keep {
                return prices.clone();
            }
        }
        let prices = read(list, region).await;
        *slot = Some((Instant::now(), prices.clone()));
        prices
    }
}

/// One region's prices from the Price List, or the table and why.
async fn read(list: &dyn PriceList, region: &str) -> RegionPrices {
    match tokio::time::timeout(WAIT, list.hyperpod_prices(region)).await {
        Ok(Ok(list)) if !list.is_empty() => RegionPrices::from_list(region, &list),
        Ok(Ok(_)) => RegionPrices::table_only(
            region,
            format!("the AWS Price List has no HyperPod prices for {region}"),
        ),
        Ok(Err(e)) => {
            tracing::info!(region, error = %e, "the AWS Price List could not be read; prices are estimates");
            RegionPrices::table_only(
                region,
                format!(
                    "the AWS Price List could not be read: {}: {}",
                    e.code, e.message
                ),
            )
        }
        Err(_) => RegionPrices::table_only(
            region,
            format!(
                "the AWS Price List did not answer within {} s",
                WAIT.as_secs()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_the_commercial_partition_nothing_is_estimated_and_it_says_why() {
        for region in ["us-gov-west-1", "cn-north-1"] {
            let prices = RegionPrices::table_only(region, "the Price List has no figures");
            let p = prices.price("ml.g5.8xlarge");
            assert_eq!(p.hourly_usd, None, "{region}");
            assert!(
                prices.unavailable.as_deref().unwrap().contains("CNY"),
                "{region}"
            );
        }
        let commercial = RegionPrices::table_only("us-west-2", "not read");
        assert!(commercial.price("ml.g5.8xlarge").hourly_usd.is_some());
    }

    /// A Price List whose `us-east-1` says it was asked, then answers only when told to; every
    /// other region answers at once.
    #[derive(Default)]
    struct OneSlowRegion {
        asked: tokio::sync::Notify,
        answer: tokio::sync::Notify,
    }

    #[async_trait::async_trait]
    impl PriceList for OneSlowRegion {
        async fn hyperpod_prices(
            &self,
            region: &str,
        ) -> crate::cloud::CloudResult<Vec<ListedPrice>> {
            if region == "us-east-1" {
                self.asked.notify_one();
                self.answer.notified().await;
            }
            Ok(vec![ListedPrice {
                instance_type: "ml.g5.8xlarge".into(),
                hourly_usd: 2.0,
                usage_type: "Cluster:ml.g5.8xlarge".into(),
                sku: "S".into(),
                effective: "2026-11-01T00:00:00Z".into(),
            }])
        }
    }

    #[tokio::test]
    async fn a_region_being_read_holds_up_no_other_region() {
        let list = Arc::new(OneSlowRegion::default());
        let book = Arc::new(PriceBook::default());
        let slow = tokio::spawn({
            let (book, list) = (book.clone(), list.clone());
            async move { book.region(list.as_ref(), "us-east-1").await }
        });
        list.asked.notified().await;
        // Had this waited on us-east-1's read, that read would have ended first (at its
        // deadline, as a fallback).
        let other = book.region(list.as_ref(), "us-west-2").await;
        assert_eq!(other.price("ml.g5.8xlarge").source, PriceSource::PriceList);
        assert!(!slow.is_finished(), "us-west-2 waited for us-east-1's read");
        list.answer.notify_one();
        let slow = slow.await.unwrap();
        assert_eq!(slow.price("ml.g5.8xlarge").source, PriceSource::PriceList);
        // Read once, then kept.
        assert_eq!(
            book.region(list.as_ref(), "us-east-1")
                .await
                .price("ml.g5.8xlarge")
                .source,
            PriceSource::PriceList
        );
    }

    #[test]
    fn every_accelerated_type_the_control_plane_offers_has_a_table_price() {
        for t in crate::cloud::instances::INSTANCE_TYPES {
            let p = estimate(t.name);
            assert!(
                p.hourly_usd.is_some_and(|usd| usd > 0.0),
                "{} has no price",
                t.name
            );
            assert_eq!(p.instance_type, format!("ml.{}", t.name));
        }
        assert_eq!(estimate("ml.x9.huge").hourly_usd, None);
    }

    #[test]
    fn a_type_of_more_gpus_in_a_family_costs_more() {
        let usd = |t: &str| estimate(t).hourly_usd.unwrap();
        assert!(usd("ml.g5.48xlarge") > usd("ml.g5.12xlarge"));
        assert!(usd("ml.g5.12xlarge") > usd("ml.g5.xlarge"));
        assert!(usd("ml.p5.48xlarge") > usd("ml.p4d.24xlarge"));
    }

    #[test]
    fn a_type_the_price_list_lacks_is_priced_from_the_table() {
        let list = [ListedPrice {
            instance_type: "ml.g5.8xlarge".into(),
            hourly_usd: 3.5,
            usage_type: "USW2-Cluster:ml.g5.8xlarge".into(),
            sku: "SKU".into(),
            effective: "2026-11-01T00:00:00Z".into(),
        }];
        let prices = RegionPrices::from_list("us-west-2", &list);
        let g5 = prices.price("g5.8xlarge");
        assert_eq!(
            (g5.source, g5.hourly_usd, g5.region.as_deref()),
            (PriceSource::PriceList, Some(3.5), Some("us-west-2"))
        );
        assert_eq!(g5.usage_type.as_deref(), Some("USW2-Cluster:ml.g5.8xlarge"));
        let p5 = prices.price("ml.p5.48xlarge");
        assert_eq!(p5.source, PriceSource::Estimate);
        assert_eq!(p5.hourly_usd, list_price("ml.p5.48xlarge"));
    }
}
