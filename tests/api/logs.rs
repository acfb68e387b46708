//! Workload logs: a snapshot across a job's pods (prefixed by pod and rank, filtered, bounded,
//! refused by field when asked wrongly), and the follow WebSocket — in the sandbox to a job's
//! end, and against the Kubernetes emulator through the real kube-rs adapter: lines arrive live,
//! a new pod joins, the server-wide cap refuses with a problem, and a disconnect closes every
//! upstream log stream.

use std::time::Duration;

use futures::SinkExt as _;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::*;
use crate::training::{enable_training_operator, sft, submit, training_cluster};

/// Opens the follow WebSocket of `path` (`/api/clusters/…/logs/follow?…`) as the UI does.
async fn follow(base: &str, path: &str) -> Result<Ws, (u16, Value)> {
    ws_open(base, path, "instantstart.logs").await
}

/// Messages until one satisfies `until` (returned last).
async fn until(ws: &mut Ws, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    while let Some(m) = ws_next(ws).await {
        let done = until(&m);
        seen.push(m);
        if done {
            return seen;
        }
    }
    panic!("the stream ended first: {seen:?}");
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["type"] == "lines")
        .flat_map(|m| m["lines"].as_array().cloned().unwrap_or_default())
        .map(|l| {
            format!(
                "{}|{}",
                l["pod"].as_str().unwrap(),
                l["text"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_logs_carry_its_ranks_and_the_injected_nccl_timeout_and_follow_to_its_end() {
    let app = training_cluster(Some("k8s:PodFailure=1")).await;
    enable_training_operator(&app).await;
    let accepted = submit(&app, &sft("sft-logs")).await;
    let op = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let logs = "/api/clusters/demo/workloads/pytorch/sft-logs/logs";

    let all = app.json(&format!("{logs}?tail=1000")).await;
    assert_eq!(all["pods"].as_array().unwrap().len(), 2, "{all}");
    assert_eq!(all["pods"][0]["pod"], "sft-logs-pods-0");
    assert_eq!(all["pods"][0]["rank"], "0");
    assert_eq!(all["pods"][1]["phase"], "Succeeded");
    let lines: Vec<&str> = all["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        lines.iter().all(|l| l.starts_with("[sft-logs-pods-")),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("[sft-logs-pods-1 rank 1]") && l.contains("throughput=")));

    // What diagnose-nccl asks for: only the rank that timed out carries the watchdog line.
    let nccl = app
        .json(&format!("{logs}?grep=watchdog%7CNET/OFI%20Request"))
        .await;
    let found: Vec<&str> = nccl["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        found
            .iter()
            .any(|l| l.starts_with("[sft-logs-pods-0 rank 0]")
                && l.contains("Watchdog caught collective operation timeout")),
        "{found:?}"
    );
    assert!(
        found.iter().all(|l| l.starts_with("[sft-logs-pods-0 ")),
        "{found:?}"
    );

    let one = app
        .json(&format!("{logs}?pod=sft-logs-pods-1&tail=3"))
        .await;
    assert_eq!(one["lines"].as_array().unwrap().len(), 3, "{one}");
    assert!(one["lines"][2]
        .as_str()
        .unwrap()
        .contains("training complete"));

    // Asked wrongly: refused by field, with what would have been right.
    let r = app
        .client
        .get(app.url(&format!("{logs}?pod=nope")))
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(p["hint"], json!(["sft-logs-pods-0", "sft-logs-pods-1"]));
    for (query, field) in [
        ("tail=0", "tail"),
        ("since=3d", "since"),
        ("grep=%07", "grep"),
        ("color=red", "query"),
    ] {
        let r = app
            .client
            .get(app.url(&format!("{logs}?{query}")))
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(p["field"], field, "{query}: {p}");
    }
    let r = app
        .client
        .get(app.url("/api/clusters/demo/workloads/pod/sft-logs/logs"))
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(p["field"], "kind");
    let r = app
        .client
        .get(app.url("/api/clusters/demo/workloads/pytorch/other/logs"))
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::NOT_FOUND).await;
    // The follow path without a WebSocket handshake says what it is.
    let r = app
        .client
        .get(app.url(&format!("{logs}/follow")))
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::BAD_REQUEST).await;

    // Following a finished job: each pod joins with its tail, leaves, and the stream ends
    // with the job's outcome.
    let mut ws = follow(&app.base, &format!("{logs}/follow?tail=2"))
        .await
        .unwrap();
    // Once it has sent something, the follow is counted as an open stream.
    let first = ws_next(&mut ws).await.expect("a first message");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let open: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"instantstart_open_streams{kind="log-follow"} "#))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no open log-follow gauge in\n{metrics}"));
    assert!(open >= 1.0, "{open}");
    let mut seen = vec![first.clone()];
    if first["type"] != "end" {
        seen.extend(until(&mut ws, |m| m["type"] == "end").await);
    }
    let joined: Vec<_> = seen
        .iter()
        .filter(|m| m["type"] == "joined")
        .map(|m| m["pod"]["pod"].clone())
        .collect();
    assert_eq!(
        joined,
        vec![json!("sft-logs-pods-0"), json!("sft-logs-pods-1")],
        "{seen:?}"
    );
    assert_eq!(texts(&seen).len(), 4, "{seen:?}");
    assert_eq!(seen.last().unwrap()["reason"], "the job succeeded");
    assert!(ws_next(&mut ws).await.is_none(), "closed after the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ray_jobs_logs_are_read_from_the_pods_kuberay_labels() {
    let app = training_cluster(None).await;
    let accepted = submit(
        &app,
        &json!({"jobName": "rl-logs", "recipe": "verl", "instanceType": "ml.g5.8xlarge", "nodeCount": 2,
                "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/gsm8k"}),
    )
    .await;
    let op = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let job = app.json("/api/clusters/demo/training-jobs/rl-logs").await;
    let all = app
        .json("/api/clusters/demo/workloads/ray/rl-logs/logs?tail=1000")
        .await;
    let pods = all["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 3, "a head and two workers: {all}");
    let ranks: Vec<_> = pods.iter().map(|p| p["rank"].as_str().unwrap()).collect();
    assert_eq!(ranks, ["head", "worker", "worker"], "{all}");
    // Named after the RayCluster KubeRay made for the job, as its pods are.
    assert!(
        pods.iter()
            .all(|p| p["pod"].as_str().unwrap().starts_with("rl-logs-")
                && !p["pod"].as_str().unwrap().starts_with("rl-logs-head")),
        "{all} {job}"
    );
    assert!(!all["lines"].as_array().unwrap().is_empty(), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_log_streams_live_takes_in_new_pods_is_capped_and_closes_upstream_on_disconnect()
{
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (emu, base) = (&p.emu, p.base.clone());
    let post = |path: String, body: Value| async move {
        emu.send(reqwest::Method::POST, &path, body, "application/json")
            .await
    };
    post(
        "/apis/batch/v1/namespaces/default/jobs".into(),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "emu-dl"},
               "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "python"}]}}}}),
    )
    .await;
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": {"job-name": "emu-dl"}},
               "spec": {"containers": [{"name": "main", "image": "python"}]},
               "status": {"phase": "Running"}})
    };
    post("/api/v1/namespaces/default/pods".into(), pod("emu-dl-a")).await;
    let write = |pod: &'static str, lines: Value| {
        post(
            format!("/_emulator/logs/default/{pod}"),
            json!({"lines": lines}),
        )
    };
    write("emu-dl-a", json!(["fetching 1", "fetching 2"])).await;
    let logs = "/api/clusters/demo/workloads/job/emu-dl/logs";

    let snap = get(&p.client, format!("{base}{logs}")).await;
    assert_eq!(
        snap["lines"],
        json!(["[emu-dl-a] fetching 1", "[emu-dl-a] fetching 2"]),
        "{snap}"
    );

    let mut ws = follow(&base, &format!("{logs}/follow?tail=1"))
        .await
        .unwrap();
    let seen = until(&mut ws, |m| m["type"] == "lines").await;
    assert_eq!(seen[0]["type"], "joined", "{seen:?}");
    assert_eq!(texts(&seen), vec!["emu-dl-a|fetching 2"]);
    write("emu-dl-a", json!(["fetching 3"])).await;
    let seen = until(&mut ws, |m| m["type"] == "lines").await;
    assert_eq!(texts(&seen), vec!["emu-dl-a|fetching 3"]);

    // A pod that starts later joins with everything it wrote.
    post("/api/v1/namespaces/default/pods".into(), pod("emu-dl-b")).await;
    write("emu-dl-b", json!(["b says hi"])).await;
    let seen = until(&mut ws, |m| m["type"] == "lines").await;
    assert!(
        seen.iter()
            .any(|m| m["type"] == "joined" && m["pod"]["pod"] == "emu-dl-b"),
        "{seen:?}"
    );
    assert_eq!(texts(&seen), vec!["emu-dl-b|b says hi"]);

    // Pause: nothing arrives; resume: what was written meanwhile does.
    ws.send(Message::Text(r#"{"type":"pause"}"#.into()))
        .await
        .unwrap();
    write("emu-dl-a", json!(["while paused"])).await;
    ws.send(Message::Text(r#"{"type":"resume"}"#.into()))
        .await
        .unwrap();
    let seen = until(&mut ws, |m| m["type"] == "lines").await;
    assert_eq!(texts(&seen), vec!["emu-dl-a|while paused"]);

    let stats = emu.get("/_emulator/stats").await.unwrap();
    assert_eq!(
        stats["logs"]["open"], 2,
        "one upstream stream per pod: {stats}"
    );

    // The server follows one stream at a time here: a second is refused, as a problem.
    let (status, body) = follow(&base, &format!("{logs}/follow"))
        .await
        .err()
        .unwrap();
    assert_eq!(status, 429);
    assert_eq!(
        body["type"], "urn:instantstart:problem:too-many-log-streams",
        "{body}"
    );

    // The client leaves: every upstream stream closes, and the place is free again.
    drop(ws);
    let mut closed = Value::Null;
    for _ in 0..200 {
        closed = emu.get("/_emulator/stats").await.unwrap();
        if closed["logs"]["open"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(closed["logs"], json!({"open": 0, "opened": 2, "closed": 2}));
    let mut again = follow(&base, &format!("{logs}/follow?tail=1&pod=emu-dl-b"))
        .await
        .unwrap();
    let seen = until(&mut again, |m| m["type"] == "lines").await;
    assert_eq!(texts(&seen), vec!["emu-dl-b|b says hi"]);

    // A workload writes one line of 48 MiB: the follow and the snapshot each show it cut at
    // 64 KiB, and the server never holds it whole (its peak memory grows far less than it).
    let before = p.server_peak_kib();
    post(
        "/_emulator/logs/default/emu-dl-b".into(),
        json!({"line_of_bytes": 48 << 20, "lines": ["after the flood"]}),
    )
    .await;
    let seen = until(&mut again, |m| {
        m["type"] == "lines" && m.to_string().contains("after the flood")
    })
    .await;
    let lines = texts(&seen);
    let cut = lines
        .iter()
        .find(|l| l.starts_with("emu-dl-b|zzz"))
        .unwrap_or_else(|| panic!("the long line arrives, cut: {}", lines.len()));
    assert!(
        cut.ends_with("[line cut at 64 KiB]"),
        "{}",
        &cut[cut.len() - 40..]
    );
    assert!(cut.len() < (64 << 10) + 64, "{}", cut.len());
    let snap = get(&p.client, format!("{base}{logs}?pod=emu-dl-b")).await;
    let longest = snap["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap_or_default().len())
        .max()
        .unwrap_or(0);
    assert!(
        longest < (64 << 10) + 64,
        "snapshot line of {longest} bytes"
    );
    let grown = p.server_peak_kib().saturating_sub(before);
    assert!(
        before > 0 && grown < 16 << 10,
        "the server's peak memory grew by {grown} KiB for a 48 MiB line"
    );
    drop(again);

    // A RayJob's pods carry what KubeRay's `labelPod` gives them — `ray.io/cluster` naming the
    // RayJob's RayCluster, node type, group and the template's labels — and no
    // `ray.io/originated-from-cr-name`, which only the RayCluster and the submitter Job get.
    post(
        "/apis/ray.io/v1/namespaces/default/rayjobs".into(),
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "emu-rl"},
               "spec": {"entrypoint": "python train.py"},
               "status": {"rayClusterName": "emu-rl-x7k2p", "jobDeploymentStatus": "Running"}}),
    )
    .await;
    let ray_pod = |name: &str, node_type: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": {
                   "ray.io/cluster": "emu-rl-x7k2p", "ray.io/node-type": node_type,
                   "ray.io/group": if node_type == "head" { "headgroup" } else { "gpu" },
                   "ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator"}},
               "spec": {"containers": [{"name": "ray", "image": "verl"}]},
               "status": {"phase": "Running"}})
    };
    for (name, node_type) in [
        ("emu-rl-x7k2p-head", "head"),
        ("emu-rl-x7k2p-gpu-worker-0", "worker"),
    ] {
        post(
            "/api/v1/namespaces/default/pods".into(),
            ray_pod(name, node_type),
        )
        .await;
        post(
            format!("/_emulator/logs/default/{name}"),
            json!({"lines": [format!("{node_type} up")]}),
        )
        .await;
    }
    let snap = get(
        &p.client,
        format!("{base}/api/clusters/demo/workloads/ray/emu-rl/logs"),
    )
    .await;
    let pods: Vec<_> = snap["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pod"].clone(), p["rank"].clone()))
        .collect();
    assert_eq!(
        pods,
        vec![
            (json!("emu-rl-x7k2p-head"), json!("head")),
            (json!("emu-rl-x7k2p-gpu-worker-0"), json!("worker")),
        ],
        "{snap}"
    );
}
