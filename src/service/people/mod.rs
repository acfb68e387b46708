//! People (docs/access.md): signing in with an AWS identity, the sessions and personal agent
//! tokens that follow, and the administrators list. Who a request is for is a [`Holder`]; what
//! it may do on a cluster is `access.rs`'s.

pub mod access;
pub mod grants;

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use utoipa::ToSchema;

use crate::cloud::identity::{check_token, SignInIdentity};
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::problem::ProblemType;
use crate::service::shared::preview::{self, Effect};
use crate::store::{Admin, AgentTokenId, Holder, NewAgentToken};

/// How people reach the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum IdentityMode {
    /// Local single-user: whoever reaches the port (with the token, when there is one) acts as
    /// the one user.
    #[default]
    None,
    /// People sign in with their AWS identity; administrators and EKS access entries say what
    /// each may do.
    Iam,
}

/// The deployment's sign-in settings.
#[derive(Debug, Clone)]
pub struct People {
    /// The name sign-in tokens are made for (`aws eks get-token --cluster-name <this>`).
    pub deployment: String,
    /// The AWS partition of the deployment's region: only its STS hosts are asked.
    pub partition: &'static str,
}

/// How long a browser session lasts.
pub const SESSION_SECS: i64 = 8 * 3600;
/// The longest an agent token may live.
pub const MAX_AGENT_TOKEN_DAYS: i64 = 90;
/// What starts every agent token (so a leaked one is recognisable, in logs and scanners).
pub const AGENT_TOKEN_PREFIX: &str = "isat_";

pub fn now_s() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The stored form of a secret.
pub fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn refused(detail: impl Into<String>) -> ApiError {
    ApiError::Unauthenticated {
        slug: ProblemType::SignInRefused,
        detail: detail.into(),
    }
}

/// A new session: its secret (for the cookie, never stored) and who it is for.
pub struct SignedIn {
    pub secret: String,
    pub identity: SignInIdentity,
    pub expires_at: i64,
}

/// `POST /api/session`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignInRequest {
    /// What `aws eks get-token --cluster-name <deployment> --query status.token --output text`
    /// prints: `k8s-aws-v1.` and a presigned STS `GetCallerIdentity` URL.
    #[schema(max_length = 4096)]
    pub token: String,
}

/// Checks a sign-in token, asks STS who signed it, and opens a session for them. A token is
/// accepted once: a replay is refused even within its 15 minutes.
pub async fn sign_in(engine: &Engine, people: &People, token: &str) -> ApiResult<SignedIn> {
    let now = now_s();
    let call = check_token(token.trim(), people.partition, now).map_err(refused)?;
    if !engine
        .store()
        .use_sign_in(&call.signature, call.expires_at, now)
        .await?
    {
        return Err(refused(
            "this sign-in token was used already: make a new one",
        ));
    }
    let identity = engine
        .cloud()
        .identity
        .who_signed(&call, &people.deployment)
        .await
        .map_err(|e| {
            if e.retryable {
                ApiError::Cloud(Box::new(e))
            } else {
                refused(format!(
                    "STS refused the token ({}: {}); it must be made for deployment `{}`",
                    e.code, e.message, people.deployment
                ))
            }
        })?;
    let secret = crate::service::shared::new_secret();
    let expires_at = now + SESSION_SECS;
    engine
        .store()
        .create_session(
            &hash(&secret),
            &identity.principal_arn,
            &identity.arn,
            expires_at,
        )
        .await?;
    tracing::info!(arn = %identity.arn, "signed in");
    Ok(SignedIn {
        secret,
        identity,
        expires_at,
    })
}

/// Who a session cookie or an agent token (`isat_…`) stands for, if anyone.
pub async fn holder(
    engine: &Engine,
    session: Option<&str>,
    bearer: Option<&str>,
) -> ApiResult<Option<Holder>> {
    let now = now_s();
    if let Some(token) = bearer.filter(|b| b.starts_with(AGENT_TOKEN_PREFIX)) {
        return Ok(engine.store().agent_token(&hash(token), now).await?);
    }
    match session {
        Some(s) => Ok(engine.store().session(&hash(s), now).await?),
        None => Ok(None),
    }
}

pub async fn sign_out(engine: &Engine, session: &str) -> ApiResult<()> {
    Ok(engine.store().end_session(&hash(session)).await?)
}

/// `POST /api/session/agent-tokens`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentTokenRequest {
    /// What it is for (`kiro on my laptop`): 1–64 printable characters.
    pub name: String,
    /// Days it lives, 1–90 (default 30).
    #[schema(minimum = 1, maximum = 90)]
    pub days: Option<i64>,
    /// The agent may only read, whatever its person may do (default false).
    pub read_only: Option<bool>,
}

/// A new agent token: its secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewAgentTokenView {
    /// `isat_…`: the agent sends it as `Authorization: Bearer`. Not shown again.
    pub token: String,
    #[serde(flatten)]
    pub about: AgentTokenId,
}

/// Mints a personal agent token for the signed-in person (an agent token cannot mint one).
pub async fn mint_agent_token(
    engine: &Engine,
    holder: &Holder,
    req: &AgentTokenRequest,
) -> ApiResult<NewAgentTokenView> {
    if holder.agent_token.is_some() {
        return Err(ApiError::Denied {
            detail: "an agent token cannot make agent tokens: its person signs in and makes them"
                .into(),
            hint: None,
        });
    }
    let name = req.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ApiError::validation(
            "name",
            "a name of 1–64 printable characters",
        ));
    }
    let days = req.days.unwrap_or(30);
    if !(1..=MAX_AGENT_TOKEN_DAYS).contains(&days) {
        return Err(ApiError::validation_hint(
            "days",
            format!("{days} is not within 1–90"),
            json!("30"),
        ));
    }
    preview::stop(
        Effect::Create,
        format!("agent token `{name}` for {} ({days} days)", holder.arn),
    )?;
    let token = format!(
        "{AGENT_TOKEN_PREFIX}{}",
        crate::service::shared::new_secret()
    );
    let id = uuid::Uuid::new_v4().to_string();
    let about = engine
        .store()
        .create_agent_token(&NewAgentToken {
            id: &id,
            secret_hash: &hash(&token),
            principal_arn: &holder.principal_arn,
            arn: &holder.arn,
            name,
            read_only: req.read_only.unwrap_or(false),
            expires_at: now_s() + days * 86_400,
        })
        .await?;
    Ok(NewAgentTokenView { token, about })
}

pub async fn agent_tokens(engine: &Engine, holder: &Holder) -> ApiResult<Vec<AgentTokenId>> {
    Ok(engine.store().agent_tokens(&holder.arn).await?)
}

/// Revokes one of the person's agent tokens: refused at once from then on.
pub async fn revoke_agent_token(engine: &Engine, holder: &Holder, id: &str) -> ApiResult<()> {
    if preview::active() {
        let theirs = engine.store().agent_tokens(&holder.arn).await?;
        if !theirs.iter().any(|t| t.id == id) {
            return Err(ApiError::not_found(format!("agent token `{id}` of yours")));
        }
        preview::stop(Effect::Delete, format!("agent token `{id}`"))?;
    }
    if engine.store().revoke_agent_token(id, &holder.arn).await? {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("agent token `{id}` of yours")))
    }
}

/// Whether `arn` names an IAM user or role without a path: the form a signed-in person's
/// principal takes (STS names a role session's role without its path).
fn plain_principal(arn: &str) -> bool {
    let resource = arn.splitn(6, ':').nth(5).unwrap_or_default();
    crate::cloud::identity::principal_arn(arn).ok().as_deref() == Some(arn)
        && arn.split(':').nth(2) == Some("iam")
        && resource.matches('/').count() == 1
}

/// Adds the deployment's administrators (the stack's list) at start; a list administrators
/// changed since is kept.
pub async fn seed_admins(engine: &Engine, arns: &[String]) -> anyhow::Result<()> {
    for arn in arns.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        anyhow::ensure!(
            plain_principal(arn),
            "--admin: `{arn}` is not an IAM user or role ARN without a path"
        );
        engine.store().add_admin(arn, "deployment").await?;
    }
    Ok(())
}

pub async fn admins(engine: &Engine) -> ApiResult<Vec<Admin>> {
    Ok(engine.store().admins().await?)
}

/// Refuses `holder` unless an administrator, naming the right and who holds it.
pub async fn require_admin(engine: &Engine, holder: &Holder, right: &str) -> ApiResult<()> {
    if holder.admin {
        return Ok(());
    }
    let admins = engine.store().admins().await?;
    Err(ApiError::Denied {
        detail: format!(
            "{} may not {right}: that takes an administrator of this deployment",
            holder.arn
        ),
        hint: Some(Box::new(json!({
            "missing": "administrator",
            "grantedBy": admins.iter().map(|a| &a.principal_arn).collect::<Vec<_>>()
        }))),
    })
}

/// `POST /api/admins`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdminRequest {
    /// An IAM user or role ARN (`arn:aws:iam::111122223333:role/PlatformAdmin`).
    pub principal_arn: String,
}

pub async fn add_admin(engine: &Engine, by: &Holder, req: &AdminRequest) -> ApiResult<Admin> {
    require_admin(engine, by, "change the administrators").await?;
    let arn = req.principal_arn.trim();
    if !plain_principal(arn) {
        return Err(ApiError::validation_hint(
            "principalArn",
            "an IAM user or role ARN without a path (STS names a role session's role without it)",
            json!("arn:aws:iam::111122223333:role/PlatformAdmin"),
        ));
    }
    preview::stop(Effect::Create, format!("administrator `{arn}`"))?;
    engine.store().add_admin(arn, &by.arn).await?;
    let admins = engine.store().admins().await?;
    admins
        .into_iter()
        .find(|a| a.principal_arn == arn)
        .ok_or_else(|| ApiError::not_found(format!("administrator `{arn}`")))
}

pub async fn remove_admin(engine: &Engine, by: &Holder, arn: &str) -> ApiResult<()> {
    require_admin(engine, by, "change the administrators").await?;
    if preview::active() {
        let admins = engine.store().admins().await?;
        if !admins.iter().any(|a| a.principal_arn == arn) {
            return Err(ApiError::not_found(format!("administrator `{arn}`")));
        }
        if admins.len() == 1 {
            return Err(ApiError::Conflict {
                slug: ProblemType::LastAdmin,
                detail: format!("`{arn}` is the last administrator"),
                field: None,
                operation_id: None,
            });
        }
        preview::stop(Effect::Delete, format!("administrator `{arn}`"))?;
    }
    match engine.store().remove_admin(arn).await? {
        Ok(true) => Ok(()),
        Ok(false) => Err(ApiError::not_found(format!("administrator `{arn}`"))),
        Err(()) => Err(ApiError::Conflict {
            slug: ProblemType::LastAdmin,
            detail: format!("`{arn}` is the last administrator"),
            field: None,
            operation_id: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_administrator_is_a_user_or_role_without_a_path() {
        for ok in [
            "arn:aws:iam::111122223333:role/PlatformAdmin",
            "arn:aws:iam::111122223333:user/bob",
        ] {
            assert!(super::plain_principal(ok), "{ok}");
        }
        for bad in [
            "arn:aws:iam::111122223333:role/teams/PlatformAdmin",
            "arn:aws:sts::111122223333:assumed-role/Dev/alice",
            "arn:aws:iam::111122223333:group/admins",
            "PlatformAdmin",
        ] {
            assert!(!super::plain_principal(bad), "{bad}");
        }
    }
}
