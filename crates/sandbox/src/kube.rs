//! The simulated Kubernetes API: objects kept as applied, with the status controllers would write.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::pods::{pods_of, SimPod};
use super::scheduler::*;
use super::shared::*;
use super::workload::object_key;
use super::{new_id, Sandbox};
use cloud::*;

/// `k=v` terms of a label selector, all of which must hold (what the control plane sends).
pub(super) fn matches_labels(o: &Value, labels: Option<&str>) -> bool {
    labels
        .unwrap_or("")
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .all(|(k, v)| {
            o.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                == Some(v)
        })
}

/// The Kueue kinds the simulated Kueue writes (none are applied by the control plane).
pub(super) fn kueue_kind<'a>(api_version: &str, kind: &'a str) -> Option<&'a str> {
    (api_version == "kueue.x-k8s.io/v1beta1"
        && matches!(kind, "Workload" | "ClusterQueue" | "LocalQueue"))
    .then_some(kind)
}

impl Sandbox {
    /// The stored objects whose key starts with `prefix` (`cluster/` or `cluster/apiVersion/Kind/`).
    pub(super) async fn stored_objects(&self, prefix: &str) -> CloudResult<Vec<super::Res>> {
        Ok(self
            .list("k8s-object")
            .await?
            .into_iter()
            .filter(|r| {
                r.data
                    .get("__key")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.starts_with(prefix))
            })
            .collect())
    }

    /// Every simulated pod of a cluster, with its workload's simulated age and creation time.
    pub(super) async fn sim_pods(
        &self,
        target: &KubeTarget,
    ) -> CloudResult<Vec<(SimPod, f64, i64)>> {
        let schedule = self.schedule(target).await?;
        let now = super::now_ms();
        let mut pods: Vec<(SimPod, f64, i64)> = self
            .stored_objects(&format!("{}/", target.cluster))
            .await?
            .into_iter()
            .flat_map(|r| {
                // A job Kueue holds has no pods; an admitted one's started at its admission.
                let created = schedule
                    .kueue
                    .started_ms(&r.id, r.created_ms)
                    .unwrap_or(now);
                let age = self.simulated_secs(created, now);
                let failures = r.data[super::workload::FAILURES].as_u64().unwrap_or(0);
                let names = r.data.get(super::workload::PODS).cloned();
                let gated = schedule.kueue.gated.get(&r.id).cloned();
                let mut obj = self.k8s_status(r, Some(&schedule));
                if let Some(n) = names {
                    obj[super::workload::PODS] = n;
                }
                if let Some(g) = gated {
                    obj[super::workload::GATED] = json!(g);
                }
                pods_of(&obj, age, failures)
                    .into_iter()
                    .map(move |p| (p, age, created))
            })
            .collect();
        self.with_meta(target, &mut pods).await?;
        Ok(pods)
    }

    /// One simulated pod, refused as the API server refuses a missing pod or container.
    async fn sim_pod(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<(SimPod, f64, i64)> {
        let found = self
            .sim_pods(target)
            .await?
            .into_iter()
            .find(|(p, ..)| p.namespace == namespace && p.name == pod)
            .ok_or_else(|| not_found("k8s", "PodLog", "NotFound", pod))?;
        if let Some(c) = query
            .container
            .as_deref()
            .filter(|c| *c != found.0.container)
        {
            return Err(CloudError::new(
                "k8s",
                "PodLog",
                "BadRequest",
                format!("container {c} is not valid for pod {pod}"),
            ));
        }
        Ok(found)
    }
}

#[async_trait]
impl Kube for Sandbox {
    /// The simulated model server answers an OpenAI-style chat request by echoing the last
    /// message: a ready managed endpoint, or a ready pod the Service selects (through the
    /// model's router, when it fronts one), named in `x_sandbox`.
    async fn service_post(
        &self,
        target: &KubeTarget,
        call: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value> {
        self.gate("k8s:ServiceProxy", false).await?;
        let object = |api_version: &str, kind: &str| ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(call.namespace.into()),
            name: call.name.into(),
        };
        let mut endpoint = None;
        for kind in ["InferenceEndpointConfig", "JumpStartModel"] {
            if endpoint.is_none() {
                endpoint = Kube::get(
                    self,
                    target,
                    &object("inference.sagemaker.aws.amazon.com/v1", kind),
                )
                .await?;
            }
        }
        if let Some(e) = &endpoint {
            let serving = e
                .pointer("/status/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                > 0;
            if e.pointer("/status/state") != Some(&json!("DeploymentComplete")) && !serving {
                return Err(CloudError::new(
                    "k8s",
                    "ServiceProxy",
                    "ServiceUnavailable",
                    format!("no endpoints available for service {}", call.name),
                ));
            }
        }
        let prompt = body
            .pointer("/messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        // A managed endpoint's operator routes for itself; a Service's pods answer here.
        let served = match endpoint {
            Some(_) => json!({}),
            None => {
                let (pod, router) = self.serve(target, call, prompt).await?;
                json!({"pod": pod, "router": router})
            }
        };
        Ok(
            json!({"object": "chat.completion", "model": call.name, "x_sandbox": served,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": format!("(sandbox) {prompt}")}}]}),
        )
    }

    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()> {
        let api = "k8s:Apply";
        self.gate(api, true).await?;
        self.active_cluster(&target.cluster, "Apply")
            .await
            .map_err(|mut e| {
                e.service = "k8s".into();
                e
            })?;
        let obj = ObjectRef::to_apply(manifest)?;
        // Kubernetes refuses an object in a namespace that does not exist; a team's namespace
        // exists only once the task governance add-on made it for the team's compute quota.
        if let Some(ns) = obj
            .namespace
            .as_deref()
            .filter(|ns| ns.starts_with("hyperpod-ns-"))
        {
            if !self.team_namespace_exists(target, ns).await? {
                return Err(CloudError::new(
                    "k8s",
                    "Apply",
                    "NotFound",
                    format!("namespaces \"{ns}\" not found"),
                ));
            }
        }
        if super::spaces::is_workspace(manifest) {
            super::spaces::admit(manifest)?;
        }
        let key = object_key(target, &obj);
        match self.by_name("k8s-object", &key).await? {
            Some(r) if r.deleted_ms.is_none() => {
                let mut data = manifest.clone();
                data["__key"] = Value::String(key.clone());
                if obj.kind == "Deployment" {
                    data[super::workload::PODS] =
                        self.next_pods(target, manifest, Some(&r.data)).await?;
                }
                if super::spaces::is_workspace(manifest) {
                    super::spaces::on_apply(&mut data, Some(&r.data));
                }
                super::workload::note_scale(&mut data, Some(&r.data));
                self.update(api, "k8s-object", &r.id, &data).await
            }
            _ => {
                let mut data = manifest.clone();
                data["__key"] = Value::String(key.clone());
                if obj.kind == "Deployment" {
                    data[super::workload::PODS] = self.next_pods(target, manifest, None).await?;
                }
                if super::spaces::is_workspace(manifest) {
                    super::spaces::on_apply(&mut data, None);
                }
                super::workload::note_scale(&mut data, None);
                // Injected failures belong to a job or endpoint from its creation.
                let fault = if super::training::is_training(manifest) {
                    Some(super::workload::POD_FAILURE)
                } else if super::endpoints::is_endpoint(manifest) {
                    Some(super::workload::ENDPOINT_FAILURE)
                } else {
                    None
                };
                if let Some(key) = fault {
                    let failures = self
                        .faults
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take(key);
                    data[super::workload::FAILURES] = json!(failures);
                }
                self.create(api, "k8s-object", &new_id("uid"), Some(&key), &data)
                    .await?;
                // A model download's pod writes the model into its claim once it has run.
                self.download_writes(target, manifest).await
            }
        }
    }

    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>> {
        self.gate("k8s:Get", false).await?;
        if (obj.api_version.as_str(), obj.kind.as_str()) == ("v1", "Node") {
            return Ok(self
                .schedule(target)
                .await?
                .nodes
                .iter()
                .find(|n| n.name == obj.name)
                .map(super::triage::node_manifest));
        }
        if (obj.api_version.as_str(), obj.kind.as_str()) == ("v1", "Pod") {
            let ns = obj.namespace.as_deref().unwrap_or("default");
            return Ok(self
                .sim_pods(target)
                .await?
                .into_iter()
                .find(|(p, ..)| p.namespace == ns && p.name == obj.name)
                .map(|(p, age, created)| p.manifest(age, &cloud::clock::rfc3339_ms(created))));
        }
        if let Some(made) = self.workspace_owned(target, obj).await? {
            return Ok(Some(made));
        }
        let Some(r) = self
            .by_name("k8s-object", &object_key(target, obj))
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Ok(None);
        };
        let schedule = if scheduled_kind(r.data["kind"].as_str().unwrap_or_default()) {
            Some(self.schedule(target).await?)
        } else {
            None
        };
        Ok(Some(self.k8s_status(r, schedule.as_ref())))
    }

    async fn create(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<Value> {
        let api = "k8s:Create";
        self.gate(api, true).await?;
        if manifest["apiVersion"] != super::spaces::CONNECTION_API
            || manifest["kind"] != "WorkspaceConnection"
        {
            return Err(CloudError::new(
                "k8s",
                "Create",
                "MethodNotAllowed",
                "the sandbox creates only WorkspaceConnections this way; apply other objects",
            ));
        }
        let namespace = manifest
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let name = manifest
            .pointer("/spec/workspaceName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let obj = ObjectRef {
            api_version: "workspace.jupyter.org/v1alpha1".into(),
            kind: "Workspace".into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        };
        let workspace = Kube::get(self, target, &obj).await?.ok_or_else(|| {
            super::shared::not_found(
                "k8s",
                "Create",
                "NotFound",
                &format!("workspaces.workspace.jupyter.org \"{name}\""),
            )
        })?;
        let kind = manifest
            .pointer("/spec/workspaceConnectionType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let url = super::spaces::connection_url(&target.cluster, &workspace, kind)
            .map_err(|why| CloudError::new("k8s", "Create", "BadRequest", why))?;
        let mut answer = manifest.clone();
        answer["status"] = json!({"workspaceConnectionType": kind, "workspaceConnectionUrl": url});
        Ok(answer)
    }

    async fn list(&self, target: &KubeTarget, query: &ListQuery<'_>) -> CloudResult<Vec<Value>> {
        let objects = self
            .list_of_kind(
                target,
                query.api_version,
                query.kind,
                query.namespace,
                query.labels,
            )
            .await?;
        // No server to push a field selector to: the selector filters what the kind holds.
        Ok(match query.fields {
            Some(fields) => objects
                .into_iter()
                .filter(|o| matches_fields(o, fields))
                .collect(),
            None => objects,
        })
    }

    async fn pod_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<String> {
        self.gate("k8s:PodLog", false).await?;
        let (p, age, _) = self.sim_pod(target, namespace, pod, query).await?;
        Ok(p.log(age, query))
    }

    async fn follow_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<LogLines> {
        self.gate("k8s:PodLog", false).await?;
        let (p, _, created) = self.sim_pod(target, namespace, pod, query).await?;
        Ok(p.follow(query, created, self.time_scale))
    }

    async fn cluster_state(
        &self,
        target: &KubeTarget,
    ) -> CloudResult<std::sync::Arc<ClusterState>> {
        self.gate("k8s:Watch", false).await?;
        let s = self.schedule(target).await?;
        // The simulated view is computed afresh: its revision is a digest of what it says.
        let digest = {
            use sha2::Digest as _;
            let text = serde_json::to_string(&(&s.nodes, s.pending_pods, s.pending_gpus, s.pods))
                .unwrap_or_default();
            sha2::Sha256::digest(text.as_bytes())[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        Ok(std::sync::Arc::new(ClusterState {
            cache: CacheInfo {
                source: "sandbox".into(),
                revision: format!("sbx-{digest}"),
                nodes: s.nodes.len(),
                pods: s.pods,
            },
            nodes: s.nodes,
            pending_gpu_pods: s.pending_pods,
            pending_gpus: s.pending_gpus,
            claims: s.claims,
        }))
    }

    async fn patch_metadata(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        labels: &Value,
        annotations: &Value,
    ) -> CloudResult<()> {
        self.gate("k8s:Patch", true).await?;
        self.patch_meta(target, obj, labels, annotations).await
    }

    async fn patch_spec(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        spec: &Value,
    ) -> CloudResult<()> {
        let api = "k8s:Patch";
        self.gate(api, true).await?;
        let Some(r) = self
            .by_name("k8s-object", &object_key(target, obj))
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(super::shared::not_found(
                "k8s", "Patch", "NotFound", &obj.name,
            ));
        };
        let mut data = r.data.clone();
        super::spaces::merge_spec(&mut data, spec);
        self.update(api, "k8s-object", &r.id, &data).await
    }

    /// A space's pod serves its app on port 8888; reaching it counts as the space's activity
    /// (what the controller's idle check would see).
    async fn port_forward(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
    ) -> CloudResult<PodStream> {
        let api = "k8s:PortForward";
        self.gate(api, false).await?;
        let refused = |why: String| CloudError::new("k8s", "PortForward", "BadRequest", why);
        let Some((p, ..)) = self
            .sim_pods(target)
            .await?
            .into_iter()
            .find(|(p, ..)| p.namespace == namespace && p.name == pod)
        else {
            return Err(super::shared::not_found(
                "k8s",
                "PortForward",
                "NotFound",
                pod,
            ));
        };
        let Some(base) = p.space_base().map(str::to_string) else {
            return Err(refused(format!("nothing listens on port {port} of {pod}")));
        };
        if port != 8888 {
            return Err(refused(format!("nothing listens on port {port} of {pod}")));
        }
        let space = p.labels["workspace.jupyter.org/workspace-name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let obj = ObjectRef {
            api_version: "workspace.jupyter.org/v1alpha1".into(),
            kind: "Workspace".into(),
            namespace: Some(namespace.into()),
            name: space.clone(),
        };
        let Some(r) = self
            .by_name("k8s-object", &object_key(target, &obj))
            .await?
            .filter(|r| r.deleted_ms.is_none())
        else {
            return Err(super::shared::not_found(
                "k8s",
                "PortForward",
                "NotFound",
                pod,
            ));
        };
        let mut data = r.data.clone();
        data[super::spaces::ACTIVE] = json!(super::now_ms());
        self.update(api, "k8s-object", &r.id, &data).await?;
        let mounts = r.data["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((
                    v["mountPath"].as_str()?.to_string(),
                    v["persistentVolumeClaimName"].as_str()?.to_string(),
                ))
            })
            .collect();
        let files = super::space_files::SpaceFiles::of(self, target, &r.data).await?;
        Ok(super::space_app::connect(super::space_app::SpaceInfo {
            name: space,
            base,
            mounts,
            files,
        }))
    }

    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()> {
        let api = "k8s:Delete";
        self.gate(api, true).await?;
        match self.by_name("k8s-object", &object_key(target, obj)).await? {
            Some(r) if r.deleted_ms.is_none() => {
                if super::spaces::is_workspace(&r.data) {
                    let namespace = obj.namespace.as_deref().unwrap_or("default");
                    self.forget_home(target, namespace, &obj.name).await?;
                }
                self.remove(api, "k8s-object", &r.id).await
            }
            _ => Ok(()),
        }
    }
}
