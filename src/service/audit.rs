//! The audit trail's domain side: recording a mutating request (never failing the request
//! because of it) and reading pages with filters.

use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;
use crate::store::{AuditEntry, AuditFilter, NewAudit};

const ACTORS: [&str; 3] = ["api", "browser", "agent"];
const OUTCOMES: [&str; 3] = ["ok", "refused", "error"];
const METHODS: [&str; 4] = ["POST", "PUT", "PATCH", "DELETE"];

/// Appends one entry. A failure is logged, not answered: the request already happened.
pub async fn record(engine: &Engine, entry: &NewAudit<'_>) {
    if let Err(e) = engine.store().insert_audit(entry).await {
        tracing::error!(error = %e, route = entry.route, "could not record the audit entry");
    }
}

/// Removes the entries older than `days` (none when `days` is 0); how many.
pub async fn prune(engine: &Engine, days: u32) -> anyhow::Result<u64> {
    if days == 0 {
        return Ok(0);
    }
    let cutoff = crate::cloud::clock::days_ago(days);
    let removed = engine.store().prune_audit(&cutoff).await?;
    if removed > 0 {
        tracing::info!(removed, days, "audit entries past their retention removed");
    }
    Ok(removed)
}

/// Keeps the trail to its retention: pruned once a day from now on (the start already did).
pub fn keep(engine: Engine, days: u32) {
    if days == 0 {
        return;
    }
    tokio::spawn(async move {
        let day = std::time::Duration::from_secs(86_400);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + day, day);
        loop {
            tick.tick().await;
            if let Err(e) = prune(&engine, days).await {
                tracing::warn!(error = %e, "pruning the audit trail");
            }
        }
    });
}

fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> ApiResult<()> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(ApiError::validation_hint(
            field,
            format!(
                "`{}` is not one of them",
                v.chars().take(40).collect::<String>()
            ),
            json!(allowed),
        )),
        _ => Ok(()),
    }
}

/// A page of the trail, newest first, after the entry `cursor`; the next page's cursor.
pub async fn page(
    engine: &Engine,
    filter: &AuditFilter<'_>,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> ApiResult<(Vec<AuditEntry>, Option<String>)> {
    let limit = super::cluster::views::page_limit(limit)?;
    one_of("actor", filter.actor, &ACTORS)?;
    one_of("outcome", filter.outcome, &OUTCOMES)?;
    one_of("method", filter.method, &METHODS)?;
    let before = cursor
        .map(|c| {
            c.parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ApiError::validation("cursor", "not a cursor this server gave"))
        })
        .transpose()?;
    let mut entries = engine.store().audit_page(filter, before, limit + 1).await?;
    let more = entries.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next = more
        .then(|| entries.last().map(|e| e.id.to_string()))
        .flatten();
    Ok((entries, next))
}
