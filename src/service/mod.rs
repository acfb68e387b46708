//! The domain: cluster stages and pipelines. Turns validated requests into durable operations
//! (with idempotency and conflict rules) and answers cluster queries. Handlers call this; it
//! calls the engine and, for validation reads, the cloud ports.

pub mod incluster;
pub mod start;
pub mod steps;
pub mod subnets;
pub mod validate;
pub mod workloads;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::store::{ClusterRecord, NewOperation, Operation, Store};
use steps::{Catalog, ClusterParams, HyperPodParams, PipelineParams};

/// Settings key of the active cluster.
pub const ACTIVE_CLUSTER: &str = "active-cluster";

/// Stage kinds that run on an existing cluster, in pipeline order.
pub const STAGES: &[&str] = &["cluster", "dependencies", "hyperpod", "storage"];

// ---------------------------------------------------------------------------------------------
// Requests (the REST bodies; also the MCP tool input schemas)
// ---------------------------------------------------------------------------------------------

/// `POST /api/clusters`: network + EKS control plane.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateClusterRequest {
    /// 1–24 lowercase letters, digits, hyphens; starts with a letter.
    pub name: String,
    /// Defaults to the control plane's region (the only one accepted).
    pub region: Option<String>,
    /// Two Availability Zones for the public and private subnets; default: the first two.
    pub zones: Option<Vec<String>>,
    /// VPC block override (RFC 1918, /16–/19); default: a free /16 in 10.0.0.0/8.
    pub vpc_cidr: Option<String>,
    /// `1.31`, `1.32` (default) or `1.33`.
    pub kubernetes_version: Option<String>,
    /// A second VPC block (/16–/19) for the compute subnets of large fleets, as AWS's templates
    /// add one: in the VPC block's RFC 1918 range or in 100.64.0.0/10, overlapping nothing.
    pub secondary_cidr: Option<String>,
}

/// `POST /api/clusters/{name}/hyperpod`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateHyperPodRequest {
    /// e.g. `ml.g5.8xlarge`; must be offered in `zone`.
    pub instance_type: String,
    /// 1–1000 within the account's quota; a new group added under managed autoscaling may start
    /// at 0 (Karpenter provisions it once it is in the governed set).
    pub instance_count: i64,
    /// Availability Zone of the instance group (its compute subnet goes there). May be omitted
    /// with `training-plan`: the plan's reservation decides it.
    pub zone: Option<String>,
    /// `on-demand`, `spot` or `training-plan`.
    pub capacity_type: String,
    /// Required with `training-plan`.
    pub training_plan_arn: Option<String>,
    /// Run `InstanceStress` and `InstanceConnectivity` deep health checks at start (default false).
    pub deep_health_checks: Option<bool>,
    /// EBS volume per instance in GB (default 500).
    pub volume_size_gb: Option<i64>,
    /// Default `workers`.
    pub instance_group_name: Option<String>,
    /// `standard` (default: EFA with ENA where the instance type supports EFA) or `efa-only`
    /// (EFA-capable types only). Fixed for the group's life.
    pub network_interface: Option<String>,
    /// Prefix length (16–24, default 20) of the zone's compute subnet when this request creates
    /// it. A /20 holds roughly 30–40 p5-class nodes once the VPC CNI's warm IP pools are
    /// counted; larger fleets need a wider subnet, usually in a `secondaryCidr`.
    pub compute_subnet_size: Option<i64>,
}

/// `POST /api/pipelines`: the whole cluster in one request.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineRequest {
    pub name: String,
    pub region: Option<String>,
    /// Availability Zone of the first instance group; may be omitted with `training-plan`.
    pub zone: Option<String>,
    pub instance_type: String,
    pub instance_count: i64,
    pub capacity_type: String,
    pub training_plan_arn: Option<String>,
    /// Install the dependencies stage (default true).
    pub dependencies: Option<bool>,
    /// Mount the shared bucket as `s3-claim` (default true).
    pub storage: Option<bool>,
    pub deep_health_checks: Option<bool>,
    pub volume_size_gb: Option<i64>,
    pub instance_group_name: Option<String>,
    pub vpc_cidr: Option<String>,
    pub kubernetes_version: Option<String>,
    /// `standard` (default) or `efa-only`.
    pub network_interface: Option<String>,
    /// A second VPC block for large fleets (see `POST /api/clusters`).
    pub secondary_cidr: Option<String>,
    /// Prefix length of the compute subnet, 16–24 (default 20).
    pub compute_subnet_size: Option<i64>,
}

/// Body of `POST /api/clusters/{name}/dependencies`; may be omitted.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DependenciesRequest {
    /// Also reconcile components that were already installed when the cluster was imported
    /// (default false: they are reported, never changed).
    pub manage_existing: Option<bool>,
}

/// Body of `POST /api/clusters/import`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportRequest {
    /// The existing EKS cluster; it becomes the InstantStart cluster name.
    pub eks_cluster_name: String,
    /// Its HyperPod cluster, if it has one.
    pub hyperpod_cluster_name: Option<String>,
}

/// Validates an import and returns (region, parameters).
pub fn import_params(engine: &Engine, req: &ImportRequest) -> ApiResult<(String, Value)> {
    validate::cluster_name("eksClusterName", &req.eks_cluster_name)?;
    if let Some(hp) = &req.hyperpod_cluster_name {
        let ok = !hp.is_empty()
            && hp.len() <= 63
            && hp.starts_with(|c: char| c.is_ascii_alphanumeric())
            && hp.ends_with(|c: char| c.is_ascii_alphanumeric())
            && hp.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !ok {
            return Err(ApiError::validation_hint(
                "hyperpodClusterName",
                "not a valid HyperPod cluster name",
                json!(
                    "1–63 letters, digits and hyphens, starting and ending with a letter or digit"
                ),
            ));
        }
    }
    let params = json!({"hyperpodClusterName": req.hyperpod_cluster_name, "imported": true});
    Ok((engine.cloud().network.region(), params))
}

/// Body of stage routes that take no parameters (`dependencies`, `storage`); may be omitted.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// `PUT /api/active-cluster`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveClusterRequest {
    pub name: String,
}

// ---------------------------------------------------------------------------------------------
// Validation into stage parameters
// ---------------------------------------------------------------------------------------------

pub async fn cluster_params(
    engine: &Engine,
    req: &CreateClusterRequest,
    first_zone: Option<&str>,
) -> ApiResult<ClusterParams> {
    let cloud = engine.cloud();
    validate::cluster_name("name", &req.name)?;
    let region = validate::region("region", req.region.as_deref(), cloud)?;
    let kubernetes_version =
        validate::kubernetes_version("kubernetesVersion", req.kubernetes_version.as_deref())?;
    let all = cloud.network.describe_availability_zones().await?;
    let zones = match &req.zones {
        Some(names) => {
            if names.len() != 2 || names[0] == names[1] {
                return Err(ApiError::validation_hint(
                    "zones",
                    "exactly two different Availability Zones are needed",
                    json!(all.iter().map(|z| &z.name).collect::<Vec<_>>()),
                ));
            }
            names
                .iter()
                .map(|n| validate::zone("zones", n, &all))
                .collect::<ApiResult<Vec<_>>>()?
        }
        None => {
            let mut zones = Vec::new();
            if let Some(first) = first_zone {
                zones.push(validate::zone("zone", first, &all)?);
            }
            zones.extend(
                all.iter()
                    .filter(|z| Some(z.name.as_str()) != first_zone)
                    .cloned(),
            );
            zones.truncate(2);
            zones
        }
    };
    if zones.len() < 2 {
        return Err(ApiError::validation(
            "zones",
            "the region has fewer than two Availability Zones",
        ));
    }
    let vpc_cidr = match &req.vpc_cidr {
        Some(c) => Some(validate::vpc_cidr("vpcCidr", c, cloud).await?),
        None => None,
    };
    let secondary_cidr = match &req.secondary_cidr {
        Some(c) => Some(validate::secondary_cidr("secondaryCidr", c, vpc_cidr, cloud).await?),
        None => None,
    };
    Ok(ClusterParams {
        region,
        zones,
        vpc_cidr,
        kubernetes_version,
        secondary_cidr,
    })
}

pub async fn hyperpod_params(
    engine: &Engine,
    req: &CreateHyperPodRequest,
) -> ApiResult<HyperPodParams> {
    let cloud = engine.cloud();
    let group = req
        .instance_group_name
        .clone()
        .unwrap_or_else(|| "workers".into());
    validate::instance_group_name("instanceGroupName", &group)?;
    let capacity = validate::capacity(
        "capacityType",
        &req.capacity_type,
        req.training_plan_arn.as_deref(),
    )?;
    let zones = cloud.network.describe_availability_zones().await?;
    let plan_zone = match &capacity {
        crate::cloud::Capacity::TrainingPlan { arn } => {
            training_plan_zone(cloud, arn, &req.instance_type).await?
        }
        _ => None,
    };
    let zone_name = match (req.zone.as_deref(), plan_zone.as_deref()) {
        (Some(z), Some(p)) if z != p => {
            return Err(ApiError::validation_hint(
                "zone",
                format!("the training plan reserves its capacity in {p}, not in {}", validate::truncate(z)),
                json!([p]),
            ))
        }
        (Some(z), _) | (None, Some(z)) => z,
        (None, None) => {
            return Err(ApiError::validation_hint(
                "zone",
                "an Availability Zone is required (it may be omitted only with a training plan, whose reservation decides it)",
                json!(zones.iter().map(|z| &z.name).collect::<Vec<_>>()),
            ))
        }
    };
    let zone = validate::zone("zone", zone_name, &zones)?;
    validate::instance_type_in_zone("instanceType", &req.instance_type, &zone, &zones, cloud)
        .await?;
    let instance_count = validate::instance_count(
        "instanceCount",
        req.instance_count,
        &req.instance_type,
        cloud,
    )
    .await?;
    let volume_size_gb = validate::volume_size("volumeSizeGb", req.volume_size_gb)?;
    let network_interface = validate::network_interface(
        "networkInterface",
        req.network_interface.as_deref(),
        &req.instance_type,
    )?;
    Ok(HyperPodParams {
        instance_group_name: group,
        instance_type: req.instance_type.clone(),
        instance_count,
        zone: zone.name,
        zone_id: zone.id,
        capacity,
        deep_health_checks: req.deep_health_checks.unwrap_or(false),
        volume_size_gb,
        network_interface,
        verify_dependencies: None,
        compute_subnet_size: validate::compute_subnet_size(
            "computeSubnetSize",
            req.compute_subnet_size,
        )?,
    })
}

/// The AZ a training plan reserves for this instance type, from the plan's reservation
/// details (never from its ARN). `None` when the plan does not say.
async fn training_plan_zone(
    cloud: &crate::cloud::Cloud,
    arn: &str,
    instance_type: &str,
) -> ApiResult<Option<String>> {
    let plans = cloud.hyperpod.list_training_plans().await?;
    let Some(plan) = plans.iter().find(|p| p.arn == arn) else {
        return Err(ApiError::validation_hint(
            "trainingPlanArn",
            format!(
                "the account has no training plan `{}`",
                validate::truncate(arn)
            ),
            json!(plans.iter().map(|p| &p.arn).collect::<Vec<_>>()),
        ));
    };
    if plan.reservations.is_empty() {
        return Ok(None);
    }
    let bare = |t: &str| t.trim_start_matches("ml.").to_string();
    match plan
        .reservations
        .iter()
        .find(|r| bare(&r.instance_type) == bare(instance_type))
    {
        Some(r) => Ok(Some(r.availability_zone.clone())),
        None => Err(ApiError::validation_hint(
            "instanceType",
            format!(
                "training plan `{}` reserves no {}",
                plan.name,
                validate::truncate(instance_type)
            ),
            json!(plan
                .reservations
                .iter()
                .map(|r| &r.instance_type)
                .collect::<Vec<_>>()),
        )),
    }
}

pub async fn pipeline_params(engine: &Engine, req: &PipelineRequest) -> ApiResult<PipelineParams> {
    let cluster_req = CreateClusterRequest {
        name: req.name.clone(),
        region: req.region.clone(),
        zones: None,
        vpc_cidr: req.vpc_cidr.clone(),
        kubernetes_version: req.kubernetes_version.clone(),
        secondary_cidr: req.secondary_cidr.clone(),
    };
    let hp_req = CreateHyperPodRequest {
        instance_type: req.instance_type.clone(),
        instance_count: req.instance_count,
        zone: req.zone.clone(),
        capacity_type: req.capacity_type.clone(),
        training_plan_arn: req.training_plan_arn.clone(),
        deep_health_checks: req.deep_health_checks,
        volume_size_gb: req.volume_size_gb,
        instance_group_name: req.instance_group_name.clone(),
        network_interface: req.network_interface.clone(),
        compute_subnet_size: req.compute_subnet_size,
    };
    // Name first, so the most basic mistake is the one reported.
    validate::cluster_name("name", &req.name)?;
    let hyperpod = hyperpod_params(engine, &hp_req).await?;
    let cluster = cluster_params(engine, &cluster_req, Some(&hyperpod.zone)).await?;
    validate::compute_subnet_fits(
        "computeSubnetSize",
        hyperpod.compute_subnet_size,
        cluster.vpc_cidr,
        cluster.secondary_cidr,
    )?;
    Ok(PipelineParams {
        cluster,
        hyperpod,
        dependencies: req.dependencies.unwrap_or(true),
        storage: req.storage.unwrap_or(true),
    })
}

// ---------------------------------------------------------------------------------------------
// Submission
// ---------------------------------------------------------------------------------------------

/// A request to start an operation.
pub struct Submission {
    pub kind: &'static str,
    pub cluster: String,
    pub params: Value,
    pub actor: String,
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to refuse a reused key with another body.
    pub request_hash: Option<String>,
    pub parent_id: Option<String>,
    /// `Some((region, spec))` when the operation creates the cluster record.
    pub new_cluster: Option<(String, Value)>,
}

/// The answer to an accepted submission.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub operation_id: String,
    /// `GET` it (with `?wait=30` to long-poll) until `state` is terminal.
    pub status_url: String,
    /// The cluster the operation acts on.
    pub cluster: String,
    pub kind: String,
    /// False when an earlier submission with the same `Idempotency-Key` is returned.
    pub created: bool,
    /// What the caller should know before relying on the result (e.g. data lost by a replace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    #[serde(skip)]
    pub operation: Operation,
}

pub fn request_hash(kind: &str, cluster: &str, body: &Value) -> String {
    let digest = Sha256::digest(format!("{kind}\n{cluster}\n{body}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts an operation: idempotency key first, then conflict rules, then one transaction that
/// inserts the operation (and the cluster record) — all under the store's write lock, so two
/// concurrent identical submissions can never both insert.
pub async fn submit(engine: &Engine, sub: Submission) -> ApiResult<Accepted> {
    let store = engine.store();
    let phases = Catalog
        .phase_names(sub.kind, &sub.params)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unknown kind {}", sub.kind)))?;
    let guard = store.write_lock.lock().await;
    if let Some(key) = &sub.idempotency_key {
        if let Some((id, hash)) = store.find_by_key(key).await? {
            if sub.request_hash.is_some() && hash != sub.request_hash {
                return Err(ApiError::Conflict {
                    slug: "idempotency-key-reused",
                    detail: "this Idempotency-Key was used with a different request".into(),
                    field: Some("Idempotency-Key".into()),
                    operation_id: Some(id),
                });
            }
            let op = load(store, &id).await?;
            return Ok(accepted(op, false));
        }
    }
    check_conflicts(store, &sub).await?;
    let id = uuid::Uuid::now_v7().to_string();
    let new = NewOperation {
        id: id.clone(),
        kind: sub.kind.to_string(),
        cluster: sub.cluster.clone(),
        params: sub.params.clone(),
        idempotency_key: sub.idempotency_key.clone(),
        request_hash: sub.request_hash.clone(),
        actor: sub.actor.clone(),
        parent_id: sub.parent_id.clone(),
        phases,
    };
    let mut tx = store.pool.begin().await?;
    if let Some((region, spec)) = &sub.new_cluster {
        Store::forget_cluster(&mut tx, &sub.cluster).await?;
        Store::insert_cluster(&mut tx, &sub.cluster, region, spec).await?;
    }
    Store::insert_operation(&mut tx, &new).await?;
    tx.commit().await?;
    drop(guard);
    tracing::info!(operation_id = %id, kind = sub.kind, cluster = %sub.cluster, actor = %sub.actor, "operation submitted");
    engine.changed();
    engine.spawn(id.clone());
    Ok(accepted(load(store, &id).await?, true))
}

async fn load(store: &Store, id: &str) -> ApiResult<Operation> {
    store
        .get_operation(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("operation {id}")))
}

fn accepted(op: Operation, created: bool) -> Accepted {
    Accepted {
        operation_id: op.id.clone(),
        status_url: op.status_url.clone(),
        cluster: op.cluster.clone(),
        kind: op.kind.clone(),
        created,
        warning: None,
        operation: op,
    }
}

/// 409 naming the operation that is in the way.
fn still_running(busy: &Operation, cluster: &str, advice: &str) -> ApiError {
    ApiError::conflict(
        format!(
            "operation {} ({}) is still running on `{cluster}`: {advice}",
            busy.id, busy.kind
        ),
        Some(busy.id.clone()),
    )
}

/// Operations of a cluster that have not finished.
async fn active_operations(store: &Store, cluster: &str) -> ApiResult<Vec<Operation>> {
    let mut ops = store
        .list_operations(Some(cluster), Some(crate::store::OpState::Running), 1000)
        .await?;
    ops.extend(
        store
            .list_operations(Some(cluster), Some(crate::store::OpState::Pending), 1000)
            .await?,
    );
    Ok(ops)
}

async fn check_conflicts(store: &Store, sub: &Submission) -> ApiResult<()> {
    let existing = store.get_cluster(&sub.cluster).await?;
    let latest = store.latest_per_kind(&sub.cluster).await?;
    let running = |kind: &str| {
        latest
            .iter()
            .find(|o| o.kind == kind && !o.state.is_terminal())
    };
    if sub.new_cluster.is_some() {
        if let Some(c) = existing.filter(|c| c.status != "deleted") {
            let op = latest
                .iter()
                .find(|o| o.kind == "pipeline")
                .or_else(|| latest.iter().find(|o| o.kind == "cluster"))
                .or(latest.first());
            return Err(ApiError::Conflict {
                slug: "cluster-exists",
                detail: format!("cluster `{}` already exists", c.name),
                field: Some("name".into()),
                operation_id: op.map(|o| o.id.clone()),
            });
        }
        return Ok(());
    }
    let Some(cluster) = existing.filter(|c| c.status != "deleted") else {
        return Err(ApiError::not_found(format!("cluster `{}`", sub.cluster)));
    };
    if let Some(del) = running("delete-cluster") {
        return Err(ApiError::conflict(
            format!("cluster `{}` is being deleted", cluster.name),
            Some(del.id.clone()),
        ));
    }
    if sub.kind == "delete-cluster" {
        if let Some(busy) = latest
            .iter()
            .find(|o| !o.state.is_terminal() && o.parent_id.is_none())
        {
            return Err(still_running(busy, &cluster.name, "cancel it first"));
        }
        return Ok(());
    }
    let has = |key: &str| cluster.resources.get(key).is_some_and(|v| !v.is_null());
    // HyperPod takes one update at a time: group changes and the software update queue up.
    let updates_hyperpod =
        |k: &str| k.starts_with("instance-group-") || k == "hyperpod-software-update";
    if updates_hyperpod(sub.kind) {
        if let Some(busy) = latest
            .iter()
            .find(|o| !o.state.is_terminal() && (updates_hyperpod(&o.kind) || o.kind == "hyperpod"))
        {
            return Err(still_running(
                busy,
                &cluster.name,
                "HyperPod takes one update at a time",
            ));
        }
        return Ok(());
    }
    if sub.kind == "node-action" {
        if !has("hyperPodClusterName") {
            return Err(ApiError::Conflict {
                slug: "stage-not-ready",
                detail: format!("`{}` has no HyperPod cluster yet", cluster.name),
                field: None,
                operation_id: latest
                    .iter()
                    .find(|o| o.kind == "hyperpod")
                    .map(|o| o.id.clone()),
            });
        }
        let node = sub.params["nodeId"].as_str().unwrap_or_default();
        let busy = active_operations(store, &cluster.name)
            .await?
            .into_iter()
            .find(|o| o.kind == "node-action" && o.params["nodeId"] == node);
        if let Some(busy) = busy {
            return Err(ApiError::conflict(
                format!("node {node} already has an operation running"),
                Some(busy.id),
            ));
        }
        return Ok(());
    }
    // Workloads conflict only with an operation on the same object; other kinds run one at a
    // time per cluster.
    if let Some(w) = sub.params.get("workload").and_then(Value::as_str) {
        let busy = active_operations(store, &cluster.name)
            .await?
            .into_iter()
            .find(|o| o.params["workload"] == w);
        if let Some(busy) = busy {
            return Err(ApiError::conflict(
                format!("{w} already has an operation running"),
                Some(busy.id),
            ));
        }
    } else if let Some(busy) = running(sub.kind) {
        return Err(ApiError::conflict(
            format!(
                "a {} operation is already running on `{}`",
                sub.kind, cluster.name
            ),
            Some(busy.id.clone()),
        ));
    }
    if sub.kind != "cluster" && !(has("eksEndpoint") && has("eksCertificateAuthority")) {
        let op = latest
            .iter()
            .find(|o| o.kind == "cluster")
            .map(|o| o.id.clone());
        return Err(ApiError::Conflict {
            slug: "stage-not-ready",
            detail: format!(
                "the EKS cluster of `{}` is not ready yet: the cluster stage must succeed first",
                cluster.name
            ),
            field: None,
            operation_id: op,
        });
    }
    if sub.kind == "hyperpod" && has("hyperPodClusterArn") {
        return Err(ApiError::Conflict {
            slug: "hyperpod-exists",
            detail: format!("`{}` already has a HyperPod cluster", cluster.name),
            field: None,
            operation_id: latest
                .iter()
                .find(|o| o.kind == "hyperpod")
                .map(|o| o.id.clone()),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Queries and control
// ---------------------------------------------------------------------------------------------

/// A cluster with the latest operation of every stage.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    #[serde(flatten)]
    pub record: ClusterRecord,
    /// Stage kind → the newest operation of that kind.
    #[schema(value_type = Object)]
    pub stages: Value,
    /// Whether this is the active cluster.
    pub active: bool,
}

pub async fn cluster_view(engine: &Engine, name: &str) -> ApiResult<ClusterView> {
    let store = engine.store();
    let record = live_cluster(engine, name).await?;
    let mut stages = serde_json::Map::new();
    for op in store.latest_per_kind(name).await? {
        stages.insert(
            op.kind.clone(),
            serde_json::to_value(&op).map_err(anyhow::Error::from)?,
        );
    }
    let active = store.setting(ACTIVE_CLUSTER).await?.as_deref() == Some(name);
    Ok(ClusterView {
        record,
        stages: Value::Object(stages),
        active,
    })
}

/// Every cluster that is not deleted, as its view.
pub async fn list_clusters(engine: &Engine) -> ApiResult<Vec<ClusterView>> {
    let mut views = Vec::new();
    for c in engine.store().list_clusters().await? {
        views.push(cluster_view(engine, &c.name).await?);
    }
    Ok(views)
}

/// The cluster used when a request names none.
pub async fn active_cluster(engine: &Engine) -> ApiResult<Option<String>> {
    Ok(engine.store().setting(ACTIVE_CLUSTER).await?)
}

/// Chooses the active cluster (it must exist).
pub async fn set_active_cluster(engine: &Engine, name: &str) -> ApiResult<String> {
    validate::cluster_name("name", name)?;
    let store = engine.store();
    store
        .get_cluster(name)
        .await?
        .filter(|c| c.status != "deleted")
        .ok_or_else(|| cluster_not_found(name))?;
    store.set_setting(ACTIVE_CLUSTER, Some(name)).await?;
    Ok(name.to_string())
}

/// Operations, newest first, optionally of one cluster and in one state.
pub async fn list_operations(
    engine: &Engine,
    cluster: Option<&str>,
    state: Option<&str>,
    limit: Option<i64>,
) -> ApiResult<Vec<Operation>> {
    let state = state
        .map(|s| {
            s.parse::<crate::store::OpState>().map_err(|_| {
                ApiError::validation_hint(
                    "state",
                    format!("`{s}` is not an operation state"),
                    json!(["pending", "running", "succeeded", "failed", "cancelled"]),
                )
            })
        })
        .transpose()?;
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::validation_hint(
            "limit",
            format!("{limit} is out of range"),
            json!("1 to 1000"),
        ));
    }
    Ok(engine
        .store()
        .list_operations(cluster, state, limit)
        .await?)
}

/// The accelerated SageMaker instance types offered in a zone (validated), sorted.
pub async fn instance_types(engine: &Engine, zone: &str) -> ApiResult<(String, Vec<String>)> {
    let cloud = engine.cloud();
    let zones = cloud.network.describe_availability_zones().await?;
    let zone = validate::zone("zone", zone, &zones)?;
    let mut types: Vec<String> = cloud
        .network
        .describe_instance_type_offerings(&zone.name)
        .await?
        .into_iter()
        .filter(|t| ["p", "g", "trn", "inf"].iter().any(|f| t.starts_with(f)))
        .map(|t| format!("ml.{t}"))
        .collect();
    types.sort();
    Ok((zone.name, types))
}

pub fn cluster_not_found(name: &str) -> ApiError {
    ApiError::NotFound {
        what: format!("cluster `{name}`"),
        hint: Some(Box::new(json!("GET /api/clusters lists the clusters"))),
    }
}

/// Retries a failed or cancelled operation (for a pipeline: its failed stage first).
pub async fn retry(engine: &Engine, id: &str) -> ApiResult<Operation> {
    let store = engine.store();
    let _guard = store.write_lock.lock().await;
    let op = load(store, id).await?;
    if !matches!(
        op.state,
        crate::store::OpState::Failed | crate::store::OpState::Cancelled
    ) {
        return Err(ApiError::Conflict {
            slug: "not-retryable",
            detail: format!(
                "operation {id} is {}; only failed or cancelled operations can be retried",
                op.state.as_str()
            ),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    if op.kind == "pipeline" {
        for child in store.children(id).await? {
            if matches!(
                child.state,
                crate::store::OpState::Failed | crate::store::OpState::Cancelled
            ) {
                engine.reset_for_retry(&child).await?;
                engine.spawn(child.id.clone());
            }
        }
    }
    engine.reset_for_retry(&op).await?;
    engine.spawn(id.to_string());
    load(store, id).await
}

/// Asks a running operation (and a pipeline's running stage) to stop at its next safe point:
/// never in the middle of a mutating call.
pub async fn cancel(engine: &Engine, id: &str) -> ApiResult<Operation> {
    let store = engine.store();
    let op = load(store, id).await?;
    if op.state.is_terminal() {
        return Err(ApiError::Conflict {
            slug: "already-finished",
            detail: format!("operation {id} already {}", op.state.as_str()),
            field: None,
            operation_id: Some(id.to_string()),
        });
    }
    store.set_cancel_requested(id, true).await?;
    for child in store.children(id).await? {
        if !child.state.is_terminal() {
            store.set_cancel_requested(&child.id, true).await?;
        }
    }
    engine.changed();
    load(store, id).await
}

// ---------------------------------------------------------------------------------------------
// Preflight
// ---------------------------------------------------------------------------------------------

/// The quota check of a preflight.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaCheck {
    pub instance_type: String,
    pub requested: u32,
    /// The account's HyperPod cluster-usage quota; null when none could be found.
    pub limit: Option<u32>,
    pub ok: bool,
}

/// What to settle before the first cluster: identity, region, quotas, reserved capacity.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    pub region: String,
    pub account: Option<String>,
    pub caller_arn: Option<String>,
    pub quota: Option<QuotaCheck>,
    pub training_plans: Vec<crate::cloud::TrainingPlan>,
    /// Plain-language advice, most important first.
    pub advice: Vec<String>,
}

pub async fn preflight(
    engine: &Engine,
    instance_type: Option<&str>,
    count: Option<i64>,
    capacity_type: Option<&str>,
) -> ApiResult<Preflight> {
    if let Some(c) = capacity_type {
        if !validate::CAPACITY_TYPES.contains(&c) {
            return Err(ApiError::validation_hint(
                "capacityType",
                format!(
                    "`{}` is not a capacity type",
                    c.chars().take(32).collect::<String>()
                ),
                json!(validate::CAPACITY_TYPES),
            ));
        }
    }
    let cloud = engine.cloud();
    let requested = match count {
        None => 1,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                ApiError::validation_hint(
                    "count",
                    format!("{n} is not a valid instance count"),
                    json!("1 to 1000"),
                )
            })?,
    };
    if let Some(t) = instance_type {
        if !t.starts_with("ml.") || t.len() > 64 {
            return Err(ApiError::validation_hint(
                "instanceType",
                format!(
                    "`{}` is not a SageMaker instance type",
                    t.chars().take(64).collect::<String>()
                ),
                json!("e.g. ml.p5.48xlarge"),
            ));
        }
    }
    let mut advice = Vec::new();
    let (account, caller_arn) = match cloud.iam.caller_identity().await {
        Ok(id) => (Some(id.account), Some(id.arn)),
        Err(e) => {
            advice.push(format!(
                "AWS credentials are not usable ({}): fix them before anything else.",
                e.message
            ));
            (None, None)
        }
    };
    let training_plans = match cloud.hyperpod.list_training_plans().await {
        Ok(plans) => plans,
        Err(e) => {
            advice.push(format!("Training plans could not be listed ({}).", e.code));
            Vec::new()
        }
    };
    let quota = match instance_type {
        None => None,
        Some(t) => {
            let limit = match cloud.quotas.hyperpod_cluster_usage(t).await {
                Ok(limit) => limit,
                Err(e) => {
                    advice.push(format!("The Service Quotas API did not answer ({}); check '{t} for cluster usage' by hand.", e.code));
                    None
                }
            };
            let ok = limit.is_some_and(|l| l >= requested);
            match limit {
                Some(l) if l >= requested => advice.push(format!("Quota allows up to {l} × {t} in HyperPod clusters.")),
                Some(l) => advice.push(format!(
                    "Your HyperPod cluster-usage quota for {t} is {l}, below the {requested} you need: request an increase in Service Quotas (Amazon SageMaker › '{t} for cluster usage') before creating the cluster."
                )),
                None => advice.push(format!(
                    "No HyperPod cluster-usage quota was found for {t}: request one in Service Quotas (Amazon SageMaker › '{t} for cluster usage')."
                )),
            }
            if crate::cloud::high_end(t)
                && !training_plans
                    .iter()
                    .any(|p| p.status == "Active" && p.available_instance_count >= requested)
            {
                advice.push(format!(
                    "{t} capacity is scarce on demand: reserve it with a SageMaker training plan and create the cluster with capacityType `training-plan`."
                ));
            }
            Some(QuotaCheck {
                instance_type: t.to_string(),
                requested,
                limit,
                ok,
            })
        }
    };
    if capacity_type == Some("spot") {
        advice.push("Spot capacity can be reclaimed at any time, and elastic training does not cover Spot, managed tiered checkpointing or checkpointless training: plan checkpoints accordingly.".into());
    }
    Ok(Preflight {
        region: cloud.network.region(),
        account,
        caller_arn,
        quota,
        training_plans,
        advice,
    })
}

// ---------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------

/// The nodes of a cluster's HyperPod cluster, with the escalation order for unhealthy ones.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeList {
    pub cluster: String,
    pub hyperpod_cluster: String,
    pub count: usize,
    pub nodes: Vec<NodeView>,
    /// Why the Kubernetes side of the nodes is missing, when it is.
    pub kubernetes_error: Option<String>,
    /// investigate → reboot → replace.
    pub hint: String,
}

/// A HyperPod node joined with its Kubernetes node (readiness, GPUs, health labels).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    #[serde(flatten)]
    pub node: crate::cloud::ClusterNode,
    /// The node as Kubernetes sees it; absent until the instance has joined the cluster.
    pub kubernetes: Option<crate::cloud::NodeState>,
}

/// The cluster's record, unless it does not exist or was deleted (404).
pub async fn live_cluster(engine: &Engine, name: &str) -> ApiResult<crate::store::ClusterRecord> {
    engine
        .store()
        .get_cluster(name)
        .await?
        .filter(|c| c.status != "deleted")
        .ok_or_else(|| cluster_not_found(name))
}

async fn hyperpod_of(engine: &Engine, name: &str) -> ApiResult<String> {
    let record = live_cluster(engine, name).await?;
    record
        .resources
        .get("hyperPodClusterName")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::Conflict {
            slug: "stage-not-ready",
            detail: format!("`{name}` has no HyperPod cluster yet"),
            field: None,
            operation_id: None,
        })
}

pub async fn list_nodes(engine: &Engine, name: &str) -> ApiResult<NodeList> {
    let hyperpod = hyperpod_of(engine, name).await?;
    let nodes = steps::nodes::all_nodes(engine.cloud(), &hyperpod).await?;
    let (mut k8s, kubernetes_error) = match incluster::status(engine, name).await {
        Ok(s) => (s.state.nodes, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let nodes: Vec<NodeView> = nodes
        .into_iter()
        .map(|node| {
            let at = k8s
                .iter()
                .position(|k| k.instance_id.as_deref() == Some(node.instance_id.as_str()));
            NodeView {
                kubernetes: at.map(|i| k8s.swap_remove(i)),
                node,
            }
        })
        .collect();
    Ok(NodeList {
        cluster: name.to_string(),
        hyperpod_cluster: hyperpod,
        count: nodes.len(),
        nodes,
        kubernetes_error,
        hint: "For an unhealthy node: investigate first (status, logs), then reboot; replace only if a reboot does not help, since replacing loses the instance's local volumes.".into(),
    })
}

/// Validates a node operation: the id's shape, and that the node is in this cluster.
pub async fn node_params(
    engine: &Engine,
    name: &str,
    node_id: &str,
    action: crate::cloud::NodeAction,
) -> ApiResult<steps::nodes::NodeParams> {
    let valid = node_id.strip_prefix("i-").is_some_and(|hex| {
        (8..=17).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit())
    });
    if !valid {
        return Err(ApiError::validation_hint(
            "id",
            format!(
                "`{}` is not an instance id",
                node_id.chars().take(64).collect::<String>()
            ),
            json!("i- followed by 8 to 17 hex digits"),
        ));
    }
    let hyperpod = hyperpod_of(engine, name).await?;
    let nodes = steps::nodes::all_nodes(engine.cloud(), &hyperpod).await?;
    if !nodes.iter().any(|n| n.instance_id == node_id) {
        return Err(ApiError::NotFound {
            what: format!("node {node_id} in `{name}`"),
            hint: Some(Box::new(
                json!({"nodes": nodes.iter().map(|n| &n.instance_id).collect::<Vec<_>>()}),
            )),
        });
    }
    Ok(steps::nodes::NodeParams {
        node_id: node_id.to_string(),
        action,
    })
}

// ---------------------------------------------------------------------------------------------
// Instance groups
// ---------------------------------------------------------------------------------------------

/// One instance group: what was asked for (fixed for its life) and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    pub name: String,
    pub instance_type: String,
    /// `on-demand`, `spot` or `training-plan`: fixed for the group's life.
    pub capacity_type: String,
    pub training_plan_arn: Option<String>,
    pub target_count: u32,
    pub current_count: u32,
    pub threads_per_core: u8,
    pub subnet_ids: Vec<String>,
    pub deep_health_checks: Vec<String>,
    pub volume_size_gb: u32,
    /// `standard` or `efa-only`: fixed for the group's life.
    pub network_interface: String,
    /// Whether the instance type carries EFA.
    pub efa_supported: bool,
    /// The on-create lifecycle script (under the cluster's lifecycle prefix).
    pub lifecycle_on_create: String,
}

/// `PATCH /api/clusters/{name}/instance-groups/{group}`: only the fields being changed.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateGroupRequest {
    pub instance_count: Option<i64>,
    /// Run `InstanceStress` and `InstanceConnectivity` on the group's new nodes.
    pub deep_health_checks: Option<bool>,
    /// Accepted only when equal to the current one: capacity is fixed for a group's life.
    pub capacity_type: Option<String>,
    pub training_plan_arn: Option<String>,
    /// Accepted only when equal to the current one: fixed for the group's life.
    pub network_interface: Option<String>,
    /// Another on-create lifecycle script for new nodes: a `.sh` file already under the
    /// cluster's lifecycle prefix in its bucket.
    pub lifecycle_on_create: Option<String>,
}

fn interface_name(spec: &crate::cloud::InstanceGroupSpec) -> &str {
    spec.network_interface.as_deref().unwrap_or("standard")
}

fn capacity_name(c: &crate::cloud::Capacity) -> (&'static str, Option<String>) {
    match c {
        crate::cloud::Capacity::OnDemand => ("on-demand", None),
        crate::cloud::Capacity::Spot => ("spot", None),
        crate::cloud::Capacity::TrainingPlan { arn } => ("training-plan", Some(arn.clone())),
    }
}

async fn recorded_groups(
    engine: &Engine,
    name: &str,
) -> ApiResult<Vec<crate::cloud::InstanceGroupSpec>> {
    let record = live_cluster(engine, name).await?;
    record
        .resources
        .get("instanceGroups")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .ok_or_else(|| ApiError::Conflict {
            slug: "stage-not-ready",
            detail: format!("`{name}` has no HyperPod cluster yet: run the hyperpod stage first"),
            field: None,
            operation_id: None,
        })
}

pub async fn list_groups(engine: &Engine, name: &str) -> ApiResult<Vec<GroupView>> {
    let specs = recorded_groups(engine, name).await?;
    let hyperpod = hyperpod_of(engine, name).await?;
    let live = engine.cloud().hyperpod.describe_cluster(&hyperpod).await?;
    Ok(specs
        .into_iter()
        .map(|g| {
            let status = live
                .as_ref()
                .and_then(|c| c.instance_groups.iter().find(|s| s.name == g.name));
            let (capacity_type, training_plan_arn) = capacity_name(&g.capacity);
            let network_interface = interface_name(&g).to_string();
            let efa_supported = crate::cloud::efa_supported(&g.instance_type);
            GroupView {
                target_count: status.map(|s| s.target_count).unwrap_or(g.instance_count),
                current_count: status.map(|s| s.current_count).unwrap_or(0),
                capacity_type: capacity_type.to_string(),
                training_plan_arn,
                name: g.name,
                instance_type: g.instance_type,
                threads_per_core: g.threads_per_core,
                subnet_ids: g.subnet_ids,
                network_interface,
                efa_supported,
                lifecycle_on_create: g.lifecycle_on_create,
                deep_health_checks: g.deep_health_checks,
                volume_size_gb: g.ebs_volume_gb,
            }
        })
        .collect())
}

/// Validates a new group: the same rules as the first one, plus a name not in use.
pub async fn add_group_params(
    engine: &Engine,
    name: &str,
    req: &CreateHyperPodRequest,
) -> ApiResult<HyperPodParams> {
    let Some(group) = req.instance_group_name.as_deref() else {
        return Err(ApiError::validation(
            "instanceGroupName",
            "a new instance group needs a name",
        ));
    };
    let existing = recorded_groups(engine, name).await?;
    if existing.iter().any(|g| g.name == group) {
        return Err(ApiError::validation_hint(
            "instanceGroupName",
            format!("instance group `{group}` already exists"),
            json!({"existing": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
        ));
    }
    if req.instance_count != 0 {
        return hyperpod_params(engine, req).await;
    }
    // A group Karpenter is to govern starts at zero: HyperPod provisions it from pending pods.
    let autoscaling = engine
        .cloud()
        .hyperpod
        .describe_cluster(&steps::hyperpod::hyperpod_name(name))
        .await?
        .and_then(|c| c.autoscaling)
        .is_some_and(|a| a.enabled);
    if !autoscaling {
        return Err(ApiError::validation_hint(
            "instanceCount",
            "a new instance group starts at zero only under managed autoscaling",
            json!(
                "enable managedAutoscaling first (features_update), or give a count of at least 1"
            ),
        ));
    }
    let mut params = hyperpod_params(
        engine,
        &CreateHyperPodRequest {
            instance_count: 1,
            ..req.clone()
        },
    )
    .await?;
    if params.deep_health_checks
        || matches!(params.capacity, crate::cloud::Capacity::TrainingPlan { .. })
    {
        return Err(ApiError::validation_hint(
            "instanceCount",
            "only a group managed autoscaling can govern starts at zero: on-demand or Spot, without deep health checks",
            json!("give a count of at least 1"),
        ));
    }
    params.instance_count = 0;
    Ok(params)
}

/// What a PATCH means: nothing to do, or a new count. Immutable fields are refused.
pub async fn scale_params(
    engine: &Engine,
    name: &str,
    group: &str,
    req: &UpdateGroupRequest,
) -> ApiResult<Option<steps::groups::ScaleParams>> {
    let existing = recorded_groups(engine, name).await?;
    let Some(spec) = existing.iter().find(|g| g.name == group) else {
        return Err(ApiError::NotFound {
            what: format!("instance group `{group}` in `{name}`"),
            hint: Some(Box::new(
                json!({"instanceGroups": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
            )),
        });
    };
    let (current_type, current_plan) = capacity_name(&spec.capacity);
    let type_changes = req
        .capacity_type
        .as_deref()
        .is_some_and(|t| t != current_type);
    let plan_changes = req.training_plan_arn.is_some() && req.training_plan_arn != current_plan;
    const REPLACE: &str = "to change it, add a new instance group with the setting you want, move the work, then delete this one";
    if type_changes || plan_changes {
        return Err(ApiError::validation_hint(
            if type_changes { "capacityType" } else { "trainingPlanArn" },
            format!("the capacity of instance group `{group}` is `{current_type}` and is fixed for the group's life"),
            json!(REPLACE),
        ));
    }
    if let Some(wanted) = req.network_interface.as_deref() {
        if wanted != interface_name(spec) {
            return Err(ApiError::validation_hint(
                "networkInterface",
                format!(
                    "the network interface of instance group `{group}` is `{}` and is fixed for the group's life",
                    interface_name(spec)
                ),
                json!(REPLACE),
            ));
        }
    }
    let count = match req.instance_count {
        Some(0) => zero_count(engine, name, group).await?,
        Some(c) => {
            validate::instance_count("instanceCount", c, &spec.instance_type, engine.cloud())
                .await?
        }
        None => spec.instance_count,
    };
    // Only what differs from the group as recorded is sent.
    let checks = req
        .deep_health_checks
        .filter(|on| steps::groups::deep_health_checks(*on) != spec.deep_health_checks);
    let lifecycle = match req.lifecycle_on_create.as_deref() {
        Some(script) if script != spec.lifecycle_on_create => {
            Some(lifecycle_script(engine, spec, script).await?)
        }
        _ => None,
    };
    if count == spec.instance_count && checks.is_none() && lifecycle.is_none() {
        return Ok(None);
    }
    Ok(Some(steps::groups::ScaleParams {
        group: group.to_string(),
        instance_count: count,
        deep_health_checks: checks,
        lifecycle_on_create: lifecycle,
    }))
}

/// Zero instances is allowed only for a group managed autoscaling governs (Karpenter brings
/// it back when pods are pending).
async fn zero_count(engine: &Engine, name: &str, group: &str) -> ApiResult<u32> {
    let target = incluster::kube_target(engine, name).await?;
    let governed = steps::features::autoscaled_groups(engine.cloud(), &target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    if governed.iter().any(|g| g == group) {
        return Ok(0);
    }
    Err(ApiError::validation_hint(
        "instanceCount",
        format!("instance group `{group}` can scale to zero only under managed autoscaling"),
        json!(format!("1 or more; or enable managedAutoscaling for `{group}` (PATCH /api/clusters/{name}/features) and it scales from zero with demand")),
    ))
}

/// A new on-create script must be a `.sh` file already uploaded under the group's lifecycle
/// prefix: a typo would otherwise fail every new node.
async fn lifecycle_script(
    engine: &Engine,
    spec: &crate::cloud::InstanceGroupSpec,
    script: &str,
) -> ApiResult<String> {
    let well_formed = script.len() <= 128
        && script.ends_with(".sh")
        && !script.starts_with('.')
        && script
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let (bucket, prefix) = spec
        .lifecycle_source_s3_uri
        .trim_start_matches("s3://")
        .split_once('/')
        .unwrap_or((spec.lifecycle_source_s3_uri.as_str(), ""));
    let present = engine.cloud().objects.list_objects(bucket, prefix).await?;
    let scripts: Vec<&str> = present
        .iter()
        .filter_map(|k| k.strip_prefix(prefix))
        .filter(|k| k.ends_with(".sh") && !k.contains('/'))
        .collect();
    validate::require(
        well_formed && scripts.contains(&script),
        "lifecycleOnCreate",
        format!(
            "`{}` is not a script under {}",
            validate::truncate(script),
            spec.lifecycle_source_s3_uri
        ),
        json!(scripts),
    )?;
    Ok(script.to_string())
}

/// Validates a group removal: it exists, and it is not the cluster's last group.
pub async fn delete_group_params(engine: &Engine, name: &str, group: &str) -> ApiResult<Value> {
    let existing = recorded_groups(engine, name).await?;
    if !existing.iter().any(|g| g.name == group) {
        return Err(ApiError::NotFound {
            what: format!("instance group `{group}` in `{name}`"),
            hint: Some(Box::new(
                json!({"instanceGroups": existing.iter().map(|g| &g.name).collect::<Vec<_>>()}),
            )),
        });
    }
    let target = incluster::kube_target(engine, name).await?;
    let governed = steps::features::autoscaled_groups(engine.cloud(), &target)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))?;
    if governed.iter().any(|g| g == group) {
        // AWS: a group deleted while a node class names it makes the class unusable.
        return Err(ApiError::Conflict {
            slug: "group-autoscaled",
            detail: format!("managed autoscaling governs `{group}`: take it out of managedAutoscalingInstanceGroups (features_update) first"),
            field: Some("group".into()),
            operation_id: None,
        });
    }
    if existing.len() == 1 {
        return Err(ApiError::Conflict {
            slug: "last-instance-group",
            detail: format!(
                "`{group}` is the last instance group of `{name}`; delete the cluster instead"
            ),
            field: Some("group".into()),
            operation_id: None,
        });
    }
    Ok(json!({"group": group}))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store_with(cluster: &str, running: &[(&str, Value)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let mut tx = store.pool.begin().await.unwrap();
        Store::insert_cluster(&mut tx, cluster, "us-west-2", &json!({}))
            .await
            .unwrap();
        for (i, (kind, params)) in running.iter().enumerate() {
            let op = NewOperation {
                id: format!("op-{i}"),
                kind: kind.to_string(),
                cluster: cluster.into(),
                params: params.clone(),
                idempotency_key: None,
                request_hash: None,
                actor: "api".into(),
                parent_id: None,
                phases: vec!["x".into()],
            };
            Store::insert_operation(&mut tx, &op).await.unwrap();
        }
        tx.commit().await.unwrap();
        store
            .merge_resources(
                cluster,
                &json!({"eksEndpoint": "https://e", "eksCertificateAuthority": "ca"}),
            )
            .await
            .unwrap();
        (dir, store)
    }

    fn sub(kind: &'static str, params: Value) -> Submission {
        Submission {
            kind,
            cluster: "demo".into(),
            params,
            actor: "api".into(),
            idempotency_key: None,
            request_hash: None,
            parent_id: None,
            new_cluster: None,
        }
    }

    fn conflicting_op(r: ApiResult<()>) -> Option<String> {
        match r {
            Err(ApiError::Conflict { operation_id, .. }) => operation_id,
            _ => None,
        }
    }

    #[tokio::test]
    async fn hyperpod_updates_queue_behind_each_other() {
        let (_d, store) = store_with("demo", &[("instance-group-scale", json!({}))]).await;
        let r = check_conflicts(&store, &sub("hyperpod-software-update", json!({}))).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-0"));
        let (_d, store) = store_with("demo", &[("hyperpod-software-update", json!({}))]).await;
        let r = check_conflicts(&store, &sub("instance-group-add", json!({}))).await;
        assert_eq!(conflicting_op(r).as_deref(), Some("op-0"));
    }

    #[tokio::test]
    async fn workloads_conflict_only_on_the_same_object() {
        let (_d, store) = store_with(
            "demo",
            &[("model-download", json!({"workload": "model/hf-download-a"}))],
        )
        .await;
        let other = sub("model-download", json!({"workload": "model/hf-download-b"}));
        assert!(check_conflicts(&store, &other).await.is_ok());
        let same = sub(
            "workload-delete",
            json!({"workload": "model/hf-download-a"}),
        );
        assert_eq!(
            conflicting_op(check_conflicts(&store, &same).await).as_deref(),
            Some("op-0")
        );
    }
}
