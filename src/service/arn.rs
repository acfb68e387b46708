//! The ARNs the control plane writes into policies and attachments, in the partition of the
//! account it runs in (`aws`, `aws-cn`, `aws-us-gov`, …), never a hard-coded `arn:aws:`.

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
    }
}
