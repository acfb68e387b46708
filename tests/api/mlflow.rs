//! Managed MLflow: set up as a durable operation, shown with a presigned UI link, and read back
//! as runs and metric histories — in the sandbox from a trained job (the metrics its logs print),
//! and in AWS mode against moto (IAM), a gap-filler for SageMaker's MLflow App API, the
//! Kubernetes emulator and a real `mlflow server` standing in for the tracking REST API.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::training::{enable_training_operator, sft, submit, training_cluster};

/// A real MLflow tracking server on loopback (PyPI `mlflow`), killed on drop with the uvicorn
/// process it starts (its own process group: killing `mlflow` alone left uvicorn running).
pub struct MlflowServer {
    child: std::process::Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for MlflowServer {
    fn drop(&mut self) {
        stop_group(&mut self.child);
    }
}

/// Kills a child started as the leader of its own process group, and everything in the group.
fn stop_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait();
}

impl MlflowServer {
    pub async fn start() -> Self {
        let (dir, path) = temp_dir();
        let port = free_port();
        use std::os::unix::process::CommandExt as _;
        let mut child = std::process::Command::new(venv_python())
            .process_group(0)
            .args([
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--workers",
                "1",
            ])
            .args(["--port", &port.to_string()])
            .arg("--backend-store-uri")
            .arg(format!("sqlite:///{}/mlflow.db", path.display()))
            .arg("--default-artifact-root")
            .arg(path.join("artifacts"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mlflow server");
        let url = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        for _ in 0..600 {
            if let Ok(r) = client.get(format!("{url}/health")).send().await {
                if r.status().is_success() {
                    return Self {
                        child,
                        url,
                        _dir: dir,
                    };
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        stop_group(&mut child);
        panic!("mlflow server did not start");
    }

    /// Calls the REST API as a training job's MLflow client would.
    pub async fn call(&self, path: &str, body: Value) -> Value {
        let r = reqwest::Client::new()
            .post(format!("{}/api/2.0/mlflow/{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_metrics_reach_mlflow_in_the_sandbox_and_agree_with_its_logs() {
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;

    let r = app.client.get(app.url("/api/mlflow")).send().await.unwrap();
    let p = problem(r, StatusCode::NOT_FOUND).await;
    assert!(
        p["hint"].as_str().unwrap().contains("POST /api/mlflow"),
        "{p}"
    );
    let r = app.post("/api/mlflow", &json!({"cluster": "nope"})).await;
    problem(r, StatusCode::NOT_FOUND).await;
    let r = app.post("/api/mlflow", &json!({"size": "Small"})).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    let setup = app.start("/api/mlflow", &json!({})).await;
    let op = app.wait_terminal(&setup).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let phases: Vec<_> = op["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(
        phases,
        vec![
            json!("mlflow-role"),
            json!("mlflow-app"),
            json!("tracking-access")
        ]
    );
    let mlflow = app.json("/api/mlflow").await;
    assert_eq!(mlflow["state"], "Created", "{mlflow}");
    assert!(mlflow["arn"].as_str().unwrap().contains(":mlflow-app/"));
    assert!(mlflow["artifactStore"]
        .as_str()
        .unwrap()
        .ends_with("/mlflow"));
    assert!(mlflow["url"].as_str().unwrap().starts_with("https://"));
    assert_eq!(mlflow["urlExpiresInSeconds"], 300);
    // A second setup finds the app instead of making another.
    let again = app.start("/api/mlflow", &json!({"cluster": "demo"})).await;
    let again = app.wait_terminal(&again).await;
    assert_eq!(again["state"], "succeeded", "{again}");
    assert_eq!(app.json("/api/mlflow").await["arn"], mlflow["arn"]);

    let accepted = submit(&app, &sft("sft-ml")).await;
    let op = app
        .wait_terminal(accepted["operationId"].as_str().unwrap())
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");
    let runs = app.json("/api/mlflow/runs?experiment=sft-ml").await;
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let run = &runs[0];
    assert_eq!(run["status"], "FINISHED");
    assert_eq!(run["name"], "sft-ml");
    let id = run["runId"].as_str().unwrap();
    let history = app.json(&format!("/api/mlflow/runs/{id}/metrics")).await;
    let throughput = history["metrics"]["throughput"].as_array().unwrap();
    let loss = history["metrics"]["loss"].as_array().unwrap();
    assert!(throughput.len() > 10, "{history}");
    assert_eq!(throughput.len(), loss.len());
    assert!(throughput
        .windows(2)
        .all(|w| w[0]["step"].as_i64() < w[1]["step"].as_i64()));
    assert!(loss.first().unwrap()["value"].as_f64() > loss.last().unwrap()["value"].as_f64());
    // The last point is what rank 0's last progress line printed.
    let logs = app
        .json("/api/clusters/demo/workloads/pytorch/sft-ml/logs?pod=sft-ml-pods-0&grep=throughput=")
        .await;
    let last = logs["lines"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let printed = |key: &str| -> f64 {
        last.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap()
            .parse()
            .unwrap()
    };
    let point = throughput.last().unwrap();
    assert_eq!(
        point["value"].as_f64().unwrap(),
        printed("throughput="),
        "{last}"
    );
    assert_eq!(point["step"].as_f64().unwrap(), printed("step="), "{last}");
    assert_eq!(run["metrics"]["throughput"], point["value"]);

    // Asked wrongly.
    for (path, status) in [
        ("/api/mlflow/runs", StatusCode::UNPROCESSABLE_ENTITY),
        (
            "/api/mlflow/runs?experiment=x&color=red",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/mlflow/runs/bad%20id/metrics",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("/api/mlflow/runs/run-nope/metrics", StatusCode::NOT_FOUND),
        (
            "/api/mlflow/runs/x/metrics?keys=%3Cscript%3E",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        problem(r, status).await;
    }
    assert_eq!(
        app.json("/api/mlflow/runs?experiment=not-yet").await,
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mlflow_is_set_up_on_aws_and_runs_are_read_from_a_real_tracking_server() {
    use crate::kube::{get, AwsPipeline};
    let tracking = MlflowServer::start().await;
    let p = AwsPipeline::run_with(&[("INSTANTSTART_MLFLOW_ENDPOINT", tracking.url.clone())]).await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (client, base) = (p.client.clone(), p.base.clone());

    let accepted: Value = client
        .post(format!("{base}/api/mlflow"))
        .json(&json!({"cluster": "demo"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["operationId"].as_str().unwrap().to_string();
    let op = wait_terminal(&client, &base, &id).await;
    assert_eq!(op["state"], "succeeded", "{op}");

    // What SageMaker was asked for: the app on mlflow/ of the cluster's bucket, as the role
    // that may use only that prefix.
    let creates = get(&client, format!("{}/_gapfiller/mlflow", p.moto.url)).await;
    let create = &creates["creates"][0];
    assert_eq!(creates["creates"].as_array().unwrap().len(), 1);
    assert_eq!(create["Name"], "instantstart");
    let store = create["ArtifactStoreUri"].as_str().unwrap();
    assert!(
        store.starts_with("s3://") && store.ends_with("/mlflow"),
        "{store}"
    );
    assert!(create["RoleArn"]
        .as_str()
        .unwrap()
        .ends_with(":role/instantstart/instantstart-mlflow"));
    // The training identity: a service account bound to a role that may call only this app.
    let sa = p
        .emu
        .get("/api/v1/namespaces/default/serviceaccounts/instantstart-training")
        .await
        .expect("the training service account");
    let role = sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        role.ends_with(":role/instantstart/demo-mlflow-tracking"),
        "{role}"
    );

    let view = get(&client, format!("{base}/api/mlflow")).await;
    assert_eq!(view["state"], "Created", "{view}");
    assert!(
        view["url"].as_str().unwrap().contains("authToken="),
        "{view}"
    );

    // A job reporting as the MLflow client would: an experiment, a run, its metrics.
    let experiment = tracking
        .call("experiments/create", json!({"name": "emu-train"}))
        .await["experiment_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run = tracking
        .call(
            "runs/create",
            json!({"experiment_id": experiment, "run_name": "emu-train", "start_time": 1000}),
        )
        .await["run"]["info"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let metrics: Vec<Value> = (0..5)
        .flat_map(|i| {
            [
                json!({"key": "throughput", "value": 1400.0 + f64::from(i), "timestamp": 1000 + i, "step": i * 10}),
                json!({"key": "loss", "value": 2.0 - f64::from(i) / 10.0, "timestamp": 1000 + i, "step": i * 10}),
            ]
        })
        .collect();
    tracking
        .call("runs/log-batch", json!({"run_id": run, "metrics": metrics}))
        .await;

    let runs = get(
        &client,
        format!("{base}/api/mlflow/runs?experiment=emu-train"),
    )
    .await;
    assert_eq!(runs[0]["runId"], run.as_str(), "{runs}");
    assert_eq!(runs[0]["status"], "RUNNING");
    assert_eq!(runs[0]["metrics"]["throughput"], 1404.0);
    let history = get(&client, format!("{base}/api/mlflow/runs/{run}/metrics")).await;
    let steps: Vec<i64> = history["metrics"]["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["step"].as_i64().unwrap())
        .collect();
    assert_eq!(steps, vec![0, 10, 20, 30, 40]);
    assert_eq!(history["metrics"]["loss"][4]["value"], 1.6);
    let none = get(&client, format!("{base}/api/mlflow/runs?experiment=absent")).await;
    assert_eq!(none, json!([]));
}

/// The SageMaker and tracking requests, as sent (request-shape tests of the AWS adapter).
mod shapes {
    use aws_sdk_sagemaker::operation::create_mlflow_app::CreateMlflowAppOutput;
    use aws_smithy_mocks::{mock, mock_client, RuleMode};
    use instantstart::cloud::aws::Aws;
    use instantstart::cloud::{CreateMlflowApp, Mlflow, Tags, TrackingCall};
    use serde_json::json;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    async fn aws() -> Aws {
        let config = instantstart::cloud::aws::config_loader()
            .region(aws_config::Region::new("us-west-2"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "AKIDTEST", "secret", None, None, "static",
            ))
            .endpoint_url("http://127.0.0.1:9")
            .load()
            .await;
        Aws::from_config(config).unwrap()
    }

    #[tokio::test]
    async fn an_app_is_created_with_its_name_artifact_store_role_and_tags() {
        let create = mock!(aws_sdk_sagemaker::Client::create_mlflow_app)
            .match_requests(|r| {
                r.name() == Some("instantstart")
                    && r.artifact_store_uri() == Some("s3://b1/mlflow")
                    && r.role_arn() == Some("arn:aws:iam::1:role/instantstart-mlflow")
                    && r.tags().iter().any(|t| {
                        t.key() == Some("instantstart:cluster") && t.value() == Some("demo")
                    })
            })
            .then_output(|| {
                CreateMlflowAppOutput::builder()
                    .arn("arn:aws:sagemaker:us-west-2:1:mlflow-app/app-1")
                    .build()
            });
        let mut aws = aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, &[&create]);
        let tags = Tags::from([("instantstart:cluster".to_string(), "demo".to_string())]);
        let arn = aws
            .create_app(&CreateMlflowApp {
                name: "instantstart",
                artifact_store: "s3://b1/mlflow",
                role_arn: "arn:aws:iam::1:role/instantstart-mlflow",
                tags: &tags,
            })
            .await
            .unwrap();
        assert_eq!(arn, "arn:aws:sagemaker:us-west-2:1:mlflow-app/app-1");
        assert_eq!(create.num_calls(), 1);
    }

    #[tokio::test]
    async fn an_apps_tracking_calls_are_signed_and_routed_as_the_sagemaker_mlflow_plugin_sends_them(
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 16 * 1024];
            let n = socket.read(&mut buf).await.unwrap();
            let body = r#"{"runs": []}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).to_string()
        });
        let mut aws = aws().await;
        aws.mlflow_endpoint = Some(url);
        let arn = "arn:aws:sagemaker:us-west-2:1:mlflow-app/app-1";
        let body = json!({"experiment_ids": ["1"]});
        let answer = aws
            .tracking(
                arn,
                TrackingCall {
                    post: true,
                    path: "runs/search",
                    query: &[],
                    body: Some(&body),
                },
            )
            .await
            .unwrap();
        assert_eq!(answer, json!({"runs": []}));
        let request = seen.await.unwrap().to_lowercase();
        assert!(
            request.starts_with("post /api/2.0/mlflow/runs/search "),
            "{request}"
        );
        assert!(
            request.contains("authorization: aws4-hmac-sha256 credential=akidtest/")
                && request.contains("/us-west-2/sagemaker/aws4_request"),
            "the plugin signs an app's calls as `sagemaker`: {request}"
        );
        assert!(
            request.contains(&format!("x-sm-mlflow-app-arn: {arn}"))
                && !request.contains("x-mlflow-sm-tracking-server-arn"),
            "{request}"
        );
        assert!(request.contains("x-amz-content-sha256: "), "{request}");
    }
}
