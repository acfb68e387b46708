//! The audit trail: one row per mutating request, appended after it is answered, read newest
//! first in pages.

use serde::Serialize;
use sqlx::Row as _;
use utoipa::ToSchema;

use super::{now, Store};

/// One audited request.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    /// `api`, `browser` or `agent`.
    pub actor: String,
    /// How the caller authenticated: `token` or `loopback` (never the token itself).
    pub principal: String,
    pub method: String,
    /// The route template, e.g. `/api/clusters/{name}`.
    pub route: String,
    pub path: String,
    pub status: u16,
    /// `ok` (2xx), `refused` (4xx) or `error` (5xx).
    pub outcome: String,
    pub request_id: String,
    /// The operation the request started or acted on, when it names one.
    pub operation_id: Option<String>,
}

/// What a new row records (its id and time are the store's).
pub struct NewAudit<'a> {
    pub actor: &'a str,
    pub principal: &'a str,
    pub method: &'a str,
    pub route: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub request_id: &'a str,
    pub operation_id: Option<&'a str>,
}

/// Filters of an audit page.
#[derive(Default)]
pub struct AuditFilter<'a> {
    pub actor: Option<&'a str>,
    pub outcome: Option<&'a str>,
    pub method: Option<&'a str>,
    /// Whose requests (the principal as recorded: a person's ARN when people sign in).
    pub principal: Option<&'a str>,
    /// Requests on this cluster (its routes, `/api/clusters/<name>` and below).
    pub cluster: Option<&'a str>,
}

pub fn outcome_of(status: u16) -> &'static str {
    match status {
        500.. => "error",
        400.. => "refused",
        _ => "ok",
    }
}

/// Audit rows queued for one multi-row `INSERT`: a burst of changes costs the one writing
/// connection a statement per batch instead of one per request.
pub(super) type AuditQueue = super::group::GroupQueue<OwnedAudit, Result<(), String>>;

/// A row as queued (owned: it outlives the request that made it).
pub(super) struct OwnedAudit {
    at: String,
    actor: String,
    principal: String,
    method: String,
    route: String,
    path: String,
    status: u16,
    request_id: String,
    operation_id: Option<String>,
}

type Waiting = super::group::Waiting<OwnedAudit, Result<(), String>>;

/// Rows per statement: 10 parameters each, well under SQLite's 32,766.
const BATCH: usize = 500;

impl Store {
    /// Appends one entry, answering once it is committed. Entries queued meanwhile are written
    /// together (group commit): whoever takes the turn writes every row waiting, in order.
    pub async fn insert_audit(&self, a: &NewAudit<'_>) -> anyhow::Result<()> {
        let row = OwnedAudit {
            at: now(),
            actor: a.actor.into(),
            principal: a.principal.into(),
            method: a.method.into(),
            route: a.route.into(),
            path: a.path.into(),
            status: a.status,
            request_id: a.request_id.into(),
            operation_id: a.operation_id.map(str::to_string),
        };
        let writer = self.writer.clone();
        match self
            .audit
            .join(row, |group| write_batch(writer, group))
            .await
        {
            Some(result) => result.map_err(anyhow::Error::msg),
            None => anyhow::bail!("the audit batch holding this entry was dropped"),
        }
    }

    /// Removes the entries recorded before `cutoff` (a time as the store writes them); how many.
    pub async fn prune_audit(&self, cutoff: &str) -> anyhow::Result<u64> {
        Ok(sqlx::query("DELETE FROM audit WHERE at < ?")
            .bind(cutoff)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    /// Up to `limit` entries newest first, older than the entry `before`.
    pub async fn audit_page(
        &self,
        f: &AuditFilter<'_>,
        before: Option<i64>,
        limit: i64,
    ) -> anyhow::Result<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT * FROM audit
             WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR outcome = ?2)
               AND (?3 IS NULL OR method = ?3) AND (?4 IS NULL OR id < ?4)
               AND (?6 IS NULL OR principal = ?6)
               AND (?7 IS NULL OR path = '/api/clusters/' || ?7
                    OR substr(path, 1, length(?7) + 15) = '/api/clusters/' || ?7 || '/')
             ORDER BY id DESC LIMIT ?5",
        )
        .bind(f.actor)
        .bind(f.outcome)
        .bind(f.method)
        .bind(before)
        .bind(limit)
        .bind(f.principal)
        .bind(f.cluster)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let status: i64 = r.try_get("status")?;
                Ok(AuditEntry {
                    id: r.try_get("id")?,
                    at: r.try_get("at")?,
                    actor: r.try_get("actor")?,
                    principal: r.try_get("principal")?,
                    method: r.try_get("method")?,
                    route: r.try_get("route")?,
                    path: r.try_get("path")?,
                    status: u16::try_from(status).unwrap_or(0),
                    outcome: r.try_get("outcome")?,
                    request_id: r.try_get("request_id")?,
                    operation_id: r.try_get("operation_id")?,
                })
            })
            .collect()
    }
}

/// Writes queued rows, [`BATCH`] to a statement, and tells each waiter how its row fared.
async fn write_batch(writer: sqlx::SqlitePool, batch: Vec<Waiting>) {
    let mut batch = batch.into_iter().peekable();
    while batch.peek().is_some() {
        let chunk: Vec<Waiting> = batch.by_ref().take(BATCH).collect();
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let sql = format!(
            "INSERT INTO audit (at, actor, principal, method, route, path, status, outcome, request_id, operation_id)
             VALUES {values}"
        );
        let mut query = sqlx::query(&sql);
        for (a, _) in &chunk {
            query = query
                .bind(&a.at)
                .bind(&a.actor)
                .bind(&a.principal)
                .bind(&a.method)
                .bind(&a.route)
                .bind(&a.path)
                .bind(i64::from(a.status))
                .bind(outcome_of(a.status))
                .bind(&a.request_id)
                .bind(&a.operation_id);
        }
        let result = query
            .execute(&writer)
            .await
            .map(drop)
            .map_err(|e| e.to_string());
        for (_, done) in chunk {
            let _ = done.send(result.clone());
        }
    }
}
