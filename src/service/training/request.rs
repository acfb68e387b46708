//! The training-job request as it goes over the wire: the submission, its recovery budget,
//! hang detection and elasticity, and where the pods' packages (the elastic agent) come from.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/clusters/{name}/training-jobs`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrainingJobRequest {
    /// Job name: a DNS label of at most 50 characters (47 for recipes that run on KubeRay),
    /// unique on the cluster.
    #[schema(pattern = r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$")]
    pub job_name: String,
    /// `pytorch`, `llama-factory`, `ms-swift` or `verl` (see `GET /api/recipes`).
    #[schema(pattern = "^(pytorch|llama-factory|ms-swift|verl)$")]
    pub recipe: String,
    /// An instance type of one of the cluster's instance groups; each node runs one pod with
    /// all its GPUs.
    pub instance_type: String,
    /// Nodes (default 1).
    pub node_count: Option<i64>,
    /// The training script under `/s3` (recipe `pytorch`).
    #[schema(pattern = r"^/s3(/[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,99}){1,5}/?$")]
    pub script: Option<String>,
    /// Model directory under `/s3`.
    #[schema(pattern = r"^/s3(/[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,99}){1,5}/?$")]
    pub model: Option<String>,
    /// Dataset location under `/s3`.
    #[schema(pattern = r"^/s3(/[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,99}){1,5}/?$")]
    pub dataset: Option<String>,
    /// Output location under `/s3` (default `/s3/outputs/<name>`).
    #[schema(pattern = r"^/s3(/[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,99}){1,5}/?$")]
    pub output: Option<String>,
    /// Extra arguments appended to the recipe's command (a list: no shell).
    pub args: Option<Vec<String>>,
    /// Overrides the recipe's pinned image.
    pub image: Option<String>,
    /// The recovery budget (HyperPodPyTorchJob recipes; default: 3 retries, 2 restarts before a
    /// full-job restart, 1 full-job restart per hour).
    pub recovery: Option<RecoveryBudget>,
    /// Hang and slowness detection from the job's log (HyperPodPyTorchJob recipes).
    pub monitoring: Option<HangDetection>,
    /// Elastic training between a minimum and a maximum node count (HyperPodPyTorchJob recipes).
    pub elastic: Option<Elastic>,
    /// Default `none`.
    pub checkpointing: Option<Checkpointing>,
    /// Where the HyperPod elastic agent (`hyperpodrun`) comes from (HyperPodPyTorchJob
    /// recipes): `install` (default: an init container installs it at pod start, with the
    /// image's own Python) or `bundled` (the image carries it, e.g. one built from
    /// `recipes/elastic-agent.Dockerfile`).
    pub elastic_agent: Option<ElasticAgent>,
    /// The team it runs as (task governance): the job goes to namespace `hyperpod-ns-<team>`
    /// and its LocalQueue. Required on a cluster whose teams share it.
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub team: Option<String>,
    /// A priority class of the cluster's scheduling policy (with `team`).
    #[schema(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    pub priority: Option<String>,
}

/// How a job's checkpoints are kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Checkpointing {
    /// The job saves its own (under `/s3`, for instance).
    #[default]
    None,
    /// The cluster's managed tiered checkpointing (a feature to enable first).
    ManagedTiered,
}

/// Where a job's elastic agent comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ElasticAgent {
    /// Installed at pod start into a volume the training container shares.
    #[default]
    Install,
    /// Already on the image's path.
    Bundled,
}

/// What pods may install at start (the elastic agent, the MLflow plugin), from where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PodPackages {
    /// From PyPI.
    #[default]
    PyPi,
    /// From this package index (a mirror or proxy the cluster can reach).
    Index(String),
    /// Nothing: images must carry what they run.
    Off,
}

impl PodPackages {
    /// `--pod-package-index`: unset is PyPI, `off` installs nothing, else an index URL.
    pub fn parse(setting: Option<&str>) -> anyhow::Result<Self> {
        Ok(match setting.map(str::trim) {
            None | Some("") => Self::PyPi,
            Some("off") => Self::Off,
            Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
                Self::Index(url.trim_end_matches('/').to_string())
            }
            Some(other) => anyhow::bail!(
                "INSTANTSTART_POD_PACKAGE_INDEX: `{other}` is neither `off` nor an http(s) package index URL"
            ),
        })
    }

    pub(super) fn index(&self) -> Option<&str> {
        match self {
            Self::Index(url) => Some(url),
            _ => None,
        }
    }
}

/// How many failures a job may survive, as the training operator counts them.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecoveryBudget {
    /// Retries of the whole job before it fails (`runPolicy.jobMaxRetryCount`).
    pub job_max_retry_count: u32,
    /// Pod-level restarts before a full-job restart.
    pub restarts_before_full_job_restart: Option<u32>,
    /// Full-job restarts allowed within an evaluation period.
    pub max_full_job_restarts: Option<u32>,
    /// The period the restart limits are counted in (seconds, default 3600).
    #[serde(default = "default_eval_period")]
    pub eval_period_seconds: u32,
    /// Nodes that failed repeatedly to keep out of the next full-job restart.
    pub repeat_offenders_to_avoid: Option<u32>,
}

fn default_eval_period() -> u32 {
    3600
}

impl Default for RecoveryBudget {
    fn default() -> Self {
        Self {
            job_max_retry_count: 3,
            restarts_before_full_job_restart: Some(2),
            max_full_job_restarts: Some(1),
            eval_period_seconds: 3600,
            repeat_offenders_to_avoid: None,
        }
    }
}

/// A log rule the operator evaluates: no match within the start cut-off, or none within the
/// recurring frequency, marks the job hanging; a metric captured by the pattern past the
/// threshold marks it slow. Either leads to a restart within the budget.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HangDetection {
    /// A regular expression matching the job's progress lines (optionally one capturing group
    /// with a number, e.g. `.*throughput: ([0-9.]+).*`).
    pub log_pattern: String,
    /// Seconds to the first match.
    pub start_cutoff_seconds: Option<u32>,
    /// Seconds allowed between two matches.
    pub recurring_frequency_seconds: Option<u32>,
    /// Threshold for the captured number (with `operator`).
    pub metric_threshold: Option<i64>,
    /// `gt`, `lt`, `eq`, `gteq` or `lteq`.
    pub operator: Option<String>,
}

/// Elastic training: the job runs on between `minNodes` and `maxNodes` nodes.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Elastic {
    pub min_nodes: u32,
    pub max_nodes: u32,
}
