//! Command line and environment configuration (clap): every flag is also an environment variable.

pub mod reference;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cloud::CloudMode;

#[derive(Debug, Parser)]
#[command(
    name = "instantstart",
    version,
    about = "Out-of-band control plane for SageMaker HyperPod on EKS"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the web UI, REST API and MCP endpoint.
    Serve(Box<ServeConfig>),
    /// Exit 0 when the server at `--bind` answers `/healthz` (the container health check; the
    /// runtime image has no shell or curl).
    Probe {
        #[arg(long, env = "INSTANTSTART_BIND", default_value = "127.0.0.1:3099")]
        bind: SocketAddr,
    },
    /// Ask the running server at `--bind` whether its IAM role may make every call the product
    /// makes (`GET /api/aws/doctor`); print each denied call with its fix, exit 1 if any.
    Doctor {
        #[arg(long, env = "INSTANTSTART_BIND", default_value = "127.0.0.1:3099")]
        bind: SocketAddr,
        /// The server's bearer token, when it has one.
        #[arg(long, env = "INSTANTSTART_TOKEN", hide_env_values = true)]
        token: Option<Secret>,
    },
}

/// A secret that never shows up in `Debug` output or logs.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() < 16 {
            return Err("the token must be at least 16 characters".into());
        }
        Ok(Secret(s.to_string()))
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on. Loopback by default; any other address requires a token.
    #[arg(long, env = "INSTANTSTART_BIND", default_value = "127.0.0.1:3099")]
    pub bind: SocketAddr,

    /// Where the SQLite database lives (default: $XDG_DATA_HOME/instantstart, else
    /// ~/.local/share/instantstart; the container uses /data).
    #[arg(long, env = "INSTANTSTART_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// `aws`: the real account from the standard credential chain. `sandbox`: a built-in
    /// simulated account and clusters, for trying every flow without AWS.
    #[arg(long, env = "INSTANTSTART_CLOUD", value_enum, default_value = "aws")]
    pub cloud: CloudMode,

    /// Bearer token required on every API and MCP request (mandatory off loopback).
    #[arg(long, env = "INSTANTSTART_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// Who may use the control plane: `none` (local single-user: whoever reaches the port,
    /// with the token when there is one) or `iam` (people sign in with their AWS identity, their
    /// agents act as them with personal tokens, administrators create, import and delete
    /// clusters, and each cluster's EKS access entries say what each person may do on it; see
    /// docs/access.md). `iam` needs `--cloud aws`.
    #[arg(
        long,
        env = "INSTANTSTART_IDENTITY",
        value_enum,
        default_value = "none"
    )]
    pub identity: crate::service::people::IdentityMode,

    /// The name sign-in tokens are made for: `aws eks get-token --cluster-name <this>`. The
    /// CloudFormation stack sets its own name, so a token for one deployment opens no other.
    #[arg(
        long,
        env = "INSTANTSTART_DEPLOYMENT_ID",
        default_value = "instantstart"
    )]
    pub deployment_id: String,

    /// Administrators of the deployment (IAM user or role ARNs), added at start to the list
    /// administrators keep. Comma-separated in the environment variable.
    #[arg(long = "admin", env = "INSTANTSTART_ADMINS", value_delimiter = ',')]
    pub admins: Vec<String>,

    /// Extra `Host` values to accept, e.g. the name an SSM port-forward or proxy uses
    /// (`localhost:8080`). Comma-separated in the environment variable.
    #[arg(
        long = "allowed-host",
        env = "INSTANTSTART_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    /// Sandbox: simulated seconds per real second (60 turns a 10-minute EKS creation into 10 s).
    #[arg(long, env = "INSTANTSTART_SANDBOX_TIME_SCALE", default_value_t = 60.0)]
    pub sandbox_time_scale: f64,

    /// Sandbox: injected faults, e.g. `eks:CreateCluster=1,sagemaker:CreateCluster=2,throttle=0.2`.
    #[arg(long, env = "INSTANTSTART_SANDBOX_FAULTS", default_value = "")]
    pub sandbox_faults: String,

    /// The write gate for agents: serve the MCP tools read-only (mutating tools are listed as
    /// such and refused with a problem saying how to allow writes). REST and the UI are
    /// unaffected.
    #[arg(long, env = "INSTANTSTART_MCP_READ_ONLY")]
    pub mcp_read_only: bool,

    /// Phase deadlines overridden by phase name, in seconds: `eks-cluster=1800,*=3600`
    /// (`*`: every other phase). By default each phase has one suited to what it waits for
    /// (EKS 25 min, HyperPod 60 min, an add-on 15 min).
    #[arg(long, env = "INSTANTSTART_PHASE_DEADLINES", default_value = "")]
    pub phase_deadlines: String,

    /// Reach every cluster's Kubernetes API at this URL without credentials, instead of the EKS
    /// endpoint with an IAM token: for an authenticating proxy in front of the API server, or a
    /// Kubernetes API emulator in tests.
    #[arg(long, env = "INSTANTSTART_KUBE_URL")]
    pub kube_url: Option<String>,

    /// Base URL serving the pinned operator release files (KubeRay and KEDA CRDs) by file name,
    /// for accounts without internet egress: an HTTPS mirror (or a loopback one). Unset: the
    /// upstream release URLs (HTTPS); the sandbox uses stand-in CRDs.
    #[arg(long, env = "INSTANTSTART_RELEASE_MIRROR")]
    pub release_mirror: Option<String>,

    /// ARN of a managed policy to set as the permissions boundary of every IAM role the control
    /// plane creates (the CloudFormation template sets it and requires it).
    #[arg(long, env = "INSTANTSTART_PERMISSIONS_BOUNDARY")]
    pub permissions_boundary: Option<String>,

    /// The deployment's shared bucket (the CloudFormation stack's): each cluster keeps its
    /// objects under `<cluster>/` of it, and its roles reach that prefix only. The bucket must
    /// exist and its name begin with `sagemaker-` (HyperPod's rule for lifecycle scripts).
    /// Unset: each cluster gets a bucket of its own, `sagemaker-instantstart-<cluster>-<account>`.
    #[arg(long, env = "INSTANTSTART_SHARED_BUCKET")]
    pub shared_bucket: Option<String>,

    /// Existing buckets (names, or patterns with `*`, comma-separated) that storage claims and
    /// endpoint models may use besides the deployment's own, when the roles carry a permissions
    /// boundary (the CloudFormation template's `DataBuckets`, which its boundary grants). With a
    /// boundary, or in the sandbox, any other bucket is refused before anything is made: the
    /// boundary would cut the S3 CSI driver's access to it. Without one, every bucket is allowed.
    #[arg(
        long = "data-bucket",
        env = "INSTANTSTART_DATA_BUCKETS",
        value_delimiter = ','
    )]
    pub data_buckets: Vec<String>,

    /// Managed features users may enable through the API, UI and agent (comma-separated keys,
    /// e.g. `trainingOperator,containerInsights`). Empty: all of them. Disabling is always allowed.
    #[arg(
        long = "allowed-feature",
        env = "INSTANTSTART_ALLOWED_FEATURES",
        value_delimiter = ','
    )]
    pub allowed_features: Vec<String>,

    /// How often long-running phases look at their resource, in milliseconds
    /// (default 250 in the sandbox, 10000 against AWS).
    #[arg(long, env = "INSTANTSTART_POLL_INTERVAL_MS")]
    pub poll_interval_ms: Option<u64>,

    /// The MLflow tracking REST endpoint, when not `https://<region>.experiments.sagemaker.aws`
    /// (an HTTPS proxy, or a loopback MLflow server).
    #[arg(long, env = "INSTANTSTART_MLFLOW_ENDPOINT")]
    pub mlflow_endpoint: Option<String>,

    /// Log follows (WebSockets that stream a workload's logs) served at once; one more is
    /// refused with 429 until another closes.
    #[arg(long, env = "INSTANTSTART_MAX_LOG_FOLLOWS", default_value_t = 32)]
    pub max_log_follows: usize,

    /// The Prometheus KEDA queries to autoscale deployments, when a request names none: an
    /// in-cluster URL (`http://prometheus-server.monitoring.svc.cluster.local:80`) or an Amazon
    /// Managed Service for Prometheus workspace (`https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…`).
    /// A workspace is also where GPU utilization is read from (the HyperPod observability
    /// add-on's DCGM series).
    #[arg(long, env = "INSTANTSTART_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,

    /// The account's Amazon Managed Grafana workspace (`g-…`, made with IAM Identity Center
    /// sign-in) that the observability feature names to the HyperPod observability add-on; the
    /// utilization charts then link to AWS's dashboards there.
    #[arg(long, env = "INSTANTSTART_GRAFANA_WORKSPACE")]
    pub grafana_workspace: Option<String>,

    /// Where training pods install the HyperPod elastic agent and the MLflow plugin at start:
    /// unset for PyPI, a package index URL the cluster can reach (a mirror or proxy), or `off`
    /// to install nothing (images must then carry both; see recipes/elastic-agent.Dockerfile).
    #[arg(long, env = "INSTANTSTART_POD_PACKAGE_INDEX")]
    pub pod_package_index: Option<String>,

    /// How log lines are written: `text` for people, `json` (one object per line, with the
    /// request id of the request a line belongs to) for a log pipeline.
    #[arg(long, env = "INSTANTSTART_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// How many days the audit trail keeps an entry (`0`: forever). Older entries are removed
    /// at start and once a day.
    #[arg(long, env = "INSTANTSTART_AUDIT_RETENTION_DAYS", default_value_t = 400)]
    pub audit_retention_days: u32,

    /// Connections held at once and how long a request head may take (not a flag: the
    /// defaults hold; tests shorten the deadline).
    #[arg(skip)]
    pub limits: ConnLimits,
}

/// How many connections the server holds, and how long a request head may take.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted from when the
    /// server waits for them: a slow client, or a keep-alive connection left idle, is closed.
    pub header_timeout: std::time::Duration,
    /// Event WebSockets (`/api/events`, one per open browser tab) held at once.
    pub max_event_streams: usize,
    /// Operation long-polls (`?wait=`) waiting at once; one more is answered at once.
    pub max_waiters: usize,
    /// MCP sessions open at once (an idle one ends after five minutes).
    pub max_mcp_sessions: usize,
    /// Log snapshots (`GET …/logs`, up to 1 MiB from each of up to 64 pods) read at once.
    pub max_log_snapshots: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: std::time::Duration::from_secs(10),
            max_event_streams: 64,
            max_waiters: 256,
            max_mcp_sessions: 64,
            max_log_snapshots: 16,
        }
    }
}

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl ServeConfig {
    /// The data directory, with the documented default.
    pub fn data_dir(&self) -> PathBuf {
        if let Some(d) = &self.data_dir {
            return d.clone();
        }
        if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            return PathBuf::from(xdg).join("instantstart");
        }
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".local/share/instantstart"),
            None => PathBuf::from(".instantstart"),
        }
    }

    /// Defaults for tests and embedding: sandbox on an ephemeral loopback port.
    pub fn sandbox(data_dir: PathBuf) -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: Some(data_dir),
            cloud: CloudMode::Sandbox,
            token: None,
            identity: crate::service::people::IdentityMode::None,
            deployment_id: "instantstart".into(),
            admins: Vec::new(),
            allowed_hosts: Vec::new(),
            sandbox_time_scale: 60.0,
            sandbox_faults: String::new(),
            phase_deadlines: String::new(),
            mcp_read_only: false,
            kube_url: None,
            release_mirror: None,
            allowed_features: Vec::new(),
            permissions_boundary: None,
            shared_bucket: None,
            data_buckets: Vec::new(),
            poll_interval_ms: None,
            max_log_follows: 32,
            mlflow_endpoint: None,
            prometheus_url: None,
            grafana_workspace: None,
            pod_package_index: None,
            log_format: LogFormat::Text,
            audit_retention_days: 400,
            limits: ConnLimits::default(),
        }
    }
}
