//! What a real account refuses, evaluated over the sandbox's recorded state: IAM documents (a
//! role's inline policies and the AWS-managed policies attached to it) and security-group
//! reachability. The sandbox uses these to keep nodes `NotReady`, fail deep health checks and
//! degrade add-ons exactly where a real account would, so a setup defect shows up in the fast
//! double instead of on the first real pipeline.

use std::collections::HashMap;

use serde_json::{json, Value};

/// The AWS-managed policies the control plane attaches, as AWS publishes them (reduced to the
/// statements that decide what the sandbox checks; source: the AWS Managed Policy Reference).
/// `AmazonSageMakerClusterInstanceRolePolicy` grants logs, metrics, reads of `sagemaker-*`
/// buckets and SSM messages: no ECR pull, no pod identity, no network interfaces.
pub fn managed_policy(arn: &str) -> Option<Value> {
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
        "AmazonSageMakerHyperPodTrainingOperatorAccess" => {
            json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["sagemaker:DescribeClusterNode"], "Resource": "*"}]})
        }
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

/// `*` and `?` wildcards, case-insensitive (IAM matches actions without regard to case).
fn glob(pattern: &str, text: &str, case_insensitive: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = if case_insensitive {
        (
            pattern.to_lowercase().chars().collect(),
            text.to_lowercase().chars().collect(),
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

fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether one policy document allows `action` on `resource` (Allow statements only: the
/// control plane writes no Deny, and conditions are not evaluated).
pub fn document_allows(doc: &Value, action: &str, resource: &str) -> bool {
    let statements = match &doc["Statement"] {
        Value::Array(a) => a.iter().collect::<Vec<_>>(),
        s @ Value::Object(_) => vec![s],
        _ => Vec::new(),
    };
    statements.into_iter().any(|s| {
        s["Effect"] == "Allow"
            && strings(&s["Action"]).iter().any(|a| glob(a, action, true))
            && strings(&s["Resource"])
                .iter()
                .any(|r| glob(r, resource, false))
    })
}

/// Whether a sandbox role record (`inline` documents by name, `attached` managed ARNs) allows
/// `action` on `resource`.
pub fn role_allows(role: &Value, action: &str, resource: &str) -> bool {
    let inline = role["inline"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values().cloned());
    let managed = role["attached"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(managed_policy);
    inline
        .chain(managed)
        .any(|doc| document_allows(&doc, action, resource))
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
    fn wildcards_match_actions_case_insensitively_and_resources_exactly() {
        assert!(glob("ecr:Get*", "ecr:getauthorizationtoken", true));
        assert!(!glob("ecr:Get*", "ecr:BatchGetImage", true));
        assert!(glob(
            "arn:aws:s3:::sagemaker-*/*",
            "arn:aws:s3:::sagemaker-x/k",
            false
        ));
        assert!(!glob(
            "arn:aws:s3:::sagemaker-*",
            "arn:aws:s3:::other",
            false
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
        assert!(role_allows(
            &role,
            "s3:GetObject",
            "arn:aws:s3:::sagemaker-b/lifecycle/on_create.sh"
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
