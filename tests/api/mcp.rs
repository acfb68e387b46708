//! The agent face through the official MCP Python SDK (streamable HTTP) against the real server.

use std::path::PathBuf;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// Runs `tests/peers/mcp_client.py` with the venv's Python (installed by ./scripts/test).
async fn mcp_client(base: &str, scenario: &str) -> Value {
    mcp_client_as(base, scenario, None).await
}

/// The same, with an agent token on every request (`Authorization: Bearer`).
pub(crate) async fn mcp_client_as(base: &str, scenario: &str, bearer: Option<&str>) -> Value {
    mcp_client_with(base, scenario, bearer, &[]).await
}

/// [`mcp_client_as`] with the scenario's own inputs in its environment.
pub(crate) async fn mcp_client_with(
    base: &str,
    scenario: &str,
    bearer: Option<&str>,
    env: &[(&str, String)],
) -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = venv_python();
    let mut command = tokio::process::Command::new(python);
    if let Some(b) = bearer {
        command.env("MCP_BEARER", b);
    }
    command.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let out = command
        .arg(root.join("tests/peers/mcp_client.py"))
        .arg(format!("{base}/mcp"))
        .arg(scenario)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the MCP client");
    assert!(
        out.status.success(),
        "MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client output is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_sees_the_rest_catalog_with_the_same_answers_and_audit() {
    let app = spawn_app().await;
    let seen = mcp_client(&app.base, "basic").await;

    let tools = seen["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let doc = app.json("/api/openapi.json").await;
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        // A person's own session and agent tokens are not an agent's tools.
        .filter(|op| op["x-mcp"]["tool"] != false)
        .count();
    assert!(operations > 50, "{operations}");
    assert!(tools
        .iter()
        .all(|t| !t["name"].as_str().unwrap().starts_with("agent_token")));
    assert_eq!(tools.len(), operations, "one tool per REST operation");
    assert_eq!(tool("cluster_list")["read_only"], true);
    assert_eq!(tool("cluster_delete")["destructive"], true);
    assert_eq!(tool("pipeline_create")["idempotent"], false);
    assert!(tool("hyperpod_create")["description"]
        .as_str()
        .unwrap()
        .contains("operation_get"));
    assert!(tool("pipeline_create")["properties"]
        .as_array()
        .unwrap()
        .contains(&json!("instanceType")));

    // The same operation through MCP and through REST gives the same answer.
    let rest = app.json("/api/aws/instance-types?zone=us-west-2b").await;
    assert_eq!(seen["instance_types"]["value"], rest);
    let rest_zones = app.json("/api/aws/zones").await;
    assert_eq!(
        serde_json::from_str::<Value>(seen["zones_text"].as_str().unwrap()).unwrap(),
        rest_zones
    );

    // A mutation names its status tool and is followed to the end with wait_seconds.
    let started = &seen["started"]["value"];
    assert_eq!(started["status_tool"], "operation_get");
    assert!(started["expected_duration"].is_string());
    assert_eq!(seen["final"]["state"], "succeeded");
    let op = app
        .json(&format!(
            "/api/operations/{}",
            started["operation_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(op["actor"], "agent", "the audit records the agent");

    // A validation error reaches the agent as the same problem body.
    assert_eq!(seen["invalid"]["is_error"], true);
    assert_eq!(seen["invalid"]["value"]["field"], "name");
    assert_eq!(
        seen["invalid"]["value"]["type"],
        "urn:instantstart:problem:validation"
    );
    assert!(seen["invalid"]["value"]["hint"].is_string());

    // Every playbook is served over MCP: the skills as prompts and as skill:// resources.
    let agent_config = app.json("/api/agent/config").await;
    let skills = agent_config["skills"].as_object().unwrap();
    for name in skills.keys() {
        assert!(
            seen["prompts"].as_array().unwrap().contains(&json!(name)),
            "{name}"
        );
        assert!(seen["resources"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("skill://{name}"))));
    }
    assert!(seen["prompts"]
        .as_array()
        .unwrap()
        .contains(&json!("hypd-inst-agent")));
    assert_eq!(seen["prompt_text"], skills["deploy-model"]);
    assert_eq!(seen["resource_text"], skills["diagnose-nccl"]);

    // The Kiro CLI 3 profile, installed into a fresh home, resolves: the MCP URL is this
    // server's, every skill:// resource is on disk, exactly the read-only tools are allowed.
    let home = tempfile::tempdir().unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let install = tokio::process::Command::new(venv_python())
        .arg(root.join("scripts/install-agent"))
        .arg(&app.base)
        .env("HOME", home.path())
        .env_remove("INSTANTSTART_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let checked = tokio::process::Command::new(venv_python())
        .arg(peer("kiro_agent_check.py"))
        .arg(home.path())
        .output()
        .await
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let installed: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let front = &installed["front"];
    assert_eq!(
        front["mcpServers"]["instantstart"]["url"],
        format!("{}/mcp", app.base)
    );
    assert_eq!(installed["body"], agent_config["prompt"]);
    assert_eq!(installed["skills"].as_object().unwrap().len(), skills.len());
    for (name, found) in installed["skills"].as_object().unwrap() {
        assert_eq!(found["found"], true, "{name}");
        assert_eq!(found["name"], json!(name));
    }
    let mut allowed: Vec<String> = front["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| rule["capability"] == "mcp" && rule["effect"] == "allow")
        .flat_map(|rule| rule["match"].as_array().unwrap().clone())
        .map(|m| {
            m.as_str()
                .unwrap()
                .strip_prefix("instantstart/")
                .unwrap()
                .to_string()
        })
        .collect();
    let mut read_only: Vec<String> = tools
        .iter()
        .filter(|t| t["read_only"] == true)
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    allowed.sort();
    read_only.sort();
    assert_eq!(allowed, read_only, "read-only tools run, the rest ask");
    assert!(front.get("allowedTools").is_none() && front.get("toolsSettings").is_none());

    // The calls are in the metrics, by tool and outcome, with their overhead timed.
    let r = app.get("/metrics").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = r.text().await.unwrap();
    let sample = |line: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{line}` in\n{text}"))
    };
    assert!(
        sample(r#"instantstart_mcp_tool_calls_total{tool="pipeline_create",outcome="ok"}"#) >= 1.0
    );
    assert!(
        sample(r#"instantstart_mcp_tool_calls_total{tool="pipeline_create",outcome="problem"}"#)
            >= 1.0
    );
    assert!(sample("instantstart_mcp_tool_overhead_seconds_count") >= 4.0);
    assert!(
        sample(
            r#"instantstart_http_requests_total{method="POST",route="/api/pipelines",status="202"}"#
        ) >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_create_cluster_skill_rehearsed_over_mcp_recovers_from_a_failed_stage() {
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:CreateCluster=1"),
        ..Default::default()
    })
    .await;
    let seen = mcp_client(&app.base, "rehearsal").await;
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(steps[0], json!(["cluster_list", 0]));
    assert_eq!(steps[1], json!(["zone_list", "us-west-2a"]));
    assert!(steps[2][1]
        .as_array()
        .unwrap()
        .contains(&json!("ml.g5.8xlarge")));
    assert_eq!(steps[3], json!(["pipeline_create", "operation_get"]));
    assert_eq!(
        steps[4],
        json!(["operation_get", "failed", "operation_retry", "hyperpod"])
    );
    assert_eq!(steps[5], json!(["operation_retry", false]));
    assert_eq!(steps[6], json!(["operation_get", "succeeded"]));
    assert_eq!(
        steps[7],
        json!(["cluster_get", {"pipeline": "succeeded", "cluster": "succeeded", "dependencies": "succeeded", "hyperpod": "succeeded", "storage": "succeeded"}])
    );
    // The deploy-model skill continues through MCP only.
    assert_eq!(steps[8], json!(["model_list", 0]));
    assert_eq!(steps[9], json!(["model_download", "succeeded"]));
    assert_eq!(steps[10][1], false, "{}", steps[10]);
    assert_eq!(steps[11], json!(["operation_get", "succeeded"]));
    assert_eq!(steps[12], json!(["deployment_invoke", "(sandbox) hi"]));
    // The deployment's GPU is billed to it, at the (simulated) Price List's prices: no estimate.
    assert_eq!(steps[13], json!(["cluster_costs", true, false]));
    let calls = app.calls().await;
    assert_eq!(accepted_count(&calls, "eks:CreateCluster"), 1);
    assert_eq!(accepted_count(&calls, "sagemaker:CreateCluster"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_endpoint_is_behind_the_same_edge_guard() {
    let app = spawn_app_with(Opts {
        token: Some("s3cret-token-0123456789"),
        ..Default::default()
    })
    .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = || {
        app.client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init)
    };
    assert_eq!(
        post().send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let r = post()
        .bearer_auth("s3cret-token-0123456789")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = post()
        .bearer_auth("s3cret-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A body over REST's limit is refused at the edge, as on every REST route.
    let big = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("s3cret-token-0123456789")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
            "x".repeat(200 * 1024)
        ))
        .send()
        .await
        .unwrap();
    // Its body unread, the connection is closed, and the answer says so.
    assert_eq!(big.headers()["connection"], "close");
    assert_eq!(
        problem(big, StatusCode::PAYLOAD_TOO_LARGE).await["type"],
        "urn:instantstart:problem:payload-too-large"
    );
    // Nothing the endpoint answers is stored by a cache.
    assert_eq!(r.headers()["cache-control"], "no-store");
    // Ending the session answers 200, which the official clients take as terminated (they
    // report a 202 as a failed termination).
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let ended = app
        .client
        .delete(app.url("/mcp"))
        .bearer_auth("s3cret-token-0123456789")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::OK);
    // And a REST answer is not stored either.
    let listed = app
        .client
        .get(app.url("/api/clusters"))
        .bearer_auth("s3cret-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.headers()["cache-control"], "no-store");
}

/// The submit-training skill, rehearsed over MCP against a sandbox cluster whose next job loses
/// a pod once: decision-level inputs only, a refused path fixed from the problem's field, the
/// job followed to `succeeded` with the restart in its budget; then diagnose-nccl reads the
/// faulty rank's logs and the ranks' utilization, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_submit_training_skill_runs_over_mcp_to_a_trained_job() {
    let app = spawn_app_with(Opts {
        faults: Some("k8s:PodFailure=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "training").await;
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(
        steps[0],
        json!(["cluster_get", {"hyperpod": "succeeded", "storage": "succeeded"}])
    );
    assert_eq!(steps[1], json!(["instance_group_list", "ml.g5.8xlarge"]));
    assert_eq!(
        steps[2],
        json!(["recipe_list", ["dataset", "instanceType", "model"]])
    );
    assert_eq!(steps[3], json!(["features_get", false]));
    assert_eq!(steps[4], json!(["features_update", "succeeded"]));
    assert_eq!(steps[5], json!(["training_job_submit", true, "model"]));
    assert_eq!(
        steps[6],
        json!(["training_job_submit", false, "operation_get"])
    );
    assert_eq!(steps[7], json!(["operation_get", "succeeded"]));
    assert_eq!(steps[8], json!(["training_job_get", "succeeded", 1, 3]));
    // diagnose-nccl over MCP: the injected NCCL timeout, found in the logs, names rank 0's pod.
    assert_eq!(
        steps[9],
        // The log lines are named as workload-written text, which the agent never obeys.
        json!([
            "workload_logs",
            false,
            1,
            "[agent-sft-pods-0 rank 0]",
            ["lines"]
        ])
    );
    // diagnose-nccl for a slow job: the ranks' utilization read, the add-on only suggested.
    assert_eq!(
        steps[10],
        json!(["cluster_utilization", false, false, true])
    );
    assert_eq!(steps[11], json!(["features_get", false]));
}

/// The skills rehearsed nowhere else, over MCP alone: managed-features, storage-and-models,
/// deploy-model's managed path and add-instance-group, each by its rules (inspect first, change
/// only what was asked, follow every operation to its end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feature_storage_endpoint_and_group_skills_run_over_mcp() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "skills").await;
    assert_eq!(
        seen["steps"],
        json!([
            ["features_get", "disabled"],
            ["features_update", true, "feature-prerequisite"],
            [
                "features_update",
                [["fsxCsi", "succeeded"], ["inferenceOperator", "succeeded"]]
            ],
            ["cluster_get", "succeeded", true],
            ["storage_list", ["s3-claim"]],
            ["model_list", 0],
            ["model_download", "succeeded"],
            ["model_list", ["Qwen/Qwen3-0.6B"]],
            ["storage_objects_list", false, true],
            ["endpoint_list", 0],
            ["endpoint_deploy", false, "succeeded"],
            ["endpoint_invoke", false],
            ["endpoint_update", false],
            ["endpoint_delete", "succeeded"],
            ["instance_group_update", true],
            ["instance_group_update", "succeeded"],
            ["instance_type_list", true],
            ["preflight_get", false],
            ["instance_group_create", false, "succeeded"],
            ["instance_group_list", [["workers", 3], ["more", 1]]]
        ]),
        "{seen}"
    );
}

/// The diagnostic skills over MCP alone, each against the fault it is written for: a node that
/// failed its deep health check is investigated read-only, rebooted (which does not mend it) and
/// then replaced, in that order; a creation whose lifecycle script failed is read back to the
/// stream and the line that broke it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnostic_skills_run_over_mcp_against_the_faults_they_are_written_for() {
    // The first cluster's lifecycle script fails; the next one comes up with a node that
    // fails its deep health check.
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:LifecycleScriptFailure=1,sagemaker:DeepHealthCheckFailure=1"),
        ..Default::default()
    })
    .await;
    let mut broken = pipeline_body();
    broken["name"] = json!("broken");
    let id = app.start("/api/pipelines", &broken).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "failed");
    // On Spot, so under continuous node provisioning: HyperPod keeps events only there.
    let mut body = pipeline_body();
    body["capacityType"] = json!("spot");
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let seen = mcp_client(&app.base, "diagnose").await;
    assert_eq!(
        seen["steps"],
        json!([
            ["node_list", 2, 1],
            ["node_evidence", true, true, true],
            ["node_reboot", "succeeded"],
            ["node_evidence", "Failed"],
            ["node_replace", "succeeded"],
            ["node_list", ["Passed", "Passed"]],
            ["cluster_get", ["hyperpod"]],
            ["operation_get", "hyperpod-cluster-failed"],
            [
                "cluster_evidence",
                true,
                "[on_create.sh] exiting with status 1",
                true
            ]
        ]),
        "{seen}"
    );
}

/// The development-spaces skill over MCP alone: the feature and its prerequisite turned on, a
/// space made (its bad GPU count fixed from the problem's field), opened, linked to an IDE (the
/// add-on's web UI refused with the fallback named), stopped and started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_development_spaces_skill_runs_over_mcp_to_an_open_space() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "spaces").await;
    assert_eq!(
        seen["steps"],
        json!([
            ["features_get", false, false],
            ["features_update", ["succeeded", "succeeded"]],
            ["space_create", true, "gpus"],
            ["space_create", false, "succeeded"],
            ["space_get", "running", ["/s3"]],
            ["space_open", "//agent-lab.demo.spaces.localhost"],
            [
                "space_connect",
                true,
                409,
                "space-remote-access-unsupported"
            ],
            ["space_connect", true, 409, true],
            ["space_stop", "stopped"],
            ["space_start", "running"]
        ]),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_gate_gives_an_agent_eyes_before_hands() {
    let app = spawn_app_with(Opts {
        mcp_read_only: true,
        ..Default::default()
    })
    .await;
    let seen = mcp_client(&app.base, "readonly").await;
    assert_eq!(seen["read"]["is_error"], false, "{seen}");
    assert_eq!(seen["write"]["is_error"], true);
    // A preview writes nothing, so the gate lets it through: the plan, a pipeline's stages in it.
    assert_eq!(seen["preview"]["is_error"], false, "{seen}");
    let plan = &seen["preview"]["value"];
    assert_eq!(plan["dryRun"], true, "{plan}");
    assert_eq!(plan["operations"][0]["kind"], "pipeline", "{plan}");
    let problem = &seen["write"]["value"];
    assert_eq!(problem["type"], "urn:instantstart:problem:writes-disabled");
    assert!(problem["hint"]
        .as_str()
        .unwrap()
        .contains("--mcp-read-only"));
    assert!(seen["write_description"]
        .as_str()
        .unwrap()
        .starts_with("[writes disabled"));
    assert!(!seen["read_description"]
        .as_str()
        .unwrap()
        .contains("writes disabled"));
    // Nothing was submitted; REST is not gated.
    let ops = app.json("/api/operations").await;
    assert_eq!(ops.as_array().unwrap().len(), 0, "{ops}");
    // The refusal is in the audit trail, as the agent's.
    let trail = app.json("/api/audit").await;
    let entries = trail.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{trail}");
    let e = &entries[0];
    assert_eq!(
        (
            &e["actor"],
            &e["method"],
            &e["route"],
            &e["status"],
            &e["outcome"]
        ),
        (
            &json!("agent"),
            &json!("POST"),
            &json!("/api/pipelines"),
            &json!(403),
            &json!("refused")
        ),
        "{e}"
    );
}

/// The share-cluster-between-teams skill, rehearsed over MCP: governance and the training
/// operator in one request, the policy, an over-share refused by field, two teams, and a job
/// that names no team answered with the teams before it runs as one at a priority; then why a
/// job is pending and how much each team uses, as the agent reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_cluster_skill_runs_over_mcp_to_a_job_running_as_a_team() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "teams").await;
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(
        steps[..4],
        [
            json!(["team_list", false, "ml.g5.8xlarge", 2]),
            json!(["features_update", "taskGovernance", "succeeded"]),
            json!(["features_update", "trainingOperator", "succeeded"]),
            json!(["scheduling_policy_set", "succeeded"]),
        ],
        "{seen}"
    );
    assert_eq!(steps[4], json!(["team_create", true, "resources[0]"]));
    assert_eq!(steps[5], json!(["team_create", "team-a", "succeeded"]));
    assert_eq!(steps[6], json!(["team_create", "team-b", "succeeded"]));
    assert_eq!(
        steps[7],
        json!([
            "team_list",
            [
                ["team-a", "hyperpod-ns-team-a-localqueue"],
                ["team-b", "hyperpod-ns-team-b-localqueue"]
            ]
        ])
    );
    assert_eq!(
        steps[8],
        json!(["training_job_submit", true, "team", ["team-a", "team-b"]])
    );
    assert_eq!(steps[9], json!(["operation_get", "succeeded"]));
    assert_eq!(
        steps[10],
        json!([
            "training_job_get",
            "hyperpod-ns-team-a",
            "team-a",
            "training",
            "succeeded"
        ])
    );
    // Why is it pending: team-a's two-GPU job would need team-b's GPU, which team-b does not
    // lend, so it waits first in team-a's queue with Kueue's reason; team-b's own job is admitted.
    assert_eq!(steps[11], json!(["training_job_submit", "wide-a", false]));
    let wide = steps[12].as_array().unwrap();
    assert_eq!(
        wide[..3],
        [json!("training_job_get"), json!("wide-a"), json!("pending")],
        "{seen}"
    );
    assert!(
        wide[3].as_str().is_some_and(|r| !r.is_empty()),
        "a reason: {seen}"
    );
    assert_eq!(wide[4..], [json!(1), json!(true)], "{seen}");
    assert_eq!(steps[13], json!(["training_job_submit", "own-b", false]));
    assert_eq!(
        steps[14].as_array().unwrap()[..3],
        [json!("training_job_get"), json!("own-b"), json!("admitted")],
        "{seen}"
    );
    // How much is mine: team-b uses its one GPU and lends nothing; team-a uses none, one pending.
    assert_eq!(
        steps[15],
        json!([
            "team_list",
            [["team-a", 0.0, 0.0, 1], ["team-b", 1.0, 0.0, 0]]
        ]),
        "{seen}"
    );
}

/// Sharing as the agent sees it: team-a's two-node job borrows team-b's idle GPU; team-b's
/// higher-priority job takes it back, preempting team-a's (Kueue's reason, the job that took its
/// place, first in the queue, its message saying so); with team-b's job deleted, team-a's runs
/// again, the preemption counted as a restart — every state read over MCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_lend_borrow_reclaim_and_resume_over_mcp() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "sharing").await;
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(
        steps[..2],
        [
            json!(["team_create", "team-a", "succeeded"]),
            json!(["team_create", "team-b", "succeeded"])
        ],
        "{seen}"
    );
    // Borrowing: team-a uses two GPUs, one of them team-b's, which lends it.
    assert_eq!(
        steps[2],
        json!([
            "borrowing",
            "admitted",
            [["team-a", 2.0, 1.0, 0.0], ["team-b", 0.0, 0.0, 1.0]]
        ]),
        "{seen}"
    );
    // Reclaimed: team-b runs on its own GPU; team-a's job waits, preempted by b1.
    assert_eq!(
        steps[3],
        json!([
            "reclaimed",
            "pending",
            "InCohortReclamation",
            "b1",
            1,
            true,
            [["team-a", 0.0, 0.0, 0.0], ["team-b", 1.0, 0.0, 0.0]]
        ]),
        "{seen}"
    );
    assert_eq!(steps[4], json!(["training_job_delete", "succeeded"]));
    // Resumed, its preemption counted as a restart, borrowing again.
    assert_eq!(
        steps[5],
        json!([
            "resumed",
            1,
            [["team-a", 2.0, 1.0, 0.0], ["team-b", 0.0, 0.0, 1.0]]
        ]),
        "{seen}"
    );
}

/// The upgrade-cluster skill through MCP only: what runs and could, the plan (previewed, nothing
/// written), the upgrade followed to its end, and what runs after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_skill_runs_over_mcp() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let seen = mcp_client(&app.base, "upgrade").await;
    let phases = json!(["kubernetes-version", "addons", "software"]);
    assert_eq!(seen["before"], json!(["1.32", "1.33"]), "{seen}");
    assert_eq!(
        seen["plan"],
        json!({"is_error": false, "dryRun": true, "phases": phases}),
        "{seen}"
    );
    assert_eq!(seen["ended"], json!(["succeeded", phases]), "{seen}");
    assert_eq!(seen["after"], json!(["1.33", ["UpToDate"]]), "{seen}");
}
