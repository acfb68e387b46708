//! The `mlflow-setup` operation: the account's managed MLflow, made from one cluster.
//!
//! ```text
//! mlflow-role      the role SageMaker's MLflow App runs as: mlflow/ of the cluster's bucket only
//! mlflow-app       find the app by name, else CreateMlflowApp (artifact store s3://<bucket>/mlflow);
//!                  watched until Created
//! tracking-access  the training pods' identity on this cluster: an IRSA role that may call only
//!                  this app's tracking server, and the service account bound to it
//! ```
//!
//! An MLflow App rather than a tracking server: it is serverless (no instance size to pick, no
//! idle instance-hours), it is what SageMaker AI offers for new MLflow setups, and clients reach
//! it exactly as a tracking server (its ARN as the tracking URI, the `sagemaker-mlflow` plugin).

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::{cluster_tags, CreateMlflowApp, ObjectRef, MANAGED_BY};
use crate::ops::{Poll, Reconcile, Step, StepCx, StepError, StepResult};
use crate::service::shared::resources::Recorded;
use crate::service::steps::addons::{ensure_role, kube_target, IrsaRole};
use crate::service::steps::features::checkpoint_role_name;
use crate::service::storage::bucket::BucketPlace;

/// The account's MLflow App, by name (one per account and region).
pub const APP_NAME: &str = "instantstart";
/// The role the app uses for its artifact store.
pub const APP_ROLE: &str = "instantstart-mlflow";
/// Prefix of the cluster's bucket the app keeps artifacts under.
pub const ARTIFACT_PREFIX: &str = "mlflow";
/// The service account training pods run as to report to MLflow.
pub const TRACKING_SA: (&str, &str) = ("default", "instantstart-training");

pub fn tracking_role_name(cluster: &str) -> String {
    format!("{cluster}-mlflow-tracking")
}

/// The training service account in `namespace` (default, or a team's).
pub fn tracking_sa_ref(namespace: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ServiceAccount".into(),
        namespace: Some(namespace.into()),
        name: TRACKING_SA.1.into(),
    }
}

/// The training service account in `namespace`, bound to the tracking role.
pub fn tracking_sa(namespace: &str, role_arn: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": TRACKING_SA.1, "namespace": namespace,
                     "labels": { MANAGED_BY.0: MANAGED_BY.1 },
                     "annotations": {"eks.amazonaws.com/role-arn": role_arn}}})
}

/// The IAM actions of an MLflow App's REST API. An app authorizes every data-plane call with
/// `sagemaker:CallMlflowAppApi` (the plugin signs them as `sagemaker`); the granular
/// `sagemaker-mlflow:*` actions are what a tracking server checks, kept so the same role serves
/// either.
pub const TRACKING_ACTIONS: [&str; 2] = ["sagemaker:CallMlflowAppApi", "sagemaker-mlflow:*"];

/// What a pod needs to report to one app and nothing else: its REST API, and the artifacts the
/// MLflow client writes straight to the app's store (`log_artifact`, `log_model`: the client,
/// not the server, puts them under `mlflow/` of the cluster's place).
pub fn tracking_policy(app_arn: &str, place: &BucketPlace) -> Value {
    let artifacts = format!("{ARTIFACT_PREFIX}/");
    let [list, objects] = place.read_write_statements("Artifacts", &artifacts);
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "TrackToThisMlflowOnly", "Effect": "Allow", "Action": TRACKING_ACTIONS,
         "Resource": [app_arn]},
        list, objects]})
}

/// The app's artifact store: `mlflow/` of the cluster's place, nothing else.
pub fn app_role_policy(place: &BucketPlace) -> Value {
    let artifacts = format!("{ARTIFACT_PREFIX}/");
    // GetBucketLocation carries no `s3:prefix`: under the list statement's prefix condition a
    // shared-bucket place would deny it, so it has a statement of its own on the bucket.
    json!({"Version": "2012-10-17", "Statement": [
        place.list_statement("ArtifactsList", &["s3:ListBucket"], &artifacts),
        place.objects_statement("ArtifactsObjects",
            &["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"], &artifacts),
        {"Sid": "ArtifactsBucketLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"],
         "Resource": [place.bucket_arn()]}]})
}

pub struct MlflowRoleStep;

#[async_trait]
impl Reconcile for MlflowRoleStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "iam:AttachRolePolicy",
        ]
    }
    fn phase(&self) -> &'static str {
        "mlflow-role"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let place = crate::service::storage::bucket::recorded_place(cx)?;
        let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
        // The account's MLflow role serves every cluster: any cluster of the product may own it.
        let arn = ensure_role(
            cx,
            crate::service::steps::addons::RoleScope::Account,
            APP_ROLE,
            "mlflow-role",
            "instantstart-mlflow-artifacts",
            &app_role_policy(&place),
            || async { Ok(trust) },
        )
        .await?;
        Ok(json!({"roleArn": arn}))
    }
}

pub struct MlflowAppStep;

#[async_trait]
impl Step for MlflowAppStep {
    fn calls(&self) -> &'static [&'static str] {
        &["sagemaker:CreateMlflowApp"]
    }
    fn name(&self) -> &'static str {
        "mlflow-app"
    }
    /// Longer than the default: a managed MLflow App takes 20-30 minutes to create.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(45 * 60)
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        Ok(cx
            .cloud
            .mlflow
            .find_app(APP_NAME)
            .await?
            .map(|a| json!({"mlflowArn": a.arn, "artifactStore": a.artifact_store})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        // One app per account: an earlier setup (from any cluster) made it already.
        if let Some(found) = self.find(cx).await? {
            return Ok(found);
        }
        let place = crate::service::storage::bucket::recorded_place(cx)?;
        let Some(role) = super::ownership::find_role(cx, APP_ROLE, None)
            .await?
            .adopt()?
        else {
            return Err(StepError::fatal(
                "missing-prerequisite",
                "the MLflow role is missing",
            ));
        };
        let store = place.uri(ARTIFACT_PREFIX);
        let arn = cx
            .cloud
            .mlflow
            .create_app(&CreateMlflowApp {
                name: APP_NAME,
                artifact_store: &store,
                role_arn: &role.arn,
                tags: &cluster_tags(&cx.op.cluster, "mlflow"),
            })
            .await?;
        Ok(json!({"mlflowArn": arn, "artifactStore": store}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let Some(app) = cx.cloud.mlflow.find_app(APP_NAME).await? else {
            return Ok(Poll::Pending("the MLflow app is not listed yet".into()));
        };
        match app.status.as_str() {
            "Created" | "Updated" => Ok(Poll::Ready(out.clone())),
            s if s.ends_with("Failed") || s.starts_with("Delet") => Err(StepError::fatal(
                "mlflow-failed",
                format!("the MLflow app {} is {s}", app.arn),
            )),
            s => Ok(Poll::Pending(format!("MLflow app {s}"))),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub struct TrackingAccessStep;

#[async_trait]
impl Reconcile for TrackingAccessStep {
    fn calls(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:PutRolePolicy",
            "eks:CreatePodIdentityAssociation",
            "k8s:Apply",
        ]
    }
    fn phase(&self) -> &'static str {
        "tracking-access"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let Some(app) = cx.cloud.mlflow.find_app(APP_NAME).await? else {
            return Err(StepError::fatal(
                "missing-prerequisite",
                "the MLflow app is missing",
            ));
        };
        let place = crate::service::storage::bucket::recorded_place(cx)?;
        let policy = tracking_policy(&app.arn, &place);
        let role = IrsaRole {
            name: tracking_role_name(&cx.op.cluster),
            namespace: TRACKING_SA.0,
            service_account: TRACKING_SA.1,
            teams: true,
            tag_role: "mlflow-tracking-role",
            policy_name: "instantstart-mlflow-tracking",
        };
        let arn = role.ensure(cx, &policy).await?;
        // Jobs with managed tiered checkpointing run as its service account: it may report too.
        let checkpoints = checkpoint_role_name(&cx.op.cluster);
        if super::ownership::own_role(cx, &checkpoints)
            .await?
            .is_some()
        {
            crate::cloud::ensure_role_policy(
                cx.cloud.iam.as_ref(),
                &checkpoints,
                "instantstart-mlflow-tracking",
                &policy,
            )
            .await?;
        }
        // The teams' workloads run in their namespaces: the same identity in each (a team made
        // later gets its copy from the team-storage phase).
        let mut namespaces = vec![TRACKING_SA.0.to_string()];
        if let Ok(hyperpod) = cx.recorded().hyperpod_cluster_arn() {
            namespaces.extend(
                cx.cloud
                    .governance
                    .compute_quotas(&hyperpod)
                    .await?
                    .iter()
                    .map(|q| crate::cloud::team_namespace(&q.team)),
            );
        }
        let target = kube_target(cx)?;
        for ns in &namespaces {
            cx.cloud.kube.apply(&target, &tracking_sa(ns, &arn)).await?;
        }
        Ok(json!({"trackingRoleArn": arn,
                  "serviceAccount": format!("{}/{}", TRACKING_SA.0, TRACKING_SA.1),
                  "namespaces": namespaces}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_identity_reaches_only_what_it_needs() {
        let own = BucketPlace::whole("b1");
        let p = tracking_policy("arn:aws:sagemaker:us-west-2:1:mlflow-app/app-x", &own);
        assert_eq!(p["Statement"].as_array().unwrap().len(), 3);
        assert_eq!(
            p["Statement"][0]["Resource"],
            json!(["arn:aws:sagemaker:us-west-2:1:mlflow-app/app-x"])
        );
        assert_eq!(
            p["Statement"][2]["Resource"],
            json!(["arn:aws:s3:::b1/mlflow/*"])
        );
        let s = app_role_policy(&own);
        let text = s.to_string();
        assert!(!text.contains("\"*\""), "{text}");
        assert_eq!(
            s["Statement"][1]["Resource"],
            json!(["arn:aws:s3:::b1/mlflow/*"])
        );
        assert_eq!(
            s["Statement"][0]["Condition"]["StringLike"]["s3:prefix"],
            json!(["mlflow/*"])
        );
        let shared = BucketPlace::prefixed("b1", "demo/");
        let s = app_role_policy(&shared);
        assert_eq!(
            s["Statement"][1]["Resource"],
            json!(["arn:aws:s3:::b1/demo/mlflow/*"])
        );
        // Evaluated as IAM would: the app finds its bucket and lists only its own prefix.
        use crate::cloud::policy::{decide, Decision, Request};
        let location = Request::new("s3:GetBucketLocation", "arn:aws:s3:::b1");
        assert_eq!(decide(&s, &location), Decision::Allow);
        let list = |prefix: &str| {
            Request::new("s3:ListBucket", "arn:aws:s3:::b1").with("s3:prefix", prefix)
        };
        assert_eq!(decide(&s, &list("demo/mlflow/1/")), Decision::Allow);
        assert_eq!(decide(&s, &list("other/mlflow/")), Decision::ImplicitDeny);
        let elsewhere = Request::new("s3:GetBucketLocation", "arn:aws:s3:::b2");
        assert_eq!(decide(&s, &elsewhere), Decision::ImplicitDeny);
    }
}
