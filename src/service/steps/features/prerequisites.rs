//! The first phase of a feature enabled together with its prerequisite in one request (`{"fsxCsi":
//! true, "inferenceOperator": true}`): it waits until the prerequisite's add-on is ACTIVE, and
//! fails with the prerequisite's own operation when that one fails, so the two run in dependency
//! order without a second request.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::AddonStatus;
use crate::ops::{Poll, Step, StepCx, StepError, StepResult};
use crate::service::steps::features::{feature, FeatureParams};

pub struct PrerequisitesStep;

#[async_trait]
impl Step for PrerequisitesStep {
    fn name(&self) -> &'static str {
        "prerequisites"
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: FeatureParams = cx.param()?;
        Ok(json!({"awaiting": p.after}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let p: FeatureParams = cx.param()?;
        for key in &p.after {
            let Some(f) = feature(key) else {
                return Err(StepError::fatal("bad-params", format!("no feature {key}")));
            };
            let addon = cx.cloud.eks.describe_addon(&cx.op.cluster, f.addon).await?;
            if addon.is_some_and(|a| a.status == AddonStatus::Active) {
                continue;
            }
            // Its own operation ended without making it: this one cannot go on.
            let latest = cx.engine.store().latest_heads(&cx.op.cluster).await?;
            if let Some(op) = latest
                .iter()
                .find(|o| o.kind == f.kind() && o.state.is_terminal())
                .filter(|o| o.state != crate::store::OpState::Succeeded)
            {
                return Err(StepError::fatal(
                    "prerequisite-failed",
                    format!("{key}, which this feature needs, did not turn on (operation {}): retry it, then this", op.id),
                ));
            }
            return Ok(Poll::Pending(format!("waiting for {key} ({})", f.addon)));
        }
        Ok(Poll::Ready(out.clone()))
    }
    fn records_resources(&self) -> bool {
        false
    }
}
