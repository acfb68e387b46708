//! The ARNs the control plane writes into policies, attachments and access entries, in the
//! partition of the account it runs in (`aws`, `aws-cn`, `aws-us-gov`, …), never a hard-coded
//! `arn:aws:`; and the parts of an ARN it scopes by.

/// The partition of a region (`cn-north-1` → `aws-cn`), as AWS's partition table assigns it.
pub fn partition_of_region(region: &str) -> &'static str {
    const BY_PREFIX: [(&str, &str); 5] = [
        ("cn-", "aws-cn"),
        ("us-gov-", "aws-us-gov"),
        ("us-isob-", "aws-iso-b"),
        ("us-iso-", "aws-iso"),
        ("eu-isoe-", "aws-iso-e"),
    ];
    BY_PREFIX
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("aws", |(_, p)| p)
}

/// An AWS-managed policy (`AmazonEKSClusterPolicy`) in a partition.
pub fn managed_policy(partition: &str, name: &str) -> String {
    format!("arn:{partition}:iam::aws:policy/{name}")
}

/// The partition, region and account of an ARN (`arn:aws:sagemaker:us-west-2:1…:cluster/x`),
/// for scoping a policy to where that resource lives; wildcards when it is not an ARN.
pub fn arn_scope(arn: &str) -> (&str, &str, &str) {
    match arn.splitn(6, ':').collect::<Vec<_>>()[..] {
        ["arn", p, _, r, a, _] if !p.is_empty() => (p, r, a),
        _ => ("aws", "*", "*"),
    }
}

/// The IAM principal behind an STS identity, as access entries take it: an assumed-role session
/// becomes its role.
pub fn principal_arn(identity_arn: &str) -> String {
    // arn:aws:sts::123456789012:assumed-role/Role/session → arn:aws:iam::123456789012:role/Role
    let parts: Vec<&str> = identity_arn.splitn(6, ':').collect();
    if let [arn, partition, "sts", _, account, resource] = parts.as_slice() {
        if let Some(rest) = resource.strip_prefix("assumed-role/") {
            let role = rest.split('/').next().unwrap_or(rest);
            return format!("{arn}:{partition}:iam::{account}:role/{role}");
        }
    }
    identity_arn.to_string()
}

/// The cluster-scoped admin access policy granted to our principal when it has no access entry,
/// in that principal's partition.
pub fn cluster_admin_policy(principal: &str) -> String {
    let (partition, _, _) = arn_scope(principal);
    format!("arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_map_to_their_partitions() {
        assert_eq!(partition_of_region("us-west-2"), "aws");
        assert_eq!(partition_of_region("cn-northwest-1"), "aws-cn");
        assert_eq!(partition_of_region("us-gov-west-1"), "aws-us-gov");
        assert_eq!(partition_of_region("us-iso-east-1"), "aws-iso");
        assert_eq!(partition_of_region("us-isob-east-1"), "aws-iso-b");
        assert_eq!(
            managed_policy("aws-cn", "AmazonEKSClusterPolicy"),
            "arn:aws-cn:iam::aws:policy/AmazonEKSClusterPolicy"
        );
        assert_eq!(
            cluster_admin_policy("arn:aws-us-gov:iam::1:role/ops"),
            "arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        );
    }

    #[test]
    fn an_assumed_role_session_maps_to_its_role() {
        assert_eq!(
            principal_arn("arn:aws:sts::123456789012:assumed-role/Admin/me@example.com"),
            "arn:aws:iam::123456789012:role/Admin"
        );
        assert_eq!(
            principal_arn("arn:aws-cn:sts::123456789012:assumed-role/R/s"),
            "arn:aws-cn:iam::123456789012:role/R"
        );
        assert_eq!(
            principal_arn("arn:aws:iam::123456789012:user/u"),
            "arn:aws:iam::123456789012:user/u"
        );
    }
}
