//! The ports, one file per port: what the domain asks of AWS and Kubernetes, in shapes that
//! follow the real APIs.

mod eks;
mod governance;
mod hyperpod;
mod iam;
mod kube;
mod logs;
mod metrics;
mod mlflow;
mod network;
mod objects;
mod prices;
mod releases;

pub use eks::*;
pub use governance::*;
pub use hyperpod::*;
pub use iam::*;
pub use kube::*;
pub use logs::*;
pub use metrics::*;
pub use mlflow::*;
pub use network::*;
pub use objects::*;
pub use prices::*;
pub use releases::*;
