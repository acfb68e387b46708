//! EKS bearer tokens for the Kubernetes API: `k8s-aws-v1.` + base64url (no padding) of an STS
//! `GetCallerIdentity` URL presigned with SigV4 (query-string signature, 60 s validity for the
//! presign, header `x-k8s-aws-id: <cluster>` signed). EKS accepts a token for 15 minutes; the
//! cache hands out a fresh one after [`REFRESH_AFTER`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::Engine as _;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// A cached token is replaced after 10 minutes, well inside EKS's 15-minute acceptance window.
pub const REFRESH_AFTER: Duration = Duration::from_secs(600);

/// RFC 3986 unreserved characters stay as they are; everything else is encoded.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The regional STS endpoint the token is presigned for; its DNS suffix follows the partition
/// (China regions are under `amazonaws.com.cn`), or EKS rejects the token.
pub fn sts_host(region: &str) -> String {
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    format!("sts.{region}.{suffix}")
}

/// Builds the token for `cluster` from fixed inputs (pure: the known-answer test calls it).
pub fn eks_token(
    cluster: &str,
    region: &str,
    creds: &Credentials,
    now: SystemTime,
) -> anyhow::Result<String> {
    let host = sts_host(region);
    let base = format!("https://{host}/?Action=GetCallerIdentity&Version=2011-06-15");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(60));
    let identity: Identity = creds.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .context("signing parameters")?
        .into();
    let headers = [("host", host.as_str()), ("x-k8s-aws-id", cluster)];
    let request = SignableRequest::new(
        "GET",
        base.as_str(),
        headers.into_iter(),
        SignableBody::Bytes(&[]),
    )
    .context("signable request")?;
    let (instructions, _) = sign(request, &params).context("presigning")?.into_parts();
    let mut url = base;
    for (name, value) in instructions.params() {
        url.push('&');
        url.push_str(name);
        url.push('=');
        url.extend(utf8_percent_encode(value, QUERY));
    }
    Ok(format!(
        "k8s-aws-v1.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url.as_bytes())
    ))
}

/// Per-cluster token cache over a credentials provider.
pub struct EksTokens {
    provider: SharedCredentialsProvider,
    region: String,
    cache: Mutex<HashMap<String, (String, SystemTime)>>,
}

impl EksTokens {
    pub fn new(provider: SharedCredentialsProvider, region: String) -> Self {
        Self {
            provider,
            region,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A token valid for at least five more minutes at `now`.
    pub async fn token_at(&self, cluster: &str, now: SystemTime) -> anyhow::Result<String> {
        if let Some((token, minted)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(cluster)
        {
            if now.duration_since(*minted).unwrap_or(Duration::MAX) < REFRESH_AFTER {
                return Ok(token.clone());
            }
        }
        let creds = self
            .provider
            .provide_credentials()
            .await
            .context("resolving AWS credentials")?;
        let token = eks_token(cluster, &self.region, &creds, now)?;
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cluster.to_string(), (token.clone(), now));
        Ok(token)
    }
}
