//! Failure evidence in the sandbox: a node that failed its deep health check shows why in one
//! read (HyperPod's message, its health and fault labels, taint, fault details, events and the
//! health agent's and deep health check's log lines, newest first), a healthy one shows nothing
//! alarming, and a replacement clears it; a creation whose lifecycle script failed names the
//! stream, whose last lines say what broke.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// The node (by instance id) whose deep-health-check label reads `status`.
fn nodes_with(list: &Value, status: &str) -> Vec<String> {
    list["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["kubernetes"]["health"]["sagemaker.amazonaws.com/deep-health-check-status"] == status
        })
        .map(|n| n["instanceId"].as_str().unwrap().to_string())
        .collect()
}

async fn evidence(app: &TestApp, node: &str) -> Value {
    app.json(&format!("/api/clusters/demo/nodes/{node}/evidence"))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_failed_its_deep_health_check_shows_why_in_one_read() {
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:DeepHealthCheckFailure=1"),
        ..Default::default()
    })
    .await;
    // On Spot, so under continuous node provisioning: HyperPod keeps events only there.
    let mut body = pipeline_body();
    body["capacityType"] = json!("spot");
    let id = app.start("/api/pipelines", &body).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let list = app.json("/api/clusters/demo/nodes").await;
    let failed = nodes_with(&list, "Failed");
    let passed = nodes_with(&list, "Passed");
    assert_eq!((failed.len(), passed.len()), (1, 1), "{list}");

    let e = evidence(&app, &failed[0]).await;
    assert!(
        e["hyperpod"]["message"]
            .as_str()
            .unwrap()
            .contains("Deep health check failed"),
        "{e}"
    );
    let health = &e["kubernetes"]["health"];
    assert_eq!(
        health["sagemaker.amazonaws.com/node-health-status"], "UnschedulablePendingReplacement",
        "{e}"
    );
    assert_eq!(
        health["sagemaker.amazonaws.com/fault-type"],
        "DeepHealthCheckFailure"
    );
    assert_eq!(e["kubernetes"]["taints"][0]["effect"], "NoSchedule", "{e}");
    assert_eq!(
        e["kubernetes"]["faultDetails"]["faults"][0]["reason"], "GpuMemoryError",
        "the annotation, parsed: {e}"
    );
    assert_eq!(e["events"][0]["type"], "Warning", "{e}");
    assert_eq!(e["events"][0]["reason"], "DeepHealthCheckFailed");
    assert_eq!(e["clusterEvents"][0]["level"], "Error", "newest first: {e}");
    let streams: Vec<&str> = e["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stream"].as_str().unwrap())
        .collect();
    let group = e["logGroup"].as_str().unwrap();
    assert!(group.starts_with("/aws/sagemaker/Clusters/"), "{e}");
    // A deep health check's stream is named by its run, not by the node: it is the node's
    // because its lines name the instance.
    assert!(
        streams
            .iter()
            .any(|s| s.starts_with("DeepHealthCheckResults/") && !s.ends_with(failed[0].as_str()))
            && streams
                .iter()
                .any(|s| s.starts_with("SagemakerHealthMonitoringAgent/"))
            && streams.iter().any(|s| s.starts_with("LifecycleConfig/")),
        "{streams:?}"
    );
    let dhc = e["logs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["stream"]
                .as_str()
                .unwrap()
                .starts_with("DeepHealthCheckResults/")
        })
        .unwrap();
    assert!(
        dhc["lines"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}: Deep health check failed", failed[0])),
        "newest line first: {dhc}"
    );
    assert!(
        e["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "its deep health check failed"),
        "{e}"
    );
    assert!(e["hint"].as_str().unwrap().contains("node_replace"), "{e}");
    assert_eq!(e["unread"], json!([]), "{e}");

    // A healthy node: its lifecycle script's lines, nothing alarming.
    let ok = evidence(&app, &passed[0]).await;
    assert_eq!(ok["findings"], json!([]), "{ok}");
    assert!(
        ok["hint"].as_str().unwrap().contains("workload_logs"),
        "{ok}"
    );

    // Bad and unknown ids are refused before anything is read.
    let p = problem(
        app.get("/api/clusters/demo/nodes/node-1/evidence").await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "id", "{p}");
    problem(
        app.get("/api/clusters/demo/nodes/i-0000000000000000/evidence")
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // Replaced, the slot is new hardware that passes.
    let op = app
        .wait_terminal(
            &app.start(
                &format!("/api/clusters/demo/nodes/{}/replace", failed[0]),
                &json!({}),
            )
            .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let list = app.json("/api/clusters/demo/nodes").await;
    assert!(nodes_with(&list, "Failed").is_empty(), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_whose_lifecycle_script_failed_names_the_stream_and_its_last_lines() {
    let app = spawn_app_with(Opts {
        faults: Some("sagemaker:LifecycleScriptFailure=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "failed");
    let e = app.json("/api/clusters/demo/evidence").await;
    let kinds: Vec<&str> = e["failedStages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"hyperpod"), "{e}");
    assert_eq!(e["hyperpodStatus"], "Failed", "{e}");
    let message = e["failureMessage"].as_str().unwrap();
    let named = message
        .split_whitespace()
        .find(|w| w.starts_with("LifecycleConfig/"))
        .unwrap()
        .trim_end_matches('.');
    assert_eq!(
        e["logs"][0]["stream"], named,
        "the stream the failure names comes first: {e}"
    );
    assert_eq!(
        e["logs"][0]["lines"][0]["message"], "[on_create.sh] exiting with status 1",
        "newest first: {e}"
    );
    assert!(
        e["logs"][0]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["message"]
                .as_str()
                .unwrap()
                .contains("Unable to locate package")),
        "{e}"
    );
    // Not under continuous provisioning, HyperPod keeps no events: not asked for (SageMaker
    // would refuse), and said so — not shown as a part that could not be read.
    assert_eq!(e["clusterEvents"], json!([]), "{e}");
    assert!(
        e["clusterEventsNote"]
            .as_str()
            .unwrap()
            .contains("NodeProvisioningMode is Continuous"),
        "{e}"
    );
    assert_eq!(e["unread"], json!([]), "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("lifecycle script"),
        "{e}"
    );
}

/// Against moto and the Kubernetes emulator (the real adapters): HyperPod's side from
/// `DescribeClusterNode`, the Node's labels (the plural fault labels too), taint and
/// `fault-details` annotation and its events from the API server by field selector, the
/// lifecycle script's lines from CloudWatch Logs newest first, and `ListClusterEvents` not
/// asked of a cluster not under continuous provisioning (SageMaker refuses it there, as the
/// gap-filler does), which the evidence says rather than hides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_evidence_is_read_through_the_real_adapters() {
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (client, base) = (p.client.clone(), p.base.clone());
    let nodes = get(&client, format!("{base}/api/clusters/demo/nodes")).await;
    let node = &nodes["nodes"][0];
    let (id, group) = (
        node["instanceId"].as_str().unwrap().to_string(),
        node["instanceGroup"].as_str().unwrap().to_string(),
    );
    let cluster = get(&client, format!("{base}/api/clusters/demo")).await;
    let hyperpod = cluster["resources"]["hyperPodClusterName"]
        .as_str()
        .unwrap();
    let arn = cluster["resources"]["hyperPodClusterArn"].as_str().unwrap();
    let log_group = format!(
        "/aws/sagemaker/Clusters/{hyperpod}/{}",
        arn.rsplit('/').next().unwrap()
    );

    // What HyperPod's agent would have written on the node, and an event of it.
    let name = format!("hyperpod-{id}");
    p.emu
        .send(
            reqwest::Method::POST,
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "labels": {
                       "sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReboot",
                       "sagemaker.amazonaws.com/fault-types": "NvidiaGpu",
                       "sagemaker.amazonaws.com/fault-reasons": "XidError",
                       "kubernetes.io/hostname": name},
                     "annotations": {"sagemaker.amazonaws.com/fault-details": "{\"faults\":[{\"reason\":\"XidError\"}]}"}},
                   "spec": {"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            "application/json",
        )
        .await;
    p.emu
        .send(
            reqwest::Method::POST,
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event",
                   "metadata": {"name": format!("{name}.xid"), "namespace": "default"},
                   "involvedObject": {"kind": "Node", "name": name},
                   "type": "Warning", "reason": "NvidiaXidError", "message": "Xid 79 on GPU 2",
                   "lastTimestamp": "2026-12-01T00:00:00Z", "count": 3}),
            "application/json",
        )
        .await;
    // And what its lifecycle script wrote to CloudWatch Logs.
    let config = instantstart::cloud::aws::config_loader()
        .region(aws_config::Region::new("us-west-2"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .endpoint_url(&p.moto.url)
        .load()
        .await;
    let logs = aws_sdk_cloudwatchlogs::Client::new(&config);
    let stream = format!("LifecycleConfig/{group}/{id}");
    logs.create_log_group()
        .log_group_name(&log_group)
        .send()
        .await
        .unwrap();
    logs.create_log_stream()
        .log_group_name(&log_group)
        .log_stream_name(&stream)
        .send()
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut put = logs
        .put_log_events()
        .log_group_name(&log_group)
        .log_stream_name(&stream);
    for (i, line) in ["[on_create.sh] starting", "[on_create.sh] done"]
        .iter()
        .enumerate()
    {
        put = put.log_events(
            aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
                .timestamp(now + i as i64)
                .message(*line)
                .build()
                .unwrap(),
        );
    }
    put.send().await.unwrap();

    let e = get(
        &client,
        format!("{base}/api/clusters/demo/nodes/{id}/evidence"),
    )
    .await;
    assert_eq!(e["hyperpod"]["instanceId"], id.as_str(), "{e}");
    assert_eq!(e["hyperpod"]["instanceGroup"], group.as_str(), "{e}");
    let health = &e["kubernetes"]["health"];
    assert_eq!(
        health["sagemaker.amazonaws.com/fault-types"], "NvidiaGpu",
        "plural read: {e}"
    );
    assert_eq!(health["sagemaker.amazonaws.com/fault-reasons"], "XidError");
    assert!(
        health.get("kubernetes.io/hostname").is_none(),
        "health labels only: {e}"
    );
    assert_eq!(
        e["kubernetes"]["faultDetails"]["faults"][0]["reason"],
        "XidError"
    );
    assert_eq!(e["kubernetes"]["taints"][0]["effect"], "NoSchedule");
    assert_eq!(
        (
            e["events"][0]["reason"].as_str(),
            e["events"][0]["count"].as_u64()
        ),
        (Some("NvidiaXidError"), Some(3)),
        "{e}"
    );
    assert_eq!(e["logGroup"], log_group.as_str());
    assert_eq!(e["logs"][0]["stream"], stream.as_str(), "{e}");
    assert_eq!(
        e["logs"][0]["lines"][0]["message"], "[on_create.sh] done",
        "newest first"
    );
    assert!(e["hint"].as_str().unwrap().contains("node_reboot"), "{e}");
    // A cluster not under continuous provisioning has no events: SageMaker would refuse
    // ListClusterEvents, so it is not called, and the evidence says why.
    assert_eq!(e["unread"], json!([]), "nothing unread: {e}");
    assert!(
        e["clusterEventsNote"]
            .as_str()
            .unwrap()
            .contains("NodeProvisioningMode is Continuous"),
        "{e}"
    );
    let asked = get(&client, format!("{}/_gapfiller/cluster-events", p.moto.url)).await;
    assert_eq!(asked["requests"], json!([]), "{asked}");
}
