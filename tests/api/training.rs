//! Training in the sandbox: recipes listed, bad submissions refused by field with nothing
//! applied, a job followed to `succeeded` with an injected pod failure in its restart count, a
//! job that exhausts its budget failing with the operator's reason, idempotent resubmission,
//! deletion; and every generated job checked against AWS's HyperPod SDK models and the RayJob
//! CRD schema.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::crds::Schemas;
use crate::helpers::*;

const JOBS: &str = "/api/clusters/demo/training-jobs";

/// A sandbox cluster with storage and the training operator enabled.
pub(crate) async fn training_cluster(faults: Option<&'static str>) -> TestApp {
    let app = spawn_app_with(Opts {
        faults,
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    app
}

pub(crate) async fn enable_training_operator(app: &TestApp) {
    let r = app
        .client
        .patch(app.url("/api/clusters/demo/features"))
        .json(&json!({"trainingOperator": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    let id = body["features"]["trainingOperator"]["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
}

pub(crate) fn sft(name: &str) -> Value {
    json!({"jobName": name, "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge", "nodeCount": 2,
           "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca"})
}

pub(crate) async fn submit(app: &TestApp, body: &Value) -> Value {
    let r = app.post(JOBS, body).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED, "{body}");
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_trains_to_succeeded_and_an_injected_pod_failure_shows_in_its_restarts() {
    let app = training_cluster(Some("k8s:PodFailure=1")).await;
    let recipes = app.json("/api/recipes").await;
    let names: Vec<_> = recipes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].clone())
        .collect();
    assert_eq!(
        names,
        json!(["pytorch", "llama-factory", "ms-swift", "verl"])
            .as_array()
            .unwrap()
            .clone()
    );
    assert!(recipes[0]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["field"] == "script" && i["required"] == true));

    // Without the operator: 409 saying how to enable it.
    let r = app.post(JOBS, &sft("sft-1")).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(
        p["detail"].as_str().unwrap().contains("trainingOperator"),
        "{p}"
    );
    enable_training_operator(&app).await;

    let with = |patch: Value| {
        let mut b = sft("sft-1");
        for (k, v) in patch.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    for (body, status, field) in [
        (with(json!({"recipe": "deepspeed-magic"})), 422, "recipe"),
        (with(json!({"model": "/etc/passwd"})), 422, "model"),
        (with(json!({"dataset": "/s3/../root"})), 422, "dataset"),
        (with(json!({"nodeCount": 0})), 422, "nodeCount"),
        (
            with(json!({"instanceType": "ml.p5.48xlarge"})),
            422,
            "instanceType",
        ),
        (
            with(
                json!({"elastic": {"minNodes": 1, "maxNodes": 4}, "checkpointing": "managed-tiered"}),
            ),
            422,
            "elastic",
        ),
        (with(json!({"script": "/s3/train.py"})), 422, "script"),
        (
            with(json!({"monitoring": {"logPattern": ".*loss.*"}})),
            422,
            "monitoring",
        ),
        (
            json!({"jobName": "rl", "recipe": "verl", "instanceType": "ml.g5.8xlarge", "model": "/s3/m", "dataset": "/s3/d",
                "recovery": {"jobMaxRetryCount": 2}}),
            422,
            "recovery",
        ),
        (
            // A stock image does not carry the elastic agent, whatever the request says.
            with(json!({"elasticAgent": "bundled"})),
            422,
            "elasticAgent",
        ),
        (
            json!({"jobName": "rl", "recipe": "verl", "instanceType": "ml.g5.8xlarge", "model": "/s3/m", "dataset": "/s3/d",
                "elasticAgent": "install"}),
            422,
            "elasticAgent",
        ),
        (
            // 48 characters: KubeRay's limit for a RayJob is 47, the operator's for a job 50.
            json!({"jobName": "r".repeat(48), "recipe": "verl", "instanceType": "ml.g5.8xlarge", "model": "/s3/m", "dataset": "/s3/d"}),
            422,
            "jobName",
        ),
        (
            json!({"jobName": "Bad_Name", "recipe": "pytorch", "instanceType": "ml.g5.8xlarge", "script": "/s3/t.py"}),
            422,
            "jobName",
        ),
    ] {
        let r = app.post(JOBS, &body).await;
        let p = problem(r, StatusCode::from_u16(status).unwrap()).await;
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    // Elastic training on an instance type with a Spot group is refused, naming the group.
    let spot = json!({"instanceGroupName": "spot", "instanceType": "ml.g5.8xlarge", "instanceCount": 1,
                      "zone": "us-west-2a", "capacityType": "spot"});
    let added = app
        .wait_terminal(&app.start("/api/clusters/demo/instance-groups", &spot).await)
        .await;
    assert_eq!(added["state"], "succeeded", "{added}");
    let r = app
        .post(
            JOBS,
            &with(json!({"elastic": {"minNodes": 1, "maxNodes": 4}})),
        )
        .await;
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(p["field"], "elastic", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("Spot")
            && p["detail"].as_str().unwrap().contains("`spot`"),
        "{p}"
    );
    // Refusals applied nothing.
    assert_eq!(app.json(JOBS).await, json!([]));

    let mut body = sft("sft-1");
    body["recovery"] =
        json!({"jobMaxRetryCount": 3, "restartsBeforeFullJobRestart": 2, "maxFullJobRestarts": 1});
    body["monitoring"] = json!({"logPattern": ".*loss: ([0-9.]+).*", "startCutoffSeconds": 600, "recurringFrequencySeconds": 300});
    let keyed = |key: &str| {
        app.client
            .post(app.url(JOBS))
            .header("idempotency-key", key)
            .json(&body)
    };
    let first: Value = keyed("k-1").send().await.unwrap().json().await.unwrap();
    let again: Value = keyed("k-1").send().await.unwrap().json().await.unwrap();
    assert_eq!(first["operationId"], again["operationId"]);
    assert_eq!(again["created"], false);

    let op = app
        .wait_terminal(first["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["kind"], "training-job");
    assert_eq!(op["phases"][0]["outputs"]["restarts"]["count"], 1, "{op}");
    // Exactly the generated spec was applied.
    let applied = &op["params"]["manifests"][0];
    assert_eq!(applied["spec"]["runPolicy"]["jobMaxRetryCount"], 3);

    let job = app.json(&format!("{JOBS}/sft-1")).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["origin"], "instantstart");
    assert_eq!(job["recipe"], "llama-factory");
    assert_eq!(job["restarts"]["count"], 1);
    assert_eq!(job["restarts"]["limit"], 3);
    assert_eq!(job["faultyPods"], json!(["sft-1-pods-0"]));
    assert_eq!(job["paths"]["model"], "/s3/models/Qwen/Qwen3-8B");
    assert_eq!(job["paths"]["output"], "/s3/outputs/sft-1");
    assert_eq!(job["nodes"], 2);

    // The same name again (another key) is refused; nothing else is applied.
    let r = app.post(JOBS, &sft("sft-1")).await;
    assert_eq!(problem(r, StatusCode::CONFLICT).await["field"], "jobName");

    let deleted = app.delete_and_wait(&format!("{JOBS}/sft-1")).await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert_eq!(app.json(JOBS).await, json!([]));
    let r = app.get(&format!("{JOBS}/sft-1")).await;
    problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_exhausts_its_recovery_budget_fails_with_the_operators_reason() {
    let app = training_cluster(Some("k8s:PodFailure=5")).await;
    enable_training_operator(&app).await;
    let mut body = sft("flaky");
    body["recovery"] = json!({"jobMaxRetryCount": 2});
    let accepted = submit(&app, &body).await;
    let op = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "failed", "{op}");
    let message = op["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("JobMaxRetryCountExceeded") && message.contains("restarts 2/2"),
        "{message}"
    );
    let job = app.json(&format!("{JOBS}/flaky")).await;
    assert_eq!(job["state"], "failed");
    assert_eq!(job["restarts"]["count"], 2);
}

/// Every HyperPodPyTorchJob the recipes make (with and without budget, hang detection and
/// elastic options), as the sandbox applied them, against AWS's own SDK models; the VERL RayJob
/// against the RayJob CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recipe_makes_a_job_that_the_sdk_models_and_the_crd_accept() {
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;
    // With MLflow set up, every job reports to it: the generated jobs carry that too.
    let setup = app.start("/api/mlflow", &json!({"cluster": "demo"})).await;
    assert_eq!(app.wait_terminal(&setup).await["state"], "succeeded");
    let bodies = [
        json!({"jobName": "plain", "recipe": "pytorch", "instanceType": "ml.g5.8xlarge", "script": "/s3/code/train.py",
               "args": ["--epochs=1"]}),
        json!({"jobName": "budget", "recipe": "pytorch", "instanceType": "ml.g5.8xlarge", "nodeCount": 2, "script": "/s3/code/train.py",
               "dataset": "/s3/data", "recovery": {"jobMaxRetryCount": 5, "restartsBeforeFullJobRestart": 3,
               "maxFullJobRestarts": 2, "evalPeriodSeconds": 7200, "repeatOffendersToAvoid": 1},
               "monitoring": {"logPattern": ".*tokens/s: ([0-9]+).*", "startCutoffSeconds": 900,
               "recurringFrequencySeconds": 300, "metricThreshold": 100, "operator": "lt"},
               "elastic": {"minNodes": 1, "maxNodes": 2}}),
        sft("lf"),
        json!({"jobName": "swift", "recipe": "ms-swift", "instanceType": "ml.g5.8xlarge", "model": "/s3/models/m",
               "dataset": "/s3/data/train.jsonl", "checkpointing": "managed-tiered"}),
        // An image built with the agent in it: no install at pod start.
        json!({"jobName": "own", "recipe": "pytorch", "instanceType": "ml.g5.8xlarge", "script": "/s3/code/train.py",
               "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1", "elasticAgent": "bundled"}),
    ];
    let mut specs = Vec::new();
    for body in &bodies {
        let accepted = submit(&app, body).await;
        let op = app
            .json(&format!(
                "/api/operations/{}",
                accepted["operationId"].as_str().unwrap()
            ))
            .await;
        let job = op["params"]["manifests"][0].clone();
        assert_eq!(job["kind"], "HyperPodPyTorchJob");
        let pod = &job["spec"]["replicaSpecs"][0]["template"]["spec"];
        let env = pod["containers"][0]["env"].as_array().unwrap();
        let var = |k: &str| {
            env.iter()
                .find(|e| e["name"] == k)
                .map(|e| e["value"].clone())
        };
        assert!(
            var("MLFLOW_TRACKING_URI")
                .and_then(|v| v.as_str().map(str::to_string))
                .is_some_and(|v| v.contains(":mlflow-app/")),
            "{pod}"
        );
        assert_eq!(var("MLFLOW_EXPERIMENT_NAME"), Some(body["jobName"].clone()));
        // The elastic agent: installed by an init container into a shared volume (stock
        // images carry none) and launched from there, or the image's own.
        let inits: Vec<&str> = pod["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        let command0 = pod["containers"][0]["command"][0].as_str().unwrap();
        if body["elasticAgent"] == "bundled" {
            assert_eq!(inits, ["mlflow-plugin"], "{pod}");
            assert_eq!(command0, "hyperpodrun");
        } else {
            assert_eq!(inits, ["elastic-agent", "mlflow-plugin"], "{pod}");
            assert_eq!(
                command0,
                instantstart::service::training::INSTALLED_LAUNCHER
            );
            let install = pod["initContainers"][0]["command"].to_string();
            assert!(
                install.contains(instantstart::cloud::images::ELASTIC_AGENT_PACKAGE)
                    && install.contains("--user"),
                "{install}"
            );
            assert_eq!(
                var("PYTHONUSERBASE"),
                Some(json!(instantstart::service::training::AGENT_DIR))
            );
        }
        let sa = if body["checkpointing"] == "managed-tiered" {
            "hyperpod-checkpointing"
        } else {
            "instantstart-training"
        };
        assert_eq!(pod["serviceAccountName"], sa, "{pod}");
        specs.push(job);
    }
    assert_peer_accepts("hyperpod_models.py", &specs);

    // VERL: the RayJob against the real CRD schema.
    use instantstart::service::training::{ray_job, recipe, CommandInputs, JobSpec};
    let verl = recipe("verl").unwrap();
    let command = verl.command(&CommandInputs {
        nodes: 2,
        gpus: 1,
        script: None,
        model: Some("/s3/models/m"),
        dataset: Some("/s3/data"),
        output: "/s3/outputs/rl",
        extra: &[],
        launcher: "hyperpodrun",
    });
    let rj = ray_job(&JobSpec {
        name: "rl",
        recipe: "verl",
        image: verl.image,
        instance_type: "ml.g5.8xlarge",
        nodes: 2,
        gpus: 1,
        command,
        paths: vec![("model", "/s3/models/m".into())],
        recovery: None,
        monitoring: None,
        elastic: None,
        tiered_checkpointing: false,
        tracking: Some("arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-1".into()),
        install_agent: false,
        package_index: None,
        placement: &Default::default(),
    });
    assert_eq!(Schemas::load().errors(&rj), Vec::<String>::new(), "{rj}");
}

/// Against moto and the Kubernetes emulator (the real kube-rs adapter): the applied
/// HyperPodPyTorchJob is exactly the generated one, its status is followed to the end, a keyed
/// resend creates nothing, and delete removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_training_job_is_applied_followed_and_deleted_on_the_kubernetes_emulator() {
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (emu, client, base) = (&p.emu, p.client.clone(), p.base.clone());

    // The training operator add-on, as EKS would have it once enabled (ACTIVE after the first
    // describe, as moto's gap-filler plays it).
    p.activate_addon("amazon-sagemaker-hyperpod-training-operator")
        .await;

    let submit = |key: &'static str| {
        client
            .post(format!("{base}{JOBS}"))
            .header("idempotency-key", key)
            .json(&sft("emu-sft"))
            .send()
    };
    let accepted: Value = submit("emu-1").await.unwrap().json().await.unwrap();
    assert_eq!(accepted["created"], true, "{accepted}");
    let id = accepted["operationId"].as_str().unwrap().to_string();
    let path = "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs/emu-sft";
    let mut applied = None;
    for _ in 0..400 {
        applied = emu.get(path).await;
        if applied.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let applied = applied.expect("the job is applied");
    let op = get(&client, format!("{base}/api/operations/{id}")).await;
    assert_eq!(
        applied["spec"], op["params"]["manifests"][0]["spec"],
        "exactly the generated spec"
    );
    assert_eq!(
        applied["metadata"]["annotations"]["instantstart.io/model"],
        "/s3/models/Qwen/Qwen3-8B"
    );
    let again: Value = submit("emu-1").await.unwrap().json().await.unwrap();
    assert_eq!(
        (again["operationId"].as_str(), again["created"].as_bool()),
        (Some(id.as_str()), Some(false))
    );

    // The operator's status, played on the emulator: a restart, then completion.
    let status_path = format!("{path}/status");
    let status = |s: Value| emu.merge_patch(&status_path, json!({"status": s}));
    status(
        json!({"restartCount": 1, "conditions": [{"type": "Created", "status": "True"},
        {"type": "Running", "status": "True"}]}),
    )
    .await;
    let running = get(&client, format!("{base}{JOBS}/emu-sft")).await;
    assert_eq!(running["state"], "running", "{running}");
    assert_eq!(running["restarts"]["count"], 1);
    status(json!({"conditions": [{"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"}, {"type": "Completed", "status": "True"}]}))
    .await;
    let done = wait_terminal(&client, &base, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");

    let deleted = delete_and_wait(&client, &base, &format!("{JOBS}/emu-sft")).await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert!(
        emu.get(path).await.is_none(),
        "the job is gone from the cluster"
    );
}
