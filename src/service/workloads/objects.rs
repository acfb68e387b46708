//! A look into a storage claim: the objects under a prefix of its bucket.

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::validate;
use crate::service::workloads::{cloud_err, list_storage};

/// Query of `GET /api/clusters/{name}/storage/{claim}/objects`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ObjectsQuery {
    /// Only keys under this prefix (e.g. `models/`).
    pub prefix: Option<String>,
}

/// Keys in the bucket behind an S3 claim (at most 1000), relative to what the claim mounts.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectList {
    pub claim: String,
    pub bucket: String,
    /// The prefix of `bucket` the claim mounts (a cluster's in the shared bucket), if any:
    /// `prefix` and `keys` are relative to it, as paths under `/s3` are.
    pub mounted_prefix: Option<String>,
    pub prefix: String,
    pub keys: Vec<String>,
    /// More keys exist than were returned.
    pub truncated: bool,
}

pub async fn list_objects(
    engine: &Engine,
    name: &str,
    claim: &str,
    prefix: Option<&str>,
) -> ApiResult<ObjectList> {
    validate::dns_label("claim", "claim name", claim)?;
    let prefix = prefix.unwrap_or("");
    if prefix.len() > 512 || prefix.starts_with('/') || prefix.contains("..") {
        return Err(ApiError::validation_hint(
            "prefix",
            "not a key prefix",
            json!("e.g. models/"),
        ));
    }
    let claims = list_storage(engine, name).await?;
    let Some(c) = claims.iter().find(|c| c.claim_name == claim) else {
        return Err(ApiError::NotFound {
            what: format!("claim `{claim}` of `{name}`"),
            hint: Some(Box::new(json!(claims
                .iter()
                .map(|c| &c.claim_name)
                .collect::<Vec<_>>()))),
        });
    };
    let Some(bucket) = c.bucket.clone() else {
        return Err(ApiError::Conflict {
            slug: ProblemType::NotS3,
            detail: format!(
                "`{claim}` is an FSx for Lustre volume, not an S3 bucket: look into it from a pod"
            ),
            field: Some("claim".into()),
            operation_id: None,
        });
    };
    const LIMIT: usize = 1000;
    let mounted = c.prefix.clone().unwrap_or_default();
    let mut keys: Vec<String> = engine
        .cloud()
        .objects
        .list_objects(&bucket, &format!("{mounted}{prefix}"))
        .await
        .map_err(cloud_err)?
        .into_iter()
        .filter_map(|k| k.strip_prefix(&mounted).map(str::to_string))
        .collect();
    let truncated = keys.len() > LIMIT;
    keys.truncate(LIMIT);
    Ok(ObjectList {
        claim: claim.into(),
        bucket,
        mounted_prefix: c.prefix.clone(),
        prefix: prefix.into(),
        keys,
        truncated,
    })
}
