//! The simulated Spaces controller (jupyter-k8s's `Workspace`): a space waits for a ready node
//! of its instance type, runs a little (simulated) time after it was asked to, stops itself
//! once idle past its timeout (writing `desiredStatus: Stopped`, as the controller does), and
//! stops or starts again when its `desiredStatus` is patched — keeping its home volume. Its
//! state is a pure function of when it was last asked to run or stop and when it last served a
//! request (the proxy's traffic).

use serde_json::{json, Value};

use super::workload::Schedule;
use super::{now_ms, Sandbox};

/// Wall-clock ms its `desiredStatus` was last set by a request (kept with the stored object).
pub(super) const SINCE: &str = "__since";
/// Wall-clock ms it last served a request through the control plane.
pub(super) const ACTIVE: &str = "__active";

/// Simulated seconds from being asked to run until it serves, and to stop until it has.
const START: f64 = 40.0;
const STOP: f64 = 10.0;

pub(super) fn is_workspace(obj: &Value) -> bool {
    obj["apiVersion"] == "workspace.jupyter.org/v1alpha1" && obj["kind"] == "Workspace"
}

/// jupyter-k8s's validating webhook on a `Workspace` (see `cloud::workspace_templates` for the
/// sources): the template's namespace must be the workspace's own or the shared one, the
/// template must exist there (the sandbox serves AWS's two), and the image and home storage
/// must be within the template's bounds. Refused as the API server relays a webhook's denial.
pub(super) fn admit(obj: &Value) -> cloud::CloudResult<()> {
    use cloud::workspace_templates::{namespace_violation, TemplateBounds};
    let deny = |why: String| {
        cloud::CloudError::new(
            "k8s",
            "Apply",
            "Forbidden",
            format!("admission webhook \"vworkspace-v1alpha1.kb.io\" denied the request: {why}"),
        )
    };
    let Some(name) = obj
        .pointer("/spec/templateRef/name")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    if let Some(why) = namespace_violation(obj) {
        return Err(deny(why));
    }
    let Some(template) = TemplateBounds::aws(name) else {
        return Err(deny(format!(
            "failed to get template: workspacetemplates.workspace.jupyter.org \"{name}\" not found"
        )));
    };
    let violations = template.violations(obj);
    match violations.len() {
        0 => Ok(()),
        1 => Err(deny(format!(
            "workspace violates template '{name}' constraints: {}",
            violations[0]
        ))),
        n => Err(deny(format!(
            "workspace violates template '{name}' constraints: {n} violations: {}",
            violations.join("; ")
        ))),
    }
}

/// The name of a workspace's pod: its ReplicaSet's, then a suffix.
pub(super) fn pod_name(obj: &Value) -> String {
    let h = workspace_hash(obj);
    format!("{}-{:05x}", replica_set_name(obj), (h >> 40) & 0xf_ffff)
}

fn workspace_hash(obj: &Value) -> u64 {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    super::workload::fnv1a(&format!("{namespace}/{name}"))
}

/// A workspace's ReplicaSet: its Deployment's name (`workspace-<name>`), then a hash.
fn replica_set_name(obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    format!(
        "workspace-{name}-{:09x}",
        workspace_hash(obj) & 0xf_ffff_ffff
    )
}

/// `ownerReferences` naming `owner` as the controller, as `SetControllerReference` writes them.
pub(super) fn controlled_by(owner: &Value) -> Value {
    json!([{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": true, "blockOwnerDeletion": true}])
}

/// The Deployment and ReplicaSet the Workspace controller makes for a workspace read back
/// (with its uid): the Workspace controls the Deployment `workspace-<name>` (jupyter-k8s
/// `GenerateDeploymentName`, internal/controller/constants.go at f2670353), which controls the
/// ReplicaSet that controls the pod.
pub(super) fn owner_chain(obj: &Value) -> (Value, Value) {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("workspace-{name}"), "namespace": namespace,
                     "uid": format!("{uid}-deployment"), "ownerReferences": controlled_by(obj)}});
    let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": replica_set_name(obj), "namespace": namespace,
                     "uid": format!("{uid}-replicaset"),
                     "ownerReferences": controlled_by(&deployment)}});
    (deployment, replica_set)
}

/// A running workspace's pod spec as Kueue sees it: its instance type and what it requests.
pub(super) fn pod_spec(obj: &Value) -> Value {
    json!({"nodeSelector": obj.pointer("/spec/nodeSelector").cloned().unwrap_or_default(),
           "containers": [{"name": "workspace", "resources": obj.pointer("/spec/resources").cloned().unwrap_or_default()}]})
}

/// Whether a stored workspace asks to run.
pub(super) fn wants_to_run(obj: &Value) -> bool {
    desired(obj) == "Running"
}

fn desired(obj: &Value) -> &str {
    obj.pointer("/spec/desiredStatus")
        .and_then(Value::as_str)
        .unwrap_or("Running")
}

/// What an apply keeps of the stored object: when it was last asked to run or stop (reset when
/// the apply changes that), and its last activity.
pub(super) fn on_apply(data: &mut Value, previous: Option<&Value>) {
    match previous {
        Some(p) if desired(p) == desired(data) => {
            data[SINCE] = p.get(SINCE).cloned().unwrap_or(json!(now_ms()));
            if let Some(a) = p.get(ACTIVE) {
                data[ACTIVE] = a.clone();
            }
        }
        _ => data[SINCE] = json!(now_ms()),
    }
}

/// A JSON merge patch of `spec` (RFC 7386), noting when `desiredStatus` changes.
pub(super) fn merge_spec(data: &mut Value, patch: &Value) {
    fn merge(into: &mut Value, patch: &Value) {
        match (into.as_object_mut(), patch.as_object()) {
            (Some(m), Some(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        m.remove(k);
                    } else {
                        merge(m.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            _ => *into = patch.clone(),
        }
    }
    let before = desired(data).to_string();
    if !data["spec"].is_object() {
        data["spec"] = json!({});
    }
    merge(&mut data["spec"], patch);
    if desired(data) != before {
        data[SINCE] = json!(now_ms());
    }
}

/// The extension API jupyter-k8s serves connections under (create-only).
pub(super) const CONNECTION_API: &str = "connection.workspace.jupyter.org/v1alpha1";

/// What the add-on's extension API answers a `WorkspaceConnection` of `kind` with, as the
/// controller decides it: the workspace must be available; `web-ui` needs the add-on's web
/// access (a domain and certificate), which the sandbox's add-on is not given; an `{ide}-remote`
/// connection is a session the AWS plugin starts, as a link that opens the IDE.
pub(super) fn connection_url(
    cluster: &str,
    workspace: &Value,
    kind: &str,
) -> Result<String, String> {
    let ide = kind.strip_suffix("-remote");
    if kind != "web-ui"
        && !ide.is_some_and(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_lowercase()))
    {
        return Err(format!(
            "invalid workspaceConnectionType: '{kind}'. Must be 'web-ui' or follow the \
             '{{ide}}-remote' pattern (e.g. 'vscode-remote', 'kiro-remote', 'cursor-remote')"
        ));
    }
    let available = workspace["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True");
    if !available {
        return Err("workspace is not available. Check workspace status for details".into());
    }
    let scheme = match ide {
        None => return Err("web browser access is not enabled for this workspace".into()),
        Some("vscode") => "vscode",
        Some("kiro") => "kiro",
        Some("cursor") => "cursor",
        Some(_) => {
            return Err(format!(
                "connection type \"{kind}\" is not configured for this workspace"
            ))
        }
    };
    let name = workspace["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = workspace["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let session = format!(
        "{:016x}",
        super::workload::fnv1a(&format!("{namespace}/{name}/{}", now_ms()))
    );
    Ok(format!(
        "{scheme}://amazonwebservices.aws-toolkit-vscode/connect/workspace?sessionId=sandbox-{session}\
         &streamUrl=wss%3A%2F%2Fssmmessages.sandbox.invalid%2Fv1%2Fdata-channel%2Fsandbox-{session}\
         &token=sandbox&clusterName={cluster}&namespace={namespace}&workspaceName={name}"
    ))
}

fn condition(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": cloud::clock::rfc3339_ms(now_ms())})
}

impl Sandbox {
    /// The `Workspace` as the controller would have it now: `desiredStatus` (idle shutdown
    /// writes it) and the status conditions.
    /// Simulated seconds since a space that asks to run stopped itself, idle past its timeout
    /// since it started (or last served); `None` while it is not idle.
    fn idle_for(&self, o: &Value, created_ms: i64, now: i64) -> Option<f64> {
        let since = o[SINCE].as_i64().unwrap_or(created_ms);
        let age = self.simulated_secs(since, now);
        let timeout = o
            .pointer("/spec/idleShutdown")
            .filter(|i| i["enabled"] == true)
            .and_then(|i| i["idleTimeoutInMinutes"].as_f64())?
            * 60.0;
        let served = o[ACTIVE]
            .as_i64()
            .map_or(0.0, |a| self.simulated_secs(since, a));
        let idle_at = START.max(served) + timeout;
        (age >= idle_at).then_some(age - idle_at)
    }

    /// Whether a stored space's pod asks for a node now: it is to run and has not stopped itself.
    pub(super) fn workspace_runs(&self, o: &Value, created_ms: i64) -> bool {
        wants_to_run(o) && self.idle_for(o, created_ms, now_ms()).is_none()
    }

    /// The `Workspace` as the controller would have it now: `desiredStatus` (idle shutdown
    /// writes it) and the status conditions. `placed` is whether the scheduler found its pod a
    /// node (with the GPUs it asks for).
    pub(super) fn workspace_status(
        &self,
        o: &mut Value,
        created_ms: i64,
        schedule: Option<&Schedule>,
        held: bool,
        placed: Option<u64>,
    ) {
        let now = now_ms();
        let since = o[SINCE].as_i64().unwrap_or(created_ms);
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let instance_type = o
            .pointer("/spec/nodeSelector/node.kubernetes.io~1instance-type")
            .and_then(Value::as_str)
            .map(str::to_string);
        let of_type = schedule.is_none_or(|s| {
            s.nodes.iter().any(|n| {
                n.ready
                    && instance_type
                        .as_ref()
                        .is_none_or(|t| n.instance_type.as_ref() == Some(t))
            })
        });
        let node = of_type && placed.is_none_or(|p| p > 0);
        let age = self.simulated_secs(since, now);
        let mut stopped_for = (desired(o) == "Stopped").then_some(age);
        if stopped_for.is_none() && node && age >= START {
            // Idle past the timeout since it started (or last served): the controller stops it.
            if let Some(t) = self.idle_for(o, created_ms, now) {
                o["spec"]["desiredStatus"] = json!("Stopped");
                stopped_for = Some(t);
            }
        }
        let status = match stopped_for {
            Some(t) if t >= STOP => json!([
                condition("Available", false, "DesiredStateStopped", ""),
                condition("Progressing", false, "AllResourcesStopped", ""),
                condition("Degraded", false, "NoError", ""),
                condition(
                    "Stopped",
                    true,
                    "AllResourcesStopped",
                    "the workspace is stopped"
                )
            ]),
            Some(_) => json!([
                condition("Available", false, "DesiredStateStopped", ""),
                condition(
                    "Progressing",
                    true,
                    "ComputeNotStopped",
                    "stopping the workspace's pod"
                ),
                condition("Degraded", false, "NoError", ""),
                condition("Stopped", false, "ComputeNotStopped", "")
            ]),
            // A team's space waits for Kueue to admit its pod.
            None if held => json!([
                condition("Available", false, "ComputeNotReady", ""),
                condition(
                    "Progressing",
                    true,
                    "ComputeNotReady",
                    "waiting for Kueue to admit the workspace's pod in its team's queue"
                ),
                condition("Degraded", false, "NoError", ""),
                condition("Stopped", false, "DesiredStateRunning", "")
            ]),
            None if !node => json!([
                condition("Available", false, "ComputeNotReady", ""),
                condition(
                    "Progressing",
                    true,
                    "ComputeNotReady",
                    &if of_type {
                        format!(
                            "waiting for {} free GPUs on a node of {} (0/{} nodes available: \
                             Insufficient nvidia.com/gpu)",
                            super::workload::pod_gpus(&pod_spec(o)),
                            instance_type.as_deref().unwrap_or("any type"),
                            schedule.map_or(0, |s| s.nodes.len())
                        )
                    } else {
                        format!(
                            "waiting for a ready node of {}",
                            instance_type.as_deref().unwrap_or("any type")
                        )
                    }
                ),
                condition("Degraded", false, "NoError", ""),
                condition("Stopped", false, "DesiredStateRunning", "")
            ]),
            // Its home volume cannot be attached to the node: the pod never starts.
            None if schedule.is_some_and(|s| s.volume_attach.is_some()) => json!([
                condition("Available", false, "ComputeNotReady", ""),
                condition("Progressing", false, "ComputeNotReady", ""),
                condition(
                    "Degraded",
                    true,
                    "FailedAttachVolume",
                    &format!(
                        "AttachVolume.Attach failed for the workspace's home volume: {}",
                        schedule
                            .and_then(|s| s.volume_attach.as_deref())
                            .unwrap_or_default()
                    )
                ),
                condition("Stopped", false, "DesiredStateRunning", "")
            ]),
            None if age < START => json!([
                condition("Available", false, "ComputeNotReady", ""),
                condition(
                    "Progressing",
                    true,
                    "ComputeNotReady",
                    "starting the workspace's pod"
                ),
                condition("Degraded", false, "NoError", ""),
                condition("Stopped", false, "DesiredStateRunning", "")
            ]),
            None => json!([
                condition(
                    "Available",
                    true,
                    "ResourcesReady",
                    "the workspace is available"
                ),
                condition("Progressing", false, "ResourcesReady", ""),
                condition("Degraded", false, "NoError", ""),
                condition("Stopped", false, "DesiredStateRunning", "")
            ]),
        };
        let namespace = o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        // The names jupyter-k8s gives a workspace's Deployment and Service.
        o["status"] = json!({"conditions": status, "deploymentName": format!("workspace-{name}"),
                             "serviceName": format!("workspace-{name}-service"),
                             "applicationBasePath": format!("/workspaces/{namespace}/{name}")});
        if let Some(m) = o.as_object_mut() {
            m.remove(SINCE);
            m.remove(ACTIVE);
        }
    }
}

impl Sandbox {
    /// The Deployment or ReplicaSet the Workspace controller made for a workspace of the
    /// cluster, when `obj` names one (`workspace-…` in the workspace's namespace).
    pub(super) async fn workspace_owned(
        &self,
        target: &cloud::KubeTarget,
        obj: &cloud::ObjectRef,
    ) -> cloud::CloudResult<Option<Value>> {
        let kind = obj.kind.as_str();
        if obj.api_version != "apps/v1"
            || !matches!(kind, "Deployment" | "ReplicaSet")
            || !obj.name.starts_with("workspace-")
        {
            return Ok(None);
        }
        let ns = obj.namespace.as_deref().unwrap_or("default");
        for r in self
            .stored_objects(&format!("{}/", target.cluster))
            .await?
            .into_iter()
            .filter(|r| r.deleted_ms.is_none() && is_workspace(&r.data))
        {
            let w = self.k8s_status(r, None);
            if w["metadata"]["namespace"].as_str().unwrap_or("default") != ns {
                continue;
            }
            let (deployment, replica_set) = owner_chain(&w);
            let made = if kind == "Deployment" {
                deployment
            } else {
                replica_set
            };
            if made["metadata"]["name"] == obj.name.as_str() {
                return Ok(Some(made));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_patch_changes_what_it_names_and_notes_a_new_desired_status() {
        let mut data = json!({"spec": {"desiredStatus": "Running", "image": "a", "storage": {"size": "5Gi"}},
                              "__since": 1});
        merge_spec(&mut data, &json!({"image": "b"}));
        assert_eq!(data["__since"], 1, "the desired status did not change");
        assert_eq!(data["spec"]["storage"]["size"], "5Gi");
        merge_spec(&mut data, &json!({"desiredStatus": "Stopped"}));
        assert_eq!(
            data["spec"],
            json!({"desiredStatus": "Stopped", "image": "b", "storage": {"size": "5Gi"}})
        );
        assert_ne!(data["__since"], 1);
    }
}
