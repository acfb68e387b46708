//! S3 buckets and objects, and the Service Quotas the control plane checks.

use async_trait::async_trait;

use crate::cloud::*;

#[async_trait]
pub trait ObjectStore: Send + Sync {
    async fn bucket_exists(&self, bucket: &str) -> CloudResult<bool>;
    /// Creates an encrypted bucket with all public access blocked.
    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()>;
    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()>;
    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>>;
}

#[async_trait]
pub trait Quotas: Send + Sync {
    /// The HyperPod "cluster usage" quota for an `ml.` instance type, if the account has one.
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>>;
}
