//! S3 buckets and objects, and the Service Quotas the control plane checks.

use async_trait::async_trait;

use crate::common::*;

/// Who a bucket name belongs to, as S3 answers a `HeadBucket` that names the account expected
/// to own it (`ExpectedBucketOwner`): bucket names are global, so a name the product would use
/// may be taken by another account, and a bucket there must never receive its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketOwner {
    /// No bucket of that name.
    Missing,
    /// A bucket of this account.
    Ours,
    /// A bucket of another account (S3 answers 403 to the expected-owner check).
    Foreign,
}

/// The account's HyperPod "cluster usage" quota for one `ml.` instance type.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUsageQuota {
    pub instance_type: String,
    pub limit: u32,
}

/// Every call names the account expected to own the bucket: the adapter refuses to read or
/// write a bucket of another account.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    async fn bucket_owner(&self, bucket: &str) -> CloudResult<BucketOwner>;
    /// Creates an encrypted bucket with all public access blocked. A name another account
    /// holds is refused with `BucketAlreadyExists`.
    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()>;
    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()>;
    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>>;
}

#[async_trait]
pub trait Quotas: Send + Sync {
    /// Every HyperPod "<type> for cluster usage" quota of the account (Service Quotas'
    /// `sagemaker` service), in the order listed.
    async fn hyperpod_cluster_quotas(&self) -> CloudResult<Vec<ClusterUsageQuota>>;

    /// The HyperPod "cluster usage" quota for an `ml.` instance type, if the account has one.
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>> {
        Ok(self
            .hyperpod_cluster_quotas()
            .await?
            .into_iter()
            .find(|q| q.instance_type == instance_type)
            .map(|q| q.limit))
    }
}
