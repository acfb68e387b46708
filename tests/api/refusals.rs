//! The sandbox refuses what a real account refuses: nodes that cannot reach the control plane or
//! pull images stay `NotReady` with the reason a kubelet would log, add-ons and Deployments are
//! not ready without a node, pod identity needs `eks-auth:AssumeRoleForPodIdentity` on the node
//! role. Driven through the ports, the way the domain drives them.

use std::sync::Arc;

use instantstart::cloud::sandbox::{Faults, Sandbox, SandboxConfig};
use instantstart::cloud::*;
use serde_json::{json, Value};

/// A simulated account whose lifecycles complete at once (a 15-minute HyperPod creation takes
/// under a microsecond).
async fn account() -> (tempfile::TempDir, Cloud) {
    let dir = tempfile::tempdir().unwrap();
    let store = instantstart::store::Store::open(dir.path()).await.unwrap();
    let sandbox: Arc<Sandbox> = Sandbox::new(
        store.pool.clone(),
        store.writer.clone(),
        SandboxConfig {
            time_scale: 1e12,
            faults: Faults::default(),
        },
    )
    .await
    .unwrap();
    (dir, sandbox.cloud())
}

const CLUSTER: &str = "c";

/// Lifecycles are computed from millisecond timestamps: a resource made in this millisecond is
/// still being created. Waits (bounded) until the next millisecond has begun.
async fn next_tick() {
    let start = std::time::SystemTime::now();
    while start.elapsed().unwrap_or_default() < std::time::Duration::from_millis(2) {
        tokio::task::yield_now().await;
    }
}

fn target() -> KubeTarget {
    KubeTarget {
        cluster: CLUSTER.into(),
        endpoint: "https://sandbox".into(),
        certificate_authority: String::new(),
    }
}

/// What the refusals are tested on: a VPC with two subnets, an EKS cluster whose control plane
/// is in `plane`, and a node role with `policy` next to AWS's managed instance policy.
struct Setup {
    cloud: Cloud,
    vpc: String,
    subnets: Vec<String>,
    plane: String,
    role_arn: String,
}

async fn setup(cloud: Cloud, policy: Value) -> Setup {
    setup_at(cloud, policy, "1.32").await
}

/// [`setup`] with the EKS cluster at Kubernetes `version`.
async fn setup_at(cloud: Cloud, policy: Value, version: &str) -> Setup {
    let tags = cluster_tags(CLUSTER, "t");
    let vpc = cloud
        .network
        .create_vpc("10.1.0.0/16".parse().unwrap(), &tags)
        .await
        .unwrap()
        .id;
    let zones = cloud.network.describe_availability_zones().await.unwrap();
    let mut subnets = Vec::new();
    for (i, z) in zones.iter().take(2).enumerate() {
        let req = CreateSubnet {
            vpc_id: vpc.clone(),
            cidr: format!("10.1.{i}.0/24").parse().unwrap(),
            zone_id: z.id.clone(),
            map_public_ip: false,
            tags: tags.clone(),
        };
        subnets.push(cloud.network.create_subnet(&req).await.unwrap().id);
    }
    let plane = group(&cloud, &vpc, "plane").await;
    let trust = json!({"Version": "2012-10-17", "Statement": []});
    let role = cloud
        .iam
        .create_role("c-exec", &trust, &tags)
        .await
        .unwrap();
    cloud
        .iam
        .attach_role_policy(
            "c-exec",
            "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy",
        )
        .await
        .unwrap();
    cloud
        .iam
        .put_role_policy("c-exec", "extra", &policy)
        .await
        .unwrap();
    let eks = CreateEksCluster {
        name: CLUSTER.into(),
        version: version.into(),
        role_arn: "arn:aws:iam::123456789012:role/c-eks".into(),
        subnet_ids: subnets.clone(),
        security_group_ids: vec![plane.clone()],
        authentication_mode: "API_AND_CONFIG_MAP".into(),
        bootstrap_creator_admin: true,
        tags,
    };
    cloud.eks.create_cluster(&eks).await.unwrap();
    next_tick().await;
    Setup {
        cloud,
        vpc,
        subnets,
        plane,
        role_arn: role.arn,
    }
}

/// An add-on at the version EKS picks.
fn addon(name: &str) -> CreateAddon {
    CreateAddon {
        cluster: CLUSTER.into(),
        name: name.into(),
        version: None,
        service_account_role_arn: None,
        configuration_values: None,
        resolve_conflicts: "OVERWRITE".into(),
        pod_identity_associations: vec![],
    }
}

/// A group that references itself for all traffic, in and out.
async fn group(cloud: &Cloud, vpc: &str, name: &str) -> String {
    let req = CreateSecurityGroup {
        vpc_id: vpc.into(),
        name: name.into(),
        description: name.into(),
        self_referencing: true,
        tags: cluster_tags(CLUSTER, name),
    };
    cloud.network.create_security_group(&req).await.unwrap()
}

/// What AWS's templates give the execution role beyond the managed policy.
fn full_policy() -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ecr:GetAuthorizationToken", "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"], "Resource": "*"},
        {"Effect": "Allow", "Action": ["eks-auth:AssumeRoleForPodIdentity"],
         "Resource": "arn:aws:eks:us-west-2:123456789012:cluster/c"}]})
}

impl Setup {
    async fn hyperpod(&self, node_groups: Vec<String>) {
        let req = self.hyperpod_request(node_groups);
        self.cloud.hyperpod.create_cluster(&req).await.unwrap();
        next_tick().await;
    }

    fn hyperpod_request(&self, node_groups: Vec<String>) -> CreateHyperPodCluster {
        CreateHyperPodCluster {
            name: format!("{CLUSTER}-hp"),
            eks_cluster_arn: format!("arn:aws:eks:us-west-2:123456789012:cluster/{CLUSTER}"),
            node_recovery: "Automatic".into(),
            instance_groups: vec![InstanceGroupSpec {
                name: "workers".into(),
                instance_type: "ml.g5.8xlarge".into(),
                instance_count: 2,
                execution_role_arn: self.role_arn.clone(),
                lifecycle_source_s3_uri: "s3://sagemaker-b/lifecycle/".into(),
                lifecycle_on_create: "on_create.sh".into(),
                threads_per_core: 1,
                ebs_volume_gb: 500,
                deep_health_checks: vec![],
                capacity: Capacity::OnDemand,
                subnet_ids: vec![self.subnets[0].clone()],
                security_group_ids: node_groups,
                network_interface: None,
                scheduled_update: None,
            }],
            tags: cluster_tags(CLUSTER, "hp"),
            continuous_provisioning: false,
        }
    }

    async fn addon(&self, name: &str) -> Addon {
        self.cloud
            .eks
            .describe_addon(CLUSTER, name)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no add-on {name}"))
    }

    async fn nodes(&self) -> Vec<NodeState> {
        self.cloud
            .kube
            .cluster_state(&target())
            .await
            .unwrap()
            .nodes
            .clone()
    }
}

#[tokio::test]
async fn nodes_in_a_group_the_control_plane_does_not_allow_stay_not_ready() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    // Two groups that each reference only themselves: what the first pipeline did.
    let nodes_group = group(&s.cloud, &s.vpc, "nodes").await;
    s.hyperpod(vec![nodes_group]).await;
    let nodes = s.nodes().await;
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert!(!n.ready, "{n:?}");
        let why = n.not_ready_reason.as_deref().unwrap_or_default();
        assert!(why.contains("443"), "{why}");
    }
}

#[tokio::test]
async fn nodes_sharing_the_control_planes_group_join() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    let nodes = s.nodes().await;
    assert_eq!(nodes.len(), 2);
    assert!(
        nodes
            .iter()
            .all(|n| n.ready && n.not_ready_reason.is_none()),
        "{nodes:?}"
    );
}

#[tokio::test]
async fn nodes_whose_role_cannot_pull_from_ecr_fail_to_bootstrap() {
    let (_dir, cloud) = account().await;
    // The managed instance policy alone, as the first pipeline left the role.
    let s = setup(cloud, json!({"Version": "2012-10-17", "Statement": []})).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    for n in s.nodes().await {
        assert!(!n.ready);
        let why = n.not_ready_reason.unwrap_or_default();
        assert!(
            why.contains("NetworkPluginNotReady") && why.contains("ecr:GetAuthorizationToken"),
            "{why}"
        );
    }
}

#[tokio::test]
async fn add_ons_and_deployments_wait_for_a_node_to_run_on() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.cloud.eks.create_addon(&addon("coredns")).await.unwrap();
    s.cloud.eks.create_addon(&addon("vpc-cni")).await.unwrap();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "op", "namespace": "ops"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "op", "image": "x"}]}}}});
    s.cloud.kube.apply(&target(), &deployment).await.unwrap();
    let op = ObjectRef::of(&deployment).unwrap();
    next_tick().await;

    let coredns = s.addon("coredns").await;
    assert_eq!(coredns.status, AddonStatus::Degraded);
    assert!(coredns
        .health
        .unwrap()
        .contains("InsufficientNumberOfReplicas"));
    // A DaemonSet-only add-on has nothing to be unhealthy about without nodes.
    let cni = s.addon("vpc-cni").await;
    assert_eq!(cni.status, AddonStatus::Active);
    assert!(cni.version.is_some(), "EKS reports the version it picked");
    let d = s.cloud.kube.get(&target(), &op).await.unwrap().unwrap();
    assert_eq!(d["status"]["readyReplicas"], 0, "{d}");

    s.hyperpod(vec![s.plane.clone()]).await;
    let coredns = s.addon("coredns").await;
    assert_eq!(coredns.status, AddonStatus::Active, "{coredns:?}");
    let d = s.cloud.kube.get(&target(), &op).await.unwrap().unwrap();
    assert_eq!(d["status"]["readyReplicas"], 1, "{d}");
}

#[tokio::test]
async fn pod_identity_needs_assume_role_for_pod_identity_on_the_node_role() {
    for (policy, allowed) in [
        (
            json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "ecr:*", "Resource": "*"}]}),
            false,
        ),
        (full_policy(), true),
    ] {
        let (_dir, cloud) = account().await;
        let s = setup(cloud, policy).await;
        s.hyperpod(vec![s.plane.clone()]).await;
        let req = addon("amazon-sagemaker-hyperpod-training-operator");
        // Bound before the add-on's pods are admitted (see the next test for the other order).
        s.cloud
            .eks
            .create_pod_identity(
                CLUSTER,
                "aws-hyperpod",
                "hp-training-operator-controller-manager",
                "arn:aws:iam::123456789012:role/c-training-operator",
            )
            .await
            .unwrap();
        s.cloud.eks.create_addon(&req).await.unwrap();
        next_tick().await;
        let a = s.addon(&req.name).await;
        if allowed {
            assert_eq!(a.status, AddonStatus::Active, "{a:?}");
        } else {
            assert_eq!(a.status, AddonStatus::Degraded, "{a:?}");
            let health = a.health.unwrap_or_default();
            assert!(
                health.contains("AccessDenied")
                    && health.contains("eks-auth:AssumeRoleForPodIdentity"),
                "{health}"
            );
        }
    }
}

/// EKS gives a pod its pod-identity credentials when the pod is admitted: an association made
/// after the add-on's pods run reaches none of them (they keep the node's credentials); one
/// passed in `CreateAddon` itself exists before them. The role must exist and trust pod identity.
#[tokio::test]
async fn an_addons_pods_have_pod_identity_only_if_bound_when_admitted() {
    const SA: &str = "hp-training-operator-controller-manager";
    const ROLE: &str = "c-training-operator";
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    let name = "amazon-sagemaker-hyperpod-training-operator";
    let role_arn = format!("arn:aws:iam::123456789012:role/{ROLE}");
    let with_identity = CreateAddon {
        pod_identity_associations: vec![AddonPodIdentity {
            service_account: SA.into(),
            role_arn: role_arn.clone(),
        }],
        ..addon(name)
    };
    // A role that does not exist, or that pod identity may not assume, is refused.
    let e = s.cloud.eks.create_addon(&with_identity).await.unwrap_err();
    assert_eq!(e.code, "InvalidParameterException", "{e}");
    let untrusted = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    s.cloud
        .iam
        .create_role(ROLE, &untrusted, &cluster_tags(CLUSTER, "r"))
        .await
        .unwrap();
    let e = s.cloud.eks.create_addon(&with_identity).await.unwrap_err();
    assert!(e.message.contains("trust policy"), "{e}");
    s.cloud.iam.delete_role(ROLE).await.unwrap();
    let trusted = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]});
    s.cloud
        .iam
        .create_role(ROLE, &trusted, &cluster_tags(CLUSTER, "r"))
        .await
        .unwrap();

    // Bound after the add-on: its pods never got the role.
    s.cloud.eks.create_addon(&addon(name)).await.unwrap();
    next_tick().await;
    s.cloud
        .eks
        .create_pod_identity(CLUSTER, "aws-hyperpod", SA, &role_arn)
        .await
        .unwrap();
    next_tick().await;
    let a = s.addon(name).await;
    assert_eq!(a.status, AddonStatus::Degraded, "{a:?}");
    assert!(
        a.health.unwrap_or_default().contains("admitted before"),
        "the add-on says why"
    );

    // Made with the add-on: its pods start with the role.
    s.cloud.eks.delete_addon(CLUSTER, name).await.unwrap();
    let id = s
        .cloud
        .eks
        .find_pod_identity(CLUSTER, "aws-hyperpod", SA)
        .await
        .unwrap()
        .unwrap();
    s.cloud.eks.delete_pod_identity(CLUSTER, &id).await.unwrap();
    while s
        .cloud
        .eks
        .describe_addon(CLUSTER, name)
        .await
        .unwrap()
        .is_some()
    {
        next_tick().await;
    }
    s.cloud.eks.create_addon(&with_identity).await.unwrap();
    next_tick().await;
    let a = s.addon(name).await;
    assert_eq!(a.status, AddonStatus::Active, "{a:?}");
    assert!(s
        .cloud
        .eks
        .find_pod_identity(CLUSTER, "aws-hyperpod", SA)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn spot_capacity_needs_continuous_node_provisioning() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    let spot = InstanceGroupSpec {
        name: "spot".into(),
        instance_type: "ml.g5.8xlarge".into(),
        instance_count: 1,
        execution_role_arn: s.role_arn.clone(),
        lifecycle_source_s3_uri: "s3://sagemaker-b/lifecycle/".into(),
        lifecycle_on_create: "on_create.sh".into(),
        threads_per_core: 1,
        ebs_volume_gb: 500,
        deep_health_checks: vec![],
        capacity: Capacity::Spot,
        subnet_ids: vec![s.subnets[0].clone()],
        security_group_ids: vec![s.plane.clone()],
        network_interface: None,
        scheduled_update: None,
    };
    let mut req = CreateHyperPodCluster {
        name: format!("{CLUSTER}-hp"),
        eks_cluster_arn: format!("arn:aws:eks:us-west-2:123456789012:cluster/{CLUSTER}"),
        node_recovery: "Automatic".into(),
        instance_groups: vec![spot],
        tags: cluster_tags(CLUSTER, "hp"),
        continuous_provisioning: false,
    };
    let e = s.cloud.hyperpod.create_cluster(&req).await.unwrap_err();
    assert_eq!(e.code, "ValidationException");
    assert!(e.message.contains("Continuous"), "{e}");
    req.continuous_provisioning = continuous_provisioning(&req.instance_groups);
    s.cloud.hyperpod.create_cluster(&req).await.unwrap();
}

/// A ScaledObject on an Amazon Managed Service for Prometheus workspace reads its metric only
/// when KEDA's operator has an identity whose policy, within the stack's boundary, allows
/// `aps:QueryMetrics` on that workspace: without one KEDA reports AccessDenied and scales nothing.
#[tokio::test]
async fn an_amp_trigger_needs_a_keda_identity_that_may_query_the_workspace() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    let workspace = "ws-0123abcd";
    let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "chat", "namespace": "default"},
        "spec": {"scaleTargetRef": {"name": "chat"}, "minReplicaCount": 1, "maxReplicaCount": 2,
            "triggers": [{"type": "prometheus", "authenticationRef": {"name": "chat-aws"},
                "metadata": {"serverAddress": format!("https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{workspace}"),
                             "query": "sum(x)", "threshold": "3", "awsRegion": "us-west-2"}}]}});
    s.cloud.kube.apply(&target(), &so).await.unwrap();
    let r = ObjectRef::to_apply(&so).unwrap();
    let ready = |o: Value| -> (String, String) {
        let c = o["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
            .unwrap_or_default();
        (
            c["status"].as_str().unwrap_or_default().to_string(),
            c["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    let now = ready(s.cloud.kube.get(&target(), &r).await.unwrap().unwrap());
    assert_eq!(now.0, "False", "{now:?}");
    assert!(
        now.1.contains("AccessDenied") && now.1.contains("no pod identity association"),
        "{now:?}"
    );
    // An identity whose policy names another workspace is refused on this one.
    let trust = json!({"Version": "2012-10-17", "Statement": []});
    let role = s
        .cloud
        .iam
        .create_role("c-keda", &trust, &cluster_tags(CLUSTER, "keda"))
        .await
        .unwrap();
    let grant = |ws: &str| {
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["aps:QueryMetrics"],
            "Resource": [format!("arn:aws:aps:us-west-2:123456789012:workspace/{ws}")]}]})
    };
    s.cloud
        .iam
        .put_role_policy("c-keda", "q", &grant("ws-other"))
        .await
        .unwrap();
    s.cloud
        .eks
        .create_pod_identity(CLUSTER, "keda", "keda-operator", &role.arn)
        .await
        .unwrap();
    let now = ready(s.cloud.kube.get(&target(), &r).await.unwrap().unwrap());
    assert_eq!(now.0, "False", "{now:?}");
    assert!(
        now.1
            .contains("c-keda is not authorized to perform: aps:QueryMetrics"),
        "{now:?}"
    );
    s.cloud
        .iam
        .put_role_policy("c-keda", "q", &grant(workspace))
        .await
        .unwrap();
    let now = ready(s.cloud.kube.get(&target(), &r).await.unwrap().unwrap());
    assert_eq!(now.0, "True", "{now:?}");
}

/// A HyperPodPyTorchJob whose container runs `hyperpodrun` from a stock image fails as the
/// kubelet would fail it (the image carries no elastic agent); installed by the init container
/// the recipes add, the same job starts.
#[tokio::test]
async fn hyperpodrun_from_an_image_without_the_elastic_agent_does_not_start() {
    use instantstart::service::training::{pytorch_job, recipe, CommandInputs, JobSpec};
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    let r = recipe("pytorch").unwrap();
    for install in [false, true] {
        let name = if install { "installed" } else { "stock" };
        let launcher = if install {
            instantstart::service::training::INSTALLED_LAUNCHER
        } else {
            "hyperpodrun"
        };
        let command = r.command(&CommandInputs {
            nodes: 1,
            gpus: 4,
            script: Some("/s3/code/train.py"),
            model: None,
            dataset: None,
            output: "/s3/outputs/x",
            extra: &[],
            launcher,
        });
        let job = pytorch_job(&JobSpec {
            name,
            recipe: "pytorch",
            image: r.image,
            instance_type: "ml.g5.8xlarge",
            nodes: 1,
            gpus: 4,
            command,
            paths: vec![],
            recovery: None,
            monitoring: None,
            elastic: None,
            tiered_checkpointing: false,
            tracking: None,
            install_agent: install,
            package_index: None,
            placement: &Default::default(),
        });
        s.cloud.kube.apply(&target(), &job).await.unwrap();
        let got = s
            .cloud
            .kube
            .get(&target(), &ObjectRef::to_apply(&job).unwrap())
            .await
            .unwrap()
            .unwrap();
        let failed = got["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Failed").cloned());
        if install {
            assert!(failed.is_none(), "{got}");
        } else {
            let why = failed.unwrap_or_else(|| panic!("{got}"))["message"].to_string();
            assert!(
                why.contains("executable file not found") && why.contains("hyperpod-elastic-agent"),
                "{why}"
            );
        }
    }
}

/// A training job reports to an MLflow App only when its pods' role may: the app authorizes
/// every REST call with `sagemaker:CallMlflowAppApi`, and the stack's boundary must allow it
/// too. A role holding only `sagemaker-mlflow:*` (a tracking server's actions) reports nothing.
#[tokio::test]
async fn a_job_reports_to_mlflow_only_within_its_roles_effective_policy() {
    use instantstart::service::steps::mlflow::{tracking_policy, TRACKING_SA};
    use instantstart::service::training::{pytorch_job, JobSpec};
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    s.hyperpod(vec![s.plane.clone()]).await;
    let tags = cluster_tags(CLUSTER, "mlflow");
    let app = s
        .cloud
        .mlflow
        .create_app(&CreateMlflowApp {
            name: "instantstart",
            artifact_store: "s3://sagemaker-instantstart-c-123456789012/mlflow",
            role_arn: "arn:aws:iam::123456789012:role/instantstart-mlflow",
            tags: &tags,
        })
        .await
        .unwrap();
    let trust = json!({"Version": "2012-10-17", "Statement": []});
    let role = s
        .cloud
        .iam
        .create_role("c-mlflow-tracking", &trust, &tags)
        .await
        .unwrap();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": TRACKING_SA.1, "namespace": TRACKING_SA.0,
                     "annotations": {"eks.amazonaws.com/role-arn": role.arn}}});
    s.cloud.kube.apply(&target(), &sa).await.unwrap();
    let job = pytorch_job(&JobSpec {
        name: "tracked",
        recipe: "pytorch",
        image: "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1",
        instance_type: "ml.g5.8xlarge",
        nodes: 1,
        gpus: 4,
        command: vec!["hyperpodrun".into(), "/s3/train.py".into()],
        paths: vec![],
        recovery: None,
        monitoring: None,
        elastic: None,
        tiered_checkpointing: false,
        tracking: Some(app.clone()),
        install_agent: false,
        package_index: None,
        placement: &Default::default(),
    });
    s.cloud.kube.apply(&target(), &job).await.unwrap();
    let experiment = || async {
        s.cloud
            .mlflow
            .tracking(
                &app,
                TrackingCall {
                    post: false,
                    path: "experiments/get-by-name",
                    query: &[("experiment_name", "tracked")],
                    body: None,
                },
            )
            .await
    };
    // The grant this project made before: a tracking server's actions, which an app ignores.
    let old = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Action": ["sagemaker-mlflow:*"], "Resource": [app.clone()]}]});
    s.cloud
        .iam
        .put_role_policy("c-mlflow-tracking", "t", &old)
        .await
        .unwrap();
    let refused = experiment().await.unwrap_err();
    assert_eq!(refused.code, "NotFound", "{refused:?}");
    let place = instantstart::service::storage::bucket::BucketPlace::whole(
        "sagemaker-instantstart-c-123456789012",
    );
    s.cloud
        .iam
        .put_role_policy("c-mlflow-tracking", "t", &tracking_policy(&app, &place))
        .await
        .unwrap();
    let found = experiment().await.unwrap();
    assert_eq!(found["experiment"]["name"], "tracked", "{found}");
}

/// The control plane's own policy on access entries (the template's `AccessEntries…` and
/// `PeopleGet…` statements) holds here as IAM holds it: a person gets a plain entry and a team's
/// namespace to edit or view, nothing wider; the server alone is given the cluster.
#[tokio::test]
async fn a_person_is_given_a_teams_namespace_and_nothing_wider() {
    let (_dir, cloud) = account().await;
    let s = setup(cloud, full_policy()).await;
    let eks = &s.cloud.eks;
    let alice = "arn:aws:iam::123456789012:user/alice";
    let policy = |name: &str, ns: Option<&[&str]>| AccessPolicy {
        policy_arn: format!("arn:aws:eks::aws:cluster-access-policy/{name}"),
        namespaces: ns.map(|n| n.iter().map(|s| s.to_string()).collect()),
    };
    let team = policy("AmazonEKSEditPolicy", Some(&["hyperpod-ns-a"]));
    let e = eks
        .associate_access_policy(CLUSTER, alice, &team)
        .await
        .unwrap_err();
    assert_eq!(e.code, "ResourceNotFoundException", "no entry yet: {e:?}");
    eks.create_access_entry(CLUSTER, alice).await.unwrap();
    eks.associate_access_policy(CLUSTER, alice, &team)
        .await
        .unwrap();
    for (wider, why) in [
        (policy("AmazonEKSClusterAdminPolicy", None), "cluster admin"),
        (policy("AmazonEKSEditPolicy", None), "the whole cluster"),
        (
            policy(
                "AmazonEKSEditPolicy",
                Some(&["hyperpod-ns-a", "kube-system"]),
            ),
            "a namespace not a team's",
        ),
        (
            policy("AmazonEKSAdminPolicy", Some(&["hyperpod-ns-a"])),
            "an administrator's policy",
        ),
    ] {
        let e = eks
            .associate_access_policy(CLUSTER, alice, &wider)
            .await
            .unwrap_err();
        assert_eq!(e.code, "AccessDeniedException", "{why}: {e:?}");
        assert!(e.message.contains("explicit deny"), "{why}: {e:?}");
    }
    assert_eq!(
        eks.access_policies(CLUSTER, alice).await.unwrap(),
        Some(vec![team.clone()])
    );
    let me = instantstart::cloud::identity::principal_arn(
        &s.cloud.iam.caller_identity().await.unwrap().arn,
    )
    .unwrap();
    eks.create_access_entry(CLUSTER, &me).await.unwrap();
    eks.associate_access_policy(CLUSTER, &me, &policy("AmazonEKSClusterAdminPolicy", None))
        .await
        .unwrap();
    eks.disassociate_access_policy(CLUSTER, alice, &team.policy_arn)
        .await
        .unwrap();
    assert_eq!(
        eks.access_policies(CLUSTER, alice).await.unwrap(),
        Some(vec![])
    );
}

/// HyperPod orchestrates with EKS clusters of the Kubernetes versions its guide lists (1.28 to
/// 1.34): one older is refused at creation, one listed is taken.
#[tokio::test]
async fn hyperpod_refuses_an_eks_cluster_of_a_kubernetes_version_it_does_not_support() {
    let (_dir, cloud) = account().await;
    let s = setup_at(cloud, full_policy(), "1.27").await;
    let req = s.hyperpod_request(vec![s.plane.clone()]);
    let e = s.cloud.hyperpod.create_cluster(&req).await.unwrap_err();
    assert_eq!(e.code, "ValidationException", "{e:?}");
    assert!(
        e.message.contains("1.27") && e.message.contains("1.34"),
        "{e}"
    );
    let (_dir, cloud) = account().await;
    let s = setup_at(cloud, full_policy(), "1.34").await;
    s.hyperpod(vec![s.plane.clone()]).await;
}
