//! CloudWatch Logs, read only: the streams of a log group and the newest lines of one — where
//! HyperPod writes what its lifecycle scripts, health agent and deep health checks said.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::CloudResult;

/// One stream of a log group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogStream {
    pub name: String,
    /// When it was last written to (ms since the epoch), if it ever was.
    pub last_event_ms: Option<i64>,
}

/// One line of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// ms since the epoch.
    pub timestamp_ms: i64,
    pub message: String,
}

#[async_trait]
pub trait Logs: Send + Sync {
    /// Streams of `group` whose names start with `prefix`, at most `limit`, by name
    /// (`DescribeLogStreams`). A group that does not exist has none.
    async fn streams(&self, group: &str, prefix: &str, limit: usize)
        -> CloudResult<Vec<LogStream>>;
    /// The newest `limit` lines of a stream, oldest first (`GetLogEvents` from the end).
    async fn tail(&self, group: &str, stream: &str, limit: usize) -> CloudResult<Vec<LogLine>>;
}
