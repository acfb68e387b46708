//! The cloud used when `--cloud aws` cannot reach AWS from this build or this machine: every call
//! is refused with one clear, non-retryable error that says what to do instead, so the server
//! still starts and explains itself on `/healthz`, in the UI and in every problem body.

use crate::{
    Addon, AddonVersion, AmpWorkspace, BucketOwner, CallerIdentity, CloudError, CloudResult,
    ClusterEvent, ClusterState, ClusterUsageQuota, ComputeQuota, CreateAddon, CreateEksCluster,
    CreateHyperPodCluster, CreateMlflowApp, CreateRouteTable, CreateSecurityGroup, CreateSubnet,
    Eks, EksCluster, Governance, GrafanaWorkspace, HyperPod, HyperPodCluster, Iam,
    InstanceGroupSpec, Kube, KubeTarget, KubernetesVersion, ListQuery, ListedPrice, LogLine,
    LogStream, Logs, Metrics, Mlflow, MlflowApp, NetKind, Network, NodeAction, NodeActionResult,
    NodeDetail, NodePage, ObjectRef, ObjectStore, PriceList, Quotas, RangeQuery, ResourceState,
    Role, SchedulerConfig, SchedulerPolicy, Series, ServiceCall, Subnet, Tags, TeamQuota,
    TieredStorage, TrackingCall, TrainingPlan, Vpc, Workspace, Zone,
};
use crate::{Cloud, CloudMode};
use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde_json::Value;

/// Refuses every call with `reason`.
pub struct Unavailable {
    pub region: String,
    pub reason: String,
}

impl Unavailable {
    fn refuse(&self, operation: &str) -> CloudError {
        CloudError::new("aws", operation, "AwsUnavailable", self.reason.clone())
    }

    /// Wraps the refusal in every port.
    pub fn cloud(self: std::sync::Arc<Self>) -> Cloud {
        Cloud {
            mode: CloudMode::Aws,
            network: self.clone(),
            eks: self.clone(),
            hyperpod: self.clone(),
            iam: self.clone(),
            objects: self.clone(),
            quotas: self.clone(),
            mlflow: self.clone(),
            governance: self.clone(),
            logs: self.clone(),
            metrics: self.clone(),
            prices: self.clone(),
            identity: self.clone(),
            kube: self,
            releases: std::sync::Arc::new(super::web::HttpReleases::new(None)),
            shared_bucket: None,
            data_buckets: None,
        }
    }
}

#[async_trait]
impl Network for Unavailable {
    async fn attach_internet_gateway(&self, _igw_id: &str, _vpc_id: &str) -> CloudResult<()> {
        Err(self.refuse("attach_internet_gateway"))
    }
    async fn ensure_default_route(&self, _route_table_id: &str, _target: &str) -> CloudResult<()> {
        Err(self.refuse("ensure_default_route"))
    }
    async fn ensure_self_referencing(&self, _group_id: &str) -> CloudResult<()> {
        Err(self.refuse("ensure_self_referencing"))
    }
    fn region(&self) -> String {
        self.region.clone()
    }
    async fn describe_availability_zones(&self) -> CloudResult<Vec<Zone>> {
        Err(self.refuse("describe_availability_zones"))
    }
    async fn describe_instance_type_offerings(&self, _zone: &str) -> CloudResult<Vec<String>> {
        Err(self.refuse("describe_instance_type_offerings"))
    }
    async fn describe_vpcs(&self) -> CloudResult<Vec<Vpc>> {
        Err(self.refuse("describe_vpcs"))
    }
    async fn describe_subnets(&self, _vpc_id: &str) -> CloudResult<Vec<Subnet>> {
        Err(self.refuse("describe_subnets"))
    }
    async fn find_tagged(&self, _kind: NetKind, _tags: &Tags) -> CloudResult<Vec<String>> {
        Err(self.refuse("find_tagged"))
    }
    async fn create_vpc(&self, _cidr: Ipv4Net, _tags: &Tags) -> CloudResult<Vpc> {
        Err(self.refuse("create_vpc"))
    }
    async fn associate_vpc_cidr(&self, _vpc_id: &str, _cidr: Ipv4Net) -> CloudResult<()> {
        Err(self.refuse("associate_vpc_cidr"))
    }
    async fn create_subnet(&self, _req: &CreateSubnet) -> CloudResult<Subnet> {
        Err(self.refuse("create_subnet"))
    }
    async fn create_internet_gateway(&self, _vpc_id: &str, _tags: &Tags) -> CloudResult<String> {
        Err(self.refuse("create_internet_gateway"))
    }
    async fn create_nat_gateway(&self, _subnet_id: &str, _tags: &Tags) -> CloudResult<String> {
        Err(self.refuse("create_nat_gateway"))
    }
    async fn nat_gateway_state(&self, _id: &str) -> CloudResult<ResourceState> {
        Err(self.refuse("nat_gateway_state"))
    }
    async fn create_route_table(&self, _req: &CreateRouteTable) -> CloudResult<String> {
        Err(self.refuse("create_route_table"))
    }
    async fn associate_route_table(
        &self,
        _route_table_id: &str,
        _subnet_id: &str,
    ) -> CloudResult<()> {
        Err(self.refuse("associate_route_table"))
    }
    async fn create_security_group(&self, _req: &CreateSecurityGroup) -> CloudResult<String> {
        Err(self.refuse("create_security_group"))
    }
    async fn create_s3_endpoint(
        &self,
        _vpc_id: &str,
        _route_table_ids: &[String],
        _tags: &Tags,
    ) -> CloudResult<String> {
        Err(self.refuse("create_s3_endpoint"))
    }
    async fn delete(&self, _kind: NetKind, _id: &str) -> CloudResult<()> {
        Err(self.refuse("delete"))
    }
}

#[async_trait]
impl Eks for Unavailable {
    async fn addon_versions(&self, _a: &str, _v: &str) -> CloudResult<Vec<AddonVersion>> {
        Err(self.refuse("addon_versions"))
    }
    async fn update_addon(&self, _req: &CreateAddon) -> CloudResult<()> {
        Err(self.refuse("update_addon"))
    }
    async fn find_pod_identity(&self, _c: &str, _n: &str, _s: &str) -> CloudResult<Option<String>> {
        Err(self.refuse("find_pod_identity"))
    }
    async fn create_pod_identity(
        &self,
        _c: &str,
        _n: &str,
        _s: &str,
        _r: &str,
    ) -> CloudResult<String> {
        Err(self.refuse("create_pod_identity"))
    }
    async fn delete_pod_identity(&self, _cluster: &str, _association_id: &str) -> CloudResult<()> {
        Err(self.refuse("delete_pod_identity"))
    }
    async fn create_cluster(&self, _req: &CreateEksCluster) -> CloudResult<EksCluster> {
        Err(self.refuse("create_cluster"))
    }
    async fn describe_cluster(&self, _name: &str) -> CloudResult<Option<EksCluster>> {
        Err(self.refuse("describe_cluster"))
    }
    async fn delete_cluster(&self, _name: &str) -> CloudResult<()> {
        Err(self.refuse("delete_cluster"))
    }
    async fn kubernetes_versions(&self, _: &[String]) -> CloudResult<Vec<KubernetesVersion>> {
        Err(self.refuse("kubernetes_versions"))
    }
    async fn update_cluster_version(&self, _: &str, _: &str, _: &str) -> CloudResult<String> {
        Err(self.refuse("update_cluster_version"))
    }
    async fn tag_cluster(&self, _arn: &str, _tags: &Tags) -> CloudResult<()> {
        Err(self.refuse("tag_cluster"))
    }
    async fn has_access_entry(&self, _cluster: &str, _principal_arn: &str) -> CloudResult<bool> {
        Err(self.refuse("has_access_entry"))
    }
    async fn create_access_entry(&self, _cluster: &str, _principal_arn: &str) -> CloudResult<()> {
        Err(self.refuse("create_access_entry"))
    }
    async fn associate_access_policy(
        &self,
        _cluster: &str,
        _principal_arn: &str,
        _policy: &crate::AccessPolicy,
    ) -> CloudResult<()> {
        Err(self.refuse("AssociateAccessPolicy"))
    }
    async fn disassociate_access_policy(
        &self,
        _cluster: &str,
        _principal_arn: &str,
        _policy_arn: &str,
    ) -> CloudResult<()> {
        Err(self.refuse("DisassociateAccessPolicy"))
    }
    async fn access_policies(
        &self,
        _cluster: &str,
        _principal_arn: &str,
    ) -> CloudResult<Option<Vec<crate::AccessPolicy>>> {
        Err(self.refuse("ListAssociatedAccessPolicies"))
    }
    async fn create_addon(&self, _req: &CreateAddon) -> CloudResult<Addon> {
        Err(self.refuse("create_addon"))
    }
    async fn describe_addon(&self, _cluster: &str, _name: &str) -> CloudResult<Option<Addon>> {
        Err(self.refuse("describe_addon"))
    }
    async fn delete_addon(&self, _cluster: &str, _name: &str) -> CloudResult<()> {
        Err(self.refuse("delete_addon"))
    }
}

#[async_trait]
impl HyperPod for Unavailable {
    async fn delete_instance_groups(&self, _name: &str, _groups: &[String]) -> CloudResult<()> {
        Err(self.refuse("delete_instance_groups"))
    }
    async fn set_tiered_storage(&self, _name: &str, _config: TieredStorage) -> CloudResult<()> {
        Err(self.refuse("set_tiered_storage"))
    }
    async fn set_autoscaling(&self, _name: &str, _role: Option<&str>) -> CloudResult<()> {
        Err(self.refuse("set_autoscaling"))
    }
    async fn update_cluster(
        &self,
        _name: &str,
        _groups: &[InstanceGroupSpec],
        _continuous: bool,
    ) -> CloudResult<()> {
        Err(self.refuse("update_cluster"))
    }
    async fn update_cluster_software(
        &self,
        _name: &str,
        _update: &crate::SoftwareUpdate,
    ) -> CloudResult<()> {
        Err(self.refuse("update_cluster_software"))
    }
    async fn node_action(
        &self,
        _name: &str,
        _a: NodeAction,
        _ids: &[String],
    ) -> CloudResult<NodeActionResult> {
        Err(self.refuse("node_action"))
    }
    async fn list_training_plans(&self) -> CloudResult<Vec<TrainingPlan>> {
        Err(self.refuse("list_training_plans"))
    }
    async fn describe_cluster_node(
        &self,
        _name: &str,
        _node_id: &str,
    ) -> CloudResult<Option<NodeDetail>> {
        Err(self.refuse("describe_cluster_node"))
    }
    async fn list_cluster_events(
        &self,
        _name: &str,
        _node_id: Option<&str>,
        _limit: usize,
    ) -> CloudResult<Vec<ClusterEvent>> {
        Err(self.refuse("list_cluster_events"))
    }
    async fn create_cluster(&self, _req: &CreateHyperPodCluster) -> CloudResult<String> {
        Err(self.refuse("create_cluster"))
    }
    async fn describe_cluster(&self, _name: &str) -> CloudResult<Option<HyperPodCluster>> {
        Err(self.refuse("describe_cluster"))
    }
    async fn list_cluster_nodes(
        &self,
        _name: &str,
        _next_token: Option<String>,
    ) -> CloudResult<NodePage> {
        Err(self.refuse("list_cluster_nodes"))
    }
    async fn delete_cluster(&self, _name: &str) -> CloudResult<()> {
        Err(self.refuse("delete_cluster"))
    }
    async fn tag_cluster(&self, _arn: &str, _tags: &Tags) -> CloudResult<()> {
        Err(self.refuse("tag_cluster"))
    }
}

#[async_trait]
impl Iam for Unavailable {
    async fn add_trust_statement(&self, _role: &str, _statement: &Value) -> CloudResult<()> {
        Err(self.refuse("add_trust_statement"))
    }
    async fn caller_identity(&self) -> CloudResult<CallerIdentity> {
        Err(self.refuse("caller_identity"))
    }
    async fn get_role(&self, _name: &str) -> CloudResult<Option<Role>> {
        Err(self.refuse("get_role"))
    }
    async fn create_role(
        &self,
        _name: &str,
        _trust_policy: &Value,
        _tags: &Tags,
    ) -> CloudResult<Role> {
        Err(self.refuse("create_role"))
    }
    async fn get_role_policy(&self, _role: &str, _policy_name: &str) -> CloudResult<Option<Value>> {
        Err(self.refuse("get_role_policy"))
    }
    async fn put_role_policy(
        &self,
        _role: &str,
        _policy_name: &str,
        _document: &Value,
    ) -> CloudResult<()> {
        Err(self.refuse("put_role_policy"))
    }
    async fn attach_role_policy(&self, _role: &str, _policy_arn: &str) -> CloudResult<()> {
        Err(self.refuse("attach_role_policy"))
    }
    async fn delete_role(&self, _name: &str) -> CloudResult<()> {
        Err(self.refuse("delete_role"))
    }
    async fn find_oidc_provider(&self, _issuer_url: &str) -> CloudResult<Option<String>> {
        Err(self.refuse("find_oidc_provider"))
    }
    async fn create_oidc_provider(&self, _issuer_url: &str, _tags: &Tags) -> CloudResult<String> {
        Err(self.refuse("create_oidc_provider"))
    }
    fn permissions_boundary(&self) -> Option<String> {
        None
    }
    async fn simulate(
        &self,
        _principal: &str,
        _probes: &[crate::calls::Probe],
    ) -> CloudResult<Vec<String>> {
        Err(self.refuse("simulate"))
    }
}

#[async_trait]
impl ObjectStore for Unavailable {
    async fn bucket_owner(&self, _bucket: &str) -> CloudResult<BucketOwner> {
        Err(self.refuse("bucket_owner"))
    }
    async fn create_bucket(&self, _bucket: &str, _tags: &Tags) -> CloudResult<()> {
        Err(self.refuse("create_bucket"))
    }
    async fn put_object(&self, _bucket: &str, _key: &str, _body: Vec<u8>) -> CloudResult<()> {
        Err(self.refuse("put_object"))
    }
    async fn list_objects(&self, _bucket: &str, _prefix: &str) -> CloudResult<Vec<String>> {
        Err(self.refuse("list_objects"))
    }
}

#[async_trait]
impl Metrics for Unavailable {
    async fn query_range(&self, _w: &Workspace, _q: &RangeQuery) -> CloudResult<Vec<Series>> {
        Err(self.refuse("query_range"))
    }
    async fn find_workspace(&self, _alias: &str) -> CloudResult<Option<AmpWorkspace>> {
        Err(self.refuse("ListWorkspaces"))
    }
    async fn create_workspace(&self, _alias: &str, _tags: &Tags) -> CloudResult<AmpWorkspace> {
        Err(self.refuse("CreateWorkspace"))
    }
    async fn describe_grafana(&self, _id: &str) -> CloudResult<Option<GrafanaWorkspace>> {
        Err(self.refuse("DescribeWorkspace"))
    }
}

#[async_trait]
impl Logs for Unavailable {
    async fn streams(
        &self,
        _group: &str,
        _prefix: &str,
        _limit: usize,
    ) -> CloudResult<Vec<LogStream>> {
        Err(self.refuse("streams"))
    }
    async fn tail(&self, _group: &str, _stream: &str, _limit: usize) -> CloudResult<Vec<LogLine>> {
        Err(self.refuse("tail"))
    }
}

#[async_trait]
impl PriceList for Unavailable {
    async fn hyperpod_prices(&self, _region: &str) -> CloudResult<Vec<ListedPrice>> {
        Err(self.refuse("GetProducts"))
    }
}

#[async_trait]
impl Quotas for Unavailable {
    async fn hyperpod_cluster_quotas(&self) -> CloudResult<Vec<ClusterUsageQuota>> {
        Err(self.refuse("hyperpod_cluster_quotas"))
    }
}

#[async_trait]
impl Kube for Unavailable {
    async fn apply(&self, _target: &KubeTarget, _manifest: &Value) -> CloudResult<()> {
        Err(self.refuse("apply"))
    }
    async fn get(&self, _target: &KubeTarget, _obj: &ObjectRef) -> CloudResult<Option<Value>> {
        Err(self.refuse("get"))
    }
    async fn delete(&self, _target: &KubeTarget, _obj: &ObjectRef) -> CloudResult<()> {
        Err(self.refuse("delete"))
    }
    async fn patch_metadata(
        &self,
        _target: &KubeTarget,
        _obj: &ObjectRef,
        _labels: &Value,
        _annotations: &Value,
    ) -> CloudResult<()> {
        Err(self.refuse("patch_metadata"))
    }
    async fn patch_spec(
        &self,
        _target: &KubeTarget,
        _obj: &ObjectRef,
        _spec: &Value,
    ) -> CloudResult<()> {
        Err(self.refuse("patch_spec"))
    }
    async fn create(&self, _target: &KubeTarget, _manifest: &Value) -> CloudResult<Value> {
        Err(self.refuse("create"))
    }
    async fn list(&self, _target: &KubeTarget, _query: &ListQuery<'_>) -> CloudResult<Vec<Value>> {
        Err(self.refuse("list"))
    }
    async fn cluster_state(
        &self,
        _target: &KubeTarget,
    ) -> CloudResult<std::sync::Arc<ClusterState>> {
        Err(self.refuse("cluster_state"))
    }
    async fn service_post(
        &self,
        _target: &KubeTarget,
        _service: &ServiceCall<'_>,
        _body: &Value,
    ) -> CloudResult<Value> {
        Err(self.refuse("service_post"))
    }
}

#[async_trait]
impl Mlflow for Unavailable {
    async fn find_app(&self, _name: &str) -> CloudResult<Option<MlflowApp>> {
        Err(self.refuse("ListMlflowApps"))
    }
    async fn create_app(&self, _req: &CreateMlflowApp<'_>) -> CloudResult<String> {
        Err(self.refuse("CreateMlflowApp"))
    }
    async fn presigned_url(&self, _arn: &str, _expires_in: u32) -> CloudResult<String> {
        Err(self.refuse("CreatePresignedMlflowAppUrl"))
    }
    async fn tracking(&self, _arn: &str, _call: TrackingCall<'_>) -> CloudResult<Value> {
        Err(self.refuse("MlflowTracking"))
    }
}

#[async_trait]
impl Governance for Unavailable {
    async fn scheduler_configs(&self, _cluster_arn: &str) -> CloudResult<Vec<SchedulerConfig>> {
        Err(self.refuse("ListClusterSchedulerConfigs"))
    }
    async fn create_scheduler_config(
        &self,
        _name: &str,
        _cluster_arn: &str,
        _policy: &SchedulerPolicy,
    ) -> CloudResult<String> {
        Err(self.refuse("CreateClusterSchedulerConfig"))
    }
    async fn update_scheduler_config(
        &self,
        _id: &str,
        _version: i32,
        _policy: &SchedulerPolicy,
    ) -> CloudResult<()> {
        Err(self.refuse("UpdateClusterSchedulerConfig"))
    }
    async fn delete_scheduler_config(&self, _id: &str) -> CloudResult<()> {
        Err(self.refuse("DeleteClusterSchedulerConfig"))
    }
    async fn compute_quotas(&self, _cluster_arn: &str) -> CloudResult<Vec<ComputeQuota>> {
        Err(self.refuse("ListComputeQuotas"))
    }
    async fn create_compute_quota(
        &self,
        _name: &str,
        _cluster_arn: &str,
        _team: &str,
        _quota: &TeamQuota,
    ) -> CloudResult<String> {
        Err(self.refuse("CreateComputeQuota"))
    }
    async fn update_compute_quota(
        &self,
        _id: &str,
        _version: i32,
        _team: &str,
        _quota: &TeamQuota,
    ) -> CloudResult<()> {
        Err(self.refuse("UpdateComputeQuota"))
    }
    async fn delete_compute_quota(&self, _id: &str) -> CloudResult<()> {
        Err(self.refuse("DeleteComputeQuota"))
    }
}

#[async_trait]
impl crate::identity::Identity for Unavailable {
    async fn who_signed(
        &self,
        _call: &crate::identity::PresignedCall,
        _deployment: &str,
    ) -> CloudResult<crate::identity::SignInIdentity> {
        Err(self.refuse("GetCallerIdentity"))
    }
}
