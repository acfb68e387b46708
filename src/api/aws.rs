//! The account and the region: identity, health, zones, instance types, preflight, and the
//! sandbox's call counts.

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::cloud::Zone;
use crate::error::{ApiError, ApiResult, Problem};
use crate::service;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(identity))
        .routes(routes!(zones))
        .routes(routes!(instance_types))
        .routes(routes!(preflight))
        .routes(routes!(doctor))
        .routes(routes!(sandbox_calls))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub account: String,
    /// The IAM principal the control plane acts as.
    pub arn: String,
    pub region: String,
    /// `aws` or `sandbox`.
    pub cloud: String,
}

/// The AWS account, IAM principal and region this control plane acts in (sandbox: the simulated
/// account).
#[utoipa::path(get, path = "/api/aws/identity", operation_id = "identity_get",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    responses((status = 200, body = Identity), (status = 502, body = Problem)))]
async fn identity(State(state): State<AppState>) -> ApiResult<Json<Identity>> {
    let cloud = state.engine.cloud();
    let me = cloud.iam.caller_identity().await?;
    Ok(Json(Identity {
        account: me.account,
        arn: me.arn,
        region: cloud.network.region(),
        cloud: cloud.mode.as_str().into(),
    }))
}

/// First contact with a real account: asks IAM (`iam:SimulatePrincipalPolicy`, the role's
/// permissions boundary included) whether the role the server runs as may make every call the
/// product makes, on the resources and with the tags its calls carry; each refused call is named
/// with the template statement that grants it. Read-only. The sandbox answers from its own IAM
/// evaluation of the template's role.
#[utoipa::path(get, path = "/api/aws/doctor", operation_id = "aws_doctor",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    responses((status = 200, body = service::doctor::Doctor), (status = 502, body = Problem)))]
async fn doctor(State(state): State<AppState>) -> ApiResult<Json<service::doctor::Doctor>> {
    Ok(Json(service::doctor::run(&state.engine).await?))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` when the cloud answers, `degraded` otherwise.
    pub status: String,
    /// `aws` or `sandbox`.
    pub cloud: String,
    pub region: String,
    /// Why the cloud cannot be used, and what to do.
    pub warning: Option<String>,
    pub version: String,
}

/// Server health: which cloud (aws or sandbox), region, and any reason the cloud cannot be used.
#[utoipa::path(get, path = "/healthz", operation_id = "health_get", responses((status = 200, body = Health)))]
async fn healthz(State(state): State<AppState>) -> Response {
    // Probed every few seconds, and the same answer for the life of the process.
    let body = state.health.get_or_init(|| {
        let warning = state.cloud_warning.clone();
        let health = Health {
            status: if warning.is_some() { "degraded" } else { "ok" }.into(),
            cloud: state.engine.cloud().mode.as_str().into(),
            region: state.engine.cloud().network.region(),
            warning,
            version: env!("CARGO_PKG_VERSION").into(),
        };
        serde_json::to_vec(&health).unwrap_or_default().into()
    });
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.clone(),
    )
        .into_response()
}

/// Availability Zones of the region (name and zone id). Call before asking the user for a zone.
#[utoipa::path(get, path = "/api/aws/zones", operation_id = "zone_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    responses((status = 200, body = [Zone]), (status = 502, body = Problem)))]
async fn zones(State(state): State<AppState>) -> ApiResult<Json<Vec<Zone>>> {
    Ok(Json(
        state
            .engine
            .cloud()
            .network
            .describe_availability_zones()
            .await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ZoneQuery {
    /// Availability Zone name, e.g. `us-west-2a`.
    #[param(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$")]
    zone: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypes {
    pub zone: String,
    /// Accelerated SageMaker instance types offered in the zone.
    pub instance_types: Vec<String>,
}

/// Accelerated SageMaker instance types offered in one Availability Zone. Call before offering
/// instance types.
#[utoipa::path(get, path = "/api/aws/instance-types", operation_id = "instance_type_list",
    extensions(("x-mcp" = json!({"openWorld": true}))),
    params(ZoneQuery),
    responses((status = 200, body = InstanceTypes), (status = 422, body = Problem)))]
async fn instance_types(
    State(state): State<AppState>,
    query: Result<Query<ZoneQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<InstanceTypes>> {
    let Query(q) = query.map_err(|e| ApiError::validation("zone", e.body_text()))?;
    let (zone, instance_types) = service::instance_types(&state.engine, &q.zone).await?;
    Ok(Json(InstanceTypes {
        zone,
        instance_types,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreflightQuery {
    /// e.g. `ml.p5.48xlarge`: check its HyperPod cluster-usage quota.
    #[param(pattern = r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")]
    instance_type: Option<String>,
    /// How many instances you plan (default 1).
    #[param(minimum = 1, maximum = 1000)]
    count: Option<i64>,
    /// `on-demand`, `spot` or `training-plan`: adds the caveats of that capacity.
    #[param(pattern = "^(on-demand|spot|training-plan)$")]
    capacity_type: Option<String>,
}

/// Before the first cluster: caller identity, HyperPod cluster-usage quota for an instance type and
/// count, training plans, and advice.
#[utoipa::path(get, path = "/api/aws/preflight", operation_id = "preflight_get",
    extensions(("x-mcp" = json!({"openWorld": true, "arguments": {"instance_type": "instanceType", "capacity_type": "capacityType"}}))),
    params(PreflightQuery),
    responses((status = 200, body = service::Preflight), (status = 422, body = Problem)))]
async fn preflight(
    State(state): State<AppState>,
    query: Result<Query<PreflightQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<service::Preflight>> {
    let Query(q) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    Ok(Json(
        service::cluster::preflight(
            &state.engine,
            q.instance_type.as_deref(),
            q.count,
            q.capacity_type.as_deref(),
        )
        .await?,
    ))
}

/// Sandbox only: the count of every simulated mutating cloud call.
#[utoipa::path(get, path = "/api/sandbox/calls", operation_id = "sandbox_calls_get",
    responses((status = 200, body = crate::cloud::sandbox::CallCounts), (status = 404, body = Problem)))]
async fn sandbox_calls(
    State(state): State<AppState>,
) -> ApiResult<Json<crate::cloud::sandbox::CallCounts>> {
    let Some(sandbox) = &state.sandbox else {
        return Err(ApiError::NotFound {
            what: "sandbox call counts".into(),
            hint: Some(Box::new(json!("only available with --cloud sandbox"))),
        });
    };
    Ok(Json(sandbox.call_counts().await?))
}
