//! Phases of the `dependencies` stage (EKS add-ons and in-cluster components, in dependency
//! order) and of the `storage` stage (the shared bucket as a Mountpoint for S3 volume).

use async_trait::async_trait;
use serde_json::{json, Value};

use super::net_tags;
use crate::cloud::{AddonStatus, CreateAddon, KubeTarget, ObjectRef};
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};

/// Where to reach the cluster's API server, from what the `cluster` stage recorded.
pub fn kube_target(cx: &StepCx<'_>) -> StepResult<KubeTarget> {
    Ok(KubeTarget {
        cluster: cx.op.cluster.clone(),
        endpoint: cx.resource("eksEndpoint")?,
        certificate_authority: cx.resource("eksCertificateAuthority")?,
    })
}

/// Applies manifests with server-side apply (idempotent, so no lookup is needed first).
pub struct ApplyStep {
    pub name: &'static str,
    pub manifests: fn(&StepCx<'_>) -> StepResult<Vec<Value>>,
}

#[async_trait]
impl Step for ApplyStep {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let target = kube_target(cx)?;
        let manifests = (self.manifests)(cx)?;
        let mut applied = Vec::new();
        for m in &manifests {
            cx.cloud.kube.apply(&target, m).await?;
            if let Some(r) = ObjectRef::of(m) {
                applied.push(format!("{}/{}", r.kind, r.name));
            }
        }
        Ok(json!({"applied": applied}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let target = kube_target(cx)?;
        for m in (self.manifests)(cx)? {
            let Some(r) = ObjectRef::of(&m) else { continue };
            if cx.cloud.kube.get(&target, &r).await?.is_none() {
                return Ok(Poll::Pending(format!("waiting for {}/{}", r.kind, r.name)));
            }
        }
        Ok(Poll::Ready(out.clone()))
    }
    fn records_resources(&self) -> bool {
        false
    }
}

pub fn namespaces(_: &StepCx<'_>) -> StepResult<Vec<Value>> {
    Ok(["aws-hyperpod", "kubeflow"]
        .iter()
        .map(|ns| {
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
            "labels": {"app.kubernetes.io/managed-by": "instantstart"}}})
        })
        .collect())
}

/// NVIDIA and EFA device plugins, kept off nothing: HyperPod nodes need both.
pub fn device_plugins(_: &StepCx<'_>) -> StepResult<Vec<Value>> {
    let plugin = |name: &str, image: &str, selector_label: &str| {
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system",
                         "labels": {"app.kubernetes.io/managed-by": "instantstart"}},
            "spec": {
                "selector": {"matchLabels": {"name": name}},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": {"name": name}},
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "tolerations": [{"operator": "Exists"}],
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [
                                {"key": selector_label, "operator": "Exists"}]}]}}},
                        "containers": [{
                            "name": name, "image": image,
                            "securityContext": {"allowPrivilegeEscalation": false,
                                                "capabilities": {"drop": ["ALL"]}},
                            "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]
                        }],
                        "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]
                    }
                }
            }
        })
    };
    Ok(vec![
        plugin(
            "nvidia-device-plugin",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            "nvidia.com/gpu.present",
        ),
        plugin(
            "aws-efa-k8s-device-plugin",
            "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.13",
            "vpc.amazonaws.com/efa.present",
        ),
    ])
}

/// One EKS add-on, created and watched to `ACTIVE`.
pub struct AddonStep {
    pub name: &'static str,
    pub configuration: Option<&'static str>,
    /// Recorded resource holding the IRSA role for the add-on's service account.
    pub role_resource: Option<&'static str>,
}

#[async_trait]
impl Step for AddonStep {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let found = cx
            .cloud
            .eks
            .describe_addon(&cx.op.cluster, self.name)
            .await?;
        Ok(found.map(|a| json!({"addonArn": a.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let role = self.role_resource.map(|k| cx.resource(k)).transpose()?;
        let req = CreateAddon {
            cluster: cx.op.cluster.clone(),
            name: self.name.to_string(),
            version: None,
            service_account_role_arn: role,
            configuration_values: self.configuration.map(str::to_string),
            resolve_conflicts: "OVERWRITE".into(),
        };
        let addon = cx.cloud.eks.create_addon(&req).await?;
        Ok(json!({"addonArn": addon.arn}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let Some(a) = cx
            .cloud
            .eks
            .describe_addon(&cx.op.cluster, self.name)
            .await?
        else {
            return Err(StepError::fatal(
                "addon-missing",
                format!("add-on {} disappeared", self.name),
            ));
        };
        match a.status {
            AddonStatus::Active => Ok(Poll::Ready(out.clone())),
            AddonStatus::Creating | AddonStatus::Updating => {
                Ok(Poll::Pending(format!("{} {:?}", self.name, a.status)))
            }
            other => Err(StepError::fatal(
                "addon-failed",
                format!("add-on {} is {other:?}", self.name),
            )),
        }
    }
    fn records_resources(&self) -> bool {
        false
    }
}

/// Service account the Mountpoint for S3 CSI driver runs as.
pub const S3_CSI_SERVICE_ACCOUNT: &str = "s3-csi-driver-sa";

pub fn s3_csi_role_name(cluster: &str) -> String {
    format!("{cluster}-s3-csi")
}

/// IRSA role of the S3 CSI driver: trusted only by that service account through the cluster's
/// OIDC provider (exact `sub`, never a wildcard), allowed only on the cluster's bucket.
pub struct S3CsiRoleStep;

impl S3CsiRoleStep {
    async fn ensure_policy(cx: &StepCx<'_>, name: &str) -> StepResult<()> {
        let account = cx.cloud.iam.caller_identity().await?.account;
        let bucket = super::hyperpod::bucket_name(&cx.op.cluster, &account);
        let doc = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [format!("arn:aws:s3:::{bucket}")]},
            {"Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
             "Resource": [format!("arn:aws:s3:::{bucket}/*")]}]});
        cx.cloud
            .iam
            .put_role_policy(name, "instantstart-shared-bucket", &doc)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Step for S3CsiRoleStep {
    fn name(&self) -> &'static str {
        "s3-csi-role"
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let name = s3_csi_role_name(&cx.op.cluster);
        let Some(role) = cx.cloud.iam.get_role(&name).await? else {
            return Ok(None);
        };
        Self::ensure_policy(cx, &name).await?;
        Ok(Some(json!({"s3CsiRoleArn": role.arn})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let name = s3_csi_role_name(&cx.op.cluster);
        let provider = cx.resource("oidcProviderArn")?;
        let issuer = cx.resource("oidcIssuer")?;
        let host = issuer.trim_start_matches("https://");
        let trust = json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Federated": provider},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                format!("{host}:sub"): format!("system:serviceaccount:kube-system:{S3_CSI_SERVICE_ACCOUNT}"),
                format!("{host}:aud"): "sts.amazonaws.com"}}}]});
        let role = cx
            .cloud
            .iam
            .create_role(&name, &trust, &net_tags(cx, "s3-csi-role"))
            .await?;
        Self::ensure_policy(cx, &name).await?;
        Ok(json!({"s3CsiRoleArn": role.arn}))
    }
}

/// The PersistentVolume and the `s3-claim` claim that mount the shared bucket at `/s3` in pods.
pub fn s3_volume(cx: &StepCx<'_>) -> StepResult<Vec<Value>> {
    let bucket = cx.resource("bucketName")?;
    let region = cx.cloud.network.region();
    let pv_name = format!("{}-s3", cx.op.cluster);
    Ok(vec![
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name, "labels": {"app.kubernetes.io/managed-by": "instantstart"}},
            "spec": {
                "capacity": {"storage": "1200Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": "default", "name": "s3-claim"},
                "mountOptions": ["allow-delete", "allow-other", "uid=1000", "gid=1000", format!("region {region}")],
                "csi": {"driver": "s3.csi.aws.com", "volumeHandle": format!("{bucket}-volume"),
                        "volumeAttributes": {"bucketName": bucket}}
            }
        }),
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "s3-claim", "namespace": "default",
                         "labels": {"app.kubernetes.io/managed-by": "instantstart"}},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "resources": {"requests": {"storage": "1200Gi"}}, "volumeName": pv_name}
        }),
    ])
}
