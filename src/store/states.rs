//! The states of what is stored: a cluster record's life, an operation's and a phase's state,
//! each with the name it has in the database and on the wire.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a cluster record is in its life. A deleted record stays (its operations are the audit
/// trail) until its name is used again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    Active,
    Deleting,
    Deleted,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Active => "active",
            Lifecycle::Deleting => "deleting",
            Lifecycle::Deleted => "deleted",
        }
    }
}

impl FromStr for Lifecycle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Lifecycle::Active, Lifecycle::Deleting, Lifecycle::Deleted]
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("unknown cluster status {s}"))
    }
}

/// State of an operation. Terminal: succeeded, failed, cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OpState {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl OpState {
    pub fn as_str(self) -> &'static str {
        match self {
            OpState::Pending => "pending",
            OpState::Running => "running",
            OpState::Succeeded => "succeeded",
            OpState::Failed => "failed",
            OpState::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OpState::Succeeded | OpState::Failed | OpState::Cancelled
        )
    }
}

impl FromStr for OpState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "pending" => OpState::Pending,
            "running" => OpState::Running,
            "succeeded" => OpState::Succeeded,
            "failed" => OpState::Failed,
            "cancelled" => OpState::Cancelled,
            other => return Err(format!("unknown operation state {other}")),
        })
    }
}

/// State of one phase. `submitting` means the mutating call may or may not have happened:
/// the resource must be looked up before acting again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseState {
    Pending,
    Submitting,
    Submitted,
    Succeeded,
    Failed,
}

impl PhaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseState::Pending => "pending",
            PhaseState::Submitting => "submitting",
            PhaseState::Submitted => "submitted",
            PhaseState::Succeeded => "succeeded",
            PhaseState::Failed => "failed",
        }
    }
}

impl FromStr for PhaseState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "pending" => PhaseState::Pending,
            "submitting" => PhaseState::Submitting,
            "submitted" => PhaseState::Submitted,
            "succeeded" => PhaseState::Succeeded,
            "failed" => PhaseState::Failed,
            other => return Err(format!("unknown phase state {other}")),
        })
    }
}
