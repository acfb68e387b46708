//! Operations on instance groups after creation: add a group (compute subnet in its zone, then
//! UpdateCluster resending every group), and scale one. Capacity type and network placement are
//! fixed for a group's life.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::hyperpod::{deep_health_checks, hyperpod_of, threads_per_core};
use super::HyperPodParams;
use crate::cloud::{HyperPodStatus, InstanceGroupSpec, InstanceGroupStatus};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::shared::resources::Recorded;

/// Every group HyperPod has now, each with a full spec: the recorded one for a group this
/// control plane made or last changed, the described one for any other (an imported
/// cluster's, or one added outside). A recorded group HyperPod no longer has is left out, so
/// an UpdateCluster never brings back a group deleted elsewhere.
pub fn live_specs(
    recorded: &[InstanceGroupSpec],
    described: &[InstanceGroupStatus],
) -> Vec<InstanceGroupSpec> {
    described
        .iter()
        .filter_map(|d| {
            recorded
                .iter()
                .find(|r| r.name == d.name)
                .cloned()
                .or_else(|| d.spec.clone())
        })
        .collect()
}

/// This operation's cluster's groups, read live (see [`live_specs`]).
pub async fn live_groups(cx: &StepCx<'_>) -> StepResult<Vec<InstanceGroupSpec>> {
    let described = super::hyperpod::described(cx).await?;
    let recorded = cx.recorded().instance_groups.unwrap_or_default();
    Ok(live_specs(&recorded, &described.instance_groups))
}

/// The compute subnet of the new group's zone (not recorded as the cluster's subnet: each group
/// keeps its own in its spec).
pub struct GroupSubnetStep;

#[async_trait]
impl Step for GroupSubnetStep {
    fn calls(&self) -> &'static [&'static str] {
        &["ec2:CreateSubnet", "ec2:AssociateRouteTable"]
    }
    fn name(&self) -> &'static str {
        "compute-subnet"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let subnet = super::hyperpod::zone_compute_subnet(cx).await?;
        Ok(json!({"subnetId": subnet.id}))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// Target of an UpdateCluster: the full list of groups to send.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleParams {
    pub group: String,
    pub instance_count: u32,
    /// Turn on-start deep health checks on or off for the group's new nodes.
    #[serde(default)]
    pub deep_health_checks: Option<bool>,
    /// A new on-create lifecycle script (a file under the group's lifecycle prefix).
    #[serde(default)]
    pub lifecycle_on_create: Option<String>,
    /// A new software update schedule (`ScheduledUpdateConfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_update: Option<crate::cloud::ScheduledUpdate>,
}

/// The groups UpdateCluster must resend: the changed group as wanted, every other group at the
/// count HyperPod targets right now. For a group Karpenter governs that count is Karpenter's
/// (it moves with demand, from zero up): a count recorded earlier must not overwrite it.
pub fn with_current_counts(
    mut groups: Vec<InstanceGroupSpec>,
    changed: &str,
    described: &[InstanceGroupStatus],
) -> Vec<InstanceGroupSpec> {
    for g in groups.iter_mut().filter(|g| g.name != changed) {
        if let Some(now) = described.iter().find(|d| d.name == g.name) {
            g.instance_count = now.target_count;
        }
    }
    groups
}

/// Sends UpdateCluster with every group (the changed one included) and watches the group
/// converge to its target count.
pub struct UpdateGroupsStep {
    pub adding: bool,
}

impl UpdateGroupsStep {
    async fn desired(&self, cx: &StepCx<'_>) -> StepResult<(Vec<InstanceGroupSpec>, String, u32)> {
        let mut groups = live_groups(cx).await?;
        if self.adding {
            let p: HyperPodParams = cx.param()?;
            let subnet = cx
                .op
                .phases
                .first()
                .and_then(|ph| ph.outputs.as_ref())
                .and_then(|o| o["subnetId"].as_str())
                .ok_or_else(|| {
                    StepError::fatal("missing-prerequisite", "no compute subnet recorded")
                })?
                .to_string();
            let template = groups
                .first()
                .cloned()
                .ok_or_else(|| StepError::fatal("missing-prerequisite", "no existing group"))?;
            groups.push(InstanceGroupSpec {
                name: p.instance_group_name.clone(),
                instance_type: p.instance_type.clone(),
                instance_count: p.instance_count,
                threads_per_core: threads_per_core(&p.instance_type, &p.capacity),
                ebs_volume_gb: p.volume_size_gb,
                deep_health_checks: deep_health_checks(p.deep_health_checks),
                capacity: p.capacity.clone(),
                subnet_ids: vec![subnet],
                network_interface: p.network_interface.clone(),
                scheduled_update: None,
                ..template
            });
            Ok((groups, p.instance_group_name, p.instance_count))
        } else {
            let p: ScaleParams = cx.param()?;
            let g = groups
                .iter_mut()
                .find(|g| g.name == p.group)
                .ok_or_else(|| {
                    StepError::fatal("group-missing", format!("no instance group {}", p.group))
                })?;
            g.instance_count = p.instance_count;
            if let Some(on) = p.deep_health_checks {
                g.deep_health_checks = deep_health_checks(on);
            }
            if let Some(script) = &p.lifecycle_on_create {
                g.lifecycle_on_create = script.clone();
            }
            if let Some(schedule) = &p.scheduled_update {
                g.scheduled_update = Some(schedule.clone());
            }
            Ok((groups, p.group, p.instance_count))
        }
    }
}

#[async_trait]
impl Step for UpdateGroupsStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:UpdateCluster"]
    }
    fn name(&self) -> &'static str {
        "update-cluster"
    }
    /// Longer than the default: new HyperPod instances are provisioned and health-checked.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60 * 60)
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        // A settings change cannot be read back from DescribeCluster: send it again (UpdateCluster
        // is declarative, so a repeat changes nothing).
        if !self.adding {
            let p: ScaleParams = cx.param()?;
            if p.deep_health_checks.is_some()
                || p.lifecycle_on_create.is_some()
                || p.scheduled_update.is_some()
            {
                return Ok(None);
            }
        }
        // Already applied when the cluster reports the group at its target.
        let (groups, name, target) = self.desired(cx).await?;
        let cluster = cx.cloud.hyperpod.describe_cluster(&hyperpod_of(cx)).await?;
        let applied = cluster.is_some_and(|c| {
            c.instance_groups
                .iter()
                .any(|g| g.name == name && g.target_count == target)
        });
        Ok(applied.then(|| json!({"instanceGroups": groups})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let (groups, name, _) = self.desired(cx).await?;
        let described = super::hyperpod::described(cx).await?;
        let groups = with_current_counts(groups, &name, &described.instance_groups);
        let continuous = crate::cloud::continuous_provisioning(&groups);
        cx.cloud
            .hyperpod
            .update_cluster(&hyperpod_of(cx), &groups, continuous)
            .await?;
        Ok(json!({"instanceGroups": groups}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let (_, name, target) = self.desired(cx).await?;
        let c = super::hyperpod::described(cx).await?;
        if matches!(
            c.status,
            HyperPodStatus::Failed | HyperPodStatus::RollingBack
        ) {
            return Err(StepError::fatal(
                "update-failed",
                format!(
                    "HyperPod cluster is {:?}: {}",
                    c.status,
                    c.failure_message.unwrap_or_default()
                ),
            ));
        }
        match c.instance_groups.iter().find(|g| g.name == name) {
            Some(g)
                if g.current_count == target
                    && g.target_count == target
                    && c.status == HyperPodStatus::InService =>
            {
                Ok(Poll::Ready(out.clone()))
            }
            Some(g) => Ok(Poll::Pending(format!(
                "{name}: {}/{target} nodes",
                g.current_count
            ))),
            None => Ok(Poll::Pending(format!("{name}: not listed yet"))),
        }
    }
}

/// Removes one group and watches it disappear; the recorded specs lose it too.
pub struct DeleteGroupStep;

impl DeleteGroupStep {
    fn group(cx: &StepCx<'_>) -> StepResult<String> {
        cx.op.params["group"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| StepError::fatal("bad-params", "no group named"))
    }

    async fn remaining(cx: &StepCx<'_>, group: &str) -> StepResult<Value> {
        let left: Vec<InstanceGroupSpec> = live_groups(cx)
            .await?
            .into_iter()
            .filter(|g| g.name != group)
            .collect();
        Ok(json!({"instanceGroups": left}))
    }
}

#[async_trait]
impl Step for DeleteGroupStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:UpdateCluster"]
    }
    fn name(&self) -> &'static str {
        "delete-group"
    }
    /// Longer than the default: HyperPod drains and terminates the group's instances.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60 * 60)
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let group = Self::group(cx)?;
        let c = cx.cloud.hyperpod.describe_cluster(&hyperpod_of(cx)).await?;
        let gone = c.is_some_and(|c| !c.instance_groups.iter().any(|g| g.name == group));
        if gone {
            return Ok(Some(Self::remaining(cx, &group).await?));
        }
        Ok(None)
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let group = Self::group(cx)?;
        cx.cloud
            .hyperpod
            .delete_instance_groups(&hyperpod_of(cx), std::slice::from_ref(&group))
            .await?;
        Self::remaining(cx, &group).await
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let group = Self::group(cx)?;
        let c = super::hyperpod::described(cx).await?;
        match c.instance_groups.iter().find(|g| g.name == group) {
            None => Ok(Poll::Ready(out.clone())),
            Some(g) => Ok(Poll::Pending(format!(
                "{group}: {} nodes left",
                g.current_count
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::Capacity;

    fn spec(name: &str, count: u32) -> InstanceGroupSpec {
        InstanceGroupSpec {
            name: name.into(),
            instance_type: "ml.g5.8xlarge".into(),
            instance_count: count,
            execution_role_arn: "arn:aws:iam::1:role/x".into(),
            lifecycle_source_s3_uri: "s3://b/l/".into(),
            lifecycle_on_create: "on_create.sh".into(),
            threads_per_core: 1,
            ebs_volume_gb: 500,
            deep_health_checks: vec![],
            capacity: Capacity::OnDemand,
            subnet_ids: vec!["subnet-1".into()],
            security_group_ids: vec!["sg-1".into()],
            network_interface: None,
            scheduled_update: None,
        }
    }

    #[test]
    fn live_groups_are_what_hyperpod_has_with_recorded_specs_first() {
        let status = |name: &str, spec: Option<InstanceGroupSpec>| InstanceGroupStatus {
            name: name.into(),
            instance_type: "ml.g5.8xlarge".into(),
            target_count: 1,
            current_count: 1,
            spec,
            software: Default::default(),
        };
        let mut theirs = spec("theirs", 1);
        theirs.lifecycle_on_create = "their_on_create.sh".into();
        let mut ours_described = spec("ours", 2);
        ours_described.subnet_ids.clear();
        let recorded = vec![spec("ours", 2), spec("deleted-elsewhere", 1)];
        let described = vec![
            status("ours", Some(ours_described)),
            status("theirs", Some(theirs.clone())),
            status("counts-only", None),
        ];
        let live = live_specs(&recorded, &described);
        let names: Vec<&str> = live.iter().map(|g| g.name.as_str()).collect();
        // A group deleted outside is not resent; one described without its settings cannot be.
        assert_eq!(names, ["ours", "theirs"]);
        assert_eq!(live[0].subnet_ids, ["subnet-1"], "the recorded spec wins");
        assert_eq!(live[1].lifecycle_on_create, "their_on_create.sh");
    }

    #[test]
    fn other_groups_are_resent_at_the_count_hyperpod_targets_now() {
        // `burst` is governed by Karpenter, which scaled it from 0 to 3 since we recorded it.
        let recorded = vec![spec("workers", 2), spec("burst", 0)];
        let described = vec![
            InstanceGroupStatus {
                name: "workers".into(),
                instance_type: "ml.g5.8xlarge".into(),
                target_count: 2,
                current_count: 2,
                spec: None,
                software: Default::default(),
            },
            InstanceGroupStatus {
                name: "burst".into(),
                instance_type: "ml.g5.8xlarge".into(),
                target_count: 3,
                current_count: 1,
                spec: None,
                software: Default::default(),
            },
        ];
        let mut wanted = recorded.clone();
        wanted[0].instance_count = 4;
        let sent = with_current_counts(wanted, "workers", &described);
        assert_eq!(sent[0].instance_count, 4, "the changed group as asked");
        assert_eq!(
            sent[1].instance_count, 3,
            "Karpenter's count, not the recorded 0"
        );
    }
}
