//! InstantStart: an out-of-band control plane for SageMaker HyperPod clusters on EKS.
//!
//! ```text
//!  browser / curl / agent ──► api/ (axum: edge guard, REST handlers) ──► service/ (stages)
//!                                                                           │
//!                               ops/ (durable operations in SQLite) ◄───────┘
//!                                 │ calls ports only
//!                               cloud.rs ── crates/: ports · aws (SDK) · kube (kube-rs) · sandbox (embedded)
//! ```
//!
//! [`build_app`] is the one constructor, used by `main` and by the tests.

pub mod api;
pub mod cloud;
pub mod config;
pub mod error;
pub mod heap;
pub mod mcp;
pub mod ops;
pub mod problem;
pub mod service;
pub mod state;
pub mod store;

pub use state::{AppParts, AppState};

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use cloud::sandbox::{Faults, Sandbox, SandboxConfig};
use cloud::{Cloud, CloudMode};
use config::ServeConfig;
use ops::{Engine, EngineConfig};
use store::Store;

/// A bound, ready-to-serve application.
pub struct App {
    listener: TcpListener,
    router: api::Http,
    limits: config::ConnLimits,
    pub state: AppState,
}

impl App {
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Serves until the process is stopped (SIGINT/SIGTERM end it gracefully).
    pub async fn run(self) -> anyhow::Result<()> {
        // The accept loop runs on a worker, not on the thread that waits in `main`: a task
        // spawned from a worker goes to that worker's own queue, where one spawned from outside
        // goes through the shared queue and wakes a parked worker, a system call per
        // connection. 200 clients connecting at once cost the main thread 30–90 ms of CPU.
        // Each connection gets a clone of the one edge and router: a `Router` served as it is
        // turns its routes into services for every connection (axum's `Router::with_state`
        // per accept), one 37 KB allocation and ~70 smaller ones each time a client connected.
        // Start-up is over: what it built and dropped (the routes, the OpenAPI document) goes
        // back to the system instead of staying resident for the process's life.
        heap::give_back();
        let serving = api::serve::serve(self.listener, self.router, self.limits, shutdown_signal());
        tokio::spawn(serving)
            .await
            .context("the server task ended abnormally")?
            .context("serving")
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// The real AWS cloud, or — when no region is configured — one that refuses every call with
/// the reason. Either way the server starts and says what is missing.
async fn aws_cloud(
    kube_url: Option<&str>,
    permissions_boundary: Option<String>,
    mlflow_endpoint: Option<String>,
) -> (Cloud, Option<String>) {
    let Some(aws) = cloud::aws::Aws::load(permissions_boundary, mlflow_endpoint).await else {
        let reason = "no AWS region is configured (set AWS_REGION, or a profile with a region); start with --cloud sandbox to try every flow without AWS".to_string();
        let cloud = Arc::new(cloud::unavailable::Unavailable {
            region: String::new(),
            reason: reason.clone(),
        })
        .cloud();
        return (cloud, Some(reason));
    };
    let kube: Arc<dyn cloud::Kube> = match (kube_url, aws.config.credentials_provider()) {
        (Some(url), _) => Arc::new(cloud::kube::KubeRs::new(cloud::kube::KubeAuth::Url(
            url.to_string(),
        ))),
        (None, Some(provider)) => Arc::new(cloud::kube::KubeRs::new(cloud::kube::KubeAuth::Eks(
            Arc::new(cloud::kube::token::EksTokens::new(
                provider,
                aws.region.clone(),
            )),
        ))),
        (None, None) => Arc::new(cloud::unavailable::Unavailable {
            region: aws.region.clone(),
            reason: "no AWS credentials provider: Kubernetes API tokens cannot be minted".into(),
        }),
    };
    let credentials = aws.check_credentials().await;
    let warning = credentials.err().map(|e| {
        format!("no usable AWS credentials ({e}): every AWS call will fail; configure credentials, or start with --cloud sandbox")
    });
    (aws.cloud(kube), warning)
}

/// The streamable-HTTP MCP service. Host/Origin and token are checked by the edge layer in
/// front of it, so rmcp's own host list is not used.
fn mcp_service(
    cx: Arc<mcp::McpContext>,
    sessions: Arc<LocalSessionManager>,
) -> rmcp::transport::StreamableHttpService<mcp::McpServer, LocalSessionManager> {
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    StreamableHttpService::new(
        move || Ok(mcp::McpServer { cx: cx.clone() }),
        sessions,
        StreamableHttpServerConfig::default().disable_allowed_hosts(),
    )
}

/// Opens the store, builds the cloud, binds the listener, resumes unfinished operations.
pub async fn build_app(config: ServeConfig) -> anyhow::Result<App> {
    // One TLS provider for every client of the process (Kubernetes, release files).
    cloud::kube::install_crypto_provider();
    let ip = config.bind.ip();
    // When people sign in, every request but the open ones needs a session or an agent token,
    // which stands in for the shared token (and takes the bearer header an agent token uses).
    let people_sign_in = config.identity != service::people::IdentityMode::None;
    if people_sign_in && config.token.is_some() {
        anyhow::bail!("INSTANTSTART_TOKEN and --identity iam exclude each other: when people sign in, each agent carries its person's own token");
    }
    if !ip.is_loopback() && config.token.is_none() && !people_sign_in {
        anyhow::bail!(
            "refusing to listen on {} without a token or --identity iam: set INSTANTSTART_TOKEN (16+ characters), or bind 127.0.0.1",
            config.bind
        );
    }
    let data_dir = config.data_dir();
    let store = Store::open(&data_dir).await?;
    tracing::info!(data_dir = %data_dir.display(), "store opened");

    let (mut cloud, sandbox, cloud_warning) = match config.cloud {
        CloudMode::Sandbox => {
            let faults = Faults::parse(&config.sandbox_faults)
                .map_err(|e| anyhow::anyhow!("INSTANTSTART_SANDBOX_FAULTS: {e}"))?;
            if config.sandbox_time_scale.is_nan() || config.sandbox_time_scale <= 0.0 {
                anyhow::bail!("INSTANTSTART_SANDBOX_TIME_SCALE must be a positive number");
            }
            let sandbox = Sandbox::new(
                store.pool.clone(),
                store.writer.clone(),
                SandboxConfig {
                    time_scale: config.sandbox_time_scale,
                    faults,
                },
            )
            .await?;
            tracing::warn!("SANDBOX MODE: a simulated AWS account; nothing touches real AWS");
            (sandbox.cloud(), Some(sandbox), None)
        }
        CloudMode::Aws => {
            if let Some(b) = &config.permissions_boundary {
                service::cluster::validate::policy_arn("INSTANTSTART_PERMISSIONS_BOUNDARY", b)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            if let Some(e) = &config.mlflow_endpoint {
                anyhow::ensure!(
                    cloud::web::allowed_url(e),
                    "INSTANTSTART_MLFLOW_ENDPOINT: `{e}` is neither an HTTPS URL nor a loopback one"
                );
            }
            let (cloud, warning) = aws_cloud(
                config.kube_url.as_deref(),
                config.permissions_boundary.clone(),
                config.mlflow_endpoint.clone(),
            )
            .await;
            if let Some(w) = &warning {
                tracing::warn!("{w}");
            }
            (cloud, None, warning)
        }
    };

    if let Some(bucket) = config.shared_bucket.as_deref().filter(|b| !b.is_empty()) {
        service::storage::bucket::check_shared_bucket_setting(bucket)
            .map_err(|e| anyhow::anyhow!("INSTANTSTART_SHARED_BUCKET: {e}"))?;
        cloud.shared_bucket = Some(Arc::from(bucket));
    }
    let patterns: Vec<String> = config
        .data_buckets
        .iter()
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .collect();
    for p in &patterns {
        service::storage::bucket::check_data_bucket_setting(p)
            .map_err(|e| anyhow::anyhow!("INSTANTSTART_DATA_BUCKETS: {e}"))?;
    }
    if config.cloud == CloudMode::Sandbox || config.permissions_boundary.is_some() {
        cloud.data_buckets = Some(patterns.into());
    }
    // Repeatable Kubernetes calls ride out throttling and transient faults one by one.
    cloud.kube = Arc::new(cloud::retry::RetryingKube(cloud.kube.clone()));
    if let Some(mirror) = &config.release_mirror {
        anyhow::ensure!(
            cloud::web::allowed_url(mirror),
            "INSTANTSTART_RELEASE_MIRROR: `{mirror}` is neither an HTTPS URL nor a loopback one"
        );
        cloud.releases = Arc::new(cloud::web::HttpReleases::new(Some(mirror.clone())));
    }
    let poll = Duration::from_millis(config.poll_interval_ms.unwrap_or(match config.cloud {
        CloudMode::Sandbox => 250,
        CloudMode::Aws => 10_000,
    }));
    let deadlines = ops::Deadlines::parse(&config.phase_deadlines)
        .map_err(|e| anyhow::anyhow!("INSTANTSTART_PHASE_DEADLINES: {e}"))?;
    let engine = Engine::new(
        store,
        cloud,
        Arc::new(service::steps::OperationKinds),
        EngineConfig {
            poll_interval: poll,
            // Transient errors are ridden out until the phase's deadline, however many.
            max_transient_retries: u32::MAX,
            deadlines,
        },
    );

    let people = people(&config, &engine).await?;

    let listener = TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("binding {}", config.bind))?;
    let port = listener.local_addr()?.port();
    let edge = Arc::new(api::EdgePolicy::new(
        port,
        ip,
        &config.allowed_hosts,
        config.token.clone(),
    ));
    // An empty variable (`INSTANTSTART_ALLOWED_FEATURES=`) means "no restriction".
    let allowed_features: Vec<String> = config
        .allowed_features
        .iter()
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .collect();
    for f in &allowed_features {
        if service::steps::features::feature(f).is_none() {
            let known: Vec<&str> = service::steps::features::FEATURES
                .iter()
                .map(|f| f.key)
                .collect();
            anyhow::bail!(
                "INSTANTSTART_ALLOWED_FEATURES: unknown feature `{f}` (known: {})",
                known.join(", ")
            );
        }
    }
    if let Some(url) = &config.prometheus_url {
        service::workloads::check_prometheus_setting(url)?;
    }
    if let Some(id) = &config.grafana_workspace {
        service::features::dashboards::check_workspace_id(id)
            .map_err(|e| anyhow::anyhow!("INSTANTSTART_GRAFANA_WORKSPACE: {e}"))?;
    }
    let pod_packages = service::training::PodPackages::parse(config.pod_package_index.as_deref())?;
    let mcp_sessions = Arc::new(LocalSessionManager::default());
    let state = AppState(Arc::new(AppParts {
        engine: engine.clone(),
        edge,
        people,
        sandbox,
        cloud_warning,
        allowed_features: Arc::new(allowed_features),
        caps: Arc::new(service::caps::Caps::new(
            &config.limits,
            config.max_log_follows,
        )),
        mcp_sessions: mcp_sessions.clone(),
        prometheus_url: config.prometheus_url.as_deref().map(Arc::from),
        grafana_workspace: config.grafana_workspace.as_deref().map(Arc::from),
        pod_packages: Arc::new(pod_packages),
        status_memo: Arc::default(),
        list_memo: Arc::default(),
        space_sessions: Arc::default(),
        price_book: Arc::default(),
        health: Default::default(),
        agent_profile: || (mcp::kiro::profile(), mcp::kiro::agent()),
    }));
    let mcp = mcp::McpContext::new(
        format!("localhost:{port}"),
        config.token.as_ref().map(|t| t.0.clone()),
        config.mcp_read_only,
    );
    let router = api::router(state.clone(), mcp_service(mcp.clone(), mcp_sessions));
    // The MCP tools dispatch into this same router (edge, validation, audit included).
    let _ = mcp.router.set(router.clone());
    let _ = mcp.audit.set(engine.clone());

    // The audit trail keeps what its retention says: pruned now, then daily.
    service::audit::prune(&engine, config.audit_retention_days).await?;
    service::audit::keep(engine.clone(), config.audit_retention_days);
    let resumed = engine.resume_all().await?;
    service::warm_caches(engine.clone());
    // Cost history is written as it happens: node lifetimes and who holds the GPUs.
    service::costs::sample::spawn(engine.clone());
    tracing::info!(address = %listener.local_addr()?, cloud = config.cloud.as_str(), resumed, "listening");
    Ok(App {
        listener,
        router,
        limits: config.limits,
        state,
    })
}

/// One GET to the local server at `bind` (a wildcard address means this host's loopback), with
/// the bearer token when one is given: its status line and body.
async fn local_get(
    bind: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
    wait: Duration,
) -> anyhow::Result<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let target = if bind.ip().is_unspecified() {
        std::net::SocketAddr::from(([127, 0, 0, 1], bind.port()))
    } else {
        bind
    };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(target).await?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost:{}\r\n{auth}Connection: close\r\n\r\n",
            target.port()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(wait, exchange)
        .await
        .with_context(|| format!("no answer within {} s", wait.as_secs()))??;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next().unwrap_or_default().to_string();
    Ok((status_line, body.to_string()))
}

/// The container health check: exit 0 when the server at `bind` answers `/healthz` with 200.
pub async fn probe(bind: std::net::SocketAddr) -> anyhow::Result<()> {
    let (status_line, _) = local_get(bind, "/healthz", None, Duration::from_secs(5)).await?;
    anyhow::ensure!(
        status_line.starts_with("HTTP/1.1 200"),
        "unhealthy: {status_line}"
    );
    Ok(())
}

/// `instantstart doctor`: asks the running server at `bind` for its first-contact check of the
/// account (`GET /api/aws/doctor`), prints each call its role is denied with the fix, and fails
/// when there is one.
pub async fn doctor(bind: std::net::SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
    let (status_line, body) =
        local_get(bind, "/api/aws/doctor", token, Duration::from_secs(120)).await?;
    anyhow::ensure!(
        status_line.starts_with("HTTP/1.1 200"),
        "the doctor could not run: {status_line}: {body}"
    );
    let report: serde_json::Value = serde_json::from_str(&body).context("the doctor's answer")?;
    let denied = report["denied"].as_array().cloned().unwrap_or_default();
    println!(
        "{}: {} calls checked in {}, {} denied",
        report["principal"].as_str().unwrap_or_default(),
        report["checked"],
        report["region"].as_str().unwrap_or_default(),
        denied.len()
    );
    for d in &denied {
        println!(
            "- {} on {} ({}): {}",
            d["action"].as_str().unwrap_or_default(),
            d["resource"].as_str().unwrap_or_default(),
            d["decision"].as_str().unwrap_or_default(),
            d["fix"].as_str().unwrap_or_default()
        );
    }
    for m in report["missingAddons"].as_array().into_iter().flatten() {
        println!("- {}", m["fix"].as_str().unwrap_or_default());
    }
    let quotas = report["quotas"].as_array().cloned().unwrap_or_default();
    println!(
        "{} instance types with a HyperPod cluster-usage quota",
        quotas.len()
    );
    let fixes = [&report["quotaFix"], &report["sharedBucket"]["fix"]];
    for fix in fixes.into_iter().filter_map(serde_json::Value::as_str) {
        println!("- {fix}");
    }
    anyhow::ensure!(
        report["status"] != "denied",
        "{} calls would be denied{}",
        denied.len(),
        if report["sharedBucket"]["fix"].is_string() {
            ", and the shared bucket is unusable"
        } else {
            ""
        }
    );
    Ok(())
}

/// The sign-in settings, with the administrators list seeded, when people sign in; a line at
/// start says which mode the server is in.
async fn people(
    config: &ServeConfig,
    engine: &Engine,
) -> anyhow::Result<Option<Arc<service::people::People>>> {
    use service::people::{IdentityMode, People};
    if config.identity == IdentityMode::None {
        tracing::info!("local single-user mode: no sign-in (--identity iam turns people on)");
        return Ok(None);
    }
    anyhow::ensure!(
        config.cloud == CloudMode::Aws,
        "--identity iam needs --cloud aws: people sign in with STS, which the sandbox has not"
    );
    let deployment = config.deployment_id.trim();
    anyhow::ensure!(
        !deployment.is_empty() && deployment.len() <= 128,
        "INSTANTSTART_DEPLOYMENT_ID: 1–128 characters (a stack name is at most 128)"
    );
    service::people::seed_admins(engine, &config.admins).await?;
    anyhow::ensure!(
        !engine.store().admins().await?.is_empty(),
        "--identity iam needs at least one administrator: --admin <IAM user or role ARN>"
    );
    let region = engine.cloud().network.region();
    tracing::info!(deployment, "people sign in with their AWS identity");
    Ok(Some(Arc::new(People {
        deployment: deployment.to_string(),
        partition: service::shared::arn::partition_of_region(&region),
    })))
}
