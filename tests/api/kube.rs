//! The kube-rs adapter and the Kubernetes-side stages (dependencies, storage, import, live
//! status) against the kmock-based emulator (tests/peers/kube_emulator.py), with moto for AWS.

use std::time::{Duration, Instant};

use instantstart::cloud::kube::{KubeAuth, KubeRs};
use instantstart::cloud::{Kube, KubeTarget};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::aws::Moto;
use crate::helpers::*;

/// The emulator process; killed when dropped.
pub struct KubeEmulator {
    _child: tokio::process::Child,
    pub url: String,
    http: Client,
}

/// The kube-rs adapter against the emulator, and a target on it.
fn emulator_adapter(emu: &KubeEmulator) -> (KubeRs, KubeTarget) {
    let target = KubeTarget {
        cluster: "demo".into(),
        endpoint: "https://unused.example".into(),
        certificate_authority: String::new(),
    };
    (KubeRs::new(KubeAuth::Url(emu.url.clone())), target)
}

impl KubeEmulator {
    pub async fn start(args: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(venv_python())
            .arg(peer("kube_emulator.py"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the Kubernetes emulator");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("emulator ready in time")
            .expect("read")
            .expect("a READY line");
        let url = line
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("unexpected emulator output: {line}"))
            .to_string();
        Self {
            _child: child,
            url,
            http: Client::new(),
        }
    }

    pub async fn get(&self, path: &str) -> Option<Value> {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        (r.status() == StatusCode::OK).then_some(r.json().await.unwrap())
    }

    pub async fn items(&self, path: &str) -> Vec<Value> {
        self.get(path)
            .await
            .map(|l| l["items"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
        content_type: &str,
    ) -> Value {
        let r = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// A JSON merge patch (`PATCH`, `application/merge-patch+json`), as a controller or the
    /// kubelet changes an object's status.
    pub async fn merge_patch(&self, path: &str, body: Value) -> Value {
        self.send(
            reqwest::Method::PATCH,
            path,
            body,
            "application/merge-patch+json",
        )
        .await
    }

    /// Waits (bounded) until an object exists, as its controller would first see it.
    pub async fn appeared(&self, path: &str) -> Value {
        for _ in 0..400 {
            if let Some(o) = self.get(path).await {
                return o;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{path} never appeared");
    }

    /// Mutating requests (POST/PUT/PATCH/DELETE) the emulator has served.
    pub async fn mutations(&self) -> u64 {
        let stats = self.get("/_emulator/stats").await.expect("stats");
        stats["mutations"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum()
    }

    /// Plays the controllers kmock does not have: marks every DaemonSet and Deployment ready.
    pub async fn mark_workloads_ready(&self) {
        for (list, status) in [
            (
                "/apis/apps/v1/daemonsets",
                json!({"desiredNumberScheduled": 2, "numberReady": 2}),
            ),
            (
                "/apis/apps/v1/deployments",
                json!({"replicas": 1, "readyReplicas": 1}),
            ),
        ] {
            for o in self.items(list).await {
                if o.get("status").is_some() {
                    continue;
                }
                let (ns, name) = (
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                );
                let plural = list.rsplit('/').next().unwrap();
                self.merge_patch(
                    &format!("/apis/apps/v1/namespaces/{ns}/{plural}/{name}/status"),
                    json!({"status": status}),
                )
                .await;
            }
        }
    }
}

pub(crate) async fn post(client: &Client, url: String, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = client.post(url);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn get(client: &Client, url: String) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

/// Starts an operation and waits for it; while it runs, the emulator's workloads are marked
/// ready as a controller would (only when `controllers` is set).
pub(crate) async fn run(
    client: &Client,
    base: &str,
    path: &str,
    body: Option<Value>,
    emu: Option<&KubeEmulator>,
) -> Value {
    let (status, accepted) = post(client, format!("{base}{path}"), body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{path}: {accepted}");
    let id = accepted["operationId"].as_str().unwrap().to_string();
    if let Some(emu) = emu {
        loop {
            let op = get(client, format!("{base}/api/operations/{id}?wait=1")).await;
            if ["succeeded", "failed", "cancelled"].contains(&op["state"].as_str().unwrap_or("")) {
                return op;
            }
            emu.mark_workloads_ready().await;
        }
    }
    wait_terminal(client, base, &id).await
}

/// `run`, for an operation that must succeed: the terminal operation, checked.
pub(crate) async fn run_ok(
    client: &Client,
    base: &str,
    path: &str,
    body: Option<Value>,
    emu: Option<&KubeEmulator>,
) -> Value {
    let op = run(client, base, path, body, emu).await;
    assert_eq!(op["state"], "succeeded", "{path}: {op}");
    op
}

fn outputs_of(op: &Value) -> Vec<(String, Value)> {
    op["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["outputs"].clone(),
            )
        })
        .collect()
}

fn component<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// The binary in AWS mode against moto and the emulator, with the operator releases served from
/// a loopback mirror of the upstream files (kept alive beside the server).
pub(crate) async fn aws_server(
    moto: &Moto,
    emu: &KubeEmulator,
    dir: &std::path::Path,
    extra: &[(&'static str, String)],
) -> (Server, Mirror) {
    let mirror = mirror(&[], &[]).await;
    let mut env = moto.env();
    env.extend(extra.iter().cloned());
    env.push(("INSTANTSTART_KUBE_URL", emu.url.clone()));
    env.push(("INSTANTSTART_RELEASE_MIRROR", mirror.url.clone()));
    // One log follow at a time, so the logs test can reach the cap with two sockets.
    env.push(("INSTANTSTART_MAX_LOG_FOLLOWS", "1".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::spawn(dir, free_port(), &["--cloud", "aws"], &env);
    server.ready(&Client::new()).await;
    (server, mirror)
}

/// A whole pipeline (dependencies and storage included) in AWS mode against moto and the
/// emulator, whose nodes are there from the start (it has no kubelets: the nodes that would
/// register once HyperPod's instances join are seeded, so dependencies can be verified).
pub(crate) struct AwsPipeline {
    pub moto: Moto,
    pub emu: KubeEmulator,
    /// The binary, alive as long as the pipeline.
    _server: Server,
    pub client: Client,
    pub base: String,
    /// The pipeline operation, as it ended.
    pub op: Value,
    _mirror: Mirror,
    _dir: tempfile::TempDir,
}

impl AwsPipeline {
    /// The server's log file.
    pub fn server_log(&self) -> &std::path::Path {
        &self._server.log
    }

    /// The server's peak resident memory so far, in KiB (`VmHWM`).
    pub fn server_peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self._server.pid()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// An EKS add-on of the cluster, as EKS has it once enabled (moto's gap-filler answers
    /// EKS-signed add-on calls, unverified, and reports ACTIVE after the first describe).
    pub async fn activate_addon(&self, addon: &str) {
        let addons = format!("{}/clusters/demo/addons", self.moto.url);
        let eks = "AWS4-HMAC-SHA256 Credential=test/20261201/us-west-2/eks/aws4_request, SignedHeaders=host, Signature=0";
        let r = self
            .client
            .post(&addons)
            .header("authorization", eks)
            .json(&serde_json::json!({ "addonName": addon }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{addon}: {}", r.status());
        self.client
            .get(format!("{addons}/{addon}"))
            .header("authorization", eks)
            .send()
            .await
            .unwrap();
    }

    pub async fn run() -> Self {
        Self::run_with(&[]).await
    }

    /// The same, with extra environment for the binary.
    pub async fn run_with(extra: &[(&'static str, String)]) -> Self {
        Self::run_as(extra, |_, _| {
            Box::pin(async { reqwest::header::HeaderMap::new() })
        })
        .await
    }

    /// The same, with every request of `client` carrying the headers `sign_in` returns once
    /// the server is up (a session of someone made in moto, when people sign in).
    pub async fn run_as(
        extra: &[(&'static str, String)],
        sign_in: for<'a> fn(
            &'a Moto,
            &'a str,
        ) -> futures::future::BoxFuture<'a, reqwest::header::HeaderMap>,
    ) -> Self {
        let moto = Moto::start().await;
        let emu = KubeEmulator::start(&["--seed-nodes", "2"]).await;
        let (dir, path) = temp_dir();
        let (server, mirror) = aws_server(&moto, &emu, &path, extra).await;
        let headers = sign_in(&moto, &server.base).await;
        let client = Client::builder().default_headers(headers).build().unwrap();
        let base = server.base.clone();
        let op = run(
            &client,
            &base,
            "/api/pipelines",
            Some(pipeline_body()),
            Some(&emu),
        )
        .await;
        Self {
            moto,
            emu,
            _server: server,
            client,
            base,
            op,
            _mirror: mirror,
            _dir: dir,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_and_storage_reconcile_against_moto_and_the_kubernetes_emulator() {
    let p = AwsPipeline::run().await;
    let (emu, client, base, op) = (&p.emu, p.client.clone(), p.base.clone(), p.op.clone());
    let cluster = get(&client, format!("{base}/api/clusters/demo")).await;
    assert_eq!(op["state"], "succeeded", "{op}\n{cluster}");

    for ns in ["aws-hyperpod", "kubeflow", "kuberay-operator", "keda"] {
        assert!(
            emu.get(&format!("/api/v1/namespaces/{ns}")).await.is_some(),
            "namespace {ns}"
        );
    }
    for ds in ["nvidia-device-plugin", "aws-efa-k8s-device-plugin"] {
        let o = emu
            .get(&format!(
                "/apis/apps/v1/namespaces/kube-system/daemonsets/{ds}"
            ))
            .await
            .expect(ds);
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "instantstart"
        );
    }
    assert!(emu
        .get("/apis/apps/v1/namespaces/kuberay-operator/deployments/kuberay-operator")
        .await
        .is_some());
    // AWS's HyperPod dependencies: the health-monitoring agent and the roles HyperPod's
    // service-linked role acts with.
    let agent = emu
        .get("/apis/apps/v1/namespaces/aws-hyperpod/daemonsets/health-monitoring-agent")
        .await
        .expect("health-monitoring agent");
    assert!(agent["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .contains(".dkr.ecr.us-west-2.amazonaws.com/hyperpod-health-monitoring-agent:"));
    let restart = emu
        .get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/job-auto-restart")
        .await
        .expect("job auto-restart binding");
    assert_eq!(
        restart["subjects"][0]["name"],
        "hyperpod-service-linked-role"
    );
    assert!(emu
        .get("/apis/apps/v1/namespaces/keda/deployments/keda-operator")
        .await
        .is_some());
    let bucket = cluster["resources"]["bucketName"].as_str().unwrap();
    let pv = emu
        .get("/api/v1/persistentvolumes/instantstart-default-s3-claim")
        .await
        .expect("PV");
    assert_eq!(pv["spec"]["csi"]["driver"], "s3.csi.aws.com");
    assert_eq!(pv["spec"]["csi"]["volumeAttributes"]["bucketName"], bucket);
    assert_eq!(
        pv["spec"]["claimRef"],
        json!({"namespace": "default", "name": "s3-claim"})
    );
    let pvc = emu
        .get("/api/v1/namespaces/default/persistentvolumeclaims/s3-claim")
        .await
        .expect("PVC");
    assert_eq!(pvc["spec"]["volumeName"], "instantstart-default-s3-claim");

    // Converged: running both stages again reads everything and changes nothing.
    let before = emu.mutations().await;
    let deps = run_ok(
        &client,
        &base,
        "/api/clusters/demo/dependencies",
        None,
        None,
    )
    .await;
    let storage = run_ok(&client, &base, "/api/clusters/demo/storage", None, None).await;
    assert_eq!(
        emu.mutations().await,
        before,
        "a converged reconciliation made mutating requests"
    );
    for (phase, out) in outputs_of(&deps).into_iter().chain(outputs_of(&storage)) {
        if phase != "shared-bucket" {
            assert_eq!(out["changed"], json!(false), "{phase}: {out}");
        }
    }

    // Per-component state: the operators' CRDs are not part of their manifests.
    let report = get(&client, format!("{base}/api/clusters/demo/dependencies")).await;
    assert_eq!(
        component(&report, "cert-manager")["state"],
        "ready",
        "{report}"
    );
    assert_eq!(
        component(&report, "nvidia-device-plugin")["state"],
        "ready",
        "{report}"
    );
    // KubeRay and KEDA came with the CRDs of their pinned releases, fetched from the mirror
    // (the upstream files themselves: full schemas), and the KEDA metrics API is registered.
    for name in ["kuberay-operator", "keda"] {
        assert_eq!(component(&report, name)["state"], "ready", "{report}");
    }
    for crd in [
        "rayclusters.ray.io",
        "rayjobs.ray.io",
        "rayservices.ray.io",
        "scaledobjects.keda.sh",
        "scaledjobs.keda.sh",
        "triggerauthentications.keda.sh",
        "clustertriggerauthentications.keda.sh",
        "cloudeventsources.eventing.keda.sh",
        "clustercloudeventsources.eventing.keda.sh",
    ] {
        let applied = emu
            .get(&format!(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
            ))
            .await
            .unwrap_or_else(|| panic!("CRD {crd} applied"));
        assert!(
            applied
                .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
                .is_some(),
            "{crd} carries its upstream schema"
        );
    }
    assert!(emu
        .get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.external.metrics.k8s.io")
        .await
        .is_some());
    let report = get(&client, format!("{base}/api/clusters/demo/dependencies")).await;
    assert_eq!(report["ready"], true, "{report}");

    // Drift: only the changed object is re-applied.
    emu.merge_patch(
        "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin",
        json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "someone-else"}}}),
    )
    .await;
    let report = get(&client, format!("{base}/api/clusters/demo/dependencies")).await;
    let nvidia = component(&report, "nvidia-device-plugin");
    assert_eq!(nvidia["state"], "degraded", "{nvidia}");
    assert!(
        nvidia["reason"]
            .as_str()
            .unwrap()
            .contains("DaemonSet/nvidia-device-plugin"),
        "{nvidia}"
    );
    let before = emu.mutations().await;
    let deps = run_ok(
        &client,
        &base,
        "/api/clusters/demo/dependencies",
        None,
        None,
    )
    .await;
    assert_eq!(
        emu.mutations().await,
        before + 1,
        "exactly the drifted DaemonSet is applied"
    );
    let changed: Vec<String> = outputs_of(&deps)
        .into_iter()
        .filter(|(_, o)| o["changed"] == true)
        .map(|(p, _)| p)
        .collect();
    assert_eq!(changed, ["nvidia-device-plugin"]);

    // More claims: an existing FSx for Lustre file system; a name clash; removal.
    let fsx = json!({"claimName": "fsx", "kind": "fsx", "fileSystemId": "fs-0123456789abcdef0",
                     "dnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "mountName": "abcdefgh"});
    run_ok(
        &client,
        &base,
        "/api/clusters/demo/storage",
        Some(fsx),
        None,
    )
    .await;
    let pv = emu
        .get("/api/v1/persistentvolumes/instantstart-default-fsx")
        .await
        .expect("FSx PV");
    assert_eq!(pv["spec"]["csi"]["driver"], "fsx.csi.aws.com");
    assert_eq!(pv["spec"]["csi"]["volumeHandle"], "fs-0123456789abcdef0");
    assert_eq!(
        pv["spec"]["csi"]["volumeAttributes"]["mountname"],
        "abcdefgh"
    );
    let claims = get(&client, format!("{base}/api/clusters/demo/storage")).await;
    let names: Vec<&str> = claims
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["claimName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fsx", "s3-claim"], "{claims}");

    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/demo/storage"),
        Some(json!({"claimName": "s3-claim", "bucket": "another-bucket"})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["field"], "claimName");
    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/demo/storage"),
        Some(json!({"bucket": "Not_A_Bucket"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "bucket");

    let op = delete_and_wait(&client, &base, "/api/clusters/demo/storage/fsx").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert!(emu
        .get("/api/v1/persistentvolumes/instantstart-default-fsx")
        .await
        .is_none());
    assert!(emu
        .get("/api/v1/namespaces/default/persistentvolumeclaims/fsx")
        .await
        .is_none());
    let r = client
        .delete(format!("{base}/api/clusters/demo/storage/fsx"))
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::NOT_FOUND).await;

    // A claim on another bucket: the S3 CSI driver mounts with its role, so the role is given
    // that bucket first, and loses it again with the claim.
    let csi_policy = || {
        p.moto
            .role_policy("demo-s3-csi", "instantstart-shared-bucket")
    };
    assert!(!csi_policy().await.contains("their-datasets"));
    run_ok(
        &client,
        &base,
        "/api/clusters/demo/storage",
        Some(json!({"claimName": "datasets", "bucket": "their-datasets"})),
        None,
    )
    .await;
    let policy = csi_policy().await;
    assert!(
        policy.contains("arn:aws:s3:::their-datasets/*") && policy.contains(bucket),
        "{policy}"
    );
    let op = delete_and_wait(&client, &base, "/api/clusters/demo/storage/datasets").await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let policy = csi_policy().await;
    assert!(
        !policy.contains("their-datasets") && policy.contains(bucket),
        "{policy}"
    );

    // A model download is a Job in the cluster; its token is a Secret the Job only references.
    let token = "hf_EmulatorSecret42";
    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/demo/models"),
        Some(json!({"modelId": "Qwen/Qwen3-0.6B", "hfToken": token})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let jobs = loop {
        let jobs = emu.items("/apis/batch/v1/jobs").await;
        if !jobs.is_empty() {
            break jobs;
        }
        tokio::task::yield_now().await;
    };
    let job = &jobs[0];
    assert!(
        !job.to_string().contains(token),
        "the manifest names the Secret, not the token"
    );
    let job_name = job["metadata"]["name"].as_str().unwrap().to_string();
    let secret = emu
        .get(&format!(
            "/api/v1/namespaces/default/secrets/{job_name}-token"
        ))
        .await
        .expect("the token Secret");
    assert_eq!(secret["kind"], "Secret");
    let claim =
        &job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"];
    assert_eq!(claim, "s3-claim");
    // Play the Job controller: the download completes.
    emu.merge_patch(
        &format!("/apis/batch/v1/namespaces/default/jobs/{job_name}/status"),
        json!({"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}),
    )
    .await;
    let op = wait_terminal(&client, &base, body["operationId"].as_str().unwrap()).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let models = get(&client, format!("{base}/api/clusters/demo/models")).await;
    assert_eq!(models[0]["state"], "succeeded", "{models}");
    let jobs = get(&client, format!("{base}/api/clusters/demo/jobs")).await;
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == job_name.as_str() && j["state"] == "succeeded"),
        "{jobs}"
    );

    // A download that fails (say the model id does not exist) fails its operation with the
    // Job's reason; deleting the job takes its pods and Secret, and the same download can run
    // again.
    let download = json!({"modelId": "nobody/no-such-model"});
    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/demo/models"),
        Some(download.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let failing = loop {
        let found = emu
            .items("/apis/batch/v1/jobs")
            .await
            .into_iter()
            .find(|j| j["metadata"]["name"] != job_name.as_str());
        if let Some(j) = found {
            break j["metadata"]["name"].as_str().unwrap().to_string();
        }
        tokio::task::yield_now().await;
    };
    emu.merge_patch(&format!("/apis/batch/v1/namespaces/default/jobs/{failing}/status"),
        json!({"status": {"failed": 3, "conditions": [{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}}))
    .await;
    let op = wait_terminal(&client, &base, body["operationId"].as_str().unwrap()).await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(op.to_string().contains("BackoffLimitExceeded"), "{op}");
    let (status, again) = post(
        &client,
        format!("{base}/api/clusters/demo/models"),
        Some(download.clone()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a failed job is kept (its logs): {again}"
    );
    let op = delete_and_wait(
        &client,
        &base,
        &format!("/api/clusters/demo/jobs/{failing}"),
    )
    .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert!(emu
        .get(&format!("/apis/batch/v1/namespaces/default/jobs/{failing}"))
        .await
        .is_none());
    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/demo/models"),
        Some(download),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

fn node(name: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "node.kubernetes.io/instance-type": "ml.g5.12xlarge",
        "sagemaker.amazonaws.com/instance-group-name": "workers",
        "sagemaker.amazonaws.com/node-health-status": "Schedulable"}},
        "status": {"capacity": {"nvidia.com/gpu": gpus.to_string()}, "allocatable": {"nvidia.com/gpu": gpus.to_string()},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// Polls the adapter until `check` holds; returns how long it took.
async fn until(
    kube: &KubeRs,
    target: &KubeTarget,
    what: &str,
    check: impl Fn(&instantstart::cloud::ClusterState) -> bool,
) -> Duration {
    let start = Instant::now();
    // Generous bound for a loaded 2-core machine; the observed latency is printed.
    while start.elapsed() < Duration::from_secs(10) {
        if check(&kube.cluster_state(target).await.expect("state")) {
            println!("cache saw {what} after {:?}", start.elapsed());
            return start.elapsed();
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the cache never saw {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_and_pod_cache_follows_creates_updates_and_deletes() {
    let emu = KubeEmulator::start(&[]).await;
    let (kube, target) = emulator_adapter(&emu);
    let state = kube.cluster_state(&target).await.expect("first sync");
    assert!(state.nodes.is_empty());
    assert_eq!(state.cache.source, "watch");

    emu.send(
        reqwest::Method::POST,
        "/api/v1/nodes",
        node("hyperpod-i-0123456789abcdef0", 4),
        "application/json",
    )
    .await;
    until(&kube, &target, "a new node", |s| s.nodes.len() == 1).await;
    let s = kube.cluster_state(&target).await.unwrap();
    let n = &s.nodes[0];
    assert_eq!(n.instance_id.as_deref(), Some("i-0123456789abcdef0"));
    assert_eq!(n.instance_group.as_deref(), Some("workers"));
    assert_eq!((n.gpus.total, n.gpus.free, n.ready), (4, 4, true));

    let pod = |name: &str, node: Option<&str>, gpus: u32| {
        let mut spec = json!({"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec,
               "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}})
    };
    emu.send(
        reqwest::Method::POST,
        "/api/v1/namespaces/default/pods",
        pod("a", Some("hyperpod-i-0123456789abcdef0"), 3),
        "application/json",
    )
    .await;
    emu.send(
        reqwest::Method::POST,
        "/api/v1/namespaces/default/pods",
        pod("b", None, 2),
        "application/json",
    )
    .await;
    until(&kube, &target, "GPU requests", |s| {
        s.nodes[0].gpus.requested == 3 && s.pending_gpus == 2
    })
    .await;
    assert_eq!(
        kube.cluster_state(&target).await.unwrap().nodes[0]
            .gpus
            .free,
        1
    );
    // A watch ended with 410 Expired lists every pod again: the relist's own summary takes
    // the place of the pods' part, and the view says the same under a new revision.
    let before = kube
        .cluster_state(&target)
        .await
        .unwrap()
        .cache
        .revision
        .clone();
    emu.send(
        reqwest::Method::POST,
        "/_emulator/expire-watch",
        json!({}),
        "application/json",
    )
    .await;
    until(&kube, &target, "the relist", |s| {
        s.cache.revision != before
            && (s.nodes[0].gpus.requested, s.nodes[0].gpus.free) == (3, 1)
            && (s.pending_gpu_pods, s.pending_gpus) == (1, 2)
            && s.cache.pods == 2
    })
    .await;
    // What the metrics report of the cache: what it holds, synced, and how fresh.
    let stats = kube.cache_stats().await;
    assert_eq!(stats.len(), 1, "{stats:?}");
    let s = &stats[0];
    assert_eq!(
        (s.cluster.as_str(), s.nodes, s.pods, s.synced),
        ("demo", 1, 2, true)
    );
    assert!(s.since_event.is_some_and(|d| d.as_secs() < 60), "{s:?}");

    // A finished pod frees its GPUs; a health label change shows.
    emu.merge_patch(
        "/api/v1/namespaces/default/pods/a/status",
        json!({"status": {"phase": "Succeeded"}}),
    )
    .await;
    emu.merge_patch("/api/v1/nodes/hyperpod-i-0123456789abcdef0",
        json!({"metadata": {"labels": {"sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReboot"}}}))
    .await;
    until(&kube, &target, "updates", |s| {
        s.nodes[0].gpus.requested == 0
            && s.nodes[0]
                .health
                .get("sagemaker.amazonaws.com/node-health-status")
                .map(String::as_str)
                == Some("UnschedulablePendingReboot")
    })
    .await;

    emu.send(
        reqwest::Method::DELETE,
        "/api/v1/nodes/hyperpod-i-0123456789abcdef0",
        json!({}),
        "application/json",
    )
    .await;
    until(&kube, &target, "the deletion", |s| s.nodes.is_empty()).await;

    // A forgotten cluster starts over with a fresh client and cache (a recreated cluster has a
    // new endpoint and CA): the new cache lists what exists now.
    emu.send(
        reqwest::Method::POST,
        "/api/v1/nodes",
        node("hyperpod-i-00000000000000001", 8),
        "application/json",
    )
    .await;
    kube.forget("demo").await;
    let fresh = kube.cluster_state(&target).await.expect("resync");
    assert_eq!(fresh.nodes.len(), 1);
    assert_eq!(fresh.nodes[0].gpus.total, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_detects_what_is_installed_and_status_serves_5000_pods_from_the_cache() {
    let moto = Moto::start().await;
    let emu = KubeEmulator::start(&["--seed-nodes", "200", "--seed-pods", "5000"]).await;
    let aws = moto.aws().await;

    // An EKS cluster made outside InstantStart, with one add-on and our namespaces already there.
    let iam = aws_sdk_iam::Client::new(&aws.config);
    let role = iam
        .create_role()
        .role_name("their-eks-role")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#)
        .send()
        .await
        .unwrap();
    let eks = aws_sdk_eks::Client::new(&aws.config);
    eks.create_cluster()
        .name("theirs")
        .role_arn(role.role().unwrap().arn())
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .subnet_ids("subnet-2")
                .build(),
        )
        .send()
        .await
        .unwrap();
    eks.create_addon()
        .cluster_name("theirs")
        .addon_name("cert-manager")
        .send()
        .await
        .unwrap();
    // And a HyperPod cluster of theirs on it, named as they chose.
    let sagemaker = aws_sdk_sagemaker::Client::new(&aws.config);
    sagemaker
        .create_cluster()
        .cluster_name("their-hp")
        .orchestrator(
            aws_sdk_sagemaker::types::ClusterOrchestrator::builder()
                .eks(
                    aws_sdk_sagemaker::types::ClusterOrchestratorEksConfig::builder()
                        .cluster_arn("arn:aws:eks:us-west-2:123456789012:cluster/theirs")
                        .build(),
                )
                .build(),
        )
        .instance_groups(
            aws_sdk_sagemaker::types::ClusterInstanceGroupSpecification::builder()
                .instance_group_name("gpu")
                .instance_type(aws_sdk_sagemaker::types::ClusterInstanceType::MlG58Xlarge)
                .instance_count(1)
                .execution_role(role.role().unwrap().arn())
                .life_cycle_config(
                    aws_sdk_sagemaker::types::ClusterLifeCycleConfig::builder()
                        .source_s3_uri("s3://sagemaker-their-bucket/lifecycle/")
                        .on_create("their_on_create.sh")
                        .build(),
                )
                .threads_per_core(1)
                .build(),
        )
        .send()
        .await
        .unwrap();
    for ns in ["aws-hyperpod", "kubeflow"] {
        emu.send(
            reqwest::Method::POST,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            "application/json",
        )
        .await;
    }

    let (_guard, dir) = temp_dir();
    let (server, _mirror) = aws_server(&moto, &emu, &dir, &[]).await;
    let (client, base) = (Client::new(), server.base.clone());
    let (status, body) = post(
        &client,
        format!("{base}/api/clusters/import"),
        Some(json!({"eksClusterName": "Theirs"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "eksClusterName");
    let import = || {
        let body = json!({"eksClusterName": "theirs", "hyperpodClusterName": "their-hp"});
        run_ok(&client, &base, "/api/clusters/import", Some(body), None)
    };
    import().await;
    // Both clusters now carry the product's cluster tag, which its policy requires before it
    // deletes, grants access to or installs on a cluster; their other tags are left alone.
    let described = eks.describe_cluster().name("theirs").send().await.unwrap();
    let tags = described
        .cluster()
        .unwrap()
        .tags()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        tags.get("instantstart:cluster").map(String::as_str),
        Some("theirs"),
        "{tags:?}"
    );
    assert!(!tags.contains_key("Name"), "{tags:?}");
    let hp_arn = sagemaker
        .describe_cluster()
        .cluster_name("their-hp")
        .send()
        .await
        .unwrap()
        .cluster_arn()
        .unwrap()
        .to_string();
    let hp_tags = sagemaker
        .list_tags()
        .resource_arn(&hp_arn)
        .send()
        .await
        .unwrap();
    assert!(
        hp_tags
            .tags()
            .iter()
            .any(|t| t.key() == Some("instantstart:cluster") && t.value() == Some("theirs")),
        "{hp_tags:?}"
    );
    // And the tag AWS's training-operator policy requires before it describes the nodes.
    assert!(
        hp_tags
            .tags()
            .iter()
            .any(|t| t.key() == Some("SageMaker") && t.value() == Some("true")),
        "{hp_tags:?}"
    );
    // Its instance groups are read from HyperPod itself: nothing about them was recorded.
    let groups = get(
        &client,
        format!("{base}/api/clusters/theirs/instance-groups"),
    )
    .await;
    let gpu = groups
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "gpu"))
        .unwrap_or_else(|| panic!("their group is listed: {groups}"));
    assert_eq!(gpu["instanceType"], "ml.g5.8xlarge", "{gpu}");
    assert_eq!(gpu["lifecycleOnCreate"], "their_on_create.sh", "{gpu}");
    assert_eq!(gpu["targetCount"], 1, "{gpu}");
    assert_eq!(gpu["capacityType"], "on-demand", "{gpu}");
    let cluster = get(&client, format!("{base}/api/clusters/theirs")).await;
    let res = &cluster["resources"];
    assert_eq!(
        res["preexistingComponents"],
        json!(["hyperpod-namespaces", "cert-manager"]),
        "{res}"
    );
    assert_eq!(res["accessEntryCreated"], true, "{res}");
    assert!(res["eksEndpoint"].is_string(), "{res}");
    // Importing again is refused: the cluster is known.
    let (status, _) = post(
        &client,
        format!("{base}/api/clusters/import"),
        Some(json!({"eksClusterName": "theirs"})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Reconciling leaves what was there alone, and installs the rest.
    let deps = run_ok(
        &client,
        &base,
        "/api/clusters/theirs/dependencies",
        None,
        Some(&emu),
    )
    .await;
    let outs: std::collections::BTreeMap<String, Value> = outputs_of(&deps).into_iter().collect();
    assert_eq!(outs["hyperpod-namespaces"]["preexisting"], true);
    assert_eq!(outs["cert-manager"]["preexisting"], true);
    assert_eq!(outs["eks-pod-identity-agent"]["changed"], true);
    let ns = emu.get("/api/v1/namespaces/kubeflow").await.unwrap();
    assert!(
        ns["metadata"].get("labels").is_none(),
        "an imported namespace was modified: {ns}"
    );

    // The status route, from the watch cache, with 200 nodes and 5,000 pods.
    let first = get(&client, format!("{base}/api/clusters/theirs/status")).await;
    assert_eq!(first["cache"]["nodes"], 200, "{}", first["cache"]);
    assert_eq!(first["cache"]["pods"], 5000);
    assert_eq!(first["pendingGpuPods"], 1667);
    assert_eq!(first["gpusTotal"], 1600);
    assert_eq!(first["nodes"].as_array().unwrap().len(), 200);
    // The metrics report the watch cache behind it.
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (kind, n) in [("node", 200), ("pod", 5000)] {
        let line =
            format!(r#"instantstart_watch_cache_objects{{cluster="theirs",kind="{kind}"}} {n}"#);
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in\n{metrics}"
        );
    }
    assert!(metrics.contains(r#"instantstart_watch_cache_synced{cluster="theirs"} 1"#));
    let mut samples = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let r = client
            .get(format!("{base}/api/clusters/theirs/status"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let _ = r.bytes().await.unwrap();
        samples.push(t.elapsed());
    }
    samples.sort();
    println!(
        "BENCH GET /api/clusters/{{name}}/status (200 nodes, 5000 pods, debug build): p50 {:?}, p99 {:?}, max {:?}",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
        samples[samples.len() - 1]
    );

    // Pollers pay nothing while nothing changes: the ETag comes back as 304, no body.
    let status_url = format!("{base}/api/clusters/theirs/status");
    let r = client.get(&status_url).send().await.unwrap();
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with("W/\""), "{etag}");
    let again = |tag: String| {
        let req = client.get(&status_url).header("if-none-match", tag);
        async move { req.send().await.unwrap() }
    };
    let r = again(etag.clone()).await;
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(r.headers()["etag"].to_str().unwrap(), etag);
    assert!(r.bytes().await.unwrap().is_empty());
    // A client that takes gzip (every browser) gets the same answer encoded, a fraction of it.
    let plain = client.get(&status_url).send().await.unwrap();
    assert_eq!(plain.headers()["vary"], "accept-encoding");
    assert!(plain.headers().get("content-encoding").is_none());
    let plain_tag = plain.headers()["etag"].clone();
    let plain = plain.bytes().await.unwrap();
    let encoded = client
        .get(&status_url)
        .header("accept-encoding", "br, gzip;q=0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(encoded.headers()["content-encoding"], "gzip");
    assert_eq!(encoded.headers()["etag"], plain_tag);
    let encoded = encoded.bytes().await.unwrap();
    assert!(
        encoded.len() * 10 < plain.len(),
        "{} of {}",
        encoded.len(),
        plain.len()
    );
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&encoded[..]),
        &mut inflated,
    )
    .unwrap();
    assert_eq!(inflated, plain);
    // Refused by its weight: plain, even where `*` would take it.
    let r = client
        .get(&status_url)
        .header("accept-encoding", "gzip;q=0, *")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("content-encoding").is_none());
    assert_eq!(r.bytes().await.unwrap(), plain);
    // One more pending GPU pod: a new view, a new ETag, and the old one gets the body again.
    emu.send(
        reqwest::Method::POST,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one-more", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
               "status": {"phase": "Pending"}}),
        "application/json",
    )
    .await;
    let mut changed = None;
    for _ in 0..400 {
        let r = again(etag.clone()).await;
        if r.status() == StatusCode::OK {
            let tag = r.headers()["etag"].to_str().unwrap().to_string();
            changed = Some((tag, r.json::<Value>().await.unwrap()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (tag, body) = changed.expect("the new pod changes the view");
    assert_ne!(tag, etag);
    assert_eq!(body["pendingGpuPods"], 1668);
    assert_eq!(
        body["pendingGpus"],
        first["pendingGpus"].as_u64().unwrap() + 2
    );
    assert_eq!(body["cache"]["pods"], 5001);
    assert_eq!(again(tag).await.status(), StatusCode::NOT_MODIFIED);

    // What the watch notices reaches the UI's event stream, pushed (not polled): a node
    // turning NotReady, then a GPU pod the scheduler marks unschedulable (the pod above, only
    // Pending, was no news).
    let mut events = events_socket(&base).await;
    let node_name = emu.items("/api/v1/nodes").await[7]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    emu.merge_patch(&format!("/api/v1/nodes/{node_name}"),
        json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                          "message": "PLEG is not healthy"}]}}))
    .await;
    let told = next_change(&mut events).await;
    assert_eq!(
        (&told["cluster"], &told["kind"], &told["object"]),
        (
            &json!("theirs"),
            &json!("node-not-ready"),
            &json!(node_name)
        ),
        "{told}"
    );
    assert_eq!(told["detail"], "KubeletNotReady: PLEG is not healthy");
    emu.merge_patch("/api/v1/namespaces/default/pods/one-more/status",
        json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/200 nodes are available: 200 Insufficient nvidia.com/gpu."}]}}))
    .await;
    let told = next_change(&mut events).await;
    assert_eq!(
        (&told["kind"], &told["object"]),
        (&json!("pod-pending-for-gpus"), &json!("default/one-more")),
        "{told}"
    );
    assert!(told["detail"]
        .as_str()
        .unwrap()
        .contains("Insufficient nvidia.com/gpu"));
    // And the node's return.
    emu.merge_patch(
        &format!("/api/v1/nodes/{node_name}"),
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
    assert_eq!(next_change(&mut events).await["kind"], "node-ready");

    // Handed back: forgetting drops the record and touches nothing of theirs.
    run_ok(&client, &base, "/api/clusters/theirs/forget", None, None).await;
    let r = client
        .get(format!("{base}/api/clusters/theirs"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let eks_status = eks.describe_cluster().name("theirs").send().await.unwrap();
    assert!(eks_status.cluster().is_some(), "their EKS cluster is kept");
    let hp = sagemaker
        .describe_cluster()
        .cluster_name("their-hp")
        .send()
        .await
        .unwrap();
    assert_eq!(
        hp.cluster_name(),
        Some("their-hp"),
        "their HyperPod cluster is kept"
    );
    // And it can be imported again.
    import().await;
}

/// A model server's answer through the API server's proxy is relayed as JSON up to its cap;
/// a longer one is refused as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_servers_answer_is_read_to_its_cap_and_no_further() {
    use instantstart::cloud::ServiceCall;
    let emu = KubeEmulator::start(&[]).await;
    let (kube, target) = emulator_adapter(&emu);
    let call = ServiceCall {
        namespace: "default",
        name: "qwen",
        port: 8000,
        path: "v1/chat/completions",
    };
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    let seed = |answer: Value| {
        emu.send(
            reqwest::Method::POST,
            "/_emulator/service-answers/default/qwen",
            answer,
            "application/json",
        )
    };
    seed(json!({"answer": {"choices": [{"message": {"content": "hello"}}]}})).await;
    let answer = kube.service_post(&target, &call, &body).await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "hello");
    seed(json!({"bytes": 6 << 20})).await;
    let flood = kube.service_post(&target, &call, &body).await.unwrap_err();
    assert_eq!(flood.code, "AnswerTooLarge", "{flood:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feature_objects_are_applied_read_back_and_removed() {
    use instantstart::service::steps::features;
    let emu = KubeEmulator::start(&[]).await;
    let (kube, target) = emulator_adapter(&emu);
    kube.apply(&target, &features::node_class(&["workers".into()]))
        .await
        .expect("node class applied");
    kube.apply(&target, &features::node_pool())
        .await
        .expect("node pool applied");
    let class = emu
        .get("/apis/karpenter.sagemaker.amazonaws.com/v1/hyperpodnodeclasses/instantstart")
        .await
        .expect("stored by the API server");
    assert_eq!(class["spec"]["instanceGroups"], json!(["workers"]));
    let pool = emu
        .get("/apis/karpenter.sh/v1/nodepools/instantstart")
        .await
        .expect("stored by the API server");
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["kind"],
        "HyperpodNodeClass"
    );
    // Read back through the port, as the features view does.
    let read = kube
        .get(&target, &features::node_class_ref())
        .await
        .unwrap()
        .expect("the port finds it");
    assert_eq!(read["spec"]["instanceGroups"], json!(["workers"]));
    // Tiered checkpointing: the service account carries its role, and goes when disabled.
    let role = "arn:aws:iam::111122223333:role/demo-checkpoints";
    kube.apply(&target, &features::checkpoint_service_account(role))
        .await
        .unwrap();
    let sa = emu
        .get("/api/v1/namespaces/default/serviceaccounts/hyperpod-checkpointing")
        .await
        .expect("stored by the API server");
    assert_eq!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        role
    );
    kube.delete(&target, &features::checkpoint_sa_ref())
        .await
        .unwrap();
    assert!(emu
        .get("/api/v1/namespaces/default/serviceaccounts/hyperpod-checkpointing")
        .await
        .is_none());
    kube.delete(&target, &features::node_pool_ref())
        .await
        .unwrap();
    kube.delete(&target, &features::node_class_ref())
        .await
        .unwrap();
    assert!(emu
        .get("/apis/karpenter.sh/v1/nodepools/instantstart")
        .await
        .is_none());
    assert!(emu
        .get("/apis/karpenter.sagemaker.amazonaws.com/v1/hyperpodnodeclasses/instantstart")
        .await
        .is_none());
}

/// The UI's event stream, opened as the UI opens it.
async fn events_socket(base: &str) -> Ws {
    ws_open(base, "/api/events", "instantstart.events")
        .await
        .expect("events socket")
}

/// The next cluster change pushed on the event stream (operation messages are passed over).
async fn next_change(ws: &mut Ws) -> Value {
    loop {
        let msg = ws_next(ws).await.expect("the socket stays open");
        if msg["type"] == "cluster" {
            assert_eq!(msg["missed"], 0, "{msg}");
            let events = msg["events"].as_array().unwrap();
            assert_eq!(events.len(), 1, "one change at a time here: {msg}");
            return events[0].clone();
        }
    }
}
