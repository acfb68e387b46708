//! The catalogue of operation kinds: which phases each stage runs, in which order.
//!
//! ```text
//! cluster       vpc [→ secondary-cidr] → subnets → internet-gateway → nat-gateway → route-tables → security-groups
//!               → s3-endpoint → eks-role → eks-cluster → oidc-provider
//! dependencies  one phase per component of deps::COMPONENTS (read actual → apply what differs
//!               → wait for ready, or only for nodes): VPC CNI, kube-proxy, CoreDNS, namespaces,
//!               pod identity, cert-manager, S3 CSI (+ its role),
//!               NVIDIA and EFA device plugins, KubeRay, KEDA
//! hyperpod      compute-subnet → execution-role → shared-bucket → lifecycle-script → hyperpod-cluster
//!               → dependencies-ready (what the dependency stage applied before nodes existed)
//! storage       [shared-bucket | bucket-access (another bucket) →] volume (PV + PVC: S3 bucket or
//!               FSx for Lustre)
//! storage-delete  delete-volume → bucket-access (the S3 CSI role keeps only the buckets still mounted)
//! import        eks-cluster → hyperpod-cluster → access-entry → detect-dependencies
//! feature-<key> [role →] addon → pod-identity (enable) / the reverse (disable);
//!   tiered checkpointing: role → service-account → tiered-storage-config;
//!   managed autoscaling: role → autoscaling-config → node-class
//! pipeline      one phase per stage, each running (and watching) that stage's own operation
//! instance-group-add    compute-subnet → update-cluster (every group resent)
//! instance-group-scale  update-cluster
//! instance-group-delete delete-group
//! model-download | inference-deploy | endpoint-deploy | endpoint-update | pool-create | pool-scale
//!               [bucket-access (an endpoint's S3 model) | keda-identity (a deployment scaling on
//!               an AMP workspace) →] apply (what differs of the workload's objects, watched to
//!               complete/ready; pruned companions removed)
//! pool-assign   assign (a warm-pool pod relabelled for a model or back to its pool, read back)
//! mlflow-setup  mlflow-role → mlflow-app (found or created, watched to Created) → tracking-access
//! scheduling-policy  scheduler-config (the cluster's one SageMaker scheduler config, made or
//!               updated by version; one left CreateFailed is made again), watched to Created
//! team-create | team-update | team-delete  compute-quota (the team's SageMaker compute quota),
//!               watched to Created/Updated or gone; a new team then gets the cluster's claims
//!               in its namespace (team-storage), a removed one loses them first
//! access-grant  access-entry (the person's, made when missing) → access-policy (the team's
//!               namespace added to their edit or view policy)
//! access-revoke access-policy (the team's namespace taken from their team policies)
//! training-job  train (the HyperPodPyTorchJob or RayJob, followed to its end with its restarts)
//! workload-delete delete (watched until gone) [→ bucket-access (an endpoint)]
//! hyperpod-software-update  update-software (watched back to InService)
//! node-action   node-action (reboot | replace | delete one node, watched back to Running)
//! delete-cluster  delete-hyperpod → delete-eks → delete-gateways → delete-vpc → delete-roles → forget
//! forget-cluster  forget (the record only; nothing in the account is touched)
//! ```

pub mod access;
pub mod addons;
pub mod deps;
pub mod features;
pub mod governance;
pub mod groups;
pub mod hyperpod;
pub mod import;
pub mod keda;
pub mod mlflow;
pub mod network;
pub mod nodes;
pub mod ownership;
pub mod pools;
pub mod roles;
pub mod s3_access;
pub mod spaces;
pub mod storage;
pub mod teardown;
#[cfg(test)]
mod tests;
pub mod training;
pub mod upgrade;
pub mod workloads;

use std::sync::Arc;

use async_trait::async_trait;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cloud::{cluster_tags, Capacity, NetKind, Tags, Zone, CLUSTER_TAG, ROLE_TAG};
use crate::ops::{Poll, Stages, Step, StepCx, StepError, StepResult};
use crate::service::shared::kind::OpKind;
use crate::store::OpState;

/// Parameters of the `cluster` stage (validated).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterParams {
    pub region: String,
    /// Two zones: public and private subnets go in both.
    pub zones: Vec<Zone>,
    pub vpc_cidr: Option<Ipv4Net>,
    pub kubernetes_version: String,
    /// A second VPC block for the compute subnets of large fleets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary_cidr: Option<Ipv4Net>,
}

/// Parameters of the `hyperpod` stage (validated).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HyperPodParams {
    pub instance_group_name: String,
    pub instance_type: String,
    pub instance_count: u32,
    pub zone: String,
    pub zone_id: String,
    pub capacity: Capacity,
    pub deep_health_checks: bool,
    pub volume_size_gb: u32,
    /// `efa`, `efa-only`, or `None` for a standard interface.
    #[serde(default)]
    pub network_interface: Option<String>,
    /// Whether the stage ends by verifying the dependencies (which the dependency stage could
    /// only apply before nodes existed). `None` (a stage run on its own) verifies; a pipeline
    /// without a dependency stage has nothing to verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_dependencies: Option<bool>,
    /// Prefix length of the zone's compute subnet, when this stage creates it (default /20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_subnet_size: Option<u8>,
}

/// Parameters of a pipeline: the stages to run and their parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineParams {
    pub cluster: ClusterParams,
    pub hyperpod: HyperPodParams,
    pub dependencies: bool,
    pub storage: bool,
}

impl PipelineParams {
    pub fn stages(&self) -> Vec<OpKind> {
        OpKind::STAGES
            .into_iter()
            .filter(|stage| match stage {
                OpKind::Dependencies => self.dependencies,
                OpKind::Storage => self.storage,
                _ => true,
            })
            .collect()
    }

    fn params_for(&self, stage: OpKind) -> Value {
        match stage {
            OpKind::Cluster => serde_json::to_value(&self.cluster).unwrap_or_default(),
            OpKind::HyperPod => serde_json::to_value(HyperPodParams {
                verify_dependencies: Some(self.dependencies),
                ..self.hyperpod.clone()
            })
            .unwrap_or_default(),
            _ => json!({}),
        }
    }
}

/// Tags for a resource of this operation's cluster.
pub fn net_tags(cx: &StepCx<'_>, role: &str) -> Tags {
    cluster_tags(&cx.op.cluster, role)
}

/// The one resource of `kind` with this cluster's tag and `role`.
pub async fn find_tagged(cx: &StepCx<'_>, kind: NetKind, role: &str) -> StepResult<Option<String>> {
    let want = Tags::from([
        (CLUSTER_TAG.to_string(), cx.op.cluster.clone()),
        (ROLE_TAG.to_string(), role.to_string()),
    ]);
    Ok(cx
        .cloud
        .network
        .find_tagged(kind, &want)
        .await?
        .into_iter()
        .next())
}

/// Every resource of `kind` carrying this cluster's tag.
pub async fn find_all_tagged(cx: &StepCx<'_>, kind: NetKind) -> StepResult<Vec<String>> {
    let want = Tags::from([(CLUSTER_TAG.to_string(), cx.op.cluster.clone())]);
    Ok(cx.cloud.network.find_tagged(kind, &want).await?)
}

/// Runs one stage of a pipeline as its own operation and watches it.
pub struct StageStep {
    pub stage: OpKind,
}

#[async_trait]
impl Step for StageStep {
    fn name(&self) -> &'static str {
        self.stage.as_str()
    }
    async fn find(&self, cx: &StepCx<'_>) -> StepResult<Option<Value>> {
        let found = cx
            .engine
            .store()
            .find_by_key(&crate::service::Submission::stage_key(
                &cx.op.id,
                self.stage.as_str(),
            ))
            .await?;
        Ok(found.map(|(id, _)| json!({"operationId": id})))
    }
    async fn act(&self, cx: &StepCx<'_>) -> StepResult<Value> {
        let p: PipelineParams = cx.param()?;
        let sub = crate::service::Submission::stage_of(
            self.stage,
            &cx.op.cluster,
            p.params_for(self.stage),
            cx.op,
        );
        match crate::service::submit(cx.engine, sub).await {
            Ok(accepted) => Ok(json!({"operationId": accepted.operation_id})),
            Err(e) => Err(StepError::fatal(
                "stage-refused",
                format!("{} stage refused: {e}", self.stage),
            )),
        }
    }
    async fn poll(&self, cx: &StepCx<'_>, out: &Value) -> StepResult<Poll> {
        let id = out["operationId"].as_str().unwrap_or_default();
        let Some(child) = cx.engine.store().get_operation(id).await? else {
            return Err(StepError::fatal(
                "stage-missing",
                format!("stage operation {id} not found"),
            ));
        };
        match child.state {
            OpState::Succeeded => Ok(Poll::Ready(out.clone())),
            OpState::Failed | OpState::Cancelled => Err(StepError::fatal(
                "stage-failed",
                format!(
                    "{} stage {} ({}): {}",
                    self.stage,
                    child.state.as_str(),
                    id,
                    child
                        .error
                        .as_ref()
                        .and_then(|e| e["message"].as_str())
                        .unwrap_or("cancelled")
                ),
            )),
            _ => {
                let current = child
                    .phases
                    .iter()
                    .find(|p| p.state != crate::store::PhaseState::Succeeded)
                    .map(|p| match &p.progress {
                        Some(progress) => format!("{}: {progress}", p.name),
                        None => p.name.clone(),
                    })
                    .unwrap_or_default();
                Ok(Poll::Pending(format!("{} stage: {current}", self.stage)))
            }
        }
    }
    fn waits_on(&self, out: &Value) -> Option<String> {
        out["operationId"].as_str().map(str::to_string)
    }
    fn records_resources(&self) -> bool {
        false
    }
    fn starts(&self, params: &Value) -> Option<(String, Value)> {
        let p: PipelineParams = serde_json::from_value(params.clone()).ok()?;
        Some((self.stage.to_string(), p.params_for(self.stage)))
    }
}

/// The phases of the `cluster` stage after the VPC (and its secondary block).
fn network_steps() -> Vec<Arc<dyn Step>> {
    use network::*;
    vec![
        Arc::new(SubnetsStep),
        Arc::new(InternetGatewayStep),
        Arc::new(NatGatewayStep),
        Arc::new(RouteTablesStep),
        Arc::new(SecurityGroupsStep),
        Arc::new(S3EndpointStep),
        Arc::new(EksRoleStep),
        Arc::new(EksClusterStep),
        Arc::new(OidcProviderStep),
    ]
}

/// The domain's operation kinds, as the engine's [`Stages`]: which phases each kind runs.
pub struct OperationKinds;

impl Stages for OperationKinds {
    fn steps(&self, kind: &str, params: &Value) -> Option<Vec<Arc<dyn Step>>> {
        use hyperpod::*;
        use network::*;
        use teardown::*;
        let steps: Vec<Arc<dyn Step>> = match kind.parse::<OpKind>().ok()? {
            OpKind::Cluster => {
                let p: ClusterParams = serde_json::from_value(params.clone()).ok()?;
                let mut steps: Vec<Arc<dyn Step>> = vec![Arc::new(VpcStep)];
                if p.secondary_cidr.is_some() {
                    steps.push(Arc::new(SecondaryCidrStep));
                }
                steps.extend(network_steps());
                steps
            }
            OpKind::Dependencies => deps::COMPONENTS
                .iter()
                .map(|c| Arc::new(deps::ComponentStep(c)) as Arc<dyn Step>)
                .collect(),
            OpKind::HyperPod => vec![
                Arc::new(ComputeSubnetStep),
                Arc::new(ExecutionRoleStep),
                Arc::new(SharedBucketStep),
                Arc::new(LifecycleScriptStep),
                Arc::new(HyperPodClusterStep),
                Arc::new(deps::DependenciesReadyStep),
            ],
            OpKind::Storage => {
                let p: storage::StorageParams = serde_json::from_value(params.clone()).ok()?;
                let mut steps: Vec<Arc<dyn Step>> = Vec::new();
                if p.uses_shared_bucket() {
                    steps.push(Arc::new(SharedBucketStep));
                } else if matches!(p.source, storage::VolumeSource::S3 { .. }) {
                    steps.push(Arc::new(s3_access::BucketAccessStep));
                }
                steps.push(Arc::new(storage::VolumeStep));
                steps
            }
            OpKind::StorageDelete => vec![
                Arc::new(storage::DeleteVolumeStep),
                Arc::new(s3_access::BucketAccessStep),
            ],
            OpKind::Feature(id) => {
                let p: features::FeatureParams = serde_json::from_value(params.clone()).ok()?;
                features::of(id)?.chain(&p)?
            }
            // An endpoint loading its model from S3 gets the bucket on the S3 CSI role first.
            OpKind::EndpointDeploy | OpKind::EndpointUpdate => {
                let p: workloads::ApplyParams = serde_json::from_value(params.clone()).ok()?;
                let mut steps: Vec<Arc<dyn Step>> = Vec::new();
                if p.manifests
                    .iter()
                    .any(|m| s3_access::model_bucket(m).is_some())
                {
                    steps.push(Arc::new(s3_access::BucketAccessStep));
                }
                steps.push(Arc::new(workloads::ApplyStep));
                steps
            }
            // A deployment scaling on an AMP workspace gets KEDA its own identity first.
            OpKind::InferenceDeploy if keda::needs_identity(params) => vec![
                Arc::new(keda::KedaIdentityStep),
                Arc::new(workloads::ApplyStep),
            ],
            OpKind::ModelDownload
            | OpKind::InferenceDeploy
            | OpKind::PoolCreate
            | OpKind::PoolScale => vec![Arc::new(workloads::ApplyStep)],
            OpKind::PoolAssign => vec![Arc::new(pools::AssignStep)],
            OpKind::SpaceCreate | OpKind::SpaceUpdate => vec![Arc::new(workloads::ApplyStep)],
            OpKind::SpaceStatus => vec![Arc::new(spaces::SpaceStatusStep)],
            OpKind::SchedulingPolicy => vec![
                Arc::new(governance::ClearPredecessorStep(
                    governance::Predecessor::SchedulerConfig,
                )),
                Arc::new(governance::SchedulerConfigStep),
            ],
            OpKind::TeamCreate => vec![
                Arc::new(governance::ClearPredecessorStep(
                    governance::Predecessor::ComputeQuota,
                )),
                Arc::new(governance::ComputeQuotaStep),
                Arc::new(governance::TeamStorageStep),
            ],
            OpKind::TeamUpdate => vec![Arc::new(governance::ComputeQuotaStep)],
            OpKind::TeamDelete => vec![
                Arc::new(governance::TeamStorageStep),
                Arc::new(governance::ComputeQuotaStep),
            ],
            OpKind::AccessGrant => vec![
                Arc::new(access::PersonEntryStep),
                Arc::new(access::TeamPolicyStep),
            ],
            OpKind::AccessRevoke => vec![Arc::new(access::TeamPolicyStep)],
            OpKind::TrainingJob => vec![Arc::new(training::TrainStep)],
            OpKind::MlflowSetup => vec![
                Arc::new(mlflow::MlflowRoleStep),
                Arc::new(mlflow::MlflowAppStep),
                Arc::new(mlflow::TrackingAccessStep),
            ],
            // A removed endpoint's model bucket leaves the S3 CSI role (unless still mounted).
            OpKind::WorkloadDelete => {
                let endpoint = params["workload"]
                    .as_str()
                    .is_some_and(|w| w.starts_with("endpoint/"));
                let mut steps: Vec<Arc<dyn Step>> = vec![Arc::new(workloads::DeleteObjectsStep)];
                if endpoint {
                    steps.push(Arc::new(s3_access::BucketAccessStep));
                }
                steps
            }
            OpKind::HyperPodSoftwareUpdate => vec![Arc::new(workloads::SOFTWARE_UPDATE)],
            OpKind::ClusterUpgrade => {
                let p: upgrade::UpgradeParams = serde_json::from_value(params.clone()).ok()?;
                let mut steps: Vec<Arc<dyn Step>> = vec![Arc::new(upgrade::KubernetesVersionStep)];
                if !p.addons.is_empty() {
                    steps.push(Arc::new(upgrade::AddonsStep));
                }
                if p.running_jobs != upgrade::RunningJobs::Restart && !p.jobs.is_empty() {
                    steps.push(Arc::new(upgrade::RunningJobsStep));
                }
                if p.canary.is_some() {
                    steps.push(Arc::new(workloads::SoftwareUpdateStep {
                        phase: "software-canary",
                        plan_at: Some("canary"),
                    }));
                }
                if p.software.is_some() {
                    steps.push(Arc::new(workloads::SoftwareUpdateStep {
                        phase: "software",
                        plan_at: Some("software"),
                    }));
                }
                steps
            }
            OpKind::Import => vec![
                Arc::new(import::ImportEksStep),
                Arc::new(import::ImportHyperPodStep),
                Arc::new(import::AccessEntryStep),
                Arc::new(import::DetectDependenciesStep),
            ],
            OpKind::Pipeline => {
                let p: PipelineParams = serde_json::from_value(params.clone()).ok()?;
                p.stages()
                    .into_iter()
                    .map(|stage| Arc::new(StageStep { stage }) as Arc<dyn Step>)
                    .collect()
            }
            OpKind::NodeAction => vec![Arc::new(nodes::NodeActionStep)],
            OpKind::InstanceGroupAdd => vec![
                Arc::new(groups::GroupSubnetStep),
                Arc::new(groups::UpdateGroupsStep { adding: true }),
            ],
            OpKind::InstanceGroupScale => {
                vec![Arc::new(groups::UpdateGroupsStep { adding: false })]
            }
            OpKind::InstanceGroupDelete => vec![Arc::new(groups::DeleteGroupStep)],
            OpKind::DeleteCluster => vec![
                Arc::new(DeleteHyperPodStep),
                Arc::new(DeleteEksStep),
                Arc::new(DeleteGatewaysStep),
                Arc::new(DeleteVpcStep),
                Arc::new(DeleteRolesStep),
                Arc::new(ForgetStep),
            ],
            OpKind::ForgetCluster => vec![Arc::new(ForgetStep)],
        };
        Some(steps)
    }
}
