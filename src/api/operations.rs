//! Operations: list, read (long-poll), retry, cancel.

use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::OperationId;
use super::memo::AcceptsGzip;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service;
use crate::service::people::access;
use crate::store::Operation;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_operations))
        .routes(routes!(get_operation))
        .routes(routes!(retry_operation))
        .routes(routes!(cancel_operation))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct OperationsQuery {
    cluster: Option<String>,
    /// `pending`, `running`, `succeeded`, `failed` or `cancelled`.
    #[param(pattern = "^(pending|running|succeeded|failed|cancelled)$")]
    state: Option<String>,
    /// At most this many, newest first (default 100, max 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Where the previous page ended (from its `Link: <…>; rel="next"` header).
    #[param(pattern = "^[A-Za-z0-9-]{1,64}$")]
    cursor: Option<String>,
}

/// Operations, newest first, optionally for one cluster or in one state.
#[utoipa::path(get, path = "/api/operations", operation_id = "operation_list", params(OperationsQuery),
    responses((status = 200, body = [Operation],
               headers(("Link" = String, description = "`<…?cursor=…>; rel=\"next\"` when more follow"),
                       ("Content-Encoding" = String, description = "`gzip` when the request's Accept-Encoding takes it (answers of 1 KiB or more)"),
                       ("Vary" = String, description = "`accept-encoding`"))),
              (status = 422, body = Problem)))]
async fn list_operations(
    State(state): State<AppState>,
    uri: axum::http::Uri,
    gzip: AcceptsGzip,
    query: Result<Query<OperationsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let page = async {
        let (mut ops, next) = service::list_operations(
            &state.engine,
            q.cluster.as_deref(),
            q.state.as_deref(),
            q.limit,
            q.cursor.as_deref(),
        )
        .await?;
        // Someone who does not administer the deployment sees only the operations they may.
        if !access::sees_every_operation() {
            let mut seen = Vec::new();
            for op in ops {
                if access::may_see_operation(&state.engine, &op).await {
                    seen.push(op);
                }
            }
            ops = seen;
        }
        let next = next.map(|c| {
            let mut url = format!(
                "/api/operations?limit={}&cursor={c}",
                q.limit.unwrap_or(100)
            );
            for (k, v) in [("cluster", &q.cluster), ("state", &q.state)] {
                if let Some(v) = v {
                    url.push_str(&format!("&{k}={}", urlencoding_min(v)));
                }
            }
            url
        });
        Ok((ops, next))
    };
    // The memo holds whole pages for whoever sees every operation; a person's page is their own.
    if !access::sees_every_operation() {
        return super::memo::Memo::unmemoized(gzip, page).await;
    }
    let revision = service::stored_revision(&state.engine);
    state
        .list_memo
        .page(&uri.to_string(), revision, gzip, page)
        .await
}

/// Percent-encodes what a query value must not carry raw.
fn urlencoding_min(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    /// Long-poll: seconds to wait for a change (0–60) before answering.
    #[param(maximum = 60)]
    wait: Option<u64>,
}

/// The status of an operation. Pass wait_seconds (up to 60) to wait for the next change instead of
/// polling; repeat until state is succeeded, failed or cancelled. A failed operation names its
/// phase, the cloud error and the retry tool.
#[utoipa::path(get, path = "/api/operations/{id}", operation_id = "operation_get",
    extensions(("x-mcp" = json!({"arguments": {"wait_seconds": "wait"}}))),
    params(("id" = String, Path), WaitQuery),
    responses((status = 200, body = Operation), (status = 404, body = Problem)))]
async fn get_operation(
    State(state): State<AppState>,
    OperationId(id): OperationId,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Operation>> {
    let Query(q) = query.map_err(|e| ApiError::validation("wait", e.body_text()))?;
    let wait = q.wait.unwrap_or(0);
    if wait > 60 {
        return Err(ApiError::validation_hint(
            "wait",
            format!("{wait} s is too long"),
            json!("0 to 60"),
        ));
    }
    // A long-poll holds a place among the server's waiters; with none free it answers at
    // once, as a plain read (the client polls again, as it would after a change).
    let place = (wait > 0).then(|| state.caps.waiters.try_admit()).flatten();
    let wait = if place.is_some() { wait } else { 0 };
    let op = state
        .engine
        .wait_for_change(&id, Duration::from_secs(wait))
        .await?;
    match op {
        Some(op) if access::may_see_operation(&state.engine, &op).await => Ok(Json(op)),
        _ => Err(ApiError::not_found(format!("operation {id}"))),
    }
}

/// Resume a failed or cancelled operation: succeeded phases are kept and nothing is created twice.
#[utoipa::path(post, path = "/api/operations/{id}/retry", operation_id = "operation_retry",
    extensions(("x-mcp" = json!({"openWorld": true, "duration": "as long as the remaining phases"}))),
    params(("id" = String, Path)),
    responses((status = 202, body = Operation), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn retry_operation(
    State(state): State<AppState>,
    OperationId(id): OperationId,
) -> ApiResult<Response> {
    let op = service::retry(&state.engine, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(op)).into_response())
}

/// Stop an operation at its next safe point (never in the middle of a cloud call). Resources
/// already created stay.
#[utoipa::path(post, path = "/api/operations/{id}/cancel", operation_id = "operation_cancel",
    extensions(("x-mcp" = json!({"destructive": true}))),
    params(("id" = String, Path)),
    responses((status = 202, body = Operation), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn cancel_operation(
    State(state): State<AppState>,
    OperationId(id): OperationId,
) -> ApiResult<Response> {
    let op = service::cancel(&state.engine, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(op)).into_response())
}
