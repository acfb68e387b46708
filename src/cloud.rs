//! The ports and the adapters behind them, under the one name the rest of the server uses:
//! each is a crate of `crates/` (the ports, `aws`, `kube`, `sandbox`), so an adapter cannot
//! import the domain — Cargo refuses it — and the domain reaches AWS and Kubernetes only
//! through the port traits re-exported here.

pub use instantstart_aws as aws;
pub use instantstart_kube as kube;
pub use instantstart_ports::*;
pub use instantstart_sandbox as sandbox;
