//! The domain: cluster stages and pipelines. Turns validated requests into durable operations
//! (with idempotency and conflict rules) and answers cluster queries. Handlers call this; it
//! calls the engine and, for validation reads, the cloud ports.

pub mod arn;
pub mod audit;
pub mod bucket;
pub mod caps;
pub mod costs;
pub mod dashboards;
pub mod doctor;
pub mod endpoints;
pub mod evidence;
pub mod gauges;
mod groups;
pub mod incluster;
pub mod kind;
pub mod labels;
pub mod logs;
pub mod mlflow;
mod nodes;
mod params;
mod preflight;
pub mod reads;
mod records;
mod requests;
pub mod resources;
pub mod spaces;
pub mod start;
pub mod steps;
mod submit;
pub mod subnets;
pub mod teams;
pub mod training;
pub mod utilization;
pub mod validate;
mod views;
pub mod workloads;

pub use groups::*;
pub use kind::{FeatureId, OpKind};
pub use nodes::*;
pub use params::*;
pub use preflight::*;
pub use records::*;
pub use requests::*;
pub use resources::ClusterResources;
pub use submit::*;
pub use views::*;

use steps::{ClusterParams, HyperPodParams, PipelineParams};

/// Settings key of the active cluster.
pub const ACTIVE_CLUSTER: &str = "active-cluster";
