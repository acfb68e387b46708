//! The HTTPS adapter of the release port: GETs a pinned upstream file (or the mirror's copy),
//! bounded in size and time. Plain HTTP is refused except to a loopback mirror.

use std::time::Duration;

use async_trait::async_trait;

use super::{CloudError, CloudResult, Releases};

/// Largest release file accepted (the Ray CRDs are about 1.4 MB each).
const MAX_BYTES: usize = 16 * 1024 * 1024;

pub struct HttpReleases {
    client: reqwest::Client,
    /// Base URL serving every release file by its name, for accounts without internet egress.
    mirror: Option<String>,
}

impl HttpReleases {
    pub fn new(mirror: Option<String>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        Self {
            client,
            mirror: mirror.map(|m| m.trim_end_matches('/').to_string()),
        }
    }
}

/// HTTPS anywhere; plain HTTP only to a loopback address (a local mirror or a test server).
pub fn allowed_url(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

fn error(url: &str, code: &str, message: String, retryable: bool) -> CloudError {
    let e = CloudError::new("https", "GetReleaseFile", code, format!("{url}: {message}"));
    if retryable {
        e.retryable()
    } else {
        e
    }
}

#[async_trait]
impl Releases for HttpReleases {
    async fn fetch(&self, base: &str, file: &str) -> CloudResult<String> {
        let url = match &self.mirror {
            Some(m) => format!("{m}/{file}"),
            None => format!("{}/{file}", base.trim_end_matches('/')),
        };
        if !allowed_url(&url) {
            return Err(error(
                &url,
                "InsecureUrl",
                "only HTTPS (or a loopback mirror) is fetched".into(),
                false,
            ));
        }
        let response = self
            .client
            .get(&url)
            .send()
            .await
            .map_err(|e| error(&url, "Unreachable", e.to_string(), true))?;
        let status = response.status();
        if !status.is_success() {
            return Err(error(
                &url,
                &format!("Http{}", status.as_u16()),
                format!("answered {status}"),
                status.is_server_error() || status.as_u16() == 429,
            ));
        }
        if response
            .content_length()
            .is_some_and(|n| n as usize > MAX_BYTES)
        {
            return Err(error(
                &url,
                "TooLarge",
                format!("more than {MAX_BYTES} bytes"),
                false,
            ));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| error(&url, "Unreachable", e.to_string(), true))?;
        if bytes.len() > MAX_BYTES {
            return Err(error(
                &url,
                "TooLarge",
                format!("more than {MAX_BYTES} bytes"),
                false,
            ));
        }
        String::from_utf8(bytes.to_vec())
            .map_err(|_| error(&url, "NotText", "the file is not UTF-8 text".into(), false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_a_loopback_mirror_is_fetched() {
        assert!(allowed_url(
            "https://raw.githubusercontent.com/ray-project/kuberay/v1.4.2/x.yaml"
        ));
        assert!(allowed_url("http://127.0.0.1:8080/ray.io_rayjobs.yaml"));
        assert!(allowed_url("http://localhost/x"));
        assert!(!allowed_url("http://example.com/x"));
        assert!(!allowed_url("http://127.0.0.1.evil.com/x"));
        assert!(!allowed_url("file:///etc/passwd"));
    }
}
