//! The HyperPod observability dashboards in the account's Amazon Managed Grafana workspace:
//! which workspace (`INSTANTSTART_GRAFANA_WORKSPACE`), what the add-on is told of it
//! (`amgWorkspace`), and deep links to each dashboard for one cluster.
//!
//! AWS installs the dashboards under fixed UIDs (its set-up function's `DASHBOARD_UIDS`), and
//! every one of them selects the cluster by the `cluster_name` variable (the HyperPod cluster's
//! name, as `kube_node_info` labels it), so a link is `https://<workspace>/d/<uid>?var-cluster_name=…`.

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::cloud::{Cloud, GrafanaWorkspace};

/// A dashboard: its key, what the link says, AWS's UID.
pub struct Dashboard {
    pub key: &'static str,
    pub title: &'static str,
    pub uid: &'static str,
}

/// AWS's dashboards, as its Grafana set-up function names them.
pub const DASHBOARDS: &[Dashboard] = &[
    Dashboard {
        key: "cluster",
        title: "Cluster",
        uid: "aws-sm-hp-observability-cluster-v1_0",
    },
    Dashboard {
        key: "training",
        title: "Training",
        uid: "aws-sm-hp-observability-training-v1_0",
    },
    Dashboard {
        key: "tasks",
        title: "Tasks",
        uid: "aws-sm-hp-observability-task-v1_0",
    },
    Dashboard {
        key: "inference",
        title: "Inference",
        uid: "aws-sm-hp-observability-inference-v1_0",
    },
    Dashboard {
        key: "efa",
        title: "File system",
        uid: "aws-sm-hp-observability-efa-v1_0",
    },
];

/// One link to a dashboard, for one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardLink {
    /// `cluster`, `training`, `tasks`, `inference` or `efa` (AWS's dashboards).
    pub key: String,
    pub title: String,
    /// `https://<workspace endpoint>/d/<uid>?var-cluster_name=<HyperPod cluster>`.
    pub url: String,
}

/// An Amazon Managed Grafana workspace ID: `g-` and ten hexadecimal digits.
pub fn check_workspace_id(id: &str) -> Result<(), String> {
    let ok = id.strip_prefix("g-").is_some_and(|rest| {
        rest.len() == 10
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{id}` is not an Amazon Managed Grafana workspace ID (g- and ten hexadecimal digits, as `aws grafana list-workspaces` shows)"
        ))
    }
}

/// The workspace's ARN, in the partition, region and account of `scope_arn` (AMG's
/// `DescribeWorkspace` does not return it).
pub fn workspace_arn(scope_arn: &str, id: &str) -> String {
    let (partition, region, account) = crate::service::shared::arn::arn_scope(scope_arn);
    format!("arn:{partition}:grafana:{region}:{account}:/workspaces/{id}")
}

/// What the add-on's configuration says of the workspace (`amgWorkspace`).
pub fn addon_value(w: &GrafanaWorkspace, arn: &str) -> Value {
    json!({"workspaceName": w.name.as_deref().unwrap_or(&w.id), "arn": arn})
}

/// Links to AWS's dashboards for a HyperPod cluster, the most relevant first; with a training
/// job, its dashboard opens on that job.
pub fn links(
    w: &GrafanaWorkspace,
    hyperpod: &str,
    first: &str,
    job: Option<&str>,
) -> Vec<DashboardLink> {
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let mut out: Vec<DashboardLink> = DASHBOARDS
        .iter()
        .map(|d| {
            let mut url = format!(
                "https://{}/d/{}?var-cluster_name={}",
                w.endpoint.trim_end_matches('/'),
                d.uid,
                enc(hyperpod)
            );
            if let (Some(job), "training") = (job, d.key) {
                url.push_str(&format!("&var-job_name={}", enc(job)));
            }
            DashboardLink {
                key: d.key.to_string(),
                title: d.title.to_string(),
                url,
            }
        })
        .collect();
    out.sort_by_key(|l| l.key != first);
    out
}

/// The configured workspace when it exists and is ACTIVE; a lookup that fails says nothing
/// (the charts do not depend on it), and is logged.
pub async fn active_workspace(cloud: &Cloud, id: Option<&str>) -> Option<GrafanaWorkspace> {
    let id = id?;
    match cloud.metrics.describe_grafana(id).await {
        Ok(Some(w)) if w.status == "ACTIVE" => Some(w),
        Ok(other) => {
            tracing::warn!(workspace = id, state = ?other.map(|w| w.status), "the Grafana workspace is not ACTIVE: no dashboard links");
            None
        }
        Err(e) => {
            tracing::warn!(workspace = id, error = %e, "the Grafana workspace could not be read: no dashboard links");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> GrafanaWorkspace {
        GrafanaWorkspace {
            id: "g-5a9db1e0c2".into(),
            name: Some("team".into()),
            status: "ACTIVE".into(),
            endpoint: "g-5a9db1e0c2.grafana-workspace.us-west-2.amazonaws.com".into(),
        }
    }

    #[test]
    fn a_workspace_id_is_g_and_ten_hex_digits() {
        assert!(check_workspace_id("g-5a9db1e0c2").is_ok());
        for bad in [
            "g-5A9DB1E0C2",
            "g-5a9db1e0c",
            "ws-5a9db1e0c2",
            "g-5a9db1e0cz",
            "",
        ] {
            assert!(check_workspace_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn links_open_each_dashboard_on_the_cluster_the_relevant_first() {
        let l = links(&ws(), "ml cluster", "training", Some("llama"));
        assert_eq!(l.len(), DASHBOARDS.len());
        assert_eq!(l[0].key, "training");
        assert_eq!(
            l[0].url,
            "https://g-5a9db1e0c2.grafana-workspace.us-west-2.amazonaws.com/d/aws-sm-hp-observability-training-v1_0?var-cluster_name=ml%20cluster&var-job_name=llama"
        );
        assert!(l.iter().skip(1).all(|x| !x.url.contains("job_name")));
        assert_eq!(
            workspace_arn(
                "arn:aws:sagemaker:us-west-2:123456789012:cluster/x",
                "g-5a9db1e0c2"
            ),
            "arn:aws:grafana:us-west-2:123456789012:/workspaces/g-5a9db1e0c2"
        );
        assert_eq!(
            addon_value(&ws(), "arn:x"),
            json!({"workspaceName": "team", "arn": "arn:x"})
        );
    }
}
