//! Address planning: the VPC block for a new cluster and the **compute-subnet function**, the one
//! path that places a compute subnet for every capacity type.
//!
//! Overlap is decided by interval arithmetic on the address ranges (never by comparing CIDR
//! strings), blocks are aligned to their size, and the subnet is found again by its tags, so
//! calling the function twice for the same AZ returns the same subnet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ipnet::Ipv4Net;

use crate::cloud::{
    cluster_tags, Cloud, CloudError, CreateSubnet, Subnet, Vpc, Zone, CLUSTER_TAG, ROLE_TAG,
};

/// Default size of a compute subnet: 4,096 addresses per AZ.
pub const COMPUTE_PREFIX: u8 = 20;

/// Whether two blocks share any address.
pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    let (a0, a1) = (u32::from(a.network()), u32::from(a.broadcast()));
    let (b0, b1) = (u32::from(b.network()), u32::from(b.broadcast()));
    a0 <= b1 && b0 <= a1
}

/// The first aligned block of `prefix` inside any of `within` (smallest-prefix, i.e. largest,
/// VPC block first) that overlaps none of `taken`.
pub fn choose_block(within: &[Ipv4Net], taken: &[Ipv4Net], prefix: u8) -> Option<Ipv4Net> {
    let mut blocks: Vec<&Ipv4Net> = within.iter().filter(|b| b.prefix_len() <= prefix).collect();
    blocks.sort_by_key(|b| b.prefix_len());
    blocks.into_iter().find_map(|block| {
        block
            .subnets(prefix)
            .ok()?
            .find(|candidate| !taken.iter().any(|t| overlaps(t, candidate)))
    })
}

/// A /16 in 10.0.0.0/8 that overlaps no VPC of the region, starting at 10.90.0.0/16.
pub fn free_vpc_cidr(vpcs: &[Vpc]) -> Option<Ipv4Net> {
    let taken: Vec<Ipv4Net> = vpcs.iter().flat_map(|v| v.cidrs.iter().copied()).collect();
    (90u8..=255)
        .chain(0..90)
        .filter_map(|n| Ipv4Net::new(std::net::Ipv4Addr::new(10, n, 0, 0), 16).ok())
        .find(|c| !taken.iter().any(|t| overlaps(t, c)))
}

/// Serialises compute-subnet placement per VPC within this process; across processes the EC2
/// `InvalidSubnet.Conflict` answer makes the loser choose again.
#[derive(Default, Clone)]
pub struct SubnetLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl SubnetLocks {
    fn for_vpc(&self, vpc: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(vpc.to_string())
            .or_default()
            .clone()
    }
}

/// The locks of this process's compute-subnet placements.
pub static PROCESS_SUBNET_LOCKS: std::sync::LazyLock<SubnetLocks> =
    std::sync::LazyLock::new(SubnetLocks::default);

/// What the compute-subnet function needs to know.
pub struct ComputeSubnetRequest<'a> {
    pub cluster: &'a str,
    pub vpc_id: &'a str,
    pub zone: &'a Zone,
    /// The private route table (default route to the NAT gateway, S3 gateway endpoint attached).
    pub route_table_id: &'a str,
    pub prefix: u8,
}

/// Ensures the cluster's compute subnet in one AZ: find it by tag, or carve the first free
/// aligned block and create it; then associate it with the private route table (NAT route and
/// S3 endpoint). Idempotent and safe under concurrent callers.
pub async fn ensure_compute_subnet(
    cloud: &Cloud,
    locks: &SubnetLocks,
    req: &ComputeSubnetRequest<'_>,
) -> Result<(Subnet, bool), CloudError> {
    let lock = locks.for_vpc(req.vpc_id);
    let _held = lock.lock().await;
    let role = format!("compute-{}", req.zone.name);
    let mut tags = cluster_tags(req.cluster, &role);
    tags.insert("karpenter.sh/discovery".into(), req.cluster.to_string());
    let wanted = crate::cloud::Tags::from([
        (CLUSTER_TAG.to_string(), req.cluster.to_string()),
        (ROLE_TAG.to_string(), role.clone()),
    ]);
    let mut attempts = 0;
    let (subnet, created) = loop {
        let existing = cloud.network.describe_subnets(req.vpc_id).await?;
        if let Some(found) = existing
            .iter()
            .find(|s| wanted.iter().all(|(k, v)| s.tags.get(k) == Some(v)))
        {
            break (found.clone(), false);
        }
        let vpc = cloud
            .network
            .describe_vpcs()
            .await?
            .into_iter()
            .find(|v| v.id == req.vpc_id)
            .ok_or_else(|| {
                CloudError::new("ec2", "DescribeVpcs", "InvalidVpcID.NotFound", req.vpc_id)
            })?;
        let taken: Vec<Ipv4Net> = existing.iter().map(|s| s.cidr).collect();
        // Secondary blocks first: they exist for the compute fleet (the primary holds the
        // public and private subnets).
        let within: Vec<Ipv4Net> = vpc
            .cidrs
            .iter()
            .skip(1)
            .chain(vpc.cidrs.first())
            .copied()
            .collect();
        let cidr = choose_block(&within, &taken, req.prefix).ok_or_else(|| {
            CloudError::new(
                "ec2",
                "CreateSubnet",
                "InsufficientAddressSpace",
                format!(
                    "no free /{} left in {} ({}); add a secondary CIDR to the VPC or choose a smaller prefix",
                    req.prefix,
                    req.vpc_id,
                    vpc.cidrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        let create = CreateSubnet {
            vpc_id: req.vpc_id.to_string(),
            cidr,
            zone_id: req.zone.id.clone(),
            map_public_ip: false,
            tags: tags.clone(),
        };
        match cloud.network.create_subnet(&create).await {
            Ok(subnet) => break (subnet, true),
            // Another writer took the block between our read and our create: read again.
            Err(e) if e.code == "InvalidSubnet.Conflict" && attempts < 5 => attempts += 1,
            Err(e) => return Err(e),
        }
    };
    // Also on adoption: a crash may have fallen between the create and the association,
    // and associating again is a no-op.
    cloud
        .network
        .associate_route_table(req.route_table_id, &subnet.id)
        .await?;
    Ok((subnet, created))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn overlap_is_interval_intersection_not_string_equality() {
        assert!(overlaps(&net("10.0.0.0/8"), &net("10.90.16.0/20")));
        assert!(overlaps(&net("10.90.16.0/20"), &net("10.90.20.0/24")));
        assert!(!overlaps(&net("10.90.0.0/20"), &net("10.90.16.0/20")));
        assert!(!overlaps(&net("10.90.0.0/16"), &net("10.91.0.0/16")));
    }

    #[test]
    fn chooses_the_first_aligned_block_clear_of_every_existing_subnet() {
        let vpc = [net("10.90.0.0/16")];
        let taken = [
            net("10.90.0.0/24"),
            net("10.90.1.0/24"),
            net("10.90.2.0/24"),
        ];
        assert_eq!(choose_block(&vpc, &taken, 20), Some(net("10.90.16.0/20")));
        // An unaligned /22 straddling two /20 slots blocks both.
        let taken = [net("10.90.0.0/24"), net("10.90.30.0/23")];
        assert_eq!(choose_block(&vpc, &taken, 20), Some(net("10.90.32.0/20")));
    }

    #[test]
    fn an_exhausted_vpc_yields_nothing() {
        let vpc = [net("10.90.0.0/19")];
        let taken = [net("10.90.0.0/20"), net("10.90.16.0/21")];
        assert_eq!(choose_block(&vpc, &taken, 20), None);
        // Blocks smaller than the requested prefix cannot hold it at all.
        assert_eq!(choose_block(&[net("10.1.0.0/24")], &[], 20), None);
    }

    #[test]
    fn multi_cidr_vpcs_fall_back_to_secondary_blocks() {
        let vpc = [net("10.90.0.0/19"), net("100.64.0.0/16")];
        let taken = [net("10.90.0.0/20"), net("10.90.16.0/20")];
        assert_eq!(choose_block(&vpc, &taken, 20), Some(net("100.64.0.0/20")));
    }

    #[test]
    fn the_vpc_block_avoids_overlap_with_any_existing_vpc() {
        let vpc = |c: &str| Vpc {
            id: "vpc-1".into(),
            cidrs: vec![net(c)],
            tags: Default::default(),
        };
        assert_eq!(
            free_vpc_cidr(&[vpc("172.31.0.0/16")]),
            Some(net("10.90.0.0/16"))
        );
        // A /12 covering 10.80–10.95 is detected even though no string matches.
        assert_eq!(
            free_vpc_cidr(&[vpc("10.80.0.0/12")]),
            Some(net("10.96.0.0/16"))
        );
        assert_eq!(free_vpc_cidr(&[vpc("10.0.0.0/8")]), None);
    }
}
