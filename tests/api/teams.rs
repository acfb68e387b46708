//! Teams sharing a cluster (task governance): the feature, the scheduling policy and the teams'
//! quotas through REST on the sandbox — refused by field before any call, changed by diff,
//! recovered from a policy SageMaker left CreateFailed; and the same calls against moto's
//! gap-filler in AWS mode, in the request shapes SageMaker takes.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

pub(crate) async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let r = app
        .client
        .request(method, app.url(path))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn until_done(app: &TestApp, status: StatusCode, body: &Value) -> Value {
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.wait_terminal(body["operationId"].as_str().unwrap())
        .await
}

pub(crate) const POLICY: &str = "/api/clusters/demo/scheduling-policy";
pub(crate) const TEAMS: &str = "/api/clusters/demo/teams";

pub(crate) fn policy() -> Value {
    json!({"priorityClasses": [{"name": "inference", "weight": 90}, {"name": "training", "weight": 70}],
           "fairShare": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governance_is_turned_on_teams_get_shares_and_nothing_is_called_for_a_mistake() {
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:GovernanceNotReady=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    // Off: the view says so and what the groups hold (2 × ml.g5.8xlarge, one GPU each); a team
    // is refused with the feature to turn on, and nothing is called.
    let view = app.json(TEAMS).await;
    assert_eq!(view["enabled"], false, "{view}");
    assert_eq!(
        view["capacity"],
        json!([{"instanceType": "ml.g5.8xlarge", "instances": 2, "accelerators": 2, "allocatedInstances": 0.0}])
    );
    let before = mutating_calls(&app.calls().await);
    let team_a =
        json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]});
    let body = problem(app.post(TEAMS, &team_a).await, StatusCode::CONFLICT).await;
    assert!(
        body["detail"].as_str().unwrap().contains("taskGovernance"),
        "{body}"
    );

    let op = toggle(&app, "taskGovernance", true).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let features = app.json("/api/clusters/demo/features").await;
    let tg = features["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "taskGovernance")
        .unwrap();
    assert_eq!(
        (tg["state"].as_str(), tg["addon"].as_str()),
        (
            Some("enabled"),
            Some("amazon-sagemaker-hyperpod-taskgovernance")
        )
    );
    assert_eq!(
        mutating_calls(&app.calls().await) - before,
        1,
        "only the add-on was made"
    );

    // Mistakes, by field, before any call.
    let before = mutating_calls(&app.calls().await);
    for (body, field) in [
        (
            json!({"teamName": "Team_A", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]}),
            "teamName",
        ),
        (
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.p5.48xlarge", "count": 1}]}),
            "resources[0].instanceType",
        ),
        (
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 3}]}),
            "resources[0]",
        ),
        (
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1, "accelerators": 1}]}),
            "resources[0]",
        ),
        (
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}], "borrowLimit": 501}),
            "borrowLimit",
        ),
        // SageMaker takes at most 15 instance types in one quota (botocore's
        // ComputeQuotaResourceConfigList).
        (
            json!({"teamName": "team-a", "resources": vec![json!({"instanceType": "ml.g5.8xlarge", "count": 1}); 16]}),
            "resources",
        ),
        (
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}], "sharing": "DontLend", "borrowLimit": 10}),
            "borrowLimit",
        ),
    ] {
        let p = problem(
            app.post(TEAMS, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(p["field"], field, "{body} → {p}");
    }
    let over = problem(
        app.post(TEAMS, &json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 3}]})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        over["detail"].as_str().unwrap().contains("1 too many"),
        "{over}"
    );
    let (status, p) = send(
        &app,
        reqwest::Method::PUT,
        POLICY,
        &json!({"priorityClasses": [{"name": "a", "weight": 1}, {"name": "a", "weight": 2}]}),
    )
    .await;
    assert_eq!(
        (status, p["field"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("priorityClasses[1].name")
        ),
        "{p}"
    );
    assert_eq!(
        mutating_calls(&app.calls().await),
        before,
        "a refused request calls nothing"
    );

    // The policy made while SageMaker's side was not ready ends CreateFailed with the reason; the
    // same request again deletes it and makes it anew.
    let (status, body) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    let op = until_done(&app, status, &body).await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(op.to_string().contains("CreateFailed"), "{op}");
    assert_eq!(app.json(TEAMS).await["policy"]["status"], "CreateFailed");
    let (status, body) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    assert_eq!(until_done(&app, status, &body).await["state"], "succeeded");
    let calls = app.calls().await;
    assert_eq!(
        accepted_count(&calls, "sagemaker:CreateClusterSchedulerConfig"),
        2
    );
    assert_eq!(
        accepted_count(&calls, "sagemaker:DeleteClusterSchedulerConfig"),
        1
    );
    let got = app.json(POLICY).await;
    assert_eq!(
        got["priorityLabels"],
        json!(["inference-priority", "training-priority"]),
        "{got}"
    );
    assert_eq!(
        (
            got["fairShare"].as_bool(),
            got["idleResourceSharing"].as_bool()
        ),
        (Some(true), Some(false))
    );
    // The same policy: 200, nothing called.
    let before = mutating_calls(&app.calls().await);
    let (status, _) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mutating_calls(&app.calls().await), before);

    // Two teams, one instance each; a third would be more than the groups hold.
    for (name, sharing) in [("team-a", "LendAndBorrow"), ("team-b", "DontLend")] {
        let body = json!({"teamName": name, "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}],
                          "sharing": sharing, "fairShareWeight": 10});
        let op = app.wait_terminal(&app.start(TEAMS, &body).await).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    // /s3 means the same in a team's namespace: the cluster's claim, copied there.
    let claims = app.json("/api/clusters/demo/storage").await;
    let claim = |ns: &str| {
        claims
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["namespace"] == ns && c["claimName"] == "s3-claim")
            .cloned()
            .unwrap_or_else(|| panic!("no s3-claim in {ns}: {claims}"))
    };
    let (default, copy) = (claim("default"), claim("hyperpod-ns-team-a"));
    assert_eq!(
        (&copy["bucket"], &copy["prefix"]),
        (&default["bucket"], &default["prefix"])
    );
    // The cluster's claim stays while the teams mount copies of it; nothing is called.
    let before = mutating_calls(&app.calls().await);
    let p = problem(
        app.client
            .delete(app.url("/api/clusters/demo/storage/s3-claim"))
            .send()
            .await
            .unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        p["type"], "urn:instantstart:problem:claim-shared-by-teams",
        "{p}"
    );
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("hyperpod-ns-team-a") && detail.contains("hyperpod-ns-team-b"),
        "{p}"
    );
    assert_eq!(mutating_calls(&app.calls().await), before);
    assert_ne!(copy["volumeName"], default["volumeName"]);
    claim("hyperpod-ns-team-b");
    let again = problem(app.post(TEAMS, &team_a).await, StatusCode::CONFLICT).await;
    assert_eq!(again["field"], "teamName");
    let view = app.json(TEAMS).await;
    let teams = view["teams"].as_array().unwrap();
    assert_eq!(teams.len(), 2, "{view}");
    let a = &teams[0];
    assert_eq!(
        (
            a["name"].as_str(),
            a["namespace"].as_str(),
            a["queue"].as_str(),
            a["borrowLimit"].as_u64(),
            a["status"].as_str()
        ),
        (
            Some("team-a"),
            Some("hyperpod-ns-team-a"),
            Some("hyperpod-ns-team-a-localqueue"),
            Some(100),
            Some("Created")
        )
    );
    assert_eq!(
        teams[1]["borrowLimit"],
        Value::Null,
        "a team that does not borrow has no limit"
    );
    assert_eq!(view["capacity"][0]["allocatedInstances"], 2.0);
    let third = json!({"teamName": "team-c", "resources": [{"instanceType": "ml.g5.8xlarge", "accelerators": 1}]});
    let p = problem(
        app.post(TEAMS, &third).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "resources[0]", "{p}");

    // A patch equal to SageMaker's: 200 and nothing called; a change: one update, watched.
    let before = mutating_calls(&app.calls().await);
    let (status, same) = send(
        &app,
        reqwest::Method::PATCH,
        "/api/clusters/demo/teams/team-a",
        &json!({"fairShareWeight": 10}),
    )
    .await;
    assert_eq!(
        (status, same["name"].as_str()),
        (StatusCode::OK, Some("team-a"))
    );
    assert_eq!(mutating_calls(&app.calls().await), before);
    let (status, body) = send(
        &app,
        reqwest::Method::PATCH,
        "/api/clusters/demo/teams/team-a",
        &json!({"fairShareWeight": 50, "preempt": "Never"}),
    )
    .await;
    assert_eq!(until_done(&app, status, &body).await["state"], "succeeded");
    let a = app.json("/api/clusters/demo/teams/team-a").await;
    assert_eq!(
        (
            a["fairShareWeight"].as_u64(),
            a["preempt"].as_str(),
            a["status"].as_str()
        ),
        (Some(50), Some("Never"), Some("Updated")),
        "{a}"
    );
    assert_eq!(
        accepted_count(&app.calls().await, "sagemaker:UpdateComputeQuota"),
        1
    );

    // Removed: gone from the view, its share free again.
    let op = app.delete_and_wait("/api/clusters/demo/teams/team-b").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let r = app.get("/api/clusters/demo/teams/team-b").await;
    problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(
        app.json(TEAMS).await["capacity"][0]["allocatedInstances"],
        1.0
    );
    let claims = app.json("/api/clusters/demo/storage").await;
    let namespaces: Vec<&str> = claims
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["namespace"].as_str())
        .collect();
    assert_eq!(
        namespaces,
        ["default", "hyperpod-ns-team-a"],
        "team-b's copy is gone: {claims}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_aws_the_policy_and_quotas_reach_sagemaker_in_its_shapes_and_an_equal_patch_sends_nothing(
) {
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (client, base) = (p.client.clone(), p.base.clone());
    let send = |method: reqwest::Method, path: &str, body: Value| {
        let req = client.request(method, format!("{base}{path}")).json(&body);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let done = |status: StatusCode, body: Value| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
            wait_terminal(&client, &base, body["operationId"].as_str().unwrap()).await
        }
    };
    let (status, body) = send(
        reqwest::Method::PATCH,
        "/api/clusters/demo/features",
        json!({"taskGovernance": true}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let op = wait_terminal(
        &client,
        &base,
        body["features"]["taskGovernance"]["operationId"]
            .as_str()
            .unwrap(),
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let (status, body) = send(reqwest::Method::PUT, POLICY, policy()).await;
    assert_eq!(done(status, body).await["state"], "succeeded");
    team_on_aws(&p, "team-a").await;

    let seen = get(&client, format!("{}/_gapfiller/governance", p.moto.url)).await;
    let request = |op: &str| {
        seen["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["operation"] == op)
            .map(|r| r["body"].clone())
            .collect::<Vec<_>>()
    };
    let created = request("CreateClusterSchedulerConfig");
    assert_eq!(created.len(), 1, "{seen}");
    assert_eq!(created[0]["Name"], "demo-policy");
    assert!(
        created[0]["ClusterArn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:sagemaker:"),
        "{}",
        created[0]
    );
    assert_eq!(
        created[0]["SchedulerConfig"],
        json!({"PriorityClasses": [{"Name": "inference", "Weight": 90}, {"Name": "training", "Weight": 70}],
               "FairShare": "Enabled", "IdleResourceSharing": "Disabled"})
    );
    let quota = request("CreateComputeQuota");
    assert_eq!(quota.len(), 1, "{seen}");
    assert_eq!(
        (
            quota[0]["ComputeQuotaConfig"].clone(),
            quota[0]["ComputeQuotaTarget"].clone(),
            quota[0]["ActivationState"].clone()
        ),
        (
            json!({"ComputeQuotaResources": [{"InstanceType": "ml.g5.8xlarge", "Count": 1}],
                "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100},
                "PreemptTeamTasks": "LowerPriority"}),
            json!({"TeamName": "team-a", "FairShareWeight": 20}),
            json!("Enabled")
        )
    );
    let view = get(&client, format!("{base}{TEAMS}")).await;
    assert_eq!(
        (
            view["enabled"].as_bool(),
            view["teams"][0]["status"].as_str()
        ),
        (Some(true), Some("Created")),
        "{view}"
    );
    // The cluster's claim in the team's namespace, on the Kubernetes API.
    let pvc = p
        .emu
        .get("/api/v1/namespaces/hyperpod-ns-team-a/persistentvolumeclaims/s3-claim")
        .await
        .expect("team claim");
    let volume = pvc["spec"]["volumeName"].as_str().unwrap().to_string();
    let pv = p
        .emu
        .get(&format!("/api/v1/persistentvolumes/{volume}"))
        .await
        .expect("team volume");
    assert_eq!(pv["spec"]["claimRef"]["namespace"], "hyperpod-ns-team-a");
    assert!(
        pv["spec"]["csi"]["volumeHandle"]
            .as_str()
            .unwrap()
            .ends_with("-hyperpod-ns-team-a"),
        "{pv}"
    );

    // Equal: nothing sent beyond reads. Changed: one update at the version read.
    let (status, _) = send(
        reqwest::Method::PATCH,
        "/api/clusters/demo/teams/team-a",
        json!({"fairShareWeight": 20}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(reqwest::Method::PUT, POLICY, policy()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = send(
        reqwest::Method::PATCH,
        "/api/clusters/demo/teams/team-a",
        json!({"fairShareWeight": 30}),
    )
    .await;
    assert_eq!(done(status, body).await["state"], "succeeded");
    let seen = get(&client, format!("{}/_gapfiller/governance", p.moto.url)).await;
    let updates: Vec<&Value> = seen["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["operation"] == "UpdateComputeQuota")
        .collect();
    assert_eq!(updates.len(), 1, "{seen}");
    assert_eq!(updates[0]["body"]["TargetVersion"], 1);
    assert_eq!(
        updates[0]["body"]["ComputeQuotaTarget"],
        json!({"TeamName": "team-a", "FairShareWeight": 30})
    );
    assert!(
        seen["requests"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["operation"] != "UpdateClusterSchedulerConfig"),
        "{seen}"
    );

    // Kueue's view of the team's work, read back through the training listing.
    crate::placement::admission_is_read_from_kueues_workloads(&p).await;
    // And of a team's model, pod by pod, through the deployments listing.
    crate::placement::pods_admission_is_read_from_kueues_workloads(&p).await;
}

/// Makes `team` (one ml.g5.8xlarge, weight 20) on an AWS pipeline whose task governance is on,
/// followed to its end. The team's copies of the claims wait for its namespace and LocalQueue,
/// which the task governance add-on (AWS-run, absent here) makes once the quota exists: this
/// makes them once the operation says it waits for them.
pub(crate) async fn team_on_aws(p: &crate::kube::AwsPipeline, team: &str) {
    use crate::kube::get;
    let (client, base) = (&p.client, p.base.as_str());
    let body = json!({"teamName": team, "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}],
                      "fairShareWeight": 20});
    let r = client
        .post(format!("{base}{TEAMS}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    let team_op = body["operationId"].as_str().unwrap().to_string();
    let waiting = format!("{base}/api/operations/{team_op}");
    let mut op = Value::Null;
    for _ in 0..2400 {
        op = get(client, waiting.clone()).await;
        let waits = op
            .to_string()
            .contains("waiting for the task governance add-on");
        // A new operation is `pending` until it starts.
        if waits || !matches!(op["state"].as_str(), Some("running" | "pending")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        op.to_string()
            .contains("waiting for the task governance add-on"),
        "the team's storage waits for its namespace: {op}"
    );
    let json_type = "application/json";
    let ns = format!("hyperpod-ns-{team}");
    p.emu
        .send(
            reqwest::Method::POST,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json_type,
        )
        .await;
    p.emu
        .send(
            reqwest::Method::POST,
            &format!("/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues"),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                     "metadata": {"name": format!("{ns}-localqueue"), "namespace": ns},
                     "spec": {"clusterQueue": format!("{ns}-clusterqueue")}}),
            json_type,
        )
        .await;
    assert_eq!(
        wait_terminal(client, base, &team_op).await["state"],
        "succeeded"
    );
}
