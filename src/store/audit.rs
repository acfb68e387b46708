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
}

pub fn outcome_of(status: u16) -> &'static str {
    match status {
        500.. => "error",
        400.. => "refused",
        _ => "ok",
    }
}

impl Store {
    pub async fn insert_audit(&self, a: &NewAudit<'_>) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO audit (at, actor, principal, method, route, path, status, outcome, request_id, operation_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(now())
        .bind(a.actor)
        .bind(a.principal)
        .bind(a.method)
        .bind(a.route)
        .bind(a.path)
        .bind(i64::from(a.status))
        .bind(outcome_of(a.status))
        .bind(a.request_id)
        .bind(a.operation_id)
        .execute(&self.writer)
        .await?;
        Ok(())
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
             ORDER BY id DESC LIMIT ?5",
        )
        .bind(f.actor)
        .bind(f.outcome)
        .bind(f.method)
        .bind(before)
        .bind(limit)
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
