//! Metrics port: Prometheus range queries against an Amazon Managed Service for Prometheus
//! workspace (signed with SigV4, service `aps`), and the Prometheus HTTP API's answer parsed
//! into series.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::{CloudError, CloudResult};

/// An Amazon Managed Service for Prometheus workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…`, without a trailing slash.
    pub url: String,
    pub region: String,
}

/// One range query (`/api/v1/query_range`).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeQuery {
    pub query: String,
    /// Unix seconds.
    pub start: i64,
    pub end: i64,
    /// Seconds between two points.
    pub step: u32,
}

/// One series of a range query: its labels and `(unix seconds, value)` points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(i64, f64)>,
}

/// A workspace as AMP describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmpWorkspace {
    pub id: String,
    pub arn: String,
    pub alias: Option<String>,
    /// `CREATING`, `ACTIVE`, `UPDATING`, `DELETING`, `CREATION_FAILED`.
    pub status: String,
    /// `https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…/`.
    pub prometheus_endpoint: Option<String>,
}

/// An Amazon Managed Grafana workspace, as `DescribeWorkspace` tells it (AMG does not return
/// its ARN: it is `arn:<partition>:grafana:<region>:<account>:/workspaces/<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaWorkspace {
    pub id: String,
    pub name: Option<String>,
    /// `ACTIVE`, `CREATING`, `UPDATING`, `FAILED`, …
    pub status: String,
    /// `g-….grafana-workspace.<region>.amazonaws.com`, without a scheme.
    pub endpoint: String,
}

#[async_trait]
pub trait Metrics: Send + Sync {
    async fn query_range(&self, workspace: &Workspace, q: &RangeQuery) -> CloudResult<Vec<Series>>;
    /// The workspace of exactly this alias (`ListWorkspaces` filters by prefix), described.
    async fn find_workspace(&self, alias: &str) -> CloudResult<Option<AmpWorkspace>>;
    /// Makes a workspace (`CREATING` at first), tagged.
    async fn create_workspace(&self, alias: &str, tags: &crate::Tags) -> CloudResult<AmpWorkspace>;
    /// An Amazon Managed Grafana workspace (`None`: there is none of this id).
    async fn describe_grafana(&self, id: &str) -> CloudResult<Option<GrafanaWorkspace>>;
}

/// The series of a Prometheus `query_range` answer (`resultType` `matrix`); a value Prometheus
/// writes as `NaN` or `±Inf` is left out.
pub fn parse_matrix(body: &Value) -> CloudResult<Vec<Series>> {
    let bad = |why: &str| CloudError::new("aps", "QueryMetrics", "Decode", why.to_string());
    if body["status"] != "success" {
        return Err(CloudError::new(
            "aps",
            "QueryMetrics",
            body["errorType"].as_str().unwrap_or("QueryFailed"),
            body["error"].as_str().unwrap_or("the query failed"),
        ));
    }
    if body.pointer("/data/resultType") != Some(&Value::from("matrix")) {
        return Err(bad("the answer is not a matrix"));
    }
    let result = body
        .pointer("/data/result")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the answer has no result"))?;
    Ok(result
        .iter()
        .map(|s| Series {
            labels: s["metric"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect(),
            points: s["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let t = p[0].as_f64()? as i64;
                    let v: f64 = p[1].as_str()?.parse().ok()?;
                    v.is_finite().then_some((t, v))
                })
                .collect(),
        })
        .collect())
}

/// One label matcher: the label, whether it is a regex (`=~`), the value.
pub type Matcher = (String, bool, String);

/// The exact-match and regex matchers of a selector `metric{a="x",b=~"y|z"}`: what the
/// simulated Prometheus understands of PromQL (`None`: not a plain selector).
pub fn selector(query: &str) -> Option<(String, Vec<Matcher>)> {
    let query = query.trim();
    let (name, rest) = match query.find('{') {
        Some(i) => (&query[..i], Some(&query[i + 1..])),
        None => (query, None),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return None;
    }
    let mut matchers = Vec::new();
    if let Some(rest) = rest {
        let body = rest.strip_suffix('}')?;
        for m in body.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let (label, regex, value) = match m.split_once("=~") {
                Some((l, v)) => (l, true, v),
                None => {
                    let (l, v) = m.split_once('=')?;
                    (l, false, v)
                }
            };
            let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            matchers.push((label.trim().to_string(), regex, value.to_string()));
        }
    }
    Some((name.to_string(), matchers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_matrix_answer_becomes_series_without_nan() {
        let body = json!({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"},
             "values": [[1700000000, "87"], [1700000060.0, "NaN"], [1700000120, "91.5"]]}]}});
        let s = parse_matrix(&body).unwrap();
        assert_eq!(s[0].labels["gpu"], "0");
        assert_eq!(
            s[0].points,
            vec![(1_700_000_000, 87.0), (1_700_000_120, 91.5)]
        );
        let e = parse_matrix(
            &json!({"status": "error", "errorType": "bad_data", "error": "parse error"}),
        )
        .unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("bad_data", "parse error")
        );
    }

    #[test]
    fn a_plain_selector_is_read_and_anything_else_is_not() {
        let (name, m) =
            selector(r#"DCGM_FI_DEV_GPU_UTIL{Hostname=~"a|b", namespace="x"}"#).unwrap();
        assert_eq!(name, "DCGM_FI_DEV_GPU_UTIL");
        assert_eq!(
            m,
            vec![
                ("Hostname".into(), true, "a|b".into()),
                ("namespace".into(), false, "x".into())
            ]
        );
        assert!(selector("DCGM_FI_DEV_GPU_UTIL").unwrap().1.is_empty());
        assert!(selector("avg(rate(x[5m]))").is_none());
    }
}
