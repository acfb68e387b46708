//! Managed inference endpoints in the sandbox: refused without the inference operator and for
//! bad fields (nothing applied), deployed with L1+L2 cache and prefix-aware routing to the
//! operator's DeploymentComplete, smoke-tested, scaled by PATCH (an identical PATCH does
//! nothing; routing cannot change), deleted; an injected failure carries the operator's reason;
//! every generated resource passes the CRD schema and the HyperPod SDK's endpoint model and
//! reproduces the cache and routing shapes of AWS's examples.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::crds::Schemas;
use crate::helpers::*;

const ENDPOINTS: &str = "/api/clusters/demo/endpoints";

pub(crate) fn endpoint(name: &str) -> Value {
    json!({"endpointName": name, "model": "/s3/models/Qwen/Qwen3-8B", "instanceType": "ml.g5.8xlarge",
           "sagemakerEndpoint": format!("{name}-sme"),
           "kvCache": {"l1": true, "l2": "tieredstorage"}, "routing": "prefixaware",
           "autoscaling": {"minReplicas": 1, "maxReplicas": 3,
                           "prometheus": {"serverAddress": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567",
                                          "query": "sum(rate(vllm:request_success_total[1m]))", "targetValue": 10}}})
}

/// The manifests of an endpoint operation, checked against both schema peers.
fn check_peers(manifests: &[Value]) {
    let schemas = Schemas::load();
    for m in manifests {
        assert_eq!(schemas.errors(m), Vec::<String>::new(), "{m}");
    }
    assert_peer_accepts("hyperpod_endpoint_models.py", manifests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_with_cache_tiers_and_routing_deploys_answers_scales_and_is_deleted() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let r = app.post(ENDPOINTS, &endpoint("qwen")).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(
        p["type"], "urn:instantstart:problem:inference-operator-missing",
        "{p}"
    );
    enable(&app, "fsxCsi").await;
    enable(&app, "inferenceOperator").await;

    // Bad fields: refused by name, nothing applied.
    let mut cases = Vec::new();
    for (patch, field) in [
        (json!({"routing": "fastest"}), "routing"),
        (json!({"kvCache": {"l2": "redis"}}), "kvCache.redisUrl"),
        (json!({"kvCache": {"l2": "disk"}}), "kvCache.l2"),
        (
            json!({"autoscaling": {"minReplicas": 4, "maxReplicas": 2}}),
            "autoscaling",
        ),
        (json!({"model": "/etc/models/x"}), "model"),
        (json!({"model": "/s3/../etc"}), "model"),
        (json!({"instanceType": "ml.c5.large"}), "instanceType"),
        (
            json!({"image": "busybox", "kvCache": {"l1": true}}),
            "kvCache",
        ),
        (json!({"replicas": 9}), "replicas"),
        (
            json!({"autoscaling": {"minReplicas": 1, "maxReplicas": 2,
                   "prometheus": {"serverAddress": "http://prometheus.monitoring.svc:9090", "query": "up", "targetValue": 1}}}),
            "autoscaling.prometheus.serverAddress",
        ),
    ] {
        let mut body = endpoint("bad");
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        cases.push((body, field));
    }
    for (body, field) in cases {
        let r = app.post(ENDPOINTS, &body).await;
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    assert_eq!(app.json(ENDPOINTS).await, json!([]));

    let accepted = app.start(ENDPOINTS, &endpoint("qwen")).await;
    let op = app.wait_terminal(&accepted).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifests = op["params"]["manifests"].as_array().unwrap().clone();
    let spec = &manifests[0]["spec"];
    // The operator writes its certificate where its role may write: the TLS prefix of the
    // cluster's bucket.
    let tls = spec["tlsConfig"]["tlsCertificateOutputS3Uri"]
        .as_str()
        .unwrap_or_default();
    assert!(
        tls.starts_with("s3://sagemaker-instantstart-demo-")
            && tls.ends_with(&format!(
                "/{}qwen",
                instantstart::service::steps::features::TLS_PREFIX
            )),
        "{tls}"
    );
    // The shapes of AWS's example (L1+L2 on tiered storage, prefix-aware routing).
    let example = crate::crds::example("v1_s3_llama70b_IR_L1_L2_membrain.yaml");
    assert_eq!(spec["kvCacheSpec"], example["spec"]["kvCacheSpec"]);
    assert_eq!(
        spec["intelligentRoutingSpec"],
        example["spec"]["intelligentRoutingSpec"]
    );
    assert_eq!(
        spec["modelSourceConfig"]["modelLocation"],
        "models/Qwen/Qwen3-8B"
    );
    assert_eq!(
        spec["worker"]["modelVolumeMount"],
        example["spec"]["worker"]["modelVolumeMount"]
    );
    assert!(spec.get("InitialReplicaCount").is_none());
    check_peers(&manifests);

    let e = app.json(&format!("{ENDPOINTS}/qwen")).await;
    assert_eq!(e["state"], "DeploymentComplete", "{e}");
    assert_eq!(e["routing"], "prefixaware");
    assert_eq!(e["kvCache"], json!({"l1": true, "l2": "tieredstorage"}));
    assert_eq!(e["sagemakerEndpoint"]["state"], "CreationCompleted");
    assert_eq!(e["autoscaling"]["maxReplicaCount"], 3);
    assert_eq!(app.json(ENDPOINTS).await.as_array().unwrap().len(), 1);
    let again = app.post(ENDPOINTS, &endpoint("qwen")).await;
    problem(again, StatusCode::CONFLICT).await;

    let r = app
        .post(
            &format!("{ENDPOINTS}/qwen/invoke"),
            &json!({"prompt": "Say hello"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "(sandbox) Say hello"
    );
    // The path an invocation goes to is read back from the cluster, where someone may change
    // it: one that is not a plain relative path is never called through the API server.
    let target = instantstart::cloud::KubeTarget {
        cluster: "demo".into(),
        endpoint: String::new(),
        certificate_authority: String::new(),
    };
    let at = instantstart::cloud::ObjectRef {
        api_version: "inference.sagemaker.aws.amazon.com/v1".into(),
        kind: "InferenceEndpointConfig".into(),
        namespace: Some("default".into()),
        name: "qwen".into(),
    };
    let original = app.cloud.kube.get(&target, &at).await.unwrap().unwrap();
    let mut changed = json!({"apiVersion": original["apiVersion"], "kind": original["kind"],
        "metadata": {"name": "qwen", "namespace": "default", "labels": original["metadata"]["labels"]},
        "spec": original["spec"]});
    changed["spec"]["invocationEndpoint"] = json!("/api/v1/namespaces/kube-system/secrets");
    app.cloud.kube.apply(&target, &changed).await.unwrap();
    let r = app
        .post(
            &format!("{ENDPOINTS}/qwen/invoke"),
            &json!({"prompt": "Say hello"}),
        )
        .await;
    assert_eq!(
        problem(r, StatusCode::CONFLICT).await["type"],
        "urn:instantstart:problem:endpoint-path-unsafe"
    );
    changed["spec"] = original["spec"].clone();
    app.cloud.kube.apply(&target, &changed).await.unwrap();

    // Scale by PATCH; the same PATCH again changes nothing; routing is fixed.
    let patch = |body: Value| {
        app.client
            .patch(app.url(&format!("{ENDPOINTS}/qwen")))
            .json(&body)
            .send()
    };
    let r = patch(json!({"replicas": 2})).await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    let op = app
        .wait_terminal(body["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["kind"], "endpoint-update");
    let applied = &op["params"]["manifests"][0]["spec"];
    assert_eq!(applied["replicas"], 2);
    assert_eq!(
        applied["kvCacheSpec"], spec["kvCacheSpec"],
        "nothing else changed"
    );
    check_peers(op["params"]["manifests"].as_array().unwrap());
    let calls_before = app.calls().await;
    let r = patch(json!({"replicas": 2})).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["replicas"], 2);
    assert_eq!(
        calls_before,
        app.calls().await,
        "an identical PATCH makes no mutating call"
    );
    let r = patch(json!({"routing": "kvaware"})).await.unwrap();
    let p = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(p["field"], "routing");
    assert!(
        p["detail"].as_str().unwrap().contains("deploy it again"),
        "{p}"
    );

    let r = app
        .client
        .delete(app.url(&format!("{ENDPOINTS}/qwen")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        app.wait_terminal(body["operationId"].as_str().unwrap())
            .await["state"],
        "succeeded"
    );
    let r = app
        .client
        .get(app.url(&format!("{ENDPOINTS}/qwen")))
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deployment_carries_the_operators_reason() {
    let app = inference_app(Opts {
        faults: Some("k8s:EndpointFailure=1"),
        data_buckets: vec!["other-models-*"],
        ..Default::default()
    })
    .await;
    let mut body = endpoint("oom");
    body["routing"] = Value::Null;
    body["model"] = json!("s3://other-models-bucket/llama");
    let op = app.wait_terminal(&app.start(ENDPOINTS, &body).await).await;
    assert_eq!(op["state"], "failed", "{op}");
    let message = op["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ProgressDeadlineExceeded") && message.contains("CUDA out of memory"),
        "{message}"
    );
    let e = app.json(&format!("{ENDPOINTS}/oom")).await;
    assert_eq!(e["state"], "DeploymentFailed");
    assert_eq!(e["model"], "s3://other-models-bucket/llama");
    assert_eq!(e["routing"], Value::Null);
}

/// Against moto and the Kubernetes emulator (the real kube-rs adapter): the endpoint is applied
/// as generated, followed from the status the operator writes, scaled by a PATCH that changes
/// only `replicas`, an identical PATCH makes no request that mutates, and delete removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_is_applied_followed_scaled_and_deleted_on_the_kubernetes_emulator() {
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (emu, client, base) = (&p.emu, p.client.clone(), p.base.clone());
    // The inference operator add-on, as EKS has it once the feature is enabled.
    p.activate_addon("amazon-sagemaker-hyperpod-inference")
        .await;

    let mut body = endpoint("emu-ep");
    body["autoscaling"] = Value::Null;
    // A model in a bucket of its own: the operator mounts it through the S3 CSI driver, whose
    // role is given that bucket first and loses it with the endpoint.
    body["model"] = json!("s3://their-models/llama");
    let csi_policy = || {
        p.moto
            .role_policy("demo-s3-csi", "instantstart-shared-bucket")
    };
    assert!(!csi_policy().await.contains("their-models"));
    // Someone who may write endpoints in a namespace plants one, labelled as the product's,
    // whose model bucket is a pattern: it must never widen the S3 CSI role.
    emu.send(
        reqwest::Method::POST,
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs",
        json!({"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
               "metadata": {"name": "planted", "labels": {"app.kubernetes.io/managed-by": "instantstart"}},
               "spec": {"modelSourceConfig": {"modelSourceType": "s3",
                                              "s3Storage": {"bucketName": "*", "region": "us-west-2"}}}}),
        "application/json",
    )
    .await;
    // And one whose model bucket is well formed and reachable, but that nobody asked the
    // product to mount: only the product's own records widen the role.
    emu.send(
        reqwest::Method::POST,
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs",
        json!({"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
               "metadata": {"name": "planted-too", "labels": {"app.kubernetes.io/managed-by": "instantstart"}},
               "spec": {"modelSourceConfig": {"modelSourceType": "s3",
                                              "s3Storage": {"bucketName": "their-payroll", "region": "us-west-2"}}}}),
        "application/json",
    )
    .await;
    let accepted: Value = client
        .post(format!("{base}{ENDPOINTS}"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["operationId"]
        .as_str()
        .expect("accepted")
        .to_string();
    let path = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/emu-ep";
    let applied = emu.appeared(path).await;
    let op = get(&client, format!("{base}/api/operations/{id}")).await;
    assert_eq!(applied["spec"], op["params"]["manifests"][0]["spec"]);
    let status_path = format!("{path}/status");
    let status = |s: Value| emu.merge_patch(&status_path, json!({"status": s}));
    status(json!({"state": "DeploymentInProgress", "replicas": 0})).await;
    let pending = get(&client, format!("{base}{ENDPOINTS}/emu-ep")).await;
    assert_eq!(pending["state"], "DeploymentInProgress");
    status(json!({"state": "DeploymentComplete", "replicas": 1})).await;
    let done = wait_terminal(&client, &base, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");

    let patch = |b: Value| {
        client
            .patch(format!("{base}{ENDPOINTS}/emu-ep"))
            .json(&b)
            .send()
    };
    let r = patch(json!({"replicas": 2})).await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let b: Value = r.json().await.unwrap();
    let scaled = wait_terminal(&client, &base, b["operationId"].as_str().unwrap()).await;
    assert_eq!(scaled["state"], "succeeded", "{scaled}");
    let now = emu.get(path).await.unwrap();
    assert_eq!(now["spec"]["replicas"], 2);
    let mut before = applied["spec"].clone();
    before["replicas"] = json!(2);
    assert_eq!(now["spec"], before, "only replicas changed");
    let mutations = emu.get("/_emulator/stats").await.unwrap()["mutations"].clone();
    let r = patch(json!({"replicas": 2})).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        emu.get("/_emulator/stats").await.unwrap()["mutations"],
        mutations,
        "an identical PATCH mutates nothing"
    );

    let granted = csi_policy().await;
    assert!(granted.contains("arn:aws:s3:::their-models/*"));
    assert!(
        !granted.contains("arn:aws:s3:::*"),
        "a planted pattern widened the role: {granted}"
    );
    assert!(
        !granted.contains("their-payroll"),
        "a planted bucket widened the role: {granted}"
    );

    let deleted = delete_and_wait(&client, &base, &format!("{ENDPOINTS}/emu-ep")).await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert!(emu.get(path).await.is_none(), "the endpoint is gone");
    assert!(!csi_policy().await.contains("their-models"));
}

/// A JumpStart model: its own kind (`JumpStartModel`), the EULA accepted explicitly, the worker
/// fields refused; deployed, listed and deleted like any endpoint, and checked by both peers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jumpstart_model_is_served_as_its_own_kind() {
    let app = inference_app(Opts::default()).await;
    let body = json!({"endpointName": "js", "model": "jumpstart:meta-textgeneration-llama-3-1-8b-instruct",
                      "instanceType": "ml.g5.8xlarge", "sagemakerEndpoint": "js-sme", "routing": "roundrobin"});
    let r = app.post(ENDPOINTS, &body).await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "acceptEula"
    );
    let mut with_image = body.clone();
    with_image["acceptEula"] = json!(true);
    with_image["image"] = json!("vllm/vllm-openai:latest");
    let r = app.post(ENDPOINTS, &with_image).await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "image"
    );
    let mut ok = body.clone();
    ok["acceptEula"] = json!(true);
    ok["modelVersion"] = json!("2.0.4");
    let op = app.wait_terminal(&app.start(ENDPOINTS, &ok).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let manifests = op["params"]["manifests"].as_array().unwrap().clone();
    assert_eq!(manifests[0]["kind"], "JumpStartModel");
    assert_eq!(
        manifests[0]["spec"]["model"],
        json!({"modelId": "meta-textgeneration-llama-3-1-8b-instruct", "acceptEula": true, "modelVersion": "2.0.4"})
    );
    check_peers(&manifests);
    let e = app.json(&format!("{ENDPOINTS}/js")).await;
    assert_eq!(e["kind"], "JumpStartModel");
    assert_eq!(e["state"], "DeploymentComplete", "{e}");
    assert_eq!(
        e["model"],
        "jumpstart:meta-textgeneration-llama-3-1-8b-instruct"
    );
    assert_eq!(e["instanceType"], "ml.g5.8xlarge");
    assert_eq!(e["routing"], "roundrobin");
    let deleted = app.delete_and_wait(&format!("{ENDPOINTS}/js")).await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert_eq!(app.json(ENDPOINTS).await, json!([]));
}
