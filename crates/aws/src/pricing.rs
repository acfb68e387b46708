//! The AWS Price List over the SDK: HyperPod's on-demand prices in a region, from `GetProducts`
//! on the `AmazonSageMaker` offer.
//!
//! The Price List API answers in three regions only (us-east-1, eu-central-1, ap-south-1; the
//! China partition its own): [`price_list_region`] picks the nearest, whatever the clusters'
//! region — the region asked about is a filter, not an endpoint.
//!
//! The filters: `regionCode` equal to the region, `usagetype` containing `Cluster:ml.` (every
//! HyperPod instance type in one paged answer, a few dozen products). A usage type that only
//! contains it (`…-ReservedCluster:ml.…`) is dropped by [`hyperpod_instance_type`]. Before
//! filtering, `DescribeServices` confirms the offer still has both attributes, so a renamed
//! attribute reads as a clear error instead of as "no prices".

use async_trait::async_trait;
use aws_sdk_pricing::types::{Filter, FilterType};
use serde_json::Value;

use super::errors::idempotent;
use super::Aws;
use cloud::*;

const S: &str = "pricing";
/// The attributes filtered on, as the offer names them.
pub const REGION_ATTRIBUTE: &str = "regionCode";
pub const USAGE_TYPE_ATTRIBUTE: &str = "usagetype";
/// A bound on the pages read (a region has a few dozen HyperPod products: one page).
const MAX_PAGES: usize = 20;

/// The region whose Price List endpoint serves `region`'s callers.
pub fn price_list_region(region: &str) -> &'static str {
    match region.split('-').next().unwrap_or_default() {
        "cn" => "cn-northwest-1",
        "eu" | "me" | "af" | "il" => "eu-central-1",
        "ap" => "ap-south-1",
        _ => "us-east-1",
    }
}

/// The filters of one region's HyperPod instance prices.
pub fn hyperpod_filters(region: &str) -> CloudResult<Vec<Filter>> {
    [
        (FilterType::TermMatch, REGION_ATTRIBUTE, region),
        (FilterType::Contains, USAGE_TYPE_ATTRIBUTE, CLUSTER_USAGE),
    ]
    .into_iter()
    .map(|(kind, field, value)| {
        Filter::builder()
            .r#type(kind)
            .field(field)
            .value(value)
            .build()
            .map_err(|e| {
                CloudError::new(S, "GetProducts", "InvalidParameterException", e.to_string())
            })
    })
    .collect()
}

/// One product of a `GetProducts` answer (a JSON document as a string), when it is a HyperPod
/// instance of `region` with an hourly on-demand price in USD.
pub fn hyperpod_price(product: &str, region: &str) -> Option<ListedPrice> {
    let v: Value = serde_json::from_str(product).ok()?;
    let attributes = &v["product"]["attributes"];
    if attributes[REGION_ATTRIBUTE].as_str()? != region {
        return None;
    }
    let usage_type = attributes[USAGE_TYPE_ATTRIBUTE].as_str()?;
    let instance_type = hyperpod_instance_type(usage_type)?;
    // One on-demand term, one hourly dimension (HyperPod has no tiers).
    let (term, dimension) = v["terms"]["OnDemand"]
        .as_object()?
        .values()
        .find_map(|term| {
            let dimension = term["priceDimensions"].as_object()?.values().find(|d| {
                d["unit"]
                    .as_str()
                    .is_some_and(|u| u.eq_ignore_ascii_case("Hrs"))
            })?;
            Some((term, dimension))
        })?;
    let hourly_usd: f64 = dimension["pricePerUnit"]["USD"].as_str()?.parse().ok()?;
    (hourly_usd.is_finite() && hourly_usd >= 0.0).then(|| ListedPrice {
        instance_type: instance_type.to_string(),
        hourly_usd,
        usage_type: usage_type.to_string(),
        sku: v["product"]["sku"].as_str().unwrap_or_default().to_string(),
        effective: term["effectiveDate"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    })
}

#[async_trait]
impl PriceList for Aws {
    async fn hyperpod_prices(&self, region: &str) -> CloudResult<Vec<ListedPrice>> {
        let services = idempotent(S, "DescribeServices", || {
            self.pricing
                .describe_services()
                .service_code(PRICE_LIST_SERVICE)
                .format_version("aws_v1")
                .send()
        })
        .await?;
        let attributes = services
            .services()
            .iter()
            .find(|s| s.service_code() == PRICE_LIST_SERVICE)
            .map(|s| s.attribute_names())
            .unwrap_or_default();
        for wanted in [REGION_ATTRIBUTE, USAGE_TYPE_ATTRIBUTE] {
            if !attributes.iter().any(|a| a == wanted) {
                return Err(CloudError::new(
                    S,
                    "DescribeServices",
                    "AttributeNotFound",
                    format!("the {PRICE_LIST_SERVICE} offer has no `{wanted}` attribute to filter its prices on"),
                ));
            }
        }
        let filters = hyperpod_filters(region)?;
        let mut prices: Vec<ListedPrice> = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = idempotent(S, "GetProducts", || {
                self.pricing
                    .get_products()
                    .service_code(PRICE_LIST_SERVICE)
                    .format_version("aws_v1")
                    .set_filters(Some(filters.clone()))
                    .set_next_token(token.clone())
                    .max_results(100)
                    .send()
            })
            .await?;
            for p in page.price_list() {
                match hyperpod_price(p, region) {
                    Some(p) if !prices.iter().any(|q| q.instance_type == p.instance_type) => {
                        prices.push(p)
                    }
                    _ => {}
                }
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(prices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(usage_type: &str, region: &str, usd: &str, unit: &str) -> String {
        serde_json::json!({
            "product": {"productFamily": "ML Instance", "sku": "ABC",
                        "attributes": {"regionCode": region, "usagetype": usage_type,
                                       "servicecode": "AmazonSageMaker"}},
            "serviceCode": "AmazonSageMaker",
            "terms": {"OnDemand": {"ABC.JRTCKXETXF": {
                "effectiveDate": "2026-11-01T00:00:00Z", "sku": "ABC",
                "priceDimensions": {"ABC.JRTCKXETXF.6YS6EN2CT7": {
                    "unit": unit, "beginRange": "0", "endRange": "Inf",
                    "pricePerUnit": {"USD": usd}}}}}},
            "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"
        })
        .to_string()
    }

    #[test]
    fn a_cluster_instance_product_reads_as_its_hourly_price() {
        let p = hyperpod_price(
            &product(
                "USW2-Cluster:ml.g5.8xlarge",
                "us-west-2",
                "3.0600000000",
                "Hrs",
            ),
            "us-west-2",
        )
        .unwrap();
        assert_eq!(
            (p.instance_type.as_str(), p.hourly_usd, p.sku.as_str()),
            ("ml.g5.8xlarge", 3.06, "ABC")
        );
        assert_eq!(p.effective, "2026-11-01T00:00:00Z");
        for (usage, region, usd, unit) in [
            (
                "USW2-ReservedCluster:ml.g5.8xlarge",
                "us-west-2",
                "3.06",
                "Hrs",
            ),
            ("USW2-Cluster:ml.g5.8xlarge", "us-east-1", "3.06", "Hrs"),
            ("USW2-Cluster:ml.g5.8xlarge", "us-west-2", "n/a", "Hrs"),
            ("USW2-Cluster:ml.g5.8xlarge", "us-west-2", "3.06", "GB-Mo"),
            ("USW2-Cluster:VolumeUsage.gp2", "us-west-2", "0.14", "Hrs"),
        ] {
            assert_eq!(
                hyperpod_price(&product(usage, region, usd, unit), "us-west-2"),
                None,
                "{usage} {region} {usd} {unit}"
            );
        }
        assert_eq!(hyperpod_price("not json", "us-west-2"), None);
    }

    #[test]
    fn the_nearest_price_list_endpoint_serves_each_region() {
        for (region, endpoint) in [
            ("us-west-2", "us-east-1"),
            ("ca-central-1", "us-east-1"),
            ("eu-west-1", "eu-central-1"),
            ("il-central-1", "eu-central-1"),
            ("ap-northeast-1", "ap-south-1"),
            ("cn-north-1", "cn-northwest-1"),
        ] {
            assert_eq!(price_list_region(region), endpoint, "{region}");
        }
    }
}
