//! Starting a change of managed features: the diff of what is asked against what is installed. Each
//! validates its request, then hands one submission to `service::start`.

use serde_json::{json, Value};

use super::{FeatureChange, FeaturesPatch};
use crate::error::ApiResult;
use crate::ops::Engine;
use crate::service::start::{start, Caller};

/// One operation per feature that differs from its actual state. Per feature:
/// `{"result": "unchanged"}` or `{"result": "started", "enable", "operationId", "statusUrl"}`;
/// the flag says whether anything started.
pub async fn features(
    engine: &Engine,
    name: &str,
    req: &FeaturesPatch,
    settings: &super::FeatureSettings<'_>,
    caller: &Caller,
) -> ApiResult<(bool, Value)> {
    let plan = super::plan_features(engine, name, req, settings).await?;
    let mut out = serde_json::Map::new();
    let mut started = false;
    for (field, change) in plan {
        let FeatureChange::Change { kind, params } = change else {
            out.insert(field.into(), json!({"result": "unchanged"}));
            continue;
        };
        // One key per field, so a repeated PATCH finds each of its operations again.
        let caller = Caller {
            idempotency_key: caller
                .idempotency_key
                .as_ref()
                .map(|k| format!("{k}:{field}")),
            ..caller.clone()
        };
        let accepted = start(engine, kind, name, &params, &caller).await?;
        started = true;
        out.insert(
            field.into(),
            json!({"result": "started", "enable": params.enable,
                   "operationId": accepted.operation_id, "statusUrl": accepted.status_url}),
        );
    }
    Ok((started, Value::Object(out)))
}
