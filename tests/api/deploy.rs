//! The deployment artefacts: the CloudFormation template's security properties, its IAM policy
//! against the AWS actions the adapter really calls, and a deployment into moto's CloudFormation.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn template() -> Value {
    let text = std::fs::read_to_string(root().join("cloudformation/instantstart.yaml")).unwrap();
    assert!(
        !text.contains(" !"),
        "use long-form intrinsics (Fn::Sub, Ref) so the template is plain YAML"
    );
    serde_yaml::from_str(&text).expect("template YAML")
}

fn resources_of<'a>(t: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .collect()
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::Null => vec![],
        other => vec![other.clone()],
    }
}

/// Every statement of every IAM policy in the template.
fn statements(t: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for (_, r) in resources_of(t, "AWS::IAM::RolePolicy")
        .into_iter()
        .chain(resources_of(t, "AWS::IAM::Policy"))
    {
        out.extend(list(&r["Properties"]["PolicyDocument"]["Statement"]));
    }
    for (_, r) in resources_of(t, "AWS::IAM::Role") {
        for p in list(&r["Properties"]["Policies"]) {
            out.extend(list(&p["PolicyDocument"]["Statement"]));
        }
    }
    out
}

#[test]
fn the_template_is_locked_down() {
    let t = template();
    let text = std::fs::read_to_string(root().join("cloudformation/instantstart.yaml")).unwrap();
    assert!(!text.contains("AdministratorAccess"));
    assert!(!text.contains("TemplateURL"), "no nested stacks");

    // No inbound rule anywhere.
    assert!(resources_of(&t, "AWS::EC2::SecurityGroupIngress").is_empty());
    for (name, sg) in resources_of(&t, "AWS::EC2::SecurityGroup") {
        assert!(
            sg["Properties"].get("SecurityGroupIngress").is_none(),
            "{name} has ingress rules"
        );
    }
    // IMDSv2 only; every volume encrypted; the instance uses that launch template.
    let lts = resources_of(&t, "AWS::EC2::LaunchTemplate");
    assert_eq!(lts.len(), 1);
    let data = &lts[0].1["Properties"]["LaunchTemplateData"];
    assert_eq!(data["MetadataOptions"]["HttpTokens"], "required");
    for bd in list(&data["BlockDeviceMappings"]) {
        assert_eq!(bd["Ebs"]["Encrypted"], true, "{bd}");
    }
    let (_, instance) = resources_of(&t, "AWS::EC2::Instance")[0];
    assert_eq!(
        instance["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"],
        lts[0].0.as_str()
    );
    let user_data = instance["Properties"]["UserData"].to_string();
    assert!(
        user_data.contains("--network host")
            && user_data.contains("INSTANTSTART_BIND=127.0.0.1:3099")
    );
    // Upgrades: the unit reads the image from the file cfn-init writes, and cfn-hup rewrites
    // it and restarts the service when a stack update changes it.
    assert!(user_data.contains("EnvironmentFile=/etc/instantstart/instantstart.env"));
    assert!(user_data.contains("pull ${!IMAGE}") && user_data.contains("enable --now cfn-hup"));
    let init = &instance["Metadata"]["AWS::CloudFormation::Init"]["config"]["files"];
    let env = &init["/etc/instantstart/instantstart.env"]["content"]["Fn::Sub"];
    assert_eq!(env[1]["Image"]["Ref"], "ImageUri");
    // People sign in (docs/access.md): identities on, tokens made for the stack's name, the
    // administrators the stack was given.
    assert!(user_data.contains("-e INSTANTSTART_IDENTITY=iam"));
    assert!(user_data.contains("-e INSTANTSTART_ADMINS=${!ADMINS}"));
    assert!(user_data.contains("-e INSTANTSTART_DEPLOYMENT_ID=${!DEPLOYMENT_ID}"));
    let env_text = env[0].as_str().unwrap();
    assert!(
        env_text.contains("DEPLOYMENT_ID=${AWS::StackName}")
            && env_text.contains("ADMINS=${Admins}")
    );
    assert_eq!(env[1]["Admins"]["Ref"], "Administrators");
    assert!(
        t["Parameters"]["Administrators"].get("Default").is_none(),
        "an administrator is required"
    );
    assert!(init["/etc/systemd/system/cfn-hup.service"]["content"]
        .as_str()
        .is_some_and(|u| u.contains("ExecStart=/opt/aws/bin/cfn-hup")));
    let hook = init["/etc/cfn/hooks.d/instantstart.conf"]["content"]["Fn::Sub"]
        .as_str()
        .unwrap();
    assert!(
        hook.contains("triggers=post.update") && hook.contains("systemctl restart instantstart")
    );

    // Bucket: encrypted, versioned, public access blocked, TLS only.
    let (bucket_name, bucket) = resources_of(&t, "AWS::S3::Bucket")[0];
    let b = &bucket["Properties"];
    assert!(b["BucketEncryption"]["ServerSideEncryptionConfiguration"].is_array());
    assert_eq!(b["VersioningConfiguration"]["Status"], "Enabled");
    for k in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(b["PublicAccessBlockConfiguration"][k], true, "{k}");
    }
    // It is the server's bucket: named as HyperPod requires, and handed to the server, which
    // may reach no other bucket.
    assert!(b["BucketName"]["Fn::Sub"]
        .as_str()
        .is_some_and(|n| n.starts_with("sagemaker-")));
    let env = &init["/etc/instantstart/instantstart.env"]["content"]["Fn::Sub"];
    assert!(env[0]
        .as_str()
        .is_some_and(|e| e.contains("SHARED_BUCKET=${Bucket}")));
    assert_eq!(env[1]["Bucket"]["Ref"], bucket_name.as_str());
    assert!(user_data.contains("-e INSTANTSTART_SHARED_BUCKET=${!SHARED_BUCKET}"));
    // The data buckets the boundary grants reach the server too, which refuses any other.
    assert!(env[0]
        .as_str()
        .is_some_and(|e| e.contains("DATA_BUCKETS=${DataBuckets}")));
    assert_eq!(env[1]["DataBuckets"]["Ref"], "DataBuckets");
    assert!(user_data.contains("-e INSTANTSTART_DATA_BUCKETS=${!DATA_BUCKETS}"));
    let role = &resources_of(&t, "AWS::IAM::Role")
        .into_iter()
        .find(|(n, _)| n.as_str() == "InstanceRole")
        .unwrap()
        .1;
    // It creates no bucket but the stack's (which exists): the creating actions name it alone.
    let creating = [
        "s3:CreateBucket",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutBucketTagging",
        "s3:PutEncryptionConfiguration",
    ];
    let mut seen = 0;
    for s in list(&role["Properties"]["Policies"])
        .iter()
        .flat_map(|p| list(&p["PolicyDocument"]["Statement"]))
    {
        if list(&s["Action"])
            .iter()
            .any(|a| a.as_str().is_some_and(|a| creating.contains(&a)))
        {
            seen += 1;
            assert_eq!(
                list(&s["Resource"]),
                vec![json!({"Fn::GetAtt": [bucket_name, "Arn"]})],
                "{s}"
            );
        }
    }
    assert!(seen > 0, "no statement grants CreateBucket");
    let (_, policy) = resources_of(&t, "AWS::S3::BucketPolicy")[0];
    assert_eq!(policy["Properties"]["Bucket"]["Ref"], bucket_name.as_str());
    let deny = list(&policy["Properties"]["PolicyDocument"]["Statement"]);
    assert!(
        deny.iter()
            .any(|s| s["Effect"] == "Deny"
                && s["Condition"]["Bool"]["aws:SecureTransport"] == "false")
    );

    // IAM: no `*` action on `*` resources; PassRole scoped to named roles and services.
    for s in statements(&t) {
        let actions: Vec<String> = list(&s["Action"])
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        let resources = list(&s["Resource"]);
        let any_resource = resources.iter().any(|r| r == "*");
        assert!(
            !(any_resource && actions.iter().any(|a| a == "*" || a.ends_with(":*"))),
            "{s}"
        );
        // A create with no resource type (eks:CreateCluster) is granted on `*` only: the
        // cluster tag its request must carry is then what limits it.
        let tagged_create = s["Condition"]["Null"]["aws:RequestTag/instantstart:cluster"]
            == "false"
            && actions.iter().all(|a| a.contains(":Create"));
        // A Deny on `*` takes away; it grants nothing.
        if any_resource && !tagged_create && s["Effect"] != "Deny" {
            assert!(
                actions
                    .iter()
                    .all(|a| a.contains(":Describe") || a.contains(":List") || a.contains(":Get")),
                "only reads (or tagged creates) may use `*`: {s}"
            );
        }
        if actions.iter().any(|a| a == "iam:PassRole") {
            assert!(!any_resource, "{s}");
            assert!(
                s["Condition"]["StringEquals"]["iam:PassedToService"].is_array(),
                "{s}"
            );
        }
    }
    // Roles are created only with the boundary, which allows no IAM beyond service-linked roles.
    let create = statements(&t)
        .into_iter()
        .find(|s| list(&s["Action"]).contains(&Value::from("iam:CreateRole")))
        .expect("a CreateRole statement");
    assert_eq!(
        create["Condition"]["StringEquals"]["iam:PermissionsBoundary"]["Ref"],
        "CreatedRolesBoundary"
    );
    // Permissions of a role change only when it carries the boundary.
    for action in [
        "iam:PutRolePolicy",
        "iam:AttachRolePolicy",
        "iam:DeleteRolePolicy",
        "iam:DetachRolePolicy",
    ] {
        let granting: Vec<Value> = statements(&t)
            .into_iter()
            .filter(|s| list(&s["Action"]).contains(&Value::from(action)))
            .collect();
        assert!(!granting.is_empty(), "{action} is granted somewhere");
        for s in granting {
            assert_eq!(
                s["Condition"]["StringEquals"]["iam:PermissionsBoundary"]["Ref"],
                "CreatedRolesBoundary",
                "{action}: {s}"
            );
        }
    }
    let (_, boundary) = resources_of(&t, "AWS::IAM::ManagedPolicy")
        .into_iter()
        .find(|(n, _)| n.as_str() == "CreatedRolesBoundary")
        .expect("boundary policy");
    // The boundary allows no IAM but service-linked roles (its Deny statements name more).
    for s in list(&boundary["Properties"]["PolicyDocument"]["Statement"])
        .into_iter()
        .filter(|s| s["Effect"] == "Allow")
    {
        for a in list(&s["Action"]) {
            let a = a.as_str().unwrap();
            assert!(
                !a.starts_with("iam:") || a == "iam:CreateServiceLinkedRole",
                "{a}"
            );
            assert!(a != "*", "{s}");
        }
    }
    // The service is told which boundary to put on the roles it creates.
    assert!(user_data.contains("INSTANTSTART_PERMISSIONS_BOUNDARY=${!BOUNDARY}"));
    assert_eq!(
        init["/etc/instantstart/instantstart.env"]["content"]["Fn::Sub"][1]["Boundary"]["Ref"],
        "CreatedRolesBoundary"
    );
    let out = t["Outputs"]["PortForwardCommand"]["Value"].to_string();
    assert!(
        out.contains("AWS-StartPortForwardingSession") && out.contains("portNumber=3099"),
        "{out}"
    );
}

/// The IAM action for an API operation, where the names differ.
fn iam_action(service: &str, op: &str) -> String {
    let action = match (service, op) {
        ("s3", "HeadBucket" | "ListObjectsV2") => "ListBucket",
        ("s3", "PutBucketEncryption") => "PutEncryptionConfiguration",
        ("s3", "PutPublicAccessBlock") => "PutBucketPublicAccessBlock",
        _ => op,
    };
    format!("{service}:{action}")
}

/// Every AWS operation named in the adapter (`crates/aws/src/`): the string literals that are
/// operation names, attributed to the file's service or to the service named right before them.
fn adapter_actions() -> BTreeSet<String> {
    const VERBS: &[&str] = &[
        "Allocate",
        "Associate",
        "Attach",
        "Authorize",
        "Batch",
        "Create",
        "Delete",
        "Describe",
        "Detach",
        "Disassociate",
        "Get",
        "Head",
        "List",
        "Modify",
        "Put",
        "Query",
        "Release",
        "Replace",
        "Simulate",
        "Update",
    ];
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("crates/aws/src")).unwrap() {
        let path = entry.unwrap().path();
        let src = std::fs::read_to_string(&path).unwrap();
        let file_service = src
            .split("const S: &str = \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .map(str::to_string);
        let parts: Vec<&str> = src.split('"').collect();
        // Odd indices are the insides of string literals (the adapter has no escaped quotes).
        for i in (1..parts.len()).step_by(2) {
            let lit = parts[i];
            let is_op = lit.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && lit.chars().all(|c| c.is_ascii_alphanumeric())
                // A verb followed by a noun (`DeleteVpc`), not a state (`Deleted`).
                && VERBS.iter().any(|v| {
                    lit.strip_prefix(v)
                        .and_then(|rest| rest.chars().next())
                        .is_some_and(|c| c.is_ascii_uppercase())
                });
            if !is_op {
                continue;
            }
            let before = parts.get(i.wrapping_sub(2)).copied().unwrap_or("");
            let between = parts.get(i - 1).copied().unwrap_or("");
            let service =
                if matches!(before, "sts" | "servicequotas" | "grafana") && between.trim() == "," {
                    before.to_string()
                } else {
                    file_service
                        .clone()
                        .unwrap_or_else(|| panic!("{}: no service for {lit}", path.display()))
                };
            out.insert(iam_action(&service, lit));
        }
    }
    out
}

#[test]
fn the_policy_grants_exactly_what_the_adapter_calls() {
    let t = template();
    let granted: BTreeSet<String> = statements(&t)
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(|s| list(&s["Action"]))
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let called = adapter_actions();
    assert!(
        called.len() > 60,
        "the scan found too few operations: {called:?}"
    );
    assert!(
        called.contains("sagemaker:BatchReplaceClusterNodes")
            && called.contains("sts:GetCallerIdentity")
    );
    // Tagging on create, and handing roles to EKS and SageMaker.
    let implied = [
        "ec2:CreateTags",
        "eks:TagResource",
        "sagemaker:AddTags",
        "aps:TagResource",
        "iam:TagRole",
        "iam:TagOpenIDConnectProvider",
        "iam:PassRole",
        // A fresh account's first cluster creates the EKS and HyperPod service-linked roles,
        // and HyperPod manages access entries on the caller's behalf.
        "iam:CreateServiceLinkedRole",
        "eks:DeleteAccessEntry",
        // cfn-init and cfn-hup on the instance read its settings (upgrades by stack update).
        "cloudformation:DescribeStackResource",
        // The MLflow tracking REST API is called over HTTPS with SigV4, not through an SDK
        // operation the scan sees (the paths in src/service/mlflow.rs). An MLflow App checks
        // sagemaker:CallMlflowAppApi; a tracking server the granular sagemaker-mlflow actions.
        "sagemaker:CallMlflowAppApi",
        "sagemaker-mlflow:GetExperimentByName",
        "sagemaker-mlflow:SearchRuns",
        "sagemaker-mlflow:GetMetricHistory",
        // SageMaker checks the caller for it when a scheduler config or compute quota is made
        // (a dependent action in the Service Authorization Reference).
        "eks:ListAssociatedAccessPolicies",
    ];
    let missing: Vec<&String> = called.iter().filter(|a| !granted.contains(*a)).collect();
    assert!(
        missing.is_empty(),
        "the template does not grant: {missing:?}"
    );
    let extra: Vec<&String> = granted
        .iter()
        .filter(|a| !called.contains(*a) && !implied.contains(&a.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "the template grants actions the adapter never calls: {extra:?}"
    );
}

#[test]
fn the_template_deploys_into_moto_cloudformation() {
    let out = std::process::Command::new(crate::helpers::venv_python())
        .arg(crate::helpers::peer("cfn_deploy.py"))
        .arg(root().join("cloudformation/instantstart.yaml"))
        .output()
        .expect("run the CloudFormation deployment");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("DEPLOYED"), "{stdout}");
}

/// The resource types of each action, from the table kept beside the template (its rows cite
/// the Service Authorization Reference); `None` for actions without resource-level permissions.
fn resource_types() -> std::collections::BTreeMap<String, Option<Vec<String>>> {
    let text =
        std::fs::read_to_string(root().join("cloudformation/iam-resource-types.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "action, resource types, source: {l}");
            assert!(cols[2].starts_with("https://docs.aws.amazon.com/"), "{l}");
            let types = (cols[1] != "-").then(|| cols[1].split(',').map(str::to_string).collect());
            (cols[0].to_string(), types)
        })
        .collect()
}

/// The resource part of a policy resource (what follows the ARN's fifth colon), with the
/// template's intrinsics resolved far enough to classify it; `None` for the bare `*`.
fn resource_part(t: &Value, r: &Value) -> Option<String> {
    let arn = match r {
        Value::String(s) => s.clone(),
        Value::Object(m) if m.contains_key("Fn::Sub") => m["Fn::Sub"]
            .as_str()
            .unwrap()
            .replace("${SharedBucket.Arn}", "arn:aws:s3:::bucket")
            .replace("${AWS::Partition}", "aws")
            .replace("${AWS::Region}", "us-west-2")
            .replace("${AWS::AccountId}", "123456789012"),
        Value::Object(m) if m.contains_key("Fn::GetAtt") => {
            let name = m["Fn::GetAtt"][0].as_str().unwrap();
            assert_eq!(t["Resources"][name]["Type"], "AWS::S3::Bucket", "{r}");
            "arn:aws:s3:::bucket".into()
        }
        Value::Object(m) if m.get("Ref") == Some(&Value::from("AWS::StackId")) => {
            "arn:aws:cloudformation:r:a:stack/name/id".into()
        }
        other => panic!("unclassified resource {other}"),
    };
    if arn == "*" {
        return None;
    }
    Some(arn.splitn(6, ':').nth(5).unwrap_or_default().to_string())
}

/// A type is the start of its ARNs' resource part; a `*` in it stands for any text (a log
/// stream's ARN names its group first: `log-group:*:log-stream:`).
fn part_is_of_type(part: &str, ty: &str) -> bool {
    match ty {
        _ if part == "*" => true,
        "bucket" => !part.contains('/'),
        "object" => part.contains('/'),
        pattern => {
            let mut pieces = pattern.split('*');
            let Some(rest) = pieces.next().and_then(|first| part.strip_prefix(first)) else {
                return false;
            };
            pieces
                .try_fold(rest, |rest, piece| {
                    rest.find(piece).map(|at| &rest[at + piece.len()..])
                })
                .is_some()
        }
    }
}

/// The doctor asks IAM about every call the product makes: each action the AWS adapter calls
/// has a row in the product's table of calls, which names the template statement granting it.
#[test]
fn the_doctors_table_has_every_call_of_the_adapter() {
    let rows: BTreeSet<&str> = instantstart::cloud::calls::CALLS
        .iter()
        .map(|c| c.action)
        .collect();
    for action in adapter_actions() {
        // The doctor's own question, and the calls made in the user's name, not the role's.
        if matches!(action.as_str(), "iam:SimulatePrincipalPolicy") {
            continue;
        }
        assert!(
            rows.contains(action.as_str()),
            "{action} is called by the adapter but the doctor's table (cloud::calls) does not ask about it"
        );
    }
    let t = template();
    for c in instantstart::cloud::calls::CALLS {
        assert!(
            statements(&t).iter().any(
                |s| s["Sid"] == c.statement && list(&s["Action"]).iter().any(|a| a == c.action)
            ),
            "{}: the statement `{}` of the template does not grant it",
            c.action,
            c.statement
        );
    }
}

#[test]
fn every_grant_matches_the_resource_types_its_action_supports() {
    let t = template();
    let table = resource_types();
    for action in adapter_actions() {
        assert!(
            table.contains_key(&action),
            "{action} is called by the adapter but not in cloudformation/iam-resource-types.tsv"
        );
    }
    for s in statements(&t)
        .into_iter()
        .filter(|s| s["Effect"] == "Allow")
    {
        let parts: Vec<Option<String>> = list(&s["Resource"])
            .iter()
            .map(|r| resource_part(&t, r))
            .collect();
        for a in list(&s["Action"]) {
            let a = a.as_str().unwrap();
            let Some(types) = table.get(a) else {
                panic!("{a} is granted but not in cloudformation/iam-resource-types.tsv")
            };
            match types {
                // IAM grants such an action only on "*": any ARN makes the grant a no-op.
                None => assert_eq!(
                    parts,
                    [None],
                    "{a} has no resource-level permissions: grant it on \"*\" alone: {s}"
                ),
                Some(types) => {
                    assert!(
                        parts.iter().all(Option::is_some),
                        "{a} supports resource-level permissions; grant it on ARNs: {s}"
                    );
                    assert!(
                        parts
                            .iter()
                            .flatten()
                            .any(|p| types.iter().any(|ty| part_is_of_type(p, ty))),
                        "{a} is granted on {parts:?}, none of which is of its types {types:?}"
                    );
                }
            }
        }
    }
}

/// Every role the product makes (a cluster's, the account's) is one the control plane's role
/// may create, tag, manage and change; and KEDA's, bound by pod identity, one it may pass.
/// A role kind missing from these lists is an AccessDenied on the first real account.
#[test]
fn the_control_plane_may_make_every_role_the_product_makes() {
    use instantstart::cloud::policy::glob;
    use instantstart::service::steps::roles::cluster_role_names;
    let t = template();
    let policy = &t["Resources"]["InstanceRole"]["Properties"]["Policies"][0]["PolicyDocument"];
    let patterns = |sid: &str| -> Vec<String> {
        let s = list(&policy["Statement"])
            .into_iter()
            .find(|s| s["Sid"] == sid)
            .unwrap_or_else(|| panic!("no statement {sid}"));
        list(&s["Resource"])
            .iter()
            .filter_map(|r| r["Fn::Sub"].as_str())
            .filter_map(|r| r.split_once(":role/").map(|(_, p)| p.to_string()))
            .collect()
    };
    // Every role is made under the product's IAM path, and named by it in the policy.
    let path = instantstart::cloud::ROLE_PATH.trim_start_matches('/');
    let mut roles: Vec<String> = cluster_role_names("demo")
        .into_iter()
        .map(|r| format!("{path}{r}"))
        .collect();
    roles.push(format!(
        "{path}{}",
        instantstart::service::steps::mlflow::APP_ROLE
    ));
    assert!(roles.len() >= 12, "{roles:?}");
    for sid in [
        "CreateOwnRolesWithinTheBoundary",
        "TagOwnRolesOnCreate",
        "ManageOwnRoles",
        "ChangePermissionsOfBoundedRoles",
    ] {
        let allowed = patterns(sid);
        let missing: Vec<&String> = roles
            .iter()
            .filter(|r| !allowed.iter().any(|p| glob(p, r, false)))
            .collect();
        assert!(missing.is_empty(), "{sid} names no pattern for {missing:?}");
    }
    let passed = patterns("PassOwnRolesToTheirServices");
    let keda = format!(
        "{path}{}",
        instantstart::service::steps::keda::keda_role_name("demo")
    );
    assert!(
        passed.iter().any(|p| glob(p, &keda, false)),
        "{keda} is bound by pod identity, which needs iam:PassRole"
    );
}
