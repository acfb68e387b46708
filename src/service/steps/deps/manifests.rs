//! The Kubernetes objects of the manifest components: the HyperPod namespaces and the objects
//! of AWS's HyperPod dependencies chart (health-monitoring agent, deep-health-check, job
//! auto-restart and patching RBAC), the device plugins, and the operators. Each builder takes the
//! region, for images served from a regional registry.

use serde_json::{json, Value};

use crate::cloud::MANAGED_BY;

pub(super) fn managed_labels() -> Value {
    json!({ MANAGED_BY.0: MANAGED_BY.1 })
}

pub(super) fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": managed_labels()}})
}

pub fn namespaces(_region: &str) -> Vec<Value> {
    vec![namespace("aws-hyperpod"), namespace("kubeflow")]
}

/// Types (EC2 names) with their HyperPod `ml.` names beside them: node labels carry either.
fn with_ml(types: &[&str]) -> Vec<String> {
    types
        .iter()
        .flat_map(|t| [t.to_string(), format!("ml.{t}")])
        .collect()
}

/// A device-plugin DaemonSet on the given instance types. Nodes labelled
/// `<opt_out>=false` (the NVIDIA GPU operator's convention) are skipped, so HyperPod nodes whose
/// own stack already runs a plugin can opt out instead of getting a second one.
fn device_plugin(name: &str, image: &str, types: &[&str], opt_out: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "labels": managed_labels()},
        "spec": {
            "selector": {"matchLabels": {"name": name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"name": name}},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": with_ml(types)},
                            {"key": opt_out, "operator": "NotIn", "values": ["false"]}]}]}}},
                    "containers": [{
                        "name": name, "image": image,
                        "securityContext": {"allowPrivilegeEscalation": false,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]
                    }],
                    "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]
                }
            }
        }
    })
}

pub fn nvidia_device_plugin(_region: &str) -> Vec<Value> {
    vec![device_plugin(
        "nvidia-device-plugin",
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
        &crate::cloud::types_where(|t| t.gpus > 0),
        "nvidia.com/gpu.deploy.device-plugin",
    )]
}

pub fn efa_device_plugin(region: &str) -> Vec<Value> {
    vec![device_plugin(
        "aws-efa-k8s-device-plugin",
        &format!(
            "{}/eks/aws-efa-k8s-device-plugin:v0.5.13",
            eks_registry(region)
        ),
        &crate::cloud::types_where(|t| t.efa),
        "vpc.amazonaws.com/efa.deploy.device-plugin",
    )]
}

/// The registry EKS serves its add-on images from in a region (account 602401143452 in the
/// commercial regions; China and GovCloud have their own).
pub fn eks_registry(region: &str) -> String {
    let (account, suffix) = match region {
        r if r.starts_with("cn-north-1") => ("918309763551", "amazonaws.com.cn"),
        r if r.starts_with("cn-northwest-1") => ("961992271922", "amazonaws.com.cn"),
        "us-gov-west-1" => ("013241004608", "amazonaws.com"),
        "us-gov-east-1" => ("151742754352", "amazonaws.com"),
        _ => ("602401143452", "amazonaws.com"),
    };
    format!("{account}.dkr.ecr.{region}.{suffix}")
}

/// The health-monitoring agent's image in a region, as AWS's HyperPod chart maps it (regions
/// the chart does not list use us-east-1's, as the chart does).
pub fn health_agent_image(region: &str) -> String {
    const ACCOUNTS: &[(&str, &str)] = &[
        ("us-east-1", "767398015722"),
        ("us-west-2", "905418368575"),
        ("us-east-2", "851725546812"),
        ("us-west-1", "011528288828"),
        ("eu-central-1", "211125453373"),
        ("eu-north-1", "654654141839"),
        ("eu-west-1", "533267293120"),
        ("eu-west-2", "011528288831"),
        ("eu-south-2", "626887787726"),
        ("ap-northeast-1", "533267052152"),
        ("ap-south-1", "011528288864"),
        ("ap-southeast-1", "905418428165"),
        ("ap-southeast-2", "851725636348"),
        ("ap-southeast-3", "971422672635"),
        ("ap-southeast-4", "084375568333"),
        ("ca-central-1", "843976229209"),
        ("sa-east-1", "025066253954"),
    ];
    let (region, account) = ACCOUNTS
        .iter()
        .find(|(r, _)| *r == region)
        .copied()
        .unwrap_or(ACCOUNTS[0]);
    format!(
        "{account}.dkr.ecr.{region}.amazonaws.com/hyperpod-health-monitoring-agent:{HEALTH_AGENT_TAG}"
    )
}

/// The agent version AWS's chart pins.
pub const HEALTH_AGENT_TAG: &str = "1.0.1892.0_1.0.424.0";

/// Instance types the NVIDIA build of the agent runs on, and the Neuron/Inferentia ones its
/// other build covers (AWS's chart lists both).
const HEALTH_AGENT_NVIDIA: &[&str] = &[
    "ml.p5en.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5.48xlarge",
    "ml.p5.4xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.g5.xlarge",
    "ml.g5.2xlarge",
    "ml.g5.4xlarge",
    "ml.g5.8xlarge",
    "ml.g5.12xlarge",
    "ml.g5.16xlarge",
    "ml.g5.24xlarge",
    "ml.g5.48xlarge",
    "ml.g6.xlarge",
    "ml.g6.2xlarge",
    "ml.g6.4xlarge",
    "ml.g6.8xlarge",
    "ml.g6.16xlarge",
    "ml.g6.12xlarge",
    "ml.g6.24xlarge",
    "ml.g6.48xlarge",
    "ml.g6e.xlarge",
    "ml.g6e.2xlarge",
    "ml.g6e.4xlarge",
    "ml.g6e.8xlarge",
    "ml.g6e.16xlarge",
    "ml.g6e.12xlarge",
    "ml.g6e.24xlarge",
    "ml.g6e.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.p6e-gb200.36xlarge",
];
const HEALTH_AGENT_NEURON: &[&str] = &[
    "ml.inf2.xlarge",
    "ml.inf2.8xlarge",
    "ml.inf2.24xlarge",
    "ml.inf2.48xlarge",
    "ml.trn1.32xlarge",
    "ml.trn1n.32xlarge",
    "ml.trn2.48xlarge",
];

/// The service-linked role HyperPod's control plane acts as inside the cluster (its access
/// entry's Kubernetes user), bound by the chart's auto-restart and patching RBAC.
pub const HYPERPOD_SLR_USER: &str = "hyperpod-service-linked-role";

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": managed_labels()}, "rules": rules})
}

fn binding(name: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name, "labels": managed_labels()},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": [subject]})
}

fn service_account(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name, "namespace": ns, "labels": managed_labels()}})
}

fn sa_subject(ns: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
}

fn slr_subject() -> Value {
    json!({"kind": "User", "name": HYPERPOD_SLR_USER, "apiGroup": "rbac.authorization.k8s.io"})
}

/// One build of the health-monitoring agent: a DaemonSet on the given instance types, reading
/// the node's kernel log and labelling the node's health.
fn health_agent(name: &str, image: &str, types: &[&str], args: &[&str], env: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "aws-hyperpod", "labels": managed_labels()},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": "health-monitoring-agent",
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}]}]}}},
                    "tolerations": [{"effect": "NoSchedule", "operator": "Exists"},
                                    {"effect": "NoExecute", "operator": "Exists"}],
                    "containers": [{
                        "name": name, "image": image, "args": args,
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {"limits": {"cpu": "500m", "memory": "512Mi"},
                                      "requests": {"cpu": "500m", "memory": "512Mi"}},
                        "securityContext": {"runAsUser": 1000, "runAsGroup": 2000},
                        "env": env,
                        "volumeMounts": [
                            {"name": "log", "mountPath": "/var/log"},
                            {"name": "kmsg", "mountPath": "/dev/kmsg", "readOnly": true},
                            {"name": "localtime", "mountPath": "/etc/localtime", "readOnly": true}]
                    }],
                    "volumes": [
                        {"name": "log", "hostPath": {"path": "/var/log/"}},
                        {"name": "kmsg", "hostPath": {"path": "/dev/kmsg"}},
                        {"name": "localtime", "hostPath": {"path": "/etc/localtime"}}]
                }
            }
        }
    })
}

/// What AWS's HyperPod dependencies chart installs for HyperPod's resiliency features, which
/// AWS documents as required when a cluster is made through the APIs: the health-monitoring
/// agent (both builds) with its RBAC, the deep-health-check service account and role, and the
/// job auto-restart and patching roles bound to HyperPod's service-linked role. (The chart's
/// Kubeflow training operator is not installed: the HyperPod training operator add-on replaces
/// it; its device plugins are the components of their own here.)
pub fn hyperpod_dependencies(region: &str) -> Vec<Value> {
    let image = health_agent_image(region);
    let node_env = json!([
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]);
    let mut neuron_env = node_env.clone();
    if let Some(list) = neuron_env.as_array_mut() {
        list.push(json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}));
        list.push(json!({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""}));
    }
    let read_write_pods = json!(["get", "list", "watch"]);
    vec![
        // Health-monitoring agent.
        cluster_role(
            "health-monitoring-agent",
            json!([
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}]),
        ),
        service_account("aws-hyperpod", "health-monitoring-agent"),
        binding(
            "health-monitoring-agent",
            "health-monitoring-agent",
            sa_subject("aws-hyperpod", "health-monitoring-agent"),
        ),
        health_agent(
            "health-monitoring-agent",
            &image,
            HEALTH_AGENT_NVIDIA,
            &[],
            node_env,
        ),
        health_agent(
            "health-monitoring-agent-non-nvidia",
            &image,
            HEALTH_AGENT_NEURON,
            &[
                "--enable-k8s-exporter=false",
                "--config.system-log-monitor=/config/system-message-monitor.json",
            ],
            neuron_env,
        ),
        // Deep health checks.
        service_account("aws-hyperpod", "deep-health-check-service-account"),
        cluster_role(
            "deep-health-check-service-account-role",
            json!([
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]}]),
        ),
        binding(
            "deep-health-check-service-account-role-binding",
            "deep-health-check-service-account-role",
            sa_subject("aws-hyperpod", "deep-health-check-service-account"),
        ),
        // Job auto-restart: HyperPod restarts jobs whose nodes it replaces.
        cluster_role(
            "job-auto-restart",
            json!([
            {"apiGroups": [""], "resources": ["nodes", "nodes/status", "pods", "pods/status"], "verbs": read_write_pods},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "deletecollection"]},
            {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "pytorchjobs/status"],
             "verbs": ["get", "list", "watch", "delete", "patch", "update"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "delete"]}]),
        ),
        service_account("aws-hyperpod", "job-auto-restart"),
        binding("job-auto-restart", "job-auto-restart", slr_subject()),
        // Patching (software updates drain nodes by eviction).
        cluster_role(
            "hyperpod-patching",
            json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]),
        ),
        binding("hyperpod-patching", "hyperpod-patching", slr_subject()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_come_from_the_regions_registry() {
        assert_eq!(
            health_agent_image("eu-west-1"),
            format!("533267293120.dkr.ecr.eu-west-1.amazonaws.com/hyperpod-health-monitoring-agent:{HEALTH_AGENT_TAG}")
        );
        // A region the chart does not list falls back to us-east-1's image, as the chart does.
        assert!(health_agent_image("me-south-1").starts_with("767398015722.dkr.ecr.us-east-1."));
        assert_eq!(
            eks_registry("us-west-2"),
            "602401143452.dkr.ecr.us-west-2.amazonaws.com"
        );
        assert!(eks_registry("cn-north-1").ends_with(".amazonaws.com.cn"));
        let efa = efa_device_plugin("ap-south-1");
        assert!(efa[0].to_string().contains(
            "602401143452.dkr.ecr.ap-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
        ));
    }

    /// Object by object, what AWS's dependencies chart makes for HyperPod's resiliency.
    #[test]
    fn the_hyperpod_dependencies_are_the_charts_objects() {
        let objects = hyperpod_dependencies("us-west-2");
        let names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        for want in [
            "ClusterRole/health-monitoring-agent",
            "ServiceAccount/health-monitoring-agent",
            "ClusterRoleBinding/health-monitoring-agent",
            "DaemonSet/health-monitoring-agent",
            "DaemonSet/health-monitoring-agent-non-nvidia",
            "ServiceAccount/deep-health-check-service-account",
            "ClusterRole/deep-health-check-service-account-role",
            "ClusterRoleBinding/deep-health-check-service-account-role-binding",
            "ClusterRole/job-auto-restart",
            "ClusterRoleBinding/job-auto-restart",
            "ClusterRole/hyperpod-patching",
            "ClusterRoleBinding/hyperpod-patching",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
        let by = |kind: &str, name: &str| {
            objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap()
        };
        // HyperPod acts in the cluster as its service-linked role's user.
        for b in ["job-auto-restart", "hyperpod-patching"] {
            assert_eq!(
                by("ClusterRoleBinding", b)["subjects"],
                json!([{"kind": "User", "name": "hyperpod-service-linked-role",
                        "apiGroup": "rbac.authorization.k8s.io"}])
            );
        }
        let agent = by("DaemonSet", "health-monitoring-agent");
        assert_eq!(agent["metadata"]["namespace"], "aws-hyperpod");
        let spec = &agent["spec"]["template"]["spec"];
        assert_eq!(spec["serviceAccountName"], "health-monitoring-agent");
        assert!(spec["containers"][0]["image"]
            .as_str()
            .unwrap()
            .starts_with("905418368575.dkr.ecr.us-west-2.amazonaws.com/"));
        let types = &spec["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0]["values"];
        assert!(types.as_array().unwrap().contains(&json!("ml.p5.48xlarge")));
        let patching = &by("ClusterRole", "hyperpod-patching")["rules"];
        assert!(patching.to_string().contains("pods/eviction"));
    }
}
