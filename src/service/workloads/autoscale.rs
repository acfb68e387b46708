//! KEDA autoscaling of one deployment: a `ScaledObject` of its own (never a shared one) with a
//! Prometheus trigger on the serving engine's queue or the router's request rate, and — for an
//! Amazon Managed Service for Prometheus workspace — a `TriggerAuthentication` that signs the
//! queries with KEDA's AWS identity.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::ObjectRef;
use crate::error::{ApiError, ApiResult};
use crate::service::cluster::validate;
use crate::service::workloads::{bounded, labels, obj_in};

pub const KEDA_API: &str = "keda.sh/v1alpha1";
pub const METRICS: &[&str] = &["queue", "requests"];

/// `autoscaling` of a deployment: KEDA scales its replicas between the bounds.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoscalingRequest {
    /// 0–16 (default 1).
    pub min_replicas: Option<i64>,
    /// 1–16, at least `minReplicas`.
    pub max_replicas: i64,
    /// `queue` (default: requests waiting in the serving engine, per replica) or `requests`
    /// (requests per second through the model's router, per replica; needs `router`).
    pub metric: Option<String>,
    /// The value per replica KEDA aims at (e.g. 5 queued requests), > 0.
    pub target: f64,
    /// Below this the deployment stays at `minReplicas` (default 0: any load activates it).
    pub activation: Option<f64>,
    /// Seconds between two metric reads, 5–600 (default 15).
    pub polling_interval: Option<i64>,
    /// Seconds of quiet before scaling down, 30–86400 (default 300).
    pub cooldown_period: Option<i64>,
    /// The PromQL to use instead of the one `metric` implies (one line, ≤ 1000 characters).
    pub query: Option<String>,
    /// The Prometheus to query: an in-cluster URL (`http://<service>.<namespace>.svc…`) or an
    /// Amazon Managed Service for Prometheus workspace
    /// (`https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…`). Default: the server's
    /// `--prometheus-url` setting.
    pub prometheus_url: Option<String>,
}

/// A deployment's autoscaling, as its ScaledObject says.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingView {
    pub min_replicas: u64,
    pub max_replicas: u64,
    pub query: String,
    pub target: String,
    pub prometheus_url: String,
    /// KEDA's `Ready` condition.
    pub ready: Option<bool>,
    /// KEDA's `Active` condition: the metric is above its activation value.
    pub active: Option<bool>,
}

/// Where a Prometheus is, and whether KEDA signs its queries (an AMP workspace's region).
fn prometheus(url: &str) -> ApiResult<Option<String>> {
    let field = "autoscaling.prometheusUrl";
    let hint = json!([
        "http://prometheus-server.monitoring.svc.cluster.local:80",
        "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"
    ]);
    let bad = || {
        ApiError::validation_hint(
            field,
            format!(
                "`{}` is neither an in-cluster Prometheus nor an Amazon Managed Service for Prometheus workspace",
                validate::truncate(url)
            ),
            hint.clone(),
        )
    };
    let parsed = reqwest::Url::parse(url).map_err(|_| bad())?;
    let host = parsed.host_str().ok_or_else(bad)?.to_string();
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.query().is_some() {
        return Err(bad());
    }
    let amp_region = host
        .strip_prefix("aps-workspaces.")
        .and_then(|h| h.strip_suffix(".amazonaws.com"))
        .filter(|r| {
            r.split('-').count() >= 3
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if let Some(region) = amp_region {
        let workspace = parsed
            .path()
            .strip_prefix("/workspaces/")
            .unwrap_or_default();
        let ok = parsed.scheme() == "https"
            && workspace.starts_with("ws-")
            && workspace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        return if ok {
            Ok(Some(region.to_string()))
        } else {
            Err(bad())
        };
    }
    // In the cluster: a Service's DNS name, so KEDA never queries an address outside it.
    let in_cluster = matches!(parsed.scheme(), "http" | "https")
        && (host.ends_with(".svc") || host.ends_with(".svc.cluster.local"))
        && host.split('.').count() >= 3;
    if in_cluster {
        Ok(None)
    } else {
        Err(bad())
    }
}

/// Checks the server's `--prometheus-url` setting at start-up, with the request's rule.
pub fn check_prometheus_setting(url: &str) -> anyhow::Result<()> {
    prometheus(url).map(|_| ()).map_err(|e| {
        anyhow::anyhow!(
            "INSTANTSTART_PROMETHEUS_URL: {e}: an in-cluster URL (http://<service>.<namespace>.svc…) \
             or https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-…"
        )
    })
}

fn one_line(field: &str, q: &str) -> ApiResult<()> {
    validate::require(
        !q.trim().is_empty() && q.len() <= 1000 && !q.contains(['\n', '\r', '\0']),
        field,
        "a query is one line of PromQL, at most 1000 characters".into(),
        json!("sum(sglang:num_queue_reqs{namespace=\"default\"})"),
    )
}

/// The checked request: (min, max) and the objects to apply, ScaledObject last.
pub(super) struct Scaling {
    pub min: i64,
    pub max: i64,
    pub objects: Vec<Value>,
}

/// The ScaledObject (and TriggerAuthentication) of deployment `model`, whose workers run
/// `image`; `has_router` allows the `requests` metric.
pub(super) fn scaling(
    model: &str,
    namespace: &str,
    image: &str,
    has_router: bool,
    req: &AutoscalingRequest,
    default_prometheus: Option<&str>,
) -> ApiResult<Scaling> {
    let min = bounded("autoscaling.minReplicas", req.min_replicas, 1, 0..=16)?;
    let max = bounded("autoscaling.maxReplicas", Some(req.max_replicas), 1, 1..=16)?;
    if max < min {
        return Err(ApiError::validation_hint(
            "autoscaling.maxReplicas",
            format!("maxReplicas {max} is below minReplicas {min}"),
            json!({"minReplicas": min, "maxReplicas": min.max(1)}),
        ));
    }
    let num = |field: &str, v: f64, zero_ok: bool| {
        validate::require(
            v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= 1e9,
            field,
            format!("{v} is not a usable value"),
            json!(5),
        )
    };
    num("autoscaling.target", req.target, false)?;
    let activation = req.activation.unwrap_or(0.0);
    num("autoscaling.activation", activation, true)?;
    let polling = bounded(
        "autoscaling.pollingInterval",
        req.polling_interval,
        15,
        5..=600,
    )?;
    let cooldown = bounded(
        "autoscaling.cooldownPeriod",
        req.cooldown_period,
        300,
        30..=86_400,
    )?;
    let metric = req.metric.as_deref().unwrap_or("queue");
    validate::require(
        METRICS.contains(&metric),
        "autoscaling.metric",
        format!("`{}` is not a scaling metric", validate::truncate(metric)),
        json!(METRICS),
    )?;
    if metric == "requests" && !has_router {
        return Err(ApiError::validation_hint(
            "autoscaling.metric",
            "`requests` counts what the model's router forwards: add `router`, or scale on `queue`",
            json!("queue"),
        ));
    }
    let query = match &req.query {
        Some(q) => {
            one_line("autoscaling.query", q)?;
            q.clone()
        }
        // Worker pods are `<model>-<replicaset>-<suffix>`; the router's are `<model>-router-…`.
        None if metric == "requests" => format!(
            "sum(rate(smg_router_requests_total{{namespace=\"{namespace}\",pod=~\"{model}-router-.*\"}}[1m]))"
        ),
        None => {
            let waiting = if super::server::is_sglang(image) {
                "sglang:num_queue_reqs"
            } else {
                "vllm:num_requests_waiting"
            };
            format!(
                "sum({waiting}{{namespace=\"{namespace}\",pod=~\"{model}-[a-z0-9]+-[a-z0-9]+\"}})"
            )
        }
    };
    let url = req
        .prometheus_url
        .as_deref()
        .or(default_prometheus)
        .ok_or_else(|| {
            ApiError::validation_hint(
                "autoscaling.prometheusUrl",
                "which Prometheus should KEDA read? This server has no --prometheus-url setting",
                json!("http://prometheus-server.monitoring.svc.cluster.local:80"),
            )
        })?;
    let region = prometheus(url)?;
    let l = labels("inference", &[("app.kubernetes.io/name", model)]);
    let mut trigger = json!({"type": "prometheus", "name": metric,
        "metadata": {"serverAddress": url, "query": query,
                     "threshold": fmt(req.target), "activationThreshold": fmt(activation)}});
    let mut objects = Vec::new();
    if let Some(region) = region {
        let auth = auth_name(model);
        objects.push(
            json!({"apiVersion": KEDA_API, "kind": "TriggerAuthentication",
            "metadata": {"name": auth, "namespace": namespace, "labels": l},
            // KEDA's own AWS identity signs the queries (SigV4, service `aps`).
            "spec": {"podIdentity": {"provider": "aws"}}}),
        );
        trigger["metadata"]["awsRegion"] = json!(region);
        trigger["authenticationRef"] = json!({"name": auth});
    }
    objects.push(json!({"apiVersion": KEDA_API, "kind": "ScaledObject",
        "metadata": {"name": model, "namespace": namespace, "labels": l},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": model},
            "minReplicaCount": min, "maxReplicaCount": max,
            "pollingInterval": polling, "cooldownPeriod": cooldown,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": cooldown.min(3600)}}}},
            "triggers": [trigger]}}));
    Ok(Scaling { min, max, objects })
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn auth_name(model: &str) -> String {
    format!("{model}-keda-aws")
}

/// Every autoscaling object a deployment may have (pruned when it has none, deleted with it).
pub(super) fn scaling_refs(model: &str, namespace: &str) -> Vec<ObjectRef> {
    vec![
        obj_in(namespace, KEDA_API, "ScaledObject", model),
        obj_in(
            namespace,
            KEDA_API,
            "TriggerAuthentication",
            &auth_name(model),
        ),
    ]
}

/// Reads autoscaling back from a ScaledObject.
pub(super) fn scaling_view(so: &Value) -> AutoscalingView {
    let s = |p: &str| {
        so.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let cond = |t: &str| {
        so.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .and_then(|c| c["status"].as_str())
            .and_then(|v| match v {
                "True" => Some(true),
                "False" => Some(false),
                _ => None,
            })
    };
    AutoscalingView {
        min_replicas: so
            .pointer("/spec/minReplicaCount")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        max_replicas: so
            .pointer("/spec/maxReplicaCount")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        query: s("/spec/triggers/0/metadata/query"),
        target: s("/spec/triggers/0/metadata/threshold"),
        prometheus_url: s("/spec/triggers/0/metadata/serverAddress"),
        ready: cond("Ready"),
        active: cond("Active"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> AutoscalingRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prometheus_is_in_the_cluster_or_an_amp_workspace() {
        assert_eq!(
            prometheus("http://prometheus-server.monitoring.svc.cluster.local:80").unwrap(),
            None
        );
        assert_eq!(
            prometheus("http://prom.monitoring.svc:9090/").unwrap(),
            None
        );
        assert_eq!(
            prometheus("https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123-abcd")
                .unwrap(),
            Some("us-west-2".into())
        );
        assert!(check_prometheus_setting("http://prom.monitoring.svc:9090").is_ok());
        let e = check_prometheus_setting("http://evil.example.com").unwrap_err();
        assert!(e.to_string().contains("INSTANTSTART_PROMETHEUS_URL"), "{e}");
        for bad in [
            "http://169.254.169.254/latest",
            "http://evil.example.com",
            "http://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1",
            "https://aps-workspaces.us-west-2.amazonaws.com/other",
            "http://user:pw@prom.monitoring.svc",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(prometheus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_amp_workspace_gets_aws_authentication_and_a_region() {
        let s = scaling("qwen", "default", "lmsysorg/sglang:v0.5.8", true,
            &req(json!({"maxReplicas": 4, "target": 5, "metric": "requests",
                        "prometheusUrl": "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1"})), None).unwrap();
        assert_eq!(s.objects.len(), 2);
        assert_eq!(s.objects[0]["kind"], "TriggerAuthentication");
        assert_eq!(s.objects[0]["spec"]["podIdentity"]["provider"], "aws");
        let t = &s.objects[1]["spec"]["triggers"][0];
        assert_eq!(t["metadata"]["awsRegion"], "eu-west-1");
        assert_eq!(t["authenticationRef"]["name"], "qwen-keda-aws");
        assert!(t["metadata"]["query"]
            .as_str()
            .unwrap()
            .contains("smg_router_requests_total"));
        assert_eq!(t["metadata"]["threshold"], "5");
        assert_eq!(s.objects[1]["spec"]["scaleTargetRef"]["name"], "qwen");
    }

    #[test]
    fn bounds_metrics_and_the_prometheus_setting_are_checked() {
        let ok = |v: Value| {
            scaling(
                "m",
                "default",
                "lmsysorg/sglang:1",
                false,
                &req(v),
                Some("http://p.monitoring.svc"),
            )
        };
        let field = |v: Value| match ok(v) {
            Err(ApiError::Validation { field, .. }) => field,
            other => panic!("{:?}", other.map(|s| s.objects)),
        };
        assert_eq!(
            field(json!({"maxReplicas": 2, "minReplicas": 3, "target": 1})),
            "autoscaling.maxReplicas"
        );
        assert_eq!(
            field(json!({"maxReplicas": 2, "target": 0})),
            "autoscaling.target"
        );
        assert_eq!(
            field(json!({"maxReplicas": 2, "target": 1, "metric": "requests"})),
            "autoscaling.metric"
        );
        assert_eq!(
            field(json!({"maxReplicas": 2, "target": 1, "query": "a\nb"})),
            "autoscaling.query"
        );
        let s = ok(json!({"maxReplicas": 3, "target": 2.5})).unwrap();
        assert_eq!(s.objects.len(), 1);
        let q = s.objects[0]["spec"]["triggers"][0]["metadata"]["query"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            q.contains("sglang:num_queue_reqs") && q.contains("pod=~\"m-"),
            "{q}"
        );
        assert_eq!(
            s.objects[0]["spec"]["triggers"][0]["metadata"]["threshold"],
            "2.5"
        );
        assert!(scaling(
            "m",
            "default",
            "x",
            false,
            &req(json!({"maxReplicas": 2, "target": 1})),
            None
        )
        .is_err());
    }
}
