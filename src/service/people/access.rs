//! What a person may do on a cluster, read from what EKS already says: the access policies of
//! their access entry on the cluster (`ListAssociatedAccessPolicies`), so that what they may do
//! here is what `kubectl` lets them do there. The EKS access policies, as the EKS User Guide's
//! "Review access policy permissions" describes them: `AmazonEKSClusterAdminPolicy` (Kubernetes'
//! `cluster-admin`), `AmazonEKSAdminPolicy` and `AmazonEKSEditPolicy` (`admin`, `edit`: change
//! workloads in their scope), `AmazonEKSViewPolicy` and `AmazonEKSAdminViewPolicy` (read), each
//! scoped to the cluster or to namespaces, a name ending in `*` matching by prefix ("Associate
//! access policies with access entries"). The `AmazonSagemakerHyperpod*` policies serve
//! HyperPod's own roles, not people, and grant nothing here.
//!
//! A request's person and their answers are held in a task-local for the request's life: a
//! service checks a namespace where it learns it, with no signature to thread it through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::cloud::AccessPolicy;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::store::Holder;

/// Where a right holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reach {
    #[default]
    Nowhere,
    Everywhere,
    /// These namespaces (a trailing `*` matches by prefix).
    Namespaces(Vec<String>),
}

impl Reach {
    fn covers(&self, namespace: &str) -> bool {
        match self {
            Reach::Nowhere => false,
            Reach::Everywhere => true,
            Reach::Namespaces(list) => list.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => namespace.starts_with(prefix),
                None => p == namespace,
            }),
        }
    }

    fn widen(&mut self, scope: &Option<Vec<String>>) {
        match (scope, &mut *self) {
            (_, Reach::Everywhere) => {}
            (None, _) => *self = Reach::Everywhere,
            (Some(ns), Reach::Namespaces(list)) => list.extend(ns.iter().cloned()),
            (Some(ns), Reach::Nowhere) => *self = Reach::Namespaces(ns.clone()),
        }
    }
}

/// A person's rights on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterAccess {
    /// `AmazonEKSClusterAdminPolicy` on the whole cluster: the cluster's own operations
    /// (instance groups, nodes, features, storage, teams) besides every workload.
    pub cluster_admin: bool,
    pub write: Reach,
    pub read: Reach,
}

impl ClusterAccess {
    pub fn of(policies: &[AccessPolicy]) -> Self {
        let mut access = Self::default();
        for p in policies {
            let name = p.policy_arn.rsplit('/').next().unwrap_or_default();
            match name {
                "AmazonEKSClusterAdminPolicy" => {
                    access.cluster_admin |= p.namespaces.is_none();
                    access.write.widen(&p.namespaces);
                    access.read.widen(&p.namespaces);
                }
                "AmazonEKSAdminPolicy" | "AmazonEKSEditPolicy" => {
                    access.write.widen(&p.namespaces);
                    access.read.widen(&p.namespaces);
                }
                "AmazonEKSViewPolicy" | "AmazonEKSAdminViewPolicy" => {
                    access.read.widen(&p.namespaces)
                }
                _ => {}
            }
        }
        access
    }

    pub fn may_write(&self, namespace: &str) -> bool {
        self.write.covers(namespace)
    }

    pub fn may_read(&self, namespace: &str) -> bool {
        self.read.covers(namespace)
    }

    pub fn reads_anything(&self) -> bool {
        self.read != Reach::Nowhere
    }
}

/// The person a request is for, whether they administer the deployment, and their rights on
/// each cluster the request touched (read from EKS once per request).
pub struct RequestAccess {
    pub holder: Holder,
    clusters: Mutex<HashMap<String, ClusterAccess>>,
}

impl RequestAccess {
    pub fn new(holder: Holder) -> Arc<Self> {
        Arc::new(Self {
            holder,
            clusters: Mutex::default(),
        })
    }

    /// The person's rights on `cluster`, as its access entry says now.
    pub async fn on(&self, engine: &Engine, cluster: &str) -> ApiResult<ClusterAccess> {
        if let Some(known) = self
            .clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(cluster)
        {
            return Ok(known.clone());
        }
        let policies = engine
            .cloud()
            .eks
            .access_policies(cluster, &self.holder.principal_arn)
            .await
            .map_err(|e| ApiError::Cloud(Box::new(e)))?;
        let access = ClusterAccess::of(policies.as_deref().unwrap_or_default());
        self.clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cluster.to_string(), access.clone());
        Ok(access)
    }

    /// A refusal naming what is missing and who may grant it.
    pub async fn denied(&self, engine: &Engine, missing: String, doing: &str) -> ApiError {
        let admins = engine.store().admins().await.unwrap_or_default();
        ApiError::Denied {
            detail: format!("{} may not {doing}: that needs {missing}", self.holder.arn),
            hint: Some(Box::new(json!({
                "missing": missing,
                "grantedBy": admins.iter().map(|a| &a.principal_arn).collect::<Vec<_>>(),
            }))),
        }
    }
}

tokio::task_local! {
    /// The request's person, when people sign in (unset in single-user mode).
    pub static REQUEST: Arc<RequestAccess>;
}

fn current() -> Option<Arc<RequestAccess>> {
    REQUEST.try_with(Arc::clone).ok()
}

/// Refuses the request's person unless they may change workloads in `namespace` of `cluster`.
pub async fn require_write(
    engine: &Engine,
    cluster: &str,
    namespace: &str,
    doing: &str,
) -> ApiResult<()> {
    let Some(r) = current() else { return Ok(()) };
    if r.holder.admin || r.on(engine, cluster).await?.may_write(namespace) {
        return Ok(());
    }
    Err(r
        .denied(
            engine,
            format!("AmazonEKSEditPolicy (or Admin) on namespace {namespace} of cluster {cluster}"),
            doing,
        )
        .await)
}

/// Whether the request's person may see what is in `namespace` of `cluster` (everyone may in
/// single-user mode).
pub async fn may_read(engine: &Engine, cluster: &str, namespace: &str) -> ApiResult<bool> {
    match current() {
        None => Ok(true),
        Some(r) if r.holder.admin => Ok(true),
        Some(r) => Ok(r.on(engine, cluster).await?.may_read(namespace)),
    }
}

/// Whether the request's person sees every operation: everyone does in single-user mode, and
/// an administrator of the deployment does.
pub fn sees_every_operation() -> bool {
    current().is_none_or(|r| r.holder.admin)
}

/// Whether the request's person may see `op` (its parameters hold manifests and names of the
/// namespaces it touched): one they started, or one of a cluster they may read whole.
pub async fn may_see_operation(engine: &Engine, op: &crate::store::Operation) -> bool {
    sees_operation(current().as_deref(), engine, op).await
}

/// [`may_see_operation`] for a person held past their request (an event stream's).
pub async fn sees_operation(
    r: Option<&RequestAccess>,
    engine: &Engine,
    op: &crate::store::Operation,
) -> bool {
    let Some(r) = r else { return true };
    if r.holder.admin || op.principal.as_deref() == Some(r.holder.arn.as_str()) {
        return true;
    }
    reads_whole(r, engine, &op.cluster).await
}

/// Whether the person administers the deployment or may read all of `cluster`: what a view of
/// every namespace at once (nodes, the watch's events) needs.
pub async fn reads_whole(r: &RequestAccess, engine: &Engine, cluster: &str) -> bool {
    r.holder.admin
        || r.on(engine, cluster)
            .await
            .is_ok_and(|a| a.read == Reach::Everywhere)
}

/// Refuses the request's person unless they may read all of `cluster` (a report across its
/// namespaces, asked for by query rather than path, which the edge does not see).
pub async fn require_read_whole(engine: &Engine, cluster: &str, doing: &str) -> ApiResult<()> {
    let Some(r) = current() else { return Ok(()) };
    if reads_whole(&r, engine, cluster).await {
        return Ok(());
    }
    Err(r
        .denied(
            engine,
            format!("AmazonEKSViewPolicy on the whole of cluster {cluster}"),
            doing,
        )
        .await)
}

/// The request's person, to hold past the request (an event stream outlives its upgrade).
pub fn request_person() -> Option<Arc<RequestAccess>> {
    current()
}

/// What the request's person may do on one cluster, as their access entry says.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRights {
    pub cluster: String,
    /// `AmazonEKSClusterAdminPolicy` on the whole cluster.
    pub cluster_admin: bool,
    /// Namespaces they may change workloads in (`*`: every one; a trailing `*` matches by prefix).
    pub edit: Vec<String>,
    /// Namespaces they may read.
    pub view: Vec<String>,
    /// The teams whose namespaces (`hyperpod-ns-<team>`) they may work in, and how.
    pub teams: Vec<TeamRight>,
    /// Why their access could not be read (the cluster is gone from EKS, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamRight {
    pub team: String,
    /// `edit` or `view`.
    pub access: &'static str,
}

impl Reach {
    fn names(&self) -> Vec<String> {
        match self {
            Reach::Nowhere => vec![],
            Reach::Everywhere => vec!["*".into()],
            Reach::Namespaces(list) => list.clone(),
        }
    }
}

impl ClusterRights {
    fn of(cluster: &str, access: &ClusterAccess) -> Self {
        let mut teams: Vec<TeamRight> = Vec::new();
        for ns in access.read.names() {
            let Some(team) = ns
                .strip_prefix("hyperpod-ns-")
                .filter(|t| !t.ends_with('*'))
            else {
                continue;
            };
            if teams.iter().any(|t| t.team == team) {
                continue;
            }
            let how = if access.may_write(&ns) {
                "edit"
            } else {
                "view"
            };
            teams.push(TeamRight {
                team: team.to_string(),
                access: how,
            });
        }
        Self {
            cluster: cluster.to_string(),
            cluster_admin: access.cluster_admin,
            edit: access.write.names(),
            view: access.read.names(),
            teams,
            error: None,
        }
    }
}

/// The request's person's rights on every cluster the deployment manages (one EKS read per
/// cluster); none in single-user mode, where nobody signs in.
pub async fn mine(engine: &Engine) -> ApiResult<Vec<ClusterRights>> {
    let Some(r) = current() else {
        return Ok(vec![]);
    };
    let mut out = Vec::new();
    for c in engine.store().list_clusters().await? {
        out.push(match r.on(engine, &c.name).await {
            Ok(access) => ClusterRights::of(&c.name, &access),
            Err(e) => ClusterRights {
                error: Some(e.to_string()),
                ..ClusterRights::of(&c.name, &ClusterAccess::default())
            },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, namespaces: Option<&[&str]>) -> AccessPolicy {
        AccessPolicy {
            policy_arn: format!("arn:aws:eks::aws:cluster-access-policy/{name}"),
            namespaces: namespaces.map(|n| n.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn each_policy_grants_what_its_kubernetes_role_does_where_it_is_scoped() {
        let team_a = ClusterAccess::of(&[policy("AmazonEKSEditPolicy", Some(&["hyperpod-ns-a"]))]);
        assert!(team_a.may_write("hyperpod-ns-a") && team_a.may_read("hyperpod-ns-a"));
        assert!(!team_a.may_write("hyperpod-ns-b") && !team_a.may_read("hyperpod-ns-b"));
        assert!(!team_a.may_write("default") && !team_a.cluster_admin);

        let viewer = ClusterAccess::of(&[policy("AmazonEKSViewPolicy", None)]);
        assert!(viewer.may_read("anything") && !viewer.may_write("anything"));

        let admin = ClusterAccess::of(&[policy("AmazonEKSClusterAdminPolicy", None)]);
        assert!(admin.cluster_admin && admin.may_write("hyperpod-ns-b"));
        // Cluster-admin on namespaces only is a namespace admin, not the cluster's.
        let ns_admin = ClusterAccess::of(&[policy("AmazonEKSClusterAdminPolicy", Some(&["x"]))]);
        assert!(!ns_admin.cluster_admin && ns_admin.may_write("x"));

        let wildcard = ClusterAccess::of(&[
            policy("AmazonEKSAdminPolicy", Some(&["hyperpod-ns-*"])),
            policy("AmazonEKSViewPolicy", Some(&["default"])),
        ]);
        assert!(wildcard.may_write("hyperpod-ns-b") && !wildcard.may_write("default"));
        assert!(wildcard.may_read("default") && !wildcard.may_read("kube-system"));

        let rights = ClusterRights::of(
            "demo",
            &ClusterAccess::of(&[
                policy("AmazonEKSEditPolicy", Some(&["hyperpod-ns-a", "default"])),
                policy(
                    "AmazonEKSViewPolicy",
                    Some(&["hyperpod-ns-b", "hyperpod-ns-a"]),
                ),
            ]),
        );
        let teams: Vec<_> = rights
            .teams
            .iter()
            .map(|t| (t.team.as_str(), t.access))
            .collect();
        assert_eq!(teams, [("a", "edit"), ("b", "view")]);
        assert_eq!(rights.edit, ["hyperpod-ns-a", "default"]);

        // HyperPod's own policies serve its roles, not people.
        let none = ClusterAccess::of(&[policy("AmazonSagemakerHyperpodClusterPolicy", None)]);
        assert!(!none.reads_anything() && !none.may_write("default"));
    }
}
