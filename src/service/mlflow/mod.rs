//! Managed MLflow at the edge: setting it up (a durable `mlflow-setup` operation from one
//! cluster), what it is now (ARN, state, a short-lived URL to its UI), its runs and their metric
//! histories through the tracking server's REST API, and what a training job needs to report to
//! it (its ARN, when the app is ready and the cluster's training identity exists).

pub mod start;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::shared::resources::ClusterResources;
use super::steps::mlflow::{tracking_sa_ref, APP_NAME};
use crate::cloud::{KubeTarget, MlflowApp, TrackingCall};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;

/// Seconds a presigned MLflow UI URL stays valid (it is also single-use).
pub const URL_SECONDS: u32 = 300;
/// Metrics the job page charts when none are named.
pub const DEFAULT_METRICS: [&str; 2] = ["throughput", "loss"];

/// Body of `POST /api/mlflow`.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MlflowSetupRequest {
    /// The cluster whose bucket keeps MLflow's artifacts (under `mlflow/`) and whose training
    /// pods get access. Default: the only cluster.
    #[schema(pattern = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]
    pub cluster: Option<String>,
}

/// The cluster an MLflow setup runs on: named, or the only one; it must have its bucket and
/// EKS cluster.
pub async fn setup_cluster(engine: &Engine, req: &MlflowSetupRequest) -> ApiResult<String> {
    let name = match &req.cluster {
        Some(c) => {
            validate::cluster_name("cluster", c)?;
            c.clone()
        }
        None => {
            let clusters = engine.store().list_clusters().await?;
            match clusters.as_slice() {
                [only] => only.name.clone(),
                _ => {
                    return Err(ApiError::validation_hint(
                        "cluster",
                        "name the cluster whose bucket keeps MLflow's artifacts",
                        json!(clusters.iter().map(|c| &c.name).collect::<Vec<_>>()),
                    ))
                }
            }
        }
    };
    let record = super::live_cluster(engine, &name).await?;
    if ClusterResources::of(&record.resources)
        .bucket_name
        .is_none()
    {
        return Err(ApiError::Conflict {
            slug: ProblemType::StageNotReady,
            detail: format!("`{name}` has no place for objects yet (its bucket, or its prefix of the shared bucket): run its hyperpod stage first"),
            field: Some("cluster".into()),
            operation_id: None,
        });
    }
    kube_target(engine, &name).await?;
    Ok(name)
}

/// What `GET /api/mlflow` shows.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MlflowView {
    pub name: String,
    /// The app's ARN: also the tracking URI jobs report to.
    pub arn: String,
    /// `Creating`, `Created`, `CreateFailed`, … as SageMaker reports it.
    pub state: String,
    pub artifact_store: Option<String>,
    pub mlflow_version: Option<String>,
    /// A single-use link to the MLflow UI (only once the app is created).
    pub url: Option<String>,
    pub url_expires_in_seconds: Option<u32>,
}

async fn app(engine: &Engine) -> ApiResult<MlflowApp> {
    engine
        .cloud()
        .mlflow
        .find_app(APP_NAME)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            what: format!("MLflow app `{APP_NAME}`"),
            hint: Some(Box::new(json!(
                "set it up with POST /api/mlflow (mlflow_setup), naming the cluster whose bucket keeps its artifacts"
            ))),
        })
}

pub async fn view(engine: &Engine) -> ApiResult<MlflowView> {
    let app = app(engine).await?;
    let ready = app.status == "Created" || app.status == "Updated";
    let url = if ready {
        Some(
            engine
                .cloud()
                .mlflow
                .presigned_url(&app.arn, URL_SECONDS)
                .await?,
        )
    } else {
        None
    };
    Ok(MlflowView {
        url_expires_in_seconds: url.as_ref().map(|_| URL_SECONDS),
        url,
        name: app.name,
        arn: app.arn,
        state: app.status,
        artifact_store: app.artifact_store,
        mlflow_version: app.mlflow_version,
    })
}

/// One run, with the latest value of each metric.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub run_id: String,
    pub name: Option<String>,
    /// `RUNNING`, `FINISHED`, `FAILED`, `KILLED`, `SCHEDULED`.
    pub status: String,
    /// Milliseconds since the epoch.
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub metrics: BTreeMap<String, f64>,
}

/// A metric's history point.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricPoint {
    pub step: i64,
    pub value: f64,
    pub timestamp: i64,
}

/// Metric histories of one run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsView {
    pub run_id: String,
    pub metrics: BTreeMap<String, Vec<MetricPoint>>,
}

fn get<'a>(path: &'a str, query: &'a [(&'a str, &'a str)]) -> TrackingCall<'a> {
    TrackingCall {
        post: false,
        path,
        query,
        body: None,
    }
}

/// The runs of an experiment (a training job reports to the experiment named after it); none
/// when the experiment does not exist yet.
pub async fn runs(engine: &Engine, experiment: &str) -> ApiResult<Vec<RunView>> {
    validate::require(
        (1..=200).contains(&experiment.len()) && !experiment.chars().any(char::is_control),
        "experiment",
        "an experiment name is 1–200 printable characters".into(),
        json!("the training job's name"),
    )?;
    let app = app(engine).await?;
    let mlflow = &engine.cloud().mlflow;
    let found = match mlflow
        .tracking(
            &app.arn,
            get(
                "experiments/get-by-name",
                &[("experiment_name", experiment)],
            ),
        )
        .await
    {
        Ok(v) => v,
        Err(e) if e.code == "NotFound" => return Ok(vec![]),
        Err(e) => return Err(e.into()),
    };
    let id = found["experiment"]["experiment_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let body = json!({"experiment_ids": [id], "max_results": 100,
                      "order_by": ["attributes.start_time DESC"]});
    let answer = mlflow
        .tracking(
            &app.arn,
            TrackingCall {
                post: true,
                path: "runs/search",
                query: &[],
                body: Some(&body),
            },
        )
        .await?;
    Ok(answer["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| RunView {
            run_id: r["info"]["run_id"].as_str().unwrap_or_default().into(),
            name: r["info"]["run_name"].as_str().map(str::to_string),
            status: r["info"]["status"].as_str().unwrap_or("RUNNING").into(),
            start_time: r["info"]["start_time"].as_i64(),
            end_time: r["info"]["end_time"].as_i64(),
            metrics: r["data"]["metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| Some((m["key"].as_str()?.to_string(), m["value"].as_f64()?)))
                .collect(),
        })
        .collect())
}

/// The histories of a run's metrics (`keys`, comma-separated; default throughput and loss).
pub async fn metrics(engine: &Engine, run: &str, keys: Option<&str>) -> ApiResult<MetricsView> {
    validate::require(
        (1..=64).contains(&run.len())
            && run
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "run",
        format!("`{}` is not a run id", validate::truncate(run)),
        json!("a runId from mlflow_run_list"),
    )?;
    let keys: Vec<&str> = match keys {
        Some(k) => k
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .collect(),
        None => DEFAULT_METRICS.to_vec(),
    };
    validate::require(
        !keys.is_empty()
            && keys.len() <= 10
            && keys.iter().all(|k| {
                k.len() <= 250
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-./ ".contains(c))
            }),
        "keys",
        "1 to 10 metric names, comma-separated".into(),
        json!("throughput,loss"),
    )?;
    let app = app(engine).await?;
    let mut out = BTreeMap::new();
    for key in keys {
        let answer = match engine
            .cloud()
            .mlflow
            .tracking(
                &app.arn,
                get(
                    "metrics/get-history",
                    &[
                        ("run_id", run),
                        ("metric_key", key),
                        ("max_results", "25000"),
                    ],
                ),
            )
            .await
        {
            Ok(a) => a,
            Err(e) if e.code == "NotFound" => {
                return Err(ApiError::not_found(format!("MLflow run `{run}`")))
            }
            Err(e) => return Err(e.into()),
        };
        let points: Vec<MetricPoint> = answer["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some(MetricPoint {
                    step: m["step"].as_i64().unwrap_or(0),
                    value: m["value"].as_f64()?,
                    timestamp: m["timestamp"].as_i64().unwrap_or(0),
                })
            })
            .collect();
        out.insert(key.to_string(), points);
    }
    Ok(MetricsView {
        run_id: run.to_string(),
        metrics: out,
    })
}

/// The tracking URI a new training job in `namespace` reports to: the app's ARN once it is
/// created and the cluster's training identity exists in that namespace; `None` otherwise (the
/// job trains without).
pub async fn training_tracking(
    engine: &Engine,
    target: &KubeTarget,
    namespace: &str,
) -> Option<String> {
    let app = match engine.cloud().mlflow.find_app(APP_NAME).await {
        Ok(Some(app)) if app.status == "Created" || app.status == "Updated" => app,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(error = %e, "MLflow lookup for a training job");
            return None;
        }
    };
    let identity = engine
        .cloud()
        .kube
        .get(target, &tracking_sa_ref(namespace))
        .await;
    matches!(identity, Ok(Some(_))).then_some(app.arn)
}
