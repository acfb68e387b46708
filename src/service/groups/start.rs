//! Starting operations on instance groups and nodes: add, change, remove a group, act on a node,
//! roll software. Each validates its request, then hands one submission to `service::start`.

use super::affected::{note, NodesOf};
use crate::cloud::NodeAction;
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{
    add_group_params, delete_group_params, node_params, scale_params, Accepted,
    CreateHyperPodRequest, OpKind, UpdateGroupRequest,
};

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
    crate::service::cluster::validate::instance_group_name("group", group)?;
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
    crate::service::cluster::validate::instance_group_name("group", group)?;
    let params = delete_group_params(engine, name, group).await?;
    let groups = [group.to_string()];
    note(
        engine,
        name,
        NodesOf::Groups(&groups),
        "stopped: its node is terminated with the group; it runs again only where capacity is left",
    )
    .await?;
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
    let outcome = match action {
        NodeAction::Reboot => {
            "interrupted while the node reboots; it restarts on the node when it is back"
        }
        NodeAction::Replace => {
            "interrupted, and the node's local volumes are lost; it restarts on the new instance"
        }
        NodeAction::Delete => "evicted: it runs again only where the group has capacity left",
    };
    note(engine, name, NodesOf::Instance(node), outcome).await?;
    let mut accepted = start(engine, OpKind::NodeAction, name, &params, caller).await?;
    if action == NodeAction::Replace {
        accepted.warning = Some("replacing a node loses its instance volumes (local NVMe and the EBS volume under /opt/sagemaker); data in /s3 and FSx is kept".into());
    }
    Ok(accepted)
}

/// A rolling software update, planned and checked (the plan is the operation's parameters).
pub async fn software_update(
    engine: &Engine,
    name: &str,
    req: &super::software::SoftwareUpdateRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let plan = super::software::plan(engine, name, req).await?;
    let groups = req.instance_groups.clone().unwrap_or_default();
    note(
        engine,
        name,
        NodesOf::Groups(&groups),
        "interrupted when its node's batch is patched",
    )
    .await?;
    start(engine, OpKind::HyperPodSoftwareUpdate, name, &plan, caller).await
}
