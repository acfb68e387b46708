//! What a request carries, read and validated before a handler runs: the actor and
//! `Idempotency-Key` headers, the JSON body and the query string, each refused as a problem
//! body naming the field; and the headers and limits every route shares. A leaf of the API:
//! the route files use it, and it names no route.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, request::Parts};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::ApiError;
use crate::problem::ProblemType;

/// Largest accepted request body.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Header naming who is acting: `browser` (the UI), `agent` (MCP) or `api` (default).
pub const ACTOR_HEADER: &str = "x-instantstart-actor";
pub const ACTORS: &[&str] = &["browser", "agent", "api"];
/// Header on every response of a sandbox server.
pub const CLOUD_HEADER: &str = "x-instantstart-cloud";

/// The actor of a request (`X-InstantStart-Actor`), validated.
pub struct Actor(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.headers.get(ACTOR_HEADER).map(|v| v.to_str()) {
            None => Ok(Actor("api".into())),
            Some(Ok(v)) if ACTORS.contains(&v) => Ok(Actor(v.to_string())),
            Some(_) => Err(ApiError::BadRequest {
                slug: ProblemType::InvalidHeader,
                field: Some("X-InstantStart-Actor".into()),
                detail: "unknown actor".into(),
                hint: Some(Box::new(json!(ACTORS))),
            }),
        }
    }
}

/// The `Idempotency-Key` header, validated (1–255 visible ASCII characters).
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(v) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        match v.to_str() {
            Ok(k) if !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()) => {
                Ok(IdempotencyKey(Some(format!("client:{k}"))))
            }
            _ => Err(ApiError::BadRequest {
                slug: ProblemType::InvalidHeader,
                field: Some("Idempotency-Key".into()),
                detail: "Idempotency-Key must be 1–255 visible ASCII characters".into(),
                hint: Some(Box::new(json!("e.g. a UUID"))),
            }),
        }
    }
}

/// JSON body extractor whose every failure is a problem body naming the field.
pub struct ApiJson<T>(pub T);

/// A query string read into `T`; one that cannot be (a duplicate, unknown or mistyped field)
/// is the problem answer every route gives, never axum's plain-text rejection.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e| ApiError::validation("query", e.body_text()))
    }
}

/// Like [`ApiJson`], but an empty body means `T::default()`.
pub struct OptionalJson<T>(pub T);

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        let quoted = |prefix: &str| {
            msg.strip_prefix(prefix)
                .and_then(|rest| rest.split('`').next())
                .map(str::to_string)
        };
        if let Some(field) = quoted("unknown field `") {
            let expected = msg
                .split("expected one of ")
                .nth(1)
                .map(|s| s.split(" at line").next().unwrap_or(s).replace('`', ""));
            return ApiError::BadRequest {
                slug: ProblemType::UnknownField,
                field: Some(field.clone()),
                detail: format!("unknown field `{field}`"),
                hint: expected.map(|e| {
                    Box::new(json!(e.split(", ").map(str::to_string).collect::<Vec<_>>()))
                }),
            };
        }
        if let Some(given) = quoted("unknown variant `") {
            // A value outside a wire enum is a mistake in a valid field, refused like the
            // validators refuse one: by field, with the values it takes.
            let expected: Vec<&str> = msg
                .split_once("expected")
                .map(|(_, rest)| rest.split('`').skip(1).step_by(2).collect())
                .unwrap_or_default();
            let given: String = given.chars().take(64).collect();
            return ApiError::validation_hint(
                &path,
                format!("`{given}` is not one of {}", expected.join(", ")),
                json!(expected),
            );
        }
        if let Some(field) = quoted("missing field `") {
            return ApiError::BadRequest {
                slug: ProblemType::MissingField,
                field: Some(field.clone()),
                detail: format!("missing required field `{field}`"),
                hint: None,
            };
        }
        let syntax = inner.is_syntax() || inner.is_eof();
        ApiError::BadRequest {
            slug: if syntax {
                ProblemType::MalformedJson
            } else {
                ProblemType::InvalidType
            },
            field: Some(if path == "." || syntax {
                "body".into()
            } else {
                path
            }),
            detail: msg,
            hint: None,
        }
    })
}

/// The whole body, within [`BODY_LIMIT`].
pub(super) async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge { limit: BODY_LIMIT }
        } else {
            ApiError::BadRequest {
                slug: ProblemType::MalformedJson,
                field: Some("body".into()),
                detail: e.body_text(),
                hint: None,
            }
        }
    })
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            let mime = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        });
    let bytes = read_body(req, state).await?;
    if !bytes.is_empty() && is_json != Some(true) {
        return Err(ApiError::BadRequest {
            slug: ProblemType::UnsupportedMediaType,
            field: Some("Content-Type".into()),
            detail: "send the body as JSON".into(),
            hint: Some(Box::new(json!("application/json"))),
        });
    }
    Ok(bytes)
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Err(ApiError::BadRequest {
                slug: ProblemType::MalformedJson,
                field: Some("body".into()),
                detail: "a JSON body is required".into(),
                hint: None,
            });
        }
        parse_json(&bytes).map(ApiJson)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&bytes).map(OptionalJson)
    }
}
