//! Network fields: the VPC block, a secondary block for large fleets, the compute subnet size.

use ipnet::Ipv4Net;
use serde_json::json;

use super::truncate;
use crate::cloud::Cloud;
use crate::error::{ApiError, ApiResult};

/// An IPv4 block written as its network address (no host bits).
fn cidr_block(field: &str, cidr: &str, example: &str) -> ApiResult<Ipv4Net> {
    let net: Ipv4Net = cidr.parse().map_err(|_| {
        ApiError::validation_hint(
            field,
            format!("`{}` is not an IPv4 CIDR block", truncate(cidr)),
            json!(format!("e.g. {example}")),
        )
    })?;
    if net.network() != net.addr() {
        return Err(ApiError::validation_hint(
            field,
            format!("`{cidr}` has host bits set"),
            json!(net.trunc().to_string()),
        ));
    }
    Ok(net)
}

/// A VPC CIDR override: RFC 1918, /16–/19 (room for the /20 compute subnets), and not
/// overlapping any VPC of the region.
pub async fn vpc_cidr(field: &str, cidr: &str, cloud: &Cloud) -> ApiResult<Ipv4Net> {
    let net = cidr_block(field, cidr, "10.90.0.0/16")?;
    let private: [Ipv4Net; 3] = [
        "10.0.0.0/8".parse().unwrap_or_default(),
        "172.16.0.0/12".parse().unwrap_or_default(),
        "192.168.0.0/16".parse().unwrap_or_default(),
    ];
    if !(16..=19).contains(&net.prefix_len()) || !private.iter().any(|p| p.contains(&net)) {
        return Err(ApiError::validation_hint(
            field,
            format!("`{cidr}` must be a private (RFC 1918) block from /16 to /19"),
            json!("e.g. 10.90.0.0/16"),
        ));
    }
    let vpcs = cloud.network.describe_vpcs().await?;
    if let Some(other) = vpcs.iter().find(|v| {
        v.cidrs
            .iter()
            .any(|c| crate::service::cluster::subnets::overlaps(c, &net))
    }) {
        let taken: Vec<_> = vpcs
            .iter()
            .flat_map(|v| v.cidrs.iter().map(|c| c.to_string()))
            .collect();
        let free = crate::service::cluster::subnets::free_vpc_cidr(&vpcs);
        return Err(ApiError::validation_hint(
            field,
            format!("`{cidr}` overlaps VPC {}", other.id),
            json!({"taken": taken, "suggestion": free.map(|n| n.to_string())}),
        ));
    }
    Ok(net)
}

/// The compute subnet's prefix length: 16–24, `None` for the default (/20).
pub fn compute_subnet_size(field: &str, size: Option<i64>) -> ApiResult<Option<u8>> {
    match size {
        None => Ok(None),
        Some(n @ 16..=24) => Ok(u8::try_from(n).ok()),
        Some(n) => Err(ApiError::validation_hint(
            field,
            format!("/{n} is not a compute subnet size: use a prefix length from 16 to 24"),
            json!("20 (4,096 addresses) holds roughly 30–40 p5-class nodes once the VPC CNI's warm IP pools are counted; 18 or 17 for larger fleets, with secondaryCidr"),
        )),
    }
}

/// Whether a compute subnet of `size` fits beside the public and private subnets (the first /20
/// of the VPC block) or in the secondary block.
pub fn compute_subnet_fits(
    field: &str,
    size: Option<u8>,
    vpc: Option<Ipv4Net>,
    secondary: Option<Ipv4Net>,
) -> ApiResult<()> {
    let size = size.unwrap_or(crate::service::cluster::subnets::COMPUTE_PREFIX);
    let primary = vpc.map_or(16, |v| v.prefix_len());
    let in_secondary = secondary.is_some_and(|s| s.prefix_len() <= size);
    // The primary block's first /20 is taken, so only a strictly smaller block fits beside it.
    if in_secondary || size > primary {
        return Ok(());
    }
    Err(ApiError::validation_hint(
        field,
        format!("a /{size} compute subnet does not fit in the /{primary} VPC block beside its public and private subnets"),
        json!(format!("add secondaryCidr of /{size} or wider, or choose a size above {primary}")),
    ))
}

/// A secondary VPC block: /16–/19, in the primary block's RFC 1918 range (EC2 refuses the other
/// private ranges) or in 100.64.0.0/10, and overlapping no VPC of the region nor the primary.
pub async fn secondary_cidr(
    field: &str,
    cidr: &str,
    primary: Option<Ipv4Net>,
    cloud: &Cloud,
) -> ApiResult<Ipv4Net> {
    let net = cidr_block(field, cidr, "100.64.0.0/16")?;
    let block = |s: &str| s.parse::<Ipv4Net>().unwrap_or_default();
    let ranges = [
        block("10.0.0.0/8"),
        block("172.16.0.0/12"),
        block("192.168.0.0/16"),
    ];
    // Without an override the primary block is a /16 in 10.0.0.0/8.
    let primary_range = primary.map_or(ranges[0], |p| {
        ranges
            .iter()
            .copied()
            .find(|r| r.contains(&p))
            .unwrap_or(ranges[0])
    });
    let allowed = [primary_range, block("100.64.0.0/10")];
    if !(16..=19).contains(&net.prefix_len()) || !allowed.iter().any(|r| r.contains(&net)) {
        return Err(ApiError::validation_hint(
            field,
            format!("`{cidr}` must be a /16–/19 block in {primary_range} (the VPC block's range) or 100.64.0.0/10"),
            json!("e.g. 100.64.0.0/16"),
        ));
    }
    if let Some(p) = primary.filter(|p| crate::service::cluster::subnets::overlaps(p, &net)) {
        return Err(ApiError::validation(
            field,
            format!("`{cidr}` overlaps the VPC block {p}"),
        ));
    }
    let vpcs = cloud.network.describe_vpcs().await?;
    if let Some(other) = vpcs.iter().find(|v| {
        v.cidrs
            .iter()
            .any(|c| crate::service::cluster::subnets::overlaps(c, &net))
    }) {
        return Err(ApiError::validation(
            field,
            format!("`{cidr}` overlaps VPC {}", other.id),
        ));
    }
    Ok(net)
}
