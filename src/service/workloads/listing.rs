//! What self-managed inference is running, in namespace default and the teams' namespaces: each
//! deployment with its team, replicas, service shape and address, the warm pool and pods it is
//! served from, its router and its autoscaling.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::autoscale::{scaling_view, AutoscalingView, KEDA_API};
use super::router::{router_view, RouterView, ROUTER_FOR_LABEL};
use crate::cloud::ListQuery;
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::shared::labels::{is_workload_namespace, Placement};
use crate::service::steps::pools::{POOL_LABEL, SERVES_LABEL};
use crate::service::teams::{workloads, PodsAdmission};
use crate::service::workloads::{cloud_err, workload_state, WORKLOAD_LABEL, WORKLOAD_NAMESPACE};

/// The Ready condition of a pod.
pub(super) fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A deployment and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentView {
    pub name: String,
    /// `default`, or the team's namespace `hyperpod-ns-<team>`.
    pub namespace: String,
    /// The team it runs as (task governance), if any.
    pub team: Option<String>,
    /// Its priority class, if any.
    pub priority: Option<String>,
    /// A team's model: how Kueue admits its pods (one Workload each), once Kueue has said.
    pub admission: Option<PodsAdmission>,
    pub image: String,
    /// Replicas wanted (for a pool-served model: pool pods assigned to it; with autoscaling:
    /// what KEDA chose last).
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
    /// The warm pool it is served from.
    pub pool: Option<String>,
    /// The pool pods assigned to it.
    pub pods: Vec<String>,
    pub router: Option<RouterView>,
    pub autoscaling: Option<AutoscalingView>,
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace_of(o: &Value) -> &str {
    o["metadata"]["namespace"]
        .as_str()
        .unwrap_or(WORKLOAD_NAMESPACE)
}

/// The object named `name` in namespace `ns`, among `objects`.
fn named<'a>(objects: &'a [Value], ns: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| name_of(o) == name && namespace_of(o) == ns)
}

fn label<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// Every deployment made here, with a team's model's admission as Kueue says it.
/// The deployments a person may see: those of the namespaces their access entry lets them
/// read (checks of names across the cluster use [`deployment_objects`], which sees them all).
pub async fn list_deployments(engine: &Engine, name: &str) -> ApiResult<Vec<DeploymentView>> {
    let mut visible = Vec::new();
    for d in deployments(engine, name, true).await? {
        if crate::service::people::access::may_read(engine, name, &d.namespace).await? {
            visible.push(d);
        }
    }
    Ok(visible)
}

/// The deployments as their objects say, without reading Kueue: what the name, pool and
/// placement checks before a change need.
pub(super) async fn deployment_objects(
    engine: &Engine,
    name: &str,
) -> ApiResult<Vec<DeploymentView>> {
    deployments(engine, name, false).await
}

async fn deployments(
    engine: &Engine,
    name: &str,
    admission: bool,
) -> ApiResult<Vec<DeploymentView>> {
    let target = kube_target(engine, name).await?;
    let kube = &engine.cloud().kube;
    let selector = format!("{WORKLOAD_LABEL}=inference");
    let list = |api_version: &'static str, kind: &'static str, selector: String| {
        let target = target.clone();
        async move {
            let all = kube
                .list(&target, &ListQuery::of(api_version, kind).labels(&selector))
                .await?;
            Ok::<_, crate::cloud::CloudError>(
                all.into_iter()
                    .filter(|o| is_workload_namespace(namespace_of(o)))
                    .collect::<Vec<Value>>(),
            )
        }
    };
    let deployments = list("apps/v1", "Deployment", selector.clone())
        .await
        .map_err(cloud_err)?;
    let services = list("v1", "Service", selector.clone())
        .await
        .map_err(cloud_err)?;
    // Without KEDA's CRDs nothing autoscales: no ScaledObjects to read. Any other error (auth,
    // network) is the answer's, not hidden as "no autoscaling".
    let scaled = match list(KEDA_API, "ScaledObject", selector).await {
        Ok(scaled) => scaled,
        Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => Vec::new(),
        Err(e) => return Err(cloud_err(e)),
    };
    let (routers, workers): (Vec<&Value>, Vec<&Value>) = deployments
        .iter()
        .partition(|d| label(d, ROUTER_FOR_LABEL).is_some());
    let pooled: Vec<&Value> = services
        .iter()
        .filter(|s| label(s, POOL_LABEL).is_some())
        .collect();
    let pool_pods = if pooled.is_empty() {
        vec![]
    } else {
        list("v1", "Pod", format!("{WORKLOAD_LABEL}=pool"))
            .await
            .map_err(cloud_err)?
    };
    let mut out = Vec::new();
    for d in &workers {
        out.push(view(
            name_of(d),
            namespace_of(d),
            Some(d),
            &services,
            &routers,
            &scaled,
            None,
        ));
    }
    for s in pooled {
        let model = name_of(s);
        if out.iter().any(|v| v.name == model) {
            continue;
        }
        let ns = namespace_of(s);
        let pool = label(s, POOL_LABEL).map(str::to_string);
        let mine: Vec<&Value> = pool_pods
            .iter()
            .filter(|p| label(p, SERVES_LABEL) == Some(model) && namespace_of(p) == ns)
            .filter(|p| pool.is_none() || label(p, POOL_LABEL) == pool.as_deref())
            .collect();
        let mut v = view(model, ns, None, &services, &routers, &scaled, pool);
        v.replicas = mine.len() as u64;
        v.ready_replicas = mine.iter().filter(|p| pod_ready(p)).count() as u64;
        v.state = if v.ready_replicas > 0 && v.router.as_ref().is_none_or(|r| r.ready) {
            "ready"
        } else {
            "pending"
        }
        .into();
        v.pods = mine.iter().map(|p| name_of(p).to_string()).collect();
        v.pods.sort();
        if let Some(p) = mine.first() {
            v.image = p
                .pointer("/spec/containers/0/image")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into();
        }
        out.push(v);
    }
    // Kueue's Workloads (and the worker pods they belong to) are read only where a team's model
    // needs them.
    if admission && out.iter().any(|v| v.team.is_some()) {
        let workers = list("v1", "Pod", format!("{WORKLOAD_LABEL}=inference"))
            .await
            .map_err(cloud_err)?;
        let kueue = workloads(engine, &target).await?;
        for v in out.iter_mut().filter(|v| v.team.is_some()) {
            let pods: Vec<&str> = match v.pool {
                Some(_) => v.pods.iter().map(String::as_str).collect(),
                None => workers
                    .iter()
                    .filter(|p| {
                        namespace_of(p) == v.namespace
                            && label(p, "app.kubernetes.io/name") == Some(v.name.as_str())
                    })
                    .map(name_of)
                    .collect(),
            };
            v.admission = kueue.of_pods(&v.namespace, pods);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn view(
    name: &str,
    ns: &str,
    d: Option<&&Value>,
    services: &[Value],
    routers: &[&Value],
    scaled: &[Value],
    pool: Option<String>,
) -> DeploymentView {
    let svc = named(services, ns, name);
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
    let router = routers
        .iter()
        .find(|r| label(r, ROUTER_FOR_LABEL) == Some(name) && namespace_of(r) == ns)
        .map(|r| router_view(r));
    let n = |p: &str| d.and_then(|d| d.pointer(p)).and_then(Value::as_u64);
    let mut state = d
        .map_or("pending", |d| workload_state(d).as_str())
        .to_string();
    if state == "ready" && router.as_ref().is_some_and(|r| !r.ready) {
        state = "pending".into();
    }
    let placement = Placement::of(d.copied().or(svc).unwrap_or(&Value::Null));
    DeploymentView {
        namespace: ns.to_string(),
        team: placement.team,
        priority: placement.priority,
        admission: None,
        image: d
            .and_then(|d| d.pointer("/spec/template/spec/containers/0/image"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        replicas: n("/spec/replicas").unwrap_or(1),
        ready_replicas: n("/status/readyReplicas").unwrap_or(0),
        state,
        service: svc
            .and_then(|s| s.pointer("/spec/type"))
            .and_then(Value::as_str)
            .unwrap_or("none")
            .into(),
        public: svc
            .and_then(|s| {
                s.pointer(
                    "/metadata/annotations/service.beta.kubernetes.io~1aws-load-balancer-scheme",
                )
            })
            .is_some_and(|v| v == "internet-facing"),
        allowed_sources: svc
            .and_then(|s| s.pointer("/spec/loadBalancerSourceRanges"))
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_default(),
        endpoint,
        port: port.and_then(|p| u16::try_from(p).ok()),
        pool,
        pods: vec![],
        router,
        autoscaling: named(scaled, ns, name).map(scaling_view),
        name: name.to_string(),
    }
}
