//! IAM policy evaluation, offline: whether a set of identity policies and a permissions boundary
//! let one request through. It follows AWS's evaluation logic as far as it can be decided
//! without AWS — an explicit `Deny` in either wins; otherwise the identity policies *and* the
//! boundary must each allow (a boundary grants nothing by itself) — with `Action`/`NotAction`,
//! `Resource`/`NotResource` wildcards and the condition operators the project's documents use.
//! A condition it cannot decide never grants: an `Allow` under it does not apply, a `Deny` does.

use std::collections::BTreeMap;

use serde_json::Value;

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

    /// The request as a principal of `account` makes it: `aws:PrincipalAccount`, and
    /// `aws:ResourceAccount` from the resource ARN's account field when it has one (IAM sets
    /// both on every request; S3 ARNs name no account, so S3 requests carry
    /// `s3:ResourceAccount` too, which the caller adds from what it knows of the bucket).
    pub fn in_account(self, account: &str) -> Self {
        let owner = self
            .resource
            .split(':')
            .nth(4)
            .filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit()))
            .map(str::to_string);
        let r = self.with("aws:PrincipalAccount", account);
        match owner {
            Some(owner) => r.with("aws:ResourceAccount", &owner),
            None => r,
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
pub fn strings(v: &Value) -> Vec<&str> {
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
        // `ForAllValues:` holds when every value the request has is among the wanted ones (and
        // on an absent key); `ForAnyValue:` when one is.
        let (set, op) = match op.split_once(':') {
            Some((set @ ("ForAllValues" | "ForAnyValue"), base)) => (Some(set), base),
            _ => (None, op.as_str()),
        };
        let (op, if_exists) = match op.strip_suffix("IfExists") {
            Some(base) => (base, true),
            None => (op, false),
        };
        for (key, wanted) in keys.as_object()? {
            // Policy variables (`${aws:PrincipalAccount}`) take the request's value; one the
            // request does not carry cannot be decided.
            let wanted: Vec<String> = strings(wanted)
                .into_iter()
                .map(|w| substitute(w, req))
                .collect::<Option<_>>()?;
            let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
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
                if if_exists || set == Some("ForAllValues") {
                    continue;
                }
                if set == Some("ForAnyValue") {
                    return Some(false);
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
            if set == Some("ForAnyValue") {
                let mut any = false;
                for h in have {
                    any |= one(h)?;
                }
                if !any {
                    return Some(false);
                }
                continue;
            }
            // A single-valued key (or `ForAllValues:`): every value the request has must
            // satisfy the operator.
            for h in have {
                if !one(h)? {
                    return Some(false);
                }
            }
        }
    }
    Some(true)
}

/// A condition value with its policy variables (`${aws:PrincipalTag/x}`) replaced by the
/// request's values; `None` when the request lacks one.
fn substitute(value: &str, req: &Request) -> Option<String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}')?;
        let key = after[..end].to_ascii_lowercase();
        out.push_str(req.context.get(&key)?.first()?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
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

/// A document's statements (one statement or a list of them).
pub fn statements(doc: &Value) -> Vec<&Value> {
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

/// The AWS-managed policies the control plane attaches, as AWS publishes them (the files and
/// their provenance: `crates/ports/src/managed/README.md`), by name.
const MANAGED: &[(&str, &str)] = &[
    (
        "AmazonEKSClusterPolicy",
        include_str!("managed/AmazonEKSClusterPolicy.json"),
    ),
    (
        "AmazonSageMakerClusterInstanceRolePolicy",
        include_str!("managed/AmazonSageMakerClusterInstanceRolePolicy.json"),
    ),
    (
        "AmazonSageMakerHyperPodTrainingOperatorAccess",
        include_str!("managed/AmazonSageMakerHyperPodTrainingOperatorAccess.json"),
    ),
    (
        "CloudWatchAgentServerPolicy",
        include_str!("managed/CloudWatchAgentServerPolicy.json"),
    ),
    (
        "AmazonSageMakerHyperPodInferenceAccess",
        include_str!("managed/AmazonSageMakerHyperPodInferenceAccess.json"),
    ),
    (
        "AmazonEBSCSIDriverPolicy",
        include_str!("managed/AmazonEBSCSIDriverPolicy.json"),
    ),
    (
        "AmazonSageMakerSpacesControllerPolicy",
        include_str!("managed/AmazonSageMakerSpacesControllerPolicy.json"),
    ),
];

/// The names of the AWS-managed policies [`aws_managed`] knows.
pub fn managed_names() -> impl Iterator<Item = &'static str> {
    MANAGED.iter().map(|(n, _)| *n)
}

/// An AWS-managed policy's document (its default version) by ARN or name; `None` for one the
/// product does not attach.
pub fn aws_managed(arn: &str) -> Option<Value> {
    let name = arn.rsplit('/').next().unwrap_or_default();
    let (_, text) = MANAGED.iter().find(|(n, _)| *n == name)?;
    let mut version: Value = serde_json::from_str(text).ok()?;
    Some(version["PolicyVersion"]["Document"].take())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn policy_variables_and_set_operators_decide_as_iam_does() {
        let own = json!({"Statement": [{"Effect": "Allow", "Action": "ec2:DescribeVpcs", "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}}]});
        let ours = Request::new("ec2:DescribeVpcs", "arn:aws:ec2:r:123456789012:vpc/v")
            .in_account("123456789012");
        assert_eq!(decide(&own, &ours), Decision::Allow);
        let theirs = Request::new("ec2:DescribeVpcs", "arn:aws:ec2:r:111111111111:vpc/v")
            .in_account("123456789012");
        assert_eq!(decide(&own, &theirs), Decision::ImplicitDeny);
        // A variable the request does not carry grants nothing.
        let bare = Request::new("ec2:DescribeVpcs", "arn:aws:ec2:r:123456789012:vpc/v")
            .with("aws:ResourceAccount", "123456789012");
        assert_eq!(decide(&own, &bare), Decision::ImplicitDeny);
        let keys = json!({"Statement": [{"Effect": "Allow", "Action": "acm:AddTagsToCertificate", "Resource": "*",
            "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": "CreatedBy"}}}]});
        let tag = |ks: &[&str]| {
            ks.iter()
                .fold(Request::new("acm:AddTagsToCertificate", "c"), |r, k| {
                    r.with("aws:TagKeys", k)
                })
        };
        assert_eq!(decide(&keys, &tag(&["CreatedBy"])), Decision::Allow);
        assert_eq!(
            decide(&keys, &tag(&[])),
            Decision::Allow,
            "holds on no keys"
        );
        assert_eq!(
            decide(&keys, &tag(&["CreatedBy", "Owner"])),
            Decision::ImplicitDeny
        );
        let any = json!({"Statement": [{"Effect": "Allow", "Action": "acm:AddTagsToCertificate", "Resource": "*",
            "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": "CreatedBy"}}}]});
        assert_eq!(decide(&any, &tag(&["Owner", "CreatedBy"])), Decision::Allow);
        assert_eq!(decide(&any, &tag(&[])), Decision::ImplicitDeny);
    }

    #[test]
    fn every_managed_policy_the_product_attaches_is_read() {
        for name in managed_names() {
            let doc = aws_managed(&format!("arn:aws:iam::aws:policy/{name}")).unwrap();
            assert!(!statements(&doc).is_empty(), "{name}");
        }
        assert!(aws_managed("arn:aws:iam::aws:policy/AdministratorAccess").is_none());
    }
}
