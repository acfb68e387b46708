//! Self-managed inference: a model served by its own Deployment (or by warm-pool pods) behind a
//! Service of a chosen shape, optionally through its own SGLang router and scaled by its own
//! KEDA ScaledObject; deleted with all of that, and smoke-tested through the API server's
//! service proxy.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::autoscale::{self, AutoscalingRequest};
use super::pools::{known_pool, taken};
use super::router::{self, RouterRequest};
use super::server::{bounded, server_pod, ServerFields};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::features::{addon_active, INFERENCE_OPERATOR_ADDON};
use crate::service::people::access;
use crate::service::shared::labels::Placement;
use crate::service::steps::pools::{POOL_LABEL, SERVES_LABEL};
use crate::service::workloads::{
    cloud_err, deployment_objects, labels, list_deployments, obj_in, ApplyParams, DeleteParams,
    DeploymentView, ServiceCall,
};

/// `POST /api/clusters/{name}/deployments`: a model server (vLLM, SGLang or any image) as a
/// Deployment plus a Service.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentRequest {
    /// 1–40 lowercase letters, digits, hyphens: names the Deployment and its Service.
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")]
    pub deployment_name: String,
    /// Container image (default `vllm/vllm-openai:latest`).
    pub image: Option<String>,
    /// Container arguments, one per item (no shell), e.g. `["--model", "/s3/models/Qwen/Qwen3-8B"]`.
    pub args: Option<Vec<String>>,
    /// GPUs per replica, 1–8 (default 1).
    #[schema(minimum = 1, maximum = 8)]
    pub gpus: Option<i64>,
    /// 1–16 (default 1).
    #[schema(minimum = 1, maximum = 16)]
    pub replicas: Option<i64>,
    /// Port the server listens on (default 8000).
    #[schema(minimum = 1, maximum = 65535)]
    pub port: Option<i64>,
    /// `cluster-ip` (default: reachable inside the cluster and through `deployment_invoke`),
    /// `load-balancer` (an internal network load balancer in the VPC), or
    /// `external-load-balancer` (an internet-facing network load balancer: only with
    /// `allowedSourceCidrs`, and on a cluster with the inference operator, whose add-on brings
    /// the AWS Load Balancer Controller that makes it).
    #[schema(pattern = "^(cluster-ip|load-balancer|external-load-balancer)$")]
    pub service: Option<String>,
    /// With `external-load-balancer`: the IPv4 networks that may reach it (1–20 CIDRs, none of
    /// them the whole internet).
    pub allowed_source_cidrs: Option<Vec<String>>,
    /// Pin replicas to an instance type of the cluster's groups.
    pub instance_type: Option<String>,
    /// Storage claim mounted read-only at `/s3` (default `s3-claim` when it exists).
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub claim: Option<String>,
    /// For gated models; kept in a Kubernetes Secret only.
    pub hf_token: Option<String>,
    /// Serve from this warm pool's pods instead of a Deployment of its own: the model's Service
    /// selects the pool pods assigned to it (pool_assign). Server fields come from the pool.
    pub pool: Option<String>,
    /// Route through an SGLang router of the model's own (SGLang workers, two or more).
    pub router: Option<RouterRequest>,
    /// Scale the replicas with KEDA on a Prometheus metric (not with `pool`).
    pub autoscaling: Option<AutoscalingRequest>,
    /// The team it runs as (task governance): its objects go to namespace `hyperpod-ns-<team>`
    /// with the team's LocalQueue. Required on a cluster whose teams share it (not with `pool`:
    /// a pool-served model runs where its pool does).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}

pub(super) const SERVICE_TYPES: &[&str] =
    &["cluster-ip", "load-balancer", "external-load-balancer"];

/// The source networks of an internet-facing load balancer: required, valid, never `/0`.
fn source_cidrs(service: &str, cidrs: Option<&[String]>) -> ApiResult<Vec<ipnet::Ipv4Net>> {
    let hint = json!(["203.0.113.0/24", "198.51.100.7/32"]);
    match (service, cidrs) {
        ("external-load-balancer", None) => Err(ApiError::validation_hint(
            "allowedSourceCidrs",
            "an internet-facing load balancer needs the networks that may reach it",
            hint,
        )),
        ("external-load-balancer", Some(list)) => {
            validate::require(
                (1..=20).contains(&list.len()),
                "allowedSourceCidrs",
                "1 to 20 CIDRs".into(),
                hint.clone(),
            )?;
            list.iter()
                .map(|c| {
                    let net: ipnet::Ipv4Net = c.parse().map_err(|_| {
                        ApiError::validation_hint(
                            "allowedSourceCidrs",
                            format!("`{}` is not an IPv4 CIDR", validate::truncate(c)),
                            hint.clone(),
                        )
                    })?;
                    if net.prefix_len() == 0 {
                        return Err(ApiError::validation_hint(
                            "allowedSourceCidrs",
                            "0.0.0.0/0 opens the model to the whole internet: name the networks that need it",
                            hint.clone(),
                        ));
                    }
                    Ok(net.trunc())
                })
                .collect()
        }
        (_, Some(_)) => Err(ApiError::validation(
            "allowedSourceCidrs",
            "`allowedSourceCidrs` goes with service `external-load-balancer` only",
        )),
        (_, None) => Ok(vec![]),
    }
}

pub async fn deployment_params(
    engine: &Engine,
    name: &str,
    req: &DeploymentRequest,
    default_prometheus: Option<&str>,
) -> ApiResult<Value> {
    let dep = &req.deployment_name;
    validate::dns_label("deploymentName", "deployment name", dep)?;
    if dep.len() > 40 {
        return Err(ApiError::validation_hint(
            "deploymentName",
            "a deployment name has at most 40 characters",
            json!("e.g. qwen3-8b"),
        ));
    }
    let service = req.service.as_deref().unwrap_or("cluster-ip");
    if !SERVICE_TYPES.contains(&service) {
        return Err(ApiError::validation_hint(
            "service",
            format!("`{}` is not a service shape", validate::truncate(service)),
            json!(SERVICE_TYPES),
        ));
    }
    let sources = source_cidrs(service, req.allowed_source_cidrs.as_deref())?;
    // `aws-load-balancer-type: external` is served by the AWS Load Balancer Controller alone
    // (the in-tree controller ignores it, and the Service would wait for an address forever);
    // on a HyperPod cluster the inference operator's add-on is what brings that controller.
    if service == "external-load-balancer"
        && !addon_active(engine, name, INFERENCE_OPERATOR_ADDON).await?
    {
        return Err(ApiError::Conflict {
            slug: ProblemType::LoadBalancerControllerMissing,
            detail: format!("an external load balancer is made by the AWS Load Balancer Controller, which `{name}` does not run: enable the inference operator (it brings the controller) with PATCH /api/clusters/{name}/features {{\"inferenceOperator\": true}} (features_update), or use service `load-balancer` (internal to the VPC)"),
            field: Some("service".into()),
            operation_id: None,
        });
    }
    // A team's model runs in its namespace, its pods labelled for the team's queue and class;
    // a pool-served one runs where its pool's pods are, as the pool's team.
    let (placement, pool) = match &req.pool {
        Some(pool) => {
            for (field, given) in [
                ("image", req.image.is_some()),
                ("args", req.args.is_some()),
                ("gpus", req.gpus.is_some()),
                ("replicas", req.replicas.is_some()),
                ("port", req.port.is_some()),
                ("instanceType", req.instance_type.is_some()),
                ("claim", req.claim.is_some()),
                ("hfToken", req.hf_token.is_some()),
                ("autoscaling", req.autoscaling.is_some()),
                // It runs as the pool does, in the pool's team and namespace.
                ("team", req.team.is_some()),
                ("priority", req.priority.is_some()),
            ] {
                if given {
                    return Err(ApiError::validation(
                        field,
                        format!(
                            "a model served from warm pool `{pool}` takes `{field}` from the pool \
                             (it grows by assigning pool pods: pool_assign)"
                        ),
                    ));
                }
            }
            (
                Placement::default(),
                Some(known_pool(engine, name, pool).await?),
            )
        }
        None => (
            crate::service::teams::placement(
                engine,
                name,
                req.team.as_deref(),
                req.priority.as_deref(),
            )
            .await?,
            None,
        ),
    };
    let ns = pool
        .as_ref()
        .map_or_else(|| placement.namespace(), |p| p.namespace.clone());
    access::require_write(engine, name, &ns, "deploy models there").await?;
    // Names are the cluster's: posting again updates a model where it runs, never makes a
    // second one in another namespace.
    if let Some(other) = deployment_objects(engine, name)
        .await?
        .into_iter()
        .find(|d| &d.name == dep && d.namespace != ns)
    {
        return Err(ApiError::Conflict {
            slug: ProblemType::NameTaken,
            detail: format!("`{dep}` already runs in namespace {}: a model keeps its namespace (delete it first to move it), or choose another name", other.namespace),
            field: Some("deploymentName".into()),
            operation_id: None,
        });
    }
    let mut l = labels("inference", &[("app.kubernetes.io/name", dep)]);
    placement.label(&mut l);
    let mut manifests = Vec::new();
    let (workers, image, port, most) = match (&req.pool, pool) {
        (Some(pool), Some(p)) => {
            let workers = BTreeMap::from([
                (POOL_LABEL.to_string(), pool.clone()),
                (SERVES_LABEL.to_string(), dep.clone()),
            ]);
            let size = i64::try_from(p.size).unwrap_or(0);
            (workers, p.image, i64::from(p.port.unwrap_or(8000)), size)
        }
        _ => {
            if known_pool(engine, name, dep).await.is_ok() {
                return Err(taken("deploymentName", dep));
            }
            let server = server_pod(
                engine,
                name,
                dep,
                &ServerFields {
                    namespace: &ns,
                    image: req.image.as_deref(),
                    args: req.args.as_deref(),
                    gpus: req.gpus,
                    port: req.port,
                    instance_type: req.instance_type.as_deref(),
                    claim: req.claim.as_deref(),
                    hf_token: req.hf_token.as_deref(),
                },
            )
            .await?;
            let replicas = bounded("replicas", req.replicas, 1, 1..=16)?;
            let mut spec = json!({"progressDeadlineSeconds": 3600,
                "selector": {"matchLabels": {"app.kubernetes.io/name": dep}},
                "template": {"metadata": {"labels": l, "annotations": server.annotations},
                             "spec": server.spec}});
            // With autoscaling KEDA's autoscaler owns the replica count: this manifest leaves
            // it out, so a later apply never resets what the autoscaler chose.
            if req.autoscaling.is_none() {
                spec["replicas"] = json!(replicas);
            }
            manifests.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": dep, "namespace": ns, "labels": l},
                "spec": spec}));
            let workers = BTreeMap::from([("app.kubernetes.io/name".to_string(), dep.clone())]);
            let most = req
                .autoscaling
                .as_ref()
                .map_or(replicas, |a| a.max_replicas.max(replicas));
            (workers, server.image, server.port, most)
        }
    };
    let mut also_watch = Vec::new();
    let mut prune = Vec::new();
    let selector = match &req.router {
        Some(r) => {
            router::check(&image, most)?;
            let policy = router::policy(r)?;
            manifests.extend(router::router_objects(dep, &ns, port, &workers, policy));
            also_watch.push(obj_in(
                &ns,
                "apps/v1",
                "Deployment",
                &router::router_name(dep),
            ));
            BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                router::router_name(dep),
            )])
        }
        None => {
            prune.extend(router::router_refs(dep, &ns));
            workers
        }
    };
    let mut ports = vec![json!({"name": "http", "port": port, "targetPort": port})];
    if req.router.is_some() {
        ports.push(
            json!({"name": "metrics", "port": router::ROUTER_METRICS_PORT,
                          "targetPort": router::ROUTER_METRICS_PORT}),
        );
    }
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": dep, "namespace": ns, "labels": l},
        "spec": {"type": if service == "cluster-ip" { "ClusterIP" } else { "LoadBalancer" },
            "selector": selector, "ports": ports}});
    if service == "load-balancer" {
        // Internal to the VPC: a model endpoint is never put on the internet by default.
        svc["metadata"]["annotations"] = json!({"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
                   "service.beta.kubernetes.io/aws-load-balancer-internal": "true"});
    } else if service == "external-load-balancer" {
        // Asked for explicitly: a network load balancer on the internet, reachable from the
        // named networks only (the controller turns the ranges into security group rules).
        svc["metadata"]["annotations"] = json!({"service.beta.kubernetes.io/aws-load-balancer-type": "external",
                   "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
                   "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing"});
        svc["spec"]["loadBalancerSourceRanges"] =
            json!(sources.iter().map(ToString::to_string).collect::<Vec<_>>());
    }
    if let Some(pool) = &req.pool {
        // What says, even before a pod is assigned, which pool the model is served from.
        svc["metadata"]["labels"][POOL_LABEL] = json!(pool);
    }
    manifests.push(svc);
    match &req.autoscaling {
        Some(a) => {
            let s = autoscale::scaling(
                dep,
                &ns,
                &image,
                req.router.is_some(),
                a,
                default_prometheus,
            )?;
            if let Some(r) = req.replicas {
                if !(s.min..=s.max).contains(&r) {
                    return Err(ApiError::validation_hint(
                        "replicas",
                        format!(
                            "with autoscaling the replicas stay within {}–{}",
                            s.min, s.max
                        ),
                        json!("leave replicas out: KEDA sets them"),
                    ));
                }
            }
            let has_auth = s.objects.len() > 1;
            manifests.extend(s.objects);
            if !has_auth {
                prune.extend(autoscale::scaling_refs(dep, &ns).into_iter().skip(1));
            }
        }
        None => prune.extend(autoscale::scaling_refs(dep, &ns)),
    }
    let watch = match &req.pool {
        Some(_) => obj_in(&ns, "v1", "Service", dep),
        None => obj_in(&ns, "apps/v1", "Deployment", dep),
    };
    let params = ApplyParams {
        workload: format!("deployment/{dep}"),
        manifests,
        watch,
        prune,
        also_watch,
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

/// A deployment made here, by name, as deployment_list shows it (404 naming the ones there are).
pub async fn get_deployment(engine: &Engine, name: &str, dep: &str) -> ApiResult<DeploymentView> {
    validate::dns_label("deployment", "deployment name", dep)?;
    named(list_deployments(engine, name).await?, name, dep)
}

/// A deployment made here, by name, from its objects alone (what deleting and invoking need).
pub(super) async fn known_deployment(
    engine: &Engine,
    name: &str,
    dep: &str,
) -> ApiResult<DeploymentView> {
    validate::dns_label("deployment", "deployment name", dep)?;
    named(deployment_objects(engine, name).await?, name, dep)
}

fn named(all: Vec<DeploymentView>, name: &str, dep: &str) -> ApiResult<DeploymentView> {
    let names: Vec<String> = all.iter().map(|d| d.name.clone()).collect();
    all.into_iter()
        .find(|d| d.name == dep)
        .ok_or_else(|| ApiError::NotFound {
            what: format!("deployment `{dep}` of `{name}` (only deployments made here)"),
            hint: Some(Box::new(json!(names))),
        })
}

pub async fn deployment_delete_params(engine: &Engine, name: &str, dep: &str) -> ApiResult<Value> {
    let d = known_deployment(engine, name, dep).await?;
    access::require_write(engine, name, &d.namespace, "delete its deployments").await?;
    let ns = d.namespace.as_str();
    let mut objects = autoscale::scaling_refs(dep, ns);
    objects.push(obj_in(ns, "v1", "Service", dep));
    objects.extend(router::router_refs(dep, ns));
    if d.pool.is_none() {
        objects.push(obj_in(ns, "apps/v1", "Deployment", dep));
        objects.push(obj_in(ns, "v1", "Secret", &format!("{dep}-token")));
    }
    let params = DeleteParams {
        workload: format!("deployment/{dep}"),
        objects,
        // The model's pool pods go back to the pool, still warm.
        release: d
            .pool
            .as_ref()
            .map(|p| format!("{POOL_LABEL}={p},{SERVES_LABEL}={dep}")),
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

/// `POST /api/clusters/{name}/deployments/{deployment}/invoke`: one chat completion.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvokeRequest {
    /// The user message (1–16000 characters).
    #[schema(min_length = 1, max_length = 16000)]
    pub prompt: String,
    /// 1–4096 (default 256).
    #[schema(minimum = 1, maximum = 4096)]
    pub max_tokens: Option<i64>,
}

impl InvokeRequest {
    /// The OpenAI-style chat request this asks for (`model` as the server knows it), once the
    /// prompt and token limit are checked.
    pub fn chat_body(&self, model: &str) -> ApiResult<Value> {
        if self.prompt.is_empty() || self.prompt.chars().count() > 16_000 {
            return Err(ApiError::validation_hint(
                "prompt",
                "the prompt must have 1 to 16000 characters",
                json!("e.g. Say hello in one word."),
            ));
        }
        let max_tokens = bounded("maxTokens", self.max_tokens, 256, 1..=4096)?;
        Ok(json!({"model": model, "max_tokens": max_tokens,
                  "messages": [{"role": "user", "content": self.prompt}]}))
    }
}

/// Sends one OpenAI-style chat request to a deployment this control plane made, through the
/// Kubernetes API server's service proxy — never to an address the request names.
pub async fn invoke(
    engine: &Engine,
    name: &str,
    dep: &str,
    req: &InvokeRequest,
) -> ApiResult<Value> {
    let body = req.chat_body("")?;
    let d = known_deployment(engine, name, dep).await?;
    // Calling it goes through the API server's service proxy, which `edit` grants, not `view`.
    access::require_write(engine, name, &d.namespace, "call its deployments").await?;
    if d.state != "ready" {
        return Err(ApiError::Conflict {
            slug: ProblemType::DeploymentNotReady,
            detail: format!(
                "`{dep}` has {}/{} replicas ready: wait for its operation (operation_get) first",
                d.ready_replicas, d.replicas
            ),
            field: None,
            operation_id: None,
        });
    }
    let target = kube_target(engine, name).await?;
    let Some(port) = d.port else {
        return Err(ApiError::Conflict {
            slug: ProblemType::DeploymentNotReady,
            detail: format!("`{dep}` has no service port: delete and deploy it again"),
            field: None,
            operation_id: None,
        });
    };
    let call = ServiceCall {
        namespace: &d.namespace,
        name: dep,
        port,
        path: "v1/chat/completions",
    };
    engine
        .cloud()
        .kube
        .service_post(&target, &call, &body)
        .await
        .map_err(cloud_err)
}
