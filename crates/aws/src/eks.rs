//! EKS: clusters, access entries, add-ons.

use async_trait::async_trait;
use aws_sdk_eks::types::{
    AccessScope, AccessScopeType, AddonStatus as Status, AuthenticationMode, ClusterStatus,
    CreateAccessConfigRequest, ResolveConflicts, VpcConfigRequest,
};

use super::errors::{idempotent, is_not_found, once};
use super::{client_token, Aws};
use cloud::*;

const S: &str = "eks";

fn cluster_of(c: &aws_sdk_eks::types::Cluster) -> EksCluster {
    EksCluster {
        name: c.name().unwrap_or_default().to_string(),
        arn: c.arn().unwrap_or_default().to_string(),
        status: match c.status() {
            Some(ClusterStatus::Active) => EksStatus::Active,
            Some(ClusterStatus::Deleting) => EksStatus::Deleting,
            Some(ClusterStatus::Failed) => EksStatus::Failed,
            Some(ClusterStatus::Updating) => EksStatus::Updating,
            _ => EksStatus::Creating,
        },
        version: c.version().unwrap_or_default().to_string(),
        endpoint: c.endpoint().map(str::to_string),
        certificate_authority: c
            .certificate_authority()
            .and_then(|a| a.data())
            .map(str::to_string),
        oidc_issuer: c
            .identity()
            .and_then(|i| i.oidc())
            .and_then(|o| o.issuer())
            .map(str::to_string),
        vpc_id: c
            .resources_vpc_config()
            .and_then(|v| v.vpc_id())
            .map(str::to_string),
    }
}

fn addon_of(a: &aws_sdk_eks::types::Addon) -> Addon {
    Addon {
        name: a.addon_name().unwrap_or_default().to_string(),
        arn: a.addon_arn().unwrap_or_default().to_string(),
        status: match a.status() {
            Some(Status::Active) => AddonStatus::Active,
            Some(Status::CreateFailed) => AddonStatus::CreateFailed,
            Some(Status::Deleting) => AddonStatus::Deleting,
            Some(Status::DeleteFailed) => AddonStatus::DeleteFailed,
            Some(Status::Degraded) => AddonStatus::Degraded,
            Some(Status::Updating) => AddonStatus::Updating,
            Some(Status::UpdateFailed) => AddonStatus::UpdateFailed,
            _ => AddonStatus::Creating,
        },
        version: a.addon_version().map(str::to_string),
        configuration_values: a.configuration_values().map(str::to_string),
        health: a
            .health()
            .map(|h| {
                h.issues()
                    .iter()
                    .map(|i| {
                        format!(
                            "{}: {}",
                            i.code().map(|c| c.as_str()).unwrap_or("Unknown"),
                            i.message().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .filter(|s| !s.is_empty()),
    }
}

/// CreateAddon and UpdateAddon take the same fields on different builder types.
macro_rules! addon_fields {
    ($builder:expr, $req:expr) => {
        $builder
            .cluster_name(&$req.cluster)
            .addon_name(&$req.name)
            .set_addon_version($req.version.clone())
            .set_service_account_role_arn($req.service_account_role_arn.clone())
            .set_configuration_values($req.configuration_values.clone())
            .resolve_conflicts(ResolveConflicts::from($req.resolve_conflicts.as_str()))
            .set_pod_identity_associations(pod_identities(&$req.pod_identity_associations)?)
    };
}

/// The add-on's pod identity associations as the SDK takes them; `None` (the field left out)
/// when there are none.
fn pod_identities(
    list: &[AddonPodIdentity],
) -> CloudResult<Option<Vec<aws_sdk_eks::types::AddonPodIdentityAssociations>>> {
    if list.is_empty() {
        return Ok(None);
    }
    list.iter()
        .map(|a| {
            aws_sdk_eks::types::AddonPodIdentityAssociations::builder()
                .service_account(&a.service_account)
                .role_arn(&a.role_arn)
                .build()
                .map_err(|e| {
                    CloudError::new(S, "CreateAddon", "InvalidParameterException", e.to_string())
                })
        })
        .collect::<CloudResult<Vec<_>>>()
        .map(Some)
}

fn absent<T>(r: CloudResult<T>) -> CloudResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl Eks for Aws {
    async fn create_cluster(&self, req: &CreateEksCluster) -> CloudResult<EksCluster> {
        let vpc = VpcConfigRequest::builder()
            .set_subnet_ids(Some(req.subnet_ids.clone()))
            .set_security_group_ids(Some(req.security_group_ids.clone()))
            .endpoint_private_access(true)
            .endpoint_public_access(true)
            .build();
        let access = CreateAccessConfigRequest::builder()
            .authentication_mode(AuthenticationMode::from(req.authentication_mode.as_str()))
            .bootstrap_cluster_creator_admin_permissions(req.bootstrap_creator_admin)
            .build();
        let out = once(
            S,
            "CreateCluster",
            self.eks
                .create_cluster()
                .name(&req.name)
                .version(&req.version)
                .role_arn(&req.role_arn)
                .resources_vpc_config(vpc)
                .access_config(access)
                .client_request_token(client_token(&req.tags))
                .set_tags(Some(req.tags.clone().into_iter().collect()))
                .send(),
        )
        .await?;
        out.cluster().map(cluster_of).ok_or_else(|| {
            CloudError::new(
                S,
                "CreateCluster",
                "UnrecognizedResponse",
                "no cluster in the answer",
            )
        })
    }

    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<EksCluster>> {
        let out = absent(
            idempotent(S, "DescribeCluster", || {
                self.eks.describe_cluster().name(name).send()
            })
            .await,
        )?;
        Ok(out.and_then(|o| o.cluster().map(cluster_of)))
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        idempotent(S, "DeleteCluster", || {
            self.eks.delete_cluster().name(name).send()
        })
        .await
        .map(|_| ())
    }

    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()> {
        let tags: std::collections::HashMap<String, String> =
            tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        idempotent(S, "TagResource", || {
            self.eks
                .tag_resource()
                .resource_arn(arn)
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn has_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<bool> {
        let out = absent(
            idempotent(S, "DescribeAccessEntry", || {
                self.eks
                    .describe_access_entry()
                    .cluster_name(cluster)
                    .principal_arn(principal_arn)
                    .send()
            })
            .await,
        )?;
        Ok(out.is_some())
    }

    async fn create_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<()> {
        // `type` is sent although STANDARD is EKS's default: the control plane's policy denies
        // an entry whose `eks:accessEntryType` is anything else, or absent.
        let created = once(
            S,
            "CreateAccessEntry",
            self.eks
                .create_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal_arn)
                .r#type("STANDARD")
                .send(),
        )
        .await;
        match created {
            Err(e) if e.code == "ResourceInUseException" => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn associate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy: &AccessPolicy,
    ) -> CloudResult<()> {
        let scope = match &policy.namespaces {
            None => AccessScope::builder().r#type(AccessScopeType::Cluster),
            Some(namespaces) => AccessScope::builder()
                .r#type(AccessScopeType::Namespace)
                .set_namespaces(Some(namespaces.clone())),
        }
        .build();
        idempotent(S, "AssociateAccessPolicy", || {
            self.eks
                .associate_access_policy()
                .cluster_name(cluster)
                .principal_arn(principal_arn)
                .policy_arn(&policy.policy_arn)
                .access_scope(scope.clone())
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn disassociate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()> {
        absent(
            idempotent(S, "DisassociateAccessPolicy", || {
                self.eks
                    .disassociate_access_policy()
                    .cluster_name(cluster)
                    .principal_arn(principal_arn)
                    .policy_arn(policy_arn)
                    .send()
            })
            .await,
        )
        .map(|_| ())
    }

    async fn access_policies(
        &self,
        cluster: &str,
        principal_arn: &str,
    ) -> CloudResult<Option<Vec<AccessPolicy>>> {
        let mut policies = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = absent(
                idempotent(S, "ListAssociatedAccessPolicies", || {
                    self.eks
                        .list_associated_access_policies()
                        .cluster_name(cluster)
                        .principal_arn(principal_arn)
                        .set_next_token(token.clone())
                        .send()
                })
                .await,
            )?;
            let Some(page) = page else {
                return Ok(None);
            };
            policies.extend(page.associated_access_policies().iter().map(|p| {
                let scope = p.access_scope();
                AccessPolicy {
                    policy_arn: p.policy_arn().unwrap_or_default().to_string(),
                    namespaces: match scope.and_then(|s| s.r#type()) {
                        Some(AccessScopeType::Namespace) => {
                            Some(scope.map(|s| s.namespaces().to_vec()).unwrap_or_default())
                        }
                        _ => None,
                    },
                }
            }));
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(Some(policies));
            }
        }
    }

    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon> {
        let out = once(
            S,
            "CreateAddon",
            addon_fields!(self.eks.create_addon(), req).send(),
        )
        .await?;
        out.addon().map(addon_of).ok_or_else(|| {
            CloudError::new(
                S,
                "CreateAddon",
                "UnrecognizedResponse",
                "no add-on in the answer",
            )
        })
    }

    async fn describe_addon(&self, cluster: &str, name: &str) -> CloudResult<Option<Addon>> {
        let out = absent(
            idempotent(S, "DescribeAddon", || {
                self.eks
                    .describe_addon()
                    .cluster_name(cluster)
                    .addon_name(name)
                    .send()
            })
            .await,
        )?;
        Ok(out.and_then(|o| o.addon().map(addon_of)))
    }

    async fn delete_addon(&self, cluster: &str, name: &str) -> CloudResult<()> {
        idempotent(S, "DeleteAddon", || {
            self.eks
                .delete_addon()
                .cluster_name(cluster)
                .addon_name(name)
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn addon_versions(
        &self,
        addon: &str,
        kubernetes_version: &str,
    ) -> CloudResult<Vec<AddonVersion>> {
        let mut versions = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "DescribeAddonVersions", || {
                self.eks
                    .describe_addon_versions()
                    .addon_name(addon)
                    .kubernetes_version(kubernetes_version)
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            versions.extend(
                out.addons()
                    .iter()
                    .filter(|a| a.addon_name() == Some(addon))
                    .flat_map(|a| a.addon_versions())
                    .filter_map(|v| {
                        Some(AddonVersion {
                            version: v.addon_version()?.to_string(),
                            requires_iam_permissions: v.requires_iam_permissions(),
                        })
                    }),
            );
            match out.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(versions),
            }
        }
    }

    async fn kubernetes_versions(
        &self,
        versions: &[String],
    ) -> CloudResult<Vec<KubernetesVersion>> {
        let day = |d: Option<&aws_smithy_types::DateTime>| {
            d.and_then(|d| d.fmt(aws_smithy_types::date_time::Format::DateTime).ok())
                .map(|t| t.chars().take(10).collect::<String>())
        };
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "DescribeClusterVersions", || {
                self.eks
                    .describe_cluster_versions()
                    .set_cluster_versions(Some(versions.to_vec()))
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            found.extend(out.cluster_versions().iter().filter_map(|v| {
                Some(KubernetesVersion {
                    version: v.cluster_version()?.to_string(),
                    end_of_standard_support: day(v.end_of_standard_support_date()),
                    end_of_extended_support: day(v.end_of_extended_support_date()),
                    status: v.version_status().map(|s| s.as_str().to_string()),
                })
            }));
            match out.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(found),
            }
        }
    }

    async fn update_cluster_version(
        &self,
        name: &str,
        version: &str,
        token: &str,
    ) -> CloudResult<String> {
        // The token makes a repeat the same update: EKS answers it instead of starting another.
        let out = idempotent(S, "UpdateClusterVersion", || {
            self.eks
                .update_cluster_version()
                .name(name)
                .version(version)
                .client_request_token(token)
                .send()
        })
        .await?;
        Ok(out
            .update()
            .and_then(|u| u.id())
            .unwrap_or_default()
            .to_string())
    }

    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()> {
        once(
            S,
            "UpdateAddon",
            addon_fields!(self.eks.update_addon(), req).send(),
        )
        .await
        .map(|_| ())
    }

    async fn find_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> CloudResult<Option<String>> {
        let out = idempotent(S, "ListPodIdentityAssociations", || {
            self.eks
                .list_pod_identity_associations()
                .cluster_name(cluster)
                .namespace(namespace)
                .service_account(service_account)
                .send()
        })
        .await?;
        Ok(out
            .associations()
            .first()
            .and_then(|a| a.association_id())
            .map(str::to_string))
    }

    async fn create_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
        role_arn: &str,
    ) -> CloudResult<String> {
        let out = once(
            S,
            "CreatePodIdentityAssociation",
            self.eks
                .create_pod_identity_association()
                .cluster_name(cluster)
                .namespace(namespace)
                .service_account(service_account)
                .role_arn(role_arn)
                .send(),
        )
        .await?;
        Ok(out
            .association()
            .and_then(|a| a.association_id())
            .unwrap_or_default()
            .to_string())
    }

    async fn delete_pod_identity(&self, cluster: &str, association_id: &str) -> CloudResult<()> {
        absent(
            idempotent(S, "DeletePodIdentityAssociation", || {
                self.eks
                    .delete_pod_identity_association()
                    .cluster_name(cluster)
                    .association_id(association_id)
                    .send()
            })
            .await,
        )?;
        Ok(())
    }
}
