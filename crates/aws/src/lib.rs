//! The real AWS adapter: every port implemented with aws-sdk-rust (EC2, EKS, SageMaker, IAM, STS,
//! S3, Service Quotas, the Price List). Credentials and region come from the standard chain;
//! `AWS_ENDPOINT_URL` (and the per-service variants) are honoured, which is how tests point it at moto.
//!
//! SDK-level retries are off: [`errors::idempotent`] retries reads, deletes and "ensure" calls,
//! while creates run once and, on a transient failure, the engine looks the resource up before
//! acting again — a retried create is how duplicates are born.

mod ec2;
mod ec2_kinds;
mod eks;
pub mod errors;
mod governance;
mod iam;
mod identity;
mod logs;
mod metrics;
pub mod mlflow;
pub mod pricing;
mod s3;
mod sagemaker;
mod sagemaker_kinds;
mod signed;

use std::sync::Arc;

use aws_config::retry::RetryConfig;
use aws_config::BehaviorVersion;

use cloud::{Cloud, CloudMode, Tags, CLUSTER_TAG};

/// The SDK's configuration loader (standard credential and region chains) with its HTTPS client
/// on rustls and `ring`, the TLS stack kube and reqwest use too: the SDK's default client would
/// bring a second crypto library (aws-lc, ~2.5 MiB of the binary) for the same job.
pub fn config_loader() -> aws_config::ConfigLoader {
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest()).http_client(https)
}

/// One client per service, built from one SDK configuration.
pub struct Aws {
    pub region: String,
    pub ec2: aws_sdk_ec2::Client,
    pub logs: aws_sdk_cloudwatchlogs::Client,
    pub amp: aws_sdk_amp::Client,
    pub grafana: aws_sdk_grafana::Client,
    pub eks: aws_sdk_eks::Client,
    pub sagemaker: aws_sdk_sagemaker::Client,
    pub iam: aws_sdk_iam::Client,
    pub sts: aws_sdk_sts::Client,
    pub s3: aws_sdk_s3::Client,
    pub quotas: aws_sdk_servicequotas::Client,
    /// The Price List, on the endpoint nearest the region (it answers in three regions only).
    pub pricing: aws_sdk_pricing::Client,
    pub config: aws_config::SdkConfig,
    /// Managed policy set as the permissions boundary of every role this adapter creates, so
    /// the control plane can never mint a role more powerful than the boundary allows.
    pub permissions_boundary: Option<String>,
    /// The MLflow tracking REST endpoint, when not the regional one (a proxy; tests).
    pub mlflow_endpoint: Option<String>,
    /// HTTPS client of the MLflow tracking REST API (the SDK has none for it).
    pub http: reqwest::Client,
    /// HTTPS client of sign-in checks: follows no redirect (a token's URL is sent as signed,
    /// to the STS host it names, or not at all).
    pub identity_http: reqwest::Client,
    /// The account the credentials belong to, asked of STS once: every S3 call names it as
    /// the bucket's expected owner.
    pub account: tokio::sync::OnceCell<String>,
}

impl Aws {
    /// Loads the standard configuration. `None` when no region can be found.
    pub async fn load(
        permissions_boundary: Option<String>,
        mlflow_endpoint: Option<String>,
    ) -> Option<Arc<Self>> {
        let config = config_loader()
            .retry_config(RetryConfig::disabled())
            .load()
            .await;
        let mut aws = Self::from_config(config)?;
        aws.permissions_boundary = permissions_boundary;
        aws.mlflow_endpoint = mlflow_endpoint;
        Some(Arc::new(aws))
    }

    pub fn from_config(config: aws_config::SdkConfig) -> Option<Self> {
        let region = config.region()?.to_string();
        // A custom endpoint (moto, a proxy) may not resolve virtual-hosted bucket names.
        let s3_conf = aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(config.endpoint_url().is_some())
            .build();
        let pricing_region = pricing::price_list_region(&region);
        Some(Self {
            region,
            ec2: aws_sdk_ec2::Client::new(&config),
            logs: aws_sdk_cloudwatchlogs::Client::new(&config),
            amp: aws_sdk_amp::Client::new(&config),
            grafana: aws_sdk_grafana::Client::new(&config),
            eks: aws_sdk_eks::Client::new(&config),
            sagemaker: aws_sdk_sagemaker::Client::new(&config),
            iam: aws_sdk_iam::Client::new(&config),
            sts: aws_sdk_sts::Client::new(&config),
            s3: aws_sdk_s3::Client::from_conf(s3_conf),
            quotas: aws_sdk_servicequotas::Client::new(&config),
            pricing: aws_sdk_pricing::Client::from_conf(
                aws_sdk_pricing::config::Builder::from(&config)
                    .region(aws_config::Region::new(pricing_region))
                    .build(),
            ),
            config,
            permissions_boundary: None,
            mlflow_endpoint: None,
            http: reqwest::Client::new(),
            identity_http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            account: tokio::sync::OnceCell::new(),
        })
    }

    /// Whether credentials can be resolved (bounded: the instance-metadata lookup can hang).
    pub async fn check_credentials(&self) -> Result<(), String> {
        use aws_credential_types::provider::ProvideCredentials;
        let Some(provider) = self.config.credentials_provider() else {
            return Err("no credentials provider".into());
        };
        match tokio::time::timeout(
            std::time::Duration::from_secs(5),
            provider.provide_credentials(),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out looking for credentials".into()),
        }
    }

    /// Every port, with Kubernetes supplied separately (it needs per-cluster clients).
    pub fn cloud(self: &Arc<Self>, kube: Arc<dyn cloud::Kube>) -> Cloud {
        Cloud {
            mode: CloudMode::Aws,
            network: self.clone(),
            eks: self.clone(),
            hyperpod: self.clone(),
            iam: self.clone(),
            objects: self.clone(),
            quotas: self.clone(),
            mlflow: self.clone(),
            governance: self.clone(),
            logs: self.clone(),
            metrics: self.clone(),
            prices: self.clone(),
            identity: self.clone(),
            kube,
            releases: Arc::new(cloud::web::HttpReleases::new(None)),
            shared_bucket: None,
            data_buckets: None,
        }
    }
}

/// A deterministic client token (≤ 64 characters) for APIs that accept one, derived from the
/// resource's tags so a repeated create returns the same resource instead of a second one.
pub(crate) fn client_token(tags: &Tags) -> String {
    use sha2::{Digest, Sha256};
    let seed = format!(
        "{}/{}",
        tags.get(CLUSTER_TAG).map(String::as_str).unwrap_or(""),
        tags.get(cloud::ROLE_TAG).map(String::as_str).unwrap_or("")
    );
    let digest = Sha256::digest(seed.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
