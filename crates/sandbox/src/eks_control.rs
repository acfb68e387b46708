//! The simulated EKS control plane beyond its creation: whose cluster it is (the tag IAM's
//! conditions read), whether it is `ACTIVE`, and its Kubernetes version upgrades, with the rules
//! EKS keeps for them ("Update existing cluster to new Kubernetes version", EKS User Guide, and
//! `UpdateClusterVersion` in botocore's `eks/2017-11-01/service-2.json`): one minor version at a
//! time, only on an `ACTIVE` cluster, to a version EKS offers; a repeated `clientRequestToken`
//! is the update it started, never a second one.

use serde_json::json;

use super::shared::*;
use super::{durations as d, now_ms, Res, Sandbox, ACCOUNT, REGION};
use cloud::*;

pub(super) fn eks_arn(name: &str) -> String {
    format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{name}")
}

/// `eks:AddonUpdateFailure=N`: the next N add-on version changes fail (`UPDATE_FAILED`).
pub(super) const ADDON_FAULT: &str = "eks:AddonUpdateFailure";
/// The add-on record's mark of an update that failed.
pub(super) const FAILED_UPDATE: &str = "updateFailed";

/// The Kubernetes versions the simulated EKS runs and offers add-ons for.
pub(super) const EKS_VERSIONS: [&str; 6] = ["1.29", "1.30", "1.31", "1.32", "1.33", "1.34"];

/// EKS's release calendar ("Understand the Kubernetes version lifecycle on EKS"): each
/// version's end of standard support, 14 months after its release, and of extended support, 12
/// months later.
const CALENDAR: [(&str, &str, &str); 7] = [
    ("1.29", "2025-03-23", "2026-03-23"),
    ("1.30", "2025-07-23", "2026-07-23"),
    ("1.31", "2025-11-26", "2026-11-26"),
    ("1.32", "2026-03-23", "2027-03-23"),
    ("1.33", "2026-07-29", "2027-07-29"),
    ("1.34", "2026-12-02", "2027-12-02"),
    ("1.35", "2027-03-27", "2028-03-27"),
];

/// `DescribeClusterVersions` for these versions: their dates, and where today falls.
pub(super) fn lifecycle(versions: &[String]) -> Vec<KubernetesVersion> {
    let today = time::OffsetDateTime::now_utc().date().to_string();
    CALENDAR
        .iter()
        .filter(|(v, ..)| versions.iter().any(|w| w == v))
        .map(|(v, standard, extended)| KubernetesVersion {
            version: v.to_string(),
            end_of_standard_support: Some(standard.to_string()),
            end_of_extended_support: Some(extended.to_string()),
            status: Some(
                match (today.as_str() < *standard, today.as_str() < *extended) {
                    (true, _) => "STANDARD_SUPPORT",
                    (false, true) => "EXTENDED_SUPPORT",
                    _ => "UNSUPPORTED",
                }
                .to_string(),
            ),
        })
        .collect()
}

/// Add-ons whose pods call AWS (`requiresIamPermissions`): the storage drivers and the
/// observability agent, whose roles the features that install them bring.
const NEED_ROLES: [&str; 4] = [
    "aws-mountpoint-s3-csi-driver",
    "aws-fsx-csi-driver",
    "aws-ebs-csi-driver",
    "amazon-cloudwatch-observability",
];

/// What `DescribeAddonVersions` offers of an add-on for a Kubernetes version, newest first:
/// nothing for a version EKS does not run; from 1.33, a newer build per minor version beside
/// the one for 1.32 (what an add-on created without a version gets), so an upgrade moves it.
pub(super) fn offered_addon_versions(addon: &str, kubernetes: &str) -> Vec<AddonVersion> {
    if !EKS_VERSIONS.contains(&kubernetes) {
        return vec![];
    }
    let base = super::default_addon_version(addon).unwrap_or("v1.0.0-eksbuild.1");
    let minor: u32 = kubernetes
        .split_once('.')
        .and_then(|(_, m)| m.parse().ok())
        .unwrap_or(32);
    let (stem, build) = base.rsplit_once('.').unwrap_or((base, "1"));
    let build: u32 = build.parse().unwrap_or(1);
    let version = |b: u32| AddonVersion {
        version: format!("{stem}.{b}"),
        requires_iam_permissions: NEED_ROLES.contains(&addon),
    };
    let mut offered: Vec<AddonVersion> = (32..=minor.max(32))
        .rev()
        .map(|m| version(build + m - 32))
        .collect();
    offered.truncate(2);
    offered
}

impl Sandbox {
    /// `UpdateClusterVersion`.
    pub(super) async fn update_version(
        &self,
        name: &str,
        version: &str,
        token: &str,
    ) -> CloudResult<String> {
        let api = "eks:UpdateClusterVersion";
        let op = "UpdateClusterVersion";
        self.gate(api, true).await?;
        self.own_eks(name, api).await?;
        let Some(res) = self
            .by_name("eks-cluster", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(not_found("eks", op, "ResourceNotFoundException", name));
        };
        let upgrade = &res.data["upgrade"];
        if upgrade["token"] == token {
            return Ok(upgrade["id"].as_str().unwrap_or_default().to_string());
        }
        let current = self.active_cluster(name, op).await?.version;
        let invalid = |why: String| CloudError::new("eks", op, "InvalidParameterException", why);
        if version == current {
            return Err(invalid(format!(
                "The cluster is already at the desired configuration with version: {version}"
            )));
        }
        if next_minor(&current).as_deref() != Some(version) || !EKS_VERSIONS.contains(&version) {
            return Err(invalid(format!(
                "Unsupported Kubernetes minor version update from {current} to {version}"
            )));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let mut data = res.data.clone();
        data["upgrade"] = json!({"token": token, "id": id, "from": current, "to": version,
                                 "startedMs": now_ms()});
        data["version"] = json!(version);
        self.update(api, "eks-cluster", &res.id, &data).await?;
        Ok(id)
    }

    /// Takes one remaining fault of `api` (see `Faults::take_one`).
    pub(super) fn take_fault(&self, api: &str) -> bool {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_one(api)
    }

    /// Whether the cluster's version upgrade is still rolling (`UPDATING`).
    pub(super) fn upgrading(&self, res: &Res) -> bool {
        res.data["upgrade"]["startedMs"]
            .as_i64()
            .is_some_and(|t| self.simulated_secs(t, now_ms()) < d::EKS_UPGRADE)
    }

    /// The version the control plane runs: the one it left until an upgrade is done.
    pub(super) fn running_version(&self, res: &Res) -> String {
        let version = match self.upgrading(res) {
            true => &res.data["upgrade"]["from"],
            false => &res.data["version"],
        };
        version.as_str().unwrap_or("1.32").to_string()
    }

    /// The control plane's policy (the template's `EksOnOwnClusters`) allows deleting a
    /// cluster, granting access to it and installing on it only with the product's cluster
    /// tag: an untagged cluster is refused as IAM refuses it. A missing one is left to the call.
    pub(super) async fn own_eks(&self, cluster: &str, api: &str) -> CloudResult<()> {
        let tagged = self
            .by_name("eks-cluster", cluster)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .is_none_or(|r| r.data["tags"].get(CLUSTER_TAG).is_some());
        match tagged {
            true => Ok(()),
            false => Err(untagged(api, &eks_arn(cluster))),
        }
    }

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

/// IAM's refusal of an action the policy grants only on resources with the cluster tag.
pub(super) fn untagged(api: &str, arn: &str) -> CloudError {
    let (service, op) = api.split_once(':').unwrap_or((api, ""));
    CloudError::new(
        service,
        op,
        "AccessDeniedException",
        format!("User: arn:aws:sts::{ACCOUNT}:assumed-role/instantstart/sandbox is not authorized to perform: {api} on resource: {arn} because no identity-based policy allows the {api} action (the resource has no {CLUSTER_TAG} tag)"),
    )
}
