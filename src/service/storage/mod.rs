//! Storage claims: a request validated into a claim, the claims listed, a claim checked before
//! it is deleted.

pub mod start;

pub mod bucket;

use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ListQuery;
use crate::cloud::MANAGED_BY;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::steps::storage::{
    claim_view, ClaimView, StorageParams, VolumeSource, CLAIM_LABEL,
};

/// Body of `POST /api/clusters/{name}/storage`. Omitted: the shared bucket as `s3-claim`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageRequest {
    /// Claim name (default `s3-claim`).
    #[schema(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub claim_name: Option<String>,
    /// Namespace of the claim (default `default`).
    #[schema(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub namespace: Option<String>,
    /// `s3` (default) or `fsx`.
    pub kind: Option<String>,
    /// S3: bucket to mount (default: the cluster's shared bucket).
    pub bucket: Option<String>,
    /// S3: the bucket's region (default: the control plane's region).
    #[schema(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")]
    pub region: Option<String>,
    /// FSx for Lustre: file system id (`fs-…`).
    pub file_system_id: Option<String>,
    /// FSx for Lustre: DNS name of the file system.
    pub dns_name: Option<String>,
    /// FSx for Lustre: mount name.
    pub mount_name: Option<String>,
    /// FSx for Lustre: storage capacity in GiB (default 1200).
    pub capacity_gib: Option<i64>,
}

pub(super) fn required<'a>(field: &str, v: &'a Option<String>) -> ApiResult<&'a str> {
    v.as_deref().filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::validation(field, format!("`{field}` is required for an FSx claim"))
    })
}

/// Validates a storage request and refuses a claim name that is already taken.
pub async fn storage_params(
    engine: &Engine,
    name: &str,
    req: &StorageRequest,
) -> ApiResult<StorageParams> {
    let claim_name = req.claim_name.clone().unwrap_or_else(|| "s3-claim".into());
    validate::dns_label("claimName", "claim name", &claim_name)?;
    let namespace = req.namespace.clone().unwrap_or_else(|| "default".into());
    validate::dns_label("namespace", "namespace", &namespace)?;
    let source = match req.kind.as_deref().unwrap_or("s3") {
        "s3" => {
            for f in [
                ("fileSystemId", &req.file_system_id),
                ("dnsName", &req.dns_name),
                ("mountName", &req.mount_name),
            ] {
                if f.1.is_some() {
                    return Err(ApiError::validation(
                        f.0,
                        format!("`{}` applies to FSx claims only", f.0),
                    ));
                }
            }
            if let Some(b) = &req.bucket {
                validate::bucket_name("bucket", b)?;
                crate::service::storage::bucket::check_reachable(engine.cloud(), "bucket", b)?;
            }
            if let Some(r) = &req.region {
                validate::region_code("region", r)?;
            }
            VolumeSource::S3 {
                bucket: req.bucket.clone(),
                region: req.region.clone(),
            }
        }
        "fsx" => {
            if req.bucket.is_some() || req.region.is_some() {
                return Err(ApiError::validation(
                    "bucket",
                    "`bucket` and `region` apply to S3 claims only",
                ));
            }
            let id = required("fileSystemId", &req.file_system_id)?;
            validate::fsx_file_system_id("fileSystemId", id)?;
            let dns = required("dnsName", &req.dns_name)?;
            let dns_ok = dns.len() <= 253
                && dns.split('.').count() >= 3
                && dns.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                });
            if !dns_ok {
                return Err(ApiError::validation_hint(
                    "dnsName",
                    format!("`{dns}` is not a DNS name"),
                    json!("e.g. fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"),
                ));
            }
            let mount = required("mountName", &req.mount_name)?;
            if !(1..=8).contains(&mount.len())
                || !mount
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            {
                return Err(ApiError::validation_hint("mountName", format!("`{mount}` is not an FSx for Lustre mount name"), json!("up to 8 lowercase letters and digits, as DescribeFileSystems reports it (LustreConfiguration.MountName)")));
            }
            let capacity = req.capacity_gib.unwrap_or(1200);
            if !(1200..=1_000_000).contains(&capacity) {
                return Err(ApiError::validation_hint(
                    "capacityGib",
                    format!("{capacity} GiB is outside what FSx for Lustre offers"),
                    json!("1200 to 1000000"),
                ));
            }
            VolumeSource::Fsx {
                file_system_id: id.to_string(),
                dns_name: dns.to_string(),
                mount_name: mount.to_string(),
                capacity_gib: capacity as u32,
            }
        }
        other => {
            return Err(ApiError::validation_hint(
                "kind",
                format!("`{other}` is not a storage kind"),
                json!(["s3", "fsx"]),
            ))
        }
    };
    let params = StorageParams {
        claim_name,
        namespace,
        source,
    };
    // A claim name is used once per namespace; the same request again is an idempotent re-apply.
    if let Ok(existing) = list_storage(engine, name).await {
        if existing.iter().any(|c| {
            c.claim_name == params.claim_name
                && c.namespace == params.namespace
                && !same_source(c, &params)
        }) {
            return Err(ApiError::Conflict {
                slug: ProblemType::ClaimExists,
                detail: format!(
                    "claim `{}` already exists in namespace `{}` with a different source; delete it first or choose another name",
                    params.claim_name, params.namespace
                ),
                field: Some("claimName".into()),
                operation_id: None,
            });
        }
    }
    Ok(params)
}

pub(super) fn same_source(c: &ClaimView, p: &StorageParams) -> bool {
    match &p.source {
        VolumeSource::S3 {
            bucket: Some(b), ..
        } => c.bucket.as_deref() == Some(b),
        VolumeSource::S3 { bucket: None, .. } => c.kind == "s3",
        VolumeSource::Fsx { file_system_id, .. } => {
            c.file_system_id.as_deref() == Some(file_system_id)
        }
    }
}

/// The claims InstantStart made on this cluster.
pub async fn list_storage(engine: &Engine, name: &str) -> ApiResult<Vec<ClaimView>> {
    let target = kube_target(engine, name).await?;
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let pvs = engine
        .cloud()
        .kube
        .list(
            &target,
            &ListQuery::of("v1", "PersistentVolume").labels(&selector),
        )
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    let mut claims: Vec<ClaimView> = pvs
        .iter()
        .filter(|pv| {
            pv.pointer(&format!(
                "/metadata/labels/{}",
                CLAIM_LABEL.replace('/', "~1")
            ))
            .is_some()
        })
        .filter_map(claim_view)
        .collect();
    claims.sort_by(|a, b| (&a.namespace, &a.claim_name).cmp(&(&b.namespace, &b.claim_name)));
    Ok(claims)
}

/// Checks that the claim exists (and is ours) before deleting it.
pub async fn storage_delete_params(
    engine: &Engine,
    name: &str,
    claim: &str,
    namespace: Option<&str>,
) -> ApiResult<Value> {
    validate::dns_label("claim", "claim name", claim)?;
    let namespace = namespace.unwrap_or("default");
    validate::dns_label("namespace", "namespace", namespace)?;
    let claims = list_storage(engine, name).await?;
    if !claims
        .iter()
        .any(|c| c.claim_name == claim && c.namespace == namespace)
    {
        return Err(ApiError::NotFound {
            what: format!("claim `{claim}` in namespace `{namespace}` of cluster `{name}`"),
            hint: Some(Box::new(json!(claims
                .iter()
                .map(|c| format!("{}/{}", c.namespace, c.claim_name))
                .collect::<Vec<_>>()))),
        });
    }
    // A team's namespace holds a copy of the cluster's claim (so `/s3` is the same there): the
    // copies go with their teams, and the cluster's own claim stays while any team has one.
    let copies: Vec<&str> = claims
        .iter()
        .filter(|c| c.claim_name == claim && c.namespace != namespace)
        .filter(|c| {
            c.namespace
                .starts_with(crate::service::shared::labels::TEAM_NAMESPACE_PREFIX)
        })
        .map(|c| c.namespace.as_str())
        .collect();
    if namespace == crate::service::shared::labels::WORKLOAD_NAMESPACE && !copies.is_empty() {
        return Err(ApiError::Conflict {
            slug: ProblemType::ClaimSharedByTeams,
            detail: format!(
                "`{claim}` is the cluster's claim, and the teams' namespaces {} mount copies of it: their workloads would lose `/s3`. Delete those copies first (this route with ?namespace=<namespace>), or remove the teams",
                copies.join(", ")
            ),
            field: Some("claim".into()),
            operation_id: None,
        });
    }
    Ok(json!({"claimName": claim, "namespace": namespace}))
}
