//! Where a cluster keeps its objects (lifecycle scripts, data, checkpoints, models, MLflow
//! artifacts, TLS certificates): a bucket of its own, or its own prefix of the deployment's
//! shared bucket; and the IAM statements that reach that place and nothing beside it.

use serde_json::{json, Value};

use crate::cloud::Cloud;
use crate::error::{ApiError, ApiResult};
use crate::ops::{StepCx, StepResult};
use crate::service::shared::resources::{ClusterResources, Recorded};

/// The bucket a cluster gets when the deployment has no shared bucket. The `sagemaker-` prefix
/// is what HyperPod asks of lifecycle-script locations.
pub fn own_bucket_name(cluster: &str, account: &str) -> String {
    format!("sagemaker-instantstart-{cluster}-{account}")
}

/// The shared-bucket setting: a valid bucket name that HyperPod accepts lifecycle scripts from.
pub fn check_shared_bucket_setting(bucket: &str) -> Result<(), String> {
    crate::service::cluster::validate::bucket_name("sharedBucket", bucket)
        .map_err(|e| e.to_string())?;
    if !bucket.starts_with("sagemaker-") {
        return Err(format!(
            "`{bucket}` does not begin with `sagemaker-`: HyperPod takes lifecycle scripts only from such buckets"
        ));
    }
    Ok(())
}

/// A data-bucket setting: a bucket name, or a pattern of names with `*`.
/// A pattern must name something: at least three characters beside `*` (a bucket name has
/// three or more), so `*` alone, which would open every bucket of the account to every role the
/// control plane makes, is refused — as the template's `DataBuckets` pattern refuses it.
pub fn check_data_bucket_setting(pattern: &str) -> Result<(), String> {
    if pattern.chars().filter(|c| *c != '*').count() < 3 {
        return Err(format!(
            "`{pattern}` would reach nearly every bucket: name a bucket, or a pattern with at least three characters beside `*`"
        ));
    }
    crate::service::cluster::validate::bucket_name("dataBuckets", &pattern.replace('*', "a"))
        .map_err(|e| e.to_string())
}

/// Whether the roles the control plane makes may reach `bucket`: every bucket without a
/// permissions boundary; with one, what the stack's boundary grants: the deployment's own
/// buckets (`sagemaker-instantstart-*`, the shared one) and its data buckets.
pub fn reachable(cloud: &Cloud, bucket: &str) -> bool {
    let Some(data) = &cloud.data_buckets else {
        return true;
    };
    glob("sagemaker-instantstart-*", bucket)
        || cloud.shared_bucket.as_deref() == Some(bucket)
        || data.iter().any(|p| glob(p, bucket))
}

/// Refuses, on `field`, a bucket the roles' boundary would cut: the S3 CSI driver could not
/// mount it, and the pods would wait on a failed mount.
pub fn check_reachable(cloud: &Cloud, field: &str, bucket: &str) -> ApiResult<()> {
    if reachable(cloud, bucket) {
        return Ok(());
    }
    Err(ApiError::validation_hint(
        field,
        format!("the permissions boundary of the roles this server makes does not reach the bucket `{bucket}`: the S3 CSI driver could not mount it"),
        json!("use the cluster's own bucket (leave `bucket` out), or add the bucket to the stack's DataBuckets parameter (INSTANTSTART_DATA_BUCKETS), which the boundary grants"),
    ))
}

/// An IAM-style pattern: `*` matches any run of characters, the rest itself.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The prefix a cluster's objects live under in a shared bucket.
pub fn shared_prefix(cluster: &str) -> String {
    format!("{cluster}/")
}

/// A cluster's place for objects: `bucket`, and the prefix (empty, or ending in `/`) every key
/// of the cluster starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketPlace {
    pub bucket: String,
    pub prefix: String,
    /// The partition its ARNs are written in (`aws` unless [`BucketPlace::in_region`] says).
    pub partition: &'static str,
}

impl BucketPlace {
    /// A whole bucket: every key, no prefix.
    pub fn whole(bucket: impl Into<String>) -> Self {
        Self::prefixed(bucket, "")
    }

    /// `prefix` (empty, or ending in `/`) of a bucket.
    pub fn prefixed(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: prefix.into(),
            partition: "aws",
        }
    }

    /// The same place, its ARNs in the partition of `region`.
    pub fn in_region(mut self, region: &str) -> Self {
        self.partition = crate::service::shared::arn::partition_of_region(region);
        self
    }

    /// The place a cluster's record names, once the shared-bucket phase recorded it.
    pub fn recorded(r: &ClusterResources) -> Option<Self> {
        Some(Self::prefixed(
            r.bucket_name.clone()?,
            r.bucket_prefix.clone().unwrap_or_default(),
        ))
    }

    /// The recorded place, or the `missing-prerequisite` error naming the stage to run.
    pub fn required(r: &ClusterResources) -> StepResult<Self> {
        Ok(Self::prefixed(
            r.bucket_name()?,
            r.bucket_prefix.clone().unwrap_or_default(),
        ))
    }

    /// The key of `rest` (a path relative to the cluster's place).
    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// `s3://bucket/<prefix><rest>`.
    pub fn uri(&self, rest: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.key(rest))
    }

    pub fn bucket_arn(&self) -> String {
        format!("arn:{}:s3:::{}", self.partition, self.bucket)
    }

    /// The ARN of every object under `rest` (`rest` empty: every object of the place).
    pub fn objects_arn(&self, rest: &str) -> String {
        format!(
            "arn:{}:s3:::{}/{}*",
            self.partition,
            self.bucket,
            self.key(rest)
        )
    }

    /// `s3:ListBucket` (and any other bucket-level `actions`) on the bucket, limited by an
    /// `s3:prefix` condition to keys under `rest` unless that is the whole bucket: in a shared
    /// bucket one cluster's roles never list another's keys.
    pub fn list_statement(&self, sid: &str, actions: &[&str], rest: &str) -> Value {
        let mut s = json!({"Sid": sid, "Effect": "Allow", "Action": actions,
                           "Resource": [self.bucket_arn()]});
        let scope = self.key(rest);
        if !scope.is_empty() {
            s["Condition"] = json!({"StringLike": {"s3:prefix": [format!("{scope}*")]}});
        }
        s
    }

    /// `actions` on every object under `rest`.
    pub fn objects_statement(&self, sid: &str, actions: &[&str], rest: &str) -> Value {
        json!({"Sid": sid, "Effect": "Allow", "Action": actions,
               "Resource": [self.objects_arn(rest)]})
    }

    /// Reading, writing and deleting objects under `rest`, and listing them.
    pub fn read_write_statements(&self, sid: &str, rest: &str) -> [Value; 2] {
        [
            self.list_statement(&format!("{sid}List"), &["s3:ListBucket"], rest),
            self.objects_statement(
                &format!("{sid}Objects"),
                &[
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                ],
                rest,
            ),
        ]
    }
}

/// This operation's cluster's place: the recorded one; else the deployment's shared bucket
/// under the cluster's prefix; else the cluster's own bucket. Phases that run before the
/// shared-bucket phase (the S3 CSI driver's role) get the place it will record.
pub async fn place_of(cx: &StepCx<'_>) -> StepResult<BucketPlace> {
    let region = cx.cloud.network.region();
    if let Some(place) = BucketPlace::recorded(&cx.recorded()) {
        return Ok(place.in_region(&region));
    }
    if let Some(shared) = &cx.cloud.shared_bucket {
        return Ok(
            BucketPlace::prefixed(shared.to_string(), shared_prefix(&cx.op.cluster))
                .in_region(&region),
        );
    }
    let account = cx.cloud.iam.caller_identity().await?.account;
    Ok(BucketPlace::whole(own_bucket_name(&cx.op.cluster, &account)).in_region(&region))
}

/// The place the shared-bucket phase recorded, in this account's partition; the
/// `missing-prerequisite` error naming the stage to run when there is none yet.
pub fn recorded_place(cx: &StepCx<'_>) -> StepResult<BucketPlace> {
    Ok(BucketPlace::required(&cx.recorded())?.in_region(&cx.cloud.network.region()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> BucketPlace {
        BucketPlace::whole("sagemaker-instantstart-demo-1")
    }
    fn shared() -> BucketPlace {
        BucketPlace::prefixed(
            "sagemaker-instantstart-shared-1-us-west-2",
            shared_prefix("demo"),
        )
    }

    #[test]
    fn bucket_patterns_match_as_iam_matches_them() {
        assert!(glob(
            "sagemaker-instantstart-*",
            "sagemaker-instantstart-demo-1"
        ));
        assert!(!glob("sagemaker-instantstart-*", "sagemaker-other"));
        assert!(glob("ml-data", "ml-data"));
        assert!(!glob("ml-data", "ml-data-2"));
        assert!(glob("ml-*-data", "ml-team-a-data"));
        assert!(!glob("ml-*-data", "ml-data"));
        assert!(glob("*", "anything"));
    }

    #[test]
    fn arns_are_written_in_the_partition_of_the_region() {
        let cn = own().in_region("cn-north-1");
        assert_eq!(
            cn.bucket_arn(),
            "arn:aws-cn:s3:::sagemaker-instantstart-demo-1"
        );
        assert_eq!(
            shared().in_region("us-gov-west-1").objects_arn("data/"),
            "arn:aws-us-gov:s3:::sagemaker-instantstart-shared-1-us-west-2/demo/data/*"
        );
    }

    #[test]
    fn keys_and_uris_start_with_the_clusters_prefix() {
        assert_eq!(own().key("lifecycle/"), "lifecycle/");
        assert_eq!(shared().key("lifecycle/"), "demo/lifecycle/");
        assert_eq!(
            shared().uri("mlflow"),
            "s3://sagemaker-instantstart-shared-1-us-west-2/demo/mlflow"
        );
        assert_eq!(
            own().objects_arn(""),
            "arn:aws:s3:::sagemaker-instantstart-demo-1/*"
        );
        assert_eq!(
            shared().objects_arn("checkpoints/"),
            "arn:aws:s3:::sagemaker-instantstart-shared-1-us-west-2/demo/checkpoints/*"
        );
    }

    #[test]
    fn listing_is_limited_to_the_prefix_unless_the_bucket_is_the_clusters_own() {
        let whole = own().list_statement("L", &["s3:ListBucket"], "");
        assert!(whole.get("Condition").is_none(), "{whole}");
        let scoped = shared().list_statement("L", &["s3:ListBucket"], "");
        assert_eq!(
            scoped["Condition"]["StringLike"]["s3:prefix"],
            json!(["demo/*"])
        );
        let sub = own().list_statement("L", &["s3:ListBucket"], "checkpoints/");
        assert_eq!(
            sub["Condition"]["StringLike"]["s3:prefix"],
            json!(["checkpoints/*"])
        );
        let [list, objects] = shared().read_write_statements("Data", "");
        assert_eq!(list["Sid"], "DataList");
        assert_eq!(
            objects["Resource"],
            json!(["arn:aws:s3:::sagemaker-instantstart-shared-1-us-west-2/demo/*"])
        );
    }

    #[test]
    fn the_recorded_place_needs_a_bucket_and_defaults_to_no_prefix() {
        assert_eq!(BucketPlace::recorded(&ClusterResources::default()), None);
        let r = ClusterResources::of(&json!({"bucketName": "b-1"}));
        assert_eq!(BucketPlace::recorded(&r).unwrap().prefix, "");
        let r = ClusterResources::of(&json!({"bucketName": "b-1", "bucketPrefix": "demo/"}));
        assert_eq!(BucketPlace::recorded(&r).unwrap().key("x"), "demo/x");
    }

    #[test]
    fn a_data_bucket_pattern_must_name_something() {
        for bad in ["*", "**", "a*", "*-*"] {
            assert!(check_data_bucket_setting(bad).is_err(), "{bad}");
        }
        for good in ["team-*-data", "abc*", "my-bucket"] {
            assert!(check_data_bucket_setting(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_shared_bucket_setting_must_be_a_sagemaker_bucket_name() {
        assert!(check_shared_bucket_setting("sagemaker-instantstart-shared-1-us-west-2").is_ok());
        let e = check_shared_bucket_setting("instantstart-shared-1-us-west-2").unwrap_err();
        assert!(e.contains("sagemaker-"), "{e}");
        assert!(check_shared_bucket_setting("sagemaker-Bad_Name").is_err());
    }

    #[test]
    fn own_bucket_names_fit_s3_limits_for_the_longest_cluster_name() {
        let name = "a".repeat(crate::service::cluster::validate::MAX_CLUSTER_NAME);
        assert!(own_bucket_name(&name, "123456789012").len() <= 63);
    }
}
