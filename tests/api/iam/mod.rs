//! What every role the product makes may *effectively* do: its policies intersected with the
//! stack's permissions boundary, evaluated offline as IAM would, against a table of what its
//! workload calls (from the upstream published policies and the SDK calls each makes) and what
//! it must never do. Both places a cluster's objects can live (its own bucket, a prefix of the
//! stack's shared bucket), the control plane's own policy, the Load Balancer Controller's
//! published policy statement by statement, and parliament over every document.

use std::collections::BTreeSet;

use instantstart::cloud::policy::{self, Decision, Request};
use instantstart::cloud::sandbox::rules::{template_boundary, template_document};
use instantstart::service::steps::features::policies::{inference_alb_policy, LBC_POLICY};
use instantstart::service::steps::features::PolicyInputs;
use instantstart::service::steps::roles::{account_roles, cluster_roles, RoleDocs, RoleInputs};
use instantstart::service::storage::bucket::BucketPlace;
use serde_json::{json, Value};

mod boundary;
mod needs;
use needs::{needs, req, Need};

const ACCOUNT: &str = "123456789012";
const OWN: &str = "sagemaker-instantstart-demo-123456789012";
const SHARED: &str = "sagemaker-instantstart-shared-123456789012-us-west-2";
/// A bucket an S3 claim mounts, inside the boundary's `sagemaker-instantstart-*`.
const CLAIMED: &str = "sagemaker-instantstart-datasets-123456789012";
const EKS: &str = "arn:aws:eks:us-west-2:123456789012:cluster/demo";
const HYPERPOD: &str = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123";
const APP: &str = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-1";
const AMP: &str = "arn:aws:aps:us-west-2:123456789012:workspace/ws-1";
const BOUNDARY_ARN: &str = "arn:aws:iam::123456789012:policy/instantstart-CreatedRolesBoundary";

/// AWS-managed policies whose documents the evaluator does not model, and why the role's needs
/// are still decided: an unmodelled managed policy grants nothing here, so a need it would meet
/// shows as denied and must be met by the role's own documents.
const UNMODELLED_MANAGED: &[(&str, &str)] = &[(
    "AmazonSageMakerHyperPodInferenceAccess",
    "what the operator needs beyond it (models, TLS certificates, ACM tags, this cluster) is \
     in the role's inline policy, which the table checks; the managed policy's own grants are \
     cut by the same boundary",
)];

fn places() -> [BucketPlace; 2] {
    [
        BucketPlace::whole(OWN),
        BucketPlace::prefixed(SHARED, "demo/"),
    ]
}

const VALUES: &[(&str, &str)] = &[
    ("AWS::Partition", "aws"),
    ("AWS::URLSuffix", "amazonaws.com"),
    ("AWS::Region", "us-west-2"),
    ("AWS::AccountId", ACCOUNT),
    (
        "AWS::StackId",
        "arn:aws:cloudformation:us-west-2:123456789012:stack/instantstart/0f1e",
    ),
    (
        "SharedBucket.Arn",
        "arn:aws:s3:::sagemaker-instantstart-shared-123456789012-us-west-2",
    ),
    ("CreatedRolesBoundary", BOUNDARY_ARN),
];

fn boundary() -> Value {
    template_boundary(VALUES)
}

fn control_plane_policy() -> Value {
    template_document(
        "/Resources/InstanceRole/Properties/Policies/0/PolicyDocument",
        VALUES,
    )
}

fn roles(place: &BucketPlace) -> Vec<RoleDocs> {
    let claimed = BTreeSet::from([CLAIMED.to_string()]);
    let amp = BTreeSet::from([AMP.to_string()]);
    let mut all = cluster_roles(&RoleInputs {
        cluster: "demo",
        place,
        eks_cluster_arn: EKS,
        hyperpod_cluster_arn: HYPERPOD,
        mlflow_app_arn: APP,
        claimed: &claimed,
        amp_workspaces: &amp,
    });
    all.extend(account_roles(place));
    all
}

/// The role's identity documents: inline, and the managed ones the evaluator models.
fn identity(role: &RoleDocs) -> Vec<Value> {
    let mut docs = role.inline.clone();
    for arn in &role.managed {
        match policy::aws_managed(arn) {
            Some(doc) => docs.push(doc),
            None => {
                let name = arn.rsplit('/').next().unwrap_or_default();
                assert!(
                    UNMODELLED_MANAGED.iter().any(|(n, _)| *n == name),
                    "{}: the managed policy {arn} is neither modelled (policy::aws_managed) nor \
                     justified in UNMODELLED_MANAGED",
                    role.name
                );
            }
        }
    }
    docs
}

#[test]
fn every_role_may_do_what_its_workload_calls_and_nothing_it_must_not() {
    let boundary = boundary();
    assert!(
        boundary["Statement"]
            .as_array()
            .is_some_and(|s| s.len() >= 4),
        "the template's boundary was not read: {boundary}"
    );
    for place in places() {
        let roles = roles(&place);
        let table = needs(&place);
        let inventory: BTreeSet<&str> = roles.iter().map(|r| r.name.as_str()).collect();
        let covered: BTreeSet<&str> = table.iter().map(|n| n.role).collect();
        assert_eq!(
            inventory, covered,
            "every role the product makes has rows in the table, and only those"
        );
        let mut wrong = Vec::new();
        for need in &table {
            let role = roles.iter().find(|r| r.name == need.role).unwrap();
            let docs = identity(role);
            let refs: Vec<&Value> = docs.iter().collect();
            let got = policy::effective(&refs, Some(&boundary), &need.call);
            if (got == Decision::Allow) != need.allow {
                let alone = policy::effective(&refs, None, &need.call);
                wrong.push(format!(
                    "{} ({}) {} {} on {} {:?}: {got:?} (identity alone: {alone:?}) — {}",
                    role.name,
                    role.workload,
                    if need.allow { "needs" } else { "must not get" },
                    need.call.action,
                    need.call.resource,
                    need.call.context,
                    need.why
                ));
            }
        }
        assert!(wrong.is_empty(), "in {place:?}:\n{}", wrong.join("\n"));
    }
}

/// S3 ARNs name no account, so a bucket of another account with a matching name would match
/// every role's statements: the boundary pins S3 to this account (`s3:ResourceAccount`). Each
/// S3 call a role needs is denied once the same bucket name is another account's.
#[test]
fn no_role_reaches_a_bucket_of_another_account_by_its_name() {
    let boundary = boundary();
    for place in places() {
        let roles = roles(&place);
        let mut checked = 0;
        for need in needs(&place).iter().filter(|n| n.allow) {
            let Some(own) = need.call.context.get("s3:resourceaccount") else {
                continue;
            };
            assert_eq!(own, &vec![ACCOUNT.to_string()]);
            let mut theirs = need.call.clone();
            theirs
                .context
                .insert("s3:resourceaccount".into(), vec!["111111111111".into()]);
            let role = roles.iter().find(|r| r.name == need.role).unwrap();
            let docs = identity(role);
            let refs: Vec<&Value> = docs.iter().collect();
            assert_ne!(
                policy::effective(&refs, Some(&boundary), &theirs),
                Decision::Allow,
                "{} may {} on another account's {}",
                need.role,
                theirs.action,
                theirs.resource
            );
            checked += 1;
        }
        assert!(checked >= 10, "the S3 needs were found ({checked})");
    }
    // The control plane's own role likewise.
    let own = control_plane_policy();
    let put = Request::new(
        "s3:PutObject",
        "arn:aws:s3:::sagemaker-instantstart-demo-123456789012/lifecycle/on_create.sh",
    );
    let refs = [&own];
    assert_eq!(
        policy::effective(
            &refs,
            None,
            &put.clone().with("s3:ResourceAccount", ACCOUNT)
        ),
        Decision::Allow
    );
    assert_ne!(
        policy::effective(&refs, None, &put.with("s3:ResourceAccount", "111111111111")),
        Decision::Allow
    );
}

#[test]
fn the_table_catches_a_role_that_gets_more_or_less() {
    // The check above, run on a broken role, fails: a tracking role without its App grant, and
    // an S3 CSI role given every bucket, are each caught by a row.
    let place = &places()[1];
    let boundary = boundary();
    let rows = needs(place);
    let verdict = |docs: &[Value], n: &Need| {
        let refs: Vec<&Value> = docs.iter().collect();
        (policy::effective(&refs, Some(&boundary), &n.call) == Decision::Allow) == n.allow
    };
    let tracking_without_app =
        vec![json!({"Statement": [place.objects_statement("A", &["s3:PutObject"], "mlflow/")]})];
    assert!(rows
        .iter()
        .filter(|n| n.role == "demo-mlflow-tracking")
        .any(|n| !verdict(&tracking_without_app, n)));
    let csi_everything = vec![json!({"Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})];
    assert!(rows
        .iter()
        .filter(|n| n.role == "demo-s3-csi")
        .any(|n| !verdict(&csi_everything, n)));
}

/// In another partition (here China's), every ARN every role's documents and attachments name
/// is in that partition: none is written `arn:aws:`, which IAM would refuse or never match.
#[test]
fn every_arn_a_role_names_is_in_the_clusters_partition() {
    fn arns(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.starts_with("arn:") => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|v| arns(v, out)),
            Value::Object(m) => m.values().for_each(|v| arns(v, out)),
            _ => {}
        }
    }
    let cn = |arn: &str| {
        arn.replacen("arn:aws:", "arn:aws-cn:", 1)
            .replace("us-west-2", "cn-north-1")
    };
    let (eks, hyperpod, app, amp) = (cn(EKS), cn(HYPERPOD), cn(APP), cn(AMP));
    for place in places() {
        let place = place.in_region("cn-north-1");
        let claimed = BTreeSet::from([CLAIMED.to_string()]);
        let workspaces = BTreeSet::from([amp.clone()]);
        let mut all = cluster_roles(&RoleInputs {
            cluster: "demo",
            place: &place,
            eks_cluster_arn: &eks,
            hyperpod_cluster_arn: &hyperpod,
            mlflow_app_arn: &app,
            claimed: &claimed,
            amp_workspaces: &workspaces,
        });
        all.extend(account_roles(&place));
        for role in all {
            let mut found = role.managed.clone();
            role.inline.iter().for_each(|d| arns(d, &mut found));
            assert!(!found.is_empty(), "{}", role.name);
            for arn in found {
                assert!(arn.starts_with("arn:aws-cn:"), "{}: {arn}", role.name);
            }
        }
    }
}

/// A claim on a bucket the stack's `DataBuckets` parameter names is reachable within the
/// boundary that parameter widens, and cut without it: why the server refuses any other bucket
/// at the edge unless it is configured as a data bucket. Nothing beyond the pattern is widened.
#[test]
fn the_data_buckets_parameter_widens_the_boundary_to_exactly_those_buckets() {
    use instantstart::service::steps::s3_access::S3CsiRoleStep;
    let place = &places()[1];
    let csi = S3CsiRoleStep::policy(place, &BTreeSet::from(["team-a-data".to_string()]));
    let everything = json!({"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]});
    let read = req("s3:GetObject", "arn:aws:s3:::team-a-data/train/x");
    let list = req("s3:ListBucket", "arn:aws:s3:::team-a-data");
    let beyond = req("s3:GetObject", "arn:aws:s3:::payroll-exports/x");
    let narrow = boundary();
    let mut values = VALUES.to_vec();
    values.extend([("HasDataBuckets", "true"), ("DataBuckets", "team-*-data")]);
    let wide = template_boundary(&values);
    let allows = |doc: &Value, b: &Value, r: &Request| {
        policy::effective(&[doc], Some(b), r) == Decision::Allow
    };
    assert!(!allows(&csi, &narrow, &read), "cut without the parameter");
    assert!(allows(&csi, &wide, &read) && allows(&csi, &wide, &list));
    assert!(
        !allows(&everything, &wide, &beyond),
        "only the named buckets"
    );
}

/// Evidence is read only: the control plane may read a node and the events and log streams
/// HyperPod keeps for its clusters, and no other log group, nor write to one.
#[test]
fn the_control_plane_reads_evidence_from_the_clusters_log_groups_and_nowhere_else() {
    let cp = control_plane_policy();
    let may = |r: Request| policy::decide(&cp, &r) == Decision::Allow;
    for action in [
        "sagemaker:DescribeClusterNode",
        "sagemaker:ListClusterEvents",
    ] {
        assert!(may(req(action, HYPERPOD)), "{action}");
    }
    let group = "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Clusters/demo/abc123";
    let stream = format!("{group}:log-stream:LifecycleConfig/workers/i-0123456789abcdef0");
    assert!(may(req("logs:DescribeLogStreams", group)));
    assert!(may(req("logs:GetLogEvents", &stream)));
    let other = "arn:aws:logs:us-west-2:123456789012:log-group:/aws/lambda/payments";
    assert!(
        !may(req("logs:DescribeLogStreams", other)),
        "another log group"
    );
    assert!(!may(req(
        "logs:GetLogEvents",
        &format!("{other}:log-stream:x")
    )));
    for action in [
        "logs:PutLogEvents",
        "logs:DeleteLogGroup",
        "logs:CreateLogStream",
    ] {
        assert!(!may(req(action, group)), "{action}: evidence is read only");
    }
}

/// GPU utilization is read only: the control plane may query the account's Prometheus
/// workspaces, find them, and make one only tagged as a cluster's; it never writes to one nor
/// deletes one. It reads the account's Grafana workspaces, and changes none.
#[test]
fn the_control_plane_queries_prometheus_workspaces_and_makes_only_tagged_ones() {
    let cp = control_plane_policy();
    let may = |r: Request| policy::decide(&cp, &r) == Decision::Allow;
    assert!(may(req("aps:QueryMetrics", AMP)) && may(req("aps:DescribeWorkspace", AMP)));
    assert!(may(req("aps:ListWorkspaces", "*")));
    assert!(may(
        req("aps:CreateWorkspace", "*").with("aws:RequestTag/instantstart:cluster", "demo")
    ));
    assert!(
        !may(req("aps:CreateWorkspace", "*")),
        "an untagged workspace"
    );
    for action in ["aps:RemoteWrite", "aps:DeleteWorkspace"] {
        assert!(!may(req(action, AMP)), "{action}");
    }
    let elsewhere = "arn:aws:aps:us-west-2:210987654321:workspace/ws-1";
    assert!(
        !may(req("aps:QueryMetrics", elsewhere)),
        "another account's workspace"
    );
    // The Grafana workspace the dashboards are in is read, never changed.
    let grafana = "arn:aws:grafana:us-west-2:123456789012:/workspaces/g-5a9db1e0c2";
    assert!(may(req("grafana:DescribeWorkspace", grafana)));
    for action in [
        "grafana:UpdateWorkspace",
        "grafana:CreateWorkspaceServiceAccountToken",
        "grafana:DeleteWorkspace",
    ] {
        assert!(!may(req(action, grafana)), "{action}");
    }
    assert!(!may(req(
        "grafana:DescribeWorkspace",
        "arn:aws:grafana:us-west-2:210987654321:/workspaces/g-5a9db1e0c2"
    )));
}

/// Cost reports read HyperPod's prices from the Price List, which grants its reads on `*` only;
/// nothing else of the billing services comes with it.
#[test]
fn the_control_plane_reads_the_price_list_and_no_bill() {
    let cp = control_plane_policy();
    let may = |r: Request| policy::decide(&cp, &r) == Decision::Allow;
    for action in ["pricing:GetProducts", "pricing:DescribeServices"] {
        assert!(may(req(action, "*")), "{action}");
    }
    for action in [
        "pricing:GetPriceListFileUrl",
        "ce:GetCostAndUsage",
        "cur:DescribeReportDefinitions",
    ] {
        assert!(!may(req(action, "*")), "{action}");
    }
}

/// Access entries grant only their access policies: the control plane makes a STANDARD entry
/// without Kubernetes groups or a user name, on a cluster it made (or imported), for itself or a
/// person. It associates the cluster-admin policy with itself only; a person gets
/// `AmazonEKSEditPolicy` or `AmazonEKSViewPolicy` on `hyperpod-ns-*` namespaces, nothing wider.
#[test]
fn the_control_plane_gives_people_a_teams_namespace_and_nothing_wider() {
    let cp = control_plane_policy();
    let me = "arn:aws:iam::123456789012:role/instantstart-InstanceRole-AB12";
    let alice = "arn:aws:iam::123456789012:user/alice";
    let entry = |cluster_tag: Option<&str>, principal: &str, extra: &[(&str, &str)]| {
        let mut r = req("eks:CreateAccessEntry", EKS)
            .with("aws:PrincipalArn", me)
            .with("eks:principalArn", principal);
        for (k, v) in extra {
            r = r.with(k, v);
        }
        match cluster_tag {
            Some(t) => r.with("aws:ResourceTag/instantstart:cluster", t),
            None => r,
        }
    };
    let standard = [("eks:accessEntryType", "STANDARD")];
    for who in [me, alice] {
        assert_eq!(
            policy::decide(&cp, &entry(Some("demo"), who, &standard)),
            Decision::Allow,
            "{who}"
        );
    }
    for (extra, why) in [
        (
            &[
                ("eks:accessEntryType", "STANDARD"),
                ("eks:kubernetesGroups", "system:masters"),
            ][..],
            "Kubernetes groups",
        ),
        (
            &[
                ("eks:accessEntryType", "STANDARD"),
                ("eks:username", "admin"),
            ][..],
            "a user name of its own",
        ),
        (&[("eks:accessEntryType", "EC2_LINUX")][..], "a node's kind"),
        (&[][..], "no kind named"),
    ] {
        assert_eq!(
            policy::decide(&cp, &entry(Some("demo"), alice, extra)),
            Decision::ExplicitDeny,
            "{why}"
        );
    }
    assert_ne!(
        policy::decide(&cp, &entry(None, me, &standard)),
        Decision::Allow,
        "a cluster not its own"
    );

    let entry_arn = |who: &str| {
        let name = who.rsplit('/').next().unwrap();
        format!("arn:aws:eks:us-west-2:123456789012:access-entry/demo/user/123456789012/{name}/0a")
    };
    let policy_of = |name: &str| format!("arn:aws:eks::aws:cluster-access-policy/{name}");
    let associate = |who: &str, policy: &str, namespaces: Option<&[&str]>| {
        let mut r = req("eks:AssociateAccessPolicy", &entry_arn(who))
            .with("aws:PrincipalArn", me)
            .with("eks:principalArn", who)
            .with("eks:policyArn", &policy_of(policy))
            .with(
                "eks:accessScope",
                if namespaces.is_some() {
                    "namespace"
                } else {
                    "cluster"
                },
            );
        for n in namespaces.unwrap_or_default() {
            r = r.with("eks:namespaces", n);
        }
        policy::decide(&cp, &r)
    };
    let team: &[&str] = &["hyperpod-ns-a", "hyperpod-ns-b"];
    assert_eq!(
        associate(me, "AmazonEKSClusterAdminPolicy", None),
        Decision::Allow
    );
    for granted in ["AmazonEKSEditPolicy", "AmazonEKSViewPolicy"] {
        assert_eq!(associate(alice, granted, Some(team)), Decision::Allow);
    }
    for (policy, namespaces, why) in [
        ("AmazonEKSClusterAdminPolicy", None, "cluster admin"),
        ("AmazonEKSEditPolicy", None, "the whole cluster"),
        (
            "AmazonEKSEditPolicy",
            Some(&["hyperpod-ns-a", "kube-system"][..]),
            "a namespace not a team's",
        ),
        (
            "AmazonEKSAdminPolicy",
            Some(team),
            "an administrator's policy",
        ),
        (
            "AmazonEKSClusterAdminPolicy",
            Some(team),
            "cluster admin on a namespace",
        ),
    ] {
        assert_eq!(
            associate(alice, policy, namespaces),
            Decision::ExplicitDeny,
            "{why}"
        );
    }
    // HyperPod's own policies are SageMaker's to check when it sets up task governance.
    let hyperpods = "arn:aws:iam::123456789012:role/AWSServiceRoleForHyperPod";
    assert_eq!(
        associate(hyperpods, "AmazonSagemakerHyperpodClusterPolicy", None),
        Decision::Allow
    );
    let take_back = req("eks:DisassociateAccessPolicy", &entry_arn(alice))
        .with("aws:PrincipalArn", me)
        .with("eks:principalArn", alice)
        .with("eks:policyArn", &policy_of("AmazonEKSEditPolicy"));
    assert_eq!(policy::decide(&cp, &take_back), Decision::Allow);
}

#[test]
fn the_control_plane_may_make_and_manage_every_role_only_within_the_boundary() {
    let cp = control_plane_policy();
    assert!(
        cp["Statement"].as_array().is_some_and(|s| s.len() >= 10),
        "the template's control-plane policy was not read: {cp}"
    );
    let may = |r: Request| policy::decide(&cp, &r) == Decision::Allow;
    for role in roles(&places()[0]) {
        let arn = format!(
            "arn:aws:iam::{ACCOUNT}:role{}{}",
            instantstart::cloud::ROLE_PATH,
            role.name
        );
        // The same name outside the product's path (a customer's role that shares the suffix)
        // is out of reach: its trust cannot be rewritten, nor the role passed, tagged or deleted.
        let theirs = format!("arn:aws:iam::{ACCOUNT}:role/{}", role.name);
        for action in [
            "iam:UpdateAssumeRolePolicy",
            "iam:DeleteRole",
            "iam:PassRole",
            "iam:DeleteRolePolicy",
        ] {
            assert!(!may(req(action, &theirs)), "{action} on {theirs}");
        }
        assert!(
            !may(req("iam:TagRole", &theirs).with("aws:RequestTag/instantstart:cluster", "demo")),
            "TagRole on {theirs}"
        );
        let create =
            req("iam:CreateRole", &arn).with("aws:RequestTag/instantstart:cluster", "demo");
        assert!(
            may(create.clone().with("iam:PermissionsBoundary", BOUNDARY_ARN)),
            "CreateRole {}",
            role.name
        );
        assert!(!may(create), "{} without the boundary", role.name);
        assert!(
            may(req("iam:TagRole", &arn).with("aws:RequestTag/instantstart:cluster", "demo")),
            "TagRole {}",
            role.name
        );
        for action in ["iam:DeleteRole", "iam:GetRole"] {
            assert!(may(req(action, &arn)), "{action} {}", role.name);
        }
        let put = req("iam:PutRolePolicy", &arn);
        assert!(
            may(put.clone().with("iam:PermissionsBoundary", BOUNDARY_ARN)),
            "PutRolePolicy {}",
            role.name
        );
        assert!(
            !may(put),
            "PutRolePolicy on {} without the boundary",
            role.name
        );
        for managed in &role.managed {
            let attach = req("iam:AttachRolePolicy", &arn)
                .with("iam:PermissionsBoundary", BOUNDARY_ARN)
                .with("iam:PolicyARN", managed);
            assert!(may(attach), "attach {managed} to {}", role.name);
        }
        let admin = req("iam:AttachRolePolicy", &arn)
            .with("iam:PermissionsBoundary", BOUNDARY_ARN)
            .with(
                "iam:PolicyARN",
                "arn:aws:iam::aws:policy/AdministratorAccess",
            );
        assert!(!may(admin), "AdministratorAccess on {}", role.name);
    }
    // No resource type: granted on "*", limited by the cluster tag.
    let create_eks = req("eks:CreateCluster", "*");
    assert!(may(create_eks
        .clone()
        .with("aws:RequestTag/instantstart:cluster", "demo")));
    assert!(!may(create_eks), "an EKS cluster without the cluster tag");
    // Clusters the product did not make (no cluster tag) cannot be deleted, changed, given
    // access entries or add-ons; with the tag (made here, or tagged at import) they can.
    let eks = "arn:aws:eks:us-west-2:123456789012:cluster/theirs";
    let hp = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123";
    for (action, arn) in [
        ("eks:DeleteCluster", eks),
        ("eks:CreateAccessEntry", eks),
        ("eks:CreateAddon", eks),
        ("eks:CreatePodIdentityAssociation", eks),
        ("sagemaker:DeleteCluster", hp),
        ("sagemaker:UpdateCluster", hp),
        ("sagemaker:UpdateClusterSoftware", hp),
        ("sagemaker:BatchDeleteClusterNodes", hp),
        ("sagemaker:BatchReplaceClusterNodes", hp),
    ] {
        // (An access entry is a plain STANDARD one: `AccessEntriesStandardOnly`.)
        let me = "arn:aws:iam::123456789012:role/instantstart-InstanceRole-AB12";
        let asked = || {
            req(action, arn)
                .with("aws:PrincipalArn", me)
                .with("eks:principalArn", me)
                .with("eks:accessEntryType", "STANDARD")
        };
        assert!(!may(asked()), "{action} on an untagged {arn}");
        assert!(
            may(asked().with("aws:ResourceTag/instantstart:cluster", "theirs")),
            "{action} on a tagged {arn}"
        );
    }
    assert!(may(req("eks:DescribeCluster", eks)), "reads need no tag");
    // OIDC providers: an EKS issuer of the region, never another identity provider.
    let eks_issuer =
        "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC123";
    assert!(may(req("iam:CreateOpenIDConnectProvider", eks_issuer)));
    for other in [
        "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com",
        "arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/ABC123",
    ] {
        assert!(
            !may(req("iam:CreateOpenIDConnectProvider", other)),
            "{other}"
        );
    }
    let other = "arn:aws:iam::123456789012:role/OrganizationAccountAccessRole";
    assert!(!may(
        req("iam:PutRolePolicy", other).with("iam:PermissionsBoundary", BOUNDARY_ARN)
    ));
    assert!(!may(req("iam:DeleteRole", other)));
}

/// The resource a statement's action is exercised on: the first resource our scoped copy
/// names, with its wildcards filled in.
fn sample_resource(ours: &Value) -> String {
    let first = match &ours["Resource"] {
        Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("*").to_string(),
        Value::String(s) => s.clone(),
        _ => "*".into(),
    };
    if first == "*" {
        first
    } else {
        first.replace('*', "x")
    }
}

/// A request context that meets a statement's conditions: keys `Null: false` present, the
/// first value of every equality or pattern.
fn meeting(statement: &Value, mut r: Request) -> Request {
    let Some(ops) = statement["Condition"].as_object() else {
        return r;
    };
    for (op, keys) in ops {
        for (key, wanted) in keys.as_object().into_iter().flatten() {
            let first = match wanted {
                Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
                Value::String(s) => s.clone(),
                _ => String::new(),
            };
            match op.as_str() {
                "Null" if first == "false" => r = r.with(key, "demo"),
                "Null" => {}
                _ => r = r.with(key, &first.replace('*', "x")),
            }
        }
    }
    r
}

#[test]
fn the_load_balancer_controller_may_do_what_its_published_policy_allows_statement_by_statement() {
    let upstream: Value = serde_json::from_str(LBC_POLICY).unwrap();
    let place = &places()[0];
    let ours = inference_alb_policy(&PolicyInputs {
        place,
        cluster_arn: HYPERPOD,
        workspace_arn: None,
    });
    let boundary = boundary();
    let up = upstream["Statement"].as_array().unwrap();
    let scoped = ours["Statement"].as_array().unwrap();
    assert_eq!(
        up.len(),
        scoped.len(),
        "one scoped statement per upstream statement"
    );
    let mut checked = 0;
    let mut cut = BTreeSet::new();
    for (u, o) in up.iter().zip(scoped) {
        let actions: Vec<&str> = match &u["Action"] {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            Value::String(s) => vec![s.as_str()],
            _ => vec![],
        };
        for action in actions {
            let call = meeting(u, req(action, &sample_resource(o)));
            assert_eq!(
                policy::decide(&upstream, &call),
                Decision::Allow,
                "the sample request {call:?} does not exercise the upstream statement {u}"
            );
            let got = policy::effective(&[&ours], Some(&boundary), &call);
            if let Some(why) = boundary::cut(&action.to_ascii_lowercase()) {
                assert_ne!(got, Decision::Allow, "{action} is said to be cut ({why})");
                cut.insert(action);
            } else {
                assert_eq!(got, Decision::Allow, "{call:?} from the statement {u}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} actions");
    assert_eq!(
        cut.into_iter().collect::<Vec<_>>(),
        ["iam:GetServerCertificate", "iam:ListServerCertificates"],
        "the boundary cuts of the controller's policy only its IAM server-certificate reads"
    );
    // What the controller did not make stays out of reach: the published conditions are kept.
    let untagged = req(
        "elasticloadbalancing:DeleteLoadBalancer",
        "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/app/payments/1",
    );
    assert_ne!(
        policy::effective(&[&ours], Some(&boundary), &untagged),
        Decision::Allow
    );
}

#[test]
fn the_vendored_documents_are_the_upstream_files_listed_here() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/service/steps/features/vendored");
    let listed = crate::helpers::assert_provenance(&dir, &[""], ".json");
    assert!(!listed.is_empty());
    // The AWS-managed policies the roles carry: the files the evaluator reads are those listed.
    let managed =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/ports/src/managed");
    let listed = crate::helpers::assert_provenance(&managed, &[""], ".json");
    let known: Vec<String> = policy::managed_names()
        .map(|n| format!("{n}.json"))
        .collect();
    let mut known_sorted = known.clone();
    known_sorted.sort();
    assert_eq!(listed, known_sorted);
}

/// A parliament finding we accept: (issue code, document, substrings of its detail separated by
/// `|`, any of which matches, why).
const JUSTIFIED: &[(&str, &str, &str, &str)] = &[
    (
        "UNKNOWN_CONDITION_FOR_ACTION",
        "control-plane",
        "eks:principalArn for action eks:AssociateAccessPolicy",
        "a condition key of the access-entry resource type, which AssociateAccessPolicy acts on          (Service Authorization Reference); parliament reads the action's own keys only. The          statements also require the key present (Null), so an absent key denies nothing",
    ),
    (
        "RESOURCE_STAR",
        "demo-inference-alb",
        "",
        "the controller's published policy: Describe* and Get* reads, and CreateSecurityGroup, \
         have no resource-level permissions",
    ),
    (
        "UNKNOWN_ACTION",
        "demo-inference-alb",
        "ModifyIpPools",
        "published by the controller (IPAM pools for ALBs), newer than parliament's database",
    ),
    (
        "UNKNOWN_CONDITION_FOR_ACTION",
        "demo-inference-alb",
        "elasticloadbalancing:CreateAction",
        "the controller's published AddTags-on-create condition; parliament's database lacks the key",
    ),
    (
        "UNKNOWN_ACTION",
        "",
        "CallMlflowAppApi|CreateMlflowApp|CreatePresignedMlflowAppUrl|DescribeMlflowApp|ListMlflowApps",
        "the MLflow App actions (Service Authorization Reference), newer than parliament's database",
    ),
    (
        "UNKNOWN_ACTION",
        "",
        "BatchAddClusterNodes|BatchRebootClusterNodes|BatchReplaceClusterNodes|ListClusterEvents|AttachClusterNodeVolume|DetachClusterNodeVolume",
        "HyperPod's node actions, cluster events and node volumes (Service Authorization Reference), newer than parliament's database",
    ),
    (
        "MISMATCHED_TYPE_BUT_USABLE",
        "control-plane",
        "StringEquals requires a value of type String but given Arn",
        "iam:PermissionsBoundary is a String key whose value is the boundary's ARN, as IAM's \
         own examples write it",
    ),
    (
        "RESOURCE_MISMATCH",
        "control-plane",
        "eks:CreateAccessEntry",
        "EksNewEntries grants the entry or association a create makes; the cluster it is made \
         on is granted apart (EksOnOwnClusters), only with the cluster tag",
    ),
    (
        "RESOURCE_MISMATCH",
        "control-plane",
        "sagemaker:CreateCluster",
        "HyperPodPlans grants the training plan and reserved capacity a group names; the cluster \
         itself is granted apart (HyperPod, HyperPodOwnClusters with the cluster tag)",
    ),
    (
        "RESOURCE_STAR",
        "boundary",
        "",
        "a permissions boundary caps; it grants nothing by itself",
    ),
    (
        "UNKNOWN_ACTION",
        "boundary",
        "CopyVolumes|ModifyIpPools|DescribeClusterInference|UpdateClusterInference",
        "named by the AWS-managed policies and the controller's published policy the boundary is \
         derived from, newer than parliament's database",
    ),
    (
        "MISMATCHED_TYPE_BUT_USABLE",
        "boundary",
        "StringEquals requires a value of type String but given Arn",
        "eks:policyArn is compared as AWS's own managed policy compares it (StringEquals)",
    ),
    (
        "UNKNOWN_CONDITION_FOR_ACTION",
        "boundary",
        "Unknown condition iam:AWSServiceName for action",
        "the point of NoIamButServiceLinkedRoles: every IAM action but CreateServiceLinkedRole \
         lacks the key, so StringNotLike holds and the Deny applies",
    ),
];

#[test]
fn parliament_finds_nothing_unexplained_in_any_policy_the_project_writes() {
    let (_tmp, dir) = crate::helpers::temp_dir();
    let mut written = BTreeSet::new();
    for (p, place) in places().iter().enumerate() {
        for role in roles(place) {
            for (i, doc) in role.inline.iter().enumerate() {
                let name = format!("{}.{p}.{i}.json", role.name);
                std::fs::write(dir.join(&name), serde_json::to_vec_pretty(doc).unwrap()).unwrap();
                written.insert(role.name.clone());
            }
        }
    }
    std::fs::write(dir.join("boundary.json"), boundary().to_string()).unwrap();
    std::fs::write(
        dir.join("control-plane.json"),
        control_plane_policy().to_string(),
    )
    .unwrap();
    assert!(written.len() >= 10, "{written:?}");
    let parliament = crate::helpers::venv_python().with_file_name("parliament");
    let out = std::process::Command::new(&parliament)
        .arg("--directory")
        .arg(&dir)
        .arg("--json")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", parliament.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() || !stdout.trim().is_empty(),
        "parliament failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut used = BTreeSet::new();
    let mut unexplained = Vec::new();
    let mut findings = 0;
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let f: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        findings += 1;
        let issue = f["issue"].as_str().unwrap_or_default();
        let file = f["location"]["filepath"].as_str().unwrap_or_default();
        let detail = f["detail"].to_string();
        match JUSTIFIED.iter().position(|(code, doc, texts, _)| {
            *code == issue && file.contains(doc) && texts.split('|').any(|t| detail.contains(t))
        }) {
            Some(i) => {
                used.insert(i);
            }
            None => unexplained.push(format!("{issue} in {file}: {detail}")),
        }
    }
    assert!(unexplained.is_empty(), "{}", unexplained.join("\n"));
    let stale: Vec<_> = (0..JUSTIFIED.len())
        .filter(|i| !used.contains(i))
        .map(|i| JUSTIFIED[i])
        .collect();
    assert!(
        stale.is_empty(),
        "justifications no finding needs ({findings} findings): {stale:?}"
    );
}

/// Actions of the control plane's policy newer than parliament's database (each is in the
/// Service Authorization Reference; `iam-resource-types.tsv` names its page).
const NEWER_THAN_PARLIAMENT: &[&str] = &[
    "sagemaker:AttachClusterNodeVolume",
    "sagemaker:BatchRebootClusterNodes",
    "sagemaker:BatchReplaceClusterNodes",
    "sagemaker:CallMlflowAppApi",
    "sagemaker:CreateMlflowApp",
    "sagemaker:CreatePresignedMlflowAppUrl",
    "sagemaker:DescribeMlflowApp",
    "sagemaker:DetachClusterNodeVolume",
    "sagemaker:ListClusterEvents",
    "sagemaker:ListMlflowApps",
];

#[test]
fn the_resource_type_table_agrees_with_parliaments_copy_of_the_authorization_reference() {
    // A grant on ARNs of an action with no resource type does nothing (eks:CreateCluster was
    // one): the table the template is checked against must say what IAM says.
    let out = std::process::Command::new(crate::helpers::venv_python())
        .args([
            "-c",
            "import os, parliament; print(os.path.dirname(parliament.__file__))",
        ])
        .output()
        .unwrap();
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let text = std::fs::read_to_string(format!("{dir}/iam_definition.json"))
        .unwrap_or_else(|e| panic!("parliament's database in {dir}: {e}"));
    let services: Value = serde_json::from_str(&text).unwrap();
    let mut known = std::collections::BTreeMap::new();
    for s in services.as_array().unwrap() {
        for p in s["privileges"].as_array().into_iter().flatten() {
            let typed = p["resource_types"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["resource_type"].as_str().is_some_and(|t| !t.is_empty()));
            known.insert(
                format!(
                    "{}:{}",
                    s["prefix"].as_str().unwrap(),
                    p["privilege"].as_str().unwrap()
                ),
                typed,
            );
        }
    }
    let table = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cloudformation/iam-resource-types.tsv"),
    )
    .unwrap();
    let (mut checked, mut unknown) = (0, BTreeSet::new());
    for row in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cells: Vec<&str> = row.split('\t').collect();
        let (action, types) = (cells[0], cells[1]);
        match known.get(action) {
            Some(typed) => {
                assert_eq!(
                    *typed,
                    types != "-",
                    "{action}: the table says `{types}`, the reference says it has {}resource types",
                    if *typed { "" } else { "no " }
                );
                checked += 1;
            }
            None => {
                unknown.insert(action);
            }
        }
    }
    assert!(checked >= 50, "{checked}");
    assert_eq!(
        unknown,
        NEWER_THAN_PARLIAMENT
            .iter()
            .copied()
            .collect::<BTreeSet<_>>(),
        "actions parliament does not know: list each (and check it by hand), or drop a stale one"
    );
}
