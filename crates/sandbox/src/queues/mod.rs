//! The Kueue a governed sandbox cluster runs: the teams' ClusterQueues and the queued jobs'
//! Workloads as Kueue writes them (`kueue.x-k8s.io/v1beta1`), from the simulated admission
//! (`kueue.rs`) of what is labelled with a team's queue — training jobs (one Workload each) and
//! Deployments and managed endpoints' workers (one Workload per pod, as Kueue's pod integration
//! makes them; a pod it has not admitted waits behind its scheduling gate) — against the compute
//! quotas and priority classes in force. Present only once the task governance add-on
//! (which installs Kueue) is active.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::durations as d;
use super::endpoints::{is_endpoint, worker_names, worker_spec, workers};
use super::hyperpod::hyperpod_arn;
use super::kueue::{simulate, Job, Kueue, Queued, Standing, Team, Why};
use super::spaces::{is_workspace, pod_name as space_pod, pod_spec as space_spec, wants_to_run};
use super::workload::{fnv1a, pod_gpus, replica_names, Scaled, Schedule};
use super::{now_ms, Life, Res, Sandbox};
use cloud::*;

const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";
const GPU: &str = "nvidia.com/gpu";

fn labels<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// A job's pod set: name, replicas, its pod template's spec (one pod of a Deployment).
fn pod_set(obj: &Value) -> (String, u64, Value) {
    if obj["kind"] == "Deployment" {
        let spec = obj.pointer("/spec/template/spec").cloned();
        return ("main".into(), 1, spec.unwrap_or_default());
    }
    if is_endpoint(obj) {
        return ("main".into(), 1, worker_spec(obj));
    }
    if is_workspace(obj) {
        return ("main".into(), 1, space_spec(obj));
    }
    let (set, replicas) = if obj["kind"] == "RayJob" {
        (
            obj.pointer("/spec/rayClusterSpec/workerGroupSpecs/0"),
            "/replicas",
        )
    } else {
        (obj.pointer("/spec/replicaSpecs/0"), "/replicas")
    };
    let set = set.cloned().unwrap_or_default();
    let name = set["name"]
        .as_str()
        .or_else(|| set["groupName"].as_str())
        .unwrap_or("main")
        .to_string();
    let count = set.pointer(replicas).and_then(Value::as_u64).unwrap_or(1);
    (
        name,
        count,
        set.pointer("/template/spec").cloned().unwrap_or_default(),
    )
}

fn team_of_queue(queue: &str) -> Option<&str> {
    queue
        .strip_prefix("hyperpod-ns-")?
        .strip_suffix("-localqueue")
}

fn condition(kind: &str, ok: bool, reason: &str, message: &str, at: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": at})
}

/// A queued workload as stored: a job, or one replica of a Deployment (its index and its pod).
struct Entry {
    res: Res,
    pod: Option<(u64, String)>,
}

/// What Kueue decides from: the teams' queues (with their quotas and when each was made), the
/// queued workloads (as stored, and as the simulation sees them), the unassigned GPUs it may
/// lend.
struct Inputs {
    teams: Vec<Team>,
    quotas: Vec<(TeamQuota, i64)>,
    queued: Vec<Entry>,
    jobs: Vec<Job>,
    pool: BTreeMap<String, u32>,
}

/// Now, and how simulated seconds map to wall-clock ms.
#[derive(Clone, Copy)]
struct Clock {
    now: i64,
    scale: f64,
}

impl Clock {
    fn wall_ms(self, t: f64) -> i64 {
        self.now + (t / self.scale * 1000.0) as i64
    }

    fn at(self, t: f64) -> String {
        cloud::clock::rfc3339_ms(self.wall_ms(t))
    }
}

impl Sandbox {
    /// Whether the task governance add-on runs on the EKS cluster `target`.
    async fn governance_running(&self, target: &KubeTarget) -> CloudResult<bool> {
        Ok(self
            .by_name(
                "eks-addon",
                &format!("{}/{TASK_GOVERNANCE_ADDON}", target.cluster),
            )
            .await?
            .is_some_and(|a| self.life(&a, d::ADDON_CREATE, d::ADDON_CREATE / 3.0) == Life::Ready))
    }

    /// Whether the namespace `hyperpod-ns-<team>` exists: the task governance add-on makes it
    /// for a team whose quota is in force (what Kueue's LocalQueues are made from, without
    /// running the admission simulation).
    pub(super) async fn team_namespace_exists(
        &self,
        target: &KubeTarget,
        namespace: &str,
    ) -> CloudResult<bool> {
        let Some(team) = namespace.strip_prefix("hyperpod-ns-") else {
            return Ok(true);
        };
        if !self.governance_running(target).await? {
            return Ok(false);
        }
        let Some(record) = self.orchestrated(target).await? else {
            return Ok(false);
        };
        let force = self.in_force(&hyperpod_arn(&record.id)).await?;
        Ok(force.quotas.iter().any(|(t, _, _)| t == team))
    }

    /// Kueue on the EKS cluster `target` orchestrates, for the HyperPod cluster `record`.
    pub(super) async fn kueue(
        &self,
        target: &KubeTarget,
        record: Option<&Res>,
        nodes: &[NodeState],
        scaled: &HashMap<String, Scaled>,
    ) -> CloudResult<Kueue> {
        let installed = self.governance_running(target).await?;
        let Some(record) = record.filter(|_| installed) else {
            return Ok(Kueue::default());
        };
        let force = self.in_force(&hyperpod_arn(&record.id)).await?;
        let types = super::governance::instance_types(record);
        let now = now_ms();
        let rel = |ms: i64| -self.simulated_secs(ms, now);
        let nominal_of = |q: &TeamQuota| {
            let mut nominal: BTreeMap<String, u32> = types.iter().map(|t| (t.clone(), 0)).collect();
            for r in &q.resources {
                let gpus = r
                    .accelerators
                    .unwrap_or_else(|| r.count.unwrap_or(0) * gpus_per_instance(&r.instance_type));
                *nominal.entry(r.instance_type.clone()).or_insert(0) += gpus;
            }
            nominal
        };
        let teams: Vec<Team> = force
            .quotas
            .iter()
            .map(|(team, q, _)| Team {
                name: team.clone(),
                nominal: nominal_of(q),
                earlier: force
                    .earlier
                    .get(team)
                    .into_iter()
                    .flatten()
                    .map(|(until, q)| (rel(*until), nominal_of(q)))
                    .collect(),
                sharing: q.sharing,
                borrow_limit: q.borrow_limit,
                preempt: q.preempt,
            })
            .collect();
        // Under idle-resource sharing, GPUs no team was given are lent too.
        let mut pool = BTreeMap::new();
        if force
            .policy
            .as_ref()
            .is_some_and(|p| p.idle_resource_sharing)
        {
            for n in nodes {
                if let Some(t) = &n.instance_type {
                    *pool.entry(t.clone()).or_insert(0u32) += n.gpus.total;
                }
            }
            for t in &teams {
                for (f, g) in &t.nominal {
                    if let Some(p) = pool.get_mut(f) {
                        *p = p.saturating_sub(*g);
                    }
                }
            }
        }
        let weight = |class: &str| {
            force
                .policy
                .as_ref()
                .and_then(|p| {
                    p.priority_classes
                        .iter()
                        .find(|c| priority_label(&c.name) == class)
                })
                .map_or(0, |c| i64::from(c.weight))
        };
        let prefix = format!("{}/", target.cluster);
        let queued: Vec<Entry> = self
            .history("k8s-object")
            .await?
            .into_iter()
            .filter(|r| {
                r.data["__key"]
                    .as_str()
                    .is_some_and(|k| k.starts_with(&prefix))
                    && (super::training::is_training(&r.data)
                        || is_endpoint(&r.data)
                        || r.data["kind"] == "Deployment"
                        || (is_workspace(&r.data) && wants_to_run(&r.data)))
                    && labels(&r.data, QUEUE_LABEL).is_some()
            })
            .flat_map(|res| {
                // One Workload per replica a Deployment (or KEDA) or an endpoint asks for now.
                let names = if is_workspace(&res.data) {
                    vec![space_pod(&res.data)]
                } else if is_endpoint(&res.data) {
                    worker_names(&res.data, &res.id, workers(&res.data))
                } else if res.data["kind"] == "Deployment" {
                    let name = res.data["metadata"]["name"].as_str().unwrap_or_default();
                    let want = Schedule::autoscaled_in(scaled, name)
                        .or_else(|| res.data.pointer("/spec/replicas").and_then(Value::as_u64))
                        .unwrap_or(1);
                    replica_names(&res.data, want)
                } else {
                    return vec![Entry { res, pod: None }];
                };
                (0..)
                    .zip(names)
                    .map(|(i, pod)| Entry {
                        res: res.clone(),
                        pod: Some((i, pod)),
                    })
                    .collect()
            })
            .collect();
        let jobs: Vec<Job> = queued
            .iter()
            .map(|Entry { res: r, pod }| {
                let (_, count, spec) = pod_set(&r.data);
                let failures = r.data[super::workload::FAILURES].as_u64().unwrap_or(0);
                let team = labels(&r.data, QUEUE_LABEL)
                    .and_then(team_of_queue)
                    .unwrap_or_default()
                    .to_string();
                // A pod that names no instance type gets the first of its team's flavors with
                // quota, as Kueue assigns one (the first flavor, when none has any).
                let flavor = spec
                    .pointer("/nodeSelector/node.kubernetes.io~1instance-type")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        let nominal = &teams.iter().find(|t| t.name == team)?.nominal;
                        nominal
                            .iter()
                            .find(|(_, n)| **n > 0)
                            .or_else(|| nominal.iter().next())
                            .map(|(f, _)| f.clone())
                    })
                    .unwrap_or_default();
                Job {
                    id: match pod {
                        Some((i, _)) => format!("{}#{i}", r.id),
                        None => r.id.clone(),
                    },
                    team,
                    priority: labels(&r.data, PRIORITY_LABEL).map_or(0, weight),
                    // A replica arrives when it was asked for.
                    arrive: rel(match pod {
                        Some((i, _)) => super::workload::replica_since(&r.data, *i, r.created_ms),
                        None => r.created_ms,
                    }),
                    leave: r.deleted_ms.map(rel),
                    gpus: u32::try_from(count)
                        .unwrap_or(u32::MAX)
                        .saturating_mul(pod_gpus(&spec)),
                    flavor,
                    // A server runs until it is deleted.
                    run: match pod {
                        Some(_) => f64::INFINITY,
                        None => super::training::run_secs(&r.data, failures),
                    },
                }
            })
            .collect();
        let clock = Clock {
            now,
            scale: self.time_scale,
        };
        let quotas = force
            .quotas
            .iter()
            .map(|(_, q, c)| (q.clone(), *c))
            .collect();
        Ok(build(
            &Inputs {
                teams,
                quotas,
                queued,
                jobs,
                pool,
            },
            clock,
        ))
    }
}

/// Kueue's decisions and objects from its inputs.
fn build(inputs: &Inputs, clock: Clock) -> Kueue {
    let Inputs {
        teams,
        quotas,
        queued,
        jobs,
        pool,
    } = inputs;
    let outcome = simulate(teams, jobs, pool);
    let mut kueue = Kueue::default();
    let uid = |id: &str| format!("wl-{id}");
    for (Entry { res: r, pod }, job) in queued.iter().zip(jobs.iter()) {
        let Some(v) = outcome.jobs.get(&job.id) else {
            continue;
        };
        if let Some((i, _)) = pod {
            if !matches!(v.standing, Standing::Admitted { .. }) {
                kueue.gated.entry(r.id.clone()).or_default().push(*i);
            }
        }
        let (set, count, spec) = pod_set(&r.data);
        let queue = labels(&r.data, QUEUE_LABEL).unwrap_or_default();
        let cq = team_cluster_queue(&job.team);
        let message = match &v.standing {
                Standing::Pending { why, .. } | Standing::Preempted { why, .. } => match why {
                    Why::NoQueue => format!("LocalQueue {queue} doesn't exist"),
                    Why::Short { more } => format!("couldn't assign flavors to pod set {set}: insufficient unused quota for {GPU} in flavor {}, {more} more needed", job.flavor),
                    Why::TooBig { max } => format!("couldn't assign flavors to pod set {set}: insufficient quota for {GPU} in flavor {}, request > maximum capacity ({} > {max})", job.flavor, job.gpus),
                },
                _ => String::new(),
            };
        let at = |t: f64| clock.at(t);
        let reserved = |since: f64| {
            vec![
                condition(
                    "QuotaReserved",
                    true,
                    "QuotaReserved",
                    &format!("Quota reserved in ClusterQueue {cq}"),
                    &at(since),
                ),
                condition(
                    "Admitted",
                    true,
                    "Admitted",
                    "The workload is admitted",
                    &at(since),
                ),
            ]
        };
        let (conditions, admitted) = match &v.standing {
            Standing::Admitted { since, .. } => (reserved(*since), Some(*since)),
            Standing::Finished { at: end } => {
                let since = end - job.run;
                let mut c = reserved(since);
                c.push(condition(
                    "Finished",
                    true,
                    "Succeeded",
                    "Job finished successfully",
                    &at(*end),
                ));
                (c, Some(since))
            }
            Standing::Pending { since, why } => {
                let reason = if *why == Why::NoQueue {
                    "Inadmissible"
                } else {
                    "Pending"
                };
                (
                    vec![condition(
                        "QuotaReserved",
                        false,
                        reason,
                        &message,
                        &at(*since),
                    )],
                    None,
                )
            }
            Standing::Preempted {
                at: when,
                by,
                reclaim,
                ..
            } => {
                let (reason, due) = if *reclaim {
                    ("InCohortReclamation", "reclamation within the cohort")
                } else {
                    ("InClusterQueue", "prioritization in the ClusterQueue")
                };
                let preemptor = jobs.iter().find(|j| &j.id == by);
                let by_cq = preemptor.map_or(cq.clone(), |p| team_cluster_queue(&p.team));
                let why = format!("Preempted to accommodate a workload (UID: {}, JobUID: {by}) due to {due}; preemptor path: /{by_cq}; preemptee path: /{cq}", uid(by));
                (
                    vec![
                        condition("QuotaReserved", false, "Pending", &message, &at(*when)),
                        condition(
                            "Evicted",
                            true,
                            "Preempted",
                            "Preempted to accommodate a higher priority Workload",
                            &at(*when),
                        ),
                        condition("Preempted", true, reason, &why, &at(*when)),
                    ],
                    None,
                )
            }
        };
        let mut status = json!({"conditions": conditions});
        if admitted.is_some() {
            status["admission"] = json!({"clusterQueue": cq, "podSetAssignments": [
                    {"name": set, "count": count, "flavors": {GPU: job.flavor},
                     "resourceUsage": {GPU: job.gpus.to_string()}}]});
        }
        let meta = &r.data["metadata"];
        let kind = r.data["kind"].as_str().unwrap_or_default();
        let name = meta["name"].as_str().unwrap_or_default();
        let containers: Vec<Value> = spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    json!({"name": c["name"], "image": c["image"],
                           "resources": {"requests": {GPU: pod_gpus(&json!({"containers": [c]})).to_string()}}})
                })
                .collect();
        let mut spec_out = json!({"queueName": queue, "priority": job.priority, "active": true,
                "podSets": [{"name": set, "count": count, "template": {"spec": {"containers": containers}}}]});
        if let Some(class) = labels(&r.data, PRIORITY_LABEL) {
            spec_out["priorityClassName"] = json!(class);
            spec_out["priorityClassSource"] = json!("kueue.x-k8s.io/workloadpriorityclass");
        }
        // Kueue's pod integration owns a Workload by the pod; a job's by the job.
        let (owner_api, owner_kind, owner) = match pod {
            Some((_, p)) => (json!("v1"), "Pod", p.as_str()),
            None => (r.data["apiVersion"].clone(), kind, name),
        };
        kueue.workloads.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": format!("{}-{owner}-{:05x}", owner_kind.to_ascii_lowercase(), fnv1a(&job.id) & 0xfffff),
                             "namespace": meta["namespace"], "uid": uid(&job.id),
                             "creationTimestamp": cloud::clock::rfc3339_ms(r.created_ms),
                             "labels": {"kueue.x-k8s.io/job-uid": job.id},
                             "ownerReferences": [{"apiVersion": owner_api, "kind": owner_kind, "name": owner,
                                                  "uid": job.id, "controller": true, "blockOwnerDeletion": true}]},
                "spec": spec_out, "status": status}));
        kueue.jobs.insert(
            job.id.clone(),
            Queued {
                verdict: v.clone(),
                admitted_ms: admitted.map(|t| clock.wall_ms(t)),
                message,
            },
        );
    }
    for (t, (q, created)) in teams.iter().zip(quotas) {
        let mine = |standing: fn(&Standing) -> bool| {
            jobs.iter()
                .filter(|j| j.team == t.name)
                .filter(|j| {
                    outcome
                        .jobs
                        .get(&j.id)
                        .is_some_and(|v| standing(&v.standing))
                })
                .count()
        };
        let admitted = mine(|s| matches!(s, Standing::Admitted { .. }));
        let pending = mine(|s| matches!(s, Standing::Pending { .. } | Standing::Preempted { .. }));
        let flavors: Vec<Value> = t
            .nominal
            .iter()
            .map(|(f, n)| {
                let mut gpu = json!({"name": GPU, "nominalQuota": n.to_string(),
                                         "borrowingLimit": t.borrowing_limit(f).to_string()});
                if q.sharing == Sharing::DontLend {
                    gpu["lendingLimit"] = json!("0");
                }
                json!({"name": f, "resources": [gpu]})
            })
            .collect();
        let used: Vec<Value> = outcome
            .usage
            .get(&t.name)
            .into_iter()
            .flatten()
            .map(|(f, u)| {
                json!({"name": f, "resources": [{"name": GPU, "total": u.total.to_string(),
                                                     "borrowed": u.borrowed.to_string()}]})
            })
            .collect();
        let preemption = match q.preempt {
            Preempt::LowerPriority => "LowerPriority",
            Preempt::Never => "Never",
        };
        kueue.cluster_queues.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
                "metadata": {"name": team_cluster_queue(&t.name), "uid": format!("cq-{}", t.name),
                             "creationTimestamp": cloud::clock::rfc3339_ms(*created)},
                "spec": {"cohort": "hyperpod-cohort", "queueingStrategy": "BestEffortFIFO",
                         "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team_namespace(&t.name)}},
                         "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": preemption,
                                        "borrowWithinCohort": {"policy": "Never"}},
                         "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}]},
                "status": {"admittedWorkloads": admitted, "reservingWorkloads": admitted,
                           "pendingWorkloads": pending, "flavorsUsage": used.clone(), "flavorsReservation": used,
                           "conditions": [condition("Active", true, "Ready", "Can admit new workloads",
                                                    &cloud::clock::rfc3339_ms(*created))]}}));
        kueue.local_queues.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                "metadata": {"name": cloud::team_queue(&t.name), "namespace": team_namespace(&t.name),
                             "creationTimestamp": cloud::clock::rfc3339_ms(*created)},
                "spec": {"clusterQueue": team_cluster_queue(&t.name)},
                "status": {"admittedWorkloads": admitted, "pendingWorkloads": pending}}));
    }
    kueue
}

#[cfg(test)]
mod tests;
