//! Starting managed MLflow's set-up. Each validates its request, then hands one submission to
//! `service::start`.

use serde_json::json;

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

/// The account's managed MLflow, set up from one cluster (its bucket, its training identity).
pub async fn mlflow_setup(
    engine: &Engine,
    req: &super::MlflowSetupRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let cluster = super::setup_cluster(engine, req).await?;
    start(engine, OpKind::MlflowSetup, &cluster, &json!({}), caller).await
}
