//! Ports: the traits through which the domain reaches AWS and Kubernetes.
//!
//! ```text
//!   service/, ops/  ──►  Cloud { network, eks, hyperpod, iam, objects, quotas, kube }
//!                              │
//!                 ┌────────────┼─────────────┐
//!              aws/ (SDK)   kube/ (kube-rs)  sandbox/ (in-process, SQLite-backed)
//! ```
//!
//! The shapes follow the real APIs (EC2, EKS, SageMaker, IAM, S3, Service Quotas, the Kubernetes
//! API) so that each SDK adapter is a thin translation; no SDK type crosses this boundary.

pub mod calls;
pub mod clock;
mod common;
pub mod identity;
pub mod images;
pub mod instances;
pub mod list_prices;
pub mod metrics;
pub mod policy;
mod ports;
pub mod retry;
pub mod unavailable;
pub mod web;
pub mod workspace_templates;

pub use common::*;
pub use instances::*;
pub use ports::*;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Every port, as one handle the engine and services share.
#[derive(Clone)]
pub struct Cloud {
    /// `sandbox` or `aws`: shown on `/healthz` and in a response header.
    pub mode: CloudMode,
    pub network: Arc<dyn Network>,
    pub eks: Arc<dyn Eks>,
    pub hyperpod: Arc<dyn HyperPod>,
    pub iam: Arc<dyn Iam>,
    pub objects: Arc<dyn ObjectStore>,
    pub quotas: Arc<dyn Quotas>,
    pub kube: Arc<dyn Kube>,
    /// Managed MLflow (SageMaker AI MLflow Apps and their tracking servers).
    pub mlflow: Arc<dyn Mlflow>,
    /// HyperPod task governance (scheduler configs, compute quotas).
    pub governance: Arc<dyn Governance>,
    /// CloudWatch Logs, read only (what HyperPod's nodes and lifecycle scripts wrote).
    pub logs: Arc<dyn Logs>,
    /// Prometheus range queries (Amazon Managed Service for Prometheus), read only.
    pub metrics: Arc<dyn Metrics>,
    /// The AWS Price List, read only (HyperPod's on-demand prices).
    pub prices: Arc<dyn PriceList>,
    /// STS, asked who signed a sign-in token.
    pub identity: Arc<dyn identity::Identity>,
    /// Upstream release files (operator CRDs).
    pub releases: Arc<dyn Releases>,
    /// The bucket this deployment was given (the CloudFormation stack's), when it was: every
    /// cluster then keeps its objects under its own prefix of it instead of in a bucket of its
    /// own. A setting of the deployment, not a port: the adapters never read it.
    pub shared_bucket: Option<Arc<str>>,
    /// When the roles the control plane makes carry a permissions boundary (and always in the
    /// sandbox, whose roles carry the stack's): the bucket patterns beyond the deployment's own
    /// that the boundary grants. `None`: no boundary, every bucket reachable. A setting too.
    pub data_buckets: Option<Arc<[String]>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CloudMode {
    /// The real AWS account from the standard credential chain.
    Aws,
    /// The built-in simulated account and clusters.
    Sandbox,
}

impl CloudMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CloudMode::Aws => "aws",
            CloudMode::Sandbox => "sandbox",
        }
    }
}
