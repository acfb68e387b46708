//! Operator releases: KubeRay's and KEDA's CRDs fetched by the server from a release mirror (a
//! loopback HTTP server over the real upstream files), checked whole before anything is applied,
//! and refused — with nothing applied — when a file is missing or holds something else.

use serde_json::Value;

use crate::helpers::*;

async fn pipeline_with(mirror: &Mirror) -> (TestApp, Value) {
    let app = spawn_app_with(Opts {
        release_mirror: Some(mirror.url.clone()),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    let op = app.wait_terminal(&id).await;
    (app, op)
}

fn component<'a>(deps: &'a Value, name: &str) -> &'a Value {
    deps["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuberay_and_keda_install_with_the_real_crds_from_a_mirror() {
    let mirror = mirror(&[], &[]).await;
    let (app, op) = pipeline_with(&mirror).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let deps = app.json("/api/clusters/demo/dependencies").await;
    for name in ["kuberay-operator", "keda"] {
        assert_eq!(component(&deps, name)["state"], "ready", "{deps}");
    }
    // The Ray recipe's prerequisite is met: a RayJob trains.
    let r = app
        .post(
            "/api/clusters/demo/training-jobs",
            &serde_json::json!({"jobName": "rl", "recipe": "verl", "instanceType": "ml.g5.8xlarge",
                                "nodeCount": 2, "model": "/s3/models/m", "dataset": "/s3/data/gsm8k"}),
        )
        .await;
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    let accepted: Value = r.json().await.unwrap();
    let trained = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(trained["state"], "succeeded", "{trained}");
    assert_eq!(
        app.json("/api/clusters/demo/training-jobs/rl").await["kind"],
        "RayJob"
    );

    // The CRDs on the cluster name their release: a reconcile fetches nothing (the mirror is
    // gone) and still converges.
    drop(mirror);
    let again = app
        .start("/api/clusters/demo/dependencies", &serde_json::json!({}))
        .await;
    let again = app.wait_terminal(&again).await;
    assert_eq!(again["state"], "succeeded", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_foreign_release_file_is_refused_before_anything_is_applied() {
    let foreign = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: surprise\n";
    for (leave_out, extra, why) in [
        (vec!["ray.io_rayjobs.yaml"], vec![], "Http404"),
        (
            vec!["ray.io_rayservices.yaml"],
            vec![("ray.io_rayservices.yaml", foreign)],
            "not only CRDs",
        ),
    ] {
        let mirror = mirror(&leave_out, &extra).await;
        let (app, op) = pipeline_with(&mirror).await;
        assert_eq!(op["state"], "failed", "{op}");
        let stage = app.json("/api/clusters/demo").await["stages"]["dependencies"].clone();
        let failed = stage["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["state"] == "failed")
            .unwrap_or_else(|| panic!("no failed phase: {stage}"))
            .clone();
        assert_eq!(failed["name"], "kuberay-operator", "{stage}");
        assert!(failed["error"].to_string().contains(why), "{failed}");
        // The component reports the refusal; the fetch-and-check runs before its first apply.
        let deps = app.json("/api/clusters/demo/dependencies").await;
        let kuberay = component(&deps, "kuberay-operator");
        assert_eq!(kuberay["state"], "failed", "{deps}");
        assert!(kuberay["reason"].to_string().contains(why), "{kuberay}");
        assert!(
            failed["outputs"].is_null(),
            "nothing recorded as applied: {failed}"
        );
    }
}
