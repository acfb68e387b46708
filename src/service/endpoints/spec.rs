//! What an endpoint request means: each field checked and turned into the spec the manifest is
//! made from (the model's source, the worker, the KV cache tiers, routing, autoscaling).

use serde_json::json;

use super::manifests::{Autoscaling, EndpointSpec, L2Cache, ModelSource, MODEL_MOUNT};
use super::requests::{
    AutoscalingRequest, EndpointRequest, KvCacheRequest, DEFAULT_IMAGE, ROUTING_STRATEGIES,
};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::validate;
use crate::service::steps::workloads::WORKLOAD_NAMESPACE;
use crate::service::storage::list_storage;
use crate::service::workloads::{bounded, image};

/// The model source a `model` string names.
pub(super) async fn model_source(
    engine: &Engine,
    cluster: &str,
    model: &str,
) -> ApiResult<ModelSource> {
    let clean = |p: &str| {
        !p.is_empty()
            && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    };
    let hint = json!([
        "/s3/models/Qwen/Qwen3-8B",
        "s3://bucket/prefix",
        "fsx://fs-0123456789abcdef0/models/x",
        "jumpstart:meta-textgeneration-llama-3-1-8b-instruct"
    ]);
    if let Some(id) = model.strip_prefix("jumpstart:") {
        let ok = (1..=63).contains(&id.len())
            && id.starts_with(|c: char| c.is_ascii_alphanumeric())
            && !id.ends_with('-')
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if ok {
            return Ok(ModelSource::JumpStart {
                model_id: id.to_string(),
                version: None,
            });
        }
    }
    if let Some(rest) = model.strip_prefix("/s3/") {
        if !clean(rest) {
            return Err(ApiError::validation_hint(
                "model",
                format!(
                    "`{}` is not a plain path under /s3",
                    validate::truncate(model)
                ),
                hint,
            ));
        }
        let claims = list_storage(engine, cluster).await?;
        let (bucket, mounted) = claims
            .iter()
            .find(|c| c.claim_name == "s3-claim" && c.namespace == WORKLOAD_NAMESPACE)
            .and_then(|c| Some((c.bucket.clone()?, c.prefix.clone().unwrap_or_default())))
            .ok_or_else(|| ApiError::Conflict {
                slug: ProblemType::StorageMissing,
                detail: format!("`{cluster}` has no s3-claim to serve /s3 paths from: create it with storage_setup, or name an s3:// location"),
                field: Some("model".into()),
                operation_id: None,
            })?;
        // `/s3` is the claim's mount: its prefix (a cluster's, in the shared bucket) comes first.
        return Ok(ModelSource::S3 {
            bucket,
            region: engine.cloud().network.region(),
            location: format!("{mounted}{}", rest.trim_end_matches('/')),
        });
    }
    if let Some(rest) = model.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if bucket_ok && clean(prefix) {
            crate::service::storage::bucket::check_reachable(engine.cloud(), "model", bucket)?;
            return Ok(ModelSource::S3 {
                bucket: bucket.to_string(),
                region: engine.cloud().network.region(),
                location: prefix.trim_end_matches('/').to_string(),
            });
        }
    }
    if let Some(rest) = model.strip_prefix("fsx://") {
        let (fs, path) = rest.split_once('/').unwrap_or((rest, ""));
        let fs_ok = fs.starts_with("fs-")
            && fs.len() <= 21
            && fs[3..].chars().all(|c| c.is_ascii_hexdigit());
        if fs_ok && clean(path) {
            return Ok(ModelSource::Fsx {
                file_system_id: fs.to_string(),
                location: path.to_string(),
            });
        }
    }
    Err(ApiError::validation_hint(
        "model",
        format!(
            "`{}` is not a model location this endpoint can read",
            validate::truncate(model)
        ),
        hint,
    ))
}

fn kv_cache(req: Option<&KvCacheRequest>, vllm: bool) -> ApiResult<(bool, Option<L2Cache>)> {
    let k = req.cloned().unwrap_or_default();
    let l1 = k.l1.unwrap_or(true);
    let l2 = match (k.l2.as_deref().unwrap_or("none"), &k.redis_url) {
        ("none", None) => None,
        ("tieredstorage", None) => Some(L2Cache::TieredStorage),
        ("redis", Some(url)) => {
            let ok = url.len() <= 512
                && (url.starts_with("redis://") || url.starts_with("rediss://"))
                && !url.chars().any(|c| c.is_whitespace() || c.is_control());
            validate::require(
                ok,
                "kvCache.redisUrl",
                format!("`{}` is not a redis:// URL", validate::truncate(url)),
                json!("redis://redis.default.svc.cluster.local:6379"),
            )?;
            Some(L2Cache::Redis(url.clone()))
        }
        ("redis", None) => {
            return Err(ApiError::validation_hint(
                "kvCache.redisUrl",
                "an L2 cache on Redis needs the Redis URL",
                json!("redis://redis.default.svc.cluster.local:6379"),
            ))
        }
        (_, Some(_)) if k.l2.as_deref() != Some("redis") => {
            return Err(ApiError::validation(
                "kvCache.redisUrl",
                "`redisUrl` goes with `l2` `redis` only",
            ))
        }
        (other, _) => {
            return Err(ApiError::validation_hint(
                "kvCache.l2",
                format!("`{}` is not an L2 cache backend", validate::truncate(other)),
                json!(["none", "tieredstorage", "redis"]),
            ))
        }
    };
    if (k.l1 == Some(true) || l2.is_some()) && !vllm {
        return Err(ApiError::validation_hint(
            "kvCache",
            "the managed KV cache tiers work with a vLLM (LMCache) worker only",
            json!(format!("use the default image {DEFAULT_IMAGE}, or turn the cache off with {{\"l1\": false}}")),
        ));
    }
    Ok((l1 && vllm, l2))
}

/// An Amazon Managed Service for Prometheus workspace URL, the only server the operator's
/// Prometheus trigger accepts (its CRD's pattern).
fn managed_prometheus(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("https://aps-workspaces.") else {
        return false;
    };
    let Some((host, id)) = rest.split_once(".amazonaws.com/workspaces/ws-") else {
        return false;
    };
    let label = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    host.split('.').all(label) && label(id)
}

pub(crate) fn autoscaling(req: Option<&AutoscalingRequest>) -> ApiResult<Option<Autoscaling>> {
    let Some(a) = req else { return Ok(None) };
    validate::require(
        a.min_replicas <= a.max_replicas && a.max_replicas >= 1 && a.max_replicas <= 64,
        "autoscaling",
        format!(
            "minReplicas ({}) ≤ maxReplicas ({}), and maxReplicas is 1 to 64",
            a.min_replicas, a.max_replicas
        ),
        json!({"minReplicas": 1, "maxReplicas": 4}),
    )?;
    let cooldown = a.cooldown_seconds.unwrap_or(300);
    validate::require(
        cooldown <= 86_400,
        "autoscaling.cooldownSeconds",
        "a cooldown is at most a day".into(),
        json!(300),
    )?;
    let trigger = match &a.prometheus {
        None => None,
        Some(p) => {
            validate::require(
                managed_prometheus(&p.server_address),
                "autoscaling.prometheus.serverAddress",
                "the operator scales on an Amazon Managed Service for Prometheus workspace: its https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-… URL".into(),
                json!("https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"),
            )?;
            validate::require(
                (1..=2048).contains(&p.query.len()) && !p.query.chars().any(char::is_control),
                "autoscaling.prometheus.query",
                "a PromQL query of up to 2048 characters".into(),
                json!("sum(rate(vllm:request_success_total[1m]))"),
            )?;
            validate::require(
                p.target_value.is_finite() && p.target_value > 0.0,
                "autoscaling.prometheus.targetValue",
                "a positive number".into(),
                json!(10),
            )?;
            Some((
                "prometheusTrigger",
                json!({"serverAddress": p.server_address, "query": p.query,
                       "targetValue": p.target_value, "metricType": "Average"}),
            ))
        }
    };
    Ok(Some(Autoscaling {
        min_replicas: a.min_replicas,
        max_replicas: a.max_replicas,
        cooldown_seconds: cooldown,
        trigger,
    }))
}

/// Validates a request into the endpoint's spec (no cluster reads).
pub(crate) fn spec_of(req: &EndpointRequest, mut source: ModelSource) -> ApiResult<EndpointSpec> {
    validate::dns_label("endpointName", "endpoint name", &req.endpoint_name)?;
    let jumpstart = matches!(source, ModelSource::JumpStart { .. });
    if jumpstart {
        // JumpStart brings its own serving container: the worker fields are not asked.
        for (field, given) in [
            ("image", req.image.is_some()),
            ("args", req.args.is_some()),
            ("port", req.port.is_some()),
            ("gpus", req.gpus.is_some()),
            ("invocationPath", req.invocation_path.is_some()),
        ] {
            if given {
                return Err(ApiError::validation(
                    field,
                    format!("`{field}` is chosen by JumpStart for a jumpstart: model"),
                ));
            }
        }
        validate::require(
            req.accept_eula == Some(true),
            "acceptEula",
            "a JumpStart model is served only once its license agreement is accepted".into(),
            json!(true),
        )?;
        if let (ModelSource::JumpStart { version, .. }, Some(v)) = (&mut source, &req.model_version)
        {
            let ok = v.split('.').count() == 3
                && v.split('.')
                    .all(|p| (1..=4).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit()));
            validate::require(
                ok,
                "modelVersion",
                format!("`{}` is not a version like 1.2.3", validate::truncate(v)),
                json!("2.0.4"),
            )?;
            *version = Some(v.clone());
        }
    } else if req.accept_eula.is_some() || req.model_version.is_some() {
        return Err(ApiError::validation(
            if req.accept_eula.is_some() {
                "acceptEula"
            } else {
                "modelVersion"
            },
            "`acceptEula` and `modelVersion` go with a jumpstart: model only",
        ));
    }
    validate::require(
        req.endpoint_name.len() <= 50,
        "endpointName",
        "an endpoint name has at most 50 characters".into(),
        json!("qwen3-8b"),
    )?;
    if let Some(e) = &req.sagemaker_endpoint {
        let ok = (1..=63).contains(&e.len())
            && e.starts_with(|c: char| c.is_ascii_alphanumeric())
            && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !e.ends_with('-');
        validate::require(
            ok,
            "sagemakerEndpoint",
            format!(
                "`{}` is not a SageMaker endpoint name",
                validate::truncate(e)
            ),
            json!("qwen3-8b-sme"),
        )?;
    }
    let img = req.image.as_deref().unwrap_or(DEFAULT_IMAGE);
    image("image", img)?;
    // JumpStart's serving containers support the operator's cache tiers and routing.
    let vllm = jumpstart || img.contains("vllm") || img.contains("lmcache");
    let args = req
        .args
        .clone()
        .unwrap_or_else(|| vec![MODEL_MOUNT.to_string()]);
    validate::require(
        args.len() <= 64 && args.iter().all(|a| a.len() <= 1024 && !a.contains('\0')),
        "args",
        "at most 64 arguments of at most 1024 characters each".into(),
        json!([MODEL_MOUNT, "--max-model-len", "4096"]),
    )?;
    let path = req
        .invocation_path
        .as_deref()
        .unwrap_or("v1/chat/completions");
    validate::require(
        invocation_path_ok(path),
        "invocationPath",
        "a path on the worker without the leading slash".into(),
        json!("v1/chat/completions"),
    )?;
    let routing = match &req.routing {
        None => None,
        Some(r) if ROUTING_STRATEGIES.contains(&r.as_str()) => Some(r.clone()),
        Some(r) => {
            return Err(ApiError::validation_hint(
                "routing",
                format!("`{}` is not a routing strategy", validate::truncate(r)),
                json!(ROUTING_STRATEGIES),
            ))
        }
    };
    if routing.as_deref() == Some("kvaware") && !vllm {
        return Err(ApiError::validation_hint(
            "routing",
            "KV-aware routing reads the vLLM (LMCache) worker's cache",
            json!(format!(
                "use the default image {DEFAULT_IMAGE}, or routing prefixaware"
            )),
        ));
    }
    let (l1, l2) = kv_cache(req.kv_cache.as_ref(), vllm)?;
    let replicas = bounded("replicas", req.replicas, 1, 1..=64)? as u32;
    let auto = autoscaling(req.autoscaling.as_ref())?;
    if let Some(a) = &auto {
        validate::require(
            (a.min_replicas..=a.max_replicas).contains(&replicas),
            "replicas",
            format!(
                "{replicas} replicas is outside the autoscaling range {}–{}",
                a.min_replicas, a.max_replicas
            ),
            json!(a.min_replicas.max(1)),
        )?;
    }
    Ok(EndpointSpec {
        name: req.endpoint_name.clone(),
        model_name: req.endpoint_name.clone(),
        sagemaker_endpoint: req.sagemaker_endpoint.clone(),
        instance_type: req.instance_type.clone(),
        replicas,
        source,
        image: img.to_string(),
        args,
        port: bounded("port", req.port, 8000, 1..=65535)? as u16,
        gpus: bounded("gpus", req.gpus, 1, 1..=8)? as u32,
        invocation_path: path.to_string(),
        l1_cache: l1,
        l2_cache: l2,
        routing,
        autoscaling: auto,
        tls_output: None,
    })
}

/// A path on the worker an invocation may go to: relative, plain characters, no `..`. Checked
/// on the request, and again on what the cluster says, since the path reaches the API server's
/// service proxy.
pub fn invocation_path_ok(path: &str) -> bool {
    (1..=128).contains(&path.len())
        && !path.starts_with('/')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !path.contains("..")
}
