//! The simulated account's AWS Price List: HyperPod's on-demand prices in the sandbox's region,
//! the dated table's figures under the usage types AWS bills them on (`USW2-Cluster:ml.…`).

use async_trait::async_trait;

use super::{Sandbox, REGION};
use cloud::list_prices::{self, table};
use cloud::*;

/// The usage-type prefix of the sandbox's region.
const REGION_CODE: &str = "USW2";

#[async_trait]
impl PriceList for Sandbox {
    async fn hyperpod_prices(&self, region: &str) -> CloudResult<Vec<ListedPrice>> {
        self.gate("pricing:GetProducts", false).await?;
        // As AWS's: a region where HyperPod is not offered has no such product.
        if region != REGION {
            return Ok(vec![]);
        }
        Ok(table()
            .map(|(t, usd)| ListedPrice {
                instance_type: t.into(),
                hourly_usd: usd,
                usage_type: format!("{REGION_CODE}-{CLUSTER_USAGE}{}", &t["ml.".len()..]),
                sku: format!("SANDBOX{}", t.replace(['.', '-'], "").to_uppercase()),
                effective: format!("{}T00:00:00Z", list_prices::AS_OF),
            })
            .collect())
    }
}
