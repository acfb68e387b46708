//! The sandbox's serving controllers: stable names for a Deployment's pods (a scale-down removes
//! the pods with the lowest `pod-deletion-cost` first, as a ReplicaSet does), pod labels and
//! annotations changed in place, KEDA scaling a Deployment on a simulated queue (the requests
//! sent through the model's Service during the ScaledObject's cooldown period), and the service
//! proxy's answer — from the pods the Service selects, or through a router to the worker it
//! picks (the same prompt prefix, the same worker, as cache-aware routing does).

use std::collections::HashMap;

use rand::Rng;
use serde_json::{json, Value};

use super::pods::SimPod;
use super::workload::{fnv1a, Scaled, KEDA_IDENTITY, PODS};
use super::{now_ms, Sandbox};
use cloud::*;

const POD_META: &str = "pod-meta";
const LOAD: &str = "sim-load";
/// Requests remembered per Service (the simulated queue never needs more).
const LOAD_KEEP: usize = 2000;
/// The inference operator's add-on, which runs a KEDA of its own.
const INFERENCE_ADDON: &str = "amazon-sagemaker-hyperpod-inference";
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
const ROUTER_FOR: &str = "instantstart.io/router-for";

fn pod_key(cluster: &str, namespace: &str, pod: &str) -> String {
    format!("{cluster}/{namespace}/{pod}")
}

/// Whether an object's labels hold every pair of a selector (a Service's `spec.selector`).
pub(super) fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// A KEDA trigger's numbers, read as KEDA reads them (strings).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

fn merge(into: &mut Value, patch: &Value) {
    if let (Some(m), Some(p)) = (into.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            if v.is_null() {
                m.remove(k);
            } else {
                m.insert(k.clone(), v.clone());
            }
        }
    }
}

impl SimPod {
    pub(super) fn labels(&self) -> &Value {
        &self.labels
    }

    /// Labels and annotations changed on the pod since its controller made it.
    pub(super) fn relabel(&mut self, labels: &Value, annotations: &Value) {
        for (into, from) in [
            (&mut self.labels, labels),
            (&mut self.annotations, annotations),
        ] {
            if let (Some(m), Some(f)) = (into.as_object_mut(), from.as_object()) {
                for (k, v) in f {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
    }

    /// Whether the pod is running (ready) at `age`.
    pub(super) fn running(&self, age: f64) -> bool {
        age >= self.start && !self.done(age)
    }
}

impl Sandbox {
    /// The names a Deployment's pods have after an apply asking for `want` of them: new ones get
    /// fresh names; surplus ones go cheapest first (free pool pods before assigned ones), newest
    /// first among equals.
    pub(super) async fn next_pods(
        &self,
        target: &KubeTarget,
        manifest: &Value,
        existing: Option<&Value>,
    ) -> CloudResult<Value> {
        let mut names: Vec<String> = existing
            .and_then(|e| e.get(PODS))
            .and_then(|p| serde_json::from_value(p.clone()).ok())
            .unwrap_or_default();
        let Some(want) = manifest.pointer("/spec/replicas").and_then(Value::as_u64) else {
            // The autoscaler owns the count: the names stay, more are made as it scales.
            return Ok(json!(names));
        };
        let want = usize::try_from(want).unwrap_or(0);
        let name = manifest["metadata"]["name"].as_str().unwrap_or("pod");
        let namespace = manifest
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        if names.len() > want {
            let mut ranked = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let cost = self
                    .by_name(POD_META, &pod_key(&target.cluster, namespace, n))
                    .await?
                    .and_then(|r| {
                        r.data
                            .pointer(&format!(
                                "/annotations/{}",
                                DELETION_COST.replace('/', "~1")
                            ))
                            .and_then(number)
                    })
                    .unwrap_or(0.0);
                ranked.push((cost, std::cmp::Reverse(i), n.clone()));
            }
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let gone: Vec<String> = ranked
                .into_iter()
                .take(names.len() - want)
                .map(|r| r.2)
                .collect();
            names.retain(|n| !gone.contains(n));
        }
        let set: String = {
            let mut rng = rand::thread_rng();
            (0..9)
                .map(|_| char::from(b"bcdfghjklmnpqrstvwxz2456789"[rng.gen_range(0..27)]))
                .collect()
        };
        while names.len() < want {
            let suffix: String = {
                let mut rng = rand::thread_rng();
                (0..5)
                    .map(|_| char::from(b"bcdfghjklmnpqrstvwxz2456789"[rng.gen_range(0..27)]))
                    .collect()
            };
            names.push(format!("{name}-{set}-{suffix}"));
        }
        Ok(json!(names))
    }

    /// Puts each pod's changed labels and annotations on it.
    pub(super) async fn with_meta(
        &self,
        target: &KubeTarget,
        pods: &mut [(SimPod, f64, i64)],
    ) -> CloudResult<()> {
        let prefix = format!("{}/", target.cluster);
        let metas: HashMap<String, Value> = self
            .list(POD_META)
            .await?
            .into_iter()
            .filter(|r| r.deleted_ms.is_none())
            .filter_map(|r| {
                let key = r.data["key"].as_str()?.to_string();
                key.starts_with(&prefix).then_some((key, r.data))
            })
            .collect();
        for (p, ..) in pods.iter_mut() {
            if let Some(m) = metas.get(&pod_key(&target.cluster, &p.namespace, &p.name)) {
                p.relabel(&m["labels"], &m["annotations"]);
            }
        }
        Ok(())
    }

    /// Labels and annotations merged into a pod (kept beside it) or a stored object.
    pub(super) async fn patch_meta(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        labels: &Value,
        annotations: &Value,
    ) -> CloudResult<()> {
        let api = "k8s:Patch";
        let namespace = obj.namespace.as_deref().unwrap_or("default");
        if (obj.api_version.as_str(), obj.kind.as_str()) == ("v1", "Pod") {
            let exists = self
                .sim_pods(target)
                .await?
                .iter()
                .any(|(p, ..)| p.namespace == namespace && p.name == obj.name);
            if !exists {
                return Err(super::shared::not_found(
                    "k8s", "Patch", "NotFound", &obj.name,
                ));
            }
            let key = pod_key(&target.cluster, namespace, &obj.name);
            return match self.by_name(POD_META, &key).await? {
                Some(r) if r.deleted_ms.is_none() => {
                    let mut data = r.data.clone();
                    merge(&mut data["labels"], labels);
                    merge(&mut data["annotations"], annotations);
                    self.update(api, POD_META, &r.id, &data).await
                }
                _ => {
                    let mut data = json!({"key": key, "labels": {}, "annotations": {}});
                    merge(&mut data["labels"], labels);
                    merge(&mut data["annotations"], annotations);
                    self.create(api, POD_META, &super::new_id("pm"), Some(&key), &data)
                        .await
                }
            };
        }
        let key = super::workload::object_key(target, obj);
        let Some(r) = self
            .by_name("k8s-object", &key)
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(super::shared::not_found(
                "k8s", "Patch", "NotFound", &obj.name,
            ));
        };
        let mut data = r.data.clone();
        if data["metadata"]["labels"].is_null() {
            data["metadata"]["labels"] = json!({});
        }
        if data["metadata"]["annotations"].is_null() {
            data["metadata"]["annotations"] = json!({});
        }
        merge(&mut data["metadata"]["labels"], labels);
        merge(&mut data["metadata"]["annotations"], annotations);
        self.update(api, "k8s-object", &r.id, &data).await
    }

    /// KEDA's view of every ScaledObject of a cluster: the replicas it gives its Deployment.
    pub(crate) async fn scaled(&self, target: &KubeTarget) -> CloudResult<HashMap<String, Scaled>> {
        let now = now_ms();
        let mut out = HashMap::new();
        for r in self
            .stored_objects(&format!(
                "{}/keda.sh/v1alpha1/ScaledObject/",
                target.cluster
            ))
            .await?
        {
            let so = &r.data;
            let ns = so
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            let Some(dep) = so
                .pointer("/spec/scaleTargetRef/name")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let n = |p: &str, d: u64| so.pointer(p).and_then(Value::as_u64).unwrap_or(d);
            let (min, max) = (
                n("/spec/minReplicaCount", 0),
                n("/spec/maxReplicaCount", 100),
            );
            let cooldown = n("/spec/cooldownPeriod", 300) as f64;
            let trigger = so.pointer("/spec/triggers/0/metadata");
            let threshold = trigger
                .and_then(|t| number(&t["threshold"]))
                .filter(|t| *t > 0.0)
                .unwrap_or(1.0);
            let activation = trigger
                .and_then(|t| number(&t["activationThreshold"]))
                .unwrap_or(0.0);
            let queue = self
                .by_name(LOAD, &pod_key(&target.cluster, ns, dep))
                .await?
                .map(|l| {
                    l.data["times"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_i64)
                        .filter(|t| self.simulated_secs(*t, now) < cooldown)
                        .count() as f64
                })
                .unwrap_or(0.0);
            let denied = match trigger.filter(|t| t.get("awsRegion").is_some()) {
                Some(t) => {
                    self.amp_denied(&target.cluster, t["serverAddress"].as_str().unwrap_or(""))
                        .await?
                }
                None => None,
            };
            let active = queue > activation && denied.is_none();
            let replicas = if denied.is_some() {
                // Without its metric KEDA leaves the Deployment where it is.
                min.max(1)
            } else if active {
                ((queue / threshold).ceil() as u64).clamp(min.max(1), max.max(1))
            } else {
                min
            };
            let name = so["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            out.insert(
                name,
                Scaled {
                    target: dep.to_string(),
                    replicas,
                    queue,
                    active,
                    denied,
                },
            );
        }
        Ok(out)
    }

    /// Why KEDA's operator may not query the Amazon Managed Service for Prometheus workspace at
    /// `server` (`https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>`), if it may
    /// not: it signs with the pod identity of `keda/keda-operator`, so that association's role,
    /// its policies within its boundary, must allow `aps:QueryMetrics` on the workspace.
    async fn amp_denied(&self, cluster: &str, server: &str) -> CloudResult<Option<String>> {
        let host = server.split("://").nth(1).unwrap_or_default();
        let region = host
            .strip_prefix("aps-workspaces.")
            .and_then(|h| h.split('.').next())
            .unwrap_or(super::REGION);
        let workspace = host.split("/workspaces/").nth(1).unwrap_or_default();
        let workspace = workspace.split('/').next().unwrap_or_default();
        let arn = format!(
            "arn:aws:aps:{region}:{}:workspace/{workspace}",
            super::ACCOUNT
        );
        // The inference operator's add-on runs its own KEDA, with the IRSA role its
        // configuration names (`keda.auth.aws.irsa.roleArn`).
        if let Some(addon) = self
            .by_name("eks-addon", &format!("{cluster}/{INFERENCE_ADDON}"))
            .await?
            .filter(|r| r.deleted_ms.is_none())
        {
            let config: Value = addon.data["configurationValues"]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or_default();
            let role_arn = config
                .pointer("/keda/auth/aws/irsa/roleArn")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let allowed = self
                .role_record(&role_arn)
                .await?
                .is_some_and(|r| super::rules::role_allows(&r, "aps:QueryMetrics", &arn));
            return Ok((!allowed).then(|| {
                format!("error getting metric for trigger: AccessDenied: {role_arn} (the {INFERENCE_ADDON} add-on's KEDA) is not authorized to perform: aps:QueryMetrics on resource: {arn}")
            }));
        }
        let association = self.list("eks-pod-identity").await?.into_iter().find(|r| {
            r.deleted_ms.is_none()
                && r.data["cluster"] == cluster
                && r.data["namespace"] == KEDA_IDENTITY.0
                && r.data["serviceAccount"] == KEDA_IDENTITY.1
        });
        let Some(role_arn) =
            association.and_then(|a| a.data["roleArn"].as_str().map(str::to_string))
        else {
            return Ok(Some(format!(
                "error getting metric for trigger: AccessDenied: keda-operator has no AWS identity (no pod identity association for {}/{}) and the node role may not perform aps:QueryMetrics on {arn}",
                KEDA_IDENTITY.0, KEDA_IDENTITY.1
            )));
        };
        let allowed = self
            .role_record(&role_arn)
            .await?
            .is_some_and(|r| super::rules::role_allows(&r, "aps:QueryMetrics", &arn));
        Ok((!allowed).then(|| {
            format!("error getting metric for trigger: AccessDenied: {role_arn} is not authorized to perform: aps:QueryMetrics on resource: {arn}")
        }))
    }

    /// Counts one request sent through a Service (the simulated queue KEDA reads).
    async fn record_request(
        &self,
        target: &KubeTarget,
        namespace: &str,
        service: &str,
    ) -> CloudResult<()> {
        let key = pod_key(&target.cluster, namespace, service);
        match self.by_name(LOAD, &key).await? {
            Some(r) => {
                let mut times: Vec<i64> =
                    serde_json::from_value(r.data["times"].clone()).unwrap_or_default();
                times.push(now_ms());
                let skip = times.len().saturating_sub(LOAD_KEEP);
                self.update(
                    "sandbox:Load",
                    LOAD,
                    &r.id,
                    &json!({"times": &times[skip..]}),
                )
                .await
            }
            None => {
                self.create(
                    "sandbox:Load",
                    LOAD,
                    &super::new_id("load"),
                    Some(&key),
                    &json!({"times": [now_ms()]}),
                )
                .await
            }
        }
    }

    /// The pod a Service's request lands on (through its router, when the Service fronts one),
    /// and the router pod it went through.
    pub(super) async fn serve(
        &self,
        target: &KubeTarget,
        call: &ServiceCall<'_>,
        prompt: &str,
    ) -> CloudResult<(String, Option<String>)> {
        let unavailable =
            |why: String| CloudError::new("k8s", "ServiceProxy", "ServiceUnavailable", why);
        let svc_ref = ObjectRef {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: Some(call.namespace.into()),
            name: call.name.into(),
        };
        let Some(svc) = Kube::get(self, target, &svc_ref).await? else {
            return Err(super::shared::not_found(
                "k8s",
                "ServiceProxy",
                "NotFound",
                call.name,
            ));
        };
        let pods = self.sim_pods(target).await?;
        let running = |selector: &Value| -> Vec<&SimPod> {
            let mut v: Vec<&SimPod> = pods
                .iter()
                .filter(|(p, age, _)| {
                    p.namespace == call.namespace
                        && p.running(*age)
                        && selects(selector, p.labels())
                })
                .map(|(p, ..)| p)
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            v
        };
        let front = running(&svc["spec"]["selector"]);
        if front.is_empty() {
            return Err(unavailable(format!(
                "no endpoints available for service {}",
                call.name
            )));
        }
        self.record_request(target, call.namespace, call.name)
            .await?;
        // Cache-aware in miniature: a prompt's first characters decide its worker.
        let pick = |n: usize| -> usize {
            let prefix: String = prompt.chars().take(32).collect();
            let h = fnv1a(&prefix);
            usize::try_from(h % n as u64).unwrap_or(0)
        };
        let Some(model) = front[0].labels().get(ROUTER_FOR).and_then(Value::as_str) else {
            return Ok((front[pick(front.len())].name.clone(), None));
        };
        let router = front[0].name.clone();
        let dep_name = front[0].labels()["app.kubernetes.io/name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let dep = Kube::get(
            self,
            target,
            &ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some(call.namespace.into()),
                name: dep_name,
            },
        )
        .await?
        .unwrap_or_default();
        // The router's own discovery: the `--selector` pairs of its arguments.
        let args: Vec<&str> = dep
            .pointer("/spec/template/spec/containers/0/args")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut selector = serde_json::Map::new();
        if let Some(i) = args.iter().position(|a| *a == "--selector") {
            for kv in args[i + 1..].iter().take_while(|a| !a.starts_with("--")) {
                if let Some((k, v)) = kv.split_once('=') {
                    selector.insert(k.into(), json!(v));
                }
            }
        }
        let workers = running(&Value::Object(selector));
        if workers.is_empty() {
            return Err(unavailable(format!(
                "the router of {model} has discovered no ready worker"
            )));
        }
        Ok((workers[pick(workers.len())].name.clone(), Some(router)))
    }
}
