//! Workloads placed as teams (task governance): a training job, a managed endpoint and a
//! self-managed model in its team's namespace with the Kueue labels, refused with the valid
//! teams and classes before anything is made; and a job's admission as Kueue writes it on its
//! Workload (admitted, pending and why, preempted and by which job, its place in the queue),
//! read through the real adapter from the Kubernetes emulator with Workloads that conform to
//! Kueue's own CRD.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::teams::{policy, send, until_done, POLICY, TEAMS};

/// `base` with the fields of `patch` set.
fn with(base: &Value, patch: Value) -> Value {
    let mut b = base.clone();
    for (k, v) in patch.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// Each request is refused on its field (with the valid values in `hint`, unless null), and
/// nothing is called for any of them.
async fn refused(app: &TestApp, path: &str, cases: &[(Value, &str, Value)]) {
    let before = mutating_calls(&app.calls().await);
    for (body, field, hint) in cases {
        let p = problem(app.post(path, body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], *field, "{body} → {p}");
        if !hint.is_null() {
            assert_eq!(p["hint"], *hint, "{body} → {p}");
        }
    }
    assert_eq!(mutating_calls(&app.calls().await), before);
}

/// The Kueue labels of a labels object: `[queue, class]`.
fn kueue(labels: &Value) -> Value {
    json!([
        labels["kueue.x-k8s.io/queue-name"],
        labels["kueue.x-k8s.io/priority-class"]
    ])
}

/// The Kueue labels of `team` at `class`.
fn kueue_of(team: &str, class: &str) -> Value {
    json!([
        format!("hyperpod-ns-{team}-localqueue"),
        format!("{class}-priority")
    ])
}

/// Where a workload's view says it runs, and its state: `[namespace, team, priority, state]`.
fn placed(view: &Value) -> Value {
    json!([
        view["namespace"],
        view["team"],
        view["priority"],
        view["state"]
    ])
}

/// A `demo` cluster shared by team-a and team-b (one instance each) under the test policy,
/// with `features` on besides task governance.
pub(crate) async fn shared_cluster(features: &[&str]) -> TestApp {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    for key in std::iter::once(&"taskGovernance").chain(features) {
        enable(&app, key).await;
    }
    let (status, body) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    assert_eq!(until_done(&app, status, &body).await["state"], "succeeded");
    for team in ["team-a", "team-b"] {
        let body =
            json!({"teamName": team, "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]});
        let op = app.wait_terminal(&app.start(TEAMS, &body).await).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_as_its_team_at_its_priority_and_a_wrong_team_or_class_names_the_valid_ones() {
    use crate::training::{enable_training_operator, sft, training_cluster};
    const JOBS: &str = "/api/clusters/demo/training-jobs";
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;
    let mut job = sft("sft-team");
    job["nodeCount"] = json!(1);
    let with = |patch: Value| with(&job, patch);

    // Not governed: there is no queue to name, and the refusal says so.
    let p = problem(
        app.post(JOBS, &with(json!({"team": "team-a"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "team", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("no task governance"),
        "{p}"
    );

    assert_eq!(
        toggle(&app, "taskGovernance", true).await["state"],
        "succeeded"
    );
    let (status, body) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    assert_eq!(until_done(&app, status, &body).await["state"], "succeeded");
    // MLflow is set up between the two teams: team-a's namespace gets the training identity
    // from the MLflow setup, team-b's from its own creation.
    for name in ["team-a", "mlflow", "team-b"] {
        let op = if name == "mlflow" {
            app.wait_terminal(&app.start("/api/mlflow", &json!({"cluster": "demo"})).await)
                .await
        } else {
            let body = json!({"teamName": name, "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]});
            app.wait_terminal(&app.start(TEAMS, &body).await).await
        };
        assert_eq!(op["state"], "succeeded", "{op}");
    }

    // Shared now: no team, an unknown team or an unknown class is refused with the valid values,
    // before anything is called.
    let teams = json!(["team-a", "team-b"]);
    refused(
        &app,
        JOBS,
        &[
            (job.clone(), "team", teams.clone()),
            (with(json!({"team": "team-z"})), "team", teams),
            (
                with(json!({"team": "team-a", "priority": "urgent"})),
                "priority",
                json!(["inference", "training"]),
            ),
            (with(json!({"team": "Team A"})), "team", Value::Null),
        ],
    )
    .await;
    let before = mutating_calls(&app.calls().await);
    let p = problem(app.post(JOBS, &job).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(
        p["detail"].as_str().unwrap().contains("team-a, team-b"),
        "a missing team names the teams: {p}"
    );
    // Managed tiered checkpointing keeps its identity in namespace default.
    let p = problem(
        app.post(
            JOBS,
            &with(json!({"team": "team-b", "checkpointing": "managed-tiered"})),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "checkpointing", "{p}");
    assert_eq!(mutating_calls(&app.calls().await), before);

    // As team-b at priority training: the team's namespace, its LocalQueue and the class, on the
    // job and on the pods Kueue admits, reporting to MLflow as the identity copied there.
    let accepted = crate::training::submit(
        &app,
        &with(json!({"team": "team-b", "priority": "training"})),
    )
    .await;
    let op = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifest = &op["params"]["manifests"][0];
    assert_eq!(manifest["metadata"]["namespace"], "hyperpod-ns-team-b");
    let pod = &manifest["spec"]["replicaSpecs"][0]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "instantstart-training", "{pod}");
    let expected = kueue_of("team-b", "training");
    assert_eq!(kueue(&manifest["metadata"]["labels"]), expected);
    assert_eq!(
        kueue(&manifest["spec"]["replicaSpecs"][0]["template"]["metadata"]["labels"]),
        expected
    );
    let view = app.json(&format!("{JOBS}/sft-team")).await;
    assert_eq!(
        placed(&view),
        json!(["hyperpod-ns-team-b", "team-b", "training", "succeeded"]),
        "{view}"
    );
    let listed = app.json(JOBS).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == "sft-team" && j["team"] == "team-b"),
        "{listed}"
    );
    // Its run reached MLflow.
    let runs = app.json("/api/mlflow/runs?experiment=sft-team").await;
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    // The name is the cluster's: another team cannot take it.
    let p = problem(
        app.post(JOBS, &with(json!({"team": "team-a"}))).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(p["field"], "jobName", "{p}");

    // Its logs are found in its namespace; deleting it removes it there.
    let logs = app
        .json("/api/clusters/demo/workloads/pytorch/sft-team/logs")
        .await;
    assert_eq!(logs["pods"].as_array().map(Vec::len), Some(1), "{logs}");
    let op = app.delete_and_wait(&format!("{JOBS}/sft-team")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    problem(
        app.get(&format!("{JOBS}/sft-team")).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

/// A managed endpoint runs as a team too: refused without one on a shared cluster (naming the
/// teams), then made in the team's namespace with its queue and class, found there to be read,
/// invoked, patched and deleted, its manifest still the CRD's and the SDK's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_runs_as_its_team_and_is_served_changed_and_removed_in_its_namespace() {
    const ENDPOINTS: &str = "/api/clusters/demo/endpoints";
    let app = shared_cluster(&["fsxCsi", "inferenceOperator"]).await;
    let endpoint = json!({"endpointName": "qwen", "model": "/s3/models/Qwen/Qwen3-8B",
                          "instanceType": "ml.g5.8xlarge"});
    let with = |patch: Value| with(&endpoint, patch);
    let teams = json!(["team-a", "team-b"]);
    refused(
        &app,
        ENDPOINTS,
        &[
            (endpoint.clone(), "team", teams.clone()),
            (with(json!({"team": "team-z"})), "team", teams),
            (
                with(json!({"team": "team-a", "priority": "urgent"})),
                "priority",
                json!(["inference", "training"]),
            ),
        ],
    )
    .await;

    let op = app
        .wait_terminal(
            &app.start(
                ENDPOINTS,
                &with(json!({"team": "team-a", "priority": "inference"})),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifests = op["params"]["manifests"].as_array().unwrap().clone();
    let meta = &manifests[0]["metadata"];
    assert_eq!(meta["namespace"], "hyperpod-ns-team-a", "{meta}");
    assert_eq!(
        kueue(&meta["labels"]),
        kueue_of("team-a", "inference"),
        "{meta}"
    );
    let schemas = crate::crds::Schemas::load();
    assert_eq!(schemas.errors(&manifests[0]), Vec::<String>::new());
    assert_peer_accepts("hyperpod_endpoint_models.py", &manifests);

    let e = app.json(&format!("{ENDPOINTS}/qwen")).await;
    assert_eq!(
        placed(&e),
        json!([
            "hyperpod-ns-team-a",
            "team-a",
            "inference",
            "DeploymentComplete"
        ]),
        "{e}"
    );
    // The name is the cluster's, whatever the team.
    let p = problem(
        app.post(ENDPOINTS, &with(json!({"team": "team-b"}))).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(p["field"], "endpointName", "{p}");
    let r = app
        .post(
            &format!("{ENDPOINTS}/qwen/invoke"),
            &json!({"prompt": "hello"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    // A change is applied in its namespace, keeping its labels.
    let (status, body) = send(
        &app,
        reqwest::Method::PATCH,
        &format!("{ENDPOINTS}/qwen"),
        &json!({"replicas": 2}),
    )
    .await;
    let op = until_done(&app, status, &body).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let applied = &op["params"]["manifests"][0]["metadata"];
    assert_eq!(
        (&applied["namespace"], &applied["labels"]),
        (&meta["namespace"], &meta["labels"]),
        "{applied}"
    );
    let op = app.delete_and_wait(&format!("{ENDPOINTS}/qwen")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.json(ENDPOINTS).await, json!([]));
}

/// A self-managed model runs as a team as well: its Deployment, Service and router in the
/// team's namespace (the router discovers and may read pods there only), its pods labelled for
/// the team's queue and class and mounting the team's copy of the claim; found there to be
/// listed, invoked and deleted; its name stays the cluster's. A warm pool too, and the models
/// served from it run where it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_and_a_warm_pool_run_as_their_teams_in_the_teams_namespaces() {
    const DEPLOYMENTS: &str = "/api/clusters/demo/deployments";
    let app = shared_cluster(&[]).await;
    let model = json!({"deploymentName": "chat", "image": "lmsysorg/sglang:v0.5.8",
        "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"],
        "replicas": 2, "router": {}});
    let with = |patch: Value| with(&model, patch);
    refused(
        &app,
        DEPLOYMENTS,
        &[
            (model.clone(), "team", json!(["team-a", "team-b"])),
            (
                with(json!({"team": "team-b", "priority": "urgent"})),
                "priority",
                json!(["inference", "training"]),
            ),
            (
                json!({"deploymentName": "pooled", "pool": "warm", "team": "team-b"}),
                "team",
                Value::Null,
            ),
        ],
    )
    .await;

    let op = app
        .wait_terminal(
            &app.start(
                DEPLOYMENTS,
                &with(json!({"team": "team-b", "priority": "inference"})),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifests = op["params"]["manifests"].as_array().unwrap();
    for m in manifests {
        assert_eq!(m["metadata"]["namespace"], "hyperpod-ns-team-b", "{m}");
    }
    let of = |kind: &str, name: &str| {
        manifests
            .iter()
            .find(|m| m["kind"] == kind && m["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let dep = of("Deployment", "chat");
    let expected = kueue_of("team-b", "inference");
    assert_eq!(kueue(&dep["metadata"]["labels"]), expected);
    assert_eq!(
        kueue(&dep["spec"]["template"]["metadata"]["labels"]),
        expected
    );
    let volumes = &dep["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["persistentVolumeClaim"]["claimName"] == "s3-claim"),
        "the team's copy of the claim at /s3: {volumes}"
    );
    let binding = of("RoleBinding", "chat-router");
    assert_eq!(
        binding["subjects"][0]["namespace"], "hyperpod-ns-team-b",
        "{binding}"
    );
    let args = of("Deployment", "chat-router")["spec"]["template"]["spec"]["containers"][0]["args"]
        .clone();
    let discovery = args
        .as_array()
        .unwrap()
        .iter()
        .position(|a| a == "--service-discovery-namespace")
        .unwrap();
    assert_eq!(args[discovery + 1], "hyperpod-ns-team-b", "{args}");

    let listed = app.json(DEPLOYMENTS).await;
    let chat = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "chat")
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        placed(&chat),
        json!(["hyperpod-ns-team-b", "team-b", "inference", "ready"]),
        "{chat}"
    );
    assert_eq!(chat["router"]["ready"], true, "{chat}");
    let r = app
        .post(
            &format!("{DEPLOYMENTS}/chat/invoke"),
            &json!({"prompt": "hello"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    // The name is the cluster's: team-a cannot take it.
    let p = problem(
        app.post(DEPLOYMENTS, &with(json!({"team": "team-a"})))
            .await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(p["field"], "deploymentName", "{p}");
    let op = app.delete_and_wait(&format!("{DEPLOYMENTS}/chat")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let deleted: Vec<&str> = op["params"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["namespace"].as_str())
        .collect();
    assert!(
        !deleted.is_empty() && deleted.iter().all(|n| *n == "hyperpod-ns-team-b"),
        "{op}"
    );
    assert_eq!(app.json(DEPLOYMENTS).await, json!([]));

    // A warm pool as team-a holds its GPUs on team-a's quota; a model served from it runs as
    // the pool does, and its pod changes hands in that namespace.
    const POOLS: &str = "/api/clusters/demo/pools";
    let op = app
        .wait_terminal(
            &app.start(
                POOLS,
                &json!({"poolName": "warm", "team": "team-a", "priority": "inference",
                        "image": "lmsysorg/sglang:v0.5.8", "size": 1}),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let pool = &op["params"]["manifests"][0];
    assert_eq!(pool["metadata"]["namespace"], "hyperpod-ns-team-a");
    assert_eq!(
        kueue(&pool["spec"]["template"]["metadata"]["labels"]),
        kueue_of("team-a", "inference")
    );
    let p = problem(
        app.post(
            DEPLOYMENTS,
            &json!({"deploymentName": "m1", "pool": "warm", "team": "team-b"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "team", "{p}");
    let op = app
        .wait_terminal(
            &app.start(
                DEPLOYMENTS,
                &json!({"deploymentName": "m1", "pool": "warm"}),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let pool = app.json(&format!("{POOLS}/warm")).await;
    assert_eq!(
        (pool["namespace"].as_str(), pool["team"].as_str()),
        (Some("hyperpod-ns-team-a"), Some("team-a")),
        "{pool}"
    );
    let pod = pool["pods"][0]["name"].as_str().unwrap().to_string();
    let op = app
        .wait_terminal(
            &app.start(
                &format!("{POOLS}/warm/assign"),
                &json!({"pod": pod, "model": "m1"}),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let m1 = app.json(&format!("{DEPLOYMENTS}/m1")).await;
    assert_eq!(
        (
            m1["namespace"].as_str(),
            m1["pods"].as_array().map(Vec::len)
        ),
        (Some("hyperpod-ns-team-a"), Some(1)),
        "{m1}"
    );
    // Deleting the model hands its pod back to the pool, in the pool's namespace.
    let op = app.delete_and_wait(&format!("{DEPLOYMENTS}/m1")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let pool = app.json(&format!("{POOLS}/warm")).await;
    assert_eq!(pool["assigned"], 0, "{pool}");
}

/// A Kueue Workload for job `job` of team-a (as Kueue makes one per queued job: owned by it,
/// its pod set, the class's priority), with the conditions given.
fn workload(job: &str, uid: &str, priority: i64, created: &str, conditions: Value) -> Value {
    let conditions: Vec<Value> = conditions
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c["lastTransitionTime"] = json!(created);
            c
        })
        .collect();
    let mut status = json!({ "conditions": conditions });
    if conditions
        .iter()
        .any(|c| c["type"] == "Admitted" && c["status"] == "True")
    {
        status["admission"] = json!({"clusterQueue": "hyperpod-ns-team-a-clusterqueue",
            "podSetAssignments": [{"name": "pods", "count": 1,
                                   "flavors": {"nvidia.com/gpu": "ml.g5.8xlarge"}}]});
    }
    json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
           "metadata": {"name": format!("hyperpodpytorchjob-{job}-5f2c1"), "namespace": "hyperpod-ns-team-a",
                        "uid": uid, "creationTimestamp": created,
                        "labels": {"kueue.x-k8s.io/job-uid": format!("job-{uid}")},
                        "ownerReferences": [{"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
                                             "name": job, "uid": format!("job-{uid}"), "controller": true}]},
           "spec": {"queueName": "hyperpod-ns-team-a-localqueue", "priority": priority,
                    "priorityClassName": "training-priority", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                    "podSets": [{"name": "pods", "count": 1, "template": {"spec": {"containers": [
                        {"name": "pytorch", "image": "pytorch", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]},
           "status": status})
}

/// A team's model whose pods Kueue admits one by one (pod integration): two replicas, one
/// admitted and one waiting for quota, each with the Workload Kueue made for its pod, read back
/// through the deployments listing in AWS mode against the Kubernetes emulator.
pub(crate) async fn pods_admission_is_read_from_kueues_workloads(p: &crate::kube::AwsPipeline) {
    let ns = "hyperpod-ns-team-a";
    let quota = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed";
    let labels = json!({"app.kubernetes.io/managed-by": "instantstart", "instantstart.io/workload": "inference",
                        "app.kubernetes.io/name": "chat",
                        "kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
                        "kueue.x-k8s.io/priority-class": "inference-priority"});
    let post = |path: String, body: Value| {
        let emu = &p.emu;
        async move {
            emu.send(reqwest::Method::POST, &path, body, "application/json")
                .await
        }
    };
    post(
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "chat", "namespace": ns, "labels": labels},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app.kubernetes.io/name": "chat"}},
                        "template": {"metadata": {"labels": labels},
                                     "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:latest"}]}}}}),
    )
    .await;
    let schemas = crate::crds::Schemas::load();
    for (pod, admitted, created) in [
        ("chat-7d9f-a1", true, "2026-12-01T10:00:00Z"),
        ("chat-7d9f-b2", false, "2026-12-01T10:00:01Z"),
    ] {
        post(
            format!("/api/v1/namespaces/{ns}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod, "namespace": ns, "labels": labels},
                   "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:latest"}]}}),
        )
        .await;
        let mut w = workload(
            pod,
            &format!("w-{pod}"),
            90,
            created,
            if admitted {
                json!([{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved"},
                       {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}])
            } else {
                json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quota}])
            },
        );
        // Kueue's pod integration: the Workload is the pod's, named after it.
        w["metadata"]["name"] = json!(format!("pod-{pod}-3c1e0"));
        w["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                                    "uid": format!("pod-{pod}"), "controller": true}]);
        w["spec"]["priorityClassName"] = json!("inference-priority");
        assert_eq!(schemas.errors(&w), Vec::<String>::new(), "{w}");
        post(
            format!("/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads"),
            w,
        )
        .await;
    }
    let deployments = crate::kube::get(
        &p.client,
        format!("{}/api/clusters/demo/deployments", p.base),
    )
    .await;
    let chat = deployments
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "chat")
        .unwrap_or_else(|| panic!("{deployments}"));
    let a = &chat["admission"];
    assert_eq!(
        (
            chat["team"].as_str(),
            a["admitted"].as_u64(),
            a["pending"].as_u64(),
            a["waiting"]["state"].as_str(),
            a["waiting"]["message"].as_str(),
            a["waiting"]["position"].as_u64()
        ),
        (
            Some("team-a"),
            Some(1),
            Some(1),
            Some("pending"),
            Some(quota),
            Some(1)
        ),
        "{chat}"
    );
}

/// With team-a on the cluster (governance on, in AWS mode against the Kubernetes emulator):
/// three jobs of team-a submitted elsewhere and the Workloads Kueue made for them — one
/// admitted, one preempted by it, one pending for quota — read back as each job's admission.
pub(crate) async fn admission_is_read_from_kueues_workloads(p: &crate::kube::AwsPipeline) {
    let ns = "hyperpod-ns-team-a";
    let quota = "couldn't assign flavors to pod set pods: insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed";
    let cond = |kind: &str, status: &str, reason: &str, message: &str| json!({"type": kind, "status": status, "reason": reason, "message": message});
    let workloads = [
        workload("big", "w1", 90, "2026-12-01T10:00:00Z", json!([
            cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue hyperpod-ns-team-a-clusterqueue"),
            cond("Admitted", "True", "Admitted", "The workload is admitted")])),
        workload("bumped", "w2", 70, "2026-12-01T09:00:00Z", json!([
            cond("QuotaReserved", "False", "Pending", quota),
            cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"),
            cond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload (UID: w1, JobUID: job-w1) due to prioritization in the ClusterQueue; preemptor path: /hyperpod-ns-team-a-clusterqueue; preemptee path: /hyperpod-ns-team-a-clusterqueue")])),
        workload("late", "w3", 70, "2026-12-01T11:00:00Z", json!([
            cond("QuotaReserved", "False", "Pending", quota)])),
    ];
    let schemas = crate::crds::Schemas::load();
    for w in &workloads {
        assert_eq!(schemas.errors(w), Vec::<String>::new(), "{w}");
    }
    for job in ["big", "bumped", "late"] {
        let manifest = json!({"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": {"name": job, "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
                                    "kueue.x-k8s.io/priority-class": "training-priority"}},
            "spec": {"replicaSpecs": [{"name": "pods", "replicas": 1}]}});
        p.emu
            .send(
                reqwest::Method::POST,
                &format!("/apis/sagemaker.amazonaws.com/v1/namespaces/{ns}/hyperpodpytorchjobs"),
                manifest,
                "application/json",
            )
            .await;
    }
    for w in workloads {
        p.emu
            .send(
                reqwest::Method::POST,
                &format!("/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads"),
                w,
                "application/json",
            )
            .await;
    }
    let jobs = crate::kube::get(
        &p.client,
        format!("{}/api/clusters/demo/training-jobs", p.base),
    )
    .await;
    let admission = |name: &str| {
        jobs.as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {jobs}"))["admission"]
            .clone()
    };
    let big = admission("big");
    assert_eq!(
        (
            big["state"].as_str(),
            big["clusterQueue"].as_str(),
            &big["position"]
        ),
        (
            Some("admitted"),
            Some("hyperpod-ns-team-a-clusterqueue"),
            &Value::Null
        ),
        "{big}"
    );
    let bumped = admission("bumped");
    assert_eq!(
        (
            bumped["state"].as_str(),
            bumped["reason"].as_str(),
            bumped["preemptedBy"].as_str(),
            bumped["position"].as_u64()
        ),
        (
            Some("preempted"),
            Some("InClusterQueue"),
            Some("big"),
            Some(1)
        ),
        "{bumped}"
    );
    // How much is team-a's: its ClusterQueue's quota and use, as Kueue counts them.
    let queue = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": "hyperpod-ns-team-a-clusterqueue"},
        "spec": {"cohort": "shared-pool", "namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                     "flavors": [{"name": "ml.g5.8xlarge", "resources": [
                         {"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"},
                         {"name": "nvidia.com/gpu", "nominalQuota": "1"}]}]}]},
        "status": {"admittedWorkloads": 1, "pendingWorkloads": 2, "reservingWorkloads": 1,
                   "flavorsUsage": [{"name": "ml.g5.8xlarge", "resources": [
                       {"name": "cpu", "total": "4", "borrowed": "0"},
                       {"name": "nvidia.com/gpu", "total": "1", "borrowed": "0"}]}]}});
    assert_eq!(schemas.errors(&queue), Vec::<String>::new(), "{queue}");
    p.emu
        .send(
            reqwest::Method::POST,
            "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
            queue,
            "application/json",
        )
        .await;
    let teams = crate::kube::get(&p.client, format!("{}{TEAMS}", p.base)).await;
    let usage = &teams["teams"][0]["usage"];
    assert_eq!(
        usage,
        &json!({"admittedWorkloads": 1, "pendingWorkloads": 2, "flavors": [
            {"flavor": "ml.g5.8xlarge", "nominal": 1.0, "inUse": 1.0, "borrowed": 0.0, "lent": 0.0}]}),
        "{teams}"
    );
    let late = admission("late");
    assert_eq!(
        (
            late["state"].as_str(),
            late["message"].as_str(),
            late["position"].as_u64()
        ),
        (Some("pending"), Some(quota), Some(2)),
        "the same priority queues behind the older workload: {late}"
    );
}
