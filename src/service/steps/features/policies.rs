//! The IAM documents and add-on configuration of the managed features, each as AWS documents it:
//! the inference operator's roles and configuration, the autoscaling role, service trusts.

use crate::service::steps::features::{AddonInputs, PolicyInputs};
use serde_json::{json, Value};

pub(super) fn autoscaling_role_policy(i: &PolicyInputs<'_>) -> Value {
    let cluster_arn = i.cluster_arn;
    autoscaling_policy(cluster_arn)
}

/// The inference operator's add-on configuration, field by field as AWS documents it for
/// `amazon-sagemaker-hyperpod-inference`: its execution role, the bucket for its TLS
/// certificates, the HyperPod cluster, and the roles of its load balancer controller and KEDA.
pub fn inference_configuration(i: &AddonInputs) -> Value {
    let role = |s: &str| i.roles.get(s).cloned().unwrap_or_default();
    json!({
        "executionRoleArn": role(INFERENCE_EXEC),
        "tlsCertificateS3Bucket": i.place.bucket,
        "hyperpodClusterArn": i.hyperpod_cluster_arn,
        "alb": {"serviceAccount": {"create": true, "roleArn": role(INFERENCE_ALB)}},
        "keda": {"auth": {"aws": {"irsa": {"roleArn": role(INFERENCE_KEDA)}}}}
    })
}

pub use crate::service::steps::deps::INFERENCE_OPERATOR_ADDON;

/// Suffixes of the inference operator's roles.
pub const INFERENCE_EXEC: &str = "inference";
pub const INFERENCE_KEDA: &str = "inference-keda";
pub const INFERENCE_ALB: &str = "inference-alb";
/// Where the inference operator writes its TLS certificates in the cluster's place for objects
/// (each endpoint's under `<TLS_PREFIX><endpoint>`).
pub const TLS_PREFIX: &str = "inference-tls/";

/// The inference operator's execution role, next to AWS's `AmazonSageMakerHyperPodInferenceAccess`:
/// reads models from the cluster's bucket and keeps its TLS certificates under one prefix of it,
/// reads this HyperPod cluster. Models are never written.
///
/// Since operator 3.0 (the EKS add-on) it also tags what it makes: its certificate objects and
/// its ACM certificates, in this cluster's account and region only.
pub(super) fn inference_policy(i: &PolicyInputs<'_>) -> Value {
    let (place, cluster_arn) = (i.place, i.cluster_arn);
    let (partition, region, account) = arn_scope(cluster_arn);
    let certificates = format!("arn:{partition}:acm:{region}:{account}:certificate/*");
    json!({"Version": "2012-10-17", "Statement": [
        place.list_statement("ModelsList", &["s3:ListBucket"], ""),
        place.objects_statement("ModelsRead", &["s3:GetObject"], ""),
        place.objects_statement("TlsCertificates",
            &["s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"], TLS_PREFIX),
        {"Sid": "TagOwnCertificates", "Effect": "Allow", "Action": ["acm:AddTagsToCertificate"],
         "Resource": [certificates]},
        {"Sid": "ThisCluster", "Effect": "Allow",
         "Action": ["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"],
         "Resource": [cluster_arn]}]})
}

/// What the EBS CSI driver's controller needs on HyperPod beyond `AmazonEBSCSIDriverPolicy`
/// (SageMaker Developer Guide, "Using the Amazon EBS CSI driver on SageMaker HyperPod EKS
/// clusters"): HyperPod nodes are not EC2 instances of the account, so volumes are attached and
/// detached through SageMaker (`AttachClusterNodeVolume`, `DetachClusterNodeVolume`) on this
/// cluster, and the driver reads the EKS cluster to find it.
pub(super) fn ebs_csi_policy(i: &PolicyInputs<'_>) -> Value {
    let (partition, region, account) = arn_scope(i.cluster_arn);
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "HyperPodNodeVolumes", "Effect": "Allow",
         "Action": ["sagemaker:AttachClusterNodeVolume", "sagemaker:DetachClusterNodeVolume"],
         "Resource": [i.cluster_arn]},
        {"Sid": "ReadTheEksCluster", "Effect": "Allow", "Action": ["eks:DescribeCluster"],
         "Resource": [format!("arn:{partition}:eks:{region}:{account}:cluster/*")]}]})
}

/// KEDA's role inside the inference operator: reads metrics (CloudWatch, Amazon Managed
/// Service for Prometheus) to scale endpoints; nothing else.
pub(super) fn inference_keda_policy(i: &PolicyInputs<'_>) -> Value {
    let cluster_arn = i.cluster_arn;
    let (partition, region, account) = arn_scope(cluster_arn);
    json!({"Version": "2012-10-17", "Statement": [
        // CloudWatch's metric reads have no resource type: IAM grants them on "*" only.
        {"Sid": "ReadCloudWatchMetrics", "Effect": "Allow",
         "Action": ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics"],
         "Resource": "*"},
        {"Sid": "QueryPrometheusWorkspaces", "Effect": "Allow",
         "Action": ["aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
         "Resource": [format!("arn:{partition}:aps:{region}:{account}:workspace/*")]}]})
}

pub use crate::service::shared::arn::arn_scope;

/// The AWS Load Balancer Controller's published policy (`docs/install/iam_policy.json`,
/// vendored with its provenance in `vendored/README.md`), byte for byte.
pub const LBC_POLICY: &str = include_str!("vendored/aws-load-balancer-controller-iam-policy.json");

/// The load balancer controller's role inside the inference operator: the controller's
/// published policy, statement by statement, scoped where it allows — every ARN it names to the
/// cluster's partition, region and account (it writes `arn:aws:…:*:*:`). Conditions are kept as
/// published: the controller tags what it creates (`elbv2.k8s.aws/cluster`) and the policy's
/// `CreateAction` conditions are what let it tag on create.
pub fn inference_alb_policy(i: &PolicyInputs<'_>) -> Value {
    let cluster_arn = i.cluster_arn;
    let (partition, region, account) = arn_scope(cluster_arn);
    let mut doc: Value = serde_json::from_str(LBC_POLICY).unwrap_or_else(|_| json!({}));
    fn scope(v: &mut Value, partition: &str, region: &str, account: &str) {
        match v {
            Value::String(s) if s.starts_with("arn:aws:") => {
                let parts: Vec<&str> = s.splitn(6, ':').collect();
                if let [_, _, service, r, a, rest] = parts[..] {
                    let r = if r == "*" { region } else { r };
                    let a = if a == "*" { account } else { a };
                    *s = format!("arn:{partition}:{service}:{r}:{a}:{rest}");
                }
            }
            Value::Array(items) => items
                .iter_mut()
                .for_each(|i| scope(i, partition, region, account)),
            _ => {}
        }
    }
    if let Some(statements) = doc["Statement"].as_array_mut() {
        for s in statements {
            if let Some(r) = s.get_mut("Resource") {
                scope(r, partition, region, account);
            }
        }
    }
    doc
}

/// The autoscaling role's trust: HyperPod alone.
pub fn autoscaling_trust() -> Value {
    service_trust("hyperpod.sagemaker.amazonaws.com", &["sts:AssumeRole"])
}

/// A trust policy for exactly one AWS service principal.
pub fn service_trust(service: &str, actions: &[&str]) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]})
}

/// The autoscaling role's permissions, for one cluster ARN.
pub fn autoscaling_policy(cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{
        "Sid": "ScaleThisClusterOnly", "Effect": "Allow",
        "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
        "Resource": [cluster_arn]}]})
}
