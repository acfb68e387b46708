//! The observability feature: the HyperPod observability add-on writing to the cluster's Amazon
//! Managed Service for Prometheus workspace — the workspace found (by its alias) or made first,
//! the add-on's configuration naming it, and the collector's role allowed to write to it alone.
//!
//! The add-on's configuration keys (`ampWorkspace` with `prometheusEndpoint` and `arn`,
//! `metricsProvider` levels per category) follow AWS's setup of the EKS add-on; the collector's
//! permissions are the ones AWS's troubleshooting guide lists for it (remote write to the
//! workspace, CloudWatch Logs under `/aws/sagemaker/Clusters/`), scoped to this workspace.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{AddonInputs, FeatureParams, PolicyInputs};
use crate::cloud::AmpWorkspace;
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};
use crate::service::arn::arn_scope;
use crate::service::kind::{FeatureId, OpKind};

/// The add-on.
pub const ADDON: &str = "amazon-sagemaker-hyperpod-observability";
/// The collector's service account, which the add-on's pod identity binds.
pub const COLLECTOR: (&str, &str) = (
    "hyperpod-observability",
    "hyperpod-observability-operator-otel-collector",
);

/// The alias of a cluster's workspace.
pub fn workspace_alias(cluster: &str) -> String {
    format!("instantstart-{cluster}")
}

/// The cluster's workspace when the operation is the observability feature's (`None` for every
/// other feature, and before the workspace exists).
pub(super) async fn workspace_of(cx: &StepCx<'_>) -> StepResult<Option<AmpWorkspace>> {
    if !matches!(
        cx.op.kind.parse(),
        Ok(OpKind::Feature(FeatureId::Observability))
    ) {
        return Ok(None);
    }
    Ok(cx
        .cloud
        .metrics
        .find_workspace(&workspace_alias(&cx.op.cluster))
        .await?)
}

/// The add-on's configuration: the workspace it writes to, and what it collects — the
/// accelerators' and nodes' metrics in detail, training and task-governance metrics, logs.
pub fn configuration(i: &AddonInputs) -> Value {
    let mut config = json!({
        "metricsProvider": {
            "clusterMetrics": {"level": "ADVANCED"},
            "nodeMetrics": {"level": "ADVANCED"},
            "acceleratedComputeMetrics": {"level": "ADVANCED"},
            "networkMetrics": {"level": "BASIC"},
            "taskGovernanceMetrics": {"level": "ADVANCED"},
            "trainingMetrics": {"level": "ADVANCED"},
            "logging": {"enabled": true},
        }
    });
    if let Some(w) = &i.workspace {
        config["ampWorkspace"] = json!({
            "prometheusEndpoint": w.prometheus_endpoint,
            "arn": w.arn,
        });
    }
    config
}

/// The collector's role: remote write to the cluster's workspace only (none without one), and
/// its logs under the clusters' log groups.
pub fn collector_policy(i: &PolicyInputs<'_>) -> Value {
    let (partition, region, account) = arn_scope(i.cluster_arn);
    let mut statements = vec![json!({"Sid": "CloudwatchLogsAccess", "Effect": "Allow",
        // AWS's list also names logs:DescribeLogGroups, which only "*" grants: left out.
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                   "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents"],
        "Resource": [
            format!("arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*"),
            format!("arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*:log-stream:*")]})];
    if let Some(ws) = i.workspace_arn {
        statements.insert(
            0,
            json!({"Sid": "PrometheusAccess", "Effect": "Allow", "Action": "aps:RemoteWrite",
                   "Resource": ws}),
        );
    }
    json!({"Version": "2012-10-17", "Statement": statements})
}

/// The `amp-workspace` phase: finds the cluster's workspace by its alias or makes it (tagged as
/// the cluster's), watched to `ACTIVE`. Turning the feature off keeps it: its metrics stay
/// readable, and deleting one is a decision for its owner.
pub struct WorkspaceStep;

#[async_trait]
impl Reconcile for WorkspaceStep {
    fn phase(&self) -> &'static str {
        "amp-workspace"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        let alias = workspace_alias(&cx.op.cluster);
        let metrics = &cx.cloud.metrics;
        let found = metrics.find_workspace(&alias).await?;
        if !p.enable {
            return Ok(json!({"kept": found.map(|w| w.arn), "changed": false}));
        }
        let (w, changed) = match found {
            Some(w) => (w, false),
            None => (
                metrics
                    .create_workspace(&alias, &crate::service::steps::net_tags(cx, "metrics"))
                    .await?,
                true,
            ),
        };
        Ok(json!({"ampWorkspaceArn": w.arn, "ampWorkspaceId": w.id, "changed": changed}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: FeatureParams = cx.param()?;
        if !p.enable {
            return Ok(Poll::Ready(out.clone()));
        }
        let alias = workspace_alias(&cx.op.cluster);
        match cx.cloud.metrics.find_workspace(&alias).await? {
            Some(w) if w.status == "ACTIVE" => {
                let mut out = out.clone();
                out["prometheusEndpoint"] = json!(w.prometheus_endpoint);
                Ok(Poll::Ready(out))
            }
            Some(w) if w.status == "CREATING" || w.status == "UPDATING" => Ok(Poll::Pending(
                format!("workspace {} {}", w.id, w.status.to_lowercase()),
            )),
            Some(w) => Err(StepError::fatal(
                "workspace-failed",
                format!("the workspace {} is {}", w.id, w.status),
            )),
            None => Err(StepError::fatal(
                "workspace-missing",
                format!("the workspace {alias} disappeared while it was being made"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::bucket::BucketPlace;

    const HYPERPOD: &str = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc";
    const WS: &str = "arn:aws:aps:us-west-2:123456789012:workspace/ws-1";

    #[test]
    fn the_collector_writes_to_its_workspace_only() {
        let place = BucketPlace::whole("b");
        let p = collector_policy(&PolicyInputs {
            place: &place,
            cluster_arn: HYPERPOD,
            workspace_arn: Some(WS),
        });
        assert_eq!(p["Statement"][0]["Action"], "aps:RemoteWrite");
        assert_eq!(p["Statement"][0]["Resource"], WS);
        let none = collector_policy(&PolicyInputs {
            place: &place,
            cluster_arn: HYPERPOD,
            workspace_arn: None,
        });
        assert!(!none.to_string().contains("aps:"), "no workspace, no write");
    }

    #[test]
    fn the_configuration_names_the_workspace_and_the_metrics_levels() {
        let inputs = AddonInputs {
            roles: Default::default(),
            place: BucketPlace::whole("b"),
            hyperpod_cluster_arn: HYPERPOD.into(),
            workspace: Some(AmpWorkspace {
                id: "ws-1".into(),
                arn: WS.into(),
                alias: None,
                status: "ACTIVE".into(),
                prometheus_endpoint: Some(
                    "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/".into(),
                ),
            }),
        };
        let c = configuration(&inputs);
        assert_eq!(c["ampWorkspace"]["arn"], WS);
        assert!(c["ampWorkspace"]["prometheusEndpoint"]
            .as_str()
            .unwrap()
            .ends_with("/workspaces/ws-1/"));
        assert_eq!(
            c["metricsProvider"]["acceleratedComputeMetrics"]["level"],
            "ADVANCED"
        );
    }
}
