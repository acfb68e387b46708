//! Managed MLflow on SageMaker AI: the account's MLflow App (the control plane: find, create,
//! presigned UI URL) and its tracking server's REST API (`/api/2.0/mlflow/…`: experiments, runs,
//! metric histories), which SageMaker serves signed with SigV4 as the `sagemaker-mlflow` service.

use async_trait::async_trait;
use serde_json::Value;

use crate::common::*;

/// One MLflow App.
#[derive(Debug, Clone, PartialEq)]
pub struct MlflowApp {
    pub arn: String,
    pub name: String,
    /// As SageMaker reports it: `Creating`, `Created`, `CreateFailed`, `Updating`, …
    pub status: String,
    /// `s3://bucket/prefix`.
    pub artifact_store: Option<String>,
    pub mlflow_version: Option<String>,
}

/// A `CreateMlflowApp` request.
#[derive(Debug, Clone)]
pub struct CreateMlflowApp<'a> {
    pub name: &'a str,
    pub artifact_store: &'a str,
    /// The role the app reads and writes its artifact store as.
    pub role_arn: &'a str,
    pub tags: &'a Tags,
}

/// One call to the tracking server's REST API.
#[derive(Debug, Clone, Copy)]
pub struct TrackingCall<'a> {
    /// `GET` or `POST`.
    pub post: bool,
    /// The path after `/api/2.0/mlflow/` (`runs/search`, `metrics/get-history`).
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    pub body: Option<&'a Value>,
}

#[async_trait]
pub trait Mlflow: Send + Sync {
    /// The app of this name, if the account has one.
    async fn find_app(&self, name: &str) -> CloudResult<Option<MlflowApp>>;
    /// Starts creating an app; returns its ARN.
    async fn create_app(&self, req: &CreateMlflowApp<'_>) -> CloudResult<String>;
    /// A single-use URL that opens the app's MLflow UI, valid for `expires_in` seconds.
    async fn presigned_url(&self, arn: &str, expires_in: u32) -> CloudResult<String>;
    /// Calls the tracking server of the app `arn`; the JSON answer.
    async fn tracking(&self, arn: &str, call: TrackingCall<'_>) -> CloudResult<Value>;
}
