//! What a logs request asks for, checked: the tail, the period (`since`), the pod, the
//! container and the `grep` alternatives.

use serde::Deserialize;
use serde_json::json;

use super::pods::PodRef;
use crate::error::{ApiError, ApiResult};
use crate::service::cluster::validate;

/// Query of the logs snapshot (and, without `since`, of the follow WebSocket).
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Last lines per pod (default 100, at most 5000).
    #[param(minimum = 1, maximum = 5000)]
    pub tail: Option<u32>,
    /// Only lines of the last period: seconds, or a number with `s`, `m` or `h` (`90s`, `10m`),
    /// up to 7 days.
    #[param(
        pattern = "^(([1-9][0-9]{0,4}|[1-5][0-9]{5}|60[0-3][0-9]{3}|604[0-7][0-9]{2}|604800)s?|([1-9][0-9]{0,3}|100[0-7][0-9]|10080)m|([1-9][0-9]?|1[0-5][0-9]|16[0-8])h)$"
    )]
    pub since: Option<String>,
    /// One pod of the workload only.
    pub pod: Option<String>,
    /// The container to read (default: each pod's first).
    #[param(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub container: Option<String>,
    /// Only lines containing one of these `|`-separated texts, ignoring case
    /// (`NCCL|Timeout|CUDA out of memory`).
    pub grep: Option<String>,
}

/// A log filter: alternatives, any of which a line must contain (ignoring case).
#[derive(Debug, Clone, Default)]
pub struct Grep(Vec<String>);

impl Grep {
    pub fn parse(pattern: Option<&str>) -> ApiResult<Self> {
        let Some(p) = pattern else {
            return Ok(Self::default());
        };
        if p.len() > 200 || p.chars().any(char::is_control) {
            return Err(ApiError::validation(
                "grep",
                "a pattern is up to 200 printable characters",
            ));
        }
        Ok(Self(
            p.split('|')
                .map(|a| a.trim().to_lowercase())
                .filter(|a| !a.is_empty())
                .collect(),
        ))
    }

    pub fn matches(&self, line: &str) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let line = line.to_lowercase();
        self.0.iter().any(|a| line.contains(a.as_str()))
    }
}

/// The periods `since` takes, spelled out up to 7 days in each unit (the query's documented
/// pattern, which a test holds equal).
pub const SINCE_PATTERN: &str = "^(([1-9][0-9]{0,4}|[1-5][0-9]{5}|60[0-3][0-9]{3}|604[0-7][0-9]{2}|604800)s?|([1-9][0-9]{0,3}|100[0-7][0-9]|10080)m|([1-9][0-9]?|1[0-5][0-9]|16[0-8])h)$";

pub(super) fn since_seconds(since: Option<&str>) -> ApiResult<Option<i64>> {
    let Some(s) = since else { return Ok(None) };
    let (digits, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        _ => 0,
    };
    match digits.parse::<i64>() {
        Ok(n) if n > 0 && scale > 0 && n * scale <= 7 * 86_400 => Ok(Some(n * scale)),
        _ => Err(ApiError::validation_hint(
            "since",
            format!(
                "`{}` is not a period of up to 7 days",
                validate::truncate(s)
            ),
            json!(["300", "90s", "10m", "2h"]),
        )),
    }
}

/// The pods a request names: all of the workload's, or the one `pod` names.
pub fn select_pods(pods: Vec<PodRef>, pod: Option<&str>) -> ApiResult<Vec<PodRef>> {
    let Some(want) = pod else { return Ok(pods) };
    if pods.iter().any(|p| p.pod == want) {
        return Ok(pods.into_iter().filter(|p| p.pod == want).collect());
    }
    Err(ApiError::NotFound {
        what: format!("pod `{}` of this workload", validate::truncate(want)),
        hint: Some(Box::new(json!(pods
            .iter()
            .map(|p| p.pod.clone())
            .collect::<Vec<_>>()))),
    })
}
