//! What a person may do on a cluster is what their EKS access entry allows: a whole pipeline
//! against moto and the Kubernetes emulator, four people with four kinds of access, and every
//! kind of workload met the same way (made, seen, changed) by each.

use std::time::SystemTime;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::access::{admin_session, grant, is, signed_in, token, user, ADMIN_ROLE, DEPLOYMENT};
use crate::helpers::*;

/// One kind of workload, as a person meets it: where it is made, with what, where it appears
/// in the cluster once applied, and the changes to one that take write access.
struct Kind {
    addon: &'static str,
    collection: &'static str,
    body: Value,
    name: &'static str,
    applied: &'static str,
    changes: Vec<(Method, &'static str, Value)>,
}

fn kinds() -> Vec<Kind> {
    let sglang = "lmsysorg/sglang:v0.5.8";
    let mut endpoint = crate::endpoints::endpoint("alice-ep");
    endpoint["autoscaling"] = Value::Null;
    vec![
        Kind {
            addon: "amazon-sagemaker-hyperpod-training-operator",
            collection: "/api/clusters/demo/training-jobs",
            body: crate::training::sft("alice-job"),
            name: "alice-job",
            applied: "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs/alice-job",
            changes: vec![(Method::DELETE, "", json!({}))],
        },
        Kind {
            addon: "amazon-sagemaker-hyperpod-inference",
            collection: "/api/clusters/demo/endpoints",
            body: endpoint,
            name: "alice-ep",
            applied: "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/alice-ep",
            changes: vec![
                (Method::DELETE, "", json!({})),
                (Method::POST, "/invoke", json!({"prompt": "hi"})),
            ],
        },
        Kind {
            addon: "amazon-sagemaker-spaces",
            collection: "/api/clusters/demo/spaces",
            body: json!({"spaceName": "alice-lab", "instanceType": "ml.g5.8xlarge"}),
            name: "alice-lab",
            applied: "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/alice-lab",
            changes: vec![
                (Method::POST, "/stop", json!({})),
                (Method::POST, "/open", json!({})),
                (Method::DELETE, "/sessions", json!({})),
                (Method::DELETE, "", json!({})),
            ],
        },
        Kind {
            addon: "",
            collection: "/api/clusters/demo/deployments",
            body: json!({"deploymentName": "alice-chat", "image": sglang, "replicas": 1,
                "args": ["python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/Qwen/Qwen3-0.6B"]}),
            name: "alice-chat",
            applied: "/apis/apps/v1/namespaces/default/deployments/alice-chat",
            changes: vec![(Method::DELETE, "", json!({}))],
        },
        Kind {
            addon: "",
            collection: "/api/clusters/demo/pools",
            body: json!({"poolName": "alice-warm", "image": sglang, "size": 1}),
            name: "alice-warm",
            applied: "/apis/apps/v1/namespaces/default/deployments/alice-warm",
            changes: vec![(Method::PATCH, "", json!({"size": 0}))],
        },
    ]
}

/// The people of the cluster scenario and their sessions.
struct Team<'a> {
    p: &'a crate::kube::AwsPipeline,
    /// A client of its own (the pipeline's carries the administrator's session).
    client: reqwest::Client,
    cookies: std::collections::HashMap<&'static str, (String, String)>,
    creds: std::collections::HashMap<&'static str, aws_credential_types::Credentials>,
}

impl Team<'_> {
    async fn send(
        &self,
        who: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut r = self
            .client
            .request(method, format!("{}{path}", self.p.base))
            .header("cookie", &self.cookies[who].0);
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send().await.unwrap()
    }

    /// Refused for want of `needs`, naming the administrators who can grant it.
    async fn denied(
        &self,
        who: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
        needs: &str,
    ) {
        let p = problem(
            self.send(who, method, path, body).await,
            StatusCode::FORBIDDEN,
        )
        .await;
        assert!(is(&p, "access-denied"), "{who} {path}: {p}");
        assert!(
            p["detail"].as_str().unwrap().contains(needs),
            "{who} {path}: {p}"
        );
        assert_eq!(p["hint"]["grantedBy"], json!([ADMIN_ROLE]), "{p}");
    }

    async fn names(&self, who: &str, collection: &str) -> Vec<String> {
        let r = self.send(who, Method::GET, collection, None).await;
        assert_eq!(r.status(), StatusCode::OK, "{who} {collection}");
        let v: Value = r.json().await.unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_string())
            .collect()
    }
}

const NEEDS_EDIT: &str = "AmazonEKSEditPolicy (or Admin) on namespace default of cluster demo";

/// A viewer makes nothing and a team's editor makes nothing outside their namespaces; Alice,
/// who edits `default`, makes one; those who may read `default` see it and the others find no
/// such thing; a viewer changes nothing of it.
async fn a_kind_goes_by_namespace(team: &Team<'_>, kind: &Kind) {
    if !kind.addon.is_empty() {
        team.p.activate_addon(kind.addon).await;
    }
    for who in ["bob", "eve"] {
        team.denied(
            who,
            Method::POST,
            kind.collection,
            Some(kind.body.clone()),
            NEEDS_EDIT,
        )
        .await;
    }
    let r = team
        .send(
            "alice",
            Method::POST,
            kind.collection,
            Some(kind.body.clone()),
        )
        .await;
    assert_eq!(
        r.status(),
        StatusCode::ACCEPTED,
        "{}: {}",
        kind.collection,
        r.text().await.unwrap_or_default()
    );
    team.p.emu.appeared(kind.applied).await;
    for (who, sees) in [("alice", true), ("bob", true), ("eve", false)] {
        let names = team.names(who, kind.collection).await;
        assert_eq!(
            names.contains(&kind.name.to_string()),
            sees,
            "{who}: {}",
            kind.collection
        );
    }
    let one = format!("{}/{}", kind.collection, kind.name);
    problem(
        team.send("eve", Method::GET, &one, None).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    for (method, suffix, body) in &kind.changes {
        team.denied(
            "bob",
            method.clone(),
            &format!("{one}{suffix}"),
            Some(body.clone()),
            NEEDS_EDIT,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_person_may_do_on_a_cluster_is_what_their_eks_access_entry_allows() {
    use crate::kube::AwsPipeline;
    // The administrator makes the cluster; the others get their access from EKS only.
    let p = AwsPipeline::run_as(
        &[
            ("INSTANTSTART_IDENTITY", "iam".into()),
            ("INSTANTSTART_DEPLOYMENT_ID", DEPLOYMENT.into()),
            ("INSTANTSTART_ADMINS", ADMIN_ROLE.into()),
        ],
        |moto, base| {
            Box::pin(async move {
                let carol = admin_session(moto).await;
                let cookie = signed_in(base, &token(&carol, DEPLOYMENT, SystemTime::now())).await;
                let mut h = reqwest::header::HeaderMap::new();
                h.insert("cookie", cookie.parse().unwrap());
                h
            })
        },
    )
    .await;
    assert_eq!(p.op["state"], "succeeded", "{}", p.op);
    let now = SystemTime::now();
    let mut cookies = std::collections::HashMap::new();
    let mut creds_of = std::collections::HashMap::new();
    let team_ns: &[&str] = &["hyperpod-ns-*"];
    for (name, policy, scope) in [
        ("alice", Some("AmazonEKSEditPolicy"), Some(&["default"][..])),
        ("bob", Some("AmazonEKSViewPolicy"), None),
        ("eve", Some("AmazonEKSAdminPolicy"), Some(team_ns)),
        ("dave", None, None),
    ] {
        let (creds, arn) = user(&p.moto, name).await;
        if let Some(policy) = policy {
            grant(&p.moto, &arn, policy, scope).await;
        }
        let cookie = signed_in(&p.base, &token(&creds, DEPLOYMENT, now)).await;
        cookies.insert(name, (cookie, arn));
        creds_of.insert(name, creds);
    }
    let team = Team {
        p: &p,
        client: reqwest::Client::new(),
        cookies,
        creds: creds_of,
    };

    // No access entry: not even a look.
    team.denied(
        "dave",
        Method::GET,
        "/api/clusters/demo",
        None,
        "an access entry on cluster demo",
    )
    .await;
    for kind in kinds() {
        a_kind_goes_by_namespace(&team, &kind).await;
    }
    // Model downloads run in namespace default: Alice's to start, Eve's to miss.
    let models = "/api/clusters/demo/models";
    let qwen = json!({"modelId": "Qwen/Qwen3-0.6B"});
    team.denied("eve", Method::POST, models, Some(qwen.clone()), NEEDS_EDIT)
        .await;
    let r = team.send("alice", Method::POST, models, Some(qwen)).await;
    assert_eq!(
        r.status(),
        StatusCode::ACCEPTED,
        "{}",
        r.text().await.unwrap_or_default()
    );
    let seen = |v: Value| v.as_array().map_or(0, Vec::len);
    let r = team.send("eve", Method::GET, models, None).await;
    assert_eq!(seen(r.json().await.unwrap()), 0);

    // Reads that would show every namespace need cluster-wide read.
    let nodes = "/api/clusters/demo/nodes";
    team.denied(
        "eve",
        Method::GET,
        nodes,
        None,
        "AmazonEKSViewPolicy on the whole of cluster demo",
    )
    .await;
    assert_eq!(
        team.send("bob", Method::GET, nodes, None).await.status(),
        StatusCode::OK
    );
    // So do its costs, asked for by query.
    team.denied(
        "eve",
        Method::GET,
        "/api/costs?cluster=demo",
        None,
        "AmazonEKSViewPolicy on the whole of cluster demo",
    )
    .await;
    assert_eq!(
        team.send("bob", Method::GET, "/api/costs?cluster=demo", None)
            .await
            .status(),
        StatusCode::OK
    );
    // The cluster's own changes are its administrators'.
    let features = "/api/clusters/demo/features";
    team.denied(
        "alice",
        Method::PATCH,
        features,
        Some(json!({})),
        "AmazonEKSClusterAdminPolicy on cluster demo",
    )
    .await;

    a_team_is_granted_and_taken_back(&team).await;
    operations_are_seen_by_whom_they_concern(&team).await;

    // The trail names who did and who was refused, and reads by cluster.
    let (admin, base) = (&p.client, p.base.as_str());
    let audit = |query: &'static str| async move {
        let r = admin
            .get(format!("{base}/api/audit?limit=500{query}"))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap().as_array().unwrap().clone()
    };
    let rows = audit("").await;
    let outcome = |who: &str| {
        rows.iter()
            .find(|r| {
                r["route"] == "/api/clusters/{name}/training-jobs"
                    && r["principal"] == team.cookies[who].1.as_str()
            })
            .map(|r| r["outcome"].clone())
    };
    assert_eq!(outcome("alice"), Some(json!("ok")));
    assert_eq!(outcome("bob"), Some(json!("refused")));
    let on_demo = audit("&cluster=demo").await;
    assert!(!on_demo.is_empty());
    assert!(
        on_demo.iter().all(|r| r["path"]
            .as_str()
            .unwrap()
            .starts_with("/api/clusters/demo")),
        "{on_demo:?}"
    );
    assert!(
        on_demo.len() < rows.len(),
        "the sign-ins are not the cluster's"
    );
    // The grants are the administrator's (their role session), done; Alice's and Dave's
    // agent's attempts are refused, the agent's recorded as the agent's.
    let grants = |method: &str| -> Vec<(String, String, String)> {
        rows.iter()
            .filter(|r| {
                r["route"] == "/api/clusters/{name}/teams/{team}/access" && r["method"] == method
            })
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap().to_string();
                (s("principal"), s("actor"), s("outcome"))
            })
            .collect()
    };
    let carol = "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol".to_string();
    let puts = grants("PUT");
    for (who, actor, outcome) in [
        (&carol, "api", "ok"),
        (&team.cookies["alice"].1, "api", "refused"),
        (&team.cookies["dave"].1, "agent", "refused"),
    ] {
        assert!(
            puts.contains(&(who.clone(), actor.into(), outcome.into())),
            "{who} {actor} {outcome}: {puts:?}"
        );
    }
    assert!(grants("DELETE").contains(&(carol, "api".into(), "ok".into())));
}

/// The policies of `who`'s entry on `demo` as moto's EKS has them, by policy name.
async fn eks_policies(p: &crate::kube::AwsPipeline, who: &str) -> Vec<(String, Value)> {
    let eks = aws_sdk_eks::Client::new(&p.moto.aws().await.config);
    let out = eks
        .list_associated_access_policies()
        .cluster_name("demo")
        .principal_arn(who)
        .send()
        .await
        .unwrap();
    out.associated_access_policies()
        .iter()
        .map(|a| {
            let scope = a.access_scope().unwrap();
            (
                a.policy_arn()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                json!({"type": scope.r#type().unwrap().as_str(), "namespaces": scope.namespaces()}),
            )
        })
        .collect()
}

/// A cluster administrator gives Dave (no access entry) and Alice (who edits `default`) team
/// A's namespace: each grant is an operation with the person's policies before and after, a
/// grant held changes nothing, Alice keeps `default`, and Dave, refused before, submits to the
/// team and sees its work only. Taken back, he is refused again. Alice, no cluster admin, may
/// grant nothing.
async fn a_team_is_granted_and_taken_back(team: &Team<'_>) {
    let p = team.p;
    p.activate_addon(instantstart::cloud::TASK_GOVERNANCE_ADDON)
        .await;
    crate::teams::team_on_aws(p, "team-a").await;
    crate::teams::team_on_aws(p, "team-b").await;
    let access = "/api/clusters/demo/teams/team-a/access";
    let (dave, alice) = (
        team.cookies["dave"].1.clone(),
        team.cookies["alice"].1.clone(),
    );
    let mut job = crate::training::sft("dave-job");
    job["team"] = json!("team-a");
    let jobs = "/api/clusters/demo/training-jobs";
    let team_ns = "AmazonEKSEditPolicy (or Admin) on namespace hyperpod-ns-team-a";
    team.denied("dave", Method::POST, jobs, Some(job.clone()), team_ns)
        .await;
    team.denied(
        "alice",
        Method::PUT,
        access,
        Some(json!({"principalArn": dave, "access": "edit"})),
        "AmazonEKSClusterAdminPolicy on cluster demo",
    )
    .await;

    let admin = |method: Method, person: Option<&str>, body: Option<Value>| {
        let mut r = p.client.request(method, format!("{}{access}", p.base));
        if let Some(arn) = person {
            r = r.query(&[("principalArn", arn)]);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, before) = admin(Method::GET, Some(&dave), None).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    assert_eq!(
        (&before["access"], &before["hasEntry"]),
        (&Value::Null, &json!(false))
    );
    for (who, policy) in [(&dave, "edit"), (&alice, "edit")] {
        let (status, started) = admin(
            Method::PUT,
            None,
            Some(json!({"principalArn": who, "access": policy})),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{started}");
        let op = wait_terminal(&p.client, &p.base, started["operationId"].as_str().unwrap()).await;
        assert_eq!(op["state"], "succeeded", "{op}");
        assert_eq!(op["kind"], "access-grant");
        let edit = |ns: &[&str]| {
            json!([{"policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy",
                    "namespaces": ns}])
        };
        let (before, after) = if who == &dave {
            (Value::Null, edit(&["hyperpod-ns-team-a"]))
        } else {
            (edit(&["default"]), edit(&["default", "hyperpod-ns-team-a"]))
        };
        assert_eq!(
            (&op["params"]["before"], &op["params"]["after"]),
            (&before, &after),
            "{op}"
        );
        // Asked again, it is already so.
        let (status, view) = admin(
            Method::PUT,
            None,
            Some(json!({"principalArn": who, "access": policy})),
        )
        .await;
        assert_eq!(
            (status, &view["access"]),
            (StatusCode::OK, &json!("edit")),
            "{view}"
        );
    }
    assert_eq!(
        eks_policies(p, &alice).await,
        [(
            "AmazonEKSEditPolicy".to_string(),
            json!({"type": "namespace", "namespaces": ["default", "hyperpod-ns-team-a"]})
        )]
    );
    // Alice, signed in in the browser, sees her team there.
    let shots = tempfile::tempdir().unwrap();
    crate::access::the_browser_signs_in(
        &p.base,
        p.server_log(),
        shots.path(),
        &team.creds["alice"],
        &alice,
        Some(("team-a (edit) on demo", "team-a", "team-b")),
    )
    .await;
    let r = team
        .send("dave", Method::POST, jobs, Some(job.clone()))
        .await;
    assert_eq!(
        r.status(),
        StatusCode::ACCEPTED,
        "{}",
        r.text().await.unwrap_or_default()
    );
    p.emu
        .appeared("/apis/sagemaker.amazonaws.com/v1/namespaces/hyperpod-ns-team-a/hyperpodpytorchjobs/dave-job")
        .await;
    let names = team.names("dave", jobs).await;
    assert!(
        names.contains(&"dave-job".to_string()) && !names.contains(&"alice-job".to_string()),
        "{names:?}"
    );

    // His agent, with a token he made, does the same over MCP, and no more.
    let r = team
        .send(
            "dave",
            Method::POST,
            "/api/session/agent-tokens",
            Some(json!({"name": "kiro", "days": 1})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let secret = r.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut agents_job = crate::training::sft("dave-agent");
    agents_job["team"] = json!("team-a");
    let seen = crate::mcp::mcp_client_with(
        &p.base,
        "member",
        Some(&secret),
        &[
            ("MCP_JOB", agents_job.to_string()),
            ("MCP_OTHER_TEAM", "team-b".into()),
        ],
    )
    .await;
    assert_eq!(seen["submit"]["is_error"], false, "{seen}");
    assert_eq!(seen["elsewhere"]["is_error"], true, "{seen}");
    assert!(is(&seen["elsewhere"]["value"], "access-denied"), "{seen}");
    assert!(
        seen["elsewhere"]["value"]["detail"]
            .as_str()
            .unwrap()
            .contains("hyperpod-ns-team-b"),
        "{seen}"
    );
    let listed: Vec<&str> = seen["list"]["value"]
        .as_array()
        .or_else(|| seen["list"]["value"]["items"].as_array())
        .unwrap_or_else(|| panic!("{seen}"))
        .iter()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert!(
        listed.contains(&"dave-job") && !listed.contains(&"alice-job"),
        "{seen}"
    );
    assert!(is(&seen["grant"]["value"], "access-denied"), "{seen}");

    let (status, started) = admin(Method::DELETE, Some(&dave), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let op = wait_terminal(&p.client, &p.base, started["operationId"].as_str().unwrap()).await;
    assert_eq!(
        (&op["state"], &op["kind"]),
        (&json!("succeeded"), &json!("access-revoke"))
    );
    assert_eq!(eks_policies(p, &dave).await, []);
    job["jobName"] = json!("dave-again");
    team.denied("dave", Method::POST, jobs, Some(job), team_ns)
        .await;
    let (status, view) = admin(Method::DELETE, Some(&dave), None).await;
    assert_eq!(
        (status, &view["access"]),
        (StatusCode::OK, &Value::Null),
        "{view}"
    );
}

/// Operations carry their person, and a person sees the ones they started and every one of a
/// cluster they may read whole: Alice (who edits namespaces) her own, Bob (who views the whole
/// cluster) the administrator's pipeline too.
async fn operations_are_seen_by_whom_they_concern(team: &Team<'_>) {
    let pipeline = team.p.op["id"].as_str().unwrap();
    let list = |who: &'static str| async move {
        let r = team
            .send(who, Method::GET, "/api/operations?limit=500", None)
            .await;
        assert_eq!(r.status(), StatusCode::OK, "{who}");
        r.json::<Value>().await.unwrap().as_array().unwrap().clone()
    };
    let alice = &team.cookies["alice"].1;
    let hers = list("alice").await;
    assert!(
        !hers.is_empty() && hers.iter().all(|o| o["principal"] == alice.as_str()),
        "{hers:?}"
    );
    assert!(hers.iter().any(|o| o["kind"] == "training-job"), "{hers:?}");
    let bobs = list("bob").await;
    assert!(bobs.iter().any(|o| o["id"] == pipeline), "{bobs:?}");
    assert!(bobs.len() > hers.len());
    // The event stream shows each the same.
    for (who, sees_pipeline) in [("alice", false), ("bob", true)] {
        let mut ws = ws_open_as(
            &team.p.base,
            "/api/events",
            "instantstart.events",
            Some(&team.cookies[who].0),
        )
        .await
        .unwrap();
        let first = ws_next(&mut ws).await.unwrap();
        assert_eq!(first["type"], "operations");
        let ops = first["operations"].as_array().unwrap();
        assert!(!ops.is_empty(), "{who}");
        assert_eq!(
            ops.iter()
                .any(|o| o["id"] == pipeline || o["parentId"] == pipeline),
            sees_pipeline,
            "{who}: {first}"
        );
    }
    let one = format!("/api/operations/{pipeline}");
    problem(
        team.send("alice", Method::GET, &one, None).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let r = team.send("bob", Method::GET, &one, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let op: Value = r.json().await.unwrap();
    assert_eq!(
        op["principal"],
        "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol"
    );
}
