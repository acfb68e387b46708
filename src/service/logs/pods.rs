//! One pod of a workload as the logs read it: a leaf that the snapshot, the follow and the
//! query checks share.

use serde::Serialize;
use utoipa::ToSchema;

/// One pod of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodRef {
    pub pod: String,
    /// Its rank (`0`, `1` …) or Ray node type (`head`, `worker`), where known.
    pub rank: Option<String>,
    /// The container whose log is read.
    pub container: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`.
    pub phase: String,
    /// Changes when a pod of the same name is recreated (a full-job restart).
    #[serde(skip)]
    pub(super) uid: String,
}

impl PodRef {
    /// `[pod rank 0]` or `[pod]`: what each of its lines is prefixed with.
    pub fn prefix(&self) -> String {
        match &self.rank {
            Some(rank) => format!("[{} rank {rank}]", self.pod),
            None => format!("[{}]", self.pod),
        }
    }
}
