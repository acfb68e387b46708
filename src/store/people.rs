//! People: sessions, agent tokens, sign-in tokens already used and the administrators list
//! (migration 0006). Secrets arrive hashed; expiry times are seconds since the epoch.

use serde::Serialize;
use sqlx::Row as _;
use utoipa::ToSchema;

use super::{now, Store};

/// Who a session or an agent token acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The IAM principal (what access entries and the administrators list name).
    pub principal_arn: String,
    /// STS's ARN of the person (a role session names them).
    pub arn: String,
    /// The agent token, when it is one.
    pub agent_token: Option<AgentTokenId>,
    /// Whether the principal administers the deployment: read in the same query as the session
    /// or token, so a request costs one read and a change to the list holds from the next one.
    pub admin: bool,
}

/// An agent token as its holder is told of it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTokenId {
    pub id: String,
    pub name: String,
    pub read_only: bool,
    pub created_at: String,
    /// Seconds since the epoch.
    pub expires_at: i64,
    pub revoked_at: Option<String>,
}

/// A new agent token.
pub struct NewAgentToken<'a> {
    pub id: &'a str,
    pub secret_hash: &'a str,
    pub principal_arn: &'a str,
    pub arn: &'a str,
    pub name: &'a str,
    pub read_only: bool,
    pub expires_at: i64,
}

/// One administrator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admin {
    pub principal_arn: String,
    /// Who added it: `deployment` for the stack's list, else an administrator's ARN.
    pub added_by: String,
    pub added_at: String,
}

fn token_of(r: &sqlx::sqlite::SqliteRow) -> sqlx::Result<AgentTokenId> {
    Ok(AgentTokenId {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        read_only: r.try_get::<i64, _>("read_only")? != 0,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
    })
}

fn holder_of(
    r: &sqlx::sqlite::SqliteRow,
    agent_token: Option<AgentTokenId>,
) -> sqlx::Result<Holder> {
    Ok(Holder {
        principal_arn: r.try_get("principal_arn")?,
        arn: r.try_get("arn")?,
        agent_token,
        admin: r.try_get::<i64, _>("admin")? != 0,
    })
}

impl Store {
    /// Accepts a sign-in token's signature once: `false` when it was seen before (a replay).
    /// Signatures past their expiry are dropped on the way.
    pub async fn use_sign_in(
        &self,
        signature: &str,
        expires_at: i64,
        now_s: i64,
    ) -> sqlx::Result<bool> {
        sqlx::query("DELETE FROM used_sign_ins WHERE expires_at < ?")
            .bind(now_s)
            .execute(&self.writer)
            .await?;
        let done = sqlx::query(
            "INSERT OR IGNORE INTO used_sign_ins (signature, expires_at) VALUES (?, ?)",
        )
        .bind(signature)
        .bind(expires_at)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn create_session(
        &self,
        secret_hash: &str,
        principal_arn: &str,
        arn: &str,
        expires_at: i64,
    ) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO sessions (secret_hash, principal_arn, arn, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(secret_hash)
        .bind(principal_arn)
        .bind(arn)
        .bind(now())
        .bind(expires_at)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Who a live session is for.
    pub async fn session(&self, secret_hash: &str, now_s: i64) -> sqlx::Result<Option<Holder>> {
        let row = sqlx::query(
            "SELECT s.principal_arn, s.arn, EXISTS (SELECT 1 FROM admins a WHERE a.principal_arn = s.principal_arn) AS admin
             FROM sessions s WHERE s.secret_hash = ? AND s.expires_at >= ?",
        )
        .bind(secret_hash)
        .bind(now_s)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| holder_of(&r, None)).transpose()
    }

    pub async fn end_session(&self, secret_hash: &str) -> sqlx::Result<()> {
        sqlx::query("DELETE FROM sessions WHERE secret_hash = ?")
            .bind(secret_hash)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    pub async fn create_agent_token(&self, t: &NewAgentToken<'_>) -> sqlx::Result<AgentTokenId> {
        sqlx::query(
            "INSERT INTO agent_tokens (id, secret_hash, principal_arn, arn, name, read_only, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(t.id)
        .bind(t.secret_hash)
        .bind(t.principal_arn)
        .bind(t.arn)
        .bind(t.name)
        .bind(i64::from(t.read_only))
        .bind(now())
        .bind(t.expires_at)
        .execute(&self.writer)
        .await?;
        let row = sqlx::query("SELECT * FROM agent_tokens WHERE id = ?")
            .bind(t.id)
            .fetch_one(&self.writer)
            .await?;
        token_of(&row)
    }

    /// Who a live (unexpired, unrevoked) agent token is for.
    pub async fn agent_token(&self, secret_hash: &str, now_s: i64) -> sqlx::Result<Option<Holder>> {
        let row = sqlx::query(
            "SELECT t.*, EXISTS (SELECT 1 FROM admins a WHERE a.principal_arn = t.principal_arn) AS admin
             FROM agent_tokens t WHERE t.secret_hash = ? AND t.expires_at >= ? AND t.revoked_at IS NULL",
        )
        .bind(secret_hash)
        .bind(now_s)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| holder_of(&r, Some(token_of(&r)?))).transpose()
    }

    /// A person's agent tokens, newest first.
    pub async fn agent_tokens(&self, arn: &str) -> sqlx::Result<Vec<AgentTokenId>> {
        sqlx::query("SELECT * FROM agent_tokens WHERE arn = ? ORDER BY created_at DESC, id")
            .bind(arn)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(token_of)
            .collect()
    }

    /// Revokes one of `arn`'s agent tokens; `false` when it has none by that id.
    pub async fn revoke_agent_token(&self, id: &str, arn: &str) -> sqlx::Result<bool> {
        let done = sqlx::query(
            "UPDATE agent_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND arn = ?",
        )
        .bind(now())
        .bind(id)
        .bind(arn)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn admins(&self) -> sqlx::Result<Vec<Admin>> {
        sqlx::query("SELECT * FROM admins ORDER BY principal_arn")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| {
                Ok(Admin {
                    principal_arn: r.try_get("principal_arn")?,
                    added_by: r.try_get("added_by")?,
                    added_at: r.try_get("added_at")?,
                })
            })
            .collect()
    }

    pub async fn is_admin(&self, principal_arn: &str) -> sqlx::Result<bool> {
        Ok(sqlx::query("SELECT 1 FROM admins WHERE principal_arn = ?")
            .bind(principal_arn)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Adds an administrator (`true`) or finds it already there (`false`).
    pub async fn add_admin(&self, principal_arn: &str, added_by: &str) -> sqlx::Result<bool> {
        let done = sqlx::query(
            "INSERT OR IGNORE INTO admins (principal_arn, added_by, added_at) VALUES (?, ?, ?)",
        )
        .bind(principal_arn)
        .bind(added_by)
        .bind(now())
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes an administrator, never the last one; `Ok(false)` when it was not one.
    pub async fn remove_admin(&self, principal_arn: &str) -> sqlx::Result<Result<bool, ()>> {
        let _serial = self.write_lock.lock().await;
        let mut tx = self.writer.begin().await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM admins")
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        let there = sqlx::query("SELECT 1 FROM admins WHERE principal_arn = ?")
            .bind(principal_arn)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if !there {
            return Ok(Ok(false));
        }
        if count <= 1 {
            return Ok(Err(()));
        }
        sqlx::query("DELETE FROM admins WHERE principal_arn = ?")
            .bind(principal_arn)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(true))
    }
}
