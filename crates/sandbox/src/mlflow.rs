//! Simulated managed MLflow: MLflow Apps that take a few simulated minutes to create, and a
//! tracking server whose experiments are the training jobs that report to the app (their pods
//! carry its ARN in `MLFLOW_TRACKING_URI`), one run each, with the loss and throughput their
//! rank-0 progress lines print.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::training::ray_cluster_name;
use super::{new_id, Life, Sandbox, ACCOUNT, REGION};
use cloud::*;

/// Simulated seconds an app takes to be created.
const CREATE: f64 = 180.0;

fn app_status(life: Life) -> &'static str {
    match life {
        Life::Ready => "Created",
        _ => "Creating",
    }
}

/// The MLflow environment of a stored training job: (tracking URI, experiment name).
fn tracking_env(job: &Value) -> Option<(String, String)> {
    let container = job
        .pointer("/spec/replicaSpecs/0/template/spec/containers/0")
        .or_else(|| job.pointer("/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0"))?;
    let env = |key: &str| {
        container["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == key)?["value"]
            .as_str()
            .map(str::to_string)
    };
    Some((env("MLFLOW_TRACKING_URI")?, env("MLFLOW_EXPERIMENT_NAME")?))
}

fn not_in_mlflow(what: &str) -> CloudError {
    CloudError::new(
        "sagemaker-mlflow",
        "tracking",
        "NotFound",
        format!("{what} does not exist"),
    )
}

impl Sandbox {
    /// The training jobs reporting to `arn`, with their experiment names: those whose pods
    /// name it as their tracking URI and whose identity may call it.
    async fn experiments(&self, arn: &str) -> CloudResult<Vec<(super::Res, String)>> {
        let mut out = Vec::new();
        for r in self.list("k8s-object").await? {
            if r.deleted_ms.is_some() || !super::training::is_training(&r.data) {
                continue;
            }
            let Some((uri, experiment)) = tracking_env(&r.data) else {
                continue;
            };
            if uri == arn && self.may_report(&r, arn).await? {
                out.push((r, experiment));
            }
        }
        Ok(out)
    }

    /// Whether a job's pods may report to the app `arn`: the MLflow client signs with the pods'
    /// service account's role (its IRSA annotation, or a pod identity association), and the
    /// app authorizes every call with `sagemaker:CallMlflowAppApi` — within the role's
    /// boundary. A pod without that runs, and its reports are refused: no run appears.
    async fn may_report(&self, job: &super::Res, arn: &str) -> CloudResult<bool> {
        let key = job.data["__key"].as_str().unwrap_or_default();
        let cluster = key.split('/').next().unwrap_or_default();
        let ns = job.data["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let pod = job
            .data
            .pointer("/spec/replicaSpecs/0/template/spec")
            .or_else(|| {
                job.data
                    .pointer("/spec/rayClusterSpec/headGroupSpec/template/spec")
            });
        let sa = pod
            .and_then(|p| p["serviceAccountName"].as_str())
            .unwrap_or("default");
        let annotated = self
            .by_name(
                "k8s-object",
                &format!("{cluster}/v1/ServiceAccount/{ns}/{sa}"),
            )
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .and_then(|r| {
                r.data
                    .pointer("/metadata/annotations/eks.amazonaws.com~1role-arn")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        let role_arn = match annotated {
            Some(a) => Some(a),
            None => self
                .list("eks-pod-identity")
                .await?
                .into_iter()
                .find(|r| {
                    r.deleted_ms.is_none()
                        && r.data["cluster"] == cluster
                        && r.data["namespace"] == ns
                        && r.data["serviceAccount"] == sa
                })
                .and_then(|r| r.data["roleArn"].as_str().map(str::to_string)),
        };
        let Some(role_arn) = role_arn else {
            return Ok(false);
        };
        Ok(self
            .role_record(&role_arn)
            .await?
            .is_some_and(|r| super::rules::role_allows(&r, "sagemaker:CallMlflowAppApi", arn)))
    }

    /// One job's run: its status and (simulated second, step, loss, throughput) points.
    async fn run_of(
        &self,
        job: &super::Res,
    ) -> CloudResult<(&'static str, Vec<(f64, u64, f64, f64)>)> {
        let key = job.data["__key"].as_str().unwrap_or_default();
        let target = KubeTarget {
            cluster: key.split('/').next().unwrap_or_default().to_string(),
            endpoint: String::new(),
            certificate_authority: String::new(),
        };
        let name = job.data["metadata"]["name"].as_str().unwrap_or_default();
        let rank0 = self.sim_pods(&target).await?.into_iter().find(|(p, ..)| {
            p.name == format!("{name}-pods-0")
                || p.name == format!("{}-head", ray_cluster_name(name))
        });
        Ok(match rank0 {
            None => ("SCHEDULED", vec![]),
            Some((pod, age, _)) => {
                let status = match pod.outcome(age) {
                    None => "RUNNING",
                    Some(true) => "FINISHED",
                    Some(false) => "FAILED",
                };
                (status, pod.progress_points(age))
            }
        })
    }

    fn millis(&self, job: &super::Res, t: f64) -> i64 {
        job.created_ms + (t * 1000.0 / self.time_scale) as i64
    }
}

#[async_trait]
impl Mlflow for Sandbox {
    async fn find_app(&self, name: &str) -> CloudResult<Option<MlflowApp>> {
        self.gate("sagemaker:ListMlflowApps", false).await?;
        Ok(self
            .by_name("mlflow-app", name)
            .await?
            .filter(|r| r.deleted_ms.is_none())
            .map(|r| MlflowApp {
                arn: r.data["arn"].as_str().unwrap_or_default().to_string(),
                name: name.to_string(),
                status: app_status(self.life(&r, CREATE, 1.0)).to_string(),
                artifact_store: r.data["artifactStore"].as_str().map(str::to_string),
                mlflow_version: Some("3.4".into()),
            }))
    }

    async fn create_app(&self, req: &CreateMlflowApp<'_>) -> CloudResult<String> {
        let api = "sagemaker:CreateMlflowApp";
        self.gate(api, true).await?;
        if !req.artifact_store.starts_with("s3://") {
            return Err(CloudError::new(
                "sagemaker",
                "CreateMlflowApp",
                "ValidationException",
                "ArtifactStoreUri must be an s3:// URI",
            ));
        }
        if self
            .by_name("mlflow-app", req.name)
            .await?
            .is_some_and(|r| r.deleted_ms.is_none())
        {
            return Err(CloudError::new(
                "sagemaker",
                "CreateMlflowApp",
                "ResourceInUse",
                format!("MLflow app {} already exists", req.name),
            ));
        }
        let id = new_id("app");
        let arn = format!("arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-app/{id}");
        self.create(
            api,
            "mlflow-app",
            &id,
            Some(req.name),
            &json!({"arn": arn, "artifactStore": req.artifact_store, "roleArn": req.role_arn}),
        )
        .await?;
        Ok(arn)
    }

    async fn presigned_url(&self, arn: &str, expires_in: u32) -> CloudResult<String> {
        self.gate("sagemaker:CreatePresignedMlflowAppUrl", false)
            .await?;
        let id = arn.rsplit('/').next().unwrap_or_default();
        Ok(format!(
            "https://{id}.mlflow.sandbox.invalid/auth?authToken={}&expiresIn={expires_in}",
            new_id("tok")
        ))
    }

    async fn tracking(&self, arn: &str, call: TrackingCall<'_>) -> CloudResult<Value> {
        self.gate("sagemaker-mlflow:Tracking", false).await?;
        let q = |key: &str| {
            call.query
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        };
        let jobs = self.experiments(arn).await?;
        match call.path {
            "experiments/get-by-name" => {
                let want = q("experiment_name").unwrap_or_default();
                let (job, name) = jobs
                    .iter()
                    .find(|(_, e)| *e == want)
                    .ok_or_else(|| not_in_mlflow(&format!("experiment '{want}'")))?;
                Ok(json!({"experiment": {"experiment_id": job.id, "name": name,
                                         "lifecycle_stage": "active"}}))
            }
            "runs/search" => {
                let ids: Vec<String> = call
                    .body
                    .and_then(|b| serde_json::from_value(b["experiment_ids"].clone()).ok())
                    .unwrap_or_default();
                let mut runs = Vec::new();
                for (job, name) in jobs.iter().filter(|(j, _)| ids.contains(&j.id)) {
                    let (status, points) = self.run_of(job).await?;
                    let latest = points.last().map(|(t, step, loss, throughput)| {
                        let ts = self.millis(job, *t);
                        json!([{"key": "loss", "value": loss, "step": step, "timestamp": ts},
                               {"key": "throughput", "value": throughput, "step": step, "timestamp": ts}])
                    });
                    let end = (status != "RUNNING" && status != "SCHEDULED")
                        .then(|| points.last().map(|(t, ..)| self.millis(job, *t)))
                        .flatten();
                    runs.push(json!({
                        "info": {"run_id": format!("run-{}", job.id), "run_name": name,
                                 "experiment_id": job.id, "status": status,
                                 "start_time": job.created_ms, "end_time": end},
                        "data": {"metrics": latest.unwrap_or_else(|| json!([]))}}));
                }
                Ok(json!({"runs": runs}))
            }
            "metrics/get-history" => {
                let run = q("run_id").unwrap_or_default();
                let key = q("metric_key").unwrap_or_default();
                let (job, _) = jobs
                    .iter()
                    .find(|(j, _)| format!("run-{}", j.id) == run)
                    .ok_or_else(|| not_in_mlflow(&format!("run '{run}'")))?;
                let (_, points) = self.run_of(job).await?;
                let metrics: Vec<Value> = points
                    .iter()
                    .filter_map(|(t, step, loss, throughput)| {
                        let value = match key.as_str() {
                            "loss" => *loss,
                            "throughput" => *throughput,
                            _ => return None,
                        };
                        Some(json!({"key": key, "value": value, "step": step,
                                    "timestamp": self.millis(job, *t)}))
                    })
                    .collect();
                Ok(json!({"metrics": metrics}))
            }
            other => Err(CloudError::new(
                "sagemaker-mlflow",
                other,
                "ENDPOINT_NOT_FOUND",
                format!("the sandbox tracking server does not serve {other}"),
            )),
        }
    }
}
