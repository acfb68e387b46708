//! CloudWatch Logs, read only: a group's streams and the newest lines of one.

use async_trait::async_trait;

use super::errors::{idempotent, is_not_found};
use super::Aws;
use cloud::*;

const S: &str = "logs";

/// A group or stream that does not exist yet (nothing was ever logged there) reads as empty.
fn found<T>(r: CloudResult<T>) -> CloudResult<Option<T>> {
    match r {
        Ok(out) => Ok(Some(out)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl Logs for Aws {
    async fn streams(
        &self,
        group: &str,
        prefix: &str,
        limit: usize,
    ) -> CloudResult<Vec<LogStream>> {
        let limit_i32 = i32::try_from(limit.clamp(1, 50)).unwrap_or(50);
        let Some(out) = found(
            idempotent(S, "DescribeLogStreams", || {
                self.logs
                    .describe_log_streams()
                    .log_group_name(group)
                    .set_log_stream_name_prefix((!prefix.is_empty()).then(|| prefix.to_string()))
                    .limit(limit_i32)
                    .send()
            })
            .await,
        )?
        else {
            return Ok(vec![]);
        };
        Ok(out
            .log_streams()
            .iter()
            .filter_map(|s| {
                Some(LogStream {
                    name: s.log_stream_name()?.to_string(),
                    last_event_ms: s.last_event_timestamp(),
                })
            })
            .take(limit)
            .collect())
    }

    async fn tail(&self, group: &str, stream: &str, limit: usize) -> CloudResult<Vec<LogLine>> {
        let limit_i32 = i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        let Some(out) = found(
            idempotent(S, "GetLogEvents", || {
                self.logs
                    .get_log_events()
                    .log_group_name(group)
                    .log_stream_name(stream)
                    .start_from_head(false)
                    .limit(limit_i32)
                    .send()
            })
            .await,
        )?
        else {
            return Ok(vec![]);
        };
        Ok(out
            .events()
            .iter()
            .map(|e| LogLine {
                timestamp_ms: e.timestamp().unwrap_or_default(),
                message: e.message().unwrap_or_default().trim_end().to_string(),
            })
            .collect())
    }
}
