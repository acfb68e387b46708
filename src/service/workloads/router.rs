//! The SGLang router of one model: its own ServiceAccount, a Role that may only read pods in
//! the model's namespace, and a Deployment running SGLang's model gateway with cache-aware
//! routing over the model's worker pods, discovered by label. Nothing shared or cluster-wide is
//! written, so two models' routers never touch each other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ObjectRef;
use crate::error::{ApiError, ApiResult};
use crate::service::cluster::validate;
#[cfg(test)]
use crate::service::workloads::WORKLOAD_NAMESPACE;
use crate::service::workloads::{labels, obj_in};

/// SGLang's model gateway, pinned (its entry point is `python3 -m sglang_router.launch_router`).
pub const ROUTER_IMAGE: &str = "lmsysorg/sgl-model-gateway:v0.3.2";
/// Where the router serves Prometheus metrics (`smg_router_requests_total`, …).
pub const ROUTER_METRICS_PORT: i64 = 29000;
/// Label on a router's pods (the model's Service selects them when there is a router).
pub const ROUTER_FOR_LABEL: &str = "instantstart.io/router-for";

pub const POLICIES: &[&str] = &["cache_aware", "round_robin", "power_of_two", "random"];

/// `router` of a deployment: route through an SGLang router of its own.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouterRequest {
    /// `cache_aware` (default: requests sharing a prefix go to the worker that has it cached),
    /// `round_robin`, `power_of_two` or `random`.
    pub policy: Option<String>,
}

/// A deployment's router, as read back.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouterView {
    pub name: String,
    pub image: String,
    pub policy: String,
    pub ready: bool,
}

pub fn router_name(model: &str) -> String {
    format!("{model}-router")
}

pub(super) fn policy(req: &RouterRequest) -> ApiResult<&str> {
    let p = req.policy.as_deref().unwrap_or("cache_aware");
    validate::require(
        POLICIES.contains(&p),
        "router.policy",
        format!("`{}` is not a routing policy", validate::truncate(p)),
        json!(POLICIES),
    )?;
    Ok(p)
}

/// The router's objects, in the order they are applied (identity and rights before the pods).
/// `workers` is the label selector of the model's worker pods; the router listens on `port`.
pub(super) fn router_objects(
    model: &str,
    namespace: &str,
    port: i64,
    workers: &BTreeMap<String, String>,
    policy: &str,
) -> Vec<Value> {
    let name = router_name(model);
    let l = labels(
        "inference",
        &[
            ("app.kubernetes.io/name", &name),
            ("app.kubernetes.io/component", "router"),
            (ROUTER_FOR_LABEL, model),
        ],
    );
    let rbac = "rbac.authorization.k8s.io";
    let meta = json!({"name": name, "namespace": namespace, "labels": l});
    let mut args = vec!["--service-discovery".to_string(), "--selector".to_string()];
    args.extend(workers.iter().map(|(k, v)| format!("{k}={v}")));
    args.extend(
        [
            "--service-discovery-namespace",
            namespace,
            "--service-discovery-port",
            &port.to_string(),
            "--policy",
            policy,
            "--host",
            "0.0.0.0",
            "--port",
            &port.to_string(),
            "--prometheus-host",
            "0.0.0.0",
            "--prometheus-port",
            &ROUTER_METRICS_PORT.to_string(),
        ]
        .map(str::to_string),
    );
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}),
        // Service discovery watches pods, in this namespace only: nothing else is granted.
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "Role", "metadata": meta,
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": format!("{rbac}/v1"), "kind": "RoleBinding", "metadata": meta,
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
               "spec": {"replicas": 1,
                   "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                   "template": {"metadata": {"labels": l,
                           "annotations": super::server::scrape_annotations(ROUTER_METRICS_PORT)},
                       "spec": {"serviceAccountName": name,
                           "containers": [{"name": "router", "image": ROUTER_IMAGE,
                               "command": ["python3", "-m", "sglang_router.launch_router"],
                               "args": args,
                               "env": [{"name": "RUST_LOG", "value": "info"}],
                               "ports": [{"containerPort": port, "name": "http"},
                                         {"containerPort": ROUTER_METRICS_PORT, "name": "metrics"}],
                               "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5},
                               "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                             "limits": {"cpu": "4", "memory": "8Gi"}},
                               "securityContext": {"allowPrivilegeEscalation": false,
                                                   "capabilities": {"drop": ["ALL"]}}}]}}}}),
    ]
}

/// Every object a router may have: what is pruned when a model has none (any more) and what is
/// deleted with the model.
pub(super) fn router_refs(model: &str, namespace: &str) -> Vec<ObjectRef> {
    let name = router_name(model);
    let rbac = "rbac.authorization.k8s.io/v1";
    vec![
        obj_in(namespace, "apps/v1", "Deployment", &name),
        obj_in(namespace, rbac, "RoleBinding", &name),
        obj_in(namespace, rbac, "Role", &name),
        obj_in(namespace, "v1", "ServiceAccount", &name),
    ]
}

/// Reads a router back from its Deployment.
pub(super) fn router_view(d: &Value) -> RouterView {
    let args: Vec<&str> = d
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let policy = args
        .iter()
        .position(|a| *a == "--policy")
        .and_then(|i| args.get(i + 1))
        .copied()
        .unwrap_or("cache_aware");
    let n = |p: &str| d.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    RouterView {
        name: d["metadata"]["name"].as_str().unwrap_or_default().into(),
        image: d
            .pointer("/spec/template/spec/containers/0/image")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        policy: policy.into(),
        ready: n("/status/readyReplicas") >= n("/spec/replicas").max(1),
    }
}

/// A router is for SGLang workers, and for more than one of them.
pub(super) fn check(image: &str, most_replicas: i64) -> ApiResult<()> {
    if !super::server::is_sglang(image) {
        return Err(ApiError::validation_hint(
            "router",
            format!(
                "the SGLang router routes to SGLang workers; `{}` is not an SGLang image",
                validate::truncate(image)
            ),
            json!("lmsysorg/sglang:<version>, or leave router out"),
        ));
    }
    if most_replicas < 2 {
        return Err(ApiError::validation_hint(
            "router",
            "a router balances two or more workers: ask for replicas ≥ 2 (or autoscaling up to ≥ 2)",
            json!({"replicas": 2}),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_may_read_pods_in_its_namespace_and_nothing_else() {
        let workers = BTreeMap::from([("app.kubernetes.io/name".to_string(), "qwen".to_string())]);
        let objects = router_objects("qwen", WORKLOAD_NAMESPACE, 8000, &workers, "cache_aware");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
        );
        assert!(objects
            .iter()
            .all(|o| o["kind"] != "ClusterRole" && o["kind"] != "ClusterRoleBinding"));
        for o in &objects {
            assert_eq!(o["metadata"]["namespace"], WORKLOAD_NAMESPACE, "{o}");
            assert_eq!(o["metadata"]["name"], "qwen-router");
        }
        let rules = objects[1]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0]["apiGroups"], json!([""]));
        assert_eq!(rules[0]["resources"], json!(["pods"]));
        assert_eq!(rules[0]["verbs"], json!(["get", "list", "watch"]));
        assert!(rules[0].get("resourceNames").is_none());
        assert_eq!(
            objects[2]["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "qwen-router"})
        );
        assert_eq!(
            objects[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "qwen-router", "namespace": "default"}])
        );
        let d = &objects[3];
        assert_eq!(
            d["spec"]["template"]["spec"]["serviceAccountName"],
            "qwen-router"
        );
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], ROUTER_IMAGE);
        assert!(!ROUTER_IMAGE.ends_with(":latest"));
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
        assert_eq!(after("--selector"), "app.kubernetes.io/name=qwen");
        assert_eq!(after("--service-discovery-namespace"), "default");
        assert_eq!(after("--service-discovery-port"), "8000");
        assert_eq!(after("--policy"), "cache_aware");
        assert_eq!(router_view(d).policy, "cache_aware");
    }

    #[test]
    fn routers_are_for_several_sglang_workers() {
        assert!(check("lmsysorg/sglang:v0.5.8", 2).is_ok());
        assert!(check("vllm/vllm-openai:latest", 2).is_err());
        assert!(check("lmsysorg/sglang:v0.5.8", 1).is_err());
        assert!(policy(&RouterRequest {
            policy: Some("fastest".into())
        })
        .is_err());
    }
}
