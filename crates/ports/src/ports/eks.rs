//! EKS: the control plane, its add-ons, access entries and pod identity associations.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::common::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EksStatus {
    Creating,
    Active,
    Updating,
    Deleting,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateEksCluster {
    pub name: String,
    pub version: String,
    pub role_arn: String,
    pub subnet_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
    /// `API` or `API_AND_CONFIG_MAP`.
    pub authentication_mode: String,
    /// Give the creating principal (this control plane) a cluster-admin access entry.
    pub bootstrap_creator_admin: bool,
    pub tags: Tags,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EksCluster {
    pub name: String,
    pub arn: String,
    pub status: EksStatus,
    pub version: String,
    pub endpoint: Option<String>,
    pub certificate_authority: Option<String>,
    pub oidc_issuer: Option<String>,
    pub vpc_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AddonStatus {
    Creating,
    Active,
    CreateFailed,
    Updating,
    Deleting,
    DeleteFailed,
    Degraded,
    UpdateFailed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateAddon {
    pub cluster: String,
    pub name: String,
    pub version: Option<String>,
    pub service_account_role_arn: Option<String>,
    /// JSON configuration values, as EKS takes them.
    pub configuration_values: Option<String>,
    /// `OVERWRITE` | `NONE` | `PRESERVE`.
    pub resolve_conflicts: String,
    /// Pod identity associations EKS creates with the add-on (`podIdentityAssociations`), so
    /// its pods have their role's credentials from their first start: EKS injects them when a
    /// pod is admitted, and an association made after the add-on's pods run reaches none of
    /// them until they restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_identity_associations: Vec<AddonPodIdentity>,
}

/// One of an add-on's pod identity associations: its service account (in the add-on's own
/// namespace) and the role it gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonPodIdentity {
    pub service_account: String,
    pub role_arn: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Addon {
    pub name: String,
    pub arn: String,
    pub status: AddonStatus,
    pub version: Option<String>,
    /// The health issues EKS reports (`code: message`, joined), when there are any.
    #[serde(default)]
    pub health: Option<String>,
    /// Its configuration values (JSON), as installed.
    #[serde(default)]
    pub configuration_values: Option<String>,
}

/// A Kubernetes version's lifecycle on EKS (`ClusterVersionInformation` of
/// `DescribeClusterVersions`): 14 months of standard support from its release, then 12 of
/// extended support at an extra cost per cluster hour ("Understand the Kubernetes version
/// lifecycle on EKS", EKS User Guide).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesVersion {
    pub version: String,
    /// `YYYY-MM-DD`.
    pub end_of_standard_support: Option<String>,
    pub end_of_extended_support: Option<String>,
    /// `versionStatus`: `STANDARD_SUPPORT`, `EXTENDED_SUPPORT` or `UNSUPPORTED`.
    pub status: Option<String>,
}

/// One version of an add-on EKS offers (`AddonVersionInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonVersion {
    pub version: String,
    /// `requiresIamPermissions`: the version's pods call AWS, so they need a role (a service
    /// account role or a pod identity association). It can change between versions of one
    /// add-on: an upgrade reads it again rather than trusting what the installed version needed.
    pub requires_iam_permissions: bool,
}

/// An EKS access policy associated with an access entry, and where it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicy {
    /// `arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy`.
    pub policy_arn: String,
    /// `None`: the whole cluster; else these namespaces (a name may end in `*`).
    pub namespaces: Option<Vec<String>>,
}

/// The next minor version after `version` (`1.33` → `1.34`): the only one EKS upgrades to.
pub fn next_minor(version: &str) -> Option<String> {
    let (major, minor) = version.split_once('.')?;
    let minor: u32 = minor.parse().ok()?;
    Some(format!("{major}.{}", minor + 1))
}

#[async_trait]
pub trait Eks: Send + Sync {
    async fn create_cluster(&self, req: &CreateEksCluster) -> CloudResult<EksCluster>;
    /// `None` when no cluster has that name.
    async fn describe_cluster(&self, name: &str) -> CloudResult<Option<EksCluster>>;
    /// Starts the control plane's upgrade to `version` (`UpdateClusterVersion`: EKS takes one
    /// minor version at a time, on an `ACTIVE` cluster); `token` is its `clientRequestToken`,
    /// so a repeat after a crash starts nothing twice. Returns the update's id; the cluster is
    /// `UPDATING` until it runs `version`.
    /// The lifecycle of these Kubernetes versions on EKS (`DescribeClusterVersions`); a version
    /// EKS does not know is left out.
    async fn kubernetes_versions(&self, versions: &[String])
        -> CloudResult<Vec<KubernetesVersion>>;
    async fn update_cluster_version(
        &self,
        name: &str,
        version: &str,
        token: &str,
    ) -> CloudResult<String>;
    async fn delete_cluster(&self, name: &str) -> CloudResult<()>;
    /// Tags the cluster `arn` (an imported cluster gets the product's cluster tag, which the
    /// control plane's policy requires before it deletes, grants access to or installs on it).
    async fn tag_cluster(&self, arn: &str, tags: &Tags) -> CloudResult<()>;
    /// Whether `principal_arn` has an access entry on the cluster.
    async fn has_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<bool>;
    /// Creates a `STANDARD` access entry with no Kubernetes groups or user name of its own, so
    /// that it grants only the access policies associated with it; one already there is kept.
    async fn create_access_entry(&self, cluster: &str, principal_arn: &str) -> CloudResult<()>;
    /// Associates an access policy with the principal's entry, with its scope: EKS replaces the
    /// scope of a policy already associated (`AssociateAccessPolicy`).
    async fn associate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy: &AccessPolicy,
    ) -> CloudResult<()>;
    /// Removes an access policy from the principal's entry; one not associated is already so.
    async fn disassociate_access_policy(
        &self,
        cluster: &str,
        principal_arn: &str,
        policy_arn: &str,
    ) -> CloudResult<()>;
    /// The access policies associated with `principal_arn`'s access entry on the cluster
    /// (`ListAssociatedAccessPolicies`, every page); `None` when it has no access entry.
    async fn access_policies(
        &self,
        cluster: &str,
        principal_arn: &str,
    ) -> CloudResult<Option<Vec<AccessPolicy>>>;
    async fn create_addon(&self, req: &CreateAddon) -> CloudResult<Addon>;
    async fn describe_addon(&self, cluster: &str, name: &str) -> CloudResult<Option<Addon>>;
    async fn delete_addon(&self, cluster: &str, name: &str) -> CloudResult<()>;
    /// Changes an add-on's version, role or configuration (`resolve_conflicts` as in create).
    async fn update_addon(&self, req: &CreateAddon) -> CloudResult<()>;
    /// The versions of an add-on EKS offers in this region for a Kubernetes version
    /// (`DescribeAddonVersions`), newest first; none when it is not offered there.
    async fn addon_versions(
        &self,
        addon: &str,
        kubernetes_version: &str,
    ) -> CloudResult<Vec<AddonVersion>>;
    /// The association id binding `namespace/service_account` to a role, if one exists.
    async fn find_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> CloudResult<Option<String>>;
    async fn create_pod_identity(
        &self,
        cluster: &str,
        namespace: &str,
        service_account: &str,
        role_arn: &str,
    ) -> CloudResult<String>;
    /// Removes a pod identity association (absent is fine).
    async fn delete_pod_identity(&self, cluster: &str, association_id: &str) -> CloudResult<()>;
}
