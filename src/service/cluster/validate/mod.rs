//! Field validation shared by every route (and so by every MCP tool): names, CIDRs, ARNs,
//! counts, enums, zones and instance types. Each failure names its field and, where there is a
//! finite set of valid values, lists them in the hint.

use serde_json::json;

use crate::cloud::{Capacity, Cloud, Zone};
use crate::error::{ApiError, ApiResult};
use crate::service::cluster::requests::{CapacityType, NetworkInterface};

mod network;
pub use network::*;

/// Longest cluster name: it ends up in the shared bucket name
/// `sagemaker-instantstart-<name>-<account>` (S3 allows 63 characters).
pub const MAX_CLUSTER_NAME: usize = 24;

/// The versions a new cluster may run: those of HyperPod's list
/// ([`crate::cloud::HYPERPOD_KUBERNETES_VERSIONS`]) still in EKS standard support.
pub const KUBERNETES_VERSIONS: &[&str] = &["1.31", "1.32", "1.33", "1.34"];
pub const DEFAULT_KUBERNETES_VERSION: &str = "1.32";

/// A cluster name that is valid as an EKS cluster name, a HyperPod cluster name prefix, an IAM
/// role name prefix, a Kubernetes label value and part of an S3 bucket name.
pub fn cluster_name(field: &str, name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_CLUSTER_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("`{}` is not a valid cluster name", truncate(name)),
            json!(format!(
                "1–{MAX_CLUSTER_NAME} characters: lowercase letters, digits and hyphens; starts with a letter, ends with a letter or digit (e.g. `demo`, `llm-train-1`)"
            )),
        ))
    }
}

/// An instance group name as SageMaker accepts it.
pub fn instance_group_name(field: &str, name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    require(
        ok,
        field,
        format!("`{}` is not a valid instance group name", truncate(name)),
        json!("1–63 letters, digits and hyphens, starting and ending with a letter or digit"),
    )
}

pub fn region(field: &str, requested: Option<&str>, cloud: &Cloud) -> ApiResult<String> {
    let current = cloud.network.region();
    match requested {
        None => Ok(current),
        Some(r) if r == current => Ok(current),
        Some(r) => Err(ApiError::validation_hint(
            field,
            format!(
                "this control plane manages region {current}, not `{}`",
                truncate(r)
            ),
            json!([current]),
        )),
    }
}

pub fn kubernetes_version(field: &str, v: Option<&str>) -> ApiResult<String> {
    match v {
        None => Ok(DEFAULT_KUBERNETES_VERSION.to_string()),
        Some(v) if KUBERNETES_VERSIONS.contains(&v) => Ok(v.to_string()),
        Some(v) => Err(ApiError::validation_hint(
            field,
            format!("Kubernetes version `{}` is not supported", truncate(v)),
            json!(KUBERNETES_VERSIONS),
        )),
    }
}

/// Looks a zone up by name among the region's zones.
pub fn zone(field: &str, name: &str, zones: &[Zone]) -> ApiResult<Zone> {
    zones
        .iter()
        .find(|z| z.name == name)
        .cloned()
        .ok_or_else(|| {
            ApiError::validation_hint(
                field,
                format!(
                    "`{}` is not an Availability Zone of this region",
                    truncate(name)
                ),
                json!(zones.iter().map(|z| &z.name).collect::<Vec<_>>()),
            )
        })
}

/// Instance type offered in the zone; otherwise the hint lists the zones that do offer it (or
/// the types this zone offers).
pub async fn instance_type_in_zone(
    field: &str,
    instance_type: &str,
    zone: &Zone,
    zones: &[Zone],
    cloud: &Cloud,
) -> ApiResult<()> {
    let Some(ec2_type) = instance_type.strip_prefix("ml.") else {
        return Err(ApiError::validation_hint(
            field,
            format!(
                "`{}` is not a SageMaker instance type",
                truncate(instance_type)
            ),
            json!("HyperPod instance types start with `ml.`, e.g. ml.g5.8xlarge"),
        ));
    };
    let here = crate::service::shared::reads::retrying(|| {
        cloud.network.describe_instance_type_offerings(&zone.name)
    })
    .await?;
    if here.iter().any(|t| t == ec2_type) {
        return Ok(());
    }
    let mut offering = Vec::new();
    for z in zones {
        if z.name != zone.name
            && crate::service::shared::reads::retrying(|| {
                cloud.network.describe_instance_type_offerings(&z.name)
            })
            .await?
            .iter()
            .any(|t| t == ec2_type)
        {
            offering.push(z.name.clone());
        }
    }
    if offering.is_empty() {
        Err(ApiError::validation_hint(
            field,
            format!(
                "`{}` is not offered in any zone of this region",
                truncate(instance_type)
            ),
            json!({"offeredIn": zone.name, "instanceTypes": here.iter().map(|t| format!("ml.{t}")).collect::<Vec<_>>()}),
        ))
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("{instance_type} is not offered in {}", zone.name),
            json!({"zonesOffering": offering}),
        ))
    }
}

/// Instance count: at least 1, and within the account's HyperPod cluster-usage quota when the
/// quota can be read.
pub async fn instance_count(
    field: &str,
    count: i64,
    instance_type: &str,
    cloud: &Cloud,
) -> ApiResult<u32> {
    let n = u32::try_from(count)
        .ok()
        .filter(|n| (1..=1000).contains(n))
        .ok_or_else(|| {
            ApiError::validation_hint(
                field,
                format!("{count} is not a valid instance count"),
                json!("1 to 1000"),
            )
        })?;
    match crate::service::shared::reads::retrying(|| cloud.quotas.hyperpod_cluster_usage(instance_type)).await {
        Ok(Some(quota)) if n > quota => Err(ApiError::validation_hint(
            field,
            format!("{n} × {instance_type} exceeds the account's HyperPod cluster-usage quota of {quota}"),
            json!(format!("at most {quota}, or request a quota increase in Service Quotas (Amazon SageMaker › {instance_type} for cluster usage)")),
        )),
        Ok(_) => Ok(n),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the HyperPod quota; not enforcing it");
            Ok(n)
        }
    }
}

pub fn capacity(capacity_type: CapacityType, plan_arn: Option<&str>) -> ApiResult<Capacity> {
    match (capacity_type, plan_arn) {
        (CapacityType::OnDemand, None) => Ok(Capacity::OnDemand),
        (CapacityType::Spot, None) => Ok(Capacity::Spot),
        (CapacityType::TrainingPlan, Some(arn)) => {
            training_plan_arn("trainingPlanArn", arn)?;
            Ok(Capacity::TrainingPlan {
                arn: arn.to_string(),
            })
        }
        (CapacityType::TrainingPlan, None) => Err(ApiError::validation(
            "trainingPlanArn",
            "capacityType `training-plan` needs trainingPlanArn",
        )),
        (CapacityType::OnDemand | CapacityType::Spot, Some(_)) => Err(ApiError::validation_hint(
            "trainingPlanArn",
            "trainingPlanArn is only valid with capacityType `training-plan`",
            json!(CapacityType::ALL),
        )),
    }
}

/// The network interface of a new group: `standard` (HyperPod's default, EFA with ENA where
/// the type supports EFA) or `efa-only`, which only EFA-capable types can carry.
pub fn network_interface(
    field: &str,
    mode: Option<NetworkInterface>,
    instance_type: &str,
) -> ApiResult<Option<String>> {
    match mode {
        None | Some(NetworkInterface::Standard) => Ok(None),
        Some(NetworkInterface::EfaOnly) if crate::cloud::efa_supported(instance_type) => {
            Ok(Some(NetworkInterface::EfaOnly.as_str().into()))
        }
        Some(NetworkInterface::EfaOnly) => Err(ApiError::validation_hint(
            field,
            format!(
                "{} has no EFA, so it cannot use an EFA-only interface",
                truncate(instance_type)
            ),
            json!([NetworkInterface::Standard]),
        )),
    }
}

pub fn training_plan_arn(field: &str, arn: &str) -> ApiResult<()> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "sagemaker"
        && !parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].chars().all(|c| c.is_ascii_digit())
        && parts[5].strip_prefix("training-plan/").is_some_and(|n| {
            !n.is_empty()
                && n.len() <= 63
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    require(
        ok,
        field,
        format!("`{}` is not a training plan ARN", truncate(arn)),
        json!("arn:aws:sagemaker:<region>:<account>:training-plan/<name>"),
    )
}

pub fn volume_size(field: &str, gb: Option<i64>) -> ApiResult<u32> {
    match gb {
        None => Ok(500),
        Some(n) if (1..=16384).contains(&n) => Ok(n as u32),
        Some(n) => Err(ApiError::validation_hint(
            field,
            format!("{n} GB is not a valid EBS volume size"),
            json!("1 to 16384"),
        )),
    }
}

/// Keeps echoed user input short in error messages.
/// `Ok` when `ok`, else the validation problem for `field` with its hint.
pub(crate) fn require(
    ok: bool,
    field: &str,
    detail: String,
    hint: serde_json::Value,
) -> ApiResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::validation_hint(field, detail, hint))
    }
}

pub(crate) fn truncate(s: &str) -> String {
    if s.chars().count() > 64 {
        format!("{}…", s.chars().take(64).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A Kubernetes object name usable as a claim name or namespace (RFC 1123 label).
pub fn dns_label(field: &str, what: &str, name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    require(ok, field, format!("`{}` is not a valid {what}", truncate(name)), json!("1–63 lowercase letters, digits and hyphens, starting and ending with a letter or digit"))
}

/// An S3 bucket name under the general-purpose bucket naming rules.
pub fn bucket_name(field: &str, name: &str) -> ApiResult<()> {
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ok = (3..=63).contains(&name.len())
        && chars_ok
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && !name.contains("..")
        && !name.contains(".-")
        && !name.contains("-.")
        && name.parse::<std::net::Ipv4Addr>().is_err()
        && !name.starts_with("xn--")
        && !name.ends_with("-s3alias");
    require(ok, field, format!("`{}` is not a valid S3 bucket name", truncate(name)), json!("3–63 lowercase letters, digits, dots and hyphens; starts and ends with a letter or digit; not an IP address"))
}

/// An AWS region code such as `us-west-2` (any partition).
pub fn region_code(field: &str, region: &str) -> ApiResult<()> {
    let parts: Vec<&str> = region.split('-').collect();
    let ok = parts.len() >= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
        && parts
            .last()
            .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
        && region.len() <= 25;
    require(
        ok,
        field,
        format!("`{}` is not an AWS region code", truncate(region)),
        json!("e.g. us-west-2, eu-central-1, ap-northeast-1"),
    )
}

/// An FSx file system id (`fs-` + 8 or 17 hex digits).
pub fn fsx_file_system_id(field: &str, id: &str) -> ApiResult<()> {
    let hex = id.strip_prefix("fs-").unwrap_or("");
    if matches!(hex.len(), 8 | 17)
        && hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("`{}` is not an FSx file system id", truncate(id)),
            json!("fs- followed by 17 hex digits, e.g. fs-0123456789abcdef0"),
        ))
    }
}

/// An IAM managed policy ARN (`arn:<partition>:iam::<account>:policy/<path/name>`).
pub fn policy_arn(field: &str, arn: &str) -> ApiResult<()> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ok = matches!(parts.as_slice(), ["arn", p, "iam", "", account, resource]
        if p.starts_with("aws")
            && account.len() == 12
            && account.chars().all(|c| c.is_ascii_digit())
            && resource.strip_prefix("policy/").is_some_and(|n| !n.is_empty()));
    require(
        ok,
        field,
        format!("`{}` is not an IAM managed policy ARN", truncate(arn)),
        json!("arn:aws:iam::123456789012:policy/name"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_follow_the_strictest_target_rules() {
        for good in ["demo", "a", "llm-train-1", "x23456789012345678901234"] {
            assert!(cluster_name("name", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Demo",
            "1abc",
            "abc-",
            "a_b",
            "x234567890123456789012345",
            "dé",
        ] {
            assert!(cluster_name("name", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn efa_only_needs_an_efa_capable_type() {
        let efa_only = Some(NetworkInterface::EfaOnly);
        assert_eq!(network_interface("f", None, "ml.g5.8xlarge").unwrap(), None);
        assert_eq!(
            network_interface("f", efa_only, "ml.p5.48xlarge").unwrap(),
            Some("efa-only".into())
        );
        assert!(network_interface("f", efa_only, "ml.g5.xlarge").is_err());
        assert!(network_interface("f", efa_only, "ml.c5.2xlarge").is_err());
    }

    #[test]
    fn capacity_requires_a_plan_exactly_for_training_plans() {
        let arn = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-week";
        use CapacityType::{Spot, TrainingPlan};
        assert_eq!(capacity(Spot, None).unwrap(), Capacity::Spot);
        assert!(matches!(
            capacity(TrainingPlan, Some(arn)).unwrap(),
            Capacity::TrainingPlan { .. }
        ));
        assert!(capacity(TrainingPlan, None).is_err());
        assert!(capacity(Spot, Some(arn)).is_err());
        assert!(capacity(TrainingPlan, Some("arn:aws:iam::1:role/x")).is_err());
    }

    #[test]
    fn storage_fields() {
        assert!(bucket_name("b", "my-bucket.data-1").is_ok());
        for bad in [
            "ab",
            "My-Bucket",
            "a..b",
            "192.168.1.1",
            "-ab",
            "xn--abc",
            "a-.b",
        ] {
            assert!(bucket_name("b", bad).is_err(), "{bad}");
        }
        assert!(region_code("r", "us-west-2").is_ok());
        assert!(region_code("r", "us-gov-west-1").is_ok());
        assert!(region_code("r", "uswest2").is_err());
        assert!(fsx_file_system_id("f", "fs-0123456789abcdef0").is_ok());
        assert!(fsx_file_system_id("f", "fs-XYZ").is_err());
        assert!(dns_label("c", "claim name", "s3-claim").is_ok());
        assert!(dns_label("c", "claim name", "S3_claim").is_err());
    }

    #[test]
    fn policy_arns() {
        assert!(policy_arn(
            "p",
            "arn:aws:iam::123456789012:policy/instantstart-boundary"
        )
        .is_ok());
        assert!(policy_arn("p", "arn:aws:iam::aws:policy/AdministratorAccess").is_err());
        assert!(policy_arn("p", "arn:aws:iam::123456789012:role/x").is_err());
    }
}
