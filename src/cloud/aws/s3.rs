//! S3 (the shared bucket) and Service Quotas (HyperPod cluster usage).

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, PublicAccessBlockConfiguration,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule, Tag, Tagging,
};

use super::errors::{idempotent, is_not_found, once};
use super::Aws;
use crate::cloud::*;

const S: &str = "s3";

fn invalid(op: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::new(S, op, "InvalidRequest", e.to_string())
}

#[async_trait]
impl ObjectStore for Aws {
    async fn bucket_exists(&self, bucket: &str) -> CloudResult<bool> {
        match idempotent(S, "HeadBucket", || {
            self.s3.head_bucket().bucket(bucket).send()
        })
        .await
        {
            Ok(_) => Ok(true),
            // HeadBucket has no body: a missing bucket is a bare 404.
            Err(e)
                if is_not_found(&e)
                    || e.code == "NotFound"
                    || e.message.starts_with("HTTP 404") =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()> {
        let mut call = self.s3.create_bucket().bucket(bucket);
        if self.region != "us-east-1" {
            call = call.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(self.region.as_str()))
                    .build(),
            );
        }
        match once(S, "CreateBucket", call.send()).await {
            Err(e) if e.code == "BucketAlreadyOwnedByYou" => {}
            other => {
                other?;
            }
        }
        let block = PublicAccessBlockConfiguration::builder()
            .block_public_acls(true)
            .ignore_public_acls(true)
            .block_public_policy(true)
            .restrict_public_buckets(true)
            .build();
        idempotent(S, "PutPublicAccessBlock", || {
            self.s3
                .put_public_access_block()
                .bucket(bucket)
                .public_access_block_configuration(block.clone())
                .send()
        })
        .await?;
        let sse = ServerSideEncryptionConfiguration::builder()
            .rules(
                ServerSideEncryptionRule::builder()
                    .apply_server_side_encryption_by_default(
                        ServerSideEncryptionByDefault::builder()
                            .sse_algorithm(ServerSideEncryption::Aes256)
                            .build()
                            .map_err(|e| invalid("PutBucketEncryption", e))?,
                    )
                    .build(),
            )
            .build()
            .map_err(|e| invalid("PutBucketEncryption", e))?;
        idempotent(S, "PutBucketEncryption", || {
            self.s3
                .put_bucket_encryption()
                .bucket(bucket)
                .server_side_encryption_configuration(sse.clone())
                .send()
        })
        .await?;
        let tag_set = tags
            .iter()
            .map(|(k, v)| {
                Tag::builder()
                    .key(k)
                    .value(v)
                    .build()
                    .map_err(|e| invalid("PutBucketTagging", e))
            })
            .collect::<CloudResult<Vec<_>>>()?;
        let tagging = Tagging::builder()
            .set_tag_set(Some(tag_set))
            .build()
            .map_err(|e| invalid("PutBucketTagging", e))?;
        idempotent(S, "PutBucketTagging", || {
            self.s3
                .put_bucket_tagging()
                .bucket(bucket)
                .tagging(tagging.clone())
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()> {
        idempotent(S, "PutObject", || {
            self.s3
                .put_object()
                .bucket(bucket)
                .key(key)
                .body(ByteStream::from(body.clone()))
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "ListObjectsV2", || {
                self.s3
                    .list_objects_v2()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_continuation_token(token.clone())
                    .send()
            })
            .await?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_string)),
            );
            token = out.next_continuation_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(keys)
    }
}

#[async_trait]
impl Quotas for Aws {
    async fn hyperpod_cluster_usage(&self, instance_type: &str) -> CloudResult<Option<u32>> {
        let wanted = format!("{instance_type} for cluster usage");
        let mut token: Option<String> = None;
        loop {
            let out = idempotent("servicequotas", "ListServiceQuotas", || {
                self.quotas
                    .list_service_quotas()
                    .service_code("sagemaker")
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            if let Some(q) = out
                .quotas()
                .iter()
                .find(|q| q.quota_name() == Some(wanted.as_str()))
            {
                return Ok(q.value().map(|v| v.max(0.0) as u32));
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(None);
            }
        }
    }
}
