//! The MLflow port over AWS: MLflow Apps through the SageMaker SDK, and the tracking server's
//! REST API over HTTPS, signed with SigV4 as the `sagemaker-mlflow` service with the app's ARN in
//! `x-mlflow-sm-tracking-server-arn` — what AWS's `sagemaker-mlflow` plugin sends.

use async_trait::async_trait;
use aws_sdk_sagemaker::types::Tag;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::errors::{idempotent, once};
use super::Aws;
use crate::cloud::*;

const S: &str = "sagemaker";
/// The signing name of the tracking servers' REST API.
const TRACKING_SERVICE: &str = "sagemaker-mlflow";
/// Header that routes a REST call to one app.
pub const ARN_HEADER: &str = "x-mlflow-sm-tracking-server-arn";

/// The tracking REST endpoint of an app: `https://<region>.experiments.sagemaker.aws`, unless
/// configured otherwise (a proxy, or a loopback MLflow server in tests).
pub fn tracking_endpoint(arn: &str, configured: Option<&str>) -> CloudResult<String> {
    if let Some(e) = configured {
        return Ok(e.trim_end_matches('/').to_string());
    }
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", "aws" | "aws-us-gov", "sagemaker", region, _, _] if !region.is_empty() => {
            Ok(format!("https://{region}.experiments.sagemaker.aws"))
        }
        _ => Err(CloudError::new(
            TRACKING_SERVICE,
            "Resolve",
            "InvalidArn",
            format!("`{arn}` is not a SageMaker MLflow ARN in a supported partition"),
        )),
    }
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
        use aws_credential_types::provider::ProvideCredentials;
        let operation = call.path;
        let endpoint = tracking_endpoint(arn, self.mlflow_endpoint.as_deref())?;
        let mut url = format!("{endpoint}/api/2.0/mlflow/{}", call.path);
        if !call.query.is_empty() {
            url.push('?');
            url.push_str(&query_string(call.query));
        }
        let body = call
            .body
            .map(|b| serde_json::to_vec(b).unwrap_or_default())
            .unwrap_or_default();
        let provider = self.config.credentials_provider().ok_or_else(|| {
            CloudError::new(
                TRACKING_SERVICE,
                operation,
                "NoCredentials",
                "no credentials provider",
            )
        })?;
        let creds = provider.provide_credentials().await.map_err(|e| {
            CloudError::new(TRACKING_SERVICE, operation, "NoCredentials", e.to_string())
        })?;
        let identity: Identity = creds.into();
        let host = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        let digest: String = Sha256::digest(&body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let method = if call.post { "POST" } else { "GET" };
        let mut headers = vec![
            ("host", host.clone()),
            ("content-type", "application/json".to_string()),
            ("x-amz-content-sha256", digest),
            (ARN_HEADER, arn.to_string()),
        ];
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region_of(arn))
            .name(TRACKING_SERVICE)
            .time(std::time::SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| CloudError::new(TRACKING_SERVICE, operation, "Signing", e.to_string()))?
            .into();
        let signable = SignableRequest::new(
            method,
            url.as_str(),
            headers.iter().map(|(k, v)| (*k, v.as_str())),
            SignableBody::Bytes(&body),
        )
        .map_err(|e| CloudError::new(TRACKING_SERVICE, operation, "Signing", e.to_string()))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| CloudError::new(TRACKING_SERVICE, operation, "Signing", e.to_string()))?
            .into_parts();
        for (k, v) in instructions.headers() {
            headers.push((k, v.to_string()));
        }
        let mut request = if call.post {
            self.http.post(&url).body(body)
        } else {
            self.http.get(&url)
        };
        for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
            request = request.header(*k, v);
        }
        let response = request
            .timeout(std::time::Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| {
                CloudError::new(TRACKING_SERVICE, operation, "Unreachable", e.to_string())
                    .retryable()
            })?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
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
    fn the_tracking_endpoint_follows_the_arn_or_the_configuration() {
        let arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-app/app-abc";
        assert_eq!(
            tracking_endpoint(arn, None).unwrap(),
            "https://eu-west-1.experiments.sagemaker.aws"
        );
        assert_eq!(
            tracking_endpoint(arn, Some("http://127.0.0.1:5000/")).unwrap(),
            "http://127.0.0.1:5000"
        );
        assert!(tracking_endpoint("arn:aws-cn:sagemaker:cn-north-1:1:mlflow-app/x", None).is_err());
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
