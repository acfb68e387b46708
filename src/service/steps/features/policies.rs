//! The IAM documents and add-on configuration of the managed features, each as AWS documents it:
//! the inference operator's roles and configuration, the autoscaling role, service trusts.

use crate::service::bucket::BucketPlace;
use crate::service::steps::features::AddonInputs;
use serde_json::{json, Value};

pub(super) fn autoscaling_role_policy(_place: &BucketPlace, cluster_arn: &str) -> Value {
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
pub(super) fn inference_policy(place: &BucketPlace, cluster_arn: &str) -> Value {
    // arn:aws:sagemaker:region:account:cluster/id → the same partition, region and account.
    let certificates = match cluster_arn.splitn(6, ':').collect::<Vec<_>>().as_slice() {
        [_, partition, _, region, account, _] => {
            format!("arn:{partition}:acm:{region}:{account}:certificate/*")
        }
        _ => "arn:aws:acm:*:*:certificate/*".to_string(),
    };
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

/// KEDA's role inside the inference operator: reads metrics (CloudWatch, Amazon Managed
/// Service for Prometheus) to scale endpoints; nothing else.
pub(super) fn inference_keda_policy(_place: &BucketPlace, _cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadMetrics", "Effect": "Allow",
         "Action": ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                    "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
         "Resource": "*"}]})
}

/// The load balancer controller's role inside the inference operator: the AWS Load Balancer
/// Controller's documented permissions, with writes limited to load balancers it tagged.
pub(super) fn inference_alb_policy(_place: &BucketPlace, _cluster_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ServiceLinkedRole", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": "*",
         "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}},
        {"Sid": "Describe", "Effect": "Allow",
         "Action": ["ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
                    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
                    "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:GetCoipPoolUsage",
                    "ec2:DescribeCoipPools", "ec2:GetSecurityGroupsForVpc", "ec2:DescribeIpamPools",
                    "elasticloadbalancing:Describe*", "acm:ListCertificates", "acm:DescribeCertificate",
                    "wafv2:GetWebACL", "wafv2:GetWebACLForResource", "shield:GetSubscriptionState"],
         "Resource": "*"},
        {"Sid": "SecurityGroups", "Effect": "Allow",
         "Action": ["ec2:CreateSecurityGroup", "ec2:CreateTags", "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"],
         "Resource": "*",
         "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}},
        {"Sid": "CreateLoadBalancers", "Effect": "Allow",
         "Action": ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
         "Resource": "*",
         "Condition": {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}},
        {"Sid": "ChangeOwnLoadBalancers", "Effect": "Allow",
         "Action": ["elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
                    "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule",
                    "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags",
                    "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
                    "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
                    "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
                    "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
                    "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets",
                    "elasticloadbalancing:ModifyListener", "elasticloadbalancing:ModifyRule"],
         "Resource": "*",
         "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}}]})
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
