//! The first-contact check of a real account: IAM is asked, for the role the server runs as
//! (its permissions boundary included), about every call of the product's table
//! (`cloud::calls::CALLS`) on the resources and with the request context the product's own
//! calls carry; each one denied is named with the template statement that grants it. Then EKS
//! is asked whether it offers, in this region, every add-on the product installs for each
//! Kubernetes version the product offers.

use serde::Serialize;
use utoipa::ToSchema;

use crate::cloud::calls::{Scope, CALLS};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::arn::{arn_scope, principal_arn};

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
    /// `ok`, `denied` (a call would be refused) or `limited` (an add-on is not offered for a
    /// Kubernetes version).
    pub status: String,
}

/// Every EKS add-on the product installs: the dependencies' and the features'.
pub(crate) fn installed_addons() -> Vec<&'static str> {
    use crate::service::steps::deps::{Install, COMPONENTS};
    use crate::service::steps::features::FEATURES;
    let mut all: Vec<&'static str> = COMPONENTS
        .iter()
        .filter(|c| matches!(c.install, Install::Addon { .. }))
        .map(|c| c.name)
        .chain(FEATURES.iter().map(|f| f.addon).filter(|a| !a.is_empty()))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// For each Kubernetes version the product offers, the installed add-ons EKS does not offer.
/// The questions are independent: a few are asked at once (the adapter rides out throttling).
async fn addon_offers(engine: &Engine) -> ApiResult<(Vec<String>, Vec<MissingAddon>)> {
    let eks = &engine.cloud().eks;
    let versions = crate::service::validate::KUBERNETES_VERSIONS;
    let pairs: Vec<(&'static str, &'static str)> = versions
        .iter()
        .flat_map(|v| installed_addons().into_iter().map(move |a| (*v, a)))
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
    let (kubernetes_versions, missing_addons) = addon_offers(engine).await?;
    let status = match (denied.is_empty(), missing_addons.is_empty()) {
        (false, _) => "denied",
        (true, false) => "limited",
        (true, true) => "ok",
    };
    Ok(Doctor {
        status: status.into(),
        principal,
        region,
        checked: CALLS.len(),
        denied,
        kubernetes_versions,
        missing_addons,
    })
}
