//! What handlers extract from a request and how they answer one that started an operation:
//! a validated cluster name and operation id from the path, the caller (actor + idempotency
//! key), and `202 Accepted` with the operation's id, status URL and `Location`.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::{header, request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{Actor, IdempotencyKey};
use crate::error::ApiError;
use crate::service::start::Caller;
use crate::service::Accepted;

async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    key: &str,
) -> Result<String, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::validation(key, e.body_text()))?;
    params
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| ApiError::validation(key, format!("the path has no `{key}`")))
}

/// The `{name}` of a cluster route, validated as a cluster name.
pub struct ClusterName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ClusterName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let name = path_param(parts, state, "name").await?;
        crate::service::cluster::validate::cluster_name("name", &name)?;
        Ok(Self(name))
    }
}

/// `{name}` and the item of a cluster's item route (`…/teams/{team}`, `…/jobs/{job}`): the
/// cluster name validated as [`ClusterName`] is, the item (the path's last parameter) as given,
/// each topic validating its own kind of name.
pub struct ClusterItem(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for ClusterItem {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // The path's parameters are read once for both.
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::validation("name", e.body_text()))?;
        let (mut name, mut item) = (None, None);
        for (k, v) in &params {
            if k == "name" {
                name = Some(v.to_string());
            } else {
                item = Some(v.to_string());
            }
        }
        let name = name.ok_or_else(|| ApiError::validation("name", "the path has no `name`"))?;
        crate::service::cluster::validate::cluster_name("name", &name)?;
        let item = item
            .ok_or_else(|| ApiError::validation("path", "the path names no item of the cluster"))?;
        Ok(Self(name, item))
    }
}

/// The `{id}` of an operation route, validated as an operation id (a UUID).
pub struct OperationId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for OperationId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = path_param(parts, state, "id").await?;
        uuid::Uuid::parse_str(&id).map_err(|_| {
            ApiError::validation(
                "id",
                format!(
                    "`{}` is not an operation id",
                    id.chars().take(64).collect::<String>()
                ),
            )
        })?;
        Ok(Self(id))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Actor(actor) = Actor::from_request_parts(parts, state).await?;
        let IdempotencyKey(idempotency_key) =
            IdempotencyKey::from_request_parts(parts, state).await?;
        let principal = parts
            .extensions
            .get::<crate::store::Holder>()
            .map(|h| h.arn.clone());
        Ok(Self {
            actor,
            principal,
            idempotency_key,
        })
    }
}

/// The operation a request started: `202 Accepted` (`200` for a replayed idempotency key),
/// with `Location` at its status URL.
pub struct Started(pub Accepted);

impl IntoResponse for Started {
    fn into_response(self) -> Response {
        let a = self.0;
        let status = if a.created {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        let location = a.status_url.clone();
        let mut r = (status, Json(a)).into_response();
        if let Ok(v) = header::HeaderValue::from_str(&location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
    }
}
