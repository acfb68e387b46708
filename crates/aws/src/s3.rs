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
use cloud::*;

const S: &str = "s3";

fn invalid(op: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::new(S, op, "InvalidRequest", e.to_string())
}

impl Aws {
    /// The account expected to own every bucket the adapter touches (S3's
    /// `ExpectedBucketOwner`, which S3 answers with 403 for a bucket of another account).
    async fn owner(&self) -> CloudResult<&str> {
        self.account
            .get_or_try_init(|| async {
                let me = cloud::Iam::caller_identity(self).await?;
                Ok::<_, CloudError>(me.account)
            })
            .await
            .map(String::as_str)
    }
}

#[async_trait]
impl ObjectStore for Aws {
    async fn bucket_owner(&self, bucket: &str) -> CloudResult<BucketOwner> {
        let owner = self.owner().await?;
        match idempotent(S, "HeadBucket", || {
            self.s3
                .head_bucket()
                .bucket(bucket)
                .expected_bucket_owner(owner)
                .send()
        })
        .await
        {
            Ok(_) => Ok(BucketOwner::Ours),
            // HeadBucket has no body: a missing bucket is a bare 404, a bucket of another
            // account a bare 403 (S3 User Guide, "Verifying bucket ownership").
            Err(e)
                if is_not_found(&e)
                    || e.code == "NotFound"
                    || e.message.starts_with("HTTP 404") =>
            {
                Ok(BucketOwner::Missing)
            }
            Err(e)
                if e.code == "Forbidden"
                    || e.code == "AccessDenied"
                    || e.message.starts_with("HTTP 403") =>
            {
                Ok(BucketOwner::Foreign)
            }
            Err(e) => Err(e),
        }
    }

    async fn create_bucket(&self, bucket: &str, tags: &Tags) -> CloudResult<()> {
        let owner = self.owner().await?;
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
                .expected_bucket_owner(owner)
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
                .expected_bucket_owner(owner)
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
                .expected_bucket_owner(owner)
                .tagging(tagging.clone())
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> CloudResult<()> {
        let owner = self.owner().await?;
        idempotent(S, "PutObject", || {
            self.s3
                .put_object()
                .bucket(bucket)
                .expected_bucket_owner(owner)
                .key(key)
                .body(ByteStream::from(body.clone()))
                .send()
        })
        .await
        .map(|_| ())
    }

    async fn list_objects(&self, bucket: &str, prefix: &str) -> CloudResult<Vec<String>> {
        let owner = self.owner().await?;
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = idempotent(S, "ListObjectsV2", || {
                self.s3
                    .list_objects_v2()
                    .bucket(bucket)
                    .expected_bucket_owner(owner)
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
    async fn hyperpod_cluster_quotas(&self) -> CloudResult<Vec<ClusterUsageQuota>> {
        let mut found = Vec::new();
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
            found.extend(out.quotas().iter().filter_map(|q| {
                let instance_type = q.quota_name()?.strip_suffix(" for cluster usage")?;
                Some(ClusterUsageQuota {
                    instance_type: instance_type.to_string(),
                    limit: q.value()?.max(0.0) as u32,
                })
            }));
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(found);
            }
        }
    }
}
