//! Development spaces (the `amazon-sagemaker-spaces` add-on's `Workspace`): create, list, read,
//! change with the diff contract, start, stop, delete.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, ClusterName, Started};
use super::{ApiJson, OptionalJson};
use crate::error::{ApiResult, Problem};
use crate::service::shared::preview::{self, Effect};
use crate::service::spaces::{self as s, SpacePatch, SpaceRequest, SpaceView};
use crate::service::start::Caller;
use crate::service::Accepted;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_spaces, create_space))
        .routes(routes!(get_space, update_space, delete_space))
        .routes(routes!(start_space))
        .routes(routes!(stop_space))
        .routes(routes!(open_space))
        .routes(routes!(connect_space))
        .routes(routes!(end_sessions))
}

/// Ask the Spaces add-on for a connection to a running space: a remote IDE (VS Code, Kiro or
/// Cursor over SSM, through the AWS Toolkit — the default is vscode-remote) or the add-on's own
/// web UI where it is set up (domain, certificate). Returns a URL to open once; it carries a
/// session token, so give it to the user and do not log it. Where the add-on refuses, the
/// answer says so — space_open always works, through this control plane.
#[utoipa::path(post, path = "/api/clusters/{name}/spaces/{space}/connections", operation_id = "space_connect",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("space" = String, Path)),
    request_body = s::ConnectionRequest,
    responses((status = 201, body = s::SpaceLink), (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn connect_space(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
    OptionalJson(req): OptionalJson<s::ConnectionRequest>,
) -> ApiResult<(StatusCode, Json<s::SpaceLink>)> {
    let kind = req.kind.unwrap_or(s::ConnectionType::VsCode);
    let link = s::connection(&state.engine, &name, &item, kind).await?;
    Ok((StatusCode::CREATED, Json(link)))
}

/// Where a running space opens: its own host under the control plane's address, with a
/// one-use ticket good for a minute.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpaceOpen {
    /// Open it in a browser (`http://<space>.<cluster>.spaces.<this host>/?instantstart-ticket=…`).
    pub url: String,
    pub expires_in_seconds: u64,
}

/// Open a running space through this control plane (the same tunnel as the UI): a URL with a
/// one-use ticket, good for a minute, that gives the browser a session for that space only.
/// Give the URL to the user; it is not a secret worth keeping, but do not log it.
#[utoipa::path(post, path = "/api/clusters/{name}/spaces/{space}/open", operation_id = "space_open",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 200, body = SpaceOpen), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn open_space(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
    headers: axum::http::HeaderMap,
) -> ApiResult<Json<SpaceOpen>> {
    let space = item;
    crate::service::spaces::running(&state.engine, &name, &space).await?;
    preview::stop(Effect::Create, format!("a one-use link to space `{space}`"))?;
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost")
        .to_ascii_lowercase();
    let ticket = state.space_sessions.ticket(&name, &space);
    Ok(Json(SpaceOpen {
        url: super::space_proxy::open_url(&host, &name, &space, &ticket),
        expires_in_seconds: 60,
    }))
}

/// Create a development space: JupyterLab (default) or Code Editor on a node of one of the
/// cluster's instance types, with whole GPUs or one MIG slice, a home directory of its own
/// (storageGib, fixed) and the cluster's S3 claim at /s3 — the same path training jobs and
/// endpoints read, so a script saved at /s3/code/train.py is the next job's script. It stops
/// itself after idleShutdownMinutes without use (60 by default; 0: never). Needs the spaces
/// feature. Followed until it runs; open it with space_open.
#[utoipa::path(post, path = "/api/clusters/{name}/spaces", operation_id = "space_create",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "1–5 minutes"}))),
    params(("name" = String, Path)),
    request_body = SpaceRequest,
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_space(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<SpaceRequest>,
) -> ApiResult<Started> {
    Ok(Started(
        crate::service::spaces::start::space(&state.engine, &name, &req, &caller).await?,
    ))
}

/// The cluster's spaces: state (starting, running, stopping, stopped, failed), application,
/// instance type, GPUs, idle shutdown, the paths it mounts and where it opens.
#[utoipa::path(get, path = "/api/clusters/{name}/spaces", operation_id = "space_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = [SpaceView]), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn list_spaces(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<Vec<SpaceView>>> {
    Ok(Json(s::list_spaces(&state.engine, &name).await?))
}

/// One space, with the controller's conditions.
#[utoipa::path(get, path = "/api/clusters/{name}/spaces/{space}", operation_id = "space_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 200, body = SpaceView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_space(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<SpaceView>> {
    Ok(Json(s::get_space(&state.engine, &name, &item).await?))
}

/// Change a space: GPUs or MIG slice, idle shutdown, image (send only what changes). Equal to
/// what it is: 200 and nothing is done. Its home storage keeps its size (409).
#[utoipa::path(patch, path = "/api/clusters/{name}/spaces/{space}", operation_id = "space_update",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "1–5 minutes"}))),
    params(("name" = String, Path), ("space" = String, Path)),
    request_body = SpacePatch,
    responses((status = 202, body = Accepted), (status = 200, description = "already as asked: nothing changed", body = SpaceView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_space(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
    ApiJson(patch): ApiJson<SpacePatch>,
) -> ApiResult<Response> {
    match crate::service::spaces::start::space_update(&state.engine, &name, &item, &patch, &caller)
        .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok(unchanged(&state, &name, &item).await?),
    }
}

async fn unchanged(state: &AppState, name: &str, space: &str) -> ApiResult<Response> {
    Ok((
        StatusCode::OK,
        Json(s::get_space(&state.engine, name, space).await?),
    )
        .into_response())
}

/// Start a stopped space (its home directory is as it was left). Running already: 200.
#[utoipa::path(post, path = "/api/clusters/{name}/spaces/{space}/start", operation_id = "space_start",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "1–5 minutes"}))),
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 202, body = Accepted), (status = 200, description = "already running: nothing changed", body = SpaceView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn start_space(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Response> {
    match crate::service::spaces::start::space_status(&state.engine, &name, &item, true, &caller)
        .await?
    {
        Some(accepted) => Ok(Started(accepted).into_response()),
        None => Ok(unchanged(&state, &name, &item).await?),
    }
}

/// Stop a space: its pod goes, its home directory stays. Stopped already: 200.
#[utoipa::path(post, path = "/api/clusters/{name}/spaces/{space}/stop", operation_id = "space_stop",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 202, body = Accepted), (status = 200, description = "already stopped: nothing changed", body = SpaceView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn stop_space(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Response> {
    let answer = match crate::service::spaces::start::space_status(
        &state.engine,
        &name,
        &item,
        false,
        &caller,
    )
    .await?
    {
        Some(accepted) => Started(accepted).into_response(),
        None => unchanged(&state, &name, &item).await?,
    };
    // A stopped space's browser sessions end with it.
    state.space_sessions.revoke(&name, &item);
    Ok(answer)
}

/// Delete a space and its home directory (what it saved under /s3 stays). Confirm with the
/// user.
#[utoipa::path(delete, path = "/api/clusters/{name}/spaces/{space}", operation_id = "space_delete",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "under a minute"}))),
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 202, body = Accepted), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn delete_space(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Started> {
    let accepted =
        crate::service::spaces::start::space_delete(&state.engine, &name, &item, &caller).await?;
    state.space_sessions.revoke(&name, &item);
    Ok(Started(accepted))
}

/// End every browser session and unused link of a space (space_open links included) at once:
/// whoever holds one must open the space again. Stopping or deleting a space does this too.
#[utoipa::path(delete, path = "/api/clusters/{name}/spaces/{space}/sessions", operation_id = "space_sessions_end",
    params(("name" = String, Path), ("space" = String, Path)),
    responses((status = 200, body = SessionsEnded), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn end_sessions(
    State(state): State<AppState>,
    ClusterItem(name, item): ClusterItem,
) -> ApiResult<Json<SessionsEnded>> {
    crate::service::spaces::writable(&state.engine, &name, &item, "end its spaces' sessions")
        .await?;
    preview::stop(
        Effect::Delete,
        format!("every browser session and unused link of space `{item}`"),
    )?;
    Ok(Json(SessionsEnded {
        ended: state.space_sessions.revoke(&name, &item),
    }))
}

/// How many browser sessions of the space ended.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct SessionsEnded {
    pub ended: usize,
}
