//! Timestamps as the store keeps them and the Kubernetes and AWS shapes print them: fixed-width
//! RFC 3339 in UTC, millisecond precision, so that stored times sort as text. A leaf shared by
//! the store and the sandbox, which writes the same format into the objects it simulates.

use time::OffsetDateTime;

/// Current UTC time as RFC 3339.
pub fn now() -> String {
    format_utc(OffsetDateTime::now_utc())
}

/// Fixed-width RFC 3339 (millisecond precision), so stored timestamps sort as text.
fn format_utc(t: OffsetDateTime) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(FORMAT).unwrap_or_default()
}

/// The time `days` ago, as [`now`] writes it.
pub fn days_ago(days: u32) -> String {
    format_utc(OffsetDateTime::now_utc() - time::Duration::days(i64::from(days)))
}

/// Milliseconds since the epoch as RFC 3339.
pub fn rfc3339_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map(format_utc)
        .unwrap_or_default()
}
