//! KEDA's own AWS identity, made when a deployment first scales on an Amazon Managed Service for
//! Prometheus workspace: the `TriggerAuthentication`'s `podIdentity: aws` signs with the
//! credentials of KEDA's operator pod, which has none until its service account is bound to a
//! role (without one it falls back to the node role, which may not query AMP).
//!
//! ```text
//! keda-identity  role <cluster>-keda (trusted by EKS Pod Identity), its policy: the query actions
//!                on exactly the workspaces the cluster's deployments name; the association
//!                keda/keda-operator → that role; KEDA's operator restarted once so its pod
//!                gets the credentials
//! ```
//!
//! With the inference operator's add-on on the cluster, its own KEDA (and the role the feature
//! made for it) serves instead, and nothing is made here.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::addons::kube_target;
use super::features::service_trust;
use super::workloads::ApplyParams;
use crate::cloud::ObjectRef;
use crate::ops::{Reconcile, StepCx, StepError, StepResult};

/// The service account KEDA's operator (and its metrics server) runs as.
pub const KEDA_SA: (&str, &str) = ("keda", "keda-operator");
/// The inline policy of KEDA's role.
pub const KEDA_POLICY: &str = "instantstart-amp-query";
/// What a Prometheus query through AMP's API needs (KEDA's `prometheus` scaler reads
/// `/api/v1/query`).
pub const AMP_QUERY: [&str; 4] = [
    "aps:QueryMetrics",
    "aps:GetLabels",
    "aps:GetSeries",
    "aps:GetMetricMetadata",
];

pub fn keda_role_name(cluster: &str) -> String {
    format!("{cluster}-keda")
}

/// The AMP workspaces (`(region, id)`) the manifests' ScaledObjects query.
pub fn amp_workspaces(manifests: &[Value]) -> BTreeSet<(String, String)> {
    manifests
        .iter()
        .filter(|m| m["kind"] == "ScaledObject")
        .flat_map(|m| {
            m.pointer("/spec/triggers")
                .and_then(Value::as_array)
                .cloned()
        })
        .flatten()
        .filter(|t| t.pointer("/metadata/awsRegion").is_some())
        .filter_map(|t| {
            let url = t.pointer("/metadata/serverAddress")?.as_str()?;
            let host = url.split("://").nth(1)?;
            let region = host.strip_prefix("aps-workspaces.")?.split('.').next()?;
            let id = host.split("/workspaces/").nth(1)?.split('/').next()?;
            Some((region.to_string(), id.to_string()))
        })
        .collect()
}

/// KEDA's policy: the query actions on these workspace ARNs, nothing else.
pub fn keda_policy(workspaces: &BTreeSet<String>) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "QueryTheseWorkspacesOnly", "Effect": "Allow", "Action": AMP_QUERY,
         "Resource": workspaces}]})
}

/// Whether a deployment operation needs KEDA's identity first.
pub fn needs_identity(params: &Value) -> bool {
    serde_json::from_value::<ApplyParams>(params.clone())
        .is_ok_and(|p| !amp_workspaces(&p.manifests).is_empty())
}

pub struct KedaIdentityStep;

#[async_trait]
impl Reconcile for KedaIdentityStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "eks:CreatePodIdentityAssociation",
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "k8s:Apply",
        ]
    }
    fn phase(&self) -> &'static str {
        "keda-identity"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: ApplyParams = cx.param()?;
        if let Some(served) = addon_keda(cx, &p).await? {
            return Ok(served);
        }
        let caller = cx.cloud.iam.caller_identity().await?;
        let partition = caller.arn.split(':').nth(1).unwrap_or("aws").to_string();
        let name = keda_role_name(&cx.op.cluster);
        // Workspaces already granted stay granted: other deployments may query them.
        let mut arns: BTreeSet<String> = match super::ownership::own_role(cx, &name).await? {
            Some(_) => cx
                .cloud
                .iam
                .get_role_policy(&name, KEDA_POLICY)
                .await?
                .and_then(|d| d.pointer("/Statement/0/Resource").cloned())
                .and_then(|r| serde_json::from_value(r).ok())
                .unwrap_or_default(),
            None => BTreeSet::new(),
        };
        for (region, id) in amp_workspaces(&p.manifests) {
            arns.insert(format!(
                "arn:{partition}:aps:{region}:{}:workspace/{id}",
                caller.account
            ));
        }
        let trust = service_trust(
            "pods.eks.amazonaws.com",
            &["sts:AssumeRole", "sts:TagSession"],
        );
        let role = super::addons::ensure_role(
            cx,
            super::addons::RoleScope::Cluster,
            &name,
            "keda-role",
            KEDA_POLICY,
            &keda_policy(&arns),
            || async { Ok(trust) },
        )
        .await?;
        let bound = cx
            .cloud
            .eks
            .find_pod_identity(&cx.op.cluster, KEDA_SA.0, KEDA_SA.1)
            .await?;
        let association = match bound {
            Some(id) => id,
            None => {
                let id = cx
                    .cloud
                    .eks
                    .create_pod_identity(&cx.op.cluster, KEDA_SA.0, KEDA_SA.1, &role)
                    .await?;
                // A running pod keeps the credentials it started with: restart KEDA's
                // operator once so the pod identity agent gives it the new role's.
                restart_operator(cx, &id).await?;
                id
            }
        };
        Ok(json!({"roleArn": role, "associationId": association, "workspaces": arns}))
    }
}

/// With the inference operator's add-on on the cluster its KEDA serves the ScaledObjects, with
/// the role the feature made for it (`<cluster>-inference-keda`, every workspace of the
/// cluster's account and region): nothing to make. A workspace in another region is refused,
/// since that role may not query it.
async fn addon_keda(cx: &StepCx<'_>, p: &ApplyParams) -> StepResult<Option<Value>> {
    use super::deps::INFERENCE_OPERATOR_ADDON;
    use super::features::{OwnRole, INFERENCE_KEDA};
    if cx
        .cloud
        .eks
        .describe_addon(&cx.op.cluster, INFERENCE_OPERATOR_ADDON)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let region = cx.cloud.network.region();
    let role = super::features::FEATURES
        .iter()
        .flat_map(|f| f.own_roles)
        .find(|r| r.suffix == INFERENCE_KEDA)
        .map(|r: &OwnRole| r.name(&cx.op.cluster))
        .unwrap_or_default();
    if let Some((other, id)) = amp_workspaces(&p.manifests)
        .into_iter()
        .find(|(r, _)| *r != region)
    {
        return Err(StepError::fatal(
            "keda-cross-region",
            format!(
                "the inference operator's KEDA (role {role}) may query the workspaces of {region} only, and {id} is in {other}: use a workspace in {region}"
            ),
        ));
    }
    Ok(Some(
        json!({"servedBy": INFERENCE_OPERATOR_ADDON, "roleName": role}),
    ))
}

/// A rollout restart of KEDA's operator, as `kubectl rollout restart` does it: a template
/// annotation that changes once per association.
async fn restart_operator(cx: &StepCx<'_>, association: &str) -> StepResult<()> {
    let target = kube_target(cx)?;
    let r = ObjectRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some(KEDA_SA.0.into()),
        name: KEDA_SA.1.into(),
    };
    let Some(mut d) = cx.cloud.kube.get(&target, &r).await? else {
        return Err(StepError::fatal(
            "keda-missing",
            "KEDA's operator is not installed on this cluster: run the dependency stage (dependencies_install), then deploy again",
        ));
    };
    d["spec"]["template"]["metadata"]["annotations"]["instantstart.io/pod-identity"] =
        json!(association);
    if let Some(m) = d["metadata"].as_object_mut() {
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
        ] {
            m.remove(k);
        }
    }
    d.as_object_mut().map(|o| o.remove("status"));
    cx.cloud.kube.apply(&target, &d).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_amp_triggers_name_workspaces() {
        let so = |url: &str, aws: bool| {
            let mut t =
                json!({"type": "prometheus", "metadata": {"serverAddress": url, "query": "up"}});
            if aws {
                t["metadata"]["awsRegion"] = json!("eu-west-1");
            }
            json!({"kind": "ScaledObject", "spec": {"triggers": [t]}})
        };
        let found = amp_workspaces(&[
            so(
                "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1",
                true,
            ),
            so("http://prometheus.monitoring.svc:9090", false),
            json!({"kind": "Deployment"}),
        ]);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [("eu-west-1".to_string(), "ws-1".to_string())]
        );
        let p = keda_policy(&BTreeSet::from([
            "arn:aws:aps:eu-west-1:1:workspace/ws-1".to_string()
        ]));
        assert_eq!(
            p["Statement"][0]["Resource"],
            json!(["arn:aws:aps:eu-west-1:1:workspace/ws-1"])
        );
    }
}
