//! What every port and adapter shares: the resource tags the control plane puts on what it
//! makes, and the classified error of a cloud call. A leaf: it names no port, so the ports and
//! the `Cloud` handle that bundles them both depend on it and on nothing in between.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Resource tags, as EC2/EKS/SageMaker/IAM carry them.
pub type Tags = BTreeMap<String, String>;

/// Tag key that marks every resource the control plane creates with its cluster name.
pub const CLUSTER_TAG: &str = "instantstart:cluster";
/// Tag key naming the logical role of a resource inside its cluster (e.g. `public-a`).
pub const ROLE_TAG: &str = "instantstart:role";

/// Builds the standard tag set for one resource of a cluster.
pub fn cluster_tags(cluster: &str, role: &str) -> Tags {
    Tags::from([
        (CLUSTER_TAG.to_string(), cluster.to_string()),
        (ROLE_TAG.to_string(), role.to_string()),
        ("Name".to_string(), format!("{cluster}-{role}")),
    ])
}

/// A failed call to a cloud API, classified so the engine can decide whether to retry.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq)]
#[error("{service}:{operation} failed: {code}: {message}")]
#[serde(rename_all = "camelCase")]
pub struct CloudError {
    /// Service name as in the API's signing name (`ec2`, `eks`, `sagemaker`, `iam`, `s3`, `k8s`).
    pub service: String,
    /// API operation (`CreateCluster`, `DescribeVpcs` ...).
    pub operation: String,
    /// Error code as the service returned it (`ThrottlingException`, `ResourceLimitExceeded`).
    pub code: String,
    /// Service message.
    pub message: String,
    /// Whether repeating the same call may succeed (throttling, 5xx). Never true for a
    /// rejected validation.
    pub retryable: bool,
}

impl CloudError {
    /// A non-retryable error.
    pub fn new(service: &str, operation: &str, code: &str, message: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            operation: operation.into(),
            code: code.into(),
            message: message.into(),
            retryable: false,
        }
    }

    /// Marks the error as transient.
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }
}

pub type CloudResult<T> = Result<T, CloudError>;

/// The DNS suffix of a partition's service endpoints, what CloudFormation's `AWS::URLSuffix`
/// resolves to there: China's regions are under `amazonaws.com.cn`.
pub fn url_suffix(partition: &str) -> &'static str {
    match partition {
        "aws-cn" => "amazonaws.com.cn",
        _ => "amazonaws.com",
    }
}
