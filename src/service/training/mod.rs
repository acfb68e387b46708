//! Training jobs at the edge: a recipe and a few decision-level inputs become a validated
//! `HyperPodPyTorchJob` or `RayJob` (every path under `/s3`, the instance type one the cluster
//! has, the operator installed), submitted as an operation that follows it to the end; and the
//! jobs on a cluster (ours and others'), read from their operators' status.

pub mod start;

mod manifests;
mod recipes;
mod request;
mod views;

pub use manifests::{
    pytorch_job, ray_job, JobSpec, AGENT_DIR, DATA_CLAIM, INSTALLED_LAUNCHER, JOB_LABEL,
};
pub use recipes::{recipe, CommandInputs, Recipe, RecipeInput, Runtime, RECIPES};
pub use request::{
    Checkpointing, Elastic, ElasticAgent, HangDetection, PodPackages, RecoveryBudget,
    TrainingJobRequest,
};
pub use views::*;

use serde_json::{json, Value};

use super::shared::resources::ClusterResources;
use super::{cluster::records::kube_target, storage::list_storage};

use super::steps::workloads::ApplyParams;
use super::validate;
use crate::cloud::{gpus_per_instance, Capacity, CloudError, ObjectRef};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;

/// KubeRay's `MaxRayJobNameLength` (`ray-operator/controllers/ray/utils/constant.go`).
pub const MAX_RAY_JOB_NAME: usize = 47;

/// The EKS add-on of the HyperPod training operator.
const TRAINING_OPERATOR_ADDON: &str = "amazon-sagemaker-hyperpod-training-operator";

/// A path under the S3 claim's mount: `/s3/...`, no `..`, plain characters only.
fn s3_path(field: &str, p: &str) -> ApiResult<String> {
    let ok = p.starts_with("/s3/")
        && p.len() <= 512
        && !p.split('/').any(|seg| seg == ".." || seg == ".")
        && !p.contains("//")
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '=' | '+'));
    validate::require(
        ok,
        field,
        format!(
            "`{}` is not a path under /s3 (the cluster's S3 claim, mounted in every pod)",
            validate::truncate(p)
        ),
        json!("/s3/<prefix in the shared bucket>, e.g. /s3/models/Qwen/Qwen3-8B"),
    )?;
    Ok(p.trim_end_matches('/').to_string())
}

fn image(field: &str, image: &str) -> ApiResult<()> {
    let ok = (3..=255).contains(&image.len())
        && !image.starts_with(['-', '/', '.'])
        && image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | ':' | '@'));
    validate::require(
        ok,
        field,
        format!("`{}` is not a container image reference", validate::truncate(image)),
        json!("registry/repository:tag, e.g. 763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.6.0-gpu-py312"),
    )
}

fn args(field: &str, args: &[String]) -> ApiResult<()> {
    validate::require(
        args.len() <= 64,
        field,
        format!("{} arguments: at most 64", args.len()),
        json!(["--epochs=3"]),
    )?;
    for a in args {
        let ok =
            (1..=512).contains(&a.len()) && a.chars().all(|c| c.is_ascii_graphic() || c == ' ');
        validate::require(
            ok,
            field,
            format!(
                "argument `{}` is not printable text of 1–512 characters",
                validate::truncate(a)
            ),
            json!("--learning_rate=1e-5"),
        )?;
    }
    Ok(())
}

fn hang_detection(m: &HangDetection) -> ApiResult<()> {
    let ok = (1..=256).contains(&m.log_pattern.len())
        && !m.log_pattern.contains(['\n', '\r'])
        && m.log_pattern.matches('(').count() <= 1 + m.log_pattern.matches("\\(").count();
    validate::require(
        ok,
        "monitoring.logPattern",
        "the log pattern is a one-line regular expression of 1–256 characters with at most one capturing group".into(),
        json!(".*loss: ([0-9.]+).*"),
    )?;
    validate::require(
        m.start_cutoff_seconds.is_some() || m.recurring_frequency_seconds.is_some() || m.metric_threshold.is_some(),
        "monitoring",
        "a rule needs a start cut-off, a recurring frequency or a metric threshold to detect anything".into(),
        json!({"startCutoffSeconds": 600, "recurringFrequencySeconds": 300}),
    )?;
    let ops = ["gt", "lt", "eq", "gteq", "lteq"];
    match (&m.metric_threshold, &m.operator) {
        (None, None) => Ok(()),
        (Some(_), Some(op)) if ops.contains(&op.as_str()) => Ok(()),
        (Some(_), Some(op)) => Err(ApiError::validation_hint(
            "monitoring.operator",
            format!("`{}` is not a comparison", validate::truncate(op)),
            json!(ops),
        )),
        _ => Err(ApiError::validation_hint(
            "monitoring.metricThreshold",
            "a metric threshold and its operator go together",
            json!({"metricThreshold": 100, "operator": "lt"}),
        )),
    }
}

pub(super) fn cloud_err(e: CloudError) -> ApiError {
    ApiError::Cloud(Box::new(e))
}

/// Whether the pods install the elastic agent at start; refuses what cannot run `hyperpodrun`:
/// a stock image said to carry it, or an install this control plane may not make.
fn elastic_agent(req: &TrainingJobRequest, image: &str, packages: &PodPackages) -> ApiResult<bool> {
    let dockerfile = "recipes/elastic-agent.Dockerfile";
    match req.elastic_agent.unwrap_or_default() {
        ElasticAgent::Bundled if crate::cloud::images::lacks_elastic_agent(image) => {
            Err(ApiError::validation_hint(
                "elasticAgent",
                format!(
                    "`{}` carries no HyperPod elastic agent (hyperpod-elastic-agent): its pods would exit with `hyperpodrun: not found`",
                    validate::truncate(image)
                ),
                json!(format!("leave elasticAgent out (it is installed at pod start), or build an image from {dockerfile} (BASE_IMAGE={image}) and submit it with elasticAgent `bundled`")),
            ))
        }
        ElasticAgent::Bundled => Ok(false),
        ElasticAgent::Install if *packages == PodPackages::Off => Err(ApiError::validation_hint(
            "elasticAgent",
            "this control plane installs nothing at pod start (--pod-package-index off), and the recipe runs `hyperpodrun` from the HyperPod elastic agent".to_string(),
            json!(format!("build an image from {dockerfile} (BASE_IMAGE={image}), push it where the cluster pulls from, and submit it as `image` with elasticAgent `bundled`")),
        )),
        ElasticAgent::Install => Ok(true),
    }
}

pub(super) fn job_ref(runtime: Runtime, namespace: &str, name: &str) -> ObjectRef {
    let (api_version, kind) = match runtime {
        Runtime::HyperPodPytorch => ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"),
        Runtime::Ray => ("ray.io/v1", "RayJob"),
    };
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// A training job's object by its kind as listed (`HyperPodPyTorchJob`, `RayJob`).
pub(crate) fn job_object(kind: &str, namespace: &str, name: &str) -> Option<ObjectRef> {
    let runtime = match kind {
        "HyperPodPyTorchJob" => Runtime::HyperPodPytorch,
        "RayJob" => Runtime::Ray,
        _ => return None,
    };
    Some(job_ref(runtime, namespace, name))
}

/// Validates a submission and makes its operation's parameters. Nothing is applied here.
pub async fn training_params(
    engine: &Engine,
    cluster: &str,
    req: &TrainingJobRequest,
    packages: &PodPackages,
) -> ApiResult<Value> {
    validate::dns_label("jobName", "job name", &req.job_name)?;
    validate::require(
        req.job_name.len() <= 50,
        "jobName",
        format!(
            "`{}` is longer than 50 characters (pods add their own suffix)",
            req.job_name
        ),
        json!("llama-sft-1"),
    )?;
    let Some(recipe) = recipe(&req.recipe) else {
        return Err(ApiError::validation_hint(
            "recipe",
            format!("`{}` is not a recipe", validate::truncate(&req.recipe)),
            json!(RECIPES.iter().map(|r| r.name).collect::<Vec<_>>()),
        ));
    };
    let pytorch = recipe.runtime == Runtime::HyperPodPytorch;
    // KubeRay names the RayJob's cluster `<job>-<5 chars>` and refuses a RayJob whose name
    // would make that cluster name too long (`MaxRayJobNameLength`).
    validate::require(
        pytorch || req.job_name.len() <= MAX_RAY_JOB_NAME,
        "jobName",
        format!(
            "`{}` is {} characters: KubeRay takes RayJob names of at most {MAX_RAY_JOB_NAME} (its RayCluster adds a suffix)",
            req.job_name,
            req.job_name.len()
        ),
        json!("verl-grpo-1"),
    )?;
    let nodes = match req.node_count {
        None => 1,
        Some(n) if (1..=256).contains(&n) => n as u32,
        Some(n) => {
            return Err(ApiError::validation_hint(
                "nodeCount",
                format!("{n} nodes: a job runs on 1 to 256 nodes"),
                json!(2),
            ))
        }
    };
    // Decision-level inputs: each the recipe names, each a path under /s3.
    let mut paths: Vec<(&'static str, String)> = Vec::new();
    for (field, value) in [
        ("script", &req.script),
        ("model", &req.model),
        ("dataset", &req.dataset),
    ] {
        let wanted = recipe.inputs.iter().find(|i| i.field == field);
        match (value, wanted) {
            (Some(v), Some(_)) => paths.push((field, s3_path(field, v)?)),
            (Some(_), None) => {
                return Err(ApiError::validation(
                    field,
                    format!("recipe `{}` takes no `{field}`", recipe.name),
                ))
            }
            (None, Some(i)) if i.required => {
                return Err(ApiError::validation_hint(
                    field,
                    format!(
                        "recipe `{}` needs `{field}`: {}",
                        recipe.name, i.description
                    ),
                    json!("/s3/..."),
                ))
            }
            (None, _) => {}
        }
    }
    let output = match &req.output {
        Some(o) => s3_path("output", o)?,
        None => format!("/s3/outputs/{}", req.job_name),
    };
    paths.push(("output", output.clone()));
    if let Some(i) = &req.image {
        image("image", i)?;
    }
    let extra = req.args.clone().unwrap_or_default();
    args("args", &extra)?;
    let tiered = req.checkpointing == Some(Checkpointing::ManagedTiered);
    if !pytorch {
        for (field, given) in [
            ("recovery", req.recovery.is_some()),
            ("monitoring", req.monitoring.is_some()),
            ("elastic", req.elastic.is_some()),
            ("elasticAgent", req.elastic_agent.is_some()),
        ] {
            if given {
                return Err(ApiError::validation_hint(
                    field,
                    format!("`{field}` is a HyperPod training operator setting; recipe `{}` runs on KubeRay", recipe.name),
                    json!(RECIPES.iter().filter(|r| r.runtime == Runtime::HyperPodPytorch).map(|r| r.name).collect::<Vec<_>>()),
                ));
            }
        }
    }
    let image_ref = req.image.as_deref().unwrap_or(recipe.image);
    let install_agent = pytorch && elastic_agent(req, image_ref, packages)?;
    if let Some(m) = &req.monitoring {
        hang_detection(m)?;
    }
    if let Some(b) = &req.recovery {
        validate::require(
            b.job_max_retry_count <= 100 && (60..=604_800).contains(&b.eval_period_seconds),
            "recovery",
            "jobMaxRetryCount is 0–100 and evalPeriodSeconds 60–604800".into(),
            serde_json::to_value(RecoveryBudget::default()).unwrap_or_default(),
        )?;
    }
    // The cluster: the instance type must be one of its groups'.
    let record = super::live_cluster(engine, cluster).await?;
    let groups = ClusterResources::of(&record.resources)
        .instance_groups
        .unwrap_or_default();
    let Some(group) = groups.iter().find(|g| g.instance_type == req.instance_type) else {
        return Err(ApiError::validation_hint(
            "instanceType",
            format!(
                "`{}` has no instance group of {}",
                cluster,
                validate::truncate(&req.instance_type)
            ),
            json!(groups.iter().map(|g| &g.instance_type).collect::<Vec<_>>()),
        ));
    };
    let gpus = gpus_per_instance(&req.instance_type);
    validate::require(
        gpus > 0,
        "instanceType",
        format!("{} has no NVIDIA GPUs for these recipes", req.instance_type),
        json!(groups
            .iter()
            .filter(|g| gpus_per_instance(&g.instance_type) > 0)
            .map(|g| &g.instance_type)
            .collect::<Vec<_>>()),
    )?;
    // What elastic training does not cover (AWS's elastic training page): refused up front.
    if let Some(e) = &req.elastic {
        validate::require(
            e.min_nodes >= 1 && e.min_nodes <= nodes && nodes <= e.max_nodes && e.max_nodes <= 256,
            "elastic",
            format!("minNodes ≤ nodeCount ({nodes}) ≤ maxNodes, between 1 and 256"),
            json!({"minNodes": 1, "maxNodes": nodes.max(2)}),
        )?;
        // Pods select nodes by instance type: any Spot group of that type may host them.
        if let Some(spot) = groups
            .iter()
            .find(|g| g.instance_type == group.instance_type && g.capacity == Capacity::Spot)
        {
            return Err(ApiError::validation_hint(
                "elastic",
                format!(
                    "elastic training does not support Spot capacity, and `{}` ({}) is Spot",
                    spot.name, spot.instance_type
                ),
                json!("drop `elastic`, or train on an instance type with no Spot group"),
            ));
        }
        if tiered {
            return Err(ApiError::validation_hint(
                "elastic",
                "elastic training does not support managed tiered checkpointing",
                json!("drop `elastic`, or use checkpointing `none` and save checkpoints under /s3"),
            ));
        }
    }
    let placement = super::teams::placement(
        engine,
        cluster,
        req.team.as_deref(),
        req.priority.as_deref(),
    )
    .await?;
    let namespace = placement.namespace();
    crate::service::people::access::require_write(
        engine,
        cluster,
        &namespace,
        "submit training jobs there",
    )
    .await?;
    if tiered && placement.team.is_some() {
        // Its service account and role are the default namespace's only.
        return Err(ApiError::validation_hint(
            "checkpointing",
            "managed tiered checkpointing runs in namespace default, not in a team's namespace",
            json!(
                "use checkpointing `none` and save checkpoints under /s3, or submit without `team`"
            ),
        ));
    }
    // The operator and the data contract.
    let target = kube_target(engine, cluster).await?;
    if pytorch {
        let addon = engine
            .cloud()
            .eks
            .describe_addon(cluster, TRAINING_OPERATOR_ADDON)
            .await
            .map_err(cloud_err)?;
        if !addon.is_some_and(|a| a.status == crate::cloud::AddonStatus::Active) {
            return Err(ApiError::Conflict {
                slug: ProblemType::TrainingOperatorMissing,
                detail: format!(
                    "recipe `{}` runs on the HyperPod training operator, which is not active on `{cluster}`: enable it with PATCH /api/clusters/{cluster}/features {{\"trainingOperator\": true}} (features_update), then submit again",
                    recipe.name
                ),
                field: Some("recipe".into()),
                operation_id: None,
            });
        }
    } else {
        let crd = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: "rayjobs.ray.io".into(),
        };
        if engine
            .cloud()
            .kube
            .get(&target, &crd)
            .await
            .map_err(cloud_err)?
            .is_none()
        {
            return Err(ApiError::Conflict {
                slug: ProblemType::KuberayMissing,
                detail: format!("recipe `{}` runs on KubeRay, whose RayJob kind is not installed on `{cluster}`: run the dependency stage (dependencies_install), then submit again", recipe.name),
                field: Some("recipe".into()),
                operation_id: None,
            });
        }
    }
    let claims = list_storage(engine, cluster).await?;
    if !claims
        .iter()
        .any(|c| c.claim_name == DATA_CLAIM && c.namespace == namespace)
    {
        return Err(ApiError::Conflict {
            slug: ProblemType::StorageMissing,
            detail: format!("training pods mount `{DATA_CLAIM}` at /s3, and `{cluster}` has none in namespace {namespace}: create it with storage_setup (no arguments; a team's namespace gets a copy), then submit again"),
            field: None,
            operation_id: None,
        });
    }
    let watch = job_ref(recipe.runtime, &namespace, &req.job_name);
    // Names are unique on the cluster, across the team namespaces: a job is found by its name.
    if list_training_jobs(engine, cluster)
        .await?
        .iter()
        .any(|j| j.name == req.job_name)
    {
        return Err(ApiError::Conflict {
            slug: ProblemType::JobExists,
            detail: format!("a training job `{}` already exists on `{cluster}`: pick another name, or delete it first (training_job_delete)", req.job_name),
            field: Some("jobName".into()),
            operation_id: None,
        });
    }
    let command = recipe.command(&CommandInputs {
        nodes,
        gpus,
        script: paths
            .iter()
            .find(|(k, _)| *k == "script")
            .map(|(_, v)| v.as_str()),
        model: paths
            .iter()
            .find(|(k, _)| *k == "model")
            .map(|(_, v)| v.as_str()),
        dataset: paths
            .iter()
            .find(|(k, _)| *k == "dataset")
            .map(|(_, v)| v.as_str()),
        output: &output,
        extra: &extra,
        launcher: if install_agent {
            INSTALLED_LAUNCHER
        } else {
            "hyperpodrun"
        },
    });
    let budget = req.recovery.clone().unwrap_or_default();
    let spec = JobSpec {
        name: &req.job_name,
        recipe: recipe.name,
        image: image_ref,
        instance_type: &req.instance_type,
        nodes,
        gpus,
        command,
        paths,
        recovery: pytorch.then_some(&budget),
        monitoring: req.monitoring.as_ref(),
        elastic: req.elastic.as_ref(),
        tiered_checkpointing: tiered,
        // Reports to the account's MLflow when it is set up for this cluster.
        tracking: crate::service::mlflow::training_tracking(engine, &target, &namespace).await,
        install_agent,
        package_index: packages.index(),
        placement: &placement,
    };
    let manifest = match recipe.runtime {
        Runtime::HyperPodPytorch => pytorch_job(&spec),
        Runtime::Ray => ray_job(&spec),
    };
    let params = ApplyParams {
        workload: format!("training/{}", req.job_name),
        manifests: vec![manifest],
        watch,
        prune: vec![],
        also_watch: vec![],
    };
    Ok(serde_json::to_value(params).map_err(anyhow::Error::from)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_s3_and_plain() {
        assert_eq!(
            s3_path("f", "/s3/models/Qwen/Qwen3-8B/").unwrap(),
            "/s3/models/Qwen/Qwen3-8B"
        );
        for bad in [
            "/data/x",
            "s3/x",
            "/s3/../etc",
            "/s3/a//b",
            "/s3/a b",
            "/s3/$(id)",
            "/s3/a;b",
            "/s3x/a",
        ] {
            assert!(s3_path("f", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_elastic_agent_is_installed_unless_the_image_carries_it_or_installs_are_off() {
        let req = |agent: Option<ElasticAgent>| TrainingJobRequest {
            job_name: "j".into(),
            recipe: "pytorch".into(),
            instance_type: "ml.g5.8xlarge".into(),
            node_count: None,
            script: None,
            model: None,
            dataset: None,
            output: None,
            args: None,
            image: None,
            recovery: None,
            monitoring: None,
            elastic: None,
            checkpointing: None,
            elastic_agent: agent,
            team: None,
            priority: None,
        };
        let stock = recipe("pytorch").unwrap().image;
        let own = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1";
        assert!(elastic_agent(&req(None), stock, &PodPackages::PyPi).unwrap());
        assert!(!elastic_agent(&req(Some(ElasticAgent::Bundled)), own, &PodPackages::Off).unwrap());
        for (agent, image, packages) in [
            (Some(ElasticAgent::Bundled), stock, PodPackages::PyPi),
            (None, stock, PodPackages::Off),
            (Some(ElasticAgent::Install), own, PodPackages::Off),
        ] {
            let e = elastic_agent(&req(agent), image, &packages).unwrap_err();
            assert!(
                format!("{e:?}").contains("recipes/elastic-agent.Dockerfile"),
                "{e:?}"
            );
        }
        assert_eq!(
            PodPackages::parse(Some("https://pypi.internal/simple/")).unwrap(),
            PodPackages::Index("https://pypi.internal/simple".into())
        );
        assert_eq!(PodPackages::parse(Some("off")).unwrap(), PodPackages::Off);
        assert!(PodPackages::parse(Some("pypi.internal")).is_err());
    }

    #[test]
    fn hang_detection_needs_something_to_detect_and_a_known_operator() {
        let rule = |threshold: Option<i64>, op: Option<&str>| HangDetection {
            log_pattern: ".*loss: ([0-9.]+).*".into(),
            start_cutoff_seconds: Some(600),
            recurring_frequency_seconds: None,
            metric_threshold: threshold,
            operator: op.map(str::to_string),
        };
        assert!(hang_detection(&rule(None, None)).is_ok());
        assert!(hang_detection(&rule(Some(5), Some("lt"))).is_ok());
        assert!(hang_detection(&rule(Some(5), None)).is_err());
        assert!(hang_detection(&rule(Some(5), Some("below"))).is_err());
    }
}
