//! IAM policy evaluation, offline: whether a set of identity policies and a permissions boundary
//! let one request through. It follows AWS's evaluation logic as far as it can be decided
//! without AWS — an explicit `Deny` in either wins; otherwise the identity policies *and* the
//! boundary must each allow (a boundary grants nothing by itself) — with `Action`/`NotAction`,
//! `Resource`/`NotResource` wildcards and the condition operators the project's documents use.
//! A condition it cannot decide never grants: an `Allow` under it does not apply, a `Deny` does.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// One call as IAM sees it: an action, a resource ARN and the request's context keys.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub action: String,
    pub resource: String,
    /// Condition keys (`aws:RequestTag/…`, `ec2:CreateAction`, …), each with its values.
    pub context: BTreeMap<String, Vec<String>>,
}

impl Request {
    pub fn new(action: &str, resource: &str) -> Self {
        Self {
            action: action.into(),
            resource: resource.into(),
            context: BTreeMap::new(),
        }
    }

    /// The request with one more context key.
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.context
            .entry(key.to_ascii_lowercase())
            .or_default()
            .push(value.into());
        self
    }
}

/// What IAM decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// No statement allows it (or the boundary does not).
    ImplicitDeny,
    ExplicitDeny,
}

/// `Action`, `Resource` and their `Not` forms: a string or a list of strings.
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

/// IAM's wildcards: `*` any run of characters, `?` one character.
pub fn glob(pattern: &str, text: &str, case_insensitive: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = if case_insensitive {
        (
            pattern.to_ascii_lowercase().chars().collect(),
            text.to_ascii_lowercase().chars().collect(),
        )
    } else {
        (pattern.chars().collect(), text.chars().collect())
    };
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn matches_any(patterns: &[&str], text: &str, case_insensitive: bool) -> bool {
    patterns.iter().any(|p| glob(p, text, case_insensitive))
}

/// Whether one condition block holds for the request; `None` when it cannot be decided here.
fn condition_holds(condition: &Value, req: &Request) -> Option<bool> {
    let Some(ops) = condition.as_object() else {
        return Some(true);
    };
    for (op, keys) in ops {
        let (op, if_exists) = match op.strip_suffix("IfExists") {
            Some(base) => (base, true),
            None => (op.as_str(), false),
        };
        for (key, wanted) in keys.as_object()? {
            let wanted = strings(wanted);
            let have = req.context.get(&key.to_ascii_lowercase());
            if op == "Null" {
                // `Null: true` holds when the key is absent.
                let absent = have.is_none_or(Vec::is_empty);
                if !wanted
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(&absent.to_string()))
                {
                    return Some(false);
                }
                continue;
            }
            let Some(have) = have.filter(|h| !h.is_empty()) else {
                if if_exists {
                    continue;
                }
                // Negated operators hold on an absent key; the others do not.
                return Some(op.contains("Not"));
            };
            let one = |h: &str| -> Option<bool> {
                Some(match op {
                    "StringEquals" | "ArnEquals" => wanted.contains(&h),
                    "StringNotEquals" | "ArnNotEquals" => !wanted.contains(&h),
                    "StringEqualsIgnoreCase" => wanted.iter().any(|w| w.eq_ignore_ascii_case(h)),
                    "StringLike" | "ArnLike" => matches_any(&wanted, h, false),
                    "StringNotLike" | "ArnNotLike" => !matches_any(&wanted, h, false),
                    "Bool" => wanted.iter().any(|w| w.eq_ignore_ascii_case(h)),
                    _ => return None,
                })
            };
            // A single-valued key: every value the request has must satisfy the operator.
            for h in have {
                if !one(h)? {
                    return Some(false);
                }
            }
        }
    }
    Some(true)
}

/// Whether a statement covers the request: `Some(true)` it applies, `Some(false)` it does not,
/// `None` its condition cannot be decided offline.
fn applies(statement: &Value, req: &Request) -> Option<bool> {
    let action = match (statement.get("Action"), statement.get("NotAction")) {
        (Some(a), _) => matches_any(&strings(a), &req.action, true),
        (None, Some(n)) => !matches_any(&strings(n), &req.action, true),
        (None, None) => false,
    };
    let resource = match (statement.get("Resource"), statement.get("NotResource")) {
        (Some(r), _) => matches_any(&strings(r), &req.resource, false),
        (None, Some(n)) => !matches_any(&strings(n), &req.resource, false),
        (None, None) => false,
    };
    if !(action && resource) {
        return Some(false);
    }
    match statement.get("Condition") {
        None => Some(true),
        Some(c) => condition_holds(c, req),
    }
}

fn statements(doc: &Value) -> Vec<&Value> {
    match doc.get("Statement") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => vec![],
    }
}

/// One document's verdict on the request.
pub fn decide(doc: &Value, req: &Request) -> Decision {
    let mut allowed = false;
    for s in statements(doc) {
        let applies = applies(s, req);
        match s.get("Effect").and_then(Value::as_str) {
            // An undecidable Deny is taken to apply: nothing is granted on a guess.
            Some("Deny") if applies != Some(false) => return Decision::ExplicitDeny,
            Some("Allow") if applies == Some(true) => allowed = true,
            _ => {}
        }
    }
    if allowed {
        Decision::Allow
    } else {
        Decision::ImplicitDeny
    }
}

/// What a role may do: its identity policies intersected with its permissions boundary.
pub fn effective(identity: &[&Value], boundary: Option<&Value>, req: &Request) -> Decision {
    let verdicts: Vec<Decision> = identity.iter().map(|d| decide(d, req)).collect();
    let bounded = boundary.map(|b| decide(b, req));
    if verdicts.contains(&Decision::ExplicitDeny) || bounded == Some(Decision::ExplicitDeny) {
        return Decision::ExplicitDeny;
    }
    let granted = verdicts.contains(&Decision::Allow);
    if granted && bounded.is_none_or(|b| b == Decision::Allow) {
        Decision::Allow
    } else {
        Decision::ImplicitDeny
    }
}

/// The AWS-managed policies the control plane attaches, as AWS publishes them (reduced to the
/// statements that decide what the sandbox checks; source: the AWS Managed Policy Reference).
/// `AmazonSageMakerClusterInstanceRolePolicy` grants logs, metrics, reads of `sagemaker-*`
/// buckets and SSM messages: no ECR pull, no pod identity, no network interfaces.
pub fn aws_managed(arn: &str) -> Option<Value> {
    let name = arn.rsplit('/').next().unwrap_or_default();
    Some(match name {
        "AmazonSageMakerClusterInstanceRolePolicy" => {
            json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents",
                "logs:CreateLogGroup", "logs:DescribeLogStreams"],
             "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/Clusters/*"},
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"],
             "Resource": ["arn:aws:s3:::sagemaker-*", "arn:aws:s3:::sagemaker-*/*"]},
            {"Effect": "Allow", "Action": ["ssmmessages:CreateControlChannel",
                "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                "ssmmessages:OpenDataChannel"], "Resource": "*"}]})
        }
        // Reduced to the statements the effective-permissions checks decide on.
        "AmazonEKSClusterPolicy" => json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["autoscaling:DescribeAutoScalingGroups",
                "autoscaling:UpdateAutoScalingGroup", "ec2:Describe*", "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface", "ec2:CreateSecurityGroup", "ec2:CreateTags",
                "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
                "elasticloadbalancing:*", "kms:DescribeKey"], "Resource": "*"},
            {"Effect": "Allow", "Action": "iam:CreateServiceLinkedRole", "Resource": "*",
             "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}}]}),
        "AmazonSageMakerHyperPodTrainingOperatorAccess" => {
            json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["sagemaker:DescribeClusterNode"], "Resource": "*"}]})
        }
        // The EBS CSI driver's controller: volumes and snapshots it made (tagged by it), and the
        // reads it schedules by.
        "AmazonEBSCSIDriverPolicy" => json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["ec2:CreateSnapshot", "ec2:AttachVolume",
                "ec2:DetachVolume", "ec2:ModifyVolume", "ec2:DescribeAvailabilityZones",
                "ec2:DescribeInstances", "ec2:DescribeSnapshots", "ec2:DescribeTags",
                "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications"], "Resource": "*"},
            {"Effect": "Allow", "Action": "ec2:CreateVolume", "Resource": "arn:aws:ec2:*:*:volume/*",
             "Condition": {"StringLike": {"aws:RequestTag/ebs.csi.aws.com/cluster": "true"}}},
            {"Effect": "Allow", "Action": "ec2:DeleteVolume", "Resource": "*",
             "Condition": {"StringLike": {"ec2:ResourceTag/ebs.csi.aws.com/cluster": "true"}}}]}),
        // The Spaces controller's Systems Manager activations (for remote IDE sessions), made
        // only tagged as the add-on's and this cluster's.
        "AmazonSageMakerSpacesControllerPolicy" => json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "ssm:CreateActivation", "Resource": "*",
             "Condition": {"StringEquals": {
                 "aws:RequestTag/sagemaker.amazonaws.com/managed-by": "amazon-sagemaker-spaces"}}},
            {"Effect": "Allow", "Action": ["ssm:DescribeActivations", "ssm:DescribeSessions",
                "ssm:DeleteActivation"], "Resource": "*"},
            {"Effect": "Allow", "Action": "ssm:AddTagsToResource",
             "Resource": "arn:aws:ssm:*:*:managed-instance/*"}]}),
        "CloudWatchAgentServerPolicy" => json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["cloudwatch:PutMetricData", "ec2:DescribeVolumes",
                "ec2:DescribeTags", "logs:PutLogEvents", "logs:DescribeLogStreams",
                "logs:DescribeLogGroups", "logs:CreateLogStream", "logs:CreateLogGroup",
                "logs:PutRetentionPolicy", "xray:PutTraceSegments", "xray:PutTelemetryRecords",
                "xray:GetSamplingRules", "xray:GetSamplingTargets",
                "xray:GetSamplingStatisticSummaries"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["ssm:GetParameter"],
             "Resource": "arn:aws:ssm:*:*:parameter/AmazonCloudWatch-*"}]}),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_iam_matches_them() {
        assert!(glob("s3:Get*", "s3:GetObject", true));
        assert!(glob("S3:get*", "s3:GetObject", true));
        assert!(!glob("s3:Get*", "s3:PutObject", true));
        assert!(glob("arn:aws:s3:::b/*", "arn:aws:s3:::b/x/y", false));
        assert!(!glob("arn:aws:s3:::b/*", "arn:aws:s3:::b", false));
        assert!(glob("a?c", "abc", false) && !glob("a?c", "ac", false));
        assert!(glob("*", "", false));
        assert!(!glob("arn:aws:s3:::B/*", "arn:aws:s3:::b/x", false));
    }

    #[test]
    fn identity_and_boundary_must_both_allow_and_a_deny_wins() {
        let identity = json!({"Statement": [{"Effect": "Allow", "Action": ["sagemaker-mlflow:*"], "Resource": "*"}]});
        let boundary =
            json!({"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]});
        let call = Request::new(
            "sagemaker-mlflow:SearchRuns",
            "arn:aws:sagemaker:r:1:mlflow-app/a",
        );
        assert_eq!(effective(&[&identity], None, &call), Decision::Allow);
        assert_eq!(
            effective(&[&identity], Some(&boundary), &call),
            Decision::ImplicitDeny,
            "the boundary grants no MLflow action"
        );
        let deny = json!({"Statement": [{"Effect": "Deny", "NotAction": "s3:*", "Resource": "*"}]});
        assert_eq!(
            effective(&[&identity, &deny], None, &call),
            Decision::ExplicitDeny
        );
        assert_eq!(
            effective(&[], Some(&boundary), &call),
            Decision::ImplicitDeny
        );
    }

    #[test]
    fn conditions_decide_on_the_requests_context() {
        let create_tags = json!({"Statement": [{"Effect": "Allow", "Action": "ec2:CreateTags",
            "Resource": "arn:aws:ec2:*:*:security-group/*",
            "Condition": {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"},
                          "Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}}]});
        let sg = "arn:aws:ec2:us-west-2:1:security-group/sg-1";
        let on_create = Request::new("ec2:CreateTags", sg)
            .with("ec2:CreateAction", "CreateSecurityGroup")
            .with("aws:RequestTag/elbv2.k8s.aws/cluster", "demo");
        assert_eq!(decide(&create_tags, &on_create), Decision::Allow);
        let later =
            Request::new("ec2:CreateTags", sg).with("aws:RequestTag/elbv2.k8s.aws/cluster", "demo");
        assert_eq!(decide(&create_tags, &later), Decision::ImplicitDeny);
        let untagged =
            Request::new("ec2:CreateTags", sg).with("ec2:CreateAction", "CreateSecurityGroup");
        assert_eq!(decide(&create_tags, &untagged), Decision::ImplicitDeny);
        // An operator this evaluator does not know grants nothing, and denies on a guess.
        let odd = json!({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*",
            "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]});
        let any = Request::new("s3:GetObject", "x").with("aws:CurrentTime", "2030-01-01T00:00:00Z");
        assert_eq!(decide(&odd, &any), Decision::ImplicitDeny);
        let odd_deny = json!({"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*",
            "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]});
        assert_eq!(decide(&odd_deny, &any), Decision::ExplicitDeny);
        let like = json!({"Statement": {"Effect": "Allow", "Action": "iam:CreateServiceLinkedRole", "Resource": "*",
            "Condition": {"StringLike": {"iam:AWSServiceName": ["eks.amazonaws.com", "elasticloadbalancing.*"]}}}});
        let slr = Request::new(
            "iam:CreateServiceLinkedRole",
            "arn:aws:iam::1:role/aws-service-role/x",
        );
        assert_eq!(
            decide(
                &like,
                &slr.clone()
                    .with("iam:AWSServiceName", "elasticloadbalancing.amazonaws.com")
            ),
            Decision::Allow
        );
        assert_eq!(
            decide(&like, &slr.with("iam:AWSServiceName", "ec2.amazonaws.com")),
            Decision::ImplicitDeny
        );
    }
}
