//! The deployment's shared bucket (`--shared-bucket`, the CloudFormation stack's): each cluster
//! keeps its objects under its own prefix of it, the bucket is never created by the server,
//! and a name HyperPod would refuse is refused at startup.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{accepted_count, inference_app, pipeline_body, problem, spawn_app_with, Opts};

const SHARED: &str = "sagemaker-instantstart-shared-123456789012-us-west-2";

#[tokio::test]
async fn a_cluster_keeps_its_objects_under_its_prefix_of_the_shared_bucket() {
    let app = spawn_app_with(Opts {
        shared_bucket: Some(SHARED),
        create_shared_bucket: true,
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let cluster = app.json("/api/clusters/demo").await;
    let res = &cluster["resources"];
    assert_eq!(res["bucketName"], SHARED, "{res}");
    assert_eq!(res["bucketPrefix"], "demo/");
    assert_eq!(
        res["lifecycleS3Uri"],
        format!("s3://{SHARED}/demo/lifecycle/")
    );
    // The server made no bucket: the one call is the test's, standing in for the stack.
    let calls = app.calls().await;
    assert_eq!(accepted_count(&calls, "s3:CreateBucket"), 1, "{calls}");

    // The claim mounts the prefix; what it shows is relative to it, as /s3 is in a pod.
    let storage = app.json("/api/clusters/demo/storage").await;
    let claim = storage
        .as_array()
        .or_else(|| storage["items"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["claimName"] == "s3-claim"))
        .cloned()
        .unwrap_or_else(|| panic!("no s3-claim: {storage}"));
    assert_eq!(claim["bucket"], SHARED);
    assert_eq!(claim["prefix"], "demo/");
    let objects = app
        .json("/api/clusters/demo/storage/s3-claim/objects?prefix=lifecycle/")
        .await;
    assert_eq!(objects["mountedPrefix"], "demo/", "{objects}");
    let keys: Vec<&str> = objects["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(keys, ["lifecycle/on_create.sh"], "{objects}");
}

/// Runs a pipeline (without storage) on a server with `opts` that must fail: the stage that
/// failed with `code`, and the calls the sandbox accepted.
async fn failing_pipeline(opts: Opts, code: &str) -> (Value, Value) {
    let app = spawn_app_with(opts).await;
    let mut body = pipeline_body();
    body["storage"] = serde_json::json!(false);
    let id = app.start("/api/pipelines", &body).await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "failed", "{op}");
    let failed = app.json("/api/operations?cluster=demo&state=failed").await;
    let stage = failed
        .as_array()
        .and_then(|os| os.iter().find(|o| o["error"]["code"] == code))
        .cloned()
        .unwrap_or_else(|| panic!("no stage failed with {code}: {failed}"));
    (stage, app.calls().await)
}

#[tokio::test]
async fn a_missing_shared_bucket_fails_the_stage_and_is_never_created() {
    let opts = Opts {
        shared_bucket: Some(SHARED),
        ..Default::default()
    };
    let (hyperpod, calls) = failing_pipeline(opts, "shared-bucket-missing").await;
    assert_eq!(hyperpod["kind"], "hyperpod", "{hyperpod}");
    let text = hyperpod["error"].to_string();
    assert!(
        text.contains(SHARED),
        "the failure names the bucket: {text}"
    );
    assert_eq!(accepted_count(&calls, "s3:CreateBucket"), 0, "{calls}");
    assert_eq!(accepted_count(&calls, "sagemaker:CreateCluster"), 0);
}

/// Bucket names are global: the name a cluster's own bucket would get may be held by another
/// account. S3 answers the expected-owner check with 403; the stage fails with a conflict and
/// writes nothing there (the lifecycle scripts run as root on every node).
#[tokio::test]
async fn a_bucket_of_another_account_is_never_adopted() {
    let opts = Opts {
        faults: Some("foreign-bucket=sagemaker-instantstart-demo-123456789012"),
        ..Default::default()
    };
    let (hyperpod, calls) = failing_pipeline(opts, "bucket-not-ours").await;
    assert_eq!(hyperpod["kind"], "hyperpod", "{hyperpod}");
    for api in ["s3:CreateBucket", "s3:PutObject", "sagemaker:CreateCluster"] {
        assert_eq!(accepted_count(&calls, api), 0, "{api}: {calls}");
    }
}

/// A role name is not enough: a customer's role that happens to be named like the one a stage
/// makes (at the root path, without the product's tag) is never adopted, changed or passed.
#[tokio::test]
async fn a_role_that_only_shares_the_name_is_never_adopted() {
    let opts = Opts {
        faults: Some("foreign-role=demo-eks-cluster"),
        ..Default::default()
    };
    let (stage, calls) = failing_pipeline(opts, "role-not-ours").await;
    assert!(
        stage["error"].to_string().contains("demo-eks-cluster"),
        "{stage}"
    );
    for api in [
        "iam:AttachRolePolicy",
        "iam:UpdateAssumeRolePolicy",
        "eks:CreateCluster",
    ] {
        assert_eq!(accepted_count(&calls, api), 0, "{api}: {calls}");
    }
}

#[tokio::test]
async fn a_shared_bucket_hyperpod_would_refuse_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = instantstart::config::ServeConfig::sandbox(dir.path().to_path_buf());
    config.shared_bucket = Some("instantstart-shared-123456789012-us-west-2".into());
    let e = instantstart::build_app(config)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("INSTANTSTART_SHARED_BUCKET") && e.contains("sagemaker-"),
        "{e}"
    );
}

/// Every role this server makes carries the stack's boundary (the sandbox's too), which reaches
/// the deployment's own buckets and the `DataBuckets` it names, nothing else: a claim or an
/// endpoint model in any other bucket is refused by field before anything is made, since the S3
/// CSI driver could not mount it. Named as a data bucket, the same requests are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_outside_the_boundary_is_refused_until_it_is_a_data_bucket() {
    for data_buckets in [vec![], vec!["team-*-data"]] {
        let allowed = !data_buckets.is_empty();
        let app = inference_app(Opts {
            data_buckets,
            ..Default::default()
        })
        .await;
        let before = accepted_count(&app.calls().await, "iam:PutRolePolicy");
        let claim = json!({"claimName": "datasets", "bucket": "team-a-data"});
        let model = json!({"endpointName": "qwen", "model": "s3://team-b-data/qwen",
                           "instanceType": "ml.g5.8xlarge"});
        for (path, body, field) in [
            ("/api/clusters/demo/storage", claim, "bucket"),
            ("/api/clusters/demo/endpoints", model, "model"),
        ] {
            let r = app.post(path, &body).await;
            if allowed {
                assert_eq!(r.status(), StatusCode::ACCEPTED, "{path}");
                let op: Value = r.json().await.unwrap();
                let op = app.wait_terminal(op["operationId"].as_str().unwrap()).await;
                assert_eq!(op["state"], "succeeded", "{op}");
            } else {
                let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
                assert_eq!(p["field"], field, "{p}");
                assert!(p["hint"].as_str().unwrap().contains("DataBuckets"), "{p}");
            }
        }
        let after = accepted_count(&app.calls().await, "iam:PutRolePolicy");
        assert_eq!(
            after > before,
            allowed,
            "the S3 CSI role is changed only when accepted"
        );
    }
}
