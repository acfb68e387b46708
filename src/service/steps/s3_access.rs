//! What the Mountpoint for S3 CSI driver's IRSA role may reach: the cluster's place for objects,
//! and every other bucket the cluster mounts (its S3 claims', its endpoints' models), kept
//! exactly in step as claims and endpoints come and go.

use std::collections::BTreeSet;

use serde_json::json;

use super::addons::{kube_target, IrsaRole};
use super::storage::{claim_view, StorageParams, VolumeSource};
use super::workloads::ApplyParams;
use crate::cloud::ListQuery;
use crate::cloud::MANAGED_BY;
use crate::ops::{Reconcile, StepCx, StepResult};
use crate::service::shared::resources::Recorded;
use crate::service::storage::bucket::BucketPlace;
use crate::service::OpKind;

/// Service account the Mountpoint for S3 CSI driver runs as.
pub const S3_CSI_SERVICE_ACCOUNT: &str = "s3-csi-driver-sa";

pub fn s3_csi_role_name(cluster: &str) -> String {
    format!("{cluster}-s3-csi")
}

/// IRSA role of the S3 CSI driver: trusted only by that service account through the cluster's
/// OIDC provider (exact `sub`, never a wildcard), allowed only on the cluster's place for objects
/// (its bucket, or its prefix of the shared one) and on the other buckets the cluster mounts.
pub struct S3CsiRoleStep;

/// Name of the S3 CSI role's inline policy.
const S3_CSI_POLICY: &str = "instantstart-shared-bucket";

impl S3CsiRoleStep {
    /// The cluster's place for objects, and every other bucket it mounts (`claimed`): the driver
    /// mounts with this role, so a bucket missing here fails the pod's mount.
    pub fn policy(place: &BucketPlace, claimed: &BTreeSet<String>) -> serde_json::Value {
        let mut statements: Vec<serde_json::Value> =
            place.read_write_statements("SharedBucket", "").into();
        for (i, bucket) in claimed.iter().enumerate() {
            let mut other = BucketPlace::whole(bucket.clone());
            other.partition = place.partition;
            statements.extend(other.read_write_statements(&format!("Claim{i}"), ""));
        }
        json!({"Version": "2012-10-17", "Statement": statements})
    }

    /// The buckets the driver mounts for the cluster, other than its own place's: those of our
    /// S3 claims, and those managed endpoints load their models from (the inference operator
    /// mounts S3 models through this driver). Objects being deleted no longer count.
    async fn claimed_buckets(cx: &StepCx<'_>, place: &BucketPlace) -> StepResult<BTreeSet<String>> {
        let target = kube_target(cx)?;
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let live = |o: &&serde_json::Value| o.pointer("/metadata/deletionTimestamp").is_none();
        let volumes = cx
            .cloud
            .kube
            .list(
                &target,
                &ListQuery::of("v1", "PersistentVolume").labels(&selector),
            )
            .await?;
        let mut buckets: BTreeSet<String> = volumes
            .iter()
            .filter(live)
            .filter_map(claim_view)
            .filter_map(|c| c.bucket)
            .collect();
        use crate::service::endpoints::{API_VERSION, KIND};
        match cx
            .cloud
            .kube
            .list(&target, &ListQuery::of(API_VERSION, KIND).labels(&selector))
            .await
        {
            Ok(endpoints) => buckets.extend(endpoints.iter().filter(live).filter_map(model_bucket)),
            // Without the inference operator's CRD there are no endpoints.
            Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => {}
            Err(e) => return Err(e.into()),
        }
        buckets.remove(&place.bucket);
        // What the cluster says is written by whoever may write there (a team member may make
        // a labelled endpoint or volume in their namespace): a bucket widens the role only if
        // the product itself was asked to mount it (its own operations' records), and only a
        // well-formed name the boundary of the roles reaches, never a pattern (`*`).
        let requested = requested_buckets(cx).await?;
        buckets.retain(|b| {
            let ok = requested.contains(b)
                && crate::service::cluster::validate::bucket_name("bucketName", b).is_ok()
                && crate::service::storage::bucket::reachable(cx.cloud, b);
            if !ok {
                tracing::warn!(bucket = %b.chars().take(80).collect::<String>(),
                    "a bucket named in the cluster is not one the S3 CSI role may be given: left out");
            }
            ok
        });
        Ok(buckets)
    }

    /// The role's ARN, creating the role when it does not exist. The bucket policy is (re)put
    /// either way: this runs only while the add-on is being installed.
    pub async fn ensure(cx: &StepCx<'_>) -> StepResult<String> {
        let place = crate::service::storage::bucket::place_of(cx).await?;
        let claimed = Self::claimed_buckets(cx, &place).await?;
        let role = IrsaRole {
            name: s3_csi_role_name(&cx.op.cluster),
            namespace: "kube-system",
            service_account: S3_CSI_SERVICE_ACCOUNT,
            teams: false,
            tag_role: "s3-csi-role",
            policy_name: S3_CSI_POLICY,
        };
        role.ensure(cx, &Self::policy(&place, &claimed)).await
    }

    /// Lets the driver reach the buckets the cluster mounts now, and `adding` (a claim or an
    /// endpoint's model about to be mounted): the policy is put only when that set changed. A driver whose role
    /// this control plane did not make (an imported cluster's) is left alone, and said so.
    pub async fn grant_claims(
        cx: &StepCx<'_>,
        adding: Option<&str>,
    ) -> StepResult<serde_json::Value> {
        let name = s3_csi_role_name(&cx.op.cluster);
        let found = super::ownership::find_role(cx, &name, Some(&cx.op.cluster)).await?;
        if !matches!(found, super::ownership::Found::Ours(_)) {
            return Ok(json!({"changed": false,
                "note": format!("no role {name}: the S3 CSI driver's own role must allow the claimed bucket")}));
        }
        let place = crate::service::storage::bucket::place_of(cx).await?;
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

/// The S3 bucket a managed endpoint's manifest loads its model from, if any.
pub fn model_bucket(manifest: &serde_json::Value) -> Option<String> {
    manifest
        .pointer("/spec/modelSourceConfig/s3Storage/bucketName")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
}

/// Gives the S3 CSI driver's role exactly the buckets the cluster mounts: before a claim on
/// another bucket is made or an endpoint loads a model from one (that bucket added), and after a
/// claim or an endpoint is removed (recounted).
pub struct BucketAccessStep;

/// The operation kinds that mount a bucket through the S3 CSI driver.
const MOUNTING: [OpKind; 3] = [
    OpKind::Storage,
    OpKind::EndpointDeploy,
    OpKind::EndpointUpdate,
];

/// The bucket an operation mounts: a storage claim's, or an endpoint's model's.
fn mounted_by(op: &crate::store::Operation) -> Option<String> {
    match op.kind.parse::<OpKind>().ok()? {
        OpKind::Storage => match serde_json::from_value::<StorageParams>(op.params.clone())
            .ok()?
            .source
        {
            VolumeSource::S3 { bucket, .. } => bucket,
            VolumeSource::Fsx { .. } => None,
        },
        OpKind::EndpointDeploy | OpKind::EndpointUpdate => {
            serde_json::from_value::<ApplyParams>(op.params.clone())
                .ok()?
                .manifests
                .iter()
                .find_map(model_bucket)
        }
        _ => None,
    }
}

/// Every bucket the product was asked to mount on this cluster (its operations' parameters,
/// validated at the API's edge when they were accepted).
async fn requested_buckets(cx: &StepCx<'_>) -> StepResult<BTreeSet<String>> {
    let kinds: Vec<&str> = MOUNTING.iter().map(|k| k.as_str()).collect();
    let ops = cx
        .engine
        .store()
        .operations_of_kinds(&cx.op.cluster, &kinds)
        .await?;
    Ok(ops.iter().filter_map(mounted_by).collect())
}

impl BucketAccessStep {
    /// The bucket this operation is about to mount.
    fn adding(cx: &StepCx<'_>) -> Option<String> {
        mounted_by(cx.op)
    }
}

#[async_trait::async_trait]
impl Reconcile for BucketAccessStep {
    fn calls(&self) -> &'static [&'static str] {
        &["iam:PutRolePolicy", "eks:UpdateAddon"]
    }
    fn phase(&self) -> &'static str {
        "bucket-access"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<serde_json::Value> {
        let adding = Self::adding(cx);
        // A model or claim in the cluster's own bucket adds nothing the role lacks: no reads.
        if let (Some(bucket), Some(place)) = (&adding, BucketPlace::recorded(&cx.recorded())) {
            if *bucket == place.bucket {
                return Ok(json!({"changed": false}));
            }
        }
        S3CsiRoleStep::grant_claims(cx, adding.as_deref()).await
    }
}
