//! The first-contact check of a real account: IAM is asked, for the role the server runs as
//! (its permissions boundary included), about every call of the product's table
//! (`cloud::calls::CALLS`) on the resources and with the request context the product's own
//! calls carry; each one denied is named with the template statement that grants it.

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
    /// `ok` or `denied`.
    pub status: String,
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
    Ok(Doctor {
        status: if denied.is_empty() { "ok" } else { "denied" }.into(),
        principal,
        region,
        checked: CALLS.len(),
        denied,
    })
}
