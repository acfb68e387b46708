//! GPU utilization in the sandbox: the simulated DCGM series follow what is scheduled — the
//! node holding a deployment's GPU is busy, the other idle; per team, the team's; per pod, the
//! deployment's replica — and a query out of bounds is refused saying which field.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

fn means(u: &Value) -> Vec<(String, f64)> {
    u["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap().to_string(),
                s["mean"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_utilization_follows_what_is_scheduled_per_node_team_and_pod() {
    // Two ml.g5.8xlarge (one GPU each), shared by team-a and team-b.
    let app = crate::placement::shared_cluster(&[]).await;
    let body = json!({"deploymentName": "chat", "image": "lmsysorg/sglang:v0.5.8", "replicas": 1,
        "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"],
        "team": "team-a", "priority": "inference"});
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/deployments", &body).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let u = app.json("/api/clusters/demo/utilization").await;
    assert_eq!(
        (u["available"].as_bool(), u["by"].as_str()),
        (Some(true), Some("node")),
        "{u}"
    );
    let nodes = means(&u);
    assert_eq!(nodes.len(), 2, "{u}");
    let busy: Vec<_> = nodes.iter().filter(|(_, m)| *m >= 70.0).collect();
    let idle: Vec<_> = nodes.iter().filter(|(_, m)| *m == 0.0).collect();
    assert_eq!((busy.len(), idle.len()), (1, 1), "{u}");
    assert!(
        u["series"][0]["points"].as_array().unwrap().len() > 10,
        "{u}"
    );

    let u = app
        .json("/api/clusters/demo/utilization?by=team&minutes=30")
        .await;
    let teams = means(&u);
    assert_eq!(teams.len(), 1, "{u}");
    assert!(teams[0].0 == "team-a" && teams[0].1 >= 70.0, "{u}");

    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=chat")
        .await;
    let pods = means(&u);
    assert!(pods.len() == 1 && pods[0].0.starts_with("chat-"), "{u}");
    assert_eq!(u["stragglers"], json!([]), "{u}");
    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=nothing")
        .await;
    assert_eq!(u["series"], json!([]), "{u}");

    for (query, field) in [
        ("minutes=3", "minutes"),
        ("by=rack", "query"),
        ("workload=Bad_Name", "workload"),
    ] {
        let p = problem(
            app.get(&format!("/api/clusters/demo/utilization?{query}"))
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(p["field"], field, "{query}: {p}");
    }
}
