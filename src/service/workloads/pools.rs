//! Warm GPU pools: model servers kept running (image, GPUs, size) whose pods serve nothing until
//! one is given to a model by its label. A model served from a pool is a Service selecting the
//! pool's pods assigned to it. A pool never shrinks below the pods it has given out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::listing::pod_ready;
use super::server::{bounded, server_pod, ServerFields};
use crate::cloud::ListQuery;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::people::access;
use crate::service::shared::labels::{is_workload_namespace, Placement};
use crate::service::steps::pools::{AssignParams, POOL_LABEL, SERVES_LABEL, UNASSIGNED};
use crate::service::teams::{with_admission, PodsAdmission};
use crate::service::workloads::{
    cloud_err, labels, obj_in, ApplyParams, DeleteParams, WORKLOAD_LABEL,
};

/// `POST /api/clusters/{name}/pools`: a warm pool of model servers.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolRequest {
    /// 1–40 lowercase letters, digits, hyphens (no deployment may have the same name).
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")]
    pub pool_name: String,
    /// Container image (default `vllm/vllm-openai:latest`); SGLang images allow routers.
    pub image: Option<String>,
    /// Container arguments, one per item (no shell).
    pub args: Option<Vec<String>>,
    /// GPUs per pod, 1–8 (default 1).
    #[schema(minimum = 1, maximum = 8)]
    pub gpus: Option<i64>,
    /// Pods kept warm, 1–32.
    #[schema(minimum = 1, maximum = 32)]
    pub size: i64,
    /// Port the server listens on (default 8000).
    #[schema(minimum = 1, maximum = 65535)]
    pub port: Option<i64>,
    /// Pin the pods to an instance type of the cluster's groups.
    pub instance_type: Option<String>,
    /// Storage claim mounted read-only at `/s3` (default `s3-claim` when it exists).
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub claim: Option<String>,
    /// For gated models; kept in a Kubernetes Secret only.
    pub hf_token: Option<String>,
    /// The team it runs as (task governance): its pods go to namespace `hyperpod-ns-<team>` on
    /// the team's quota, and so do the models served from it. Required on a cluster whose teams
    /// share it.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}

/// `PATCH /api/clusters/{name}/pools/{pool}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolPatch {
    /// Pods kept warm, 0–32; never fewer than the pods given to models.
    #[schema(minimum = 0, maximum = 32)]
    pub size: i64,
}

/// `POST /api/clusters/{name}/pools/{pool}/assign`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignRequest {
    /// A ready pod of the pool (see pool_list).
    pub pod: String,
    /// A deployment served from this pool (`pool` set when it was made): the pod moves to it,
    /// from whichever model it served.
    pub model: String,
}

/// `POST /api/clusters/{name}/pools/{pool}/unassign`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnassignRequest {
    /// A pod of the pool: it goes back to serving nothing, still warm.
    pub pod: String,
}

/// One pod of a pool.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolPod {
    pub name: String,
    pub ready: bool,
    /// The model it serves; `None` when free.
    pub serves: Option<String>,
}

/// A pool and who its pods serve.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    pub name: String,
    /// `default`, or the team's namespace `hyperpod-ns-<team>`.
    pub namespace: String,
    /// The team it runs as (task governance), if any.
    pub team: Option<String>,
    /// Its priority class, if any.
    pub priority: Option<String>,
    /// A team's pool: how Kueue admits its pods (one Workload each), once Kueue has said.
    pub admission: Option<PodsAdmission>,
    pub image: String,
    pub gpus: u64,
    pub port: Option<u16>,
    /// Pods asked for.
    pub size: u64,
    pub ready: u64,
    /// `ready` or `pending`.
    pub state: String,
    /// Pods serving a model.
    pub assigned: u64,
    /// Ready pods serving nothing: what can be assigned, or removed by a scale-down.
    pub free: u64,
    pub pods: Vec<PoolPod>,
}

pub(super) fn serves(p: &Value) -> Option<String> {
    p.pointer("/metadata/labels")
        .and_then(|l| l.get(SERVES_LABEL))
        .and_then(Value::as_str)
        .filter(|s| *s != UNASSIGNED)
        .map(str::to_string)
}

pub async fn pool_params(engine: &Engine, name: &str, req: &PoolRequest) -> ApiResult<Value> {
    let pool = &req.pool_name;
    validate::dns_label("poolName", "pool name", pool)?;
    validate::require(
        pool.len() <= 40,
        "poolName",
        "a pool name has at most 40 characters".into(),
        json!("e.g. qwen-warm"),
    )?;
    let size = bounded("size", Some(req.size), 1, 1..=32)?;
    if super::deployment_objects(engine, name)
        .await?
        .iter()
        .any(|d| &d.name == pool)
    {
        return Err(taken("poolName", pool));
    }
    let placement = crate::service::teams::placement(
        engine,
        name,
        req.team.as_deref(),
        req.priority.as_deref(),
    )
    .await?;
    let ns = placement.namespace();
    access::require_write(engine, name, &ns, "make warm pools there").await?;
    let server = server_pod(
        engine,
        name,
        pool,
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
    let mut pool_labels = labels("pool", &[(POOL_LABEL, pool)]);
    // A team's pool holds GPUs on the team's quota: its pods carry the team's queue and class.
    placement.label(&mut pool_labels);
    let mut pod_labels = pool_labels.clone();
    // Every pod starts free; only the assignment label changes later, never the selector.
    pod_labels[SERVES_LABEL] = json!(UNASSIGNED);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": pool, "namespace": ns, "labels": pool_labels},
        "spec": {"replicas": size, "progressDeadlineSeconds": 3600,
            "selector": {"matchLabels": {POOL_LABEL: pool}},
            "template": {"metadata": {"labels": pod_labels, "annotations": server.annotations},
                         "spec": server.spec}}});
    let params = ApplyParams {
        workload: format!("pool/{pool}"),
        manifests: vec![deployment],
        watch: obj_in(&ns, "apps/v1", "Deployment", pool),
        prune: vec![],
        also_watch: vec![],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

pub(super) fn taken(field: &str, name: &str) -> ApiError {
    ApiError::Conflict {
        slug: ProblemType::NameTaken,
        detail: format!(
            "`{name}` already names a deployment or a warm pool of this cluster: choose another name"
        ),
        field: Some(field.into()),
        operation_id: None,
    }
}

/// Every warm pool, with a team's pool's admission as Kueue says it.
/// The pools a person may see: those of the namespaces their access entry lets them read.
pub async fn list_pools(engine: &Engine, name: &str) -> ApiResult<Vec<PoolView>> {
    let mut visible = Vec::new();
    for p in pools(engine, name, true).await? {
        if access::may_read(engine, name, &p.namespace).await? {
            visible.push(p);
        }
    }
    Ok(visible)
}

async fn pools(engine: &Engine, name: &str, admission: bool) -> ApiResult<Vec<PoolView>> {
    let target = kube_target(engine, name).await?;
    let selector = format!("{WORKLOAD_LABEL}=pool");
    let kube = &engine.cloud().kube;
    // In namespace default and the teams' namespaces; a pool's name is the cluster's.
    let ours = |items: Vec<Value>| -> Vec<Value> {
        items
            .into_iter()
            .filter(|o| is_workload_namespace(o["metadata"]["namespace"].as_str().unwrap_or("")))
            .collect()
    };
    let deployments = ours(
        kube.list(
            &target,
            &ListQuery::of("apps/v1", "Deployment").labels(&selector),
        )
        .await
        .map_err(cloud_err)?,
    );
    let pods = ours(
        kube.list(&target, &ListQuery::of("v1", "Pod").labels(&selector))
            .await
            .map_err(cloud_err)?,
    );
    let mut by_pool: BTreeMap<(&str, &str), Vec<PoolPod>> = BTreeMap::new();
    for p in &pods {
        let Some(pool) = p
            .pointer("/metadata/labels")
            .and_then(|l| l.get(POOL_LABEL))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
        by_pool.entry((ns, pool)).or_default().push(PoolPod {
            name: p["metadata"]["name"].as_str().unwrap_or_default().into(),
            ready: pod_ready(p),
            serves: serves(p),
        });
    }
    let mut out: Vec<PoolView> = deployments
        .iter()
        .map(|d| {
            let pool = d["metadata"]["name"].as_str().unwrap_or_default();
            let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
            let mut pods = by_pool.remove(&(ns, pool)).unwrap_or_default();
            let placement = Placement::of(d);
            pods.sort_by(|a, b| a.name.cmp(&b.name));
            let c = |p: &str| {
                d.pointer(&format!("/spec/template/spec/containers/0{p}"))
                    .cloned()
            };
            let size = d
                .pointer("/spec/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let ready = d
                .pointer("/status/readyReplicas")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let assigned = pods.iter().filter(|p| p.serves.is_some()).count() as u64;
            let free = pods
                .iter()
                .filter(|p| p.serves.is_none() && p.ready)
                .count() as u64;
            PoolView {
                namespace: ns.to_string(),
                team: placement.team,
                priority: placement.priority,
                admission: None,
                image: c("/image")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                gpus: c("/resources/limits/nvidia.com~1gpu")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
                port: c("/ports/0/containerPort")
                    .and_then(|v| v.as_u64())
                    .and_then(|p| u16::try_from(p).ok()),
                size,
                ready,
                state: if ready >= size { "ready" } else { "pending" }.into(),
                assigned,
                free,
                pods,
                name: pool.to_string(),
            }
        })
        .collect();
    if admission {
        with_admission(
            engine,
            &target,
            &mut out,
            |p| p.team.is_some(),
            |p, kueue| {
                p.admission = kueue.of_pods(&p.namespace, p.pods.iter().map(|x| x.name.as_str()));
            },
        )
        .await?;
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// A pool by name, as pool_list shows it.
pub async fn get_pool(engine: &Engine, name: &str, pool: &str) -> ApiResult<PoolView> {
    let p = pool_named(engine, name, pool, true).await?;
    if !access::may_read(engine, name, &p.namespace).await? {
        return Err(ApiError::not_found(format!("pool `{pool}` of `{name}`")));
    }
    Ok(p)
}

/// A pool, refused unless the person may change what is in its namespace.
async fn writable_pool(
    engine: &Engine,
    name: &str,
    pool: &str,
    doing: &str,
) -> ApiResult<PoolView> {
    let p = known_pool(engine, name, pool).await?;
    access::require_write(engine, name, &p.namespace, doing).await?;
    Ok(p)
}

/// A pool by name from its objects alone, without reading Kueue: what the checks before a
/// change need.
pub(super) async fn known_pool(engine: &Engine, name: &str, pool: &str) -> ApiResult<PoolView> {
    pool_named(engine, name, pool, false).await
}

async fn pool_named(
    engine: &Engine,
    name: &str,
    pool: &str,
    admission: bool,
) -> ApiResult<PoolView> {
    validate::dns_label("pool", "pool name", pool)?;
    let all = pools(engine, name, admission).await?;
    let names: Vec<String> = all.iter().map(|p| p.name.clone()).collect();
    all.into_iter()
        .find(|p| p.name == pool)
        .ok_or_else(|| ApiError::NotFound {
            what: format!("warm pool `{pool}` of `{name}`"),
            hint: Some(Box::new(json!(names))),
        })
}

/// The scale of a pool, or `None` when it already has that size.
pub async fn pool_scale_params(
    engine: &Engine,
    name: &str,
    pool: &str,
    patch: &PoolPatch,
) -> ApiResult<Option<Value>> {
    let size = bounded("size", Some(patch.size), 0, 0..=32)?;
    let p = writable_pool(engine, name, pool, "resize its warm pools").await?;
    if u64::try_from(size).unwrap_or(0) == p.size {
        return Ok(None);
    }
    if (u64::try_from(size).unwrap_or(0)) < p.assigned {
        let models: std::collections::BTreeSet<&str> =
            p.pods.iter().filter_map(|x| x.serves.as_deref()).collect();
        return Err(ApiError::Conflict {
            slug: ProblemType::PoolPodsAssigned,
            detail: format!(
                "{} of `{pool}`'s pods serve models ({}): the pool can shrink to {} at the least \
                 ({} of its pods are free). Unassign pods first (pool_unassign).",
                p.assigned,
                models.into_iter().collect::<Vec<_>>().join(", "),
                p.assigned,
                p.free
            ),
            field: Some("size".into()),
            operation_id: None,
        });
    }
    let target = kube_target(engine, name).await?;
    let d = engine
        .cloud()
        .kube
        .get(
            &target,
            &obj_in(&p.namespace, "apps/v1", "Deployment", pool),
        )
        .await
        .map_err(cloud_err)?
        .ok_or_else(|| ApiError::NotFound {
            what: format!("warm pool `{pool}` of `{name}`"),
            hint: None,
        })?;
    // The whole spec as it is, with the new size: an apply of fewer fields would drop the
    // others from what this field manager owns.
    let mut spec = d["spec"].clone();
    spec["replicas"] = json!(size);
    let manifest = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": pool, "namespace": p.namespace,
                     "labels": d.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}))},
        "spec": spec});
    let params = ApplyParams {
        workload: format!("pool/{pool}"),
        manifests: vec![manifest],
        watch: obj_in(&p.namespace, "apps/v1", "Deployment", pool),
        prune: vec![],
        also_watch: vec![],
    };
    Ok(Some(
        serde_json::to_value(params).map_err(anyhow::Error::from)?,
    ))
}

pub async fn pool_delete_params(engine: &Engine, name: &str, pool: &str) -> ApiResult<Value> {
    let p = writable_pool(engine, name, pool, "delete its warm pools").await?;
    if p.assigned > 0 {
        return Err(ApiError::Conflict {
            slug: ProblemType::PoolPodsAssigned,
            detail: format!(
                "{} of `{pool}`'s pods still serve models: delete those models or unassign the pods first",
                p.assigned
            ),
            field: None,
            operation_id: None,
        });
    }
    let params = DeleteParams {
        workload: format!("pool/{pool}"),
        objects: vec![
            obj_in(&p.namespace, "apps/v1", "Deployment", pool),
            obj_in(&p.namespace, "v1", "Secret", &format!("{pool}-token")),
        ],
        release: None,
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

fn pod_of<'a>(p: &'a PoolView, pod: &str) -> ApiResult<&'a PoolPod> {
    validate::dns_label("pod", "pod name", pod)?;
    p.pods
        .iter()
        .find(|x| x.name == pod)
        .ok_or_else(|| ApiError::NotFound {
            what: format!("pod `{pod}` of warm pool `{}`", p.name),
            hint: Some(Box::new(json!(p
                .pods
                .iter()
                .map(|x| &x.name)
                .collect::<Vec<_>>()))),
        })
}

pub async fn assign_params(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &AssignRequest,
) -> ApiResult<Value> {
    let p = writable_pool(engine, name, pool, "give or take its warm pools' pods").await?;
    let pod = pod_of(&p, &req.pod)?;
    if !pod.ready {
        return Err(ApiError::Conflict {
            slug: ProblemType::PodNotReady,
            detail: format!(
                "pod `{}` is not ready yet: assign a ready pod ({} are free)",
                pod.name, p.free
            ),
            field: Some("pod".into()),
            operation_id: None,
        });
    }
    validate::dns_label("model", "deployment name", &req.model)?;
    let models: Vec<String> = super::deployment_objects(engine, name)
        .await?
        .into_iter()
        .filter(|d| d.pool.as_deref() == Some(pool))
        .map(|d| d.name)
        .collect();
    if !models.contains(&req.model) {
        return Err(ApiError::validation_hint(
            "model",
            format!(
                "`{}` is not a deployment served from `{pool}`: make one with deployment_create and pool `{pool}`",
                req.model
            ),
            json!(models),
        ));
    }
    start_params(&p, &pod.name, &req.model)
}

pub async fn unassign_params(
    engine: &Engine,
    name: &str,
    pool: &str,
    req: &UnassignRequest,
) -> ApiResult<Value> {
    let p = writable_pool(engine, name, pool, "give or take its warm pools' pods").await?;
    let pod = pod_of(&p, &req.pod)?;
    start_params(&p, &pod.name, UNASSIGNED)
}

fn start_params(pool: &PoolView, pod: &str, serves: &str) -> ApiResult<Value> {
    let params = AssignParams {
        workload: format!("pool/{}", pool.name),
        pod: pod.into(),
        serves: serves.into(),
        namespace: pool.namespace.clone(),
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}
