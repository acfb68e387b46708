//! The audit trail: one record per mutating request, REST and MCP alike, whatever it did, and
//! never a secret in it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

const TOKEN: &str = "audit-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mutating_request_leaves_one_record_with_its_actor_and_never_the_token() {
    let app = spawn_app_with(Opts {
        token: Some(TOKEN),
        ..Default::default()
    })
    .await;
    let send = |method: reqwest::Method, path: &str, actor: Option<&str>, body: Option<Value>| {
        let mut r = app.client.request(method, app.url(path)).bearer_auth(TOKEN);
        if let Some(a) = actor {
            r = r.header("X-InstantStart-Actor", a);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send()
    };
    // A pipeline from the browser (an operation), the active cluster set (no operation), an invalid
    // request (refused), a GET (not audited), then an agent's call over MCP's router.
    let r = send(
        reqwest::Method::POST,
        "/api/pipelines",
        Some("browser"),
        Some(pipeline_body()),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let op = r.json::<Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let r = send(
        reqwest::Method::PUT,
        "/api/active-cluster",
        None,
        Some(json!({"name": "demo"})),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let r = send(
        reqwest::Method::POST,
        "/api/clusters",
        Some("agent"),
        Some(json!({"name": "Bad_Name"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = send(reqwest::Method::GET, "/api/clusters", None, None)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = send(
        reqwest::Method::POST,
        &format!("/api/operations/{op}/cancel"),
        Some("agent"),
        None,
    )
    .await
    .unwrap();
    assert!(
        r.status().is_success() || r.status() == StatusCode::CONFLICT,
        "{}",
        r.status()
    );

    let r = send(reqwest::Method::GET, "/api/audit", None, None)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    assert!(!text.contains(TOKEN), "the token is never recorded");
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    let seen: Vec<(String, String, String, String)> = entries
        .iter()
        .rev()
        .map(|e| {
            (
                e["method"].as_str().unwrap().to_string(),
                e["route"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let cancel_outcome = seen.last().map(|s| s.3.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        vec![
            (
                "POST".into(),
                "/api/pipelines".into(),
                "browser".into(),
                "ok".into()
            ),
            (
                "PUT".into(),
                "/api/active-cluster".into(),
                "api".into(),
                "ok".into()
            ),
            (
                "POST".into(),
                "/api/clusters".into(),
                "agent".into(),
                "refused".into()
            ),
            (
                "POST".into(),
                "/api/operations/{id}/cancel".into(),
                "agent".into(),
                cancel_outcome
            ),
        ],
        "one record per mutating request, in order: {text}"
    );
    for e in &entries {
        assert_eq!(e["principal"], "token");
        assert!(
            e["requestId"].as_str().is_some_and(|id| !id.is_empty()),
            "{e}"
        );
    }
    assert_eq!(
        entries[3]["operationId"],
        op.as_str(),
        "the pipeline names its operation"
    );
    assert_eq!(
        entries[0]["operationId"],
        op.as_str(),
        "the cancel names the one it acted on"
    );

    // Filters and pages: the agent's two, one at a time, each exactly once.
    let r = send(
        reqwest::Method::GET,
        "/api/audit?actor=agent&limit=1",
        None,
        None,
    )
    .await
    .unwrap();
    let link = r.headers()["link"].to_str().unwrap().to_string();
    let first: Vec<Value> = r.json().await.unwrap();
    let next = link
        .trim_start_matches('<')
        .split('>')
        .next()
        .unwrap()
        .to_string();
    let second: Vec<Value> = send(reqwest::Method::GET, &next, None, None)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_ne!(first[0]["id"], second[0]["id"]);
    assert!(first.iter().chain(&second).all(|e| e["actor"] == "agent"));
    let r = send(reqwest::Method::GET, "/api/audit?actor=robot", None, None)
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "actor"
    );

    // Nor in the metrics.
    let metrics = send(reqwest::Method::GET, "/metrics", None, None)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("instantstart_http_requests_total"));
    assert!(!metrics.contains(TOKEN));
}

/// The trail keeps what its retention says: an entry older than `--audit-retention-days` is
/// gone once the server starts, a recent one stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trail_keeps_entries_for_its_retention() {
    let dir = tempfile::tempdir().unwrap();
    let store = instantstart::store::Store::open(dir.path()).await.unwrap();
    for (at, path) in [
        (instantstart::cloud::clock::days_ago(31), "/api/old"),
        (instantstart::cloud::clock::days_ago(29), "/api/recent"),
    ] {
        sqlx::query(
            "INSERT INTO audit (at, actor, principal, method, route, path, status, outcome, request_id)
             VALUES (?, 'api', 'loopback', 'POST', ?, ?, 202, 'ok', 'r')",
        )
        .bind(at)
        .bind(path)
        .bind(path)
        .execute(&store.writer)
        .await
        .unwrap();
    }
    drop(store);
    let mut config = instantstart::config::ServeConfig::sandbox(dir.path().to_path_buf());
    config.audit_retention_days = 30;
    let app = instantstart::build_app(config).await.unwrap();
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run());
    let rows: Value = reqwest::get(format!("{base}/api/audit"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/api/recent"]);
}
