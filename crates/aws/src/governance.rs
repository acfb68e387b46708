//! The task-governance port over SageMaker: scheduler configs and compute quotas. Lists are
//! paged to the end; creates run once (the engine finds a create that landed by name before
//! acting again); updates name the version they change, as SageMaker requires.

use async_trait::async_trait;
use aws_sdk_sagemaker::types::{
    ActivationState, ClusterInstanceType, ComputeQuotaConfig, ComputeQuotaResourceConfig,
    ComputeQuotaTarget, FairShare, IdleResourceSharing, PreemptTeamTasks,
    PriorityClass as SdkClass, ResourceSharingConfig, ResourceSharingStrategy,
    SchedulerConfig as SdkConfig,
};

use super::errors::{idempotent, once};
use super::Aws;
use cloud::*;

const S: &str = "sagemaker";

fn status_str<T: AsRef<str>>(s: Option<T>) -> String {
    s.map(|s| s.as_ref().to_string()).unwrap_or_default()
}

fn gone(status: &str) -> bool {
    status == "Deleted"
}

/// The SDK's shape of a policy.
pub fn sdk_policy(p: &SchedulerPolicy) -> SdkConfig {
    let classes = p
        .priority_classes
        .iter()
        .map(|c| {
            SdkClass::builder()
                .name(&c.name)
                .weight(i32::from(c.weight))
                .build()
        })
        .collect();
    SdkConfig::builder()
        .set_priority_classes(Some(classes))
        .fair_share(match p.fair_share {
            true => FairShare::Enabled,
            false => FairShare::Disabled,
        })
        .idle_resource_sharing(match p.idle_resource_sharing {
            true => IdleResourceSharing::Enabled,
            false => IdleResourceSharing::Disabled,
        })
        .build()
}

fn policy_of(c: Option<&SdkConfig>) -> SchedulerPolicy {
    SchedulerPolicy {
        priority_classes: c
            .map(|c| c.priority_classes())
            .unwrap_or_default()
            .iter()
            .map(|p| PriorityClass {
                name: p.name().unwrap_or_default().to_string(),
                weight: p.weight().and_then(|w| u8::try_from(w).ok()).unwrap_or(0),
            })
            .collect(),
        // FairShare is Enabled when not sent; idle-resource sharing only when asked for.
        fair_share: c.and_then(|c| c.fair_share()) != Some(&FairShare::Disabled),
        idle_resource_sharing: c.and_then(|c| c.idle_resource_sharing())
            == Some(&IdleResourceSharing::Enabled),
    }
}

/// The SDK's shape of a team's quota.
pub fn sdk_quota(q: &TeamQuota) -> ComputeQuotaConfig {
    let resources = q
        .resources
        .iter()
        .map(|r| {
            ComputeQuotaResourceConfig::builder()
                .instance_type(ClusterInstanceType::from(r.instance_type.as_str()))
                .set_count(r.count.and_then(|n| i32::try_from(n).ok()))
                .set_accelerators(r.accelerators.and_then(|n| i32::try_from(n).ok()))
                .build()
        })
        .collect();
    ComputeQuotaConfig::builder()
        .set_compute_quota_resources(Some(resources))
        .resource_sharing_config(
            ResourceSharingConfig::builder()
                .strategy(ResourceSharingStrategy::from(q.sharing.as_str()))
                .set_borrow_limit(q.borrow_limit.and_then(|n| i32::try_from(n).ok()))
                .build(),
        )
        .preempt_team_tasks(PreemptTeamTasks::from(q.preempt.as_str()))
        .build()
}

fn quota_of(
    c: Option<&ComputeQuotaConfig>,
    t: Option<&ComputeQuotaTarget>,
    a: Option<&ActivationState>,
) -> TeamQuota {
    let sharing = c.and_then(|c| c.resource_sharing_config());
    TeamQuota {
        resources: c
            .map(|c| c.compute_quota_resources())
            .unwrap_or_default()
            .iter()
            .map(|r| QuotaResource {
                instance_type: status_str(r.instance_type()),
                count: r.count().and_then(|n| u32::try_from(n).ok()),
                accelerators: r.accelerators().and_then(|n| u32::try_from(n).ok()),
            })
            .collect(),
        sharing: match sharing.and_then(|s| s.strategy()).map(|s| s.as_str()) {
            Some("Lend") => Sharing::Lend,
            Some("DontLend") => Sharing::DontLend,
            _ => Sharing::LendAndBorrow,
        },
        borrow_limit: sharing
            .and_then(|s| s.borrow_limit())
            .and_then(|n| u32::try_from(n).ok()),
        preempt: match c.and_then(|c| c.preempt_team_tasks()) {
            Some(PreemptTeamTasks::Never) => Preempt::Never,
            _ => Preempt::LowerPriority,
        },
        fair_share_weight: t
            .and_then(|t| t.fair_share_weight())
            .and_then(|w| u8::try_from(w).ok())
            .unwrap_or(0),
        active: a != Some(&ActivationState::Disabled),
    }
}

#[async_trait]
impl Governance for Aws {
    async fn scheduler_configs(&self, cluster_arn: &str) -> CloudResult<Vec<SchedulerConfig>> {
        let mut ids = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "ListClusterSchedulerConfigs", || {
                self.sagemaker
                    .list_cluster_scheduler_configs()
                    .cluster_arn(cluster_arn)
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            ids.extend(
                out.cluster_scheduler_config_summaries()
                    .iter()
                    .filter(|s| !gone(&status_str(s.status())))
                    .filter_map(|s| s.cluster_scheduler_config_id().map(str::to_string)),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut configs = Vec::new();
        for id in ids {
            let d = idempotent(S, "DescribeClusterSchedulerConfig", || {
                self.sagemaker
                    .describe_cluster_scheduler_config()
                    .cluster_scheduler_config_id(&id)
                    .send()
            })
            .await?;
            configs.push(SchedulerConfig {
                id: id.clone(),
                arn: d.cluster_scheduler_config_arn().unwrap_or_default().into(),
                name: d.name().unwrap_or_default().into(),
                version: d.cluster_scheduler_config_version().unwrap_or(1),
                status: status_str(d.status()),
                failure_reason: d.failure_reason().map(str::to_string),
                policy: policy_of(d.scheduler_config()),
            });
        }
        Ok(configs)
    }

    async fn create_scheduler_config(
        &self,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
    ) -> CloudResult<String> {
        let out = once(
            S,
            "CreateClusterSchedulerConfig",
            self.sagemaker
                .create_cluster_scheduler_config()
                .name(name)
                .cluster_arn(cluster_arn)
                .scheduler_config(sdk_policy(policy))
                .send(),
        )
        .await?;
        Ok(out.cluster_scheduler_config_id().unwrap_or_default().into())
    }

    async fn update_scheduler_config(
        &self,
        id: &str,
        version: i32,
        policy: &SchedulerPolicy,
    ) -> CloudResult<()> {
        let config = sdk_policy(policy);
        once(
            S,
            "UpdateClusterSchedulerConfig",
            self.sagemaker
                .update_cluster_scheduler_config()
                .cluster_scheduler_config_id(id)
                .target_version(version)
                .scheduler_config(config)
                .send(),
        )
        .await?;
        Ok(())
    }

    async fn delete_scheduler_config(&self, id: &str) -> CloudResult<()> {
        idempotent(S, "DeleteClusterSchedulerConfig", || {
            self.sagemaker
                .delete_cluster_scheduler_config()
                .cluster_scheduler_config_id(id)
                .send()
        })
        .await?;
        Ok(())
    }

    async fn compute_quotas(&self, cluster_arn: &str) -> CloudResult<Vec<ComputeQuota>> {
        let mut quotas = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "ListComputeQuotas", || {
                self.sagemaker
                    .list_compute_quotas()
                    .cluster_arn(cluster_arn)
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            for s in out.compute_quota_summaries() {
                let status = status_str(s.status());
                if gone(&status) {
                    continue;
                }
                // A summary may leave the configuration out, and never carries why a quota
                // failed: DescribeComputeQuota has both (botocore's ComputeQuotaSummary and
                // DescribeComputeQuotaResponse).
                if s.compute_quota_config().is_none() || status.ends_with("Failed") {
                    let id = s.compute_quota_id().unwrap_or_default();
                    let d = idempotent(S, "DescribeComputeQuota", || {
                        self.sagemaker
                            .describe_compute_quota()
                            .compute_quota_id(id)
                            .send()
                    })
                    .await?;
                    quotas.push(ComputeQuota {
                        id: id.into(),
                        arn: s.compute_quota_arn().unwrap_or_default().into(),
                        name: s.name().unwrap_or_default().into(),
                        team: d
                            .compute_quota_target()
                            .or(s.compute_quota_target())
                            .and_then(|t| t.team_name())
                            .unwrap_or_default()
                            .into(),
                        version: d
                            .compute_quota_version()
                            .or(s.compute_quota_version())
                            .unwrap_or(1),
                        status: status_str(d.status().or(s.status())),
                        failure_reason: d.failure_reason().map(str::to_string),
                        quota: quota_of(
                            d.compute_quota_config(),
                            d.compute_quota_target(),
                            d.activation_state(),
                        ),
                    });
                    continue;
                }
                quotas.push(ComputeQuota {
                    id: s.compute_quota_id().unwrap_or_default().into(),
                    arn: s.compute_quota_arn().unwrap_or_default().into(),
                    name: s.name().unwrap_or_default().into(),
                    team: s
                        .compute_quota_target()
                        .and_then(|t| t.team_name())
                        .unwrap_or_default()
                        .into(),
                    version: s.compute_quota_version().unwrap_or(1),
                    status,
                    failure_reason: None,
                    quota: quota_of(
                        s.compute_quota_config(),
                        s.compute_quota_target(),
                        s.activation_state(),
                    ),
                });
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(quotas)
    }

    async fn create_compute_quota(
        &self,
        name: &str,
        cluster_arn: &str,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<String> {
        let out = once(
            S,
            "CreateComputeQuota",
            self.sagemaker
                .create_compute_quota()
                .name(name)
                .cluster_arn(cluster_arn)
                .compute_quota_config(sdk_quota(quota))
                .compute_quota_target(target(team, quota))
                .activation_state(activation(quota))
                .send(),
        )
        .await?;
        Ok(out.compute_quota_id().unwrap_or_default().into())
    }

    async fn update_compute_quota(
        &self,
        id: &str,
        version: i32,
        team: &str,
        quota: &TeamQuota,
    ) -> CloudResult<()> {
        // The target's team name cannot change; its weight can, sent with the same name.
        once(
            S,
            "UpdateComputeQuota",
            self.sagemaker
                .update_compute_quota()
                .compute_quota_id(id)
                .target_version(version)
                .compute_quota_config(sdk_quota(quota))
                .compute_quota_target(target(team, quota))
                .activation_state(activation(quota))
                .send(),
        )
        .await?;
        Ok(())
    }

    async fn delete_compute_quota(&self, id: &str) -> CloudResult<()> {
        idempotent(S, "DeleteComputeQuota", || {
            self.sagemaker
                .delete_compute_quota()
                .compute_quota_id(id)
                .send()
        })
        .await?;
        Ok(())
    }
}

fn target(team: &str, q: &TeamQuota) -> ComputeQuotaTarget {
    ComputeQuotaTarget::builder()
        .team_name(team)
        .fair_share_weight(i32::from(q.fair_share_weight))
        .build()
}

fn activation(q: &TeamQuota) -> ActivationState {
    match q.active {
        true => ActivationState::Enabled,
        false => ActivationState::Disabled,
    }
}
