//! What an endpoint request carries over the wire: a leaf that the validation (`spec`), the
//! views and the start of an endpoint all read.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
    /// The team it runs as (task governance): the endpoint goes to namespace
    /// `hyperpod-ns-<team>` with its LocalQueue. Required on a cluster whose teams share it.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}
