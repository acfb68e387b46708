//! IAM and STS: the caller, roles, their policies and trust, OIDC providers.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallerIdentity {
    pub account: String,
    pub arn: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    pub name: String,
    pub arn: String,
    /// The trust policy document (JSON).
    pub trust_policy: Value,
    /// Its IAM path (`/` unless made under one): the product's roles are under [`ROLE_PATH`].
    pub path: String,
    /// Its tags (the product's roles carry `instantstart:cluster`).
    pub tags: Tags,
}

/// The IAM path every role the product makes is created under. The control plane's own
/// permissions name roles by this path, so a customer's role that merely shares a name suffix
/// (`*-inference`) is out of its reach.
pub const ROLE_PATH: &str = "/instantstart/";

#[async_trait]
pub trait Iam: Send + Sync {
    async fn caller_identity(&self) -> CloudResult<CallerIdentity>;
    async fn get_role(&self, name: &str) -> CloudResult<Option<Role>>;
    async fn create_role(&self, name: &str, trust_policy: &Value, tags: &Tags)
        -> CloudResult<Role>;
    /// One inline policy's document, if the role has it.
    async fn get_role_policy(&self, role: &str, policy_name: &str) -> CloudResult<Option<Value>>;
    /// Replaces one inline policy (idempotent by name).
    async fn put_role_policy(
        &self,
        role: &str,
        policy_name: &str,
        document: &Value,
    ) -> CloudResult<()>;
    /// Attaches an AWS-managed policy (idempotent).
    async fn attach_role_policy(&self, role: &str, policy_arn: &str) -> CloudResult<()>;
    async fn delete_role(&self, name: &str) -> CloudResult<()>;
    /// Adds one statement to a role's trust policy, keeping every existing statement (a trust
    /// policy is never replaced wholesale). No call when the statement is already there.
    async fn add_trust_statement(&self, role: &str, statement: &Value) -> CloudResult<()>;
    /// ARN of the IAM OIDC provider for `issuer_url`, if one exists.
    async fn find_oidc_provider(&self, issuer_url: &str) -> CloudResult<Option<String>>;
    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> CloudResult<String>;
    /// The permissions boundary set on every role the product makes, if one is configured.
    fn permissions_boundary(&self) -> Option<String>;
    /// IAM's decision on each probe for `principal` (`iam:SimulatePrincipalPolicy`, with the
    /// principal's permissions boundary), in the probes' order: `allowed`, `implicitDeny` or
    /// `explicitDeny`.
    async fn simulate(
        &self,
        principal: &str,
        probes: &[crate::calls::Probe],
    ) -> CloudResult<Vec<String>>;
}

/// Puts an inline policy only when the role's differs (so repeating a phase repeats no
/// mutation); whether it was put.
pub async fn ensure_role_policy(
    iam: &dyn Iam,
    role: &str,
    policy_name: &str,
    document: &Value,
) -> CloudResult<bool> {
    if iam.get_role_policy(role, policy_name).await?.as_ref() == Some(document) {
        return Ok(false);
    }
    iam.put_role_policy(role, policy_name, document).await?;
    Ok(true)
}

/// The trust policy with `statement` added, or `None` when an equal statement is already in it.
pub fn merge_trust(policy: &Value, statement: &Value) -> Option<Value> {
    let mut merged = match policy {
        Value::Object(_) => policy.clone(),
        _ => serde_json::json!({"Version": "2012-10-17", "Statement": []}),
    };
    let statements = match merged.get_mut("Statement") {
        Some(Value::Array(list)) => list,
        Some(single) => {
            *single = Value::Array(vec![single.clone()]);
            single.as_array_mut()?
        }
        None => {
            merged["Statement"] = Value::Array(Vec::new());
            merged["Statement"].as_array_mut()?
        }
    };
    if statements.iter().any(|s| s == statement) {
        return None;
    }
    statements.push(statement.clone());
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::merge_trust;
    use serde_json::json;

    #[test]
    fn trust_statements_are_added_never_replaced() {
        let sagemaker = json!({"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"});
        let pods = json!({"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]});
        let policy = json!({"Version": "2012-10-17", "Statement": [sagemaker.clone()]});
        let merged = merge_trust(&policy, &pods).unwrap();
        assert_eq!(merged["Statement"], json!([sagemaker, pods]));
        assert!(
            merge_trust(&merged, &pods).is_none(),
            "adding twice is a no-op"
        );
        // A single statement object (allowed by IAM) becomes a list and is kept.
        let single = json!({"Version": "2012-10-17", "Statement": sagemaker.clone()});
        assert_eq!(
            merge_trust(&single, &pods).unwrap()["Statement"],
            json!([sagemaker, pods])
        );
    }
}
