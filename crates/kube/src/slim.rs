//! What the watch caches read of a pod: a `Pod` holding only the fields the summary uses
//! (name, namespace, resource version, the labels naming its workload, node, the containers'
//! GPU requests and limits, phase, and a `PodScheduled` condition that is not `True`).
//! Everything else in the JSON (env, volumes, statuses, managed fields …) is skipped while
//! parsing, never allocated, so a 3 KB pod costs a few small strings on the way to its brief.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// A pod as the watch caches see it (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct SlimPod(pub Pod);

#[derive(Deserialize)]
struct Shadow {
    #[serde(default)]
    metadata: MetaShadow,
    spec: Option<SpecShadow>,
    status: Option<StatusShadow>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaShadow {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    #[serde(default, deserialize_with = "holder_labels")]
    labels: Option<BTreeMap<String, String>>,
}

/// A string read in place from the page's JSON when it has no escapes (a plain `Cow` in a
/// map is always copied): what is read past then costs no allocation at all.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// The entries of a string map whose key `keep` accepts (`None` when none is): the others are
/// read past without a copy.
fn kept<'de, D: serde::Deserializer<'de>, V>(
    d: D,
    keep: impl Fn(&str) -> bool,
    value: impl Fn(String) -> V,
) -> Result<Option<BTreeMap<String, V>>, D::Error> {
    let all: Option<BTreeMap<Text<'de>, Text<'de>>> = Option::deserialize(d)?;
    let kept: BTreeMap<String, V> = all
        .into_iter()
        .flatten()
        .filter(|(k, _)| keep(&k.0))
        .map(|(k, v)| (k.0.into_owned(), value(v.0.into_owned())))
        .collect();
    Ok((!kept.is_empty()).then_some(kept))
}

/// Only the labels of [`HOLDER_LABELS`](cloud::HOLDER_LABELS).
fn holder_labels<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    kept(d, |k| cloud::HOLDER_LABELS.contains(&k), |v| v)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecShadow {
    #[serde(default)]
    containers: Vec<ContainerShadow>,
    init_containers: Option<Vec<ContainerShadow>>,
    node_name: Option<String>,
}

#[derive(Deserialize)]
struct ContainerShadow {
    resources: Option<ResourcesShadow>,
}

#[derive(Deserialize)]
struct ResourcesShadow {
    #[serde(default, deserialize_with = "gpus_only")]
    requests: Option<BTreeMap<String, Quantity>>,
    #[serde(default, deserialize_with = "gpus_only")]
    limits: Option<BTreeMap<String, Quantity>>,
}

/// Only the GPU quantity: CPU, memory and the other resources are read past (each kept one
/// cost two short-lived strings per pod, and a relist of 10,000 pods left them as holes in the
/// heap between the summary's long-lived records).
fn gpus_only<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, Quantity>>, D::Error> {
    kept(d, |k| k == super::brief::GPU, Quantity)
}

#[derive(Deserialize)]
struct StatusShadow {
    phase: Option<String>,
    #[serde(default, deserialize_with = "not_scheduled")]
    conditions: Option<Vec<PodCondition>>,
}

/// Only a `PodScheduled` condition that is not `True` (what says a pod cannot be placed).
fn not_scheduled<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<PodCondition>>, D::Error> {
    #[derive(Deserialize)]
    struct Condition<'a> {
        #[serde(rename = "type", borrow)]
        type_: Cow<'a, str>,
        #[serde(borrow)]
        status: Cow<'a, str>,
        reason: Option<String>,
        message: Option<String>,
    }
    let all: Option<Vec<Condition<'de>>> = Option::deserialize(d)?;
    let kept: Vec<PodCondition> = all
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "PodScheduled" && c.status != "True")
        .map(|c| PodCondition {
            type_: c.type_.into_owned(),
            status: c.status.into_owned(),
            reason: c.reason,
            message: c.message,
            ..Default::default()
        })
        .collect();
    Ok((!kept.is_empty()).then_some(kept))
}

impl From<ContainerShadow> for Container {
    fn from(c: ContainerShadow) -> Self {
        Container {
            resources: c.resources.map(|r| ResourceRequirements {
                requests: r.requests,
                limits: r.limits,
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Shadow::deserialize(d)?;
        Ok(SlimPod(Pod {
            metadata: ObjectMeta {
                name: s.metadata.name,
                namespace: s.metadata.namespace,
                resource_version: s.metadata.resource_version,
                labels: s.metadata.labels,
                ..Default::default()
            },
            spec: s.spec.map(|spec| PodSpec {
                containers: spec.containers.into_iter().map(Container::from).collect(),
                init_containers: spec
                    .init_containers
                    .map(|cs| cs.into_iter().map(Container::from).collect()),
                node_name: spec.node_name,
                ..Default::default()
            }),
            status: s.status.map(|st| PodStatus {
                phase: st.phase,
                conditions: st.conditions,
                ..Default::default()
            }),
        }))
    }
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_pod_keeps_what_the_summary_reads_and_nothing_else() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-0", "namespace": "team", "resourceVersion": "42",
                         "labels": {"app": "w", "pod-template-hash": "5d9c"}, "managedFields": [{"manager": "kubelet"}],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "w", "uid": "u"}]},
            "spec": {"nodeName": "hyperpod-i-1",
                     "containers": [{"name": "main", "image": "img", "env": [{"name": "A", "value": "1"}],
                                     "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "4"},
                                                   "limits": {"nvidia.com/gpu": "4"}}}],
                     "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                     "volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [{"operator": "Exists"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "main", "ready": true}],
                       "conditions": [{"type": "Ready", "status": "False"},
                                      {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}]}
        });
        let SlimPod(pod) = serde_json::from_value(json).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("w-0"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("42"));
        // The workload's label stays; the ReplicaSet's hash does not.
        assert_eq!(
            pod.metadata.labels,
            Some(BTreeMap::from([("app".to_string(), "w".to_string())]))
        );
        assert!(pod.metadata.managed_fields.is_none());
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("hyperpod-i-1"));
        assert!(spec.volumes.is_none() && spec.tolerations.is_none());
        let main = &spec.containers[0];
        assert!(main.env.is_none() && main.image.is_none());
        let requests = main.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["nvidia.com/gpu"].0, "4");
        assert_eq!(
            requests.len(),
            1,
            "only the GPU request is kept: {requests:?}"
        );
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            init.resources.as_ref().unwrap().limits.as_ref().unwrap()["nvidia.com/gpu"].0,
            "8"
        );
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.container_statuses.is_none());
        // Of the conditions, only a PodScheduled that is not True.
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            (
                conditions[0].type_.as_str(),
                conditions[0].reason.as_deref(),
                conditions[0].message.as_deref()
            ),
            ("PodScheduled", Some("Unschedulable"), Some("0/4 nodes"))
        );
    }

    #[test]
    fn a_pod_without_spec_or_status_still_parses() {
        let SlimPod(pod) =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap();
        assert!(pod.spec.is_none() && pod.status.is_none());
    }
}
