//! The add-on family (training operator, inference operator, Container Insights, FSx): its own
//! roles, the add-on with its configuration, and the pod identity binding, as one chain.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::{AddonPodIdentity, AddonStatus, CreateAddon};
use crate::ops::{Poll, Reconcile, StepCx, StepError, StepResult};
use crate::service::shared::arn::managed_policy;
use crate::service::steps::addons::irsa_trust;
use crate::service::steps::features::{
    feature_of, service_trust, AddonInputs, Feature, FeatureParams, OwnRole, PolicyInputs, Trust,
};
use crate::service::steps::hyperpod::execution_role_name;

/// Enables or disables the add-on, watched to ACTIVE or gone.
pub struct FeatureAddonStep;

#[async_trait]
impl Reconcile for FeatureAddonStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "eks:CreateAddon",
            "eks:UpdateAddon",
            "eks:DeleteAddon",
            "iam:UpdateAssumeRolePolicy",
        ]
    }
    fn phase(&self) -> &'static str {
        "addon"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let existing = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
        match (p.enable, existing) {
            (true, Some(a)) => Ok(json!({"addonArn": a.arn, "changed": false})),
            (true, None) => {
                let configuration_values = match f.configuration {
                    Some(build) => Some(build(&addon_inputs(cx, f).await?).to_string()),
                    None => None,
                };
                // The association is made with the add-on, as AWS's own templates make it
                // (`aws/sagemaker-hyperpod-cluster-setup` `eks/cloudformation/
                // observability-template.yaml`, `PodIdentityAssociations` on the
                // `AWS::EKS::Addon`): EKS gives a pod its role's credentials only if the
                // association exists when the pod is admitted.
                let pod_identity_associations = match f.pod_identity {
                    Some((_, sa)) => vec![AddonPodIdentity {
                        service_account: sa.into(),
                        role_arn: identity_role(cx, f).await?,
                    }],
                    None => Vec::new(),
                };
                let a = cx
                    .cloud
                    .eks
                    .create_addon(&CreateAddon {
                        cluster: cx.op.cluster.clone(),
                        name: f.addon.into(),
                        version: None,
                        service_account_role_arn: None,
                        configuration_values,
                        resolve_conflicts: "OVERWRITE".into(),
                        pod_identity_associations,
                    })
                    .await?;
                Ok(json!({"addonArn": a.arn, "changed": true}))
            }
            (false, Some(_)) => {
                cx.cloud.eks.delete_addon(&cx.op.cluster, f.addon).await?;
                Ok(json!({"changed": true}))
            }
            (false, None) => Ok(json!({"changed": false})),
        }
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let a = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
        match (p.enable, a.map(|a| a.status)) {
            (true, Some(AddonStatus::Active)) | (false, None) => Ok(Poll::Ready(out.clone())),
            (true, Some(AddonStatus::Creating | AddonStatus::Updating))
            | (false, Some(AddonStatus::Deleting)) => Ok(Poll::Pending(format!(
                "add-on {}",
                if p.enable { "creating" } else { "deleting" }
            ))),
            (true, None) => Err(StepError::fatal(
                "addon-missing",
                format!("add-on {} disappeared while it was being created", f.addon),
            )),
            (_, Some(other)) => Err(StepError::fatal(
                "addon-failed",
                format!("add-on {} is {other:?}", f.addon),
            )),
        }
    }
}

/// What the feature's add-on configuration is built from: its own roles (which the role phase
/// made first), the cluster's bucket and the HyperPod cluster.
pub(super) async fn addon_inputs(cx: &StepCx<'_>, f: &Feature) -> StepResult<AddonInputs> {
    let mut roles = std::collections::BTreeMap::new();
    for own in f.own_roles {
        let name = own.name(&cx.op.cluster);
        let Some(r) = crate::service::steps::ownership::own_role(cx, &name).await? else {
            return Err(StepError::fatal(
                "missing-prerequisite",
                format!("the role {name} is missing"),
            ));
        };
        roles.insert(own.suffix, r.arn);
    }
    let hyperpod_cluster_arn = crate::service::steps::hyperpod::described(cx).await?.arn;
    Ok(AddonInputs {
        roles,
        place: crate::service::storage::bucket::place_of(cx).await?,
        amg_workspace: super::observability::amg_workspace_of(cx, &hyperpod_cluster_arn).await?,
        hyperpod_cluster_arn,
        workspace: super::observability::workspace_of(cx).await?,
    })
}

/// The role a feature's service account is bound to (its first own role, or the cluster's
/// execution role), trusted by EKS pod identity.
async fn identity_role(cx: &StepCx<'_>, f: &Feature) -> StepResult<String> {
    let role = match f.own_roles.first() {
        Some(own) => own.name(&cx.op.cluster),
        None => execution_role_name(&cx.op.cluster),
    };
    let Some(r) = crate::service::steps::ownership::own_role(cx, &role).await? else {
        return Err(StepError::fatal(
            "missing-prerequisite",
            format!("the role {role} does not exist: create the HyperPod cluster (or enable the feature) first"),
        ));
    };
    let trust = json!({"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]});
    cx.cloud.iam.add_trust_statement(&role, &trust).await?;
    Ok(r.arn)
}

/// Checks the feature's service account is bound to its role (the add-on phase made the
/// association with the add-on), or unbinds it; then watches the add-on get credentials
/// through it (a node role without `eks-auth:AssumeRoleForPodIdentity` leaves it degraded with
/// AccessDenied). An add-on found without its association (made before this phase bound at
/// creation) gets it through `UpdateAddon`, which EKS applies with the add-on's own rollout.
pub struct FeatureIdentityStep;

#[async_trait]
impl Reconcile for FeatureIdentityStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "eks:CreatePodIdentityAssociation",
            "eks:DeletePodIdentityAssociation",
            "eks:UpdateAddon",
            "iam:UpdateAssumeRolePolicy",
        ]
    }
    fn phase(&self) -> &'static str {
        "pod-identity"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        let Some((ns, sa)) = f.pod_identity else {
            return Ok(json!({"changed": false}));
        };
        let existing = cx
            .cloud
            .eks
            .find_pod_identity(&cx.op.cluster, ns, sa)
            .await?;
        match (p.enable, existing) {
            (true, Some(id)) => Ok(json!({"associationId": id, "changed": false})),
            (true, None) => {
                let role_arn = identity_role(cx, f).await?;
                cx.cloud
                    .eks
                    .update_addon(&CreateAddon {
                        cluster: cx.op.cluster.clone(),
                        name: f.addon.into(),
                        version: None,
                        service_account_role_arn: None,
                        configuration_values: None,
                        resolve_conflicts: "OVERWRITE".into(),
                        pod_identity_associations: vec![AddonPodIdentity {
                            service_account: sa.into(),
                            role_arn,
                        }],
                    })
                    .await?;
                let id = cx
                    .cloud
                    .eks
                    .find_pod_identity(&cx.op.cluster, ns, sa)
                    .await?;
                Ok(json!({"associationId": id, "changed": true}))
            }
            (false, Some(id)) => {
                cx.cloud
                    .eks
                    .delete_pod_identity(&cx.op.cluster, &id)
                    .await?;
                Ok(json!({"changed": true}))
            }
            (false, None) => Ok(json!({"changed": false})),
        }
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        if !p.enable || f.pod_identity.is_none() {
            return Ok(Poll::Ready(out.clone()));
        }
        match cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await? {
            Some(a) if a.status == AddonStatus::Active => Ok(Poll::Ready(out.clone())),
            Some(a)
                if a.health
                    .as_deref()
                    .is_some_and(|h| h.contains("AccessDenied")) =>
            {
                Err(StepError::fatal(
                    "pod-identity-denied",
                    format!(
                        "{} cannot get credentials through pod identity: {}",
                        f.addon,
                        a.health.unwrap_or_default()
                    ),
                ))
            }
            Some(a) => Ok(Poll::Pending(format!(
                "add-on {:?}{}",
                a.status,
                a.health.map(|h| format!(": {h}")).unwrap_or_default()
            ))),
            None => Err(StepError::fatal(
                "addon-missing",
                format!("add-on {} disappeared", f.addon),
            )),
        }
    }
}

/// A feature's own roles (the training operator's, the CloudWatch agent's, the inference
/// operator's three, the autoscaling role): each created with its documented trust when
/// missing, its inline policy put and its AWS-managed policies attached either way; or deleted.
pub struct OwnRoleStep;

impl OwnRoleStep {
    async fn trust(cx: &StepCx<'_>, trust: &Trust) -> StepResult<Value> {
        Ok(match trust {
            Trust::PodIdentity => service_trust(
                "pods.eks.amazonaws.com",
                &["sts:AssumeRole", "sts:TagSession"],
            ),
            Trust::Service(principal) => service_trust(principal, &["sts:AssumeRole"]),
            Trust::Irsa {
                namespace,
                service_account,
                sagemaker,
            } => {
                let mut doc = irsa_trust(cx, namespace, service_account).await?;
                if *sagemaker {
                    if let Some(list) = doc["Statement"].as_array_mut() {
                        list.push(json!({"Effect": "Allow",
                            "Principal": {"Service": "sagemaker.amazonaws.com"},
                            "Action": "sts:AssumeRole"}));
                    }
                }
                doc
            }
        })
    }

    async fn ensure(
        cx: &StepCx<'_>,
        own: &OwnRole,
        place: &crate::service::storage::bucket::BucketPlace,
        cluster_arn: &str,
    ) -> StepResult<String> {
        let name = own.name(&cx.op.cluster);
        let workspace_arn = super::observability::workspace_of(cx).await?.map(|w| w.arn);
        let arn = match crate::service::steps::ownership::own_role(cx, &name).await? {
            Some(role) => role.arn,
            None => {
                let trust = Self::trust(cx, &own.trust).await?;
                let tags = crate::service::steps::net_tags(cx, own.suffix);
                crate::service::steps::ownership::create_role(
                    cx,
                    &name,
                    &trust,
                    &tags,
                    Some(&cx.op.cluster),
                )
                .await?
                .arn
            }
        };
        if let Some(policy) = own.policy {
            crate::cloud::ensure_role_policy(
                cx.cloud.iam.as_ref(),
                &name,
                "instantstart-feature",
                &policy(&PolicyInputs {
                    place,
                    cluster_arn,
                    workspace_arn: workspace_arn.as_deref(),
                }),
            )
            .await?;
        }
        let partition = cluster_arn.split(':').nth(1).unwrap_or("aws");
        for managed in own.managed {
            cx.cloud
                .iam
                .attach_role_policy(&name, &managed_policy(partition, managed))
                .await?;
        }
        Ok(arn)
    }
}

#[async_trait]
impl Reconcile for OwnRoleStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "iam:AttachRolePolicy",
            "iam:DeleteRole",
        ]
    }
    fn phase(&self) -> &'static str {
        "role"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let f = feature_of(cx)?;
        let p: FeatureParams = cx.param()?;
        if !p.enable {
            let mut removed = 0;
            for own in f.own_roles {
                let name = own.name(&cx.op.cluster);
                if crate::service::steps::ownership::delete_own_role(cx, &name).await? {
                    removed += 1;
                }
            }
            return Ok(json!({"changed": removed > 0}));
        }
        let cluster_arn = crate::service::steps::hyperpod::described(cx).await?.arn;
        let place = crate::service::storage::bucket::place_of(cx).await?;
        let mut arns = serde_json::Map::new();
        for own in f.own_roles {
            let arn = Self::ensure(cx, own, &place, &cluster_arn).await?;
            arns.insert(own.suffix.to_string(), json!(arn));
        }
        Ok(json!({"roleArns": arns}))
    }
}
