//! Development spaces: JupyterLab or Code Editor on the cluster's own instances, through the
//! `amazon-sagemaker-spaces` add-on (jupyter-k8s's `Workspace`), with the cluster's S3 claim at
//! `/s3` — the path every training pod and model server reads — and a home directory of their
//! own. A request is validated field by field into a [`SpaceSpec`]; nothing is applied here.

pub mod start;

mod connect;
mod manifest;
mod owner;
pub mod state;
mod views;

pub use connect::*;
pub use manifest::*;
pub use views::*;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::workspace_templates::{TemplateBounds, TEMPLATE_API_VERSION, TEMPLATE_KIND};
use crate::cloud::{KubeTarget, ListQuery, ObjectRef};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::validate;
use crate::service::people::access;
use crate::service::shared::labels::is_workload_namespace;
use crate::service::steps::features::SPACES_ADDON;
use crate::service::steps::workloads::ApplyParams;
use crate::service::{cluster::records::kube_target, features::addon_active};

/// Home storage when none is asked for (GiB); its bounds are the template's.
pub const DEFAULT_STORAGE_GIB: i64 = 20;
/// Minutes idle before a space stops itself when none is asked for; at most a day.
pub const DEFAULT_IDLE_MINUTES: i64 = 60;
const MAX_IDLE_MINUTES: i64 = 1440;

/// Body of `POST /api/clusters/{name}/spaces`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpaceRequest {
    /// 1–40 lowercase letters, digits, hyphens: names the space on the cluster.
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")]
    pub space_name: String,
    /// `jupyterlab` (default) or `code-editor`.
    #[schema(pattern = r"^(jupyterlab|code-editor)$")]
    pub app: Option<String>,
    /// One of the cluster's instance types: the space runs on a node of it.
    pub instance_type: String,
    /// Whole GPUs, 0–8 (default 0).
    #[schema(minimum = 0, maximum = 8)]
    pub gpus: Option<i64>,
    /// One MIG slice of a GPU instead of whole GPUs, e.g. `1g.10gb` (A100 and H100 instances).
    #[schema(pattern = r"^[1-7]g\.[0-9]{1,3}gb$")]
    pub mig_profile: Option<String>,
    /// Home directory size in GiB, within the add-on's template's bounds (AWS's: 1–100),
    /// default 20. Fixed for the space's life.
    #[schema(minimum = 1, maximum = 100)]
    pub storage_gib: Option<i64>,
    /// Minutes without activity before the space stops itself, 1–1440 (default 60); 0: never.
    #[schema(minimum = 0, maximum = 1440)]
    pub idle_shutdown_minutes: Option<i64>,
    /// Container image: one the add-on's template allows (AWS's: the SageMaker Distribution
    /// CPU and GPU images). Default: the template's GPU image for a space with GPUs, its
    /// default (CPU) image otherwise.
    pub image: Option<String>,
    /// The team it runs as (task governance): namespace `hyperpod-ns-<team>`, its queue.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}

/// Body of `PATCH /api/clusters/{name}/spaces/{space}`: only the fields to change.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpacePatch {
    #[schema(minimum = 0, maximum = 8)]
    pub gpus: Option<i64>,
    #[schema(pattern = r"^[1-7]g\.[0-9]{1,3}gb$")]
    pub mig_profile: Option<String>,
    /// 0–1440; 0: never.
    #[schema(minimum = 0, maximum = 1440)]
    pub idle_shutdown_minutes: Option<i64>,
    pub image: Option<String>,
    /// Refused unless equal to the space's: its home volume cannot change size.
    #[schema(minimum = 1, maximum = 100)]
    pub storage_gib: Option<i64>,
}

fn cloud_err(e: crate::cloud::CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

pub fn ref_of(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// The spaces made here, in namespace default and the teams' namespaces.
pub(crate) async fn ours(engine: &Engine, target: &KubeTarget) -> ApiResult<Vec<Value>> {
    let selector = format!(
        "{}={},{}=space",
        crate::cloud::MANAGED_BY.0,
        crate::cloud::MANAGED_BY.1,
        crate::service::shared::labels::WORKLOAD_LABEL
    );
    match engine
        .cloud()
        .kube
        .list(target, &ListQuery::of(API_VERSION, KIND).labels(&selector))
        .await
    {
        Ok(items) => Ok(items
            .into_iter()
            .filter(|o| {
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_some_and(is_workload_namespace)
            })
            .collect()),
        // The add-on is not installed: no spaces.
        Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => Ok(Vec::new()),
        Err(e) => Err(cloud_err(e)),
    }
}

/// The space of this name made here, if the cluster has one.
pub(crate) async fn find(
    engine: &Engine,
    target: &KubeTarget,
    name: &str,
) -> ApiResult<Option<Value>> {
    Ok(ours(engine, target)
        .await?
        .into_iter()
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)))
}

fn int_in(field: &str, v: i64, lo: i64, hi: i64, what: &str) -> ApiResult<u32> {
    if !(lo..=hi).contains(&v) {
        return Err(ApiError::validation_hint(
            field,
            format!("{what} must be {lo}–{hi}, not {v}"),
            json!(format!("{lo} to {hi}")),
        ));
    }
    u32::try_from(v).map_err(|_| ApiError::validation(field, format!("{what} is out of range")))
}

/// GPUs or a MIG slice, checked against what one node of the type has.
fn accelerators(
    gpus: Option<i64>,
    mig: Option<&str>,
    instance_type: &str,
) -> ApiResult<Accelerators> {
    let most = i64::from(crate::cloud::gpus_per_instance(instance_type));
    match (gpus, mig) {
        (Some(g), Some(_)) if g > 0 => Err(ApiError::validation_hint(
            "migProfile",
            "ask for whole GPUs or one MIG slice, not both",
            json!({"gpus": 0}),
        )),
        (_, Some(p)) => {
            let valid = p
                .split_once('g')
                .and_then(|(c, rest)| Some((c, rest.strip_prefix('.')?.strip_suffix("gb")?)))
                .is_some_and(|(c, m)| {
                    matches!(c, "1" | "2" | "3" | "4" | "7")
                        && !m.is_empty()
                        && m.len() <= 3
                        && m.bytes().all(|b| b.is_ascii_digit())
                });
            if !valid {
                return Err(ApiError::validation_hint(
                    "migProfile",
                    format!("`{}` is not a MIG profile", validate::truncate(p)),
                    json!(["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]),
                ));
            }
            if most == 0 {
                return Err(ApiError::validation(
                    "migProfile",
                    format!("{instance_type} has no NVIDIA GPUs to slice"),
                ));
            }
            Ok(Accelerators::Mig(p.to_string()))
        }
        (g, None) => {
            let g = g.unwrap_or(0);
            if g > most {
                return Err(ApiError::validation_hint(
                    "gpus",
                    format!("a space runs on one node: {instance_type} has {most} GPUs, not {g}"),
                    json!(format!("0 to {most}")),
                ));
            }
            Ok(Accelerators::Gpus(int_in("gpus", g, 0, 8, "gpus")?))
        }
    }
}

fn idle(minutes: Option<i64>) -> ApiResult<Option<u32>> {
    match minutes.unwrap_or(DEFAULT_IDLE_MINUTES) {
        0 => Ok(None),
        m => Ok(Some(int_in(
            "idleShutdownMinutes",
            m,
            1,
            MAX_IDLE_MINUTES,
            "idle shutdown minutes",
        )?)),
    }
}

/// The storage claims a space in `namespace` mounts: the S3 claim at `/s3`, an FSx one at
/// `/fsx`.
async fn claims_for(
    engine: &Engine,
    cluster: &str,
    namespace: &str,
) -> ApiResult<Vec<(String, String)>> {
    let claims = crate::service::storage::list_storage(engine, cluster).await?;
    let mut out = Vec::new();
    if let Some(c) = claims.iter().find(|c| {
        c.namespace == namespace && c.claim_name == crate::service::steps::storage::SHARED_CLAIM
    }) {
        out.push((c.claim_name.clone(), S3_MOUNT.to_string()));
    }
    if let Some(c) = claims
        .iter()
        .find(|c| c.namespace == namespace && c.kind == "fsx")
    {
        out.push((c.claim_name.clone(), FSX_MOUNT.to_string()));
    }
    Ok(out)
}

/// The add-on's template for `app`, as the cluster serves it; AWS's, as its chart installs it,
/// when the cluster does not say.
async fn template(engine: &Engine, target: &KubeTarget, app: App) -> ApiResult<TemplateBounds> {
    let r = ObjectRef {
        api_version: TEMPLATE_API_VERSION.into(),
        kind: TEMPLATE_KIND.into(),
        namespace: Some(manifest::TEMPLATE_NAMESPACE.into()),
        name: app.template().into(),
    };
    let served = match engine.cloud().kube.get(target, &r).await {
        Ok(o) => o.as_ref().and_then(TemplateBounds::from_object),
        Err(e) if matches!(e.code.as_str(), "KindNotServed" | "NotFound") => None,
        Err(e) => return Err(cloud_err(e)),
    };
    served
        .or_else(|| TemplateBounds::aws(app.template()))
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no template for {}", app.as_str())))
}

/// The image a space runs, checked against its template: the one asked for if the template
/// allows it, else the template's GPU image for GPUs, else its default (`None`).
fn image_for(
    t: &TemplateBounds,
    asked: Option<&str>,
    accelerators: &Accelerators,
) -> ApiResult<Option<String>> {
    match asked {
        Some(i) => {
            crate::service::workloads::image("image", i)?;
            if !t.image_allowed(i) {
                return Err(ApiError::validation_hint(
                    "image",
                    format!(
                        "the add-on's template `{}` allows only its own images, not `{}` (its webhook refuses any other)",
                        t.name,
                        validate::truncate(i)
                    ),
                    json!(t.effective_images()),
                ));
            }
            Ok(Some(i.to_string()))
        }
        None if *accelerators != Accelerators::Gpus(0) => Ok(t.gpu_image().map(str::to_string)),
        None => Ok(None),
    }
}

/// A MIG slice is asked only of an instance type one of whose nodes advertises it.
async fn mig_advertised(
    engine: &Engine,
    target: &KubeTarget,
    instance_type: &str,
    accelerators: &Accelerators,
) -> ApiResult<()> {
    let Accelerators::Mig(profile) = accelerators else {
        return Ok(());
    };
    let resource = mig_resource(profile);
    let nodes = engine
        .cloud()
        .kube
        .list(
            target,
            &ListQuery::of("v1", "Node")
                .labels(&format!("node.kubernetes.io/instance-type={instance_type}")),
        )
        .await
        .map_err(cloud_err)?;
    let advertised = nodes.iter().any(|n| {
        n.pointer("/status/allocatable")
            .and_then(|a| a.get(&resource))
            .and_then(Value::as_str)
            .is_some_and(|v| v != "0")
    });
    if advertised {
        return Ok(());
    }
    Err(ApiError::validation_hint(
        "migProfile",
        format!("no {instance_type} node advertises {resource}: MIG slices exist only where the instance group's nodes are partitioned (the nvidia.com/mig.config label)"),
        json!({"gpus": 1}),
    ))
}

/// Refuses a space before the add-on serves them.
async fn spaces_active(engine: &Engine, cluster: &str) -> ApiResult<()> {
    if addon_active(engine, cluster, SPACES_ADDON).await? {
        return Ok(());
    }
    Err(ApiError::Conflict {
        slug: ProblemType::SpacesMissing,
        detail: format!("spaces run on the {SPACES_ADDON} add-on, which is not active on `{cluster}`: enable it with PATCH /api/clusters/{cluster}/features {{\"ebsCsi\": true, \"spaces\": true}} (features_update), then create the space again"),
        field: None,
        operation_id: None,
    })
}

/// Validates a request into the space it asks for.
pub async fn space_spec(
    engine: &Engine,
    cluster: &str,
    req: &SpaceRequest,
) -> ApiResult<SpaceSpec> {
    validate::dns_label("spaceName", "space name", &req.space_name)?;
    if req.space_name.len() > 40 {
        return Err(ApiError::validation(
            "spaceName",
            "a space name has at most 40 characters",
        ));
    }
    let app = match req.app.as_deref() {
        None => App::JupyterLab,
        Some(a) => App::parse(a).ok_or_else(|| {
            ApiError::validation_hint(
                "app",
                format!(
                    "`{}` is not an application a space runs",
                    validate::truncate(a)
                ),
                json!(App::ALL.map(App::as_str)),
            )
        })?,
    };
    let groups = crate::service::list_groups(engine, cluster).await?;
    if !groups.iter().any(|g| g.instance_type == req.instance_type) {
        return Err(ApiError::validation_hint(
            "instanceType",
            format!(
                "`{cluster}` has no instance group of {}",
                validate::truncate(&req.instance_type)
            ),
            json!(groups.iter().map(|g| &g.instance_type).collect::<Vec<_>>()),
        ));
    }
    let accelerators = accelerators(req.gpus, req.mig_profile.as_deref(), &req.instance_type)?;
    let idle_minutes = idle(req.idle_shutdown_minutes)?;
    if let Some(i) = &req.image {
        crate::service::workloads::image("image", i)?;
    }
    spaces_active(engine, cluster).await?;
    let target = kube_target(engine, cluster).await?;
    let bounds = template(engine, &target, app).await?;
    let (lo, hi) = bounds.storage_gib();
    let storage_gib = int_in(
        "storageGib",
        req.storage_gib.unwrap_or(DEFAULT_STORAGE_GIB),
        i64::try_from(lo).unwrap_or(1),
        i64::try_from(hi).unwrap_or(i64::MAX),
        &format!("home storage (GiB) under the template `{}`", bounds.name),
    )?;
    let image = image_for(&bounds, req.image.as_deref(), &accelerators)?;
    mig_advertised(engine, &target, &req.instance_type, &accelerators).await?;
    let placement = crate::service::teams::placement(
        engine,
        cluster,
        req.team.as_deref(),
        req.priority.as_deref(),
    )
    .await?;
    if find(engine, &target, &req.space_name).await?.is_some() {
        return Err(ApiError::Conflict {
            slug: ProblemType::SpaceExists,
            detail: format!(
                "a space `{}` already exists on `{cluster}`: change it with PATCH, or pick another name",
                req.space_name
            ),
            field: Some("spaceName".into()),
            operation_id: None,
        });
    }
    access::require_write(engine, cluster, &placement.namespace(), "make spaces there").await?;
    let claims = claims_for(engine, cluster, &placement.namespace()).await?;
    Ok(SpaceSpec {
        name: req.space_name.clone(),
        app,
        instance_type: req.instance_type.clone(),
        accelerators,
        storage_gib,
        idle_minutes,
        image,
        placement,
        claims,
        running: true,
    })
}

/// The operation parameters that apply a space's `Workspace` and follow it to running (or to
/// stopped, for a stopped one changed).
pub fn apply_params(spec: &SpaceSpec) -> ApplyParams {
    ApplyParams {
        workload: format!("space/{}", spec.name),
        watch: ref_of(&spec.placement.namespace(), &spec.name),
        manifests: vec![workspace(spec)],
        prune: vec![],
        also_watch: vec![],
    }
}

/// Validates a request and makes its operation's parameters.
pub async fn space_params(engine: &Engine, cluster: &str, req: &SpaceRequest) -> ApiResult<Value> {
    let spec = space_spec(engine, cluster, req).await?;
    Ok(serde_json::to_value(apply_params(&spec)).map_err(anyhow::Error::from)?)
}

fn namespace_of(workspace: &Value) -> String {
    workspace
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(crate::service::shared::labels::WORKLOAD_NAMESPACE)
        .to_string()
}

/// The space, refused unless the person may change what is in its namespace (open, connect,
/// change, start, stop, delete, end its sessions).
pub(crate) async fn writable(
    engine: &Engine,
    cluster: &str,
    name: &str,
    doing: &str,
) -> ApiResult<Value> {
    let space = actual(engine, cluster, name).await?;
    access::require_write(engine, cluster, &namespace_of(&space), doing).await?;
    Ok(space)
}

/// The parameters of a change to a space; `None` when it already is as asked.
pub async fn patch_params(
    engine: &Engine,
    cluster: &str,
    name: &str,
    patch: &SpacePatch,
) -> ApiResult<Option<Value>> {
    let actual = writable(engine, cluster, name, "change its spaces").await?;
    let mut spec = spec_of(&actual).ok_or_else(|| ApiError::Conflict {
        slug: ProblemType::SpaceUnreadable,
        detail: format!("the space `{name}` was changed outside this control plane and is not one it can change"),
        field: None,
        operation_id: None,
    })?;
    if let Some(g) = patch.storage_gib {
        if u32::try_from(g).ok() != Some(spec.storage_gib) {
            return Err(ApiError::Conflict {
                slug: ProblemType::SpaceStorageFixed,
                detail: format!("a space's home volume keeps its size ({} GiB): make a new space for another size", spec.storage_gib),
                field: Some("storageGib".into()),
                operation_id: None,
            });
        }
    }
    let mut next = spec.clone();
    let target = kube_target(engine, cluster).await?;
    if patch.gpus.is_some() || patch.mig_profile.is_some() {
        next.accelerators = accelerators(
            patch.gpus,
            patch.mig_profile.as_deref(),
            &spec.instance_type,
        )?;
        mig_advertised(engine, &target, &spec.instance_type, &next.accelerators).await?;
    }
    if patch.idle_shutdown_minutes.is_some() {
        next.idle_minutes = idle(patch.idle_shutdown_minutes)?;
    }
    if let Some(i) = &patch.image {
        let bounds = template(engine, &target, spec.app).await?;
        next.image = image_for(&bounds, Some(i), &next.accelerators)?;
    }
    if next == spec {
        return Ok(None);
    }
    spec = next;
    Ok(Some(
        serde_json::to_value(apply_params(&spec)).map_err(anyhow::Error::from)?,
    ))
}

/// The parameters of a start or stop; `None` when the space already is so.
pub async fn status_params(
    engine: &Engine,
    cluster: &str,
    name: &str,
    running: bool,
) -> ApiResult<Option<Value>> {
    let actual = writable(engine, cluster, name, "start or stop its spaces").await?;
    let desired = actual
        .pointer("/spec/desiredStatus")
        .and_then(Value::as_str);
    if desired == Some(if running { "Running" } else { "Stopped" }) {
        return Ok(None);
    }
    let ns = actual
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(crate::service::shared::labels::WORKLOAD_NAMESPACE);
    Ok(Some(
        json!({"workload": format!("space/{name}"), "watch": ref_of(ns, name),
                   "running": running}),
    ))
}

/// The space of this name, or a 404 saying where to look.
/// A space in a namespace the person may not read is not there for them.
pub(crate) async fn actual(engine: &Engine, cluster: &str, name: &str) -> ApiResult<Value> {
    validate::dns_label("space", "space name", name)?;
    let target = kube_target(engine, cluster).await?;
    let mut found = find(engine, &target, name).await?;
    if let Some(ns) = found.as_ref().map(namespace_of) {
        if !access::may_read(engine, cluster, &ns).await? {
            found = None;
        }
    }
    found.ok_or_else(|| ApiError::NotFound {
        what: format!("space `{name}` on `{cluster}`"),
        hint: Some(Box::new(json!(format!(
            "list them with GET /api/clusters/{cluster}/spaces"
        )))),
    })
}
