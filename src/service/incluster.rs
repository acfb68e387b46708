//! What the REST edge asks of a cluster's Kubernetes side: the dependencies report, storage
//! claims (validated requests, listing), and live node/GPU state from the watch-backed cache.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::steps::deps::{self, ComponentState, ComponentStatus};
use super::steps::storage::{claim_view, ClaimView, StorageParams, VolumeSource, CLAIM_LABEL};
use super::validate;
use crate::cloud::{ClusterState, KubeTarget, MANAGED_BY};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::store::{OpState, PhaseState};

/// Where the cluster's API server is, from what the `cluster` stage recorded.
pub async fn kube_target(engine: &Engine, name: &str) -> ApiResult<KubeTarget> {
    let record = super::live_cluster(engine, name).await?;
    let get = |k: &str| {
        record
            .resources
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match (get("eksEndpoint"), get("eksCertificateAuthority")) {
        (Some(endpoint), Some(ca)) => Ok(KubeTarget {
            cluster: name.to_string(),
            endpoint,
            certificate_authority: ca,
        }),
        _ => Err(ApiError::Conflict {
            slug: "stage-not-ready",
            detail: format!("`{name}` has no EKS cluster yet: run the cluster stage first"),
            field: None,
            operation_id: None,
        }),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReport {
    pub cluster: String,
    /// In install order.
    pub components: Vec<ComponentStatus>,
    /// The latest `dependencies` operation, if any.
    pub operation_id: Option<String>,
    /// Every component is ready.
    pub ready: bool,
}

/// Each component's live state, with what the latest `dependencies` operation says layered on
/// top (a component whose phase failed is `failed` with the phase's reason until it is ready).
pub async fn dependencies(engine: &Engine, name: &str) -> ApiResult<DependencyReport> {
    let target = kube_target(engine, name).await?;
    let latest = engine
        .store()
        .list_operations(Some(name), None, 50)
        .await?
        .into_iter()
        .find(|o| o.kind == "dependencies");
    let mut components = Vec::new();
    for c in deps::COMPONENTS {
        let mut status = deps::component_status(engine.cloud(), name, &target, c)
            .await
            .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        let phase = latest
            .as_ref()
            .and_then(|o| o.phases.iter().find(|p| p.name == c.name));
        if let (Some(op), Some(phase)) = (&latest, phase) {
            let running = matches!(op.state, OpState::Running | OpState::Pending);
            if status.state != ComponentState::Ready {
                if phase.state == PhaseState::Failed {
                    status.state = ComponentState::Failed;
                    if let Some(msg) = phase.error.as_ref().and_then(|e| e["message"].as_str()) {
                        status.reason = msg.to_string();
                    }
                } else if running && status.state == ComponentState::Pending {
                    status.state = ComponentState::Installing;
                    status.reason = phase
                        .progress
                        .clone()
                        .unwrap_or_else(|| "queued in the running reconciliation".into());
                }
            }
        }
        components.push(status);
    }
    Ok(DependencyReport {
        cluster: name.to_string(),
        ready: components.iter().all(|c| c.state == ComponentState::Ready),
        components,
        operation_id: latest.map(|o| o.id),
    })
}

/// Body of `POST /api/clusters/{name}/storage`. Omitted: the shared bucket as `s3-claim`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageRequest {
    /// Claim name (default `s3-claim`).
    pub claim_name: Option<String>,
    /// Namespace of the claim (default `default`).
    pub namespace: Option<String>,
    /// `s3` (default) or `fsx`.
    pub kind: Option<String>,
    /// S3: bucket to mount (default: the cluster's shared bucket).
    pub bucket: Option<String>,
    /// S3: the bucket's region (default: the control plane's region).
    pub region: Option<String>,
    /// FSx for Lustre: file system id (`fs-…`).
    pub file_system_id: Option<String>,
    /// FSx for Lustre: DNS name of the file system.
    pub dns_name: Option<String>,
    /// FSx for Lustre: mount name.
    pub mount_name: Option<String>,
    /// FSx for Lustre: storage capacity in GiB (default 1200).
    pub capacity_gib: Option<i64>,
}

fn required<'a>(field: &str, v: &'a Option<String>) -> ApiResult<&'a str> {
    v.as_deref().filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::validation(field, format!("`{field}` is required for an FSx claim"))
    })
}

/// Validates a storage request and refuses a claim name that is already taken.
pub async fn storage_params(
    engine: &Engine,
    name: &str,
    req: &StorageRequest,
) -> ApiResult<StorageParams> {
    let claim_name = req.claim_name.clone().unwrap_or_else(|| "s3-claim".into());
    validate::dns_label("claimName", "claim name", &claim_name)?;
    let namespace = req.namespace.clone().unwrap_or_else(|| "default".into());
    validate::dns_label("namespace", "namespace", &namespace)?;
    let source = match req.kind.as_deref().unwrap_or("s3") {
        "s3" => {
            for f in [
                ("fileSystemId", &req.file_system_id),
                ("dnsName", &req.dns_name),
                ("mountName", &req.mount_name),
            ] {
                if f.1.is_some() {
                    return Err(ApiError::validation(
                        f.0,
                        format!("`{}` applies to FSx claims only", f.0),
                    ));
                }
            }
            if let Some(b) = &req.bucket {
                validate::bucket_name("bucket", b)?;
            }
            if let Some(r) = &req.region {
                validate::region_code("region", r)?;
            }
            VolumeSource::S3 {
                bucket: req.bucket.clone(),
                region: req.region.clone(),
            }
        }
        "fsx" => {
            if req.bucket.is_some() || req.region.is_some() {
                return Err(ApiError::validation(
                    "bucket",
                    "`bucket` and `region` apply to S3 claims only",
                ));
            }
            let id = required("fileSystemId", &req.file_system_id)?;
            validate::fsx_file_system_id("fileSystemId", id)?;
            let dns = required("dnsName", &req.dns_name)?;
            let dns_ok = dns.len() <= 253
                && dns.split('.').count() >= 3
                && dns.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                });
            if !dns_ok {
                return Err(ApiError::validation_hint(
                    "dnsName",
                    format!("`{dns}` is not a DNS name"),
                    json!("e.g. fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"),
                ));
            }
            let mount = required("mountName", &req.mount_name)?;
            if !(1..=8).contains(&mount.len())
                || !mount
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            {
                return Err(ApiError::validation_hint("mountName", format!("`{mount}` is not an FSx for Lustre mount name"), json!("up to 8 lowercase letters and digits, as DescribeFileSystems reports it (LustreConfiguration.MountName)")));
            }
            let capacity = req.capacity_gib.unwrap_or(1200);
            if !(1200..=1_000_000).contains(&capacity) {
                return Err(ApiError::validation_hint(
                    "capacityGib",
                    format!("{capacity} GiB is outside what FSx for Lustre offers"),
                    json!("1200 to 1000000"),
                ));
            }
            VolumeSource::Fsx {
                file_system_id: id.to_string(),
                dns_name: dns.to_string(),
                mount_name: mount.to_string(),
                capacity_gib: capacity as u32,
            }
        }
        other => {
            return Err(ApiError::validation_hint(
                "kind",
                format!("`{other}` is not a storage kind"),
                json!(["s3", "fsx"]),
            ))
        }
    };
    let params = StorageParams {
        claim_name,
        namespace,
        source,
    };
    // A claim name is used once per namespace; the same request again is an idempotent re-apply.
    if let Ok(existing) = list_storage(engine, name).await {
        if existing.iter().any(|c| {
            c.claim_name == params.claim_name
                && c.namespace == params.namespace
                && !same_source(c, &params)
        }) {
            return Err(ApiError::Conflict {
                slug: "claim-exists",
                detail: format!(
                    "claim `{}` already exists in namespace `{}` with a different source; delete it first or choose another name",
                    params.claim_name, params.namespace
                ),
                field: Some("claimName".into()),
                operation_id: None,
            });
        }
    }
    Ok(params)
}

fn same_source(c: &ClaimView, p: &StorageParams) -> bool {
    match &p.source {
        VolumeSource::S3 {
            bucket: Some(b), ..
        } => c.bucket.as_deref() == Some(b),
        VolumeSource::S3 { bucket: None, .. } => c.kind == "s3",
        VolumeSource::Fsx { file_system_id, .. } => {
            c.file_system_id.as_deref() == Some(file_system_id)
        }
    }
}

/// The claims InstantStart made on this cluster.
pub async fn list_storage(engine: &Engine, name: &str) -> ApiResult<Vec<ClaimView>> {
    let target = kube_target(engine, name).await?;
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let pvs = engine
        .cloud()
        .kube
        .list(&target, "v1", "PersistentVolume", None, Some(&selector))
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    let mut claims: Vec<ClaimView> = pvs
        .iter()
        .filter(|pv| {
            pv.pointer(&format!(
                "/metadata/labels/{}",
                CLAIM_LABEL.replace('/', "~1")
            ))
            .is_some()
        })
        .filter_map(claim_view)
        .collect();
    claims.sort_by(|a, b| (&a.namespace, &a.claim_name).cmp(&(&b.namespace, &b.claim_name)));
    Ok(claims)
}

/// Checks that the claim exists (and is ours) before deleting it.
pub async fn storage_delete_params(
    engine: &Engine,
    name: &str,
    claim: &str,
    namespace: Option<&str>,
) -> ApiResult<Value> {
    validate::dns_label("claim", "claim name", claim)?;
    let namespace = namespace.unwrap_or("default");
    validate::dns_label("namespace", "namespace", namespace)?;
    let claims = list_storage(engine, name).await?;
    if !claims
        .iter()
        .any(|c| c.claim_name == claim && c.namespace == namespace)
    {
        return Err(ApiError::NotFound {
            what: format!("claim `{claim}` in namespace `{namespace}` of cluster `{name}`"),
            hint: Some(Box::new(json!(claims
                .iter()
                .map(|c| format!("{}/{}", c.namespace, c.claim_name))
                .collect::<Vec<_>>()))),
        });
    }
    Ok(json!({"claimName": claim, "namespace": namespace}))
}

/// Live node and GPU state, served from the watch-backed cache.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub cluster: String,
    pub ready_nodes: usize,
    pub gpus_total: u32,
    pub gpus_free: u32,
    #[serde(flatten)]
    pub state: ClusterState,
}

pub async fn status(engine: &Engine, name: &str) -> ApiResult<ClusterStatus> {
    let target = kube_target(engine, name).await?;
    let state = engine
        .cloud()
        .kube
        .cluster_state(&target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    Ok(ClusterStatus {
        cluster: name.to_string(),
        ready_nodes: state.nodes.iter().filter(|n| n.ready).count(),
        gpus_total: state.nodes.iter().map(|n| n.gpus.total).sum(),
        gpus_free: state.nodes.iter().map(|n| n.gpus.free).sum(),
        state,
    })
}

/// `GET /api/clusters/{name}/features`: every managed feature's actual state.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturesView {
    pub cluster: String,
    pub features: Vec<super::steps::features::FeatureState>,
    /// Features that may be enabled here (INSTANTSTART_ALLOWED_FEATURES; every one when unset).
    pub allowed: Vec<String>,
}

pub async fn features(engine: &Engine, name: &str, allowed: &[String]) -> ApiResult<FeaturesView> {
    let target = kube_target(engine, name).await?;
    let latest = engine.store().latest_per_kind(name).await?;
    let mut out = Vec::new();
    for f in super::steps::features::FEATURES {
        let mut state = super::steps::features::actual(engine.cloud(), name, &target, f)
            .await
            .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        in_progress(&mut state, latest.iter().find(|o| o.kind == f.kind));
        out.push(state);
    }
    Ok(FeaturesView {
        cluster: name.to_string(),
        features: out,
        allowed: if allowed.is_empty() {
            super::steps::features::FEATURES
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
fn in_progress(
    state: &mut super::steps::features::FeatureState,
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
    pub tiered_checkpointing: Option<bool>,
    /// Share of each instance's memory for checkpoints, 1–100 (default 20); with
    /// `tieredCheckpointing: true`, or alone to change it while enabled.
    pub tiered_checkpointing_memory_percent: Option<u32>,
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
        kind: &'static str,
        params: super::steps::features::FeatureParams,
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
async fn autoscaling_groups(
    engine: &Engine,
    name: &str,
    asked: Option<&[String]>,
) -> ApiResult<Vec<String>> {
    use super::steps::features::MAX_AUTOSCALED_GROUPS;
    const FIELD: &str = "managedAutoscalingInstanceGroups";
    let groups = super::recorded_groups(engine, name).await?;
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
                            format!("`{}` is not an instance group of `{name}`", super::validate::truncate(g)),
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

/// Compares each requested field with the actual state; refuses enabling a feature whose
/// prerequisites are not ready.
pub async fn plan_features(
    engine: &Engine,
    name: &str,
    patch: &FeaturesPatch,
    allowed: &[String],
) -> ApiResult<Vec<(&'static str, FeatureChange)>> {
    use super::steps::features as f;
    let target = kube_target(engine, name).await?;
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
    for (key, enable) in fields {
        let feature =
            f::feature(key).ok_or_else(|| anyhow::anyhow!("feature {key} not in catalogue"))?;
        let actual = f::actual(engine.cloud(), name, &target, feature)
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
        if enable {
            for req in feature.requires {
                let ready = engine
                    .cloud()
                    .eks
                    .describe_addon(name, req)
                    .await
                    .map_err(|e| ApiError::Cloud(Box::new(e)))?
                    .is_some_and(|a| a.status == crate::cloud::AddonStatus::Active);
                if !ready {
                    // An add-on that is itself a feature is enabled as one; the others come with
                    // the dependency stage.
                    let how = match f::FEATURES.iter().find(|other| other.addon == *req) {
                        Some(other) => format!("enable {} first", other.key),
                        None => "run the dependencies stage (dependencies_install)".to_string(),
                    };
                    return Err(ApiError::Conflict {
                        slug: "feature-prerequisite",
                        detail: format!("{key} needs the {req} add-on to be ACTIVE first: {how}"),
                        field: Some(key.to_string()),
                        operation_id: None,
                    });
                }
            }
        }
        plan.push((
            key,
            FeatureChange::Change {
                kind: feature.kind,
                params: f::FeatureParams {
                    enable,
                    memory_percent,
                    instance_groups,
                },
            },
        ));
    }
    Ok(plan)
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
