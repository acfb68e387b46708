//! EC2 by resource kind: finding a cluster's tagged resources and deleting one, each kind with
//! its own Describe*/Delete* call.

use aws_sdk_ec2::types::NatGatewayState;

use super::ec2::{gone_ok, tag_filters};
use super::errors::{idempotent, is_not_found};
use super::Aws;
use cloud::*;

const S: &str = "ec2";

impl Aws {
    pub(super) async fn find_tagged_of(
        &self,
        kind: NetKind,
        tags: &Tags,
    ) -> CloudResult<Vec<String>> {
        let f = Some(tag_filters(tags));
        let ids: Vec<String> = match kind {
            NetKind::Vpc => idempotent(S, "DescribeVpcs", || {
                self.ec2.describe_vpcs().set_filters(f.clone()).send()
            })
            .await?
            .vpcs()
            .iter()
            .filter_map(|v| v.vpc_id().map(str::to_string))
            .collect(),
            NetKind::Subnet => idempotent(S, "DescribeSubnets", || {
                self.ec2.describe_subnets().set_filters(f.clone()).send()
            })
            .await?
            .subnets()
            .iter()
            .filter_map(|s| s.subnet_id().map(str::to_string))
            .collect(),
            NetKind::InternetGateway => idempotent(S, "DescribeInternetGateways", || {
                self.ec2
                    .describe_internet_gateways()
                    .set_filters(f.clone())
                    .send()
            })
            .await?
            .internet_gateways()
            .iter()
            .filter_map(|g| g.internet_gateway_id().map(str::to_string))
            .collect(),
            NetKind::NatGateway => idempotent(S, "DescribeNatGateways", || {
                self.ec2
                    .describe_nat_gateways()
                    .set_filter(f.clone())
                    .send()
            })
            .await?
            .nat_gateways()
            .iter()
            .filter(|n| {
                !matches!(
                    n.state(),
                    Some(NatGatewayState::Deleted | NatGatewayState::Failed)
                )
            })
            .filter_map(|n| n.nat_gateway_id().map(str::to_string))
            .collect(),
            NetKind::ElasticIp => idempotent(S, "DescribeAddresses", || {
                self.ec2.describe_addresses().set_filters(f.clone()).send()
            })
            .await?
            .addresses()
            .iter()
            .filter_map(|a| a.allocation_id().map(str::to_string))
            .collect(),
            NetKind::RouteTable => idempotent(S, "DescribeRouteTables", || {
                self.ec2
                    .describe_route_tables()
                    .set_filters(f.clone())
                    .send()
            })
            .await?
            .route_tables()
            .iter()
            .filter_map(|r| r.route_table_id().map(str::to_string))
            .collect(),
            NetKind::SecurityGroup => idempotent(S, "DescribeSecurityGroups", || {
                self.ec2
                    .describe_security_groups()
                    .set_filters(f.clone())
                    .send()
            })
            .await?
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect(),
            NetKind::VpcEndpoint => idempotent(S, "DescribeVpcEndpoints", || {
                self.ec2
                    .describe_vpc_endpoints()
                    .set_filters(f.clone())
                    .send()
            })
            .await?
            .vpc_endpoints()
            .iter()
            .filter(|e| {
                !e.state().is_some_and(|s| {
                    matches!(s.as_str(), "deleted" | "Deleted" | "deleting" | "Deleting")
                })
            })
            .filter_map(|e| e.vpc_endpoint_id().map(str::to_string))
            .collect(),
        };
        Ok(ids)
    }

    pub(super) async fn delete_of(&self, kind: NetKind, id: &str) -> CloudResult<()> {
        let r = match kind {
            NetKind::Vpc => idempotent(S, "DeleteVpc", || self.ec2.delete_vpc().vpc_id(id).send())
                .await
                .map(|_| ()),
            NetKind::Subnet => idempotent(S, "DeleteSubnet", || {
                self.ec2.delete_subnet().subnet_id(id).send()
            })
            .await
            .map(|_| ()),
            NetKind::NatGateway => idempotent(S, "DeleteNatGateway", || {
                self.ec2.delete_nat_gateway().nat_gateway_id(id).send()
            })
            .await
            .map(|_| ()),
            NetKind::ElasticIp => idempotent(S, "ReleaseAddress", || {
                self.ec2.release_address().allocation_id(id).send()
            })
            .await
            .map(|_| ()),
            NetKind::SecurityGroup => idempotent(S, "DeleteSecurityGroup", || {
                self.ec2.delete_security_group().group_id(id).send()
            })
            .await
            .map(|_| ()),
            NetKind::VpcEndpoint => idempotent(S, "DeleteVpcEndpoints", || {
                self.ec2.delete_vpc_endpoints().vpc_endpoint_ids(id).send()
            })
            .await
            .map(|_| ()),
            NetKind::InternetGateway => {
                let described = gone_or(
                    idempotent(S, "DescribeInternetGateways", || {
                        self.ec2
                            .describe_internet_gateways()
                            .internet_gateway_ids(id)
                            .send()
                    })
                    .await,
                )?;
                let Some(described) = described else {
                    return Ok(());
                };
                for a in described
                    .internet_gateways()
                    .iter()
                    .flat_map(|g| g.attachments())
                {
                    let vpc = a.vpc_id().unwrap_or_default().to_string();
                    gone_ok(
                        idempotent(S, "DetachInternetGateway", || {
                            self.ec2
                                .detach_internet_gateway()
                                .internet_gateway_id(id)
                                .vpc_id(&vpc)
                                .send()
                        })
                        .await
                        .map(|_| ()),
                    )?;
                }
                idempotent(S, "DeleteInternetGateway", || {
                    self.ec2
                        .delete_internet_gateway()
                        .internet_gateway_id(id)
                        .send()
                })
                .await
                .map(|_| ())
            }
            NetKind::RouteTable => {
                let described = gone_or(
                    idempotent(S, "DescribeRouteTables", || {
                        self.ec2.describe_route_tables().route_table_ids(id).send()
                    })
                    .await,
                )?;
                let Some(described) = described else {
                    return Ok(());
                };
                for a in described
                    .route_tables()
                    .iter()
                    .flat_map(|t| t.associations())
                {
                    if a.main() == Some(true) {
                        continue;
                    }
                    let assoc = a
                        .route_table_association_id()
                        .unwrap_or_default()
                        .to_string();
                    gone_ok(
                        idempotent(S, "DisassociateRouteTable", || {
                            self.ec2
                                .disassociate_route_table()
                                .association_id(&assoc)
                                .send()
                        })
                        .await
                        .map(|_| ()),
                    )?;
                }
                idempotent(S, "DeleteRouteTable", || {
                    self.ec2.delete_route_table().route_table_id(id).send()
                })
                .await
                .map(|_| ())
            }
        };
        gone_ok(r)
    }
}

fn gone_or<T>(r: CloudResult<T>) -> CloudResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
