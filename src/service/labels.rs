//! Where our in-cluster objects live and the label saying what each is for: spelled once, below
//! every file that makes or reads workloads (steps, training, endpoints, serving), so none of
//! them reaches into another for a name.

/// Namespace of the workloads we run (the default storage claims live there too).
pub const WORKLOAD_NAMESPACE: &str = "default";
/// Label naming what a workload object is for (`model-download` or `inference`).
pub const WORKLOAD_LABEL: &str = "instantstart.io/workload";
