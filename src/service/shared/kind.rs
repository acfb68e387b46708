//! The operation kinds this control plane runs, spelled once. The store and the wire carry
//! their names (`cluster`, `feature-training-operator`, …); the domain compares variants.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A managed feature, as the operation that changes it names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeatureId {
    TrainingOperator,
    ContainerInsights,
    TieredCheckpointing,
    InferenceOperator,
    ManagedAutoscaling,
    FsxCsi,
    TaskGovernance,
    EbsCsi,
    Spaces,
    Observability,
}

macro_rules! kinds {
    ($($variant:ident $(($feature:ident))? => $name:literal,)*) => {
        impl OpKind {
            /// Every kind (the table the names are read from).
            pub const ALL: &'static [OpKind] = &[$($variant $((FeatureId::$feature))?),*];

            /// The name stored and sent over the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($variant $((FeatureId::$feature))? => $name,)*
                }
            }
        }
    };
}

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Network and EKS control plane.
    Cluster,
    /// Add-ons and in-cluster components.
    Dependencies,
    /// The HyperPod cluster with its first instance group.
    HyperPod,
    /// A storage claim.
    Storage,
    StorageDelete,
    /// Adopting an existing EKS (and HyperPod) cluster.
    Import,
    /// The stages in order, each its own operation.
    Pipeline,
    Feature(FeatureId),
    ModelDownload,
    /// The cluster's task-governance scheduling policy (a SageMaker scheduler config).
    SchedulingPolicy,
    /// A team's compute quota, made, changed or removed.
    TeamCreate,
    TeamUpdate,
    TeamDelete,
    /// A person given a team's access on the cluster (an EKS access entry and policy), or not.
    AccessGrant,
    AccessRevoke,
    /// A training job applied and followed to its end.
    TrainingJob,
    /// The account's managed MLflow, and a cluster's access to it.
    MlflowSetup,
    InferenceDeploy,
    /// A managed endpoint (`InferenceEndpointConfig`) applied and watched to deployment complete.
    EndpointDeploy,
    /// A change to a managed endpoint, watched the same way.
    EndpointUpdate,
    /// A development space (`Workspace`) applied and watched to running, or changed.
    SpaceCreate,
    SpaceUpdate,
    /// A space started or stopped (its `desiredStatus` patched), watched until it is.
    SpaceStatus,
    /// A warm GPU pool (a Deployment of model servers that serve nothing until assigned).
    PoolCreate,
    PoolScale,
    /// A pool pod given to a model, or back to its pool.
    PoolAssign,
    WorkloadDelete,
    HyperPodSoftwareUpdate,
    /// The control plane one minor version up, the add-ons after it, then HyperPod's software.
    ClusterUpgrade,
    NodeAction,
    InstanceGroupAdd,
    InstanceGroupScale,
    InstanceGroupDelete,
    DeleteCluster,
    /// Dropping a cluster's record and touching nothing in the account (an imported cluster
    /// handed back to whoever made it).
    ForgetCluster,
}

use OpKind::*;

kinds! {
    Cluster => "cluster",
    Dependencies => "dependencies",
    HyperPod => "hyperpod",
    Storage => "storage",
    StorageDelete => "storage-delete",
    Import => "import",
    Pipeline => "pipeline",
    Feature(TrainingOperator) => "feature-training-operator",
    Feature(ContainerInsights) => "feature-container-insights",
    Feature(TieredCheckpointing) => "feature-tiered-checkpointing",
    Feature(InferenceOperator) => "feature-inference-operator",
    Feature(ManagedAutoscaling) => "feature-managed-autoscaling",
    Feature(FsxCsi) => "feature-fsx-csi",
    Feature(TaskGovernance) => "feature-task-governance",
    Feature(EbsCsi) => "feature-ebs-csi",
    Feature(Spaces) => "feature-spaces",
    Feature(Observability) => "feature-observability",
    SchedulingPolicy => "scheduling-policy",
    TeamCreate => "team-create",
    TeamUpdate => "team-update",
    TeamDelete => "team-delete",
    AccessGrant => "access-grant",
    AccessRevoke => "access-revoke",
    ModelDownload => "model-download",
    TrainingJob => "training-job",
    MlflowSetup => "mlflow-setup",
    InferenceDeploy => "inference-deploy",
    EndpointDeploy => "endpoint-deploy",
    EndpointUpdate => "endpoint-update",
    SpaceCreate => "space-create",
    SpaceUpdate => "space-update",
    SpaceStatus => "space-status",
    PoolCreate => "pool-create",
    PoolScale => "pool-scale",
    PoolAssign => "pool-assign",
    WorkloadDelete => "workload-delete",
    HyperPodSoftwareUpdate => "hyperpod-software-update",
    ClusterUpgrade => "cluster-upgrade",
    NodeAction => "node-action",
    InstanceGroupAdd => "instance-group-add",
    InstanceGroupScale => "instance-group-scale",
    InstanceGroupDelete => "instance-group-delete",
    DeleteCluster => "delete-cluster",
    ForgetCluster => "forget-cluster",
}

impl OpKind {
    /// Kinds that end the cluster's record: nothing else may run beside them.
    pub fn ends_cluster(self) -> bool {
        matches!(self, DeleteCluster | ForgetCluster)
    }

    /// The stages a cluster is made of, in pipeline order.
    pub const STAGES: [OpKind; 4] = [Cluster, Dependencies, HyperPod, Storage];

    /// Kinds that change the HyperPod cluster's own configuration (HyperPod takes one at a time).
    pub fn updates_hyperpod(self) -> bool {
        matches!(
            self,
            InstanceGroupAdd
                | InstanceGroupScale
                | InstanceGroupDelete
                | HyperPodSoftwareUpdate
                | ClusterUpgrade
        )
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no operation kind.
#[derive(Debug)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown operation kind `{}`", self.0)
    }
}

impl FromStr for OpKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

impl Serialize for OpKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OpKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Stored operations carry the kind's name: compare it with a variant directly.
impl PartialEq<OpKind> for String {
    fn eq(&self, other: &OpKind) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<OpKind> for str {
    fn eq(&self, other: &OpKind) -> bool {
        self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for k in OpKind::ALL {
            assert!(seen.insert(k.as_str()), "two kinds named {k}");
            assert_eq!(k.as_str().parse::<OpKind>().unwrap(), *k);
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert!("feature-unknown".parse::<OpKind>().is_err());
        assert_eq!(String::from("pipeline"), Pipeline);
    }
}
