//! The OpenAPI document against the wire: schemathesis generates requests for every operation
//! from `/api/openapi.json` (valid and invalid, then stateful sequences) against a server with a
//! real cluster, and checks for server errors, undocumented statuses and content types, and
//! answers that do not match their schema. Path parameters name things that exist, so the
//! generated requests reach the handlers' logic rather than stopping at a 404.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Requests the server counted (every route, every status), read from `/metrics`.
async fn requests_served(app: &TestApp) -> f64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("instantstart_http_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs schemathesis over the server's document with `checks`, as the suite runs it, with
/// `config` as its `schemathesis.toml` (the values it sends for named parameters).
async fn schemathesis(
    app: &TestApp,
    checks: &str,
    extra: &[&str],
    config: &str,
) -> std::process::Output {
    let schemathesis = venv_python().with_file_name("schemathesis");
    let (_work_guard, work) = temp_dir();
    std::fs::write(work.join("schemathesis.toml"), config).unwrap();
    // A fixed seed by default, so a finding reproduces; INSTANTSTART_FUZZ_SEED explores others.
    let seed = std::env::var("INSTANTSTART_FUZZ_SEED").unwrap_or_else(|_| "20261201".into());
    tokio::process::Command::new(&schemathesis)
        .arg("run")
        .arg(format!("{}/api/openapi.json", app.base))
        .args([
            "--checks",
            checks,
            "--max-examples",
            "5",
            "--workers",
            "1",
            "--seed",
            &seed,
            // Path parameters are free strings: most generated ones are filtered out as
            // unusable in a URL, which is expected, not a defect of the document.
            "--suppress-health-check",
            "filter_too_much",
            // A NUL cannot be sent in a header at all (HTTP refuses it before any route).
            "--generation-allow-x00",
            "false",
            "--no-color",
        ])
        .args(extra)
        // Hypothesis keeps its example database in the working directory: the test's own.
        .current_dir(&work)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run schemathesis (installed by ./scripts/test)")
}

/// Operations whose validators refuse, by design, some requests their schema allows, and why
/// the document cannot say it: the rule depends on the account or the cluster, or ties two
/// fields together. Every other operation accepts whatever its schema allows.
const BEYOND_THE_SCHEMA: &[(&str, &str)] = &[
    ("POST /api/clusters", "zones: two different Availability Zones of the account's region"),
    ("POST /api/pipelines", "zone: one of the region's, required unless capacityType is training-plan"),
    ("POST /api/clusters/{name}/hyperpod", "zone: one of the region's, required unless training-plan"),
    ("POST /api/clusters/{name}/instance-groups", "the HyperPod request, with instanceGroupName required on this route; zone as above"),
    ("GET /api/aws/instance-types", "zone: one of the region's"),
    ("POST /api/clusters/{name}/storage", "the FSx fields with an S3 claim, and the reverse: kind decides"),
    ("POST /api/clusters/{name}/deployments", "pool excludes image, autoscaling and replicas; the instance type and claim must be the cluster's"),
    ("POST /api/clusters/{name}/endpoints", "the instance type must be one of the cluster's GPU groups; jumpstart: models exclude the worker fields"),
    ("PATCH /api/clusters/{name}/endpoints/{endpoint}", "minReplicas at most maxReplicas; routing fixed at creation"),
    ("POST /api/clusters/{name}/training-jobs", "the recipe decides which of script, model and dataset it needs; the instance type must be the cluster's"),
    ("PATCH /api/clusters/{name}/features", "at least one feature; a memory share only with tiered checkpointing on"),
    ("POST /api/mlflow", "cluster: required when there are several"),
    ("POST /api/clusters/{name}/models", "claim: one of the cluster's"),
    ("GET /api/clusters/{name}/workloads/{kind}/{workload}/logs", "pod: one of the workload's"),
    ("GET /api/costs", "since: a calendar day, not after today nor more than 400 days back"),
    ("PUT /api/clusters/{name}/scheduling-policy", "priority class names unique within the list"),
    ("POST /api/clusters/{name}/spaces", "the instance type must be one of the cluster's, whole GPUs at most a node's and never with a MIG slice; team required where teams share the cluster; a name not taken"),
    ("PATCH /api/clusters/{name}/spaces/{space}", "whole GPUs at most a node's and never with a MIG slice; storageGib fixed at creation (409)"),
    ("GET /api/clusters/{name}/teams/{team}/access", "team: one of the cluster's"),
    ("PUT /api/clusters/{name}/teams/{team}/access", "team: one of the cluster's"),
    ("DELETE /api/clusters/{name}/teams/{team}/access", "team: one of the cluster's"),
    ("POST /api/clusters/{name}/teams", "instance types of the cluster's groups, each share count or accelerators (not both), the teams' shares within what the groups hold; borrowLimit with LendAndBorrow only"),
    ("POST /api/clusters/{name}/upgrade", "kubernetesVersion: the next minor of the version the cluster runs now; canaryGroup: one of its groups, with software"),
];

/// Operations whose generated requests the server's state refuses, not their schema: what a
/// first request changed (a delete ends what it names, a download or a name is taken once), or
/// what exists only at run time. The stateful run cannot reach past these in every phase.
const REFUSED_BY_STATE: &[(&str, &str)] = &[
    ("DELETE /api/clusters/{name}", "the first delete removes the cluster: later ones find it gone (404) or going (409)"),
    ("POST /api/clusters/{name}/forget", "the first forget drops the record: later ones find nothing (404)"),
    ("DELETE /api/clusters/{name}/deployments/{deployment}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/endpoints/{endpoint}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/instance-groups/{group}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/jobs/{job}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/pools/{pool}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/spaces/{space}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/spaces/{space}/sessions", "aimed at the spare cluster, which has no spaces (404), so demo's sessions stay"),
    ("DELETE /api/clusters/{name}/storage/{claim}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/teams/{team}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("DELETE /api/clusters/{name}/training-jobs/{job}", "aimed at the spare cluster, which has none, so demo's stay for the reads"),
    ("POST /api/clusters/{name}/nodes/{id}/delete", "aimed at the spare cluster, which has no nodes, so demo keeps its own"),
    ("PATCH /api/clusters/{name}/features", "aimed at the spare cluster (no EKS cluster yet: 409), so demo keeps governance on"),
    ("POST /api/clusters/import", "hyperpodClusterName: a HyperPod cluster of the account, under a name not yet recorded"),
    ("POST /api/clusters/{name}/models", "a model and revision is downloaded once: the same again is a 409 naming the first download"),
    ("POST /api/clusters/{name}/pools", "poolName: not a name the cluster's deployments or pools already have"),
    ("POST /api/clusters/{name}/pools/{pool}/assign", "pod: one of the pool's pods, named at run time; model: a deployment served from the pool"),
    ("DELETE /api/admins/{arn}", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("DELETE /api/session", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("DELETE /api/session/agent-tokens/{id}", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("GET /api/admins", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("GET /api/session/agent-tokens", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("POST /api/admins", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("POST /api/session", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("POST /api/session/agent-tokens", "the fuzzed server is single-user: a person's routes answer 409 identities-off (tests/api/access.rs runs them with identities on)"),
    ("POST /api/clusters/{name}/spaces/{space}/stop", "a stop while the fuzzer's previous stop or start is still being applied is refused naming that operation (409); stopped already is a 200"),
    ("POST /api/clusters/{name}/spaces/{space}/open", "a space opens only while it runs: the fuzzer's own stop leaves it stopped (409)"),
    ("POST /api/clusters/{name}/spaces/{space}/connections", "only while it runs, as open; and web-ui only where the add-on's web access is set up, which the sandbox's is not (409)"),
    ("POST /api/clusters/{name}/pools/{pool}/unassign", "pod: one of the pool's pods, named at run time"),
    ("POST /api/operations/{id}/cancel", "the operation named has finished: there is nothing left to cancel (409)"),
    ("POST /api/operations/{id}/retry", "the operation named succeeded: only a failed or cancelled one is retried (409)"),
];

/// The fuzzer's configuration for the operations that may reject generated data for a reason
/// listed above; any other operation that rejects what its schema allows fails the run.
/// (schemathesis 4.10 decides per operation whether to look at 4xx answers at all, then shows
/// either warning by the project's setting: excusing the mismatch excuses missing data too.)
fn mismatch_config() -> String {
    let mut out = String::from("[warnings]\nfail-on = [\"validation_mismatch\"]\n");
    for (op, _) in BEYOND_THE_SCHEMA.iter().chain(REFUSED_BY_STATE) {
        out.push_str(&format!(
            "\n[[operations]]\ninclude-name = \"{op}\"\nwarnings = [\"missing_auth\", \"missing_deserializer\", \"unused_openapi_auth\"]\n"
        ));
    }
    out
}

/// What the schema allows, the server accepts: schemathesis's positive-data check, whose
/// only findings are the operations above (each with its reason), so a validator stricter
/// than its schema anywhere else fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_schema_allows_the_server_accepts() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    // Governed, so the policy and team validators answer rather than the feature's 409.
    assert_eq!(
        toggle(&app, "taskGovernance", true).await["state"],
        "succeeded"
    );
    let out = schemathesis(
        &app,
        "positive_data_acceptance",
        &["--phases", "coverage,fuzzing"],
        "",
    )
    .await;
    let report = String::from_utf8_lossy(&out.stdout);
    // It ran to its summary, over both phases (a finding exits 1, anything else is broken).
    assert!(matches!(out.status.code(), Some(0 | 1)), "{report}");
    for phase in ["Coverage", "Fuzzing"] {
        assert!(
            report.contains(&format!("✅ {phase}")) || report.contains(&format!("❌ {phase}")),
            "the {phase} phase ran:\n{report}"
        );
    }
    let failing: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("___") && l.ends_with("___"))
        .map(|l| l.trim_matches('_').trim())
        .collect();
    // Each finding sits in its operation's section: no findings without sections, nor more
    // sections than findings.
    let counted: usize = report
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("❌ API rejected schema-compliant request:")
        })
        .map_or(0, |n| n.trim().parse().unwrap_or(usize::MAX));
    assert!(
        failing.len() <= counted && failing.is_empty() == (counted == 0),
        "{} sections for {counted} findings:\n{report}",
        failing.len()
    );
    let unexplained: Vec<&&str> = failing
        .iter()
        .filter(|op| !BEYOND_THE_SCHEMA.iter().any(|(o, _)| o == *op))
        .collect();
    assert!(
        unexplained.is_empty(),
        "these operations refuse requests their schema allows: declare the rule in the schema, \
         or say in BEYOND_THE_SCHEMA why it cannot be: {unexplained:?}\n{report}"
    );
}

/// A server whose `demo` cluster holds one of everything a path can name, and the values that
/// name them: an existing cluster, team, training job, endpoint, pool, deployment, space, claim, group,
/// node, operation and MLflow app. Operations that end what they name (`DELETE`, forget, a node's
/// removal, the features toggle that could turn governance off) get their own targets, so the
/// rest keep finding theirs whatever order the fuzzer takes.
pub(crate) async fn populated_app() -> (TestApp, String) {
    let app = spawn_app().await;
    // Four GPUs: team-a's one for its job; the serving team's three for the endpoint, pool and
    // deployment, which it lends to no one, so nothing the fuzzer submits as team-a (at any
    // priority) takes them.
    let mut cluster = pipeline_body();
    cluster["instanceCount"] = json!(4);
    let pipeline = app.start("/api/pipelines", &cluster).await;
    assert_eq!(app.wait_terminal(&pipeline).await["state"], "succeeded");
    let r = app
        .client
        .patch(app.url("/api/clusters/demo/features"))
        .json(&json!({"taskGovernance": true, "trainingOperator": true, "fsxCsi": true, "inferenceOperator": true,
                     "ebsCsi": true, "spaces": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let features: Value = r.json().await.unwrap();
    for (key, f) in features["features"].as_object().unwrap() {
        let op = app.wait_terminal(f["operationId"].as_str().unwrap()).await;
        assert_eq!(op["state"], "succeeded", "{key}");
    }
    let sage = "lmsysorg/sglang:v0.5.8";
    let fixture = [
        ("/api/mlflow", json!({"cluster": "demo"})),
        (
            "/api/clusters/demo/teams",
            json!({"teamName": "team-a", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]}),
        ),
        (
            "/api/clusters/demo/teams",
            json!({"teamName": "serving", "sharing": "DontLend", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 3}]}),
        ),
        (
            "/api/clusters/demo/training-jobs",
            json!({"jobName": "sft", "team": "team-a", "recipe": "llama-factory",
            "instanceType": "ml.g5.8xlarge", "nodeCount": 1, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca"}),
        ),
        (
            "/api/clusters/demo/endpoints",
            json!({"endpointName": "qwen", "team": "serving", "model": "/s3/models/Qwen/Qwen3-8B", "instanceType": "ml.g5.8xlarge"}),
        ),
        (
            "/api/clusters/demo/pools",
            json!({"poolName": "warm", "team": "serving", "image": sage, "size": 1}),
        ),
        (
            "/api/clusters/demo/deployments",
            json!({"deploymentName": "chat", "team": "serving", "image": sage}),
        ),
        (
            "/api/clusters/demo/spaces",
            json!({"spaceName": "lab", "team": "team-a", "instanceType": "ml.g5.8xlarge", "idleShutdownMinutes": 0}),
        ),
        ("/api/clusters", json!({"name": "spare"})),
        ("/api/clusters", json!({"name": "spare-deleted"})),
        ("/api/clusters", json!({"name": "spare-forgotten"})),
    ];
    for (path, body) in &fixture {
        let id = app.start(path, body).await;
        let op = app.wait_terminal(&id).await;
        // A training job's operation follows the job past its start: running is far enough.
        assert!(
            matches!(op["state"].as_str(), Some("succeeded" | "running")),
            "{path}: {op}"
        );
    }
    // The models the invoke operations name answer before the fuzzer starts.
    for path in [
        "/api/clusters/demo/deployments/chat/invoke",
        "/api/clusters/demo/endpoints/qwen/invoke",
    ] {
        let r = app.post(path, &json!({"prompt": "hello"})).await;
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // Reads look at the first node; reboot and replace act on the second, so a replacement
    // (new hardware, a new id) never leaves the reads an id that is gone.
    let nodes = node_ids(&app).await;
    let (node, acted_on) = (nodes[0].clone(), nodes[1].clone());
    let run = app.json("/api/mlflow/runs?experiment=sft").await[0]["runId"]
        .as_str()
        .expect("the job's MLflow run")
        .to_string();
    let config = format!(
        r#"[parameters]
"path.name" = "demo"
"path.team" = "team-a"
"path.job" = "sft"
"path.endpoint" = "qwen"
"path.deployment" = "chat"
"path.pool" = "warm"
"path.space" = "lab"
"path.claim" = "s3-claim"
"path.group" = "workers"
"path.id" = "{node}"
"path.kind" = "pytorch"
"path.workload" = "sft"
"path.run" = "{run}"
"query.zone" = "us-west-2a"
"query.experiment" = "sft"

[[operations]]
include-path-regex = "^/api/operations/"
parameters = {{ "path.id" = "{pipeline}" }}

# Previewed, so the node is still there for every request: a replaced node has a new id, and
# a reboot keeps the node busy.
[[operations]]
include-name-regex = "^POST /api/clusters/\\{{name\\}}/nodes/\\{{id\\}}/(reboot|replace)$"
parameters = {{ "path.id" = "{acted_on}", "query.dryRun" = "true" }}

[[operations]]
include-name-regex = "^(DELETE /api/clusters/\\{{name\\}}/|POST /api/clusters/\\{{name\\}}/nodes/\\{{id\\}}/delete$|PATCH /api/clusters/\\{{name\\}}/features$)"
parameters = {{ "path.name" = "spare" }}

[[operations]]
include-name = "DELETE /api/clusters/{{name}}"
parameters = {{ "path.name" = "spare-deleted" }}

[[operations]]
include-name = "POST /api/clusters/{{name}}/forget"
parameters = {{ "path.name" = "spare-forgotten" }}
"#
    );
    (app, config)
}

/// The operations schemathesis names under a warning of its summary (`title` is the warning's
/// first words, e.g. "Missing test data").
fn warned<'a>(report: &'a str, title: &str) -> Vec<&'a str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with("  - "))
        .map(|l| l.trim_start_matches("  - ").trim())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fuzzer_finds_the_server_true_to_its_openapi_document() {
    // State to find: a cluster with its stages, nodes, dependencies, storage and workloads.
    let (app, config) = populated_app().await;
    // The warnings the run fails on, and the operations excused from one of them (with reasons).
    let config = format!("{}\n{config}", mismatch_config());
    let before = requests_served(&app).await;
    let out = schemathesis(
        &app,
        "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        &[],
        &config,
    )
    .await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found the document and the wire disagreeing:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("No issues found"), "{report}");
    for phase in ["Coverage", "Fuzzing", "Stateful"] {
        assert!(
            report.contains(&format!("✅ {phase}")),
            "the {phase} phase ran and passed:\n{report}"
        );
    }
    // No operation rejects most of what its schema allows, but for the reasons listed.
    assert!(!report.contains("Schema validation mismatch"), "{report}");
    // Every read reaches past the edge: given names that exist, no GET answers only 404s.
    let reads: Vec<&str> = warned(&report, "Missing test data")
        .into_iter()
        .filter(|op| op.starts_with("GET "))
        .collect();
    assert!(reads.is_empty(), "Missing test data: {reads:?}\n{report}");
    let served = requests_served(&app).await - before;
    assert!(
        served >= 1000.0,
        "at least 1,000 generated requests reached the server, not {served}"
    );
}
