//! Teams sharing a cluster (HyperPod task governance): the scheduling policy, and each team's
//! compute quota made, read, changed by diff and removed.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service::people::access;
use crate::service::start::Caller;
use crate::service::teams::{
    self as t, GovernanceView, PolicyRequest, PolicyView, TeamPatch, TeamRequest, TeamView,
};
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_teams, create_team))
        .routes(routes!(get_team, update_team, delete_team))
        .routes(routes!(get_policy, put_policy))
}

/// Task governance on the cluster: whether it is on, the scheduling policy (priority classes and
/// their workload labels, fair share, idle-resource sharing), every team's quota per instance
/// type with its namespace and queue, and what the instance groups hold beside what the teams
/// were given.
#[utoipa::path(get, path = "/api/clusters/{name}/teams", operation_id = "team_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = GovernanceView), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_teams(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<GovernanceView>> {
    let mut view = t::view(&state.engine, &name).await?;
    // A person who reads some namespaces only sees the teams of those.
    let mut kept = Vec::new();
    for team in std::mem::take(&mut view.teams) {
        if access::may_read(&state.engine, &name, &team.namespace).await? {
            kept.push(team);
        }
    }
    view.teams = kept;
    Ok(Json(view))
}

/// Give a team its share of the cluster: instances (count) or GPUs (accelerators) per instance
/// type of the cluster, whether it lends and borrows idle compute (and how much it may borrow),
/// whether its higher-priority work preempts its own, its fair-share weight. Its workloads run in
/// namespace hyperpod-ns-<team>. Needs the taskGovernance feature. Followed until SageMaker
/// reports the quota Created.
#[utoipa::path(post, path = "/api/clusters/{name}/teams", operation_id = "team_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "about a minute"}))),
    params(("name" = String, Path)),
    request_body = TeamRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_team(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<TeamRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::teams::start::team_create(&state.engine, &name, &req, &caller).await?,
    ))
}

/// One team: its quota, sharing, preemption, weight, namespace, queue and status.
#[utoipa::path(get, path = "/api/clusters/{name}/teams/{team}", operation_id = "team_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("team" = String, Path)),
    responses((status = 200, body = TeamView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_team(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<TeamView>> {
    let team = t::team(&state.engine, &name, &item).await?;
    if !access::may_read(&state.engine, &name, &team.namespace).await? {
        return Err(crate::error::ApiError::not_found(format!(
            "team `{item}` on `{name}`"
        )));
    }
    Ok(Json(team))
}

/// Change a team's quota: send only the fields to change. A patch equal to what SageMaker has
/// is answered 200 and nothing is called.
#[utoipa::path(patch, path = "/api/clusters/{name}/teams/{team}", operation_id = "team_update",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "about a minute"}))),
    params(("name" = String, Path), ("team" = String, Path)),
    request_body = TeamPatch,
    responses((status = 202, body = Accepted), (status = 200, description = "already so: nothing changed", body = TeamView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_team(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(patch): ApiJson<TeamPatch>,
) -> ApiResult<Response> {
    match crate::service::teams::start::team_update(&state.engine, &name, &item, &patch, &caller)
        .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok((
            StatusCode::OK,
            Json(t::team(&state.engine, &name, &item).await?),
        )
            .into_response()),
    }
}

/// Remove a team's quota: its work is no longer guaranteed any share. Confirm with the user.
#[utoipa::path(delete, path = "/api/clusters/{name}/teams/{team}", operation_id = "team_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "about a minute"}))),
    params(("name" = String, Path), ("team" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_team(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::teams::start::team_delete(&state.engine, &name, &item, &caller).await?,
    ))
}

/// The cluster's scheduling policy as SageMaker keeps it (404 when none was set).
#[utoipa::path(get, path = "/api/clusters/{name}/scheduling-policy", operation_id = "scheduling_policy_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = PolicyView), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_policy(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<PolicyView>> {
    t::view(&state.engine, &name)
        .await?
        .policy
        .map(Json)
        .ok_or_else(|| {
            crate::error::ApiError::not_found(format!(
                "a scheduling policy on `{name}` (set one with scheduling_policy_set)"
            ))
        })
}

/// Set the cluster's scheduling policy: priority classes with weights 0-100 (a workload names
/// one as its priority), fair share, idle-resource sharing. Made or updated by diff: the same
/// policy is answered 200 and nothing is called. A policy left CreateFailed (made before the
/// add-on was ready) is made again. Needs the taskGovernance feature.
#[utoipa::path(put, path = "/api/clusters/{name}/scheduling-policy", operation_id = "scheduling_policy_set",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "about a minute"}))),
    params(("name" = String, Path)),
    request_body = PolicyRequest,
    responses((status = 202, body = Accepted), (status = 200, description = "already so: nothing changed", body = PolicyView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn put_policy(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<PolicyRequest>,
) -> ApiResult<Response> {
    match crate::service::teams::start::scheduling_policy(&state.engine, &name, &req, &caller)
        .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok(get_policy(State(state), ClusterName(name))
            .await?
            .into_response()),
    }
}
