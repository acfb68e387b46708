//! IAM roles, policies and OIDC providers; STS caller identity.

use async_trait::async_trait;
use aws_sdk_iam::types::Tag;
use serde_json::Value;

use super::errors::{idempotent, is_not_found, once};
use super::Aws;
use cloud::*;

const S: &str = "iam";

fn iam_tags(tags: &Tags) -> CloudResult<Vec<Tag>> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| CloudError::new(S, "Tag", "InvalidRequest", e.to_string()))
        })
        .collect()
}

/// IAM returns policy documents URL-encoded.
fn decode_policy(doc: &str) -> Value {
    let decoded = percent_encoding::percent_decode_str(doc).decode_utf8_lossy();
    serde_json::from_str(&decoded).unwrap_or(Value::String(decoded.into_owned()))
}

#[async_trait]
impl Iam for Aws {
    async fn caller_identity(&self) -> CloudResult<CallerIdentity> {
        let out = idempotent("sts", "GetCallerIdentity", || {
            self.sts.get_caller_identity().send()
        })
        .await?;
        Ok(CallerIdentity {
            account: out.account().unwrap_or_default().to_string(),
            arn: out.arn().unwrap_or_default().to_string(),
        })
    }

    async fn get_role(&self, name: &str) -> CloudResult<Option<Role>> {
        match idempotent(S, "GetRole", || self.iam.get_role().role_name(name).send()).await {
            Ok(out) => Ok(out.role().map(|r| Role {
                name: r.role_name().to_string(),
                arn: r.arn().to_string(),
                trust_policy: r
                    .assume_role_policy_document()
                    .map(decode_policy)
                    .unwrap_or(Value::Null),
                path: r.path().to_string(),
                tags: r
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create_role(
        &self,
        name: &str,
        trust_policy: &Value,
        tags: &Tags,
    ) -> CloudResult<Role> {
        let out = once(
            S,
            "CreateRole",
            self.iam
                .create_role()
                .role_name(name)
                .path(ROLE_PATH)
                .assume_role_policy_document(trust_policy.to_string())
                .set_permissions_boundary(self.permissions_boundary.clone())
                .set_tags(Some(iam_tags(tags)?))
                .send(),
        )
        .await?;
        let role = out.role();
        Ok(Role {
            name: name.to_string(),
            arn: role.map(|r| r.arn().to_string()).unwrap_or_default(),
            trust_policy: trust_policy.clone(),
            path: ROLE_PATH.to_string(),
            tags: tags.clone(),
        })
    }

    async fn get_role_policy(&self, role: &str, policy_name: &str) -> CloudResult<Option<Value>> {
        let read = idempotent(S, "GetRolePolicy", || {
            self.iam
                .get_role_policy()
                .role_name(role)
                .policy_name(policy_name)
                .send()
        })
        .await;
        match read {
            Ok(out) => Ok(Some(decode_policy(out.policy_document()))),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn put_role_policy(
        &self,
        role: &str,
        policy_name: &str,
        document: &Value,
    ) -> CloudResult<()> {
        let doc = document.to_string();
        idempotent(S, "PutRolePolicy", || {
            self.iam
                .put_role_policy()
                .role_name(role)
                .policy_name(policy_name)
                .policy_document(&doc)
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn attach_role_policy(&self, role: &str, policy_arn: &str) -> CloudResult<()> {
        idempotent(S, "AttachRolePolicy", || {
            self.iam
                .attach_role_policy()
                .role_name(role)
                .policy_arn(policy_arn)
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn delete_role(&self, name: &str) -> CloudResult<()> {
        let attached = match idempotent(S, "ListAttachedRolePolicies", || {
            self.iam
                .list_attached_role_policies()
                .role_name(name)
                .send()
        })
        .await
        {
            Ok(out) => out,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        for p in attached.attached_policies() {
            let arn = p.policy_arn().unwrap_or_default().to_string();
            idempotent(S, "DetachRolePolicy", || {
                self.iam
                    .detach_role_policy()
                    .role_name(name)
                    .policy_arn(&arn)
                    .send()
            })
            .await?;
        }
        let inline = idempotent(S, "ListRolePolicies", || {
            self.iam.list_role_policies().role_name(name).send()
        })
        .await?;
        for policy in inline.policy_names() {
            idempotent(S, "DeleteRolePolicy", || {
                self.iam
                    .delete_role_policy()
                    .role_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await?;
        }
        match idempotent(S, "DeleteRole", || {
            self.iam.delete_role().role_name(name).send()
        })
        .await
        {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn add_trust_statement(&self, role: &str, statement: &Value) -> CloudResult<()> {
        let current = self.get_role(role).await?.ok_or_else(|| {
            CloudError::new(
                S,
                "GetRole",
                "NoSuchEntity",
                format!("role {role} does not exist"),
            )
        })?;
        let Some(merged) = merge_trust(&current.trust_policy, statement) else {
            return Ok(());
        };
        let doc = merged.to_string();
        idempotent(S, "UpdateAssumeRolePolicy", || {
            self.iam
                .update_assume_role_policy()
                .role_name(role)
                .policy_document(&doc)
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn find_oidc_provider(&self, issuer_url: &str) -> CloudResult<Option<String>> {
        let host = issuer_url.trim_start_matches("https://");
        let out = idempotent(S, "ListOpenIDConnectProviders", || {
            self.iam.list_open_id_connect_providers().send()
        })
        .await?;
        Ok(out
            .open_id_connect_provider_list()
            .iter()
            .filter_map(|p| p.arn())
            .find(|arn| arn.ends_with(&format!(":oidc-provider/{host}")))
            .map(str::to_string))
    }

    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> CloudResult<String> {
        let out = once(
            S,
            "CreateOpenIDConnectProvider",
            self.iam
                .create_open_id_connect_provider()
                .url(issuer_url)
                .client_id_list("sts.amazonaws.com")
                .set_tags(Some(iam_tags(tags)?))
                .send(),
        )
        .await?;
        Ok(out
            .open_id_connect_provider_arn()
            .unwrap_or_default()
            .to_string())
    }

    fn permissions_boundary(&self) -> Option<String> {
        self.permissions_boundary.clone()
    }

    async fn simulate(
        &self,
        principal: &str,
        probes: &[cloud::calls::Probe],
    ) -> CloudResult<Vec<String>> {
        use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum};
        // One call per resource and context, naming every action asked on them.
        let mut groups: Vec<(&str, &[(String, String)], Vec<&str>)> = Vec::new();
        for p in probes {
            match groups
                .iter_mut()
                .find(|(r, c, _)| *r == p.resource && *c == p.context.as_slice())
            {
                Some((_, _, actions)) => actions.push(&p.action),
                None => groups.push((&p.resource, &p.context, vec![&p.action])),
            }
        }
        let mut decisions: std::collections::HashMap<
            (String, String, Vec<(String, String)>),
            String,
        > = std::collections::HashMap::new();
        for (resource, context, actions) in groups {
            let entries: Vec<ContextEntry> = context
                .iter()
                .map(|(k, v)| {
                    ContextEntry::builder()
                        .context_key_name(k)
                        .context_key_values(v)
                        // A multi-valued key (ArrayOfString in the Service Authorization
                        // Reference) is a list, which the set operators read.
                        .context_key_type(match k.as_str() {
                            "eks:namespaces" | "aws:TagKeys" => ContextKeyTypeEnum::StringList,
                            _ => ContextKeyTypeEnum::String,
                        })
                        .build()
                })
                .collect();
            let mut marker: Option<String> = None;
            loop {
                let out = idempotent(S, "SimulatePrincipalPolicy", || {
                    self.iam
                        .simulate_principal_policy()
                        .policy_source_arn(principal)
                        .set_action_names(Some(actions.iter().map(|a| a.to_string()).collect()))
                        .set_resource_arns((resource != "*").then(|| vec![resource.to_string()]))
                        .set_context_entries((!entries.is_empty()).then(|| entries.clone()))
                        .set_marker(marker.clone())
                        .send()
                })
                .await?;
                for r in out.evaluation_results() {
                    decisions.insert(
                        (
                            r.eval_action_name().to_string(),
                            resource.to_string(),
                            context.to_vec(),
                        ),
                        r.eval_decision().as_str().to_string(),
                    );
                }
                match out.marker().filter(|_| out.is_truncated()) {
                    Some(m) => marker = Some(m.to_string()),
                    None => break,
                }
            }
        }
        Ok(probes
            .iter()
            .map(|p| {
                decisions
                    .get(&(p.action.clone(), p.resource.clone(), p.context.clone()))
                    .cloned()
                    .unwrap_or_else(|| "implicitDeny".into())
            })
            .collect())
    }
}
