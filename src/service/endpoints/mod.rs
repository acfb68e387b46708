//! Managed inference endpoints through the HyperPod inference operator: a request validated
//! field by field into an `InferenceEndpointConfig` (model from the cluster's S3 claim, another
//! bucket or FSx; the worker; managed tiered KV cache; intelligent routing; autoscaling), the
//! views of the endpoints a cluster runs, and changes with the diff contract.

mod invoke;
mod manifests;
mod spec;
mod views;

pub use invoke::*;
pub use manifests::*;
use spec::model_source;
pub(crate) use spec::{autoscaling, spec_of};
pub use views::*;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ObjectRef;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::incluster::{addon_active, kube_target};
use crate::service::labels::is_workload_namespace;
use crate::service::steps::workloads::ApplyParams;
use crate::service::validate;

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
    /// The team it runs as (task governance): the endpoint goes to namespace
    /// `hyperpod-ns-<team>` with its LocalQueue. Required on a cluster whose teams share it.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}

fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

/// An endpoint's resource of either kind (`InferenceEndpointConfig` or `JumpStartModel`) in
/// its namespace (`default`, or its team's).
pub fn ref_of(kind: &str, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: API_VERSION.into(),
        kind: kind.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// The endpoint of this name, of either kind, if the cluster has one.
pub(crate) async fn find(
    engine: &Engine,
    target: &crate::cloud::KubeTarget,
    name: &str,
) -> ApiResult<Option<Value>> {
    // Names are unique on the cluster, across namespace default and the teams'.
    Ok(in_workload_namespaces(engine, target)
        .await?
        .into_iter()
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)))
}

/// The endpoints of both kinds in namespace default and the teams' namespaces.
pub(crate) async fn in_workload_namespaces(
    engine: &Engine,
    target: &crate::cloud::KubeTarget,
) -> ApiResult<Vec<Value>> {
    let mut out = Vec::new();
    for kind in [KIND, JUMPSTART_KIND] {
        match engine
            .cloud()
            .kube
            .list(target, API_VERSION, kind, None, None)
            .await
        {
            Ok(items) => out.extend(items.into_iter().filter(|o| {
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_some_and(is_workload_namespace)
            })),
            // The operator is not installed: no endpoints of that kind.
            Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => {}
            Err(e) => return Err(cloud_err(e)),
        }
    }
    Ok(out)
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
    let placement = crate::service::teams::placement(
        engine,
        cluster,
        req.team.as_deref(),
        req.priority.as_deref(),
    )
    .await?;
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
    let mut manifest = endpoint_resource(&spec);
    // A team's endpoint runs in its namespace, labelled for its queue and priority. The labels
    // go on the InferenceEndpointConfig's own metadata: its CRD has no Kueue field, and AWS's
    // guide *Task governance for model deployment on HyperPod*
    // (docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-task-gov.html)
    // labels the endpoint object itself, which the operator carries onto the Deployment it
    // makes (Kueue's Deployment integration admits the pods by those labels).
    let namespace = placement.namespace();
    manifest["metadata"]["namespace"] = json!(namespace);
    placement.label(&mut manifest["metadata"]["labels"]);
    let params = ApplyParams {
        workload: format!("endpoint/{}", req.endpoint_name),
        watch: ref_of(
            manifest["kind"].as_str().unwrap_or(KIND),
            &namespace,
            &req.endpoint_name,
        ),
        manifests: vec![manifest],
        prune: vec![],
        also_watch: vec![],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}
