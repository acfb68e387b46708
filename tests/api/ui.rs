//! The web UI: embedded files under a strict CSP, and the browser scenarios in Debian's headless
//! chromium (Playwright for Python, tests/peers/ui_scenarios.py) against the real binary.

use std::path::{Path, PathBuf};

use reqwest::{Client, StatusCode};

use crate::helpers::*;

/// The page and every embedded file, from the one list the server serves.
fn ui_files() -> Vec<String> {
    std::iter::once("/".to_string())
        .chain(
            instantstart::api::ui::ASSETS
                .iter()
                .map(|(name, _, _)| format!("/ui/{name}")),
        )
        .collect()
}

#[test]
fn every_file_of_the_web_folder_is_embedded() {
    let web = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web");
    for entry in std::fs::read_dir(web).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "index.html"
                || instantstart::api::ui::ASSETS
                    .iter()
                    .any(|(file, _, _)| *file == name),
            "web/{name} is not in api::ui::ASSETS"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_is_embedded_served_under_a_strict_csp_and_names_no_other_host() {
    let app = spawn_app().await;
    for path in ui_files() {
        let path = path.as_str();
        let r = app.get(path).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
            "{csp}"
        );
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        // The SVG namespace is an XML name, not a place the UI connects to.
        let body = r
            .text()
            .await
            .unwrap()
            .replace("'http://www.w3.org/2000/svg'", "");
        assert!(
            !body.contains("http://") && !body.contains("https://") && !body.contains("//cdn"),
            "{path} names another host"
        );
        if path == "/" {
            // Every script is a file of this origin: none inline, no inline handlers or styles.
            assert!(body.contains(r#"<script type="module" src="/ui/app.js"></script>"#));
            assert_eq!(body.matches("<script").count(), 1);
            assert!(!body.contains(" onclick=") && !body.contains(" style="));
        }
    }
    let r = app.get("/ui/nope.js").await;
    problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_ui_files_load_but_the_api_still_needs_it() {
    let (_guard, dir) = temp_dir();
    let port = free_port();
    let server = Server::spawn(
        &dir,
        port,
        &["--cloud", "sandbox"],
        &[("INSTANTSTART_TOKEN", "0123456789abcdef-token")],
    );
    let client = Client::new();
    server.ready(&client).await;
    for path in ui_files() {
        let r = client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    let r = client
        .get(format!("{}/api/clusters", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

fn chromium_scenarios(base: &str, log: &Path, out: &Path, scenarios: &[&str]) {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: ./scripts/test installs Debian's chromium"
    );
    let status = std::process::Command::new(venv_python())
        .arg(peer("ui_scenarios.py"))
        .arg(base)
        .arg(out)
        .args(scenarios)
        .status()
        .expect("run the browser scenarios");
    assert!(
        status.success(),
        "browser scenarios {scenarios:?} failed (screenshots in {}); the server's last lines:\n{}",
        out.display(),
        Server::log_tail(log, 60)
    );
    for s in scenarios {
        assert!(!out.join(format!("{s}-failure.png")).exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_scenarios_in_headless_chromium() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let client = Client::new();

    let (_g1, dir) = temp_dir();
    // With the account's Grafana workspace named, as a deployment with one runs.
    let server = Server::spawn(
        &dir,
        free_port(),
        &["--cloud", "sandbox"],
        &[
            ("INSTANTSTART_SANDBOX_TIME_SCALE", "3000"),
            (
                "INSTANTSTART_GRAFANA_WORKSPACE",
                instantstart::cloud::sandbox::GRAFANA_WORKSPACE,
            ),
        ],
    );
    server.ready(&client).await;
    let (base, log) = (server.base.clone(), server.log.clone());
    let out1 = out.clone();
    tokio::task::spawn_blocking(move || {
        chromium_scenarios(
            &base,
            &log,
            &out1,
            &[
                "slow-header",
                "create",
                "bad-input",
                "nodes",
                "features",
                "teams",
                "groups",
                "workloads",
                "training",
                "spaces",
                "costs",
                "utilization",
            ],
        )
    })
    .await
    .unwrap();

    // A first HyperPod creation that fails, and a slower clock so a reload lands mid-pipeline.
    let (_g2, dir) = temp_dir();
    let server = Server::spawn(
        &dir,
        free_port(),
        &["--cloud", "sandbox"],
        &[
            ("INSTANTSTART_SANDBOX_TIME_SCALE", "600"),
            ("INSTANTSTART_SANDBOX_FAULTS", "sagemaker:CreateCluster=1"),
        ],
    );
    server.ready(&client).await;
    let (base, log) = (server.base.clone(), server.log.clone());
    let out2 = out.clone();
    tokio::task::spawn_blocking(move || {
        chromium_scenarios(&base, &log, &out2, &["retry", "reload", "forget"])
    })
    .await
    .unwrap();

    for shot in [
        "progress",
        "bad-input",
        "cluster",
        "operations",
        "failed",
        "retried",
        "reloaded",
        "costs",
        "utilization",
    ] {
        let png = out.join(format!("{shot}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|_| panic!("{} missing", png.display()));
        assert!(bytes.starts_with(b"\x89PNG"), "{shot}");
    }
    println!("screenshots in {}", out.display());
}
