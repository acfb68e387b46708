//! A person given a team's access on a cluster, or the access taken back: an EKS access entry
//! (made when missing) and the namespace-scoped `AmazonEKSEditPolicy` or `AmazonEKSViewPolicy`
//! on the team's namespace, as the EKS User Guide's "Associate access policies with access
//! entries" describes them. Each is an operation, diffed first: the request answers with what
//! the person has now and what they will have, and a grant already held changes nothing.
//!
//! EKS keeps one association per policy, whose scope a new association replaces; the phases
//! therefore read the entry again when they run and add (or take) only the team's namespace, so
//! a grant never narrows what the person had elsewhere. The control plane's own IAM policy
//! refuses anything wider (`PeopleGetNamespacesOnly` and its neighbours in the template).

use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::cloud::AccessPolicy;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::service::start::{start, Caller};
use crate::service::{Accepted, OpKind};

/// What a person may do in a team's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TeamAccess {
    /// Submit, see and delete the team's workloads (`AmazonEKSEditPolicy`).
    Edit,
    /// See the team's workloads (`AmazonEKSViewPolicy`).
    View,
}

impl TeamAccess {
    pub fn policy_name(self) -> &'static str {
        match self {
            TeamAccess::Edit => "AmazonEKSEditPolicy",
            TeamAccess::View => "AmazonEKSViewPolicy",
        }
    }

    fn of_policy(arn: &str) -> Option<Self> {
        [TeamAccess::Edit, TeamAccess::View]
            .into_iter()
            .find(|a| arn.rsplit('/').next() == Some(a.policy_name()))
    }
}

/// `PUT /api/clusters/{name}/teams/{team}/access`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantRequest {
    /// The person: an IAM user or role ARN without a path, as they sign in
    /// (`arn:aws:iam::111122223333:role/Researcher`).
    #[schema(
        pattern = r"^arn:aws(-cn|-us-gov|-iso|-iso-b)?:iam::[0-9]{12}:(user|role)/[A-Za-z0-9+=,.@_-]{1,64}$"
    )]
    pub principal_arn: String,
    pub access: TeamAccess,
}

/// The parameters of an `access-grant` or `access-revoke` operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantParams {
    pub principal_arn: String,
    pub team: String,
    pub namespace: String,
    /// What is granted; `None` for a revoke (every team policy loses the namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<TeamAccess>,
    /// The policies the person had on the cluster when it was asked (`None`: no access entry).
    pub before: Option<Vec<AccessPolicy>>,
    /// What they will have.
    pub after: Vec<AccessPolicy>,
}

/// A person's access to a team, as EKS has it now.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamAccessView {
    pub principal_arn: String,
    pub team: String,
    pub namespace: String,
    /// `edit`, `view`, or none; edit wins where both are held.
    pub access: Option<TeamAccess>,
    /// Whether the person has an access entry on the cluster at all.
    pub has_entry: bool,
    /// Every policy of their entry, with its scope (`namespaces` absent: the whole cluster).
    #[schema(value_type = Vec<Object>)]
    pub policies: Vec<AccessPolicy>,
}

fn namespace_of(team: &str) -> String {
    format!("hyperpod-ns-{team}")
}

fn policy_arn(partition: &str, access: TeamAccess) -> String {
    format!(
        "arn:{partition}:eks::aws:cluster-access-policy/{}",
        access.policy_name()
    )
}

/// Checks the principal (the form sign-in names) and that the team exists on the cluster.
async fn checked(
    engine: &Engine,
    name: &str,
    team: &str,
    principal_arn: &str,
) -> ApiResult<String> {
    let arn = principal_arn.trim();
    if !super::plain_principal(arn) {
        return Err(ApiError::validation_hint(
            "principalArn",
            "an IAM user or role ARN without a path (STS names a role session's role without it, and so does EKS)",
            json!("arn:aws:iam::111122223333:role/Researcher"),
        ));
    }
    crate::service::teams::team(engine, name, team).await?;
    Ok(arn.to_string())
}

async fn policies(
    engine: &Engine,
    name: &str,
    principal_arn: &str,
) -> ApiResult<Option<Vec<AccessPolicy>>> {
    engine
        .cloud()
        .eks
        .access_policies(name, principal_arn)
        .await
        .map_err(|e| ApiError::Cloud(Box::new(e)))
}

/// The policies with `namespace` added to `access`'s association (made when absent); `None` when
/// that policy already reaches the namespace.
pub fn with_namespace(
    have: &[AccessPolicy],
    partition: &str,
    access: TeamAccess,
    namespace: &str,
) -> Option<Vec<AccessPolicy>> {
    let mut after = have.to_vec();
    match after
        .iter_mut()
        .find(|p| TeamAccess::of_policy(&p.policy_arn) == Some(access))
    {
        Some(p) => match &mut p.namespaces {
            None => return None,
            Some(list) if list.iter().any(|n| n == namespace) => return None,
            Some(list) => list.push(namespace.to_string()),
        },
        None => after.push(AccessPolicy {
            policy_arn: policy_arn(partition, access),
            namespaces: Some(vec![namespace.to_string()]),
        }),
    }
    Some(after)
}

/// The policies with `namespace` taken from every namespace-scoped team policy (one left with
/// none is gone); `None` when none named it. A cluster-wide team policy cannot lose one
/// namespace: that is a conflict for a person to resolve in EKS.
pub fn without_namespace(
    have: &[AccessPolicy],
    namespace: &str,
) -> Result<Option<Vec<AccessPolicy>>, String> {
    let mut changed = false;
    let mut after = Vec::new();
    for p in have {
        let team_policy = TeamAccess::of_policy(&p.policy_arn).is_some();
        match &p.namespaces {
            Some(list) if team_policy && list.iter().any(|n| n == namespace) => {
                changed = true;
                let rest: Vec<String> = list.iter().filter(|n| *n != namespace).cloned().collect();
                if !rest.is_empty() {
                    after.push(AccessPolicy {
                        policy_arn: p.policy_arn.clone(),
                        namespaces: Some(rest),
                    });
                }
            }
            None if team_policy => {
                return Err(format!(
                "{} is associated with the whole cluster, not with namespaces: take it back in EKS",
                p.policy_arn
            ))
            }
            _ => after.push(p.clone()),
        }
    }
    Ok(changed.then_some(after))
}

/// What a person may do in the team's namespace now.
pub async fn team_access(
    engine: &Engine,
    name: &str,
    team: &str,
    principal_arn: &str,
) -> ApiResult<TeamAccessView> {
    let arn = checked(engine, name, team, principal_arn).await?;
    let have = policies(engine, name, &arn).await?;
    Ok(view_of(arn, team, have))
}

/// A person's access to `team`, from the policies their entry has (`None`: no entry).
fn view_of(arn: String, team: &str, have: Option<Vec<AccessPolicy>>) -> TeamAccessView {
    let namespace = namespace_of(team);
    let list = have.clone().unwrap_or_default();
    let reaches = |a: TeamAccess| {
        list.iter().any(|p| {
            TeamAccess::of_policy(&p.policy_arn) == Some(a)
                && p.namespaces.as_ref().is_none_or(|n| n.contains(&namespace))
        })
    };
    let access = [TeamAccess::Edit, TeamAccess::View]
        .into_iter()
        .find(|a| reaches(*a));
    TeamAccessView {
        principal_arn: arn,
        team: team.to_string(),
        namespace,
        access,
        has_entry: have.is_some(),
        policies: list,
    }
}

/// A grant or revoke started, or what the person has already (nothing to change).
pub enum Change {
    Started(Accepted),
    AlreadySo(TeamAccessView),
}

/// Gives a person the team's access, unless they have it already.
pub async fn grant(
    engine: &Engine,
    name: &str,
    team: &str,
    req: &GrantRequest,
    caller: &Caller,
) -> ApiResult<Change> {
    let arn = checked(engine, name, team, &req.principal_arn).await?;
    let namespace = namespace_of(team);
    let before = policies(engine, name, &arn).await?;
    let partition = crate::service::shared::arn::arn_scope(&arn).0;
    let have = before.clone().unwrap_or_default();
    let Some(after) = with_namespace(&have, partition, req.access, &namespace) else {
        return Ok(Change::AlreadySo(view_of(arn, team, before)));
    };
    let params = GrantParams {
        principal_arn: arn,
        team: team.to_string(),
        namespace,
        access: Some(req.access),
        before,
        after,
    };
    Ok(Change::Started(
        start(engine, OpKind::AccessGrant, name, &params, caller).await?,
    ))
}

/// Takes the team's access from a person, unless they had none there.
pub async fn revoke(
    engine: &Engine,
    name: &str,
    team: &str,
    principal_arn: &str,
    caller: &Caller,
) -> ApiResult<Change> {
    let arn = checked(engine, name, team, principal_arn).await?;
    let namespace = namespace_of(team);
    let before = policies(engine, name, &arn).await?;
    let have = before.clone().unwrap_or_default();
    let after = match without_namespace(&have, &namespace) {
        Ok(Some(after)) => after,
        Ok(None) => return Ok(Change::AlreadySo(view_of(arn, team, before))),
        Err(why) => {
            return Err(ApiError::Conflict {
                slug: crate::problem::ProblemType::Conflict,
                detail: format!("{arn}'s access to team `{team}`: {why}"),
                field: Some("principalArn".into()),
                operation_id: None,
            })
        }
    };
    let params = GrantParams {
        principal_arn: arn,
        team: team.to_string(),
        namespace,
        access: None,
        before,
        after,
    };
    Ok(Change::Started(
        start(engine, OpKind::AccessRevoke, name, &params, caller).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, ns: Option<&[&str]>) -> AccessPolicy {
        AccessPolicy {
            policy_arn: format!("arn:aws:eks::aws:cluster-access-policy/{name}"),
            namespaces: ns.map(|n| n.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_grant_adds_the_teams_namespace_and_keeps_every_other() {
        let have = [
            p("AmazonEKSEditPolicy", Some(&["hyperpod-ns-a"])),
            p("AmazonEKSViewPolicy", None),
        ];
        let after = with_namespace(&have, "aws", TeamAccess::Edit, "hyperpod-ns-b").unwrap();
        assert_eq!(
            after,
            [
                p(
                    "AmazonEKSEditPolicy",
                    Some(&["hyperpod-ns-a", "hyperpod-ns-b"])
                ),
                p("AmazonEKSViewPolicy", None),
            ]
        );
        assert_eq!(
            with_namespace(&have, "aws", TeamAccess::Edit, "hyperpod-ns-a"),
            None
        );
        assert_eq!(
            with_namespace(&have, "aws", TeamAccess::View, "hyperpod-ns-z"),
            None,
            "a cluster-wide view already reaches every namespace"
        );
        let first = with_namespace(&[], "aws-cn", TeamAccess::View, "hyperpod-ns-a").unwrap();
        assert_eq!(
            first[0].policy_arn,
            "arn:aws-cn:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
        );
    }

    #[test]
    fn a_revoke_takes_the_namespace_from_team_policies_only() {
        let have = [
            p(
                "AmazonEKSEditPolicy",
                Some(&["hyperpod-ns-a", "hyperpod-ns-b"]),
            ),
            p("AmazonEKSViewPolicy", Some(&["hyperpod-ns-b"])),
            p("AmazonEKSAdminPolicy", Some(&["hyperpod-ns-b"])),
        ];
        let after = without_namespace(&have, "hyperpod-ns-b").unwrap().unwrap();
        assert_eq!(
            after,
            [
                p("AmazonEKSEditPolicy", Some(&["hyperpod-ns-a"])),
                p("AmazonEKSAdminPolicy", Some(&["hyperpod-ns-b"])),
            ]
        );
        assert_eq!(without_namespace(&have, "hyperpod-ns-q"), Ok(None));
        assert!(without_namespace(&[p("AmazonEKSEditPolicy", None)], "hyperpod-ns-a").is_err());
    }
}
