//! Building a cluster's client: a fixed URL, or an EKS endpoint with its CA and an IAM token
//! refreshed in the background; either way on a connection pool whose read buffers stay small.

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use kube::Client;

use crate::token::{EksTokens, REFRESH_AFTER};
use cloud::KubeTarget;

pub(super) fn plain(url: &str) -> anyhow::Result<Client> {
    let uri = url.parse().context("Kubernetes API URL")?;
    client_of(kube::Config::new(uri), None)
}

/// The most a connection's read buffer grows to. hyper's default (about 400 KB) suits one big
/// download; here each cluster keeps its watch connections (and a pooled one for lists) open
/// for good, and each kept the buffer a list page had grown it to: 0.9 MB a cluster of a
/// fleet's memory. Reading a page in 64 KiB pieces costs a few more reads, once per relist.
const READ_BUFFER_MAX: usize = 64 * 1024;

/// A client as kube's `ClientBuilder` makes one (TLS on the process's provider, connect and
/// read timeouts, the base URI, kube's retry of 429/503/504, credentials and extra headers
/// from `config`), on a connection pool whose read buffers stop at [`READ_BUFFER_MAX`]
/// (kube's builder has no say in it). `bearer`: an `Authorization` value read per request.
fn client_of(config: kube::Config, bearer: Option<Arc<RwLock<String>>>) -> anyhow::Result<Client> {
    use kube::client::ConfigExt as _;

    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let https = config
        .rustls_https_connector_with_connector(http)
        .context("the Kubernetes client's TLS")?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let pool = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http1_max_buf_size(READ_BUFFER_MAX)
        .build(connector);
    let bearer = bearer.map(|current| {
        tower::util::MapRequestLayer::new(move |mut req: http::Request<kube::client::Body>| {
            let value = current.read().unwrap_or_else(|e| e.into_inner()).clone();
            if let Ok(v) = http::HeaderValue::from_str(&value) {
                req.headers_mut().insert(http::header::AUTHORIZATION, v);
            }
            req
        })
    });
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = tower::ServiceBuilder::new()
        .option_layer(bearer)
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(
            config
                .auth_layer()
                .context("the Kubernetes client's credentials")?,
        )
        .layer(
            config
                .extra_headers_layer()
                .context("the Kubernetes client's headers")?,
        )
        .map_err(tower::BoxError::from)
        .service(pool);
    Ok(Client::new(service, config.default_namespace))
}

/// A client for an EKS API server: the CA from `DescribeCluster` and an IAM token that a
/// background task replaces before EKS stops accepting it. The task ends with the client.
pub(super) async fn eks(target: &KubeTarget, tokens: Arc<EksTokens>) -> anyhow::Result<Client> {
    use base64::Engine as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;

    let pem = base64::engine::general_purpose::STANDARD
        .decode(target.certificate_authority.trim())
        .context("cluster certificate authority is not base64")?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .context("cluster certificate authority is not PEM")?;
    let mut config = kube::Config::new(target.endpoint.parse().context("EKS endpoint URL")?);
    config.root_cert = Some(roots);
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(295));

    let token = tokens.token_at(&target.cluster, SystemTime::now()).await?;
    let current = Arc::new(RwLock::new(format!("Bearer {token}")));
    spawn_refresher(Arc::downgrade(&current), tokens, target.cluster.clone());
    client_of(config, Some(current))
}

fn spawn_refresher(slot: Weak<RwLock<String>>, tokens: Arc<EksTokens>, cluster: String) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH_AFTER / 2).await;
            let Some(slot) = slot.upgrade() else { return };
            match tokens.token_at(&cluster, SystemTime::now()).await {
                Ok(t) => *slot.write().unwrap_or_else(|e| e.into_inner()) = format!("Bearer {t}"),
                Err(e) => {
                    tracing::warn!(cluster, error = %format!("{e:#}"), "EKS token refresh failed")
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// An API server that answers every request on every connection with `body`, and tells
    /// each request's `Authorization` header (empty when there is none).
    async fn server(body: Vec<u8>) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let body = Arc::new(body);
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (tx, body) = (tx.clone(), body.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = conn.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&seen[..end]).to_string();
                            seen.drain(..end + 4);
                            let auth = head
                                .lines()
                                .find_map(|l| l.strip_prefix("authorization: "))
                                .unwrap_or_default();
                            let _ = tx.send(auth.to_string());
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            conn.write_all(head.as_bytes()).await.unwrap();
                            conn.write_all(&body).await.unwrap();
                        }
                    }
                });
            }
        });
        (url, rx)
    }

    async fn get(client: &Client) -> String {
        let req = http::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(req).await.unwrap()
    }

    #[tokio::test]
    async fn each_request_carries_the_token_current_when_it_is_sent() {
        let (url, mut seen) = server(b"{}".to_vec()).await;
        let current = Arc::new(RwLock::new("Bearer one".to_string()));
        let config = kube::Config::new(url.parse().unwrap());
        let client = client_of(config, Some(current.clone())).unwrap();
        get(&client).await;
        assert_eq!(seen.recv().await.unwrap(), "Bearer one");
        // What the refresher does when EKS's token is about to expire.
        *current.write().unwrap() = "Bearer two".to_string();
        get(&client).await;
        assert_eq!(seen.recv().await.unwrap(), "Bearer two");
    }

    #[tokio::test]
    async fn a_fixed_url_client_reads_answers_far_larger_than_its_read_buffer() {
        // A list page of real pods is several times the buffer's cap: it arrives whole.
        let page: Vec<u8> = (0..READ_BUFFER_MAX * 5 + 7)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let (url, mut seen) = server(page.clone()).await;
        let client = plain(&url).unwrap();
        for _ in 0..2 {
            assert_eq!(get(&client).await.as_bytes(), page.as_slice());
            assert_eq!(seen.recv().await.unwrap(), "", "no credentials are sent");
        }
    }
}
