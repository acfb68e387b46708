//! An upgrade planned before anything is sent: the Kubernetes version one minor up (what EKS
//! allows, and what HyperPod supports), each managed add-on to the newest EKS offers for that
//! version with whether it then needs a role read again for that version (an add-on release that
//! started needing IAM permissions broke installs that trusted the old answer), and HyperPod's
//! software per instance group, a canary group alone first when asked. The plan is the upgrade
//! operation's parameters; a preview shows it whole.

use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::cloud::{EksStatus, SoftwareUpdate, HYPERPOD_KUBERNETES_VERSIONS};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::groups::software::{self, SoftwareUpdateRequest};
use crate::service::steps::deps::{Install, COMPONENTS};
use crate::service::steps::upgrade::{AddonUpgrade, RunningJobs, UpgradeParams};

/// `POST /api/clusters/{name}/upgrade`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpgradeRequest {
    /// The version to go to: the next minor of the cluster's (EKS upgrades one at a time).
    #[schema(pattern = r"^1\.[0-9]{2}$")]
    pub kubernetes_version: String,
    /// Move each managed add-on to the newest EKS offers for the new version (default true).
    pub addons: Option<bool>,
    /// Then roll HyperPod's software onto the nodes, planned as the software update takes it.
    pub software: Option<SoftwareUpdateRequest>,
    /// An instance group updated alone first (needs `software`); the others follow once it is
    /// back in service.
    pub canary_group: Option<String>,
    /// The training jobs on the nodes the software patches: `restart` (default: HyperPod resumes
    /// them from their last checkpoint; refused for a job with no restart left), `wait` for
    /// them to end first, or `cancel` them first.
    pub running_jobs: Option<RunningJobs>,
}

/// The upgrade's plan, or the first thing that would stop it.
pub async fn plan(engine: &Engine, name: &str, req: &UpgradeRequest) -> ApiResult<UpgradeParams> {
    let record = super::records::live_cluster(engine, name).await?;
    let eks = &engine.cloud().eks;
    let cluster = eks
        .describe_cluster(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("EKS cluster of `{name}`")))?;
    if cluster.status != EksStatus::Active {
        return Err(ApiError::Conflict {
            slug: ProblemType::StageNotReady,
            detail: format!(
                "the EKS cluster of `{name}` is {:?}: EKS upgrades an ACTIVE cluster only",
                cluster.status
            ),
            field: None,
            operation_id: None,
        });
    }
    let next = super::versions::next_minor(&cluster.version);
    let to = req.kubernetes_version.trim();
    if next.as_deref() != Some(to) {
        return Err(ApiError::validation_hint(
            "kubernetesVersion",
            format!(
                "`{name}` runs {}: EKS upgrades one minor version at a time",
                cluster.version
            ),
            json!(next.into_iter().collect::<Vec<_>>()),
        ));
    }
    let has_hyperpod = crate::service::ClusterResources::of(&record.resources)
        .hyperpod_cluster_arn
        .is_some();
    if has_hyperpod && !HYPERPOD_KUBERNETES_VERSIONS.contains(&to) {
        return Err(ApiError::validation_hint(
            "kubernetesVersion",
            format!("HyperPod does not orchestrate clusters of Kubernetes {to}"),
            json!(HYPERPOD_KUBERNETES_VERSIONS),
        ));
    }
    let addons = if req.addons.unwrap_or(true) {
        addon_plan(engine, name, to).await?
    } else {
        Vec::new()
    };
    let (canary, software) = software_plan(engine, name, req, has_hyperpod).await?;
    let running_jobs = req.running_jobs.unwrap_or_default();
    let patched: Vec<String> = canary
        .iter()
        .chain(&software)
        .flat_map(|u| u.instance_groups.clone())
        .collect();
    let jobs = match canary.is_some() || software.is_some() {
        true => crate::service::groups::affected::training_jobs_on(engine, name, &patched).await?,
        false => Vec::new(),
    };
    if running_jobs == RunningJobs::Restart {
        if let Some(spent) = jobs.iter().find(|j| j.restarts_left == Some(0)) {
            return Err(ApiError::Conflict {
                slug: ProblemType::Conflict,
                detail: format!(
                    "training job {} ({}) has no restart left: patching its node would fail it. Send runningJobs `wait` (the software waits for it to end) or `cancel` (it is stopped first)",
                    spent.name, spent.namespace
                ),
                field: Some("runningJobs".into()),
                operation_id: None,
            });
        }
    }
    Ok(UpgradeParams {
        from: cluster.version,
        to: to.to_string(),
        addons,
        canary,
        software,
        running_jobs,
        jobs,
    })
}

/// Each managed add-on installed whose newest version for `to` differs from what runs, in the
/// dependencies' order (what others need goes first), the features' after.
async fn addon_plan(engine: &Engine, name: &str, to: &str) -> ApiResult<Vec<AddonUpgrade>> {
    let eks = &engine.cloud().eks;
    let mut plan = Vec::new();
    for addon in super::versions::managed_addons() {
        let Some(installed) = eks.describe_addon(name, addon).await? else {
            continue;
        };
        let Some(newest) = eks.addon_versions(addon, to).await?.into_iter().next() else {
            return Err(ApiError::Conflict {
                slug: ProblemType::Conflict,
                detail: format!(
                    "EKS offers {addon} nothing for Kubernetes {to}: the upgrade would leave it running a version not made for it"
                ),
                field: Some("kubernetesVersion".into()),
                operation_id: None,
            });
        };
        // A dependency is installed without a role: a version that needs one would not work.
        let dependency_without_role = COMPONENTS.iter().any(|c| {
            c.name == addon
                && matches!(
                    c.install,
                    Install::Addon {
                        s3_csi_role: false,
                        ..
                    }
                )
        });
        if newest.requires_iam_permissions && dependency_without_role {
            return Err(ApiError::Conflict {
                slug: ProblemType::Conflict,
                detail: format!(
                    "{addon} {} needs IAM permissions (requiresIamPermissions) and this control plane gives it no role: upgrading it would break it",
                    newest.version
                ),
                field: Some("addons".into()),
                operation_id: None,
            });
        }
        if installed.version.as_deref() == Some(newest.version.as_str()) {
            continue;
        }
        plan.push(AddonUpgrade {
            name: addon.to_string(),
            from: installed.version,
            to: newest.version,
            configuration_values: installed.configuration_values,
            requires_iam_permissions: newest.requires_iam_permissions,
        });
    }
    Ok(plan)
}

/// The canary group's update and the others', both from the one software request.
async fn software_plan(
    engine: &Engine,
    name: &str,
    req: &UpgradeRequest,
    has_hyperpod: bool,
) -> ApiResult<(Option<SoftwareUpdate>, Option<SoftwareUpdate>)> {
    let Some(asked) = &req.software else {
        if req.canary_group.is_some() {
            return Err(ApiError::validation(
                "canaryGroup",
                "a canary group is the first of a software update: send `software` too",
            ));
        }
        return Ok((None, None));
    };
    if !has_hyperpod {
        return Err(ApiError::validation(
            "software",
            format!("`{name}` has no HyperPod cluster to update"),
        ));
    }
    let all = software::plan(engine, name, asked)
        .await
        .map_err(|e| e.nested("software"))?;
    let Some(canary) = &req.canary_group else {
        return Ok((None, Some(all)));
    };
    let groups: Vec<String> = if all.instance_groups.is_empty() {
        crate::service::list_groups(engine, name)
            .await?
            .into_iter()
            .map(|g| g.name)
            .collect()
    } else {
        all.instance_groups.clone()
    };
    if !groups.contains(canary) {
        return Err(ApiError::validation_hint(
            "canaryGroup",
            format!("`{canary}` is not one of the groups the update covers"),
            json!(groups),
        ));
    }
    let rest: Vec<String> = groups.into_iter().filter(|g| g != canary).collect();
    let first = SoftwareUpdate {
        instance_groups: vec![canary.clone()],
        ..all.clone()
    };
    let then = (!rest.is_empty()).then_some(SoftwareUpdate {
        instance_groups: rest,
        ..all
    });
    Ok((Some(first), then))
}
