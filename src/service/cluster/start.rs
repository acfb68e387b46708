//! Starting a cluster's operations: create (or a whole pipeline), import, delete, forget, and its
//! dependency and HyperPod stages. Each validates its request, then hands one submission to
//! `service::start`.

use serde_json::json;

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{json_of, start, Caller};
use crate::service::{
    hyperpod_params, import_params, pipeline_params, submit, Accepted, CreateClusterRequest,
    CreateHyperPodRequest, DependenciesRequest, ImportRequest, OpKind, PipelineRequest, Submission,
};

pub async fn create_cluster(
    engine: &Engine,
    req: &CreateClusterRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = crate::service::cluster_params(engine, req, None).await?;
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

/// An upgrade, planned whole and checked (the plan is the operation's parameters); a preview
/// names the running work on the nodes its software update patches.
pub async fn upgrade(
    engine: &Engine,
    name: &str,
    req: &super::upgrade::UpgradeRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let plan = super::upgrade::plan(engine, name, req).await?;
    for update in plan.canary.iter().chain(&plan.software) {
        crate::service::groups::affected::note(
            engine,
            name,
            crate::service::groups::affected::NodesOf::Groups(&update.instance_groups),
            "interrupted when its node's batch is patched",
        )
        .await?;
    }
    start(engine, OpKind::ClusterUpgrade, name, &plan, caller).await
}
