//! Who signed a sign-in token: the presigned `GetCallerIdentity` sent to STS as
//! aws-iam-authenticator sends it (`pkg/token/token.go` at
//! 0221afb8e2a5d14a20a93473edc4c2aa7676ce95: a GET of the URL as signed, the deployment header,
//! `Accept: application/json`, redirects not followed), answered in STS's JSON shape
//! (`GetCallerIdentityResponse.GetCallerIdentityResult.{Account,Arn,UserId}`). The SDK has no
//! call for a URL someone else presigned, so it goes out on the adapter's HTTPS client.

use async_trait::async_trait;
use cloud::identity::{principal_arn, Identity, PresignedCall, SignInIdentity, DEPLOYMENT_HEADER};
use cloud::{CloudError, CloudResult};
use serde_json::Value;

use super::Aws;

#[async_trait]
impl Identity for Aws {
    async fn who_signed(
        &self,
        call: &PresignedCall,
        deployment: &str,
    ) -> CloudResult<SignInIdentity> {
        let err = |code: &str, message: String| {
            CloudError::new("sts", "GetCallerIdentity", code, message)
        };
        // Behind an endpoint override (a proxy, an emulator) the URL goes there, still naming
        // the STS host it was signed for: the signature covers `host`.
        let url = match self.config.endpoint_url() {
            Some(base) => {
                let rest = call.url.strip_prefix("https://").unwrap_or(&call.url);
                let path = &rest[rest.find('/').unwrap_or(rest.len())..];
                format!("{}{path}", base.trim_end_matches('/'))
            }
            None => call.url.clone(),
        };
        let response = self
            .identity_http
            .get(&url)
            .header(reqwest::header::HOST, &call.host)
            .header(DEPLOYMENT_HEADER, deployment)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| err("Unreachable", e.to_string()).retryable())?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let error = &body["Error"];
            let code = error["Code"].as_str().unwrap_or("HttpError");
            let message = error["Message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("STS answered {status}"));
            let e = err(code, message);
            return Err(if status.is_server_error() {
                e.retryable()
            } else {
                e
            });
        }
        let result = body.pointer("/GetCallerIdentityResponse/GetCallerIdentityResult");
        let field = |k: &str| {
            result
                .and_then(|r| r[k].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let arn = field("Arn");
        let principal = principal_arn(&arn).map_err(|m| err("UnexpectedIdentity", m))?;
        let user_id = field("UserId");
        let (user_id, session_name) = match user_id.split_once(':') {
            Some((id, session)) => (id.to_string(), Some(session.to_string())),
            None => (user_id, None),
        };
        Ok(SignInIdentity {
            principal_arn: principal,
            account: field("Account"),
            arn,
            user_id,
            session_name,
        })
    }
}
