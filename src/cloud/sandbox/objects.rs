//! The simulated S3 and Service Quotas.

use async_trait::async_trait;
use serde_json::json;

use super::shared::*;
use super::{new_id, Sandbox, QUOTAS};
use crate::cloud::*;

#[async_trait]
impl ObjectStore for Sandbox {
    async fn bucket_exists(&self, bucket: &str) -> CloudResult<bool> {
        self.gate("s3:HeadBucket", false).await?;
        Ok(self
            .by_name("s3-bucket", bucket)
            .await?
            .is_some_and(|r| r.deleted_ms.is_none()))
    }

    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()> {
        let api = "s3:CreateBucket";
        self.gate(api, true).await?;
        let data = json!({"tags": tags, "encryption": "aws:kms", "publicAccessBlock": true});
        self.create(api, "s3-bucket", &new_id("bkt"), Some(bucket), &data)
            .await
    }

    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()> {
        let api = "s3:PutObject";
        self.gate(api, true).await?;
        if !self.bucket_exists(bucket).await? {
            return Err(not_found("s3", "PutObject", "NoSuchBucket", bucket));
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

#[async_trait]
impl Quotas for Sandbox {
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>> {
        self.gate("servicequotas:GetServiceQuota", false).await?;
        Ok(QUOTAS
            .iter()
            .find(|(t, _)| *t == instance_type)
            .map(|(_, n)| *n))
    }
}
