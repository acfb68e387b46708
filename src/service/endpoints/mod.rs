//! Managed inference endpoints through the HyperPod inference operator: a request validated
//! field by field into an `InferenceEndpointConfig` (model from the cluster's S3 claim, another
//! bucket or FSx; the worker; managed tiered KV cache; intelligent routing; autoscaling), the
//! views of the endpoints a cluster runs, and changes with the diff contract.

pub mod start;

mod invoke;
mod manifests;
mod requests;
mod spec;
mod views;

pub use invoke::*;
pub use manifests::*;
pub use requests::*;
use spec::model_source;
pub(crate) use spec::{autoscaling, spec_of};
pub use views::*;

use serde_json::{json, Value};

use crate::cloud::ListQuery;
use crate::cloud::ObjectRef;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::validate;
use crate::service::shared::labels::is_workload_namespace;
use crate::service::steps::workloads::ApplyParams;
use crate::service::{cluster::records::kube_target, features::addon_active};

pub use crate::service::features::INFERENCE_OPERATOR_ADDON;

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
            .list(target, &ListQuery::of(API_VERSION, kind))
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
            slug: ProblemType::InferenceOperatorMissing,
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
            slug: ProblemType::EndpointExists,
            detail: format!("an endpoint `{}` already exists on `{cluster}`: change it with PATCH, or pick another name", req.endpoint_name),
            field: Some("endpointName".into()),
            operation_id: None,
        });
    }
    // The operator keeps its self-signed TLS certificate in the cluster's place for objects
    // (whatever bucket the model comes from), under the one prefix its role may write.
    let record = crate::service::live_cluster(engine, cluster).await?;
    let recorded = crate::service::shared::resources::ClusterResources::of(&record.resources);
    if let Some(place) = crate::service::storage::bucket::BucketPlace::recorded(&recorded) {
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
    crate::service::people::access::require_write(
        engine,
        cluster,
        &namespace,
        "deploy endpoints there",
    )
    .await?;
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
