//! Every AWS action the control plane calls, with the resource and request context IAM
//! evaluates it on (the tags the product puts on what it creates, the boundary it sets on the
//! roles it makes, the service it passes a role to), and the statement of the CloudFormation
//! template's role that grants it. The doctor (`GET /api/aws/doctor`) asks IAM about each row
//! for the role the server runs as; a test holds the table to the actions the AWS adapter calls,
//! so a new call without a row fails it.

/// One call, as IAM sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// The `Sid` of the template's `InstanceRole` statement that grants it: what to restore.
    pub statement: &'static str,
    pub action: &'static str,
    /// The resource, with `{partition}`, `{region}`, `{account}`, `{cluster}` (a cluster the
    /// product would make), `{probe_id}` (its HyperPod id), `{boundary}` and
    /// `{shared_bucket_arn}` filled in by [`Scope`].
    pub resource: &'static str,
    /// Request context keys and values, with the same placeholders.
    pub context: &'static [(&'static str, &'static str)],
}

const fn call(
    statement: &'static str,
    action: &'static str,
    resource: &'static str,
    context: &'static [(&'static str, &'static str)],
) -> Call {
    Call {
        statement,
        action,
        resource,
        context,
    }
}

/// What the placeholders of a row stand for in one account.
#[derive(Debug, Clone)]
pub struct Scope {
    pub partition: String,
    pub region: String,
    pub account: String,
    /// The name of a cluster the product would make (nothing is made: IAM only evaluates).
    pub cluster: String,
    /// The permissions boundary the product sets on the roles it makes.
    pub boundary: String,
    pub shared_bucket_arn: String,
    /// The role the server runs as (what it names in its own access entries).
    pub principal: String,
}

/// One question for IAM: may the principal call `action` on `resource` with `context`?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub action: String,
    /// `*` for an action without resource-level permissions.
    pub resource: String,
    pub context: Vec<(String, String)>,
}

impl Scope {
    fn fill(&self, s: &str) -> String {
        s.replace("{partition}", &self.partition)
            .replace("{region}", &self.region)
            .replace("{account}", &self.account)
            .replace("{cluster}", &self.cluster)
            .replace("{probe_id}", "0probe000000")
            .replace("{boundary}", &self.boundary)
            .replace("{shared_bucket_arn}", &self.shared_bucket_arn)
            .replace("{principal}", &self.principal)
            .replace("{url_suffix}", super::url_suffix(&self.partition))
    }

    /// The question a row asks in this account.
    pub fn probe(&self, c: &Call) -> Probe {
        Probe {
            action: c.action.into(),
            resource: self.fill(c.resource),
            context: c
                .context
                .iter()
                .map(|(k, v)| ((*k).to_string(), self.fill(v)))
                .collect(),
        }
    }
}

/// Every call, one row per resource it is made on (an action on two kinds of resource, such
/// as creating a subnet in a tagged VPC, has two rows).
pub static CALLS: &[Call] = &[
    call("Reads", "ec2:DescribeAddresses", "*", &[]),
    call("Reads", "ec2:DescribeAvailabilityZones", "*", &[]),
    call("Reads", "ec2:DescribeInstanceTypeOfferings", "*", &[]),
    call("Reads", "ec2:DescribeInternetGateways", "*", &[]),
    call("Reads", "ec2:DescribeNatGateways", "*", &[]),
    call("Reads", "ec2:DescribeRouteTables", "*", &[]),
    call("Reads", "ec2:DescribeSecurityGroups", "*", &[]),
    call("Reads", "ec2:DescribeSubnets", "*", &[]),
    call("Reads", "ec2:DescribeVpcEndpoints", "*", &[]),
    call("Reads", "ec2:DescribeVpcs", "*", &[]),
    call("Reads", "eks:DescribeAddonVersions", "*", &[]),
    call("Reads", "eks:DescribeClusterVersions", "*", &[]),
    call("Reads", "iam:ListOpenIDConnectProviders", "*", &[]),
    call("Reads", "sagemaker:ListClusterSchedulerConfigs", "*", &[]),
    call("Reads", "sagemaker:ListComputeQuotas", "*", &[]),
    call("Reads", "sagemaker:ListTrainingPlans", "*", &[]),
    call("Reads", "sagemaker:ListMlflowApps", "*", &[]),
    call("Reads", "servicequotas:ListServiceQuotas", "*", &[]),
    call("Reads", "sts:GetCallerIdentity", "*", &[]),
    call("CreateTaggedNetwork", "ec2:AllocateAddress", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateInternetGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateNatGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateRouteTable", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateSecurityGroup", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateSubnet", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateVpc", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedNetwork", "ec2:CreateVpcEndpoint", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("UseTaggedNetwork", "ec2:CreateSubnet", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("UseTaggedNetwork", "ec2:CreateNatGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("UseTaggedNetwork", "ec2:CreateRouteTable", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("UseTaggedNetwork", "ec2:CreateSecurityGroup", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("UseTaggedNetwork", "ec2:CreateVpcEndpoint", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("TagOnCreate", "ec2:CreateTags", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("ec2:CreateAction", "AllocateAddress")]),
    call("ChangeTaggedNetwork", "ec2:AssociateRouteTable", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:AssociateVpcCidrBlock", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:AttachInternetGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:AuthorizeSecurityGroupEgress", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:AuthorizeSecurityGroupIngress", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:CreateRoute", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteInternetGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteNatGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteRouteTable", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteSecurityGroup", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteSubnet", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteVpc", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DeleteVpcEndpoints", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DetachInternetGateway", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:DisassociateRouteTable", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:ModifySubnetAttribute", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:ModifyVpcAttribute", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:ReleaseAddress", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ChangeTaggedNetwork", "ec2:ReplaceRouteTableAssociation", "arn:{partition}:ec2:{region}:{account}:vpc/vpc-0probe", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("CreateTaggedEksCluster", "eks:CreateCluster", "*", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("Eks", "eks:AssociateAccessPolicy", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("eks:principalArn", "{principal}"), ("aws:PrincipalArn", "{principal}"), ("eks:accessScope", "cluster"), ("eks:policyArn", "arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")]),
    // A person given a team's namespace to edit (docs/access.md).
    call("Eks", "eks:AssociateAccessPolicy", "arn:{partition}:eks:{region}:{account}:access-entry/{cluster}/user/{account}/probe/0probe", &[("eks:principalArn", "arn:{partition}:iam::{account}:user/probe"), ("aws:PrincipalArn", "{principal}"), ("eks:accessScope", "namespace"), ("eks:namespaces", "hyperpod-ns-probe"), ("eks:policyArn", "arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSEditPolicy")]),
    call("EksOnOwnClusters", "eks:CreateAccessEntry", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}"), ("eks:principalArn", "{principal}"), ("aws:PrincipalArn", "{principal}"), ("eks:accessEntryType", "STANDARD")]),
    call("EksOnOwnClusters", "eks:CreateAccessEntry", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}"), ("eks:principalArn", "arn:{partition}:iam::{account}:user/probe"), ("aws:PrincipalArn", "{principal}"), ("eks:accessEntryType", "STANDARD")]),
    call("EksOnOwnClusters", "eks:CreateAddon", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("EksOnOwnClusters", "eks:CreatePodIdentityAssociation", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("Eks", "eks:DeleteAccessEntry", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:DeleteAddon", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("EksOnOwnClusters", "eks:DeleteCluster", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("Eks", "eks:DeletePodIdentityAssociation", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:DescribeAccessEntry", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:DescribeAddon", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:DescribeCluster", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:DisassociateAccessPolicy", "arn:{partition}:eks:{region}:{account}:access-entry/{cluster}/user/{account}/probe/0probe", &[("eks:principalArn", "arn:{partition}:iam::{account}:user/probe"), ("eks:policyArn", "arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSEditPolicy")]),
    call("Eks", "eks:ListAssociatedAccessPolicies", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:ListPodIdentityAssociations", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:TagResource", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("Eks", "eks:UpdateAddon", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[]),
    call("EksOnOwnClusters", "eks:UpdateClusterVersion", "arn:{partition}:eks:{region}:{account}:cluster/{cluster}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPod", "sagemaker:AddTags", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPodOwnClusters", "sagemaker:BatchDeleteClusterNodes", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPodOwnClusters", "sagemaker:BatchRebootClusterNodes", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPodOwnClusters", "sagemaker:BatchReplaceClusterNodes", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPod", "sagemaker:CreateCluster", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPodOwnClusters", "sagemaker:DeleteCluster", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPod", "sagemaker:DescribeCluster", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPod", "sagemaker:DescribeClusterNode", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPod", "sagemaker:ListClusterEvents", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPod", "sagemaker:ListClusterNodes", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("HyperPodOwnClusters", "sagemaker:UpdateCluster", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("HyperPodOwnClusters", "sagemaker:UpdateClusterSoftware", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[("aws:ResourceTag/instantstart:cluster", "{cluster}")]),
    call("ClusterLogs", "logs:DescribeLogStreams", "arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/{cluster}/{probe_id}", &[]),
    call("ClusterLogs", "logs:GetLogEvents", "arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/{cluster}/{probe_id}", &[]),
    call("GpuUtilization", "aps:DescribeWorkspace", "arn:{partition}:aps:{region}:{account}:workspace/ws-probe", &[]),
    call("GpuUtilization", "aps:QueryMetrics", "arn:{partition}:aps:{region}:{account}:workspace/ws-probe", &[]),
    call("GrafanaDashboards", "grafana:DescribeWorkspace", "arn:{partition}:grafana:{region}:{account}:/workspaces/g-probe", &[]),
    call("PriceList", "pricing:DescribeServices", "*", &[]),
    call("PriceList", "pricing:GetProducts", "*", &[]),
    call("FindWorkspaces", "aps:ListWorkspaces", "*", &[]),
    call("CreateTaggedWorkspaces", "aps:CreateWorkspace", "*", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("TagWorkspacesOnCreate", "aps:TagResource", "arn:{partition}:aps:{region}:{account}:workspace/ws-probe", &[]),
    call("TaskGovernance", "sagemaker:CreateClusterSchedulerConfig", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:CreateComputeQuota", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:DeleteClusterSchedulerConfig", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:DeleteComputeQuota", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:DescribeClusterSchedulerConfig", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:DescribeComputeQuota", "arn:{partition}:sagemaker:{region}:{account}:compute-quota/probe", &[]),
    call("TaskGovernance", "sagemaker:UpdateClusterSchedulerConfig", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("TaskGovernance", "sagemaker:UpdateComputeQuota", "arn:{partition}:sagemaker:{region}:{account}:cluster/{probe_id}", &[]),
    call("ManagedMlflow", "sagemaker:AddTags", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker:CallMlflowAppApi", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker:CreateMlflowApp", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker:CreatePresignedMlflowAppUrl", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker:DescribeMlflowApp", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker-mlflow:GetExperimentByName", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker-mlflow:GetMetricHistory", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ManagedMlflow", "sagemaker-mlflow:SearchRuns", "arn:{partition}:sagemaker:{region}:{account}:mlflow-app/app-probe", &[]),
    call("ServiceLinkedRoles", "iam:CreateServiceLinkedRole", "arn:{partition}:iam::{account}:role/aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS", &[("iam:AWSServiceName", "eks.amazonaws.com")]),
    call("CreateOwnRolesWithinTheBoundary", "iam:CreateRole", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("aws:RequestTag/instantstart:cluster", "{cluster}"), ("iam:PermissionsBoundary", "{boundary}")]),
    call("TagOwnRolesOnCreate", "iam:TagRole", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("aws:RequestTag/instantstart:cluster", "{cluster}")]),
    call("ManageOwnRoles", "iam:DeleteRole", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ManageOwnRoles", "iam:GetRole", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ManageOwnRoles", "iam:GetRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ManageOwnRoles", "iam:ListAttachedRolePolicies", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ManageOwnRoles", "iam:ListRolePolicies", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ManageOwnRoles", "iam:UpdateAssumeRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[]),
    call("ChangePermissionsOfBoundedRoles", "iam:DeleteRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("iam:PermissionsBoundary", "{boundary}")]),
    call("ChangePermissionsOfBoundedRoles", "iam:DetachRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("iam:PermissionsBoundary", "{boundary}")]),
    call("ChangePermissionsOfBoundedRoles", "iam:PutRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("iam:PermissionsBoundary", "{boundary}")]),
    call("AttachOnlyTheManagedPoliciesItNeeds", "iam:AttachRolePolicy", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("iam:PermissionsBoundary", "{boundary}"), ("iam:PolicyARN", "arn:{partition}:iam::aws:policy/AmazonEKSClusterPolicy")]),
    call("PassOwnRolesToTheirServices", "iam:PassRole", "arn:{partition}:iam::{account}:role/instantstart/{cluster}-eks-cluster", &[("iam:PassedToService", "eks.amazonaws.com")]),
    call("OidcProviders", "iam:CreateOpenIDConnectProvider", "arn:{partition}:iam::{account}:oidc-provider/oidc.eks.{region}.{url_suffix}/id/PROBE", &[]),
    call("OidcProviders", "iam:TagOpenIDConnectProvider", "arn:{partition}:iam::{account}:oidc-provider/oidc.eks.{region}.{url_suffix}/id/PROBE", &[]),
    call("CreateNoOtherBucket", "s3:CreateBucket", "{shared_bucket_arn}", &[]),
    call("CreateNoOtherBucket", "s3:PutBucketPublicAccessBlock", "{shared_bucket_arn}", &[]),
    call("CreateNoOtherBucket", "s3:PutBucketTagging", "{shared_bucket_arn}", &[]),
    call("CreateNoOtherBucket", "s3:PutEncryptionConfiguration", "{shared_bucket_arn}", &[]),
    call("Buckets", "s3:ListBucket", "arn:{partition}:s3:::sagemaker-instantstart-{cluster}-{account}", &[("s3:ResourceAccount", "{account}")]),
    call("Objects", "s3:PutObject", "arn:{partition}:s3:::sagemaker-instantstart-{cluster}-{account}/probe", &[("s3:ResourceAccount", "{account}")]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_filled_for_an_account() {
        let s = Scope {
            partition: "aws".into(),
            region: "us-west-2".into(),
            account: "123456789012".into(),
            cluster: "probe".into(),
            boundary: "arn:aws:iam::123456789012:policy/b".into(),
            shared_bucket_arn: "arn:aws:s3:::b".into(),
            principal: "arn:aws:iam::123456789012:role/server".into(),
        };
        let create_role = CALLS.iter().find(|c| c.action == "iam:CreateRole").unwrap();
        let p = s.probe(create_role);
        assert_eq!(
            p.resource,
            "arn:aws:iam::123456789012:role/instantstart/probe-eks-cluster"
        );
        assert!(p
            .context
            .contains(&("iam:PermissionsBoundary".into(), s.boundary.clone())));
        assert!(CALLS.iter().all(|c| !s.probe(c).resource.contains('{')));
        // An EKS issuer's provider is named with the partition's DNS suffix, as the template's
        // `AWS::URLSuffix` names it: China's is `amazonaws.com.cn`.
        let oidc = CALLS
            .iter()
            .find(|c| c.action == "iam:CreateOpenIDConnectProvider")
            .unwrap();
        let china = Scope {
            partition: "aws-cn".into(),
            region: "cn-north-1".into(),
            ..s.clone()
        };
        assert!(china
            .probe(oidc)
            .resource
            .contains("oidc-provider/oidc.eks.cn-north-1.amazonaws.com.cn/id/"));
        assert!(s
            .probe(oidc)
            .resource
            .contains(".us-west-2.amazonaws.com/id/"));
    }
}
