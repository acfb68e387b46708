//! The table of what each role's workload calls and what it must never do, for one place of
//! the cluster's objects: from the upstream published policies and the SDK calls each makes.

use instantstart::cloud::policy::Request;
use instantstart::service::storage::bucket::BucketPlace;

use super::{AMP, APP, CLAIMED, EKS, HYPERPOD};

/// One row of a role's table: a call, and whether the role must be able to make it.
pub struct Need {
    pub role: &'static str,
    pub call: Request,
    pub allow: bool,
    pub why: &'static str,
}

fn allow(role: &'static str, call: Request, why: &'static str) -> Need {
    Need {
        role,
        call,
        allow: true,
        why,
    }
}

fn deny(role: &'static str, call: Request, why: &'static str) -> Need {
    Need {
        role,
        call,
        allow: false,
        why,
    }
}

/// A request as IAM sees it, made by a principal of this account: an S3 one on a bucket of
/// this account carries its account (`s3:ResourceAccount`), which the boundary requires.
pub fn req(action: &str, resource: &str) -> Request {
    let r = Request::new(action, resource).in_account(super::ACCOUNT);
    match action.starts_with("s3:") && resource.starts_with("arn:aws:s3:::") {
        true => r
            .with("s3:ResourceAccount", super::ACCOUNT)
            .with("aws:ResourceAccount", super::ACCOUNT),
        false => r,
    }
}

/// What each role's workload calls, and what it must not, for one place.
pub fn needs(place: &BucketPlace) -> Vec<Need> {
    let bucket = format!("arn:aws:s3:::{}", place.bucket);
    let obj = |rest: &str| format!("arn:aws:s3:::{}/{}{rest}", place.bucket, place.prefix);
    let list = |rest: &str| {
        req("s3:ListBucket", &bucket).with("s3:prefix", &format!("{}{rest}", place.prefix))
    };
    // Another cluster's objects: its own bucket, or its prefix of the shared bucket.
    let foreign = if place.prefix.is_empty() {
        "arn:aws:s3:::sagemaker-instantstart-other-123456789012/data/x".to_string()
    } else {
        format!("arn:aws:s3:::{}/other/data/x", place.bucket)
    };
    let foreign_list = if place.prefix.is_empty() {
        req(
            "s3:ListBucket",
            "arn:aws:s3:::sagemaker-instantstart-other-123456789012",
        )
    } else {
        req("s3:ListBucket", &bucket).with("s3:prefix", "other/")
    };
    let eni = "arn:aws:ec2:us-west-2:123456789012:network-interface/eni-1";
    let other_app = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-2";
    let other_cluster = "arn:aws:sagemaker:us-west-2:123456789012:cluster/zzz999";
    let mut rows = vec![
        // The EKS control plane (AmazonEKSClusterPolicy).
        deny(
            "demo-eks-cluster",
            req("ec2:CreateNetworkInterface", eni),
            "EKS makes its cross-account ENIs with its service-linked role, not the cluster role \
             (AmazonEKSClusterPolicy v10 names no CreateNetworkInterface)",
        ),
        allow("demo-eks-cluster", req("ec2:DescribeSubnets", "*"), "finds the cluster's subnets"),
        allow(
            "demo-eks-cluster",
            req(
                "elasticloadbalancing:CreateLoadBalancer",
                "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/net/a/1",
            ),
            "Service type LoadBalancer (in-tree)",
        ),
        allow(
            "demo-eks-cluster",
            req("iam:CreateServiceLinkedRole", "*")
                .with("iam:AWSServiceName", "elasticloadbalancing.amazonaws.com"),
            "the ELB service-linked role",
        ),
        deny("demo-eks-cluster", req("s3:GetObject", &obj("data/x")), "EKS reads no data"),
        // The HyperPod nodes.
        allow("demo-hyperpod-exec", list("data/"), "lifecycle scripts list the place"),
        allow("demo-hyperpod-exec", req("s3:GetObject", &obj("lifecycle/on_create.sh")), "lifecycle scripts"),
        allow("demo-hyperpod-exec", req("s3:PutObject", &obj("data/x")), "nodes write the place"),
        allow("demo-hyperpod-exec", req("ecr:GetAuthorizationToken", "*"), "system images"),
        allow(
            "demo-hyperpod-exec",
            req("ecr:BatchGetImage", "arn:aws:ecr:us-west-2:602401143452:repository/amazon-k8s-cni"),
            "the VPC CNI image",
        ),
        allow("demo-hyperpod-exec", req("ec2:AssignPrivateIpAddresses", eni), "the VPC CNI"),
        allow("demo-hyperpod-exec", req("ec2:DescribeInstances", "*"), "the VPC CNI"),
        allow("demo-hyperpod-exec", req("eks-auth:AssumeRoleForPodIdentity", EKS), "the pod identity agent"),
        allow(
            "demo-hyperpod-exec",
            req(
                "logs:PutLogEvents",
                "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Clusters/demo/abc123:log-stream:i-1",
            ),
            "lifecycle logs",
        ),
        allow("demo-hyperpod-exec", req("ssmmessages:OpenDataChannel", "*"), "SSM sessions to nodes"),
        deny("demo-hyperpod-exec", req("s3:PutObject", &foreign), "another cluster's objects"),
        deny(
            "demo-hyperpod-exec",
            req("eks-auth:AssumeRoleForPodIdentity", "arn:aws:eks:us-west-2:123456789012:cluster/other"),
            "pod identity on another cluster",
        ),
        deny("demo-hyperpod-exec", req("iam:PassRole", "arn:aws:iam::123456789012:role/x"), "no IAM"),
        // Mountpoint for S3 (its documented policy: list, read, write, delete, multipart).
        allow("demo-s3-csi", list(""), "mounts the place"),
        allow("demo-s3-csi", req("s3:GetObject", &obj("data/x")), "reads"),
        allow("demo-s3-csi", req("s3:PutObject", &obj("output/x")), "writes"),
        allow("demo-s3-csi", req("s3:DeleteObject", &obj("output/x")), "deletes"),
        allow("demo-s3-csi", req("s3:AbortMultipartUpload", &obj("output/x")), "large writes"),
        allow(
            "demo-s3-csi",
            req("s3:GetObject", &format!("arn:aws:s3:::{CLAIMED}/train/x")),
            "an S3 claim's bucket",
        ),
        deny("demo-s3-csi", req("s3:GetObject", &foreign), "another cluster's objects"),
        deny("demo-s3-csi", foreign_list.clone(), "another cluster's keys"),
        // Managed tiered checkpointing, and its MLflow reports.
        allow("demo-checkpoints", list("checkpoints/"), "lists checkpoints"),
        allow("demo-checkpoints", req("s3:PutObject", &obj("checkpoints/step-1/x")), "saves"),
        allow("demo-checkpoints", req("s3:GetObject", &obj("checkpoints/step-1/x")), "restores"),
        allow("demo-checkpoints", req("sagemaker:CallMlflowAppApi", APP), "reports runs"),
        deny("demo-checkpoints", req("s3:PutObject", &obj("data/x")), "only checkpoints/"),
        // Training pods reporting to MLflow (the sagemaker-mlflow plugin's calls).
        allow("demo-mlflow-tracking", req("sagemaker:CallMlflowAppApi", APP), "the App's REST API"),
        allow("demo-mlflow-tracking", req("sagemaker-mlflow:LogBatch", APP), "a tracking server's check"),
        allow("demo-mlflow-tracking", req("s3:PutObject", &obj("mlflow/1/run/artifacts/model.pt")), "log_artifact"),
        allow("demo-mlflow-tracking", list("mlflow/1/"), "list_artifacts"),
        deny("demo-mlflow-tracking", req("sagemaker:CallMlflowAppApi", other_app), "another App"),
        deny("demo-mlflow-tracking", req("s3:PutObject", &obj("data/x")), "only mlflow/"),
        deny("demo-mlflow-tracking", req("sagemaker:CreateMlflowApp", APP), "no control plane"),
        // KEDA's scaler queries on Amazon Managed Service for Prometheus.
        allow("demo-keda", req("aps:QueryMetrics", AMP), "the prometheus scaler"),
        deny(
            "demo-keda",
            req("aps:QueryMetrics", "arn:aws:aps:us-west-2:123456789012:workspace/ws-2"),
            "another workspace",
        ),
        deny("demo-keda", req("aps:RemoteWrite", AMP), "queries only"),
        // The HyperPod training operator (AmazonSageMakerHyperPodTrainingOperatorAccess).
        allow(
            "demo-training-operator",
            req("sagemaker:DescribeClusterNode", HYPERPOD).with("aws:ResourceTag/SageMaker", "true"),
            "node health, on the cluster the product tags SageMaker=true",
        ),
        deny(
            "demo-training-operator",
            req("sagemaker:DescribeClusterNode", HYPERPOD),
            "the managed policy's tag condition: a cluster without SageMaker=true",
        ),
        deny("demo-training-operator", req("sagemaker:DeleteCluster", HYPERPOD), "no mutation"),
        // The CloudWatch agent (CloudWatchAgentServerPolicy).
        allow("demo-cloudwatch-agent", req("cloudwatch:PutMetricData", "*"), "Container Insights"),
        allow(
            "demo-cloudwatch-agent",
            req(
                "logs:PutLogEvents",
                "arn:aws:logs:us-west-2:123456789012:log-group:/aws/containerinsights/demo/performance:log-stream:n",
            ),
            "performance logs",
        ),
        allow("demo-cloudwatch-agent", req("ec2:DescribeTags", "*"), "node metadata"),
        deny("demo-cloudwatch-agent", req("s3:GetObject", &obj("data/x")), "reads no data"),
        // The inference operator (its inline grants; see UNMODELLED_MANAGED).
        allow("demo-inference", list("models/"), "lists a model's files"),
        allow("demo-inference", req("s3:GetObject", &obj("models/m/config.json")), "loads models"),
        allow("demo-inference", req("s3:PutObject", &obj("inference-tls/ep/cert.pem")), "TLS certificates"),
        allow(
            "demo-inference",
            req("s3:PutObjectTagging", &obj("inference-tls/ep/cert.pem")),
            "tags them (operator 3.0)",
        ),
        allow(
            "demo-inference",
            req("acm:AddTagsToCertificate", "arn:aws:acm:us-west-2:123456789012:certificate/c1"),
            "tags its ACM certificates (operator 3.0)",
        ),
        allow("demo-inference", req("sagemaker:DescribeCluster", HYPERPOD), "reads its cluster"),
        deny("demo-inference", req("s3:PutObject", &obj("models/m/config.json")), "models are never written"),
        deny(
            "demo-inference",
            req("acm:AddTagsToCertificate", "arn:aws:acm:us-west-2:999999999999:certificate/c1"),
            "another account's certificates",
        ),
        // KEDA inside the inference operator.
        allow("demo-inference-keda", req("cloudwatch:GetMetricData", "*"), "CloudWatch triggers"),
        allow("demo-inference-keda", req("aps:QueryMetrics", AMP), "Prometheus triggers"),
        deny("demo-inference-keda", req("s3:GetObject", &obj("data/x")), "metrics only"),
        // The load balancer controller (its published policy; statement by statement below).
        allow(
            "demo-inference-alb",
            req("ec2:CreateSecurityGroup", "arn:aws:ec2:us-west-2:123456789012:security-group/*"),
            "an ALB's security group (unconditional upstream)",
        ),
        allow(
            "demo-inference-alb",
            req(
                "elasticloadbalancing:CreateLoadBalancer",
                "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/app/k8s-a/1",
            )
            .with("aws:RequestTag/elbv2.k8s.aws/cluster", "demo"),
            "the endpoint's ALB",
        ),
        deny(
            "demo-inference-alb",
            req(
                "elasticloadbalancing:DeleteLoadBalancer",
                "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/app/payments/1",
            ),
            "a load balancer the controller did not make (no elbv2.k8s.aws/cluster tag)",
        ),
        deny(
            "demo-inference-alb",
            req("ec2:DeleteSecurityGroup", "arn:aws:ec2:us-west-2:123456789012:security-group/sg-1"),
            "a security group the controller did not make",
        ),
        // The EBS CSI driver (AmazonEBSCSIDriverPolicy): a space's home volume.
        allow(
            "demo-ebs-csi",
            req("ec2:CreateVolume", "arn:aws:ec2:us-west-2:123456789012:volume/vol-1")
                .with("aws:RequestTag/ebs.csi.aws.com/cluster", "true"),
            "a volume for a claim",
        ),
        allow(
            "demo-ebs-csi",
            req("ec2:AttachVolume", "arn:aws:ec2:us-west-2:123456789012:volume/vol-1"),
            "attaches it to the space's node",
        ),
        deny(
            "demo-ebs-csi",
            req("ec2:DeleteVolume", "arn:aws:ec2:us-west-2:123456789012:volume/vol-2"),
            "a volume the driver did not make (no ebs.csi.aws.com/cluster tag)",
        ),
        // On HyperPod, volumes reach nodes through SageMaker (SageMaker Developer Guide, "Using
        // the Amazon EBS CSI driver on SageMaker HyperPod EKS clusters").
        allow(
            "demo-ebs-csi",
            req("sagemaker:AttachClusterNodeVolume", HYPERPOD),
            "attaches a volume to a HyperPod node",
        ),
        allow(
            "demo-ebs-csi",
            req("sagemaker:DetachClusterNodeVolume", HYPERPOD),
            "detaches it when the space stops",
        ),
        allow("demo-ebs-csi", req("eks:DescribeCluster", EKS), "finds its cluster"),
        deny(
            "demo-ebs-csi",
            req(
                "sagemaker:AttachClusterNodeVolume",
                "arn:aws:sagemaker:us-west-2:123456789012:cluster/other0000000",
            ),
            "another HyperPod cluster's nodes",
        ),
        deny("demo-ebs-csi", req("s3:GetObject", &obj("data/x")), "reads no data"),
        // The Spaces controller (AmazonSageMakerSpacesControllerPolicy): its remote IDE access
        // through Systems Manager is cut by the boundary (an activation passes a role).
        allow("demo-spaces", req("kms:DescribeKey", "arn:aws:kms:us-west-2:123456789012:key/k"), "the key a space's volume names"),
        deny(
            "demo-spaces",
            req("ssm:CreateActivation", "*")
                .with("aws:RequestTag/sagemaker.amazonaws.com/managed-by", "amazon-sagemaker-spaces"),
            "a hybrid activation, even tagged as the add-on's",
        ),
        deny(
            "demo-spaces",
            req("iam:PassRole", "arn:aws:iam::123456789012:role/sagemaker-space-ide")
                .with("iam:PassedToService", "ssm.amazonaws.com"),
            "passing a customer's role to Systems Manager",
        ),
        deny(
            "demo-spaces",
            req("ssm:StartSession", "arn:aws:ssm:us-west-2:123456789012:managed-instance/mi-1"),
            "a session on a managed instance",
        ),
        deny("demo-spaces", req("s3:GetObject", &obj("data/x")), "reads no data"),
        // The observability add-on's collector: remote write to the cluster's workspace only,
        // its logs under the clusters' log groups.
        allow("demo-observability", req("aps:RemoteWrite", AMP), "the exporters' metrics"),
        deny(
            "demo-observability",
            req("aps:RemoteWrite", "arn:aws:aps:us-west-2:123456789012:workspace/ws-2"),
            "another workspace",
        ),
        deny("demo-observability", req("aps:QueryMetrics", AMP), "writes only"),
        allow(
            "demo-observability",
            req(
                "logs:PutLogEvents",
                "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Clusters/demo/abc123:log-stream:node-1",
            ),
            "its logs",
        ),
        deny(
            "demo-observability",
            req("logs:PutLogEvents", "arn:aws:logs:us-west-2:123456789012:log-group:/aws/lambda/payments:log-stream:x"),
            "another log group",
        ),
        deny("demo-observability", req("s3:GetObject", &obj("data/x")), "reads no data"),
        // HyperPod adding and removing this cluster's nodes.
        allow("demo-autoscaling", req("sagemaker:BatchAddClusterNodes", HYPERPOD), "scale up"),
        allow("demo-autoscaling", req("sagemaker:BatchDeleteClusterNodes", HYPERPOD), "scale down"),
        deny("demo-autoscaling", req("sagemaker:BatchAddClusterNodes", other_cluster), "another cluster"),
        // The account's MLflow App (its artifact store).
        allow("instantstart-mlflow", req("s3:GetBucketLocation", &bucket), "finds its store"),
        allow("instantstart-mlflow", list("mlflow/"), "lists artifacts"),
        allow("instantstart-mlflow", req("s3:PutObject", &obj("mlflow/1/x")), "stores artifacts"),
        deny("instantstart-mlflow", req("s3:GetObject", &obj("data/x")), "only mlflow/"),
    ];
    // Out of the boundary whatever the identity says: IAM, and buckets not the product's.
    for role in [
        "demo-hyperpod-exec",
        "demo-s3-csi",
        "demo-inference",
        "demo-mlflow-tracking",
    ] {
        rows.push(deny(
            role,
            req("s3:GetObject", "arn:aws:s3:::payroll-exports/2026/q4.csv"),
            "a bucket outside the boundary",
        ));
        rows.push(deny(
            role,
            req("iam:CreateRole", "arn:aws:iam::123456789012:role/escalate"),
            "the boundary grants no IAM",
        ));
    }
    rows
}
