//! The observability feature: the HyperPod observability add-on writing to the cluster's Amazon
//! Managed Service for Prometheus workspace — the workspace found (by its alias) or made first,
//! the add-on's configuration naming it, and the collector's role allowed to write to it alone.
//!
//! The add-on's configuration keys (`ampWorkspace` with `prometheusEndpoint` and `arn`,
//! `amgWorkspace` with `workspaceName` and `arn`, `metricsProvider` levels per category) are
//! those of AWS's own set-up (tests/fixtures/aws holds its lines, and a test holds this file to
//! them); the collector's
//! permissions are the ones AWS's troubleshooting guide lists for it (remote write to the
//! workspace, CloudWatch Logs under `/aws/sagemaker/Clusters/`), scoped to this workspace.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{AddonInputs, FeatureParams, PolicyInputs};
use crate::cloud::{AmpWorkspace, GrafanaWorkspace};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};
use crate::service::features::dashboards;
use crate::service::shared::arn::arn_scope;
use crate::service::shared::kind::{FeatureId, OpKind};

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

/// What the add-on collects, per category of AWS's set-up (`observability-template.yaml`): its
/// default levels, except training and task-governance metrics in detail (each rank's series
/// for stragglers; the teams' queues); every category scraped every 30 s, logs on.
const LEVELS: &[(&str, &str)] = &[
    ("trainingMetrics", "ADVANCED"),
    ("inferenceMetrics", "BASIC"),
    ("taskGovernanceMetrics", "ADVANCED"),
    ("scalingMetrics", "DISABLED"),
    ("clusterMetrics", "BASIC"),
    ("nodeMetrics", "BASIC"),
    ("acceleratedComputeMetrics", "BASIC"),
    ("networkMetrics", "DISABLED"),
    ("rayMetrics", "ADVANCED"),
];

/// The add-on's configuration: the workspace it writes to, the Grafana workspace for its
/// dashboards (when the server names one), and what it collects.
pub fn configuration(i: &AddonInputs) -> Value {
    let mut provider = serde_json::Map::new();
    for (category, level) in LEVELS {
        provider.insert(
            (*category).into(),
            json!({"level": level, "scrapeInterval": 30}),
        );
    }
    provider.insert("logging".into(), json!({"enabled": true}));
    let mut config = json!({ "metricsProvider": provider });
    if let Some(w) = &i.workspace {
        // As AWS's template builds it (`…/workspaces/<id>`, no trailing slash: the collector
        // appends `/api/v1/remote_write`), not as DescribeWorkspace answers it (`…/<id>/`).
        config["ampWorkspace"] = json!({
            "prometheusEndpoint": w.prometheus_endpoint.as_deref().map(|e| e.trim_end_matches('/')),
            "arn": w.arn,
        });
    }
    if let Some(g) = &i.amg_workspace {
        config["amgWorkspace"] = g.clone();
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

/// The Grafana workspace the operation names (the server's, when it was started), described.
async fn grafana_named(cx: &StepCx<'_>) -> StepResult<Option<GrafanaWorkspace>> {
    let p: FeatureParams = cx.param()?;
    let Some(id) = p.grafana_workspace.filter(|_| p.enable) else {
        return Ok(None);
    };
    match cx.cloud.metrics.describe_grafana(&id).await? {
        Some(w) => Ok(Some(w)),
        None => Err(StepError::fatal(
            "grafana-workspace-missing",
            format!("the Amazon Managed Grafana workspace {id} (INSTANTSTART_GRAFANA_WORKSPACE) does not exist in this account and region"),
        )),
    }
}

/// The add-on's `amgWorkspace` for an observability operation that names a Grafana workspace.
pub(super) async fn amg_workspace_of(
    cx: &StepCx<'_>,
    hyperpod_arn: &str,
) -> StepResult<Option<Value>> {
    if !matches!(
        cx.op.kind.parse(),
        Ok(OpKind::Feature(FeatureId::Observability))
    ) {
        return Ok(None);
    }
    Ok(grafana_named(cx)
        .await?
        .map(|w| dashboards::addon_value(&w, &dashboards::workspace_arn(hyperpod_arn, &w.id))))
}

/// The `amg-workspace` phase (only when the server names a Grafana workspace): the workspace
/// exists and is ACTIVE before the add-on is told of it. Nothing is made:
/// an Amazon Managed Grafana workspace needs IAM Identity Center, the account's decision.
pub struct GrafanaStep;

#[async_trait]
impl Reconcile for GrafanaStep {
    fn phase(&self) -> &'static str {
        "amg-workspace"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        Ok(match grafana_named(cx).await? {
            Some(w) => {
                json!({"grafanaWorkspaceId": w.id, "name": w.name, "endpoint": w.endpoint, "changed": false})
            }
            None => json!({"changed": false}),
        })
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let Some(w) = grafana_named(cx).await? else {
            return Ok(Poll::Ready(out.clone()));
        };
        match w.status.as_str() {
            "ACTIVE" => Ok(Poll::Ready(out.clone())),
            "CREATING" | "UPDATING" | "VERSION_UPDATING" | "LICENSE_REMOVAL" | "UPGRADING" => {
                Ok(Poll::Pending(format!(
                    "Grafana workspace {} {}",
                    w.id,
                    w.status.to_lowercase()
                )))
            }
            other => Err(StepError::fatal(
                "grafana-workspace-unusable",
                format!("the Grafana workspace {} is {other}", w.id),
            )),
        }
    }
}

/// The `amp-workspace` phase: finds the cluster's workspace by its alias or makes it (tagged as
/// the cluster's), watched to `ACTIVE`. Turning the feature off keeps it: its metrics stay
/// readable, and deleting one is a decision for its owner.
pub struct WorkspaceStep;

#[async_trait]
impl Reconcile for WorkspaceStep {
    fn calls(&self) -> &'static [&'static str] {
        &["aps:CreateWorkspace"]
    }
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
    use std::collections::BTreeMap;

    use super::*;
    use crate::service::storage::bucket::BucketPlace;

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

    /// AWS's own configuration of the add-on (tests/fixtures/aws), with `<Ref:Param>` where a
    /// template parameter goes and `X` for the other intrinsics, and each parameter's allowed
    /// values.
    fn aws_configuration() -> (Value, BTreeMap<String, Vec<String>>) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/aws/hyperpod-observability-addon.yaml"
        );
        let t: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let allowed = t["Parameters"]
            .as_mapping()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let values = v["AllowedValues"].as_sequence().unwrap();
                (
                    k.as_str().unwrap().to_string(),
                    values
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect(),
                )
            })
            .collect();
        let parts = &t["Resources"]["EksAddOnWithoutAmgWithLogging"]["Properties"]
            ["ConfigurationValues"]["Fn::Join"][1];
        let text: String = parts
            .as_sequence()
            .unwrap()
            .iter()
            .map(|p| match (p.as_str(), p["Ref"].as_str()) {
                (Some(s), _) => s.to_string(),
                (None, Some(param)) => format!("<Ref:{param}>"),
                _ => "X".to_string(),
            })
            .collect();
        (serde_json::from_str(&text).unwrap(), allowed)
    }

    /// Ours has AWS's keys, no others, and at each parameter a value AWS allows there.
    fn conforms(ours: &Value, aws: &Value, allowed: &BTreeMap<String, Vec<String>>, at: &str) {
        match (ours, aws) {
            (Value::Object(o), Value::Object(a)) => {
                let ok: std::collections::BTreeSet<&String> = o.keys().collect();
                let ak: std::collections::BTreeSet<&String> = a.keys().collect();
                assert_eq!(ok, ak, "the keys at {at}");
                for (k, v) in o {
                    conforms(v, &a[k], allowed, &format!("{at}/{k}"));
                }
            }
            (Value::String(o), Value::String(a)) => match a.strip_prefix("<Ref:") {
                Some(param) => {
                    let param = param.trim_end_matches('>');
                    assert!(
                        allowed[param].contains(o),
                        "{at}: {o} is not one of {param}'s {:?}",
                        allowed[param]
                    );
                }
                // A value AWS builds from intrinsics (the workspace's endpoint and ARN).
                None if a.contains('X') => {}
                None => assert_eq!(o, a, "{at}"),
            },
            (o, a) => assert_eq!(o, a, "{at}"),
        }
    }

    fn inputs(amg: Option<Value>) -> AddonInputs {
        AddonInputs {
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
            amg_workspace: amg,
        }
    }

    #[test]
    fn the_configuration_has_the_keys_and_levels_of_aws_own_set_up() {
        let (aws, allowed) = aws_configuration();
        assert!(
            allowed.len() >= 8 && aws["metricsProvider"].as_object().unwrap().len() >= 10,
            "the fixture was read: {aws}"
        );
        let c = configuration(&inputs(None));
        conforms(&c, &aws, &allowed, "");
        assert_eq!(c["ampWorkspace"]["arn"], WS);
        assert!(c["ampWorkspace"]["prometheusEndpoint"]
            .as_str()
            .unwrap()
            .ends_with("/workspaces/ws-1"));
        // The two categories the product reads in detail.
        assert_eq!(c["metricsProvider"]["trainingMetrics"]["level"], "ADVANCED");
        assert_eq!(
            c["metricsProvider"]["taskGovernanceMetrics"]["level"],
            "ADVANCED"
        );

        // With a Grafana workspace: AWS's sample's `amgWorkspace`, and nothing else changes.
        let g = crate::cloud::GrafanaWorkspace {
            id: "g-5a9db1e0c2".into(),
            name: Some("dashboards".into()),
            status: "ACTIVE".into(),
            endpoint: "g-5a9db1e0c2.grafana-workspace.us-west-2.amazonaws.com".into(),
        };
        let amg = dashboards::addon_value(&g, &dashboards::workspace_arn(HYPERPOD, &g.id));
        let mut c = configuration(&inputs(Some(amg)));
        assert_eq!(
            c["amgWorkspace"],
            json!({"workspaceName": "dashboards",
                   "arn": "arn:aws:grafana:us-west-2:123456789012:/workspaces/g-5a9db1e0c2"})
        );
        c.as_object_mut().unwrap().remove("amgWorkspace");
        conforms(&c, &aws, &allowed, "");
    }
}
