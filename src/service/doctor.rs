//! The first-contact check of a real account: IAM is asked, for the role the server runs as
//! (its permissions boundary included), about every call of the product's table
//! (`cloud::calls::CALLS`) on the resources and with the request context the product's own
//! calls carry; each one denied is named with the template statement that grants it. Then EKS
//! is asked whether it offers, in this region, every add-on the product installs for each
//! Kubernetes version the product offers; Service Quotas for the HyperPod cluster-usage quotas
//! the preflight reads; and S3 whether the deployment's shared bucket is this account's.

use serde::Serialize;
use utoipa::ToSchema;

use crate::cloud::calls::{Scope, CALLS};
use crate::cloud::{BucketOwner, ClusterUsageQuota};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::shared::arn::{arn_scope, principal_arn};

/// A cluster the product would make, named in the probes (nothing is made: IAM only evaluates).
pub const PROBE_CLUSTER: &str = "instantstart-doctor";

/// One call IAM would refuse the server's role.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Denied {
    /// `service:Action`.
    pub action: String,
    /// The resource asked about (`*` for an action without resource-level permissions).
    pub resource: String,
    /// The request context asked with (`key=value`), as the product's own call carries it.
    pub context: Vec<String>,
    /// `implicitDeny` (nothing grants it, or the boundary cuts it) or `explicitDeny`.
    pub decision: String,
    /// The statement of the CloudFormation template's `InstanceRole` that grants it.
    pub statement: String,
    /// What to do about it.
    pub fix: String,
}

/// An add-on the product installs that EKS does not offer for a Kubernetes version the product
/// offers, in this region.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MissingAddon {
    pub addon: String,
    pub kubernetes_version: String,
    pub fix: String,
}

/// The deployment's shared bucket, as S3 answers the expected-owner check.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedBucket {
    pub bucket: String,
    /// `ours`, `missing` or `foreign` (another account holds the name).
    pub owner: String,
    /// What to do about it; absent when the bucket is this account's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What the doctor found.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Doctor {
    /// The role asked about (the server's, its session stripped).
    pub principal: String,
    pub region: String,
    /// Calls asked about.
    pub checked: usize,
    /// Those IAM would refuse; empty when the role may make every call.
    pub denied: Vec<Denied>,
    /// The Kubernetes versions a cluster may be made with (`kubernetesVersion`) for which EKS
    /// offers, in this region, every add-on the product installs (`DescribeAddonVersions`).
    pub kubernetes_versions: Vec<String>,
    /// The add-ons EKS does not offer for one of those versions here.
    pub missing_addons: Vec<MissingAddon>,
    /// The account's HyperPod cluster-usage quotas above zero (Service Quotas), the ones the
    /// preflight checks a cluster's instance count against.
    pub quotas: Vec<ClusterUsageQuota>,
    /// What to do when no instance type has a cluster-usage quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_fix: Option<String>,
    /// The deployment's shared bucket (`INSTANTSTART_SHARED_BUCKET`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_bucket: Option<SharedBucket>,
    /// `ok`; `denied` (a call would be refused, or the shared bucket is missing or another
    /// account's); `limited` (an add-on is not offered for a Kubernetes version, or no instance
    /// type has a cluster-usage quota).
    pub status: String,
}

/// For each Kubernetes version the product offers, the installed add-ons EKS does not offer.
/// The questions are independent: a few are asked at once (the adapter rides out throttling).
async fn addon_offers(engine: &Engine) -> ApiResult<(Vec<String>, Vec<MissingAddon>)> {
    let eks = &engine.cloud().eks;
    let versions = crate::service::cluster::validate::KUBERNETES_VERSIONS;
    let pairs: Vec<(&'static str, &'static str)> = versions
        .iter()
        .flat_map(|v| {
            crate::service::cluster::versions::managed_addons()
                .into_iter()
                .map(move |a| (*v, a))
        })
        .collect();
    let mut offered = Vec::with_capacity(pairs.len());
    for chunk in pairs.chunks(8) {
        let asks = chunk.iter().map(|&(v, a)| {
            let eks = eks.clone();
            async move {
                eks.addon_versions(a, v)
                    .await
                    .map(|found| !found.is_empty())
            }
        });
        offered.extend(futures::future::try_join_all(asks).await?);
    }
    let missing: Vec<MissingAddon> = pairs
        .iter()
        .zip(&offered)
        .filter(|(_, offered)| !**offered)
        .map(|((version, addon), _)| MissingAddon {
            addon: (*addon).into(),
            kubernetes_version: (*version).into(),
            fix: format!("EKS does not offer {addon} for Kubernetes {version} in this region: make clusters with another kubernetesVersion, or leave the feature that needs it off"),
        })
        .collect();
    let complete = versions
        .iter()
        .filter(|v| !missing.iter().any(|m| m.kubernetes_version == **v))
        .map(|v| (*v).to_string())
        .collect();
    Ok((complete, missing))
}

/// The HyperPod cluster-usage quotas above zero, and what to do when there is none.
async fn cluster_quotas(engine: &Engine) -> ApiResult<(Vec<ClusterUsageQuota>, Option<String>)> {
    let quotas = engine.cloud().quotas.hyperpod_cluster_quotas().await?;
    let usable: Vec<ClusterUsageQuota> = quotas.into_iter().filter(|q| q.limit > 0).collect();
    let fix = usable.is_empty().then(|| {
        "no instance type has a HyperPod cluster-usage quota above 0: request one in Service Quotas (Amazon SageMaker › '<instance type> for cluster usage') before creating a cluster".to_string()
    });
    Ok((usable, fix))
}

/// Whether the configured shared bucket is this account's.
async fn shared_bucket(engine: &Engine) -> ApiResult<Option<SharedBucket>> {
    let cloud = engine.cloud();
    let Some(bucket) = cloud.shared_bucket.as_deref() else {
        return Ok(None);
    };
    let (owner, fix) = match cloud.objects.bucket_owner(bucket).await? {
        BucketOwner::Ours => ("ours", None),
        BucketOwner::Missing => ("missing", Some(format!(
            "the shared bucket `{bucket}` does not exist: the CloudFormation stack creates it (SharedBucket); create it in this account, or start the server without INSTANTSTART_SHARED_BUCKET"
        ))),
        BucketOwner::Foreign => ("foreign", Some(format!(
            "the shared bucket `{bucket}` belongs to another AWS account: the server never writes there; name a bucket of this account in INSTANTSTART_SHARED_BUCKET"
        ))),
    };
    Ok(Some(SharedBucket {
        bucket: bucket.to_string(),
        owner: owner.into(),
        fix,
    }))
}

/// Asks IAM about every call of the product for the role the server runs as.
pub async fn run(engine: &Engine) -> ApiResult<Doctor> {
    let cloud = engine.cloud();
    let me = cloud.iam.caller_identity().await?;
    let principal = principal_arn(&me.arn);
    let (partition, _, _) = arn_scope(&principal);
    let region = cloud.network.region();
    let shared = match cloud.shared_bucket.as_deref() {
        Some(b) => b.to_string(),
        None => format!("sagemaker-instantstart-shared-{}-{region}", me.account),
    };
    let scope = Scope {
        partition: partition.to_string(),
        region: region.clone(),
        account: me.account.clone(),
        cluster: PROBE_CLUSTER.into(),
        boundary: cloud.iam.permissions_boundary().unwrap_or_default(),
        shared_bucket_arn: format!("arn:{partition}:s3:::{shared}"),
        principal: principal.clone(),
    };
    let probes: Vec<_> = CALLS.iter().map(|c| scope.probe(c)).collect();
    let decisions = cloud.iam.simulate(&principal, &probes).await?;
    let denied: Vec<Denied> = CALLS
        .iter()
        .zip(probes)
        .zip(decisions)
        .filter(|(_, d)| d != "allowed")
        .map(|((call, p), decision)| Denied {
            fix: format!(
                "the role lacks {} on {}: the CloudFormation template's InstanceRole statement `{}` grants it — update the stack to the product's template (or add that statement to {principal}); if the statement is there, a permissions boundary or an organization policy cuts it",
                p.action, p.resource, call.statement
            ),
            action: p.action,
            resource: p.resource,
            context: p.context.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            decision,
            statement: call.statement.into(),
        })
        .collect();
    // Independent questions to three services: asked at once.
    let ((kubernetes_versions, missing_addons), (quotas, quota_fix), shared_bucket) = tokio::try_join!(
        addon_offers(engine),
        cluster_quotas(engine),
        shared_bucket(engine)
    )?;
    let bucket_ok = shared_bucket.as_ref().is_none_or(|b| b.fix.is_none());
    let status = if !denied.is_empty() || !bucket_ok {
        "denied"
    } else if !missing_addons.is_empty() || quota_fix.is_some() {
        "limited"
    } else {
        "ok"
    };
    Ok(Doctor {
        status: status.into(),
        principal,
        region,
        checked: CALLS.len(),
        denied,
        kubernetes_versions,
        missing_addons,
        quotas,
        quota_fix,
        shared_bucket,
    })
}
