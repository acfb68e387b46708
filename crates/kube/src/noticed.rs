//! Which of a cluster's watched changes a person should know at once: a node that stops (or
//! starts again) being ready, a GPU pod the scheduler cannot place. Kept beside the summary, it
//! remembers only what it needs to tell a change from a repeat (each node's readiness, the keys
//! of pods already reported), so a watch event that repeats a state says nothing.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;

use cloud::{ClusterChangeKind, NodeState};

/// A change worth telling: its kind, the node or `namespace/pod`, why.
pub type Change = (ClusterChangeKind, String, Option<String>);

#[derive(Debug, Default)]
pub struct Noticed {
    ready: HashMap<String, bool>,
    blocked: HashSet<String>,
    /// A first pod list has arrived: later relists may report what they find changed.
    pods_listed: bool,
}

/// The scheduler's message, when a pod asking for GPUs is unbound and marked unschedulable.
pub fn blocked(p: &Pod, gpus: u32) -> Option<String> {
    if gpus == 0 || p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        return None;
    }
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    (c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        .then(|| c.message.clone().unwrap_or_else(|| "unschedulable".into()))
}

impl Noticed {
    /// A node's new view; a first sight of a node tells nothing (a joining node is not ready
    /// for a while, which is no news).
    pub fn node(&mut self, v: &NodeState) -> Option<Change> {
        let was = self.ready.insert(v.name.clone(), v.ready);
        match (was, v.ready) {
            (Some(true), false) => Some((
                ClusterChangeKind::NodeNotReady,
                v.name.clone(),
                v.not_ready_reason.clone(),
            )),
            (Some(false), true) => Some((ClusterChangeKind::NodeReady, v.name.clone(), None)),
            _ => None,
        }
    }

    pub fn node_gone(&mut self, name: &str) {
        self.ready.remove(name);
    }

    /// A relist of the nodes: what changed since the last view of each node that was known.
    pub fn nodes(&mut self, views: &[NodeState]) -> Vec<Change> {
        let mut before = std::mem::take(&mut self.ready);
        views
            .iter()
            .filter_map(|v| {
                if let Some(was) = before.remove(&v.name) {
                    self.ready.insert(v.name.clone(), was);
                }
                self.node(v)
            })
            .collect()
    }

    /// A pod's new state (`blocked`: the scheduler's message when it cannot be placed).
    pub fn pod(&mut self, key: &str, blocked: Option<String>) -> Option<Change> {
        match blocked {
            Some(why) if self.blocked.insert(key.to_string()) => Some((
                ClusterChangeKind::PodPendingForGpus,
                key.to_string(),
                Some(why),
            )),
            Some(_) => None,
            None => {
                self.blocked.remove(key);
                None
            }
        }
    }

    pub fn pod_gone(&mut self, key: &str) {
        self.blocked.remove(key);
    }

    /// A relist of the pods (the blocked ones): those newly blocked, unless this is the first
    /// list (what was already so when the watch began is no change).
    pub fn pods(&mut self, blocked: Vec<(String, String)>) -> Vec<Change> {
        let before = std::mem::take(&mut self.blocked);
        let tell = std::mem::replace(&mut self.pods_listed, true);
        blocked
            .into_iter()
            .filter_map(|(key, why)| {
                let new = !before.contains(&key);
                self.blocked.insert(key.clone());
                (tell && new).then_some((ClusterChangeKind::PodPendingForGpus, key, Some(why)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(name: &str, ready: bool) -> NodeState {
        NodeState {
            name: name.into(),
            instance_id: None,
            instance_type: None,
            instance_group: None,
            capacity_type: None,
            ready,
            not_ready_reason: (!ready).then(|| "KubeletNotReady: PLEG is not healthy".into()),
            unschedulable: false,
            gpus: Default::default(),
            health: Default::default(),
        }
    }

    #[test]
    fn a_node_tells_only_when_its_readiness_changes() {
        let mut n = Noticed::default();
        // Joining, not ready yet: no news. Then ready, then a repeat: news once.
        assert_eq!(n.node(&view("a", false)), None);
        assert_eq!(
            n.node(&view("a", true)),
            Some((ClusterChangeKind::NodeReady, "a".into(), None))
        );
        assert_eq!(n.node(&view("a", true)), None);
        let down = n.node(&view("a", false)).unwrap();
        assert_eq!(down.0, ClusterChangeKind::NodeNotReady);
        assert_eq!(
            down.2.as_deref(),
            Some("KubeletNotReady: PLEG is not healthy")
        );
        assert_eq!(n.node(&view("a", false)), None);
        // A relist that finds it ready again says so; one that finds a new node says nothing.
        let changes = n.nodes(&[view("a", true), view("b", false)]);
        assert_eq!(
            changes,
            vec![(ClusterChangeKind::NodeReady, "a".into(), None)]
        );
        n.node_gone("a");
        assert_eq!(n.node(&view("a", false)), None);
    }

    fn pod(node: Option<&str>, scheduled: Option<(&str, &str)>) -> Pod {
        let mut p = json!({"metadata": {"name": "w-0", "namespace": "team"},
                           "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        if let Some((status, reason)) = scheduled {
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": status, "reason": reason,
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]);
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn a_gpu_pod_is_blocked_only_when_the_scheduler_says_so() {
        let why = blocked(&pod(None, Some(("False", "Unschedulable"))), 8);
        assert_eq!(
            why.as_deref(),
            Some("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
        );
        // Not asking for GPUs, bound, not yet looked at, or scheduled: not blocked.
        assert_eq!(
            blocked(&pod(None, Some(("False", "Unschedulable"))), 0),
            None
        );
        assert_eq!(
            blocked(&pod(Some("n"), Some(("False", "Unschedulable"))), 8),
            None
        );
        assert_eq!(blocked(&pod(None, None), 8), None);
        assert_eq!(blocked(&pod(None, Some(("True", ""))), 8), None);
    }

    #[test]
    fn a_blocked_pod_is_told_once_until_it_is_placed() {
        let mut n = Noticed::default();
        // Already blocked when the watch began: no news.
        assert!(n.pods(vec![("team/old".into(), "x".into())]).is_empty());
        let first = n.pod("team/w-0", Some("no GPUs".into())).unwrap();
        assert_eq!(first.0, ClusterChangeKind::PodPendingForGpus);
        assert_eq!(n.pod("team/w-0", Some("no GPUs".into())), None);
        assert_eq!(n.pod("team/w-0", None), None);
        assert!(n.pod("team/w-0", Some("no GPUs".into())).is_some());
        n.pod_gone("team/w-0");
        // A later relist tells what it finds newly blocked, not what was already.
        let changes = n.pods(vec![
            ("team/old".into(), "x".into()),
            ("team/new".into(), "y".into()),
        ]);
        assert_eq!(
            changes,
            vec![(
                ClusterChangeKind::PodPendingForGpus,
                "team/new".into(),
                Some("y".into())
            )]
        );
    }
}
