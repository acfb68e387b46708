//! HTTPS calls the SDK has no client for, signed with SigV4 from the same credentials: the
//! MLflow tracking REST API and Amazon Managed Service for Prometheus's query API.

use aws_credential_types::provider::ProvideCredentials as _;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use sha2::{Digest, Sha256};

use super::Aws;
use cloud::{CloudError, CloudResult};

/// One signed call: where it goes and what signs it.
pub struct SignedCall<'a> {
    /// The service named in errors (`sagemaker-mlflow`, `aps`).
    pub service: &'a str,
    pub operation: &'a str,
    /// The SigV4 signing name and region.
    pub signing_name: &'a str,
    pub region: &'a str,
    /// `https://host/path?query`.
    pub url: &'a str,
    /// A POST with this body; a GET when `None`.
    pub body: Option<Vec<u8>>,
    /// Headers signed besides `host` and `x-amz-content-sha256`.
    pub headers: Vec<(&'a str, String)>,
}

impl Aws {
    /// Sends a signed call and returns its status and body. Unreachable is retryable.
    pub(super) async fn signed(&self, call: SignedCall<'_>) -> CloudResult<(u16, String)> {
        let err = |code: &str, message: String| {
            CloudError::new(call.service, call.operation, code, message)
        };
        let provider = self
            .config
            .credentials_provider()
            .ok_or_else(|| err("NoCredentials", "no credentials provider".into()))?;
        let creds = provider
            .provide_credentials()
            .await
            .map_err(|e| err("NoCredentials", e.to_string()))?;
        let identity: Identity = creds.into();
        let host = call
            .url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        let body = call.body.clone().unwrap_or_default();
        let digest: String = Sha256::digest(&body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let method = if call.body.is_some() { "POST" } else { "GET" };
        let mut headers = vec![("host", host), ("x-amz-content-sha256", digest)];
        headers.extend(call.headers.iter().cloned());
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(call.region)
            .name(call.signing_name)
            .time(std::time::SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| err("Signing", e.to_string()))?
            .into();
        let signable = SignableRequest::new(
            method,
            call.url,
            headers.iter().map(|(k, v)| (*k, v.as_str())),
            SignableBody::Bytes(&body),
        )
        .map_err(|e| err("Signing", e.to_string()))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| err("Signing", e.to_string()))?
            .into_parts();
        for (k, v) in instructions.headers() {
            headers.push((k, v.to_string()));
        }
        let mut request = match call.body {
            Some(b) => self.http.post(call.url).body(b),
            None => self.http.get(call.url),
        };
        for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
            request = request.header(*k, v);
        }
        let response = request
            .timeout(std::time::Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| err("Unreachable", e.to_string()).retryable())?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.unwrap_or_default()))
    }
}
