//! The MLflow port over AWS: MLflow Apps through the SageMaker SDK, and their MLflow REST API
//! over HTTPS, signed with SigV4 and routed by the ARN in a header — host, header and signing
//! name chosen by the ARN's resource type exactly as AWS's `sagemaker-mlflow` plugin (0.3) does
//! (`mlflow_sagemaker_helpers.py`, `mlflow_sagemaker_request_header_provider.py`,
//! `auth_provider.py`).

use async_trait::async_trait;
use aws_sdk_sagemaker::types::Tag;
use serde_json::Value;

use super::errors::{idempotent, once};
use super::signed::SignedCall;
use super::Aws;
use cloud::*;

const S: &str = "sagemaker";
/// The service named in the errors of the REST calls.
const TRACKING_SERVICE: &str = "sagemaker-mlflow";

/// Where and how one MLflow ARN's REST calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingHost {
    /// `https://…`, without a trailing slash.
    pub endpoint: String,
    /// The header that routes a call to this app or server, carrying its ARN.
    pub arn_header: &'static str,
    /// The SigV4 signing name.
    pub signing_name: &'static str,
}

/// The REST endpoint, routing header and signing name of an MLflow ARN, as the plugin picks
/// them: a tracking server `https://<region>.experiments.sagemaker.aws`,
/// `x-mlflow-sm-tracking-server-arn`, `sagemaker-mlflow`; an MLflow App
/// `https://mlflow.sagemaker.<region>.app.aws`, `x-sm-mlflow-app-arn`, `sagemaker`. A configured
/// endpoint (a proxy, or a loopback MLflow server in tests) replaces only the host, as
/// `SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT` does for the plugin.
pub fn tracking_host(arn: &str, configured: Option<&str>) -> CloudResult<TrackingHost> {
    let invalid = || {
        CloudError::new(
            TRACKING_SERVICE,
            "Resolve",
            "InvalidArn",
            format!("`{arn}` is not a SageMaker MLflow ARN in a supported partition"),
        )
    };
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ["arn", "aws" | "aws-us-gov", "sagemaker", region, _, resource] = parts.as_slice() else {
        return Err(invalid());
    };
    let (kind, id) = resource.split_once('/').ok_or_else(invalid)?;
    if region.is_empty() || id.is_empty() {
        return Err(invalid());
    }
    let (endpoint, arn_header, signing_name) = match kind {
        "mlflow-tracking-server" => (
            format!("https://{region}.experiments.sagemaker.aws"),
            "x-mlflow-sm-tracking-server-arn",
            "sagemaker-mlflow",
        ),
        "mlflow-app" => (
            format!("https://mlflow.sagemaker.{region}.app.aws"),
            "x-sm-mlflow-app-arn",
            "sagemaker",
        ),
        _ => return Err(invalid()),
    };
    Ok(TrackingHost {
        endpoint: configured
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or(endpoint),
        arn_header,
        signing_name,
    })
}

fn region_of(arn: &str) -> &str {
    arn.split(':').nth(3).unwrap_or_default()
}

fn query_string(query: &[(&str, &str)]) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    query
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// MLflow's error body (`{"error_code": …, "message": …}`) as a cloud error.
fn tracking_error(status: u16, operation: &str, body: &str) -> CloudError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = match parsed["error_code"].as_str() {
        Some("RESOURCE_DOES_NOT_EXIST") => "NotFound".to_string(),
        Some(c) => c.to_string(),
        None => format!("Http{status}"),
    };
    let message = parsed["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(300).collect());
    let e = CloudError::new(TRACKING_SERVICE, operation, &code, message);
    if status == 429 || status >= 500 {
        e.retryable()
    } else {
        e
    }
}

#[async_trait]
impl Mlflow for Aws {
    async fn find_app(&self, name: &str) -> CloudResult<Option<MlflowApp>> {
        let mut token: Option<String> = None;
        loop {
            let page = idempotent(S, "ListMlflowApps", || {
                self.sagemaker
                    .list_mlflow_apps()
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            if let Some(found) = page.summaries().iter().find(|a| a.name() == Some(name)) {
                let arn = found.arn().unwrap_or_default().to_string();
                let out = idempotent(S, "DescribeMlflowApp", || {
                    self.sagemaker.describe_mlflow_app().arn(&arn).send()
                })
                .await?;
                return Ok(Some(MlflowApp {
                    name: name.to_string(),
                    status: out
                        .status()
                        .or(found.status())
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "Creating".into()),
                    artifact_store: out.artifact_store_uri().map(str::to_string),
                    mlflow_version: out
                        .mlflow_version()
                        .or(found.mlflow_version())
                        .map(str::to_string),
                    arn,
                }));
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(None);
            }
        }
    }

    async fn create_app(&self, req: &CreateMlflowApp<'_>) -> CloudResult<String> {
        let tags: Vec<Tag> = req
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let out = once(
            S,
            "CreateMlflowApp",
            self.sagemaker
                .create_mlflow_app()
                .name(req.name)
                .artifact_store_uri(req.artifact_store)
                .role_arn(req.role_arn)
                .set_tags(Some(tags))
                .send(),
        )
        .await?;
        out.arn().map(str::to_string).ok_or_else(|| {
            CloudError::new(S, "CreateMlflowApp", "NoArn", "the answer carried no ARN")
        })
    }

    async fn presigned_url(&self, arn: &str, expires_in: u32) -> CloudResult<String> {
        let out = idempotent(S, "CreatePresignedMlflowAppUrl", || {
            self.sagemaker
                .create_presigned_mlflow_app_url()
                .arn(arn)
                .expires_in_seconds(i32::try_from(expires_in).unwrap_or(300))
                .send()
        })
        .await?;
        out.authorized_url().map(str::to_string).ok_or_else(|| {
            CloudError::new(S, "CreatePresignedMlflowAppUrl", "NoUrl", "no URL returned")
        })
    }

    async fn tracking(&self, arn: &str, call: TrackingCall<'_>) -> CloudResult<Value> {
        let operation = call.path;
        let to = tracking_host(arn, self.mlflow_endpoint.as_deref())?;
        let mut url = format!("{}/api/2.0/mlflow/{}", to.endpoint, call.path);
        if !call.query.is_empty() {
            url.push('?');
            url.push_str(&query_string(call.query));
        }
        let body = call
            .body
            .map(|b| serde_json::to_vec(b).unwrap_or_default())
            .unwrap_or_default();
        let (status, text) = self
            .signed(SignedCall {
                service: TRACKING_SERVICE,
                operation,
                signing_name: to.signing_name,
                region: region_of(arn),
                url: &url,
                body: call.post.then_some(body),
                headers: vec![
                    ("content-type", "application/json".to_string()),
                    (to.arn_header, arn.to_string()),
                ],
            })
            .await?;
        if !(200..300).contains(&status) {
            return Err(tracking_error(status, operation, &text));
        }
        serde_json::from_str(&text)
            .map_err(|e| CloudError::new(TRACKING_SERVICE, operation, "Decode", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tracking_host_follows_the_arns_resource_type_as_the_plugin_does() {
        let arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-app/app-abc";
        assert_eq!(
            tracking_host(arn, None).unwrap(),
            TrackingHost {
                endpoint: "https://mlflow.sagemaker.eu-west-1.app.aws".into(),
                arn_header: "x-sm-mlflow-app-arn",
                signing_name: "sagemaker",
            }
        );
        let server = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/ts";
        assert_eq!(
            tracking_host(server, None).unwrap(),
            TrackingHost {
                endpoint: "https://eu-west-1.experiments.sagemaker.aws".into(),
                arn_header: "x-mlflow-sm-tracking-server-arn",
                signing_name: "sagemaker-mlflow",
            }
        );
        let proxied = tracking_host(arn, Some("http://127.0.0.1:5000/")).unwrap();
        assert_eq!(proxied.endpoint, "http://127.0.0.1:5000");
        assert_eq!(proxied.arn_header, "x-sm-mlflow-app-arn");
        for bad in [
            "arn:aws-cn:sagemaker:cn-north-1:1:mlflow-app/x",
            "arn:aws:sagemaker:eu-west-1:1:endpoint/x",
            "arn:aws:sagemaker:eu-west-1:1:mlflow-app/",
            "arn:aws:sagemaker:eu-west-1:1",
        ] {
            assert!(tracking_host(bad, None).is_err(), "{bad}");
        }
        assert_eq!(region_of(arn), "eu-west-1");
        let e = tracking_error(
            404,
            "runs/get",
            r#"{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"Run 'x' not found"}"#,
        );
        assert_eq!((e.code.as_str(), e.retryable), ("NotFound", false));
        assert!(tracking_error(503, "runs/search", "busy").retryable);
    }
}
