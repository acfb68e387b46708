//! Starting team operations: create, change, delete a team, the cluster's scheduling policy. Each
//! validates its request, then hands one submission to `service::start`.

use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

/// A team's compute quota, made.
pub async fn team_create(
    engine: &Engine,
    name: &str,
    req: &super::TeamRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::create_params(engine, name, req).await?;
    start(engine, OpKind::TeamCreate, name, &params, caller).await
}

/// A team's quota changed; `None` when the patch changes nothing.
pub async fn team_update(
    engine: &Engine,
    name: &str,
    team: &str,
    patch: &super::TeamPatch,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::update_params(engine, name, team, patch).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::TeamUpdate, name, &params, caller).await?,
        )),
    }
}

pub async fn team_delete(
    engine: &Engine,
    name: &str,
    team: &str,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::delete_params(engine, name, team).await?;
    start(engine, OpKind::TeamDelete, name, &params, caller).await
}

/// The scheduling policy set; `None` when it is already so.
pub async fn scheduling_policy(
    engine: &Engine,
    name: &str,
    req: &super::PolicyRequest,
    caller: &Caller,
) -> ApiResult<Option<Accepted>> {
    match super::policy_params(engine, name, req).await? {
        None => Ok(None),
        Some(params) => Ok(Some(
            start(engine, OpKind::SchedulingPolicy, name, &params, caller).await?,
        )),
    }
}
