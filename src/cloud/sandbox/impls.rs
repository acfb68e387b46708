//! The port implementations of the sandbox: EC2, EKS, SageMaker, IAM, S3, quotas, Kubernetes.

use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde_json::{json, Value};

use super::{durations as d, new_id, Life, Res, Sandbox, ACCOUNT, QUOTAS, REGION, ZONES};
use crate::cloud::*;

fn tags_of(data: &Value) -> Tags {
    serde_json::from_value(data.get("tags").cloned().unwrap_or(Value::Null)).unwrap_or_default()
}

fn has_tags(data: &Value, want: &Tags) -> bool {
    let tags = tags_of(data);
    want.iter().all(|(k, v)| tags.get(k) == Some(v))
}

fn not_found(service: &str, op: &str, code: &str, what: &str) -> CloudError {
    CloudError::new(service, op, code, format!("{what} does not exist"))
}

fn vpc_of(res: &Res) -> Vpc {
    Vpc {
        id: res.id.clone(),
        cidrs: serde_json::from_value(res.data["cidrs"].clone()).unwrap_or_default(),
        tags: tags_of(&res.data),
    }
}

fn subnet_of(res: &Res) -> Option<Subnet> {
    Some(Subnet {
        id: res.id.clone(),
        vpc_id: res.data["vpcId"].as_str()?.to_string(),
        cidr: res.data["cidr"].as_str()?.parse().ok()?,
        zone: res.data["zone"].as_str()?.to_string(),
        tags: tags_of(&res.data),
    })
}

impl Sandbox {
    async fn require(&self, kind: &str, id: &str, api: &str, code: &str) -> CloudResult<Res> {
        let (service, op) = super::split_api(api);
        match self.get(kind, id).await? {
            Some(r) if r.deleted_ms.is_none() => Ok(r),
            _ => Err(not_found(service, op, code, &format!("{kind} '{id}'"))),
        }
    }
}

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
            .find(|c| crate::service::subnets::overlaps(c, &cidr))
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
fn self_rules(group_id: &str) -> [Value; 2] {
    [
        json!({"protocol": "-1", "source": group_id, "direction": "ingress"}),
        json!({"protocol": "-1", "source": group_id, "direction": "egress"}),
    ]
}

fn eks_arn(name: &str) -> String {
    format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{name}")
}

#[async_trait]
impl Eks for Sandbox {
    async fn create_cluster(&self, req: &CreateEksCluster) -> CloudResult<EksCluster> {
        let api = "eks:CreateCluster";
        self.gate(api, true).await?;
        if req.subnet_ids.len() < 2 {
            return Err(CloudError::new(
                "eks",
                "CreateCluster",
                "InvalidParameterException",
                "Subnets specified must be in at least two different AZs",
            ));
        }
        let id = new_id("eks");
        let data = serde_json::to_value(req).unwrap_or_default();
        self.create(api, "eks-cluster", &id, Some(&req.name), &data)
            .await?;
        Eks::describe_cluster(self, &req.name)
            .await?
            .ok_or_else(|| {
                CloudError::new(
                    "eks",
                    "CreateCluster",
                    "ServerException",
                    "cluster vanished",
                )
                .retryable()
            })
    }

    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<EksCluster>> {
        self.gate("eks:DescribeCluster", false).await?;
        let Some(res) = self.by_name("eks-cluster", name).await? else {
            return Ok(None);
        };
        let status = match self.life(&res, d::EKS_CREATE, d::EKS_DELETE) {
            Life::Creating(_) => EksStatus::Creating,
            Life::Ready => EksStatus::Active,
            Life::Deleting => EksStatus::Deleting,
            Life::Gone => return Ok(None),
        };
        let active = status == EksStatus::Active;
        let suffix = &res.id[4..];
        Ok(Some(EksCluster {
            name: name.to_string(),
            arn: eks_arn(name),
            status,
            version: res.data["version"].as_str().unwrap_or("1.32").to_string(),
            endpoint: active.then(|| format!("https://{suffix}.gr7.{REGION}.eks.amazonaws.com")),
            certificate_authority: active
                .then(|| "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t".to_string()),
            oidc_issuer: active.then(|| {
                format!(
                    "https://oidc.eks.{REGION}.amazonaws.com/id/{}",
                    suffix.to_uppercase()
                )
            }),
            vpc_id: None,
        }))
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        let api = "eks:DeleteCluster";
        self.gate(api, true).await?;
        match self.by_name("eks-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => {
                // Like EKS, deleting a cluster takes its add-ons and access entries with it.
                for (kind, api) in [
                    ("eks-addon", "eks:DeleteAddon"),
                    ("eks-access-entry", "eks:DeleteAccessEntry"),
                ] {
                    for child in self
                        .list(kind)
                        .await?
                        .iter()
                        .filter(|c| c.data["cluster"] == name)
                    {
                        self.remove(api, kind, &child.id).await?;
                    }
                }
                self.remove(api, "eks-cluster", &r.id).await
            }
            _ => Err(not_found(
                "eks",
                "DeleteCluster",
                "ResourceNotFoundException",
                name,
            )),
        }
    }

    async fn has_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<bool> {
        self.gate("eks:DescribeAccessEntry", false).await?;
        Ok(self
            .by_name("eks-access-entry", &format!("{cluster}/{principal_arn}"))
            .await?
            .is_some_and(|r| r.deleted_ms.is_none()))
    }

    async fn create_access_entry(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()> {
        let api = "eks:CreateAccessEntry";
        self.gate(api, true).await?;
        self.active_cluster(cluster, "CreateAccessEntry").await?;
        let data = json!({"cluster": cluster, "principalArn": principal_arn,
                          "policies": [{"policyArn": policy_arn, "accessScope": {"type": "cluster"}}]});
        let key = format!("{cluster}/{principal_arn}");
        self.create(api, "eks-access-entry", &new_id("ae"), Some(&key), &data)
            .await
    }

    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon> {
        let api = "eks:CreateAddon";
        self.gate(api, true).await?;
        self.active_cluster(&req.cluster, "CreateAddon").await?;
        let data = serde_json::to_value(req).unwrap_or_default();
        let key = format!("{}/{}", req.cluster, req.name);
        self.create(api, "eks-addon", &new_id("addon"), Some(&key), &data)
            .await?;
        self.describe_addon(&req.cluster, &req.name)
            .await?
            .ok_or_else(|| {
                CloudError::new("eks", "CreateAddon", "ServerException", "add-on vanished")
                    .retryable()
            })
    }

    async fn describe_addon(&self, cluster: &str, name: &str) -> CloudResult<Option<Addon>> {
        self.gate("eks:DescribeAddon", false).await?;
        let Some(res) = self
            .by_name("eks-addon", &format!("{cluster}/{name}"))
            .await?
        else {
            return Ok(None);
        };
        let mut status = match self.life(&res, d::ADDON_CREATE, d::ADDON_CREATE / 3.0) {
            Life::Creating(_) => AddonStatus::Creating,
            Life::Ready => AddonStatus::Active,
            Life::Deleting => AddonStatus::Deleting,
            Life::Gone => return Ok(None),
        };
        let mut health = None;
        if status == AddonStatus::Active {
            if let Some((s, issue)) = self.addon_health(cluster, name).await? {
                status = s;
                health = Some(issue);
            }
        }
        let version = res.data["version"]
            .as_str()
            .map(str::to_string)
            .or_else(|| super::default_addon_version(name).map(str::to_string));
        Ok(Some(Addon {
            name: name.to_string(),
            arn: format!(
                "arn:aws:eks:{REGION}:{ACCOUNT}:addon/{cluster}/{name}/{}",
                &res.id[6..]
            ),
            status,
            version,
            health,
        }))
    }

    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()> {
        let api = "eks:UpdateAddon";
        self.gate(api, true).await?;
        let key = format!("{}/{}", req.cluster, req.name);
        match self.by_name("eks-addon", &key).await? {
            Some(r) if r.deleted_ms.is_none() => {
                let data = serde_json::to_value(req).unwrap_or_default();
                self.update(api, "eks-addon", &r.id, &data).await
            }
            _ => Err(not_found(
                "eks",
                "UpdateAddon",
                "ResourceNotFoundException",
                &req.name,
            )),
        }
    }

    async fn find_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> CloudResult<Option<String>> {
        self.gate("eks:ListPodIdentityAssociations", false).await?;
        let key = format!("{cluster}/{namespace}/{service_account}");
        Ok(self
            .by_name("eks-pod-identity", &key)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| r.id))
    }

    async fn create_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
        role_arn: &str,
    ) -> CloudResult<String> {
        let api = "eks:CreatePodIdentityAssociation";
        self.gate(api, true).await?;
        self.active_cluster(cluster, "CreatePodIdentityAssociation")
            .await?;
        let key = format!("{cluster}/{namespace}/{service_account}");
        let id = new_id("a");
        let data = json!({"cluster": cluster, "namespace": namespace, "serviceAccount": service_account, "roleArn": role_arn});
        self.create(api, "eks-pod-identity", &id, Some(&key), &data)
            .await?;
        Ok(id)
    }

    async fn delete_pod_identity(&self, _cluster: &str, association_id: &str) -> CloudResult<()> {
        let api = "eks:DeletePodIdentityAssociation";
        self.gate(api, true).await?;
        match self.get("eks-pod-identity", association_id).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "eks-pod-identity", &r.id).await,
            _ => Ok(()),
        }
    }

    async fn delete_addon(&self, cluster: &str, name: &str) -> CloudResult<()> {
        let api = "eks:DeleteAddon";
        self.gate(api, true).await?;
        match self
            .by_name("eks-addon", &format!("{cluster}/{name}"))
            .await?
        {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "eks-addon", &r.id).await,
            _ => Err(not_found(
                "eks",
                "DeleteAddon",
                "ResourceNotFoundException",
                name,
            )),
        }
    }
}

impl Sandbox {
    async fn active_cluster(&self, cluster: &str, op: &str) -> CloudResult<EksCluster> {
        match Eks::describe_cluster(self, cluster).await? {
            Some(c) if c.status == EksStatus::Active => Ok(c),
            Some(_) => Err(CloudError::new(
                "eks",
                op,
                "ResourceInUseException",
                format!("Cluster {cluster} is not ACTIVE"),
            )),
            None => Err(not_found("eks", op, "ResourceNotFoundException", cluster)),
        }
    }
}

fn hyperpod_arn(id: &str) -> String {
    format!("arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{}", &id[4..])
}

/// Seconds (at scale 1) after creation when node `i` of `n` appears: nodes join during the
/// second half of the creation, group after group.
fn node_join_secs(i: u32, n: u32) -> f64 {
    let frac = f64::from(i + 1) / f64::from(n.max(1));
    d::HYPERPOD_CREATE * (0.5 + 0.5 * frac)
}

/// HyperPod runs Spot capacity only under continuous node provisioning.
fn spot_needs_continuous(
    op: &str,
    groups: &[InstanceGroupSpec],
    continuous: bool,
) -> CloudResult<()> {
    match groups.iter().find(|g| g.capacity == Capacity::Spot) {
        Some(g) if !continuous => Err(CloudError::new(
            "sagemaker",
            op,
            "ValidationException",
            format!(
                "Instance group {} uses Spot capacity, which requires NodeProvisioningMode Continuous",
                g.name
            ),
        )),
        _ => Ok(()),
    }
}

/// A fresh EC2-style instance id (for replacement hardware).
fn new_instance_id() -> String {
    format!("i-0{:016x}", rand::random::<u64>())
}

/// Simulated seconds a node spends out of service after an action.
const NODE_REBOOT_SECS: f64 = 120.0;
const NODE_REPLACE_SECS: f64 = 600.0;
const NODE_DELETE_SECS: f64 = 60.0;

impl Sandbox {
    /// A node slot's current instance, status and launch time given the actions taken on it;
    /// `None` once it is deleted. A replaced node is new hardware: the slot continues under the
    /// replacement's instance id, as BatchReplaceClusterNodes does.
    fn node_status(&self, res: &Res, instance_id: &str) -> Option<(String, &'static str, i64)> {
        let mut id = instance_id.to_string();
        let mut launched = res.created_ms;
        // Bounded: each replacement names a fresh id.
        for _ in 0..64 {
            let Some(action) = res.data.pointer(&format!("/nodeActions/{id}")) else {
                return Some((id, "Running", launched));
            };
            let at = action["atMs"].as_i64().unwrap_or(0);
            let since = self.simulated_secs(at, super::now_ms());
            return match action["action"].as_str() {
                Some("reboot") if since < NODE_REBOOT_SECS => Some((id, "Pending", launched)),
                Some("replace") => match action["newId"].as_str() {
                    Some(new) if since < NODE_REPLACE_SECS => {
                        Some((new.to_string(), "Pending", at))
                    }
                    Some(new) => {
                        id = new.to_string();
                        launched = at;
                        continue;
                    }
                    // Recorded before replacements got new ids.
                    None if since < NODE_REPLACE_SECS => Some((id, "Pending", launched)),
                    None => Some((id, "Running", launched)),
                },
                Some("delete") if since < NODE_DELETE_SECS => Some((id, "ShuttingDown", launched)),
                Some("delete") => None,
                _ => Some((id, "Running", launched)),
            };
        }
        Some((id, "Running", launched))
    }

    fn hyperpod_view(&self, name: &str, res: &Res) -> Option<(HyperPodCluster, Vec<ClusterNode>)> {
        let req: CreateHyperPodCluster = serde_json::from_value(res.data.clone()).ok()?;
        let life = self.life(res, d::HYPERPOD_CREATE, d::HYPERPOD_DELETE);
        let status = match life {
            Life::Creating(_) => HyperPodStatus::Creating,
            Life::Ready => HyperPodStatus::InService,
            Life::Deleting => HyperPodStatus::Deleting,
            Life::Gone => return None,
        };
        let elapsed = match life {
            Life::Creating(f) => f * d::HYPERPOD_CREATE,
            _ => d::HYPERPOD_CREATE,
        };
        let total: u32 = req.instance_groups.iter().map(|g| g.instance_count).sum();
        let mut index = 0;
        let mut nodes = Vec::new();
        let mut groups = Vec::new();
        for g in &req.instance_groups {
            let mut current = 0;
            for _ in 0..g.instance_count {
                let joined = elapsed >= node_join_secs(index, total);
                let instance_id = format!("i-0{:016x}", (res.created_ms as u64) ^ u64::from(index));
                index += 1;
                // A node that has not joined yet, or was deleted, is not listed.
                let Some((instance_id, status, launched)) = joined
                    .then(|| self.node_status(res, &instance_id))
                    .flatten()
                else {
                    continue;
                };
                current += 1;
                nodes.push(ClusterNode {
                    instance_id,
                    instance_group: g.name.clone(),
                    instance_type: g.instance_type.clone(),
                    status: status.into(),
                    launch_time: crate::store::rfc3339_ms(launched),
                });
            }
            groups.push(InstanceGroupStatus {
                name: g.name.clone(),
                instance_type: g.instance_type.clone(),
                target_count: g.instance_count,
                current_count: current,
            });
        }
        let cluster = HyperPodCluster {
            name: name.to_string(),
            arn: hyperpod_arn(&res.id),
            status,
            failure_message: None,
            instance_groups: groups,
            tiered_storage: serde_json::from_value(res.data["tieredStorage"].clone()).ok(),
            autoscaling: serde_json::from_value(res.data["autoScaling"].clone()).ok(),
        };
        Some((cluster, nodes))
    }
}

#[async_trait]
impl HyperPod for Sandbox {
    async fn create_cluster(&self, req: &CreateHyperPodCluster) -> CloudResult<String> {
        let api = "sagemaker:CreateCluster";
        self.gate(api, true).await?;
        let eks_name = req.eks_cluster_arn.rsplit('/').next().unwrap_or_default();
        self.active_cluster(eks_name, "CreateCluster")
            .await
            .map_err(|mut e| {
                e.service = "sagemaker".into();
                e.code = "ValidationException".into();
                e
            })?;
        spot_needs_continuous(
            "CreateCluster",
            &req.instance_groups,
            req.continuous_provisioning,
        )?;
        for g in &req.instance_groups {
            if !g.subnet_ids.iter().all(|s| !s.is_empty()) || g.instance_count == 0 {
                return Err(CloudError::new(
                    "sagemaker",
                    "CreateCluster",
                    "ValidationException",
                    format!("Instance group {} is invalid", g.name),
                ));
            }
        }
        let id = new_id("hpc");
        let data = serde_json::to_value(req).unwrap_or_default();
        self.create(api, "hyperpod-cluster", &id, Some(&req.name), &data)
            .await?;
        Ok(hyperpod_arn(&id))
    }

    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<HyperPodCluster>> {
        self.gate("sagemaker:DescribeCluster", false).await?;
        let Some(res) = self.by_name("hyperpod-cluster", name).await? else {
            return Ok(None);
        };
        Ok(self.hyperpod_view(name, &res).map(|(c, _)| c))
    }

    async fn list_cluster_nodes(
        &self,
        name: &str,
        next_token: Option<String>,
    ) -> CloudResult<NodePage> {
        const PAGE: usize = 100;
        self.gate("sagemaker:ListClusterNodes", false).await?;
        let Some((_, nodes)) = self
            .by_name("hyperpod-cluster", name)
            .await?
            .and_then(|res| self.hyperpod_view(name, &res))
        else {
            return Err(not_found(
                "sagemaker",
                "ListClusterNodes",
                "ResourceNotFound",
                name,
            ));
        };
        let start: usize = next_token.and_then(|t| t.parse().ok()).unwrap_or(0);
        let end = (start + PAGE).min(nodes.len());
        Ok(NodePage {
            nodes: nodes.get(start..end).unwrap_or_default().to_vec(),
            next_token: (end < nodes.len()).then(|| end.to_string()),
        })
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        let api = "sagemaker:DeleteCluster";
        self.gate(api, true).await?;
        match self.by_name("hyperpod-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "hyperpod-cluster", &r.id).await,
            _ => Err(not_found(
                "sagemaker",
                "DeleteCluster",
                "ResourceNotFound",
                name,
            )),
        }
    }
    async fn update_cluster(
        &self,
        name: &str,
        groups: &[InstanceGroupSpec],
        continuous: bool,
    ) -> CloudResult<()> {
        let api = "sagemaker:UpdateCluster";
        self.gate(api, true).await?;
        let mut res = self.live_hyperpod(name, "UpdateCluster").await?;
        let continuous = continuous || res.data["continuousProvisioning"] == true;
        spot_needs_continuous("UpdateCluster", groups, continuous)?;
        res.data["continuousProvisioning"] = json!(continuous);
        if groups.is_empty() {
            return Err(CloudError::new(
                "sagemaker",
                "UpdateCluster",
                "ValidationException",
                "InstanceGroups must not be empty",
            ));
        }
        // Groups may be empty only while Karpenter owns their count.
        let autoscaling = res.data["autoScaling"]["enabled"].as_bool() == Some(true);
        if let Some(g) = groups
            .iter()
            .find(|g| g.instance_count == 0 && !autoscaling)
        {
            return Err(CloudError::new(
                "sagemaker",
                "UpdateCluster",
                "ValidationException",
                format!(
                    "InstanceCount of {} must be at least 1 unless autoscaling is enabled",
                    g.name
                ),
            ));
        }
        res.data["instanceGroups"] = serde_json::to_value(groups).unwrap_or_default();
        self.update(api, "hyperpod-cluster", &res.id, &res.data)
            .await
    }

    async fn delete_instance_groups(&self, name: &str, groups: &[String]) -> CloudResult<()> {
        let api = "sagemaker:UpdateCluster";
        self.gate(api, true).await?;
        let mut res = self.live_hyperpod(name, "UpdateCluster").await?;
        let mut req: CreateHyperPodCluster =
            serde_json::from_value(res.data.clone()).map_err(|e| {
                CloudError::new(
                    "sagemaker",
                    "UpdateCluster",
                    "InternalFailure",
                    e.to_string(),
                )
            })?;
        if let Some(missing) = groups
            .iter()
            .find(|g| !req.instance_groups.iter().any(|s| &s.name == *g))
        {
            return Err(CloudError::new(
                "sagemaker",
                "UpdateCluster",
                "ValidationException",
                format!("instance group {missing} does not exist"),
            ));
        }
        req.instance_groups.retain(|g| !groups.contains(&g.name));
        res.data["instanceGroups"] = serde_json::to_value(&req.instance_groups).unwrap_or_default();
        self.update(api, "hyperpod-cluster", &res.id, &res.data)
            .await
    }

    async fn set_tiered_storage(&self, name: &str, config: TieredStorage) -> CloudResult<()> {
        let api = "sagemaker:UpdateCluster";
        self.gate(api, true).await?;
        let mut res = self.live_hyperpod(name, "UpdateCluster").await?;
        if config
            .memory_percent
            .is_some_and(|p| !(1..=100).contains(&p))
        {
            return Err(CloudError::new(
                "sagemaker",
                "UpdateCluster",
                "ValidationException",
                "InstanceMemoryAllocationPercentage must be between 1 and 100",
            ));
        }
        res.data["tieredStorage"] = serde_json::to_value(config).unwrap_or_default();
        self.update(api, "hyperpod-cluster", &res.id, &res.data)
            .await
    }

    async fn set_autoscaling(&self, name: &str, cluster_role_arn: Option<&str>) -> CloudResult<()> {
        let api = "sagemaker:UpdateCluster";
        self.gate(api, true).await?;
        let mut res = self.live_hyperpod(name, "UpdateCluster").await?;
        if let Some(role) = cluster_role_arn {
            let role_name = role.rsplit('/').next().unwrap_or_default();
            let live = self
                .by_name("iam-role", role_name)
                .await?
                .is_some_and(|r| r.deleted_ms.is_none());
            if !live {
                return Err(CloudError::new(
                    "sagemaker",
                    "UpdateCluster",
                    "ValidationException",
                    format!("ClusterRole {role} cannot be assumed"),
                ));
            }
        }
        let config = AutoScaling {
            enabled: cluster_role_arn.is_some(),
            status: "InService".into(),
            failure_message: None,
            cluster_role_arn: cluster_role_arn.map(str::to_string),
        };
        res.data["autoScaling"] = serde_json::to_value(config).unwrap_or_default();
        self.update(api, "hyperpod-cluster", &res.id, &res.data)
            .await
    }

    async fn update_cluster_software(&self, name: &str) -> CloudResult<()> {
        let api = "sagemaker:UpdateClusterSoftware";
        self.gate(api, true).await?;
        let res = self.live_hyperpod(name, "UpdateClusterSoftware").await?;
        self.update(api, "hyperpod-cluster", &res.id, &res.data)
            .await
    }

    async fn node_action(
        &self,
        name: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> CloudResult<NodeActionResult> {
        let api = match action {
            NodeAction::Reboot => "sagemaker:BatchRebootClusterNodes",
            NodeAction::Replace => "sagemaker:BatchReplaceClusterNodes",
            NodeAction::Delete => "sagemaker:BatchDeleteClusterNodes",
        };
        self.gate(api, true).await?;
        let res = self
            .live_hyperpod(name, api.trim_start_matches("sagemaker:"))
            .await?;
        let known: Vec<String> = self
            .hyperpod_view(name, &res)
            .map(|(_, nodes)| nodes.into_iter().map(|n| n.instance_id).collect())
            .unwrap_or_default();
        let mut out = NodeActionResult::default();
        let mut data = res.data.clone();
        for id in node_ids {
            if known.contains(id) {
                let verb = match action {
                    NodeAction::Reboot => "reboot",
                    NodeAction::Replace => "replace",
                    NodeAction::Delete => "delete",
                };
                data["nodeActions"][id] = json!({"action": verb, "atMs": super::now_ms()});
                if action == NodeAction::Replace {
                    data["nodeActions"][id]["newId"] = json!(new_instance_id());
                }
                out.successful.push(id.clone());
            } else {
                out.failed.push((
                    id.clone(),
                    "InstanceIdNotFound".into(),
                    format!("node {id} is not in cluster {name}"),
                ));
            }
        }
        self.update(api, "hyperpod-cluster", &res.id, &data).await?;
        Ok(out)
    }

    async fn list_training_plans(&self) -> CloudResult<Vec<TrainingPlan>> {
        self.gate("sagemaker:ListTrainingPlans", false).await?;
        Ok(vec![TrainingPlan {
            arn: format!("arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/sandbox-p5-week"),
            name: "sandbox-p5-week".into(),
            status: "Active".into(),
            total_instance_count: 2,
            available_instance_count: 2,
            reservations: vec![Reservation {
                // Not the first zone, so a group using the plan cannot land there by default.
                availability_zone: format!("{REGION}b"),
                instance_type: "ml.p5.48xlarge".into(),
                instance_count: 2,
            }],
        }])
    }
}

impl Sandbox {
    async fn live_hyperpod(&self, name: &str, op: &str) -> CloudResult<Res> {
        match self.by_name("hyperpod-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => Ok(r),
            _ => Err(not_found("sagemaker", op, "ResourceNotFound", name)),
        }
    }
}

#[async_trait]
impl Iam for Sandbox {
    async fn caller_identity(&self) -> CloudResult<CallerIdentity> {
        self.gate("sts:GetCallerIdentity", false).await?;
        Ok(CallerIdentity {
            account: ACCOUNT.to_string(),
            arn: format!("arn:aws:iam::{ACCOUNT}:role/instantstart-sandbox"),
        })
    }

    async fn get_role(&self, name: &str) -> CloudResult<Option<Role>> {
        self.gate("iam:GetRole", false).await?;
        Ok(self
            .by_name("iam-role", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| Role {
                name: name.to_string(),
                arn: format!("arn:aws:iam::{ACCOUNT}:role/{name}"),
                trust_policy: r.data["trust"].clone(),
            }))
    }

    async fn create_role(
        &self,
        name: &str,
        trust_policy: &Value,
        tags: &Tags,
    ) -> CloudResult<Role> {
        let api = "iam:CreateRole";
        self.gate(api, true).await?;
        let data = json!({"trust": trust_policy, "tags": tags, "inline": {}, "attached": []});
        self.create(api, "iam-role", &new_id("AROA"), Some(name), &data)
            .await?;
        Ok(Role {
            name: name.to_string(),
            arn: format!("arn:aws:iam::{ACCOUNT}:role/{name}"),
            trust_policy: trust_policy.clone(),
        })
    }

    async fn put_role_policy(
        &self,
        role: &str,
        policy_name: &str,
        document: &Value,
    ) -> CloudResult<()> {
        let api = "iam:PutRolePolicy";
        self.gate(api, true).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("iam", "PutRolePolicy", "NoSuchEntity", role));
        };
        res.data["inline"][policy_name] = document.clone();
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn attach_role_policy(&self, role: &str, policy_arn: &str) -> CloudResult<()> {
        let api = "iam:AttachRolePolicy";
        self.gate(api, true).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("iam", "AttachRolePolicy", "NoSuchEntity", role));
        };
        let list = res.data["attached"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|p| p == policy_arn) {
            return Ok(());
        }
        let mut list = list;
        list.push(json!(policy_arn));
        res.data["attached"] = Value::Array(list);
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn delete_role(&self, name: &str) -> CloudResult<()> {
        let api = "iam:DeleteRole";
        self.gate(api, true).await?;
        match self.by_name("iam-role", name).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "iam-role", &r.id).await,
            _ => Ok(()),
        }
    }

    async fn add_trust_statement(&self, role: &str, statement: &Value) -> CloudResult<()> {
        let api = "iam:UpdateAssumeRolePolicy";
        self.gate(api, false).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found(
                "iam",
                "UpdateAssumeRolePolicy",
                "NoSuchEntity",
                role,
            ));
        };
        let Some(merged) = merge_trust(&res.data["trust"], statement) else {
            return Ok(());
        };
        res.data["trust"] = merged;
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn find_oidc_provider(&self, issuer_url: &str) -> CloudResult<Option<String>> {
        self.gate("iam:ListOpenIDConnectProviders", false).await?;
        let host = issuer_url.trim_start_matches("https://");
        Ok(self
            .by_name("oidc-provider", host)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|_| format!("arn:aws:iam::{ACCOUNT}:oidc-provider/{host}")))
    }

    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> CloudResult<String> {
        let api = "iam:CreateOpenIDConnectProvider";
        self.gate(api, true).await?;
        let host = issuer_url.trim_start_matches("https://");
        let data = json!({"url": issuer_url, "clientIds": ["sts.amazonaws.com"], "tags": tags});
        self.create(api, "oidc-provider", &new_id("oidc"), Some(host), &data)
            .await?;
        Ok(format!("arn:aws:iam::{ACCOUNT}:oidc-provider/{host}"))
    }
}

#[async_trait]
impl ObjectStore for Sandbox {
    async fn bucket_exists(&self, bucket: &str) -> CloudResult<bool> {
        self.gate("s3:HeadBucket", false).await?;
        Ok(self
            .by_name("s3-bucket", bucket)
            .await?
            .is_some_and(|r| r.deleted_ms.is_none()))
    }

    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()> {
        let api = "s3:CreateBucket";
        self.gate(api, true).await?;
        let data = json!({"tags": tags, "encryption": "aws:kms", "publicAccessBlock": true});
        self.create(api, "s3-bucket", &new_id("bkt"), Some(bucket), &data)
            .await
    }

    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()> {
        let api = "s3:PutObject";
        self.gate(api, true).await?;
        if !self.bucket_exists(bucket).await? {
            return Err(not_found("s3", "PutObject", "NoSuchBucket", bucket));
        }
        let name = format!("{bucket}/{key}");
        let data = json!({"bucket": bucket, "key": key, "size": body.len(),
                          "body": String::from_utf8_lossy(&body)});
        match self.by_name("s3-object", &name).await? {
            Some(r) if r.deleted_ms.is_none() => self.update(api, "s3-object", &r.id, &data).await,
            _ => {
                self.create(api, "s3-object", &new_id("obj"), Some(&name), &data)
                    .await
            }
        }
    }

    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>> {
        self.gate("s3:ListObjectsV2", false).await?;
        let mut keys: Vec<String> = self
            .list("s3-object")
            .await?
            .into_iter()
            .filter(|r| r.data["bucket"] == bucket)
            .filter_map(|r| r.data["key"].as_str().map(str::to_string))
            .filter(|k| k.starts_with(prefix))
            .collect();
        keys.sort();
        Ok(keys)
    }
}

#[async_trait]
impl Quotas for Sandbox {
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>> {
        self.gate("servicequotas:GetServiceQuota", false).await?;
        Ok(QUOTAS
            .iter()
            .find(|(t, _)| *t == instance_type)
            .map(|(_, n)| *n))
    }
}

fn object_key(target: &KubeTarget, obj: &ObjectRef) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        target.cluster,
        obj.api_version,
        obj.kind,
        obj.namespace.as_deref().unwrap_or(""),
        obj.name
    )
}

#[async_trait]
impl Kube for Sandbox {
    /// The simulated model server answers an OpenAI-style chat request by echoing the last
    /// message, once the Deployment behind the Service of the same name is ready.
    async fn service_post(
        &self,
        target: &KubeTarget,
        call: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value> {
        self.gate("k8s:ServiceProxy", false).await?;
        let object = |api_version: &str, kind: &str| ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(call.namespace.into()),
            name: call.name.into(),
        };
        if Kube::get(self, target, &object("v1", "Service"))
            .await?
            .is_none()
        {
            return Err(not_found("k8s", "ServiceProxy", "NotFound", call.name));
        }
        let ready = Kube::get(self, target, &object("apps/v1", "Deployment"))
            .await?
            .and_then(|d| d.pointer("/status/readyReplicas").and_then(Value::as_u64))
            .unwrap_or(0);
        if ready == 0 {
            return Err(CloudError::new(
                "k8s",
                "ServiceProxy",
                "ServiceUnavailable",
                format!("no endpoints available for service {}", call.name),
            ));
        }
        let prompt = body
            .pointer("/messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        Ok(json!({"object": "chat.completion", "model": call.name,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": format!("(sandbox) {prompt}")}}]}))
    }

    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()> {
        let api = "k8s:Apply";
        self.gate(api, true).await?;
        self.active_cluster(&target.cluster, "Apply")
            .await
            .map_err(|mut e| {
                e.service = "k8s".into();
                e
            })?;
        let obj = ObjectRef::to_apply(manifest)?;
        let key = object_key(target, &obj);
        match self.by_name("k8s-object", &key).await? {
            Some(r) if r.deleted_ms.is_none() => {
                let mut data = manifest.clone();
                data["__key"] = Value::String(key.clone());
                self.update(api, "k8s-object", &r.id, &data).await
            }
            _ => {
                let mut data = manifest.clone();
                data["__key"] = Value::String(key.clone());
                self.create(api, "k8s-object", &new_id("uid"), Some(&key), &data)
                    .await
            }
        }
    }

    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>> {
        self.gate("k8s:Get", false).await?;
        let Some(r) = self
            .by_name("k8s-object", &object_key(target, obj))
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Ok(None);
        };
        let schedule = if scheduled_kind(&r.data) {
            Some(self.schedule(target).await?)
        } else {
            None
        };
        Ok(Some(self.k8s_status(r, schedule.as_ref())))
    }

    async fn list(
        &self,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> CloudResult<Vec<Value>> {
        self.gate("k8s:List", false).await?;
        let schedule = if matches!(kind, "Deployment" | "DaemonSet") {
            Some(self.schedule(target).await?)
        } else {
            None
        };
        let prefix = format!("{}/{api_version}/{kind}/", target.cluster);
        let want: Vec<(&str, &str)> = labels
            .unwrap_or("")
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        Ok(self
            .list("k8s-object")
            .await?
            .into_iter()
            .filter(|r| {
                r.data
                    .get("__key")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.starts_with(&prefix))
            })
            .map(|r| self.k8s_status(r, schedule.as_ref()))
            .filter(|o| {
                namespace.is_none_or(|ns| {
                    o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                })
            })
            .filter(|o| {
                want.iter().all(|(k, v)| {
                    o.pointer("/metadata/labels")
                        .and_then(|l| l.get(*k))
                        .and_then(Value::as_str)
                        == Some(*v)
                })
            })
            .collect())
    }

    async fn cluster_state(&self, target: &KubeTarget) -> CloudResult<ClusterState> {
        self.gate("k8s:Watch", false).await?;
        let s = self.schedule(target).await?;
        Ok(ClusterState {
            cache: CacheInfo {
                source: "sandbox".into(),
                age_ms: 0,
                nodes: s.nodes.len(),
                pods: s.pods,
            },
            nodes: s.nodes,
            pending_gpu_pods: s.pending_pods,
            pending_gpus: s.pending_gpus,
        })
    }

    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()> {
        let api = "k8s:Delete";
        self.gate(api, true).await?;
        match self.by_name("k8s-object", &object_key(target, obj)).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "k8s-object", &r.id).await,
            _ => Ok(()),
        }
    }
}

/// The simulated scheduler's view of one cluster.
pub(crate) struct Schedule {
    /// The HyperPod nodes, with the GPUs placed replicas request.
    pub nodes: Vec<NodeState>,
    /// Deployment resource id → replicas that found a node.
    placed: std::collections::HashMap<String, u64>,
    pending_pods: u32,
    pending_gpus: u32,
    pods: usize,
    /// The role the nodes run as (the first instance group's execution role).
    pub node_role: Option<String>,
}

/// Kinds whose status depends on the nodes (their pods must be placed to become ready).
fn scheduled_kind(obj: &Value) -> bool {
    matches!(obj["kind"].as_str(), Some("Deployment" | "DaemonSet"))
}

/// The instance types a DaemonSet's node affinity limits it to, if it names any.
fn affinity_types(obj: &Value) -> Option<Vec<String>> {
    obj.pointer("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions")?
        .as_array()?
        .iter()
        .find(|e| e["key"] == "node.kubernetes.io/instance-type" && e["operator"] == "In")
        .and_then(|e| serde_json::from_value(e["values"].clone()).ok())
}

/// GPUs one replica of a workload asks for (`nvidia.com/gpu` limits of its containers).
fn gpu_request(workload: &Value) -> u32 {
    workload
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/resources/limits/nvidia.com~1gpu"))
        .map(|g| match g {
            Value::Number(n) => n.as_u64().unwrap_or(0),
            Value::String(s) => s.parse().unwrap_or(0),
            _ => 0,
        })
        .map(|g| u32::try_from(g).unwrap_or(u32::MAX))
        .sum()
}

impl Sandbox {
    /// Places every Deployment's replicas, oldest first, on ready nodes with enough free GPUs
    /// (and the instance type its node selector names): first come, first served, as the
    /// scheduler would with nothing preempted.
    pub(crate) async fn schedule(&self, target: &KubeTarget) -> CloudResult<Schedule> {
        let hp = crate::service::steps::hyperpod::hyperpod_name(&target.cluster);
        let record = self
            .by_name("hyperpod-cluster", &hp)
            .await?
            .filter(|r| r.deleted_ms.is_none());
        let verdicts = match &record {
            Some(r) => self.group_verdicts(r).await?,
            None => Default::default(),
        };
        let node_role = record.as_ref().and_then(|r| {
            r.data
                .pointer("/instanceGroups/0/executionRoleArn")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let mut nodes = Vec::new();
        let mut token = None;
        loop {
            let page = match HyperPod::list_cluster_nodes(self, &hp, token).await {
                Ok(p) => p,
                Err(e) if e.code == "ResourceNotFound" => break,
                Err(e) => return Err(e),
            };
            nodes.extend(page.nodes);
            token = page.next_token;
            if token.is_none() {
                break;
            }
        }
        let mut nodes: Vec<NodeState> = nodes
            .into_iter()
            .map(|n| {
                let gpus = gpus_per_instance(&n.instance_type);
                let blocked = verdicts.get(&n.instance_group).cloned().flatten();
                let running = n.status == "Running" && blocked.is_none();
                let not_ready_reason = match (&blocked, n.status.as_str()) {
                    (Some(why), _) => Some(why.clone()),
                    (None, "Running") => None,
                    (None, status) => Some(format!("instance {status}")),
                };
                NodeState {
                    name: format!("hyperpod-{}", n.instance_id),
                    instance_id: Some(n.instance_id),
                    instance_type: Some(n.instance_type),
                    instance_group: Some(n.instance_group),
                    capacity_type: Some("on-demand".into()),
                    ready: running,
                    not_ready_reason,
                    unschedulable: !running,
                    gpus: GpuUsage {
                        total: gpus,
                        allocatable: gpus,
                        requested: 0,
                        free: gpus,
                    },
                    health: BTreeMap::from([(
                        "sagemaker.amazonaws.com/node-health-status".to_string(),
                        if running {
                            "Schedulable"
                        } else {
                            "Unschedulable"
                        }
                        .to_string(),
                    )]),
                }
            })
            .collect();
        let prefix = format!("{}/apps/v1/Deployment/", target.cluster);
        let mut deployments: Vec<Res> = self
            .list("k8s-object")
            .await?
            .into_iter()
            .filter(|r| r.deleted_ms.is_none())
            .filter(|r| {
                r.data["__key"]
                    .as_str()
                    .is_some_and(|k| k.starts_with(&prefix))
            })
            .collect();
        deployments.sort_by_key(|r| r.created_ms);
        let (mut placed, mut pending_pods, mut pending_gpus, mut pods) =
            (std::collections::HashMap::new(), 0, 0, 0);
        for r in &deployments {
            let want = r
                .data
                .pointer("/spec/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let g = gpu_request(&r.data);
            let selector = r
                .data
                .pointer("/spec/template/spec/nodeSelector/node.kubernetes.io~1instance-type")
                .and_then(Value::as_str);
            let mut fits = 0;
            for _ in 0..want {
                let node = nodes.iter_mut().find(|n| {
                    n.ready
                        && selector.is_none_or(|t| n.instance_type.as_deref() == Some(t))
                        && n.gpus.free >= g
                });
                match node {
                    Some(n) => {
                        n.gpus.requested += g;
                        n.gpus.free -= g;
                        fits += 1;
                    }
                    None if g > 0 => {
                        pending_pods += 1;
                        pending_gpus += g;
                    }
                    None => {}
                }
            }
            pods += usize::try_from(fits).unwrap_or(usize::MAX);
            placed.insert(r.id.clone(), fits);
        }
        Ok(Schedule {
            nodes,
            placed,
            pending_pods,
            pending_gpus,
            pods,
            node_role,
        })
    }

    /// A stored object as the API server would return it: without the sandbox's key, with
    /// `creationTimestamp`, and — for workloads — a status that turns
    /// ready a little (simulated) time after the object was applied.
    fn k8s_status(&self, res: Res, schedule: Option<&Schedule>) -> Value {
        let ready = self.life(&res, d::K8S_WORKLOAD_READY, 1.0) == Life::Ready;
        let age = self.simulated_secs(res.created_ms, super::now_ms());
        let placed = schedule.and_then(|s| s.placed.get(&res.id).copied());
        let mut o = res.data;
        if let Some(m) = o.as_object_mut() {
            m.remove("__key");
        }
        o["metadata"]["creationTimestamp"] = json!(crate::store::rfc3339_ms(res.created_ms));
        let n = u64::from(ready);
        match o["kind"].as_str() {
            Some("Deployment") => {
                let want = o
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                // Replicas the scheduler found no GPUs for never become ready; past the
                // progress deadline the Deployment says so, as the real controller does.
                let placed = placed.unwrap_or(want).min(want);
                o["status"] = json!({"replicas": want, "readyReplicas": placed * n,
                                     "availableReplicas": placed * n});
                let deadline = o
                    .pointer("/spec/progressDeadlineSeconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(600.0);
                if placed < want && age > deadline {
                    let gpus = gpu_request(&o);
                    let why = if gpus == 0 {
                        "no node is ready".to_string()
                    } else {
                        format!(
                            "no node has {gpus} free nvidia.com/gpu{}",
                            o.pointer("/spec/template/spec/nodeSelector/node.kubernetes.io~1instance-type")
                                .and_then(Value::as_str)
                                .map(|t| format!(" on {t}"))
                                .unwrap_or_default()
                        )
                    };
                    o["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": format!("{} of {want} replicas cannot be scheduled: {why}", want - placed)}]);
                }
            }
            Some("DaemonSet") => {
                // One pod per ready node the DaemonSet's affinity admits.
                let types = affinity_types(&o);
                let desired = schedule.map_or(1, |s| {
                    s.nodes
                        .iter()
                        .filter(|node| node.ready)
                        .filter(|node| {
                            types.as_ref().is_none_or(|t| {
                                node.instance_type.as_ref().is_some_and(|it| t.contains(it))
                            })
                        })
                        .count() as u64
                });
                o["status"] = json!({"desiredNumberScheduled": desired, "numberReady": desired * n,
                                     "numberAvailable": desired * n});
            }
            Some("Job") => {
                o["status"] = if ready {
                    json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
                } else {
                    json!({"active": 1})
                };
            }
            Some("Service") => {
                // What the service controllers would fill in: an address, and for a load
                // balancer its (internal) DNS name once provisioned.
                let octet = res.created_ms.rem_euclid(250) + 2;
                o["spec"]["clusterIP"] = json!(format!("10.100.0.{octet}"));
                if o.pointer("/spec/type") == Some(&json!("LoadBalancer")) && ready {
                    let name = o["metadata"]["name"].as_str().unwrap_or("svc").to_string();
                    o["status"] = json!({"loadBalancer": {"ingress": [
                        {"hostname": format!("internal-{name}-sandbox.{REGION}.elb.amazonaws.com")}]}});
                }
            }
            Some("PersistentVolumeClaim") => o["status"] = json!({"phase": "Bound"}),
            Some("PersistentVolume") => o["status"] = json!({"phase": "Bound"}),
            _ => {}
        }
        o
    }
}
