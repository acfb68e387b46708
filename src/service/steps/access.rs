//! The `access-grant` and `access-revoke` operations: a person's access entry on the cluster
//! (made when missing) and the team's namespace added to, or taken from, their namespace-scoped
//! team policy. Each phase reads the entry again when it runs and changes only the team's
//! namespace, so a phase run twice (after a restart) changes nothing more.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::AccessPolicy;
use crate::ops::{Step, StepCx, StepResult};
use crate::service::people::grants::{with_namespace, without_namespace, GrantParams};
use crate::service::shared::arn::arn_scope;

async fn have(cx: &StepCx<'_>, p: &GrantParams) -> StepResult<Vec<AccessPolicy>> {
    Ok(cx
        .cloud
        .eks
        .access_policies(&cx.op.cluster, &p.principal_arn)
        .await?
        .unwrap_or_default())
}

/// The person's access entry: a STANDARD entry without groups, so it grants only its policies.
pub struct PersonEntryStep;

#[async_trait]
impl Step for PersonEntryStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:CreateAccessEntry"]
    }
    fn name(&self) -> &'static str {
        "access-entry"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: GrantParams = cx.param()?;
        if cx
            .cloud
            .eks
            .has_access_entry(&cx.op.cluster, &p.principal_arn)
            .await?
        {
            return Ok(json!({"accessPrincipal": p.principal_arn, "accessEntryCreated": false}));
        }
        cx.cloud
            .eks
            .create_access_entry(&cx.op.cluster, &p.principal_arn)
            .await?;
        Ok(json!({"accessPrincipal": p.principal_arn, "accessEntryCreated": true}))
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
}

/// The team's namespace added to (grant) or taken from (revoke) the person's team policies.
pub struct TeamPolicyStep;

#[async_trait]
impl Step for TeamPolicyStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy"]
    }
    fn name(&self) -> &'static str {
        "access-policy"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: GrantParams = cx.param()?;
        let have = have(cx, &p).await?;
        let eks = &cx.cloud.eks;
        let (cluster, who) = (cx.op.cluster.as_str(), p.principal_arn.as_str());
        let after = match p.access {
            Some(access) => {
                let partition = arn_scope(who).0;
                with_namespace(&have, partition, access, &p.namespace)
            }
            // A cluster-wide team policy was refused at the request; one made since is left.
            None => without_namespace(&have, &p.namespace).unwrap_or(None),
        };
        let Some(after) = after else {
            return Ok(json!({"changed": [], "removed": []}));
        };
        let mut changed = Vec::new();
        for policy in after.iter().filter(|a| !have.contains(a)) {
            eks.associate_access_policy(cluster, who, policy).await?;
            changed.push(policy.clone());
        }
        let mut removed = Vec::new();
        for gone in have
            .iter()
            .filter(|h| !after.iter().any(|a| a.policy_arn == h.policy_arn))
        {
            eks.disassociate_access_policy(cluster, who, &gone.policy_arn)
                .await?;
            removed.push(gone.policy_arn.clone());
        }
        Ok(json!({"changed": changed, "removed": removed}))
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
}
