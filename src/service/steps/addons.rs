//! What the dependency and storage phases share: where the cluster's API server is, and the
//! least-privilege IRSA role of the Mountpoint for S3 CSI driver.

use std::collections::BTreeSet;

use serde_json::json;

use super::net_tags;
use crate::cloud::{KubeTarget, MANAGED_BY};
use crate::ops::{StepCx, StepResult};
use crate::service::bucket::BucketPlace;
use crate::service::resources::Recorded;

/// Where to reach the cluster's API server, from what the `cluster` stage recorded.
pub fn kube_target(cx: &StepCx<'_>) -> StepResult<KubeTarget> {
    Ok(KubeTarget {
        cluster: cx.op.cluster.clone(),
        endpoint: cx.recorded().eks_endpoint()?,
        certificate_authority: cx.recorded().eks_certificate_authority()?,
    })
}

/// Service account the Mountpoint for S3 CSI driver runs as.
pub const S3_CSI_SERVICE_ACCOUNT: &str = "s3-csi-driver-sa";

pub fn s3_csi_role_name(cluster: &str) -> String {
    format!("{cluster}-s3-csi")
}

/// IRSA role of the S3 CSI driver: trusted only by that service account through the cluster's
/// OIDC provider (exact `sub`, never a wildcard), allowed only on the cluster's place for objects (its bucket, or its prefix of the shared one).
pub struct S3CsiRoleStep;

/// Name of the S3 CSI role's inline policy.
const S3_CSI_POLICY: &str = "instantstart-shared-bucket";

impl S3CsiRoleStep {
    /// The cluster's place for objects, and every other bucket one of its S3 claims mounts: the
    /// driver mounts with this role, so a bucket missing here fails the pod's mount.
    pub fn policy(place: &BucketPlace, claimed: &BTreeSet<String>) -> serde_json::Value {
        let mut statements: Vec<serde_json::Value> =
            place.read_write_statements("SharedBucket", "").into();
        for (i, bucket) in claimed.iter().enumerate() {
            let other = BucketPlace {
                bucket: bucket.clone(),
                prefix: String::new(),
            };
            statements.extend(other.read_write_statements(&format!("Claim{i}"), ""));
        }
        json!({"Version": "2012-10-17", "Statement": statements})
    }

    /// The buckets our S3 claims mount, other than the cluster's own place's (volumes being
    /// deleted no longer count).
    async fn claimed_buckets(cx: &StepCx<'_>, place: &BucketPlace) -> StepResult<BTreeSet<String>> {
        let target = kube_target(cx)?;
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let volumes = cx
            .cloud
            .kube
            .list(&target, "v1", "PersistentVolume", None, Some(&selector))
            .await?;
        Ok(volumes
            .iter()
            .filter(|v| v.pointer("/metadata/deletionTimestamp").is_none())
            .filter_map(super::storage::claim_view)
            .filter_map(|c| c.bucket)
            .filter(|b| *b != place.bucket)
            .collect())
    }

    /// The role's ARN, creating the role when it does not exist. The bucket policy is (re)put
    /// either way: this runs only while the add-on is being installed.
    pub async fn ensure(cx: &StepCx<'_>) -> StepResult<String> {
        let place = crate::service::bucket::place_of(cx).await?;
        let claimed = Self::claimed_buckets(cx, &place).await?;
        let role = IrsaRole {
            name: s3_csi_role_name(&cx.op.cluster),
            namespace: "kube-system",
            service_account: S3_CSI_SERVICE_ACCOUNT,
            tag_role: "s3-csi-role",
            policy_name: S3_CSI_POLICY,
        };
        role.ensure(cx, &Self::policy(&place, &claimed)).await
    }

    /// Lets the driver reach the buckets the cluster's claims mount now, and `adding` (a claim
    /// about to be made): the policy is put only when that set changed. A driver whose role
    /// this control plane did not make (an imported cluster's) is left alone, and said so.
    pub async fn grant_claims(
        cx: &StepCx<'_>,
        adding: Option<&str>,
    ) -> StepResult<serde_json::Value> {
        let name = s3_csi_role_name(&cx.op.cluster);
        if cx.cloud.iam.get_role(&name).await?.is_none() {
            return Ok(json!({"changed": false,
                "note": format!("no role {name}: the S3 CSI driver's own role must allow the claimed bucket")}));
        }
        let place = crate::service::bucket::place_of(cx).await?;
        let mut claimed = Self::claimed_buckets(cx, &place).await?;
        claimed.extend(adding.filter(|b| *b != place.bucket).map(str::to_string));
        let changed = crate::cloud::ensure_role_policy(
            cx.cloud.iam.as_ref(),
            &name,
            S3_CSI_POLICY,
            &Self::policy(&place, &claimed),
        )
        .await?;
        Ok(json!({"changed": changed, "buckets": claimed}))
    }
}

/// An IAM role for one Kubernetes service account (IRSA): trusted only by exactly
/// `system:serviceaccount:<namespace>:<service_account>` through the cluster's OIDC provider,
/// with one inline policy.
pub struct IrsaRole<'a> {
    pub name: String,
    pub namespace: &'a str,
    pub service_account: &'a str,
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
            &self.name,
            self.tag_role,
            self.policy_name,
            policy,
            || irsa_trust(cx, self.namespace, self.service_account),
        )
        .await
    }
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

/// A role with one inline policy: created with the trust `trust` builds (only when the role is
/// missing), its policy put either way. Returns the role's ARN.
pub async fn ensure_role<F, Fut>(
    cx: &StepCx<'_>,
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
    let arn = match cx.cloud.iam.get_role(name).await? {
        Some(role) => role.arn,
        None => {
            let trust = trust().await?;
            cx.cloud
                .iam
                .create_role(name, &trust, &net_tags(cx, tag_role))
                .await?
                .arn
        }
    };
    crate::cloud::ensure_role_policy(cx.cloud.iam.as_ref(), name, policy_name, policy).await?;
    Ok(arn)
}
