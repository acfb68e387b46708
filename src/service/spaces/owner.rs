//! Which pod is a space's own: the one the Workspace controller made for that Workspace, by
//! the owner chain jupyter-k8s sets (`controllerutil.SetControllerReference`): the Workspace
//! (by uid) controls the Deployment `workspace-<name>`
//! (`GenerateDeploymentName`, jupyter-infra/jupyter-k8s `internal/controller/constants.go` at
//! f2670353e769c58b4164d0a08c6f296a1e4e9b3e), which controls a ReplicaSet, which controls the
//! pod. A pod that merely carries the space's label (anyone who may make pods in the namespace
//! can) is not it, and the proxy never connects to it.

use serde_json::Value;

/// The Deployment the Workspace controller makes for a space.
pub fn deployment_name(space: &str) -> String {
    format!("workspace-{space}")
}

/// The object's controller, as its `ownerReferences` name it: (kind, name, uid).
pub fn controller(o: &Value) -> Option<(&str, &str, &str)> {
    o.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["controller"] == Value::Bool(true))
        .and_then(|r| Some((r["kind"].as_str()?, r["name"].as_str()?, r["uid"].as_str()?)))
}

fn uid(o: &Value) -> Option<&str> {
    o.pointer("/metadata/uid").and_then(Value::as_str)
}

/// Whether `deployment` is the one the Workspace with `workspace_uid` controls.
pub fn deployment_is_the_workspaces(deployment: &Value, workspace_uid: &str) -> bool {
    matches!(controller(deployment), Some(("Workspace", _, u)) if u == workspace_uid)
}

/// The ReplicaSet a pod's controller names, if it is one: (name, uid).
pub fn pod_replica_set(pod: &Value) -> Option<(&str, &str)> {
    match controller(pod)? {
        ("ReplicaSet", name, uid) => Some((name, uid)),
        _ => None,
    }
}

/// Whether `replica_set` (the pod's controller, read by name) is the one it names and is
/// controlled by `deployment`.
pub fn replica_set_is_the_deployments(
    replica_set: &Value,
    named_uid: &str,
    deployment: &Value,
) -> bool {
    uid(replica_set) == Some(named_uid)
        && uid(deployment).is_some_and(
            |d| matches!(controller(replica_set), Some(("Deployment", _, u)) if u == d),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owned(kind: &str, name: &str, uid: &str) -> Value {
        json!([{"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
    }

    #[test]
    fn only_the_chain_from_the_workspace_to_its_pod_counts() {
        let deployment = json!({"metadata": {"name": "workspace-lab", "uid": "d-1",
            "ownerReferences": owned("Workspace", "lab", "w-1")}});
        assert!(deployment_is_the_workspaces(&deployment, "w-1"));
        assert!(
            !deployment_is_the_workspaces(&deployment, "w-2"),
            "another workspace's"
        );
        let planted = json!({"metadata": {"name": "workspace-lab"}});
        assert!(
            !deployment_is_the_workspaces(&planted, "w-1"),
            "an unowned look-alike"
        );

        let rs = json!({"metadata": {"name": "workspace-lab-7d4", "uid": "r-1",
            "ownerReferences": owned("Deployment", "workspace-lab", "d-1")}});
        let pod = json!({"metadata": {"name": "workspace-lab-7d4-x",
            "ownerReferences": owned("ReplicaSet", "workspace-lab-7d4", "r-1")}});
        let (name, named) = pod_replica_set(&pod).unwrap();
        assert_eq!(name, "workspace-lab-7d4");
        assert!(replica_set_is_the_deployments(&rs, named, &deployment));
        // A ReplicaSet of another Deployment, or one whose uid is not the one the pod names.
        let other = json!({"metadata": {"name": "workspace-lab-7d4", "uid": "r-1",
            "ownerReferences": owned("Deployment", "mine", "d-9")}});
        assert!(!replica_set_is_the_deployments(&other, named, &deployment));
        assert!(!replica_set_is_the_deployments(&rs, "r-2", &deployment));
        // A pod with the label and no owner, or owned by something else.
        assert!(pod_replica_set(&json!({"metadata": {"name": "p"}})).is_none());
        let by_job = json!({"metadata": {"ownerReferences": owned("Job", "j", "j-1")}});
        assert!(pod_replica_set(&by_job).is_none());
    }
}
