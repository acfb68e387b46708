//! The real AWS adapters (aws-sdk-rust) against a moto server on loopback, and — for APIs moto
//! does not implement — against `aws-smithy-mocks` rules that assert the request shape.

use std::sync::Arc;
use std::time::Duration;

use instantstart::cloud::aws::Aws;
use instantstart::cloud::unavailable::Unavailable;
use instantstart::cloud::{Cloud, Zone};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// A moto server on a free loopback port, stopped on drop.
pub struct Moto {
    child: std::process::Child,
    pub url: String,
}

impl Moto {
    /// Starts moto (plus the EKS add-on API it lacks: tests/peers/moto_server.py) with the
    /// project venv's Python.
    pub async fn start() -> Self {
        let port = free_port();
        let child = std::process::Command::new(venv_python())
            .arg(peer("moto_server.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // AWS-managed policies (AmazonEKSClusterPolicy ...) exist only when loaded.
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto_server");
        // Owned by the guard from here on, so it is killed and reaped whatever happens next.
        let moto = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        for _ in 0..400 {
            if client
                .get(format!("{}/moto-api/", moto.url))
                .send()
                .await
                .is_ok()
            {
                return moto;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("moto_server did not start");
    }

    /// A role's inline policy as IAM holds it (decoded JSON text).
    pub async fn role_policy(&self, role: &str, policy: &str) -> String {
        let iam = aws_sdk_iam::Client::new(&self.aws().await.config);
        let got = iam
            .get_role_policy()
            .role_name(role)
            .policy_name(policy)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{role}/{policy}: {e:?}"));
        percent_encoding::percent_decode_str(got.policy_document())
            .decode_utf8_lossy()
            .to_string()
    }

    /// The adapter, configured as the server would be against this endpoint (retries off).
    pub async fn aws(&self) -> Arc<Aws> {
        Arc::new(self.adapter().await)
    }

    async fn adapter(&self) -> Aws {
        let config = instantstart::cloud::aws::config_loader()
            .region(aws_config::Region::new("us-west-2"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "test", "test", None, None, "static",
            ))
            .endpoint_url(&self.url)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .load()
            .await;
        Aws::from_config(config).expect("region")
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.url.clone()),
            ("AWS_REGION", "us-west-2".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cloud_of(aws: &Arc<Aws>) -> Cloud {
    aws.cloud(Arc::new(Unavailable {
        region: "us-west-2".into(),
        reason: "no kubernetes in this test".into(),
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_runs_network_eks_and_hyperpod_against_moto() {
    let moto = Moto::start().await;
    let (_guard, dir) = temp_dir();
    // As the stack deploys it: the stack's bucket exists, and the server is told to use it.
    const SHARED: &str = "sagemaker-instantstart-shared-123456789012-us-west-2";
    instantstart::cloud::ObjectStore::create_bucket(
        &*moto.aws().await,
        SHARED,
        &Default::default(),
    )
    .await
    .unwrap();
    let mut env = moto.env();
    env.push(("INSTANTSTART_SHARED_BUCKET", SHARED.to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::spawn(&dir, free_port(), &["--cloud", "aws"], &env);
    let client = reqwest::Client::new();
    server.ready(&client).await;

    // The Kubernetes-dependent stages (dependencies, storage) are switched off here: they need
    // the kube-rs adapter, tested against its own emulator.
    let mut body = pipeline_body();
    body["dependencies"] = json!(false);
    body["storage"] = json!(false);
    let r = client
        .post(format!("{}/api/pipelines", server.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let accepted: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let op = wait_terminal(
        &client,
        &server.base,
        accepted["operationId"].as_str().unwrap(),
    )
    .await;
    let cluster: Value = client
        .get(format!("{}/api/clusters/demo", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(op["state"], "succeeded", "{cluster}");
    let res = &cluster["resources"];

    // What the adapters created, read back with the SDK.
    let aws = moto.aws().await;
    let vpc_id = res["vpcId"].as_str().unwrap();
    let subnets = aws_sdk_ec2::Client::new(&aws.config)
        .describe_subnets()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(vpc_id)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let mut cidrs: Vec<&str> = subnets
        .subnets()
        .iter()
        .filter_map(|s| s.cidr_block())
        .collect();
    cidrs.sort();
    let vpc = res["vpcCidr"].as_str().unwrap();
    let prefix = vpc.trim_end_matches(".0.0/16");
    assert_eq!(
        cidrs,
        [
            format!("{prefix}.0.0/24"),
            format!("{prefix}.1.0/24"),
            format!("{prefix}.16.0/20"),
            format!("{prefix}.2.0/24"),
            format!("{prefix}.3.0/24")
        ]
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
    );
    for s in subnets.subnets() {
        let tags: Vec<_> = s.tags().iter().filter_map(|t| t.key()).collect();
        assert!(
            tags.contains(&"instantstart:cluster") && tags.contains(&"Name"),
            "{s:?}"
        );
    }
    let ec2 = aws_sdk_ec2::Client::new(&aws.config);
    let rts = ec2
        .describe_route_tables()
        .route_table_ids(res["privateRouteTableId"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let rt = &rts.route_tables()[0];
    assert!(rt
        .routes()
        .iter()
        .any(|r| r.destination_cidr_block() == Some("0.0.0.0/0")
            && r.nat_gateway_id() == res["natGatewayId"].as_str()));
    let associated: Vec<_> = rt
        .associations()
        .iter()
        .filter_map(|a| a.subnet_id())
        .collect();
    assert!(
        associated.contains(&res["computeSubnetId"].as_str().unwrap()),
        "compute subnet routes through the NAT"
    );
    // One group for the control plane and the nodes: all traffic within it, in and out.
    let group = res["clusterSecurityGroupId"].as_str().unwrap();
    let sg = ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap();
    let g = &sg.security_groups()[0];
    let self_rule = |rules: &[aws_sdk_ec2::types::IpPermission]| {
        rules.iter().any(|p| {
            p.ip_protocol() == Some("-1")
                && p.user_id_group_pairs()
                    .iter()
                    .any(|pair| pair.group_id() == Some(group))
        })
    };
    assert!(self_rule(g.ip_permissions()), "self-referencing ingress");
    assert!(
        self_rule(g.ip_permissions_egress()),
        "self-referencing egress (EFA)"
    );
    assert!(
        res.get("efaSecurityGroupId").is_none(),
        "no second group that nodes and control plane would not share"
    );
    let endpoints = ec2
        .describe_vpc_endpoints()
        .vpc_endpoint_ids(res["s3EndpointId"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        endpoints.vpc_endpoints()[0].service_name(),
        Some("com.amazonaws.us-west-2.s3")
    );

    let eks = aws_sdk_eks::Client::new(&aws.config)
        .describe_cluster()
        .name("demo")
        .send()
        .await
        .unwrap();
    assert_eq!(eks.cluster().unwrap().arn(), res["eksClusterArn"].as_str());
    let plane_groups = eks
        .cluster()
        .and_then(|c| c.resources_vpc_config())
        .map(|v| v.security_group_ids().to_vec())
        .unwrap_or_default();
    assert_eq!(
        plane_groups,
        vec![group.to_string()],
        "the control plane's group"
    );
    let iam = aws_sdk_iam::Client::new(&aws.config);
    let doc = moto
        .role_policy("demo-hyperpod-exec", "instantstart-hyperpod")
        .await;
    // The cluster's prefix of the shared bucket, and nothing else of it.
    let policy_doc: Value = serde_json::from_str(&doc).unwrap();
    let list = policy_doc["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Action"] == json!(["s3:ListBucket"]))
        .unwrap();
    assert_eq!(
        list["Condition"]["StringLike"]["s3:prefix"],
        json!(["demo/*"])
    );
    assert!(
        doc.contains(&format!("arn:aws:s3:::{SHARED}/demo/*"))
            && !doc.contains(&format!("arn:aws:s3:::{SHARED}/*"))
            && !doc.contains("\"s3:*\"")
            && doc.contains("ecr:GetAuthorizationToken")
            && doc.contains("eks-auth:AssumeRoleForPodIdentity"),
        "{doc}"
    );
    let providers = iam.list_open_id_connect_providers().send().await.unwrap();
    assert_eq!(providers.open_id_connect_provider_list().len(), 1);

    let sm = aws_sdk_sagemaker::Client::new(&aws.config)
        .describe_cluster()
        .cluster_name("demo-hp")
        .send()
        .await
        .unwrap();
    // The tag AWS's training-operator policy (v3) requires before the operator describes nodes.
    let tags = aws_sdk_sagemaker::Client::new(&aws.config)
        .list_tags()
        .resource_arn(sm.cluster_arn().unwrap())
        .send()
        .await
        .unwrap();
    assert!(
        tags.tags()
            .iter()
            .any(|t| t.key() == Some("SageMaker") && t.value() == Some("true")),
        "{tags:?}"
    );
    let ig = &sm.instance_groups()[0];
    assert_eq!(ig.threads_per_core(), Some(1));
    assert_eq!(
        ig.life_cycle_config().and_then(|l| l.source_s3_uri()),
        Some(format!("s3://{SHARED}/demo/lifecycle/").as_str())
    );
    assert_eq!(ig.current_count(), Some(2));
    assert_eq!(
        sm.vpc_config()
            .map(|v| v.security_group_ids().to_vec())
            .or_else(|| ig
                .override_vpc_config()
                .map(|v| v.security_group_ids().to_vec())),
        Some(vec![group.to_string()]),
        "the nodes share the control plane's group"
    );
    let nodes = instantstart::cloud::HyperPod::list_cluster_nodes(&*aws, "demo-hp", None)
        .await
        .unwrap();
    assert_eq!(nodes.nodes.len(), 2);
    let objects = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&aws.config)
            .force_path_style(true)
            .build(),
    )
    .list_objects_v2()
    .bucket(SHARED)
    .send()
    .await
    .unwrap();
    let keys: Vec<_> = objects.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["demo/lifecycle/on_create.sh"]);
    // No bucket of its own was made.
    let buckets = aws_sdk_s3::Client::new(&aws.config)
        .list_buckets()
        .send()
        .await
        .unwrap();
    let names: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, [SHARED]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compute_subnet_function_is_idempotent_and_skips_overlaps_on_moto() {
    use instantstart::cloud::{cluster_tags, CreateRouteTable, CreateSubnet, Network};
    use instantstart::service::cluster::subnets::{
        ensure_compute_subnet, ComputeSubnetRequest, SubnetLocks,
    };
    let moto = Moto::start().await;
    let aws = moto.aws().await;
    let cloud = cloud_of(&aws);
    let vpc = aws
        .create_vpc("10.50.0.0/16".parse().unwrap(), &cluster_tags("cs", "vpc"))
        .await
        .unwrap();
    let zones = aws.describe_availability_zones().await.unwrap();
    // Someone else's subnet squats on the first /20 slot, unaligned.
    let squatter = CreateSubnet {
        vpc_id: vpc.id.clone(),
        cidr: "10.50.20.0/22".parse().unwrap(),
        zone_id: zones[0].id.clone(),
        map_public_ip: false,
        tags: Default::default(),
    };
    aws.create_subnet(&squatter).await.unwrap();
    let igw = aws
        .create_internet_gateway(&vpc.id, &cluster_tags("cs", "igw"))
        .await
        .unwrap();
    let rt = aws
        .create_route_table(&CreateRouteTable {
            vpc_id: vpc.id.clone(),
            default_route_target: igw,
            subnet_ids: vec![],
            tags: cluster_tags("cs", "rt"),
        })
        .await
        .unwrap();
    let locks = SubnetLocks::default();
    fn place<'a>(vpc: &'a str, zone: &'a Zone, rt: &'a str) -> ComputeSubnetRequest<'a> {
        ComputeSubnetRequest {
            cluster: "cs",
            vpc_id: vpc,
            zone,
            route_table_id: rt,
            prefix: 20,
        }
    }
    let z0 = zones[0].clone();
    let z1 = zones[1].clone();
    let (a, created_a) = ensure_compute_subnet(&cloud, &locks, &place(&vpc.id, &z0, &rt))
        .await
        .unwrap();
    let (b, created_b) = ensure_compute_subnet(&cloud, &locks, &place(&vpc.id, &z1, &rt))
        .await
        .unwrap();
    assert!(created_a && created_b);
    assert_eq!(a.cidr.to_string(), "10.50.0.0/20");
    assert_eq!(
        b.cidr.to_string(),
        "10.50.32.0/20",
        "10.50.16.0/20 overlaps the squatter"
    );
    let (again, created) = ensure_compute_subnet(&cloud, &locks, &place(&vpc.id, &z0, &rt))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again.id, a.id);
    assert_eq!(aws.describe_subnets(&vpc.id).await.unwrap().len(), 3);

    // Large fleets: a secondary block, associated through the adapter, takes the big compute
    // subnets first (what AWS's templates do).
    let secondary: ipnet::Ipv4Net = "100.64.0.0/16".parse().unwrap();
    aws.associate_vpc_cidr(&vpc.id, secondary).await.unwrap();
    let listed = aws.describe_vpcs().await.unwrap();
    let cidrs = &listed.iter().find(|v| v.id == vpc.id).unwrap().cidrs;
    assert!(cidrs.contains(&secondary), "{cidrs:?}");
    let z2 = zones[2].clone();
    let big = ComputeSubnetRequest {
        prefix: 17,
        ..place(&vpc.id, &z2, &rt)
    };
    let (c, _) = ensure_compute_subnet(&cloud, &locks, &big).await.unwrap();
    assert_eq!(c.cidr.to_string(), "100.64.0.0/17");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_buckets_and_missing_operations_are_reported_as_aws_says() {
    use instantstart::cloud::{BucketOwner, Eks, Iam, ObjectStore};
    let moto = Moto::start().await;
    let aws = moto.aws().await;
    let me = aws.caller_identity().await.unwrap();
    assert_eq!(me.account, "123456789012");
    let mine = "sagemaker-instantstart-x-123456789012";
    assert_eq!(aws.bucket_owner(mine).await.unwrap(), BucketOwner::Missing);
    aws.create_bucket(mine, &Default::default()).await.unwrap();
    assert_eq!(aws.bucket_owner(mine).await.unwrap(), BucketOwner::Ours);
    // A name another account holds: S3 answers the expected-owner check with 403, refuses to
    // create it, and refuses every call that names this account as the owner.
    let theirs = "sagemaker-instantstart-y-123456789012";
    reqwest::Client::new()
        .post(format!("{}/_gapfiller/s3/foreign/{theirs}", moto.url))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    assert_eq!(
        aws.bucket_owner(theirs).await.unwrap(),
        BucketOwner::Foreign
    );
    let taken = aws.create_bucket(theirs, &Default::default()).await;
    assert_eq!(taken.unwrap_err().code, "BucketAlreadyExists");
    assert!(aws
        .put_object(theirs, "lifecycle/on_create.sh", b"x".to_vec())
        .await
        .is_err());
    assert!(aws.list_objects(theirs, "").await.is_err());
    aws.put_object(
        "sagemaker-instantstart-x-123456789012",
        "data/a.txt",
        b"a".to_vec(),
    )
    .await
    .unwrap();
    aws.put_object(
        "sagemaker-instantstart-x-123456789012",
        "lifecycle/b.sh",
        b"b".to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(
        aws.list_objects("sagemaker-instantstart-x-123456789012", "data/")
            .await
            .unwrap(),
        ["data/a.txt"]
    );
    assert!(
        aws.describe_cluster("nope").await.unwrap().is_none(),
        "a missing EKS cluster is None, not an error"
    );
    // Trust policies are merged: the existing statement survives the new one.
    let sagemaker = json!({"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"});
    let pods = json!({"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]});
    aws.create_role(
        "x-exec",
        &json!({"Version": "2012-10-17", "Statement": [sagemaker.clone()]}),
        &[("instantstart:cluster".to_string(), "x".to_string())].into(),
    )
    .await
    .unwrap();
    aws.add_trust_statement("x-exec", &pods).await.unwrap();
    aws.add_trust_statement("x-exec", &pods).await.unwrap();
    let role = aws.get_role("x-exec").await.unwrap().unwrap();
    assert_eq!(role.trust_policy["Statement"], json!([sagemaker, pods]));
    // Made under the product's path; a role an administrator made by the same kind of name
    // sits at the root, untagged, and is read as such.
    assert_eq!(role.path, instantstart::cloud::ROLE_PATH);
    assert_eq!(role.tags["instantstart:cluster"], "x");
    assert!(
        role.arn.ends_with(":role/instantstart/x-exec"),
        "{}",
        role.arn
    );
    aws.iam
        .create_role()
        .role_name("x-eks-cluster")
        .assume_role_policy_document(
            json!({"Version": "2012-10-17", "Statement": [sagemaker]}).to_string(),
        )
        .send()
        .await
        .unwrap();
    let theirs = aws.get_role("x-eks-cluster").await.unwrap().unwrap();
    assert_eq!(theirs.path, "/");
    assert!(theirs.tags.is_empty());
    // moto does not implement pod identity associations: the answer has no AWS error code, and
    // is not retried.
    let err = aws
        .create_pod_identity(
            "nope",
            "kube-system",
            "sa",
            "arn:aws:iam::123456789012:role/x",
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, "UnrecognizedResponse", "{err:?}");
    assert!(!err.retryable);
}

/// The doctor on the sandbox: the server's role is the template's `InstanceRole`, which may
/// make every call of the product's table; an action the sandbox is told to deny the role shows
/// up by name with the statement that grants it — and its call is refused as AWS would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doctor_names_every_call_the_servers_role_is_denied() {
    let app = spawn_app().await;
    let d = app.json("/api/aws/doctor").await;
    assert_eq!(d["status"], "ok", "{d}");
    assert_eq!(d["denied"], json!([]), "{d}");
    // Every add-on the product installs is offered for every Kubernetes version it offers.
    assert_eq!(d["missingAddons"], json!([]), "{d}");
    assert_eq!(
        d["kubernetesVersions"],
        json!(["1.31", "1.32", "1.33", "1.34"]),
        "{d}"
    );
    assert_eq!(
        d["checked"].as_u64(),
        Some(instantstart::cloud::calls::CALLS.len() as u64)
    );
    // The quotas the preflight reads, above zero; no shared bucket is configured.
    let p5 = d["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["instanceType"] == "ml.p5.48xlarge");
    assert_eq!(p5.map(|q| &q["limit"]), Some(&json!(2)), "{d}");
    assert!(
        d.get("sharedBucket").is_none() && d.get("quotaFix").is_none(),
        "{d}"
    );
    // A shared bucket whose name another account holds is named, with what to do.
    const SHARED: &str = "sagemaker-instantstart-shared-123456789012-us-west-2";
    let app = spawn_app_with(Opts {
        shared_bucket: Some(SHARED),
        faults: Some("foreign-bucket=sagemaker-instantstart-shared-123456789012-us-west-2"),
        ..Opts::default()
    })
    .await;
    let d = app.json("/api/aws/doctor").await;
    assert_eq!(d["status"], "denied", "{d}");
    assert_eq!(d["denied"], json!([]), "{d}");
    assert_eq!(d["sharedBucket"]["owner"], "foreign", "{d}");
    assert!(
        d["sharedBucket"]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("another AWS account")),
        "{d}"
    );
    let app = spawn_app_with(Opts {
        faults: Some("deny=eks:CreateAddon,deny=iam:PassRole"),
        ..Opts::default()
    })
    .await;
    let d = app.json("/api/aws/doctor").await;
    assert_eq!(d["status"], "denied", "{d}");
    let denied: Vec<(&str, &str)> = d["denied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["action"].as_str().unwrap(),
                x["statement"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        denied,
        [
            ("eks:CreateAddon", "EksOnOwnClusters"),
            ("iam:PassRole", "PassOwnRolesToTheirServices")
        ],
        "{d}"
    );
    assert!(
        d["denied"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("`EksOnOwnClusters`"),
        "{d}"
    );
    assert_eq!(d["denied"][0]["decision"], "explicitDeny");
    // The same from the binary, against the running server: each denied call, and exit 1.
    let bind = app.base.trim_start_matches("http://").to_string();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_instantstart"))
        .args(["doctor", "--bind", &bind])
        .env_remove("INSTANTSTART_TOKEN")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("2 denied") && stdout.contains("- eks:CreateAddon on "),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_known_eks_token_is_reproduced_exactly() {
    use instantstart::cloud::kube::token::eks_token;
    let creds = aws_credential_types::Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "test",
    );
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let token = eks_token("demo", "us-west-2", &creds, at).unwrap();
    assert_eq!(token, KNOWN_TOKEN);
    let url = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        token.trim_start_matches("k8s-aws-v1."),
    )
    .unwrap();
    let url = String::from_utf8(url).unwrap();
    assert!(url.starts_with(
        "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
    ));
    assert!(
        url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"),
        "{url}"
    );
    // China regions sign for their own partition's STS host.
    let cn = eks_token("demo", "cn-north-1", &creds, at).unwrap();
    let cn = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        cn.trim_start_matches("k8s-aws-v1."),
    )
    .unwrap();
    let cn = String::from_utf8(cn).unwrap();
    assert!(
        cn.starts_with("https://sts.cn-north-1.amazonaws.com.cn/?Action=GetCallerIdentity"),
        "{cn}"
    );
    assert!(cn.contains("cn-north-1%2Fsts%2Faws4_request"), "{cn}");
}

/// Computed independently with botocore's SigV4 query presigner for the same inputs.
const KNOWN_TOKEN: &str = "k8s-aws-v1.aHR0cHM6Ly9zdHMudXMtd2VzdC0yLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1HZXRDYWxsZXJJZGVudGl0eSZWZXJzaW9uPTIwMTEtMDYtMTUmWC1BbXotQWxnb3JpdGhtPUFXUzQtSE1BQy1TSEEyNTYmWC1BbXotQ3JlZGVudGlhbD1BS0lERVhBTVBMRSUyRjIwMjMxMTE0JTJGdXMtd2VzdC0yJTJGc3RzJTJGYXdzNF9yZXF1ZXN0JlgtQW16LURhdGU9MjAyMzExMTRUMjIxMzIwWiZYLUFtei1FeHBpcmVzPTYwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCUzQngtazhzLWF3cy1pZCZYLUFtei1TaWduYXR1cmU9MTFhZTMxMjFlYTNkY2RhNDNiMTdlNWMzMjU5YjkyZjU5OWYwZjUyNjg2MGVmZjUwYWJlZGMxZDMzYmNjOWZmNQ";

/// What moto lacks (EKS add-ons and access entries, Service Quotas): the adapter's requests are
/// checked against `aws-smithy-mocks` rules, and its handling of the documented answers.
mod mocked {
    use aws_sdk_eks::operation::associate_access_policy::AssociateAccessPolicyOutput;
    use aws_sdk_eks::operation::create_access_entry::CreateAccessEntryOutput;
    use aws_sdk_eks::operation::create_addon::CreateAddonOutput;
    use aws_sdk_eks::operation::describe_addon::{DescribeAddonError, DescribeAddonOutput};
    use aws_sdk_eks::types::error::ResourceNotFoundException;
    use aws_sdk_eks::types::{AccessScopeType, Addon, AddonStatus, ResolveConflicts};
    use aws_sdk_servicequotas::operation::list_service_quotas::ListServiceQuotasOutput;
    use aws_sdk_servicequotas::types::ServiceQuota;
    use aws_smithy_mocks::{mock, mock_client, RuleMode};
    use instantstart::cloud::{AddonPodIdentity, CreateAddon, Eks, Quotas};

    use super::*;

    async fn aws_with(eks: aws_sdk_eks::Client, quotas: aws_sdk_servicequotas::Client) -> Aws {
        let mut aws = base_aws().await;
        aws.eks = eks;
        aws.quotas = quotas;
        aws
    }

    /// An adapter whose clients point at a closed loopback port, for one to be replaced by a mock.
    async fn base_aws() -> Aws {
        // The other clients point at a closed loopback port; these tests never reach them.
        let config = instantstart::cloud::aws::config_loader()
            .region(aws_config::Region::new("us-west-2"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "test", "test", None, None, "static",
            ))
            .endpoint_url("http://127.0.0.1:9")
            .load()
            .await;
        Aws::from_config(config).unwrap()
    }

    fn no_quotas() -> aws_sdk_servicequotas::Client {
        mock_client!(
            aws_sdk_servicequotas,
            RuleMode::MatchAny,
            &[] as &[&aws_smithy_mocks::Rule]
        )
    }

    /// EKS gives a pod its role's credentials only if the association exists when the pod is
    /// admitted: an add-on with a role is created with its associations in the same request
    /// (`podIdentityAssociations`, as AWS's own templates pass `PodIdentityAssociations`), and
    /// one without sends none.
    #[tokio::test]
    async fn an_addons_pod_identity_is_created_with_it() {
        let create = mock!(aws_sdk_eks::Client::create_addon)
            .match_requests(|r| {
                let a = r.pod_identity_associations();
                r.addon_name() == Some("amazon-sagemaker-spaces")
                    && a.len() == 1
                    && a[0].service_account() == "jupyter-k8s-controller-manager"
                    && a[0].role_arn() == "arn:aws:iam::1:role/demo-spaces"
            })
            .then_output(|| {
                CreateAddonOutput::builder()
                    .addon(
                        Addon::builder()
                            .addon_name("amazon-sagemaker-spaces")
                            .addon_arn("arn:addon")
                            .status(AddonStatus::Creating)
                            .build(),
                    )
                    .build()
            });
        let plain = mock!(aws_sdk_eks::Client::create_addon)
            .match_requests(|r| {
                r.addon_name() == Some("metrics-server") && r.pod_identity_associations.is_none()
            })
            .then_output(|| {
                CreateAddonOutput::builder()
                    .addon(
                        Addon::builder()
                            .addon_name("metrics-server")
                            .addon_arn("arn:addon2")
                            .status(AddonStatus::Creating)
                            .build(),
                    )
                    .build()
            });
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&create, &plain], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        let request = |name: &str, identities: Vec<AddonPodIdentity>| CreateAddon {
            cluster: "demo".into(),
            name: name.into(),
            version: None,
            service_account_role_arn: None,
            configuration_values: None,
            resolve_conflicts: "OVERWRITE".into(),
            pod_identity_associations: identities,
        };
        aws.create_addon(&request(
            "amazon-sagemaker-spaces",
            vec![AddonPodIdentity {
                service_account: "jupyter-k8s-controller-manager".into(),
                role_arn: "arn:aws:iam::1:role/demo-spaces".into(),
            }],
        ))
        .await
        .unwrap();
        aws.create_addon(&request("metrics-server", vec![]))
            .await
            .unwrap();
        assert_eq!((create.num_calls(), plain.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn add_ons_are_created_with_overwrite_and_their_configuration() {
        let config = r#"{"replicaCount":1}"#;
        let create = mock!(aws_sdk_eks::Client::create_addon)
            .match_requests(move |r| {
                r.cluster_name() == Some("demo")
                    && r.addon_name() == Some("cert-manager")
                    && r.resolve_conflicts() == Some(&ResolveConflicts::Overwrite)
                    && r.configuration_values() == Some(config)
                    && r.service_account_role_arn() == Some("arn:aws:iam::1:role/r")
            })
            .then_output(|| {
                CreateAddonOutput::builder()
                    .addon(
                        Addon::builder()
                            .addon_name("cert-manager")
                            .addon_arn("arn:addon")
                            .status(AddonStatus::Creating)
                            .build(),
                    )
                    .build()
            });
        let describe = mock!(aws_sdk_eks::Client::describe_addon)
            .match_requests(|r| r.addon_name() == Some("cert-manager"))
            .then_output(|| {
                DescribeAddonOutput::builder()
                    .addon(
                        Addon::builder()
                            .addon_name("cert-manager")
                            .addon_arn("arn:addon")
                            .status(AddonStatus::Active)
                            .build(),
                    )
                    .build()
            });
        let missing = mock!(aws_sdk_eks::Client::describe_addon)
            .match_requests(|r| r.addon_name() == Some("absent"))
            .then_error(|| {
                DescribeAddonError::ResourceNotFoundException(
                    ResourceNotFoundException::builder()
                        .message("no")
                        .meta(
                            aws_smithy_types::error::ErrorMetadata::builder()
                                .code("ResourceNotFoundException")
                                .message("no")
                                .build(),
                        )
                        .build(),
                )
            });
        let eks = mock_client!(
            aws_sdk_eks,
            RuleMode::MatchAny,
            [&create, &describe, &missing],
            |c| c.retry_config(aws_config::retry::RetryConfig::disabled())
        );
        let aws = aws_with(eks, no_quotas()).await;

        let addon = aws
            .create_addon(&CreateAddon {
                cluster: "demo".into(),
                name: "cert-manager".into(),
                version: None,
                service_account_role_arn: Some("arn:aws:iam::1:role/r".into()),
                configuration_values: Some(config.into()),
                resolve_conflicts: "OVERWRITE".into(),
                pod_identity_associations: vec![],
            })
            .await
            .unwrap();
        assert_eq!(addon.status, instantstart::cloud::AddonStatus::Creating);
        assert_eq!(create.num_calls(), 1);
        let active = aws
            .describe_addon("demo", "cert-manager")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(active.status, instantstart::cloud::AddonStatus::Active);
        assert!(aws
            .describe_addon("demo", "absent")
            .await
            .unwrap()
            .is_none());
    }

    /// The shapes the control plane's IAM policy lets through (the template's
    /// `AccessEntriesWithoutGroups`, `AccessEntriesStandardOnly`, `PeopleGetNamespacesOnly`):
    /// an entry sent with `type: STANDARD` and no groups or user name; a policy with cluster
    /// scope for itself, and with the team's namespaces for a person.
    #[tokio::test]
    async fn access_entries_are_plain_and_policies_carry_their_scope() {
        let entry = mock!(aws_sdk_eks::Client::create_access_entry)
            .match_requests(|r| {
                r.cluster_name() == Some("demo")
                    && r.principal_arn() == Some("arn:aws:iam::1:role/ops")
                    && r.r#type() == Some("STANDARD")
                    && r.kubernetes_groups().is_empty()
                    && r.username().is_none()
            })
            .then_output(|| CreateAccessEntryOutput::builder().build());
        let admin = mock!(aws_sdk_eks::Client::associate_access_policy)
            .match_requests(|r| {
                r.policy_arn()
                    == Some("arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
                    && r.access_scope().map(|s| s.r#type()) == Some(Some(&AccessScopeType::Cluster))
            })
            .then_output(|| AssociateAccessPolicyOutput::builder().build());
        let team = mock!(aws_sdk_eks::Client::associate_access_policy)
            .match_requests(|r| {
                r.policy_arn() == Some("arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy")
                    && r.access_scope()
                        .map(|s| (s.r#type(), s.namespaces().to_vec()))
                        == Some((
                            Some(&AccessScopeType::Namespace),
                            vec!["hyperpod-ns-a".to_string(), "hyperpod-ns-b".to_string()],
                        ))
            })
            .then_output(|| AssociateAccessPolicyOutput::builder().build());
        let gone = mock!(aws_sdk_eks::Client::disassociate_access_policy)
            .match_requests(|r| {
                r.policy_arn() == Some("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy")
            })
            .then_error(|| {
                aws_sdk_eks::operation::disassociate_access_policy::DisassociateAccessPolicyError::ResourceNotFoundException(
                    ResourceNotFoundException::builder()
                        .message("no such association")
                        .meta(
                            aws_smithy_types::error::ErrorMetadata::builder()
                                .code("ResourceNotFoundException")
                                .build(),
                        )
                        .build(),
                )
            });
        let eks = mock_client!(
            aws_sdk_eks,
            RuleMode::MatchAny,
            [&entry, &admin, &team, &gone]
        );
        let aws = aws_with(eks, no_quotas()).await;
        aws.create_access_entry("demo", "arn:aws:iam::1:role/ops")
            .await
            .unwrap();
        let policy = |name: &str, ns: Option<&[&str]>| instantstart::cloud::AccessPolicy {
            policy_arn: format!("arn:aws:eks::aws:cluster-access-policy/{name}"),
            namespaces: ns.map(|n| n.iter().map(|s| s.to_string()).collect()),
        };
        aws.associate_access_policy(
            "demo",
            "arn:aws:iam::1:role/ops",
            &policy("AmazonEKSClusterAdminPolicy", None),
        )
        .await
        .unwrap();
        aws.associate_access_policy(
            "demo",
            "arn:aws:iam::1:user/alice",
            &policy(
                "AmazonEKSEditPolicy",
                Some(&["hyperpod-ns-a", "hyperpod-ns-b"]),
            ),
        )
        .await
        .unwrap();
        // Taking back a policy no longer there is already done.
        aws.disassociate_access_policy(
            "demo",
            "arn:aws:iam::1:user/alice",
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
        )
        .await
        .unwrap();
        assert_eq!(
            (
                entry.num_calls(),
                admin.num_calls(),
                team.num_calls(),
                gone.num_calls()
            ),
            (1, 1, 1, 1)
        );
    }

    #[tokio::test]
    async fn a_throttled_read_is_retried_but_a_throttled_create_is_not() {
        let describe = mock!(aws_sdk_eks::Client::describe_addon)
            .sequence()
            .http_status(
                429,
                Some(r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#.into()),
            )
            .times(2)
            .output(|| {
                DescribeAddonOutput::builder()
                    .addon(
                        Addon::builder()
                            .addon_name("x")
                            .status(AddonStatus::Active)
                            .build(),
                    )
                    .build()
            })
            .build();
        let create = mock!(aws_sdk_eks::Client::create_addon)
            .sequence()
            .http_status(
                429,
                Some(r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#.into()),
            )
            .repeatedly()
            .build();
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&describe, &create], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        assert!(aws.describe_addon("demo", "x").await.unwrap().is_some());
        assert_eq!(describe.num_calls(), 3);
        let err = aws
            .create_addon(&CreateAddon {
                cluster: "demo".into(),
                name: "x".into(),
                version: None,
                service_account_role_arn: None,
                configuration_values: None,
                resolve_conflicts: "OVERWRITE".into(),
                pod_identity_associations: vec![],
            })
            .await
            .unwrap_err();
        assert_eq!(err.code, "ThrottlingException");
        assert!(err.retryable, "the engine may act again, after looking");
        assert_eq!(create.num_calls(), 1, "never repeated by the adapter");
    }

    #[tokio::test]
    async fn the_hyperpod_quota_is_found_across_pages() {
        let first = mock!(aws_sdk_servicequotas::Client::list_service_quotas)
            .match_requests(|r| r.service_code() == Some("sagemaker") && r.next_token().is_none())
            .then_output(|| {
                ListServiceQuotasOutput::builder()
                    .quotas(
                        ServiceQuota::builder()
                            .quota_name("ml.g5.8xlarge for training job usage")
                            .value(4.0)
                            .build(),
                    )
                    .next_token("page-2")
                    .build()
            });
        let second = mock!(aws_sdk_servicequotas::Client::list_service_quotas)
            .match_requests(|r| r.next_token() == Some("page-2"))
            .then_output(|| {
                ListServiceQuotasOutput::builder()
                    .quotas(
                        ServiceQuota::builder()
                            .quota_name("ml.g5.8xlarge for cluster usage")
                            .value(6.0)
                            .build(),
                    )
                    .build()
            });
        let quotas = mock_client!(aws_sdk_servicequotas, RuleMode::MatchAny, [&first, &second]);
        let eks = mock_client!(
            aws_sdk_eks,
            RuleMode::MatchAny,
            &[] as &[&aws_smithy_mocks::Rule]
        );
        let aws = aws_with(eks, quotas).await;
        assert_eq!(
            aws.hyperpod_cluster_usage("ml.g5.8xlarge").await.unwrap(),
            Some(6)
        );
    }

    fn group(name: &str, count: u32) -> instantstart::cloud::InstanceGroupSpec {
        instantstart::cloud::InstanceGroupSpec {
            name: name.into(),
            instance_type: "ml.p5.48xlarge".into(),
            instance_count: count,
            execution_role_arn: "arn:aws:iam::1:role/exec".into(),
            lifecycle_source_s3_uri: "s3://sagemaker-b/lifecycle/".into(),
            lifecycle_on_create: "on_create.sh".into(),
            threads_per_core: 2,
            ebs_volume_gb: 500,
            deep_health_checks: vec![],
            capacity: instantstart::cloud::Capacity::Spot,
            subnet_ids: vec!["subnet-1".into()],
            security_group_ids: vec!["sg-1".into()],
            network_interface: (name == "more").then(|| "efa-only".into()),
            scheduled_update: None,
        }
    }

    /// A group's `ScheduledUpdateConfig` goes out as botocore's sagemaker model shapes it: the
    /// `ScheduleExpression`, and its `DeploymentConfig` (the batch as a capacity percentage,
    /// forward and back, the wait, the alarms); a group without one sends none.
    #[tokio::test]
    async fn a_groups_software_schedule_goes_out_with_its_rolling_policy() {
        use aws_sdk_sagemaker::operation::update_cluster::UpdateClusterOutput;
        use aws_sdk_sagemaker::types::NodeUnavailabilityType;
        use instantstart::cloud::HyperPod;
        let update = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                let groups = r.instance_groups();
                let Some(s) = groups[0].scheduled_update_config() else {
                    return false;
                };
                let d = s.deployment_config();
                let policy = d.and_then(|d| d.rolling_update_policy());
                let batch = policy.and_then(|p| p.maximum_batch_size());
                s.schedule_expression() == Some("cron(0 3 ? * 1#1 *)")
                    && batch.and_then(|b| b.r#type())
                        == Some(&NodeUnavailabilityType::CapacityPercentage)
                    && batch.and_then(|b| b.value()) == Some(50)
                    && policy.and_then(|p| p.rollback_maximum_batch_size()) == batch
                    && d.and_then(|d| d.wait_interval_in_seconds()) == Some(300)
                    && d.map(|d| d.auto_rollback_configuration().len()) == Some(1)
                    && groups[1].scheduled_update_config().is_none()
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&update]);
        let mut scheduled = group("workers", 2);
        scheduled.scheduled_update = Some(instantstart::cloud::ScheduledUpdate {
            schedule_expression: "cron(0 3 ? * 1#1 *)".into(),
            batch: instantstart::cloud::UpdateBatch::Percent(50),
            wait_seconds: Some(300),
            rollback_alarms: vec!["demo-gpu-errors".into()],
        });
        aws.update_cluster("demo-hp", &[scheduled, group("more", 4)], true)
            .await
            .unwrap();
        assert_eq!(update.num_calls(), 1);
    }

    #[tokio::test]
    async fn update_cluster_resends_every_group_in_the_accepted_shape() {
        use aws_sdk_sagemaker::operation::update_cluster::UpdateClusterOutput;
        use instantstart::cloud::HyperPod;
        let update = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                let groups = r.instance_groups();
                r.cluster_name() == Some("demo-hp")
                    && groups.len() == 2
                    && groups
                        .iter()
                        .all(|g| g.threads_per_core() == Some(2) && g.execution_role().is_some())
                    && groups
                        .iter()
                        .all(|g| g.capacity_requirements().and_then(|c| c.spot()).is_some())
                    && groups[1].instance_count() == Some(4)
                    // Spot capacity runs under continuous provisioning.
                    && r.node_provisioning_mode()
                        == Some(&aws_sdk_sagemaker::types::ClusterNodeProvisioningMode::Continuous)
                    && groups[0].network_interface().is_none()
                    && groups[1]
                        .network_interface()
                        .and_then(|n| n.interface_type())
                        .map(|t| t.as_str())
                        == Some("efa-only")
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&update]);
        let groups = [group("workers", 2), group("more", 4)];
        let continuous = instantstart::cloud::continuous_provisioning(&groups);
        assert!(continuous, "spot groups");
        aws.update_cluster("demo-hp", &groups, continuous)
            .await
            .unwrap();
        assert_eq!(update.num_calls(), 1);
    }

    #[tokio::test]
    async fn removing_a_group_sends_only_instance_groups_to_delete() {
        use aws_sdk_sagemaker::operation::update_cluster::UpdateClusterOutput;
        use instantstart::cloud::HyperPod;
        let update = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                r.instance_groups_to_delete() == ["spot-b"] && r.instance_groups().is_empty()
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&update]);
        aws.delete_instance_groups("demo-hp", &["spot-b".into()])
            .await
            .unwrap();
        assert_eq!(update.num_calls(), 1);
    }

    #[tokio::test]
    async fn tiered_checkpointing_sends_only_the_tiered_storage_config() {
        use aws_sdk_sagemaker::operation::update_cluster::UpdateClusterOutput;
        use aws_sdk_sagemaker::types::ClusterConfigMode;
        use instantstart::cloud::{HyperPod, TieredStorage};
        let enable = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                r.instance_groups().is_empty()
                    && r.tiered_storage_config().is_some_and(|t| {
                        t.mode() == Some(&ClusterConfigMode::Enable)
                            && t.instance_memory_allocation_percentage() == Some(25)
                    })
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let disable = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                r.tiered_storage_config().is_some_and(|t| {
                    t.mode() == Some(&ClusterConfigMode::Disable)
                        && t.instance_memory_allocation_percentage().is_none()
                })
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&enable, &disable]);
        let on = TieredStorage {
            enabled: true,
            memory_percent: Some(25),
        };
        aws.set_tiered_storage("demo-hp", on).await.unwrap();
        let off = TieredStorage {
            enabled: false,
            memory_percent: None,
        };
        aws.set_tiered_storage("demo-hp", off).await.unwrap();
        assert_eq!((enable.num_calls(), disable.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn autoscaling_sends_only_its_setting_with_the_role_and_continuous_provisioning() {
        use aws_sdk_sagemaker::operation::update_cluster::UpdateClusterOutput;
        use aws_sdk_sagemaker::types::{
            ClusterAutoScalerType, ClusterAutoScalingMode, ClusterNodeProvisioningMode,
        };
        use instantstart::cloud::HyperPod;
        let role = "arn:aws:iam::111122223333:role/demo-autoscaling";
        let enable = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(move |r| {
                r.instance_groups().is_empty()
                    && r.tiered_storage_config().is_none()
                    && r.cluster_role() == Some(role)
                    && r.node_provisioning_mode() == Some(&ClusterNodeProvisioningMode::Continuous)
                    && r.auto_scaling().is_some_and(|a| {
                        a.mode() == &ClusterAutoScalingMode::Enable
                            && a.auto_scaler_type() == Some(&ClusterAutoScalerType::Karpenter)
                    })
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let disable = mock!(aws_sdk_sagemaker::Client::update_cluster)
            .match_requests(|r| {
                r.instance_groups().is_empty()
                    && r.cluster_role().is_none()
                    && r.auto_scaling()
                        .is_some_and(|a| a.mode() == &ClusterAutoScalingMode::Disable)
            })
            .then_output(|| UpdateClusterOutput::builder().cluster_arn("arn:hp").build());
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&enable, &disable]);
        aws.set_autoscaling("demo-hp", Some(role)).await.unwrap();
        aws.set_autoscaling("demo-hp", None).await.unwrap();
        assert_eq!((enable.num_calls(), disable.num_calls()), (1, 1));
    }

    /// A software update is rolling because it says so: an explicit `RollingUpdatePolicy`,
    /// one instance at a time forward and back (without one SageMaker picks the batches).
    #[tokio::test]
    async fn a_software_update_sends_its_rolling_policy() {
        use aws_sdk_sagemaker::operation::update_cluster_software::UpdateClusterSoftwareOutput;
        use aws_sdk_sagemaker::types::NodeUnavailabilityType;
        use instantstart::cloud::HyperPod;
        let update = mock!(aws_sdk_sagemaker::Client::update_cluster_software)
            .match_requests(|r| {
                let Some(p) = r
                    .deployment_config()
                    .and_then(|d| d.rolling_update_policy())
                else {
                    return false;
                };
                let one = |c: Option<&aws_sdk_sagemaker::types::CapacitySizeConfig>| {
                    c.is_some_and(|c| {
                        c.r#type() == Some(&NodeUnavailabilityType::InstanceCount)
                            && c.value() == Some(1)
                    })
                };
                r.cluster_name() == Some("demo-hp")
                    && one(p.maximum_batch_size())
                    && one(p.rollback_maximum_batch_size())
            })
            .then_output(|| {
                UpdateClusterSoftwareOutput::builder()
                    .cluster_arn("arn:hp")
                    .build()
            });
        // A planned one: its groups, a percentage batch, a wait, the alarms, the image.
        let planned = mock!(aws_sdk_sagemaker::Client::update_cluster_software)
            .match_requests(|r| {
                let Some(d) = r.deployment_config() else {
                    return false;
                };
                let quarter = |c: Option<&aws_sdk_sagemaker::types::CapacitySizeConfig>| {
                    c.is_some_and(|c| {
                        c.r#type() == Some(&NodeUnavailabilityType::CapacityPercentage)
                            && c.value() == Some(25)
                    })
                };
                let groups: Vec<_> = r
                    .instance_groups()
                    .iter()
                    .filter_map(|g| g.instance_group_name())
                    .collect();
                let alarms: Vec<_> = d
                    .auto_rollback_configuration()
                    .iter()
                    .filter_map(|a| a.alarm_name())
                    .collect();
                groups == ["workers"]
                    && d.rolling_update_policy().is_some_and(|p| {
                        quarter(p.maximum_batch_size()) && quarter(p.rollback_maximum_batch_size())
                    })
                    && d.wait_interval_in_seconds() == Some(300)
                    && alarms == ["gpu-errors"]
                    && r.image_id() == Some("ami-0123456789abcdef0")
            })
            .then_output(|| {
                UpdateClusterSoftwareOutput::builder()
                    .cluster_arn("arn:hp")
                    .build()
            });
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&update, &planned]);
        aws.update_cluster_software("demo-hp", &Default::default())
            .await
            .unwrap();
        assert_eq!(update.num_calls(), 1);
        let plan = instantstart::cloud::SoftwareUpdate {
            instance_groups: vec!["workers".into()],
            batch: instantstart::cloud::UpdateBatch::Percent(25),
            wait_seconds: Some(300),
            rollback_alarms: vec!["gpu-errors".into()],
            image_id: Some("ami-0123456789abcdef0".into()),
        };
        aws.update_cluster_software("demo-hp", &plan).await.unwrap();
        assert_eq!(planned.num_calls(), 1);
    }

    /// The doctor's questions reach IAM as `SimulatePrincipalPolicy` for the server's role: the
    /// actions asked on one resource with one context in one request, the resource named (left
    /// out for `*`), the context entries typed; a decision comes back for each probe, in order.
    #[tokio::test]
    async fn the_doctor_asks_iam_for_the_role_with_the_resource_and_context_of_each_call() {
        use aws_sdk_iam::operation::simulate_principal_policy::SimulatePrincipalPolicyOutput;
        use aws_sdk_iam::types::{EvaluationResult, PolicyEvaluationDecisionType};
        use instantstart::cloud::calls::Probe;
        use instantstart::cloud::Iam;
        const ROLE: &str = "arn:aws:iam::123456789012:role/instantstart";
        const VPC: &str = "arn:aws:ec2:us-west-2:123456789012:vpc/vpc-0probe";
        let tagged = mock!(aws_sdk_iam::Client::simulate_principal_policy)
            .match_requests(|r| {
                let c = r.context_entries();
                r.policy_source_arn() == Some(ROLE)
                    && r.resource_arns() == [VPC]
                    && r.action_names() == ["ec2:CreateVpc", "ec2:CreateSubnet"]
                    && c.len() == 1
                    && c[0].context_key_name() == Some("aws:RequestTag/instantstart:cluster")
                    && c[0].context_key_values() == ["demo"]
            })
            .then_output(|| {
                let result = |a: &str, d: PolicyEvaluationDecisionType| {
                    EvaluationResult::builder()
                        .eval_action_name(a)
                        .eval_resource_name(VPC)
                        .eval_decision(d)
                        .build()
                        .unwrap()
                };
                SimulatePrincipalPolicyOutput::builder()
                    .evaluation_results(result(
                        "ec2:CreateVpc",
                        PolicyEvaluationDecisionType::Allowed,
                    ))
                    .evaluation_results(result(
                        "ec2:CreateSubnet",
                        PolicyEvaluationDecisionType::ImplicitDeny,
                    ))
                    .build()
            });
        let any = mock!(aws_sdk_iam::Client::simulate_principal_policy)
            .match_requests(|r| {
                r.resource_arns().is_empty() && r.action_names() == ["sts:GetCallerIdentity"]
            })
            .then_output(|| {
                SimulatePrincipalPolicyOutput::builder()
                    .evaluation_results(
                        EvaluationResult::builder()
                            .eval_action_name("sts:GetCallerIdentity")
                            .eval_decision(PolicyEvaluationDecisionType::ExplicitDeny)
                            .build()
                            .unwrap(),
                    )
                    .build()
            });
        let mut aws = base_aws().await;
        aws.iam = mock_client!(aws_sdk_iam, RuleMode::MatchAny, [&tagged, &any]);
        let probe = |action: &str, resource: &str, tagged: bool| Probe {
            action: action.into(),
            resource: resource.into(),
            context: if tagged {
                vec![("aws:RequestTag/instantstart:cluster".into(), "demo".into())]
            } else {
                vec![]
            },
        };
        let decisions = aws
            .simulate(
                ROLE,
                &[
                    probe("ec2:CreateVpc", VPC, true),
                    probe("sts:GetCallerIdentity", "*", false),
                    probe("ec2:CreateSubnet", VPC, true),
                ],
            )
            .await
            .unwrap();
        assert_eq!(decisions, ["allowed", "explicitDeny", "implicitDeny"]);
        assert_eq!((tagged.num_calls(), any.num_calls()), (1, 1));
    }

    /// A quota whose summary leaves its configuration out, or that failed, is described: its
    /// configuration and the reason it failed come from DescribeComputeQuota.
    #[tokio::test]
    async fn a_failed_or_summarised_quota_is_described_for_its_config_and_reason() {
        use aws_sdk_sagemaker::operation::describe_compute_quota::DescribeComputeQuotaOutput;
        use aws_sdk_sagemaker::operation::list_compute_quotas::ListComputeQuotasOutput;
        use aws_sdk_sagemaker::types::{
            ComputeQuotaConfig, ComputeQuotaResourceConfig, ComputeQuotaSummary,
            ComputeQuotaTarget, SchedulerResourceStatus,
        };
        use instantstart::cloud::Governance;
        let target = || {
            ComputeQuotaTarget::builder()
                .team_name("team-a")
                .fair_share_weight(10)
                .build()
        };
        let list = mock!(aws_sdk_sagemaker::Client::list_compute_quotas).then_output(move || {
            ListComputeQuotasOutput::builder()
                .compute_quota_summaries(
                    ComputeQuotaSummary::builder()
                        .compute_quota_id("cq-1")
                        .compute_quota_arn("arn:cq-1")
                        .name("team-a")
                        .status(SchedulerResourceStatus::CreateFailed)
                        .compute_quota_target(target())
                        .build(),
                )
                .build()
        });
        let describe = mock!(aws_sdk_sagemaker::Client::describe_compute_quota)
            .match_requests(|r| r.compute_quota_id() == Some("cq-1"))
            .then_output(move || {
                DescribeComputeQuotaOutput::builder()
                    .compute_quota_id("cq-1")
                    .status(SchedulerResourceStatus::CreateFailed)
                    .failure_reason("the task governance add-on is not installed")
                    .compute_quota_target(target())
                    .compute_quota_config(
                        ComputeQuotaConfig::builder()
                            .compute_quota_resources(
                                ComputeQuotaResourceConfig::builder()
                                    .instance_type(
                                        aws_sdk_sagemaker::types::ClusterInstanceType::MlG58Xlarge,
                                    )
                                    .count(1)
                                    .build(),
                            )
                            .build(),
                    )
                    .build()
            });
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&list, &describe]);
        let quotas = aws.compute_quotas("arn:hp").await.unwrap();
        assert_eq!(quotas.len(), 1);
        assert_eq!(
            quotas[0].failure_reason.as_deref(),
            Some("the task governance add-on is not installed")
        );
        assert_eq!(quotas[0].quota.resources[0].instance_type, "ml.g5.8xlarge");
        assert_eq!(describe.num_calls(), 1);
    }

    /// The versions of an add-on EKS offers for one Kubernetes version, every page read.
    #[tokio::test]
    async fn addon_versions_are_read_for_one_kubernetes_version_page_by_page() {
        use aws_sdk_eks::operation::describe_addon_versions::DescribeAddonVersionsOutput;
        use aws_sdk_eks::types::{AddonInfo, AddonVersionInfo};
        let page = |version: &'static str, next: Option<&'static str>| {
            move || {
                DescribeAddonVersionsOutput::builder()
                    .addons(
                        AddonInfo::builder()
                            .addon_name("coredns")
                            .addon_versions(
                                AddonVersionInfo::builder()
                                    .addon_version(version)
                                    .requires_iam_permissions(version.starts_with("v1.12"))
                                    .build(),
                            )
                            .build(),
                    )
                    .set_next_token(next.map(str::to_string))
                    .build()
            }
        };
        let first = mock!(aws_sdk_eks::Client::describe_addon_versions)
            .match_requests(|r| {
                r.addon_name() == Some("coredns")
                    && r.kubernetes_version() == Some("1.33")
                    && r.next_token().is_none()
            })
            .then_output(page("v1.12.1-eksbuild.1", Some("t2")));
        let second = mock!(aws_sdk_eks::Client::describe_addon_versions)
            .match_requests(|r| r.next_token() == Some("t2"))
            .then_output(page("v1.11.4-eksbuild.2", None));
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&first, &second], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        let versions = aws.addon_versions("coredns", "1.33").await.unwrap();
        let read: Vec<(&str, bool)> = versions
            .iter()
            .map(|v| (v.version.as_str(), v.requires_iam_permissions))
            .collect();
        // Whether a version needs a role is read per version: it changes between them.
        assert_eq!(
            read,
            [("v1.12.1-eksbuild.1", true), ("v1.11.4-eksbuild.2", false)]
        );
    }

    /// `UpdateClusterVersion` as botocore's eks model shapes it (`name` in the URI, `version`
    /// required, `clientRequestToken` for idempotency): the version asked and the operation's
    /// token go out, and the update's id comes back.
    #[tokio::test]
    async fn a_control_plane_upgrade_sends_the_version_and_its_token() {
        use aws_sdk_eks::operation::update_cluster_version::UpdateClusterVersionOutput;
        use aws_sdk_eks::types::Update;
        let update = mock!(aws_sdk_eks::Client::update_cluster_version)
            .match_requests(|r| {
                r.name() == Some("demo")
                    && r.version() == Some("1.33")
                    && r.client_request_token() == Some("op-1-1.33")
                    && r.force().is_none()
            })
            .then_output(|| {
                UpdateClusterVersionOutput::builder()
                    .update(Update::builder().id("u-1").build())
                    .build()
            });
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&update], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        let id = aws
            .update_cluster_version("demo", "1.33", "op-1-1.33")
            .await
            .unwrap();
        assert_eq!(id, "u-1");
        assert_eq!(update.num_calls(), 1);
    }

    /// An upgrade's `UpdateAddon` changes the version only: `resolveConflicts` PRESERVE (what
    /// the user configured in the cluster stays), and no role, configuration or pod identity
    /// field at all, which EKS reads as "keep them" (an empty `podIdentityAssociations` would
    /// delete the add-on's associations).
    #[tokio::test]
    async fn an_upgrades_addon_update_sends_the_version_and_keeps_the_rest() {
        use aws_sdk_eks::operation::update_addon::UpdateAddonOutput;
        use aws_sdk_eks::types::ResolveConflicts;
        let update = mock!(aws_sdk_eks::Client::update_addon)
            .match_requests(|r| {
                r.cluster_name() == Some("demo")
                    && r.addon_name() == Some("coredns")
                    && r.addon_version() == Some("v1.11.4-eksbuild.3")
                    && r.resolve_conflicts() == Some(&ResolveConflicts::Preserve)
                    && r.service_account_role_arn().is_none()
                    && r.configuration_values().is_none()
                    && r.pod_identity_associations.is_none()
            })
            .then_output(|| UpdateAddonOutput::builder().build());
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&update], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        aws.update_addon(&instantstart::cloud::CreateAddon {
            cluster: "demo".into(),
            name: "coredns".into(),
            version: Some("v1.11.4-eksbuild.3".into()),
            service_account_role_arn: None,
            configuration_values: None,
            resolve_conflicts: "PRESERVE".into(),
            pod_identity_associations: Vec::new(),
        })
        .await
        .unwrap();
        assert_eq!(update.num_calls(), 1);
    }

    /// `DescribeClusterVersions` asks for the versions named (`clusterVersions`), reads every
    /// page, and gives each version's support dates as days and its `versionStatus`.
    #[tokio::test]
    async fn kubernetes_version_support_is_read_for_the_versions_named() {
        use aws_sdk_eks::operation::describe_cluster_versions::DescribeClusterVersionsOutput;
        use aws_sdk_eks::types::{ClusterVersionInformation, VersionStatus};
        let at = |s: &str| {
            aws_smithy_types::DateTime::from_str(s, aws_smithy_types::date_time::Format::DateTime)
                .unwrap()
        };
        let first = mock!(aws_sdk_eks::Client::describe_cluster_versions)
            .match_requests(|r| {
                r.cluster_versions() == ["1.32".to_string(), "1.33".to_string()]
                    && r.next_token().is_none()
            })
            .then_output(move || {
                DescribeClusterVersionsOutput::builder()
                    .cluster_versions(
                        ClusterVersionInformation::builder()
                            .cluster_version("1.32")
                            .end_of_standard_support_date(at("2026-03-23T00:00:00Z"))
                            .end_of_extended_support_date(at("2027-03-23T00:00:00Z"))
                            .version_status(VersionStatus::ExtendedSupport)
                            .build(),
                    )
                    .next_token("p2")
                    .build()
            });
        let second = mock!(aws_sdk_eks::Client::describe_cluster_versions)
            .match_requests(|r| r.next_token() == Some("p2"))
            .then_output(move || {
                DescribeClusterVersionsOutput::builder()
                    .cluster_versions(
                        ClusterVersionInformation::builder()
                            .cluster_version("1.33")
                            .version_status(VersionStatus::StandardSupport)
                            .build(),
                    )
                    .build()
            });
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&first, &second], |c| c
            .retry_config(aws_config::retry::RetryConfig::disabled()));
        let aws = aws_with(eks, no_quotas()).await;
        let found = aws
            .kubernetes_versions(&["1.32".into(), "1.33".into()])
            .await
            .unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].end_of_standard_support.as_deref(),
            Some("2026-03-23")
        );
        assert_eq!(
            found[0].end_of_extended_support.as_deref(),
            Some("2027-03-23")
        );
        assert_eq!(found[0].status.as_deref(), Some("EXTENDED_SUPPORT"));
        assert_eq!(
            (found[1].version.as_str(), found[1].status.as_deref()),
            ("1.33", Some("STANDARD_SUPPORT"))
        );
    }

    #[tokio::test]
    async fn batch_node_operations_report_each_failed_node_with_its_code() {
        use aws_sdk_sagemaker::operation::batch_reboot_cluster_nodes::BatchRebootClusterNodesOutput;
        use aws_sdk_sagemaker::types::{
            BatchRebootClusterNodesError, BatchRebootClusterNodesErrorCode,
        };
        use instantstart::cloud::{HyperPod, NodeAction};
        let reboot = mock!(aws_sdk_sagemaker::Client::batch_reboot_cluster_nodes)
            .match_requests(|r| r.node_ids() == ["i-1", "i-2"])
            .then_output(|| {
                BatchRebootClusterNodesOutput::builder()
                    .successful("i-1")
                    .failed(
                        BatchRebootClusterNodesError::builder()
                            .node_id("i-2")
                            .error_code(BatchRebootClusterNodesErrorCode::InstanceIdNotFound)
                            .message("not in cluster")
                            .build(),
                    )
                    .build()
            });
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&reboot]);
        let result = aws
            .node_action("demo-hp", NodeAction::Reboot, &["i-1".into(), "i-2".into()])
            .await
            .unwrap();
        assert_eq!(result.successful, ["i-1"]);
        assert_eq!(
            result.failed,
            [(
                "i-2".to_string(),
                "InstanceIdNotFound".to_string(),
                "not in cluster".to_string()
            )]
        );
    }

    /// SageMaker's request shapes for task governance: an update names the version it
    /// changes, a quota its team, shares, sharing, preemption and activation.
    #[tokio::test]
    async fn governance_requests_name_the_version_and_every_quota_field() {
        use aws_sdk_sagemaker::operation::create_compute_quota::CreateComputeQuotaOutput;
        use aws_sdk_sagemaker::operation::update_cluster_scheduler_config::UpdateClusterSchedulerConfigOutput;
        use aws_sdk_sagemaker::types::{ActivationState, FairShare, PreemptTeamTasks};
        use instantstart::cloud::{
            Governance, Preempt, PriorityClass, QuotaResource, SchedulerPolicy, Sharing, TeamQuota,
        };
        let update = mock!(aws_sdk_sagemaker::Client::update_cluster_scheduler_config)
            .match_requests(|r| {
                let c = r.scheduler_config().unwrap();
                r.cluster_scheduler_config_id() == Some("csc-1")
                    && r.target_version() == Some(3)
                    && c.priority_classes().len() == 1
                    && c.priority_classes()[0].name() == Some("training")
                    && c.priority_classes()[0].weight() == Some(70)
                    && c.fair_share() == Some(&FairShare::Disabled)
            })
            .then_output(|| {
                UpdateClusterSchedulerConfigOutput::builder()
                    .cluster_scheduler_config_arn("arn:csc")
                    .cluster_scheduler_config_version(4)
                    .build()
            });
        let create = mock!(aws_sdk_sagemaker::Client::create_compute_quota)
            .match_requests(|r| {
                let c = r.compute_quota_config().unwrap();
                let res = &c.compute_quota_resources()[0];
                let sharing = c.resource_sharing_config().unwrap();
                r.name() == Some("team-a")
                    && r.cluster_arn() == Some("arn:aws:sagemaker:us-west-2:1:cluster/abc")
                    && res.instance_type().map(|t| t.as_str()) == Some("ml.g5.12xlarge")
                    && res.accelerators() == Some(4)
                    && res.count().is_none()
                    && sharing.strategy().map(|s| s.as_str()) == Some("LendAndBorrow")
                    && sharing.borrow_limit() == Some(150)
                    && c.preempt_team_tasks() == Some(&PreemptTeamTasks::Never)
                    && r.compute_quota_target().and_then(|t| t.team_name()) == Some("team-a")
                    && r.compute_quota_target().and_then(|t| t.fair_share_weight()) == Some(40)
                    && r.activation_state() == Some(&ActivationState::Enabled)
            })
            .then_output(|| {
                CreateComputeQuotaOutput::builder()
                    .compute_quota_id("cq-1")
                    .compute_quota_arn("arn:cq")
                    .build()
            });
        let mut aws = base_aws().await;
        aws.sagemaker = mock_client!(aws_sdk_sagemaker, RuleMode::MatchAny, [&update, &create]);
        let policy = SchedulerPolicy {
            priority_classes: vec![PriorityClass {
                name: "training".into(),
                weight: 70,
            }],
            fair_share: false,
            idle_resource_sharing: false,
        };
        aws.update_scheduler_config("csc-1", 3, &policy)
            .await
            .unwrap();
        let quota = TeamQuota {
            resources: vec![QuotaResource {
                instance_type: "ml.g5.12xlarge".into(),
                count: None,
                accelerators: Some(4),
            }],
            sharing: Sharing::LendAndBorrow,
            borrow_limit: Some(150),
            preempt: Preempt::Never,
            fair_share_weight: 40,
            active: true,
        };
        let id = aws
            .create_compute_quota(
                "team-a",
                "arn:aws:sagemaker:us-west-2:1:cluster/abc",
                "team-a",
                &quota,
            )
            .await
            .unwrap();
        assert_eq!(id, "cq-1");
        assert_eq!((update.num_calls(), create.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn pod_identity_associations_are_looked_up_before_created() {
        use aws_sdk_eks::operation::create_pod_identity_association::CreatePodIdentityAssociationOutput;
        use aws_sdk_eks::operation::list_pod_identity_associations::ListPodIdentityAssociationsOutput;
        use aws_sdk_eks::types::PodIdentityAssociation;
        let list = mock!(aws_sdk_eks::Client::list_pod_identity_associations)
            .match_requests(|r| {
                r.namespace() == Some("aws-hyperpod") && r.service_account() == Some("sa")
            })
            .then_output(|| ListPodIdentityAssociationsOutput::builder().build());
        let create = mock!(aws_sdk_eks::Client::create_pod_identity_association)
            .match_requests(|r| {
                r.role_arn() == Some("arn:aws:iam::1:role/r") && r.service_account() == Some("sa")
            })
            .then_output(|| {
                CreatePodIdentityAssociationOutput::builder()
                    .association(
                        PodIdentityAssociation::builder()
                            .association_id("a-123")
                            .build(),
                    )
                    .build()
            });
        let eks = mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&list, &create]);
        let aws = aws_with(eks, no_quotas()).await;
        assert!(aws
            .find_pod_identity("demo", "aws-hyperpod", "sa")
            .await
            .unwrap()
            .is_none());
        assert_eq!(
            aws.create_pod_identity("demo", "aws-hyperpod", "sa", "arn:aws:iam::1:role/r")
                .await
                .unwrap(),
            "a-123"
        );
    }

    /// A Price List product as `GetProducts` answers it (a JSON document in a string).
    fn product(usage_type: &str, usd: &str) -> String {
        json!({"product": {"sku": "S", "attributes": {"regionCode": "us-west-2", "usagetype": usage_type}},
               "serviceCode": "AmazonSageMaker",
               "terms": {"OnDemand": {"S.T": {"effectiveDate": "2026-11-01T00:00:00Z",
                   "priceDimensions": {"S.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}})
        .to_string()
    }

    /// The Price List is read at its own endpoint with the offer's attributes confirmed first,
    /// filtered on the region and HyperPod's usage type, across pages; an offer that no longer
    /// has an attribute filtered on is a clear error, and nothing is filtered on it.
    #[tokio::test]
    async fn hyperpod_prices_are_read_with_pinned_filters_across_pages() {
        use aws_sdk_pricing::operation::describe_services::DescribeServicesOutput;
        use aws_sdk_pricing::operation::get_products::GetProductsOutput;
        use aws_sdk_pricing::types::{FilterType, Service};
        use instantstart::cloud::PriceList as _;
        let describe = |names: &'static [&'static str]| {
            mock!(aws_sdk_pricing::Client::describe_services)
                .match_requests(|r| {
                    r.service_code() == Some("AmazonSageMaker")
                        && r.format_version() == Some("aws_v1")
                })
                .then_output(move || {
                    DescribeServicesOutput::builder()
                        .services(
                            Service::builder()
                                .service_code("AmazonSageMaker")
                                .set_attribute_names(Some(
                                    names.iter().map(|n| n.to_string()).collect(),
                                ))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
        };
        let pinned = |r: &aws_sdk_pricing::operation::get_products::GetProductsInput| {
            let filters: Vec<(FilterType, &str, &str)> = r
                .filters()
                .iter()
                .map(|f| (f.r#type().clone(), f.field(), f.value()))
                .collect();
            r.service_code() == Some("AmazonSageMaker")
                && r.format_version() == Some("aws_v1")
                && filters
                    == [
                        (FilterType::TermMatch, "regionCode", "us-west-2"),
                        (FilterType::Contains, "usagetype", "Cluster:ml."),
                    ]
        };
        let first = mock!(aws_sdk_pricing::Client::get_products)
            .match_requests(move |r| pinned(r) && r.next_token().is_none())
            .then_output(|| {
                GetProductsOutput::builder()
                    .price_list(product("USW2-Cluster:ml.g5.8xlarge", "3.4"))
                    .price_list(product("USW2-ReservedCluster:ml.g5.8xlarge", "1.0"))
                    .next_token("page-2")
                    .build()
            });
        let second = mock!(aws_sdk_pricing::Client::get_products)
            .match_requests(move |r| pinned(r) && r.next_token() == Some("page-2"))
            .then_output(|| {
                GetProductsOutput::builder()
                    .price_list(product("USW2-Cluster:ml.p5.48xlarge", "98.32"))
                    .build()
            });
        let complete = describe(&["regionCode", "usagetype", "instanceType"]);
        let mut aws = base_aws().await;
        aws.pricing = mock_client!(
            aws_sdk_pricing,
            RuleMode::MatchAny,
            [&complete, &first, &second]
        );
        let prices = aws.hyperpod_prices("us-west-2").await.unwrap();
        let got: Vec<(&str, f64, &str)> = prices
            .iter()
            .map(|p| {
                (
                    p.instance_type.as_str(),
                    p.hourly_usd,
                    p.usage_type.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("ml.g5.8xlarge", 3.4, "USW2-Cluster:ml.g5.8xlarge"),
                ("ml.p5.48xlarge", 98.32, "USW2-Cluster:ml.p5.48xlarge")
            ]
        );
        assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
        // The endpoint is the Price List's, whatever the clusters' region.
        assert_eq!(
            base_aws()
                .await
                .pricing
                .config()
                .region()
                .map(|r| r.as_ref()),
            Some("us-east-1")
        );

        let renamed = describe(&["regionCode", "usageType"]);
        let products = mock!(aws_sdk_pricing::Client::get_products)
            .then_output(|| GetProductsOutput::builder().build());
        aws.pricing = mock_client!(aws_sdk_pricing, RuleMode::MatchAny, [&renamed, &products]);
        let err = aws.hyperpod_prices("us-west-2").await.unwrap_err();
        assert_eq!(err.code, "AttributeNotFound", "{err}");
        assert!(err.message.contains("`usagetype`"), "{err}");
        assert_eq!(
            products.num_calls(),
            0,
            "nothing filtered on a missing attribute"
        );
    }
}

#[tokio::test]
async fn every_role_created_carries_the_configured_permissions_boundary() {
    use instantstart::cloud::Iam;
    let moto = Moto::start().await;
    let mut aws = moto.adapter().await;
    let boundary = "arn:aws:iam::123456789012:policy/instantstart-created-roles-boundary";
    aws.permissions_boundary = Some(boundary.into());
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    aws.create_role("demo-eks-cluster", &trust, &Default::default())
        .await
        .unwrap();
    let role = aws
        .iam
        .get_role()
        .role_name("demo-eks-cluster")
        .send()
        .await
        .unwrap();
    let set = role
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn());
    assert_eq!(set, Some(boundary));
}

/// Amazon Managed Service for Prometheus's query API (moto lacks it; the gap-filler answers
/// what was seeded): the range query goes to the workspace's path, signed for `aps` in its
/// region, and the matrix comes back as series.
#[tokio::test]
async fn amp_range_queries_are_signed_for_aps_and_read_back_as_series() {
    use instantstart::cloud::{Metrics as _, RangeQuery, Workspace};
    let moto = Moto::start().await;
    let client = reqwest::Client::new();
    let seeded = json!([
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "hyperpod-i-1", "gpu": "0"},
         "values": [[100, "87"], [160, "91.5"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "hyperpod-i-2", "gpu": "0"},
         "values": [[100, "0"]]}]);
    client
        .post(format!("{}/_gapfiller/amp/ws-1", moto.url))
        .json(&seeded)
        .send()
        .await
        .unwrap();
    let ws = Workspace {
        url: "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1".into(),
        region: "us-west-2".into(),
    };
    let q = RangeQuery {
        query: r#"DCGM_FI_DEV_GPU_UTIL{Hostname="hyperpod-i-1"}"#.into(),
        start: 0,
        end: 1000,
        step: 60,
    };
    let series = moto.aws().await.query_range(&ws, &q).await.unwrap();
    assert_eq!(series.len(), 1, "{series:?}");
    assert_eq!(series[0].labels["gpu"], "0");
    assert_eq!(series[0].points, vec![(100, 87.0), (160, 91.5)]);
    let seen: Value = client
        .get(format!("{}/_gapfiller/amp", moto.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let first = &seen["queries"][0];
    assert_eq!(first["workspace"], "ws-1", "{seen}");
    assert_eq!(first["scope"], json!(["us-west-2", "aps"]), "{seen}");
    assert_eq!(first["query"]["step"], json!(["60"]), "{seen}");
    assert_eq!(first["query"]["query"], json!([q.query]), "{seen}");
    // What the query API refuses comes back as the port's error, not as empty series.
    let bad = RangeQuery {
        query: "avg(rate(x[5m]))".into(),
        ..q
    };
    let e = moto.aws().await.query_range(&ws, &bad).await.unwrap_err();
    assert_eq!(e.code, "bad_data", "{e:?}");
}

/// The observability feature's workspace on moto's AMP: made once with the cluster's tags, then
/// found by its exact alias (`ListWorkspaces` matches by prefix) and described with its
/// Prometheus endpoint; an alias that only starts the same finds nothing.
#[tokio::test]
async fn a_clusters_workspace_is_made_once_then_found_by_its_exact_alias() {
    use instantstart::cloud::Metrics as _;
    let moto = Moto::start().await;
    let aws = moto.aws().await;
    assert_eq!(aws.find_workspace("instantstart-demo").await.unwrap(), None);
    let tags = std::collections::BTreeMap::from([(
        "instantstart:cluster".to_string(),
        "demo".to_string(),
    )]);
    let made = aws
        .create_workspace("instantstart-demo-2", &tags)
        .await
        .unwrap();
    let other = aws
        .create_workspace("instantstart-demo", &tags)
        .await
        .unwrap();
    let found = aws
        .find_workspace("instantstart-demo")
        .await
        .unwrap()
        .expect("found by its alias");
    assert_eq!(
        (found.id.as_str(), found.arn.as_str()),
        (other.id.as_str(), other.arn.as_str())
    );
    assert_ne!(
        found.id, made.id,
        "the exact alias, not a prefix of another"
    );
    assert!(found.arn.starts_with("arn:aws:aps:us-west-2:"), "{found:?}");
    assert!(
        found
            .prometheus_endpoint
            .as_deref()
            .is_some_and(|e| e.contains(&found.id)),
        "{found:?}"
    );
    assert_eq!(aws.find_workspace("instantstart-de").await.unwrap(), None);
}

/// The account's Grafana workspace through AMG's `DescribeWorkspace` (moto's gap-filler, which
/// answers only requests signed for `grafana`): its name, state and endpoint; an id the account
/// has not is `None`, not an error.
#[tokio::test]
async fn the_accounts_grafana_workspace_is_described_with_its_endpoint() {
    use instantstart::cloud::Metrics as _;
    let moto = Moto::start().await;
    let aws = moto.aws().await;
    assert_eq!(aws.describe_grafana("g-0123456789").await.unwrap(), None);
    reqwest::Client::new()
        .post(format!("{}/_gapfiller/grafana", moto.url))
        .json(&json!({"id": "g-0123456789", "name": "ml-dashboards", "status": "ACTIVE"}))
        .send()
        .await
        .unwrap();
    let w = aws
        .describe_grafana("g-0123456789")
        .await
        .unwrap()
        .expect("the seeded workspace");
    assert_eq!(
        (w.name.as_deref(), w.status.as_str(), w.endpoint.as_str()),
        (
            Some("ml-dashboards"),
            "ACTIVE",
            "g-0123456789.grafana-workspace.us-west-2.amazonaws.com"
        )
    );
}
