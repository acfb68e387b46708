//! EC2: zones, offerings and the VPC resources of a cluster.

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    AttributeBooleanValue, DomainType, Filter, IpPermission, LocationType, NatGatewayState,
    ResourceType, Tag, TagSpecification, UserIdGroupPair, VpcEndpointType,
};
use ipnet::Ipv4Net;

use super::errors::{idempotent, is_not_found, once};
use super::{client_token, Aws};
use cloud::*;

const S: &str = "ec2";

/// A tag specification, or none for no tags (EC2 refuses an empty one).
fn tag_spec(kind: ResourceType, tags: &Tags) -> Option<Vec<TagSpecification>> {
    (!tags.is_empty()).then(|| {
        vec![TagSpecification::builder()
            .resource_type(kind)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| Tag::builder().key(k).value(v).build())
                    .collect(),
            ))
            .build()]
    })
}

pub(super) fn tag_filters(tags: &Tags) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
        .collect()
}

pub(super) fn tags_of(tags: &[Tag]) -> Tags {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect()
}

pub(super) fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

pub(super) fn parse_cidr(s: Option<&str>) -> Option<Ipv4Net> {
    s?.parse().ok()
}

/// Deletes tolerate "already gone".
pub(super) fn gone_ok(r: CloudResult<()>) -> CloudResult<()> {
    match r {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other,
    }
}

impl Aws {
    async fn eip_for_nat(&self, nat_tags: &Tags) -> CloudResult<String> {
        let mut tags = nat_tags.clone();
        let role = format!("{}-eip", tags.get(ROLE_TAG).cloned().unwrap_or_default());
        tags.insert(ROLE_TAG.into(), role);
        if let Some(name) = tags.get("Name").cloned() {
            tags.insert("Name".into(), format!("{name}-eip"));
        }
        if let Some(id) = self
            .find_tagged(NetKind::ElasticIp, &tags)
            .await?
            .into_iter()
            .next()
        {
            return Ok(id);
        }
        let out = once(
            S,
            "AllocateAddress",
            self.ec2
                .allocate_address()
                .domain(DomainType::Vpc)
                .set_tag_specifications(tag_spec(ResourceType::ElasticIp, &tags))
                .send(),
        )
        .await?;
        Ok(out.allocation_id().unwrap_or_default().to_string())
    }
}

#[async_trait]
impl Network for Aws {
    fn region(&self) -> String {
        self.region.clone()
    }

    async fn describe_availability_zones(&self) -> CloudResult<Vec<Zone>> {
        let out = idempotent(S, "DescribeAvailabilityZones", || {
            self.ec2
                .describe_availability_zones()
                .filters(filter("zone-type", "availability-zone"))
                .filters(filter("state", "available"))
                .send()
        })
        .await?;
        Ok(out
            .availability_zones()
            .iter()
            .filter_map(|z| {
                Some(Zone {
                    name: z.zone_name()?.to_string(),
                    id: z.zone_id()?.to_string(),
                })
            })
            .collect())
    }

    async fn describe_instance_type_offerings(&self, zone: &str) -> CloudResult<Vec<String>> {
        let mut types = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "DescribeInstanceTypeOfferings", || {
                self.ec2
                    .describe_instance_type_offerings()
                    .location_type(LocationType::AvailabilityZone)
                    .filters(filter("location", zone))
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            // Accelerated families only (a server-side wildcard filter is not supported everywhere).
            types.extend(
                out.instance_type_offerings()
                    .iter()
                    .filter_map(|o| o.instance_type().map(|t| t.as_str().to_string()))
                    .filter(|t| {
                        ["p", "g", "trn", "inf"].iter().any(|f| {
                            t.starts_with(f)
                                && t[f.len()..].starts_with(|c: char| c.is_ascii_digit())
                        })
                    }),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        types.sort();
        types.dedup();
        Ok(types)
    }

    async fn describe_vpcs(&self) -> CloudResult<Vec<Vpc>> {
        let mut vpcs = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "DescribeVpcs", || {
                self.ec2
                    .describe_vpcs()
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            for v in out.vpcs() {
                let mut cidrs: Vec<Ipv4Net> = v
                    .cidr_block_association_set()
                    .iter()
                    .filter(|a| {
                        a.cidr_block_state()
                            .and_then(|s| s.state())
                            .is_some_and(|s| s.as_str() == "associated")
                    })
                    .filter_map(|a| parse_cidr(a.cidr_block()))
                    .collect();
                if cidrs.is_empty() {
                    cidrs.extend(parse_cidr(v.cidr_block()));
                }
                vpcs.push(Vpc {
                    id: v.vpc_id().unwrap_or_default().to_string(),
                    cidrs,
                    tags: tags_of(v.tags()),
                });
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(vpcs)
    }

    async fn describe_subnets(&self, vpc_id: &str) -> CloudResult<Vec<Subnet>> {
        let mut subnets = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "DescribeSubnets", || {
                self.ec2
                    .describe_subnets()
                    .filters(filter("vpc-id", vpc_id))
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            subnets.extend(out.subnets().iter().filter_map(|s| {
                Some(Subnet {
                    id: s.subnet_id()?.to_string(),
                    vpc_id: s.vpc_id()?.to_string(),
                    cidr: parse_cidr(s.cidr_block())?,
                    zone: s.availability_zone()?.to_string(),
                    tags: tags_of(s.tags()),
                })
            }));
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(subnets)
    }

    async fn find_tagged(&self, kind: NetKind, tags: &Tags) -> CloudResult<Vec<String>> {
        self.find_tagged_of(kind, tags).await
    }

    async fn associate_vpc_cidr(&self, vpc_id: &str, cidr: Ipv4Net) -> CloudResult<()> {
        once(
            S,
            "AssociateVpcCidrBlock",
            self.ec2
                .associate_vpc_cidr_block()
                .vpc_id(vpc_id)
                .cidr_block(cidr.to_string())
                .send(),
        )
        .await
        .map(|_| ())
    }

    async fn create_vpc(&self, cidr: Ipv4Net, tags: &Tags) -> CloudResult<Vpc> {
        let out = once(
            S,
            "CreateVpc",
            self.ec2
                .create_vpc()
                .cidr_block(cidr.to_string())
                .set_tag_specifications(tag_spec(ResourceType::Vpc, tags))
                .send(),
        )
        .await?;
        let id = out
            .vpc()
            .and_then(|v| v.vpc_id())
            .unwrap_or_default()
            .to_string();
        // EKS needs DNS support and hostnames; both are idempotent attribute writes.
        let on = AttributeBooleanValue::builder().value(true).build();
        idempotent(S, "ModifyVpcAttribute", || {
            self.ec2
                .modify_vpc_attribute()
                .vpc_id(&id)
                .enable_dns_support(on.clone())
                .send()
        })
        .await?;
        idempotent(S, "ModifyVpcAttribute", || {
            self.ec2
                .modify_vpc_attribute()
                .vpc_id(&id)
                .enable_dns_hostnames(on.clone())
                .send()
        })
        .await?;
        Ok(Vpc {
            id,
            cidrs: vec![cidr],
            tags: tags.clone(),
        })
    }

    async fn create_subnet(&self, req: &CreateSubnet) -> CloudResult<Subnet> {
        let out = once(
            S,
            "CreateSubnet",
            self.ec2
                .create_subnet()
                .vpc_id(&req.vpc_id)
                .cidr_block(req.cidr.to_string())
                .availability_zone_id(&req.zone_id)
                .set_tag_specifications(tag_spec(ResourceType::Subnet, &req.tags))
                .send(),
        )
        .await?;
        let s = out.subnet();
        let id = s
            .and_then(|s| s.subnet_id())
            .unwrap_or_default()
            .to_string();
        if req.map_public_ip {
            idempotent(S, "ModifySubnetAttribute", || {
                self.ec2
                    .modify_subnet_attribute()
                    .subnet_id(&id)
                    .map_public_ip_on_launch(AttributeBooleanValue::builder().value(true).build())
                    .send()
            })
            .await?;
        }
        Ok(Subnet {
            id,
            vpc_id: req.vpc_id.clone(),
            cidr: req.cidr,
            zone: s
                .and_then(|s| s.availability_zone())
                .unwrap_or_default()
                .to_string(),
            tags: req.tags.clone(),
        })
    }

    async fn create_internet_gateway(&self, vpc_id: &str, tags: &Tags) -> CloudResult<String> {
        let out = once(
            S,
            "CreateInternetGateway",
            self.ec2
                .create_internet_gateway()
                .set_tag_specifications(tag_spec(ResourceType::InternetGateway, tags))
                .send(),
        )
        .await?;
        let id = out
            .internet_gateway()
            .and_then(|g| g.internet_gateway_id())
            .unwrap_or_default()
            .to_string();
        self.attach_internet_gateway(&id, vpc_id).await?;
        Ok(id)
    }

    async fn attach_internet_gateway(&self, igw_id: &str, vpc_id: &str) -> CloudResult<()> {
        let described = idempotent(S, "DescribeInternetGateways", || {
            self.ec2
                .describe_internet_gateways()
                .internet_gateway_ids(igw_id)
                .send()
        })
        .await?;
        let attached = described
            .internet_gateways()
            .iter()
            .flat_map(|g| g.attachments())
            .any(|a| a.vpc_id() == Some(vpc_id));
        if attached {
            return Ok(());
        }
        idempotent(S, "AttachInternetGateway", || {
            self.ec2
                .attach_internet_gateway()
                .internet_gateway_id(igw_id)
                .vpc_id(vpc_id)
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn create_nat_gateway(&self, subnet_id: &str, tags: &Tags) -> CloudResult<String> {
        let allocation = self.eip_for_nat(tags).await?;
        let out = once(
            S,
            "CreateNatGateway",
            self.ec2
                .create_nat_gateway()
                .subnet_id(subnet_id)
                .allocation_id(allocation)
                .client_token(client_token(tags))
                .set_tag_specifications(tag_spec(ResourceType::Natgateway, tags))
                .send(),
        )
        .await?;
        Ok(out
            .nat_gateway()
            .and_then(|n| n.nat_gateway_id())
            .unwrap_or_default()
            .to_string())
    }

    async fn nat_gateway_state(&self, id: &str) -> CloudResult<ResourceState> {
        let out = match idempotent(S, "DescribeNatGateways", || {
            self.ec2.describe_nat_gateways().nat_gateway_ids(id).send()
        })
        .await
        {
            Ok(out) => out,
            Err(e) if is_not_found(&e) => return Ok(ResourceState::Deleted),
            Err(e) => return Err(e),
        };
        Ok(match out.nat_gateways().first().and_then(|n| n.state()) {
            Some(NatGatewayState::Available) => ResourceState::Available,
            Some(NatGatewayState::Pending) => ResourceState::Pending,
            Some(NatGatewayState::Deleting) => ResourceState::Deleting,
            Some(NatGatewayState::Failed) => ResourceState::Failed,
            Some(NatGatewayState::Deleted) | None => ResourceState::Deleted,
            Some(_) => ResourceState::Pending,
        })
    }

    async fn create_route_table(&self, req: &CreateRouteTable) -> CloudResult<String> {
        let out = once(
            S,
            "CreateRouteTable",
            self.ec2
                .create_route_table()
                .vpc_id(&req.vpc_id)
                .set_tag_specifications(tag_spec(ResourceType::RouteTable, &req.tags))
                .send(),
        )
        .await?;
        let id = out
            .route_table()
            .and_then(|r| r.route_table_id())
            .unwrap_or_default()
            .to_string();
        self.ensure_default_route(&id, &req.default_route_target)
            .await?;
        for subnet in &req.subnet_ids {
            self.associate_route_table(&id, subnet).await?;
        }
        Ok(id)
    }

    async fn ensure_default_route(&self, route_table_id: &str, target: &str) -> CloudResult<()> {
        let result = idempotent(S, "CreateRoute", || {
            let call = self
                .ec2
                .create_route()
                .route_table_id(route_table_id)
                .destination_cidr_block("0.0.0.0/0");
            if target.starts_with("nat-") {
                call.nat_gateway_id(target).send()
            } else {
                call.gateway_id(target).send()
            }
        })
        .await;
        match result {
            Err(e) if e.code == "RouteAlreadyExists" => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn associate_route_table(
        &self,
        route_table_id: &str,
        subnet_id: &str,
    ) -> CloudResult<()> {
        let tables = idempotent(S, "DescribeRouteTables", || {
            self.ec2
                .describe_route_tables()
                .filters(filter("association.subnet-id", subnet_id))
                .send()
        })
        .await?;
        let current = tables
            .route_tables()
            .iter()
            .flat_map(|t| t.associations())
            .find(|a| a.subnet_id() == Some(subnet_id));
        match current {
            Some(a) if a.route_table_id() == Some(route_table_id) => Ok(()),
            Some(a) => {
                let assoc = a
                    .route_table_association_id()
                    .unwrap_or_default()
                    .to_string();
                idempotent(S, "ReplaceRouteTableAssociation", || {
                    self.ec2
                        .replace_route_table_association()
                        .association_id(&assoc)
                        .route_table_id(route_table_id)
                        .send()
                })
                .await
                .map(|_| ())
            }
            None => idempotent(S, "AssociateRouteTable", || {
                self.ec2
                    .associate_route_table()
                    .route_table_id(route_table_id)
                    .subnet_id(subnet_id)
                    .send()
            })
            .await
            .map(|_| ()),
        }
    }

    async fn create_security_group(&self, req: &CreateSecurityGroup) -> CloudResult<String> {
        let out = once(
            S,
            "CreateSecurityGroup",
            self.ec2
                .create_security_group()
                .group_name(&req.name)
                .description(&req.description)
                .vpc_id(&req.vpc_id)
                .set_tag_specifications(tag_spec(ResourceType::SecurityGroup, &req.tags))
                .send(),
        )
        .await?;
        let id = out.group_id().unwrap_or_default().to_string();
        if req.self_referencing {
            self.ensure_self_referencing(&id).await?;
        }
        Ok(id)
    }

    async fn ensure_self_referencing(&self, group_id: &str) -> CloudResult<()> {
        let rule = IpPermission::builder()
            .ip_protocol("-1")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(group_id).build())
            .build();
        let ingress = idempotent(S, "AuthorizeSecurityGroupIngress", || {
            self.ec2
                .authorize_security_group_ingress()
                .group_id(group_id)
                .ip_permissions(rule.clone())
                .send()
        })
        .await;
        match ingress {
            Err(e) if e.code == "InvalidPermission.Duplicate" => {}
            other => other.map(|_| ())?,
        }
        // EFA needs the group in its egress rules too: the default egress to 0.0.0.0/0 does
        // not carry EFA traffic.
        let egress = idempotent(S, "AuthorizeSecurityGroupEgress", || {
            self.ec2
                .authorize_security_group_egress()
                .group_id(group_id)
                .ip_permissions(rule.clone())
                .send()
        })
        .await;
        match egress {
            Err(e) if e.code == "InvalidPermission.Duplicate" => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn create_s3_endpoint(
        &self,
        vpc_id: &str,
        route_table_ids: &[String],
        tags: &Tags,
    ) -> CloudResult<String> {
        let out = once(
            S,
            "CreateVpcEndpoint",
            self.ec2
                .create_vpc_endpoint()
                .vpc_id(vpc_id)
                .vpc_endpoint_type(VpcEndpointType::Gateway)
                .service_name(format!("com.amazonaws.{}.s3", self.region))
                .set_route_table_ids(Some(route_table_ids.to_vec()))
                .client_token(client_token(tags))
                .set_tag_specifications(tag_spec(ResourceType::VpcEndpoint, tags))
                .send(),
        )
        .await?;
        Ok(out
            .vpc_endpoint()
            .and_then(|e| e.vpc_endpoint_id())
            .unwrap_or_default()
            .to_string())
    }

    async fn delete(&self, kind: NetKind, id: &str) -> CloudResult<()> {
        self.delete_of(kind, id).await
    }
}
