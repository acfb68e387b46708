//! People sign in with their AWS identity (`--identity iam`): the binary against moto, whose
//! gap-filler answers a presigned `GetCallerIdentity` as STS does (signature, expiry, key).
//! Tokens are made by the SDK's signer exactly as `aws eks get-token` makes them.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use base64::Engine as _;
use instantstart::cloud::kube::token::eks_token;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::aws::Moto;
use crate::helpers::*;

const DEPLOYMENT: &str = "prod-hp";
const ADMIN_ROLE: &str = "arn:aws:iam::123456789012:role/PlatformAdmin";

/// An IAM user with an access key, made in moto.
async fn user(moto: &Moto, name: &str) -> (Credentials, String) {
    let iam = aws_sdk_iam::Client::new(&moto.aws().await.config);
    let made = iam.create_user().user_name(name).send().await.unwrap();
    let key = iam
        .create_access_key()
        .user_name(name)
        .send()
        .await
        .unwrap();
    let key = key.access_key().unwrap();
    (
        Credentials::new(
            key.access_key_id(),
            key.secret_access_key(),
            None,
            None,
            "test",
        ),
        made.user().unwrap().arn().to_string(),
    )
}

/// A session of the administrators' role, assumed in moto.
async fn admin_session(moto: &Moto) -> Credentials {
    let config = moto.aws().await.config.clone();
    let iam = aws_sdk_iam::Client::new(&config);
    iam.create_role()
        .role_name("PlatformAdmin")
        .assume_role_policy_document(
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let sts = aws_sdk_sts::Client::new(&config);
    let got = sts
        .assume_role()
        .role_arn(ADMIN_ROLE)
        .role_session_name("carol")
        .send()
        .await
        .unwrap();
    let c = got.credentials().unwrap();
    Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_string()),
        None,
        "test",
    )
}

/// Signs in at `base` and returns the session cookie (`name=value`).
async fn signed_in(base: &str, token: &str) -> String {
    let r = reqwest::Client::new()
        .post(format!("{base}/api/session"))
        .json(&json!({ "token": token }))
        .send()
        .await
        .unwrap();
    if r.status() != StatusCode::OK {
        panic!("sign-in refused: {}", r.text().await.unwrap_or_default());
    }
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    cookie.split(';').next().unwrap().to_string()
}

/// An access entry on cluster `demo` with one access policy (namespaces: its scope).
async fn grant(moto: &Moto, principal: &str, policy: &str, namespaces: Option<&[&str]>) {
    use aws_sdk_eks::types::{AccessScope, AccessScopeType};
    let eks = aws_sdk_eks::Client::new(&moto.aws().await.config);
    eks.create_access_entry()
        .cluster_name("demo")
        .principal_arn(principal)
        .send()
        .await
        .unwrap();
    let scope = match namespaces {
        None => AccessScope::builder().r#type(AccessScopeType::Cluster),
        Some(ns) => AccessScope::builder()
            .r#type(AccessScopeType::Namespace)
            .set_namespaces(Some(ns.iter().map(|n| n.to_string()).collect())),
    };
    eks.associate_access_policy()
        .cluster_name("demo")
        .principal_arn(principal)
        .policy_arn(format!("arn:aws:eks::aws:cluster-access-policy/{policy}"))
        .access_scope(scope.build())
        .send()
        .await
        .unwrap();
}

fn token(creds: &Credentials, deployment: &str, at: SystemTime) -> String {
    eks_token(deployment, "us-west-2", creds, at).unwrap()
}

/// The token's URL with `edit` applied, re-encoded.
fn tampered(token: &str, edit: impl Fn(String) -> String) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let url =
        String::from_utf8(b64.decode(token.trim_start_matches("k8s-aws-v1.")).unwrap()).unwrap();
    format!("k8s-aws-v1.{}", b64.encode(edit(url)))
}

struct People {
    server: Server,
    client: reqwest::Client,
}

impl People {
    async fn sign_in(&self, token: &str) -> reqwest::Response {
        self.client
            .post(format!("{}/api/session", self.server.base))
            .json(&json!({"token": token}))
            .send()
            .await
            .unwrap()
    }

    /// Signs in and returns the session cookie.
    async fn session(&self, token: &str) -> String {
        let r = self.sign_in(token).await;
        if r.status() != StatusCode::OK {
            panic!("sign-in refused: {}", r.text().await.unwrap_or_default());
        }
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        cookie.split(';').next().unwrap().to_string()
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        auth: (&str, &str),
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut r = self
            .client
            .request(method, format!("{}{path}", self.server.base))
            .header(auth.0, auth.1);
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_with_their_aws_identity_and_act_within_their_rights() {
    let moto = Moto::start().await;
    let (alice, alice_arn) = user(&moto, "alice").await;
    let (bob, bob_arn) = user(&moto, "bob").await;
    let carol = admin_session(&moto).await;
    let (_guard, dir) = temp_dir();
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::spawn(
        &dir,
        free_port(),
        &[
            "--cloud",
            "aws",
            "--identity",
            "iam",
            "--deployment-id",
            DEPLOYMENT,
            "--admin",
            ADMIN_ROLE,
        ],
        &env,
    );
    let client = reqwest::Client::new();
    server.ready(&client).await;
    let people = People { server, client };
    let get = |path: &str| {
        people
            .client
            .get(format!("{}{path}", people.server.base))
            .send()
    };

    // Nobody is anybody until signed in; the session route says how to sign in.
    let p = problem(
        get("/api/clusters").await.unwrap(),
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert!(
        p["type"].as_str().unwrap().ends_with("sign-in-required"),
        "{p}"
    );
    let me: Value = get("/api/session").await.unwrap().json().await.unwrap();
    assert_eq!(me["mode"], "iam");
    assert_eq!(me["signedIn"], false);
    assert!(me["signInCommand"]
        .as_str()
        .unwrap()
        .contains(&format!("--cluster-name {DEPLOYMENT}")));

    // Refused tokens: each says why, and none opens a session.
    let now = SystemTime::now();
    let good = token(&alice, DEPLOYMENT, now);
    let stranger = Credentials::new("AKIAUNKNOWNKEY000000", "secret", None, None, "test");
    for (case, t, why) in [
        (
            "expired",
            token(&alice, DEPLOYMENT, now - Duration::from_secs(16 * 60)),
            "expired",
        ),
        (
            "another deployment",
            token(&alice, "other", now),
            "SignatureDoesNotMatch",
        ),
        (
            "another host",
            tampered(&good, |u| {
                u.replace("sts.us-west-2.amazonaws.com", "sts.evil.example")
            }),
            "not to an STS endpoint",
        ),
        (
            "another action",
            tampered(&good, |u| u.replace("GetCallerIdentity", "GetSessionToken")),
            "GetCallerIdentity",
        ),
        (
            "an unknown key",
            token(&stranger, DEPLOYMENT, now),
            "InvalidClientTokenId",
        ),
        ("not a token", "hello".to_string(), "k8s-aws-v1."),
    ] {
        let p = problem(people.sign_in(&t).await, StatusCode::UNAUTHORIZED).await;
        assert!(
            p["type"].as_str().unwrap().ends_with("sign-in-refused"),
            "{case}: {p}"
        );
        assert!(p["detail"].as_str().unwrap().contains(why), "{case}: {p}");
    }
    // A good token signs in once; its replay is refused.
    let alice_cookie = people.session(&good).await;
    let p = problem(people.sign_in(&good).await, StatusCode::UNAUTHORIZED).await;
    assert!(
        p["detail"].as_str().unwrap().contains("used already"),
        "{p}"
    );
    // STS was asked with the deployment's header and for JSON, at the host the token names.
    let asked: Value = reqwest::get(format!("{}/_gapfiller/sign-ins", moto.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = asked["requests"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["k8sAwsId"], DEPLOYMENT);
    assert_eq!(last["host"], "sts.us-west-2.amazonaws.com");
    assert_eq!(last["accept"], "application/json");

    let as_alice = ("cookie", alice_cookie.as_str());
    let me: Value = people
        .send(reqwest::Method::GET, "/api/session", as_alice, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["signedIn"], true);
    assert_eq!(me["arn"], alice_arn);
    assert_eq!(me["admin"], false);
    assert_eq!(
        people
            .send(reqwest::Method::GET, "/api/clusters", as_alice, None)
            .await
            .status(),
        StatusCode::OK
    );

    // Creating a cluster is an administrator's: the refusal names the right and who holds it.
    let r = people
        .send(
            reqwest::Method::POST,
            "/api/pipelines",
            as_alice,
            Some(pipeline_body()),
        )
        .await;
    let p = problem(r, StatusCode::FORBIDDEN).await;
    assert!(
        p["type"].as_str().unwrap().ends_with("access-denied"),
        "{p}"
    );
    assert!(
        p["detail"].as_str().unwrap().contains("create clusters"),
        "{p}"
    );
    assert_eq!(p["hint"]["grantedBy"], json!([ADMIN_ROLE]));

    // The administrator signs in with a role session: the person is the session, the
    // principal its role.
    let carol_cookie = people.session(&token(&carol, DEPLOYMENT, now)).await;
    let as_carol = ("cookie", carol_cookie.as_str());
    let me: Value = people
        .send(reqwest::Method::GET, "/api/session", as_carol, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["principalArn"], ADMIN_ROLE);
    assert_eq!(
        me["arn"],
        "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol"
    );
    assert_eq!(me["admin"], true);
    // The last administrator stays; another is added, then may act as one.
    let encoded =
        percent_encoding::utf8_percent_encode(ADMIN_ROLE, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let r = people
        .send(
            reqwest::Method::DELETE,
            &format!("/api/admins/{encoded}"),
            as_carol,
            None,
        )
        .await;
    problem(r, StatusCode::CONFLICT).await;
    let r = people
        .send(
            reqwest::Method::POST,
            "/api/admins",
            as_alice,
            Some(json!({"principalArn": bob_arn})),
        )
        .await;
    problem(r, StatusCode::FORBIDDEN).await;
    let r = people
        .send(
            reqwest::Method::POST,
            "/api/admins",
            as_carol,
            Some(json!({"principalArn": bob_arn})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let bob_cookie = people.session(&token(&bob, DEPLOYMENT, now)).await;
    let me: Value = people
        .send(
            reqwest::Method::GET,
            "/api/session",
            ("cookie", &bob_cookie),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["admin"], true);

    // Alice's agent acts as her: a read-only token reads and is refused a write; a revoked
    // one is refused at once. Neither can mint tokens.
    let r = people
        .send(
            reqwest::Method::POST,
            "/api/session/agent-tokens",
            as_alice,
            Some(json!({"name": "kiro", "readOnly": true, "days": 7})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let made: Value = r.json().await.unwrap();
    let agent = format!("Bearer {}", made["token"].as_str().unwrap());
    assert!(agent.starts_with("Bearer isat_"));
    let as_agent = ("authorization", agent.as_str());
    let me: Value = people
        .send(reqwest::Method::GET, "/api/session", as_agent, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["arn"], alice_arn);
    assert_eq!(me["agentToken"]["name"], "kiro");
    let r = people
        .send(
            reqwest::Method::POST,
            "/api/session/agent-tokens",
            as_agent,
            Some(json!({"name": "x"})),
        )
        .await;
    problem(r, StatusCode::FORBIDDEN).await;
    let r = people
        .send(
            reqwest::Method::PUT,
            "/api/active-cluster",
            as_agent,
            Some(json!({"name": "x"})),
        )
        .await;
    let p = problem(r, StatusCode::FORBIDDEN).await;
    assert!(
        p["type"].as_str().unwrap().ends_with("writes-disabled"),
        "{p}"
    );
    let listed: Value = people
        .send(
            reqwest::Method::GET,
            "/api/session/agent-tokens",
            as_alice,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("token").is_none(), "the secret is shown once");
    let id = made["id"].as_str().unwrap();
    let r = people
        .send(
            reqwest::Method::DELETE,
            &format!("/api/session/agent-tokens/{id}"),
            as_alice,
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = people
        .send(reqwest::Method::GET, "/api/clusters", as_agent, None)
        .await;
    problem(r, StatusCode::UNAUTHORIZED).await;

    // Signing out ends the session on the server.
    let r = people
        .send(
            reqwest::Method::DELETE,
            "/api/session",
            ("cookie", &bob_cookie),
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = people
        .send(
            reqwest::Method::GET,
            "/api/clusters",
            ("cookie", &bob_cookie),
            None,
        )
        .await;
    problem(r, StatusCode::UNAUTHORIZED).await;

    // The trail names each person, refusals included, and an agent's calls as the agent's.
    let audit: Value = people
        .send(reqwest::Method::GET, "/api/audit?limit=100", as_carol, None)
        .await
        .json()
        .await
        .unwrap();
    let rows = audit["items"]
        .as_array()
        .or(audit.as_array())
        .unwrap()
        .clone();
    let row = |route: &str, principal: &str| {
        rows.iter()
            .find(|r| r["route"] == route && r["principal"] == principal)
            .unwrap_or_else(|| panic!("no {route} by {principal}: {rows:?}"))
            .clone()
    };
    assert_eq!(row("/api/pipelines", &alice_arn)["outcome"], "refused");
    let by_agent = row("/api/active-cluster", &alice_arn);
    assert_eq!(by_agent["actor"], "agent");
    assert_eq!(by_agent["status"], 403);
    assert_eq!(
        row(
            "/api/admins",
            "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol"
        )["outcome"],
        "ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_person_may_do_on_a_cluster_is_what_their_eks_access_entry_allows() {
    use crate::kube::AwsPipeline;
    use crate::training::sft;
    const JOBS: &str = "/api/clusters/demo/training-jobs";
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
    p.activate_addon("amazon-sagemaker-hyperpod-training-operator")
        .await;
    let now = SystemTime::now();
    let mut cookies = std::collections::HashMap::new();
    for (name, policy, scope) in [
        ("alice", Some("AmazonEKSEditPolicy"), Some(&["default"][..])),
        ("bob", Some("AmazonEKSViewPolicy"), None),
        (
            "eve",
            Some("AmazonEKSAdminPolicy"),
            Some(&["hyperpod-ns-*"][..]),
        ),
        ("dave", None, None),
    ] {
        let (creds, arn) = user(&p.moto, name).await;
        if let Some(policy) = policy {
            grant(&p.moto, &arn, policy, scope).await;
        }
        let cookie = signed_in(&p.base, &token(&creds, DEPLOYMENT, now)).await;
        cookies.insert(name, (cookie, arn));
    }
    let client = reqwest::Client::new();
    let send = |who: &str, method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = client
            .request(method, format!("{}{path}", p.base))
            .header("cookie", &cookies[who].0);
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send()
    };
    let denied = |r: reqwest::Response, needs: &'static str| async move {
        let p = problem(r, StatusCode::FORBIDDEN).await;
        assert!(
            p["type"].as_str().unwrap().ends_with("access-denied"),
            "{p}"
        );
        assert!(p["detail"].as_str().unwrap().contains(needs), "{p}");
        assert_eq!(p["hint"]["grantedBy"], json!([ADMIN_ROLE]), "{p}");
    };

    // No access entry: not even a look.
    let r = send("dave", reqwest::Method::GET, "/api/clusters/demo", None)
        .await
        .unwrap();
    denied(r, "an access entry on cluster demo").await;
    // A viewer reads but submits nothing; a team's editor submits nowhere else.
    let needs_edit = "AmazonEKSEditPolicy (or Admin) on namespace default of cluster demo";
    let r = send("bob", reqwest::Method::POST, JOBS, Some(sft("by-bob")))
        .await
        .unwrap();
    denied(r, needs_edit).await;
    let r = send("eve", reqwest::Method::POST, JOBS, Some(sft("by-eve")))
        .await
        .unwrap();
    denied(r, needs_edit).await;
    // Alice edits namespace default: her job goes in.
    let r = send("alice", reqwest::Method::POST, JOBS, Some(sft("by-alice")))
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::ACCEPTED,
        "{}",
        r.text().await.unwrap_or_default()
    );
    // Once the job is applied, who sees it: those who may read namespace default.
    let applied =
        "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs/by-alice";
    for _ in 0..400 {
        if p.emu.get(applied).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(p.emu.get(applied).await.is_some(), "the job is applied");
    let names = |v: Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (who, sees) in [("alice", true), ("bob", true), ("eve", false)] {
        let v: Value = send(who, reqwest::Method::GET, JOBS, None)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(names(v).contains(&"by-alice".to_string()), sees, "{who}");
    }
    // Reads that would show every namespace need cluster-wide read.
    let r = send(
        "eve",
        reqwest::Method::GET,
        "/api/clusters/demo/deployments",
        None,
    )
    .await
    .unwrap();
    denied(r, "AmazonEKSViewPolicy on the whole of cluster demo").await;
    let r = send(
        "bob",
        reqwest::Method::GET,
        "/api/clusters/demo/deployments",
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A viewer deletes nothing; the cluster's own changes are its administrators'.
    let r = send(
        "bob",
        reqwest::Method::DELETE,
        &format!("{JOBS}/by-alice"),
        None,
    )
    .await
    .unwrap();
    denied(r, needs_edit).await;
    let r = send(
        "alice",
        reqwest::Method::PATCH,
        "/api/clusters/demo/features",
        Some(json!({})),
    )
    .await
    .unwrap();
    denied(r, "AmazonEKSClusterAdminPolicy on cluster demo").await;

    // The trail names who did and who was refused.
    let audit: Value = p
        .client
        .get(format!("{}/api/audit?limit=200", p.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = audit.as_array().unwrap();
    let outcome = |who: &str| {
        rows.iter()
            .find(|r| {
                r["route"] == "/api/clusters/{name}/training-jobs"
                    && r["principal"] == cookies[who].1.as_str()
            })
            .map(|r| r["outcome"].clone())
    };
    assert_eq!(outcome("alice"), Some(json!("ok")));
    assert_eq!(outcome("bob"), Some(json!("refused")));
}
