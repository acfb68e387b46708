//! The simulated EKS: clusters, add-ons (with their health), access entries, pod identity.

use async_trait::async_trait;
use serde_json::json;

use super::shared::*;
use super::{durations as d, new_id, Life, Sandbox, ACCOUNT, REGION};
use crate::cloud::*;

pub(super) fn eks_arn(name: &str) -> String {
    format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{name}")
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
            version: res.data["version"].as_str().unwrap_or("1.32").to_string(),
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

    async fn delete_cluster(&self, name: &str) -> CloudResult<()> {
        let api = "eks:DeleteCluster";
        self.gate(api, true).await?;
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
            .by_name("eks-access-entry", &format!("{cluster}/{principal_arn}"))
            .await?
            .is_some_and(|r| r.deleted_ms.is_none()))
    }

    async fn create_access_entry(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()> {
        let api = "eks:CreateAccessEntry";
        self.gate(api, true).await?;
        self.active_cluster(cluster, "CreateAccessEntry").await?;
        let data = json!({"cluster": cluster, "principalArn": principal_arn,
                          "policies": [{"policyArn": policy_arn, "accessScope": {"type": "cluster"}}]});
        let key = format!("{cluster}/{principal_arn}");
        self.create(api, "eks-access-entry", &new_id("ae"), Some(&key), &data)
            .await
    }

    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon> {
        let api = "eks:CreateAddon";
        self.gate(api, true).await?;
        self.active_cluster(&req.cluster, "CreateAddon").await?;
        let data = serde_json::to_value(req).unwrap_or_default();
        let key = format!("{}/{}", req.cluster, req.name);
        self.create(api, "eks-addon", &new_id("addon"), Some(&key), &data)
            .await?;
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
        if status == AddonStatus::Active {
            if let Some((s, issue)) = self.addon_health(cluster, name).await? {
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
        }))
    }

    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()> {
        let api = "eks:UpdateAddon";
        self.gate(api, true).await?;
        let key = format!("{}/{}", req.cluster, req.name);
        match self.by_name("eks-addon", &key).await? {
            Some(r) if r.deleted_ms.is_none() => {
                let data = serde_json::to_value(req).unwrap_or_default();
                self.update(api, "eks-addon", &r.id, &data).await
            }
            _ => Err(not_found(
                "eks",
                "UpdateAddon",
                "ResourceNotFoundException",
                &req.name,
            )),
        }
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
    pub(super) async fn active_cluster(&self, cluster: &str, op: &str) -> CloudResult<EksCluster> {
        match Eks::describe_cluster(self, cluster).await? {
            Some(c) if c.status == EksStatus::Active => Ok(c),
            Some(_) => Err(CloudError::new(
                "eks",
                op,
                "ResourceInUseException",
                format!("Cluster {cluster} is not ACTIVE"),
            )),
            None => Err(not_found("eks", op, "ResourceNotFoundException", cluster)),
        }
    }
}
