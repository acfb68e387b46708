//! What a step returns: its typed error and whether it is done watching. A leaf of the engine,
//! so the deadlines, the steps and the engine depend on it and not on each other.

use serde::Serialize;
use serde_json::Value;

use crate::cloud::CloudError;

/// Why a step failed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepError {
    /// Stable slug (`cloud-error`, `no-address-space`, `stage-failed` ...).
    pub code: String,
    pub message: String,
    /// Transient: the engine retries with backoff (always looking before creating again).
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud: Option<Box<CloudError>>,
}

impl StepError {
    pub fn fatal(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            retryable: false,
            cloud: None,
        }
    }
}

impl From<CloudError> for StepError {
    fn from(e: CloudError) -> Self {
        Self {
            code: "cloud-error".into(),
            message: e.to_string(),
            retryable: e.retryable,
            cloud: Some(Box::new(e)),
        }
    }
}

impl From<anyhow::Error> for StepError {
    fn from(e: anyhow::Error) -> Self {
        Self {
            code: "internal".into(),
            message: format!("{e:#}"),
            retryable: true,
            cloud: None,
        }
    }
}

impl From<sqlx::Error> for StepError {
    fn from(e: sqlx::Error) -> Self {
        anyhow::Error::from(e).into()
    }
}

pub type StepResult<T> = Result<T, StepError>;

/// Result of one look at a resource being watched.
pub enum Poll {
    /// Terminal and healthy; the final outputs of the phase.
    Ready(Value),
    /// Still converging; a progress line for the status route.
    Pending(String),
}
