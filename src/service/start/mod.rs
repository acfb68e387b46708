//! Starting operations from requests: the one place a validated request becomes a
//! [`Submission`] (kind, cluster, typed parameters, who asked, idempotency key) and is handed to
//! [`submit`]. Handlers call one function here; nothing else builds a submission.

use serde::Serialize;
use serde_json::{json, Value};

use super::features::{FeatureChange, FeaturesPatch};
use super::storage::StorageRequest;
use super::{
    add_group_params, delete_group_params, hyperpod_params, import_params, node_params,
    pipeline_params, request_hash, scale_params, submit, Accepted, CreateClusterRequest,
    CreateHyperPodRequest, DependenciesRequest, ImportRequest, OpKind, PipelineRequest, Submission,
    UpdateGroupRequest,
};
use crate::cloud::NodeAction;
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::problem::ProblemType;

mod workloads;
pub use workloads::*;

/// Who asked, and the key that makes a repeat of the same request return the same operation.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: String,
    pub idempotency_key: Option<String>,
}

fn json_of(v: &impl Serialize) -> ApiResult<Value> {
    Ok(serde_json::to_value(v).map_err(anyhow::Error::from)?)
}

impl Submission {
    /// An operation on a cluster that exists; the request is identified by its parameters.
    pub fn on(kind: OpKind, cluster: &str, params: Value, caller: &Caller) -> Self {
        Self {
            kind,
            request_hash: Some(request_hash(kind.as_str(), cluster, &params)),
            cluster: cluster.to_string(),
            params,
            actor: caller.actor.clone(),
            idempotency_key: caller.idempotency_key.clone(),
            parent_id: None,
            new_cluster: None,
        }
    }

    /// An operation that creates the cluster record (`region`, `spec`); the request is
    /// identified by its body.
    fn creating(
        kind: OpKind,
        cluster: &str,
        body: &Value,
        params: Value,
        record: (String, Value),
        caller: &Caller,
    ) -> Self {
        Self {
            request_hash: Some(request_hash(kind.as_str(), cluster, body)),
            new_cluster: Some(record),
            ..Self::on(kind, cluster, params, caller)
        }
    }

    /// The idempotency key of a pipeline's stage: the pipeline finds its stage again by it.
    pub fn stage_key(pipeline_id: &str, stage: &str) -> String {
        format!("{pipeline_id}/{stage}")
    }

    /// A stage of a running pipeline, keyed by the pipeline so a resumed pipeline finds it.
    pub fn stage_of(
        kind: OpKind,
        cluster: &str,
        params: Value,
        parent: &crate::store::Operation,
    ) -> Self {
        Self {
            kind,
            cluster: cluster.to_string(),
            params,
            actor: parent.actor.clone(),
            idempotency_key: Some(Self::stage_key(&parent.id, kind.as_str())),
            request_hash: None,
            parent_id: Some(parent.id.clone()),
            new_cluster: None,
        }
    }
}

/// Starts `kind` on an existing cluster with `params`.
pub async fn start(
    engine: &Engine,
    kind: OpKind,
    cluster: &str,
    params: &impl Serialize,
    caller: &Caller,
) -> ApiResult<Accepted> {
    submit(
        engine,
        Submission::on(kind, cluster, json_of(params)?, caller),
    )
    .await
}

pub async fn create_cluster(
    engine: &Engine,
    req: &CreateClusterRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::cluster_params(engine, req, None).await?;
    let spec = json_of(&params)?;
    let record = (params.region.clone(), spec.clone());
    let sub = Submission::creating(
        OpKind::Cluster,
        &req.name,
        &json_of(req)?,
        spec,
        record,
        caller,
    );
    submit(engine, sub).await
}

pub async fn create_pipeline(
    engine: &Engine,
    req: &PipelineRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = pipeline_params(engine, req).await?;
    let record = (params.cluster.region.clone(), json_of(&params.cluster)?);
    let sub = Submission::creating(
        OpKind::Pipeline,
        &req.name,
        &json_of(req)?,
        json_of(&params)?,
        record,
        caller,
    );
    submit(engine, sub).await
}

pub async fn import_cluster(
    engine: &Engine,
    req: &ImportRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let (region, params) = import_params(engine, req)?;
    let name = &req.eks_cluster_name;
    let sub = Submission::creating(
        OpKind::Import,
        name,
        &params,
        params.clone(),
        (region, params.clone()),
        caller,
    );
    submit(engine, sub).await
}

pub async fn delete_cluster(engine: &Engine, name: &str, caller: &Caller) -> ApiResult<Accepted> {
    start(engine, OpKind::DeleteCluster, name, &json!({}), caller).await
}

/// Drops the cluster's record (and its Kubernetes client) without touching anything in the
/// account: what it created or imported keeps running, and can be imported again.
pub async fn forget_cluster(engine: &Engine, name: &str, caller: &Caller) -> ApiResult<Accepted> {
    start(engine, OpKind::ForgetCluster, name, &json!({}), caller).await
}

pub async fn dependencies(
    engine: &Engine,
    name: &str,
    req: &DependenciesRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = json!({"manageExisting": req.manage_existing.unwrap_or(false)});
    start(engine, OpKind::Dependencies, name, &params, caller).await
}

pub async fn hyperpod(
    engine: &Engine,
    name: &str,
    req: &CreateHyperPodRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = hyperpod_params(engine, req).await?;
    start(engine, OpKind::HyperPod, name, &params, caller).await
}

pub async fn storage(
    engine: &Engine,
    name: &str,
    req: &StorageRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::storage::storage_params(engine, name, req).await?;
    start(engine, OpKind::Storage, name, &params, caller).await
}

pub async fn storage_delete(
    engine: &Engine,
    name: &str,
    claim: &str,
    namespace: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params =
        crate::service::storage::storage_delete_params(engine, name, claim, namespace).await?;
    start(engine, OpKind::StorageDelete, name, &params, caller).await
}

pub async fn group_add(
    engine: &Engine,
    name: &str,
    req: &CreateHyperPodRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = add_group_params(engine, name, req).await?;
    start(engine, OpKind::InstanceGroupAdd, name, &params, caller).await
}

/// `None` when the PATCH matches the group as it is: nothing is started.
pub async fn group_update(
    engine: &Engine,
    name: &str,
    group: &str,
    req: &UpdateGroupRequest,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    super::cluster::validate::instance_group_name("group", group)?;
    match scale_params(engine, name, group, req).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::InstanceGroupScale, name, &params, caller).await?,
        )),
    }
}

pub async fn group_delete(
    engine: &Engine,
    name: &str,
    group: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    super::cluster::validate::instance_group_name("group", group)?;
    let params = delete_group_params(engine, name, group).await?;
    start(engine, OpKind::InstanceGroupDelete, name, &params, caller).await
}

pub async fn node_action(
    engine: &Engine,
    name: &str,
    node: &str,
    action: NodeAction,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = node_params(engine, name, node, action).await?;
    let mut accepted = start(engine, OpKind::NodeAction, name, &params, caller).await?;
    if action == NodeAction::Replace {
        accepted.warning = Some("replacing a node loses its instance volumes (local NVMe and the EBS volume under /opt/sagemaker); data in /s3 and FSx is kept".into());
    }
    Ok(accepted)
}

/// One operation per feature that differs from its actual state. Per feature:
/// `{"result": "unchanged"}` or `{"result": "started", "enable", "operationId", "statusUrl"}`;
/// the flag says whether anything started.
pub async fn features(
    engine: &Engine,
    name: &str,
    req: &FeaturesPatch,
    settings: &crate::service::features::FeatureSettings<'_>,
    caller: &Caller,
) -> ApiResult<(bool, Value)> {
    let plan = crate::service::features::plan_features(engine, name, req, settings).await?;
    let mut out = serde_json::Map::new();
    let mut started = false;
    for (field, change) in plan {
        let FeatureChange::Change { kind, params } = change else {
            out.insert(field.into(), json!({"result": "unchanged"}));
            continue;
        };
        // One key per field, so a repeated PATCH finds each of its operations again.
        let caller = Caller {
            idempotency_key: caller
                .idempotency_key
                .as_ref()
                .map(|k| format!("{k}:{field}")),
            ..caller.clone()
        };
        let accepted = start(engine, kind, name, &params, &caller).await?;
        started = true;
        out.insert(
            field.into(),
            json!({"result": "started", "enable": params.enable,
                   "operationId": accepted.operation_id, "statusUrl": accepted.status_url}),
        );
    }
    Ok((started, Value::Object(out)))
}

pub async fn model_download(
    engine: &Engine,
    name: &str,
    req: &super::workloads::ModelDownloadRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::workloads::model_params(engine, name, req).await?;
    start(engine, OpKind::ModelDownload, name, &params, caller).await
}

/// A repeat of a keyed request returns its operation before anything is validated again:
/// validation reads state the first request changed (the job it created, say), so a retry
/// would otherwise be refused for its own success. The request is identified by its body.
async fn replayed(
    engine: &Engine,
    kind: OpKind,
    cluster: &str,
    body: &Value,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    let Some(key) = &caller.idempotency_key else {
        return Ok(None);
    };
    let store = engine.store();
    let Some((id, hash)) = store.find_by_key(key).await? else {
        return Ok(None);
    };
    if hash.as_deref() != Some(request_hash(kind.as_str(), cluster, body).as_str()) {
        return Err(crate::error::ApiError::Conflict {
            slug: ProblemType::IdempotencyKeyReused,
            detail: "this Idempotency-Key was used with a different request".into(),
            field: Some("Idempotency-Key".into()),
            operation_id: Some(id),
        });
    }
    Ok(Some(super::shared::submit::accepted(
        super::shared::submit::load(store, &id).await?,
        false,
    )))
}

pub async fn training_job(
    engine: &Engine,
    name: &str,
    req: &super::training::TrainingJobRequest,
    packages: &super::training::PodPackages,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let kind = OpKind::TrainingJob;
    let body = json_of(req)?;
    if let Some(earlier) = replayed(engine, kind, name, &body, caller).await? {
        return Ok(earlier);
    }
    let params = super::training::training_params(engine, name, req, packages).await?;
    let sub = Submission {
        request_hash: Some(request_hash(kind.as_str(), name, &body)),
        ..Submission::on(kind, name, params, caller)
    };
    submit(engine, sub).await
}

pub async fn training_job_delete(
    engine: &Engine,
    name: &str,
    job: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::training::training_delete_params(engine, name, job).await?;
    super::training::end_following(engine, name, job).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

pub async fn job_delete(
    engine: &Engine,
    name: &str,
    job: &str,
    kind: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::workloads::job_delete_params(engine, name, job, kind).await?;
    start(engine, OpKind::WorkloadDelete, name, &params, caller).await
}

/// A team's compute quota, made.
pub async fn team_create(
    engine: &Engine,
    name: &str,
    req: &super::teams::TeamRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::teams::create_params(engine, name, req).await?;
    start(engine, OpKind::TeamCreate, name, &params, caller).await
}

/// A team's quota changed; `None` when the patch changes nothing.
pub async fn team_update(
    engine: &Engine,
    name: &str,
    team: &str,
    patch: &super::teams::TeamPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::teams::update_params(engine, name, team, patch).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::TeamUpdate, name, &params, caller).await?,
        )),
    }
}

pub async fn team_delete(
    engine: &Engine,
    name: &str,
    team: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::teams::delete_params(engine, name, team).await?;
    start(engine, OpKind::TeamDelete, name, &params, caller).await
}

/// The scheduling policy set; `None` when it is already so.
pub async fn scheduling_policy(
    engine: &Engine,
    name: &str,
    req: &super::teams::PolicyRequest,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::teams::policy_params(engine, name, req).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::SchedulingPolicy, name, &params, caller).await?,
        )),
    }
}
