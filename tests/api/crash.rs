//! Crash safety: SIGKILL the real binary while EKS, then HyperPod, creation is in flight;
//! restart it on the same data directory; every stage finishes with exactly one create call.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::*;

/// Polls (bounded) until `stage`'s `phase` is `submitted`: the create call has returned and
/// the resource is being watched.
async fn until_submitted(client: &reqwest::Client, base: &str, stage: &str, phase: &str) {
    for _ in 0..2000 {
        let cluster: Value = match client.get(format!("{base}/api/clusters/demo")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        let op = &cluster["stages"][stage];
        match phase_state(op, phase).as_str() {
            "submitted" => return,
            "succeeded" => {
                panic!("{stage}/{phase} finished before the kill; slow the sandbox down")
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    panic!("{stage}/{phase} never reached submitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_eks_and_hyperpod_creation_loses_and_duplicates_nothing() {
    let (_guard, dir) = temp_dir();
    let client = reqwest::Client::new();
    // 120×: EKS takes 5 s and HyperPod 7.5 s, long enough to be caught in flight.
    let scale = 120.0;

    let server = Server::start(&dir, free_port(), scale);
    server.ready(&client).await;
    let r = client
        .post(format!("{}/api/pipelines", server.base))
        .json(&pipeline_body())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    let id = r.json::<Value>().await.unwrap()["operationId"]
        .as_str()
        .unwrap()
        .to_string();

    until_submitted(&client, &server.base, "cluster", "eks-cluster").await;
    server.kill9();

    let server = Server::start(&dir, free_port(), scale);
    server.ready(&client).await;
    until_submitted(&client, &server.base, "hyperpod", "hyperpod-cluster").await;
    server.kill9();

    let server = Server::start(&dir, free_port(), scale);
    server.ready(&client).await;
    let op = wait_terminal(&client, &server.base, &id).await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let calls: Value = client
        .get(format!("{}/api/sandbox/calls", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for api in [
        "ec2:CreateVpc",
        "ec2:CreateNatGateway",
        "eks:CreateCluster",
        "sagemaker:CreateCluster",
        "iam:CreateRole",
    ] {
        let expected = if api == "iam:CreateRole" { 3 } else { 1 };
        assert_eq!(accepted_count(&calls, api), expected, "{api}: {calls}");
    }
}
