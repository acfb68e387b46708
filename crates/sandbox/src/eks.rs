//! The simulated EKS: clusters, add-ons (with their health), access entries, pod identity.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::eks_control::eks_arn;
use super::shared::*;
use super::verdicts::PODS_SINCE;
use super::{durations as d, new_id, Life, Res, Sandbox, ACCOUNT, REGION};
use cloud::*;

/// An access entry's ARN, as the Service Authorization Reference gives it:
/// `access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}`.
fn entry_arn(cluster: &str, principal_arn: &str) -> String {
    let account = principal_arn.split(':').nth(4).unwrap_or_default();
    let (kind, name) = principal_arn
        .rsplit(':')
        .next()
        .and_then(|r| r.split_once('/'))
        .unwrap_or_default();
    let name = name.rsplit('/').next().unwrap_or_default();
    format!(
        "arn:aws:eks:{REGION}:{ACCOUNT}:access-entry/{cluster}/{kind}/{account}/{name}/0sandbox"
    )
}

#[async_trait]
impl Eks for Sandbox {
    async fn create_cluster(&self, req: &CreateEksCluster) -> CloudResult<EksCluster> {
        let api = "eks:CreateCluster";
        self.gate(api, true).await?;
        if req.subnet_ids.len() < 2 {
            return Err(CloudError::new(
                "eks",
                "CreateCluster",
                "InvalidParameterException",
                "Subnets specified must be in at least two different AZs",
            ));
        }
        let id = new_id("eks");
        let data = serde_json::to_value(req).unwrap_or_default();
        self.create(api, "eks-cluster", &id, Some(&req.name), &data)
            .await?;
        Eks::describe_cluster(self, &req.name)
            .await?
            .ok_or_else(|| {
                CloudError::new(
                    "eks",
                    "CreateCluster",
                    "ServerException",
                    "cluster vanished",
                )
                .retryable()
            })
    }

    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<EksCluster>> {
        self.gate("eks:DescribeCluster", false).await?;
        let Some(res) = self.by_name("eks-cluster", name).await? else {
            return Ok(None);
        };
        let status = match self.life(&res, d::EKS_CREATE, d::EKS_DELETE) {
            Life::Creating(_) => EksStatus::Creating,
            Life::Ready if self.upgrading(&res) => EksStatus::Updating,
            Life::Ready => EksStatus::Active,
            Life::Deleting => EksStatus::Deleting,
            Life::Gone => return Ok(None),
        };
        let active = status == EksStatus::Active;
        let suffix = &res.id[4..];
        Ok(Some(EksCluster {
            name: name.to_string(),
            arn: eks_arn(name),
            status,
            version: self.running_version(&res),
            endpoint: active.then(|| format!("https://{suffix}.gr7.{REGION}.eks.amazonaws.com")),
            certificate_authority: active
                .then(|| "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t".to_string()),
            oidc_issuer: active.then(|| {
                format!(
                    "https://oidc.eks.{REGION}.amazonaws.com/id/{}",
                    suffix.to_uppercase()
                )
            }),
            vpc_id: None,
        }))
    }

    async fn kubernetes_versions(
        &self,
        versions: &[String],
    ) -> CloudResult<Vec<KubernetesVersion>> {
        self.gate("eks:DescribeClusterVersions", false).await?;
        Ok(super::eks_control::lifecycle(versions))
    }

    async fn update_cluster_version(
        &self,
        name: &str,
        version: &str,
        token: &str,
    ) -> CloudResult<String> {
        self.update_version(name, version, token).await
    }

    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()> {
        let api = "eks:TagResource";
        self.gate(api, true).await?;
        let name = arn.rsplit('/').next().unwrap_or_default();
        let Some(r) = self
            .by_name("eks-cluster", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found(
                "eks",
                "TagResource",
                "ResourceNotFoundException",
                arn,
            ));
        };
        let mut data = r.data.clone();
        for (k, v) in tags {
            data["tags"][k] = json!(v);
        }
        self.update(api, "eks-cluster", &r.id, &data).await
    }

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        let api = "eks:DeleteCluster";
        self.gate(api, true).await?;
        self.own_eks(name, api).await?;
        match self.by_name("eks-cluster", name).await? {
            Some(r) if r.deleted_ms.is_none() => {
                // Like EKS, deleting a cluster takes its add-ons and access entries with it.
                for (kind, api) in [
                    ("eks-addon", "eks:DeleteAddon"),
                    ("eks-access-entry", "eks:DeleteAccessEntry"),
                ] {
                    for child in self
                        .list(kind)
                        .await?
                        .iter()
                        .filter(|c| c.data["cluster"] == name)
                    {
                        self.remove(api, kind, &child.id).await?;
                    }
                }
                self.remove(api, "eks-cluster", &r.id).await
            }
            _ => Err(not_found(
                "eks",
                "DeleteCluster",
                "ResourceNotFoundException",
                name,
            )),
        }
    }

    async fn has_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<bool> {
        self.gate("eks:DescribeAccessEntry", false).await?;
        Ok(self
            .live_entry(&format!("{cluster}/{principal_arn}"))
            .await?
            .is_some())
    }

    async fn create_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<()> {
        let api = "eks:CreateAccessEntry";
        self.gate(api, true).await?;
        self.active_cluster(cluster, "CreateAccessEntry").await?;
        self.own_eks(cluster, api).await?;
        // The template's statements on access entries (`AccessEntriesPlain`, …): IAM evaluates
        // the request's principal and its type; the port makes `STANDARD` entries without
        // Kubernetes groups or a user name, so those keys carry only the type.
        let asked = cloud::policy::Request::new(api, &eks_arn(cluster))
            .with(&format!("aws:ResourceTag/{CLUSTER_TAG}"), cluster)
            .with("eks:principalArn", principal_arn)
            .with("eks:accessEntryType", "STANDARD");
        self.iam_refuses(api, &eks_arn(cluster), asked, principal_arn)?;
        let key = format!("{cluster}/{principal_arn}");
        if self.live_entry(&key).await?.is_some() {
            return Ok(());
        }
        let data = json!({"cluster": cluster, "principalArn": principal_arn, "type": "STANDARD",
                          "policies": []});
        self.create(api, "eks-access-entry", &new_id("ae"), Some(&key), &data)
            .await
    }

    async fn associate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy: &AccessPolicy,
    ) -> CloudResult<()> {
        let api = "eks:AssociateAccessPolicy";
        self.gate(api, true).await?;
        let key = format!("{cluster}/{principal_arn}");
        let Some(row) = self.live_entry(&key).await? else {
            return Err(not_found(
                "eks",
                "AssociateAccessPolicy",
                "ResourceNotFoundException",
                &key,
            ));
        };
        let resource = entry_arn(cluster, principal_arn);
        let mut asked = cloud::policy::Request::new(api, &resource)
            .with("eks:principalArn", principal_arn)
            .with("eks:policyArn", &policy.policy_arn);
        let scope = match &policy.namespaces {
            None => json!({"type": "cluster"}),
            Some(namespaces) => {
                // EKS: a namespace scope names at least one namespace (botocore's eks model,
                // `AccessScope.namespaces`; "Associate access policies" in the EKS User Guide).
                if namespaces.is_empty() {
                    return Err(CloudError::new(
                        "eks",
                        "AssociateAccessPolicy",
                        "InvalidParameterException",
                        "namespaces are required with a namespace scope",
                    ));
                }
                for n in namespaces {
                    asked = asked.with("eks:namespaces", n);
                }
                json!({"type": "namespace", "namespaces": namespaces})
            }
        };
        let asked = asked.with(
            "eks:accessScope",
            scope["type"].as_str().unwrap_or_default(),
        );
        self.iam_refuses(api, &resource, asked, principal_arn)?;
        let mut data = row.data.clone();
        let mut policies: Vec<Value> = data["policies"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["policyArn"] != policy.policy_arn.as_str())
            .collect();
        policies.push(json!({"policyArn": policy.policy_arn, "accessScope": scope}));
        data["policies"] = json!(policies);
        self.update(api, "eks-access-entry", &row.id, &data).await
    }

    async fn disassociate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()> {
        let api = "eks:DisassociateAccessPolicy";
        self.gate(api, true).await?;
        let Some(row) = self
            .live_entry(&format!("{cluster}/{principal_arn}"))
            .await?
        else {
            return Ok(());
        };
        let mut data = row.data.clone();
        let before = data["policies"].as_array().cloned().unwrap_or_default();
        let after: Vec<Value> = before
            .iter()
            .filter(|p| p["policyArn"] != policy_arn)
            .cloned()
            .collect();
        if after.len() == before.len() {
            return Ok(());
        }
        data["policies"] = json!(after);
        self.update(api, "eks-access-entry", &row.id, &data).await
    }

    async fn access_policies(
        &self,
        cluster: &str,
        principal_arn: &str,
    ) -> CloudResult<Option<Vec<AccessPolicy>>> {
        self.gate("eks:ListAssociatedAccessPolicies", false).await?;
        let Some(row) = self
            .live_entry(&format!("{cluster}/{principal_arn}"))
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(
            row.data["policies"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| AccessPolicy {
                    policy_arn: p["policyArn"].as_str().unwrap_or_default().to_string(),
                    namespaces: (p["accessScope"]["type"] == "namespace").then(|| {
                        p["accessScope"]["namespaces"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|n| n.as_str().map(str::to_string))
                            .collect()
                    }),
                })
                .collect(),
        ))
    }

    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon> {
        let api = "eks:CreateAddon";
        self.gate(api, true).await?;
        let cluster = self.active_cluster(&req.cluster, "CreateAddon").await?;
        self.own_eks(&req.cluster, api).await?;
        self.check_addon_identities("CreateAddon", req).await?;
        let mut data = serde_json::to_value(req).unwrap_or_default();
        // Without a version, EKS installs its default for the cluster's Kubernetes version.
        if req.version.is_none() {
            let offered = super::eks_control::offered_addon_versions(&req.name, &cluster.version);
            if let Some(v) = offered.first() {
                data["version"] = json!(v.version);
            }
        }
        data[PODS_SINCE] = json!(super::now_ms());
        let key = format!("{}/{}", req.cluster, req.name);
        self.create(api, "eks-addon", &new_id("addon"), Some(&key), &data)
            .await?;
        self.bind_addon_identities(req).await?;
        self.describe_addon(&req.cluster, &req.name)
            .await?
            .ok_or_else(|| {
                CloudError::new("eks", "CreateAddon", "ServerException", "add-on vanished")
                    .retryable()
            })
    }

    async fn describe_addon(&self, cluster: &str, name: &str) -> CloudResult<Option<Addon>> {
        self.gate("eks:DescribeAddon", false).await?;
        let Some(res) = self
            .by_name("eks-addon", &format!("{cluster}/{name}"))
            .await?
        else {
            return Ok(None);
        };
        let mut status = match self.life(&res, d::ADDON_CREATE, d::ADDON_CREATE / 3.0) {
            Life::Creating(_) => AddonStatus::Creating,
            Life::Ready => AddonStatus::Active,
            Life::Deleting => AddonStatus::Deleting,
            Life::Gone => return Ok(None),
        };
        let mut health = None;
        if status == AddonStatus::Active && res.data[super::eks_control::FAILED_UPDATE] == true {
            status = AddonStatus::UpdateFailed;
            health =
                Some("InsufficientNumberOfReplicas: the new version's pods do not start".into());
        } else if status == AddonStatus::Active {
            let pods_since = res.data[PODS_SINCE].as_i64();
            if let Some((s, issue)) = self.addon_health(cluster, name, pods_since).await? {
                status = s;
                health = Some(issue);
            }
        }
        let version = res.data["version"]
            .as_str()
            .map(str::to_string)
            .or_else(|| super::default_addon_version(name).map(str::to_string));
        Ok(Some(Addon {
            name: name.to_string(),
            arn: format!(
                "arn:aws:eks:{REGION}:{ACCOUNT}:addon/{cluster}/{name}/{}",
                &res.id[6..]
            ),
            status,
            version,
            health,
            configuration_values: res.data["configurationValues"].as_str().map(str::to_string),
        }))
    }

    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()> {
        let api = "eks:UpdateAddon";
        self.gate(api, true).await?;
        let key = format!("{}/{}", req.cluster, req.name);
        match self.by_name("eks-addon", &key).await? {
            Some(r) if r.deleted_ms.is_none() => {
                self.check_addon_identities("UpdateAddon", req).await?;
                let mut data = r.data.clone();
                if let Some(c) = &req.configuration_values {
                    data["configurationValues"] = json!(c);
                }
                if let Some(v) = &req.version {
                    data["version"] = json!(v);
                }
                // `eks:AddonUpdateFailure=N`: the next N version changes leave their add-on
                // UPDATE_FAILED; any later update (a rollback) clears it.
                data[super::eks_control::FAILED_UPDATE] = json!(
                    req.version.is_some() && self.take_fault(super::eks_control::ADDON_FAULT)
                );
                // An update rolls the add-on's pods: admitted again, with what is bound then.
                data[PODS_SINCE] = json!(super::now_ms());
                self.update(api, "eks-addon", &r.id, &data).await?;
                self.bind_addon_identities(req).await
            }
            _ => Err(not_found(
                "eks",
                "UpdateAddon",
                "ResourceNotFoundException",
                &req.name,
            )),
        }
    }

    /// Every add-on is offered for the Kubernetes versions the simulated EKS runs (1.29–1.34),
    /// none for another.
    async fn addon_versions(
        &self,
        addon: &str,
        kubernetes_version: &str,
    ) -> CloudResult<Vec<AddonVersion>> {
        self.gate("eks:DescribeAddonVersions", false).await?;
        Ok(super::eks_control::offered_addon_versions(
            addon,
            kubernetes_version,
        ))
    }

    async fn find_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> CloudResult<Option<String>> {
        self.gate("eks:ListPodIdentityAssociations", false).await?;
        let key = format!("{cluster}/{namespace}/{service_account}");
        Ok(self
            .by_name("eks-pod-identity", &key)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| r.id))
    }

    async fn create_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
        role_arn: &str,
    ) -> CloudResult<String> {
        let api = "eks:CreatePodIdentityAssociation";
        self.gate(api, true).await?;
        self.active_cluster(cluster, "CreatePodIdentityAssociation")
            .await?;
        self.own_eks(cluster, api).await?;
        let key = format!("{cluster}/{namespace}/{service_account}");
        let id = new_id("a");
        let data = json!({"cluster": cluster, "namespace": namespace, "serviceAccount": service_account, "roleArn": role_arn});
        self.create(api, "eks-pod-identity", &id, Some(&key), &data)
            .await?;
        Ok(id)
    }

    async fn delete_pod_identity(&self, _cluster: &str, association_id: &str) -> CloudResult<()> {
        let api = "eks:DeletePodIdentityAssociation";
        self.gate(api, true).await?;
        match self.get("eks-pod-identity", association_id).await? {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "eks-pod-identity", &r.id).await,
            _ => Ok(()),
        }
    }

    async fn delete_addon(&self, cluster: &str, name: &str) -> CloudResult<()> {
        let api = "eks:DeleteAddon";
        self.gate(api, true).await?;
        match self
            .by_name("eks-addon", &format!("{cluster}/{name}"))
            .await?
        {
            Some(r) if r.deleted_ms.is_none() => self.remove(api, "eks-addon", &r.id).await,
            _ => Err(not_found(
                "eks",
                "DeleteAddon",
                "ResourceNotFoundException",
                name,
            )),
        }
    }
}

impl Sandbox {
    /// The access entry of `cluster/principal`, unless deleted.
    async fn live_entry(&self, key: &str) -> CloudResult<Option<Res>> {
        Ok(self
            .by_name("eks-access-entry", key)
            .await?
            .filter(|r| r.deleted_ms.is_none()))
    }

    /// IAM's answer on the server's own policy (the template's `InstanceRole`) for one request
    /// about an access entry: an explicit or implicit deny refuses it as AWS words it.
    fn iam_refuses(
        &self,
        api: &str,
        resource: &str,
        asked: cloud::policy::Request,
        principal_arn: &str,
    ) -> CloudResult<()> {
        let asked = asked.with("aws:PrincipalArn", &super::iam::caller_role());
        let decision = cloud::policy::decide(&super::rules::instance_policy(), &asked);
        if decision == cloud::policy::Decision::Allow {
            return Ok(());
        }
        let how = match decision {
            cloud::policy::Decision::ExplicitDeny => {
                " with an explicit deny in an identity-based policy"
            }
            _ => "",
        };
        let op = api.trim_start_matches("eks:");
        Err(CloudError::new(
            "eks",
            op,
            "AccessDeniedException",
            format!("User: arn:aws:sts::{ACCOUNT}:assumed-role/instantstart/sandbox is not authorized to perform: {api} on resource: {resource}{how} (for {principal_arn})"),
        ))
    }

    /// What EKS checks of an add-on's `podIdentityAssociations`: a service account of the
    /// add-on's own namespace, and a role that exists and that pod identity may assume.
    async fn check_addon_identities(&self, op: &str, req: &CreateAddon) -> CloudResult<()> {
        for a in &req.pod_identity_associations {
            let invalid =
                |why: String| CloudError::new("eks", op, "InvalidParameterException", why);
            if super::verdicts::addon_namespace(&req.name).is_none() {
                return Err(invalid(format!(
                    "Addon {} does not support Pod Identity associations",
                    req.name
                )));
            }
            let Some(role) = self.role_record(&a.role_arn).await? else {
                return Err(invalid(format!("Role {} does not exist", a.role_arn)));
            };
            let trusted = super::rules::trusts_service(&role, "pods.eks.amazonaws.com");
            if !trusted {
                return Err(invalid(format!(
                    "The trust policy of role {} does not allow pods.eks.amazonaws.com to sts:AssumeRole and sts:TagSession",
                    a.role_arn
                )));
            }
        }
        Ok(())
    }

    /// The associations an add-on request names, made (or replaced) as EKS makes them.
    async fn bind_addon_identities(&self, req: &CreateAddon) -> CloudResult<()> {
        let Some(ns) = super::verdicts::addon_namespace(&req.name) else {
            return Ok(());
        };
        for a in &req.pod_identity_associations {
            let key = format!("{}/{ns}/{}", req.cluster, a.service_account);
            if let Some(r) = self.by_name("eks-pod-identity", &key).await? {
                if r.deleted_ms.is_none() {
                    continue;
                }
            }
            let data = json!({"cluster": req.cluster, "namespace": ns,
                              "serviceAccount": a.service_account, "roleArn": a.role_arn,
                              "ownerArn": format!("{}/{}", req.cluster, req.name)});
            self.create(
                "eks:CreatePodIdentityAssociation",
                "eks-pod-identity",
                &new_id("a"),
                Some(&key),
                &data,
            )
            .await?;
        }
        Ok(())
    }
}
