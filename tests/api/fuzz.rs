//! The OpenAPI document against the wire: schemathesis generates requests for every operation
//! from `/api/openapi.json` (valid and invalid, then stateful sequences) against a server with a
//! real cluster, and checks for server errors, undocumented statuses and content types, and
//! answers that do not match their schema.

use crate::helpers::*;

/// Requests the server counted (every route, every status), read from `/metrics`.
async fn requests_served(app: &TestApp) -> f64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("instantstart_http_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fuzzer_finds_the_server_true_to_its_openapi_document() {
    let app = spawn_app().await;
    // State to find: a cluster with its stages, nodes, dependencies and storage.
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");

    let before = requests_served(&app).await;
    let schemathesis = venv_python().with_file_name("schemathesis");
    let (_work_guard, work) = temp_dir();
    // A fixed seed by default, so a finding reproduces; INSTANTSTART_FUZZ_SEED explores others.
    let seed = std::env::var("INSTANTSTART_FUZZ_SEED").unwrap_or_else(|_| "20261201".into());
    let out = tokio::process::Command::new(&schemathesis)
        .arg("run")
        .arg(format!("{}/api/openapi.json", app.base))
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--max-examples",
            "5",
            "--workers",
            "1",
            "--seed",
            &seed,
            // Path parameters are free strings: most generated ones are filtered out as
            // unusable in a URL, which is expected, not a defect of the document.
            "--suppress-health-check",
            "filter_too_much",
            // A NUL cannot be sent in a header at all (HTTP refuses it before any route).
            "--generation-allow-x00",
            "false",
            "--no-color",
        ])
        // Hypothesis keeps its example database in the working directory: the test's own.
        .current_dir(&work)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run schemathesis (installed by ./scripts/test)");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found the document and the wire disagreeing:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("No issues found"), "{report}");
    for phase in ["Coverage", "Fuzzing", "Stateful"] {
        assert!(
            report.contains(&format!("✅ {phase}")),
            "the {phase} phase ran and passed:\n{report}"
        );
    }
    let served = requests_served(&app).await - before;
    assert!(
        served >= 1000.0,
        "at least 1,000 generated requests reached the server, not {served}"
    );
}
