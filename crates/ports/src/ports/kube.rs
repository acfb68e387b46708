//! The Kubernetes API of one cluster: objects, the node and pod cache, the service proxy.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::*;

/// A byte stream to one port of a pod.
pub trait PodIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> PodIo for T {}
pub type PodStream = Box<dyn PodIo>;

/// A change a cluster's watch saw that a person should know at once, pushed to the UI's event
/// stream as the watch delivers it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterChange {
    /// The cluster whose watch saw it.
    pub cluster: String,
    pub kind: ClusterChangeKind,
    /// The node's name, or `namespace/pod`.
    pub object: String,
    /// Why: the node's Ready condition (reason: message), or the scheduler's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When the watch delivered it, in milliseconds since the Unix epoch.
    pub seen_ms: u64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterChangeKind {
    /// A node's `Ready` condition stopped being `True`.
    NodeNotReady,
    /// A node that was not ready is again.
    NodeReady,
    /// A pod asking for GPUs was found unschedulable (`PodScheduled=False`, `Unschedulable`).
    PodPendingForGpus,
}

/// How to reach one cluster's API server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeTarget {
    /// EKS cluster name (used to mint the bearer token).
    pub cluster: String,
    pub endpoint: String,
    pub certificate_authority: String,
}

/// Identifies one object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// The reference of a manifest about to be applied; a manifest without one is refused.
    pub fn to_apply(manifest: &Value) -> CloudResult<Self> {
        Self::of(manifest).ok_or_else(|| {
            CloudError::new(
                "k8s",
                "Apply",
                "Invalid",
                "manifest lacks apiVersion, kind or name",
            )
        })
    }

    /// Reads the reference out of a manifest.
    pub fn of(manifest: &Value) -> Option<Self> {
        Some(Self {
            api_version: manifest.get("apiVersion")?.as_str()?.to_string(),
            kind: manifest.get("kind")?.as_str()?.to_string(),
            namespace: manifest
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
            name: manifest.pointer("/metadata/name")?.as_str()?.to_string(),
        })
    }
}

/// Label the control plane puts on every object it owns.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "instantstart");

/// One Kubernetes node as the status routes show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// Kubernetes node name (`hyperpod-i-…` on HyperPod).
    pub name: String,
    /// EC2 instance id, when the node name or provider id carries one.
    pub instance_id: Option<String>,
    pub instance_type: Option<String>,
    /// HyperPod instance group (`sagemaker.amazonaws.com/instance-group-name`).
    pub instance_group: Option<String>,
    /// `on-demand` | `spot` | `training-plan` when a label says so.
    pub capacity_type: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Why the node is not ready (the `Ready` condition's reason and message), when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready_reason: Option<String>,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    pub gpus: GpuUsage,
    /// HyperPod health labels (`…/node-health-status`, `…/deep-health-check-status`).
    #[schema(value_type = BTreeMap<String, String>)]
    pub health: Labels,
}

/// GPU accounting for one node, from `nvidia.com/gpu` capacity, allocatable and pod requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuUsage {
    pub total: u32,
    pub allocatable: u32,
    /// Requested by pods bound to the node that have not finished.
    pub requested: u32,
    /// `allocatable - requested`, never negative.
    pub free: u32,
}

/// Where a [`ClusterState`] came from and how fresh it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheInfo {
    /// `watch` (kube-runtime watchers) or `sandbox` (the simulated cluster).
    pub source: String,
    /// Changes whenever the view does (the status route's `ETag`).
    pub revision: String,
    pub nodes: usize,
    pub pods: usize,
}

/// One cluster's watch-backed cache, as the metrics report it.
#[derive(Debug, Clone)]
pub struct WatchCacheStats {
    pub cluster: String,
    pub nodes: usize,
    pub pods: usize,
    /// Both lists have arrived at least once.
    pub synced: bool,
    /// Since the last watch event or relist; `None` before the first.
    pub since_event: Option<std::time::Duration>,
}

/// One call through the service proxy.
#[derive(Debug, Clone, Copy)]
pub struct ServiceCall<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub port: u16,
    /// Path on the service, without the leading slash.
    pub path: &'a str,
}

/// What part of one container's log to read (the pod `log` subresource's parameters).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogQuery {
    /// The pod's only container when `None`.
    pub container: Option<String>,
    /// The last N lines only.
    pub tail_lines: Option<i64>,
    /// Lines written in the last N seconds only.
    pub since_seconds: Option<i64>,
    /// Stop reading after this many bytes (a snapshot never holds a runaway log in memory).
    pub limit_bytes: Option<i64>,
}

/// A followed log: one line per item, without its newline. Dropping the stream closes the
/// upstream connection.
pub type LogLines = futures::stream::BoxStream<'static, CloudResult<String>>;

/// The longest log line kept: a workload writes what it likes, and one line of gigabytes held
/// whole would end the process. The rest of a longer line is read and dropped, and the line
/// says so.
pub const MAX_LOG_LINE: usize = 64 * 1024;

/// The most a log snapshot reads from one container, whatever the caller asked.
pub const MAX_LOG_READ: i64 = 1024 * 1024;

/// The note a cut line ends with.
pub const CUT_NOTE: &str = " … [line cut at 64 KiB]";

/// `line`, cut to [`MAX_LOG_LINE`] bytes (at a character boundary) with [`CUT_NOTE`] after.
pub fn cut_log_line(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LOG_LINE {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut end = MAX_LOG_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{CUT_NOTE}", &line[..end]))
}

/// The pod labels a [`GpuClaim`] keeps: those that say which workload a pod is of — the HyperPod
/// training operator's `HPJob`, this control plane's own (training job, warm pool, purpose),
/// KubeRay's cluster, the Job controller's `job-name`, and the usual app labels a Deployment's
/// template carries. Every other label is dropped as the pod is read.
pub const HOLDER_LABELS: [&str; 8] = [
    "HPJob",
    "instantstart.io/training-job",
    "instantstart.io/pool",
    "instantstart.io/workload",
    "ray.io/cluster",
    "job-name",
    "app.kubernetes.io/name",
    "app",
];

/// GPUs the pods of one holder request on one node: who is using what, for cost allocation.
/// The names are shared with the summary that interns them: a view of 10,000 pods holds
/// thousands of claims, and a copy of each one's labels made a cluster's view cost megabytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GpuClaim {
    /// The node's name (as in [`NodeState::name`]).
    pub node: Arc<str>,
    /// The pods' namespace (`hyperpod-ns-<team>` for a team's).
    pub namespace: Arc<str>,
    /// The pods' labels of [`HOLDER_LABELS`].
    pub labels: Arc<Labels>,
    pub gpus: u32,
}

/// A few labels (a holder's of [`HOLDER_LABELS`], a node's health), sorted by key. A `BTreeMap`
/// would do, but it allocates a node with room for eleven entries to hold the one or two kept:
/// half a kilobyte for each workload and each node of each cluster watched.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels(Box<[(String, String)]>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&String> {
        let i = self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok()?;
        Some(&self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// As a map is made from pairs: sorted by key, the last of a key kept.
impl FromIterator<(String, String)> for Labels {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut v: Vec<(String, String)> = pairs.into_iter().collect();
        // Stable, so among equal keys the last given stays last: keep that one.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(String, String)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match kept.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => kept.push((k, val)),
            }
        }
        Labels(kept.into_boxed_slice())
    }
}

/// Written and read as the JSON object of a map.
impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(d).map(Labels::from)
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        Labels(map.into_iter().collect())
    }
}

/// Nodes and GPU demand of one cluster.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    pub nodes: Vec<NodeState>,
    /// Pods not yet bound to a node that request GPUs.
    pub pending_gpu_pods: u32,
    /// GPUs those pods request in total.
    pub pending_gpus: u32,
    pub cache: CacheInfo,
    /// Who requests the GPUs of each node, sorted (read by cost allocation, never served: the
    /// status route's view stays the size of the nodes).
    #[serde(skip)]
    pub claims: Vec<GpuClaim>,
}

/// What a list asks for, each part by name (no two `Option<&str>` to swap): one kind,
/// optionally in one namespace, matching a label selector (`app=x,team in (a,b)`) and a field
/// selector (`involvedObject.name=…`, `spec.nodeName=…`; terms joined by commas, `=` or `!=`),
/// how the events of one object or the pods of one node are read without listing them all.
/// Adapters that cannot push a field selector to a server filter with [`matches_fields`].
#[derive(Debug, Clone, Copy)]
pub struct ListQuery<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub labels: Option<&'a str>,
    pub fields: Option<&'a str>,
}

impl<'a> ListQuery<'a> {
    /// Every object of a kind, in every namespace; narrowed by the methods below.
    pub fn of(api_version: &'a str, kind: &'a str) -> Self {
        Self {
            api_version,
            kind,
            namespace: None,
            labels: None,
            fields: None,
        }
    }

    pub fn namespace(self, namespace: &'a str) -> Self {
        Self {
            namespace: Some(namespace),
            ..self
        }
    }

    /// A label selector (`key=value,…`).
    pub fn labels(self, selector: &'a str) -> Self {
        Self {
            labels: Some(selector),
            ..self
        }
    }

    /// A field selector (`spec.nodeName=…`).
    pub fn fields(self, selector: &'a str) -> Self {
        Self {
            fields: Some(selector),
            ..self
        }
    }
}

#[async_trait]
pub trait Kube: Send + Sync {
    /// Server-side apply with field manager `instantstart`.
    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()>;
    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>>;
    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()>;
    /// Merges labels and annotations into an existing object's metadata (a JSON merge patch of
    /// `metadata` only; a `null` value removes the key). A missing object is `NotFound`. How a
    /// pod changes hands without being restarted: its controller's selector does not change.
    async fn patch_metadata(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        labels: &Value,
        annotations: &Value,
    ) -> CloudResult<()>;
    /// Merges fields into an existing object's `spec` (a JSON merge patch of `spec` only): the
    /// fields named change, every other stays as it is. A missing object is `NotFound`. How a
    /// space starts and stops (`desiredStatus`) without re-applying what it is.
    async fn patch_spec(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        spec: &Value,
    ) -> CloudResult<()>;
    /// Creates an object (a POST) and returns what the server answered: how a create-only
    /// resource hands back its result — jupyter-k8s's `WorkspaceConnection` answers with the
    /// URL of a connection, and is never stored.
    async fn create(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<Value>;
    /// The objects a [`ListQuery`] names: one kind, optionally in one namespace, matching its
    /// label and field selectors.
    async fn list(&self, target: &KubeTarget, query: &ListQuery<'_>) -> CloudResult<Vec<Value>>;
    /// Nodes and GPU demand, from a watch-backed cache (started on first use, kept live after).
    /// The same `Arc` until the view changes (its `cache.revision` says when it does).
    async fn cluster_state(&self, target: &KubeTarget)
        -> CloudResult<std::sync::Arc<ClusterState>>;
    /// POSTs JSON to a Service through the API server's service proxy
    /// (`/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}`): the only way the
    /// control plane talks to a workload, so it never dials an address a request names.
    async fn service_post(
        &self,
        target: &KubeTarget,
        service: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value>;
    /// One container's log, read once.
    async fn pod_log(
        &self,
        _target: &KubeTarget,
        _namespace: &str,
        _pod: &str,
        _query: &LogQuery,
    ) -> CloudResult<String> {
        Err(CloudError::new(
            "k8s",
            "PodLog",
            "Unsupported",
            "no pod logs here",
        ))
    }
    /// One container's log, followed: the lines so far (per the query), then each new line as
    /// it is written, until the container ends or the stream is dropped.
    async fn follow_log(
        &self,
        _target: &KubeTarget,
        _namespace: &str,
        _pod: &str,
        _query: &LogQuery,
    ) -> CloudResult<LogLines> {
        Err(CloudError::new(
            "k8s",
            "PodLog",
            "Unsupported",
            "no pod logs here",
        ))
    }
    /// A byte stream to `port` of a pod, through the API server (a port-forward): how the
    /// control plane reaches a space's server without an address of its own.
    async fn port_forward(
        &self,
        _target: &KubeTarget,
        _namespace: &str,
        _pod: &str,
        _port: u16,
    ) -> CloudResult<PodStream> {
        Err(CloudError::new(
            "k8s",
            "PortForward",
            "Unsupported",
            "no port-forward here",
        ))
    }
    /// The changes the watch-backed caches see, as they see them (a receiver that never
    /// yields where views are not watch-backed).
    fn events(&self) -> tokio::sync::broadcast::Receiver<ClusterChange> {
        tokio::sync::broadcast::channel(1).1
    }
    /// Starts the watch-backed cache of a cluster, if there is none, without waiting for it to
    /// fill (a server with many clusters serves at once; each cache says when it is synced).
    async fn warm(&self, _target: &KubeTarget) -> CloudResult<()> {
        Ok(())
    }
    /// The watch-backed caches held, one per cluster (none where views are not watch-backed).
    async fn cache_stats(&self) -> Vec<WatchCacheStats> {
        Vec::new()
    }
    /// Drops the client, discovered kinds and caches of a cluster that no longer exists (a new
    /// cluster of the same name has another endpoint and CA).
    async fn forget(&self, _cluster: &str) {}
}

/// Whether an object matches a field selector (`a.b=v`, `a.b!=v`, comma-separated), as the API
/// server reads one: a missing field is the empty string.
pub fn matches_fields(obj: &Value, selector: &str) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            let (path, want, negate) = match term.split_once("!=") {
                Some((p, v)) => (p, v, true),
                None => {
                    let (p, v) = term.split_once('=').unwrap_or((term, ""));
                    (p, v.trim_start_matches('='), false)
                }
            };
            let got = path
                .trim()
                .split('.')
                .try_fold(obj, |o, k| o.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default();
            (got == want.trim()) != negate
        })
}

/// Whether every field `desired` sets has the same value in `actual` (fields the server adds are
/// ignored). Lists must match element by element. This is how reconciliation decides that an
/// object is already as wanted and no apply is needed.
pub fn json_contains(actual: &Value, desired: &Value) -> bool {
    match (actual, desired) {
        (Value::Object(a), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| a.get(k).is_some_and(|av| json_contains(av, dv))),
        (Value::Array(a), Value::Array(d)) => {
            a.len() == d.len() && a.iter().zip(d).all(|(av, dv)| json_contains(av, dv))
        }
        (Value::Number(a), Value::Number(d)) => a.as_f64() == d.as_f64(),
        (a, d) => a == d,
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;

    #[test]
    fn a_field_selector_matches_as_the_api_server_reads_it() {
        let event = serde_json::json!({"involvedObject": {"kind": "Node", "name": "hyperpod-i-1"}});
        assert!(matches_fields(
            &event,
            "involvedObject.kind=Node,involvedObject.name=hyperpod-i-1"
        ));
        assert!(!matches_fields(&event, "involvedObject.name=hyperpod-i-2"));
        assert!(matches_fields(&event, "involvedObject.name!=hyperpod-i-2"));
        assert!(
            matches_fields(&event, "involvedObject.namespace="),
            "missing is empty"
        );
    }
}

#[cfg(test)]
mod labels_tests {
    use super::*;

    #[test]
    fn labels_read_as_the_map_they_are_made_from() {
        let pairs = [
            ("app", "b"),
            ("HPJob", "llama"),
            ("job-name", "x"),
            ("app", "c"),
        ];
        let pairs = pairs.map(|(k, v)| (k.to_string(), v.to_string()));
        let labels: Labels = pairs.iter().cloned().collect();
        let map: BTreeMap<String, String> = pairs.into_iter().collect();
        assert_eq!(labels, Labels::from(map.clone()));
        for key in ["app", "HPJob", "job-name", "ray.io/cluster", ""] {
            assert_eq!(labels.get(key), map.get(key), "{key}");
        }
        let read: Vec<(&str, &str)> = labels.iter().collect();
        assert_eq!(read, [("HPJob", "llama"), ("app", "c"), ("job-name", "x")]);
        // On the wire, the JSON object a map makes (a node's health labels in a status).
        let json = serde_json::to_value(&labels).unwrap();
        assert_eq!(json, serde_json::to_value(&map).unwrap());
        assert_eq!(serde_json::from_value::<Labels>(json).unwrap(), labels);
        assert!(serde_json::from_value::<Labels>(serde_json::json!(["app"])).is_err());
    }
}
