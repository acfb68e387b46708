//! The `storage` stage: one static PersistentVolume + PersistentVolumeClaim per claim, backed by
//! an S3 bucket (Mountpoint for S3 CSI driver; by default the cluster's shared bucket as
//! `s3-claim`, mounted by our workloads at `/s3`) or an existing FSx for Lustre file system.
//! `storage-delete` removes a claim and its volume (the data stays in the bucket/file system).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::addons::kube_target;
use crate::cloud::{json_contains, ObjectRef, MANAGED_BY};
use crate::ops::{Reconcile, Step, StepCx, StepError, StepResult};
use crate::service::storage::bucket::BucketPlace;

/// Default claim name of the shared bucket.
pub const SHARED_CLAIM: &str = "s3-claim";
/// Label on our PersistentVolumes naming the claim they serve (`<namespace>.<claim>`).
pub const CLAIM_LABEL: &str = "instantstart.io/claim";

/// Mountpoint's mount option for mounting only the keys under a prefix.
const MOUNT_PREFIX_OPTION: &str = "prefix ";

/// What backs a claim.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VolumeSource {
    /// An S3 bucket. `bucket` absent: the cluster's shared bucket.
    #[serde(rename_all = "camelCase")]
    S3 {
        bucket: Option<String>,
        region: Option<String>,
    },
    /// An existing FSx for Lustre file system.
    #[serde(rename_all = "camelCase")]
    Fsx {
        file_system_id: String,
        dns_name: String,
        mount_name: String,
        capacity_gib: u32,
    },
}

/// Parameters of a `storage` operation (validated at the edge).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageParams {
    #[serde(default = "shared_claim")]
    pub claim_name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default = "shared_source")]
    pub source: VolumeSource,
}

fn shared_claim() -> String {
    SHARED_CLAIM.into()
}
fn default_namespace() -> String {
    "default".into()
}
fn shared_source() -> VolumeSource {
    VolumeSource::S3 {
        bucket: None,
        region: None,
    }
}

impl StorageParams {
    /// Whether the claim is on the cluster's shared bucket (which the stage creates if needed).
    pub fn uses_shared_bucket(&self) -> bool {
        matches!(self.source, VolumeSource::S3 { bucket: None, .. })
    }
}

pub fn pv_name(namespace: &str, claim: &str) -> String {
    format!("instantstart-{namespace}-{claim}")
}

/// The PersistentVolume and its claim, bound to each other statically (no storage class).
/// An S3 claim on `place` mounts only its prefix (Mountpoint's `prefix` option), so a cluster
/// in the shared bucket sees its own keys at `/s3`, never another cluster's.
pub fn volume_manifests(
    p: &StorageParams,
    place: Option<&BucketPlace>,
    region: &str,
) -> Vec<Value> {
    let pv = pv_name(&p.namespace, &p.claim_name);
    let labels = json!({ MANAGED_BY.0: MANAGED_BY.1, CLAIM_LABEL: format!("{}.{}", p.namespace, p.claim_name) });
    let (capacity, source) = match &p.source {
        VolumeSource::S3 { region: r, .. } => {
            let bucket = place.map(|b| b.bucket.as_str()).unwrap_or_default();
            let region = r.as_deref().unwrap_or(region);
            // Mountpoint refuses to replace an existing object without `allow-overwrite`
            // (a trainer saving `latest`, a second epoch's checkpoint under the same name); it
            // still cannot rename, so recipes write final names, never write-then-rename.
            let mut options = vec![
                json!("allow-delete"),
                json!("allow-overwrite"),
                json!("allow-other"),
                json!("uid=1000"),
                json!("gid=1000"),
                json!(format!("region {region}")),
            ];
            if let Some(prefix) = place.map(|b| b.prefix.as_str()).filter(|p| !p.is_empty()) {
                options.push(json!(format!("{MOUNT_PREFIX_OPTION}{prefix}")));
            }
            (
                "1200Gi".to_string(),
                json!({
                    "mountOptions": options,
                    "csi": {"driver": "s3.csi.aws.com", "volumeHandle": format!("s3-{bucket}-{}", p.claim_name),
                            "volumeAttributes": {"bucketName": bucket}}
                }),
            )
        }
        VolumeSource::Fsx {
            file_system_id,
            dns_name,
            mount_name,
            capacity_gib,
        } => (
            format!("{capacity_gib}Gi"),
            json!({
                "mountOptions": ["flock"],
                "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": file_system_id,
                        "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}}
            }),
        ),
    };
    let mut spec = json!({
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "claimRef": {"namespace": p.namespace, "name": p.claim_name},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), source) {
        spec.extend(extra);
    }
    vec![
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": pv, "labels": labels}, "spec": spec}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": p.claim_name, "namespace": p.namespace, "labels": labels},
               "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                        "resources": {"requests": {"storage": capacity}}, "volumeName": pv}}),
    ]
}

/// The copy in `namespace` of one of our volumes and its claim: the same bucket or file system
/// under the same claim name, so `/s3` means the same in every namespace that has it. An S3
/// volume's handle gains the namespace (Mountpoint's driver wants one handle per volume); an FSx
/// volume keeps the file system id, as AWS's per-namespace FSx volumes do.
pub fn namespace_copy(pv: &Value, namespace: &str) -> Option<[Value; 2]> {
    let claim = pv.pointer("/spec/claimRef/name")?.as_str()?;
    let capacity = pv.pointer("/spec/capacity/storage")?.clone();
    let mut spec = pv.get("spec")?.clone();
    spec["claimRef"] = json!({"namespace": namespace, "name": claim});
    if spec.pointer("/csi/driver") == Some(&json!("s3.csi.aws.com")) {
        let handle = spec.pointer("/csi/volumeHandle")?.as_str()?.to_string();
        spec["csi"]["volumeHandle"] = json!(format!("{handle}-{namespace}"));
    }
    let name = pv_name(namespace, claim);
    let labels = json!({ MANAGED_BY.0: MANAGED_BY.1, CLAIM_LABEL: format!("{namespace}.{claim}") });
    Some([
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": name, "labels": labels}, "spec": spec}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": claim, "namespace": namespace, "labels": labels},
               "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                        "resources": {"requests": {"storage": capacity}}, "volumeName": name}}),
    ])
}

/// Applies the volume and claim, each only if it differs from what is there. A claim of the
/// same name that InstantStart did not create is never overwritten.
pub struct VolumeStep;

impl VolumeStep {
    fn manifests(cx: &StepCx<'_>) -> StepResult<Vec<Value>> {
        let p: StorageParams = cx.param()?;
        let place = match &p.source {
            VolumeSource::S3 {
                bucket: Some(b), ..
            } => Some(BucketPlace::whole(b.clone())),
            VolumeSource::S3 { bucket: None, .. } => {
                Some(crate::service::storage::bucket::recorded_place(cx)?)
            }
            VolumeSource::Fsx { .. } => None,
        };
        Ok(volume_manifests(
            &p,
            place.as_ref(),
            &cx.cloud.network.region(),
        ))
    }
}

#[async_trait]
impl Reconcile for VolumeStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Apply"]
    }
    fn phase(&self) -> &'static str {
        "volume"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let target = kube_target(cx)?;
        let mut applied = Vec::new();
        for m in Self::manifests(cx)? {
            let Some(r) = ObjectRef::of(&m) else { continue };
            match cx.cloud.kube.get(&target, &r).await? {
                Some(actual) if json_contains(&actual, &m) => continue,
                Some(actual)
                    if actual.pointer("/metadata/labels/app.kubernetes.io~1managed-by")
                        != Some(&json!(MANAGED_BY.1)) =>
                {
                    return Err(StepError::fatal(
                        "claim-exists",
                        format!(
                            "{} {} already exists and was not created by InstantStart; choose another claim name",
                            r.kind, r.name
                        ),
                    ));
                }
                _ => {}
            }
            cx.cloud.kube.apply(&target, &m).await?;
            applied.push(format!("{}/{}", r.kind, r.name));
        }
        Ok(json!({"applied": applied, "changed": !applied.is_empty()}))
    }
}

/// Parameters of `storage-delete`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageDeleteParams {
    pub claim_name: String,
    pub namespace: String,
}

impl StorageDeleteParams {
    fn claim_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: Some(self.namespace.clone()),
            name: self.claim_name.clone(),
        }
    }
}

/// Deletes the claim, then its volume (reclaim policy `Retain`: the data is kept).
pub struct DeleteVolumeStep;

#[async_trait]
impl Step for DeleteVolumeStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Delete"]
    }
    fn name(&self) -> &'static str {
        "delete-volume"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: StorageDeleteParams = cx.param()?;
        let target = kube_target(cx)?;
        let claim = p.claim_ref();
        let volume = ObjectRef {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            namespace: None,
            name: pv_name(&p.namespace, &p.claim_name),
        };
        cx.cloud.kube.delete(&target, &claim).await?;
        cx.cloud.kube.delete(&target, &volume).await?;
        Ok(
            json!({"deleted": [format!("PersistentVolumeClaim/{}", p.claim_name), format!("PersistentVolume/{}", volume.name)]}),
        )
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<crate::ops::Poll> {
        let p: StorageDeleteParams = cx.param()?;
        let target = kube_target(cx)?;
        let claim = p.claim_ref();
        Ok(match cx.cloud.kube.get(&target, &claim).await? {
            // A pod still using the claim holds it (kubernetes.io/pvc-protection).
            Some(_) => crate::ops::Poll::Pending(format!(
                "claim {} is still in use by a pod; it goes when the pod does",
                p.claim_name
            )),
            None => crate::ops::Poll::Ready(out.clone()),
        })
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// One claim as `GET /api/clusters/{name}/storage` lists it (read from our PersistentVolumes).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    pub claim_name: String,
    pub namespace: String,
    pub volume_name: String,
    /// `s3` or `fsx`.
    pub kind: String,
    pub bucket: Option<String>,
    /// The prefix of `bucket` the claim mounts (a cluster's in the shared bucket); keys under
    /// `/s3` are relative to it.
    pub prefix: Option<String>,
    pub file_system_id: Option<String>,
    pub capacity: Option<String>,
    /// The volume's phase (`Available`, `Bound`, `Released`).
    pub phase: Option<String>,
}

pub fn claim_view(pv: &Value) -> Option<ClaimView> {
    let s = |p: &str| pv.pointer(p).and_then(Value::as_str).map(str::to_string);
    let driver = s("/spec/csi/driver")?;
    Some(ClaimView {
        claim_name: s("/spec/claimRef/name")?,
        namespace: s("/spec/claimRef/namespace").unwrap_or_else(default_namespace),
        volume_name: s("/metadata/name")?,
        kind: if driver == "fsx.csi.aws.com" {
            "fsx"
        } else {
            "s3"
        }
        .into(),
        bucket: s("/spec/csi/volumeAttributes/bucketName"),
        prefix: pv
            .pointer("/spec/mountOptions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|o| o.strip_prefix(MOUNT_PREFIX_OPTION))
            .map(str::to_string),
        file_system_id: (driver == "fsx.csi.aws.com")
            .then(|| s("/spec/csi/volumeHandle"))
            .flatten(),
        capacity: s("/spec/capacity/storage"),
        phase: s("/status/phase"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_params_are_the_shared_bucket_as_s3_claim() {
        let p: StorageParams = serde_json::from_value(json!({})).unwrap();
        assert!(p.uses_shared_bucket());
        let own = BucketPlace::whole("b-1");
        let m = volume_manifests(&p, Some(&own), "us-west-2");
        assert_eq!(m[1]["metadata"]["name"], "s3-claim");
        assert_eq!(claim_view(&m[0]).unwrap().prefix, None);
        let options = m[0]["spec"]["mountOptions"].as_array().unwrap();
        for o in ["allow-delete", "allow-overwrite"] {
            assert!(options.contains(&json!(o)), "{o}: {options:?}");
        }
        // In the shared bucket the claim mounts the cluster's prefix only.
        let shared = BucketPlace::prefixed("shared", "demo/");
        let m2 = volume_manifests(&p, Some(&shared), "us-west-2");
        assert!(m2[0]["spec"]["mountOptions"]
            .as_array()
            .unwrap()
            .contains(&json!("prefix demo/")));
        assert_eq!(claim_view(&m2[0]).unwrap().prefix.as_deref(), Some("demo/"));
        assert_eq!(m[0]["spec"]["csi"]["driver"], "s3.csi.aws.com");
        assert_eq!(m[0]["spec"]["csi"]["volumeAttributes"]["bucketName"], "b-1");
        assert_eq!(m[1]["spec"]["volumeName"], m[0]["metadata"]["name"]);
        let view = claim_view(&m[0]).unwrap();
        assert_eq!(
            (view.claim_name.as_str(), view.kind.as_str()),
            ("s3-claim", "s3")
        );
    }

    #[test]
    fn fsx_volume_names_the_file_system() {
        let p: StorageParams = serde_json::from_value(json!({"claimName": "fsx", "source": {
            "kind": "fsx", "fileSystemId": "fs-0123456789abcdef0", "dnsName": "fs-0123.fsx.us-west-2.amazonaws.com",
            "mountName": "abcdefgh", "capacityGib": 1200}})).unwrap();
        let m = volume_manifests(&p, None, "us-west-2");
        assert_eq!(m[0]["spec"]["csi"]["driver"], "fsx.csi.aws.com");
        assert_eq!(
            m[0]["spec"]["csi"]["volumeAttributes"]["mountname"],
            "abcdefgh"
        );
        assert_eq!(
            claim_view(&m[0]).unwrap().file_system_id.as_deref(),
            Some("fs-0123456789abcdef0")
        );
    }
}
