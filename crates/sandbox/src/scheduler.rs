//! The simulated scheduler: places replicas on ready nodes with free GPUs, and writes the
//! status a workload then reports.

use std::sync::Arc;

use serde_json::{json, Value};

use super::eks_control::eks_arn;
use super::workload::Schedule;
use super::{durations as d, Life, Res, Sandbox, REGION};
use cloud::*;

/// Kinds whose status depends on the nodes (their pods must be placed to become ready).
pub(super) fn scheduled_kind(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment"
            | "DaemonSet"
            | "HyperPodPyTorchJob"
            | "RayJob"
            | "InferenceEndpointConfig"
            | "JumpStartModel"
            | "ScaledObject"
            | "Workspace"
    )
}

/// The instance types a DaemonSet's node affinity limits it to, if it names any.
pub(super) fn affinity_types(obj: &Value) -> Option<Vec<String>> {
    obj.pointer("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions")?
        .as_array()?
        .iter()
        .find(|e| e["key"] == "node.kubernetes.io/instance-type" && e["operator"] == "In")
        .and_then(|e| serde_json::from_value(e["values"].clone()).ok())
}

/// GPUs one replica of a workload asks for.
pub(super) fn gpu_request(workload: &Value) -> u32 {
    workload
        .pointer("/spec/template/spec")
        .map_or(0, super::workload::pod_gpus)
}

/// Whose pods an object's are: its namespace, and the labels of `labels` that name a holder.
fn holder_of(
    obj: &Value,
    labels: Option<&Value>,
) -> (String, std::collections::BTreeMap<String, String>) {
    let kept = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| HOLDER_LABELS.contains(&k.as_str()))
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
    (ns.unwrap_or("default").to_string(), kept)
}

impl Sandbox {
    /// The HyperPod cluster orchestrated by this EKS cluster, as EKS and SageMaker know it.
    pub(super) async fn orchestrated(&self, target: &KubeTarget) -> CloudResult<Option<Res>> {
        let eks_arn = eks_arn(&target.cluster);
        Ok(self
            .list("hyperpod-cluster")
            .await?
            .into_iter()
            .find(|r| r.deleted_ms.is_none() && r.data["eksClusterArn"] == eks_arn.as_str()))
    }

    /// Places every Deployment's replicas, oldest first, on ready nodes with enough free GPUs
    /// (and the instance type its node selector names): first come, first served, as the
    /// scheduler would with nothing preempted.
    pub(crate) async fn schedule(&self, target: &KubeTarget) -> CloudResult<Schedule> {
        let record = self.orchestrated(target).await?;
        let hp = record
            .as_ref()
            .and_then(|r| r.data["name"].as_str())
            .unwrap_or_default()
            .to_string();
        let verdicts = match &record {
            Some(r) => self.group_verdicts(r).await?,
            None => Default::default(),
        };
        let node_role = record.as_ref().and_then(|r| {
            r.data
                .pointer("/instanceGroups/0/executionRoleArn")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let mut nodes = Vec::new();
        let mut token = None;
        loop {
            let page = match HyperPod::list_cluster_nodes(self, &hp, token).await {
                Ok(p) => p,
                Err(e) if e.code == "ResourceNotFound" => break,
                Err(e) => return Err(e),
            };
            nodes.extend(page.nodes);
            token = page.next_token;
            if token.is_none() {
                break;
            }
        }
        let mut nodes: Vec<NodeState> = nodes
            .into_iter()
            .map(|n| {
                let gpus = gpus_per_instance(&n.instance_type);
                let blocked = verdicts.get(&n.instance_group).cloned().flatten();
                let running = n.status == "Running" && blocked.is_none();
                // A node that failed its deep health check is Ready but tainted out of use.
                let failed = record
                    .as_ref()
                    .is_some_and(|r| super::triage::dhc_failed(r, &n.instance_id));
                let not_ready_reason = match (&blocked, n.status.as_str()) {
                    (Some(why), _) => Some(why.clone()),
                    (None, "Running") => None,
                    (None, status) => Some(format!("instance {status}")),
                };
                NodeState {
                    name: format!("hyperpod-{}", n.instance_id),
                    instance_id: Some(n.instance_id),
                    instance_type: Some(n.instance_type),
                    instance_group: Some(n.instance_group),
                    capacity_type: Some("on-demand".into()),
                    ready: running,
                    not_ready_reason,
                    unschedulable: !running || failed,
                    gpus: GpuUsage {
                        total: gpus,
                        allocatable: gpus,
                        requested: 0,
                        free: gpus,
                    },
                    health: super::triage::health_labels(failed, running)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                }
            })
            .collect();
        let scaled = self.scaled(target).await?;
        let kueue = self.kueue(target, record.as_ref(), &nodes, &scaled).await?;
        // What asks for a node: each Deployment's replicas, and each space that runs (its
        // controller's Deployment of one), oldest first.
        let deployments = format!("{}/apps/v1/Deployment/", target.cluster);
        let workspaces = format!(
            "{}/workspace.jupyter.org/v1alpha1/Workspace/",
            target.cluster
        );
        let mut asks: Vec<(Res, u64, u32, Option<String>)> = vec![];
        // Whose pods they are: a Deployment's template labels, a Workspace's own.
        let holder = |r: &Res| {
            holder_of(
                &r.data,
                r.data
                    .pointer("/spec/template/metadata/labels")
                    .or_else(|| r.data.pointer("/metadata/labels")),
            )
        };
        let mut holding = std::collections::BTreeMap::new();
        // The cluster's training jobs, placed after everything else (read in the same pass).
        let ours = format!("{}/", target.cluster);
        let mut jobs = Vec::new();
        // Whether the cluster has a space, whose home volume the EBS CSI driver attaches.
        let mut spaces = false;
        for r in self.list("k8s-object").await? {
            let key = r.data["__key"].as_str().unwrap_or_default();
            if r.deleted_ms.is_some() {
                continue;
            }
            spaces |= key.starts_with(&ours) && super::spaces::is_workspace(&r.data);
            if key.starts_with(&ours) && super::training::is_training(&r.data) {
                jobs.push(r);
                continue;
            }
            let selector = |pointer: &str| {
                r.data
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            if key.starts_with(&deployments) {
                let name = r.data["metadata"]["name"].as_str().unwrap_or_default();
                let want = Schedule::autoscaled_in(&scaled, name)
                    .or_else(|| r.data.pointer("/spec/replicas").and_then(Value::as_u64))
                    .unwrap_or(1);
                let at =
                    selector("/spec/template/spec/nodeSelector/node.kubernetes.io~1instance-type");
                let g = gpu_request(&r.data);
                asks.push((r, want, g, at));
            } else if key.starts_with(&workspaces) && self.workspace_runs(&r.data, r.created_ms) {
                let at = selector("/spec/nodeSelector/node.kubernetes.io~1instance-type");
                let g = super::workload::pod_gpus(&super::spaces::pod_spec(&r.data));
                asks.push((r, 1, g, at));
            }
        }
        asks.sort_by_key(|(r, ..)| r.created_ms);
        let (mut placed, mut pending_pods, mut pending_gpus, mut pods) =
            (std::collections::HashMap::new(), 0, 0, 0);
        for (r, want, g, selector) in &asks {
            // Only the replicas Kueue admitted leave their scheduling gate.
            let held = kueue.gated.get(&r.id).map_or(0, |g| g.len() as u64);
            let want = want.saturating_sub(held);
            let mut fits = 0;
            for _ in 0..want {
                let node = nodes.iter_mut().find(|n| {
                    n.ready
                        && !n.unschedulable
                        && selector
                            .as_deref()
                            .is_none_or(|t| n.instance_type.as_deref() == Some(t))
                        && n.gpus.free >= *g
                });
                match node {
                    Some(n) => {
                        n.gpus.requested += g;
                        n.gpus.free -= g;
                        fits += 1;
                        if *g > 0 {
                            *holding.entry((n.name.clone(), holder(r))).or_insert(0) += g;
                        }
                    }
                    None if *g > 0 => {
                        pending_pods += 1;
                        pending_gpus += g;
                    }
                    None => {}
                }
            }
            pods += usize::try_from(fits).unwrap_or(usize::MAX);
            placed.insert(r.id.clone(), fits);
        }
        let claims = holding
            .into_iter()
            .map(|((node, (namespace, labels)), gpus)| GpuClaim {
                node: node.into(),
                namespace: namespace.into(),
                labels: Arc::new(labels.into()),
                gpus,
            })
            .collect();
        let mut schedule = Schedule {
            nodes,
            claims,
            placed,
            pending_pods,
            pending_gpus,
            pods,
            node_role,
            scaled,
            kueue,
            // Read only where a space needs it: the schedule is made on every read of a cluster.
            volume_attach: match &record {
                Some(r) if spaces => {
                    self.volume_attach(&target.cluster, &super::hyperpod::hyperpod_arn(&r.id))
                        .await?
                }
                _ => None,
            },
        };
        self.place_training(jobs, &mut schedule);
        Ok(schedule)
    }

    /// Why the EBS CSI driver's controller cannot attach a volume to a node of this HyperPod
    /// cluster, if it cannot. HyperPod nodes are not the account's EC2 instances: the driver
    /// attaches through SageMaker (`sagemaker:AttachClusterNodeVolume` on the cluster), with
    /// the credentials pod identity gives its controller's service account (SageMaker
    /// Developer Guide, "Using the Amazon EBS CSI driver on SageMaker HyperPod EKS clusters").
    async fn volume_attach(
        &self,
        cluster: &str,
        hyperpod_arn: &str,
    ) -> CloudResult<Option<String>> {
        let key = format!("{cluster}/kube-system/ebs-csi-controller-sa");
        let bound = self
            .by_name("eks-pod-identity", &key)
            .await?
            .filter(|r| r.deleted_ms.is_none());
        let Some(binding) = bound else {
            return Ok(Some("the EBS CSI controller's service account kube-system/ebs-csi-controller-sa has no pod identity association: it runs with the node's credentials".into()));
        };
        let role_arn = binding.data["roleArn"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let role = self.role_record(&role_arn).await?;
        let action = "sagemaker:AttachClusterNodeVolume";
        Ok(match role {
            Some(r) if super::rules::role_allows(&r, action, hyperpod_arn) => None,
            _ => Some(format!(
                "{role_arn} is not authorized to perform: {action} on resource: {hyperpod_arn}"
            )),
        })
    }

    /// The ranks of the training jobs running now, placed last on the free GPUs of ready nodes
    /// of their type: their GPUs are then in use, held by the job (for costs and the simulated
    /// DCGM series). The simulated job itself waits only for ready nodes, so a rank finding no
    /// free GPU (a replica took it) runs unseen rather than displacing anything.
    fn place_training(&self, mut jobs: Vec<Res>, s: &mut Schedule) {
        jobs.sort_by_key(|r| r.created_ms);
        for r in jobs {
            let obj = r.data.clone();
            if !super::training::running(&self.k8s_status(r, Some(s))["status"]) {
                continue;
            }
            let spec = super::training::pod_spec(&obj);
            let g = spec.map_or(0, super::workload::pod_gpus);
            if g == 0 {
                continue;
            }
            let at = spec
                .and_then(|p| p.pointer("/nodeSelector/node.kubernetes.io~1instance-type"))
                .and_then(Value::as_str);
            // The template's labels a holder is known by, and the one the operator adds.
            let (namespace, mut labels) = holder_of(
                &obj,
                obj.pointer("/spec/replicaSpecs/0/template/metadata/labels"),
            );
            let (label, value) = super::training::holder_label(&obj);
            labels.insert(label.to_string(), value);
            for _ in 0..super::training::nodes_wanted(&obj) {
                let Some(n) = s.nodes.iter_mut().find(|n| {
                    n.ready
                        && !n.unschedulable
                        && at.is_none_or(|t| n.instance_type.as_deref() == Some(t))
                        && n.gpus.free >= g
                }) else {
                    break;
                };
                n.gpus.requested += g;
                n.gpus.free -= g;
                s.pods += 1;
                s.claims.push(GpuClaim {
                    node: n.name.as_str().into(),
                    namespace: namespace.as_str().into(),
                    labels: Arc::new(labels.clone().into()),
                    gpus: g,
                });
            }
        }
    }

    /// A stored object as the API server would return it: without the sandbox's key, with
    /// `creationTimestamp`, and — for workloads — a status that turns
    /// ready a little (simulated) time after the object was applied.
    pub(super) fn k8s_status(&self, res: Res, schedule: Option<&Schedule>) -> Value {
        let ready = self.life(&res, d::K8S_WORKLOAD_READY, 1.0) == Life::Ready;
        let age = self.simulated_secs(res.created_ms, super::now_ms());
        let placed = schedule.and_then(|s| s.placed.get(&res.id).copied());
        let mut o = res.data;
        let failures = o[super::workload::FAILURES].as_u64().unwrap_or(0);
        if let Some(m) = o.as_object_mut() {
            m.remove("__key");
            m.remove(super::workload::FAILURES);
            m.remove(super::workload::PODS);
            m.remove(super::workload::SCALED);
        }
        o["metadata"]["creationTimestamp"] = json!(cloud::clock::rfc3339_ms(res.created_ms));
        // Every object has a uid, as the API server gives it (owner references name it).
        o["metadata"]["uid"] = json!(res.id);
        if super::spaces::is_workspace(&o) {
            let held = schedule.is_some_and(|s| s.kueue.gated.contains_key(&res.id));
            self.workspace_status(&mut o, res.created_ms, schedule, held, placed);
            return o;
        }
        let n = u64::from(ready);
        match o["kind"].as_str() {
            Some("Deployment") => {
                // KEDA's autoscaler writes the replicas of a Deployment it scales.
                let name = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if let Some(n) = schedule.and_then(|s| s.autoscaled(&name)) {
                    o["spec"]["replicas"] = json!(n);
                }
                let want = o
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                // Replicas the scheduler found no GPUs for never become ready; past the
                // progress deadline the Deployment says so, as the real controller does.
                let placed = placed.unwrap_or(want).min(want);
                o["status"] = json!({"replicas": want, "readyReplicas": placed * n,
                                     "availableReplicas": placed * n});
                let deadline = o
                    .pointer("/spec/progressDeadlineSeconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(600.0);
                let held = schedule
                    .and_then(|s| s.kueue.gated.get(&res.id))
                    .map_or(0, |g| g.len() as u64);
                if placed < want && age > deadline {
                    let gpus = gpu_request(&o);
                    let why = if held > 0 {
                        format!("{held} held by Kueue until their team's queue admits them")
                    } else if gpus == 0 {
                        "no node is ready".to_string()
                    } else {
                        format!(
                            "no node has {gpus} free nvidia.com/gpu{}",
                            o.pointer("/spec/template/spec/nodeSelector/node.kubernetes.io~1instance-type")
                                .and_then(Value::as_str)
                                .map(|t| format!(" on {t}"))
                                .unwrap_or_default()
                        )
                    };
                    o["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": format!("{} of {want} replicas cannot be scheduled: {why}", want - placed)}]);
                }
            }
            Some("DaemonSet") => {
                // One pod per ready node the DaemonSet's affinity admits.
                let types = affinity_types(&o);
                let desired = schedule.map_or(1, |s| {
                    s.nodes
                        .iter()
                        .filter(|node| node.ready)
                        .filter(|node| {
                            types.as_ref().is_none_or(|t| {
                                node.instance_type.as_ref().is_some_and(|it| t.contains(it))
                            })
                        })
                        .count() as u64
                });
                o["status"] = json!({"desiredNumberScheduled": desired, "numberReady": desired * n,
                                     "numberAvailable": desired * n});
            }
            Some("Job") => {
                o["status"] = if ready {
                    json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
                } else {
                    json!({"active": 1})
                };
            }
            Some("Service") => {
                // What the service controllers would fill in: an address, and for a load
                // balancer its (internal) DNS name once provisioned.
                let octet = res.created_ms.rem_euclid(250) + 2;
                o["spec"]["clusterIP"] = json!(format!("10.100.0.{octet}"));
                let public = o.pointer(
                    "/metadata/annotations/service.beta.kubernetes.io~1aws-load-balancer-scheme",
                ) == Some(&json!("internet-facing"));
                if o.pointer("/spec/type") == Some(&json!("LoadBalancer")) && ready {
                    let name = o["metadata"]["name"].as_str().unwrap_or("svc").to_string();
                    o["status"] = json!({"loadBalancer": {"ingress": [
                        {"hostname": format!("{}{name}-sandbox.{REGION}.elb.amazonaws.com",
                            if public { "" } else { "internal-" })}]}});
                }
            }
            Some("HyperPodPyTorchJob" | "RayJob") => {
                // Under Kueue a queued job runs from its current admission, and waits unadmitted.
                let queued = schedule.and_then(|s| s.kueue.jobs.get(&res.id));
                o["status"] = match queued {
                    Some(q) => match q.admitted_ms {
                        Some(since) => {
                            let age = self.simulated_secs(since, super::now_ms());
                            let mut status = super::training::status(&o, age, schedule, failures);
                            super::training::resumed(&mut status, q.verdict.evictions);
                            status
                        }
                        None => super::training::held(&o, q),
                    },
                    None => super::training::status(&o, age, schedule, failures),
                };
            }
            Some("InferenceEndpointConfig" | "JumpStartModel") => {
                let held = schedule
                    .and_then(|s| s.kueue.gated.get(&res.id))
                    .map_or(0, |g| g.len() as u64);
                o["status"] = super::endpoints::status(&o, age, schedule, failures, held);
            }
            Some("ScaledObject") => {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                if let Some(why) = schedule
                    .and_then(|s| s.scaled.get(name))
                    .and_then(|k| k.denied.clone())
                {
                    o["status"] = json!({"scaleTargetKind": "apps/v1.Deployment",
                        "conditions": [
                            {"type": "Ready", "status": "False", "reason": "TriggerError",
                             "message": why},
                            {"type": "Active", "status": "False", "reason": "ScalerNotActive"}]});
                } else if let Some(k) = schedule.and_then(|s| s.scaled.get(name)) {
                    let flag = |b: bool| if b { "True" } else { "False" };
                    o["status"] = json!({"scaleTargetKind": "apps/v1.Deployment",
                        "originalReplicaCount": 1,
                        "externalMetricNames": ["s0-prometheus"],
                        "conditions": [
                            {"type": "Ready", "status": "True", "reason": "ScaledObjectReady",
                             "message": "ScaledObject is defined correctly and is ready for scaling"},
                            {"type": "Active", "status": flag(k.active),
                             "reason": if k.active { "ScalerActive" } else { "ScalerNotActive" },
                             "message": format!("simulated queue {} → {} replicas", k.queue, k.replicas)},
                            {"type": "Fallback", "status": "False", "reason": "NoFallbackFound"}]});
                }
            }
            Some("PersistentVolumeClaim") => o["status"] = json!({"phase": "Bound"}),
            Some("PersistentVolume") => o["status"] = json!({"phase": "Bound"}),
            _ => {}
        }
        o
    }
}
