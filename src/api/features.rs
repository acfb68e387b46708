//! Managed features: read them as they are, change only the fields that differ.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::ClusterName;
use super::ApiJson;
use crate::error::{ApiResult, Problem};
use crate::service;
use crate::service::start::Caller;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_features, patch_features))
}

/// Managed features as they actually are (read from EKS, HyperPod, IAM and the cluster): training
/// operator, inference operator, tiered checkpointing, managed autoscaling (HyperPod instance
/// groups only, not general EC2), Container Insights, FSx CSI driver — enabled, state, reason,
/// add-on, pod identity association, memory share, governed instance groups.
#[utoipa::path(get, path = "/api/clusters/{name}/features", operation_id = "features_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(("name" = String, Path)),
    responses((status = 200, body = service::features::FeaturesView), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn get_features(
    State(state): State<AppState>,
    ClusterName(name): ClusterName,
) -> ApiResult<Json<service::features::FeaturesView>> {
    Ok(Json(
        service::features::features(&state.engine, &name, &state.allowed_features).await?,
    ))
}

/// Per feature: `{"result": "unchanged"}` or `{"result": "started", "operationId", "statusUrl"}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturesPatched {
    pub cluster: String,
    #[schema(value_type = Object)]
    pub features: Value,
}

/// Enable or disable managed features. Send only the fields to change (e.g. {"trainingOperator":
/// true}); each field equal to the actual state is reported `unchanged` and nothing is done; each
/// change starts its own operation. managedAutoscalingInstanceGroups picks the groups Karpenter
/// governs (on-demand, no deep health checks). Disabling removes exactly what enabling made:
/// confirm with the user.
#[utoipa::path(patch, path = "/api/clusters/{name}/features", operation_id = "features_update",
    extensions(("x-mcp" = json!({"destructive": true, "openWorld": true, "duration": "2-5 minutes on AWS"}))),
    params(("name" = String, Path)),
    request_body = service::features::FeaturesPatch,
    responses((status = 200, body = FeaturesPatched, description = "nothing to change"),
              (status = 202, body = FeaturesPatched, description = "at least one operation started"),
              (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn patch_features(
    State(state): State<AppState>,
    caller: Caller,
    ClusterName(name): ClusterName,
    ApiJson(req): ApiJson<service::features::FeaturesPatch>,
) -> ApiResult<Response> {
    let (started, features) = crate::service::features::start::features(
        &state.engine,
        &name,
        &req,
        &service::features::FeatureSettings {
            allowed: &state.allowed_features,
            grafana_workspace: state.grafana_workspace.as_deref(),
        },
        &caller,
    )
    .await?;
    let status = if started {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let body = FeaturesPatched {
        cluster: name,
        features,
    };
    Ok((status, Json(body)).into_response())
}
