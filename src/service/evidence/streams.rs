//! The log streams evidence reads: which of a failed creation's lifecycle-script streams come
//! first, and the newest lines of each stream under a prefix.

use super::{unread, StreamTail, Unread, LINES, STREAMS};
use crate::ops::Engine;

/// Where a failed creation's lifecycle-script lines are, in the order to read them: the streams
/// the failure names, then those of the groups short of their count (where the failing nodes
/// are) — a cluster's first streams by name may all be healthy nodes of another group — then
/// any.
pub(super) fn lifecycle_prefixes(
    failure_message: Option<&str>,
    groups: &[crate::cloud::InstanceGroupStatus],
) -> Vec<String> {
    let mut prefixes: Vec<String> = failure_message
        .iter()
        .flat_map(|m| m.split_whitespace())
        .map(|w| w.trim_end_matches(['.', ',', ';']))
        .filter(|w| w.starts_with("LifecycleConfig/"))
        .map(str::to_string)
        .collect();
    prefixes.extend(
        groups
            .iter()
            .filter(|g| g.current_count < g.target_count)
            .map(|g| format!("LifecycleConfig/{}/", g.name)),
    );
    prefixes.push("LifecycleConfig/".into());
    prefixes
}

/// The newest lines of each stream under `prefixes`, newest first.
pub(super) async fn tails(
    engine: &Engine,
    group: &str,
    prefixes: &[String],
    unread_parts: &mut Vec<Unread>,
) -> Vec<StreamTail> {
    let logs = &engine.cloud().logs;
    let mut out = vec![];
    for prefix in prefixes {
        let streams = match logs.streams(group, prefix, STREAMS).await {
            Ok(s) => s,
            Err(e) => {
                unread_parts.push(unread(&format!("log streams {prefix}"), &e));
                continue;
            }
        };
        for s in streams {
            if out.len() >= STREAMS {
                return out;
            }
            match logs.tail(group, &s.name, LINES).await {
                Ok(mut lines) => {
                    lines.reverse();
                    out.push(StreamTail {
                        stream: s.name,
                        lines,
                    });
                }
                Err(e) => unread_parts.push(unread(&format!("log stream {}", s.name), &e)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_creation_reads_the_named_stream_then_the_short_groups_then_any() {
        let group = |name: &str, current: u32, target: u32| crate::cloud::InstanceGroupStatus {
            name: name.into(),
            instance_type: "ml.g5.8xlarge".into(),
            target_count: target,
            current_count: current,
            spec: None,
            software: Default::default(),
        };
        let groups = [group("a-healthy", 2, 2), group("workers", 1, 4)];
        assert_eq!(
            lifecycle_prefixes(
                Some("Lifecycle scripts failed: see LifecycleConfig/workers/i-0abc."),
                &groups
            ),
            [
                "LifecycleConfig/workers/i-0abc",
                "LifecycleConfig/workers/",
                "LifecycleConfig/"
            ]
        );
        assert_eq!(lifecycle_prefixes(None, &[]), ["LifecycleConfig/"]);
    }
}
