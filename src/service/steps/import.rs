//! The `import` operation: adopt an existing EKS cluster (and optionally its HyperPod cluster).
//! It records where the API server is, gives our principal an access entry if it has none, and
//! records which dependency components were already there — those are left alone by later
//! reconciliations unless the user asks InstantStart to manage them.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::deps::{self, ComponentState};
use crate::cloud::{EksStatus, KubeTarget};
use crate::ops::{Step, StepCx, StepError, StepResult};
use crate::service::shared::resources::Recorded;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportParams {
    pub hyperpod_cluster_name: Option<String>,
}

/// The one tag an imported cluster is given: the product's cluster tag, which its policy
/// requires before it deletes, changes or installs on a cluster. Only that tag: the cluster's
/// other tags (its Name among them) are its owner's.
fn ownership_tag(cx: &StepCx<'_>) -> crate::cloud::Tags {
    crate::cloud::Tags::from([(crate::cloud::CLUSTER_TAG.to_string(), cx.op.cluster.clone())])
}

pub struct ImportEksStep;

#[async_trait]
impl Step for ImportEksStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:TagResource"]
    }
    fn name(&self) -> &'static str {
        "eks-cluster"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let name = &cx.op.cluster;
        let Some(eks) = cx.cloud.eks.describe_cluster(name).await? else {
            return Err(StepError::fatal(
                "eks-not-found",
                format!("there is no EKS cluster named `{name}` in this region"),
            ));
        };
        if eks.status != EksStatus::Active {
            return Err(StepError::fatal(
                "eks-not-active",
                format!(
                    "EKS cluster `{name}` is {:?}; import it once it is ACTIVE",
                    eks.status
                ),
            ));
        }
        cx.cloud
            .eks
            .tag_cluster(&eks.arn, &ownership_tag(cx))
            .await?;
        let mut out = json!({
            "eksClusterArn": eks.arn,
            "eksEndpoint": eks.endpoint,
            "eksCertificateAuthority": eks.certificate_authority,
            "kubernetesVersion": eks.version,
            "vpcId": eks.vpc_id,
            "imported": true,
        });
        if let Some(issuer) = &eks.oidc_issuer {
            out["oidcIssuer"] = json!(issuer);
            if let Some(arn) = cx.cloud.iam.find_oidc_provider(issuer).await? {
                out["oidcProviderArn"] = json!(arn);
            }
        }
        Ok(out)
    }
}

pub struct ImportHyperPodStep;

#[async_trait]
impl Step for ImportHyperPodStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:AddTags"]
    }
    fn name(&self) -> &'static str {
        "hyperpod-cluster"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: ImportParams = cx.param()?;
        let Some(name) = p.hyperpod_cluster_name else {
            return Ok(json!({}));
        };
        let Some(hp) = cx.cloud.hyperpod.describe_cluster(&name).await? else {
            return Err(StepError::fatal(
                "hyperpod-not-found",
                format!("there is no HyperPod cluster named `{name}` in this region"),
            ));
        };
        let mut tags = ownership_tag(cx);
        tags.extend(super::hyperpod::operator_tag());
        cx.cloud.hyperpod.tag_cluster(&hp.arn, &tags).await?;
        Ok(json!({"hyperPodClusterName": hp.name, "hyperPodClusterArn": hp.arn}))
    }
}

pub struct AccessEntryStep;

#[async_trait]
impl Step for AccessEntryStep {
    fn calls(&self) -> &'static [&'static str] {
        &["eks:CreateAccessEntry", "eks:AssociateAccessPolicy"]
    }
    fn name(&self) -> &'static str {
        "access-entry"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let me =
            crate::service::shared::arn::principal_arn(&cx.cloud.iam.caller_identity().await?.arn);
        if cx.cloud.eks.has_access_entry(&cx.op.cluster, &me).await? {
            return Ok(json!({"accessPrincipal": me, "accessEntryCreated": false}));
        }
        cx.cloud
            .eks
            .create_access_entry(&cx.op.cluster, &me)
            .await?;
        let admin = crate::cloud::AccessPolicy {
            policy_arn: crate::service::shared::arn::cluster_admin_policy(&me),
            namespaces: None,
        };
        cx.cloud
            .eks
            .associate_access_policy(&cx.op.cluster, &me, &admin)
            .await?;
        Ok(json!({"accessPrincipal": me, "accessEntryCreated": true}))
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        self.act(cx).await.map(Some)
    }
}

pub struct DetectDependenciesStep;

#[async_trait]
impl Step for DetectDependenciesStep {
    fn name(&self) -> &'static str {
        "detect-dependencies"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let target = KubeTarget {
            cluster: cx.op.cluster.clone(),
            endpoint: cx.recorded().eks_endpoint()?,
            certificate_authority: cx.recorded().eks_certificate_authority()?,
        };
        let mut present = Vec::new();
        for c in deps::COMPONENTS {
            let s = deps::component_status(cx.cloud, &cx.op.cluster, &target, c).await?;
            if s.state != ComponentState::Pending {
                present.push(c.name);
            }
        }
        Ok(json!({ "preexistingComponents": present }))
    }
}
