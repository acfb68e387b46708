//! Starting storage operations: add a claim, remove one. Each validates its request, then hands one
//! submission to `service::start`.

use super::StorageRequest;
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

pub async fn storage(
    engine: &Engine,
    name: &str,
    req: &StorageRequest,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::storage_params(engine, name, req).await?;
    start(engine, OpKind::Storage, name, &params, caller).await
}

pub async fn storage_delete(
    engine: &Engine,
    name: &str,
    claim: &str,
    namespace: Option<&str>,
    caller: &Caller,
) -> ApiResult<Accepted> {
    let params = super::storage_delete_params(engine, name, claim, namespace).await?;
    start(engine, OpKind::StorageDelete, name, &params, caller).await
}
