//! Upgrades: a cluster at Kubernetes 1.32 goes one minor up as one operation — the control
//! plane, then its add-ons to the newest EKS offers for 1.33, then HyperPod's software, a canary
//! group alone before the others — previewed whole first, refused by field where EKS or
//! SageMaker would refuse it, and the simulated EKS refusing what EKS refuses.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

const UPGRADE: &str = "/api/clusters/demo/upgrade";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_goes_one_minor_up_with_its_addons_then_its_software_canary_first() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let extra = json!({"instanceGroupName": "extra", "zone": "us-west-2a",
                       "instanceType": "ml.g5.8xlarge", "instanceCount": 1, "capacityType": "on-demand"});
    let op = app
        .wait_terminal(
            &app.start("/api/clusters/demo/instance-groups", &extra)
                .await,
        )
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let before = app.json("/api/clusters/demo/versions").await;
    assert_eq!(before["kubernetes"], "1.32", "{before}");
    assert_eq!(before["nextKubernetes"], "1.33", "{before}");
    // EKS's calendar for both: 1.32's standard support ended on 2026-03-23.
    let support = before["support"].as_array().unwrap();
    let of = |v: &str| support.iter().find(|s| s["version"] == v).cloned();
    assert_eq!(
        of("1.32").map(|s| s["endOfStandardSupport"].clone()),
        Some(json!("2026-03-23")),
        "{before}"
    );
    assert!(of("1.33").is_some(), "{before}");

    // Refused by field before anything is sent.
    let refused = |body: Value| {
        let app = &app;
        async move {
            problem(
                app.post(UPGRADE, &body).await,
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
    };
    let skip = refused(json!({"kubernetesVersion": "1.34"})).await;
    assert_eq!(skip["field"], "kubernetesVersion", "{skip}");
    assert_eq!(skip["hint"], json!(["1.33"]), "{skip}");
    let alone = refused(json!({"kubernetesVersion": "1.33", "canaryGroup": "extra"})).await;
    assert_eq!(alone["field"], "canaryGroup", "{alone}");
    let stranger =
        refused(json!({"kubernetesVersion": "1.33", "software": {}, "canaryGroup": "nope"})).await;
    assert_eq!(stranger["field"], "canaryGroup", "{stranger}");
    let batch =
        refused(json!({"kubernetesVersion": "1.33", "software": {"batchPercent": 0}})).await;
    assert_eq!(batch["field"], "software.batchPercent", "{batch}");

    // Previewed whole: the phases in EKS's order, each add-on's versions, the canary alone.
    let body = json!({"kubernetesVersion": "1.33", "software": {"batchInstances": 1}, "canaryGroup": "extra"});
    let calls = app.calls().await["attempted"].clone();
    let r = app.post(&format!("{UPGRADE}?dryRun=true"), &body).await;
    assert_eq!(r.status(), StatusCode::OK);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(
        app.calls().await["attempted"],
        calls,
        "the preview called nothing"
    );
    let planned = &plan["operations"][0];
    assert_eq!(planned["kind"], "cluster-upgrade", "{plan}");
    assert_eq!(
        phase_names(planned),
        [
            "kubernetes-version",
            "addons",
            "software-canary",
            "software"
        ]
    );
    let p = &planned["params"];
    assert_eq!(
        (p["from"].as_str(), p["to"].as_str()),
        (Some("1.32"), Some("1.33"))
    );
    let addons = p["addons"].as_array().unwrap();
    assert!(addons.len() >= 4, "every managed add-on moves: {p}");
    for a in addons {
        assert_ne!(a["from"], a["to"], "{a}");
        let offered: Vec<Value> = before["addons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["name"] == a["name"])
            .map(|b| b["newestForNext"].clone())
            .collect();
        assert_eq!(
            offered,
            [a["to"].clone()],
            "to the newest EKS offers for 1.33: {a}"
        );
    }
    assert_eq!(p["canary"]["instanceGroups"], json!(["extra"]));
    assert_eq!(p["software"]["instanceGroups"], json!(["workers"]));
    let affected = plan["affects"].as_array().unwrap();
    assert!(
        affected
            .iter()
            .all(|a| a["outcome"].as_str().unwrap().contains("patched")),
        "{plan}"
    );

    // Run: one control plane update, each add-on once, the software twice (canary, then rest).
    let accepted = |calls: &Value, api: &str| calls["accepted"][api].as_i64().unwrap_or(0);
    let calls = app.calls().await;
    let op = app.wait_terminal(&app.start(UPGRADE, &body).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(phase_names(&op), phase_names(planned));
    let after = app.calls().await;
    for (api, times) in [
        ("eks:UpdateClusterVersion", 1),
        ("eks:UpdateAddon", addons.len() as i64),
        ("sagemaker:UpdateClusterSoftware", 2),
    ] {
        assert_eq!(
            accepted(&after, api) - accepted(&calls, api),
            times,
            "{api}"
        );
    }
    let now = app.json("/api/clusters/demo/versions").await;
    assert_eq!(now["kubernetes"], "1.33", "{now}");
    assert_eq!(now["nextKubernetes"], "1.34", "{now}");
    for a in now["addons"].as_array().unwrap() {
        assert_eq!(a["version"], a["newest"], "{a}");
        assert_eq!(a["behind"], false, "{a}");
    }
    // The same again is refused: 1.33 is where it is, and 1.34 is the next.
    let again = refused(json!({"kubernetesVersion": "1.33"})).await;
    assert_eq!(again["hint"], json!(["1.34"]), "{again}");
}

/// What EKS refuses of `UpdateClusterVersion`, the simulated EKS refuses (EKS User Guide,
/// "Update existing cluster to new Kubernetes version"): a skipped minor, the version it runs;
/// a repeated token is the same update, not a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_eks_upgrades_one_minor_at_a_time_and_once_per_token() {
    // Slow enough that the upgrade (8 simulated minutes) is seen rolling: 4 s here.
    let app = spawn_app_with(Opts {
        time_scale: Some(120.0),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/clusters", &json!({"name": "demo"})).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let eks = &app.cloud.eks;
    for (version, says) in [
        (
            "1.34",
            "Unsupported Kubernetes minor version update from 1.32 to 1.34",
        ),
        ("1.32", "already at the desired configuration"),
    ] {
        let e = eks
            .update_cluster_version("demo", version, "t")
            .await
            .unwrap_err();
        assert_eq!(e.code, "InvalidParameterException");
        assert!(e.message.contains(says), "{}", e.message);
    }
    let first = eks
        .update_cluster_version("demo", "1.33", "t-1")
        .await
        .unwrap();
    let again = eks
        .update_cluster_version("demo", "1.33", "t-1")
        .await
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(
        accepted_count(&app.calls().await, "eks:UpdateClusterVersion"),
        1
    );
    // Until it is done, the control plane is UPDATING at its old version, and a second
    // update is refused.
    let c = eks.describe_cluster("demo").await.unwrap().unwrap();
    assert_eq!(c.status, instantstart::cloud::EksStatus::Updating);
    assert_eq!(c.version, "1.32");
    let e = eks
        .update_cluster_version("demo", "1.33", "t-2")
        .await
        .unwrap_err();
    assert_eq!(e.code, "ResourceInUseException");
}

/// The scenario, on the simulated account: a cluster at 1.32 with a training job and a
/// server goes to 1.33 — control plane, then add-ons — and its software rolls one node at a time
/// watching an alarm that fires on the second batch (`cloudwatch:AlarmFires=2`): the update is
/// rolled back, the operation fails at the software phase saying so, the control plane and
/// add-ons stay upgraded, and the group reports the rollback and the release it still runs.
/// A second update, without the fault, brings the newest release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_on_the_second_batch_rolls_the_software_back_and_the_upgrade_says_so() {
    let app = spawn_app_with(Opts {
        faults: Some("cloudwatch:AlarmFires=2"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let group = |v: &Value| v["groups"][0]["software"].clone();
    let before = app.json("/api/clusters/demo/versions").await;
    assert_eq!(
        group(&before),
        json!({"currentRelease": "2026.11.10", "desiredRelease": "2026.11.10",
               "imageStatus": "UpdateAvailable", "updateStatus": null}),
        "a newer HyperPod release exists: {before}"
    );
    let body = json!({"kubernetesVersion": "1.33",
                      "software": {"batchInstances": 1, "rollbackAlarms": ["demo-gpu-errors"]}});
    let op = app.wait_terminal(&app.start(UPGRADE, &body).await).await;
    assert_eq!(op["state"], "failed", "{op}");
    let states: Vec<(&str, &str)> = op["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("kubernetes-version", "succeeded"),
            ("addons", "succeeded"),
            ("software", "failed")
        ]
    );
    let why = op["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("RollbackComplete") && why.contains("demo-gpu-errors"),
        "{op}"
    );
    let after = app.json("/api/clusters/demo/versions").await;
    assert_eq!(after["kubernetes"], "1.33", "{after}");
    assert_eq!(group(&after)["updateStatus"], "RollbackComplete", "{after}");
    assert_eq!(group(&after)["currentRelease"], "2026.11.10", "{after}");
    assert_eq!(
        after["groups"][0]["lastSoftwareUpdates"],
        json!(["never"]),
        "a rolled-back update patched nothing that stayed: {after}"
    );
    // Once the cause is fixed (the fault is spent), the software alone rolls forward.
    let again = app
        .start(
            "/api/clusters/demo/hyperpod/software-update",
            &json!({"batchInstances": 1, "rollbackAlarms": ["demo-gpu-errors"]}),
        )
        .await;
    assert_eq!(app.wait_terminal(&again).await["state"], "succeeded");
    let done = app.json("/api/clusters/demo/versions").await;
    assert_eq!(
        (
            group(&done)["currentRelease"].clone(),
            group(&done)["imageStatus"].clone(),
            group(&done)["updateStatus"].clone()
        ),
        (json!("2026.12.01"), json!("UpToDate"), json!("Succeeded")),
        "{done}"
    );
}

/// A preview reads each training job's restart budget on the nodes it would patch: a job that
/// has spent its restarts is named as one the interruption would fail, an upgrade that would
/// patch its node is refused until the user chooses, and `cancel` stops it in a phase of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_no_restart_left_is_named_and_its_upgrade_refused_unless_it_is_stopped_first() {
    use crate::training::{enable_training_operator, submit, training_cluster};
    let app = training_cluster(Some("k8s:PodFailure=1")).await;
    enable_training_operator(&app).await;
    let job = json!({"jobName": "long", "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge",
                     "nodeCount": 1, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
                     "args": ["--max_steps=10000000"], "recovery": {"jobMaxRetryCount": 1}});
    submit(&app, &job).await;
    // Its one pod failure spends its one restart; it runs on.
    crate::sharing::until(&app, "/api/clusters/demo/training-jobs/long", |j| {
        j["restarts"]["count"] == 1 && j["state"] == "running"
    })
    .await;
    let r = app
        .post(
            "/api/clusters/demo/hyperpod/software-update?dryRun=true",
            &json!({}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let plan: Value = r.json().await.unwrap();
    let long = plan["affects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["workload"] == "training/long")
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(
        long["outcome"]
            .as_str()
            .unwrap()
            .contains("no restart left (1 of 1 used)"),
        "{long}"
    );
    // An upgrade whose software would patch its node is refused unless the user says what
    // becomes of it; `cancel` stops it first, as a phase of its own, then the software rolls.
    let upgrade = |running: Option<&str>| {
        let mut body = json!({"kubernetesVersion": "1.33", "software": {"batchInstances": 1}});
        if let Some(r) = running {
            body["runningJobs"] = json!(r);
        }
        body
    };
    let refused = problem(
        app.post(UPGRADE, &upgrade(None)).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(refused["field"], "runningJobs", "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("long"),
        "{refused}"
    );
    let r = app
        .post(&format!("{UPGRADE}?dryRun=true"), &upgrade(Some("cancel")))
        .await;
    let plan: Value = r.json().await.unwrap();
    let planned = &plan["operations"][0];
    assert_eq!(
        phase_names(planned),
        ["kubernetes-version", "addons", "running-jobs", "software"],
        "{plan}"
    );
    assert_eq!(planned["params"]["jobs"][0]["name"], "long", "{plan}");
    let op = app
        .wait_terminal(&app.start(UPGRADE, &upgrade(Some("cancel"))).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        app.get("/api/clusters/demo/training-jobs/long")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

/// An add-on whose new version fails (`eks:AddonUpdateFailure=1`: EKS reports it
/// UPDATE_FAILED) goes back to the version and configuration it had, the upgrade fails at its
/// add-ons naming it (the control plane stays upgraded), and a retry of the operation moves the
/// add-ons again without redoing the control plane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_addon_update_goes_back_and_a_retry_finishes_the_upgrade() {
    let app = spawn_app_with(Opts {
        faults: Some("eks:AddonUpdateFailure=1"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let id = app
        .start(UPGRADE, &json!({"kubernetesVersion": "1.33"}))
        .await;
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "failed", "{op}");
    let first = op["params"]["addons"][0].clone();
    let why = op["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains(first["name"].as_str().unwrap()) && why.contains("going back"),
        "{op}"
    );
    let versions = app.json("/api/clusters/demo/versions").await;
    assert_eq!(versions["kubernetes"], "1.33", "{versions}");
    let back = versions["addons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == first["name"])
        .unwrap()
        .clone();
    assert_eq!(back["version"], first["from"], "{back}");
    let calls = app.calls().await;
    let r = app
        .client
        .post(app.url(&format!("/api/operations/{id}/retry")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let op = app.wait_terminal(&id).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let after = app.calls().await;
    assert_eq!(
        accepted_count(&after, "eks:UpdateClusterVersion"),
        accepted_count(&calls, "eks:UpdateClusterVersion"),
        "the control plane is not upgraded twice"
    );
    let versions = app.json("/api/clusters/demo/versions").await;
    for a in versions["addons"].as_array().unwrap() {
        assert_eq!(a["behind"], false, "{a}");
    }
}

/// A group's software schedule (`ScheduledUpdateConfig`): a cron expression SageMaker would
/// refuse is refused by field before anything is sent (and the simulated SageMaker refuses it
/// too); a good one is sent with its rolling policy and shows on the group; the same again
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_software_schedule_is_checked_sent_and_shown() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let group = "/api/clusters/demo/instance-groups/workers";
    let patch = |schedule: Value| {
        let app = &app;
        async move {
            app.client
                .patch(app.url(group))
                .json(&json!({"softwareSchedule": schedule}))
                .send()
                .await
                .unwrap()
        }
    };
    let calls = app.calls().await;
    let bad = problem(
        patch(json!({"scheduleExpression": "0 3 * * 0"})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(bad["field"], "softwareSchedule.scheduleExpression", "{bad}");
    let bad = problem(
        patch(json!({"scheduleExpression": "cron(0 3 ? * 1#1 *)", "batchPercent": 0})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(bad["field"], "softwareSchedule.batchPercent", "{bad}");
    assert_eq!(
        app.calls().await["attempted"],
        calls["attempted"],
        "nothing sent"
    );
    let schedule = json!({"scheduleExpression": "cron(0 3 ? * 1#1 *)", "batchPercent": 50,
                          "waitSeconds": 300, "rollbackAlarms": ["demo-gpu-errors"]});
    let r = patch(schedule.clone()).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let op: Value = r.json().await.unwrap();
    let done = app.wait_terminal(op["operationId"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let groups = app.json("/api/clusters/demo/instance-groups").await;
    assert_eq!(
        groups[0]["softwareSchedule"],
        json!({"scheduleExpression": "cron(0 3 ? * 1#1 *)", "batch": {"percent": 50},
               "waitSeconds": 300, "rollbackAlarms": ["demo-gpu-errors"]}),
        "{groups}"
    );
    let again = patch(schedule).await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the same schedule changes nothing"
    );
    // The simulated SageMaker refuses what SageMaker refuses, whoever sends it.
    let mut spec: instantstart::cloud::InstanceGroupSpec = serde_json::from_value(
        app.json("/api/clusters/demo").await["resources"]["instanceGroups"][0].clone(),
    )
    .unwrap();
    spec.scheduled_update.as_mut().unwrap().schedule_expression = "rate(7 days)".into();
    let hyperpod = app.json("/api/clusters/demo").await["resources"]["hyperPodClusterName"]
        .as_str()
        .unwrap()
        .to_string();
    let e = app
        .cloud
        .hyperpod
        .update_cluster(&hyperpod, &[spec], false)
        .await
        .unwrap_err();
    assert_eq!(e.code, "ValidationException", "{e:?}");
}

/// `runningJobs: wait`: the upgrade's software waits for the training jobs on its nodes to end.
/// The job here trains for 30,000 simulated seconds (5 s at this time scale), and a software
/// batch takes 600: had the upgrade not waited, it would have ended with the job still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_told_to_wait_patches_only_after_its_jobs_end() {
    use crate::training::{enable_training_operator, submit, training_cluster};
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;
    let job = json!({"jobName": "short", "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge",
                     "nodeCount": 1, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
                     "args": ["--max_steps=60000"]});
    submit(&app, &job).await;
    crate::sharing::until(&app, "/api/clusters/demo/training-jobs/short", |j| {
        j["state"] == "running"
    })
    .await;
    let body = json!({"kubernetesVersion": "1.33", "software": {"batchInstances": 1},
                      "runningJobs": "wait"});
    let op = app.wait_terminal(&app.start(UPGRADE, &body).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        ["kubernetes-version", "addons", "running-jobs", "software"]
    );
    assert_eq!(op["params"]["jobs"][0]["name"], "short", "{op}");
    let job = app.json("/api/clusters/demo/training-jobs/short").await;
    assert_eq!(
        job["state"], "succeeded",
        "the software waited for it: {job}"
    );
}
