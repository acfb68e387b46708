//! The stack's permissions boundary, derived: it allows no action that none of the product's
//! role documents (inline, and the AWS-managed policies attached, as AWS publishes them) names,
//! every action they name is either in it or cut for a stated reason, and a role granted
//! everything under it is still denied the account's crown jewels.

use std::collections::{BTreeMap, BTreeSet};

use instantstart::cloud::policy::{self, glob, statements, strings, Decision, Request};
use serde_json::json;

use super::{boundary, identity, places, roles, ACCOUNT};

/// Every action an `Allow` statement of a role's documents names (as written, lower case),
/// with the roles that name it.
fn named_actions() -> BTreeMap<String, BTreeSet<String>> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for place in places() {
        for role in roles(&place) {
            for doc in identity(&role) {
                for s in statements(&doc) {
                    if s["Effect"] != "Allow" {
                        continue;
                    }
                    for a in strings(&s["Action"]) {
                        named
                            .entry(a.to_ascii_lowercase())
                            .or_default()
                            .insert(role.name.clone());
                    }
                }
            }
        }
    }
    named
}

/// The actions the boundary's `Allow` statements name (lower case).
fn boundary_actions() -> BTreeSet<String> {
    let b = boundary();
    statements(&b)
        .into_iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(|s| {
            strings(&s["Action"])
                .into_iter()
                .map(str::to_ascii_lowercase)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What a role's documents name and the boundary does not allow, and why.
const CUT: &[(&str, &str)] = &[
    (
        "iam:getservercertificate|iam:listservercertificates",
        "the Load Balancer Controller's reads of IAM server certificates: listeners take ACM \
         certificates, and the boundary grants no IAM but service-linked roles",
    ),
    (
        "iam:passrole",
        "passing a role hands its own, unbounded permissions to a service: the inference \
         operator's managed policy passes SageMakerHyperPodInference* for SageMaker endpoint \
         registrations the product does not make, the Spaces controller's passes \
         sagemaker-space-* to Systems Manager for remote IDE access",
    ),
    (
        "ec2:modifyinstanceattribute",
        "the in-tree cloud provider's change to EC2 worker nodes (AmazonEKSClusterPolicy); a \
         HyperPod cluster's nodes are not EC2 instances of this account",
    ),
    (
        "ssm:addtagstoresource|ssm:createactivation|ssm:createdocument|ssm:deleteactivation|\
         ssm:deregistermanagedinstance|ssm:describeactivations|ssm:describedocument|\
         ssm:describeinstanceinformation|ssm:describesessions|ssm:getservicesetting|\
         ssm:resetservicesetting|ssm:startsession|ssm:updateservicesetting|kms:decrypt|\
         kms:generatedatakey",
        "the Spaces controller's remote IDE access through Systems Manager hybrid activations: \
         an activation needs a role passed to Systems Manager (never granted here), and \
         sessions and service settings reach past the cluster; spaces open through the \
         product's own proxy instead",
    ),
];

/// Why the boundary cuts an action a role document names (lower case); `None` when it does not.
pub(super) fn cut(action: &str) -> Option<&'static str> {
    CUT.iter()
        .find(|(names, _)| names.split('|').any(|n| n.trim() == action))
        .map(|(_, why)| *why)
}

#[test]
fn the_boundary_allows_no_action_that_no_role_document_names() {
    let named = named_actions();
    let extra: Vec<String> = boundary_actions()
        .into_iter()
        .filter(|b| !named.contains_key(b))
        .collect();
    assert!(
        extra.is_empty(),
        "the boundary allows actions no role's documents (inline or AWS-managed) name: {extra:?}"
    );
}

#[test]
fn every_action_a_role_document_names_is_in_the_boundary_or_cut_for_a_reason() {
    let named = named_actions();
    let bound = boundary_actions();
    let mut wrong = Vec::new();
    for (action, roles) in &named {
        let allowed = bound.iter().any(|b| glob(b, action, true));
        match (allowed, cut(action)) {
            (true, Some(_)) => wrong.push(format!("{action} is allowed and listed as cut")),
            (false, None) => wrong.push(format!(
                "{action} (named for {roles:?}) is cut without a reason"
            )),
            _ => {}
        }
    }
    for (names, _) in CUT {
        for n in names.split('|').map(str::trim) {
            if !named.contains_key(n) {
                wrong.push(format!(
                    "{n} is listed as cut but no role document names it"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A request as made by a principal of this account.
fn call(action: &str, resource: &str) -> Request {
    Request::new(action, resource).in_account(ACCOUNT)
}

#[test]
fn a_role_given_everything_under_the_boundary_is_denied_the_crown_jewels() {
    let boundary = boundary();
    let everything = json!({"Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]});
    let may = |r: &Request| policy::effective(&[&everything], Some(&boundary), r);
    let arn = |service: &str, rest: &str| format!("arn:aws:{service}:us-west-2:{ACCOUNT}:{rest}");
    let untagged_group = call(
        "ec2:AuthorizeSecurityGroupIngress",
        &arn("ec2", "security-group/sg-0customer"),
    );
    let jewels = [
        call(
            "ec2:ModifySnapshotAttribute",
            &arn("ec2", "snapshot/snap-1"),
        ),
        call("ec2:ModifyImageAttribute", &arn("ec2", "image/ami-1")),
        call("ec2:CreateInstanceExportTask", &arn("ec2", "instance/i-1")),
        call("ec2:RunInstances", &arn("ec2", "instance/*")),
        call("ec2:TerminateInstances", &arn("ec2", "instance/i-1")),
        call(
            "ec2:DeleteSecurityGroup",
            &arn("ec2", "security-group/sg-0customer"),
        ),
        untagged_group.clone(),
        call("ram:CreateResourceShare", &arn("ram", "resource-share/*")),
        call(
            "iam:CreateRole",
            &format!("arn:aws:iam::{ACCOUNT}:role/escape"),
        ),
        call(
            "iam:PutRolePolicy",
            &format!("arn:aws:iam::{ACCOUNT}:role/instantstart/demo-keda"),
        ),
        call(
            "iam:UpdateAssumeRolePolicy",
            &format!("arn:aws:iam::{ACCOUNT}:role/admin"),
        ),
        call(
            "iam:PassRole",
            &format!("arn:aws:iam::{ACCOUNT}:role/admin"),
        ),
        call(
            "iam:CreateAccessKey",
            &format!("arn:aws:iam::{ACCOUNT}:user/alice"),
        ),
        call(
            "sts:AssumeRole",
            &format!("arn:aws:iam::{ACCOUNT}:role/admin"),
        ),
        call(
            "secretsmanager:GetSecretValue",
            &arn("secretsmanager", "secret:prod-db"),
        ),
        call(
            "ssm:GetParameter",
            &arn("ssm", "parameter/prod/db/password"),
        ),
        call("kms:Decrypt", &arn("kms", "key/1234")),
        call("kms:CreateGrant", &arn("kms", "key/1234")),
        call(
            "logs:DeleteLogGroup",
            &arn("logs", "log-group:/aws/sagemaker/Clusters/demo"),
        ),
        call(
            "logs:PutLogEvents",
            &arn("logs", "log-group:/app/audit:log-stream:x"),
        ),
        call("cloudtrail:StopLogging", &arn("cloudtrail", "trail/org")),
        call("organizations:LeaveOrganization", "*"),
        call("eks:DeleteCluster", &arn("eks", "cluster/prod")),
        call("eks:CreateAccessEntry", &arn("eks", "cluster/prod")),
        call("sagemaker:DeleteCluster", &arn("sagemaker", "cluster/prod")),
        call("lambda:CreateFunction", &arn("lambda", "function:x")),
        call(
            "s3:PutBucketPolicy",
            "arn:aws:s3:::sagemaker-instantstart-demo-123456789012",
        )
        .with("s3:ResourceAccount", ACCOUNT),
        call("s3:GetObject", "arn:aws:s3:::customer-payroll/2026.csv")
            .with("s3:ResourceAccount", ACCOUNT),
        call(
            "s3:GetObject",
            "arn:aws:s3:::sagemaker-instantstart-demo-123456789012/k",
        )
        .with("s3:ResourceAccount", "111111111111"),
    ];
    let reached: Vec<String> = jewels
        .iter()
        .filter(|r| may(r) == Decision::Allow)
        .map(|r| format!("{} on {}", r.action, r.resource))
        .collect();
    assert!(reached.is_empty(), "a role given *:* reaches: {reached:#?}");
    // The cut is the tag, not the action: a group the Load Balancer Controller made opens.
    let controllers = untagged_group.with("aws:ResourceTag/elbv2.k8s.aws/cluster", "demo");
    assert_eq!(may(&controllers), Decision::Allow);
    // And what the boundary does allow still goes through for such a role.
    let put = call(
        "s3:PutObject",
        "arn:aws:s3:::sagemaker-instantstart-demo-123456789012/k",
    )
    .with("s3:ResourceAccount", ACCOUNT);
    assert_eq!(may(&put), Decision::Allow);
}

/// The boundary as a table for `docs/security.md`, read from the template.
fn boundary_table() -> String {
    use instantstart::cloud::sandbox::rules::template_boundary;
    let doc = template_boundary(&[
        ("AWS::Partition", "aws"),
        ("AWS::Region", "<region>"),
        ("AWS::AccountId", "<account>"),
        ("SharedBucket.Arn", "arn:aws:s3:::<shared bucket>"),
    ]);
    let mut out = String::from(
        "| statement | effect | actions | resources | condition |\n| --- | --- | --- | --- | --- |\n",
    );
    for s in statements(&doc) {
        let actions = strings(&s["Action"]);
        let shown = if actions.len() <= 8 {
            actions
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            let mut by: BTreeMap<&str, usize> = BTreeMap::new();
            for a in &actions {
                *by.entry(a.split(':').next().unwrap_or_default())
                    .or_default() += 1;
            }
            let each: Vec<String> = by.iter().map(|(s, n)| format!("{s} ({n})")).collect();
            format!("{} actions: {}", actions.len(), each.join(", "))
        };
        let resources = strings(&s["Resource"])
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let condition = match s.get("Condition") {
            Some(c) => format!("`{c}`"),
            None => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {shown} | {resources} | {condition} |\n",
            s["Sid"].as_str().unwrap_or_default(),
            s["Effect"].as_str().unwrap_or_default(),
        ));
    }
    out
}

/// `docs/security.md` shows the boundary as the template has it; `INSTANTSTART_BLESS=1`
/// rewrites the table after the template changes.
#[test]
fn the_security_guide_shows_the_boundary_the_template_has() {
    let table = boundary_table();
    crate::docs::generated_block(
        "docs/security.md",
        "boundary",
        &table,
        "iam::boundary::the_security_guide",
    );
    assert!(table.contains("| NeverTheCrownJewels | Deny |"));
}
