//! GPU utilization in the sandbox: the simulated DCGM series follow what is scheduled — the
//! node holding a deployment's GPU is busy, the other idle; per team, the team's; per pod, the
//! deployment's replica — and a query out of bounds is refused saying which field.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

fn means(u: &Value) -> Vec<(String, f64)> {
    u["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap().to_string(),
                s["mean"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_utilization_follows_what_is_scheduled_per_node_team_and_pod() {
    // Two ml.g5.8xlarge (one GPU each), shared by team-a and team-b.
    let app = crate::placement::shared_cluster(&[]).await;
    let body = json!({"deploymentName": "chat", "image": "lmsysorg/sglang:v0.5.8", "replicas": 1,
        "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"],
        "team": "team-a", "priority": "inference"});
    let op = app
        .wait_terminal(&app.start("/api/clusters/demo/deployments", &body).await)
        .await;
    assert_eq!(op["state"], "succeeded", "{op}");

    // Without the observability add-on there is nothing to read, and the answer says how.
    let u = app.json("/api/clusters/demo/utilization").await;
    assert_eq!(u["available"], false, "{u}");
    assert!(
        u["howToEnable"]
            .as_str()
            .unwrap()
            .contains("\"observability\": true"),
        "{u}"
    );
    // The feature makes the cluster's workspace first, then the add-on writing to it.
    let op = toggle(&app, "observability", true).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        ["amp-workspace", "role", "addon", "pod-identity"],
        "{op}"
    );
    let made = op["phases"][0]["outputs"]["ampWorkspaceId"]
        .as_str()
        .unwrap()
        .to_string();

    let u = app.json("/api/clusters/demo/utilization").await;
    assert!(
        u["workspace"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/workspaces/{made}")),
        "{u}"
    );
    assert_eq!(
        (u["available"].as_bool(), u["by"].as_str()),
        (Some(true), Some("node")),
        "{u}"
    );
    let nodes = means(&u);
    assert_eq!(nodes.len(), 2, "{u}");
    let busy: Vec<_> = nodes.iter().filter(|(_, m)| *m >= 70.0).collect();
    let idle: Vec<_> = nodes.iter().filter(|(_, m)| *m == 0.0).collect();
    assert_eq!((busy.len(), idle.len()), (1, 1), "{u}");
    assert!(
        u["series"][0]["points"].as_array().unwrap().len() > 10,
        "{u}"
    );

    let u = app
        .json("/api/clusters/demo/utilization?by=team&minutes=30")
        .await;
    let teams = means(&u);
    assert_eq!(teams.len(), 1, "{u}");
    assert!(teams[0].0 == "team-a" && teams[0].1 >= 70.0, "{u}");

    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=chat")
        .await;
    let pods = means(&u);
    assert!(pods.len() == 1 && pods[0].0.starts_with("chat-"), "{u}");
    assert_eq!(u["stragglers"], json!([]), "{u}");
    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=nothing")
        .await;
    assert_eq!(u["series"], json!([]), "{u}");

    // Off and on again: the workspace was kept, and is found rather than made twice.
    assert_eq!(
        toggle(&app, "observability", false).await["state"],
        "succeeded"
    );
    assert_eq!(
        toggle(&app, "observability", true).await["state"],
        "succeeded"
    );
    assert_eq!(accepted_count(&app.calls().await, "aps:CreateWorkspace"), 1);

    for (query, field) in [
        ("minutes=3", "minutes"),
        ("by=rack", "query"),
        ("workload=Bad_Name", "workload"),
    ] {
        let p = problem(
            app.get(&format!("/api/clusters/demo/utilization?{query}"))
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(p["field"], field, "{query}: {p}");
    }
}

/// A training job's ranks hold the GPUs they run on in the sandbox too: while the job runs,
/// each rank (`<job>-pods-<rank>`, one per node) is busy on the job's utilization chart, the
/// job's GPU hours are billed to it, and nothing of it is left when it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_ranks_are_busy_and_billed_to_the_job() {
    use crate::costs::share;
    use crate::sharing::until;
    use crate::training::{enable_training_operator, submit, training_cluster};
    let app = training_cluster(None).await;
    enable_training_operator(&app).await;
    assert_eq!(
        toggle(&app, "observability", true).await["state"],
        "succeeded"
    );
    // Ten million steps: it runs for the whole test.
    let body = json!({"jobName": "llama", "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge",
        "nodeCount": 2, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
        "args": ["--max_steps=10000000"]});
    submit(&app, &body).await;
    until(&app, "/api/clusters/demo/training-jobs/llama", |j| {
        j["state"] == "running"
    })
    .await;

    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=llama")
        .await;
    let ranks = means(&u);
    assert_eq!(
        ranks.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["llama-pods-0", "llama-pods-1"],
        "{u}"
    );
    assert!(ranks.iter().all(|(_, m)| *m >= 70.0), "{u}");
    assert_eq!(u["stragglers"], json!([]), "{u}");
    let nodes = means(&app.json("/api/clusters/demo/utilization").await);
    assert!(
        nodes.iter().all(|(_, m)| *m >= 70.0),
        "both nodes busy: {nodes:?}"
    );

    let report = until(&app, "/api/costs?cluster=demo&by=job", |r| {
        share(r, "training/llama", "used").0 > 0.0
    })
    .await;
    assert!(share(&report, "training/llama", "used").0 > 0.0, "{report}");
}

/// With the account's Grafana workspace configured, the feature checks it before the add-on is
/// told to put its dashboards there, and the charts link to AWS's dashboards for the cluster
/// (the one for the view first, a job's opening on the job); a workspace the account does not
/// have fails the change saying which setting names it, and an ID that cannot be one stops the
/// server from starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_link_to_the_dashboards_in_the_accounts_grafana() {
    use instantstart::cloud::sandbox::GRAFANA_WORKSPACE;
    let app = spawn_app_with(Opts {
        grafana_workspace: Some(GRAFANA_WORKSPACE),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let op = toggle(&app, "observability", true).await;
    assert_eq!(op["state"], "succeeded", "{op}");
    assert_eq!(
        phase_names(&op),
        [
            "amp-workspace",
            "amg-workspace",
            "role",
            "addon",
            "pod-identity"
        ],
        "{op}"
    );
    let grafana = format!("https://{GRAFANA_WORKSPACE}.grafana-workspace.us-west-2.amazonaws.com");
    assert_eq!(
        format!(
            "https://{}",
            op["phases"][1]["outputs"]["endpoint"].as_str().unwrap()
        ),
        grafana
    );
    let u = app.json("/api/clusters/demo/utilization").await;
    let links = u["dashboards"].as_array().unwrap();
    assert_eq!(links.len(), 5, "{u}");
    let cluster_link = links[0]["url"].as_str().unwrap();
    let hyperpod = cluster_link
        .strip_prefix(&format!(
            "{grafana}/d/aws-sm-hp-observability-cluster-v1_0?var-cluster_name="
        ))
        .unwrap_or_else(|| panic!("the cluster dashboard first: {u}"));
    assert!(hyperpod.starts_with("demo"), "the HyperPod cluster: {u}");
    let u = app
        .json("/api/clusters/demo/utilization?by=pod&workload=llama")
        .await;
    assert_eq!(
        u["dashboards"][0]["url"],
        format!("{grafana}/d/aws-sm-hp-observability-training-v1_0?var-cluster_name={hyperpod}&var-job_name=llama"),
        "{u}"
    );

    // A workspace the account does not have: the change fails saying so, before the add-on.
    let app = spawn_app_with(Opts {
        grafana_workspace: Some("g-0000000000"),
        ..Default::default()
    })
    .await;
    let id = app.start("/api/pipelines", &pipeline_body()).await;
    assert_eq!(app.wait_terminal(&id).await["state"], "succeeded");
    let addons = accepted_count(&app.calls().await, "eks:CreateAddon");
    let op = toggle(&app, "observability", true).await;
    assert_eq!(op["state"], "failed", "{op}");
    assert!(
        op.to_string().contains("INSTANTSTART_GRAFANA_WORKSPACE"),
        "{op}"
    );
    assert_eq!(
        accepted_count(&app.calls().await, "eks:CreateAddon"),
        addons,
        "{op}"
    );
    // Without one, no links.
    let u = app.json("/api/clusters/demo/utilization").await;
    assert_eq!(u["dashboards"], json!([]), "{u}");

    let dir = tempfile::tempdir().unwrap();
    let mut config = instantstart::config::ServeConfig::sandbox(dir.path().to_path_buf());
    config.grafana_workspace = Some("ws-1234".into());
    let e = instantstart::build_app(config)
        .await
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("INSTANTSTART_GRAFANA_WORKSPACE"),
        "{e}"
    );
}

/// A product of the Price List, as `GetProducts` answers it.
fn price_list_product(region: &str, usage_type: &str, usd: &str) -> Value {
    let sku = format!("SKU{}", usage_type.len() + usd.len());
    json!({"product": {"productFamily": "ML Instance", "sku": sku,
                       "attributes": {"regionCode": region, "usagetype": usage_type,
                                      "servicecode": "AmazonSageMaker", "component": "Cluster"}},
           "serviceCode": "AmazonSageMaker",
           "terms": {"OnDemand": {format!("{sku}.JRTCKXETXF"): {
               "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF",
               "priceDimensions": {format!("{sku}.JRTCKXETXF.6YS6EN2CT7"): {
                   "unit": "Hrs", "beginRange": "0", "endRange": "Inf",
                   "pricePerUnit": {"USD": usd}}}}}},
           "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"})
}

/// The same two questions on the real adapters: HyperPod's nodes from moto, who holds their
/// GPUs from the Kubernetes emulator through the watch, the prices from the Price List API and
/// the exporter's series from the workspace through AMP's query API (moto's gap-fillers answer
/// both, checking the signature's scope). A team's job holds one node's GPU: it is billed to the
/// team and the job at the region's HyperPod price (not a lookalike product's), the other GPU is
/// idle, and utilization per team and per rank reads back what the exporter wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_and_utilization_are_read_through_the_real_adapters() {
    use crate::costs::share;
    use crate::kube::{get, AwsPipeline};
    let workspace = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-obs";
    let p = AwsPipeline::run_with(&[("INSTANTSTART_PROMETHEUS_URL", workspace.to_string())]).await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let (client, base) = (p.client.clone(), p.base.clone());
    let nodes = get(&client, format!("{base}/api/clusters/demo/nodes")).await;
    let ids: Vec<String> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instanceId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{nodes}");
    let post = |path: &'static str, body: Value| {
        let emu = &p.emu;
        async move {
            emu.send(reqwest::Method::POST, path, body, "application/json")
                .await
        }
    };
    for id in &ids {
        post(
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("hyperpod-{id}"),
                         "labels": {"node.kubernetes.io/instance-type": "ml.g5.8xlarge"}},
            "status": {"capacity": {"nvidia.com/gpu": "1"}, "allocatable": {"nvidia.com/gpu": "1"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .await;
    }
    post(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "hyperpod-ns-team-a"}}),
    )
    .await;
    post("/api/v1/namespaces/hyperpod-ns-team-a/pods", json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "llama-worker-0", "namespace": "hyperpod-ns-team-a", "labels": {"HPJob": "llama"}},
        "spec": {"nodeName": format!("hyperpod-{}", ids[0]),
                 "containers": [{"name": "pytorch", "image": "pytorch",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"}}))
    .await;

    // The account's Price List: HyperPod's price in the cluster's region, and lookalikes.
    let products = json!([
        price_list_product("us-west-2", "USW2-Cluster:ml.g5.8xlarge", "3.4000000000"),
        price_list_product(
            "us-west-2",
            "USW2-ReservedCluster:ml.g5.8xlarge",
            "1.0000000000"
        ),
        price_list_product("us-west-2", "USW2-Studio:ml.g5.8xlarge", "2.0000000000"),
        price_list_product("us-east-1", "USE1-Cluster:ml.g5.8xlarge", "3.0600000000"),
    ]);
    client
        .post(format!("{}/_gapfiller/pricing", p.moto.url))
        .json(&products)
        .send()
        .await
        .unwrap();

    // Each read samples first: read until the watch has the pod and a sample credited it.
    let costs = format!("{base}/api/costs?cluster=demo&by=job");
    let mut report = get(&client, costs.clone()).await;
    for _ in 0..200 {
        if share(&report, "training/llama", "used").0 > 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        report = get(&client, costs.clone()).await;
    }
    let (job, _) = share(&report, "training/llama", "used");
    assert!(job > 0.0, "{report}");
    assert!(share(&report, "", "idle").0 > 0.0, "{report}");
    let by_team = get(&client, format!("{base}/api/costs?cluster=demo&by=team")).await;
    assert!(share(&by_team, "team-a", "used").0 >= job, "{by_team}");
    let price = by_team["prices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["instanceType"] == "ml.g5.8xlarge")
        .unwrap_or_else(|| panic!("{by_team}"));
    assert_eq!(
        (
            price["instanceType"].as_str(),
            price["source"].as_str(),
            price["hourlyUsd"].as_f64(),
            price["usageType"].as_str(),
            price["region"].as_str(),
        ),
        (
            Some("ml.g5.8xlarge"),
            Some("price-list"),
            Some(3.4),
            Some("USW2-Cluster:ml.g5.8xlarge"),
            Some("us-west-2")
        ),
        "{by_team}"
    );
    assert_eq!(by_team["estimate"], false, "{by_team}");
    // The offer's attributes confirmed, then one filtered read at the Price List's endpoint
    // (us-east-1 serves us-west-2), kept for every report after it.
    let seen = get(&client, format!("{}/_gapfiller/pricing", p.moto.url)).await;
    let requests = seen["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "{seen}");
    assert_eq!(requests[0]["operation"], "DescribeServices", "{seen}");
    assert_eq!(
        requests[0]["body"]["ServiceCode"], "AmazonSageMaker",
        "{seen}"
    );
    assert_eq!(requests[1]["operation"], "GetProducts", "{seen}");
    assert_eq!(
        requests[1]["body"],
        json!({"ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1", "MaxResults": 100,
               "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"},
                           {"Type": "CONTAINS", "Field": "usagetype", "Value": "Cluster:ml."}]}),
        "{seen}"
    );
    assert!(
        requests
            .iter()
            .all(|r| r["scope"] == json!(["us-east-1", "pricing"])),
        "{seen}"
    );

    // What the observability add-on's collector wrote to the workspace: each series labelled
    // with its HyperPod cluster's id (`cluster_id`), which the query selects on.
    let cluster = get(&client, format!("{base}/api/clusters/demo")).await;
    let cluster_id = cluster["resources"]["hyperPodClusterArn"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let series = json!([
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": format!("hyperpod-{}", ids[0]),
                    "cluster_id": cluster_id, "gpu": "0", "namespace": "hyperpod-ns-team-a",
                    "pod": "llama-worker-0"},
         "values": [[now - 120, "93"], [now - 60, "95"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": format!("hyperpod-{}", ids[1]),
                    "cluster_id": cluster_id, "gpu": "0"},
         "values": [[now - 120, "0"], [now - 60, "0"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "another-clusters-node",
                    "cluster_id": "otherhpcluster", "gpu": "0"},
         "values": [[now - 60, "50"]]}]);
    client
        .post(format!("{}/_gapfiller/amp/ws-obs", p.moto.url))
        .json(&series)
        .send()
        .await
        .unwrap();
    let u = get(&client, format!("{base}/api/clusters/demo/utilization")).await;
    assert_eq!(u["workspace"], workspace, "{u}");
    let nodes = means(&u);
    assert_eq!(nodes.len(), 2, "only this cluster's nodes: {u}");
    assert!(
        nodes.contains(&(format!("hyperpod-{}", ids[0]), 94.0)),
        "{u}"
    );
    let u = get(
        &client,
        format!("{base}/api/clusters/demo/utilization?by=team"),
    )
    .await;
    assert_eq!(means(&u), vec![("team-a".to_string(), 94.0)], "{u}");
    let u = get(
        &client,
        format!("{base}/api/clusters/demo/utilization?by=pod&workload=llama"),
    )
    .await;
    assert_eq!(means(&u), vec![("llama-worker-0".to_string(), 94.0)], "{u}");
    let seen = get(&client, format!("{}/_gapfiller/amp", p.moto.url)).await;
    assert!(
        seen["queries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["scope"] == json!(["us-west-2", "aps"])
                && q["query"]["query"][0]
                    .as_str()
                    .is_some_and(|s| s.contains(&format!("cluster_id=\"{cluster_id}\"")))),
        "{seen}"
    );
}
