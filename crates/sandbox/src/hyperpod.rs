//! The simulated SageMaker HyperPod: clusters, instance groups, nodes and their lifecycles.

use async_trait::async_trait;
use serde_json::json;

use super::shared::*;
use super::{durations as d, new_id, Life, Res, Sandbox, ACCOUNT, REGION};
use cloud::*;

pub(super) fn hyperpod_arn(id: &str) -> String {
    format!("arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{}", &id[4..])
}

/// Seconds (at scale 1) after creation when node `i` of `n` appears: nodes join during the
/// second half of the creation, group after group.
pub(super) fn node_join_secs(i: u32, n: u32) -> f64 {
    let frac = f64::from(i + 1) / f64::from(n.max(1));
    d::HYPERPOD_CREATE * (0.5 + 0.5 * frac)
}

/// HyperPod runs Spot capacity only under continuous node provisioning.
pub(super) fn spot_needs_continuous(
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
pub(super) fn new_instance_id() -> String {
    format!("i-0{:016x}", rand::random::<u64>())
}

/// Simulated seconds a node spends out of service after an action.
pub(super) const NODE_REBOOT_SECS: f64 = 120.0;
pub(super) const NODE_REPLACE_SECS: f64 = 600.0;
pub(super) const NODE_DELETE_SECS: f64 = 60.0;

impl Sandbox {
    /// A node slot's current instance, status and launch time given the actions taken on it;
    /// `None` once it is deleted. A replaced node is new hardware: the slot continues under the
    /// replacement's instance id, as BatchReplaceClusterNodes does.
    pub(super) fn node_status(
        &self,
        res: &Res,
        instance_id: &str,
    ) -> Option<(String, &'static str, i64)> {
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

    pub(super) fn hyperpod_view(
        &self,
        name: &str,
        res: &Res,
    ) -> Option<(HyperPodCluster, Vec<ClusterNode>)> {
        let req: CreateHyperPodCluster = serde_json::from_value(res.data.clone()).ok()?;
        let life = self.life(res, d::HYPERPOD_CREATE, d::HYPERPOD_DELETE);
        // A lifecycle script that failed on creation fails the cluster, with no node kept.
        let failed = super::triage::lifecycle_fails(res);
        let status = match life {
            Life::Creating(_) => HyperPodStatus::Creating,
            Life::Ready if failed => HyperPodStatus::Failed,
            Life::Ready if super::software::rolling(self, res) => HyperPodStatus::SystemUpdating,
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
                let joined = !failed && elapsed >= node_join_secs(index, total);
                let instance_id = super::triage::initial_instance_id(res, index);
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
                    launch_time: cloud::clock::rfc3339_ms(launched),
                });
            }
            groups.push(InstanceGroupStatus {
                name: g.name.clone(),
                instance_type: g.instance_type.clone(),
                target_count: g.instance_count,
                current_count: current,
                spec: Some(g.clone()),
                software: super::software::group_state(self, res, &g.name),
            });
        }
        let cluster = HyperPodCluster {
            name: name.to_string(),
            arn: hyperpod_arn(&res.id),
            failure_message: (status == HyperPodStatus::Failed)
                .then(|| super::triage::lifecycle_failure_message(name, res)),
            status,
            instance_groups: groups,
            tiered_storage: serde_json::from_value(res.data["tieredStorage"].clone()).ok(),
            autoscaling: serde_json::from_value(res.data["autoScaling"].clone()).ok(),
            continuous_provisioning: res.data["continuousProvisioning"] == true,
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
        let eks = self
            .active_cluster(eks_name, "CreateCluster")
            .await
            .map_err(|mut e| {
                e.service = "sagemaker".into();
                e.code = "ValidationException".into();
                e
            })?;
        if !HYPERPOD_KUBERNETES_VERSIONS.contains(&eks.version.as_str()) {
            return Err(CloudError::new(
                "sagemaker",
                "CreateCluster",
                "ValidationException",
                format!(
                    "EKS cluster {eks_name} runs Kubernetes {}: HyperPod supports {}",
                    eks.version,
                    HYPERPOD_KUBERNETES_VERSIONS.join(", ")
                ),
            ));
        }
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
        let mut data = serde_json::to_value(req).unwrap_or_default();
        super::triage::take_faults(self, &mut data);
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

    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()> {
        let api = "sagemaker:AddTags";
        self.gate(api, true).await?;
        let Some(r) = self
            .list("hyperpod-cluster")
            .await?
            .into_iter()
            .find(|r| r.deleted_ms.is_none() && hyperpod_arn(&r.id) == arn)
        else {
            return Err(not_found("sagemaker", "AddTags", "ResourceNotFound", arn));
        };
        let mut data = r.data.clone();
        for (k, v) in tags {
            data["tags"][k] = json!(v);
        }
        self.update(api, "hyperpod-cluster", &r.id, &data).await
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        let api = "sagemaker:DeleteCluster";
        self.gate(api, true).await?;
        match self.by_name("hyperpod-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => {
                let r = self.live_hyperpod(name, "DeleteCluster").await.map(|_| r)?;
                self.remove(api, "hyperpod-cluster", &r.id).await
            }
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
        super::software::check_schedules("UpdateCluster", groups)?;
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

    async fn update_cluster_software(
        &self,
        name: &str,
        update: &SoftwareUpdate,
    ) -> CloudResult<()> {
        let api = "sagemaker:UpdateClusterSoftware";
        self.gate(api, true).await?;
        let mut res = self.live_hyperpod(name, "UpdateClusterSoftware").await?;
        let groups: Vec<String> = res.data["instanceGroups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["name"].as_str().map(str::to_string))
            .collect();
        super::software::check_software_update(name, update, &groups)?;
        // SageMaker takes one update at a time.
        if super::software::rolling(self, &res) {
            return Err(CloudError::new(
                "sagemaker",
                "UpdateClusterSoftware",
                "ConflictException",
                format!("Cluster {name} is already being updated"),
            ));
        }
        super::software::begin(self, &mut res.data, update, &groups);
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

    async fn describe_cluster_node(
        &self,
        name: &str,
        node_id: &str,
    ) -> CloudResult<Option<NodeDetail>> {
        self.gate("sagemaker:DescribeClusterNode", false).await?;
        let Some(res) = self.by_name("hyperpod-cluster", name).await? else {
            return Err(not_found(
                "sagemaker",
                "DescribeClusterNode",
                "ResourceNotFound",
                name,
            ));
        };
        Ok(self.hyperpod_view(name, &res).and_then(|(_, nodes)| {
            nodes
                .iter()
                .find(|n| n.instance_id == node_id)
                .map(|n| self.node_detail(&res, n))
        }))
    }

    async fn list_cluster_events(
        &self,
        name: &str,
        node_id: Option<&str>,
        limit: usize,
    ) -> CloudResult<Vec<ClusterEvent>> {
        self.gate("sagemaker:ListClusterEvents", false).await?;
        let Some(res) = self.by_name("hyperpod-cluster", name).await? else {
            return Err(not_found(
                "sagemaker",
                "ListClusterEvents",
                "ResourceNotFound",
                name,
            ));
        };
        // As SageMaker answers: events exist only under continuous node provisioning.
        if res.data["continuousProvisioning"] != true {
            return Err(CloudError::new(
                "sagemaker",
                "ListClusterEvents",
                "ValidationException",
                "Cluster events are only available for clusters with NodeProvisioningMode set to Continuous",
            ));
        }
        let mut events = self.cluster_events(name, &res, node_id);
        events.truncate(limit);
        Ok(events)
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
            // Two instances for a week.
            upfront_fee: Some("10570.56".into()),
            currency_code: Some("USD".into()),
            duration_hours: Some(168.0),
        }])
    }
}

impl Sandbox {
    /// The cluster a change is made to. The control plane's policy (the template's
    /// `HyperPodOwnClusters`) allows changing, deleting or replacing nodes only on clusters with
    /// the product's tag: an untagged one is refused as IAM refuses it.
    pub(super) async fn live_hyperpod(&self, name: &str, op: &str) -> CloudResult<Res> {
        match self.by_name("hyperpod-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => {
                if r.data["tags"].get(CLUSTER_TAG).is_none() {
                    let arn = hyperpod_arn(&r.id);
                    return Err(super::eks_control::untagged(
                        &format!("sagemaker:{op}"),
                        &arn,
                    ));
                }
                Ok(r)
            }
            _ => Err(not_found("sagemaker", op, "ResourceNotFound", name)),
        }
    }
}
