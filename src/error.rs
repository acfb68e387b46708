//! The edge error: one enum for everything a request can fail with, mapped to an HTTP status
//! and an `application/problem+json` body in exactly one place ([`ApiError::into_response`]).
//!
//! Internal causes are logged with a correlation id and never returned to the caller.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use crate::cloud::CloudError;
use crate::problem::ProblemType;

/// Valid values or the next step, boxed to keep the error small on the happy path.
pub type Hint = Box<Value>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A field has a value the API cannot accept (422).
    #[error("{detail}")]
    Validation {
        field: String,
        detail: String,
        hint: Option<Hint>,
    },
    /// The body is not the JSON the route takes (400): malformed, wrong type, unknown field.
    #[error("{detail}")]
    BadRequest {
        slug: ProblemType,
        field: Option<String>,
        detail: String,
        hint: Option<Hint>,
    },
    #[error("request body exceeds {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{what} not found")]
    NotFound { what: String, hint: Option<Hint> },
    /// The request collides with existing state (409), e.g. an operation already running.
    #[error("{detail}")]
    Conflict {
        slug: ProblemType,
        detail: String,
        field: Option<String>,
        operation_id: Option<String>,
    },
    #[error("missing or invalid bearer token")]
    Unauthorized,
    #[error("{detail}")]
    Forbidden { slug: ProblemType, detail: String },
    /// No person behind the request, or a sign-in refused (401).
    #[error("{detail}")]
    Unauthenticated { slug: ProblemType, detail: String },
    /// The person lacks the right the request needs (403); the hint names who can grant it.
    #[error("{detail}")]
    Denied { detail: String, hint: Option<Hint> },
    /// A server-wide limit is reached (429); the request may succeed later.
    #[error("{detail}")]
    Busy {
        slug: ProblemType,
        detail: String,
        hint: Option<Hint>,
    },
    /// A cloud API refused a read the request needed (502).
    #[error(transparent)]
    Cloud(Box<CloudError>),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
    /// Not a failure: a preview (`?dryRun=true`) stopped where the request would have written;
    /// the edge answers with the plan noted so far (`service::shared::preview`).
    #[error("previewed: nothing was written")]
    Previewed,
}

impl ApiError {
    pub fn validation(field: &str, detail: impl Into<String>) -> Self {
        ApiError::Validation {
            field: field.to_string(),
            detail: detail.into(),
            hint: None,
        }
    }

    pub fn validation_hint(field: &str, detail: impl Into<String>, hint: Value) -> Self {
        ApiError::Validation {
            field: field.to_string(),
            detail: detail.into(),
            hint: Some(Box::new(hint)),
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        ApiError::NotFound {
            what: what.into(),
            hint: None,
        }
    }

    /// A field error of a request nested in another, named from the top (`software.batchPercent`).
    pub fn nested(self, at: &str) -> Self {
        match self {
            ApiError::Validation {
                field,
                detail,
                hint,
            } => ApiError::Validation {
                field: format!("{at}.{field}"),
                detail,
                hint,
            },
            other => other,
        }
    }

    pub fn conflict(detail: impl Into<String>, operation_id: Option<String>) -> Self {
        ApiError::Conflict {
            slug: ProblemType::Conflict,
            detail: detail.into(),
            field: None,
            operation_id,
        }
    }
}

impl From<CloudError> for ApiError {
    fn from(e: CloudError) -> Self {
        ApiError::Cloud(Box::new(e))
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::Internal(e.into())
    }
}

/// The RFC 9457 body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Stable identifier: `urn:instantstart:problem:<slug>`.
    #[serde(rename = "type")]
    pub type_: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The offending request field (camelCase, dotted for nesting), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Valid values (a list) or the next step to take (a sentence).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = hint_schema, required = false)]
    pub hint: Option<Value>,
    /// The existing operation a conflict is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// For cloud errors: the AWS (or Kubernetes) error, as returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub cloud: Option<Value>,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::Denied { .. } => StatusCode::FORBIDDEN,
            ApiError::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Cloud(e) if e.retryable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Cloud(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Previewed => StatusCode::OK,
        }
    }

    /// The problem body for this error (also what MCP tools return on failure).
    pub fn problem(&self) -> Problem {
        let status = self.status();
        let (slug, title) = match self {
            ApiError::Validation { .. } => (ProblemType::Validation, "Invalid field value"),
            ApiError::BadRequest { slug, .. } => (*slug, "Malformed request"),
            ApiError::PayloadTooLarge { .. } => {
                (ProblemType::PayloadTooLarge, "Request body too large")
            }
            ApiError::NotFound { .. } => (ProblemType::NotFound, "Not found"),
            ApiError::Conflict { slug, .. } => (*slug, "Conflict with existing state"),
            ApiError::Unauthorized => (ProblemType::Unauthorized, "Authentication required"),
            ApiError::Forbidden { slug, .. } => (*slug, "Request refused"),
            ApiError::Unauthenticated { slug, .. } => (*slug, "Authentication required"),
            ApiError::Denied { .. } => (ProblemType::AccessDenied, "Access denied"),
            ApiError::Busy { slug, .. } => (*slug, "Too many requests"),
            ApiError::Cloud(_) => (ProblemType::CloudError, "A cloud API call failed"),
            ApiError::Internal(_) => (ProblemType::Internal, "Internal error"),
            ApiError::Previewed => (ProblemType::Internal, "Previewed"),
        };
        let mut p = Problem {
            type_: slug.uri(),
            title: title.to_string(),
            status: status.as_u16(),
            detail: self.to_string(),
            field: None,
            hint: None,
            operation_id: None,
            cloud: None,
        };
        match self {
            ApiError::Validation { field, hint, .. } => {
                p.field = Some(field.clone());
                p.hint = hint.as_deref().cloned();
            }
            ApiError::BadRequest { field, hint, .. } => {
                p.field = field.clone();
                p.hint = hint.as_deref().cloned();
            }
            ApiError::NotFound { hint, .. }
            | ApiError::Busy { hint, .. }
            | ApiError::Denied { hint, .. } => p.hint = hint.as_deref().cloned(),
            ApiError::Unauthenticated { slug, .. } => {
                p.hint = Some(Value::String(slug.what_to_do().into()))
            }
            ApiError::Conflict {
                field,
                operation_id,
                ..
            } => {
                p.field = field.clone();
                p.operation_id = operation_id.clone();
                if let Some(id) = operation_id {
                    p.hint = Some(Value::String(format!(
                        "watch it with GET /api/operations/{id}?wait=30, or retry it with POST /api/operations/{id}/retry if it failed"
                    )));
                }
            }
            ApiError::Unauthorized => {
                p.hint = Some(Value::String(
                    "send `Authorization: Bearer <INSTANTSTART_TOKEN>`".into(),
                ))
            }
            ApiError::Cloud(e) => p.cloud = serde_json::to_value(&**e).ok(),
            ApiError::Internal(e) => {
                let id = uuid::Uuid::new_v4();
                tracing::error!(error = ?e, correlation_id = %id, "internal error");
                p.detail = format!("internal error (correlation id {id}); see the server log");
            }
            _ => {}
        }
        p.hint = p.hint.map(wire_hint);
        p
    }
}

/// What the document promises a hint is: a sentence, a list of valid values, or an object
/// (an example body, or valid values by what they are, e.g. `{"zonesOffering": […]}`).
fn hint_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
    Schema::OneOf(
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String))
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .description(Some(
                "Valid values (a list, or an object naming them), an example, or the next step to take (a sentence).",
            ))
            .build(),
    )
}

/// Keeps a hint to [`hint_schema`]: list items that are not strings, and scalars, are written
/// out as their JSON text.
fn wire_hint(hint: Value) -> Value {
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    match hint {
        Value::String(_) | Value::Object(_) => hint,
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| Value::String(text(v))).collect())
        }
        other => Value::String(text(other)),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if matches!(self, ApiError::Previewed) {
            // The edge replaces this answer with the plan.
            return (
                StatusCode::OK,
                axum::Json(serde_json::json!({"dryRun": true})),
            )
                .into_response();
        }
        let problem = self.problem();
        let mut response = (self.status(), axum::Json(problem)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/problem+json"),
        );
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_hint_goes_out_as_a_string_a_list_of_strings_or_an_object() {
        assert_eq!(wire_hint(json!("0 to 60")), json!("0 to 60"));
        assert_eq!(wire_hint(json!(["a", 1])), json!(["a", "1"]));
        assert_eq!(wire_hint(json!({"n": [1]})), json!({"n": [1]}));
        assert_eq!(wire_hint(json!(3)), json!("3"));
        let p = ApiError::validation_hint("f", "bad", json!(true)).problem();
        assert_eq!(p.hint, Some(json!("true")));
    }
}
