//! The Kueue objects, checked case by case.

use super::*;

/// The openAPIV3Schema of a vendored Kueue CRD (the repository's copy, v0.19.2).
fn schema(file: &str) -> Value {
    let path = format!(
        "{}/../../tests/fixtures/crds/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("the vendored CRD");
    let crd: Value = serde_yaml::from_str(&text).expect("CRD YAML");
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["name"] == "v1beta1"))
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .expect("v1beta1")
}

fn errors(schema: &Value, o: &Value) -> Vec<String> {
    let v = jsonschema::draft7::new(schema).expect("schema compiles");
    v.iter_errors(o)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

fn job_res(id: &str, name: &str, team: &str, replicas: u64, created_ms: i64) -> Res {
    Res {
        id: id.into(),
        created_ms,
        deleted_ms: None,
        data: json!({"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": {"name": name, "namespace": team_namespace(team),
                         "labels": {QUEUE_LABEL: team_queue(team), PRIORITY_LABEL: "training-priority"}},
            "spec": {"replicaSpecs": [{"name": "pods", "replicas": replicas, "template": {"spec": {
                "nodeSelector": {"node.kubernetes.io/instance-type": "ml.g5.8xlarge"},
                "containers": [{"name": "pytorch", "image": "pytorch:2.5",
                                "resources": {"limits": {GPU: 1}, "requests": {GPU: 1}}}]}}}]}}),
    }
}

#[test]
fn the_objects_kueue_keeps_conform_to_its_crds_and_name_the_preemptor() {
    let clock = Clock {
        now: 1_800_000_000_000,
        scale: 1.0,
    };
    let quota = |sharing, gpus| TeamQuota {
        resources: vec![QuotaResource {
            instance_type: "ml.g5.8xlarge".into(),
            count: None,
            accelerators: Some(gpus),
        }],
        sharing,
        borrow_limit: Some(100),
        preempt: Preempt::Never,
        fair_share_weight: 1,
        active: true,
    };
    let team = |name: &str, sharing| Team {
        name: name.into(),
        earlier: vec![],
        nominal: BTreeMap::from([("ml.g5.8xlarge".to_string(), 1)]),
        sharing,
        borrow_limit: Some(100),
        preempt: Preempt::Never,
    };
    // a borrows b's GPU at -100 s, b takes it back at -50 s, a third job cannot fit.
    let queued = vec![
        job_res("uid-a1", "a1", "a", 2, clock.wall_ms(-100.0)),
        job_res("uid-b1", "b1", "b", 1, clock.wall_ms(-50.0)),
        job_res("uid-z1", "z1", "z", 1, clock.wall_ms(-40.0)),
    ];
    let jobs = queued
        .iter()
        .map(|r| Job {
            id: r.id.clone(),
            team: r.data["metadata"]["labels"][QUEUE_LABEL]
                .as_str()
                .and_then(team_of_queue)
                .unwrap_or_default()
                .into(),
            priority: 50,
            arrive: -(clock.now - r.created_ms) as f64 / 1000.0,
            leave: None,
            gpus: r.data["spec"]["replicaSpecs"][0]["replicas"]
                .as_u64()
                .unwrap() as u32,
            flavor: "ml.g5.8xlarge".into(),
            run: 1000.0,
        })
        .collect();
    let inputs = Inputs {
        teams: vec![team("a", Sharing::LendAndBorrow), team("b", Sharing::Lend)],
        quotas: vec![
            (quota(Sharing::LendAndBorrow, 1), clock.now - 900_000),
            (quota(Sharing::Lend, 1), clock.now - 900_000),
        ],
        queued: queued
            .into_iter()
            .map(|res| Entry { res, pod: None })
            .collect(),
        jobs,
        pool: BTreeMap::new(),
    };
    let k = build(&inputs, clock);
    let (workloads, queues) = (
        schema("kueue.x-k8s.io_workloads.yaml"),
        schema("kueue.x-k8s.io_clusterqueues.yaml"),
    );
    assert_eq!(k.workloads.len(), 3);
    for w in &k.workloads {
        assert_eq!(errors(&workloads, w), Vec::<String>::new(), "{w}");
    }
    for q in &k.cluster_queues {
        assert_eq!(errors(&queues, q), Vec::<String>::new(), "{q}");
    }
    // The check would catch a wrong shape.
    let mut bad = k.workloads[0].clone();
    bad["spec"]["podSets"][0]["count"] = json!("two");
    assert!(!errors(&workloads, &bad).is_empty());

    let cond = |w: &Value, kind: &str| {
        w["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let a1 = &k.workloads[0];
    assert_eq!(cond(a1, "Evicted")["reason"], "Preempted", "{a1}");
    let preempted = cond(a1, "Preempted");
    assert_eq!(preempted["reason"], "InCohortReclamation");
    assert!(
        preempted["message"]
            .as_str()
            .unwrap()
            .contains("(UID: wl-uid-b1, JobUID: uid-b1)"),
        "{preempted}"
    );
    assert_eq!(
        cond(a1, "QuotaReserved")["message"],
        "couldn't assign flavors to pod set pods: insufficient unused quota for nvidia.com/gpu in flavor ml.g5.8xlarge, 1 more needed"
    );
    assert_eq!(k.jobs["uid-a1"].verdict.evictions, 1);
    assert_eq!(k.jobs["uid-a1"].admitted_ms, None);
    let b1 = &k.workloads[1];
    assert_eq!(cond(b1, "Admitted")["status"], "True", "{b1}");
    assert_eq!(
        b1["status"]["admission"]["clusterQueue"],
        "hyperpod-ns-b-clusterqueue"
    );
    assert_eq!(k.jobs["uid-b1"].admitted_ms, Some(clock.wall_ms(-50.0)));
    assert_eq!(
        cond(&k.workloads[2], "QuotaReserved")["message"],
        "LocalQueue hyperpod-ns-z-localqueue doesn't exist"
    );
    // b's ClusterQueue: its GPU in use, none borrowed; a's: nothing admitted, one waiting.
    let usage = |q: &Value| {
        (
            q["status"]["flavorsUsage"][0]["resources"][0]["total"].clone(),
            q["status"]["flavorsUsage"][0]["resources"][0]["borrowed"].clone(),
            q["status"]["admittedWorkloads"].clone(),
            q["status"]["pendingWorkloads"].clone(),
        )
    };
    assert_eq!(
        usage(&k.cluster_queues[0]),
        (json!("0"), json!("0"), json!(0), json!(1))
    );
    assert_eq!(
        usage(&k.cluster_queues[1]),
        (json!("1"), json!("0"), json!(1), json!(0))
    );
}
