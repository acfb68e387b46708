//! What a cluster's endpoints are (read from their `InferenceEndpointConfig`s and the status the
//! operator writes, in namespace default and the teams' namespaces), and a change to one with the diff contract: only fields that differ from
//! the actual resource are applied, routing is refused (the operator cannot change it).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::{
    autoscaling, find, in_workload_namespaces, ref_of, AutoscalingRequest, API_VERSION, KIND,
};
use crate::cloud::KubeTarget;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::people::access;
use crate::service::shared::labels::Placement;
use crate::service::steps::workloads::{ApplyParams, WORKLOAD_NAMESPACE};
use crate::service::teams::{with_admission, PodsAdmission};
use crate::service::workloads::bounded;

/// One managed endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointView {
    pub name: String,
    /// `default`, or the team's namespace `hyperpod-ns-<team>`.
    pub namespace: String,
    /// The team it runs as (task governance), if any.
    pub team: Option<String>,
    /// Its priority class, if any.
    pub priority: Option<String>,
    /// A team's endpoint: how Kueue admits its workers (one Workload per pod), once Kueue has
    /// said.
    pub admission: Option<PodsAdmission>,
    /// `InferenceEndpointConfig` or `JumpStartModel`.
    pub kind: String,
    /// The operator's state: `DeploymentPending`, `DeploymentInProgress`, `DeploymentComplete`,
    /// `DeploymentFailed`, …
    pub state: String,
    pub message: Option<String>,
    pub instance_type: Option<String>,
    pub replicas: u64,
    /// Replicas the operator reports.
    pub ready_replicas: u64,
    /// Where the model comes from (`s3://…`, `fsx://…`).
    pub model: Option<String>,
    pub image: Option<String>,
    /// The port the workers serve, and the path invocations go to.
    pub port: u16,
    pub invocation_path: String,
    /// The intelligent routing strategy, when the endpoint was created with one.
    pub routing: Option<String>,
    /// `{"l1": bool, "l2": "tieredstorage" | "redis" | null}`.
    #[schema(value_type = Object)]
    pub kv_cache: Value,
    #[schema(value_type = Option<Object>)]
    pub autoscaling: Option<Value>,
    /// The registered SageMaker endpoint and its state, if one is registered.
    #[schema(value_type = Option<Object>)]
    pub sagemaker_endpoint: Option<Value>,
    #[schema(value_type = Vec<Object>)]
    pub conditions: Vec<Value>,
}

pub fn endpoint_view(o: &Value) -> EndpointView {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    let spec = &o["spec"];
    let text = |p: &str| spec.pointer(p).and_then(Value::as_str).unwrap_or("");
    // `<scheme>://<store>/<location>` of the model source, as the request named it.
    let at = |scheme: &str, store: &str| {
        format!(
            "{scheme}://{}/{}",
            text(store),
            text("/modelSourceConfig/modelLocation")
        )
    };
    let model = match text("/modelSourceConfig/modelSourceType") {
        "s3" => Some(at("s3", "/modelSourceConfig/s3Storage/bucketName")),
        "fsx" => Some(at("fsx", "/modelSourceConfig/fsxStorage/fileSystemId")),
        _ => spec
            .pointer("/model/modelId")
            .and_then(Value::as_str)
            .map(|id| format!("jumpstart:{id}")),
    };
    let routing =
        (spec.pointer("/intelligentRoutingSpec/enabled") == Some(&json!(true))).then(|| {
            spec.pointer("/intelligentRoutingSpec/routingStrategy")
                .and_then(Value::as_str)
                .unwrap_or("prefixaware")
                .to_string()
        });
    let l2 = (spec.pointer("/kvCacheSpec/enableL2Cache") == Some(&json!(true)))
        .then(|| {
            spec.pointer("/kvCacheSpec/l2CacheSpec/l2CacheBackend")
                .cloned()
        })
        .flatten();
    let placement = Placement::of(o);
    EndpointView {
        name: s("/metadata/name").unwrap_or_default(),
        namespace: s("/metadata/namespace").unwrap_or_else(|| WORKLOAD_NAMESPACE.to_string()),
        team: placement.team,
        priority: placement.priority,
        admission: None,
        kind: s("/kind").unwrap_or_else(|| KIND.to_string()),
        state: s("/status/state").unwrap_or_else(|| "DeploymentPending".into()),
        message: s("/status/deploymentStatus/message")
            .or_else(|| s("/status/deploymentStatus/reason")),
        instance_type: spec["instanceType"]
            .as_str()
            .or_else(|| spec.pointer("/server/instanceType").and_then(Value::as_str))
            .map(str::to_string),
        replicas: spec["replicas"].as_u64().unwrap_or(1),
        ready_replicas: o
            .pointer("/status/replicas")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        model,
        image: spec
            .pointer("/worker/image")
            .and_then(Value::as_str)
            .map(str::to_string),
        port: spec
            .pointer("/worker/modelInvocationPort/containerPort")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(8000),
        invocation_path: spec["invocationEndpoint"]
            .as_str()
            .unwrap_or("invocations")
            .to_string(),
        routing,
        kv_cache: json!({"l1": spec.pointer("/kvCacheSpec/enableL1Cache").and_then(Value::as_bool).unwrap_or(true),
                         "l2": l2}),
        autoscaling: spec.get("autoScalingSpec").cloned(),
        sagemaker_endpoint: o.pointer("/status/endpoints/sagemaker").cloned(),
        conditions: o
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    }
}

/// A team's endpoint's admission: its workers are the pods of the Deployment the operator makes
/// under the endpoint's name.
async fn admitted(
    engine: &Engine,
    target: &KubeTarget,
    views: &mut [EndpointView],
) -> ApiResult<()> {
    with_admission(
        engine,
        target,
        views,
        |v| v.team.is_some(),
        |v, kueue| {
            v.admission = kueue.of_deployment(&v.namespace, &v.name);
        },
    )
    .await
}

pub async fn list_endpoints(engine: &Engine, cluster: &str) -> ApiResult<Vec<EndpointView>> {
    let target = kube_target(engine, cluster).await?;
    let out: Vec<EndpointView> = in_workload_namespaces(engine, &target)
        .await?
        .iter()
        .map(endpoint_view)
        .collect();
    // A person sees the endpoints of the namespaces their access entry lets them read.
    let mut visible = Vec::with_capacity(out.len());
    for e in out {
        if access::may_read(engine, cluster, &e.namespace).await? {
            visible.push(e);
        }
    }
    admitted(engine, &target, &mut visible).await?;
    visible.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(visible)
}

/// The endpoint as the cluster has it; one in a namespace the person may not read is not
/// there for them.
async fn actual(engine: &Engine, cluster: &str, name: &str) -> ApiResult<Value> {
    validate::dns_label("endpoint", "endpoint name", name)?;
    let target = kube_target(engine, cluster).await?;
    let mut found = find(engine, &target, name).await?;
    if let Some(ns) = found
        .as_ref()
        .and_then(|o| o.pointer("/metadata/namespace"))
        .and_then(Value::as_str)
    {
        if !access::may_read(engine, cluster, ns).await? {
            found = None;
        }
    }
    found.ok_or_else(|| ApiError::NotFound {
        what: format!("endpoint `{name}` on `{cluster}`"),
        hint: Some(Box::new(json!(format!(
            "list them with GET /api/clusters/{cluster}/endpoints"
        )))),
    })
}

pub async fn get_endpoint(engine: &Engine, cluster: &str, name: &str) -> ApiResult<EndpointView> {
    let mut view = [endpoint_view(&actual(engine, cluster, name).await?)];
    let target = kube_target(engine, cluster).await?;
    admitted(engine, &target, &mut view).await?;
    let [view] = view;
    Ok(view)
}

/// Body of `PATCH …/endpoints/{endpoint}`: only the fields to change.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointPatch {
    /// 1–64.
    #[schema(minimum = 1, maximum = 64)]
    pub replicas: Option<i64>,
    pub autoscaling: Option<AutoscalingRequest>,
    /// Refused unless equal to the endpoint's: routing is fixed when the endpoint is created.
    pub routing: Option<String>,
}

/// The operation parameters of a change, or `None` when the endpoint already is as asked.
pub async fn patch_params(
    engine: &Engine,
    cluster: &str,
    name: &str,
    patch: &EndpointPatch,
) -> ApiResult<Option<Value>> {
    let o = actual(engine, cluster, name).await?;
    let view = endpoint_view(&o);
    access::require_write(engine, cluster, &view.namespace, "change its endpoints").await?;
    if let Some(r) = &patch.routing {
        if view.routing.as_deref() != Some(r.as_str()) {
            return Err(ApiError::Conflict {
                slug: ProblemType::RoutingImmutable,
                detail: format!(
                    "the inference operator cannot {} intelligent routing on an existing endpoint (it is {}): delete `{name}` and deploy it again with the routing you want",
                    if view.routing.is_some() { "change or remove" } else { "add" },
                    view.routing.as_deref().unwrap_or("off")
                ),
                field: Some("routing".into()),
                operation_id: None,
            });
        }
    }
    let mut spec = o["spec"].clone();
    if let Some(n) = patch.replicas {
        spec["replicas"] = json!(bounded("replicas", Some(n), 1, 1..=64)?);
    }
    if let Some(a) = autoscaling(patch.autoscaling.as_ref())? {
        let mut auto = spec
            .get("autoScalingSpec")
            .cloned()
            .unwrap_or_else(|| json!({}));
        auto["minReplicaCount"] = json!(a.min_replicas);
        auto["maxReplicaCount"] = json!(a.max_replicas);
        auto["cooldownPeriod"] = json!(a.cooldown_seconds);
        if let Some((key, trigger)) = a.trigger {
            auto[key] = trigger;
        }
        spec["autoScalingSpec"] = auto;
    }
    if spec == o["spec"] {
        return Ok(None);
    }
    // The whole spec as it is, with the change: an apply of fewer fields would drop the ones
    // left out from what this field manager owns.
    let kind = o["kind"].as_str().unwrap_or(KIND);
    let manifest = json!({"apiVersion": API_VERSION, "kind": kind,
        "metadata": {"name": name, "namespace": view.namespace,
                     "labels": o.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}))},
        "spec": spec});
    let params = ApplyParams {
        workload: format!("endpoint/{name}"),
        manifests: vec![manifest],
        watch: ref_of(kind, &view.namespace, name),
        prune: vec![],
        also_watch: vec![],
    };
    Ok(Some(
        serde_json::to_value(params).map_err(anyhow::Error::from)?,
    ))
}
