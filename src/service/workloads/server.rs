//! A model server's pod, as a deployment and a warm pool both run it: the image, arguments,
//! GPUs, port, instance type, storage claim and token checked field by field, then the pod
//! template (shared memory, the claim read-only at `/s3`, the token only by Secret reference).

use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::cluster::records::kube_target;
use crate::service::cluster::validate;
use crate::service::workloads::{list_storage, put_token_secret};

/// What a request says of the server it runs (each field optional, with the defaults below).
pub(super) struct ServerFields<'a> {
    /// Where it runs: default, or a team's namespace (its claim and token Secret live there).
    pub namespace: &'a str,
    pub image: Option<&'a str>,
    pub args: Option<&'a [String]>,
    pub gpus: Option<i64>,
    pub port: Option<i64>,
    pub instance_type: Option<&'a str>,
    pub claim: Option<&'a str>,
    pub hf_token: Option<&'a str>,
}

/// The checked server: its pod spec, port and image, and the annotations its pod template
/// carries (where Prometheus scrapes it).
pub(super) struct ServerPod {
    pub spec: Value,
    pub port: i64,
    pub image: String,
    pub annotations: Value,
}

/// The pod annotations Prometheus's `kubernetes-pods` scrape job (the community chart's, and
/// the Amazon Managed Service for Prometheus collector's) keeps: the autoscaling queries read
/// the engine's and the router's metrics from there, and nothing else makes them scraped.
pub(crate) fn scrape_annotations(port: i64) -> Value {
    json!({"prometheus.io/scrape": "true", "prometheus.io/port": port.to_string(),
           "prometheus.io/path": "/metrics"})
}

/// SGLang's server exports its metrics (`sglang:num_queue_reqs`, …) only with
/// `--enable-metrics`: added to a `sglang.launch_server` command that lacks it. Any other
/// command (a shell, a wrapper) is left as written.
fn with_metrics(image: &str, args: &[String]) -> Vec<String> {
    let mut args = args.to_vec();
    let launches = args.iter().any(|a| a == "sglang.launch_server");
    if is_sglang(image) && launches && !args.iter().any(|a| a == "--enable-metrics") {
        args.push("--enable-metrics".into());
    }
    args
}

pub(crate) fn image(field: &str, image: &str) -> ApiResult<()> {
    let ok = (1..=255).contains(&image.len())
        && !image.starts_with(['-', '.', '/', ':'])
        && image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@'));
    validate::require(
        ok,
        field,
        format!("`{}` is not a container image", validate::truncate(image)),
        json!("registry/repository:tag, e.g. vllm/vllm-openai:latest"),
    )
}

pub(crate) fn bounded(
    field: &str,
    v: Option<i64>,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
) -> ApiResult<i64> {
    let v = v.unwrap_or(default);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ApiError::validation_hint(
            field,
            format!("{v} is out of range"),
            json!(format!("{} to {}", range.start(), range.end())),
        ))
    }
}

/// Whether an image is SGLang's (the router speaks its worker protocol).
pub(super) fn is_sglang(image: &str) -> bool {
    let repo = image.split(['@']).next().unwrap_or(image);
    let repo = repo
        .rsplit_once(':')
        .map_or(repo, |(r, tag)| if tag.contains('/') { repo } else { r });
    repo.rsplit('/').next().unwrap_or(repo).contains("sglang")
}

/// Checks the server's fields against the cluster (its instance groups and storage claims),
/// stores the token in `<owner>-token`, and builds the pod spec.
pub(super) async fn server_pod(
    engine: &Engine,
    name: &str,
    owner: &str,
    f: &ServerFields<'_>,
) -> ApiResult<ServerPod> {
    let img = f.image.unwrap_or("vllm/vllm-openai:latest");
    image("image", img)?;
    let args = f.args.unwrap_or_default();
    if args.len() > 64 || args.iter().any(|a| a.len() > 1024 || a.contains('\0')) {
        return Err(ApiError::validation_hint(
            "args",
            "at most 64 arguments of at most 1024 characters each",
            json!(["--model", "/s3/models/owner/name"]),
        ));
    }
    let gpus = bounded("gpus", f.gpus, 1, 1..=8)?;
    let port = bounded("port", f.port, 8000, 1..=65535)?;
    let groups = crate::service::list_groups(engine, name).await?;
    if let Some(t) = f.instance_type {
        if !groups.iter().any(|g| g.instance_type == t) {
            return Err(ApiError::validation_hint(
                "instanceType",
                format!(
                    "no instance group of `{name}` has {}",
                    validate::truncate(t)
                ),
                json!(groups.iter().map(|g| &g.instance_type).collect::<Vec<_>>()),
            ));
        }
    }
    // A replica runs on one node: it cannot ask for more GPUs than the largest node has.
    let per_node = |t: &str| i64::from(crate::cloud::gpus_per_instance(t));
    let most = match f.instance_type {
        Some(t) => per_node(t),
        None => groups
            .iter()
            .map(|g| per_node(&g.instance_type))
            .max()
            .unwrap_or(0),
    };
    if gpus > most {
        return Err(ApiError::validation_hint(
            "gpus",
            format!("a replica needs {gpus} GPUs but no node of `{name}` has more than {most}"),
            json!(format!(
                "1 to {most}, or add an instance group with larger instances"
            )),
        ));
    }
    let claims = list_storage(engine, name).await?;
    let here = |c: &str| {
        claims
            .iter()
            .any(|v| v.claim_name == c && v.namespace == f.namespace)
    };
    let claim = match f.claim {
        Some(c) if here(c) => Some(c.to_string()),
        Some(c) => {
            return Err(ApiError::validation_hint(
                "claim",
                format!(
                    "`{}` is not a storage claim in namespace {}",
                    validate::truncate(c),
                    f.namespace
                ),
                json!(claims
                    .iter()
                    .filter(|v| v.namespace == f.namespace)
                    .map(|c| &c.claim_name)
                    .collect::<Vec<_>>()),
            ))
        }
        None => here("s3-claim").then(|| "s3-claim".to_string()),
    };
    let secret = format!("{owner}-token");
    if let Some(token) = f.hf_token {
        let target = kube_target(engine, name).await?;
        put_token_secret(engine, &target, f.namespace, &secret, token, "inference").await?;
    }
    let mut mounts = vec![json!({"name": "shm", "mountPath": "/dev/shm"})];
    let mut volumes =
        vec![json!({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}})];
    if let Some(c) = &claim {
        mounts.push(json!({"name": "data", "mountPath": "/s3", "readOnly": true}));
        volumes.push(
            json!({"name": "data", "persistentVolumeClaim": {"claimName": c, "readOnly": true}}),
        );
    }
    let args = with_metrics(img, args);
    let mut spec = json!({
        "containers": [{"name": "server", "image": img, "args": args,
            "ports": [{"containerPort": port, "name": "http"}],
            "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token", "optional": true}}}],
            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10},
            "volumeMounts": mounts}],
        "volumes": volumes});
    if let Some(t) = f.instance_type {
        spec["nodeSelector"] = json!({"node.kubernetes.io/instance-type": t});
    }
    Ok(ServerPod {
        spec,
        port,
        image: img.to_string(),
        annotations: scrape_annotations(port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_servers_export_their_metrics() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let launch = args(&["python3", "-m", "sglang.launch_server", "--port", "8000"]);
        let out = with_metrics("lmsysorg/sglang:v0.5.8", &launch);
        assert_eq!(out.last().map(String::as_str), Some("--enable-metrics"));
        assert_eq!(with_metrics("lmsysorg/sglang:v0.5.8", &out), out, "once");
        assert_eq!(with_metrics("vllm/vllm-openai:latest", &launch), launch);
        let shell = args(&["bash", "-c", "python3 -m sglang.launch_server"]);
        assert_eq!(with_metrics("lmsysorg/sglang:v0.5.8", &shell), shell);
        assert_eq!(scrape_annotations(8000)["prometheus.io/port"], "8000");
    }

    #[test]
    fn sglang_images_are_told_from_others() {
        for i in [
            "lmsysorg/sglang:v0.5.8",
            "123.dkr.ecr.us-west-2.amazonaws.com/sglang",
            "lmsysorg/sglang@sha256:abc",
            "registry:5000/team/sglang-custom:1",
        ] {
            assert!(is_sglang(i), "{i}");
        }
        for i in [
            "vllm/vllm-openai:latest",
            "sglang.io:5000/vllm:1",
            "lmsysorg/other:sglang",
        ] {
            assert!(!is_sglang(i), "{i}");
        }
    }
}
