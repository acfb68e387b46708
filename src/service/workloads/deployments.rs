//! Self-managed inference: a model served by a Deployment and Service, listed, deleted, and
//! smoke-tested through the API server's service proxy.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::incluster::kube_target;
use crate::service::validate;
use crate::service::workloads::{
    cloud_err, labels, list_storage, obj, put_token_secret, workload_state, ApplyParams,
    DeleteParams, ServiceCall, WORKLOAD_LABEL, WORKLOAD_NAMESPACE,
};

/// `POST /api/clusters/{name}/deployments`: a model server (vLLM, SGLang or any image) as a
/// Deployment plus a Service.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentRequest {
    /// 1–40 lowercase letters, digits, hyphens: names the Deployment and its Service.
    pub deployment_name: String,
    /// Container image (default `vllm/vllm-openai:latest`).
    pub image: Option<String>,
    /// Container arguments, one per item (no shell), e.g. `["--model", "/s3/models/Qwen/Qwen3-8B"]`.
    pub args: Option<Vec<String>>,
    /// GPUs per replica, 1–8 (default 1).
    pub gpus: Option<i64>,
    /// 1–16 (default 1).
    pub replicas: Option<i64>,
    /// Port the server listens on (default 8000).
    pub port: Option<i64>,
    /// `cluster-ip` (default: reachable inside the cluster and through `deployment_invoke`),
    /// `load-balancer` (an internal network load balancer in the VPC), or
    /// `external-load-balancer` (an internet-facing network load balancer: only with
    /// `allowedSourceCidrs`).
    pub service: Option<String>,
    /// With `external-load-balancer`: the IPv4 networks that may reach it (1–20 CIDRs, none of
    /// them the whole internet).
    pub allowed_source_cidrs: Option<Vec<String>>,
    /// Pin replicas to an instance type of the cluster's groups.
    pub instance_type: Option<String>,
    /// Storage claim mounted read-only at `/s3` (default `s3-claim` when it exists).
    pub claim: Option<String>,
    /// For gated models; kept in a Kubernetes Secret only.
    pub hf_token: Option<String>,
}

/// A deployment and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentView {
    pub name: String,
    pub image: String,
    pub replicas: u64,
    pub ready_replicas: u64,
    /// `ready`, `pending` or `failed`.
    pub state: String,
    pub service: String,
    /// Reachable from the internet (an internet-facing load balancer), from `allowedSources`.
    pub public: bool,
    pub allowed_sources: Vec<String>,
    /// The service's port.
    pub port: Option<u16>,
    /// `http://<cluster IP>:<port>` or the load balancer's host, once known.
    pub endpoint: Option<String>,
}

pub(crate) fn image(field: &str, image: &str) -> ApiResult<()> {
    let ok = (1..=255).contains(&image.len())
        && !image.starts_with(['-', '.', '/', ':'])
        && image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@'));
    validate::require(
        ok,
        field,
        format!("`{}` is not a container image", validate::truncate(image)),
        json!("registry/repository:tag, e.g. vllm/vllm-openai:latest"),
    )
}

pub(crate) fn bounded(
    field: &str,
    v: Option<i64>,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
) -> ApiResult<i64> {
    let v = v.unwrap_or(default);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("{v} is out of range"),
            json!(format!("{} to {}", range.start(), range.end())),
        ))
    }
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
) -> ApiResult<Value> {
    validate::dns_label("deploymentName", "deployment name", &req.deployment_name)?;
    if req.deployment_name.len() > 40 {
        return Err(ApiError::validation_hint(
            "deploymentName",
            "a deployment name has at most 40 characters",
            json!("e.g. qwen3-8b"),
        ));
    }
    let img = req.image.as_deref().unwrap_or("vllm/vllm-openai:latest");
    image("image", img)?;
    let args = req.args.clone().unwrap_or_default();
    if args.len() > 64 || args.iter().any(|a| a.len() > 1024 || a.contains('\0')) {
        return Err(ApiError::validation_hint(
            "args",
            "at most 64 arguments of at most 1024 characters each",
            json!(["--model", "/s3/models/owner/name"]),
        ));
    }
    let gpus = bounded("gpus", req.gpus, 1, 1..=8)?;
    let replicas = bounded("replicas", req.replicas, 1, 1..=16)?;
    let port = bounded("port", req.port, 8000, 1..=65535)?;
    let service = req.service.as_deref().unwrap_or("cluster-ip");
    if !SERVICE_TYPES.contains(&service) {
        return Err(ApiError::validation_hint(
            "service",
            format!("`{}` is not a service shape", validate::truncate(service)),
            json!(SERVICE_TYPES),
        ));
    }
    let sources = source_cidrs(service, req.allowed_source_cidrs.as_deref())?;
    let groups = crate::service::list_groups(engine, name).await?;
    if let Some(t) = &req.instance_type {
        if !groups.iter().any(|g| &g.instance_type == t) {
            return Err(ApiError::validation_hint(
                "instanceType",
                format!(
                    "no instance group of `{name}` has {}",
                    validate::truncate(t)
                ),
                json!(groups.iter().map(|g| &g.instance_type).collect::<Vec<_>>()),
            ));
        }
    }
    // A replica runs on one node: it cannot ask for more GPUs than the largest node has.
    let per_node = |t: &str| i64::from(crate::cloud::gpus_per_instance(t));
    let most = match &req.instance_type {
        Some(t) => per_node(t),
        None => groups
            .iter()
            .map(|g| per_node(&g.instance_type))
            .max()
            .unwrap_or(0),
    };
    if gpus > most {
        return Err(ApiError::validation_hint(
            "gpus",
            format!("a replica needs {gpus} GPUs but no node of `{name}` has more than {most}"),
            json!(format!(
                "1 to {most}, or add an instance group with larger instances"
            )),
        ));
    }
    let claims = list_storage(engine, name).await?;
    let in_default = |c: &str| {
        claims
            .iter()
            .any(|v| v.claim_name == c && v.namespace == WORKLOAD_NAMESPACE)
    };
    let claim = match req.claim.as_deref() {
        Some(c) if in_default(c) => Some(c.to_string()),
        Some(c) => {
            return Err(ApiError::validation_hint(
                "claim",
                format!(
                    "`{}` is not a storage claim in namespace default",
                    validate::truncate(c)
                ),
                json!(claims.iter().map(|c| &c.claim_name).collect::<Vec<_>>()),
            ))
        }
        None => in_default("s3-claim").then(|| "s3-claim".to_string()),
    };
    let target = kube_target(engine, name).await?;
    let secret = format!("{}-token", req.deployment_name);
    if let Some(token) = &req.hf_token {
        put_token_secret(engine, &target, &secret, token, "inference").await?;
    }
    let l = labels(
        "inference",
        &[("app.kubernetes.io/name", &req.deployment_name)],
    );
    let mut mounts = vec![json!({"name": "shm", "mountPath": "/dev/shm"})];
    let mut volumes =
        vec![json!({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}})];
    if let Some(c) = &claim {
        mounts.push(json!({"name": "data", "mountPath": "/s3", "readOnly": true}));
        volumes.push(
            json!({"name": "data", "persistentVolumeClaim": {"claimName": c, "readOnly": true}}),
        );
    }
    let mut pod = json!({
        "containers": [{"name": "server", "image": img, "args": args,
            "ports": [{"containerPort": port, "name": "http"}],
            "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token", "optional": true}}}],
            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10},
            "volumeMounts": mounts}],
        "volumes": volumes});
    if let Some(t) = &req.instance_type {
        pod["nodeSelector"] = json!({"node.kubernetes.io/instance-type": t});
    }
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": req.deployment_name, "namespace": WORKLOAD_NAMESPACE, "labels": l},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 3600,
            "selector": {"matchLabels": {"app.kubernetes.io/name": req.deployment_name}},
            "template": {"metadata": {"labels": l}, "spec": pod}}});
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": req.deployment_name, "namespace": WORKLOAD_NAMESPACE, "labels": l},
        "spec": {"type": if service == "cluster-ip" { "ClusterIP" } else { "LoadBalancer" },
            "selector": {"app.kubernetes.io/name": req.deployment_name},
            "ports": [{"name": "http", "port": port, "targetPort": port}]}});
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
    let params = ApplyParams {
        workload: format!("deployment/{}", req.deployment_name),
        manifests: vec![deployment, svc],
        watch: obj("apps/v1", "Deployment", &req.deployment_name),
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

pub async fn list_deployments(engine: &Engine, name: &str) -> ApiResult<Vec<DeploymentView>> {
    let target = kube_target(engine, name).await?;
    let selector = format!("{WORKLOAD_LABEL}=inference");
    let list = |api_version: &'static str, kind: &'static str| {
        let target = target.clone();
        let selector = selector.clone();
        async move {
            engine
                .cloud()
                .kube
                .list(
                    &target,
                    api_version,
                    kind,
                    Some(WORKLOAD_NAMESPACE),
                    Some(&selector),
                )
                .await
                .map_err(cloud_err)
        }
    };
    let deployments = list("apps/v1", "Deployment").await?;
    let services = list("v1", "Service").await?;
    let mut out: Vec<DeploymentView> = deployments
        .iter()
        .map(|d| {
            let name = d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let svc = services
                .iter()
                .find(|s| s["metadata"]["name"] == name.as_str());
            let port = svc
                .and_then(|s| s.pointer("/spec/ports/0/port"))
                .and_then(Value::as_u64);
            let endpoint = svc.and_then(|s| {
                let lb = s
                    .pointer("/status/loadBalancer/ingress/0/hostname")
                    .and_then(Value::as_str);
                let ip = s.pointer("/spec/clusterIP").and_then(Value::as_str);
                match (lb, ip, port) {
                    (Some(host), _, Some(p)) => Some(format!("http://{host}:{p}")),
                    (None, Some(ip), Some(p)) if ip != "None" => Some(format!("http://{ip}:{p}")),
                    _ => None,
                }
            });
            DeploymentView {
                image: d
                    .pointer("/spec/template/spec/containers/0/image")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
                replicas: d
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1),
                ready_replicas: d
                    .pointer("/status/readyReplicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                state: workload_state(d).as_str().into(),
                service: svc
                    .and_then(|s| s.pointer("/spec/type"))
                    .and_then(Value::as_str)
                    .unwrap_or("none")
                    .into(),
                public: svc
                    .and_then(|s| {
                        s.pointer("/metadata/annotations/service.beta.kubernetes.io~1aws-load-balancer-scheme")
                    })
                    .is_some_and(|v| v == "internet-facing"),
                allowed_sources: svc
                    .and_then(|s| s.pointer("/spec/loadBalancerSourceRanges"))
                    .and_then(|r| serde_json::from_value(r.clone()).ok())
                    .unwrap_or_default(),
                endpoint,
                port: port.and_then(|p| u16::try_from(p).ok()),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub(super) async fn known_deployment(
    engine: &Engine,
    name: &str,
    dep: &str,
) -> ApiResult<DeploymentView> {
    validate::dns_label("deployment", "deployment name", dep)?;
    let all = list_deployments(engine, name).await?;
    let names: Vec<String> = all.iter().map(|d| d.name.clone()).collect();
    all.into_iter()
        .find(|d| d.name == dep)
        .ok_or_else(|| ApiError::NotFound {
            what: format!("deployment `{dep}` of `{name}` (only deployments made here)"),
            hint: Some(Box::new(json!(names))),
        })
}

pub async fn deployment_delete_params(engine: &Engine, name: &str, dep: &str) -> ApiResult<Value> {
    known_deployment(engine, name, dep).await?;
    let params = DeleteParams {
        workload: format!("deployment/{dep}"),
        objects: vec![
            obj("v1", "Service", dep),
            obj("apps/v1", "Deployment", dep),
            obj("v1", "Secret", &format!("{dep}-token")),
        ],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

/// `POST /api/clusters/{name}/deployments/{deployment}/invoke`: one chat completion.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvokeRequest {
    /// The user message (1–16000 characters).
    pub prompt: String,
    /// 1–4096 (default 256).
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
    if d.state != "ready" {
        return Err(ApiError::Conflict {
            slug: "deployment-not-ready",
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
            slug: "deployment-not-ready",
            detail: format!("`{dep}` has no service port: delete and deploy it again"),
            field: None,
            operation_id: None,
        });
    };
    let call = ServiceCall {
        namespace: WORKLOAD_NAMESPACE,
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
