//! The `InferenceEndpointConfig` an endpoint request becomes (`inference.sagemaker.aws.amazon.com/v1`,
//! the HyperPod inference operator's current version): model source, worker, managed tiered KV
//! cache, intelligent routing and autoscaling, in the shapes of AWS's examples. Nothing the
//! operator deprecates (`v1alpha1`, `InitialReplicaCount`) is generated.

use serde_json::{json, Map, Value};

use crate::cloud::MANAGED_BY;
use crate::service::steps::workloads::{WORKLOAD_LABEL, WORKLOAD_NAMESPACE};

pub const API_VERSION: &str = "inference.sagemaker.aws.amazon.com/v1";
pub const KIND: &str = "InferenceEndpointConfig";
/// A JumpStart model served by the same operator.
pub const JUMPSTART_KIND: &str = "JumpStartModel";
/// Where the worker sees the model.
pub const MODEL_MOUNT: &str = "/opt/ml/model";

/// Where the model's files are.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    S3 {
        bucket: String,
        region: String,
        /// The prefix inside the bucket.
        location: String,
    },
    Fsx {
        file_system_id: String,
        location: String,
    },
    /// A SageMaker JumpStart model, by id (its EULA accepted by the request).
    JumpStart {
        model_id: String,
        version: Option<String>,
    },
}

/// The L2 KV cache backend.
#[derive(Debug, Clone, PartialEq)]
pub enum L2Cache {
    /// HyperPod's managed tiered storage.
    TieredStorage,
    /// A Redis the user runs, by URL.
    Redis(String),
}

/// Autoscaling of the model's replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscaling {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub cooldown_seconds: u32,
    /// A trigger as the operator takes it (`prometheusTrigger` or `cloudWatchTrigger` key).
    pub trigger: Option<(&'static str, Value)>,
}

/// Everything a manifest is made from (validated by the caller).
#[derive(Debug, Clone)]
pub struct EndpointSpec {
    pub name: String,
    pub model_name: String,
    pub sagemaker_endpoint: Option<String>,
    pub instance_type: String,
    pub replicas: u32,
    pub source: ModelSource,
    pub image: String,
    pub args: Vec<String>,
    pub port: u16,
    pub gpus: u32,
    pub invocation_path: String,
    pub l1_cache: bool,
    pub l2_cache: Option<L2Cache>,
    /// `prefixaware`, `kvaware`, `session` or `roundrobin`.
    pub routing: Option<String>,
    pub autoscaling: Option<Autoscaling>,
    /// `s3://bucket/prefix` for the operator's self-signed TLS certificate.
    pub tls_output: Option<String>,
}

/// The cache, routing, autoscaling and TLS parts both kinds share.
fn shared(spec: &EndpointSpec, s: &mut Map<String, Value>) {
    let mut kv = json!({"enableL1Cache": spec.l1_cache});
    if let Some(l2) = &spec.l2_cache {
        kv["enableL2Cache"] = json!(true);
        kv["l2CacheSpec"] = match l2 {
            L2Cache::TieredStorage => json!({"l2CacheBackend": "tieredstorage"}),
            L2Cache::Redis(url) => json!({"l2CacheBackend": "redis", "l2CacheLocalUrl": url}),
        };
    }
    s.insert("kvCacheSpec".into(), kv);
    if let Some(strategy) = &spec.routing {
        s.insert(
            "intelligentRoutingSpec".into(),
            json!({"enabled": true, "routingStrategy": strategy}),
        );
    }
    if let Some(a) = &spec.autoscaling {
        let mut auto = json!({"minReplicaCount": a.min_replicas, "maxReplicaCount": a.max_replicas,
                              "cooldownPeriod": a.cooldown_seconds});
        if let Some((key, trigger)) = &a.trigger {
            auto[*key] = trigger.clone();
        }
        s.insert("autoScalingSpec".into(), auto);
    }
    if let Some(uri) = &spec.tls_output {
        s.insert(
            "tlsConfig".into(),
            json!({"tlsCertificateOutputS3Uri": uri}),
        );
    }
}

fn metadata(spec: &EndpointSpec) -> Value {
    json!({"name": spec.name, "namespace": WORKLOAD_NAMESPACE,
           "labels": {MANAGED_BY.0: MANAGED_BY.1, WORKLOAD_LABEL: "endpoint"}})
}

/// The resource of an endpoint: a `JumpStartModel` for a JumpStart model, an
/// `InferenceEndpointConfig` otherwise.
pub fn endpoint_resource(spec: &EndpointSpec) -> Value {
    match &spec.source {
        ModelSource::JumpStart { model_id, version } => {
            let mut model = json!({"modelId": model_id, "acceptEula": true});
            if let Some(v) = version {
                model["modelVersion"] = json!(v);
            }
            let mut s = Map::new();
            s.insert("model".into(), model);
            s.insert("server".into(), json!({"instanceType": spec.instance_type}));
            s.insert("replicas".into(), json!(spec.replicas));
            if let Some(e) = &spec.sagemaker_endpoint {
                s.insert("sageMakerEndpoint".into(), json!({"name": e}));
            }
            shared(spec, &mut s);
            json!({"apiVersion": API_VERSION, "kind": JUMPSTART_KIND, "metadata": metadata(spec),
                   "spec": Value::Object(s)})
        }
        _ => endpoint_config(spec),
    }
}

pub fn endpoint_config(spec: &EndpointSpec) -> Value {
    let source = match &spec.source {
        ModelSource::S3 {
            bucket,
            region,
            location,
        } => json!({"modelSourceType": "s3", "s3Storage": {"bucketName": bucket, "region": region},
                    "modelLocation": location, "prefetchEnabled": false}),
        ModelSource::Fsx {
            file_system_id,
            location,
        } => json!({"modelSourceType": "fsx", "fsxStorage": {"fileSystemId": file_system_id},
                    "modelLocation": location}),
        ModelSource::JumpStart { .. } => return endpoint_resource(spec),
    };
    let gpus = spec.gpus.to_string();
    let worker = json!({
        "image": spec.image,
        "args": spec.args,
        "modelInvocationPort": {"containerPort": spec.port, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT},
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
    });
    let mut s = Map::new();
    s.insert("modelName".into(), json!(spec.model_name));
    if let Some(e) = &spec.sagemaker_endpoint {
        s.insert("endpointName".into(), json!(e));
    }
    s.insert("instanceType".into(), json!(spec.instance_type));
    s.insert("invocationEndpoint".into(), json!(spec.invocation_path));
    s.insert("replicas".into(), json!(spec.replicas));
    s.insert("modelSourceConfig".into(), source);
    shared(spec, &mut s);
    s.insert("loadBalancer".into(), json!({"healthCheckPath": "/health"}));
    s.insert("worker".into(), worker);
    json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata(spec),
           "spec": Value::Object(s)})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(l2: Option<L2Cache>, routing: Option<&str>) -> EndpointSpec {
        EndpointSpec {
            name: "llama".into(),
            model_name: "llama".into(),
            sagemaker_endpoint: None,
            instance_type: "ml.g5.8xlarge".into(),
            replicas: 1,
            source: ModelSource::S3 {
                bucket: "b".into(),
                region: "us-west-2".into(),
                location: "llama31_8b".into(),
            },
            image: "lmcache/vllm-openai:v0.3.7".into(),
            args: vec![MODEL_MOUNT.into(), "--max-model-len".into(), "4096".into()],
            port: 8000,
            gpus: 1,
            invocation_path: "v1/chat/completions".into(),
            l1_cache: true,
            l2_cache: l2,
            routing: routing.map(str::to_string),
            autoscaling: None,
            tls_output: None,
        }
    }

    #[test]
    fn the_redis_l2_and_routing_shapes_are_those_of_awss_examples() {
        // v1_llama31_8b_kv_cache_l1_l2.yaml and v1_llama31_8b_intelligent_routing.yaml.
        let url = "redis://redis.ns-team-a.svc.cluster.local:6379";
        let m = endpoint_config(&spec(Some(L2Cache::Redis(url.into())), Some("prefixaware")));
        assert_eq!(
            m["spec"]["kvCacheSpec"],
            json!({"enableL1Cache": true, "enableL2Cache": true,
                   "l2CacheSpec": {"l2CacheBackend": "redis", "l2CacheLocalUrl": url}})
        );
        assert_eq!(
            m["spec"]["intelligentRoutingSpec"],
            json!({"enabled": true, "routingStrategy": "prefixaware"})
        );
        assert_eq!(
            m["spec"]["worker"]["modelInvocationPort"],
            json!({"containerPort": 8000, "name": "http"})
        );
        assert_eq!(m["spec"]["invocationEndpoint"], "v1/chat/completions");
        let plain = endpoint_config(&spec(None, None));
        assert_eq!(plain["spec"]["kvCacheSpec"], json!({"enableL1Cache": true}));
        assert!(plain["spec"].get("intelligentRoutingSpec").is_none());
    }
}
