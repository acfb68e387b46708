//! People's EKS access: your own on every cluster, and who may work in a team's namespace — a
//! person's access to a team read, granted (edit or view) and taken back, each change an
//! operation diffed before it starts.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{ClusterItem, Started};
use super::ApiJson;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service::people::access::ClusterRights;
use crate::service::people::grants::{self as g, GrantRequest, TeamAccessView};
use crate::service::start::Caller;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_access, grant_access, revoke_access))
        .routes(routes!(my_access))
}

/// What you may do on each cluster, as your EKS access entries say: cluster admin or not, the
/// namespaces you may change and read, and the teams whose namespaces those are. Empty when
/// nobody signs in (single-user mode) or you have no access anywhere.
#[utoipa::path(get, path = "/api/session/access", operation_id = "session_access",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    responses((status = 200, body = Vec<ClusterRights>)))]
async fn my_access(State(state): State<AppState>) -> ApiResult<Json<Vec<ClusterRights>>> {
    Ok(Json(
        crate::service::people::access::mine(&state.engine).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PersonQuery {
    /// The person: an IAM user or role ARN without a path.
    #[param(
        pattern = r"^arn:aws(-cn|-us-gov|-iso|-iso-b)?:iam::[0-9]{12}:(user|role)/[A-Za-z0-9+=,.@_-]{1,64}$"
    )]
    principal_arn: String,
}

/// 202 with the operation, or 200 with what the person has when there was nothing to change.
fn answer(change: g::Change) -> Response {
    match change {
        g::Change::Started(accepted) => Started(accepted).into_response(),
        g::Change::AlreadySo(view) => (StatusCode::OK, Json(view)).into_response(),
    }
}

fn person(
    query: Result<Query<PersonQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<String> {
    let Query(q) = query.map_err(|e| ApiError::validation("principalArn", e.body_text()))?;
    Ok(q.principal_arn)
}

/// A person's access to a team: edit, view or none, with every EKS access policy of their
/// access entry on the cluster and its scope.
#[utoipa::path(get, path = "/api/clusters/{name}/teams/{team}/access", operation_id = "team_access_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path), ("team" = String, Path), PersonQuery),
    responses((status = 200, body = TeamAccessView), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn get_access(
    State(state): State<AppState>,
    ClusterItem(name, team): ClusterItem,
    query: Result<Query<PersonQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<TeamAccessView>> {
    let arn = person(query)?;
    Ok(Json(
        g::team_access(&state.engine, &name, &team, &arn).await?,
    ))
}

/// Give a person a team's access on the cluster: `edit` (submit, see and delete the team's
/// workloads: AmazonEKSEditPolicy) or `view` (AmazonEKSViewPolicy), scoped to the team's
/// namespace, through an EKS access entry made when they have none. What they have elsewhere
/// is kept. The operation's parameters hold their policies before and after. Access they
/// already have is answered 200 and nothing is called. Takes a cluster administrator.
#[utoipa::path(put, path = "/api/clusters/{name}/teams/{team}/access", operation_id = "team_access_grant",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "seconds"}))),
    params(("name" = String, Path), ("team" = String, Path)),
    request_body = GrantRequest,
    responses((status = 202, body = crate::service::Accepted), (status = 200, description = "already so: nothing changed", body = TeamAccessView), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn grant_access(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, team): ClusterItem,
    ApiJson(req): ApiJson<GrantRequest>,
) -> ApiResult<Response> {
    Ok(answer(
        g::grant(&state.engine, &name, &team, &req, &caller).await?,
    ))
}

/// Take a team's access from a person: the team's namespace leaves their edit and view
/// policies (a policy left with no namespace is removed); their access entry and what it grants
/// elsewhere stay. No access there is answered 200. Confirm with the user. Takes a cluster
/// administrator.
#[utoipa::path(delete, path = "/api/clusters/{name}/teams/{team}/access", operation_id = "team_access_revoke",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "seconds"}))),
    params(("name" = String, Path), ("team" = String, Path), PersonQuery),
    responses((status = 202, body = crate::service::Accepted), (status = 200, description = "already so: nothing changed", body = TeamAccessView), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn revoke_access(
    State(state): State<AppState>,
    caller: Caller,
    ClusterItem(name, team): ClusterItem,
    query: Result<Query<PersonQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let arn = person(query)?;
    Ok(answer(
        g::revoke(&state.engine, &name, &team, &arn, &caller).await?,
    ))
}
