//! The metrics port over AWS: Amazon Managed Service for Prometheus's query API
//! (`GET <workspace>/api/v1/query_range`), signed with SigV4 for service `aps` in the
//! workspace's region; the Amazon Managed Grafana workspace its dashboards are in
//! (`DescribeWorkspace`). A configured endpoint (a proxy, or the emulator in tests) replaces only
//! the scheme and host, as it does for every SDK client.

use async_trait::async_trait;
use serde_json::Value;

use super::errors::{idempotent, once};
use super::signed::SignedCall;
use super::Aws;
use cloud::*;

const S: &str = "aps";
const OPERATION: &str = "QueryMetrics";

/// The query URL of a range query on a workspace, on `endpoint` when one is configured.
pub fn query_url(workspace: &Workspace, q: &RangeQuery, endpoint: Option<&str>) -> String {
    let path = workspace
        .url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("");
    let base = match endpoint {
        Some(e) => format!("{}{path}", e.trim_end_matches('/')),
        None => workspace.url.trim_end_matches('/').to_string(),
    };
    // RFC 3986 unreserved characters stay as they are (what SigV4's canonical query expects).
    const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, QUERY).to_string();
    format!(
        "{base}/api/v1/query_range?end={}&query={}&start={}&step={}",
        q.end,
        enc(&q.query),
        q.start,
        q.step
    )
}

#[async_trait]
impl Metrics for Aws {
    async fn query_range(&self, workspace: &Workspace, q: &RangeQuery) -> CloudResult<Vec<Series>> {
        let url = query_url(workspace, q, self.config.endpoint_url());
        let (status, text) = self
            .signed(SignedCall {
                service: S,
                operation: OPERATION,
                signing_name: S,
                region: &workspace.region,
                url: &url,
                body: None,
                headers: vec![],
            })
            .await?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            let code = match status {
                403 => "AccessDeniedException".to_string(),
                404 => "ResourceNotFoundException".to_string(),
                429 => "ThrottlingException".to_string(),
                s => body["errorType"]
                    .as_str()
                    .map_or_else(|| format!("Http{s}"), str::to_string),
            };
            let message = body["error"]
                .as_str()
                .or(body["message"].as_str())
                .map_or_else(|| text.chars().take(300).collect(), str::to_string);
            let e = CloudError::new(S, OPERATION, &code, message);
            return Err(if status == 429 || status >= 500 {
                e.retryable()
            } else {
                e
            });
        }
        parse_matrix(&body)
    }

    async fn find_workspace(&self, alias: &str) -> CloudResult<Option<AmpWorkspace>> {
        let mut token: Option<String> = None;
        loop {
            let page = idempotent(S, "ListWorkspaces", || {
                self.amp
                    .list_workspaces()
                    .alias(alias)
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            if let Some(w) = page.workspaces().iter().find(|w| w.alias() == Some(alias)) {
                let id = w.workspace_id().to_string();
                let d = idempotent(S, "DescribeWorkspace", || {
                    self.amp.describe_workspace().workspace_id(&id).send()
                })
                .await?;
                let Some(w) = d.workspace() else {
                    return Ok(None);
                };
                return Ok(Some(AmpWorkspace {
                    id: w.workspace_id().to_string(),
                    arn: w.arn().to_string(),
                    alias: w.alias().map(str::to_string),
                    status: w
                        .status()
                        .map(|s| s.status_code().as_str().to_string())
                        .unwrap_or_default(),
                    prometheus_endpoint: w.prometheus_endpoint().map(str::to_string),
                }));
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(None);
            }
        }
    }

    async fn create_workspace(&self, alias: &str, tags: &Tags) -> CloudResult<AmpWorkspace> {
        let out = once(
            S,
            "CreateWorkspace",
            self.amp
                .create_workspace()
                .alias(alias)
                .client_token(super::client_token(tags))
                .set_tags(Some(tags.clone().into_iter().collect()))
                .send(),
        )
        .await?;
        Ok(AmpWorkspace {
            id: out.workspace_id().to_string(),
            arn: out.arn().to_string(),
            alias: Some(alias.to_string()),
            status: out
                .status()
                .map(|s| s.status_code().as_str().to_string())
                .unwrap_or_default(),
            prometheus_endpoint: None,
        })
    }

    async fn describe_grafana(&self, id: &str) -> CloudResult<Option<GrafanaWorkspace>> {
        let out = idempotent("grafana", "DescribeWorkspace", || {
            self.grafana.describe_workspace().workspace_id(id).send()
        })
        .await;
        let out = match out {
            Err(e) if super::errors::is_not_found(&e) => return Ok(None),
            r => r?,
        };
        Ok(out.workspace().map(|w| GrafanaWorkspace {
            id: w.id().to_string(),
            name: w.name().map(str::to_string),
            status: w.status().as_str().to_string(),
            endpoint: w.endpoint().to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_goes_to_the_workspace_or_the_configured_endpoint() {
        let ws = Workspace {
            url: "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1".into(),
            region: "us-west-2".into(),
        };
        let q = RangeQuery {
            query: r#"DCGM_FI_DEV_GPU_UTIL{Hostname=~"a|b"}"#.into(),
            start: 100,
            end: 200,
            step: 60,
        };
        assert_eq!(
            query_url(&ws, &q, None),
            "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/api/v1/query_range?end=200&query=DCGM_FI_DEV_GPU_UTIL%7BHostname%3D~%22a%7Cb%22%7D&start=100&step=60"
        );
        assert!(query_url(&ws, &q, Some("http://127.0.0.1:5000/"))
            .starts_with("http://127.0.0.1:5000/workspaces/ws-1/api/v1/query_range?end=200&"));
    }
}
