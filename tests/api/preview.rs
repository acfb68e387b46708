//! Previews: every writing operation of the OpenAPI document is sent with `dryRun=true` against a
//! cluster holding one of everything, and answers its plan while making no mutating call (the
//! sandbox's log of every mutating call asked for), starting no operation and recording nothing
//! in the audit trail; then the operations are run for real and each does what its plan said: the
//! same kinds and phases, and no mutating call the plan did not name.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::helpers::*;

/// What a preview must answer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// A plan that starts an operation; `true`: the test then runs the request for real and
    /// holds the run to the plan.
    Starts(bool),
    /// A plan of direct changes (no operation).
    Changes,
    /// A plan with nothing to change, as the request would find (what it asks for is so).
    Nothing,
    /// The same refusal as the request itself, for the reason given (single-user mode has no
    /// people; a target only known at run time).
    Refused(&'static str),
}

struct Case {
    op: &'static str,
    method: Method,
    path: String,
    body: Option<Value>,
    expect: Expect,
}

fn case(op: &'static str, method: Method, path: &str, body: Option<Value>, expect: Expect) -> Case {
    Case {
        op,
        method,
        path: path.to_string(),
        body,
        expect,
    }
}

/// Every writing operation, in an order where nothing is gone before a later case needs it.
fn cases(node: &str, other_node: &str, done_op: &str) -> Vec<Case> {
    use Expect::*;
    let sage = "lmsysorg/sglang:v0.5.8";
    let d = "/api/clusters/demo";
    let alice = "arn:aws:iam::111122223333:role/Alice";
    vec![
        case(
            "active_cluster_set",
            Method::PUT,
            "/api/active-cluster",
            Some(json!({"name": "spare"})),
            Changes,
        ),
        case(
            "active_cluster_clear",
            Method::DELETE,
            "/api/active-cluster",
            None,
            Changes,
        ),
        case(
            "pipeline_create",
            Method::POST,
            "/api/pipelines",
            Some(
                json!({"name": "walk", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge", "instanceCount": 1, "capacityType": "on-demand"}),
            ),
            Starts(true),
        ),
        case(
            "cluster_create",
            Method::POST,
            "/api/clusters",
            Some(json!({"name": "walk-eks"})),
            Starts(true),
        ),
        case(
            "cluster_import",
            Method::POST,
            "/api/clusters/import",
            Some(json!({"hyperpodClusterName": "not-in-the-account"})),
            Refused("importing needs a HyperPod cluster the account has and the product does not"),
        ),
        case(
            "dependencies_install",
            Method::POST,
            &format!("{d}/dependencies"),
            Some(json!({})),
            Starts(true),
        ),
        case(
            "hyperpod_create",
            Method::POST,
            "/api/clusters/spare/hyperpod",
            Some(
                json!({"instanceType": "ml.g5.8xlarge", "instanceCount": 1, "zone": "us-west-2a", "capacityType": "on-demand"}),
            ),
            Starts(false),
        ),
        case(
            "storage_setup",
            Method::POST,
            &format!("{d}/storage"),
            Some(json!({"claimName": "more-data"})),
            Starts(false),
        ),
        case(
            "features_update",
            Method::PATCH,
            &format!("{d}/features"),
            Some(json!({"containerInsights": true, "tieredCheckpointing": true})),
            Starts(true),
        ),
        case(
            "instance_group_create",
            Method::POST,
            &format!("{d}/instance-groups"),
            Some(
                json!({"instanceGroupName": "extra", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge", "instanceCount": 1, "capacityType": "on-demand"}),
            ),
            Starts(true),
        ),
        case(
            "instance_group_update",
            Method::PATCH,
            &format!("{d}/instance-groups/extra"),
            Some(json!({"instanceCount": 2})),
            Starts(true),
        ),
        case(
            "hyperpod_software_update",
            Method::POST,
            &format!("{d}/hyperpod/software-update"),
            Some(json!({"batchInstances": 1})),
            Starts(true),
        ),
        case(
            "cluster_upgrade",
            Method::POST,
            &format!("{d}/upgrade"),
            Some(json!({"kubernetesVersion": "1.33"})),
            Starts(true),
        ),
        case(
            "node_reboot",
            Method::POST,
            &format!("{d}/nodes/{other_node}/reboot"),
            None,
            Starts(true),
        ),
        case(
            "node_replace",
            Method::POST,
            &format!("{d}/nodes/{other_node}/replace"),
            None,
            Starts(false),
        ),
        case(
            "mlflow_setup",
            Method::POST,
            "/api/mlflow",
            Some(json!({"cluster": "demo"})),
            Starts(false),
        ),
        case(
            "scheduling_policy_set",
            Method::PUT,
            &format!("{d}/scheduling-policy"),
            Some(
                json!({"priorityClasses": [{"name": "inference", "weight": 90}, {"name": "training", "weight": 60}], "fairShare": true}),
            ),
            Starts(true),
        ),
        case(
            "team_create",
            Method::POST,
            &format!("{d}/teams"),
            Some(
                json!({"teamName": "team-c", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]}),
            ),
            Starts(true),
        ),
        case(
            "team_update",
            Method::PATCH,
            &format!("{d}/teams/team-a"),
            Some(json!({"fairShareWeight": 50})),
            Starts(true),
        ),
        case(
            "team_access_grant",
            Method::PUT,
            &format!("{d}/teams/team-a/access"),
            Some(json!({"principalArn": alice, "access": "edit"})),
            Starts(true),
        ),
        case(
            "team_access_revoke",
            Method::DELETE,
            &format!("{d}/teams/team-a/access?principalArn={alice}"),
            None,
            Starts(true),
        ),
        case(
            "training_job_submit",
            Method::POST,
            &format!("{d}/training-jobs"),
            Some(
                json!({"jobName": "sft2", "team": "team-a", "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge",
                         "nodeCount": 1, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca"}),
            ),
            Starts(false),
        ),
        case(
            "model_download",
            Method::POST,
            &format!("{d}/models"),
            Some(json!({"modelId": "Qwen/Qwen3-0.6B"})),
            Starts(false),
        ),
        case(
            "endpoint_deploy",
            Method::POST,
            &format!("{d}/endpoints"),
            Some(
                json!({"endpointName": "qwen2", "team": "serving", "model": "/s3/models/Qwen/Qwen3-8B", "instanceType": "ml.g5.8xlarge"}),
            ),
            Starts(false),
        ),
        case(
            "endpoint_update",
            Method::PATCH,
            &format!("{d}/endpoints/qwen"),
            Some(json!({"replicas": 2})),
            Starts(false),
        ),
        case(
            "deployment_create",
            Method::POST,
            &format!("{d}/deployments"),
            Some(json!({"deploymentName": "chat2", "team": "serving", "image": sage})),
            Starts(false),
        ),
        case(
            "pool_create",
            Method::POST,
            &format!("{d}/pools"),
            Some(json!({"poolName": "warm2", "team": "serving", "image": sage, "size": 1})),
            Starts(false),
        ),
        case(
            "pool_scale",
            Method::PATCH,
            &format!("{d}/pools/warm"),
            Some(json!({"size": 2})),
            Starts(false),
        ),
        case(
            "pool_assign",
            Method::POST,
            &format!("{d}/pools/warm/assign"),
            Some(json!({"pod": "no-such-pod", "model": "chat"})),
            Refused("the pod is one the pool names at run time"),
        ),
        case(
            "pool_unassign",
            Method::POST,
            &format!("{d}/pools/warm/unassign"),
            Some(json!({"pod": "no-such-pod"})),
            Refused("the pod is one the pool names at run time"),
        ),
        case(
            "space_create",
            Method::POST,
            &format!("{d}/spaces"),
            Some(
                json!({"spaceName": "lab2", "team": "team-a", "instanceType": "ml.g5.8xlarge", "idleShutdownMinutes": 0}),
            ),
            Starts(false),
        ),
        case(
            "space_update",
            Method::PATCH,
            &format!("{d}/spaces/lab"),
            Some(json!({"idleShutdownMinutes": 30})),
            Starts(false),
        ),
        case(
            "space_open",
            Method::POST,
            &format!("{d}/spaces/lab/open"),
            None,
            Changes,
        ),
        case(
            "space_connect",
            Method::POST,
            &format!("{d}/spaces/lab/connections"),
            Some(json!({"type": "web-ui"})),
            Changes,
        ),
        case(
            "space_sessions_end",
            Method::DELETE,
            &format!("{d}/spaces/lab/sessions"),
            None,
            Changes,
        ),
        case(
            "space_stop",
            Method::POST,
            &format!("{d}/spaces/lab/stop"),
            None,
            Starts(false),
        ),
        case(
            "space_start",
            Method::POST,
            &format!("{d}/spaces/lab/start"),
            None,
            Nothing,
        ),
        case(
            "operation_cancel",
            Method::POST,
            &format!("/api/operations/{done_op}/cancel"),
            None,
            Refused("a finished operation is not cancelled"),
        ),
        case(
            "operation_retry",
            Method::POST,
            &format!("/api/operations/{done_op}/retry"),
            None,
            Refused("only a failed or cancelled operation is retried"),
        ),
        case(
            "agent_token_create",
            Method::POST,
            "/api/session/agent-tokens",
            Some(json!({"name": "walk"})),
            Refused("single-user mode has no people"),
        ),
        case(
            "agent_token_delete",
            Method::DELETE,
            "/api/session/agent-tokens/0190aaaa-0000-7000-8000-000000000000",
            None,
            Refused("single-user mode has no people"),
        ),
        case(
            "admin_add",
            Method::POST,
            "/api/admins",
            Some(json!({"principalArn": alice})),
            Refused("single-user mode has no people"),
        ),
        case(
            "admin_remove",
            Method::DELETE,
            "/api/admins/arn%3Aaws%3Aiam%3A%3A111122223333%3Arole%2FAlice",
            None,
            Refused("single-user mode has no people"),
        ),
        case(
            "job_delete",
            Method::DELETE,
            &format!("{d}/jobs/sft"),
            None,
            Refused("the cluster runs no plain Kubernetes job: its jobs are training jobs"),
        ),
        case(
            "training_job_delete",
            Method::DELETE,
            &format!("{d}/training-jobs/sft"),
            None,
            Starts(true),
        ),
        case(
            "deployment_delete",
            Method::DELETE,
            &format!("{d}/deployments/chat"),
            None,
            Starts(true),
        ),
        case(
            "endpoint_delete",
            Method::DELETE,
            &format!("{d}/endpoints/qwen"),
            None,
            Starts(true),
        ),
        case(
            "pool_delete",
            Method::DELETE,
            &format!("{d}/pools/warm"),
            None,
            Starts(true),
        ),
        case(
            "space_delete",
            Method::DELETE,
            &format!("{d}/spaces/lab"),
            None,
            Starts(true),
        ),
        case(
            "storage_delete",
            Method::DELETE,
            &format!("{d}/storage/s3-claim?namespace=hyperpod-ns-serving"),
            None,
            Starts(false),
        ),
        case(
            "team_delete",
            Method::DELETE,
            &format!("{d}/teams/serving"),
            None,
            Starts(false),
        ),
        case(
            "node_delete",
            Method::POST,
            &format!("{d}/nodes/{node}/delete"),
            None,
            Starts(false),
        ),
        case(
            "instance_group_delete",
            Method::DELETE,
            &format!("{d}/instance-groups/extra"),
            None,
            Starts(true),
        ),
        case(
            "cluster_forget",
            Method::POST,
            "/api/clusters/spare-forgotten/forget",
            None,
            Starts(true),
        ),
        case(
            "cluster_delete",
            Method::DELETE,
            "/api/clusters/spare-deleted",
            None,
            Starts(true),
        ),
    ]
}

async fn send(app: &TestApp, c: &Case, dry: bool) -> (StatusCode, Value) {
    let sep = if c.path.contains('?') { '&' } else { '?' };
    let url = if dry {
        app.url(&format!("{}{sep}dryRun=true", c.path))
    } else {
        app.url(&c.path)
    };
    let mut r = app.client.request(c.method.clone(), url);
    if let Some(body) = &c.body {
        r = r.json(body);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Everything a preview must leave as it was: the mutating calls asked of the sandbox, the
/// operations, the audit trail, the clusters and which one is active.
async fn written(app: &TestApp) -> Value {
    json!({
        "attempted": app.calls().await["attempted"],
        "operations": app.json("/api/operations?limit=1000").await.as_array().map(Vec::len),
        "audit": app.json("/api/audit?limit=1000").await.as_array().map(Vec::len),
        "clusters": app.json("/api/clusters").await,
        "active": app.json("/api/active-cluster").await,
    })
}

fn attempted(calls: &Value) -> std::collections::BTreeMap<String, i64> {
    serde_json::from_value(calls["attempted"].clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_writing_route_previews_its_plan_without_writing_and_the_run_keeps_to_it() {
    let (app, _) = crate::fuzz::populated_app().await;
    let nodes = node_ids(&app).await;
    let ops = app.json("/api/operations?limit=1000").await;
    let of_kind = |kind: &str, state: &str| {
        ops.as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == kind && o["state"] == state)
            .unwrap_or_else(|| panic!("no {state} {kind} operation"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let done = of_kind("pipeline", "succeeded");
    let cases = cases(&nodes[0], &nodes[1], &done);

    // The cases are every writing operation of the document but those without a preview.
    let doc = app.json("/api/openapi.json").await;
    let mut documented = BTreeSet::new();
    for (_, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let takes = op["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["name"] == "dryRun" && p["in"] == "query")
            });
            if ["post", "put", "patch", "delete"].contains(&method.as_str()) && takes {
                documented.insert(op["operationId"].as_str().unwrap().to_string());
            }
        }
    }
    let walked: BTreeSet<String> = cases.iter().map(|c| c.op.to_string()).collect();
    assert_eq!(
        walked, documented,
        "a case for every writing operation that takes dryRun"
    );
    for exempt in ["session_create", "endpoint_invoke", "deployment_invoke"] {
        assert!(!documented.contains(exempt), "{exempt} has no preview");
    }

    // An unreadable flag is refused, and a route without a preview says so.
    let r = app
        .post(
            "/api/clusters/demo/hyperpod/software-update?dryRun=maybe",
            &json!({}),
        )
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "dryRun"
    );
    let r = app
        .client
        .post(app.url("/api/clusters/demo/endpoints/qwen/invoke?dryRun=true"))
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "dryRun"
    );

    // Each case in turn: its preview's plan with nothing written; then, where asked, the
    // request for real, held to that plan.
    let mut called = 0;
    for c in &cases {
        let mut before = written(&app).await;
        let (status, plan) = send(&app, c, true).await;
        match c.expect {
            Expect::Refused(why) => {
                assert!(
                    status.is_client_error(),
                    "{} ({why}): {status} {plan}",
                    c.op
                );
                // The request itself, refused too: it is in the audit trail, and nothing more.
                let (real, _) = send(&app, c, false).await;
                before["audit"] = json!(before["audit"].as_u64().unwrap() + 1);
                assert_eq!(
                    status, real,
                    "{}: the preview is refused as the request is",
                    c.op
                );
            }
            _ => {
                assert_eq!(status, StatusCode::OK, "{}: {plan}", c.op);
                assert_eq!(plan["dryRun"], true, "{}: {plan}", c.op);
                let starts = !plan["operations"].as_array().unwrap().is_empty();
                let changes = !plan["changes"].as_array().unwrap().is_empty();
                let want = match c.expect {
                    Expect::Changes => (false, true),
                    Expect::Nothing => (false, false),
                    _ => (true, false),
                };
                assert_eq!((starts, changes), want, "{}: {plan}", c.op);
                for op in plan["operations"].as_array().unwrap() {
                    let phases = op["phases"].as_array().unwrap();
                    assert!(!phases.is_empty(), "{}: {op}", c.op);
                }
            }
        }
        assert_eq!(
            written(&app).await,
            before,
            "{}: the preview wrote nothing",
            c.op
        );
        if c.op == "hyperpod_software_update" {
            // The running work on the nodes it patches, each with what happens to its kind.
            let affects = plan["affects"].as_array().unwrap();
            let outcome = |w: &str| {
                affects
                    .iter()
                    .find(|a| a["workload"] == w)
                    .and_then(|a| a["outcome"].as_str())
                    .unwrap_or_else(|| panic!("{w} not in {plan}"))
                    .to_string()
            };
            for server in ["deployment/chat", "pool/warm"] {
                assert!(
                    outcome(server).starts_with("interrupted when its node's batch is patched; it has no pod on another node"),
                    "{plan}"
                );
            }
        }
        if c.expect == Expect::Starts(true) {
            called += run_as_planned(&app, c, &plan).await;
        }
    }
    assert!(
        called > 10,
        "the runs made mutating calls to hold to their plans: {called}"
    );
}

/// Sends the request for real: each operation it starts is the planned one (kind and phases, a
/// pipeline's stages too), and it makes no mutating call its plan did not name. Returns how many
/// kinds of mutating call it made.
async fn run_as_planned(app: &TestApp, c: &Case, plan: &Value) -> usize {
    let calls_before = attempted(&app.calls().await);
    let (status, answer) = send(app, c, false).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{}: {answer}", c.op);
    let ids: Vec<String> = match answer["features"].as_object() {
        Some(features) => features
            .values()
            .filter_map(|f| f["operationId"].as_str().map(str::to_string))
            .collect(),
        None => vec![answer["operationId"].as_str().unwrap().to_string()],
    };
    let planned = plan["operations"].as_array().unwrap();
    let mut real = Vec::new();
    for id in &ids {
        let op = app.wait_terminal(id).await;
        assert_eq!(op["state"], "succeeded", "{}: {op}", c.op);
        real.push(op);
    }
    // Each planned operation without a parent is one the request started, in order; a
    // pipeline's stages are the operations its phases started.
    let heads: Vec<&Value> = planned.iter().filter(|p| p["parent"].is_null()).collect();
    assert_eq!(heads.len(), real.len(), "{}: {plan}", c.op);
    for (p, r) in heads.iter().zip(&real) {
        assert_eq!(p["kind"], r["kind"], "{}", c.op);
        assert_eq!(
            names(&p["phases"]),
            names(&r["phases"]),
            "{}: {}",
            c.op,
            p["kind"]
        );
        for phase in r["phases"].as_array().unwrap() {
            let Some(child) = phase["outputs"]["operationId"].as_str() else {
                continue;
            };
            let child = app.json(&format!("/api/operations/{child}")).await;
            let planned_child = planned
                .iter()
                .find(|o| o["kind"] == child["kind"])
                .unwrap_or_else(|| panic!("{}: stage {} not planned", c.op, child["kind"]));
            assert_eq!(
                names(&planned_child["phases"]),
                names(&child["phases"]),
                "{}",
                c.op
            );
        }
    }
    let named: BTreeSet<&str> = planned
        .iter()
        .flat_map(|o| o["phases"].as_array().unwrap())
        .flat_map(|p| p["calls"].as_array().unwrap())
        .map(|call| call["api"].as_str().unwrap())
        .collect();
    let after = attempted(&app.calls().await);
    let made: Vec<&String> = after
        .iter()
        .filter(|(api, n)| calls_before.get(*api) != Some(n))
        .map(|(api, _)| api)
        .collect();
    let unnamed: Vec<&&String> = made
        .iter()
        .filter(|a| !named.contains(a.as_str()))
        .collect();
    assert!(
        unnamed.is_empty(),
        "{}: the run called {unnamed:?}, which its plan did not name: {plan}",
        c.op
    );
    made.len()
}

fn names(phases: &Value) -> Vec<&str> {
    phases
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}
