//! The simulated S3 and Service Quotas.

use async_trait::async_trait;
use serde_json::json;

use super::shared::*;
use super::{new_id, Sandbox, QUOTAS};
use cloud::*;

#[async_trait]
impl ObjectStore for Sandbox {
    async fn bucket_owner(&self, bucket: &str) -> CloudResult<BucketOwner> {
        self.gate("s3:HeadBucket", false).await?;
        if self.foreign_bucket(bucket) {
            return Ok(BucketOwner::Foreign);
        }
        let ours = self
            .by_name("s3-bucket", bucket)
            .await?
            .is_some_and(|r| r.deleted_ms.is_none());
        Ok(if ours {
            BucketOwner::Ours
        } else {
            BucketOwner::Missing
        })
    }

    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()> {
        let api = "s3:CreateBucket";
        self.gate(api, true).await?;
        // Bucket names are global: S3 refuses a name another account holds (409).
        if self.foreign_bucket(bucket) {
            return Err(CloudError::new(
                "s3",
                "CreateBucket",
                "BucketAlreadyExists",
                "The requested bucket name is not available. The bucket namespace is shared by all users of the system.",
            ));
        }
        let data = json!({"tags": tags, "encryption": "aws:kms", "publicAccessBlock": true});
        self.create(api, "s3-bucket", &new_id("bkt"), Some(bucket), &data)
            .await
    }

    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()> {
        let api = "s3:PutObject";
        self.gate(api, true).await?;
        // Every call names the expected owner: a bucket of another account is refused (403).
        match self.bucket_owner(bucket).await? {
            BucketOwner::Ours => {}
            BucketOwner::Missing => {
                return Err(not_found("s3", "PutObject", "NoSuchBucket", bucket))
            }
            BucketOwner::Foreign => return Err(foreign("PutObject", bucket)),
        }
        let name = format!("{bucket}/{key}");
        let data = json!({"bucket": bucket, "key": key, "size": body.len(),
                          "body": String::from_utf8_lossy(&body)});
        match self.by_name("s3-object", &name).await? {
            Some(r) if r.deleted_ms.is_none() => self.update(api, "s3-object", &r.id, &data).await,
            _ => {
                self.create(api, "s3-object", &new_id("obj"), Some(&name), &data)
                    .await
            }
        }
    }

    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>> {
        self.gate("s3:ListObjectsV2", false).await?;
        if self.foreign_bucket(bucket) {
            return Err(foreign("ListObjectsV2", bucket));
        }
        let mut keys: Vec<String> = self
            .list("s3-object")
            .await?
            .into_iter()
            .filter(|r| r.data["bucket"] == bucket)
            // What a pod is still writing is not there yet.
            .filter(|r| {
                r.data["visibleMs"]
                    .as_i64()
                    .is_none_or(|at| at <= super::now_ms())
            })
            .filter_map(|r| r.data["key"].as_str().map(str::to_string))
            .filter(|k| k.starts_with(prefix))
            .collect();
        keys.sort();
        Ok(keys)
    }
}

/// S3's answer to a call whose expected owner is not the bucket's.
fn foreign(op: &str, bucket: &str) -> CloudError {
    CloudError::new(
        "s3",
        op,
        "AccessDenied",
        format!("Access Denied: the bucket `{bucket}` is not owned by the expected account"),
    )
}

impl Sandbox {
    fn foreign_bucket(&self, bucket: &str) -> bool {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .foreign_bucket(bucket)
    }
}

#[async_trait]
impl Quotas for Sandbox {
    async fn hyperpod_cluster_quotas(&self) -> CloudResult<Vec<ClusterUsageQuota>> {
        // The adapter lists the quotas (`ListServiceQuotas`): the sandbox gates the same action.
        self.gate("servicequotas:ListServiceQuotas", false).await?;
        Ok(QUOTAS
            .iter()
            .map(|(t, n)| ClusterUsageQuota {
                instance_type: (*t).to_string(),
                limit: *n,
            })
            .collect())
    }
}
