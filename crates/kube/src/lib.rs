//! The Kubernetes port over kube-rs: one client per cluster (EKS endpoint + CA + a bearer token
//! refreshed in the background, or a fixed URL for imported and test clusters), server-side apply
//! with field manager `instantstart`, and watch-backed node/pod caches for the status routes.

mod bounded;
mod brief;
mod client;
mod noticed;
mod slim;
mod state;
mod summary;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Scope};
use kube::Client;
use serde_json::Value;

use crate::token::EksTokens;
use cloud::{
    CloudError, CloudResult, ClusterState, Kube, KubeTarget, ListQuery, LogLines, LogQuery,
    ObjectRef, PodStream, ServiceCall,
};

pub use summary::{summarize, Summary};

/// Field manager for every server-side apply.
pub const FIELD_MANAGER: &str = "instantstart";

/// Installs the process-level rustls provider once: `ring`, the one provider kube, reqwest and the
/// AWS SDK's client share here (one TLS library in the binary, not two).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How clients authenticate.
pub enum KubeAuth {
    /// EKS: the cluster's endpoint and CA from `DescribeCluster`, an IAM bearer token.
    Eks(Arc<EksTokens>),
    /// Every cluster is reached at this URL without credentials (an authenticating proxy, or a
    /// Kubernetes API emulator in tests).
    Url(String),
}

type KindKey = (String, String, String);

/// The kube-rs adapter.
pub struct KubeRs {
    auth: KubeAuth,
    clients: Mutex<HashMap<String, Client>>,
    kinds: Mutex<HashMap<KindKey, (ApiResource, ApiCapabilities)>>,
    caches: tokio::sync::Mutex<HashMap<String, Arc<state::Cache>>>,
    /// What every cache notices, for whoever listens (the UI's event stream).
    events: tokio::sync::broadcast::Sender<cloud::ClusterChange>,
}

fn k8s_err(operation: &str, e: kube::Error) -> CloudError {
    match e {
        kube::Error::Api(status) => {
            let code = if status.reason.is_empty() {
                format!("Http{}", status.code)
            } else {
                status.reason.clone()
            };
            let err = CloudError::new("k8s", operation, &code, status.message.clone());
            if status.code == 429 || status.code >= 500 {
                err.retryable()
            } else {
                err
            }
        }
        // The API server does not serve the kind (its CRD is not installed): not transient.
        kube::Error::Discovery(d) => {
            CloudError::new("k8s", operation, "KindNotServed", d.to_string())
        }
        other => CloudError::new("k8s", operation, "Unreachable", format!("{other:#}")).retryable(),
    }
}

fn setup_err(operation: &str, e: anyhow::Error) -> CloudError {
    CloudError::new("k8s", operation, "ClientSetup", format!("{e:#}"))
}

impl KubeRs {
    pub fn new(auth: KubeAuth) -> Self {
        install_crypto_provider();
        Self {
            auth,
            clients: Mutex::new(HashMap::new()),
            kinds: Mutex::new(HashMap::new()),
            caches: tokio::sync::Mutex::new(HashMap::new()),
            // Room for a burst (a relist that finds many nodes changed); a listener that falls
            // further behind is told how many it missed.
            events: tokio::sync::broadcast::channel(1024).0,
        }
    }

    /// The cached client for `target`, built on first use.
    async fn client(&self, target: &KubeTarget) -> CloudResult<Client> {
        if let Some(c) = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&target.cluster)
        {
            return Ok(c.clone());
        }
        let client = match &self.auth {
            KubeAuth::Url(url) => client::plain(url),
            KubeAuth::Eks(tokens) => client::eks(target, tokens.clone()).await,
        }
        .map_err(|e| setup_err("Connect", e))?;
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(target.cluster.clone(), client.clone());
        Ok(client)
    }

    /// The API resource for a kind, discovered once per cluster (plural, scope).
    async fn resource(
        &self,
        client: &Client,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
    ) -> CloudResult<(ApiResource, ApiCapabilities)> {
        let key = (
            target.cluster.clone(),
            api_version.to_string(),
            kind.to_string(),
        );
        if let Some(found) = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| k8s_err("Discover", e))?;
        self.kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, found.clone());
        Ok(found)
    }

    async fn api(
        &self,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> CloudResult<Api<DynamicObject>> {
        let client = self.client(target).await?;
        let (ar, caps) = self.resource(&client, target, api_version, kind).await?;
        Ok(match (caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client, ns, &ar),
            (Scope::Namespaced, None) => Api::all_with(client, &ar),
            (Scope::Cluster, _) => Api::all_with(client, &ar),
        })
    }

    async fn object_api(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
    ) -> CloudResult<Api<DynamicObject>> {
        let ns = obj.namespace.as_deref().or(Some("default"));
        self.api(target, &obj.api_version, &obj.kind, ns).await
    }
}

/// How long a call through the service proxy may take.
const SERVICE_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A client for a fixed URL, without credentials.
fn log_params(query: &LogQuery, follow: bool) -> kube::api::LogParams {
    kube::api::LogParams {
        container: query.container.clone(),
        follow,
        tail_lines: query.tail_lines,
        since_seconds: query.since_seconds,
        // A snapshot is read whole into memory: never more than this, whatever was asked.
        limit_bytes: (!follow).then(|| {
            query
                .limit_bytes
                .unwrap_or(cloud::MAX_LOG_READ)
                .min(cloud::MAX_LOG_READ)
        }),
        ..Default::default()
    }
}

#[async_trait]
impl Kube for KubeRs {
    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()> {
        let obj = ObjectRef::to_apply(manifest)?;
        let api = self.object_api(target, &obj).await?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&obj.name, &params, &Patch::Apply(manifest))
            .await
            .map_err(|e| k8s_err("Apply", e))?;
        Ok(())
    }

    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>> {
        let api = self.object_api(target, obj).await?;
        let found = api
            .get_opt(&obj.name)
            .await
            .map_err(|e| k8s_err("Get", e))?;
        found
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| CloudError::new("k8s", "Get", "Decode", e.to_string()))
    }

    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()> {
        let api = self.object_api(target, obj).await?;
        match api.delete(&obj.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(k8s_err("Delete", e)),
        }
    }

    async fn patch_metadata(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        labels: &Value,
        annotations: &Value,
    ) -> CloudResult<()> {
        let api = self.object_api(target, obj).await?;
        let patch = serde_json::json!({"metadata": {"labels": labels, "annotations": annotations}});
        api.patch(&obj.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| k8s_err("Patch", e))?;
        Ok(())
    }

    async fn patch_spec(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        spec: &Value,
    ) -> CloudResult<()> {
        let api = self.object_api(target, obj).await?;
        let patch = serde_json::json!({ "spec": spec });
        api.patch(&obj.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| k8s_err("Patch", e))?;
        Ok(())
    }

    async fn create(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<Value> {
        let (Some(api_version), Some(kind)) =
            (manifest["apiVersion"].as_str(), manifest["kind"].as_str())
        else {
            return Err(CloudError::new(
                "k8s",
                "Create",
                "Invalid",
                "manifest lacks apiVersion or kind",
            ));
        };
        let namespace = manifest
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .or(Some("default"));
        let api = self.api(target, api_version, kind, namespace).await?;
        let object: DynamicObject = serde_json::from_value(manifest.clone())
            .map_err(|e| CloudError::new("k8s", "Create", "Invalid", e.to_string()))?;
        let created = api
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| k8s_err("Create", e))?;
        serde_json::to_value(created)
            .map_err(|e| CloudError::new("k8s", "Create", "Decode", e.to_string()))
    }

    async fn list(&self, target: &KubeTarget, query: &ListQuery<'_>) -> CloudResult<Vec<Value>> {
        let api = self
            .api(target, query.api_version, query.kind, query.namespace)
            .await?;
        let mut params = ListParams::default();
        if let Some(labels) = query.labels {
            params = params.labels(labels);
        }
        if let Some(fields) = query.fields {
            params = params.fields(fields);
        }
        let list = api.list(&params).await.map_err(|e| k8s_err("List", e))?;
        list.items
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(|e| CloudError::new("k8s", "List", "Decode", e.to_string()))
    }

    async fn pod_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<String> {
        let pods: Api<Pod> = Api::namespaced(self.client(target).await?, namespace);
        pods.logs(pod, &log_params(query, false))
            .await
            .map_err(|e| k8s_err("PodLog", e))
    }

    async fn port_forward(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
    ) -> CloudResult<PodStream> {
        let pods: Api<Pod> = Api::namespaced(self.client(target).await?, namespace);
        let mut forwarder = pods
            .portforward(pod, &[port])
            .await
            .map_err(|e| k8s_err("PortForward", e))?;
        let stream = forwarder.take_stream(port).ok_or_else(|| {
            CloudError::new(
                "k8s",
                "PortForward",
                "NoStream",
                format!("the API server opened no stream to port {port} of {pod}"),
            )
        })?;
        Ok(Box::new(Forwarded {
            stream,
            _forwarder: forwarder,
        }))
    }

    async fn follow_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<LogLines> {
        use futures::StreamExt as _;
        let pods: Api<Pod> = Api::namespaced(self.client(target).await?, namespace);
        // One HTTP stream on the client's connection pool per container: no process, and the
        // connection closes when the returned stream is dropped.
        let body = pods
            .log_stream(pod, &log_params(query, true))
            .await
            .map_err(|e| k8s_err("PodLog", e))?;
        Ok(bounded::bounded_lines(body)
            .map(|line| {
                line.map_err(|e| {
                    CloudError::new("k8s", "PodLog", "StreamBroken", e.to_string()).retryable()
                })
            })
            .boxed())
    }

    async fn forget(&self, cluster: &str) {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(cluster);
        self.kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(c, _, _), _| c != cluster);
        // Dropping the cache aborts its watch tasks.
        self.caches.lock().await.remove(cluster);
    }

    async fn cache_stats(&self) -> Vec<cloud::WatchCacheStats> {
        let caches = self.caches.lock().await;
        caches.iter().map(|(name, c)| c.stats(name)).collect()
    }

    async fn service_post(
        &self,
        target: &KubeTarget,
        call: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value> {
        let client = self.client(target).await?;
        let uri = format!(
            "/api/v1/namespaces/{}/services/{}:{}/proxy/{}",
            call.namespace, call.name, call.port, call.path
        );
        let request = http::Request::post(uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default())
            .map_err(|e| CloudError::new("k8s", "ServiceProxy", "InvalidRequest", e.to_string()))?;
        // A model server that hangs must not hold the request (or the agent) for minutes.
        match tokio::time::timeout(
            SERVICE_CALL_TIMEOUT,
            bounded::bounded_answer(&client, request),
        )
        .await
        {
            Ok(answer) => answer,
            Err(_) => Err(CloudError::new(
                "k8s",
                "ServiceProxy",
                "Timeout",
                format!(
                    "{} did not answer within {} s",
                    call.name,
                    SERVICE_CALL_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    async fn cluster_state(&self, target: &KubeTarget) -> CloudResult<Arc<ClusterState>> {
        self.cache(target).await?.snapshot().await
    }

    fn events(&self) -> tokio::sync::broadcast::Receiver<cloud::ClusterChange> {
        self.events.subscribe()
    }

    async fn warm(&self, target: &KubeTarget) -> CloudResult<()> {
        self.cache(target).await.map(drop)
    }
}

impl KubeRs {
    /// The cluster's cache, started (not waited for) if there is none or it stopped.
    async fn cache(&self, target: &KubeTarget) -> CloudResult<Arc<state::Cache>> {
        let mut caches = self.caches.lock().await;
        match caches.get(&target.cluster) {
            Some(c) if !c.stopped() => Ok(c.clone()),
            _ => {
                let client = self.client(target).await?;
                let tell = state::Tell {
                    cluster: target.cluster.clone(),
                    events: self.events.clone(),
                };
                let c = Arc::new(state::Cache::start(client, tell));
                caches.insert(target.cluster.clone(), c.clone());
                Ok(c)
            }
        }
    }
}

/// A port-forward's stream, with the forwarder that carries it (dropped together).
struct Forwarded<S> {
    stream: S,
    _forwarder: kube::api::Portforwarder,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Forwarded<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Forwarded<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
