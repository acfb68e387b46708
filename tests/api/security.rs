//! The edge: Host/Origin guard against DNS rebinding, and the token rule.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_and_origins_are_refused() {
    let app = spawn_app_with(Opts {
        allowed_hosts: vec!["ops.internal:8443".into()],
        ..Default::default()
    })
    .await;
    let r = app
        .get_with("/api/clusters", "host", "evil.example:80")
        .await;
    assert_eq!(
        problem(r, StatusCode::FORBIDDEN).await["type"],
        "urn:instantstart:problem:forbidden-host"
    );
    let r = app
        .get_with("/api/clusters", "origin", "http://evil.example")
        .await;
    assert_eq!(
        problem(r, StatusCode::FORBIDDEN).await["type"],
        "urn:instantstart:problem:forbidden-origin"
    );
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .header("origin", "http://evil.example")
        .json(&pipeline_body())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        app.json("/api/operations").await,
        serde_json::json!([]),
        "refused before any effect"
    );

    let own_origin = app.base.replace("127.0.0.1", "localhost");
    let r = app.get_with("/api/clusters", "origin", own_origin).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = app
        .get_with("/api/clusters", "host", "ops.internal:8443")
        .await;
    assert_eq!(r.status(), StatusCode::OK, "allow-listed host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_token_is_required_everywhere_but_healthz() {
    let token = "s3cret-token-0123456789";
    let app = spawn_app_with(Opts {
        token: Some(token),
        ..Default::default()
    })
    .await;
    let r = app.get("/api/clusters").await;
    assert_eq!(
        problem(r, StatusCode::UNAUTHORIZED).await["type"],
        "urn:instantstart:problem:unauthorized"
    );
    let r = app
        .client
        .get(app.url("/api/clusters"))
        .bearer_auth("wrong-token-000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = app
        .client
        .get(app.url("/api/clusters"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_server_refuses_a_non_loopback_address_without_a_token() {
    let (_guard, dir) = temp_dir();
    let mut config = instantstart::config::ServeConfig::sandbox(dir);
    config.bind = "0.0.0.0:0".parse().unwrap();
    let err = instantstart::build_app(config)
        .await
        .err()
        .expect("must refuse");
    assert!(err.to_string().contains("INSTANTSTART_TOKEN"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_aws_the_server_starts_and_says_why_on_healthz() {
    let (_guard, dir) = temp_dir();
    let client = reqwest::Client::new();
    let server = Server::spawn(&dir, free_port(), &["--cloud", "aws"], &[]);
    server.ready(&client).await;
    let health: serde_json::Value = client
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "degraded");
    assert_eq!(health["cloud"], "aws");
    assert!(
        health["warning"]
            .as_str()
            .unwrap()
            .contains("--cloud sandbox"),
        "{health}"
    );
    let r = client
        .get(format!("{}/api/aws/zones", server.base))
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::BAD_GATEWAY).await;
    assert_eq!(p["cloud"]["code"], "AwsUnavailable");
    // The text log, written to a file: plain text, the 502 there as a warning; the health probes
    // (successful reads) not at all at the default level.
    let text = logged(&server.log, |t| {
        t.lines()
            .any(|l| l.contains("WARN") && l.contains("status=502"))
    })
    .await;
    assert!(!text.contains('\u{1b}'), "colour codes in a file:\n{text}");
    assert!(!text.contains("route=/healthz"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_probe_succeeds_only_against_a_healthy_server() {
    let (_guard, dir) = temp_dir();
    let port = free_port();
    let client = reqwest::Client::new();
    let server = Server::start(&dir, port, 60.0);
    server.ready(&client).await;
    let probe = |port: u16| {
        std::process::Command::new(env!("CARGO_BIN_EXE_instantstart"))
            .args(["probe", "--bind", &format!("127.0.0.1:{port}")])
            .env_remove("INSTANTSTART_BIND")
            .output()
            .expect("run probe")
    };
    assert!(probe(port).status.success());
    let closed = probe(free_port());
    assert!(!closed.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_a_request_id_and_a_plain_one_is_kept() {
    let app = spawn_app().await;
    let r = app.get("/api/clusters").await;
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let r = app
        .get_with("/api/clusters", "x-request-id", "trace-123")
        .await;
    assert_eq!(r.headers()["x-request-id"], "trace-123");
    // Anything else (too long, or not plain) is replaced, so logs never carry it.
    let r = app
        .get_with("/api/clusters", "x-request-id", "a b\"c")
        .await;
    assert_ne!(r.headers()["x-request-id"], "a b\"c");
    // Problems carry one too.
    let r = app.get("/api/clusters/Bad_Name").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.headers().contains_key("x-request-id"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_security_headers_whatever_path_it_took() {
    let app = spawn_app().await;
    let check = |what: &str, r: &reqwest::Response, traced: bool| {
        let h = r.headers();
        assert!(
            h.get("content-security-policy")
                .is_some_and(|v| v.to_str().unwrap().contains("frame-ancestors 'none'")),
            "{what}: {h:?}"
        );
        assert_eq!(
            h.get("x-content-type-options").unwrap(),
            "nosniff",
            "{what}"
        );
        assert_eq!(h.get("referrer-policy").unwrap(), "no-referrer", "{what}");
        assert_eq!(h.get("x-instantstart-cloud").unwrap(), "sandbox", "{what}");
        assert_eq!(h.contains_key("x-request-id"), traced, "{what}: {h:?}");
    };
    // A read with no body (answered without the audit), the health probe.
    let r = app.get("/api/clusters").await;
    assert_eq!(r.status(), StatusCode::OK);
    check("a read", &r, true);
    let r = app.get("/healthz").await;
    assert_eq!(r.status(), StatusCode::OK);
    check("the probe", &r, true);
    // A change with a body (read first, audited), refused by its handler.
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .json(&{
            let mut body = pipeline_body();
            body["name"] = "Bad_Name".into();
            body
        })
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    check("a refused change", &r, true);
    // Refused at the edge, and a path no route matches: no route, no request id.
    let r = app
        .get_with("/api/clusters", "origin", "http://evil.example")
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    check("an edge refusal", &r, false);
    let r = app.get("/api/no-such-thing").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    check("an unknown route", &r, false);
}

/// The server's log once `ready` holds of it (its lines are written by a thread of their own),
/// for at most ten seconds; then as it is, for the assertions to say what is missing.
async fn logged(path: &std::path::Path, ready: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if ready(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_id_and_never_the_token() {
    const TOKEN: &str = "s3cret-token-for-the-log-test";
    let (_guard, dir) = temp_dir();
    let port = free_port();
    let client = reqwest::Client::new();
    let server = Server::spawn(
        &dir,
        port,
        &["--cloud", "sandbox", "--log-format", "json"],
        &[("INSTANTSTART_TOKEN", TOKEN)],
    );
    server.ready(&client).await;
    // A read that succeeds is logged at debug only; a refused one at info, with its id.
    let r = client
        .get(format!("{}/api/clusters", server.base))
        .bearer_auth(TOKEN)
        .header("x-request-id", "log-test-0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = client
        .get(format!("{}/api/clusters/Bad_Name", server.base))
        .bearer_auth(TOKEN)
        .header("x-request-id", "log-test-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A refused token and a body that carries it are answered; no line holds the token.
    let r = client
        .get(format!("{}/api/clusters", server.base))
        .bearer_auth(format!("{TOKEN}-wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = client
        .post(format!("{}/api/clusters/demo/deployments", server.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"hfToken": TOKEN}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error());

    // Lines are written by the server's log thread as requests finish: read once it has.
    let text = logged(&dir.join(format!("server-{port}.log")), |t| {
        t.contains("log-test-1") && t.contains("/api/clusters/{name}/deployments")
    })
    .await;
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let finished = lines
        .iter()
        .find(|l| {
            l["fields"]["message"] == "request finished" && l["span"]["request_id"] == "log-test-1"
        })
        .unwrap_or_else(|| panic!("the request's line, with its id:\n{text}"));
    assert_eq!(finished["span"]["route"], "/api/clusters/{name}");
    assert_eq!(finished["fields"]["status"], 422);
    assert_eq!(finished["level"], "INFO");
    assert!(
        !text.contains("log-test-0"),
        "a successful read is not logged at the default level:\n{text}"
    );
    // Written for a file, not a terminal: no colour codes.
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(!text.contains(TOKEN), "the token is in a log line:\n{text}");
}

/// Slowloris and a connection flood, on loopback: clients that send part of a request head and
/// stop do not keep the server from answering others, and their connections are closed once
/// the head's deadline passes; a connection past the cap is closed at once, and the server
/// answers again as soon as the deadline has freed the held ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_flooding_clients_are_cut_off_and_others_still_answered() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = Duration::from_millis(1500);
    let app = spawn_app_with(Opts {
        limits: Some(instantstart::config::ConnLimits {
            max_connections: 96,
            header_timeout: deadline,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let connect = || tokio::net::TcpStream::connect(addr.clone());
    // Whether the server closed the connection within `within` (a read answers end of stream).
    async fn closed(s: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(within, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                // A 408 or another answer before the close: keep reading to the end.
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    let mut slow = Vec::new();
    for _ in 0..64 {
        let mut s = connect().await.unwrap();
        s.write_all(b"GET /api/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    let started = Instant::now();
    let r = app.get("/api/clusters").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(started.elapsed() < deadline, "answered while 64 heads hang");
    for s in &mut slow {
        assert!(
            closed(s, deadline * 4).await,
            "a head left unfinished is closed after its deadline"
        );
    }

    // A flood to the cap: the next connection is closed at once, before any deadline.
    let mut held = Vec::new();
    for _ in 0..96 {
        held.push(connect().await.unwrap());
    }
    let mut extra = connect().await.unwrap();
    assert!(
        closed(&mut extra, deadline / 2).await,
        "a connection past the cap is closed at once"
    );
    // Once the deadline frees the held ones, others are answered again.
    let mut answered = false;
    for _ in 0..50 {
        if let Ok(r) = reqwest::Client::new()
            .get(app.url("/api/clusters"))
            .send()
            .await
        {
            answered = r.status() == StatusCode::OK;
            if answered {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        answered,
        "the server answers once the held connections are cut off"
    );
    drop(held);
}

/// What a client holds open is capped server-wide: event streams past the cap are refused
/// before the upgrade (and a freed place is taken again), a long-poll past the waiters' cap is
/// answered at once instead of held, and an MCP session past its cap is refused before one is
/// made (ending one frees its place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_long_polls_and_mcp_sessions_are_capped() {
    use std::time::{Duration, Instant};
    let app = spawn_app_with(Opts {
        limits: Some(instantstart::config::ConnLimits {
            max_event_streams: 2,
            max_waiters: 1,
            max_mcp_sessions: 2,
            ..Default::default()
        }),
        // Simulated time all but stands still: the pipeline sits in one phase.
        time_scale: Some(0.001),
        ..Default::default()
    })
    .await;

    let a = ws_open(&app.base, "/api/events", "instantstart.events")
        .await
        .unwrap();
    let _b = ws_open(&app.base, "/api/events", "instantstart.events")
        .await
        .unwrap();
    let Err((status, p)) = ws_open(&app.base, "/api/events", "instantstart.events").await else {
        panic!("a third event stream was opened past the cap of two");
    };
    assert_eq!(status, 429, "{p}");
    assert_eq!(p["type"], "urn:instantstart:problem:too-many-event-streams");
    drop(a);
    let mut reopened = false;
    for _ in 0..50 {
        if ws_open(&app.base, "/api/events", "instantstart.events")
            .await
            .is_ok()
        {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reopened, "a closed stream frees its place");

    // Long-polls: one waits its full time; the second, past the cap, answers at once.
    let r = app.post("/api/pipelines", &pipeline_body()).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let id = r.json::<Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let poll = format!("/api/operations/{id}?wait=3");
    // Until the pipeline sits in a phase that waits on simulated time: a poll then waits.
    let mut settled = false;
    for _ in 0..20 {
        let started = Instant::now();
        assert_eq!(app.get(&poll).await.status(), StatusCode::OK);
        if started.elapsed() >= Duration::from_millis(2900) {
            settled = true;
            break;
        }
    }
    assert!(settled, "the pipeline never settled in a waiting phase");
    let held = {
        let client = app.client.clone();
        let url = app.url(&poll);
        tokio::spawn(async move {
            let started = Instant::now();
            let r = client.get(url).send().await.unwrap();
            (r.status(), started.elapsed())
        })
    };
    // The first poll has taken the one place once its answer is still pending.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let r = app.get(&poll).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "a long-poll past the cap is answered at once, not held ({:?})",
        started.elapsed()
    );
    let (status, waited) = held.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(
        waited >= Duration::from_secs(2),
        "the first poll waited ({waited:?})"
    );

    // MCP sessions.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let open = || {
        app.client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
    };
    let first = open().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let session = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(open().await.unwrap().status(), StatusCode::OK);
    let refused = open().await.unwrap();
    assert_eq!(
        problem(refused, StatusCode::TOO_MANY_REQUESTS).await["type"],
        "urn:instantstart:problem:too-many-mcp-sessions"
    );
    let ended = app
        .client
        .delete(app.url("/mcp"))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::OK);
    let mut again = false;
    for _ in 0..50 {
        if open().await.unwrap().status() == StatusCode::OK {
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(again, "an ended session frees its place");
}
