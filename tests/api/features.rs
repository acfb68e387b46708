//! Managed features as reconciled state (sandbox): only changed fields act, an identical PATCH
//! makes no mutating call, disabling removes exactly the chain enabling made.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

async fn patch(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let r = app
        .client
        .patch(app.url("/api/clusters/demo/features"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

fn feature<'a>(view: &'a Value, key: &str) -> &'a Value {
    view["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap()
}

/// Waits for the operation a PATCH started for `key` and returns it.
async fn started(app: &TestApp, body: &Value, key: &str) -> Value {
    let id = body["features"][key]["operationId"]
        .as_str()
        .unwrap_or_else(|| panic!("no operation started for {key}: {body}"));
    app.wait_terminal(id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn features_follow_the_diff_contract() {
    let app = spawn_app().await;
    let r = app.get("/api/clusters/demo/features").await;
    problem(r, StatusCode::NOT_FOUND).await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let view = app.json("/api/clusters/demo/features").await;
    for key in ["trainingOperator", "containerInsights", "fsxCsi"] {
        assert_eq!(feature(&view, key)["state"], "disabled", "{view}");
    }

    // Bad requests: nothing named, an unknown field.
    let (status, body) = patch(&app, json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["hint"].to_string().contains("trainingOperator"));
    let (status, body) = patch(&app, json!({"karpenter": true})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Enable one: only that field acts.
    let (status, body) = patch(&app, json!({"trainingOperator": true, "fsxCsi": false})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["features"]["fsxCsi"]["result"], "unchanged");
    assert_eq!(body["features"]["trainingOperator"]["result"], "started");
    let op = started(&app, &body, "trainingOperator").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["kind"], "feature-training-operator");
    let view = app.json("/api/clusters/demo/features").await;
    let training = feature(&view, "trainingOperator");
    assert_eq!(training["state"], "enabled", "{view}");
    let association = training["podIdentityAssociation"]
        .as_str()
        .unwrap()
        .to_string();

    // The same PATCH again: every field unchanged, no mutating call at all.
    let before = mutating_calls(&app.calls().await);
    let (status, body) = patch(
        &app,
        json!({"trainingOperator": true, "fsxCsi": false, "containerInsights": false}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for key in ["trainingOperator", "fsxCsi", "containerInsights"] {
        assert_eq!(body["features"][key]["result"], "unchanged", "{body}");
    }
    assert_eq!(mutating_calls(&app.calls().await), before);

    // Disable: the association and the add-on go, nothing else.
    let (status, body) = patch(&app, json!({"trainingOperator": false})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = started(&app, &body, "trainingOperator").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let names = phase_names(&op);
    assert_eq!(
        names,
        ["pod-identity", "addon", "role"],
        "identity removed before the add-on, its own role last"
    );
    let view = app.json("/api/clusters/demo/features").await;
    assert_eq!(
        feature(&view, "trainingOperator")["state"],
        "disabled",
        "{view}"
    );
    assert!(feature(&view, "trainingOperator")["podIdentityAssociation"].is_null());
    let deps = app.json("/api/clusters/demo/dependencies").await;
    let cert = deps["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cert-manager")
        .unwrap();
    assert_eq!(
        cert["state"], "ready",
        "disabling left the prerequisites alone: {deps}"
    );

    // Enable again: a new association, exactly one.
    let (_, body) = patch(&app, json!({"trainingOperator": true})).await;
    let op = started(&app, &body, "trainingOperator").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let view = app.json("/api/clusters/demo/features").await;
    let again = feature(&view, "trainingOperator")["podIdentityAssociation"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(again, association);
    let calls = app.calls().await;
    assert_eq!(
        accepted_count(&calls, "eks:CreatePodIdentityAssociation"),
        2
    );
    assert_eq!(
        accepted_count(&calls, "eks:DeletePodIdentityAssociation"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feature_waits_for_its_prerequisites() {
    let app = spawn_app().await;
    let mut body = pipeline_body();
    body["dependencies"] = json!(false);
    body["storage"] = json!(false);
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let (status, body) = patch(&app, json!({"trainingOperator": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["field"], "trainingOperator");
    assert!(
        body["detail"].as_str().unwrap().contains("cert-manager"),
        "{body}"
    );
    // Features without prerequisites still go.
    let (status, body) = patch(&app, json!({"fsxCsi": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

/// A feature and the feature it needs, in one request: both start, the dependent one first
/// waits for the other's add-on and only then makes its own; alone it is refused, naming the
/// other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feature_and_its_prerequisite_in_one_request_run_in_dependency_order() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let (status, body) = patch(&app, json!({"inferenceOperator": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("fsxCsi"),
        "{body}"
    );
    let addons = accepted_count(&app.calls().await, "eks:CreateAddon");
    let both = json!({"fsxCsi": true, "inferenceOperator": true});

    // In order: the dependent add-on is made only once the prerequisite's is ACTIVE.
    let (status, body) = patch(&app, both).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let fsx = started(&app, &body, "fsxCsi").await;
    let inference = started(&app, &body, "inferenceOperator").await;
    assert_eq!(
        (fsx["state"].as_str(), inference["state"].as_str()),
        (Some("succeeded"), Some("succeeded")),
        "{inference}"
    );
    assert_eq!(phase_names(&inference)[0], "prerequisites");
    let phase = |op: &Value, name: &str| {
        op["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap()
    };
    let fsx_ready = phase(&fsx, "addon")["finishedAt"]
        .as_str()
        .unwrap()
        .to_string();
    let inference_addon = phase(&inference, "addon")["startedAt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fsx_ready <= inference_addon, "the inference add-on was started at {inference_addon}, before fsxCsi was ready at {fsx_ready}");
    assert_eq!(
        accepted_count(&app.calls().await, "eks:CreateAddon") - addons,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowed_features_can_be_enabled() {
    let app = spawn_app_with(Opts {
        allowed_features: vec!["containerInsights".into()],
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let view = app.json("/api/clusters/demo/features").await;
    assert_eq!(view["allowed"], json!(["containerInsights"]));
    let (status, body) = patch(&app, json!({"trainingOperator": true})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "trainingOperator");
    assert_eq!(body["hint"], json!(["containerInsights"]));
    let (status, body) = patch(&app, json!({"containerInsights": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

#[tokio::test]
async fn an_unknown_allowed_feature_stops_the_server_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = instantstart::config::ServeConfig::sandbox(dir.path().to_path_buf());
    config.allowed_features = vec!["karpenter".into()];
    let err = instantstart::build_app(config)
        .await
        .err()
        .expect("refused");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("karpenter") && msg.contains("trainingOperator"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiered_checkpointing_is_the_cluster_setting_plus_exactly_its_identity_chain() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let state = |v: &Value| feature(v, "tieredCheckpointing").clone();

    let (status, body) = patch(&app, json!({"tieredCheckpointingMemoryPercent": 0})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "tieredCheckpointingMemoryPercent");

    let (status, body) = patch(&app, json!({"tieredCheckpointing": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = started(&app, &body, "tieredCheckpointing").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let names = phase_names(&op);
    assert_eq!(names, ["role", "service-account", "tiered-storage-config"]);
    let t = state(&app.json("/api/clusters/demo/features").await);
    assert_eq!(
        (t["state"].as_str(), t["memoryPercent"].as_u64()),
        (Some("enabled"), Some(20)),
        "{t}"
    );

    // Enabling twice creates nothing new.
    let before = mutating_calls(&app.calls().await);
    let (status, body) = patch(&app, json!({"tieredCheckpointing": true})).await;
    assert_eq!(
        (
            status,
            body["features"]["tieredCheckpointing"]["result"].as_str()
        ),
        (StatusCode::OK, Some("unchanged"))
    );
    assert_eq!(mutating_calls(&app.calls().await), before);

    // A new memory share is a change of the cluster setting only.
    let (status, body) = patch(&app, json!({"tieredCheckpointingMemoryPercent": 30})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let creates_before = accepted_count(&app.calls().await, "iam:CreateRole");
    let op = started(&app, &body, "tieredCheckpointing").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        accepted_count(&app.calls().await, "iam:CreateRole"),
        creates_before
    );
    let t = state(&app.json("/api/clusters/demo/features").await);
    assert_eq!(t["memoryPercent"], 30, "{t}");

    // Disabling removes the setting, the service account and the role: nothing is left over.
    let (_, body) = patch(&app, json!({"tieredCheckpointing": false})).await;
    let op = started(&app, &body, "tieredCheckpointing").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let names = phase_names(&op);
    assert_eq!(names, ["tiered-storage-config", "service-account", "role"]);
    let t = state(&app.json("/api/clusters/demo/features").await);
    assert_eq!(
        t["state"], "disabled",
        "an orphaned role or service account shows as degraded: {t}"
    );

    // And again: the whole chain comes back.
    let (_, body) = patch(&app, json!({"tieredCheckpointing": true})).await;
    let op = started(&app, &body, "tieredCheckpointing").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        state(&app.json("/api/clusters/demo/features").await)["state"],
        "enabled"
    );
}

async fn patch_group(app: &TestApp, group: &str, body: Value) -> (StatusCode, Value) {
    let r = app
        .client
        .patch(app.url(&format!("/api/clusters/demo/instance-groups/{group}")))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_autoscaling_governs_chosen_groups_which_then_scale_to_zero_and_back() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    // Spot is eligible (AWS runs it with Karpenter), deep health checks are not.
    let spot = json!({"instanceGroupName": "spot", "instanceType": "ml.g5.8xlarge", "instanceCount": 1,
                      "zone": "us-west-2a", "capacityType": "spot", "deepHealthChecks": true});
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/instance-groups", &spot).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let view = app.json("/api/clusters/demo/features").await;
    let auto = feature(&view, "managedAutoscaling");
    assert_eq!(auto["state"], "disabled", "{auto}");
    assert!(
        auto["description"]
            .as_str()
            .unwrap()
            .contains("not general EC2 capacity"),
        "{auto}"
    );

    // Without autoscaling no group starts at zero either.
    let zero = json!({"instanceGroupName": "burst", "instanceType": "ml.g5.8xlarge", "instanceCount": 0,
                      "zone": "us-west-2a", "capacityType": "on-demand"});
    let r = app.post("/api/clusters/demo/instance-groups", &zero).await;
    let body = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(body["field"], "instanceCount");
    assert!(
        body["hint"]
            .as_str()
            .unwrap()
            .contains("managedAutoscaling"),
        "{body}"
    );

    // Without autoscaling a group cannot go to zero; the hint says how it can.
    let (status, body) = patch_group(&app, "workers", json!({"instanceCount": 0})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "instanceCount");
    assert!(
        body["hint"].to_string().contains("managedAutoscaling"),
        "{body}"
    );

    // Only groups without deep health checks (nor training plans), named, at most ten.
    for groups in [json!(["nope"]), json!(["spot"]), json!([])] {
        let (status, body) = patch(
            &app,
            json!({"managedAutoscaling": true, "managedAutoscalingInstanceGroups": groups}),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["field"], "managedAutoscalingInstanceGroups");
        assert_eq!(body["hint"], json!(["workers"]), "{body}");
    }
    let (status, body) = patch(
        &app,
        json!({"managedAutoscaling": false, "managedAutoscalingInstanceGroups": ["workers"]}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // Enable: role → cluster setting → node class and pool, for the eligible group.
    let (status, body) = patch(&app, json!({"managedAutoscaling": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = started(&app, &body, "managedAutoscaling").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        ["role", "autoscaling-config", "node-class"]
    );
    let view = app.json("/api/clusters/demo/features").await;
    let auto = feature(&view, "managedAutoscaling");
    assert_eq!(auto["state"], "enabled", "{auto}");
    assert_eq!(auto["instanceGroups"], json!(["workers"]));

    // A group for Karpenter starts at zero (only under autoscaling) and joins the governed set.
    let burst = json!({"instanceGroupName": "burst", "instanceType": "ml.g5.8xlarge", "instanceCount": 0,
                       "zone": "us-west-2a", "capacityType": "spot"});
    let op = app
        .wait_terminal(
            &app.start("/api/clusters/demo/instance-groups", &burst)
                .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    let b = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "burst")
        .unwrap_or_else(|| panic!("{groups}"));
    assert_eq!(b["targetCount"], 0, "{b}");
    let (status, body) = patch(
        &app,
        json!({"managedAutoscalingInstanceGroups": ["workers", "burst"]}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = started(&app, &body, "managedAutoscaling").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let view = app.json("/api/clusters/demo/features").await;
    assert_eq!(
        feature(&view, "managedAutoscaling")["instanceGroups"],
        json!(["burst", "workers"])
    );

    // The same request, with the groups spelled out: unchanged, no mutating call.
    let before = mutating_calls(&app.calls().await);
    let (status, body) = patch(
        &app,
        json!({"managedAutoscaling": true, "managedAutoscalingInstanceGroups": ["workers", "burst"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["features"]["managedAutoscaling"]["result"],
        "unchanged"
    );
    assert_eq!(mutating_calls(&app.calls().await), before);

    // A governed group scales to zero and back; it cannot be deleted while governed.
    for count in [0, 1] {
        let (status, body) = patch_group(&app, "workers", json!({"instanceCount": count})).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let op = app
            .wait_terminal(body["operationId"].as_str().unwrap())
            .await;
        assert_eq!(op["state"], "succeeded", "{op}");
        let groups = app.json("/api/clusters/demo/instance-groups").await;
        assert_eq!(groups[0]["targetCount"], count, "{groups}");
        assert_eq!(groups[0]["currentCount"], count, "{groups}");
    }
    let r = app
        .client
        .delete(app.url("/api/clusters/demo/instance-groups/workers"))
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(
        p["type"].as_str().unwrap().ends_with("group-autoscaled"),
        "{p}"
    );

    // Disable: the reverse order, and nothing is left.
    let (_, body) = patch(&app, json!({"managedAutoscaling": false})).await;
    let op = started(&app, &body, "managedAutoscaling").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        ["node-class", "autoscaling-config", "role"]
    );
    let view = app.json("/api/clusters/demo/features").await;
    let auto = feature(&view, "managedAutoscaling");
    assert_eq!(
        auto["state"], "disabled",
        "left-overs show as degraded: {auto}"
    );
    assert_eq!(auto["instanceGroups"], json!([]));
    let (status, _) = patch_group(&app, "workers", json!({"instanceCount": 0})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inference_operator_is_diffed_and_brings_and_removes_its_own_role() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    // AWS names the FSx CSI driver among the add-ons the operator requires.
    let (status, body) = patch(&app, json!({"inferenceOperator": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("fsxCsi"),
        "{body}"
    );
    let (_, body) = patch(&app, json!({"fsxCsi": true})).await;
    assert_eq!(started(&app, &body, "fsxCsi").await["state"], "succeeded");
    let (status, body) = patch(&app, json!({"inferenceOperator": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = started(&app, &body, "inferenceOperator").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        ["role", "keda-handover", "addon", "pod-identity"]
    );
    let view = app.json("/api/clusters/demo/features").await;
    let inference = feature(&view, "inferenceOperator");
    assert_eq!(inference["state"], "enabled", "{inference}");
    assert_eq!(inference["addon"], "amazon-sagemaker-hyperpod-inference");

    // The anchor re-installs on every toggle; here an identical request does nothing.
    let before = mutating_calls(&app.calls().await);
    let (status, body) = patch(&app, json!({"inferenceOperator": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["features"]["inferenceOperator"]["result"], "unchanged");
    assert_eq!(mutating_calls(&app.calls().await), before);

    let roles_deleted = accepted_count(&app.calls().await, "iam:DeleteRole");
    let (_, body) = patch(&app, json!({"inferenceOperator": false})).await;
    let op = started(&app, &body, "inferenceOperator").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(phase_names(&op), ["pod-identity", "addon", "keda", "role"]);
    assert_eq!(
        accepted_count(&app.calls().await, "iam:DeleteRole"),
        roles_deleted + 3,
        "exactly its own roles: execution, KEDA, load balancer controller"
    );
    let view = app.json("/api/clusters/demo/features").await;
    assert_eq!(feature(&view, "inferenceOperator")["state"], "disabled");
}
