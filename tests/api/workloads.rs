//! Workloads in the sandbox: model downloads (the token never stored here), jobs, self-managed
//! inference with a smoke test through the service proxy, the software update and a look into
//! a storage claim.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

async fn started(app: &TestApp, path: &str, body: &Value) -> Value {
    let r = app.post(path, body).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let accepted: Value = r.json().await.unwrap();
    app.wait_terminal(accepted["operationId"].as_str().unwrap())
        .await
}

async fn delete(app: &TestApp, path: &str) -> reqwest::Response {
    app.client.delete(app.url(path)).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_downloads_into_a_claim_and_its_token_stays_in_the_cluster() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    assert_eq!(app.json("/api/clusters/demo/models").await, json!([]));

    for (body, field) in [
        (json!({"modelId": "not-a-repo"}), "modelId"),
        (json!({"modelId": "a/$(id)"}), "modelId"),
        (
            json!({"modelId": "Qwen/Qwen3-8B", "revision": "--all"}),
            "revision",
        ),
        (
            json!({"modelId": "Qwen/Qwen3-8B", "claim": "other"}),
            "claim",
        ),
        (
            json!({"modelId": "Qwen/Qwen3-8B", "hfToken": "a b"}),
            "hfToken",
        ),
    ] {
        let r = app.post("/api/clusters/demo/models", &body).await;
        assert_eq!(
            problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
            field,
            "{body}"
        );
    }

    // Someone else's Secret under the name a download's token would take is never
    // overwritten: the request is refused by field, and nothing is applied.
    let planted = format!(
        "{}-token",
        instantstart::service::workloads::download_job_name("Org/Planted", "main")
    );
    let target = instantstart::cloud::KubeTarget {
        cluster: "demo".into(),
        endpoint: String::new(),
        certificate_authority: String::new(),
    };
    app.cloud
        .kube
        .apply(
            &target,
            &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": planted, "namespace": "default"},
                    "stringData": {"token": "theirs"}}),
        )
        .await
        .unwrap();
    let r = app
        .post(
            "/api/clusters/demo/models",
            &json!({"modelId": "Org/Planted", "hfToken": "hf_SecretTokenValue123"}),
        )
        .await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(p["type"], "urn:instantstart:problem:secret-exists", "{p}");
    let kept = app
        .cloud
        .kube
        .get(
            &target,
            &instantstart::cloud::ObjectRef {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: Some("default".into()),
                name: planted.clone(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept["stringData"]["token"], "theirs", "{kept}");

    let token = "hf_SecretTokenValue123";
    let op = started(
        &app,
        "/api/clusters/demo/models",
        &json!({"modelId": "Qwen/Qwen3-8B", "hfToken": token}),
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert!(
        !op.to_string().contains(token),
        "the token is not in the operation"
    );
    let all_ops = app.json("/api/operations?cluster=demo").await;
    assert!(!all_ops.to_string().contains(token));
    let models = app.json("/api/clusters/demo/models").await;
    assert_eq!(models[0]["modelId"], "Qwen/Qwen3-8B");
    assert_eq!(models[0]["state"], "succeeded");
    assert_eq!(models[0]["path"], "models/Qwen/Qwen3-8B");
    // Its files are in the claim's bucket, where a pod reads them at /s3/models/Qwen/Qwen3-8B.
    let objects = app
        .json("/api/clusters/demo/storage/s3-claim/objects?prefix=models/Qwen/Qwen3-8B/")
        .await;
    assert!(
        objects["keys"]
            .as_array()
            .unwrap()
            .contains(&json!("models/Qwen/Qwen3-8B/config.json")),
        "{objects}"
    );
    assert_eq!(models[0]["claim"], "s3-claim");
    let job = models[0]["job"].as_str().unwrap().to_string();
    assert!(job.starts_with("hf-download-"), "{job}");

    // Once is enough: the same model again is refused and names the way out.
    let r = app
        .post(
            "/api/clusters/demo/models",
            &json!({"modelId": "Qwen/Qwen3-8B"}),
        )
        .await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["detail"].as_str().unwrap().contains("job_delete"), "{p}");

    // The job is listed; deleting it allows the download again.
    let jobs = app.json("/api/clusters/demo/jobs").await;
    let listed = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == job.as_str())
        .unwrap();
    assert_eq!(
        (listed["kind"].as_str(), listed["managed"].as_bool()),
        (Some("job"), Some(true))
    );
    let r = delete(&app, "/api/clusters/demo/jobs/nope").await;
    problem(r, StatusCode::NOT_FOUND).await;
    let r = delete(&app, &format!("/api/clusters/demo/jobs/{job}?kind=cron")).await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "kind"
    );
    let op = app
        .delete_and_wait(&format!("/api/clusters/demo/jobs/{job}"))
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.json("/api/clusters/demo/models").await, json!([]));
    let again = started(
        &app,
        "/api/clusters/demo/models",
        &json!({"modelId": "Qwen/Qwen3-8B"}),
    )
    .await;
    assert_eq!(again["state"], "succeeded");

    // The claim's bucket can be looked into (the lifecycle script lives there).
    let objects = app
        .json("/api/clusters/demo/storage/s3-claim/objects?prefix=lifecycle/")
        .await;
    assert_eq!(
        objects["keys"],
        json!(["lifecycle/on_create.sh"]),
        "{objects}"
    );
    let r = app.get("/api/clusters/demo/storage/nope/objects").await;
    problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_is_served_invoked_through_the_api_server_and_removed() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    for (body, field) in [
        (json!({"deploymentName": "Bad_Name"}), "deploymentName"),
        (
            json!({"deploymentName": "qwen", "image": "vllm; rm -rf /"}),
            "image",
        ),
        (json!({"deploymentName": "qwen", "gpus": 9}), "gpus"),
        (
            json!({"deploymentName": "qwen", "service": "public"}),
            "service",
        ),
        (
            json!({"deploymentName": "qwen", "instanceType": "ml.p5.48xlarge"}),
            "instanceType",
        ),
        (json!({"deploymentName": "qwen", "claim": "nope"}), "claim"),
    ] {
        let r = app.post("/api/clusters/demo/deployments", &body).await;
        assert_eq!(
            problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
            field,
            "{body}"
        );
    }
    let op = started(
        &app,
        "/api/clusters/demo/deployments",
        &json!({"deploymentName": "qwen", "args": ["--model", "/s3/models/Qwen/Qwen3-8B"],
                "instanceType": "ml.g5.8xlarge", "service": "load-balancer"}),
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifests = op["params"]["manifests"].as_array().unwrap();
    let dep = manifests
        .iter()
        .find(|m| m["kind"] == "Deployment")
        .unwrap();
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(
        pod["nodeSelector"]["node.kubernetes.io/instance-type"],
        "ml.g5.8xlarge"
    );
    assert_eq!(
        pod["containers"][0]["args"],
        json!(["--model", "/s3/models/Qwen/Qwen3-8B"])
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["persistentVolumeClaim"]
                == json!({"claimName": "s3-claim", "readOnly": true})),
        "{pod}"
    );
    assert!(
        pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"] == "/s3" && m["readOnly"] == true),
        "{pod}"
    );
    let svc = manifests.iter().find(|m| m["kind"] == "Service").unwrap();
    assert_eq!(
        svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"],
        "internal",
        "never internet-facing"
    );
    let list = app.json("/api/clusters/demo/deployments").await;
    assert_eq!(list[0]["name"], "qwen");
    assert_eq!(
        (list[0]["readyReplicas"].as_u64(), list[0]["state"].as_str()),
        (Some(1), Some("ready"))
    );
    let endpoint = list[0]["endpoint"].as_str().unwrap_or_default();
    assert!(
        endpoint.starts_with("http://internal-") && endpoint.ends_with(":8000"),
        "{list}"
    );

    let r = app
        .post(
            "/api/clusters/demo/deployments/qwen/invoke",
            &json!({"prompt": "Say hi"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "(sandbox) Say hi"
    );
    let r = app
        .post(
            "/api/clusters/demo/deployments/other/invoke",
            &json!({"prompt": "x"}),
        )
        .await;
    assert_eq!(
        problem(r, StatusCode::NOT_FOUND).await["hint"],
        json!(["qwen"])
    );
    let r = app
        .post(
            "/api/clusters/demo/deployments/qwen/invoke",
            &json!({"prompt": ""}),
        )
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "prompt"
    );
    let r = app
        .post(
            "/api/clusters/demo/deployments/qwen/invoke",
            &json!({"prompt": "x", "url": "http://169.254.169.254/"}),
        )
        .await;
    assert_eq!(problem(r, StatusCode::BAD_REQUEST).await["field"], "url");

    // The cluster has two single-GPU nodes and qwen holds one GPU: a replica cannot ask for
    // more than a node has, and what does not fit stays pending until the deployment's
    // progress deadline fails the operation with the scheduler's reason.
    let r = app
        .post(
            "/api/clusters/demo/deployments",
            &json!({"deploymentName": "big", "gpus": 2}),
        )
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "gpus"
    );
    let status = app.json("/api/clusters/demo/status").await;
    assert_eq!(
        (status["gpusTotal"].as_u64(), status["gpusFree"].as_u64()),
        (Some(2), Some(1)),
        "{status}"
    );
    let op = started(
        &app,
        "/api/clusters/demo/deployments",
        &json!({"deploymentName": "two", "replicas": 2}),
    )
    .await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(op.to_string().contains("cannot be scheduled"), "{op}");
    let status = app.json("/api/clusters/demo/status").await;
    assert_eq!(
        (status["gpusFree"].as_u64(), status["pendingGpus"].as_u64()),
        (Some(0), Some(1)),
        "{status}"
    );
    let op = app
        .delete_and_wait("/api/clusters/demo/deployments/two")
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let op = app
        .delete_and_wait("/api/clusters/demo/deployments/qwen")
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.json("/api/clusters/demo/deployments").await, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_software_update_is_one_watched_operation() {
    // (That it queues behind group changes is a unit test of the conflict rules: here it would
    // be a race with the sandbox's clock.)
    let app = spawn_app().await;
    let r = app
        .post("/api/clusters/demo/hyperpod/software-update", &json!({}))
        .await;
    problem(r, StatusCode::NOT_FOUND).await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let before = accepted_count(&app.calls().await, "sagemaker:UpdateClusterSoftware");
    let op = started(
        &app,
        "/api/clusters/demo/hyperpod/software-update",
        &json!({}),
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["actor"], "api");
    assert_eq!(
        accepted_count(&app.calls().await, "sagemaker:UpdateClusterSoftware"),
        before + 1
    );
    // The default plan: every group, one node at a time.
    assert_eq!(
        op["params"],
        json!({"instanceGroups": [], "batch": {"instances": 1}, "rollbackAlarms": []})
    );

    // A planned update: each field SageMaker would refuse is refused here first, by field,
    // and nothing is sent.
    let url = "/api/clusters/demo/hyperpod/software-update";
    for (body, field) in [
        (json!({"instanceGroups": ["nope"]}), "instanceGroups[0]"),
        (
            json!({"batchInstances": 1, "batchPercent": 5}),
            "batchPercent",
        ),
        (json!({"batchPercent": 101}), "batchPercent"),
        (json!({"batchInstances": 0}), "batchInstances"),
        (json!({"waitSeconds": 3601}), "waitSeconds"),
        (json!({"rollbackAlarms": []}), "rollbackAlarms"),
        (json!({"rollbackAlarms": [" "]}), "rollbackAlarms[0]"),
        (json!({"imageId": "ami-xyz"}), "imageId"),
    ] {
        let p = problem(app.post(url, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    assert_eq!(
        accepted_count(&app.calls().await, "sagemaker:UpdateClusterSoftware"),
        before + 1
    );
    let group = app.json("/api/clusters/demo/instance-groups").await[0]["name"].clone();
    let plan = json!({"instanceGroups": [group], "batchPercent": 50, "waitSeconds": 60,
                      "rollbackAlarms": ["gpu-errors"], "imageId": "ami-0123456789abcdef0"});
    let op = started(&app, url, &plan).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        op["params"],
        json!({"instanceGroups": [group], "batch": {"percent": 50}, "waitSeconds": 60,
               "rollbackAlarms": ["gpu-errors"], "imageId": "ami-0123456789abcdef0"})
    );

    // And the simulated SageMaker refuses what SageMaker would, whoever sends it.
    let bad = instantstart::cloud::SoftwareUpdate {
        batch: instantstart::cloud::UpdateBatch::Percent(150),
        ..Default::default()
    };
    let e = app
        .cloud
        .hyperpod
        .update_cluster_software("demo-hp", &bad)
        .await
        .unwrap_err();
    assert_eq!(e.code, "ValidationException", "{e:?}");
    let bad = instantstart::cloud::SoftwareUpdate {
        instance_groups: vec!["nope".into()],
        ..Default::default()
    };
    assert!(app
        .cloud
        .hyperpod
        .update_cluster_software("demo-hp", &bad)
        .await
        .is_err());
}

/// An internet-facing load balancer only on explicit request, with its source networks required
/// and validated (never the whole internet), and the deployment's view saying it is public.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_load_balancer_needs_its_source_networks_and_says_it_is_public() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let base = json!({"deploymentName": "pub", "args": ["--model", "/s3/models/Qwen/Qwen3-8B"],
                      "service": "external-load-balancer"});
    for (extra, why) in [
        (json!({}), "no source networks"),
        (json!({"allowedSourceCidrs": []}), "an empty list"),
        (
            json!({"allowedSourceCidrs": ["0.0.0.0/0"]}),
            "the whole internet",
        ),
        (json!({"allowedSourceCidrs": ["10.0.0.0/33"]}), "no CIDR"),
        (
            json!({"service": "cluster-ip", "allowedSourceCidrs": ["203.0.113.0/24"]}),
            "not external",
        ),
    ] {
        let mut body = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = app.post("/api/clusters/demo/deployments", &body).await;
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], "allowedSourceCidrs", "{why}: {p}");
    }
    assert_eq!(app.json("/api/clusters/demo/deployments").await, json!([]));
    let mut body = base.clone();
    body["allowedSourceCidrs"] = json!(["203.0.113.0/24", "198.51.100.7/32"]);
    // Only the AWS Load Balancer Controller makes an external NLB; the inference operator's
    // add-on brings it. Without it: refused, saying how, nothing written.
    let before = mutating_calls(&app.calls().await);
    let r = app.post("/api/clusters/demo/deployments", &body).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(p["field"], "service", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("inferenceOperator"),
        "{p}"
    );
    assert_eq!(mutating_calls(&app.calls().await), before);
    assert_eq!(app.json("/api/clusters/demo/deployments").await, json!([]));
    enable(&app, "fsxCsi").await;
    enable(&app, "inferenceOperator").await;
    let op = started(&app, "/api/clusters/demo/deployments", &body).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let svc = op["params"]["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "Service")
        .unwrap()
        .clone();
    assert_eq!(
        svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"],
        "internet-facing"
    );
    assert_eq!(
        svc["spec"]["loadBalancerSourceRanges"],
        json!(["203.0.113.0/24", "198.51.100.7/32"])
    );
    let list = app.json("/api/clusters/demo/deployments").await;
    assert_eq!(list[0]["public"], true, "{list}");
    assert_eq!(
        list[0]["allowedSources"],
        json!(["203.0.113.0/24", "198.51.100.7/32"])
    );
    assert!(
        !list[0]["endpoint"].as_str().unwrap().contains("internal-"),
        "{list}"
    );
}

/// A query string that cannot be read (a field twice, an unknown one) is answered as every
/// other refusal is, `application/problem+json` naming the query, on every route that takes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_query_string_is_a_problem_answer() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    for (method, path) in [
        (
            reqwest::Method::DELETE,
            "/api/clusters/demo/jobs/x?kind=job&kind=ray",
        ),
        (
            reqwest::Method::DELETE,
            "/api/clusters/demo/storage/s3-claim?namespace=a&namespace=b",
        ),
        (
            reqwest::Method::GET,
            "/api/clusters/demo/storage/s3-claim/objects?nope=1",
        ),
    ] {
        let r = app
            .client
            .request(method, app.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], "query", "{path}: {p}");
    }
}
