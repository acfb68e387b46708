//! Self-managed serving, complete, in the sandbox and on the Kubernetes emulator: a two-replica
//! SGLang model served through its own router and scaled by its own ScaledObject, a second model
//! with its own, a warm-pool pod moved between two models by its label, a pool that will not
//! shrink below what it has given out, and deletions that leave the other model untouched.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::crds::Schemas;
use crate::helpers::*;

const DEPLOYMENTS: &str = "/api/clusters/demo/deployments";
const POOLS: &str = "/api/clusters/demo/pools";
const SGLANG: &str = "lmsysorg/sglang:v0.5.8";
const PROMETHEUS: &str = "http://prometheus-server.monitoring.svc.cluster.local:80";

fn routed(name: &str, min: i64, max: i64, cooldown: i64) -> Value {
    json!({"deploymentName": name, "image": SGLANG,
           "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-8B", "--port", "8000"],
           "router": {},
           "autoscaling": {"minReplicas": min, "maxReplicas": max, "target": 3, "cooldownPeriod": cooldown,
                           "prometheusUrl": PROMETHEUS}})
}

async fn accepted(app: &TestApp, r: reqwest::Response) -> Value {
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    app.wait_terminal(body["operationId"].as_str().unwrap())
        .await
}

async fn deployment(app: &TestApp, name: &str) -> Option<Value> {
    app.json(DEPLOYMENTS)
        .await
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .cloned()
}

async fn invoke(app: &TestApp, name: &str, prompt: &str) -> reqwest::Response {
    app.post(
        &format!("{DEPLOYMENTS}/{name}/invoke"),
        &json!({"prompt": prompt}),
    )
    .await
}

/// Every object a deployment operation applied, as `Kind/name`.
fn objects(op: &Value) -> Vec<String> {
    op["params"]["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["kind"].as_str().unwrap(),
                m["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn check_schemas(op: &Value) {
    let schemas = Schemas::load();
    for m in op["params"]["manifests"].as_array().unwrap() {
        if m["apiVersion"].as_str().unwrap().starts_with("keda.sh/") {
            assert_eq!(schemas.errors(m), Vec::<String>::new(), "{m}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_autoscaled_models_and_a_warm_pool_serve_side_by_side_in_the_sandbox() {
    let app = spawn_app().await;
    let mut body = pipeline_body();
    body["instanceType"] = json!("ml.g5.12xlarge");
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    // Refusals by field, nothing started.
    for (patch, field) in [
        (json!({"image": "vllm/vllm-openai:latest"}), "router"),
        (
            json!({"autoscaling": {"minReplicas": 1, "maxReplicas": 1, "target": 3, "prometheusUrl": PROMETHEUS}}),
            "router",
        ),
        (
            json!({"autoscaling": {"maxReplicas": 2, "target": 3, "prometheusUrl": "http://169.254.169.254/"}}),
            "autoscaling.prometheusUrl",
        ),
        (
            json!({"autoscaling": {"maxReplicas": 2, "target": 3}}),
            "autoscaling.prometheusUrl",
        ),
        (json!({"router": {"policy": "fastest"}}), "router.policy"),
    ] {
        let mut b = routed("chat", 2, 4, 86_400);
        for (k, v) in patch.as_object().unwrap() {
            b[k] = v.clone();
        }
        let p = problem(
            app.post(DEPLOYMENTS, &b).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(p["field"], field, "{b}: {p}");
    }
    let ops = app.json("/api/operations").await;

    // Two SGLang models, each with a router and a ScaledObject of its own.
    let chat = accepted(
        &app,
        app.post(DEPLOYMENTS, &routed("chat", 2, 4, 86_400)).await,
    )
    .await;
    assert_eq!(chat["state"], "succeeded", "{chat}");
    let code = accepted(&app, app.post(DEPLOYMENTS, &routed("code", 1, 2, 30)).await).await;
    assert_eq!(code["state"], "succeeded", "{code}");
    assert!(
        app.json("/api/operations").await.as_array().unwrap().len()
            >= ops.as_array().unwrap().len() + 2
    );
    check_schemas(&chat);
    check_schemas(&code);
    let (a, b) = (objects(&chat), objects(&code));
    assert_eq!(
        a,
        [
            "Deployment/chat",
            "ServiceAccount/chat-router",
            "Role/chat-router",
            "RoleBinding/chat-router",
            "Deployment/chat-router",
            "Service/chat",
            "ScaledObject/chat"
        ]
    );
    assert!(
        a.iter().all(|o| !b.contains(o)),
        "no object is shared: {a:?} {b:?}"
    );
    assert!(a
        .iter()
        .chain(&b)
        .all(|o| !o.starts_with("Cluster") && !o.starts_with("ConfigMap")));
    let worker = &chat["params"]["manifests"][0];
    assert!(
        worker["spec"].get("replicas").is_none(),
        "KEDA owns the replica count: {worker}"
    );

    let d = deployment(&app, "chat").await.unwrap();
    assert_eq!(d["state"], "ready", "{d}");
    assert_eq!(
        (d["replicas"].as_u64(), d["readyReplicas"].as_u64()),
        (Some(2), Some(2)),
        "{d}"
    );
    assert_eq!(d["router"]["policy"], "cache_aware");
    assert_eq!(d["router"]["ready"], true);
    assert_eq!(d["autoscaling"]["minReplicas"], 2);
    assert_eq!(d["autoscaling"]["active"], false, "{d}");

    // Served through its own router, by one of its own workers; a prompt keeps its worker.
    let r = invoke(&app, "chat", "Say hello in one word.").await;
    assert_eq!(r.status(), StatusCode::OK);
    let first: Value = r.json().await.unwrap();
    let via = first["x_sandbox"]["router"].as_str().unwrap().to_string();
    let pod = first["x_sandbox"]["pod"].as_str().unwrap().to_string();
    assert!(via.starts_with("chat-router-"), "{first}");
    assert!(
        pod.starts_with("chat-") && !pod.starts_with("chat-router-"),
        "{first}"
    );
    for _ in 0..3 {
        let again: Value = invoke(&app, "chat", "Say hello in one word.")
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(
            again["x_sandbox"]["pod"],
            pod.as_str(),
            "same prefix, same worker"
        );
    }

    // Load on chat's queue scales chat, and only chat.
    for i in 0..8 {
        let r = invoke(&app, "chat", &format!("question {i}: what is a GPU?")).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    let d = deployment(&app, "chat").await.unwrap();
    assert_eq!(
        d["replicas"], 4,
        "12 queued requests at 3 per replica, capped at 4: {d}"
    );
    assert_eq!(d["autoscaling"]["active"], true);
    let c = deployment(&app, "code").await.unwrap();
    assert_eq!(c["replicas"], 1, "{c}");

    // A warm pool; two models served from it; one pod moved between them by its label.
    let pool = accepted(
        &app,
        app.post(
            POOLS,
            &json!({"poolName": "warm", "image": SGLANG, "size": 2}),
        )
        .await,
    )
    .await;
    assert_eq!(pool["state"], "succeeded", "{pool}");
    let p = app.json(&format!("{POOLS}/warm")).await;
    assert_eq!(
        (p["ready"].as_u64(), p["free"].as_u64()),
        (Some(2), Some(2)),
        "{p}"
    );
    let pods: Vec<String> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    for m in ["m1", "m2"] {
        let op = accepted(
            &app,
            app.post(DEPLOYMENTS, &json!({"deploymentName": m, "pool": "warm"}))
                .await,
        )
        .await;
        assert_eq!(op["state"], "succeeded", "{op}");
        assert_eq!(objects(&op), [format!("Service/{m}")]);
    }
    let p = problem(
        app.post(
            DEPLOYMENTS,
            &json!({"deploymentName": "m3", "pool": "warm", "gpus": 2}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "gpus");
    let assign = |pod: &str, model: &str| {
        let body = json!({"pod": pod, "model": model});
        let url = app.url(&format!("{POOLS}/warm/assign"));
        let client = app.client.clone();
        async move { client.post(url).json(&body).send().await.unwrap() }
    };
    let op = accepted(&app, assign(&pods[0], "m1").await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        deployment(&app, "m1").await.unwrap()["pods"],
        json!([pods[0]])
    );
    let served: Value = invoke(&app, "m1", "hi").await.json().await.unwrap();
    assert_eq!(served["x_sandbox"]["pod"], pods[0].as_str());
    let op = accepted(&app, assign(&pods[0], "m2").await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let (m1, m2) = (
        deployment(&app, "m1").await.unwrap(),
        deployment(&app, "m2").await.unwrap(),
    );
    assert_eq!(m1["pods"], json!([]), "{m1}");
    assert_eq!(m2["pods"], json!([pods[0]]), "{m2}");
    let served: Value = invoke(&app, "m2", "hi").await.json().await.unwrap();
    assert_eq!(served["x_sandbox"]["pod"], pods[0].as_str());
    assert_eq!(
        problem(invoke(&app, "m1", "hi").await, StatusCode::CONFLICT).await["type"],
        "urn:instantstart:problem:deployment-not-ready"
    );
    let p = app.json(&format!("{POOLS}/warm")).await;
    let now: Vec<&str> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(now, pods, "no pod of the pool was restarted or replaced");
    let bad = problem(assign("nope", "m1").await, StatusCode::NOT_FOUND).await;
    assert!(bad["hint"].to_string().contains(&pods[1]), "{bad}");
    let bad = problem(
        assign(&pods[1], "chat").await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(bad["field"], "model");

    // A scale-down below what is assigned is refused and changes nothing; to 1, the free pod goes.
    let scale = |size: i64| {
        app.client
            .patch(app.url(&format!("{POOLS}/warm")))
            .json(&json!({"size": size}))
            .send()
    };
    let refused = problem(scale(0).await.unwrap(), StatusCode::CONFLICT).await;
    assert_eq!(
        refused["type"],
        "urn:instantstart:problem:pool-pods-assigned"
    );
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("1 of its pods are free"),
        "{refused}"
    );
    assert_eq!(app.json(&format!("{POOLS}/warm")).await["size"], 2);
    assert_eq!(scale(2).await.unwrap().status(), StatusCode::OK);
    let op = accepted(&app, scale(1).await.unwrap()).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let p = app.json(&format!("{POOLS}/warm")).await;
    let left: Vec<&str> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(left, [pods[0].as_str()], "the assigned pod stays: {p}");
    let refused = problem(
        app.client
            .delete(app.url(&format!("{POOLS}/warm")))
            .send()
            .await
            .unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        refused["type"],
        "urn:instantstart:problem:pool-pods-assigned"
    );

    // Deleting one model leaves the other's objects as they were.
    let code_before = deployment(&app, "code").await.unwrap();
    let gone = app.delete_and_wait(&format!("{DEPLOYMENTS}/chat")).await;
    assert_eq!(gone["state"], "succeeded", "{gone}");
    assert!(deployment(&app, "chat").await.is_none());
    assert_eq!(deployment(&app, "code").await.unwrap(), code_before);
    let served: Value = invoke(&app, "code", "still here?")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        served["x_sandbox"]["router"]
            .as_str()
            .map(|r| r.starts_with("code-router-")),
        Some(true),
        "{served}"
    );
    // A pool-served model's pods go back to the pool when it is deleted.
    let gone = app.delete_and_wait(&format!("{DEPLOYMENTS}/m2")).await;
    assert_eq!(gone["state"], "succeeded", "{gone}");
    let p = app.json(&format!("{POOLS}/warm")).await;
    assert_eq!(
        (p["assigned"].as_u64(), p["free"].as_u64()),
        (Some(0), Some(1)),
        "{p}"
    );
    let gone = app.delete_and_wait(&format!("{POOLS}/warm")).await;
    assert_eq!(gone["state"], "succeeded", "{gone}");
}

/// The paths of a routed, autoscaled model's objects on the API server.
fn model_paths(name: &str) -> Vec<String> {
    let ns = "namespaces/default";
    vec![
        format!("/apis/apps/v1/{ns}/deployments/{name}"),
        format!("/apis/apps/v1/{ns}/deployments/{name}-router"),
        format!("/api/v1/{ns}/serviceaccounts/{name}-router"),
        format!("/api/v1/{ns}/services/{name}"),
        format!("/apis/rbac.authorization.k8s.io/v1/{ns}/roles/{name}-router"),
        format!("/apis/rbac.authorization.k8s.io/v1/{ns}/rolebindings/{name}-router"),
        format!("/apis/keda.sh/v1alpha1/{ns}/scaledobjects/{name}"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_scalers_and_a_relabelled_pool_pod_on_the_kubernetes_emulator() {
    use crate::kube::AwsPipeline;
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (emu, client, base) = (&p.emu, p.client.clone(), p.base.clone());
    let post = |path: &str, body: Value| {
        let req = client.post(format!("{base}{path}")).json(&body);
        async move { req.send().await.unwrap() }
    };
    let started = |r: reqwest::Response| async move {
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let b: Value = r.json().await.unwrap();
        b["operationId"].as_str().unwrap().to_string()
    };

    // An internet-facing load balancer without its source networks: 422, nothing written.
    let before = emu.mutations().await;
    let r = post(
        DEPLOYMENTS,
        json!({"deploymentName": "open", "service": "external-load-balancer"}),
    )
    .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "allowedSourceCidrs"
    );
    assert_eq!(emu.mutations().await, before);

    // Two SGLang models, each with its own router and ScaledObject.
    let mut snapshot = Vec::new();
    for name in ["alpha", "beta"] {
        let id = started(post(DEPLOYMENTS, routed(name, 2, 4, 300)).await).await;
        emu.appeared(&model_paths(name)[6]).await;
        emu.mark_workloads_ready().await;
        let op = wait_terminal(&client, &base, &id).await;
        assert_eq!(op["state"], "succeeded", "{op}");
        if name == "alpha" {
            for path in model_paths("alpha") {
                snapshot.push(emu.get(&path).await.unwrap_or_else(|| panic!("{path}")));
            }
        }
    }
    let role = emu.get(&model_paths("beta")[4]).await.unwrap();
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
    );
    let binding = emu.get(&model_paths("beta")[5]).await.unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "beta-router", "namespace": "default"}])
    );
    // Prometheus scrapes what the autoscaling queries read: the engine (SGLang exporting its
    // metrics) on its port, the router on its metrics port.
    for (path, port) in [
        (&model_paths("beta")[0], "8000"),
        (&model_paths("beta")[1], "29000"),
    ] {
        let d = emu.get(path).await.unwrap();
        let a = &d["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(a["prometheus.io/scrape"], "true", "{path}: {a}");
        assert_eq!(a["prometheus.io/port"], port, "{path}: {a}");
        assert_eq!(a["prometheus.io/path"], "/metrics", "{path}: {a}");
    }
    let engine = emu.get(&model_paths("beta")[0]).await.unwrap();
    assert!(
        engine["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--enable-metrics")),
        "{engine}"
    );
    let so = emu.get(&model_paths("beta")[6]).await.unwrap();
    assert_eq!(so["spec"]["scaleTargetRef"]["name"], "beta");
    assert_eq!(Schemas::load().errors(&so), Vec::<String>::new(), "{so}");
    let svc = emu.get(&model_paths("beta")[3]).await.unwrap();
    assert_eq!(
        svc["spec"]["selector"],
        json!({"app.kubernetes.io/name": "beta-router"})
    );
    assert!(
        emu.items("/apis/rbac.authorization.k8s.io/v1/clusterroles")
            .await
            .iter()
            .all(|r| !r["metadata"]["name"].as_str().unwrap().contains("router")),
        "no cluster-wide role for a router"
    );
    let listed: Value = client
        .get(format!("{base}{DEPLOYMENTS}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["alpha", "beta"],
        "routers are not listed as models: {listed}"
    );

    // A warm pool whose pods the test plays the ReplicaSet for.
    let id = started(
        post(
            POOLS,
            json!({"poolName": "warm", "image": SGLANG, "size": 2}),
        )
        .await,
    )
    .await;
    let pool = emu
        .appeared("/apis/apps/v1/namespaces/default/deployments/warm")
        .await;
    let labels = pool["spec"]["template"]["metadata"]["labels"].clone();
    assert_eq!(labels["instantstart.io/serves"], "unassigned");
    for pod in ["warm-7d4b9c-a1", "warm-7d4b9c-b2"] {
        emu.send(reqwest::Method::POST, "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "default", "labels": labels},
                   "spec": {"containers": [{"name": "server", "image": SGLANG}]},
                   "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
            "application/json").await;
    }
    emu.merge_patch(
        "/apis/apps/v1/namespaces/default/deployments/warm/status",
        json!({"status": {"replicas": 2, "readyReplicas": 2}}),
    )
    .await;
    assert_eq!(
        wait_terminal(&client, &base, &id).await["state"],
        "succeeded"
    );
    for m in ["m1", "m2"] {
        let id =
            started(post(DEPLOYMENTS, json!({"deploymentName": m, "pool": "warm"})).await).await;
        assert_eq!(
            wait_terminal(&client, &base, &id).await["state"],
            "succeeded"
        );
    }
    // The pods each model's Service sends requests to, by its own selector.
    let backends = |m: &'static str| async move {
        let svc = emu
            .get(&format!("/api/v1/namespaces/default/services/{m}"))
            .await
            .unwrap();
        let selector: Vec<String> = svc["spec"]["selector"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        let mut pods: Vec<String> = emu
            .items(&format!(
                "/api/v1/namespaces/default/pods?labelSelector={}",
                selector.join(",")
            ))
            .await
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        pods.sort();
        pods
    };
    let assign = |model: &str| {
        post(
            "/api/clusters/demo/pools/warm/assign",
            json!({"pod": "warm-7d4b9c-a1", "model": model}),
        )
    };
    let id = started(assign("m1").await).await;
    assert_eq!(
        wait_terminal(&client, &base, &id).await["state"],
        "succeeded"
    );
    assert_eq!(
        (backends("m1").await, backends("m2").await),
        (vec!["warm-7d4b9c-a1".to_string()], vec![])
    );
    let id = started(assign("m2").await).await;
    assert_eq!(
        wait_terminal(&client, &base, &id).await["state"],
        "succeeded"
    );
    assert_eq!(
        (backends("m1").await, backends("m2").await),
        (vec![], vec!["warm-7d4b9c-a1".to_string()])
    );
    let moved = emu
        .get("/api/v1/namespaces/default/pods/warm-7d4b9c-a1")
        .await
        .unwrap();
    assert_eq!(
        moved["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"],
        "1000"
    );
    assert_eq!(
        moved["metadata"]["labels"]["instantstart.io/pool"], "warm",
        "still the pool's pod"
    );

    // Shrinking below the assigned pod: refused, nothing written.
    let before = emu.mutations().await;
    let r = client
        .patch(format!("{base}{POOLS}/warm"))
        .json(&json!({"size": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::CONFLICT).await["type"],
        "urn:instantstart:problem:pool-pods-assigned"
    );
    assert_eq!(emu.mutations().await, before);
    assert_eq!(
        emu.get("/apis/apps/v1/namespaces/default/deployments/warm")
            .await
            .unwrap()["spec"]["replicas"],
        2
    );

    // Deleting one model removes its objects only.
    let gone =
        crate::helpers::delete_and_wait(&client, &base, &format!("{DEPLOYMENTS}/beta")).await;
    assert_eq!(gone["state"], "succeeded", "{gone}");
    for path in model_paths("beta") {
        assert!(emu.get(&path).await.is_none(), "{path} is gone");
    }
    for (path, was) in model_paths("alpha").iter().zip(&snapshot) {
        let now = emu.get(path).await.unwrap();
        assert_eq!(
            now["metadata"]["resourceVersion"], was["metadata"]["resourceVersion"],
            "{path} untouched"
        );
    }
}

/// A deployment scaling on an Amazon Managed Service for Prometheus workspace: its operation
/// first gives KEDA an identity of its own (a pod-identity role that may query that workspace
/// only, bound to keda/keda-operator), so KEDA reads the metric; a second workspace is added to
/// the same role, and nothing else is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_on_amp_gives_keda_an_identity_that_may_query_only_the_named_workspaces() {
    let app = spawn_app().await;
    let mut body = pipeline_body();
    body["instanceType"] = json!("ml.g5.12xlarge");
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let amp = |ws: &str| format!("https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{ws}");
    let mut first = routed("chat", 1, 2, 30);
    first["autoscaling"]["prometheusUrl"] = json!(amp("ws-aaaa1111"));
    let op = accepted(&app, app.post(DEPLOYMENTS, &first).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(phase_names(&op), ["keda-identity", "apply"], "{op}");
    let out = &op["phases"][0]["outputs"];
    assert_eq!(
        out["workspaces"],
        json!(["arn:aws:aps:us-west-2:123456789012:workspace/ws-aaaa1111"]),
        "{out}"
    );
    assert!(
        out["roleArn"]
            .as_str()
            .unwrap()
            .ends_with(":role/instantstart/demo-keda"),
        "{out}"
    );
    let chat = deployment(&app, "chat").await.unwrap();
    assert_eq!(chat["autoscaling"]["ready"], true, "{chat}");

    let mut second = routed("code", 1, 2, 30);
    second["autoscaling"]["prometheusUrl"] = json!(amp("ws-bbbb2222"));
    let op = accepted(&app, app.post(DEPLOYMENTS, &second).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let ws = op["phases"][0]["outputs"]["workspaces"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(ws.len(), 2, "{op}");
    assert!(ws
        .iter()
        .all(|w| w.as_str().unwrap().contains(":aps:us-west-2:")));
    // In-cluster Prometheus needs no AWS identity: no such phase.
    let op = accepted(
        &app,
        app.post(DEPLOYMENTS, &routed("plain", 1, 2, 30)).await,
    )
    .await;
    assert_eq!(phase_names(&op), ["apply"], "{op}");
}

/// The state and reason `GET …/dependencies` reports for one component.
async fn dependency(app: &TestApp, name: &str) -> (String, String) {
    let deps = app.json("/api/clusters/demo/dependencies").await;
    let c = deps["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {deps}"));
    (
        c["state"].as_str().unwrap().to_string(),
        c["reason"].as_str().unwrap().to_string(),
    )
}

/// The inference operator's add-on brings its own KEDA, and only one metrics server can be
/// registered: enabling it removes ours first (its controller, not the CRDs), the dependency
/// stage then leaves KEDA to the add-on, an AMP trigger is read with the add-on's KEDA role (no
/// role of ours is made; a workspace in another region is refused, since that role may not
/// query it), and disabling it brings ours back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inference_operators_keda_takes_over_from_ours_and_hands_back() {
    let app = spawn_app().await;
    let mut body = pipeline_body();
    body["instanceType"] = json!("ml.g5.12xlarge");
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    assert_eq!(dependency(&app, "keda").await.0, "ready");

    enable(&app, "fsxCsi").await;
    let op = toggle(&app, "inferenceOperator", true).await;
    let names = phase_names(&op);
    let at = |n: &str| names.iter().position(|p| *p == n).unwrap();
    assert!(at("keda-handover") < at("addon"), "{names:?}");
    let removed = &op["phases"][at("keda-handover")]["outputs"]["removed"];
    assert!(
        removed
            .as_array()
            .unwrap()
            .contains(&json!("Deployment/keda-operator")),
        "{removed}"
    );
    let (state, reason) = dependency(&app, "keda").await;
    assert_eq!(state, "ready", "{reason}");
    assert!(
        reason.contains("provided by the amazon-sagemaker-hyperpod-inference add-on"),
        "{reason}"
    );
    // The dependency stage, run again, applies nothing of ours.
    let id = app
        .start("/api/clusters/demo/dependencies", &json!({}))
        .await;
    let deps = app.wait_terminal(&id).await;
    assert_eq!(deps["state"], "succeeded", "{deps}");
    let keda = deps["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "keda")
        .unwrap();
    assert_eq!(
        keda["outputs"]["providedBy"], "amazon-sagemaker-hyperpod-inference",
        "{keda}"
    );

    let amp = |region: &str, ws: &str| {
        format!("https://aps-workspaces.{region}.amazonaws.com/workspaces/{ws}")
    };
    let mut chat = routed("chat", 1, 2, 30);
    chat["autoscaling"]["prometheusUrl"] = json!(amp("us-west-2", "ws-aaaa1111"));
    let op = accepted(&app, app.post(DEPLOYMENTS, &chat).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let out = &op["phases"][0]["outputs"];
    assert_eq!(
        out["servedBy"], "amazon-sagemaker-hyperpod-inference",
        "{out}"
    );
    assert_eq!(out["roleName"], "demo-inference-keda", "{out}");
    let view = deployment(&app, "chat").await.unwrap();
    assert_eq!(view["autoscaling"]["ready"], true, "{view}");
    let mut far = routed("far", 1, 2, 30);
    far["autoscaling"]["prometheusUrl"] = json!(amp("eu-west-1", "ws-bbbb2222"));
    let op = accepted(&app, app.post(DEPLOYMENTS, &far).await).await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(op.to_string().contains("keda-cross-region"), "{op}");

    let op = toggle(&app, "inferenceOperator", false).await;
    let names = phase_names(&op);
    let at = |n: &str| names.iter().position(|p| *p == n).unwrap();
    assert!(
        at("addon") < at("keda"),
        "ours returns after the add-on is gone: {names:?}"
    );
    let (state, reason) = dependency(&app, "keda").await;
    assert_eq!(state, "ready", "{reason}");
    assert!(!reason.contains("provided by"), "{reason}");
}
