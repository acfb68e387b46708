//! Bad input: every case gets a 4xx problem body naming the field, and nothing is persisted.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

fn with(field: &str, value: Value) -> String {
    let mut body = pipeline_body();
    body[field] = value;
    body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pipeline_inputs_are_refused_with_the_field_and_nothing_is_persisted() {
    let app = spawn_app().await;
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("malformed JSON", "{\"name\": \"demo\",".into(), 400, "body"),
        ("unknown field", with("bogus", json!(1)), 400, "bogus"),
        ("bad name", with("name", json!("Bad_Name")), 422, "name"),
        (
            "too long a name",
            with("name", json!("a".repeat(40))),
            422,
            "name",
        ),
        ("unknown AZ", with("zone", json!("us-west-2z")), 422, "zone"),
        (
            "compute subnet size out of range",
            with("computeSubnetSize", json!(26)),
            422,
            "computeSubnetSize",
        ),
        (
            "a /16 compute subnet without a secondary block",
            with("computeSubnetSize", json!(16)),
            422,
            "computeSubnetSize",
        ),
        (
            "secondary block in a private range EC2 refuses beside 10.0.0.0/8",
            with("secondaryCidr", json!("192.168.0.0/16")),
            422,
            "secondaryCidr",
        ),
        (
            "secondary block of the wrong size",
            with("secondaryCidr", json!("100.64.0.0/24")),
            422,
            "secondaryCidr",
        ),
        (
            "type not offered in the AZ",
            with("instanceType", json!("ml.p5.48xlarge")),
            422,
            "instanceType",
        ),
        (
            "negative count",
            with("instanceCount", json!(-2)),
            422,
            "instanceCount",
        ),
        (
            "count over quota",
            with("instanceCount", json!(500)),
            422,
            "instanceCount",
        ),
        (
            "count of the wrong type",
            with("instanceCount", json!("two")),
            400,
            "instanceCount",
        ),
        (
            "unknown capacity type",
            with("capacityType", json!("cheap")),
            422,
            "capacityType",
        ),
        (
            "bad training plan ARN",
            {
                let mut b = pipeline_body();
                b["capacityType"] = json!("training-plan");
                b["trainingPlanArn"] = json!("arn:aws:iam::1:role/x");
                b.to_string()
            },
            422,
            "trainingPlanArn",
        ),
        (
            "bad VPC CIDR",
            with("vpcCidr", json!("10.0.0.0/33")),
            422,
            "vpcCidr",
        ),
        (
            "VPC CIDR overlapping the default VPC",
            with("vpcCidr", json!("172.31.0.0/16")),
            422,
            "vpcCidr",
        ),
        (
            "missing field",
            r#"{"name": "demo"}"#.into(),
            400,
            "instanceType",
        ),
        (
            "no zone and no training plan to take it from",
            {
                let mut b = pipeline_body();
                b.as_object_mut().unwrap().remove("zone");
                b.to_string()
            },
            422,
            "zone",
        ),
        (
            "EFA-only is not a mode name here",
            with("networkInterface", json!("efa")),
            422,
            "networkInterface",
        ),
        (
            "oversized body",
            with("name", json!("x".repeat(100_000))),
            413,
            "",
        ),
    ];
    for (what, body, status, field) in cases {
        let r = app.post_raw("/api/pipelines", &body).await;
        let p = problem(r, StatusCode::from_u16(status).unwrap()).await;
        if !field.is_empty() {
            assert_eq!(p["field"], field, "{what}: {p}");
        }
    }

    // The hint for a type not offered in the AZ names the AZs that offer it.
    let r = app
        .post_raw(
            "/api/pipelines",
            &with("instanceType", json!("ml.p5.48xlarge")),
        )
        .await;
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(
        p["hint"]["zonesOffering"],
        json!(["us-west-2b", "us-west-2c"])
    );
    // A name whose IAM roles would be another cluster's (`x` has `x-inference-keda`).
    let r = app
        .post_raw("/api/pipelines", &with("name", json!("demo-inference")))
        .await;
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(p["field"], "name", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("`demo`"), "{p}");
    let r = app
        .post_raw("/api/pipelines", &with("capacityType", json!("cheap")))
        .await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["hint"],
        json!(["on-demand", "spot", "training-plan"])
    );

    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .header("content-type", "text/plain")
        .body(pipeline_body().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::BAD_REQUEST).await["field"],
        "Content-Type"
    );
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .header("Idempotency-Key", "")
        .json(&pipeline_body())
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::BAD_REQUEST).await["field"],
        "Idempotency-Key"
    );
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .header("X-InstantStart-Actor", "root")
        .json(&pipeline_body())
        .send()
        .await
        .unwrap();
    assert_eq!(
        problem(r, StatusCode::BAD_REQUEST).await["field"],
        "X-InstantStart-Actor"
    );
    // A wire enum refuses a value outside it like a validator does: by field, with the values
    // it takes, and the OpenAPI document lists the same values.
    let r = app
        .client
        .post(app.url("/api/pipelines"))
        .body(with("capacityType", json!("cheap")))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(
        p["hint"],
        json!(["on-demand", "spot", "training-plan"]),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("`cheap`"), "{p}");
    let doc = app.json("/api/openapi.json").await;
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["CapacityType"]["enum"], p["hint"]);
    assert_eq!(
        schemas["PipelineRequest"]["properties"]["capacityType"]["$ref"],
        "#/components/schemas/CapacityType"
    );
    let r = app.get("/api/operations/not-an-id").await;
    assert_eq!(
        problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "id"
    );
    let r = app.get("/api/nothing-here").await;
    problem(r, StatusCode::NOT_FOUND).await;

    assert_eq!(app.json("/api/clusters").await, json!([]));
    assert_eq!(app.json("/api/operations").await, json!([]));
    assert_eq!(app.calls().await["accepted"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_on_its_path_keeps_its_connection_usable() {
    // A keep-alive client sends the head, then the body. Refused on its path (a bad cluster
    // name) before the body arrived, the request used to be answered at once and its
    // connection closed unannounced, so the client's next request there got no answer.
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = spawn_app().await;
    let addr = app.base.trim_start_matches("http://").to_string();
    // Refused on its path, and refused on its preview flag (read off the query at the edge).
    for target in [
        "/api/clusters/0/deployments",
        "/api/clusters/demo/deployments?dryRun=maybe",
    ] {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let body = br#"{"deploymentName":"x"}"#;
        let head = format!(
            "POST {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 16 * 1024];
        let early =
            tokio::time::timeout(std::time::Duration::from_millis(300), conn.read(&mut buf)).await;
        assert!(
            early.is_err(),
            "{target}: no answer before the body has arrived"
        );
        conn.write_all(body).await.unwrap();
        let n = conn.read(&mut buf).await.unwrap();
        let first = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(first.starts_with("HTTP/1.1 422"), "{target}: {first}");
        assert!(
            !first.to_ascii_lowercase().contains("connection: close"),
            "{first}"
        );
        conn.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let n = conn.read(&mut buf).await.unwrap();
        let second = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(
            second.starts_with("HTTP/1.1 200"),
            "{target}: the next request is answered: {second:?}"
        );
    }
}
