//! The phases of a cluster upgrade, in EKS's order ("Update existing cluster to new Kubernetes
//! version", EKS User Guide): the control plane one minor version up (`UpdateClusterVersion`,
//! with the operation's own `clientRequestToken`), then each managed add-on to the version
//! planned for it (`UpdateAddon`, its configuration kept; one that fails goes back to the
//! version and configuration it had), then HyperPod's software per instance group — a canary
//! group first when asked — through the software update's own phase.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cloud::{AddonStatus, CreateAddon, EksStatus, SoftwareUpdate};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};

/// An upgrade's parameters: its plan, as the submission checked and recorded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeParams {
    /// The Kubernetes version the control plane runs at submission.
    pub from: String,
    /// The next minor version, where it goes.
    pub to: String,
    pub addons: Vec<AddonUpgrade>,
    /// The canary group's software update, run alone first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<SoftwareUpdate>,
    /// The software update of the groups (the others, after a canary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software: Option<SoftwareUpdate>,
    /// What becomes of the training jobs on the nodes the software patches.
    #[serde(default)]
    pub running_jobs: RunningJobs,
    /// Those jobs, as the plan found them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::service::groups::affected::JobOnNodes>,
}

/// The training jobs on nodes about to be patched: let HyperPod restart them from their last
/// checkpoint (refused for a job with no restart left), wait for them to finish, or stop them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunningJobs {
    #[default]
    Restart,
    Wait,
    Cancel,
}

/// Before the software: waits for the jobs on the nodes to end, or stops them.
pub struct RunningJobsStep;

#[async_trait]
impl Step for RunningJobsStep {
    fn name(&self) -> &'static str {
        "running-jobs"
    }
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Delete"]
    }
    fn records_resources(&self) -> bool {
        false
    }
    /// A job may run for days: waiting for one is bounded by a week.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(7 * 24 * 3600)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p = params(cx)?;
        if p.running_jobs == RunningJobs::Cancel {
            let target = super::addons::kube_target(cx)?;
            for job in &p.jobs {
                cx.cloud.kube.delete(&target, &job.object).await?;
            }
        }
        Ok(json!({"jobs": p.jobs.len()}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p = params(cx)?;
        let target = super::addons::kube_target(cx)?;
        for job in &p.jobs {
            let Some(obj) = cx.cloud.kube.get(&target, &job.object).await? else {
                continue;
            };
            use super::training::{training_state, TrainingState};
            let over = matches!(
                training_state(&obj),
                TrainingState::Succeeded | TrainingState::Failed(_)
            );
            if !over {
                let how = match p.running_jobs {
                    RunningJobs::Cancel => "being stopped",
                    _ => "still running",
                };
                return Ok(Poll::Pending(format!("training job {} {how}", job.name)));
            }
        }
        Ok(Poll::Ready(out.clone()))
    }
}

/// One add-on moved to a newer version.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonUpgrade {
    pub name: String,
    /// As installed at submission: what a failed update returns to.
    pub from: Option<String>,
    /// The newest EKS offers for the new Kubernetes version.
    pub to: String,
    /// Its configuration values at submission, restored with `from` when the update fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_values: Option<String>,
    /// Whether `to` needs a role (`requiresIamPermissions`, read for that version).
    pub requires_iam_permissions: bool,
}

fn params(cx: &StepCx<'_>) -> StepResult<UpgradeParams> {
    cx.param()
}

/// The EKS control plane one minor version up.
pub struct KubernetesVersionStep;

#[async_trait]
impl Step for KubernetesVersionStep {
    fn name(&self) -> &'static str {
        "kubernetes-version"
    }
    fn calls(&self) -> &'static [&'static str] {
        &["eks:UpdateClusterVersion"]
    }
    /// EKS takes about ten minutes per minor version; the margin covers a slow one.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60 * 60)
    }
    /// Already there, or already on its way (this operation's update, resumed): watched.
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let p = params(cx)?;
        Ok(match cx.cloud.eks.describe_cluster(&cx.op.cluster).await? {
            Some(c) if c.version == p.to || c.status == EksStatus::Updating => {
                Some(json!({"resumed": true}))
            }
            _ => None,
        })
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p = params(cx)?;
        // The operation's id makes the token: a repeat of this phase is the same update.
        let token = format!("{}-{}", cx.op.id, p.to);
        let id = cx
            .cloud
            .eks
            .update_cluster_version(&cx.op.cluster, &p.to, &token)
            .await?;
        Ok(json!({"updateId": id}))
    }
    async fn poll(&self, cx: &StepCx<'_>, _out: &Value) -> StepResult<Poll> {
        let p = params(cx)?;
        match cx.cloud.eks.describe_cluster(&cx.op.cluster).await? {
            Some(c) if c.status == EksStatus::Active && c.version == p.to => {
                Ok(Poll::Ready(json!({"kubernetesVersion": p.to})))
            }
            Some(c) if c.status == EksStatus::Failed => Err(StepError::fatal(
                "upgrade-failed",
                format!("the EKS control plane failed updating to {}", p.to),
            )),
            Some(c) => Ok(Poll::Pending(format!(
                "control plane {} → {}: {:?}",
                c.version, p.to, c.status
            ))),
            None => Err(StepError::fatal(
                "cluster-missing",
                format!("EKS cluster {} not found", cx.op.cluster),
            )),
        }
    }
}

/// Each planned add-on to its new version, one at a time in the plan's order.
pub struct AddonsStep;

#[async_trait]
impl Step for AddonsStep {
    fn name(&self) -> &'static str {
        "addons"
    }
    fn calls(&self) -> &'static [&'static str] {
        &["eks:UpdateAddon"]
    }
    fn records_resources(&self) -> bool {
        false
    }
    /// Nothing to adopt: the poll moves each add-on that is not yet at its version.
    async fn find(&self, _cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(Some(json!({})))
    }
    async fn act(&self, _cx: &StepCx<'_>) -> StepResult<Value> {
        Ok(json!({}))
    }
    async fn poll(&self, cx: &StepCx<'_>, _out: &Value) -> StepResult<Poll> {
        let p = params(cx)?;
        let eks = &cx.cloud.eks;
        let mut done = Vec::new();
        for a in &p.addons {
            let Some(now) = eks.describe_addon(&cx.op.cluster, &a.name).await? else {
                return Err(StepError::fatal(
                    "addon-missing",
                    format!("add-on {} is gone", a.name),
                ));
            };
            let at = now.version.as_deref() == Some(a.to.as_str());
            match now.status {
                AddonStatus::Active if at => done.push(json!({"name": a.name, "version": a.to})),
                AddonStatus::Updating | AddonStatus::Creating => {
                    return Ok(Poll::Pending(format!("{}: updating to {}", a.name, a.to)))
                }
                AddonStatus::UpdateFailed | AddonStatus::Degraded if at => {
                    // Back to what ran before, with the configuration it had.
                    eks.update_addon(&request(cx, a, a.from.clone(), true))
                        .await?;
                    return Err(StepError::fatal(
                        "addon-update-failed",
                        format!(
                            "{} failed to update to {} ({}): it is going back to {}",
                            a.name,
                            a.to,
                            now.health.as_deref().unwrap_or("no health issue reported"),
                            a.from.as_deref().unwrap_or("its previous version")
                        ),
                    ));
                }
                _ => {
                    eks.update_addon(&request(cx, a, Some(a.to.clone()), false))
                        .await?;
                    return Ok(Poll::Pending(format!("{}: updating to {}", a.name, a.to)));
                }
            }
        }
        Ok(Poll::Ready(json!({"addons": done})))
    }
}

/// An `UpdateAddon` that changes the version only (the role and the pod identities stay as
/// they are); going back also restores the configuration recorded before.
fn request(cx: &StepCx<'_>, a: &AddonUpgrade, version: Option<String>, back: bool) -> CreateAddon {
    CreateAddon {
        cluster: cx.op.cluster.clone(),
        name: a.name.clone(),
        version,
        service_account_role_arn: None,
        configuration_values: back.then(|| a.configuration_values.clone()).flatten(),
        resolve_conflicts: "PRESERVE".into(),
        pod_identity_associations: Vec::new(),
    }
}
