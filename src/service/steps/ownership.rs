//! Whose a role of a given name is: the product acts only on roles under its IAM path that
//! carry its cluster tag, never on a role that merely has the name it would use.

use crate::cloud::{Role, Tags, CLUSTER_TAG, ROLE_PATH};
use crate::ops::{StepCx, StepError, StepResult};

/// A role found by name, and whether it is the product's to manage.
#[derive(Debug)]
pub enum Found {
    Missing,
    /// Under the product's path and tagged for the cluster (or, for the account's MLflow role,
    /// tagged by the product at all).
    Ours(Role),
    /// Someone else's role of that name: never adopted, changed or deleted.
    Theirs(Role),
}

impl Found {
    /// The role to adopt, `None` to create it; another's role is a conflict.
    pub fn adopt(self) -> StepResult<Option<Role>> {
        match self {
            Found::Missing => Ok(None),
            Found::Ours(r) => Ok(Some(r)),
            Found::Theirs(r) => Err(StepError::fatal(
                "role-not-ours",
                format!(
                    "a role named {} exists but is not this control plane's (path {}, {} tag {}): it is never adopted, changed or deleted. \
                     Rename or delete that role, or give the cluster another name",
                    r.name,
                    r.path,
                    CLUSTER_TAG,
                    r.tags.get(CLUSTER_TAG).map_or("absent", String::as_str)
                ),
            )),
        }
    }
}

/// Looks a role up by name and says whose it is: the product's roles are under [`ROLE_PATH`]
/// and carry the `instantstart:cluster` tag of their cluster (`cluster`), or any such tag for
/// an account role (`None`). Names alone are ambiguous (cluster `x`'s `x-inference-keda` is
/// cluster `x-inference`'s `-keda` role), so a name is never enough to act on a role.
pub async fn find_role(cx: &StepCx<'_>, name: &str, cluster: Option<&str>) -> StepResult<Found> {
    let Some(role) = cx.cloud.iam.get_role(name).await? else {
        return Ok(Found::Missing);
    };
    let tagged = role.tags.get(CLUSTER_TAG).map(String::as_str);
    let ours = role.path == ROLE_PATH
        && match cluster {
            Some(c) => tagged == Some(c),
            None => tagged.is_some(),
        };
    Ok(if ours {
        Found::Ours(role)
    } else {
        Found::Theirs(role)
    })
}

/// The cluster's role `name` to adopt (`None`: missing); another's role is a conflict.
pub async fn own_role(cx: &StepCx<'_>, name: &str) -> StepResult<Option<Role>> {
    find_role(cx, name, Some(&cx.op.cluster)).await?.adopt()
}

/// Deletes the cluster's role `name` if it is the product's; another's is left alone (and
/// said so). Whether a role was deleted.
pub async fn delete_own_role(cx: &StepCx<'_>, name: &str) -> StepResult<bool> {
    match find_role(cx, name, Some(&cx.op.cluster)).await? {
        Found::Ours(_) => {
            cx.cloud.iam.delete_role(name).await?;
            Ok(true)
        }
        Found::Missing => Ok(false),
        Found::Theirs(r) => {
            tracing::warn!(role = %r.name, path = %r.path, "not this control plane's role: left in place");
            Ok(false)
        }
    }
}

/// Creates the role `name`. Role names are unique in an account whatever their path: a role
/// of that name made meanwhile by someone else is a conflict (`role-not-ours`), and one the
/// product made (an earlier attempt) is adopted. `owner` as for [`find_role`].
pub async fn create_role(
    cx: &StepCx<'_>,
    name: &str,
    trust: &serde_json::Value,
    tags: &Tags,
    owner: Option<&str>,
) -> StepResult<Role> {
    match cx.cloud.iam.create_role(name, trust, tags).await {
        Err(e) if e.code == "EntityAlreadyExists" => {
            match find_role(cx, name, owner).await?.adopt()? {
                Some(role) => Ok(role),
                None => Err(e.into()),
            }
        }
        other => Ok(other?),
    }
}
