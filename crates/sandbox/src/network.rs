//! The simulated EC2 networking: VPCs, subnets, gateways, route tables, security groups, endpoints.

use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde_json::{json, Value};

use super::shared::*;
use super::{durations as d, new_id, Life, Sandbox, REGION, ZONES};
use cloud::*;

#[async_trait]
impl Network for Sandbox {
    fn region(&self) -> String {
        REGION.to_string()
    }

    async fn describe_availability_zones(&self) -> CloudResult<Vec<Zone>> {
        self.gate("ec2:DescribeAvailabilityZones", false).await?;
        Ok(ZONES
            .iter()
            .map(|(name, id, _)| Zone {
                name: name.to_string(),
                id: id.to_string(),
            })
            .collect())
    }

    async fn describe_instance_type_offerings(&self, zone: &str) -> CloudResult<Vec<String>> {
        self.gate("ec2:DescribeInstanceTypeOfferings", false)
            .await?;
        Ok(ZONES
            .iter()
            .find(|(name, _, _)| *name == zone)
            .map(|(_, _, types)| types.iter().map(|t| t.to_string()).collect())
            .unwrap_or_default())
    }

    async fn describe_vpcs(&self) -> CloudResult<Vec<Vpc>> {
        self.gate("ec2:DescribeVpcs", false).await?;
        Ok(self.list("vpc").await?.iter().map(vpc_of).collect())
    }

    async fn describe_subnets(&self, vpc_id: &str) -> CloudResult<Vec<Subnet>> {
        self.gate("ec2:DescribeSubnets", false).await?;
        Ok(self
            .list("subnet")
            .await?
            .iter()
            .filter_map(subnet_of)
            .filter(|s| s.vpc_id == vpc_id)
            .collect())
    }

    async fn find_tagged(&self, kind: NetKind, tags: &Tags) -> CloudResult<Vec<String>> {
        self.gate("ec2:Describe", false).await?;
        Ok(self
            .list(kind.as_str())
            .await?
            .into_iter()
            .filter(|r| has_tags(&r.data, tags))
            .map(|r| r.id)
            .collect())
    }

    async fn create_vpc(&self, cidr: Ipv4Net, tags: &Tags) -> CloudResult<Vpc> {
        let api = "ec2:CreateVpc";
        self.gate(api, true).await?;
        let id = new_id("vpc");
        let data = json!({"cidrs": [cidr], "tags": tags});
        self.create(api, "vpc", &id, None, &data).await?;
        Ok(Vpc {
            id,
            cidrs: vec![cidr],
            tags: tags.clone(),
        })
    }

    async fn associate_vpc_cidr(&self, vpc_id: &str, cidr: Ipv4Net) -> CloudResult<()> {
        let api = "ec2:AssociateVpcCidrBlock";
        self.gate(api, true).await?;
        let mut vpc = self
            .require("vpc", vpc_id, api, "InvalidVpcID.NotFound")
            .await?;
        let mut cidrs = vpc_of(&vpc).cidrs;
        if let Some(other) = cidrs
            .iter()
            .find(|c| c.contains(&cidr.network()) || cidr.contains(&c.network()))
        {
            return Err(CloudError::new(
                "ec2",
                "AssociateVpcCidrBlock",
                "InvalidVpc.Range",
                format!("{cidr} overlaps {other}, already associated with {vpc_id}"),
            ));
        }
        cidrs.push(cidr);
        vpc.data["cidrs"] = json!(cidrs);
        self.update(api, "vpc", vpc_id, &vpc.data).await
    }

    async fn create_subnet(&self, req: &CreateSubnet) -> CloudResult<Subnet> {
        let api = "ec2:CreateSubnet";
        self.gate(api, true).await?;
        let vpc = vpc_of(
            &self
                .require("vpc", &req.vpc_id, api, "InvalidVpcID.NotFound")
                .await?,
        );
        let zone = ZONES
            .iter()
            .find(|(_, id, _)| *id == req.zone_id)
            .ok_or_else(|| {
                CloudError::new(
                    "ec2",
                    "CreateSubnet",
                    "InvalidParameterValue",
                    "unknown zone id",
                )
            })?;
        if !vpc.cidrs.iter().any(|c| c.contains(&req.cidr)) {
            return Err(CloudError::new(
                "ec2",
                "CreateSubnet",
                "InvalidSubnet.Range",
                format!("The CIDR '{}' is invalid.", req.cidr),
            ));
        }
        let existing = self.describe_subnets(&req.vpc_id).await?;
        if let Some(other) = existing
            .iter()
            .find(|s| s.cidr.contains(&req.cidr.network()) || req.cidr.contains(&s.cidr.network()))
        {
            return Err(CloudError::new(
                "ec2",
                "CreateSubnet",
                "InvalidSubnet.Conflict",
                format!(
                    "The CIDR '{}' conflicts with another subnet ({})",
                    req.cidr, other.id
                ),
            ));
        }
        let id = new_id("subnet");
        let data = json!({
            "vpcId": req.vpc_id, "cidr": req.cidr, "zone": zone.0,
            "mapPublicIp": req.map_public_ip, "tags": req.tags,
        });
        self.create(api, "subnet", &id, None, &data).await?;
        Ok(Subnet {
            id,
            vpc_id: req.vpc_id.clone(),
            cidr: req.cidr,
            zone: zone.0.to_string(),
            tags: req.tags.clone(),
        })
    }

    async fn create_internet_gateway(&self, vpc_id: &str, tags: &Tags) -> CloudResult<String> {
        let api = "ec2:CreateInternetGateway";
        self.gate(api, true).await?;
        self.require("vpc", vpc_id, api, "InvalidVpcID.NotFound")
            .await?;
        let id = new_id("igw");
        self.create(
            api,
            "internet-gateway",
            &id,
            None,
            &json!({"vpcId": vpc_id, "tags": tags}),
        )
        .await?;
        Ok(id)
    }

    async fn attach_internet_gateway(&self, igw_id: &str, vpc_id: &str) -> CloudResult<()> {
        let api = "ec2:AttachInternetGateway";
        self.gate(api, false).await?;
        let igw = self
            .require(
                "internet-gateway",
                igw_id,
                api,
                "InvalidInternetGatewayID.NotFound",
            )
            .await?;
        if igw.data["vpcId"] == vpc_id {
            Ok(())
        } else {
            Err(CloudError::new(
                "ec2",
                "AttachInternetGateway",
                "Resource.AlreadyAssociated",
                "attached to another VPC",
            ))
        }
    }

    async fn create_nat_gateway(&self, subnet_id: &str, tags: &Tags) -> CloudResult<String> {
        let api = "ec2:CreateNatGateway";
        self.gate(api, true).await?;
        self.require("subnet", subnet_id, api, "InvalidSubnetID.NotFound")
            .await?;
        let id = new_id("nat");
        self.create(
            api,
            "nat-gateway",
            &id,
            None,
            &json!({"subnetId": subnet_id, "tags": tags}),
        )
        .await?;
        Ok(id)
    }

    async fn nat_gateway_state(&self, id: &str) -> CloudResult<ResourceState> {
        self.gate("ec2:DescribeNatGateways", false).await?;
        let Some(res) = self.get("nat-gateway", id).await? else {
            return Err(not_found(
                "ec2",
                "DescribeNatGateways",
                "NatGatewayNotFound",
                id,
            ));
        };
        Ok(match self.life(&res, d::NAT_CREATE, d::NAT_CREATE / 2.0) {
            Life::Creating(_) => ResourceState::Pending,
            Life::Ready => ResourceState::Available,
            Life::Deleting => ResourceState::Deleting,
            Life::Gone => ResourceState::Deleted,
        })
    }

    async fn create_route_table(&self, req: &CreateRouteTable) -> CloudResult<String> {
        let api = "ec2:CreateRouteTable";
        self.gate(api, true).await?;
        self.require("vpc", &req.vpc_id, api, "InvalidVpcID.NotFound")
            .await?;
        let id = new_id("rtb");
        let data = json!({
            "vpcId": req.vpc_id,
            "routes": [{"destination": "0.0.0.0/0", "target": req.default_route_target}],
            "associations": req.subnet_ids, "tags": req.tags,
        });
        self.create(api, "route-table", &id, None, &data).await?;
        Ok(id)
    }

    async fn ensure_default_route(&self, route_table_id: &str, target: &str) -> CloudResult<()> {
        let api = "ec2:CreateRoute";
        self.gate(api, false).await?;
        let mut rt = self
            .require(
                "route-table",
                route_table_id,
                api,
                "InvalidRouteTableID.NotFound",
            )
            .await?;
        if rt.data["routes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["destination"] == "0.0.0.0/0"))
        {
            return Ok(());
        }
        rt.data["routes"] = json!([{"destination": "0.0.0.0/0", "target": target}]);
        self.update(api, "route-table", route_table_id, &rt.data)
            .await
    }

    async fn associate_route_table(
        &self,
        route_table_id: &str,
        subnet_id: &str,
    ) -> CloudResult<()> {
        let api = "ec2:AssociateRouteTable";
        self.gate(api, true).await?;
        let mut rt = self
            .require(
                "route-table",
                route_table_id,
                api,
                "InvalidRouteTableID.NotFound",
            )
            .await?;
        self.require("subnet", subnet_id, api, "InvalidSubnetID.NotFound")
            .await?;
        let assoc = rt.data["associations"].as_array_mut();
        match assoc {
            Some(list) if !list.iter().any(|s| s == subnet_id) => list.push(json!(subnet_id)),
            Some(_) => return Ok(()),
            None => rt.data["associations"] = json!([subnet_id]),
        }
        self.update(api, "route-table", route_table_id, &rt.data)
            .await
    }

    async fn create_security_group(&self, req: &CreateSecurityGroup) -> CloudResult<String> {
        let api = "ec2:CreateSecurityGroup";
        self.gate(api, true).await?;
        self.require("vpc", &req.vpc_id, api, "InvalidVpcID.NotFound")
            .await?;
        let id = new_id("sg");
        // A new group allows all egress and no ingress, as in EC2.
        let mut rules = vec![json!({"protocol": "-1", "cidr": "0.0.0.0/0", "direction": "egress"})];
        if req.self_referencing {
            rules.extend(self_rules(&id));
        }
        let data =
            json!({"vpcId": req.vpc_id, "groupName": req.name, "rules": rules, "tags": req.tags});
        self.create(api, "security-group", &id, None, &data).await?;
        Ok(id)
    }

    async fn ensure_self_referencing(&self, group_id: &str) -> CloudResult<()> {
        let api = "ec2:AuthorizeSecurityGroupIngress";
        self.gate(api, false).await?;
        let sg = self
            .require("security-group", group_id, api, "InvalidGroup.NotFound")
            .await?;
        let mut rules = sg.data["rules"].as_array().cloned().unwrap_or_default();
        let missing: Vec<Value> = self_rules(group_id)
            .into_iter()
            .filter(|r| !rules.contains(r))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        rules.extend(missing);
        let mut data = sg.data.clone();
        data["rules"] = Value::Array(rules);
        self.update(api, "security-group", group_id, &data).await
    }

    async fn create_s3_endpoint(
        &self,
        vpc_id: &str,
        route_table_ids: &[String],
        tags: &Tags,
    ) -> CloudResult<String> {
        let api = "ec2:CreateVpcEndpoint";
        self.gate(api, true).await?;
        self.require("vpc", vpc_id, api, "InvalidVpcID.NotFound")
            .await?;
        let id = new_id("vpce");
        let data = json!({
            "vpcId": vpc_id, "serviceName": format!("com.amazonaws.{REGION}.s3"),
            "type": "Gateway", "routeTableIds": route_table_ids, "tags": tags,
        });
        self.create(api, "vpc-endpoint", &id, None, &data).await?;
        Ok(id)
    }

    async fn delete(&self, kind: NetKind, id: &str) -> CloudResult<()> {
        let api = match kind {
            NetKind::Vpc => "ec2:DeleteVpc",
            NetKind::Subnet => "ec2:DeleteSubnet",
            NetKind::InternetGateway => "ec2:DeleteInternetGateway",
            NetKind::NatGateway => "ec2:DeleteNatGateway",
            NetKind::ElasticIp => "ec2:ReleaseAddress",
            NetKind::RouteTable => "ec2:DeleteRouteTable",
            NetKind::SecurityGroup => "ec2:DeleteSecurityGroup",
            NetKind::VpcEndpoint => "ec2:DeleteVpcEndpoints",
        };
        self.gate(api, true).await?;
        match self.get(kind.as_str(), id).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, kind.as_str(), id).await,
            _ => Ok(()),
        }
    }
}

/// All traffic from a group to itself, in and out (what EFA and node ↔ control plane need).
pub(super) fn self_rules(group_id: &str) -> [Value; 2] {
    [
        json!({"protocol": "-1", "source": group_id, "direction": "ingress"}),
        json!({"protocol": "-1", "source": group_id, "direction": "egress"}),
    ]
}
