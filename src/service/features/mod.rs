//! Managed features as the REST edge sees them: their actual state, and a PATCH planned field
//! by field against it.

pub mod start;

pub mod dashboards;

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;

/// `GET /api/clusters/{name}/features`: every managed feature's actual state.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturesView {
    pub cluster: String,
    pub features: Vec<crate::service::steps::features::FeatureState>,
    /// Features that may be enabled here (INSTANTSTART_ALLOWED_FEATURES; every one when unset).
    pub allowed: Vec<String>,
}

pub async fn features(engine: &Engine, name: &str, allowed: &[String]) -> ApiResult<FeaturesView> {
    let target = kube_target(engine, name).await?;
    // Kind, state, id and params are read; phases are not (one query, not one more per operation).
    let latest = engine.store().latest_heads(name).await?;
    let hyperpod = crate::service::cluster::records::hyperpod_name_of(engine, name).await?;
    let mut out = Vec::new();
    for f in crate::service::steps::features::FEATURES {
        let mut state =
            crate::service::steps::features::actual(engine.cloud(), name, &hyperpod, &target, f)
                .await
                .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        in_progress(&mut state, latest.iter().find(|o| o.kind == f.kind()));
        out.push(state);
    }
    Ok(FeaturesView {
        cluster: name.to_string(),
        features: out,
        allowed: if allowed.is_empty() {
            crate::service::steps::features::FEATURES
                .iter()
                .map(|f| f.key.to_string())
                .collect()
        } else {
            allowed.to_vec()
        },
    })
}

/// Mid-change a feature's chain is partly there: while its operation runs, say what is
/// happening (and which operation) rather than "degraded".
pub(super) fn in_progress(
    state: &mut crate::service::steps::features::FeatureState,
    latest: Option<&crate::store::Operation>,
) {
    let Some(op) = latest.filter(|o| !o.state.is_terminal()) else {
        return;
    };
    let enabling = op.params["enable"].as_bool().unwrap_or(true);
    state.state = if enabling { "enabling" } else { "disabling" }.into();
    state.reason = None;
    state.operation_id = Some(op.id.clone());
}

/// `PATCH /api/clusters/{name}/features`: only the fields being changed.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeaturesPatch {
    pub training_operator: Option<bool>,
    pub inference_operator: Option<bool>,
    pub container_insights: Option<bool>,
    pub fsx_csi: Option<bool>,
    /// HyperPod task governance: teams, quotas, priorities (`/teams`, `/scheduling-policy`).
    pub task_governance: Option<bool>,
    pub tiered_checkpointing: Option<bool>,
    /// Share of each instance's memory for checkpoints, 1–100 (default 20); with
    /// `tieredCheckpointing: true`, or alone to change it while enabled.
    #[schema(minimum = 1, maximum = 100)]
    pub tiered_checkpointing_memory_percent: Option<u32>,
    /// The Amazon EBS CSI driver (volumes made on demand; spaces need it).
    pub ebs_csi: Option<bool>,
    /// SageMaker Spaces: JupyterLab and Code Editor on the cluster (`/spaces`). Needs `ebsCsi`
    /// (enable both in one request).
    pub spaces: Option<bool>,
    /// HyperPod observability: the add-on writing GPU, node and training metrics to the
    /// cluster's Amazon Managed Service for Prometheus workspace (found or made), which GPU
    /// utilization is read from.
    pub observability: Option<bool>,
    /// HyperPod-managed Karpenter. It governs HyperPod instance groups only, not general EC2
    /// capacity.
    pub managed_autoscaling: Option<bool>,
    /// The instance groups it governs (1–10; on-demand or Spot, without deep health checks); default:
    /// every such group. Alone, changes the set while enabled.
    pub managed_autoscaling_instance_groups: Option<Vec<String>>,
}

impl FeaturesPatch {
    pub fn fields(&self) -> Vec<(&'static str, bool)> {
        [
            ("trainingOperator", self.training_operator),
            ("inferenceOperator", self.inference_operator),
            ("containerInsights", self.container_insights),
            ("fsxCsi", self.fsx_csi),
            ("taskGovernance", self.task_governance),
            ("ebsCsi", self.ebs_csi),
            ("spaces", self.spaces),
            ("observability", self.observability),
            (
                "tieredCheckpointing",
                self.tiered_checkpointing
                    .or(self.tiered_checkpointing_memory_percent.map(|_| true)),
            ),
            (
                "managedAutoscaling",
                self.managed_autoscaling.or(self
                    .managed_autoscaling_instance_groups
                    .as_ref()
                    .map(|_| true)),
            ),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// What to do for one field: nothing (desired equals actual), or start its operation.
pub enum FeatureChange {
    Unchanged,
    Change {
        kind: crate::service::OpKind,
        params: crate::service::steps::features::FeatureParams,
    },
}

/// Whether Karpenter on HyperPod may govern a group: on-demand or Spot capacity (AWS runs Spot
/// with Karpenter-based autoscaling, falling back to on-demand), never a training plan's
/// reserved capacity, and no deep health checks.
pub fn autoscaling_eligible(g: &crate::cloud::InstanceGroupSpec) -> bool {
    matches!(
        g.capacity,
        crate::cloud::Capacity::OnDemand | crate::cloud::Capacity::Spot
    ) && g.deep_health_checks.is_empty()
}

/// The instance groups managed autoscaling should govern: those asked for, or every eligible
/// one ([`autoscaling_eligible`]).
pub(super) async fn autoscaling_groups(
    engine: &Engine,
    name: &str,
    asked: Option<&[String]>,
) -> ApiResult<Vec<String>> {
    use crate::service::steps::features::MAX_AUTOSCALED_GROUPS;
    const FIELD: &str = "managedAutoscalingInstanceGroups";
    let groups = crate::service::live_groups(engine, name).await?;
    let eligible = autoscaling_eligible;
    let eligible_names: Vec<&String> = groups
        .iter()
        .filter(|g| eligible(g))
        .map(|g| &g.name)
        .collect();
    let chosen: Vec<String> = match asked {
        None => eligible_names.iter().map(|n| n.to_string()).collect(),
        Some(list) => {
            for g in list {
                match groups.iter().find(|s| &s.name == g) {
                    None => {
                        return Err(ApiError::validation_hint(
                            FIELD,
                            format!("`{}` is not an instance group of `{name}`", crate::service::cluster::validate::truncate(g)),
                            json!(eligible_names),
                        ))
                    }
                    Some(s) if !eligible(s) => {
                        return Err(ApiError::validation_hint(
                            FIELD,
                            format!("instance group `{g}` uses a training plan or deep health checks, which HyperPod autoscaling does not support"),
                            json!(eligible_names),
                        ))
                    }
                    Some(_) => {}
                }
            }
            let mut list = list.to_vec();
            list.sort();
            list.dedup();
            list
        }
    };
    if chosen.is_empty() || chosen.len() > MAX_AUTOSCALED_GROUPS {
        return Err(ApiError::validation_hint(
            FIELD,
            if chosen.is_empty() {
                "managed autoscaling needs at least one on-demand or Spot instance group without deep health checks; add one first (instance_group_add)".to_string()
            } else {
                format!("at most {MAX_AUTOSCALED_GROUPS} instance groups in one node class")
            },
            json!(eligible_names),
        ));
    }
    Ok(chosen)
}

/// The server's settings a feature change follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct FeatureSettings<'a> {
    /// The features users may enable (all when empty).
    pub allowed: &'a [String],
    /// The Grafana workspace the observability add-on's dashboards go to.
    pub grafana_workspace: Option<&'a str>,
}

/// Compares each requested field with the actual state; refuses enabling a feature whose
/// prerequisites are not ready.
pub async fn plan_features(
    engine: &Engine,
    name: &str,
    patch: &FeaturesPatch,
    settings: &FeatureSettings<'_>,
) -> ApiResult<Vec<(&'static str, FeatureChange)>> {
    let allowed = settings.allowed;
    use crate::service::steps::features as f;
    let target = kube_target(engine, name).await?;
    let hyperpod = crate::service::cluster::records::hyperpod_name_of(engine, name).await?;
    if let Some(p) = patch.tiered_checkpointing_memory_percent {
        if patch.tiered_checkpointing == Some(false) || !(1..=100).contains(&p) {
            return Err(ApiError::validation_hint(
                "tieredCheckpointingMemoryPercent",
                format!("{p} is not a memory share for enabled tiered checkpointing"),
                json!("1 to 100, with tieredCheckpointing true (or already enabled)"),
            ));
        }
    }
    if patch.managed_autoscaling == Some(false)
        && patch.managed_autoscaling_instance_groups.is_some()
    {
        return Err(ApiError::validation_hint(
            "managedAutoscalingInstanceGroups",
            "instance groups are chosen only when managed autoscaling is on",
            json!("send managedAutoscaling: false alone"),
        ));
    }
    let fields = patch.fields();
    if fields.is_empty() {
        return Err(ApiError::validation_hint(
            "features",
            "send only the features to change; this request names none",
            json!(f::FEATURES.iter().map(|f| f.key).collect::<Vec<_>>()),
        ));
    }
    let mut plan = Vec::new();
    for &(key, enable) in &fields {
        let feature =
            f::feature(key).ok_or_else(|| anyhow::anyhow!("feature {key} not in catalogue"))?;
        let actual = f::actual(engine.cloud(), name, &hyperpod, &target, feature)
            .await
            .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        let memory_percent = (key == f::TIERED && enable).then(|| {
            patch
                .tiered_checkpointing_memory_percent
                .or(actual.memory_percent)
                .unwrap_or(f::DEFAULT_MEMORY_PERCENT)
        });
        let instance_groups = if key == f::AUTOSCALING && enable {
            Some(
                autoscaling_groups(
                    engine,
                    name,
                    patch.managed_autoscaling_instance_groups.as_deref(),
                )
                .await?,
            )
        } else {
            None
        };
        let same_groups = instance_groups.is_none() || {
            let mut now = actual.instance_groups.clone().unwrap_or_default();
            now.sort();
            Some(now) == instance_groups
        };
        let same_setting =
            (memory_percent.is_none() || memory_percent == actual.memory_percent) && same_groups;
        // "degraded" (e.g. its identity missing) or "failed" is repaired by enabling again.
        if actual.enabled == enable
            && !matches!(actual.state.as_str(), "degraded" | "failed")
            && same_setting
        {
            plan.push((key, FeatureChange::Unchanged));
            continue;
        }
        if enable && !allowed.is_empty() && !allowed.iter().any(|a| a == key) {
            return Err(ApiError::validation_hint(
                key,
                format!("enabling {key} is not allowed on this control plane (INSTANTSTART_ALLOWED_FEATURES)"),
                json!(allowed),
            ));
        }
        let mut after = Vec::new();
        if enable {
            for req in feature.requires {
                if addon_active(engine, name, req).await? {
                    continue;
                }
                // A prerequisite this same request turns on: wait for it instead of refusing.
                if let Some(other) = f::FEATURES
                    .iter()
                    .find(|o| o.addon == *req)
                    .filter(|o| fields.iter().any(|(k, on)| *k == o.key && *on))
                {
                    after.push(other.key.to_string());
                    continue;
                }
                // An add-on that is itself a feature is enabled as one; the others come with
                // the dependency stage.
                let how = match f::FEATURES.iter().find(|other| other.addon == *req) {
                    Some(other) => format!("enable {} first, or in the same request", other.key),
                    None => "run the dependencies stage (dependencies_install)".to_string(),
                };
                return Err(ApiError::Conflict {
                    slug: ProblemType::FeaturePrerequisite,
                    detail: format!("{key} needs the {req} add-on to be ACTIVE first: {how}"),
                    field: Some(key.to_string()),
                    operation_id: None,
                });
            }
        }
        plan.push((
            key,
            FeatureChange::Change {
                kind: feature.kind(),
                params: f::FeatureParams {
                    enable,
                    memory_percent,
                    instance_groups,
                    after,
                    grafana_workspace: (key == "observability" && enable)
                        .then(|| settings.grafana_workspace.map(str::to_string))
                        .flatten(),
                },
            },
        ));
    }
    Ok(plan)
}

/// The inference operator's add-on (the `inferenceOperator` managed feature).
pub use crate::service::steps::features::INFERENCE_OPERATOR_ADDON;

/// Whether an EKS add-on is ACTIVE on the cluster: what a feature needs before it is enabled,
/// and what a workload needs before it is made (the inference operator's add-on runs endpoints
/// and brings the AWS Load Balancer Controller).
pub async fn addon_active(engine: &Engine, cluster: &str, addon: &str) -> ApiResult<bool> {
    Ok(engine
        .cloud()
        .eks
        .describe_addon(cluster, addon)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?
        .is_some_and(|a| a.status == crate::cloud::AddonStatus::Active))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{OpState, Operation};

    #[test]
    fn karpenter_governs_on_demand_and_spot_groups_without_deep_health_checks() {
        use crate::cloud::{Capacity, InstanceGroupSpec};
        let group = |capacity: Capacity, checks: &[&str]| InstanceGroupSpec {
            name: "g".into(),
            instance_type: "ml.g5.8xlarge".into(),
            instance_count: 1,
            execution_role_arn: "arn:aws:iam::1:role/x".into(),
            lifecycle_source_s3_uri: "s3://b/l/".into(),
            lifecycle_on_create: "on_create.sh".into(),
            threads_per_core: 1,
            ebs_volume_gb: 500,
            deep_health_checks: checks.iter().map(|c| c.to_string()).collect(),
            capacity,
            subnet_ids: vec![],
            security_group_ids: vec![],
            network_interface: None,
            scheduled_update: None,
        };
        assert!(autoscaling_eligible(&group(Capacity::OnDemand, &[])));
        assert!(autoscaling_eligible(&group(Capacity::Spot, &[])));
        assert!(!autoscaling_eligible(&group(
            Capacity::Spot,
            &["InstanceStress"]
        )));
        let plan = Capacity::TrainingPlan {
            arn: "arn:plan".into(),
        };
        assert!(!autoscaling_eligible(&group(plan, &[])));
    }

    fn op(state: OpState, enable: bool) -> Operation {
        Operation {
            id: "op-1".into(),
            kind: "feature-managed-autoscaling".into(),
            cluster: "demo".into(),
            state,
            actor: "api".into(),
            principal: None,
            params: json!({"enable": enable}),
            parent_id: None,
            error: None,
            cancel_requested: false,
            created_at: String::new(),
            updated_at: String::new(),
            status_url: "/api/operations/op-1".into(),
            phases: vec![],
        }
    }

    #[test]
    fn a_feature_being_changed_reads_as_enabling_or_disabling_with_its_operation() {
        let degraded = || crate::service::steps::features::FeatureState {
            key: "managedAutoscaling".into(),
            enabled: false,
            state: "degraded".into(),
            addon: String::new(),
            description: String::new(),
            pod_identity_association: None,
            memory_percent: None,
            instance_groups: None,
            reason: Some("incomplete".into()),
            operation_id: None,
        };
        let mut s = degraded();
        in_progress(&mut s, Some(&op(OpState::Running, true)));
        assert_eq!(
            (
                s.state.as_str(),
                s.reason.as_deref(),
                s.operation_id.as_deref()
            ),
            ("enabling", None, Some("op-1"))
        );
        let mut s = degraded();
        in_progress(&mut s, Some(&op(OpState::Pending, false)));
        assert_eq!(s.state, "disabling");
        let mut s = degraded();
        in_progress(&mut s, Some(&op(OpState::Failed, true)));
        assert_eq!(s.state, "degraded", "a finished operation says nothing");
        let mut s = degraded();
        in_progress(&mut s, None);
        assert_eq!(s.state, "degraded");
    }
}
