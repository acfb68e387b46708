//! Per-call retries for the Kubernetes port: a step that reconciles thirty objects must not
//! start over because one call in thirty was throttled (429), hit a 5xx or a reset connection.
//! Calls that are safe to repeat (reads, server-side apply, metadata patches, deletes) are
//! retried a few times with jittered backoff; a POST through the service proxy never is.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng as _;
use serde_json::Value;

use super::{
    CloudResult, ClusterState, Kube, KubeTarget, ListQuery, LogLines, LogQuery, ObjectRef,
    ServiceCall,
};

/// Attempts in all of an idempotent AWS call, the first included: the AWS adapter's own
/// retry, which the sandbox applies to its reads too (it stands for that adapter as well as
/// for AWS).
pub const IDEMPOTENT_ATTEMPTS: u32 = 4;

/// Attempts in all of a repeatable Kubernetes call, the first included.
const ATTEMPTS: u32 = 5;

/// Runs `call` until it succeeds, fails for good, or has been tried `attempts` times, waiting
/// `first`, then twice as long each time (each wait with up to half again of jitter). Each
/// retry is counted in the metrics under `layer`.
pub async fn with_backoff<T, F, Fut>(
    attempts: u32,
    first: Duration,
    layer: &'static str,
    mut call: F,
) -> CloudResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = CloudResult<T>>,
{
    let mut delay = first;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e) if e.retryable && attempt < attempts => {
                crate::metrics::global().retried(layer, Some(&e));
                let jitter = rand::thread_rng().gen_range(0.0..0.5);
                tokio::time::sleep(delay.mul_f64(1.0 + jitter)).await;
                delay *= 2;
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// A call safe to repeat: up to [`ATTEMPTS`] tries, 100, 200, 400, 800 ms apart.
pub async fn repeatable<T, F, Fut>(call: F) -> CloudResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = CloudResult<T>>,
{
    with_backoff(ATTEMPTS, Duration::from_millis(100), "call", call).await
}

/// The Kubernetes port with [`repeatable`] around every call that may be repeated.
pub struct RetryingKube(pub Arc<dyn Kube>);

#[async_trait]
impl Kube for RetryingKube {
    async fn apply(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<()> {
        repeatable(|| self.0.apply(target, manifest)).await
    }
    async fn get(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<Option<Value>> {
        repeatable(|| self.0.get(target, obj)).await
    }
    async fn delete(&self, target: &KubeTarget, obj: &ObjectRef) -> CloudResult<()> {
        // Adapters answer a delete of what is already gone with Ok, so a repeat after a lost
        // answer is harmless.
        repeatable(|| self.0.delete(target, obj)).await
    }
    async fn patch_metadata(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        labels: &Value,
        annotations: &Value,
    ) -> CloudResult<()> {
        repeatable(|| self.0.patch_metadata(target, obj, labels, annotations)).await
    }
    async fn patch_spec(
        &self,
        target: &KubeTarget,
        obj: &ObjectRef,
        spec: &Value,
    ) -> CloudResult<()> {
        // A merge patch of the same fields lands the same way twice.
        repeatable(|| self.0.patch_spec(target, obj, spec)).await
    }
    async fn create(&self, target: &KubeTarget, manifest: &Value) -> CloudResult<Value> {
        // A create is not repeatable (a second connection is another session): never repeated.
        self.0.create(target, manifest).await
    }
    async fn list(&self, target: &KubeTarget, query: &ListQuery<'_>) -> CloudResult<Vec<Value>> {
        repeatable(|| self.0.list(target, query)).await
    }
    async fn cluster_state(&self, target: &KubeTarget) -> CloudResult<Arc<ClusterState>> {
        repeatable(|| self.0.cluster_state(target)).await
    }
    fn events(&self) -> tokio::sync::broadcast::Receiver<crate::ClusterChange> {
        self.0.events()
    }
    async fn warm(&self, target: &KubeTarget) -> CloudResult<()> {
        self.0.warm(target).await
    }
    async fn service_post(
        &self,
        target: &KubeTarget,
        service: &ServiceCall<'_>,
        body: &Value,
    ) -> CloudResult<Value> {
        // Not idempotent (an inference request): never repeated here.
        self.0.service_post(target, service, body).await
    }
    async fn pod_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<String> {
        repeatable(|| self.0.pod_log(target, namespace, pod, query)).await
    }
    async fn follow_log(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> CloudResult<LogLines> {
        repeatable(|| self.0.follow_log(target, namespace, pod, query)).await
    }
    async fn port_forward(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
    ) -> CloudResult<super::PodStream> {
        repeatable(|| self.0.port_forward(target, namespace, pod, port)).await
    }
    async fn forget(&self, cluster: &str) {
        self.0.forget(cluster).await;
    }
    async fn cache_stats(&self) -> Vec<super::WatchCacheStats> {
        self.0.cache_stats().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::CloudError;

    #[tokio::test]
    async fn a_throttled_call_is_repeated_and_a_refusal_is_not() {
        let calls = AtomicU32::new(0);
        let r = repeatable(|| async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(
                    CloudError::new("k8s", "Get", "ThrottlingException", "slow down").retryable(),
                ),
                _ => Ok("answer"),
            }
        })
        .await;
        assert_eq!(r.unwrap(), "answer");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        calls.store(0, Ordering::SeqCst);
        let r: CloudResult<()> = repeatable(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CloudError::new(
                "k8s",
                "Apply",
                "Invalid",
                "spec.replicas: must be ≥ 0",
            ))
        })
        .await;
        assert_eq!(r.unwrap_err().code, "Invalid");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
