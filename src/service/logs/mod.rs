//! Workload logs: which pods a workload has (by the labels its controller puts on them), a
//! bounded snapshot across them with each line prefixed by its pod and rank, and the follow
//! session behind the logs WebSocket ([`follow`]).

mod follow;
mod pods;
mod query;

pub use follow::*;
pub use pods::PodRef;
use query::since_seconds;
pub use query::*;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::{KubeTarget, ListQuery, LogQuery, ObjectRef};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::shared::labels::TEAM_NAMESPACE_PREFIX;
use crate::service::steps::training::{training_state, TrainingState};
use crate::service::steps::workloads::{workload_state, WorkloadState, WORKLOAD_NAMESPACE};
use crate::service::training::JOB_LABEL;

/// Lines a snapshot returns per pod when `tail` is not given, and at most.
const DEFAULT_TAIL: u32 = 100;
const MAX_TAIL: u32 = 5000;
/// Bounds of one snapshot across all its pods.
const MAX_LINES: usize = 5000;
const MAX_BYTES_PER_POD: i64 = 512 * 1024;
/// Pods one snapshot or follow reads at most.
pub const MAX_PODS: usize = 64;

/// A workload whose pods have logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A Kubernetes Job (a model download).
    Job,
    /// A `HyperPodPyTorchJob` (the training recipes on the HyperPod training operator).
    Pytorch,
    /// A KubeRay `RayJob` (the VERL recipe).
    Ray,
    /// A self-managed inference Deployment.
    Deployment,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::Job,
        WorkloadKind::Pytorch,
        WorkloadKind::Ray,
        WorkloadKind::Deployment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Job => "job",
            WorkloadKind::Pytorch => "pytorch",
            WorkloadKind::Ray => "ray",
            WorkloadKind::Deployment => "deployment",
        }
    }

    pub fn parse(kind: &str) -> ApiResult<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or_else(|| {
                ApiError::validation_hint(
                    "kind",
                    format!("`{}` is not a workload kind", validate::truncate(kind)),
                    json!(Self::ALL.map(WorkloadKind::as_str)),
                )
            })
    }

    fn object(self, namespace: &str, name: &str) -> ObjectRef {
        let (api_version, kind) = match self {
            WorkloadKind::Job => ("batch/v1", "Job"),
            WorkloadKind::Pytorch => ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"),
            WorkloadKind::Ray => ("ray.io/v1", "RayJob"),
            WorkloadKind::Deployment => ("apps/v1", "Deployment"),
        };
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The label selector of the workload's pods, as its controller labels them: the HyperPod
    /// training operator `HPJob=<job>`, KubeRay `ray.io/cluster=<the RayJob's RayCluster>`
    /// (its `labelPod`: `ray.io/originated-from-cr-name` is on the RayCluster and the submitter
    /// Job, never on a pod) or, before KubeRay has named the cluster, the template label our
    /// RayJobs carry; the Job controller `job-name`, a Deployment its own selector.
    fn selector(self, object: &Value) -> Option<String> {
        let name = object.pointer("/metadata/name")?.as_str()?;
        Some(match self {
            WorkloadKind::Job => format!("job-name={name}"),
            WorkloadKind::Pytorch => format!("HPJob={name}"),
            WorkloadKind::Ray => match object.pointer("/status/rayClusterName") {
                Some(Value::String(cluster)) if !cluster.is_empty() => {
                    format!("ray.io/cluster={cluster}")
                }
                _ => format!("{JOB_LABEL}={name}"),
            },
            WorkloadKind::Deployment => {
                let labels = object.pointer("/spec/selector/matchLabels")?.as_object()?;
                let terms: Vec<_> = labels
                    .iter()
                    .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
                    .collect();
                if terms.is_empty() {
                    return None;
                }
                terms.join(",")
            }
        })
    }

    /// Why the workload has ended, if it has: its pods write no more.
    fn ended(self, object: &Value) -> Option<String> {
        match self {
            WorkloadKind::Deployment => None,
            WorkloadKind::Job => match workload_state(object) {
                WorkloadState::Succeeded => Some("the job succeeded".into()),
                WorkloadState::Failed(why) => Some(format!("the job failed: {why}")),
                _ => None,
            },
            WorkloadKind::Pytorch | WorkloadKind::Ray => match training_state(object) {
                TrainingState::Succeeded => Some("the job succeeded".into()),
                TrainingState::Failed(why) => Some(format!("the job failed: {why}")),
                _ => None,
            },
        }
    }
}

/// One workload, resolved.
#[derive(Debug, Clone)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub name: String,
    pub target: KubeTarget,
    /// `default`, or the namespace of the team it runs as.
    pub namespace: String,
    selector: String,
}

/// Resolves a workload of a cluster, refusing an unknown one with the names of those that exist.
pub async fn workload(
    engine: &Engine,
    cluster: &str,
    kind: &str,
    name: &str,
) -> ApiResult<Workload> {
    let kind = WorkloadKind::parse(kind)?;
    validate::dns_label("workload", "workload name", name)?;
    let target = kube_target(engine, cluster).await?;
    let object = current(engine, &target, kind, None, name)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            what: format!(
                "{} `{name}` in namespace {WORKLOAD_NAMESPACE} or a team's of `{cluster}`",
                kind.as_str()
            ),
            hint: Some(Box::new(json!(format!(
                "list them with GET /api/clusters/{cluster}/{}",
                if kind == WorkloadKind::Deployment {
                    "deployments"
                } else {
                    "jobs"
                }
            )))),
        })?;
    let selector = kind.selector(&object).ok_or_else(|| {
        ApiError::conflict(
            format!("{} `{name}` has no pod selector", kind.as_str()),
            None,
        )
    })?;
    Ok(Workload {
        kind,
        name: name.to_string(),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(WORKLOAD_NAMESPACE)
            .to_string(),
        target,
        selector,
    })
}

/// The workload's object now; `None` once it is gone. Without a namespace: in namespace
/// default, else in a team's.
async fn current(
    engine: &Engine,
    target: &KubeTarget,
    kind: WorkloadKind,
    namespace: Option<&str>,
    name: &str,
) -> ApiResult<Option<Value>> {
    let kube = &engine.cloud().kube;
    let found = match kube
        .get(
            target,
            &kind.object(namespace.unwrap_or(WORKLOAD_NAMESPACE), name),
        )
        .await
    {
        Ok(found) => found,
        // No operator installed for this kind: no workload of it either.
        Err(e) if matches!(e.code.as_str(), "KindNotServed") => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if found.is_some() || namespace.is_some() {
        return Ok(found);
    }
    let r = kind.object("", name);
    Ok(kube
        .list(target, &ListQuery::of(&r.api_version, &r.kind))
        .await?
        .into_iter()
        .find(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                && o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|ns| ns.starts_with(TEAM_NAMESPACE_PREFIX))
        }))
}

fn rank(kind: WorkloadKind, pod: &Value, name: &str) -> Option<String> {
    let label = |k: &str| {
        pod.pointer(&format!("/metadata/labels/{}", k.replace('/', "~1")))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match kind {
        WorkloadKind::Ray => label("ray.io/node-type"),
        WorkloadKind::Pytorch => label("training.kubeflow.org/replica-index").or_else(|| {
            // The operator names pods `<job>-pods-<rank>`.
            let (_, index) = name.rsplit_once('-')?;
            index.parse::<u32>().ok().map(|i| i.to_string())
        }),
        WorkloadKind::Job | WorkloadKind::Deployment => None,
    }
}

impl Workload {
    /// The workload's pods, by rank then name (at most [`MAX_PODS`]).
    pub async fn pods(&self, engine: &Engine) -> ApiResult<Vec<PodRef>> {
        let items = engine
            .cloud()
            .kube
            .list(
                &self.target,
                &ListQuery::of("v1", "Pod")
                    .namespace(&self.namespace)
                    .labels(&self.selector),
            )
            .await?;
        let mut pods: Vec<PodRef> = items
            .iter()
            .filter_map(|p| {
                let name = p.pointer("/metadata/name")?.as_str()?.to_string();
                Some(PodRef {
                    rank: rank(self.kind, p, &name),
                    container: p
                        .pointer("/spec/containers/0/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    phase: p
                        .pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or("Pending")
                        .to_string(),
                    uid: p
                        .pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or(&name)
                        .to_string(),
                    pod: name,
                })
            })
            .collect();
        pods.sort_by(|a, b| {
            // Numbered ranks in order; a Ray head (rank 0 of its job) before its workers.
            let key = |p: &PodRef| match p.rank.as_deref() {
                Some("head") => Some(0),
                Some("worker") => Some(1),
                r => r.and_then(|r| r.parse::<u32>().ok()),
            };
            key(a).cmp(&key(b)).then(a.pod.cmp(&b.pod))
        });
        pods.truncate(MAX_PODS);
        Ok(pods)
    }

    /// Why the workload's logs are over, if they are: it ended or is gone.
    pub async fn ended(&self, engine: &Engine) -> ApiResult<Option<String>> {
        Ok(
            match current(
                engine,
                &self.target,
                self.kind,
                Some(&self.namespace),
                &self.name,
            )
            .await?
            {
                None => Some(format!(
                    "{} `{}` was deleted",
                    self.kind.as_str(),
                    self.name
                )),
                Some(object) => self.kind.ended(&object),
            },
        )
    }
}

/// What `GET …/logs` returns.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogsView {
    pub kind: WorkloadKind,
    pub workload: String,
    pub pods: Vec<PodLog>,
    /// Every pod's selected lines, pod by pod, each prefixed `[pod rank N]` (or `[pod]`).
    pub lines: Vec<String>,
    /// Lines were left out to keep the answer bounded (ask with a smaller `tail` or a `pod`).
    pub truncated: bool,
}

/// One pod's part of a snapshot.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodLog {
    #[serde(flatten)]
    pub pod: PodRef,
    /// Lines selected from this pod.
    pub lines: usize,
    /// Why this pod's log could not be read (e.g. its container has not started).
    pub error: Option<String>,
}

/// A bounded snapshot of a workload's logs.
pub async fn snapshot(
    engine: &Engine,
    cluster: &str,
    kind: &str,
    name: &str,
    q: &LogsQuery,
) -> ApiResult<LogsView> {
    let tail = q.tail.unwrap_or(DEFAULT_TAIL);
    if !(1..=MAX_TAIL).contains(&tail) {
        return Err(ApiError::validation(
            "tail",
            format!("tail is 1 to {MAX_TAIL} lines per pod"),
        ));
    }
    let since = since_seconds(q.since.as_deref())?;
    let grep = Grep::parse(q.grep.as_deref())?;
    if let Some(c) = &q.container {
        validate::dns_label("container", "container name", c)?;
    }
    let w = workload(engine, cluster, kind, name).await?;
    let pods = select_pods(w.pods(engine).await?, q.pod.as_deref())?;
    let per_pod = (MAX_LINES / pods.len().max(1)).max(1);
    let mut view = LogsView {
        kind: w.kind,
        workload: w.name.clone(),
        pods: Vec::new(),
        lines: Vec::new(),
        truncated: false,
    };
    for pod in pods {
        let query = LogQuery {
            container: q
                .container
                .clone()
                .or_else(|| Some(pod.container.clone()).filter(|c| !c.is_empty())),
            // A filter applies to the tail the caller asked for, so read that many lines.
            tail_lines: Some(i64::from(tail)),
            since_seconds: since,
            limit_bytes: Some(MAX_BYTES_PER_POD),
        };
        let read = engine
            .cloud()
            .kube
            .pod_log(&w.target, &w.namespace, &pod.pod, &query)
            .await;
        let (mut lines, error): (Vec<String>, _) = match read {
            Ok(text) => (
                text.lines()
                    .filter(|l| grep.matches(l))
                    .map(|l| format!("{} {}", pod.prefix(), crate::cloud::cut_log_line(l)))
                    .collect(),
                None,
            ),
            Err(e) if e.code == "BadRequest" && q.container.is_some() => {
                return Err(ApiError::validation_hint(
                    "container",
                    e.message,
                    json!(pod.container),
                ))
            }
            Err(e) => (Vec::new(), Some(e.message)),
        };
        if lines.len() > per_pod {
            lines.drain(..lines.len() - per_pod);
            view.truncated = true;
        }
        view.pods.push(PodLog {
            lines: lines.len(),
            error,
            pod,
        });
        view.lines.extend(lines);
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_period_pattern_admits_only_accepted_periods() {
        let re = pattern_schema(SINCE_PATTERN);
        let doc = crate::api::openapi::document();
        let logs = &doc["paths"]["/api/clusters/{name}/workloads/{kind}/{workload}/logs"]["get"];
        let since = logs["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "since")
            .unwrap();
        assert_eq!(since["schema"]["pattern"], SINCE_PATTERN);
        for s in [
            "1", "90", "90s", "604800", "604801", "10m", "10080m", "10081m", "168h", "169h", "0",
            "1d", "", "h", "99999h", "100000", "599999", "603999", "604799",
        ] {
            let documented = jsonschema::is_valid(&re, &serde_json::json!(s));
            let accepted = since_seconds(Some(s)).is_ok();
            assert_eq!(documented, accepted, "`{s}`");
        }
    }

    /// A JSON-schema string with `pattern`, as the OpenAPI document declares it.
    fn pattern_schema(pattern: &str) -> serde_json::Value {
        serde_json::json!({"type": "string", "pattern": pattern})
    }

    #[test]
    fn periods_and_patterns_are_checked() {
        assert_eq!(since_seconds(Some("90")).unwrap(), Some(90));
        assert_eq!(since_seconds(Some("10m")).unwrap(), Some(600));
        assert_eq!(since_seconds(Some("2h")).unwrap(), Some(7200));
        for bad in ["0", "-5", "10d", "m", "", "9999h", "1.5m"] {
            assert!(since_seconds(Some(bad)).is_err(), "{bad}");
        }
        let g = Grep::parse(Some("nccl|Out Of Memory")).unwrap();
        assert!(g.matches("[rank0] NCCL WARN timeout"));
        assert!(g.matches("CUDA out of memory"));
        assert!(!g.matches("step=10 loss=1.2"));
        assert!(Grep::parse(Some("a\u{7}b")).is_err());
        assert!(Grep::parse(None).unwrap().matches("anything"));
    }

    #[test]
    fn pods_are_found_by_the_labels_their_controller_sets() {
        let job = json!({"metadata": {"name": "t1"}});
        assert_eq!(WorkloadKind::Pytorch.selector(&job).unwrap(), "HPJob=t1");
        assert_eq!(
            WorkloadKind::Ray.selector(&job).unwrap(),
            "instantstart.io/training-job=t1"
        );
        let ray = json!({"metadata": {"name": "t1"}, "status": {"rayClusterName": "t1-x7k2p"}});
        assert_eq!(
            WorkloadKind::Ray.selector(&ray).unwrap(),
            "ray.io/cluster=t1-x7k2p"
        );
        let d = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d", "tier": "x"}}}});
        assert_eq!(
            WorkloadKind::Deployment.selector(&d).unwrap(),
            "app=d,tier=x"
        );
        let pod = json!({"metadata": {"labels": {}}});
        assert_eq!(
            rank(WorkloadKind::Pytorch, &pod, "t1-pods-3").as_deref(),
            Some("3")
        );
        assert_eq!(rank(WorkloadKind::Deployment, &pod, "d-1"), None);
        assert!(WorkloadKind::parse("pod").is_err());
    }
}
