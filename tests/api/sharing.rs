//! Two teams share a cluster through the sandbox's Kueue: one borrows the other's idle GPUs,
//! the lender submits and takes its quota back (the borrower's lower-priority job is preempted
//! and says by which job), and the borrower resumes when the lender's job is gone — each state
//! read over REST from the training view and the teams' usage.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::teams::{policy, send, until_done, POLICY, TEAMS};

const JOBS: &str = "/api/clusters/demo/training-jobs";

/// Polls `path` until `ready` holds of it (what an operator watching the page does), for at
/// most a minute; the last answer is in the failure. A job just submitted is not there until
/// its operation applies it: a 404 until then is waited out.
pub(crate) async fn until(app: &TestApp, path: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = app.get(path).await;
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(
            status == StatusCode::OK || status == StatusCode::NOT_FOUND,
            "{path}: {status} {v}"
        );
        if status == StatusCode::OK && ready(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{path} never got there: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn usage(teams: &Value, team: &str) -> Value {
    let t = teams["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == team)
        .unwrap_or_else(|| panic!("no {team} in {teams}"));
    let f = &t["usage"]["flavors"][0];
    json!([
        f["inUse"],
        f["borrowed"],
        f["lent"],
        t["usage"]["pendingWorkloads"]
    ])
}

/// A long job (ten million steps: it runs for the whole scenario) as `team` at `priority`.
fn job(name: &str, team: &str, priority: &str, nodes: u64) -> Value {
    json!({"jobName": name, "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge", "nodeCount": nodes,
           "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
           "team": team, "priority": priority, "args": ["--max_steps=10000000"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_borrower_is_preempted_when_the_lender_reclaims_and_resumes_after() {
    use crate::training::{enable_training_operator, submit, training_cluster};
    // Two ml.g5.8xlarge nodes, one GPU each: one per team.
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;
    assert_eq!(
        toggle(&app, "taskGovernance", true).await["state"],
        "succeeded"
    );
    let (status, body) = send(&app, reqwest::Method::PUT, POLICY, &policy()).await;
    assert_eq!(until_done(&app, status, &body).await["state"], "succeeded");
    for (team, sharing) in [("team-a", "LendAndBorrow"), ("team-b", "Lend")] {
        let mut body = json!({"teamName": team, "sharing": sharing,
                              "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]});
        if sharing == "LendAndBorrow" {
            body["borrowLimit"] = json!(100);
        }
        let op = app.wait_terminal(&app.start(TEAMS, &body).await).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    let teams = app.json(TEAMS).await;
    let sharing: Vec<_> = teams["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].clone(), t["sharing"].clone()))
        .collect();
    assert_eq!(
        sharing,
        vec![
            (json!("team-a"), json!("LendAndBorrow")),
            (json!("team-b"), json!("Lend"))
        ],
        "{teams}"
    );

    // team-a runs on two GPUs: its own and team-b's idle one, borrowed.
    let a1_watch = submit(&app, &job("a1", "team-a", "training", 2)).await["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let a1 = until(&app, &format!("{JOBS}/a1"), |j| j["state"] == "running").await;
    assert_eq!(a1["admission"]["state"], "admitted", "{a1}");
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([2.0, 1.0, 0.0, 0]),
        "{teams}"
    );
    assert_eq!(
        usage(&teams, "team-b"),
        json!([0.0, 0.0, 1.0, 0]),
        "{teams}"
    );

    // team-b wants its GPU back: its higher-priority job is admitted at once, team-a's is
    // preempted by reclamation, names the job that took its place, and waits first in line.
    let b1_watch = submit(&app, &job("b1", "team-b", "inference", 1)).await["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let b1 = until(&app, &format!("{JOBS}/b1"), |j| j["state"] == "running").await;
    assert_eq!(b1["admission"]["state"], "admitted", "{b1}");
    let a1 = app.json(&format!("{JOBS}/a1")).await;
    let admission = &a1["admission"];
    assert_eq!(
        (
            a1["state"].as_str(),
            admission["state"].as_str(),
            admission["reason"].as_str(),
            admission["preemptedBy"].as_str(),
            admission["position"].as_u64()
        ),
        (
            Some("pending"),
            Some("preempted"),
            Some("InCohortReclamation"),
            Some("b1"),
            Some(1)
        ),
        "{a1}"
    );
    assert!(
        a1["message"].as_str().unwrap().contains(
            "insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed"
        ),
        "{a1}"
    );
    let logs = app
        .json("/api/clusters/demo/workloads/pytorch/a1/logs")
        .await;
    assert_eq!(
        logs["pods"].as_array().map(Vec::len),
        Some(0),
        "a preempted job has no pods: {logs}"
    );
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([0.0, 0.0, 0.0, 1]),
        "{teams}"
    );
    assert_eq!(
        usage(&teams, "team-b"),
        json!([1.0, 0.0, 0.0, 0]),
        "{teams}"
    );

    // team-b's job is gone (deleted while it runs: the operation following it ends first):
    // team-a's is admitted again and runs, its preemption counted as a restart.
    let op = app.delete_and_wait(&format!("{JOBS}/b1")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.wait_terminal(&b1_watch).await["state"], "cancelled");
    let a1 = until(&app, &format!("{JOBS}/a1"), |j| {
        j["state"] == "running" && j["admission"]["state"] == "admitted"
    })
    .await;
    assert_eq!(a1["restarts"]["count"], 1, "{a1}");
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([2.0, 1.0, 0.0, 0]),
        "{teams}"
    );
    let op = app.delete_and_wait(&format!("{JOBS}/a1")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.wait_terminal(&a1_watch).await["state"], "cancelled");
    problem(app.get(&format!("{JOBS}/a1")).await, StatusCode::NOT_FOUND).await;
}

/// Where a deployment's pods stand with Kueue: `[admitted, pending, preempted]`.
fn pods_admission(view: &Value) -> Value {
    let a = &view["admission"];
    json!([a["admitted"], a["pending"], a["preempted"]])
}

/// A Deployment as a team gets one Kueue Workload per pod: the replicas its team's quota (and
/// what it may borrow) holds run, the rest wait behind their scheduling gate with Kueue's
/// reason; a lender taking its quota back preempts a borrowed replica, and scaling down to
/// what the team holds lets the Deployment finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployments_replicas_beyond_its_teams_quota_wait_behind_kueues_gate() {
    const DEPLOYMENTS: &str = "/api/clusters/demo/deployments";
    const WIDE: &str = "/api/clusters/demo/deployments/wide";
    // One ml.g5.8xlarge GPU per team, each may borrow the other's when idle.
    let app = crate::placement::shared_cluster(&[]).await;
    let body = |name: &str, team: &str, replicas: u64| {
        json!({"deploymentName": name, "image": "lmsysorg/sglang:v0.5.8", "replicas": replicas,
               "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"],
               "team": team, "priority": "inference"})
    };
    let op = app
        .wait_terminal(&app.start(DEPLOYMENTS, &body("wide", "team-a", 3)).await)
        .await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(
        op["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 held by Kueue"),
        "{op}"
    );
    let wide = app.json(WIDE).await;
    assert_eq!(pods_admission(&wide), json!([2, 1, 0]), "{wide}");
    let waiting = &wide["admission"]["waiting"];
    assert_eq!(
        (waiting["state"].as_str(), waiting["position"].as_u64()),
        (Some("pending"), Some(1)),
        "{wide}"
    );
    assert!(
        waiting["message"].as_str().unwrap_or_default().contains(
            "insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed"
        ),
        "{wide}"
    );
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([2.0, 1.0, 0.0, 1]),
        "{teams}"
    );
    assert_eq!(
        usage(&teams, "team-b"),
        json!([0.0, 0.0, 1.0, 0]),
        "{teams}"
    );

    // team-b takes its GPU back: its model runs, one of team-a's replicas is preempted for it.
    let op = app
        .wait_terminal(&app.start(DEPLOYMENTS, &body("mine", "team-b", 1)).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let wide = app.json(WIDE).await;
    assert_eq!(pods_admission(&wide), json!([1, 1, 1]), "{wide}");
    let preempted = &wide["admission"]["waiting"];
    assert_eq!(
        (preempted["state"].as_str(), preempted["reason"].as_str()),
        (Some("preempted"), Some("InCohortReclamation")),
        "{wide}"
    );
    // Kueue names the preemptor's Workload, which is owned by one of team-b's pods.
    assert!(
        preempted["preemptedBy"]
            .as_str()
            .is_some_and(|p| p.starts_with("mine-")),
        "{wide}"
    );

    // Within what team-a holds, every replica is admitted and the Deployment becomes ready.
    let op = app
        .wait_terminal(&app.start(DEPLOYMENTS, &body("wide", "team-a", 1)).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let wide = app.json(WIDE).await;
    assert_eq!(
        (wide["state"].as_str(), pods_admission(&wide)),
        (Some("ready"), json!([1, 0, 0])),
        "{wide}"
    );
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([1.0, 0.0, 0.0, 0]),
        "{teams}"
    );
}

/// A team's managed endpoint: the workers of the operator's Deployment are queued pod by pod
/// too; those beyond what the team holds keep the endpoint in progress, saying so, and the
/// endpoint's view counts its workers' admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoints_workers_beyond_its_teams_quota_are_held_and_say_why() {
    const ENDPOINTS: &str = "/api/clusters/demo/endpoints";
    let app = crate::placement::shared_cluster(&["fsxCsi", "inferenceOperator"]).await;
    let watch = app
        .start(
            ENDPOINTS,
            &json!({"endpointName": "qwen", "model": "/s3/models/Qwen/Qwen3-8B",
                    "instanceType": "ml.g5.8xlarge", "replicas": 3,
                    "team": "team-a", "priority": "inference"}),
        )
        .await;
    // Two GPUs: team-a's and team-b's idle one, borrowed; the third worker waits.
    let qwen = until(&app, &format!("{ENDPOINTS}/qwen"), |e| {
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("held by Kueue"))
    })
    .await;
    assert_eq!(
        (qwen["state"].as_str(), qwen["message"].as_str()),
        (
            Some("DeploymentInProgress"),
            Some("1 of 3 workers held by Kueue until their team's queue admits them")
        ),
        "{qwen}"
    );
    assert_eq!(pods_admission(&qwen), json!([2, 1, 0]), "{qwen}");
    assert!(
        qwen["admission"]["waiting"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge"),
        "{qwen}"
    );
    let listed = app.json(ENDPOINTS).await;
    assert_eq!(listed[0]["admission"], qwen["admission"], "{listed}");
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([2.0, 1.0, 0.0, 1]),
        "{teams}"
    );
    // Waiting for a worker Kueue will not admit is cancelled; scaled to what the team holds,
    // the endpoint completes.
    let r = app
        .post(&format!("/api/operations/{watch}/cancel"), &json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(app.wait_terminal(&watch).await["state"], "cancelled");
    let r = app
        .client
        .patch(app.url(&format!("{ENDPOINTS}/qwen")))
        .json(&json!({"replicas": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let started: Value = r.json().await.unwrap();
    let op = app
        .wait_terminal(started["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let qwen = app.json(&format!("{ENDPOINTS}/qwen")).await;
    assert_eq!(
        (qwen["state"].as_str(), pods_admission(&qwen)),
        (Some("DeploymentComplete"), json!([2, 0, 0])),
        "{qwen}"
    );
    let op = app.delete_and_wait(&format!("{ENDPOINTS}/qwen")).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let teams = app.json(TEAMS).await;
    assert_eq!(
        usage(&teams, "team-a"),
        json!([0.0, 0.0, 0.0, 0]),
        "{teams}"
    );
}

/// A team's space is queued by Kueue like every team workload (the Workspace's queue labels go
/// to its pod): within what the team holds and may borrow it runs, its pod admitted; beyond, it
/// waits saying so; when a teammate's space stops, it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_space_waits_for_kueue_and_starts_when_room_comes_back() {
    const SPACES: &str = "/api/clusters/demo/spaces";
    // team-a holds one GPU and may borrow team-b's idle one.
    let app = crate::placement::shared_cluster(&["ebsCsi", "spaces"]).await;
    let space = |name: &str| {
        json!({"spaceName": name, "instanceType": "ml.g5.8xlarge", "gpus": 1,
               "team": "team-a", "priority": "training", "idleShutdownMinutes": 0})
    };
    for name in ["a1", "a2"] {
        let op = app
            .wait_terminal(&app.start(SPACES, &space(name)).await)
            .await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    let a1 = app.json(&format!("{SPACES}/a1")).await;
    assert_eq!(pods_admission(&a1), json!([1, 0, 0]), "{a1}");
    let a3_watch = app.start(SPACES, &space("a3")).await;
    // The space's view joins two reads (its Workspace and Kueue's Workloads): wait until both
    // say it is held.
    let a3 = until(&app, &format!("{SPACES}/a3"), |s| {
        s["admission"]["pending"].as_u64() == Some(1)
            && s["message"]
                .as_str()
                .is_some_and(|m| m.contains("waiting for Kueue"))
    })
    .await;
    assert_eq!(a3["state"], "starting", "{a3}");
    assert!(
        a3["message"]
            .as_str()
            .unwrap_or_default()
            .contains("waiting for Kueue"),
        "{a3}"
    );
    let r = app.post(&format!("{SPACES}/a1/stop"), &json!({})).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let op = app.wait_terminal(&a3_watch).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let a3 = app.json(&format!("{SPACES}/a3")).await;
    assert_eq!(
        (a3["state"].as_str(), pods_admission(&a3)),
        (Some("running"), json!([1, 0, 0])),
        "{a3}"
    );
}
