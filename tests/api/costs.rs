//! Cost allocation in the sandbox: a team's deployment is billed to the team (and to its group
//! and workload) at its node's price per GPU, the other node's GPU shows as idle, a CSV carries
//! the same rows, bad queries are refused clearly, and the history survives a kill -9.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

const CHAT: &str = "/api/clusters/demo/deployments";

fn deployment(name: &str, team: Option<&str>) -> Value {
    let mut body = json!({"deploymentName": name, "image": "lmsysorg/sglang:v0.5.8", "replicas": 1,
        "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"]});
    if let Some(team) = team {
        body["team"] = json!(team);
        body["priority"] = json!("inference");
    }
    body
}

async fn start(client: &reqwest::Client, base: &str, path: &str, body: &Value) -> String {
    let r = client
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    r.json::<Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// GPU-hours and USD of one key and kind over the report.
pub(crate) fn share(report: &Value, key: &str, kind: &str) -> (f64, f64) {
    report["totals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == key && t["kind"] == kind)
        .fold((0.0, 0.0), |(h, u), t| {
            (
                h + t["gpuHours"].as_f64().unwrap(),
                u + t["usd"].as_f64().unwrap(),
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_deployment_is_billed_to_its_team_and_the_other_gpu_is_idle() {
    // Two ml.g5.8xlarge (one GPU each), shared by team-a and team-b.
    let app = crate::placement::shared_cluster(&[]).await;
    let op = app
        .wait_terminal(&app.start(CHAT, &deployment("chat", Some("team-a"))).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    // Each read samples first: the second credits the time since the first.
    app.json("/api/costs?cluster=demo&by=team").await;
    let r = app.json("/api/costs?cluster=demo&by=team").await;
    let (team_a, team_a_usd) = share(&r, "team-a", "used");
    let (idle, idle_usd) = share(&r, "", "idle");
    assert!(team_a > 0.0, "{r}");
    // One GPU held, one idle, for the same sampled time.
    assert!((team_a - idle).abs() < 1e-9, "{r}");
    assert_eq!(share(&r, "team-b", "used"), (0.0, 0.0), "{r}");
    // Priced per GPU at the node's hourly price, from the account's Price List (the simulated
    // one answers the dated table's figures under the usage type AWS bills them on).
    let price = r["prices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["instanceType"] == "ml.g5.8xlarge")
        .expect("the nodes' price")
        .clone();
    let hourly = price["hourlyUsd"].as_f64().unwrap();
    assert_eq!(
        (price["source"].as_str(), r["estimate"].as_bool()),
        (Some("price-list"), Some(false)),
        "{r}"
    );
    assert_eq!(price["usageType"], "USW2-Cluster:ml.g5.8xlarge", "{r}");
    assert_eq!(price["region"], "us-west-2", "{r}");
    assert!(r.get("priceListUnavailable").is_none(), "{r}");
    assert!((team_a_usd - team_a * hourly).abs() < 1e-9, "{r}");
    assert!(
        (r["idleUsd"].as_f64().unwrap() - idle_usd).abs() < 1e-9,
        "{r}"
    );
    // Every share adds up to the nodes' instance-hours at their price.
    let total = r["totalUsd"].as_f64().unwrap();
    let hours = r["instanceHours"].as_f64().unwrap();
    assert!(
        hours > 0.0 && (total - hours * hourly).abs() < 1e-6 * total.max(1.0),
        "{r}"
    );
    assert!(
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["day"] == r["until"].as_str().unwrap()[..10]),
        "{r}"
    );

    // By workload, the deployment; by group, the nodes' group holds it all.
    let r = app.json("/api/costs?cluster=demo&by=job").await;
    assert!(share(&r, "deployment/chat", "used").0 > 0.0, "{r}");
    let r = app.json("/api/costs?cluster=demo&by=endpoint").await;
    assert!(share(&r, "deployment/chat", "used").0 > 0.0, "{r}");
    let r = app.json("/api/costs?cluster=demo").await;
    assert_eq!(r["by"], "group");
    let groups: std::collections::BTreeSet<&str> = r["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert!(!groups.is_empty() && !groups.contains(""), "{r}");

    // The same rows as CSV.
    let res = app.get("/api/costs?cluster=demo&by=job&format=csv").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    assert!(res.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("demo-costs-"));
    let csv = res.text().await.unwrap();
    assert!(csv.starts_with("day,key,kind,usd,gpu_hours\n"), "{csv}");
    assert!(
        csv.lines().any(|l| l.contains("\"deployment/chat\",used,")),
        "{csv}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_query_that_cannot_be_answered_says_which_field_and_why() {
    let app = spawn_app().await;
    for (query, status, field) in [
        ("by=team", StatusCode::UNPROCESSABLE_ENTITY, "query"),
        (
            "cluster=demo&by=colour",
            StatusCode::UNPROCESSABLE_ENTITY,
            "query",
        ),
        (
            "cluster=demo&since=yesterday",
            StatusCode::UNPROCESSABLE_ENTITY,
            "since",
        ),
        (
            "cluster=demo&since=2999-01-01",
            StatusCode::UNPROCESSABLE_ENTITY,
            "since",
        ),
        ("cluster=Demo", StatusCode::UNPROCESSABLE_ENTITY, "cluster"),
        (
            "cluster=demo&format=xml",
            StatusCode::UNPROCESSABLE_ENTITY,
            "query",
        ),
    ] {
        let p = problem(app.get(&format!("/api/costs?{query}")).await, status).await;
        assert_eq!(p["field"], field, "{query}: {p}");
    }
    let p = problem(
        app.get("/api/costs?cluster=nowhere").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert!(p["hint"].to_string().contains("/api/clusters"), "{p}");
}

/// Node lifetimes and GPU-seconds are stored as they happen: a server killed with -9 and
/// started again on the same data directory reports at least what it had before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_history_survives_a_kill_9() {
    let (_dir, data) = temp_dir();
    let client = reqwest::Client::new();
    let port = free_port();
    let server = Server::start(&data, port, 6000.0);
    server.ready(&client).await;
    let base = server.base.clone();
    let op = start(&client, &base, "/api/pipelines", &pipeline_body()).await;
    assert_eq!(
        wait_terminal(&client, &base, &op).await["state"],
        "succeeded"
    );
    let op = start(&client, &base, CHAT, &deployment("chat", None)).await;
    assert_eq!(
        wait_terminal(&client, &base, &op).await["state"],
        "succeeded"
    );
    let read = |base: String| {
        let client = client.clone();
        async move {
            let r: Value = client
                .get(format!("{base}/api/costs?cluster=demo&by=job"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r
        }
    };
    read(base.clone()).await;
    let before = read(base.clone()).await;
    let held = share(&before, "deployment/chat", "used").0;
    assert!(held > 0.0, "{before}");
    server.kill9();

    let server = Server::start(&data, port, 6000.0);
    server.ready(&client).await;
    let after = read(server.base.clone()).await;
    assert!(
        share(&after, "deployment/chat", "used").0 >= held,
        "{after}"
    );
    assert!(
        after["instanceHours"].as_f64().unwrap() >= before["instanceHours"].as_f64().unwrap(),
        "{before}\n{after}"
    );
}

/// A group on a training plan is priced at the plan's up-front fee over its instance-hours
/// (the sandbox's plan: $10,570.56 for two ml.p5.48xlarge for a week), the others from the
/// Price List, side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_training_plans_group_is_priced_at_the_plan() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/sandbox-p5-week";
    let add = json!({"instanceGroupName": "reserved", "instanceType": "ml.p5.48xlarge",
                     "instanceCount": 1, "capacityType": "training-plan",
                     "trainingPlanArn": plan, "networkInterface": "efa-only"});
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/instance-groups", &add).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let r = app.json("/api/costs?cluster=demo").await;
    let prices = r["prices"].as_array().unwrap();
    let planned = prices
        .iter()
        .find(|p| p["source"] == "training-plan")
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(planned["trainingPlan"], plan, "{r}");
    let hourly = planned["hourlyUsd"].as_f64().unwrap();
    assert!((hourly - 10570.56 / (168.0 * 2.0)).abs() < 1e-9, "{r}");
    assert!(
        prices
            .iter()
            .any(|p| p["instanceType"] == "ml.g5.8xlarge" && p["source"] == "price-list"),
        "{r}"
    );
    let reserved: f64 = r["totals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "reserved")
        .map(|t| t["usd"].as_f64().unwrap())
        .sum();
    assert!(reserved > 0.0, "{r}");
}

/// When the Price List cannot be read, the report still answers: every on-demand price from the
/// dated table, marked an estimate, with the reason — and the failure is remembered for a few
/// minutes instead of being waited on by every report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_price_list_the_report_says_its_prices_are_estimates_and_why() {
    let app = spawn_app_with(Opts {
        faults: Some("pricing:GetProducts=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    // One refusal only: a second report that asked again would get the Price List's prices.
    for _ in 0..2 {
        let r = app.json("/api/costs?cluster=demo").await;
        assert_eq!(r["estimate"], true, "{r}");
        let why = r["priceListUnavailable"].as_str().unwrap_or_default();
        assert!(
            why.contains("could not be read") && why.contains("Injected"),
            "{r}"
        );
        let prices = r["prices"].as_array().unwrap();
        assert!(!prices.is_empty(), "{r}");
        for p in prices {
            assert_eq!(
                (p["source"].as_str(), p["asOf"].as_str()),
                (Some("estimate"), Some("2025-06-01")),
                "{r}"
            );
            assert!(p["hourlyUsd"].as_f64().is_some_and(|usd| usd > 0.0), "{r}");
        }
    }
}
