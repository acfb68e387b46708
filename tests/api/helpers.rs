//! Spawning the app (in-process or as the real binary) and talking to it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use instantstart::config::ServeConfig;
use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};

pub const PIPELINE: &str = r#"{"name": "demo", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge", "instanceCount": 2, "capacityType": "on-demand"}"#;

pub struct TestApp {
    pub base: String,
    pub client: Client,
    /// The server's ports, to set up what someone else made in the account or the cluster.
    pub cloud: instantstart::cloud::Cloud,
    /// Keeps the temp data directory alive as long as the app.
    pub _dir: tempfile::TempDir,
}

/// Options for [`spawn_app_with`].
#[derive(Default)]
pub struct Opts {
    pub faults: Option<&'static str>,
    /// Connection cap and request-head deadline (the defaults otherwise).
    pub limits: Option<instantstart::config::ConnLimits>,
    pub time_scale: Option<f64>,
    pub token: Option<&'static str>,
    pub allowed_hosts: Vec<String>,
    pub allowed_features: Vec<String>,
    pub release_mirror: Option<String>,
    pub phase_deadlines: Option<&'static str>,
    pub mcp_read_only: bool,
    /// `--shared-bucket`.
    pub shared_bucket: Option<&'static str>,
    /// Creates the shared bucket in the simulated account first, as the stack would have.
    pub create_shared_bucket: bool,
    /// `--data-bucket`: buckets beyond the deployment's own that the boundary grants.
    pub data_buckets: Vec<&'static str>,
    /// `--grafana-workspace`.
    pub grafana_workspace: Option<&'static str>,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Opts::default()).await
}

pub async fn spawn_app_with(opts: Opts) -> TestApp {
    init_log();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = ServeConfig::sandbox(dir.path().to_path_buf());
    // 6000× makes a 10-minute EKS creation take 0.1 s.
    config.sandbox_time_scale = opts.time_scale.unwrap_or(6000.0);
    config.sandbox_faults = opts.faults.unwrap_or("").to_string();
    config.poll_interval_ms = Some(20);
    config.token = opts.token.map(|t| t.parse().expect("token"));
    config.allowed_hosts = opts.allowed_hosts;
    config.allowed_features = opts.allowed_features;
    config.release_mirror = opts.release_mirror;
    config.phase_deadlines = opts.phase_deadlines.unwrap_or("").to_string();
    config.mcp_read_only = opts.mcp_read_only;
    config.shared_bucket = opts.shared_bucket.map(str::to_string);
    config.data_buckets = opts.data_buckets.iter().map(|b| b.to_string()).collect();
    config.grafana_workspace = opts.grafana_workspace.map(str::to_string);
    config.limits = opts.limits.unwrap_or_default();
    let app = instantstart::build_app(config).await.expect("app builds");
    if let (Some(bucket), true) = (opts.shared_bucket, opts.create_shared_bucket) {
        app.state
            .engine
            .cloud()
            .objects
            .create_bucket(bucket, &Default::default())
            .await
            .expect("the shared bucket");
    }
    let base = format!("http://127.0.0.1:{}", app.port());
    let cloud = app.state.engine.cloud().clone();
    tokio::spawn(app.run());
    TestApp {
        base,
        client: Client::new(),
        cloud,
        _dir: dir,
    }
}

fn init_log() {
    if std::env::var_os("TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_test_writer()
            .try_init();
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request")
    }

    /// `GET path` with one header.
    pub async fn get_with(&self, path: &str, name: &str, value: impl AsRef<str>) -> Response {
        self.client
            .get(self.url(path))
            .header(name, value.as_ref())
            .send()
            .await
            .expect("request")
    }

    pub async fn post_raw(&self, path: &str, body: &str) -> Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("request")
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.post_raw(path, &body.to_string()).await
    }

    pub async fn json(&self, path: &str) -> Value {
        let r = self.get(path).await;
        assert_eq!(r.status(), StatusCode::OK, "GET {path}");
        r.json().await.expect("json")
    }

    /// Submits and returns the operation id, asserting `202`.
    pub async fn start(&self, path: &str, body: &Value) -> String {
        let r = self.post(path, body).await;
        let status = r.status();
        let body: Value = r.json().await.expect("json");
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        body["operationId"]
            .as_str()
            .expect("operationId")
            .to_string()
    }

    /// Long-polls an operation until it is terminal (bounded: 60 polls of up to 2 s).
    pub async fn wait_terminal(&self, id: &str) -> Value {
        wait_terminal(&self.client, &self.base, id).await
    }

    /// DELETEs a path that starts an operation; returns the operation once terminal.
    pub async fn delete_and_wait(&self, path: &str) -> Value {
        delete_and_wait(&self.client, &self.base, path).await
    }

    pub async fn calls(&self) -> Value {
        self.json("/api/sandbox/calls").await
    }
}

pub async fn delete_and_wait(client: &Client, base: &str, path: &str) -> Value {
    let r = client
        .delete(format!("{base}{path}"))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(r.status(), StatusCode::ACCEPTED, "DELETE {path}");
    let accepted: Value = r.json().await.expect("json");
    let id = accepted["operationId"].as_str().expect("operationId");
    wait_terminal(client, base, id).await
}

pub async fn wait_terminal(client: &Client, base: &str, id: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..60 {
        last = client
            .get(format!("{base}/api/operations/{id}?wait=2"))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        if ["succeeded", "failed", "cancelled"].contains(&last["state"].as_str().unwrap_or("")) {
            return last;
        }
    }
    panic!("operation {id} did not finish: {last}");
}

/// Every mutating call the sandbox accepted, over all APIs.
pub fn mutating_calls(calls: &Value) -> i64 {
    calls["accepted"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_i64)
        .sum()
}

pub fn accepted_count(calls: &Value, api: &str) -> i64 {
    calls["accepted"][api].as_i64().unwrap_or(0)
}

/// Asserts a problem+json answer and returns its body.
pub async fn problem(r: Response, status: StatusCode) -> Value {
    assert_eq!(r.status(), status);
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert_eq!(ct, "application/problem+json");
    let body: Value = r.json().await.expect("json");
    assert!(
        body["type"]
            .as_str()
            .unwrap_or("")
            .starts_with("urn:instantstart:problem:"),
        "{body}"
    );
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body
}

/// The real binary, for crash tests.
pub struct Server {
    child: std::process::Child,
    pub base: String,
    /// Where the binary's output goes: a failing test shows its end.
    pub log: PathBuf,
}

impl Server {
    /// The binary's process id (its memory is read from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The binary in sandbox mode at the given time scale.
    pub fn start(data_dir: &Path, port: u16, time_scale: f64) -> Self {
        let scale = time_scale.to_string();
        Self::spawn(
            data_dir,
            port,
            &["--cloud", "sandbox"],
            &[("INSTANTSTART_SANDBOX_TIME_SCALE", scale.as_str())],
        )
    }

    /// The binary with extra arguments and environment. The environment is scrubbed of AWS
    /// settings and instance-metadata lookups are off: a test never reaches a non-loopback address.
    pub fn spawn(data_dir: &Path, port: u16, args: &[&str], env: &[(&str, &str)]) -> Self {
        let log_path = data_dir.join(format!("server-{port}.log"));
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_instantstart"));
        cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .args(args)
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        for (k, _) in std::env::vars() {
            if k.starts_with("AWS_") || k.starts_with("INSTANTSTART_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", data_dir.join("no-aws-config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                data_dir.join("no-aws-credentials"),
            )
            .env("INSTANTSTART_POLL_INTERVAL_MS", "25");
        if args.contains(&"aws") {
            // Release files from a loopback port nothing listens on, unless a test serves them.
            cmd.env("INSTANTSTART_RELEASE_MIRROR", "http://127.0.0.1:9");
        }
        cmd.envs(env.iter().copied());
        let child = cmd.spawn().expect("spawn server");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log: log_path,
        }
    }

    /// Waits until `/healthz` answers (bounded).
    pub async fn ready(&self, client: &Client) {
        for _ in 0..200 {
            if client
                .get(format!("{}/healthz", self.base))
                .send()
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("server did not start");
    }

    /// The last `lines` lines the binary printed.
    pub fn log_tail(log: &Path, lines: usize) -> String {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn kill9(mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill -9");
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

pub fn temp_dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("temp dir");
    let p = d.path().to_path_buf();
    (d, p)
}

pub fn pipeline_body() -> Value {
    serde_json::from_str(PIPELINE).expect("pipeline json")
}

pub fn phase_state(op: &Value, name: &str) -> String {
    op["phases"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .and_then(|p| p["state"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The project venv's Python, where ./scripts/test installs the test peers (moto, the MCP SDK,
/// kmock); `INSTANTSTART_PYTHON` overrides it.
pub fn venv_python() -> std::path::PathBuf {
    let python = std::env::var_os("INSTANTSTART_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
        });
    assert!(
        python.exists(),
        "{} not found: run ./scripts/test, which installs the test peers",
        python.display()
    );
    python
}

/// A peer script under tests/peers.
pub fn peer(script: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(script)
}

/// Runs a schema peer (`tests/peers/<script>`) on a JSON list of manifests and asserts that it
/// passed and checked every one of them.
pub fn assert_peer_accepts(script: &str, manifests: &[Value]) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_string(manifests).unwrap()).unwrap();
    let out = std::process::Command::new(venv_python())
        .arg(peer(script))
        .arg(file.path())
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains(&format!("checked {}", manifests.len())),
        "{report}"
    );
}

/// A loopback HTTP server over a directory (Python's http.server), killed on drop.
pub struct Mirror {
    child: std::process::Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The upstream CRDs and example manifests the tests check against: byte-for-byte copies in
/// `tests/fixtures/crds` (provenance in its README); `INSTANTSTART_CRDS_DIR` points elsewhere.
pub fn crds_dir() -> PathBuf {
    std::env::var_os("INSTANTSTART_CRDS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crds"))
}

/// Serves the upstream CRDs ([`crds_dir`]), minus `leave_out`, plus `extra` files.
pub async fn mirror(leave_out: &[&str], extra: &[(&str, &str)]) -> Mirror {
    let dir = tempfile::tempdir().unwrap();
    let source = crds_dir();
    let entries = std::fs::read_dir(&source)
        .unwrap_or_else(|e| panic!("the CRD folder {}: {e}", source.display()));
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".yaml") && !leave_out.contains(&name.as_str()) {
            std::os::unix::fs::symlink(e.path(), dir.path().join(&name)).unwrap();
        }
    }
    for (name, text) in extra {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let port = free_port();
    let child = std::process::Command::new(venv_python())
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
            "--directory",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the mirror");
    let url = format!("http://127.0.0.1:{port}");
    wait_listening(port).await;
    Mirror {
        child,
        url,
        _dir: dir,
    }
}

async fn wait_listening(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the mirror never listened on {port}");
}

/// Checks a folder of upstream copies against its README's provenance table (one row per file,
/// its sha256 in the last cell): every `ext` file under `subdirs` is listed, every listed file
/// is present, and each is byte for byte the blob the row names. Returns the listed files.
pub fn assert_provenance(dir: &std::path::Path, subdirs: &[&str], ext: &str) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut listed = std::collections::BTreeMap::new();
    for row in readme.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let sha = cells.last().copied().unwrap_or_default();
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue; // the header, its rule, or a row of another table
        }
        let file = cells[0].trim_matches('`').to_string();
        assert!(
            listed.insert(file.clone(), sha.to_string()).is_none(),
            "{file} listed twice"
        );
    }
    let mut present = Vec::new();
    for sub in subdirs {
        for e in std::fs::read_dir(dir.join(sub)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(ext) {
                present.push(format!("{sub}{name}"));
            }
        }
    }
    present.sort();
    assert_eq!(present, listed.keys().cloned().collect::<Vec<_>>());
    for (file, sha) in &listed {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(&actual, sha, "{file} is not the upstream blob");
    }
    present
}

/// Turns a managed feature of the `demo` cluster on or off; its operation, terminal.
pub async fn toggle(app: &TestApp, key: &str, on: bool) -> Value {
    let r = app
        .client
        .patch(app.url("/api/clusters/demo/features"))
        .json(&json!({ key: on }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED, "{key}");
    let body: Value = r.json().await.unwrap();
    let id = body["features"][key]["operationId"].as_str().unwrap();
    app.wait_terminal(id).await
}

/// A server with `opts` whose `demo` cluster is made (the default pipeline) and runs the
/// inference operator (with the FSx CSI driver it requires).
pub async fn inference_app(opts: Opts) -> TestApp {
    let app = spawn_app_with(opts).await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    enable(&app, "fsxCsi").await;
    enable(&app, "inferenceOperator").await;
    app
}

/// Turns a managed feature on for the `demo` cluster and waits for its operation to succeed.
pub async fn enable(app: &TestApp, key: &str) {
    assert_eq!(toggle(app, key, true).await["state"], "succeeded", "{key}");
}

/// The instance ids of the `demo` cluster's nodes, in the order the API lists them.
pub async fn node_ids(app: &TestApp) -> Vec<String> {
    let nodes = app.json("/api/clusters/demo/nodes").await;
    nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instanceId"].as_str().unwrap().to_string())
        .collect()
}

/// The names of an operation's phases, in order.
pub fn phase_names(op: &Value) -> Vec<&str> {
    op["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

/// A WebSocket to the server, as the tests open them.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the WebSocket at `path` with the subprotocol the UI names (`instantstart.events`,
/// `instantstart.logs`); a refusal comes back as its status and JSON body.
pub async fn ws_open(base: &str, path: &str, protocol: &str) -> Result<Ws, (u16, Value)> {
    ws_open_as(base, path, protocol, None).await
}

/// [`ws_open`] with a session cookie, as a signed-in person's browser opens it.
pub async fn ws_open_as(
    base: &str,
    path: &str,
    protocol: &str,
    cookie: Option<&str>,
) -> Result<Ws, (u16, Value)> {
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest as _, Error};
    let mut request = format!("{}{path}", base.replacen("http", "ws", 1))
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", protocol.parse().unwrap());
    if let Some(c) = cookie {
        request.headers_mut().insert("cookie", c.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(Error::Http(r)) => {
            let body = r.body().clone().unwrap_or_default();
            Err((
                r.status().as_u16(),
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        }
        Err(e) => panic!("websocket: {e}"),
    }
}

/// The next JSON message, or `None` when the server closed the socket.
pub async fn ws_next(ws: &mut Ws) -> Option<Value> {
    use futures::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("a message in time")?
            .expect("a frame");
        match m {
            Message::Text(t) => return Some(serde_json::from_str(&t).unwrap()),
            Message::Close(_) => return None,
            _ => {}
        }
    }
}
