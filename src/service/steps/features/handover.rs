//! Which KEDA serves a cluster: ours (the dependency stage's) until the inference operator's
//! add-on brings its own, and ours again once that add-on is gone. Only one metrics server can
//! be registered for `external.metrics.k8s.io`, and two operators would both drive every
//! ScaledObject's HPA, so the two never run together.
//!
//! ```text
//! keda-handover  enabling: our KEDA's controller objects deleted (not its CRDs, so every
//!                ScaledObject survives; the add-on, created with OVERWRITE, adopts them),
//!                watched until they are gone
//! keda           disabling, after the add-on is gone: the dependency component reconciled,
//!                so KEDA is ours again and waited for
//! ```

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cloud::ObjectRef;
use crate::ops::{Poll, Reconcile, StepCx, StepResult};
use crate::service::steps::addons::kube_target;
use crate::service::steps::deps::operators::keda;

/// Removes our KEDA before the inference operator's add-on installs its own.
pub struct KedaHandoverStep;

/// The objects of our KEDA still on the cluster, controller first, each labelled as ours (an
/// object of the same name someone else applied is not ours to delete).
async fn ours_present(cx: &StepCx<'_>) -> StepResult<Vec<ObjectRef>> {
    let target = kube_target(cx)?;
    let mut present = Vec::new();
    for m in keda(&cx.cloud.network.region()).iter().rev() {
        let Some(r) = ObjectRef::of(m) else { continue };
        let ours = cx.cloud.kube.get(&target, &r).await?.is_some_and(|o| {
            o.pointer("/metadata/labels/app.kubernetes.io~1managed-by")
                == Some(&json!("instantstart"))
        });
        if ours {
            present.push(r);
        }
    }
    Ok(present)
}

#[async_trait]
impl Reconcile for KedaHandoverStep {
    fn calls(&self) -> &'static [&'static str] {
        &["k8s:Delete"]
    }
    fn phase(&self) -> &'static str {
        "keda-handover"
    }
    async fn reconcile(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let target = kube_target(cx)?;
        let mut removed = Vec::new();
        for r in ours_present(cx).await? {
            cx.cloud.kube.delete(&target, &r).await?;
            removed.push(format!("{}/{}", r.kind, r.name));
        }
        Ok(json!({"removed": removed, "changed": !removed.is_empty()}))
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        match ours_present(cx).await?.first() {
            Some(r) => Ok(Poll::Pending(format!(
                "waiting for KEDA's {} {} to be deleted",
                r.kind, r.name
            ))),
            None => Ok(Poll::Ready(out.clone())),
        }
    }
}
