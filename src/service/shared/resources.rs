//! What the stages recorded on a cluster (identifiers of what they created or adopted), typed:
//! each key is spelled once, here, and a missing prerequisite names the stage to run.

use serde::Deserialize;
use serde_json::Value;

use crate::cloud::InstanceGroupSpec;
use crate::ops::{StepCx, StepError, StepResult};

fn missing(key: &str) -> StepError {
    StepError::fatal(
        "missing-prerequisite",
        format!("cluster has no recorded `{key}`; run the earlier stage first"),
    )
}

macro_rules! resources {
    ($($(#[doc = $doc:literal])* $field:ident: $ty:ty = $key:literal,)*) => {
        /// The cluster record's `resources`, as the phases' outputs merged them.
        #[derive(Debug, Default, Clone, Deserialize)]
        pub struct ClusterResources {
            $($(#[doc = $doc])* #[serde(rename = $key, default)] pub $field: Option<$ty>,)*
        }

        /// Each resource a later phase needs: its value, or a `missing-prerequisite` error.
        /// Name of the HyperPod cluster the hyperpod stage creates for an InstantStart cluster (an
/// imported cluster records its own).
pub fn hyperpod_name(cluster: &str) -> String {
    format!("{cluster}-hp")
}

impl ClusterResources {
            $(pub fn $field(&self) -> StepResult<$ty> {
                self.$field.clone().ok_or_else(|| missing($key))
            })*
        }
    };
}

resources! {
    /// The `cluster` stage (network and EKS).
    vpc_id: String = "vpcId",
    vpc_cidr: String = "vpcCidr",
    public_subnet_ids: Vec<String> = "publicSubnetIds",
    private_subnet_ids: Vec<String> = "privateSubnetIds",
    internet_gateway_id: String = "internetGatewayId",
    nat_gateway_id: String = "natGatewayId",
    public_route_table_id: String = "publicRouteTableId",
    private_route_table_id: String = "privateRouteTableId",
    cluster_security_group_id: String = "clusterSecurityGroupId",
    eks_role_arn: String = "eksRoleArn",
    eks_cluster_arn: String = "eksClusterArn",
    eks_endpoint: String = "eksEndpoint",
    eks_certificate_authority: String = "eksCertificateAuthority",
    oidc_issuer: String = "oidcIssuer",
    oidc_provider_arn: String = "oidcProviderArn",
    /// The `hyperpod` stage.
    compute_subnet_id: String = "computeSubnetId",
    execution_role_arn: String = "executionRoleArn",
    bucket_name: String = "bucketName",
    /// The prefix of `bucketName` the cluster's keys start with: `<cluster>/` in the
    /// deployment's shared bucket; absent (or empty) in a bucket of the cluster's own.
    bucket_prefix: String = "bucketPrefix",
    lifecycle_s3_uri: String = "lifecycleS3Uri",
    hyperpod_cluster_arn: String = "hyperPodClusterArn",
    hyperpod_cluster_name: String = "hyperPodClusterName",
    /// Every group's spec as last sent to HyperPod.
    instance_groups: Vec<InstanceGroupSpec> = "instanceGroups",
    /// Import: components found installed, never changed unless asked.
    preexisting_components: Vec<String> = "preexistingComponents",
}

impl ClusterResources {
    /// The HyperPod cluster of `cluster`: the one recorded (an imported cluster's keeps its own
    /// name), else the name this control plane gives the one it creates.
    pub fn hyperpod_name_of(&self, cluster: &str) -> String {
        self.hyperpod_cluster_name
            .clone()
            .unwrap_or_else(|| hyperpod_name(cluster))
    }

    /// Reads a record's `resources`; what does not parse counts as not recorded.
    pub fn of(resources: &Value) -> Self {
        // Read from the borrowed tree: no copy of it first.
        Self::deserialize(resources).unwrap_or_default()
    }
}

/// What the earlier phases of this operation's cluster recorded.
pub trait Recorded {
    fn recorded(&self) -> ClusterResources;
}

impl Recorded for StepCx<'_> {
    fn recorded(&self) -> ClusterResources {
        self.cluster
            .as_ref()
            .map(|c| ClusterResources::of(&c.resources))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recorded_keys_read_by_their_wire_names_and_missing_ones_name_the_key() {
        let r = ClusterResources::of(&json!({
            "vpcId": "vpc-1", "privateSubnetIds": ["a", "b"], "unrelated": 3
        }));
        assert_eq!(r.vpc_id().unwrap(), "vpc-1");
        assert_eq!(r.private_subnet_ids().unwrap(), ["a", "b"]);
        let e = r.eks_endpoint().unwrap_err();
        assert_eq!(e.code, "missing-prerequisite");
        assert!(e.message.contains("`eksEndpoint`"), "{}", e.message);
        assert!(ClusterResources::of(&Value::Null).vpc_id.is_none());
    }
}
