//! The simulated IAM and STS: the caller, roles with their documents, OIDC providers.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::shared::*;
use super::{new_id, Sandbox, ACCOUNT};
use cloud::*;

#[async_trait]
impl Iam for Sandbox {
    async fn caller_identity(&self) -> CloudResult<CallerIdentity> {
        self.gate("sts:GetCallerIdentity", false).await?;
        Ok(CallerIdentity {
            account: ACCOUNT.to_string(),
            arn: caller_role(),
        })
    }

    async fn get_role(&self, name: &str) -> CloudResult<Option<Role>> {
        self.gate("iam:GetRole", false).await?;
        let foreign = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .foreign_role(name);
        if foreign {
            return Ok(Some(Role {
                name: name.to_string(),
                arn: format!("arn:aws:iam::{ACCOUNT}:role/{name}"),
                trust_policy: json!({"Version": "2012-10-17", "Statement": []}),
                path: "/".into(),
                tags: Tags::new(),
            }));
        }
        Ok(self
            .by_name("iam-role", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| {
                let path = r.data["path"].as_str().unwrap_or("/").to_string();
                Role {
                    name: name.to_string(),
                    arn: format!("arn:aws:iam::{ACCOUNT}:role{path}{name}"),
                    trust_policy: r.data["trust"].clone(),
                    tags: serde_json::from_value(r.data["tags"].clone()).unwrap_or_default(),
                    path,
                }
            }))
    }

    async fn create_role(
        &self,
        name: &str,
        trust_policy: &Value,
        tags: &Tags,
    ) -> CloudResult<Role> {
        let api = "iam:CreateRole";
        self.gate(api, true).await?;
        // Role names are unique in the account, whatever their path.
        let taken = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .foreign_role(name);
        if taken {
            return Err(CloudError::new(
                "iam",
                "CreateRole",
                "EntityAlreadyExists",
                format!("Role with name {name} already exists."),
            ));
        }
        // Every role carries the stack's boundary, as the control plane's roles do when the
        // stack deployed it (`--permissions-boundary`).
        let data = json!({"trust": trust_policy, "tags": tags, "inline": {}, "attached": [],
                          "boundary": super::rules::stack_boundary(), "path": ROLE_PATH});
        self.create(api, "iam-role", &new_id("AROA"), Some(name), &data)
            .await?;
        Ok(Role {
            name: name.to_string(),
            arn: format!("arn:aws:iam::{ACCOUNT}:role{ROLE_PATH}{name}"),
            trust_policy: trust_policy.clone(),
            path: ROLE_PATH.to_string(),
            tags: tags.clone(),
        })
    }

    async fn get_role_policy(&self, role: &str, policy_name: &str) -> CloudResult<Option<Value>> {
        self.gate("iam:GetRolePolicy", false).await?;
        let Some(res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("iam", "GetRolePolicy", "NoSuchEntity", role));
        };
        Ok(res.data["inline"].get(policy_name).cloned())
    }

    async fn put_role_policy(
        &self,
        role: &str,
        policy_name: &str,
        document: &Value,
    ) -> CloudResult<()> {
        let api = "iam:PutRolePolicy";
        self.gate(api, true).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("iam", "PutRolePolicy", "NoSuchEntity", role));
        };
        res.data["inline"][policy_name] = document.clone();
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn attach_role_policy(&self, role: &str, policy_arn: &str) -> CloudResult<()> {
        let api = "iam:AttachRolePolicy";
        self.gate(api, true).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("iam", "AttachRolePolicy", "NoSuchEntity", role));
        };
        let list = res.data["attached"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|p| p == policy_arn) {
            return Ok(());
        }
        let mut list = list;
        list.push(json!(policy_arn));
        res.data["attached"] = Value::Array(list);
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn delete_role(&self, name: &str) -> CloudResult<()> {
        let api = "iam:DeleteRole";
        self.gate(api, true).await?;
        match self.by_name("iam-role", name).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "iam-role", &r.id).await,
            _ => Ok(()),
        }
    }

    async fn add_trust_statement(&self, role: &str, statement: &Value) -> CloudResult<()> {
        let api = "iam:UpdateAssumeRolePolicy";
        self.gate(api, false).await?;
        let Some(mut res) = self
            .by_name("iam-role", role)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found(
                "iam",
                "UpdateAssumeRolePolicy",
                "NoSuchEntity",
                role,
            ));
        };
        let Some(merged) = merge_trust(&res.data["trust"], statement) else {
            return Ok(());
        };
        res.data["trust"] = merged;
        self.update(api, "iam-role", &res.id, &res.data).await
    }

    async fn find_oidc_provider(&self, issuer_url: &str) -> CloudResult<Option<String>> {
        self.gate("iam:ListOpenIDConnectProviders", false).await?;
        let host = issuer_url.trim_start_matches("https://");
        Ok(self
            .by_name("oidc-provider", host)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|_| format!("arn:aws:iam::{ACCOUNT}:oidc-provider/{host}")))
    }

    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> CloudResult<String> {
        let api = "iam:CreateOpenIDConnectProvider";
        self.gate(api, true).await?;
        let host = issuer_url.trim_start_matches("https://");
        let data = json!({"url": issuer_url, "clientIds": ["sts.amazonaws.com"], "tags": tags});
        self.create(api, "oidc-provider", &new_id("oidc"), Some(host), &data)
            .await?;
        Ok(format!("arn:aws:iam::{ACCOUNT}:oidc-provider/{host}"))
    }

    fn permissions_boundary(&self) -> Option<String> {
        Some(super::rules::STACK_BOUNDARY_ARN.to_string())
    }

    /// The server's role is the CloudFormation template's `InstanceRole`, as a stack-deployed
    /// control plane's is, less the actions the sandbox was told to deny it; each probe is
    /// evaluated as IAM would (the product's own evaluator, conditions included).
    async fn simulate(
        &self,
        _principal: &str,
        probes: &[cloud::calls::Probe],
    ) -> CloudResult<Vec<String>> {
        use cloud::policy::{self, Decision, Request};
        self.gate("iam:SimulatePrincipalPolicy", false).await?;
        let role = super::rules::instance_policy();
        let denied: Vec<String> = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .denied()
            .iter()
            .cloned()
            .collect();
        let deny = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Action": denied, "Resource": "*"}]});
        let docs: Vec<&Value> = match denied.is_empty() {
            true => vec![&role],
            false => vec![&role, &deny],
        };
        Ok(probes
            .iter()
            .map(|p| {
                let mut req = Request::new(&p.action, &p.resource);
                for (k, v) in &p.context {
                    req = req.with(k, v);
                }
                match policy::effective(&docs, None, &req) {
                    Decision::Allow => "allowed",
                    Decision::ExplicitDeny => "explicitDeny",
                    _ => "implicitDeny",
                }
                .to_string()
            })
            .collect())
    }
}

/// The role the server runs as in the sandbox.
pub(super) fn caller_role() -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/instantstart-sandbox")
}
