//! Watch-backed state of one cluster: kube-runtime watchers over nodes and pods feed the
//! maintained [`Summary`] event by event (the objects are read and dropped, never kept), and a
//! read serves the summary's current view, built once per change. Pods are parsed slim
//! ([`SlimPod`]): only the fields the summary reads are ever allocated. Changes a person should
//! know at once (see [`Noticed`]) are told on the adapter's channel as the watch delivers them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client};

use super::noticed::{self, Change, Noticed};
use super::slim::SlimPod;
use super::summary::Summary;
use cloud::{CacheInfo, CloudError, CloudResult, ClusterChange, ClusterState, WatchCacheStats};

/// How long the first request waits for the initial lists before answering with an error.
const SYNC_TIMEOUT: Duration = Duration::from_secs(15);
/// Bits of `synced`: the first node list and the first pod list have arrived.
const NODES_SYNCED: u8 = 1;
const PODS_SYNCED: u8 = 2;

/// Distinguishes caches of one process (a restarted cache never reuses a revision tag).
static EPOCH: AtomicU64 = AtomicU64::new(1);

struct Shared {
    summary: Summary,
    noticed: Noticed,
    /// When the last watch event (or completed relist) arrived: the cache's age.
    last_event: Option<std::time::Instant>,
    /// The view of `built.0`'s revision, made at most once per change.
    built: Option<(u64, Arc<ClusterState>)>,
}

/// Watch tasks for nodes and pods and the summary they maintain; the tasks end with the cache.
pub struct Cache {
    shared: Arc<Mutex<Shared>>,
    synced: tokio::sync::watch::Receiver<u8>,
    epoch: u64,
    stopped: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One kind's watch: a relist gathers what it keeps of each object as each page arrives (so
/// no object outlives its page) and then replaces that kind wholesale; events apply one
/// object. Each says what changed that a person should know (see [`Noticed`]).
trait Watched: Clone + Send + Sync + 'static {
    const SYNCED: u8;
    /// What a relist has gathered so far.
    type Relist: Default + Send;
    /// An empty relist, sized for as many objects as the cache holds now.
    fn begin(s: &Shared) -> Self::Relist;
    fn gather(relist: &mut Self::Relist, o: &Self);
    fn apply(s: &mut Shared, o: &Self) -> Option<Change>;
    fn delete(s: &mut Shared, o: &Self);
    fn replace(s: &mut Shared, relist: Self::Relist) -> Vec<Change>;
}

impl Watched for Node {
    const SYNCED: u8 = NODES_SYNCED;
    type Relist = Vec<cloud::NodeState>;
    fn begin(s: &Shared) -> Self::Relist {
        Vec::with_capacity(s.summary.sizes().0)
    }
    fn gather(relist: &mut Self::Relist, o: &Self) {
        relist.push(super::brief::node_brief(o));
    }
    fn apply(s: &mut Shared, o: &Self) -> Option<Change> {
        let view = super::brief::node_brief(o);
        let change = s.noticed.node(&view);
        s.summary.apply_node_view(view);
        change
    }
    fn delete(s: &mut Shared, o: &Self) {
        let name = o.metadata.name.as_deref().unwrap_or_default();
        s.noticed.node_gone(name);
        s.summary.delete_node(name);
    }
    fn replace(s: &mut Shared, all: Self::Relist) -> Vec<Change> {
        let changes = s.noticed.nodes(&all);
        s.summary.replace_node_views(all);
        changes
    }
}

/// A pod relist in progress: the pods' part of a summary of its own, filled page by page, and
/// the pods found blocked. Briefs held until the list ended cost a fleet's relisting clusters
/// about 3 MB each at once (key, node, namespace and labels of every pod, as strings).
#[derive(Default)]
struct PodRelist {
    pods: Summary,
    blocked: Vec<(String, String)>,
}

impl SlimPod {
    /// The summary's brief, and the scheduler's message when the pod cannot be placed.
    fn brief(&self) -> (super::brief::PodBrief, Option<String>) {
        let brief = super::brief::pod_brief(&self.0);
        let blocked = noticed::blocked(&self.0, brief.1);
        (brief, blocked)
    }
}

impl Watched for SlimPod {
    const SYNCED: u8 = PODS_SYNCED;
    type Relist = PodRelist;
    fn begin(s: &Shared) -> PodRelist {
        // Sized once: grown by doubling, a list of 10,000 pods left its smaller tables behind
        // as holes in the heap (a first list has no size to go by).
        PodRelist {
            pods: Summary::with_pods(s.summary.sizes().1),
            blocked: Vec::new(),
        }
    }
    fn gather(relist: &mut PodRelist, o: &Self) {
        let (brief, why) = o.brief();
        if let Some(why) = why {
            relist.blocked.push((brief.0.clone(), why));
        }
        relist.pods.apply_pod_brief(brief);
    }
    fn apply(s: &mut Shared, o: &Self) -> Option<Change> {
        let (brief, blocked) = o.brief();
        let change = s.noticed.pod(&brief.0, blocked);
        s.summary.apply_pod_brief(brief);
        change
    }
    fn delete(s: &mut Shared, o: &Self) {
        s.noticed.pod_gone(&super::brief::pod_key(&o.0));
        s.summary.delete_pod(&o.0);
    }
    fn replace(s: &mut Shared, relist: PodRelist) -> Vec<Change> {
        let changes = s.noticed.pods(relist.blocked);
        s.summary.replace_pods_with(relist.pods);
        changes
    }
}

/// Where one cache's changes go: the adapter's one channel, each change named with its cluster.
#[derive(Clone)]
pub struct Tell {
    pub cluster: String,
    pub events: tokio::sync::broadcast::Sender<ClusterChange>,
}

impl Tell {
    fn send(&self, (kind, object, detail): Change) {
        let seen_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // No receiver (no browser open) is not an error: the change is simply not told.
        let _ = self.events.send(ClusterChange {
            cluster: self.cluster.clone(),
            kind,
            object,
            detail,
            seen_ms,
        });
    }
}

/// The thread every watch runs on. A relist parses megabytes of JSON a page at a time; on the
/// request workers each page held up the reads queued behind it on that worker (status p99
/// while one of 20 clusters relisted its 10,000 pods: see `docs/benchmarks.md`). The requests
/// themselves still go out through each cluster's client, whichever runtime made it.
fn watch_thread() -> tokio::runtime::Handle {
    static HANDLE: std::sync::OnceLock<Option<tokio::runtime::Handle>> = std::sync::OnceLock::new();
    let own = HANDLE.get_or_init(|| {
        let built = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|rt| {
                let handle = rt.handle().clone();
                std::thread::Builder::new()
                    .name("watches".into())
                    .spawn(move || rt.block_on(std::future::pending::<()>()))?;
                Ok(handle)
            });
        built
            .inspect_err(|e| tracing::warn!(error = %e, "no thread for the watches: they share the request workers"))
            .ok()
    });
    // Without a thread of their own (the system refused one), the watches run where the
    // cache is started, as they did before.
    own.clone().unwrap_or_else(tokio::runtime::Handle::current)
}

async fn follow<K>(
    api: Api<K>,
    shared: Arc<Mutex<Shared>>,
    synced: Arc<tokio::sync::watch::Sender<u8>>,
    stopped: Arc<AtomicBool>,
    tell: Tell,
) where
    K: Watched + kube::Resource + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    // Pages of 100: a relist never holds more than 100 objects' JSON at a time.
    let stream = watcher(api, watcher::Config::default().page_size(100)).default_backoff();
    let mut stream = std::pin::pin!(stream);
    // What a relist has gathered, held only until it completes.
    let mut relist = K::Relist::default();
    while let Some(ev) = stream.next().await {
        let lock = || {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.last_event = Some(std::time::Instant::now());
            s
        };
        let changes = match ev {
            Ok(watcher::Event::Init) => {
                relist = K::begin(&shared.lock().unwrap_or_else(|e| e.into_inner()));
                Vec::new()
            }
            Ok(watcher::Event::InitApply(o)) => {
                K::gather(&mut relist, &o);
                Vec::new()
            }
            Ok(watcher::Event::InitDone) => {
                let changes = K::replace(&mut lock(), std::mem::take(&mut relist));
                synced.send_modify(|s| *s |= K::SYNCED);
                changes
            }
            Ok(watcher::Event::Apply(o)) => K::apply(&mut lock(), &o).into_iter().collect(),
            Ok(watcher::Event::Delete(o)) => {
                K::delete(&mut lock(), &o);
                Vec::new()
            }
            Err(e) => {
                tracing::debug!(error = %e, "watch error (retrying with backoff)");
                Vec::new()
            }
        };
        for change in changes {
            tell.send(change);
        }
    }
    stopped.store(true, Ordering::Relaxed);
}

impl Cache {
    pub fn start(client: Client, tell: Tell) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            summary: Summary::default(),
            noticed: Noticed::default(),
            last_event: None,
            built: None,
        }));
        let (tx, synced) = tokio::sync::watch::channel(0u8);
        let tx = Arc::new(tx);
        let stopped = Arc::new(AtomicBool::new(false));
        let tasks = vec![
            watch_thread().spawn(follow(
                Api::<Node>::all(client.clone()),
                shared.clone(),
                tx.clone(),
                stopped.clone(),
                tell.clone(),
            )),
            watch_thread().spawn(follow(
                Api::<SlimPod>::all(client),
                shared.clone(),
                tx,
                stopped.clone(),
                tell,
            )),
        ];
        Self {
            shared,
            synced,
            epoch: EPOCH.fetch_add(1, Ordering::Relaxed),
            stopped,
            tasks,
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Objects held and time since the last event, for the metrics.
    pub fn stats(&self, cluster: &str) -> WatchCacheStats {
        let s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let (nodes, pods) = s.summary.sizes();
        WatchCacheStats {
            cluster: cluster.to_string(),
            nodes,
            pods,
            synced: *self.synced.borrow() == NODES_SYNCED | PODS_SYNCED,
            since_event: s.last_event.map(|t| t.elapsed()),
        }
    }

    /// The current view: the same `Arc` until the summary changes.
    pub async fn snapshot(&self) -> CloudResult<Arc<ClusterState>> {
        let mut synced = self.synced.clone();
        let all = NODES_SYNCED | PODS_SYNCED;
        // Once synced, a read costs no timer.
        if *synced.borrow() != all
            && tokio::time::timeout(SYNC_TIMEOUT, synced.wait_for(|s| *s == all))
                .await
                .ok()
                .and_then(Result::ok)
                .is_none()
        {
            return Err(CloudError::new(
                "k8s",
                "Watch",
                "CacheNotSynced",
                "the node and pod lists did not arrive from the Kubernetes API server in time",
            )
            .retryable());
        }
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let revision = s.summary.revision;
        if let Some((r, view)) = &s.built {
            if *r == revision {
                return Ok(view.clone());
            }
        }
        let view = Arc::new(s.summary.state(CacheInfo {
            source: "watch".into(),
            revision: format!("{}-{revision}", self.epoch),
            nodes: 0,
            pods: 0,
        }));
        s.built = Some((revision, view.clone()));
        Ok(view)
    }
}
