//! Managed inference endpoints through the HyperPod inference operator: a request validated
//! field by field into an `InferenceEndpointConfig` (model from the cluster's S3 claim, another
//! bucket or FSx; the worker; managed tiered KV cache; intelligent routing; autoscaling), the
//! views of the endpoints a cluster runs, and changes with the diff contract.

mod invoke;
mod manifests;
mod views;

pub use invoke::*;
pub use manifests::*;
pub use views::*;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ObjectRef;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::incluster::{addon_active, kube_target, list_storage};
use crate::service::steps::workloads::{ApplyParams, WORKLOAD_NAMESPACE};
use crate::service::validate;
use crate::service::workloads::{bounded, image};

pub use crate::service::incluster::INFERENCE_OPERATOR_ADDON;

/// The worker image when none is given: vLLM with LMCache, which the KV cache tiers and
/// KV-aware routing need (pinned, as AWS's examples pin it).
pub const DEFAULT_IMAGE: &str = "lmcache/vllm-openai:v0.3.7";
pub const ROUTING_STRATEGIES: [&str; 4] = ["prefixaware", "kvaware", "session", "roundrobin"];

/// Managed tiered KV cache.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KvCacheRequest {
    /// L1: CPU memory offload (default on).
    pub l1: Option<bool>,
    /// L2: `none` (default), `tieredstorage` (HyperPod's managed tier) or `redis`.
    pub l2: Option<String>,
    /// With `l2` `redis`: its URL, `redis://host:port`.
    pub redis_url: Option<String>,
}

/// A Prometheus query that drives autoscaling.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusTriggerRequest {
    pub server_address: String,
    pub query: String,
    pub target_value: f64,
}

/// Autoscaling of the model's replicas (KEDA, managed by the operator). Its own name in the
/// document: a deployment's `AutoscalingRequest` is another shape.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = EndpointAutoscalingRequest)]
pub struct AutoscalingRequest {
    /// 0 to `maxReplicas`.
    #[schema(minimum = 0, maximum = 64)]
    pub min_replicas: u32,
    /// 1–64.
    #[schema(minimum = 1, maximum = 64)]
    pub max_replicas: u32,
    /// Seconds after the last active trigger before scaling down (default 300, at most a day).
    #[schema(minimum = 0, maximum = 86400)]
    pub cooldown_seconds: Option<u32>,
    pub prometheus: Option<PrometheusTriggerRequest>,
}

/// Body of `POST /api/clusters/{name}/endpoints`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointRequest {
    /// The endpoint's name (a DNS label of at most 50 characters): the Kubernetes resource and
    /// the model name.
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$")]
    pub endpoint_name: String,
    /// Where the model is: a path under `/s3` (the cluster's S3 claim, e.g. what a model
    /// download wrote), `s3://bucket/prefix`, `fsx://fs-…/path`, or `jumpstart:<modelId>` for a
    /// SageMaker JumpStart model (then `acceptEula` must be true).
    pub model: String,
    /// JumpStart: the model's end-user license agreement is accepted.
    pub accept_eula: Option<bool>,
    /// JumpStart: a model version (`1.2.3`; default the latest).
    pub model_version: Option<String>,
    /// One of the cluster's instance types with NVIDIA GPUs.
    pub instance_type: String,
    /// Also register a SageMaker endpoint of this name.
    pub sagemaker_endpoint: Option<String>,
    /// Worker image (default: vLLM with LMCache, pinned).
    pub image: Option<String>,
    /// Worker arguments, as a list (default: the model path).
    pub args: Option<Vec<String>>,
    /// The port the worker serves (default 8000).
    #[schema(minimum = 1, maximum = 65535)]
    pub port: Option<i64>,
    /// GPUs per replica, 1–8 (default 1).
    #[schema(minimum = 1, maximum = 8)]
    pub gpus: Option<i64>,
    /// Replicas, 1–64 (default 1).
    #[schema(minimum = 1, maximum = 64)]
    pub replicas: Option<i64>,
    /// The path invocations go to (default `v1/chat/completions`).
    pub invocation_path: Option<String>,
    pub kv_cache: Option<KvCacheRequest>,
    /// Intelligent routing strategy, fixed for the endpoint's life: `prefixaware`, `kvaware`,
    /// `session` or `roundrobin`.
    pub routing: Option<String>,
    pub autoscaling: Option<AutoscalingRequest>,
}

fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

pub fn endpoint_ref(name: &str) -> ObjectRef {
    ref_of(KIND, name)
}

/// An endpoint's resource of either kind (`InferenceEndpointConfig` or `JumpStartModel`).
pub fn ref_of(kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: API_VERSION.into(),
        kind: kind.into(),
        namespace: Some(WORKLOAD_NAMESPACE.into()),
        name: name.into(),
    }
}

/// The model source a `model` string names.
async fn model_source(engine: &Engine, cluster: &str, model: &str) -> ApiResult<ModelSource> {
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
                slug: "storage-missing",
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
            crate::service::bucket::check_reachable(engine.cloud(), "model", bucket)?;
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

fn autoscaling(req: Option<&AutoscalingRequest>) -> ApiResult<Option<Autoscaling>> {
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
        (1..=128).contains(&path.len())
            && !path.starts_with('/')
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            && !path.contains(".."),
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

/// The endpoint of this name, of either kind, if the cluster has one.
pub(crate) async fn find(
    engine: &Engine,
    target: &crate::cloud::KubeTarget,
    name: &str,
) -> ApiResult<Option<Value>> {
    for kind in [KIND, JUMPSTART_KIND] {
        match engine.cloud().kube.get(target, &ref_of(kind, name)).await {
            Ok(Some(o)) => return Ok(Some(o)),
            Ok(None) => {}
            // The operator is not installed: no endpoint of that kind.
            Err(e) if e.code == "KindNotServed" => {}
            Err(e) => return Err(cloud_err(e)),
        }
    }
    Ok(None)
}

/// Validates a request and makes its operation's parameters. Nothing is applied here.
pub async fn endpoint_params(
    engine: &Engine,
    cluster: &str,
    req: &EndpointRequest,
) -> ApiResult<Value> {
    validate::dns_label("endpointName", "endpoint name", &req.endpoint_name)?;
    let groups = crate::service::list_groups(engine, cluster).await?;
    if !groups.iter().any(|g| g.instance_type == req.instance_type)
        || crate::cloud::gpus_per_instance(&req.instance_type) == 0
    {
        return Err(ApiError::validation_hint(
            "instanceType",
            format!(
                "`{cluster}` has no instance group of {} with NVIDIA GPUs",
                validate::truncate(&req.instance_type)
            ),
            json!(groups
                .iter()
                .filter(|g| crate::cloud::gpus_per_instance(&g.instance_type) > 0)
                .map(|g| g.instance_type.clone())
                .collect::<Vec<_>>()),
        ));
    }
    let source = model_source(engine, cluster, &req.model).await?;
    let mut spec = spec_of(req, source)?;
    if !addon_active(engine, cluster, INFERENCE_OPERATOR_ADDON).await? {
        return Err(ApiError::Conflict {
            slug: "inference-operator-missing",
            detail: format!("endpoints run on the HyperPod inference operator, which is not active on `{cluster}`: enable it with PATCH /api/clusters/{cluster}/features {{\"inferenceOperator\": true}} (features_update), then deploy again"),
            field: None,
            operation_id: None,
        });
    }
    let target = kube_target(engine, cluster).await?;
    if find(engine, &target, &req.endpoint_name).await?.is_some() {
        return Err(ApiError::Conflict {
            slug: "endpoint-exists",
            detail: format!("an endpoint `{}` already exists on `{cluster}`: change it with PATCH, or pick another name", req.endpoint_name),
            field: Some("endpointName".into()),
            operation_id: None,
        });
    }
    // The operator keeps its self-signed TLS certificate in the cluster's place for objects
    // (whatever bucket the model comes from), under the one prefix its role may write.
    let record = crate::service::live_cluster(engine, cluster).await?;
    let recorded = crate::service::resources::ClusterResources::of(&record.resources);
    if let Some(place) = crate::service::bucket::BucketPlace::recorded(&recorded) {
        spec.tls_output = Some(place.uri(&format!(
            "{}{}",
            crate::service::steps::features::TLS_PREFIX,
            spec.name
        )));
    }
    let manifest = endpoint_resource(&spec);
    let params = ApplyParams {
        workload: format!("endpoint/{}", req.endpoint_name),
        watch: ref_of(
            manifest["kind"].as_str().unwrap_or(KIND),
            &req.endpoint_name,
        ),
        manifests: vec![manifest],
        prune: vec![],
        also_watch: vec![],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}
