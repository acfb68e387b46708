//! How the simulated cluster's nodes and add-ons fare given what the account records: a node
//! joins only if its security groups and the control plane's let them talk and its execution role
//! can pull the system images; an EFA deep health check needs self-referencing egress; an add-on
//! is healthy only with a node to run on and, when bound by pod identity, a node role that may
//! call `eks-auth:AssumeRoleForPodIdentity`.

use std::collections::HashMap;

use serde_json::Value;

use super::rules::{self, Groups};
use super::{Res, Sandbox, ACCOUNT, REGION};
use cloud::{AddonStatus, CloudResult, CreateHyperPodCluster, InstanceGroupSpec};

/// The image every node pulls first (the VPC CNI); without it the node never becomes ready.
const CNI_REPOSITORY: &str = "arn:aws:ecr:us-west-2:602401143452:repository/amazon-k8s-cni";

/// Add-ons that run only a DaemonSet: with no node there is nothing to be unhealthy.
const DAEMONSET_ADDONS: &[&str] = &["eks-pod-identity-agent", "vpc-cni", "kube-proxy"];

/// The namespace whose service accounts an add-on runs as (for its pod identity binding).
/// When an add-on's pods were last admitted (created, or rolled by an update), wall-clock ms,
/// kept with the add-on's record.
pub(super) const PODS_SINCE: &str = "__podsSince";

pub(super) fn addon_namespace(addon: &str) -> Option<&'static str> {
    Some(match addon {
        "amazon-sagemaker-hyperpod-training-operator" => "aws-hyperpod",
        "amazon-sagemaker-hyperpod-inference" => "hyperpod-inference-system",
        "amazon-cloudwatch-observability" => "amazon-cloudwatch",
        "amazon-sagemaker-hyperpod-observability" => "hyperpod-observability",
        "aws-mountpoint-s3-csi-driver" | "aws-fsx-csi-driver" | "aws-ebs-csi-driver" => {
            "kube-system"
        }
        "amazon-sagemaker-spaces" => "jupyter-k8s-system",
        _ => return None,
    })
}

impl Sandbox {
    async fn security_groups(&self) -> CloudResult<Groups> {
        Ok(self
            .list("security-group")
            .await?
            .into_iter()
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| (r.id.clone(), rules::rules_of(&r.data)))
            .collect())
    }

    pub(super) async fn role_record(&self, arn: &str) -> CloudResult<Option<Value>> {
        let name = arn.rsplit('/').next().unwrap_or_default();
        Ok(self
            .by_name("iam-role", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| r.data))
    }

    /// For each instance group of the HyperPod cluster record `hp`: why its nodes are not ready,
    /// or `None` when they can serve.
    pub(crate) async fn group_verdicts(
        &self,
        hp: &Res,
    ) -> CloudResult<HashMap<String, Option<String>>> {
        let Ok(req) = serde_json::from_value::<CreateHyperPodCluster>(hp.data.clone()) else {
            return Ok(HashMap::new());
        };
        let eks = req.eks_cluster_arn.rsplit('/').next().unwrap_or_default();
        let plane: Vec<String> = self
            .by_name("eks-cluster", eks)
            .await?
            .and_then(|r| serde_json::from_value(r.data["securityGroupIds"].clone()).ok())
            .unwrap_or_default();
        let groups = self.security_groups().await?;
        let mut out = HashMap::new();
        for g in &req.instance_groups {
            let role = self.role_record(&g.execution_role_arn).await?;
            out.insert(g.name.clone(), verdict(&groups, &plane, g, role.as_ref()));
        }
        Ok(out)
    }

    /// An add-on's health beyond its own lifecycle: `Some((Degraded, issue))` when it has no
    /// node to run on, or its pods cannot get credentials through pod identity.
    pub(crate) async fn addon_health(
        &self,
        cluster: &str,
        addon: &str,
        pods_since: Option<i64>,
    ) -> CloudResult<Option<(AddonStatus, String)>> {
        let target = cloud::KubeTarget {
            cluster: cluster.to_string(),
            endpoint: String::new(),
            certificate_authority: String::new(),
        };
        let schedule = self.schedule(&target).await?;
        if !DAEMONSET_ADDONS.contains(&addon) && !schedule.nodes.iter().any(|n| n.ready) {
            return Ok(Some((
                AddonStatus::Degraded,
                "InsufficientNumberOfReplicas: The add-on is unhealthy because it doesn't have the desired number of replicas (no node is ready to run its pods)".into(),
            )));
        }
        let Some(ns) = addon_namespace(addon) else {
            return Ok(None);
        };
        let bindings: Vec<super::Res> = self
            .list("eks-pod-identity")
            .await?
            .into_iter()
            .filter(|r| {
                r.deleted_ms.is_none() && r.data["cluster"] == cluster && r.data["namespace"] == ns
            })
            .collect();
        let bound = !bindings.is_empty();
        // EKS's pod identity webhook gives a pod its credentials when the pod is admitted
        // (Amazon EKS User Guide, "Attach an IAM Role to an Amazon EKS add-on using EKS Pod
        // Identity"; aws/sagemaker-hyperpod-cluster-setup passes `PodIdentityAssociations` in
        // the add-on itself): pods admitted before their association run with the node's.
        // An association the add-on request itself made (`ownerArn`) exists before its pods.
        if let Some(late) = bindings.iter().find(|b| {
            b.data.get("ownerArn").is_none() && pods_since.is_some_and(|since| b.created_ms > since)
        }) {
            return Ok(Some((
                AddonStatus::Degraded,
                format!(
                    "AccessDenied: the add-on's pods were admitted before the pod identity association for {ns}/{} existed: they run with the node's credentials until they are recreated",
                    late.data["serviceAccount"].as_str().unwrap_or_default()
                ),
            )));
        }
        let Some(role_arn) = schedule.node_role else {
            return Ok(None);
        };
        if !bound {
            return Ok(None);
        }
        let cluster_arn = format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{cluster}");
        let allowed = self.role_record(&role_arn).await?.is_some_and(|r| {
            rules::role_allows(&r, "eks-auth:AssumeRoleForPodIdentity", &cluster_arn)
        });
        Ok((!allowed).then(|| {
            (
                AddonStatus::Degraded,
                format!("AccessDenied: the pod identity agent on the nodes cannot get credentials: {role_arn} is not authorized to perform: eks-auth:AssumeRoleForPodIdentity on resource: {cluster_arn}"),
            )
        }))
    }
}

fn verdict(
    groups: &Groups,
    plane: &[String],
    g: &InstanceGroupSpec,
    role: Option<&Value>,
) -> Option<String> {
    if let Some(why) = rules::join_blocker(groups, &g.security_group_ids, plane) {
        return Some(why);
    }
    let Some(role) = role else {
        return Some(format!(
            "the execution role {} does not exist",
            g.execution_role_arn
        ));
    };
    if let Some(action) = rules::first_denied(role, rules::ECR_PULL, CNI_REPOSITORY) {
        return Some(format!(
            "NetworkPluginNotReady: cni plugin not initialized: failed to pull image 602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni: {} is not authorized to perform: {action}",
            g.execution_role_arn
        ));
    }
    if g.deep_health_checks
        .iter()
        .any(|c| c == "InstanceConnectivity")
        && !rules::efa_ready(groups, &g.security_group_ids)
    {
        return Some("DeepHealthCheckFailed: InstanceConnectivity: EFA traffic between instances is blocked (the group's security groups lack a self-referencing egress rule; an egress rule to 0.0.0.0/0 does not carry EFA)".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud::Capacity;
    use serde_json::json;

    fn spec(groups: &[&str], checks: &[&str]) -> InstanceGroupSpec {
        InstanceGroupSpec {
            name: "workers".into(),
            instance_type: "ml.p5.48xlarge".into(),
            instance_count: 2,
            execution_role_arn: "arn:aws:iam::1:role/exec".into(),
            lifecycle_source_s3_uri: "s3://b/l/".into(),
            lifecycle_on_create: "on_create.sh".into(),
            threads_per_core: 2,
            ebs_volume_gb: 500,
            deep_health_checks: checks.iter().map(|c| c.to_string()).collect(),
            capacity: Capacity::OnDemand,
            subnet_ids: vec!["subnet-1".into()],
            security_group_ids: groups.iter().map(|g| g.to_string()).collect(),
            network_interface: Some("efa".into()),
            scheduled_update: None,
        }
    }

    #[test]
    fn the_connectivity_deep_health_check_fails_without_self_egress() {
        // Self ingress and egress to anywhere: nodes join, but EFA traffic is dropped.
        let ingress_only: Groups = [(
            "sg-1".to_string(),
            rules::rules_of(&json!({"rules": [
                {"protocol": "-1", "source": "sg-1", "direction": "ingress"},
                {"protocol": "-1", "cidr": "0.0.0.0/0", "direction": "egress"}]})),
        )]
        .into();
        let role = json!({"inline": {"p": {"Statement": [
            {"Effect": "Allow", "Action": "ecr:*", "Resource": "*"}]}}, "attached": []});
        let plane = ["sg-1".to_string()];
        let why = verdict(
            &ingress_only,
            &plane,
            &spec(&["sg-1"], &["InstanceConnectivity"]),
            Some(&role),
        );
        assert!(why.is_some_and(|w| w.contains("DeepHealthCheckFailed") && w.contains("egress")));
        // Without the connectivity check the same nodes serve.
        assert_eq!(
            verdict(
                &ingress_only,
                &plane,
                &spec(&["sg-1"], &["InstanceStress"]),
                Some(&role)
            ),
            None
        );
        let mut both = ingress_only.clone();
        both.get_mut("sg-1").unwrap().push(rules::Rule {
            ingress: false,
            protocol: "-1".into(),
            ports: None,
            peer: "sg-1".into(),
        });
        assert_eq!(
            verdict(
                &both,
                &plane,
                &spec(&["sg-1"], &["InstanceConnectivity"]),
                Some(&role)
            ),
            None
        );
    }
}
