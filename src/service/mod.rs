//! The domain: cluster stages and pipelines. Turns validated requests into durable operations
//! (with idempotency and conflict rules) and answers cluster queries. Handlers call this; it
//! calls the engine and, for validation reads, the cloud ports.

pub mod audit;
pub mod caps;
pub mod cluster;
pub mod costs;
pub mod doctor;
pub mod endpoints;
pub mod evidence;
pub mod features;
pub mod gauges;
pub mod groups;
pub mod logs;
pub mod mlflow;
pub mod people;
pub mod shared;
pub mod spaces;
pub mod start;
pub mod steps;
pub mod storage;
pub mod teams;
pub mod training;
pub mod utilization;
pub mod workloads;

pub use cluster::*;
pub use groups::*;
pub use shared::kind::{FeatureId, OpKind};
pub use shared::resources::ClusterResources;
pub use shared::submit::*;

use steps::{ClusterParams, HyperPodParams, PipelineParams};

/// Settings key of the active cluster.
pub const ACTIVE_CLUSTER: &str = "active-cluster";
