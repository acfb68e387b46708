//! The per-cluster summary the status routes serve, kept up to date one watch event at a time:
//! a slim record per node (the view's fields only) and per pod (its node, its GPU request,
//! whether it still counts, who it is of), per-node requested GPUs — in total and per holder —
//! and the pending demand adjusted by each event's difference — so a read costs the number of nodes, never the number of pods, and the
//! watched objects themselves are never kept.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::num::NonZeroU32;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::brief::{node_view, pod_brief, pod_key, Holder, PodBrief};
use cloud::{CacheInfo, ClusterState, GpuClaim, Labels, NodeState};

/// An index into `node_names` or `holders`, kept one up so that an `Option` of it costs no
/// more: a fleet holds hundreds of thousands of pod records, and three words made each 40
/// bytes where it is now 12.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slot(NonZeroU32);

impl Slot {
    fn new(i: usize) -> Self {
        // Never more than a u32 of nodes or holders (each is a pod at least).
        let up = u32::try_from(i + 1).unwrap_or(u32::MAX);
        Slot(NonZeroU32::new(up).unwrap_or(NonZeroU32::MIN))
    }

    fn get(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// What the summary keeps of one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PodSlim {
    /// GPUs it holds or waits for (0 once it finished, or when it asks for none).
    gpus: u32,
    /// Its node in `node_names`, when bound; `None` while pending.
    node: Option<Slot>,
    /// Its holder (namespace and workload labels) in `holders`, when it asks for GPUs.
    holder: Option<Slot>,
}

// A fleet keeps one of these per pod watched: a wider record is a regression of megabytes.
const _: () = assert!(std::mem::size_of::<PodSlim>() == 12);

/// An interned holder, shared by every claim of the view that names it.
type SharedHolder = (Arc<str>, Arc<Labels>);

/// A holder as the index compares it, however its parts are held: a pod's brief looks up the
/// interned holder that the index keys by its shared parts, so no holder is kept twice (a
/// second copy of each workload's labels cost a fleet about 0.7 MB a cluster).
trait HolderKey {
    fn parts(&self) -> (&str, &Labels);
}

impl HolderKey for Holder {
    fn parts(&self) -> (&str, &Labels) {
        (&self.0, &self.1)
    }
}

/// The index's key: the holder's shared parts (two `Arc`s more, not a copy).
#[derive(Clone, Debug)]
struct Interned(SharedHolder);

impl HolderKey for Interned {
    fn parts(&self) -> (&str, &Labels) {
        (&self.0 .0, &self.0 .1)
    }
}

impl Hash for dyn HolderKey + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

impl PartialEq for dyn HolderKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn HolderKey + '_ {}

// Hashed and compared as the `dyn HolderKey` it borrows as, as `Borrow` requires.
impl Hash for Interned {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self as &dyn HolderKey).hash(h)
    }
}

impl PartialEq for Interned {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Interned {}

impl<'a> Borrow<dyn HolderKey + 'a> for Interned {
    fn borrow(&self) -> &(dyn HolderKey + 'a) {
        self
    }
}

/// The maintained summary of one cluster.
#[derive(Debug, Default)]
pub struct Summary {
    /// A node's view without its requested/free GPUs (those come from `requested`).
    nodes: BTreeMap<String, NodeState>,
    /// By `namespace/name` (a boxed key: a `String`'s capacity word less, 10,000 times).
    pods: HashMap<Box<str>, PodSlim>,
    /// Node names pods are bound to, interned (pods name their node; the node may come later).
    node_names: Vec<Arc<str>>,
    node_index: HashMap<String, usize>,
    /// GPUs requested on each interned node name.
    requested: Vec<u32>,
    /// Holders of GPU-requesting pods, interned (a workload's pods share one) and counted, so
    /// a finished workload's slot is freed and reused: the summary never grows with history.
    holders: Vec<(SharedHolder, u32)>,
    holder_index: HashMap<Interned, usize>,
    free_holders: Vec<usize>,
    /// GPUs requested on each (node, holder), where more than none.
    held: HashMap<(Slot, Option<Slot>), u32>,
    pending_pods: u32,
    pending_gpus: u32,
    /// Bumped by every change that alters the view.
    pub revision: u64,
}

fn shared((namespace, labels): Holder) -> SharedHolder {
    (namespace.into(), Arc::new(labels))
}

impl Summary {
    fn intern(&mut self, node: &str) -> usize {
        if let Some(i) = self.node_index.get(node) {
            return *i;
        }
        self.node_names.push(node.into());
        self.requested.push(0);
        let i = self.node_names.len() - 1;
        self.node_index.insert(node.to_string(), i);
        i
    }

    fn slim_of(&mut self, gpus: u32, node: Option<&str>, holder: Holder) -> PodSlim {
        let node = match node {
            Some(n) if gpus > 0 => Some(Slot::new(self.intern(n))),
            _ => None,
        };
        let holder = (gpus > 0).then(|| Slot::new(self.hold(holder)));
        PodSlim { gpus, node, holder }
    }

    /// Interns a holder for one more pod.
    fn hold(&mut self, holder: Holder) -> usize {
        if let Some(i) = self.holder_index.get(&holder as &dyn HolderKey) {
            self.holders[*i].1 += 1;
            return *i;
        }
        let held = shared(holder);
        let i = match self.free_holders.pop() {
            Some(i) => {
                self.holders[i] = (held.clone(), 1);
                i
            }
            None => {
                self.holders.push((held.clone(), 1));
                self.holders.len() - 1
            }
        };
        self.holder_index.insert(Interned(held), i);
        i
    }

    /// A pod no longer refers to its holder; the last one frees its slot.
    fn release(&mut self, p: PodSlim) {
        let Some(i) = p.holder.map(Slot::get) else {
            return;
        };
        let (held, refs) = &mut self.holders[i];
        *refs -= 1;
        if *refs == 0 {
            let key = Interned(held.clone());
            self.holder_index.remove(&key);
            self.free_holders.push(i);
        }
    }

    /// Adds (`sign` 1) or removes (`sign` -1) a pod's share of the totals.
    fn count(&mut self, p: PodSlim, add: bool) {
        if p.gpus == 0 {
            return;
        }
        let change = |v: &mut u32, by: u32| {
            *v = if add { *v + by } else { v.saturating_sub(by) };
        };
        match p.node {
            Some(i) => {
                change(&mut self.requested[i.get()], p.gpus);
                let key = (i, p.holder);
                let held = self.held.entry(key).or_default();
                change(held, p.gpus);
                if *held == 0 {
                    self.held.remove(&key);
                }
            }
            None => {
                change(&mut self.pending_pods, 1);
                change(&mut self.pending_gpus, p.gpus);
            }
        }
    }

    /// Nodes and pods held.
    pub fn sizes(&self) -> (usize, usize) {
        (self.nodes.len(), self.pods.len())
    }

    #[cfg(test)]
    pub fn apply_node(&mut self, n: &Node) {
        self.apply_node_view(node_view(n));
    }

    pub fn apply_node_view(&mut self, view: NodeState) {
        if self.nodes.get(&view.name) != Some(&view) {
            self.nodes.insert(view.name.clone(), view);
            self.revision += 1;
        }
    }

    pub fn delete_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.revision += 1;
        }
    }

    #[cfg(test)]
    pub fn apply_pod(&mut self, p: &Pod) {
        self.apply_pod_brief(pod_brief(p));
    }

    pub fn apply_pod_brief(&mut self, (key, gpus, node, holder): PodBrief) {
        let new = self.slim_of(gpus, node.as_deref(), holder);
        let old = self.pods.insert(key.into(), new);
        if let Some(old) = old {
            self.release(old);
        }
        match old {
            Some(old) if old == new => {}
            Some(old) => {
                self.count(old, false);
                self.count(new, true);
                self.revision += 1;
            }
            None => {
                self.count(new, true);
                self.revision += 1;
            }
        }
    }

    pub fn delete_pod(&mut self, p: &Pod) {
        if let Some(old) = self.pods.remove(pod_key(p).as_str()) {
            self.release(old);
            self.count(old, false);
            self.revision += 1;
        }
    }

    /// Replaces every node (a relist): what the list no longer has is gone.
    pub fn replace_nodes(&mut self, nodes: &[Node]) {
        self.replace_node_views(nodes.iter().map(node_view).collect());
    }

    /// The same from views made while the relist arrived (so no object outlives its page).
    pub fn replace_node_views(&mut self, views: Vec<NodeState>) {
        self.nodes = views.into_iter().map(|v| (v.name.clone(), v)).collect();
        self.revision += 1;
    }

    /// Replaces every pod (a relist), recounting the totals from the new list.
    pub fn replace_pods(&mut self, pods: &[Pod]) {
        self.replace_pod_briefs(pods.iter().map(pod_brief).collect());
    }

    /// An empty summary with room for `pods` pods.
    pub fn with_pods(pods: usize) -> Self {
        let mut s = Summary::default();
        s.pods.reserve(pods);
        s
    }

    /// The same from briefs (key, GPUs, node, holder).
    pub fn replace_pod_briefs(&mut self, briefs: Vec<PodBrief>) {
        let mut relisted = Summary::with_pods(briefs.len());
        for brief in briefs {
            relisted.apply_pod_brief(brief);
        }
        self.replace_pods_with(relisted);
    }

    /// Replaces every pod with those of `relisted` (a summary a relist filled with its pods
    /// only): the pods, what they request of each node, their holders and the pending demand.
    /// The nodes stay; a node's requested GPUs are found by name, so the relist's own
    /// numbering of node names comes along.
    pub fn replace_pods_with(&mut self, relisted: Summary) {
        let Summary {
            pods,
            node_names,
            node_index,
            requested,
            holders,
            holder_index,
            free_holders,
            held,
            pending_pods,
            pending_gpus,
            ..
        } = relisted;
        self.pods = pods;
        self.node_names = node_names;
        self.node_index = node_index;
        self.requested = requested;
        self.holders = holders;
        self.holder_index = holder_index;
        self.free_holders = free_holders;
        self.held = held;
        self.pending_pods = pending_pods;
        self.pending_gpus = pending_gpus;
        self.revision += 1;
    }

    /// The view now: one pass over the nodes.
    pub fn state(&self, cache: CacheInfo) -> ClusterState {
        let nodes = self
            .nodes
            .values()
            .map(|n| {
                let used = self
                    .node_index
                    .get(&n.name)
                    .map_or(0, |i| self.requested[*i]);
                let mut n = n.clone();
                n.gpus.requested = used;
                n.gpus.free = n.gpus.allocatable.saturating_sub(used);
                n
            })
            .collect();
        let mut claims: Vec<GpuClaim> = self
            .held
            .iter()
            .filter_map(|((node, holder), gpus)| {
                let ((namespace, labels), _) = self.holders.get(holder.as_ref()?.get())?.clone();
                Some(GpuClaim {
                    node: self.node_names[node.get()].clone(),
                    namespace,
                    labels,
                    gpus: *gpus,
                })
            })
            .collect();
        claims.sort();
        ClusterState {
            claims,
            cache: CacheInfo {
                nodes: self.nodes.len(),
                pods: self.pods.len(),
                ..cache
            },
            nodes,
            pending_gpu_pods: self.pending_pods,
            pending_gpus: self.pending_gpus,
        }
    }
}

/// The same view from whole objects, from scratch (what the summary must always equal).
pub fn summarize(nodes: &[Node], pods: &[Pod], cache: CacheInfo) -> ClusterState {
    let mut s = Summary::default();
    s.replace_nodes(nodes);
    s.replace_pods(pods);
    s.state(cache)
}

#[cfg(test)]
mod tests {
    use super::super::brief::{finished, pod_gpus, GPU};
    use super::*;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    fn node(i: usize, gpus: u32, ready: bool) -> Node {
        serde_json::from_value(json!({"metadata": {"name": format!("hyperpod-i-{i:04}"),
            "labels": {"node.kubernetes.io/instance-type": "ml.g5.12xlarge",
                       "sagemaker.amazonaws.com/node-health-status": if ready { "Schedulable" } else { "Unschedulable" }}},
            "status": {"capacity": {GPU: gpus.to_string()}, "allocatable": {GPU: gpus.to_string()},
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    fn pod(i: usize, node: Option<usize>, gpus: u32, phase: &str, init: u32) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "resources": {"limits": {GPU: gpus.to_string()}}}]});
        if init > 0 {
            spec["initContainers"] =
                json!([{"name": "i", "resources": {"requests": {GPU: init.to_string()}}}]);
        }
        if let Some(n) = node {
            spec["nodeName"] = json!(format!("hyperpod-i-{n:04}"));
        }
        // The holder's labels change with the pod's shape, so updates move GPUs between holders.
        let namespace = ["default", "hyperpod-ns-a"][i % 2];
        serde_json::from_value(
            json!({"metadata": {"name": format!("p{i}"), "namespace": namespace,
                                "labels": {"app": format!("w{init}-{}", gpus % 2), "pod-template-hash": format!("h{i}")}},
            "spec": spec, "status": {"phase": phase}}),
        )
        .unwrap()
    }

    fn cache() -> CacheInfo {
        CacheInfo {
            source: "watch".into(),
            revision: String::new(),
            nodes: 0,
            pods: 0,
        }
    }

    /// Random creates, updates and deletes of nodes and pods (pods bound to nodes that may not
    /// exist yet, rebound, finished, pending): after each step the maintained summary equals
    /// the one computed from scratch from the same objects.
    #[test]
    fn the_maintained_summary_always_equals_one_made_from_scratch() {
        for seed in 0..40u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut s = Summary::default();
            let mut nodes: BTreeMap<usize, Node> = BTreeMap::new();
            let mut pods: BTreeMap<usize, Pod> = BTreeMap::new();
            for step in 0..300 {
                let before = s.revision;
                match rng.gen_range(0..10) {
                    0 | 1 => {
                        let i = rng.gen_range(0..12);
                        let n = node(i, [0, 1, 4, 8][rng.gen_range(0..4)], rng.gen_bool(0.8));
                        s.apply_node(&n);
                        nodes.insert(i, n);
                    }
                    2 => {
                        let i = rng.gen_range(0..12);
                        s.delete_node(&format!("hyperpod-i-{i:04}"));
                        nodes.remove(&i);
                    }
                    3..=6 => {
                        let i = rng.gen_range(0..60);
                        let bound = rng.gen_bool(0.7).then(|| rng.gen_range(0..14));
                        let phase = ["Pending", "Running", "Running", "Succeeded", "Failed"]
                            [rng.gen_range(0..5)];
                        let p = pod(
                            i,
                            bound,
                            rng.gen_range(0..5),
                            phase,
                            [0, 0, 2, 6][rng.gen_range(0..4)],
                        );
                        s.apply_pod(&p);
                        pods.insert(i, p);
                    }
                    7 | 8 => {
                        let i = rng.gen_range(0..60);
                        if let Some(p) = pods.remove(&i) {
                            s.delete_pod(&p);
                        }
                    }
                    _ => {
                        // A relist: everything replaced at once.
                        let n: Vec<Node> = nodes.values().cloned().collect();
                        let p: Vec<Pod> = pods.values().cloned().collect();
                        s.replace_nodes(&n);
                        s.replace_pods(&p);
                    }
                }
                let n: Vec<Node> = nodes.values().cloned().collect();
                let p: Vec<Pod> = pods.values().cloned().collect();
                let fresh = summarize(&n, &p, cache());
                let now = s.state(cache());
                assert_eq!(now, fresh, "seed {seed} step {step}");
                // Holders are held only by the pods that ask for GPUs: a finished workload's
                // slot is free again, so the summary never grows with history.
                let holding = s.pods.values().filter(|p| p.holder.is_some()).count();
                let interned = s.holders.len() - s.free_holders.len();
                assert_eq!(interned, s.holder_index.len(), "seed {seed} step {step}");
                // The index keys each holder by the parts its claims share, not by a copy.
                for (key, i) in &s.holder_index {
                    let (held, _) = &s.holders[*i];
                    assert!(Arc::ptr_eq(&key.0 .1, &held.1) && Arc::ptr_eq(&key.0 .0, &held.0));
                }
                assert!(interned <= holding, "seed {seed} step {step}");
                assert_eq!(
                    s.holders
                        .iter()
                        .map(|(_, refs)| *refs as usize)
                        .sum::<usize>(),
                    holding,
                    "seed {seed} step {step}"
                );
                // And by the plain definition, pod by pod.
                let live = |p: &&Pod| !finished(p) && pod_gpus(p) > 0;
                for v in &now.nodes {
                    let want: u32 = p
                        .iter()
                        .filter(live)
                        .filter(|p| {
                            p.spec.as_ref().unwrap().node_name.as_deref() == Some(v.name.as_str())
                        })
                        .map(pod_gpus)
                        .sum();
                    assert_eq!(v.gpus.requested, want, "seed {seed} step {step} {}", v.name);
                    assert_eq!(v.gpus.free, v.gpus.allocatable.saturating_sub(want));
                }
                let pending: Vec<&Pod> = p
                    .iter()
                    .filter(live)
                    .filter(|p| p.spec.as_ref().unwrap().node_name.is_none())
                    .collect();
                assert_eq!(now.pending_gpu_pods as usize, pending.len());
                assert_eq!(
                    now.pending_gpus,
                    pending.iter().map(|p| pod_gpus(p)).sum::<u32>()
                );
                assert_eq!((now.cache.nodes, now.cache.pods), (n.len(), p.len()));
                assert!(s.revision >= before);
            }
        }
    }

    #[test]
    fn an_event_that_changes_nothing_keeps_the_revision() {
        let mut s = Summary::default();
        s.apply_node(&node(1, 8, true));
        s.apply_pod(&pod(1, Some(1), 2, "Running", 0));
        let r = s.revision;
        s.apply_node(&node(1, 8, true));
        s.apply_pod(&pod(1, Some(1), 2, "Running", 0));
        assert_eq!(
            s.revision, r,
            "a resync of equal objects serves the same bytes"
        );
        s.apply_pod(&pod(1, Some(1), 2, "Succeeded", 0));
        assert!(s.revision > r);
        let st = s.state(cache());
        assert_eq!(
            st.nodes[0].gpus.requested, 0,
            "a finished pod frees its GPUs"
        );
    }
}
