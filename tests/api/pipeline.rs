//! The cluster pipeline end to end, and a failed stage retried alone.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_creates_every_stage_once_and_records_the_cluster() {
    let app = spawn_app().await;

    let r = app.post("/api/pipelines", &pipeline_body()).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert!(r.headers().get("location").is_some());
    assert_eq!(r.headers().get("x-instantstart-cloud").unwrap(), "sandbox");
    let accepted: serde_json::Value = r.json().await.unwrap();
    let id = accepted["operationId"].as_str().unwrap();
    assert_eq!(accepted["statusUrl"], format!("/api/operations/{id}"));

    let op = app.wait_terminal(id).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["actor"], "api");

    let cluster = app.json("/api/clusters/demo").await;
    for stage in ["pipeline", "cluster", "dependencies", "hyperpod", "storage"] {
        assert_eq!(
            cluster["stages"][stage]["state"], "succeeded",
            "{stage}: {cluster}"
        );
    }
    let res = &cluster["resources"];
    assert_eq!(res["vpcCidr"], "10.90.0.0/16");
    assert_eq!(res["computeSubnetCidr"], "10.90.16.0/20");
    assert_eq!(res["hyperPodClusterName"], "demo-hp");
    assert!(res["eksClusterArn"]
        .as_str()
        .unwrap()
        .ends_with(":cluster/demo"));

    let calls = app.calls().await;
    for api in [
        "ec2:CreateVpc",
        "eks:CreateCluster",
        "sagemaker:CreateCluster",
        "s3:CreateBucket",
    ] {
        assert_eq!(accepted_count(&calls, api), 1, "{api}: {calls}");
    }
    assert_eq!(
        accepted_count(&calls, "ec2:CreateSubnet"),
        5,
        "4 network subnets + 1 compute: {calls}"
    );

    // The simulated cluster's Kubernetes side: dependencies, nodes, claims.
    let deps = app.json("/api/clusters/demo/dependencies").await;
    assert_eq!(
        deps["operationId"], cluster["stages"]["dependencies"]["id"],
        "{deps}"
    );
    // Every component ready, KubeRay and KEDA with their CRDs.
    for c in deps["components"].as_array().unwrap() {
        assert_eq!(c["state"], "ready", "{c}");
    }
    let status = app.json("/api/clusters/demo/status").await;
    assert_eq!(status["nodes"].as_array().unwrap().len(), 2, "{status}");
    assert_eq!(status["readyNodes"], 2);
    assert_eq!(
        status["gpusTotal"], 2,
        "2 × ml.g5.8xlarge, one GPU each: {status}"
    );
    assert_eq!(status["cache"]["source"], "sandbox");
    let nodes = app.json("/api/clusters/demo/nodes").await;
    assert_eq!(nodes["nodes"][0]["kubernetes"]["ready"], true, "{nodes}");
    let claims = app.json("/api/clusters/demo/storage").await;
    assert_eq!(claims[0]["claimName"], "s3-claim", "{claims}");
    assert_eq!(claims[0]["bucket"], res["bucketName"]);

    let ops: serde_json::Value = app.json("/api/operations?cluster=demo").await;
    assert_eq!(ops.as_array().unwrap().len(), 5);
    let list = app.json("/api/clusters").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_hyperpod_stage_stops_the_pipeline_and_retry_completes_it_without_replays() {
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:CreateCluster=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;

    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "failed", "{op}");
    assert_eq!(op["error"]["phase"], "hyperpod");
    assert_eq!(phase_state(&op, "cluster"), "succeeded");
    assert_eq!(phase_state(&op, "hyperpod"), "failed");
    assert_eq!(
        phase_state(&op, "storage"),
        "pending",
        "later stages never start"
    );
    let cluster = app.json("/api/clusters/demo").await;
    let hp = &cluster["stages"]["hyperpod"];
    assert_eq!(hp["state"], "failed");
    assert_eq!(
        hp["error"]["cloud"]["code"], "ResourceLimitExceeded",
        "{hp}"
    );
    assert!(cluster["stages"].get("storage").is_none());

    let r = app
        .client
        .post(app.url(&format!("/api/operations/{id}/retry")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let calls = app.calls().await;
    assert_eq!(accepted_count(&calls, "eks:CreateCluster"), 1, "{calls}");
    assert_eq!(accepted_count(&calls, "ec2:CreateVpc"), 1, "{calls}");
    assert_eq!(
        accepted_count(&calls, "sagemaker:CreateCluster"),
        1,
        "{calls}"
    );
    assert_eq!(calls["rejected"]["sagemaker:CreateCluster"], 1, "{calls}");
    let cluster = app.json("/api/clusters/demo").await;
    assert_eq!(cluster["stages"]["hyperpod"]["phases"][4]["attempt"], 2);

    // Retrying what succeeded is refused and names the operation.
    let r = app
        .client
        .post(app.url(&format!("/api/operations/{id}/retry")))
        .send()
        .await
        .unwrap();
    let body = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(body["operationId"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_can_run_one_by_one_and_the_cluster_can_be_deleted() {
    let app = spawn_app().await;
    let id = app
        .start(
            "/api/clusters",
            &json!({"name": "solo", "zones": ["us-west-2b", "us-west-2c"]}),
        )
        .await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let hp = json!({"instanceType": "ml.p5.48xlarge", "instanceCount": 1, "zone": "us-west-2b",
                    "capacityType": "spot", "deepHealthChecks": true});
    let id = app.start("/api/clusters/solo/hyperpod", &hp).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let r = app.post("/api/clusters/solo/hyperpod", &hp).await;
    assert_eq!(
        problem(r, StatusCode::CONFLICT).await["type"],
        "urn:instantstart:problem:hyperpod-exists"
    );

    let r = app
        .client
        .put(app.url("/api/active-cluster"))
        .json(&json!({"name": "solo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(app.json("/api/active-cluster").await["name"], "solo");

    let r = app
        .client
        .delete(app.url("/api/clusters/solo"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let id = r.json::<serde_json::Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    assert_eq!(
        app.get("/api/clusters/solo").await.status(),
        StatusCode::NOT_FOUND
    );
    assert!(app.json("/api/active-cluster").await["name"].is_null());
    let calls = app.calls().await;
    assert_eq!(accepted_count(&calls, "ec2:DeleteVpc"), 1, "{calls}");
    assert_eq!(
        accepted_count(&calls, "sagemaker:DeleteCluster"),
        1,
        "{calls}"
    );

    // The name is free again.
    let id = app.start("/api/clusters", &json!({"name": "solo"})).await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");
}

/// Large fleets: a secondary VPC block (what AWS's templates add) holds a compute subnet sized
/// by the request, and the pipeline's first nodes join through the shared security group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fleet_gets_a_secondary_block_and_a_wider_compute_subnet() {
    let app = spawn_app().await;
    let mut body = pipeline_body();
    body["secondaryCidr"] = serde_json::json!("100.64.0.0/16");
    body["computeSubnetSize"] = serde_json::json!(17);
    let id = app.start("/api/pipelines", &body).await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let cluster = app.json("/api/clusters/demo").await;
    let res = &cluster["resources"];
    assert_eq!(res["secondaryCidr"], "100.64.0.0/16");
    assert_eq!(res["computeSubnetCidr"], "100.64.0.0/17", "{res}");
    let phases: Vec<&str> = cluster["stages"]["cluster"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(&phases[..3], ["vpc", "secondary-cidr", "subnets"]);
    // The dependency stage applied before any node; the HyperPod stage verified it serving.
    let hp = &cluster["stages"]["hyperpod"];
    let verify = hp["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "dependencies-ready")
        .unwrap_or_else(|| panic!("{hp}"));
    assert_eq!(verify["state"], "succeeded", "{verify}");
    assert!(
        verify["outputs"]["serving"]
            .as_array()
            .is_some_and(|s| s.iter().any(|c| c == "coredns")),
        "{verify}"
    );
    let deps = &cluster["stages"]["dependencies"]["phases"];
    let coredns = deps
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "coredns")
        .unwrap();
    assert_eq!(coredns["outputs"]["awaitingNodes"], true, "{coredns}");
    let status = app.json("/api/clusters/demo/status").await;
    assert!(
        status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["ready"] == true),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_listed_and_rebooted_replaced_and_deleted_as_watched_operations() {
    // 600×: a reboot keeps a node out of service for 200 ms, so the watch sees it rebooting
    // however busy the machine (at the default 6,000× it was 20 ms, less than a loaded
    // machine may take between the call and the first look).
    let app = spawn_app_with(Opts {
        time_scale: Some(600.0),
        ..Default::default()
    })
    .await;
    let r = app.get("/api/clusters/demo/nodes").await;
    problem(r, StatusCode::NOT_FOUND).await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let list = app.json("/api/clusters/demo/nodes").await;
    assert_eq!(list["count"], 2);
    assert!(list["hint"].as_str().unwrap().contains("reboot"));
    let node = list["nodes"][0]["instanceId"].as_str().unwrap().to_string();
    assert_eq!(list["nodes"][0]["status"], "Running");

    let reboot = app
        .start(
            &format!("/api/clusters/demo/nodes/{node}/reboot"),
            &json!({}),
        )
        .await;
    let op = app.wait_terminal(&reboot).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        op["phases"][0]["progress"], "done",
        "the node was watched through its reboot: {op}"
    );
    assert_eq!(
        app.json("/api/clusters/demo/nodes").await["nodes"][0]["status"],
        "Running"
    );

    let r = app
        .post(
            &format!("/api/clusters/demo/nodes/{node}/replace"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["warning"].as_str().unwrap().contains("volumes"));
    let op = app
        .wait_terminal(body["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    // New hardware, new instance id: the watch followed the replacement, not the old id.
    let replacement = op["phases"][0]["outputs"]["replacementId"]
        .as_str()
        .unwrap_or_else(|| panic!("no replacement recorded: {op}"))
        .to_string();
    assert_ne!(replacement, node);
    let ids: Vec<String> = app.json("/api/clusters/demo/nodes").await["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instanceId"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&replacement) && !ids.contains(&node),
        "{ids:?}"
    );

    let other = app.json("/api/clusters/demo/nodes").await["nodes"][1]["instanceId"]
        .as_str()
        .unwrap()
        .to_string();
    let delete = app
        .start(
            &format!("/api/clusters/demo/nodes/{other}/delete"),
            &json!({}),
        )
        .await;
    assert_eq!(app.wait_terminal(&delete).await["state"], "succeeded");
    let left = app.json("/api/clusters/demo/nodes").await;
    assert!(
        left["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["instanceId"] != other.as_str()),
        "{left}"
    );

    let r = app
        .post("/api/clusters/demo/nodes/not-a-node/reboot", &json!({}))
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "id"
    );
    let r = app
        .post(
            "/api/clusters/demo/nodes/i-0123456789abcdef0/reboot",
            &json!({}),
        )
        .await;
    assert!(problem(r, StatusCode::NOT_FOUND).await["hint"]["nodes"].is_array());
    let calls = app.calls().await;
    assert_eq!(
        accepted_count(&calls, "sagemaker:BatchRebootClusterNodes"),
        1
    );
    assert_eq!(
        accepted_count(&calls, "sagemaker:BatchDeleteClusterNodes"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_groups_are_added_and_scaled_resending_every_group_and_capacity_is_immutable() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(groups[0]["name"], "workers");
    assert_eq!(groups[0]["capacityType"], "on-demand");

    // A second group in another zone, on Spot: its own compute subnet, every group resent.
    let add = json!({"instanceGroupName": "spot-b", "instanceType": "ml.g5.8xlarge", "instanceCount": 1,
                     "zone": "us-west-2b", "capacityType": "spot"});
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/instance-groups", &add).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(groups.as_array().unwrap().len(), 2);
    assert_eq!(groups[1]["capacityType"], "spot");
    assert_eq!(groups[1]["currentCount"], 1);
    assert_ne!(
        groups[1]["subnetIds"], groups[0]["subnetIds"],
        "placed in its own zone"
    );
    let r = app.post("/api/clusters/demo/instance-groups", &add).await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "instanceGroupName"
    );

    // Scale: only the changed field is sent.
    let patch = |body: serde_json::Value| {
        app.client
            .patch(app.url("/api/clusters/demo/instance-groups/workers"))
            .json(&body)
            .send()
    };
    let r = patch(json!({"instanceCount": 3})).await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        app.wait_terminal(body["operationId"].as_str().unwrap())
            .await["state"],
        "succeeded"
    );
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(
        (
            groups[0]["targetCount"].clone(),
            groups[0]["currentCount"].clone()
        ),
        (json!(3), json!(3))
    );
    assert_eq!(
        groups[1]["targetCount"], 1,
        "the other group was resent unchanged"
    );

    // The same count again changes nothing and calls nothing.
    let before = accepted_count(&app.calls().await, "sagemaker:UpdateCluster");
    let r = patch(json!({"instanceCount": 3, "capacityType": "on-demand"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["unchanged"],
        true
    );
    assert_eq!(
        accepted_count(&app.calls().await, "sagemaker:UpdateCluster"),
        before
    );
    assert_eq!(before, 2);

    // Deep health checks: a settings change resends the groups with only that group changed.
    let r = patch(json!({"deepHealthChecks": true})).await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        app.wait_terminal(body["operationId"].as_str().unwrap())
            .await["state"],
        "succeeded"
    );
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(
        groups[0]["deepHealthChecks"],
        json!(["InstanceStress", "InstanceConnectivity"])
    );
    assert_eq!(groups[0]["targetCount"], 3, "the count was kept");
    assert_eq!(groups[1]["deepHealthChecks"], json!([]));
    let r = patch(json!({"deepHealthChecks": true})).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "already on: nothing to do");

    // Capacity type is fixed for the group's life.
    let r = patch(json!({"capacityType": "spot"})).await.unwrap();
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(p["field"], "capacityType");
    assert!(p["hint"].as_str().unwrap().contains("new instance group"));
    let r = patch(json!({"instanceCount": 2, "bogus": 1}))
        .await
        .unwrap();
    assert_eq!(problem(r, StatusCode::BAD_REQUEST).await["field"], "bogus");

    // Removing a group takes it out of the cluster and of the recorded specs; the last one stays.
    let op = app
        .delete_and_wait("/api/clusters/demo/instance-groups/spot-b")
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(groups.as_array().unwrap().len(), 1);
    assert_eq!(groups[0]["name"], "workers");
    let r = app
        .client
        .delete(app.url("/api/clusters/demo/instance-groups/workers"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::CONFLICT).await["type"],
        "urn:instantstart:problem:last-instance-group"
    );
    let r = app
        .client
        .delete(app.url("/api/clusters/demo/instance-groups/nope"))
        .send()
        .await
        .unwrap();
    assert!(problem(r, StatusCode::NOT_FOUND).await["hint"]["instanceGroups"].is_array());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_group_resolves_interface_plan_zone_and_lifecycle_and_keeps_what_is_fixed() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(groups[0]["networkInterface"], "standard");
    assert_eq!(groups[0]["efaSupported"], true);
    assert_eq!(groups[0]["lifecycleOnCreate"], "on_create.sh");

    // A training plan's zone comes from its reservation: a zone that differs is refused with
    // the plan's zone as the hint; leaving it out places the group there.
    let plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/sandbox-p5-week";
    let mut add = json!({"instanceGroupName": "reserved", "instanceType": "ml.p5.48xlarge",
                         "instanceCount": 1, "zone": "us-west-2c", "capacityType": "training-plan",
                         "trainingPlanArn": plan, "networkInterface": "efa-only"});
    let r = app.post("/api/clusters/demo/instance-groups", &add).await;
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(
        (p["field"].as_str(), p["hint"].clone()),
        (Some("zone"), json!(["us-west-2b"]))
    );
    let mut unknown = add.clone();
    unknown["trainingPlanArn"] = json!(plan.replace("sandbox-p5-week", "other"));
    let r = app
        .post("/api/clusters/demo/instance-groups", &unknown)
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "trainingPlanArn"
    );
    add.as_object_mut().unwrap().remove("zone");
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/instance-groups", &add).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    let reserved = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "reserved")
        .unwrap()
        .clone();
    assert_eq!(reserved["networkInterface"], "efa-only");
    let op_zone = op["params"]["zone"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(op_zone, "us-west-2b", "{op}");

    // The interface mode is fixed for the group's life, like its capacity.
    let patch = |group: &'static str, body: serde_json::Value| {
        app.client
            .patch(app.url(&format!("/api/clusters/demo/instance-groups/{group}")))
            .json(&body)
            .send()
    };
    let r = patch("reserved", json!({"networkInterface": "standard"}))
        .await
        .unwrap();
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(p["field"], "networkInterface");
    assert!(
        p["hint"].as_str().unwrap().contains("new instance group"),
        "{p}"
    );
    let r = patch("reserved", json!({"networkInterface": "efa-only"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the same mode is no change");
    let r = patch("workers", json!({"networkInterface": "turbo"}))
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "networkInterface"
    );

    // Lifecycle: only a script that is under the cluster's lifecycle prefix.
    let r = patch("workers", json!({"lifecycleOnCreate": "missing.sh"}))
        .await
        .unwrap();
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(
        (p["field"].as_str(), p["hint"].clone()),
        (Some("lifecycleOnCreate"), json!(["on_create.sh"]))
    );
    let r = patch("workers", json!({"lifecycleOnCreate": "on_create.sh"}))
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "the current script is no change"
    );
}

/// Accepted mutating calls by API (reads repeat under throttling; mutations must not).
fn mutations(calls: &serde_json::Value) -> std::collections::BTreeMap<String, i64> {
    calls["accepted"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(api, _)| {
            let op = api.split(':').nth(1).unwrap_or("");
            !["Describe", "List", "Get", "Head"]
                .iter()
                .any(|read| op.starts_with(read))
        })
        .map(|(api, n)| (api.clone(), n.as_i64().unwrap()))
        .collect()
}

/// Waits longer than `wait_terminal`: throttled pipelines back off and take more time.
async fn finished(app: &TestApp, id: &str) -> serde_json::Value {
    // Long-polls answer at every change of the operation, so this bounds time, not polls.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while std::time::Instant::now() < until {
        let op = app.json(&format!("/api/operations/{id}?wait=20")).await;
        if ["succeeded", "failed", "cancelled"].contains(&op["state"].as_str().unwrap_or("")) {
            return op;
        }
    }
    panic!("operation {id} did not finish in 5 minutes");
}

fn named(name: &str) -> serde_json::Value {
    let mut b = pipeline_body();
    b["name"] = json!(name);
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_converge_under_throttling_with_the_same_mutations_as_without() {
    // The same five pipelines without faults (all at once) give the mutations to expect.
    let calm = spawn_app().await;
    let mut ids = Vec::new();
    for name in ["seq-a", "seq-b", "par-a", "par-b", "par-c"] {
        ids.push(calm.start("/api/pipelines", &named(name)).await);
    }
    for id in &ids {
        assert_eq!(finished(&calm, id).await["state"], "succeeded");
    }
    let expected = mutations(&calm.calls().await);

    // Five with a fifth of all cloud calls throttled: two one after the other, three at once.
    let throttled = spawn_app_with(Opts {
        faults: Some("throttle=0.2"),
        ..Default::default()
    })
    .await;
    for name in ["seq-a", "seq-b"] {
        let id = throttled.start("/api/pipelines", &named(name)).await;
        let op = finished(&throttled, &id).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    let mut ids = Vec::new();
    for name in ["par-a", "par-b", "par-c"] {
        ids.push(throttled.start("/api/pipelines", &named(name)).await);
    }
    for id in &ids {
        let op = finished(&throttled, id).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    let calls = throttled.calls().await;
    assert!(
        calls["rejected"].as_object().is_some_and(|r| !r.is_empty()),
        "the run was throttled: {calls}"
    );
    assert_eq!(
        mutations(&calls),
        expected,
        "no mutation duplicated or lost"
    );
    let metrics = throttled.get("/metrics").await.text().await.unwrap();
    let retried: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("instantstart_retries_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(retried > 0.0, "retries are counted:\n{metrics}");
    assert!(
        metrics.contains(r#"outcome="throttled""#),
        "throttles are counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_cluster_is_the_newest_one_unless_chosen_else_the_only_one() {
    let app = spawn_app().await;
    let active = || async { app.json("/api/active-cluster").await["name"].clone() };
    assert!(active().await.is_null(), "no cluster, none active");

    let mut one = pipeline_body();
    one["name"] = json!("one");
    let id = app.start("/api/pipelines", &one).await;
    assert_eq!(
        active().await,
        "one",
        "a new cluster is the one worked on next"
    );
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let id = app
        .start(
            "/api/clusters",
            &json!({"name": "two", "zones": ["us-west-2b", "us-west-2c"]}),
        )
        .await;
    assert_eq!(active().await, "two");
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    assert_eq!(app.json("/api/clusters/two").await["active"], true);

    let app = &app;
    let choose = |name: &'static str| async move {
        let r = app
            .client
            .put(app.url("/api/active-cluster"))
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    };
    choose("one").await;
    assert_eq!(active().await, "one");
    // Deleting the chosen one leaves a single cluster: that one is active without choosing.
    let deleted = app.delete_and_wait("/api/clusters/one").await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert_eq!(active().await, "two");

    // Cleared ("(none)" in the header): nothing is active, not even the only cluster, until one
    // is chosen again.
    let r = app
        .client
        .delete(app.url("/api/active-cluster"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.json::<serde_json::Value>().await.unwrap()["name"].is_null());
    assert!(active().await.is_null());
    assert_eq!(app.json("/api/clusters/two").await["active"], false);
    choose("two").await;
    assert_eq!(active().await, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_a_cluster_drops_its_record_and_touches_nothing_in_the_account() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    // Not while something runs on it.
    let forget = || async {
        app.client
            .post(app.url("/api/clusters/demo/forget"))
            .send()
            .await
            .unwrap()
    };
    let r = forget().await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let before = app.calls().await;
    let r = forget().await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let id = r.json::<serde_json::Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(op["kind"], "forget-cluster");
    let after = app.calls().await;
    assert_eq!(
        after["accepted"], before["accepted"],
        "no call to the account at all"
    );
    assert_eq!(
        app.get("/api/clusters/demo").await.status(),
        StatusCode::NOT_FOUND
    );
    assert!(app.json("/api/active-cluster").await["name"].is_null());
    assert_eq!(forget().await.status(), StatusCode::NOT_FOUND);
}

/// A cluster says what it runs and what it could: its Kubernetes version, the next minor when
/// HyperPod supports it (none past the last it lists), and each managed add-on it installed
/// with the newest EKS offers for this version and the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_says_what_it_runs_and_what_it_could() {
    let app = spawn_app().await;
    problem(
        app.get("/api/clusters/demo/versions").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    for (name, version, next) in [
        ("older", "1.33", json!("1.34")),
        ("newest", "1.34", serde_json::Value::Null),
    ] {
        let mut body = pipeline_body();
        body["name"] = json!(name);
        body["kubernetesVersion"] = json!(version);
        let id = app.start("/api/pipelines", &body).await;
        assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
        let v = app.json(&format!("/api/clusters/{name}/versions")).await;
        assert_eq!(
            (&v["kubernetes"], &v["nextKubernetes"]),
            (&json!(version), &next),
            "{v}"
        );
        let addons = v["addons"].as_array().unwrap();
        let cni = addons
            .iter()
            .find(|a| a["name"] == "vpc-cni")
            .unwrap_or_else(|| panic!("{v}"));
        assert!(
            cni["version"].is_string() && cni["newest"].is_string(),
            "{cni}"
        );
        assert_eq!(cni["behind"], false, "{cni}");
        assert_eq!(cni["newestForNext"].is_string(), !next.is_null(), "{cni}");
    }
    // Each group's nodes with their last patch: none yet, then the same for all after an
    // update, then a drift once a node is replaced (the new one runs what it launched with).
    let groups = |v: &serde_json::Value| v["groups"][0].clone();
    let v = app.json("/api/clusters/older/versions").await;
    assert_eq!(
        (
            &groups(&v)["nodes"],
            &groups(&v)["lastSoftwareUpdates"],
            &groups(&v)["drift"]
        ),
        (&json!(2), &json!(["never"]), &json!(false)),
        "{v}"
    );
    let id = app
        .start("/api/clusters/older/hyperpod/software-update", &json!({}))
        .await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let v = app.json("/api/clusters/older/versions").await;
    let patched = groups(&v)["lastSoftwareUpdates"].clone();
    assert!(
        patched.as_array().unwrap().len() == 1 && patched[0] != "never",
        "{v}"
    );
    assert_eq!(groups(&v)["drift"], false);
    let nodes = app.json("/api/clusters/older/nodes").await;
    let node = nodes["nodes"][0]["instanceId"]
        .as_str()
        .unwrap()
        .to_string();
    let id = app
        .start(
            &format!("/api/clusters/older/nodes/{node}/replace"),
            &json!({}),
        )
        .await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let v = app.json("/api/clusters/older/versions").await;
    assert_eq!(
        (&groups(&v)["lastSoftwareUpdates"], &groups(&v)["drift"]),
        (&json!([patched[0], "never"]), &json!(true)),
        "{v}"
    );
}
