//! What the dependency, storage and feature phases share: where the cluster's API server is,
//! and least-privilege IRSA roles.

use serde_json::json;

use super::net_tags;
use crate::cloud::KubeTarget;
use crate::ops::{StepCx, StepResult};
use crate::service::shared::resources::Recorded;

/// Where to reach the cluster's API server, from what the `cluster` stage recorded.
pub fn kube_target(cx: &StepCx<'_>) -> StepResult<KubeTarget> {
    Ok(KubeTarget {
        cluster: cx.op.cluster.clone(),
        endpoint: cx.recorded().eks_endpoint()?,
        certificate_authority: cx.recorded().eks_certificate_authority()?,
    })
}

/// An IAM role for one Kubernetes service account (IRSA): trusted only by exactly
/// `system:serviceaccount:<namespace>:<service_account>` through the cluster's OIDC provider
/// (and, with `teams`, by the same service account in the teams' namespaces), with one inline
/// policy.
pub struct IrsaRole<'a> {
    pub name: String,
    pub namespace: &'a str,
    pub service_account: &'a str,
    /// Also trusted by `<service_account>` in `hyperpod-ns-*`: the identity a team's workloads
    /// run as under task governance, copied into each team's namespace.
    pub teams: bool,
    /// `instantstart:role` tag value.
    pub tag_role: &'a str,
    pub policy_name: &'a str,
}

impl IrsaRole<'_> {
    /// The role's ARN: created when missing (with the OIDC provider, for imported clusters that
    /// have none); its policy is put either way.
    pub async fn ensure(&self, cx: &StepCx<'_>, policy: &serde_json::Value) -> StepResult<String> {
        ensure_role(
            cx,
            RoleScope::Cluster,
            &self.name,
            self.tag_role,
            self.policy_name,
            policy,
            || async {
                let trust = irsa_trust(cx, self.namespace, self.service_account).await?;
                Ok(if self.teams {
                    with_team_namespaces(trust, self.service_account)
                } else {
                    trust
                })
            },
        )
        .await
    }
}

/// A trust for one service account widened to the same name in the teams' namespaces: the exact
/// subject moves from `StringEquals` to `StringLike`, beside `hyperpod-ns-*` (namespaces only
/// SageMaker's task governance makes).
pub fn with_team_namespaces(
    mut trust: serde_json::Value,
    service_account: &str,
) -> serde_json::Value {
    let Some(cond) = trust.pointer_mut("/Statement/0/Condition") else {
        return trust;
    };
    let equals = cond["StringEquals"].as_object_mut();
    let Some(equals) = equals else { return trust };
    let Some(key) = equals.keys().find(|k| k.ends_with(":sub")).cloned() else {
        return trust;
    };
    let exact = equals.remove(&key).unwrap_or_default();
    let teams = format!(
        "system:serviceaccount:{}*:{service_account}",
        crate::service::shared::labels::TEAM_NAMESPACE_PREFIX
    );
    cond["StringLike"] = json!({ key: [exact, teams] });
    trust
}

/// Trust for exactly `system:serviceaccount:<namespace>:<service_account>` through the cluster's
/// OIDC provider (made here for imported clusters that have none).
pub async fn irsa_trust(
    cx: &StepCx<'_>,
    namespace: &str,
    service_account: &str,
) -> StepResult<serde_json::Value> {
    let issuer = cx.recorded().oidc_issuer()?;
    let provider = match cx.recorded().oidc_provider_arn() {
        Ok(arn) => arn,
        Err(_) => match cx.cloud.iam.find_oidc_provider(&issuer).await? {
            Some(arn) => arn,
            None => {
                cx.cloud
                    .iam
                    .create_oidc_provider(&issuer, &net_tags(cx, "oidc-provider"))
                    .await?
            }
        },
    };
    let host = issuer.trim_start_matches("https://");
    Ok(json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": provider},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {
            format!("{host}:sub"): format!("system:serviceaccount:{namespace}:{service_account}"),
            format!("{host}:aud"): "sts.amazonaws.com"}}}]}))
}

/// Whose a role is: the cluster's own, or the account's (made once by any cluster, for all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleScope {
    Cluster,
    Account,
}

/// A role with one inline policy: created with the trust `trust` builds (only when the role is
/// missing), its policy put either way. Returns the role's ARN.
pub async fn ensure_role<F, Fut>(
    cx: &StepCx<'_>,
    scope: RoleScope,
    name: &str,
    tag_role: &str,
    policy_name: &str,
    policy: &serde_json::Value,
    trust: F,
) -> StepResult<String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = StepResult<serde_json::Value>>,
{
    let owner = (scope == RoleScope::Cluster).then_some(cx.op.cluster.as_str());
    let arn = match super::ownership::find_role(cx, name, owner)
        .await?
        .adopt()?
    {
        Some(role) => role.arn,
        None => {
            let trust = trust().await?;
            super::ownership::create_role(cx, name, &trust, &net_tags(cx, tag_role), owner)
                .await?
                .arn
        }
    };
    crate::cloud::ensure_role_policy(cx.cloud.iam.as_ref(), name, policy_name, policy).await?;
    Ok(arn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_team_wide_trust_keeps_the_exact_subject_and_adds_only_the_teams_namespaces() {
        let exact = json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                "oidc.example/id/X:sub": "system:serviceaccount:default:sa",
                "oidc.example/id/X:aud": "sts.amazonaws.com"}}}]});
        let wide = with_team_namespaces(exact, "sa");
        let cond = &wide["Statement"][0]["Condition"];
        assert_eq!(
            cond["StringEquals"],
            json!({"oidc.example/id/X:aud": "sts.amazonaws.com"})
        );
        assert_eq!(
            cond["StringLike"],
            json!({"oidc.example/id/X:sub": [
                "system:serviceaccount:default:sa",
                "system:serviceaccount:hyperpod-ns-*:sa"]})
        );
    }
}
