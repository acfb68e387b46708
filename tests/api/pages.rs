//! Reads that cost the same whatever the data: the cluster list makes the same number of store
//! queries at 1 and 300 clusters, and pages of clusters and operations return every item exactly
//! once, in a stable order, by following their `Link: rel="next"` headers.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{json, Value};

use instantstart::config::ServeConfig;
use instantstart::store::{NewOperation, Store};

/// A sandbox server whose store already holds `n` clusters, each with three stages' operations.
async fn seeded(n: usize) -> (tempfile::TempDir, String, Store) {
    let dir = tempfile::tempdir().unwrap();
    let config = ServeConfig::sandbox(dir.path().to_path_buf());
    let app = instantstart::build_app(config).await.unwrap();
    let store = app.state.engine.store().clone();
    let mut tx = store.writer.begin().await.unwrap();
    for i in 0..n {
        let name = format!("c{i:03}");
        Store::create_cluster(&mut tx, &name, "us-west-2", &json!({}))
            .await
            .unwrap();
        for (k, kind) in ["cluster", "dependencies", "hyperpod"].iter().enumerate() {
            let op = NewOperation {
                id: format!("01000000-{i:04}-{k:04}-0000-000000000000"),
                kind: kind.to_string(),
                cluster: name.clone(),
                params: json!({}),
                idempotency_key: None,
                request_hash: None,
                actor: "seed".into(),
                principal: None,
                parent_id: None,
                phases: vec!["a".into()],
            };
            Store::insert_operation(&mut tx, &op).await.unwrap();
        }
    }
    tx.commit().await.unwrap();
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run());
    (dir, base, store)
}

fn next_link(r: &reqwest::Response) -> Option<String> {
    let link = r.headers().get("link")?.to_str().ok()?;
    let url = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
    Some(url.to_string())
}

/// Follows a list's pages from `first`, returning every item in order and the pages seen.
async fn all_pages(base: &str, first: &str) -> (Vec<Value>, usize) {
    let client = reqwest::Client::new();
    let (mut items, mut pages, mut url) = (Vec::new(), 0, Some(first.to_string()));
    while let Some(u) = url {
        let r = client.get(format!("{base}{u}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{u}");
        url = next_link(&r);
        let page: Vec<Value> = r.json().await.unwrap();
        assert!(!page.is_empty() || url.is_none());
        items.extend(page);
        pages += 1;
    }
    (items, pages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_list_costs_the_same_queries_at_1_and_300_clusters() {
    let mut counts = Vec::new();
    for n in [1, 300] {
        let (_dir, base, store) = seeded(n).await;
        let client = reqwest::Client::new();
        let before = store.reads();
        let r = client
            .get(format!("{base}/api/clusters?limit=1000"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let list: Vec<Value> = r.json().await.unwrap();
        counts.push(store.reads() - before);
        assert_eq!(list.len(), n);
        let c = &list[0];
        assert_eq!(c["name"], "c000");
        assert_eq!(c["stages"]["hyperpod"]["state"], "pending", "{c}");
        assert_eq!(c["links"]["self"], "/api/clusters/c000");
        assert!(
            c.get("spec").is_none() && c.get("resources").is_none(),
            "a summary: {c}"
        );
    }
    assert_eq!(
        counts[0], counts[1],
        "queries at 1 and 300 clusters: {counts:?}"
    );
    assert!(counts[0] <= 3, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_return_every_cluster_and_operation_once_in_a_stable_order() {
    let (_dir, base, _store) = seeded(23).await;
    let (clusters, pages) = all_pages(&base, "/api/clusters?limit=5").await;
    assert_eq!(pages, 5);
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..23).map(|i| format!("c{i:03}")).collect();
    assert_eq!(names, want);

    let (ops, pages) = all_pages(&base, "/api/operations?limit=10").await;
    assert_eq!(pages, 7, "69 operations, 10 a page");
    let ids: Vec<&str> = ops.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        69,
        "each exactly once"
    );
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first throughout"
    );
    // Filters carry over to the next pages.
    let (mine, _) = all_pages(&base, "/api/operations?cluster=c007&limit=2").await;
    assert_eq!(mine.len(), 3);
    assert!(mine.iter().all(|o| o["cluster"] == "c007"));

    let client = reqwest::Client::new();
    for bad in [
        "/api/clusters?limit=0",
        "/api/clusters?cursor=Not_A_Name",
        "/api/operations?cursor=%27%3B",
    ] {
        let r = client.get(format!("{base}{bad}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
}
