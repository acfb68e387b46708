//! Gauges read from the app's state at scrape time: operations by kind and state (one grouped
//! query) and each cluster's watch cache (objects held, time since its last event).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::ApiResult;
use crate::ops::Engine;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    cluster: String,
    /// `node` or `pod`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: String,
}

/// A registry of this scrape's gauges, with the `instantstart` prefix.
pub async fn scrape(engine: &Engine) -> ApiResult<Registry> {
    let mut registry = Registry::with_prefix("instantstart");
    let operations = Family::<OperationLabels, Gauge>::default();
    for (kind, state, n) in engine
        .store()
        .operation_counts()
        .await
        .map_err(anyhow::Error::from)?
    {
        operations
            .get_or_create(&OperationLabels { kind, state })
            .set(n);
    }
    registry.register(
        "operations",
        "Operations recorded, by kind and state",
        operations,
    );

    let objects = Family::<CacheLabels, Gauge>::default();
    let age = Family::<ClusterLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let synced = Family::<ClusterLabels, Gauge>::default();
    for c in engine.cloud().kube.cache_stats().await {
        let count = |kind, n: usize| {
            objects
                .get_or_create(&CacheLabels {
                    cluster: c.cluster.clone(),
                    kind,
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        count("node", c.nodes);
        count("pod", c.pods);
        let cluster = ClusterLabels {
            cluster: c.cluster.clone(),
        };
        synced.get_or_create(&cluster).set(i64::from(c.synced));
        if let Some(since) = c.since_event {
            age.get_or_create(&cluster).set(since.as_secs_f64());
        }
    }
    registry.register(
        "watch_cache_objects",
        "Objects a cluster's watch cache holds, by cluster and kind",
        objects,
    );
    registry.register(
        "watch_cache_age_seconds",
        "Time since a cluster's watch cache last had an event or relist",
        age,
    );
    registry.register(
        "watch_cache_synced",
        "1 once a cluster's node and pod lists have both arrived",
        synced,
    );
    Ok(registry)
}
