//! Operators installed from pinned upstream releases: KubeRay (RayJob for Ray-native training)
//! and KEDA with its metrics API server (event-driven autoscaling for serving). Their CRDs come
//! from the release itself ([`Release`]), their controllers from the manifests here.

use serde_json::{json, Value};

use super::manifests::{managed_labels, namespace};
use super::Release;

/// An operator: namespace, service account, cluster role and binding, one-replica Deployment
/// running as non-root with a read-only root filesystem.
fn operator(ns: &str, name: &str, image: &str, args: &[&str], rules: Value) -> Vec<Value> {
    vec![
        namespace(ns),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": ns, "labels": managed_labels()}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name, "labels": managed_labels()}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": managed_labels()},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": ns, "labels": managed_labels()},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                        "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}},
                                     "spec": {"serviceAccountName": name,
                                              "securityContext": {"runAsNonRoot": true},
                                              "containers": [{"name": name, "image": image, "args": args,
                                                  "securityContext": {"allowPrivilegeEscalation": false,
                                                      "readOnlyRootFilesystem": true,
                                                      "capabilities": {"drop": ["ALL"]}}}]}}}}),
    ]
}

/// KubeRay's pinned release: the operator image and its CRDs come from the same tag.
pub const KUBERAY_CRDS: Release = Release {
    base:
        "https://raw.githubusercontent.com/ray-project/kuberay/v1.7.0/ray-operator/config/crd/bases",
    files: &[
        "ray.io_rayclusters.yaml",
        "ray.io_rayjobs.yaml",
        "ray.io_rayservices.yaml",
    ],
};

/// KEDA's pinned release: every CRD its operator watches (it will not start without them).
pub const KEDA_CRDS: Release = Release {
    base: "https://raw.githubusercontent.com/kedacore/keda/v2.20.2/config/crd/bases",
    files: &[
        "keda.sh_scaledobjects.yaml",
        "keda.sh_scaledjobs.yaml",
        "keda.sh_triggerauthentications.yaml",
        "keda.sh_clustertriggerauthentications.yaml",
        "eventing.keda.sh_cloudeventsources.yaml",
        "eventing.keda.sh_clustercloudeventsources.yaml",
    ],
};

pub fn kuberay_operator(_region: &str) -> Vec<Value> {
    operator(
        "kuberay-operator",
        "kuberay-operator",
        "quay.io/kuberay/operator:v1.7.0",
        &[],
        json!([
            {"apiGroups": ["ray.io"], "resources": ["rayclusters", "rayjobs", "rayservices",
                "rayclusters/status", "rayjobs/status", "rayservices/status",
                "rayclusters/finalizers", "rayjobs/finalizers", "rayservices/finalizers"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["pods", "services", "serviceaccounts", "events", "endpoints"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["batch"], "resources": ["jobs"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
             "verbs": ["get", "list", "watch", "create", "update", "delete"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "list", "watch", "create", "update", "patch"]}
        ]),
    )
}

const KEDA_NS: &str = "keda";
const KEDA_CERTS: &str = "kedaorg-certs";

/// KEDA's operator (which makes and rotates the certificates) and its metrics API server, which
/// serves `external.metrics.k8s.io` to the HPA, as KEDA's release lays them out.
pub fn keda(_region: &str) -> Vec<Value> {
    let mut objects = operator(
        KEDA_NS,
        "keda-operator",
        "ghcr.io/kedacore/keda:2.20.2",
        &[
            "--leader-elect",
            "--zap-log-level=info",
            "--enable-cert-rotation=true",
            "--cert-dir=/certs",
            "--cert-secret-name=kedaorg-certs",
            "--operator-service-name=keda-operator",
            "--metrics-server-service-name=keda-metrics-apiserver",
        ],
        json!([
            {"apiGroups": ["keda.sh"], "resources": ["scaledobjects", "scaledjobs", "triggerauthentications",
                "clustertriggerauthentications", "scaledobjects/status", "scaledjobs/status",
                "triggerauthentications/status", "clustertriggerauthentications/status",
                "scaledobjects/finalizers", "scaledjobs/finalizers"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["eventing.keda.sh"], "resources": ["cloudeventsources", "cloudeventsources/status",
                "clustercloudeventsources", "clustercloudeventsources/status"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [""], "resources": ["pods", "services", "configmaps", "secrets", "limitranges", "serviceaccounts"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"],
             "verbs": ["get", "list", "watch"]},
            // The CA bundle it rotates goes into its API service registration.
            {"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "list", "watch", "create", "update", "patch"]}
        ]),
    );
    // The operator writes its certificates to /certs and to the Secret the metrics server reads.
    if let Some(d) = objects.iter_mut().find(|o| o["kind"] == "Deployment") {
        d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "certificates", "mountPath": "/certs"}]);
        d["spec"]["template"]["spec"]["volumes"] =
            json!([{"name": "certificates", "emptyDir": {}}]);
        d["spec"]["template"]["metadata"]["labels"]["app"] = json!("keda-operator");
    }
    let labels = managed_labels();
    let rbac = "rbac.authorization.k8s.io";
    objects.extend([
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "Role",
               "metadata": {"name": "keda-operator-certs", "namespace": KEDA_NS, "labels": labels},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                         {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [KEDA_CERTS],
                          "verbs": ["get", "update", "patch"]}]}),
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "RoleBinding",
               "metadata": {"name": "keda-operator-certs", "namespace": KEDA_NS, "labels": labels},
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "keda-operator-certs"},
               "subjects": [{"kind": "ServiceAccount", "name": "keda-operator", "namespace": KEDA_NS}]}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "keda-operator", "namespace": KEDA_NS, "labels": labels},
               "spec": {"ports": [{"name": "metricsservice", "port": 9666, "targetPort": 9666}],
                        "selector": {"app.kubernetes.io/name": "keda-operator"}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "keda-metrics-apiserver", "namespace": KEDA_NS, "labels": labels},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "keda-metrics-apiserver"}},
                   "template": {"metadata": {"labels": {"app.kubernetes.io/name": "keda-metrics-apiserver"}},
                       "spec": {"serviceAccountName": "keda-operator", "securityContext": {"runAsNonRoot": true},
                           "containers": [{"name": "keda-metrics-apiserver",
                               "image": "ghcr.io/kedacore/keda-metrics-apiserver:2.20.2",
                               "command": ["/keda-adapter"],
                               "args": ["--secure-port=6443", "--client-ca-file=/certs/ca.crt",
                                        "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key",
                                        "--cert-dir=/certs"],
                               "ports": [{"containerPort": 6443, "name": "https"}],
                               "volumeMounts": [{"name": "certificates", "mountPath": "/certs", "readOnly": true},
                                                {"name": "temp", "mountPath": "/tmp"}],
                               "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                                   "capabilities": {"drop": ["ALL"]}}}],
                           "volumes": [{"name": "certificates", "secret": {"secretName": KEDA_CERTS}},
                                       {"name": "temp", "emptyDir": {}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "keda-metrics-apiserver", "namespace": KEDA_NS, "labels": labels},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 6443}],
                        "selector": {"app.kubernetes.io/name": "keda-metrics-apiserver"}}}),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1beta1.external.metrics.k8s.io", "labels": labels},
               "spec": {"service": {"name": "keda-metrics-apiserver", "namespace": KEDA_NS},
                        "group": "external.metrics.k8s.io", "version": "v1beta1",
                        "groupPriorityMinimum": 100, "versionPriority": 100}}),
        // The API server delegates authentication and authorization to it, as to any aggregated API.
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "ClusterRoleBinding",
               "metadata": {"name": "keda-system-auth-delegator", "labels": labels},
               "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "system:auth-delegator"},
               "subjects": [{"kind": "ServiceAccount", "name": "keda-operator", "namespace": KEDA_NS}]}),
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "RoleBinding",
               "metadata": {"name": "keda-auth-reader", "namespace": "kube-system", "labels": labels},
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "extension-apiserver-authentication-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "keda-operator", "namespace": KEDA_NS}]}),
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "ClusterRole",
               "metadata": {"name": "keda-external-metrics-reader", "labels": labels},
               "rules": [{"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "ClusterRoleBinding",
               "metadata": {"name": "keda-hpa-controller-external-metrics", "labels": labels},
               "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "keda-external-metrics-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}]}),
    ]);
    objects
}
