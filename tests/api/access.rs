//! People sign in with their AWS identity (`--identity iam`): the binary against moto, whose
//! gap-filler answers a presigned `GetCallerIdentity` as STS does (signature, expiry, key).
//! Tokens are made by the SDK's signer exactly as `aws eks get-token` makes them.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use base64::Engine as _;
use instantstart::cloud::kube::token::eks_token;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::aws::Moto;
use crate::helpers::*;

pub(crate) const DEPLOYMENT: &str = "prod-hp";
pub(crate) const ADMIN_ROLE: &str = "arn:aws:iam::123456789012:role/PlatformAdmin";

/// An IAM user with an access key, made in moto.
pub(crate) async fn user(moto: &Moto, name: &str) -> (Credentials, String) {
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
pub(crate) async fn admin_session(moto: &Moto) -> Credentials {
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
pub(crate) async fn signed_in(base: &str, token: &str) -> String {
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
pub(crate) async fn grant(moto: &Moto, principal: &str, policy: &str, namespaces: Option<&[&str]>) {
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

pub(crate) fn token(creds: &Credentials, deployment: &str, at: SystemTime) -> String {
    eks_token(deployment, "us-west-2", creds, at).unwrap()
}

/// The token's URL with `edit` applied, re-encoded.
fn tampered(token: &str, edit: impl Fn(String) -> String) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let url =
        String::from_utf8(b64.decode(token.trim_start_matches("k8s-aws-v1.")).unwrap()).unwrap();
    format!("k8s-aws-v1.{}", b64.encode(edit(url)))
}

/// A server people sign in to, against moto.
struct People {
    server: Server,
    client: reqwest::Client,
}

/// Whose credentials a request carries: a session cookie or an agent token, or nobody's.
#[derive(Clone, Copy)]
enum As<'a> {
    Nobody,
    Cookie(&'a str),
    Agent(&'a str),
}

impl People {
    async fn start(moto: &Moto, dir: &std::path::Path) -> Self {
        let env = moto.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args = [
            "--cloud",
            "aws",
            "--identity",
            "iam",
            "--deployment-id",
            DEPLOYMENT,
        ];
        let args: Vec<&str> = args.into_iter().chain(["--admin", ADMIN_ROLE]).collect();
        let server = Server::spawn(dir, free_port(), &args, &env);
        let client = reqwest::Client::new();
        server.ready(&client).await;
        Self { server, client }
    }

    async fn sign_in(&self, token: &str) -> reqwest::Response {
        self.call(
            Method::POST,
            "/api/session",
            As::Nobody,
            Some(json!({ "token": token })),
        )
        .await
    }

    /// Signs in and returns the session cookie.
    async fn session(&self, token: &str) -> String {
        signed_in(&self.server.base, token).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        who: As<'_>,
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut r = self
            .client
            .request(method, format!("{}{path}", self.server.base));
        r = match who {
            As::Nobody => r,
            As::Cookie(c) => r.header("cookie", c),
            As::Agent(t) => r.header("authorization", format!("Bearer {t}")),
        };
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send().await.unwrap()
    }

    async fn get(&self, path: &str, who: As<'_>) -> Value {
        let r = self.call(Method::GET, path, who, None).await;
        assert_eq!(r.status(), StatusCode::OK, "GET {path}");
        r.json().await.unwrap()
    }

    /// The problem a request is refused with, of `status`.
    async fn refused(
        &self,
        method: Method,
        path: &str,
        who: As<'_>,
        body: Option<Value>,
        status: StatusCode,
    ) -> Value {
        problem(self.call(method, path, who, body).await, status).await
    }
}

pub(crate) fn is(p: &Value, slug: &str) -> bool {
    p["type"].as_str().unwrap_or_default().ends_with(slug)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_with_their_aws_identity_and_act_within_their_rights() {
    let moto = Moto::start().await;
    let (alice_creds, alice_arn) = user(&moto, "alice").await;
    let (bob, bob_arn) = user(&moto, "bob").await;
    let carol = admin_session(&moto).await;
    let (_guard, dir) = temp_dir();
    let people = People::start(&moto, &dir).await;
    let alice = &alice_creds;
    let now = SystemTime::now();

    strangers_are_told_how_to_sign_in(&people).await;
    every_bad_token_is_refused_with_its_reason(&people, alice, now).await;
    let alice_cookie = a_token_signs_in_once(&people, &moto, alice, now).await;
    let alice = As::Cookie(&alice_cookie);
    let me = people.get("/api/session", alice).await;
    assert_eq!(
        (
            me["signedIn"].clone(),
            me["arn"].clone(),
            me["admin"].clone()
        ),
        (json!(true), json!(alice_arn), json!(false))
    );
    people.get("/api/clusters", alice).await;

    let carol_cookie = people.session(&token(&carol, DEPLOYMENT, now)).await;
    let bob_cookie = administrators_keep_their_list(
        &people,
        alice,
        As::Cookie(&carol_cookie),
        (&bob, &bob_arn),
        now,
    )
    .await;
    an_agent_acts_as_its_person(&people, alice, &alice_arn).await;

    // Signing out ends the session on the server.
    let r = people
        .call(
            Method::DELETE,
            "/api/session",
            As::Cookie(&bob_cookie),
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    people
        .refused(
            Method::GET,
            "/api/clusters",
            As::Cookie(&bob_cookie),
            None,
            StatusCode::UNAUTHORIZED,
        )
        .await;

    the_browser_signs_in(
        &people.server.base,
        &people.server.log,
        &dir,
        &alice_creds,
        &alice_arn,
        None,
    )
    .await;

    // The trail names each person, refusals included, and an agent's calls as the agent's.
    let rows = people
        .get("/api/audit?limit=100", As::Cookie(&carol_cookie))
        .await;
    let row = |route: &str, principal: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["route"] == route && r["principal"] == principal)
            .unwrap_or_else(|| panic!("no {route} by {principal}: {rows}"))
            .clone()
    };
    assert_eq!(row("/api/pipelines", &alice_arn)["outcome"], "refused");
    let by_agent = row("/api/active-cluster", &alice_arn);
    assert_eq!(
        (by_agent["actor"].clone(), by_agent["status"].clone()),
        (json!("agent"), json!(403))
    );
    let carols = "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol";
    assert_eq!(row("/api/admins", carols)["outcome"], "ok");
    // A person reads their own trail only, whatever they ask for.
    let carol_encoded =
        percent_encoding::utf8_percent_encode(carols, percent_encoding::NON_ALPHANUMERIC);
    let own = people
        .get(&format!("/api/audit?principal={carol_encoded}"), alice)
        .await;
    let own = own.as_array().unwrap();
    assert!(
        !own.is_empty() && own.iter().all(|r| r["principal"] == alice_arn),
        "{own:?}"
    );
}

/// In headless Chromium: the sign-in page gives the command, takes a token, shows the person
/// (and, when `teams` is given, their teams as EKS says; the Teams page shows the one team and
/// not the other, and neither page offers what only the cluster's administrators change) and
/// hides what only an administrator may do (tests/peers/ui_scenarios.py, `people`).
pub(crate) async fn the_browser_signs_in(
    base: &str,
    log: &std::path::Path,
    dir: &std::path::Path,
    who: &Credentials,
    arn: &str,
    teams: Option<(&str, &str, &str)>,
) {
    let out = dir.join("ui-people");
    std::fs::create_dir_all(&out).unwrap();
    let fresh = token(who, DEPLOYMENT, SystemTime::now());
    let status = tokio::process::Command::new(venv_python())
        .arg(peer("ui_scenarios.py"))
        .arg(base)
        .arg(&out)
        .arg("people")
        .env("PEOPLE_TOKEN", fresh)
        .env("PEOPLE_ARN", arn)
        .env("PEOPLE_DEPLOYMENT", DEPLOYMENT)
        .env("PEOPLE_TEAMS", teams.map(|t| t.0).unwrap_or_default())
        .env("PEOPLE_TEAM", teams.map(|t| t.1).unwrap_or_default())
        .env("PEOPLE_NOT_TEAM", teams.map(|t| t.2).unwrap_or_default())
        .kill_on_drop(true)
        .status()
        .await
        .expect("run the browser scenario");
    assert!(
        status.success(),
        "the people scenario failed (screenshots in {}); the server's last lines:\n{}",
        out.display(),
        Server::log_tail(log, 40)
    );
}

/// Nobody is anybody until signed in; the session route says how to sign in.
async fn strangers_are_told_how_to_sign_in(people: &People) {
    let p = people
        .refused(
            Method::GET,
            "/api/clusters",
            As::Nobody,
            None,
            StatusCode::UNAUTHORIZED,
        )
        .await;
    assert!(is(&p, "sign-in-required"), "{p}");
    let me = people.get("/api/session", As::Nobody).await;
    assert_eq!(
        (me["mode"].clone(), me["signedIn"].clone()),
        (json!("iam"), json!(false))
    );
    let command = me["signInCommand"].as_str().unwrap();
    assert!(
        command.contains(&format!("--cluster-name {DEPLOYMENT}")),
        "{command}"
    );
}

/// Each refused token says why, and none opens a session.
async fn every_bad_token_is_refused_with_its_reason(
    people: &People,
    alice: &Credentials,
    now: SystemTime,
) {
    let good = token(alice, DEPLOYMENT, now);
    let stranger = Credentials::new("AKIAUNKNOWNKEY000000", "secret", None, None, "test");
    let old = now - Duration::from_secs(16 * 60);
    for (case, t, why) in [
        ("expired", token(alice, DEPLOYMENT, old), "expired"),
        (
            "another deployment",
            token(alice, "other", now),
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
        assert!(is(&p, "sign-in-refused"), "{case}: {p}");
        assert!(p["detail"].as_str().unwrap().contains(why), "{case}: {p}");
    }
}

/// A good token signs in once (its replay is refused), and STS was asked as EKS asks it: with
/// the deployment's header, for JSON, at the host the token names.
async fn a_token_signs_in_once(
    people: &People,
    moto: &Moto,
    alice: &Credentials,
    now: SystemTime,
) -> String {
    let good = token(alice, DEPLOYMENT, now);
    let cookie = people.session(&good).await;
    let p = problem(people.sign_in(&good).await, StatusCode::UNAUTHORIZED).await;
    assert!(
        p["detail"].as_str().unwrap().contains("used already"),
        "{p}"
    );
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
    cookie
}

/// Creating a cluster is an administrator's: the refusal names the right and who holds it. The
/// administrator signs in with a role session (the person is the session, the principal its
/// role), keeps the last administrator, and adds Bob, who may then act as one.
async fn administrators_keep_their_list(
    people: &People,
    alice: As<'_>,
    carol: As<'_>,
    (bob, bob_arn): (&Credentials, &str),
    now: SystemTime,
) -> String {
    let p = people
        .refused(
            Method::POST,
            "/api/pipelines",
            alice,
            Some(pipeline_body()),
            StatusCode::FORBIDDEN,
        )
        .await;
    assert!(
        is(&p, "access-denied") && p["detail"].as_str().unwrap().contains("create clusters"),
        "{p}"
    );
    assert_eq!(p["hint"]["grantedBy"], json!([ADMIN_ROLE]));

    let me = people.get("/api/session", carol).await;
    assert_eq!(me["principalArn"], ADMIN_ROLE);
    assert_eq!(
        me["arn"],
        "arn:aws:sts::123456789012:assumed-role/PlatformAdmin/carol"
    );
    assert_eq!(me["admin"], true);
    let encoded =
        percent_encoding::utf8_percent_encode(ADMIN_ROLE, percent_encoding::NON_ALPHANUMERIC);
    let p = people
        .refused(
            Method::DELETE,
            &format!("/api/admins/{encoded}"),
            carol,
            None,
            StatusCode::CONFLICT,
        )
        .await;
    assert!(is(&p, "last-admin"), "{p}");
    let bob_is_admin = Some(json!({ "principalArn": bob_arn }));
    people
        .refused(
            Method::POST,
            "/api/admins",
            alice,
            bob_is_admin.clone(),
            StatusCode::FORBIDDEN,
        )
        .await;
    let r = people
        .call(Method::POST, "/api/admins", carol, bob_is_admin)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let bob_cookie = people.session(&token(bob, DEPLOYMENT, now)).await;
    assert_eq!(
        people.get("/api/session", As::Cookie(&bob_cookie)).await["admin"],
        true
    );
    bob_cookie
}

/// Alice's agent acts as her: a read-only token reads and is refused a write, over REST and
/// over MCP with the official client; it mints no token; revoked, it is refused at once. The
/// MCP endpoint answers nobody without a token.
async fn an_agent_acts_as_its_person(people: &People, alice: As<'_>, alice_arn: &str) {
    let kiro = json!({"name": "kiro", "readOnly": true, "days": 7});
    let r = people
        .call(Method::POST, "/api/session/agent-tokens", alice, Some(kiro))
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let made: Value = r.json().await.unwrap();
    let secret = made["token"].as_str().unwrap();
    assert!(secret.starts_with("isat_"));
    let agent = As::Agent(secret);
    let me = people.get("/api/session", agent).await;
    assert_eq!(
        (me["arn"].as_str(), me["agentToken"]["name"].as_str()),
        (Some(alice_arn), Some("kiro"))
    );
    people
        .refused(
            Method::POST,
            "/api/session/agent-tokens",
            agent,
            Some(json!({"name": "x"})),
            StatusCode::FORBIDDEN,
        )
        .await;
    let p = people
        .refused(
            Method::PUT,
            "/api/active-cluster",
            agent,
            Some(json!({"name": "x"})),
            StatusCode::FORBIDDEN,
        )
        .await;
    assert!(is(&p, "writes-disabled"), "{p}");

    // A scraper's token: metrics are a read.
    let metrics = people.call(Method::GET, "/metrics", agent, None).await;
    assert_eq!(metrics.status(), StatusCode::OK);
    assert!(metrics.text().await.unwrap().contains("instantstart_"));

    let seen = crate::mcp::mcp_client_as(&people.server.base, "person", Some(secret)).await;
    assert_eq!(seen["me"]["value"]["arn"], alice_arn, "{seen}");
    assert_eq!(
        seen["me"]["value"]["agentToken"]["readOnly"], true,
        "{seen}"
    );
    assert_eq!(seen["read"]["is_error"], false, "{seen}");
    assert_eq!(seen["write"]["is_error"], true, "{seen}");
    assert!(is(&seen["write"]["value"], "writes-disabled"), "{seen}");
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let r = people
        .client
        .post(format!("{}/mcp", people.server.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;

    let listed = people.get("/api/session/agent-tokens", alice).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("token").is_none(), "the secret is shown once");
    let id = made["id"].as_str().unwrap();
    let r = people
        .call(
            Method::DELETE,
            &format!("/api/session/agent-tokens/{id}"),
            alice,
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    people
        .refused(
            Method::GET,
            "/api/clusters",
            agent,
            None,
            StatusCode::UNAUTHORIZED,
        )
        .await;
}

#[tokio::test]
async fn a_server_that_cannot_sign_people_in_does_not_start() {
    use instantstart::service::people::IdentityMode;
    let dir = tempfile::tempdir().unwrap();
    let mut config = instantstart::config::ServeConfig::sandbox(dir.path().to_path_buf());
    config.identity = IdentityMode::Iam;
    let refusal = |config: instantstart::config::ServeConfig| async move {
        match instantstart::build_app(config).await {
            Ok(_) => panic!("the server started"),
            Err(e) => e.to_string(),
        }
    };
    // The sandbox has no STS to ask who signed a token.
    assert!(refusal(config.clone()).await.contains("needs --cloud aws"));
    // A shared token would take the header each person's agent token goes in.
    config.token = Some("0123456789abcdef".parse().unwrap());
    assert!(refusal(config).await.contains("exclude each other"));
}
