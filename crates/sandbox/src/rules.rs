//! What a real account refuses, evaluated over the sandbox's recorded state: IAM documents (a
//! role's inline policies and the AWS-managed policies attached to it) and security-group
//! reachability. The sandbox uses these to keep nodes `NotReady`, fail deep health checks and
//! degrade add-ons exactly where a real account would, so a setup defect shows up in the fast
//! double instead of on the first real pipeline.

use std::collections::HashMap;

use serde_json::{json, Value};

use cloud::policy::{self, Decision, Request};

/// The permissions boundary every role the sandbox creates carries: the stack's
/// `CreatedRolesBoundary`, read from the CloudFormation template the product ships, so the
/// sandbox cuts exactly what a stack-deployed control plane's roles would have cut. The shared
/// bucket is not known here: it is taken to be one of the `sagemaker-instantstart-*` buckets the
/// boundary names anyway.
pub fn stack_boundary() -> Value {
    static BOUNDARY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    BOUNDARY
        .get_or_init(|| {
            let bucket = "arn:aws:s3:::sagemaker-instantstart-*";
            template_boundary(&[
                ("AWS::Partition", "aws"),
                ("AWS::URLSuffix", "amazonaws.com"),
                ("AWS::Region", super::REGION),
                ("AWS::AccountId", super::ACCOUNT),
                ("SharedBucket.Arn", bucket),
            ])
        })
        .clone()
}

/// The ARN the sandbox's stack boundary has (the roles it makes carry it).
pub const STACK_BOUNDARY_ARN: &str =
    "arn:aws:iam::123456789012:policy/instantstart-CreatedRolesBoundary";

/// The server's own role in the sandbox: the template's `InstanceRole` policy, resolved for the
/// sandbox's account, with any `sagemaker-instantstart-*` bucket standing for the shared one.
pub fn instance_policy() -> Value {
    static POLICY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    POLICY
        .get_or_init(|| {
            template_document(
                "/Resources/InstanceRole/Properties/Policies/0/PolicyDocument",
                &[
                    ("AWS::Partition", "aws"),
                    ("AWS::URLSuffix", "amazonaws.com"),
                    ("AWS::Region", super::REGION),
                    ("AWS::AccountId", super::ACCOUNT),
                    ("SharedBucket.Arn", "arn:aws:s3:::sagemaker-instantstart-*"),
                    ("CreatedRolesBoundary", STACK_BOUNDARY_ARN),
                ],
            )
        })
        .clone()
}

/// The template's `CreatedRolesBoundary` document with `Fn::Sub` and `Fn::GetAtt` resolved
/// from `values` (`${AWS::Region}`, `${SharedBucket.Arn}`, …).
pub fn template_boundary(values: &[(&str, &str)]) -> Value {
    template_document(
        "/Resources/CreatedRolesBoundary/Properties/PolicyDocument",
        values,
    )
}

/// A document of the template (a JSON pointer into it) with `Fn::Sub`, `Fn::GetAtt`, `Ref` and
/// `Fn::If` resolved from `values`; an empty policy when the pointer names nothing.
pub fn template_document(pointer: &str, values: &[(&str, &str)]) -> Value {
    const TEMPLATE: &str = include_str!("../../../cloudformation/instantstart.yaml");
    let template: Value = serde_yaml::from_str(TEMPLATE).unwrap_or(Value::Null);
    let doc = template
        .pointer(pointer)
        .cloned()
        .unwrap_or_else(|| json!({"Statement": []}));
    resolve(&doc, values)
}

fn resolve(v: &Value, values: &[(&str, &str)]) -> Value {
    match v {
        Value::Object(m) if m.len() == 1 && m.contains_key("Fn::Sub") => {
            let mut s = m["Fn::Sub"].as_str().unwrap_or_default().to_string();
            for (k, val) in values {
                s = s.replace(&format!("${{{k}}}"), val);
            }
            Value::String(s)
        }
        Value::Object(m) if m.get("Ref") == Some(&json!("AWS::NoValue")) => Value::Null,
        Value::Object(m) if m.len() == 1 && m.get("Ref").is_some_and(Value::is_string) => {
            let key = m.get("Ref").and_then(Value::as_str).unwrap_or_default();
            let found = values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
            Value::String(found.unwrap_or_default().to_string())
        }
        // A condition is true when `values` says so (`("HasDataBuckets", "true")`).
        Value::Object(m) if m.len() == 1 && m.contains_key("Fn::If") => {
            let arms = m["Fn::If"].as_array().cloned().unwrap_or_default();
            let name = arms.first().and_then(Value::as_str).unwrap_or_default();
            let holds = values.iter().any(|(k, v)| *k == name && *v == "true");
            let arm = arms.get(if holds { 1 } else { 2 }).cloned();
            resolve(&arm.unwrap_or(Value::Null), values)
        }
        Value::Object(m) if m.len() == 1 && m.contains_key("Fn::GetAtt") => {
            let parts: Vec<&str> = m["Fn::GetAtt"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let key = parts.join(".");
            let found = values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
            Value::String(found.unwrap_or_default().to_string())
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), resolve(v, values)))
                .collect(),
        ),
        // `AWS::NoValue` leaves a list without the element.
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| resolve(v, values))
                .filter(|v| !v.is_null())
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The documents of a sandbox role record: its inline policies and the AWS-managed policies
/// attached to it.
pub fn role_documents(role: &Value) -> Vec<Value> {
    let inline = role["inline"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values().cloned());
    let managed = role["attached"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(policy::aws_managed);
    inline.chain(managed).collect()
}

/// Whether a sandbox role record's trust policy lets `service` assume it with
/// `sts:AssumeRole` and `sts:TagSession` (what EKS pod identity needs of a role).
pub fn trusts_service(role: &Value, service: &str) -> bool {
    let statements: Vec<&Value> = match &role["trust"]["Statement"] {
        Value::Array(a) => a.iter().collect(),
        v @ Value::Object(_) => vec![v],
        _ => vec![],
    };
    let list = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        }
    };
    let allowed: Vec<String> = statements
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .filter(|s| {
            list(&s["Principal"]["Service"])
                .iter()
                .any(|p| p == service)
        })
        .flat_map(|s| list(&s["Action"]))
        .collect();
    ["sts:AssumeRole", "sts:TagSession"]
        .iter()
        .all(|a| allowed.iter().any(|x| x == a || x == "sts:*" || x == "*"))
}

/// Whether a sandbox role record may `req`, made as a principal of the sandbox's account: its
/// policies intersected with its boundary.
pub fn role_permits(role: &Value, req: &Request) -> bool {
    let docs = role_documents(role);
    let refs: Vec<&Value> = docs.iter().collect();
    let boundary = role.get("boundary").filter(|b| b.is_object());
    let req = req.clone().in_account(super::ACCOUNT);
    policy::effective(&refs, boundary, &req) == Decision::Allow
}

/// Whether a sandbox role record allows `action` on `resource` (no request context).
pub fn role_allows(role: &Value, action: &str, resource: &str) -> bool {
    role_permits(role, &Request::new(action, resource))
}

/// The first of `actions` a role does not allow on `resource`.
pub fn first_denied<'a>(role: &Value, actions: &[&'a str], resource: &str) -> Option<&'a str> {
    actions
        .iter()
        .copied()
        .find(|a| !role_allows(role, a, resource))
}

/// What a node needs from ECR to pull the VPC CNI and the other system images at bootstrap.
pub const ECR_PULL: &[&str] = &[
    "ecr:GetAuthorizationToken",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:BatchCheckLayerAvailability",
];

/// One rule of a simulated security group. `peer` is a group id (`source` in the record, for
/// either direction) or a CIDR.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub ingress: bool,
    /// `-1` (all) or `tcp`/`udp`.
    pub protocol: String,
    pub ports: Option<(u16, u16)>,
    pub peer: String,
}

impl Rule {
    fn covers(&self, port: u16) -> bool {
        self.protocol == "-1"
            || (self.protocol == "tcp" && self.ports.is_none_or(|(a, b)| (a..=b).contains(&port)))
    }
}

/// Reads a group's recorded rules.
pub fn rules_of(group: &Value) -> Vec<Rule> {
    group["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| Rule {
            ingress: r["direction"] != "egress",
            protocol: r["protocol"].as_str().unwrap_or("-1").to_string(),
            ports: r["fromPort"]
                .as_u64()
                .zip(r["toPort"].as_u64())
                .and_then(|(a, b)| Some((u16::try_from(a).ok()?, u16::try_from(b).ok()?))),
            peer: r["source"]
                .as_str()
                .or(r["cidr"].as_str())
                .unwrap_or_default()
                .to_string(),
        })
        .collect()
}

/// Security groups by id, with their rules.
pub type Groups = HashMap<String, Vec<Rule>>;

/// Whether TCP traffic to `port` flows from an ENI in `from` to an ENI in `to`: an egress rule of
/// a `from` group must let it out (to a `to` group or 0.0.0.0/0) and an ingress rule of a `to`
/// group must let it in (from a `from` group or 0.0.0.0/0), as EC2 evaluates stateful groups.
pub fn reaches(groups: &Groups, from: &[String], to: &[String], port: u16) -> bool {
    let out = from.iter().any(|g| {
        groups.get(g).into_iter().flatten().any(|r| {
            !r.ingress && r.covers(port) && (r.peer == "0.0.0.0/0" || to.contains(&r.peer))
        })
    });
    let inn = to.iter().any(|g| {
        groups.get(g).into_iter().flatten().any(|r| {
            r.ingress && r.covers(port) && (r.peer == "0.0.0.0/0" || from.contains(&r.peer))
        })
    });
    out && inn
}

/// Whether EFA traffic (all protocols, not only IP: a CIDR rule does not carry it) flows between
/// instances of the groups: some group must reference itself for all traffic, in and out.
pub fn efa_ready(groups: &Groups, ids: &[String]) -> bool {
    ids.iter().any(|g| {
        let rules = groups.get(g).map(Vec::as_slice).unwrap_or_default();
        let selfref = |ingress: bool| {
            rules
                .iter()
                .any(|r| r.ingress == ingress && r.protocol == "-1" && &r.peer == g)
        };
        selfref(true) && selfref(false)
    })
}

/// Why a node of a group with `node_groups` cannot join a control plane in `plane_groups`, as
/// the kubelet would log it; `None` when it can.
pub fn join_blocker(
    groups: &Groups,
    node_groups: &[String],
    plane_groups: &[String],
) -> Option<String> {
    if !reaches(groups, node_groups, plane_groups, 443) {
        return Some(
            "KubeletNotReady: failed to register node: Post \"https://<api-server>/api/v1/nodes\": dial tcp :443: i/o timeout (the node's security groups and the control plane's do not allow node → API server on 443)"
                .into(),
        );
    }
    if !reaches(groups, plane_groups, node_groups, 10250) {
        return Some(
            "NodeStatusUnknown: the API server cannot reach the kubelet on 10250 (the control plane's security groups and the node's do not allow it); logs, exec and webhooks fail"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(rules: Value) -> Vec<Rule> {
        rules_of(&json!({ "rules": rules }))
    }

    #[test]
    fn the_stack_boundary_is_read_from_the_template_and_cuts_what_it_does_not_grant() {
        let b = stack_boundary();
        assert!(
            b["Statement"].as_array().is_some_and(|s| s.len() >= 3),
            "{b}"
        );
        let wide = json!({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]});
        let role = json!({"inline": {"p": wide}, "attached": [], "boundary": b});
        assert!(role_allows(&role, "ecr:BatchGetImage", "*"));
        assert!(!role_allows(
            &role,
            "iam:CreateRole",
            "arn:aws:iam::1:role/x"
        ));
        assert!(!role_allows(
            &role,
            "s3:GetObject",
            "arn:aws:s3:::someone-elses/k"
        ));
        let own = format!(
            "arn:aws:s3:::sagemaker-instantstart-demo-{}/k",
            super::super::ACCOUNT
        );
        let get = Request::new("s3:GetObject", &own);
        assert!(role_permits(
            &role,
            &get.clone()
                .with("s3:ResourceAccount", super::super::ACCOUNT)
        ));
        // The same name in another account: S3 ARNs carry no account, the boundary's
        // s3:ResourceAccount does.
        assert!(!role_permits(
            &role,
            &get.with("s3:ResourceAccount", "111111111111")
        ));
        let unbounded = json!({"inline": {"p": role["inline"]["p"].clone()}, "attached": []});
        assert!(role_allows(
            &unbounded,
            "iam:CreateRole",
            "arn:aws:iam::1:role/x"
        ));
    }

    #[test]
    fn the_managed_instance_policy_alone_cannot_pull_images_or_use_pod_identity() {
        let role = json!({"inline": {}, "attached":
            ["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]});
        assert_eq!(
            first_denied(&role, ECR_PULL, "*"),
            Some("ecr:GetAuthorizationToken")
        );
        assert!(!role_allows(
            &role,
            "eks-auth:AssumeRoleForPodIdentity",
            "arn:aws:eks:us-west-2:1:cluster/c"
        ));
        // Lifecycle scripts from a `sagemaker-` bucket of this account, and of no other.
        let script = Request::new(
            "s3:GetObject",
            "arn:aws:s3:::sagemaker-b/lifecycle/on_create.sh",
        );
        assert!(role_permits(
            &role,
            &script
                .clone()
                .with("aws:ResourceAccount", super::super::ACCOUNT)
        ));
        assert!(!role_permits(
            &role,
            &script.with("aws:ResourceAccount", "111111111111")
        ));
    }

    #[test]
    fn two_self_referencing_groups_do_not_reach_each_other() {
        let groups: Groups = [
            (
                "sg-plane".to_string(),
                group(json!([
                    {"protocol": "-1", "source": "sg-plane", "direction": "ingress"},
                    {"protocol": "-1", "cidr": "0.0.0.0/0", "direction": "egress"}])),
            ),
            (
                "sg-nodes".to_string(),
                group(json!([
                    {"protocol": "-1", "source": "sg-nodes", "direction": "ingress"},
                    {"protocol": "-1", "cidr": "0.0.0.0/0", "direction": "egress"}])),
            ),
        ]
        .into();
        let plane = ["sg-plane".to_string()];
        let nodes = ["sg-nodes".to_string()];
        assert!(join_blocker(&groups, &nodes, &plane).is_some_and(|r| r.contains("443")));
        // One group for both, as AWS's templates do: every path is open.
        assert!(join_blocker(&groups, &plane, &plane).is_none());
        // Allowing nodes → API on 443 alone still leaves the kubelet unreachable.
        let mut opened = groups.clone();
        opened.get_mut("sg-plane").unwrap().push(Rule {
            ingress: true,
            protocol: "tcp".into(),
            ports: Some((443, 443)),
            peer: "sg-nodes".into(),
        });
        assert!(join_blocker(&opened, &nodes, &plane).is_some_and(|r| r.contains("10250")));
    }

    #[test]
    fn efa_needs_self_egress_not_only_egress_to_anywhere() {
        let ingress_only: Groups = [(
            "sg-1".to_string(),
            group(json!([
                {"protocol": "-1", "source": "sg-1", "direction": "ingress"},
                {"protocol": "-1", "cidr": "0.0.0.0/0", "direction": "egress"}])),
        )]
        .into();
        assert!(!efa_ready(&ingress_only, &["sg-1".into()]));
        let both: Groups = [(
            "sg-1".to_string(),
            group(json!([
                {"protocol": "-1", "source": "sg-1", "direction": "ingress"},
                {"protocol": "-1", "source": "sg-1", "direction": "egress"}])),
        )]
        .into();
        assert!(efa_ready(&both, &["sg-1".into()]));
    }
}
