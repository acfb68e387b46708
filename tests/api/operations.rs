//! Submissions: idempotency keys, name conflicts, long-polling, cancellation, the OpenAPI document.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submissions_with_one_idempotency_key_yield_one_operation() {
    let app = spawn_app().await;
    let send = || {
        app.client
            .post(app.url("/api/pipelines"))
            .header("Idempotency-Key", "req-42")
            .header("X-InstantStart-Actor", "agent")
            .json(&pipeline_body())
            .send()
    };
    let (a, b) = tokio::join!(send(), send());
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut statuses = [a.status().as_u16(), b.status().as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 202], "one created, one replayed");
    let (a, b): (Value, Value) = (a.json().await.unwrap(), b.json().await.unwrap());
    assert_eq!(a["operationId"], b["operationId"]);
    let ops = app.json("/api/operations?cluster=demo&state=running").await;
    let pipelines = app.json("/api/operations").await;
    assert_eq!(
        pipelines
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["kind"] == "pipeline")
            .count(),
        1,
        "{ops}"
    );
    let op = app.wait_terminal(a["operationId"].as_str().unwrap()).await;
    assert_eq!(op["actor"], "agent");

    // The same key with another body is refused, naming the operation that holds it.
    let mut other = pipeline_body();
    other["instanceCount"] = json!(3);
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .header("Idempotency-Key", "req-42")
        .json(&other)
        .send()
        .await
        .unwrap();
    let body = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(
        body["type"],
        "urn:instantstart:problem:idempotency-key-reused"
    );
    assert_eq!(body["operationId"], a["operationId"]);
}

/// Of two racing answers, the accepted one's body and the other's 409 problem.
async fn accepted_and_refused(a: reqwest::Response, b: reqwest::Response) -> (Value, Value) {
    let (winner, loser) = if a.status() == StatusCode::ACCEPTED {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(winner.status(), StatusCode::ACCEPTED);
    let winner = winner.json().await.unwrap();
    (winner, problem(loser, StatusCode::CONFLICT).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_sent_for_two_clusters_at_once_starts_one_and_refuses_the_other() {
    // Submissions on different clusters do not wait for each other: the key is what they share.
    let app = spawn_app().await;
    let send = |name: &'static str| {
        let mut body = pipeline_body();
        body["name"] = json!(name);
        app.client
            .post(app.url("/api/pipelines"))
            .header("Idempotency-Key", "shared-key")
            .json(&body)
            .send()
    };
    let (a, b) = tokio::join!(send("first"), send("second"));
    let (winner, refused) = accepted_and_refused(a.unwrap(), b.unwrap()).await;
    assert_eq!(
        refused["type"],
        "urn:instantstart:problem:idempotency-key-reused"
    );
    assert_eq!(refused["operationId"], winner["operationId"]);
    let ops = app.json("/api/operations").await;
    let pipelines: Vec<&Value> = ops
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "pipeline")
        .collect();
    assert_eq!(pipelines.len(), 1, "{ops}");
    assert_eq!(pipelines[0]["id"], winner["operationId"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_submission_for_the_same_cluster_without_a_key_gets_409_naming_the_first() {
    let app = spawn_app().await;
    let body = json!({"name": "twin"});
    let (a, b) = tokio::join!(
        app.post("/api/clusters", &body),
        app.post("/api/clusters", &body)
    );
    let (winner, problem) = accepted_and_refused(a, b).await;
    assert_eq!(problem["type"], "urn:instantstart:problem:cluster-exists");
    assert_eq!(problem["field"], "name");
    assert_eq!(problem["operationId"], winner["operationId"]);
    assert_eq!(
        app.json("/api/operations").await.as_array().unwrap().len(),
        1
    );

    // A stage on a cluster whose EKS is not ready yet is refused too.
    let r = app.post("/api/clusters/nope/storage", &json!({})).await;
    assert_eq!(
        crate::helpers::problem(r, StatusCode::NOT_FOUND).await["type"],
        "urn:instantstart:problem:not-found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_returns_on_change_and_cancel_stops_at_a_safe_point() {
    // 60×: EKS takes 10 s, so the operation is still running when cancelled.
    let app = spawn_app_with(Opts {
        time_scale: Some(60.0),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/clusters", &json!({"name": "slow"})).await;

    let op = app.json(&format!("/api/operations/{id}?wait=5")).await;
    assert_eq!(op["id"], id.as_str());
    assert!(["running", "pending"].contains(&op["state"].as_str().unwrap()));

    let r = app
        .client
        .post(app.url(&format!("/api/operations/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "cancelled", "{op}");
    // Nothing was left half-submitted: every phase is finished, pending or being watched.
    for p in op["phases"].as_array().unwrap() {
        assert_ne!(p["state"], "submitting", "{p}");
    }
    let r = app
        .client
        .post(app.url(&format!("/api/operations/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::CONFLICT).await["operationId"],
        id.as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_route() {
    let app = spawn_app().await;
    let doc = app.json("/api/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    let expected = [
        ("/healthz", "get"),
        ("/api/aws/identity", "get"),
        ("/api/aws/zones", "get"),
        ("/api/aws/instance-types", "get"),
        ("/api/aws/preflight", "get"),
        ("/api/clusters", "get"),
        ("/api/clusters", "post"),
        ("/api/clusters/import", "post"),
        ("/api/clusters/{name}", "get"),
        ("/api/clusters/{name}", "delete"),
        ("/api/clusters/{name}/dependencies", "get"),
        ("/api/clusters/{name}/dependencies", "post"),
        ("/api/clusters/{name}/storage", "get"),
        ("/api/clusters/{name}/storage/{claim}", "delete"),
        ("/api/clusters/{name}/status", "get"),
        ("/api/clusters/{name}/features", "get"),
        ("/api/clusters/{name}/features", "patch"),
        ("/api/clusters/{name}/hyperpod", "post"),
        ("/api/clusters/{name}/storage", "post"),
        ("/api/clusters/{name}/nodes", "get"),
        ("/api/clusters/{name}/instance-groups", "get"),
        ("/api/clusters/{name}/instance-groups", "post"),
        ("/api/clusters/{name}/instance-groups/{group}", "patch"),
        ("/api/clusters/{name}/instance-groups/{group}", "delete"),
        ("/api/clusters/{name}/nodes/{id}/reboot", "post"),
        ("/api/clusters/{name}/nodes/{id}/replace", "post"),
        ("/api/clusters/{name}/nodes/{id}/delete", "post"),
        ("/api/clusters/{name}/forget", "post"),
        ("/api/active-cluster", "get"),
        ("/api/active-cluster", "put"),
        ("/api/active-cluster", "delete"),
        ("/api/pipelines", "post"),
        ("/api/operations", "get"),
        ("/api/operations/{id}", "get"),
        ("/api/operations/{id}/retry", "post"),
        ("/api/operations/{id}/cancel", "post"),
        ("/api/sandbox/calls", "get"),
        ("/api/agent/config", "get"),
        ("/api/clusters/{name}/models", "get"),
        ("/api/clusters/{name}/models", "post"),
        ("/api/clusters/{name}/jobs", "get"),
        ("/api/clusters/{name}/jobs/{job}", "delete"),
        ("/api/clusters/{name}/deployments", "get"),
        ("/api/clusters/{name}/deployments", "post"),
        ("/api/clusters/{name}/deployments/{deployment}", "delete"),
        (
            "/api/clusters/{name}/deployments/{deployment}/invoke",
            "post",
        ),
        ("/api/clusters/{name}/hyperpod/software-update", "post"),
        ("/api/clusters/{name}/storage/{claim}/objects", "get"),
    ];
    for (path, method) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    for schema in [
        "PipelineRequest",
        "ModelDownloadRequest",
        "DeploymentRequest",
        "InvokeRequest",
    ] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_and_instance_types_come_from_the_cloud() {
    let app = spawn_app().await;
    let zones = app.json("/api/aws/zones").await;
    assert_eq!(zones.as_array().unwrap().len(), 4);
    assert_eq!(zones[0]["id"], "usw2-az2");
    let types = app.json("/api/aws/instance-types?zone=us-west-2b").await;
    assert!(types["instanceTypes"]
        .as_array()
        .unwrap()
        .contains(&json!("ml.p5.48xlarge")));
    let types = app.json("/api/aws/instance-types?zone=us-west-2a").await;
    assert!(!types["instanceTypes"]
        .as_array()
        .unwrap()
        .contains(&json!("ml.p5.48xlarge")));
    let r = app.get("/api/aws/instance-types?zone=mars-1a").await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "zone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_checks_quota_and_reserved_capacity_in_plain_words() {
    let app = spawn_app().await;
    let ok = app
        .json("/api/aws/preflight?instanceType=ml.g5.8xlarge&count=4")
        .await;
    assert_eq!(ok["account"], "123456789012");
    assert_eq!(ok["quota"]["limit"], 16);
    assert_eq!(ok["quota"]["ok"], true);

    let short = app
        .json("/api/aws/preflight?instanceType=ml.p5.48xlarge&count=3")
        .await;
    assert_eq!(short["quota"]["ok"], false);
    let advice = short["advice"].as_array().unwrap();
    assert!(
        advice
            .iter()
            .any(|a| a.as_str().unwrap().contains("request an increase")),
        "{short}"
    );
    assert!(
        advice
            .iter()
            .any(|a| a.as_str().unwrap().contains("training plan")),
        "{short}"
    );
    assert_eq!(short["trainingPlans"][0]["status"], "Active");

    let r = app.get("/api/aws/preflight?instanceType=p5&count=1").await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "instanceType"
    );
    let r = app.get("/api/aws/preflight?count=0").await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "count"
    );
    // Spot: the caveats of elastic training are said before the first cluster.
    let spot = app
        .json("/api/aws/preflight?instanceType=ml.g5.8xlarge&count=1&capacityType=spot")
        .await;
    assert!(
        spot["advice"]
            .to_string()
            .contains("elastic training does not cover Spot"),
        "{spot}"
    );
    let on_demand = app
        .json("/api/aws/preflight?instanceType=ml.g5.8xlarge&count=1&capacityType=on-demand")
        .await;
    assert!(
        !on_demand["advice"].to_string().contains("Spot"),
        "{on_demand}"
    );
    let r = app.get("/api/aws/preflight?capacityType=cheap").await;
    let body = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(body["field"], "capacityType");
    assert_eq!(
        body["hint"],
        serde_json::json!(["on-demand", "spot", "training-plan"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_that_never_finishes_fails_at_its_deadline_with_what_it_awaited() {
    // 600×: the NAT gateway takes 0.15 s, EKS 1 s: far beyond the configured deadline of 0 s.
    let app = spawn_app_with(Opts {
        time_scale: Some(600.0),
        phase_deadlines: Some("eks-cluster=0"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/clusters", &json!({"name": "stuck"})).await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "failed", "{op}");
    let phase = op["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "eks-cluster")
        .unwrap();
    assert_eq!(phase["state"], "failed", "{phase}");
    assert_eq!(phase["error"]["code"], "deadline-exceeded", "{phase}");
    let message = phase["error"]["message"].as_str().unwrap();
    assert!(message.contains("last state seen: "), "{message}");
    assert!(
        message.contains("INSTANTSTART_PHASE_DEADLINES"),
        "{message}"
    );
    // The phases before it finished; it was acted on once and is not retried by itself.
    assert_eq!(phase_state(&op, "vpc"), "succeeded");
    assert_eq!(accepted_count(&app.calls().await, "eks:CreateCluster"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_operations_by_kind_and_state_and_time_phases() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let r = app.get("/api/clusters/nope").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "one exposition, ended once");
    assert_eq!(text.matches("# EOF").count(), 1);
    let sample = |line: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{line}` in\n{text}"))
    };
    // Read from this server's store: exactly its operations.
    for kind in ["pipeline", "cluster", "dependencies", "hyperpod", "storage"] {
        assert_eq!(
            sample(&format!(
                r#"instantstart_operations{{kind="{kind}",state="succeeded"}}"#
            )),
            1.0,
            "{kind}"
        );
    }
    assert!(!text.contains(r#"instantstart_operations{kind="pipeline",state="running"}"#));
    // Phases are timed by name and outcome (the histogram is the process's).
    assert!(
        sample(
            r#"instantstart_phase_duration_seconds_count{phase="eks-cluster",outcome="succeeded"}"#
        ) >= 1.0
    );
}
