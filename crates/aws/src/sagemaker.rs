//! SageMaker HyperPod: cluster create/describe/delete and node listing.

use async_trait::async_trait;
use aws_sdk_sagemaker::types::{
    ClusterNodeRecovery, ClusterOrchestrator, ClusterOrchestratorEksConfig, ClusterStatus, Tag,
};

use super::errors::{idempotent, once};
use super::sagemaker_kinds::{described_spec, group_spec, rolling_deployment, vpc};
use super::Aws;
use cloud::*;

const S: &str = "sagemaker";

fn is_missing(e: &CloudError) -> bool {
    // SageMaker reports a missing cluster as ResourceNotFound, or as a ValidationException
    // "Could not find cluster" (observed on some endpoints).
    e.code == "ResourceNotFound"
        || (e.code == "ValidationException" && e.message.contains("Could not find"))
}

#[async_trait]
impl HyperPod for Aws {
    async fn create_cluster(&self, req: &CreateHyperPodCluster) -> CloudResult<String> {
        let first = req.instance_groups.first().ok_or_else(|| {
            CloudError::new(
                S,
                "CreateCluster",
                "InvalidRequest",
                "a cluster needs an instance group",
            )
        })?;
        let tags: Vec<Tag> = req
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let out =
            once(
                S,
                "CreateCluster",
                self.sagemaker
                    .create_cluster()
                    .cluster_name(&req.name)
                    .orchestrator(
                        ClusterOrchestrator::builder()
                            .eks(
                                ClusterOrchestratorEksConfig::builder()
                                    .cluster_arn(&req.eks_cluster_arn)
                                    .build(),
                            )
                            .build(),
                    )
                    .node_recovery(ClusterNodeRecovery::from(req.node_recovery.as_str()))
                    .set_node_provisioning_mode(req.continuous_provisioning.then_some(
                        aws_sdk_sagemaker::types::ClusterNodeProvisioningMode::Continuous,
                    ))
                    .vpc_config(vpc(&first.subnet_ids, &first.security_group_ids))
                    .set_instance_groups(Some(req.instance_groups.iter().map(group_spec).collect()))
                    .set_tags(Some(tags))
                    .send(),
            )
            .await?;
        Ok(out.cluster_arn().unwrap_or_default().to_string())
    }

    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<HyperPodCluster>> {
        let out = match idempotent(S, "DescribeCluster", || {
            self.sagemaker.describe_cluster().cluster_name(name).send()
        })
        .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(HyperPodCluster {
            name: out.cluster_name().unwrap_or(name).to_string(),
            arn: out.cluster_arn().unwrap_or_default().to_string(),
            status: match out.cluster_status() {
                Some(ClusterStatus::Inservice) => HyperPodStatus::InService,
                Some(ClusterStatus::Deleting) => HyperPodStatus::Deleting,
                Some(ClusterStatus::Failed) => HyperPodStatus::Failed,
                Some(ClusterStatus::Rollingback) => HyperPodStatus::RollingBack,
                Some(ClusterStatus::Systemupdating) => HyperPodStatus::SystemUpdating,
                Some(ClusterStatus::Updating) => HyperPodStatus::Updating,
                _ => HyperPodStatus::Creating,
            },
            failure_message: out.failure_message().map(str::to_string),
            instance_groups: out
                .instance_groups()
                .iter()
                .map(|g| InstanceGroupStatus {
                    name: g.instance_group_name().unwrap_or_default().to_string(),
                    instance_type: g
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    target_count: g
                        .target_count()
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    current_count: g
                        .current_count()
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    spec: described_spec(g),
                    software: GroupSoftwareState {
                        current_release: g.current_image_release_version().map(str::to_string),
                        desired_release: g.desired_image_release_version().map(str::to_string),
                        image_status: g.image_version_status().map(|s| s.as_str().to_string()),
                        update_status: g.software_update_status().map(|s| s.as_str().to_string()),
                    },
                })
                .collect(),
            tiered_storage: out.tiered_storage_config().map(|t| TieredStorage {
                enabled: t.mode() == Some(&aws_sdk_sagemaker::types::ClusterConfigMode::Enable),
                memory_percent: t
                    .instance_memory_allocation_percentage()
                    .and_then(|p| u32::try_from(p).ok()),
            }),
            autoscaling: out.auto_scaling().map(|a| AutoScaling {
                enabled: a.mode() == &aws_sdk_sagemaker::types::ClusterAutoScalingMode::Enable,
                status: a.status().as_str().to_string(),
                failure_message: a.failure_message().map(str::to_string),
                cluster_role_arn: out.cluster_role().map(str::to_string),
            }),
            continuous_provisioning: out.node_provisioning_mode()
                == Some(&aws_sdk_sagemaker::types::ClusterNodeProvisioningMode::Continuous),
        }))
    }

    async fn list_cluster_nodes(
        &self,
        name: &str,
        next_token: Option<String>,
    ) -> CloudResult<NodePage> {
        let out = idempotent(S, "ListClusterNodes", || {
            self.sagemaker
                .list_cluster_nodes()
                .cluster_name(name)
                .max_results(100)
                .set_next_token(next_token.clone())
                .send()
        })
        .await?;
        Ok(NodePage {
            nodes: out
                .cluster_node_summaries()
                .iter()
                .map(|n| ClusterNode {
                    instance_id: n.instance_id().unwrap_or_default().to_string(),
                    instance_group: n.instance_group_name().unwrap_or_default().to_string(),
                    instance_type: n
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    status: n
                        .instance_status()
                        .and_then(|s| s.status())
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    launch_time: n.launch_time().map(|t| t.to_string()).unwrap_or_default(),
                })
                .collect(),
            next_token: out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string),
        })
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        idempotent(S, "DeleteCluster", || {
            self.sagemaker.delete_cluster().cluster_name(name).send()
        })
        .await
        .map(|_| ())
    }

    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()> {
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        idempotent(S, "AddTags", || {
            self.sagemaker
                .add_tags()
                .resource_arn(arn)
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn update_cluster(
        &self,
        name: &str,
        groups: &[InstanceGroupSpec],
        continuous: bool,
    ) -> CloudResult<()> {
        // Not idempotent in general (a scale racing another change): sent once.
        once(
            S,
            "UpdateCluster",
            self.sagemaker
                .update_cluster()
                .cluster_name(name)
                .set_instance_groups(Some(groups.iter().map(group_spec).collect()))
                .set_node_provisioning_mode(
                    continuous.then_some(
                        aws_sdk_sagemaker::types::ClusterNodeProvisioningMode::Continuous,
                    ),
                )
                .send(),
        )
        .await
        .map(|_| ())
    }

    async fn delete_instance_groups(&self, name: &str, groups: &[String]) -> CloudResult<()> {
        once(
            S,
            "UpdateCluster",
            self.sagemaker
                .update_cluster()
                .cluster_name(name)
                .set_instance_groups_to_delete(Some(groups.to_vec()))
                .send(),
        )
        .await
        .map(|_| ())
    }

    async fn set_tiered_storage(&self, name: &str, config: TieredStorage) -> CloudResult<()> {
        use aws_sdk_sagemaker::types::{ClusterConfigMode, ClusterTieredStorageConfig};
        let tiered = ClusterTieredStorageConfig::builder()
            .mode(if config.enabled {
                ClusterConfigMode::Enable
            } else {
                ClusterConfigMode::Disable
            })
            .set_instance_memory_allocation_percentage(
                config.memory_percent.and_then(|p| i32::try_from(p).ok()),
            )
            .build();
        once(
            S,
            "UpdateCluster",
            self.sagemaker
                .update_cluster()
                .cluster_name(name)
                .tiered_storage_config(tiered)
                .send(),
        )
        .await
        .map(|_| ())
    }

    async fn set_autoscaling(&self, name: &str, cluster_role_arn: Option<&str>) -> CloudResult<()> {
        use aws_sdk_sagemaker::types::{
            ClusterAutoScalerType, ClusterAutoScalingConfig, ClusterAutoScalingMode,
            ClusterNodeProvisioningMode,
        };
        let config = ClusterAutoScalingConfig::builder()
            .mode(if cluster_role_arn.is_some() {
                ClusterAutoScalingMode::Enable
            } else {
                ClusterAutoScalingMode::Disable
            })
            .auto_scaler_type(ClusterAutoScalerType::Karpenter)
            .build()
            .map_err(|e| CloudError::new(S, "UpdateCluster", "InvalidRequest", e.to_string()))?;
        // Karpenter adds nodes one at a time, which needs continuous provisioning; the role is
        // what HyperPod assumes to call BatchAdd/BatchDeleteClusterNodes.
        let mut req = self
            .sagemaker
            .update_cluster()
            .cluster_name(name)
            .auto_scaling(config);
        if let Some(role) = cluster_role_arn {
            req = req
                .cluster_role(role)
                .node_provisioning_mode(ClusterNodeProvisioningMode::Continuous);
        }
        once(S, "UpdateCluster", req.send()).await.map(|_| ())
    }

    async fn update_cluster_software(
        &self,
        name: &str,
        update: &SoftwareUpdate,
    ) -> CloudResult<()> {
        let groups = update.instance_groups.iter().map(|g| {
            aws_sdk_sagemaker::types::UpdateClusterSoftwareInstanceGroupSpecification::builder()
                .instance_group_name(g)
                .build()
        });
        let mut req = self
            .sagemaker
            .update_cluster_software()
            .cluster_name(name)
            .deployment_config(rolling_deployment(update))
            .set_image_id(update.image_id.clone());
        for g in groups {
            req = req.instance_groups(g);
        }
        once(S, "UpdateClusterSoftware", req.send())
            .await
            .map(|_| ())
    }

    async fn node_action(
        &self,
        name: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> CloudResult<NodeActionResult> {
        // The three batch APIs differ only in name and in what their failure code is called;
        // each answer lists the nodes that took the action and those that did not.
        macro_rules! batch {
            ($method:ident, $operation:literal, $code:ident) => {{
                let out = once(
                    S,
                    $operation,
                    self.sagemaker
                        .$method()
                        .cluster_name(name)
                        .set_node_ids(Some(node_ids.to_vec()))
                        .send(),
                )
                .await?;
                let failed = out
                    .failed()
                    .iter()
                    .map(|f| {
                        (
                            f.node_id().unwrap_or_default().to_string(),
                            f.$code()
                                .map(|c| c.as_str())
                                .unwrap_or_default()
                                .to_string(),
                            f.message().unwrap_or_default().to_string(),
                        )
                    })
                    .collect::<Vec<_>>();
                (out.successful().to_vec(), failed)
            }};
        }
        let (successful, failed) = match action {
            NodeAction::Reboot => batch!(
                batch_reboot_cluster_nodes,
                "BatchRebootClusterNodes",
                error_code
            ),
            NodeAction::Replace => batch!(
                batch_replace_cluster_nodes,
                "BatchReplaceClusterNodes",
                error_code
            ),
            NodeAction::Delete => {
                batch!(batch_delete_cluster_nodes, "BatchDeleteClusterNodes", code)
            }
        };
        Ok(NodeActionResult { successful, failed })
    }

    async fn list_training_plans(&self) -> CloudResult<Vec<TrainingPlan>> {
        let mut plans = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "ListTrainingPlans", || {
                self.sagemaker
                    .list_training_plans()
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            plans.extend(out.training_plan_summaries().iter().map(|p| {
                TrainingPlan {
                    arn: p.training_plan_arn().unwrap_or_default().to_string(),
                    name: p.training_plan_name().unwrap_or_default().to_string(),
                    status: p
                        .status()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    total_instance_count: p
                        .total_instance_count()
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    available_instance_count: p
                        .available_instance_count()
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    reservations: p
                        .reserved_capacity_summaries()
                        .iter()
                        .map(|r| Reservation {
                            availability_zone: r
                                .availability_zone()
                                .unwrap_or_default()
                                .to_string(),
                            instance_type: r
                                .instance_type()
                                .map(|t| t.as_str().to_string())
                                .unwrap_or_default(),
                            instance_count: r
                                .total_instance_count()
                                .and_then(|n| u32::try_from(n).ok())
                                .unwrap_or(0),
                        })
                        .collect(),
                    upfront_fee: p.upfront_fee().map(str::to_string),
                    currency_code: p.currency_code().map(str::to_string),
                    duration_hours: p
                        .duration_hours()
                        .map(|h| h as f64 + p.duration_minutes().unwrap_or(0) as f64 / 60.0),
                }
            }));
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(plans);
            }
        }
    }

    async fn describe_cluster_node(
        &self,
        name: &str,
        node_id: &str,
    ) -> CloudResult<Option<NodeDetail>> {
        let out = match idempotent(S, "DescribeClusterNode", || {
            self.sagemaker
                .describe_cluster_node()
                .cluster_name(name)
                .node_id(node_id)
                .send()
        })
        .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(out.node_details().map(|n| NodeDetail {
            instance_id: n.instance_id().unwrap_or(node_id).to_string(),
            instance_group: n.instance_group_name().unwrap_or_default().to_string(),
            instance_type: n
                .instance_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            status: n
                .instance_status()
                .and_then(|s| s.status())
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            message: n
                .instance_status()
                .and_then(|s| s.message())
                .filter(|m| !m.is_empty())
                .map(str::to_string),
            launch_time: n.launch_time().map(|t| t.to_string()),
            last_software_update_time: n.last_software_update_time().map(|t| t.to_string()),
        }))
    }

    async fn list_cluster_events(
        &self,
        name: &str,
        node_id: Option<&str>,
        limit: usize,
    ) -> CloudResult<Vec<ClusterEvent>> {
        let max = i32::try_from(limit.clamp(1, 100)).unwrap_or(100);
        let out = match idempotent(S, "ListClusterEvents", || {
            self.sagemaker
                .list_cluster_events()
                .cluster_name(name)
                .set_node_id(node_id.map(str::to_string))
                .sort_by(aws_sdk_sagemaker::types::EventSortBy::EventTime)
                .sort_order(aws_sdk_sagemaker::types::SortOrder::Descending)
                .max_results(max)
                .send()
        })
        .await
        {
            Ok(out) => out,
            Err(e) if is_missing(&e) => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        Ok(out
            .events()
            .iter()
            .take(limit)
            .map(|e| ClusterEvent {
                time: e.event_time().map(|t| t.to_string()).unwrap_or_default(),
                level: e
                    .event_level()
                    .map(|l| l.as_str().to_string())
                    .unwrap_or_default(),
                resource_type: e
                    .resource_type()
                    .map(|r| r.as_str().to_string())
                    .unwrap_or_default(),
                instance_group: e.instance_group_name().map(str::to_string),
                instance_id: e.instance_id().map(str::to_string),
                description: e.description().unwrap_or_default().to_string(),
            })
            .collect())
    }
}
