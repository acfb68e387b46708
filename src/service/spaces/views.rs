//! What a cluster's spaces are: each `Workspace` made here read back as the request that made it
//! (so a change is diffed against it) and as its state, from the controller's conditions.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::manifest::{Accelerators, App, SpaceSpec, HOME};
use super::state::space_state;
use super::{actual, ours};
use crate::cloud::KubeTarget;
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::shared::labels::{Placement, WORKLOAD_NAMESPACE};
use crate::service::teams::{with_admission, PodsAdmission};

/// A path the space sees and the claim behind it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpaceMount {
    pub path: String,
    pub claim: String,
}

/// One space.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpaceView {
    pub name: String,
    /// `default`, or the team's namespace `hyperpod-ns-<team>`.
    pub namespace: String,
    pub team: Option<String>,
    pub priority: Option<String>,
    /// A team's space: how Kueue admits its pod (the controller's Deployment `workspace-<name>`
    /// carries the space's queue labels to it), once Kueue has said.
    pub admission: Option<PodsAdmission>,
    /// `jupyterlab` or `code-editor`.
    pub app: String,
    pub instance_type: Option<String>,
    pub gpus: u32,
    pub mig_profile: Option<String>,
    pub storage_gib: Option<u32>,
    /// Minutes idle before it stops itself; none: never.
    pub idle_shutdown_minutes: Option<u32>,
    pub image: Option<String>,
    /// `starting`, `running`, `stopping`, `stopped` or `failed`.
    pub state: String,
    /// The controller's account of it, when it has one worth reading (why it waits or failed).
    pub message: Option<String>,
    /// Its home directory, on its own volume.
    pub home: String,
    /// The cluster's storage it mounts: `/s3` is what training jobs and endpoints read.
    pub mounts: Vec<SpaceMount>,
    #[schema(value_type = Vec<Object>)]
    pub conditions: Vec<Value>,
}

/// The space a `Workspace` made here describes; `None` for one this control plane did not
/// write (it cannot be changed field by field).
pub fn spec_of(o: &Value) -> Option<SpaceSpec> {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str);
    let spec = o.get("spec")?;
    let requests = spec.pointer("/resources/requests");
    let accelerators = match requests
        .and_then(Value::as_object)
        .and_then(|r| r.keys().find_map(|k| k.strip_prefix("nvidia.com/mig-")))
    {
        Some(p) => Accelerators::Mig(p.to_string()),
        None => Accelerators::Gpus(
            requests
                .and_then(|r| r.get("nvidia.com/gpu"))
                .and_then(|g| g.as_str().and_then(|g| g.parse().ok()).or(g.as_u64()))
                .and_then(|g| u32::try_from(g).ok())
                .unwrap_or(0),
        ),
    };
    Some(SpaceSpec {
        name: s("/metadata/name")?.to_string(),
        app: App::parse(s("/spec/appType")?)?,
        instance_type: s("/spec/nodeSelector/node.kubernetes.io~1instance-type")?.to_string(),
        accelerators,
        storage_gib: s("/spec/storage/size")?.strip_suffix("Gi")?.parse().ok()?,
        idle_minutes: spec
            .pointer("/idleShutdown")
            .filter(|i| i["enabled"] == true)
            .and_then(|i| i["idleTimeoutInMinutes"].as_u64())
            .and_then(|m| u32::try_from(m).ok()),
        image: s("/spec/image").map(str::to_string),
        placement: Placement::of(o),
        claims: spec
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((
                    v["persistentVolumeClaimName"].as_str()?.to_string(),
                    v["mountPath"].as_str()?.to_string(),
                ))
            })
            .collect(),
        running: s("/spec/desiredStatus") != Some("Stopped"),
    })
}

pub fn space_view(o: &Value) -> SpaceView {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    let placement = Placement::of(o);
    let spec = spec_of(o);
    let name = s("/metadata/name").unwrap_or_default();
    let (state, message) = space_state(o);
    SpaceView {
        namespace: s("/metadata/namespace").unwrap_or_else(|| WORKLOAD_NAMESPACE.to_string()),
        team: placement.team,
        priority: placement.priority,
        admission: None,
        app: s("/spec/appType").unwrap_or_default(),
        instance_type: s("/spec/nodeSelector/node.kubernetes.io~1instance-type"),
        gpus: match spec.as_ref().map(|s| &s.accelerators) {
            Some(Accelerators::Gpus(n)) => *n,
            _ => 0,
        },
        mig_profile: match spec.as_ref().map(|s| &s.accelerators) {
            Some(Accelerators::Mig(p)) => Some(p.clone()),
            _ => None,
        },
        storage_gib: spec.as_ref().map(|s| s.storage_gib),
        idle_shutdown_minutes: spec.as_ref().and_then(|s| s.idle_minutes),
        image: s("/spec/image"),
        state: state.to_string(),
        message,
        home: s("/spec/storage/mountPath").unwrap_or_else(|| HOME.to_string()),
        mounts: spec
            .as_ref()
            .map(|s| {
                s.claims
                    .iter()
                    .map(|(claim, path)| SpaceMount {
                        path: path.clone(),
                        claim: claim.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        conditions: o
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        name,
    }
}

/// A team's space's admission, from the Workload of its pod (its Deployment's, under the name
/// jupyter-k8s gives it).
async fn admitted(engine: &Engine, target: &KubeTarget, views: &mut [SpaceView]) -> ApiResult<()> {
    with_admission(
        engine,
        target,
        views,
        |v| v.team.is_some(),
        |v, kueue| {
            v.admission = kueue.of_deployment(&v.namespace, &format!("workspace-{}", v.name));
        },
    )
    .await
}

pub async fn list_spaces(engine: &Engine, cluster: &str) -> ApiResult<Vec<SpaceView>> {
    let target = kube_target(engine, cluster).await?;
    let all: Vec<SpaceView> = ours(engine, &target)
        .await?
        .iter()
        .map(space_view)
        .collect();
    // A person sees the spaces of the namespaces their access entry lets them read.
    let mut out = Vec::with_capacity(all.len());
    for space in all {
        if crate::service::people::access::may_read(engine, cluster, &space.namespace).await? {
            out.push(space);
        }
    }
    admitted(engine, &target, &mut out).await?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub async fn get_space(engine: &Engine, cluster: &str, name: &str) -> ApiResult<SpaceView> {
    let mut view = [space_view(&actual(engine, cluster, name).await?)];
    let target = kube_target(engine, cluster).await?;
    admitted(engine, &target, &mut view).await?;
    let [view] = view;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::super::manifest::{workspace, S3_MOUNT};
    use super::*;

    #[test]
    fn a_workspace_reads_back_as_the_space_that_made_it() {
        let spec = SpaceSpec {
            name: "lab".into(),
            app: App::CodeEditor,
            instance_type: "ml.p4d.24xlarge".into(),
            accelerators: Accelerators::Mig("1g.10gb".into()),
            storage_gib: 50,
            idle_minutes: Some(30),
            image: Some("public.ecr.aws/sagemaker/sagemaker-distribution:3.2.0-gpu".into()),
            placement: Placement {
                team: Some("team-a".into()),
                priority: Some("inference".into()),
            },
            claims: vec![("s3-claim".into(), S3_MOUNT.into())],
            running: false,
        };
        assert_eq!(spec_of(&workspace(&spec)), Some(spec));
    }
}
