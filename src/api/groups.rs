//! Instance groups (add, scale, change, remove) and their nodes (list, reboot, replace, delete).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::cloud::NodeAction;
use crate::error::{ApiResult, Problem};
use crate::service::start::Caller;
use crate::service::{self, Accepted, CreateHyperPodRequest};
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_groups, add_group))
        .routes(routes!(update_group, delete_group))
        .routes(routes!(list_nodes))
        .routes(routes!(reboot_node))
        .routes(routes!(replace_node))
        .routes(routes!(delete_node))
}

/// The cluster's HyperPod instance groups: type, capacity type and network interface (both fixed
/// for the group's life), EFA support, target and current counts, subnets, lifecycle script.
#[utoipa::path(get, path = "/api/clusters/{name}/instance-groups", operation_id = "instance_group_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [service::GroupView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_groups(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<service::GroupView>>> {
    Ok(Json(service::list_groups(&state.engine, &name).await?))
}

/// Add an instance group: capacity type, network interface (standard or efa-only), zone (its
/// compute subnet is placed by the control plane; with a training plan omit it, the plan's
/// reservation decides) and count are decided once. Ask only for zone, instance type, count and
/// capacity type.
#[utoipa::path(post, path = "/api/clusters/{name}/instance-groups", operation_id = "instance_group_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "10-20 minutes on AWS"}))),
    params(("name" = String, Path)),
    request_body = CreateHyperPodRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn add_group(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<CreateHyperPodRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::groups::start::group_add(&state.engine, &name, &req, &caller).await?,
    ))
}

/// The answer to a PATCH that matches the current state: nothing was called.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unchanged {
    pub unchanged: bool,
    pub group: String,
}

/// Change an instance group: send only what changes — instanceCount (0 only under managed
/// autoscaling), deepHealthChecks (true runs InstanceStress and InstanceConnectivity on its new
/// nodes), lifecycleOnCreate (a script already beside the current one). A request equal to the
/// current state changes nothing; changing capacityType or networkInterface is refused (fixed for
/// the group's life).
#[utoipa::path(patch, path = "/api/clusters/{name}/instance-groups/{group}", operation_id = "instance_group_update",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "5-20 minutes on AWS"}))),
    params(("name" = String, Path), ("group" = String, Path)),
    request_body = service::UpdateGroupRequest,
    responses((status = 202, body = Accepted), (status = 200, body = Unchanged), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_group(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(req): ApiJson<service::UpdateGroupRequest>,
) -> ApiResult<Response> {
    let group = item;
    Ok(
        match crate::service::groups::start::group_update(
            &state.engine,
            &name,
            &group,
            &req,
            &caller,
        )
        .await?
        {
            Some(accepted) => Started(accepted).into_response(),
            None => Json(Unchanged {
                unchanged: true,
                group,
            })
            .into_response(),
        },
    )
}

/// Remove a whole instance group: its nodes are terminated. Not the last group (delete the cluster
/// instead). Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/instance-groups/{group}", operation_id = "instance_group_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "5-15 minutes on AWS"}))),
    params(("name" = String, Path), ("group" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_group(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let group = item;
    Ok(Started(
        crate::service::groups::start::group_delete(&state.engine, &name, &group, &caller).await?,
    ))
}

/// The HyperPod nodes of a cluster with their status. For an unhealthy node escalate: investigate,
/// then node_reboot, then node_replace.
#[utoipa::path(get, path = "/api/clusters/{name}/nodes", operation_id = "node_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = service::NodeList), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_nodes(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<service::NodeList>> {
    Ok(Json(service::list_nodes(&state.engine, &name).await?))
}

/// The three node actions differ only in the action.
async fn node_action(
    state: &AppState,
    caller: &Caller,
    name: &str,
    node: &str,
    action: NodeAction,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::groups::start::node_action(&state.engine, name, node, action, caller)
            .await?,
    ))
}

/// Reboot one HyperPod node (after investigating). Watched until the node is Running again.
#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/reboot", operation_id = "node_reboot",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "2-5 minutes"}))),
    params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn reboot_node(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let id = item;
    node_action(&state, &caller, &name, &id, NodeAction::Reboot).await
}

/// Replace one HyperPod node with a new instance: its local volumes are lost. Only after a reboot
/// did not help; confirm with the user.
#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/replace", operation_id = "node_replace",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "10-20 minutes"}))),
    params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn replace_node(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let id = item;
    node_action(&state, &caller, &name, &id, NodeAction::Replace).await
}

/// Remove one node from its instance group (the group shrinks by one). Confirm with the user.
#[utoipa::path(post, path = "/api/clusters/{name}/nodes/{id}/delete", operation_id = "node_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "2-5 minutes"}))),
    params(("name" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_node(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let id = item;
    node_action(&state, &caller, &name, &id, NodeAction::Delete).await
}
