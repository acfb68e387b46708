//! Development spaces in the sandbox: the feature with its prerequisite in one request, a
//! space made with the cluster's S3 claim at `/s3` (its Workspace held to jupyter-k8s's CRD),
//! stopped and started as `desiredStatus` alone, changed by diff, stopping itself when idle,
//! and deleted; bad input refused by field with nothing called.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

const SPACES: &str = "/api/clusters/demo/spaces";
const LAB: &str = "/api/clusters/demo/spaces/lab";

/// Polls `path` until `ready` holds of it, for at most a minute.
async fn until(app: &TestApp, path: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = app.json(path).await;
        if ready(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{path} never got there: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: &Value,
) -> reqwest::Response {
    app.client
        .request(method, app.url(path))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The operation a 202 started, followed to its end.
async fn finished(app: &TestApp, r: reqwest::Response) -> Value {
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    app.wait_terminal(body["operationId"].as_str().unwrap())
        .await
}

/// Turns `ebsCsi` and `spaces` on in one request and waits for both.
async fn spaces_on(app: &TestApp) {
    let r = send(
        app,
        reqwest::Method::PATCH,
        "/api/clusters/demo/features",
        &json!({"ebsCsi": true, "spaces": true}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let started: Value = r.json().await.unwrap();
    for key in ["ebsCsi", "spaces"] {
        let op = app
            .wait_terminal(started["features"][key]["operationId"].as_str().unwrap())
            .await;
        assert_eq!(op["state"], "succeeded", "{key}: {op}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_mounts_s3_stops_starts_changes_goes_idle_and_is_deleted() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let lab = json!({"spaceName": "lab", "instanceType": "ml.g5.8xlarge", "gpus": 1,
                     "idleShutdownMinutes": 1440});

    // Before the add-on: a conflict that says how to turn it on.
    let p = problem(app.post(SPACES, &lab).await, StatusCode::CONFLICT).await;
    assert!(
        p["detail"].as_str().unwrap().contains("\"spaces\": true"),
        "{p}"
    );

    // The feature and its prerequisite in one request, run in dependency order.
    spaces_on(&app).await;

    // Bad input, by field, with nothing called.
    let before = mutating_calls(&app.calls().await);
    let with = |patch: Value| {
        let mut b = lab.clone();
        for (k, v) in patch.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    for (body, field) in [
        (with(json!({"app": "vim"})), "app"),
        (
            with(json!({"instanceType": "ml.p5.48xlarge"})),
            "instanceType",
        ),
        (with(json!({"gpus": 2})), "gpus"),
        (
            with(json!({"gpus": 1, "migProfile": "1g.10gb"})),
            "migProfile",
        ),
        (
            with(json!({"gpus": 0, "migProfile": "9g.1tb"})),
            "migProfile",
        ),
        (with(json!({"storageGib": 0})), "storageGib"),
        // Above AWS's template's maximum (100 GiB): its webhook would refuse the Workspace.
        (with(json!({"storageGib": 101})), "storageGib"),
        // An image AWS's template does not allow.
        (with(json!({"image": "ghcr.io/me/lab:1"})), "image"),
        // No ml.g5 node advertises a MIG slice.
        (
            with(json!({"gpus": 0, "migProfile": "1g.10gb"})),
            "migProfile",
        ),
        (
            with(json!({"idleShutdownMinutes": 2000})),
            "idleShutdownMinutes",
        ),
        (with(json!({"spaceName": "Lab"})), "spaceName"),
        (with(json!({"image": "-rf"})), "image"),
    ] {
        let p = problem(
            app.post(SPACES, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    assert_eq!(
        mutating_calls(&app.calls().await),
        before,
        "a refusal calls nothing"
    );

    // Made, and followed until it runs: the cluster's S3 claim at /s3, the same claim
    // training pods mount, beside a home directory of its own.
    let op = finished(&app, app.post(SPACES, &lab).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let workspace = &op["params"]["manifests"][0];
    let schemas = crate::crds::Schemas::load();
    assert_eq!(
        schemas.errors(workspace),
        Vec::<String>::new(),
        "{workspace}"
    );
    let mut bad = workspace.clone();
    bad["spec"]["desiredStatus"] = json!("Paused");
    bad["spec"]["storage"]["size"] = json!("lots");
    assert_eq!(
        schemas.errors(&bad).len(),
        2,
        "the CRD refuses a bad status and size: {bad}"
    );
    // The HyperPod CLI's own space model reads it back into the same Workspace; and a team's
    // space with a MIG slice and no idle shutdown too.
    let mut team_space = workspace.clone();
    team_space["metadata"]["namespace"] = json!("hyperpod-ns-team-a");
    team_space["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] =
        json!("hyperpod-ns-team-a-localqueue");
    team_space["spec"]["resources"] = json!({"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/mig-1g.10gb": "1"},
                                             "limits": {"memory": "16Gi", "nvidia.com/mig-1g.10gb": "1"}});
    team_space["spec"]
        .as_object_mut()
        .unwrap()
        .remove("idleShutdown");
    assert_peer_accepts("hyperpod_space_models.py", &[workspace.clone(), team_space]);
    let claims = app.json("/api/clusters/demo/storage").await;
    assert!(
        claims
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["claimName"] == "s3-claim" && c["kind"] == "s3"),
        "{claims}"
    );
    let space = app.json(LAB).await;
    assert_eq!(
        (space["state"].as_str(), space["gpus"].as_u64()),
        (Some("running"), Some(1)),
        "{space}"
    );
    assert_eq!(
        space["mounts"],
        json!([{"path": "/s3", "claim": "s3-claim"}]),
        "{space}"
    );
    let p = problem(app.post(SPACES, &lab).await, StatusCode::CONFLICT).await;
    assert_eq!(p["field"], "spaceName", "{p}");

    // Stopped and started as its desired status alone: nothing else about it changes.
    let op = finished(&app, app.post(&format!("{LAB}/stop"), &json!({})).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let stopped = app.json(LAB).await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let same = |v: &Value| {
        json!([
            v["app"],
            v["instanceType"],
            v["gpus"],
            v["storageGib"],
            v["idleShutdownMinutes"],
            v["mounts"]
        ])
    };
    assert_eq!(same(&stopped), same(&space));
    let r = app.post(&format!("{LAB}/stop"), &json!({})).await;
    assert_eq!(r.status(), StatusCode::OK, "stopped already: nothing to do");
    let op = finished(&app, app.post(&format!("{LAB}/start"), &json!({})).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.json(LAB).await["state"], "running");

    // Changed by diff: equal is 200, the home volume keeps its size, a change is applied.
    let r = send(&app, reqwest::Method::PATCH, LAB, &json!({"gpus": 1})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let p = problem(
        send(
            &app,
            reqwest::Method::PATCH,
            LAB,
            &json!({"storageGib": 40}),
        )
        .await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(p["field"], "storageGib", "{p}");
    // A minute without use: it stops itself, and says so.
    let op = finished(
        &app,
        send(
            &app,
            reqwest::Method::PATCH,
            LAB,
            &json!({"idleShutdownMinutes": 1}),
        )
        .await,
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let idle = until(&app, LAB, |v| v["state"] == "stopped").await;
    assert_eq!(idle["idleShutdownMinutes"], 1, "{idle}");

    let op = app.delete_and_wait(LAB).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(app.json(SPACES).await, json!([]));
    problem(app.get(LAB).await, StatusCode::NOT_FOUND).await;
}

/// Against moto and the Kubernetes emulator (the real kube-rs adapter): the Workspace is applied
/// exactly as generated, with the S3 claim the storage stage made at `/s3`; the operation follows
/// the status the controller writes; stop and start are merge patches of `desiredStatus` that
/// leave every other field as it was; delete removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_is_applied_followed_and_stopped_by_its_desired_status_on_the_kubernetes_emulator()
{
    use crate::kube::{get, AwsPipeline};
    let p = AwsPipeline::run().await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (emu, client, base) = (&p.emu, p.client.clone(), p.base.clone());
    let p_moto_url = p.moto.url.clone();
    // The add-on, as EKS has it once the feature is enabled.
    p.activate_addon("amazon-sagemaker-spaces").await;
    let claim = "/api/v1/namespaces/default/persistentvolumeclaims/s3-claim";
    assert!(emu.get(claim).await.is_some(), "the storage stage's claim");

    let started = |r: reqwest::Response| async move {
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let b: Value = r.json().await.unwrap();
        b["operationId"].as_str().unwrap().to_string()
    };
    let id = started(
        client
            .post(format!("{base}{SPACES}"))
            .json(&json!({"spaceName": "lab", "instanceType": "ml.g5.8xlarge"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let path = "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/lab";
    let applied = emu.appeared(path).await;
    let op = get(&client, format!("{base}/api/operations/{id}")).await;
    assert_eq!(applied["spec"], op["params"]["manifests"][0]["spec"]);
    assert_eq!(
        applied["spec"]["volumes"],
        json!([{"name": "data-s3-claim", "mountPath": "/s3", "persistentVolumeClaimName": "s3-claim"}])
    );
    let status_path = format!("{path}/status");
    let status = |conditions: Value| {
        emu.merge_patch(&status_path, json!({"status": {"conditions": conditions}}))
    };
    let c = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "R", "message": ""});
    status(json!([c("Available", "False"), c("Progressing", "True")])).await;
    assert_eq!(
        get(&client, format!("{base}{LAB}")).await["state"],
        "starting"
    );
    status(json!([c("Available", "True"), c("Progressing", "False")])).await;
    let done = wait_terminal(&client, &base, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");

    // Someone who may make pods in the namespace plants one with the space's label, running:
    // the proxy connects only to the pod the Workspace controller made for this Workspace
    // (Workspace → Deployment → ReplicaSet → pod), so it is refused, never reached.
    emu.send(
        reqwest::Method::POST,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "look-alike", "namespace": "default",
                            "labels": {"workspace.jupyter.org/workspace-name": "lab"}},
               "spec": {"containers": [{"name": "x", "image": "evil"}]}}),
        "application/json",
    )
    .await;
    emu.merge_patch(
        "/api/v1/namespaces/default/pods/look-alike/status",
        json!({"status": {"phase": "Running"}}),
    )
    .await;
    let opened: Value = client
        .post(format!("{base}{LAB}/open"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = opened["url"].as_str().unwrap();
    let port = base.rsplit(':').next().unwrap().to_string();
    let raw = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let on_space = |path: String, cookie: Option<String>| {
        let mut r = raw.get(format!("{base}{path}")).header(
            reqwest::header::HOST,
            format!("lab.demo.spaces.localhost:{port}"),
        );
        if let Some(c) = cookie {
            r = r.header(reqwest::header::COOKIE, c);
        }
        r.send()
    };
    let r = on_space(url[url.find("/?").unwrap()..].to_string(), None)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers()[reqwest::header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let p = problem(
        on_space("/".into(), Some(cookie)).await.unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        p["type"], "urn:instantstart:problem:space-not-running",
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("of its own"), "{p}");

    // The emulator holds workspaces to AWS's templates as jupyter-k8s's webhook does: the space
    // names the template where AWS's add-on keeps it, and nothing was refused on the way.
    assert_eq!(
        applied["spec"]["templateRef"],
        json!({"name": "sagemaker-jupyter-template", "namespace": "jupyter-k8s-system"})
    );
    let stats = emu.get("/_emulator/stats").await.unwrap();
    assert_eq!(stats["denials"], json!([]), "{stats}");
    let mut elsewhere = applied.clone();
    elsewhere["metadata"] = json!({"name": "elsewhere", "namespace": "default"});
    elsewhere["spec"]["templateRef"]["namespace"] = json!("jupyter-k8s-shared");
    let r = reqwest::Client::new()
        .post(format!(
            "{}/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces",
            emu.url
        ))
        .json(&elsewhere)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::FORBIDDEN,
        "the webhook's namespace rule"
    );
    // The bounds come from the template the cluster serves: above its maximum, or an image it
    // does not list, is refused by field before anything is applied.
    for (body, field) in [
        (
            json!({"spaceName": "big", "instanceType": "ml.g5.8xlarge", "storageGib": 101}),
            "storageGib",
        ),
        (
            json!({"spaceName": "own", "instanceType": "ml.g5.8xlarge", "image": "ghcr.io/me/lab:1"}),
            "image",
        ),
        (
            json!({"spaceName": "mig", "instanceType": "ml.g5.8xlarge", "migProfile": "1g.10gb"}),
            "migProfile",
        ),
    ] {
        let r = client
            .post(format!("{base}{SPACES}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["field"], field, "{p}");
    }

    // A Workspace this control plane did not make is none of its spaces: not listed, not
    // opened, not proxied.
    emu.send(
        reqwest::Method::POST,
        "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces",
        json!({"apiVersion": "workspace.jupyter.org/v1alpha1", "kind": "Workspace",
               "metadata": {"name": "theirs", "namespace": "default"},
               "spec": {"displayName": "theirs", "desiredStatus": "Running"}}),
        "application/json",
    )
    .await;
    assert!(emu
        .get("/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/theirs")
        .await
        .is_some());
    let listed = get(&client, format!("{base}{SPACES}")).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["lab"], "{listed}");
    let r = client
        .post(format!("{base}{SPACES}/theirs/open"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Connections through the add-on's extension API. A remote IDE needs the add-on's remote
    // access, which this control plane does not set up: refused, before the add-on is asked,
    // with the way that always works.
    let connect = |space: &str, body: Value| {
        client
            .post(format!("{base}{SPACES}/{space}/connections"))
            .json(&body)
            .send()
    };
    let p = problem(
        connect("lab", json!({})).await.unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        p["type"], "urn:instantstart:problem:space-remote-access-unsupported",
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("space_open"), "{p}");
    let stats = emu.get("/_emulator/stats").await.unwrap();
    assert_eq!(stats["connections"], json!([]), "{stats}");
    // Once whoever runs the cluster gave the add-on remote access, a remote IDE's link comes
    // back; its web UI, not set up here, is refused with the way that always works; a type it
    // does not know is refused by field before anything is called.
    let eks = "AWS4-HMAC-SHA256 Credential=test/20261201/us-west-2/eks/aws4_request, SignedHeaders=host, Signature=0";
    let r = client
        .post(format!(
            "{}/clusters/demo/addons/amazon-sagemaker-spaces/update",
            p_moto_url
        ))
        .header("authorization", eks)
        .json(&json!({"configurationValues": "{\"remoteAccess\": {\"enabled\": true}}"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let r = connect("lab", json!({})).await.unwrap();
    let code = r.status();
    let link: Value = r.json().await.unwrap();
    assert_eq!(code, StatusCode::CREATED, "{link}");
    assert_eq!(link["type"], "vscode-remote", "{link}");
    assert!(
        link["url"].as_str().unwrap().starts_with("vscode://")
            && link["hint"].as_str().unwrap().contains("AWS Toolkit"),
        "{link}"
    );
    let r = connect("lab", json!({"type": "kiro-remote"}))
        .await
        .unwrap();
    let link: Value = r.json().await.unwrap();
    assert!(
        link["url"].as_str().unwrap().starts_with("kiro://"),
        "{link}"
    );
    let p = problem(
        connect("lab", json!({"type": "web-ui"})).await.unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("web browser access is not enabled") && detail.contains("space_open"),
        "{p}"
    );
    let p = problem(
        connect("lab", json!({"type": "ssh"})).await.unwrap(),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(p["field"], "type", "{p}");
    assert!(
        p["hint"]
            .as_array()
            .unwrap()
            .contains(&json!("vscode-remote")),
        "{p}"
    );
    problem(
        connect("theirs", json!({})).await.unwrap(),
        StatusCode::NOT_FOUND,
    )
    .await;
    let sent = emu.get("/_emulator/stats").await.unwrap()["connections"].clone();
    assert_eq!(
        sent[0],
        json!({"apiVersion": "connection.workspace.jupyter.org/v1alpha1", "kind": "WorkspaceConnection",
               "metadata": {"namespace": "default"},
               "spec": {"workspaceName": "lab", "workspaceConnectionType": "vscode-remote"}}),
        "{sent}"
    );
    assert_eq!(
        sent.as_array().unwrap().len(),
        3,
        "the refused type never reached it: {sent}"
    );

    // Stop: one merge patch of desiredStatus; every other field stays as applied.
    let before = emu.mutations().await;
    let id = started(
        client
            .post(format!("{base}{LAB}/stop"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let stopped_spec = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let o = emu.get(path).await.unwrap();
            if o["spec"]["desiredStatus"] == "Stopped" {
                break o["spec"].clone();
            }
            assert!(Instant::now() < deadline, "never patched: {o}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let mut expected = applied["spec"].clone();
    expected["desiredStatus"] = json!("Stopped");
    assert_eq!(stopped_spec, expected, "only desiredStatus changed");
    status(json!([c("Available", "False"), c("Stopped", "True")])).await;
    let done = wait_terminal(&client, &base, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        emu.mutations().await - before,
        2,
        "the patch, and the status the test wrote"
    );
    assert_eq!(
        get(&client, format!("{base}{LAB}")).await["state"],
        "stopped"
    );

    let deleted = delete_and_wait(&client, &base, LAB).await;
    assert_eq!(deleted["state"], "succeeded", "{deleted}");
    assert!(emu.get(path).await.is_none(), "the space is gone");
}

/// A running space opens through the control plane on a host of its own: a one-use ticket
/// becomes a session for that space only; its page and a WebSocket echo come back through the
/// port-forward; a request without the session, from another origin, or for a space not made
/// here is refused, and a stopped space says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_opens_through_the_control_plane_with_its_page_websocket_and_files() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest as _, Message};
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    spaces_on(&app).await;
    let op = finished(
        &app,
        app.post(
            SPACES,
            &json!({"spaceName": "lab", "instanceType": "ml.g5.8xlarge",
                                                      "idleShutdownMinutes": 1440}),
        )
        .await,
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    let port = app.base.rsplit(':').next().unwrap().to_string();
    let space_host = format!("lab.demo.spaces.localhost:{port}");
    let raw = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let on_space = |path: &str, cookie: Option<&str>, origin: Option<&str>| {
        let mut r = raw
            .get(format!("{}{path}", app.base))
            .header(reqwest::header::HOST, &space_host);
        if let Some(c) = cookie {
            r = r.header(reqwest::header::COOKIE, c);
        }
        if let Some(o) = origin {
            r = r.header(reqwest::header::ORIGIN, o);
        }
        r.send()
    };

    problem(
        app.post(&format!("{SPACES}/ghost/open"), &json!({})).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let opened: Value = app
        .post(&format!("{LAB}/open"), &json!({}))
        .await
        .json()
        .await
        .unwrap();
    let url = opened["url"].as_str().unwrap();
    assert!(url.starts_with("http://lab.demo.spaces."), "{opened}");
    let ticket_path = &url[url.find("/?").unwrap()..];

    assert_eq!(
        on_space("/", None, None).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let r = on_space(ticket_path, None, None).await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()[reqwest::header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(set.contains("HttpOnly"), "{set}");
    let cookie = set.split(';').next().unwrap().to_string();
    assert_eq!(
        on_space(ticket_path, None, None).await.unwrap().status(),
        StatusCode::UNAUTHORIZED,
        "a ticket is used once"
    );
    let r = on_space("/", Some(&cookie), None).await.unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    let base = r.headers()[reqwest::header::LOCATION]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(base, "/workspaces/default/lab/");
    let page = on_space(&base, Some(&cookie), None).await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<h1 id=\"space\">lab</h1>") && html.contains("<code>/s3</code> (s3-claim)"),
        "{html}"
    );
    let foreign = format!("http://localhost:{port}");
    assert_eq!(
        on_space(&base, Some(&cookie), Some(&foreign))
            .await
            .unwrap()
            .status(),
        StatusCode::FORBIDDEN,
        "the control plane's own pages may not call into a space"
    );
    let other = raw
        .get(format!("{}/", app.base))
        .header(
            reqwest::header::HOST,
            format!("other.demo.spaces.localhost:{port}"),
        )
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        StatusCode::UNAUTHORIZED,
        "a session opens its own space only"
    );

    // A kernel's channel: a WebSocket through the proxy and the port-forward.
    let tcp = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let mut request = format!("ws://{space_host}{base}api/echo")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("cookie", cookie.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.unwrap();
    ws.send(Message::text("hello")).await.unwrap();
    let reply = ws.next().await.unwrap().unwrap();
    assert_eq!(reply.into_text().unwrap().as_str(), "echo: hello");
    ws.close(None).await.ok();

    // A remote IDE needs the add-on's remote access, which the control plane does not set
    // up: refused, naming the way that works; its web UI is not set up in the sandbox either.
    let p = problem(
        app.post(
            &format!("{LAB}/connections"),
            &json!({"type": "vscode-remote"}),
        )
        .await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        p["type"], "urn:instantstart:problem:space-remote-access-unsupported",
        "{p}"
    );
    let p = problem(
        app.post(&format!("{LAB}/connections"), &json!({"type": "web-ui"}))
            .await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(p["field"], "type", "{p}");

    // Its files: a script saved at /s3/code/train.py is the object under the cluster's claim
    // a training pod reads at the same path; a note in its home is its own.
    let files = |path: &str| format!("{}{base}api/contents/{path}", app.base);
    let put = |path: &str, content: &str, cookie: &str| {
        raw.put(files(path))
            .header(reqwest::header::HOST, &space_host)
            .header(reqwest::header::COOKIE, cookie)
            .json(&json!({"type": "file", "format": "text", "content": content}))
            .send()
    };
    let read = |path: &str, cookie: &str| {
        let r = raw
            .get(files(path))
            .header(reqwest::header::HOST, &space_host)
            .header(reqwest::header::COOKIE, cookie)
            .send();
        async move {
            let r = r.await.unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let script = "import torch\nprint('training')\n";
    for (path, content) in [
        ("s3/code/train.py", script),
        ("home/sagemaker-user/notes.md", "lr 3e-4"),
    ] {
        let r = put(path, content, &cookie).await.unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{path}");
    }
    let r = put("etc/passwd", "x", &cookie).await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::FORBIDDEN,
        "only its volumes are writable"
    );
    let objects = app
        .json("/api/clusters/demo/storage/s3-claim/objects?prefix=code/")
        .await;
    assert_eq!(objects["keys"], json!(["code/train.py"]), "{objects}");
    // A page's requests share the port-forwards the proxy keeps, rather than opening one each.
    let forwards_before = accepted_count(&app.calls().await, "k8s:PortForward");
    for _ in 0..6 {
        let (status, _) = read("s3/code/train.py", &cookie).await;
        assert_eq!(status, StatusCode::OK);
    }
    let opened = accepted_count(&app.calls().await, "k8s:PortForward") - forwards_before;
    assert!(opened <= 1, "six requests opened {opened} port-forwards");
    let (_, root) = read("", &cookie).await;
    let names: Vec<&str> = root["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["home", "s3"], "{root}");
    // What the cluster keeps in its bucket is there too: the lifecycle scripts it uploaded.
    let (_, s3) = read("s3", &cookie).await;
    assert_eq!(
        s3["content"],
        json!([{"type": "directory", "name": "code", "path": "/s3/code"},
               {"type": "directory", "name": "lifecycle", "path": "/s3/lifecycle"}]),
        "{s3}"
    );
    let (_, lifecycle) = read("s3/lifecycle", &cookie).await;
    assert!(
        lifecycle["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "on_create.sh"),
        "{lifecycle}"
    );

    // Stopped, its browser sessions end with it, and it says so rather than hanging.
    let op = finished(&app, app.post(&format!("{LAB}/stop"), &json!({})).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let r = on_space(&base, Some(&cookie), None).await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "a stopped space's session is over"
    );
    problem(
        app.post(&format!("{LAB}/open"), &json!({})).await,
        StatusCode::CONFLICT,
    )
    .await;

    // Started again, opened anew: its home and the cluster's data are where they were.
    let op = finished(&app, app.post(&format!("{LAB}/start"), &json!({})).await).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let session = || {
        let app = &app;
        let raw = raw.clone();
        let space_host = space_host.clone();
        async move {
            let opened: Value = app
                .post(&format!("{LAB}/open"), &json!({}))
                .await
                .json()
                .await
                .unwrap();
            let url = opened["url"].as_str().unwrap();
            let r = raw
                .get(format!("{}{}", app.base, &url[url.find("/?").unwrap()..]))
                .header(reqwest::header::HOST, &space_host)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::SEE_OTHER);
            let set = r.headers()[reqwest::header::SET_COOKIE].to_str().unwrap();
            set.split(';').next().unwrap().to_string()
        }
    };
    let cookie = session().await;
    let (status, notes) = read("home/sagemaker-user/notes.md", &cookie).await;
    assert_eq!(
        (status, &notes["content"]),
        (StatusCode::OK, &json!("lr 3e-4"))
    );
    let (_, train) = read("s3/code/train.py", &cookie).await;
    assert_eq!(train["content"], script, "{train}");
    // Its sessions can be ended at once, by whoever holds the API's token.
    let ended = app
        .client
        .delete(app.url(&format!("{LAB}/sessions")))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::OK);
    assert_eq!(ended.json::<Value>().await.unwrap()["ended"], 1);
    let (status, _) = read("s3/code/train.py", &cookie).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "an ended session opens nothing"
    );

    // Deleted and made again: a new home, the same bucket.
    assert_eq!(app.delete_and_wait(LAB).await["state"], "succeeded");
    let op = finished(
        &app,
        app.post(
            SPACES,
            &json!({"spaceName": "lab", "instanceType": "ml.g5.8xlarge"}),
        )
        .await,
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let cookie = session().await;
    let (status, _) = read("home/sagemaker-user/notes.md", &cookie).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "its home went with it");
    let (status, _) = read("s3/code/train.py", &cookie).await;
    assert_eq!(status, StatusCode::OK, "the cluster's data stays");
}

/// A space's GPUs are a node's: on a cluster of two one-GPU nodes, a third GPU space waits and
/// says why, the nodes' view counts what the spaces hold, and a space stopping frees its GPU
/// for the one waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_waits_for_a_free_gpu_and_runs_when_another_stops() {
    let app = spawn_app().await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    spaces_on(&app).await;
    let body = |name: &str| {
        json!({"spaceName": name, "instanceType": "ml.g5.8xlarge", "gpus": 1,
               "idleShutdownMinutes": 1440})
    };
    for name in ["one", "two"] {
        let op = finished(&app, app.post(SPACES, &body(name)).await).await;
        assert_eq!(op["state"], "succeeded", "{op}");
    }
    let requested = |nodes: &Value| -> u64 {
        nodes["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["kubernetes"]["gpus"]["requested"].as_u64().unwrap_or(0))
            .sum()
    };
    let nodes = app.json("/api/clusters/demo/nodes").await;
    assert_eq!(requested(&nodes), 2, "{nodes}");

    let r = app.post(SPACES, &body("three")).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let three: Value = r.json().await.unwrap();
    let waiting = until(&app, &format!("{SPACES}/three"), |v| {
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("Insufficient nvidia.com/gpu"))
    })
    .await;
    assert_eq!(waiting["state"], "starting", "{waiting}");

    let op = finished(
        &app,
        app.post(&format!("{SPACES}/one/stop"), &json!({})).await,
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let op = app
        .wait_terminal(three["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        app.json(&format!("{SPACES}/three")).await["state"],
        "running"
    );
    assert_eq!(requested(&app.json("/api/clusters/demo/nodes").await), 2);
}
