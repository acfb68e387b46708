//! What a simulated trainer writes and how a log query cuts it: the progress lines (step,
//! loss, throughput, the NCCL timeout a struck rank leaves), the cursor a followed stream
//! keeps so each line is sent once, and `since`/`tail`/byte limits.

use serde_json::Value;

use super::workload::{RESTART, START, STRIKE, TRAIN};
use cloud::LogQuery;

/// Simulated seconds between two progress lines of a training rank.
const EVERY: f64 = 5.0;
/// Training steps per simulated second.
const STEPS_PER_SEC: f64 = 2.0;

/// Simulated seconds one uninterrupted attempt of a trainer runs: its `--max_steps` (also
/// `--max_steps=N`, `--max-steps`, hydra's `max_steps=N`) at the simulated pace, else `TRAIN`.
pub(super) fn train_secs(pod_spec: Option<&Value>) -> f64 {
    let words: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|k| pod_spec?.pointer(&format!("/containers/0/{k}"))?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(str::split_whitespace)
        .collect();
    let key = |w: &str| matches!(w.trim_start_matches('-'), "max_steps" | "max-steps");
    let steps = words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.split_once('=') {
            Some((k, n)) if key(k) => n.parse::<u64>().ok(),
            None if key(w) && w.starts_with("--") => words.get(i + 1)?.parse::<u64>().ok(),
            _ => None,
        });
    steps.map_or(TRAIN, |n| (n as f64 / STEPS_PER_SEC).max(EVERY))
}

/// The lines after a cursor (time of the last line sent, lines of that time sent).
pub(super) fn after(lines: &[(f64, String)], (t, n): (f64, usize)) -> Vec<(f64, String)> {
    let mut same = 0;
    lines
        .iter()
        .filter(|(lt, _)| {
            if *lt == t {
                same += 1;
                same > n
            } else {
                *lt > t
            }
        })
        .cloned()
        .collect()
}

/// The cursor once every line of `lines` is sent.
pub(super) fn cursor_after(lines: &[(f64, String)], cursor: (f64, usize)) -> (f64, usize) {
    match lines.last() {
        None => cursor,
        Some((t, _)) => (*t, lines.iter().filter(|(lt, _)| lt == t).count()),
    }
}

/// Applies `since`, `tail` and the byte limit to a pod's lines.
pub(super) fn select(lines: Vec<(f64, String)>, age: f64, query: &LogQuery) -> Vec<String> {
    let mut lines: Vec<String> = lines
        .into_iter()
        .filter(|(t, _)| query.since_seconds.is_none_or(|s| age - t <= s as f64))
        .map(|(_, l)| l)
        .collect();
    if let Some(tail) = query.tail_lines {
        let keep = usize::try_from(tail.max(0)).unwrap_or(usize::MAX);
        lines.drain(..lines.len().saturating_sub(keep));
    }
    if let Some(limit) = query.limit_bytes {
        let mut used = 0usize;
        let limit = usize::try_from(limit.max(0)).unwrap_or(usize::MAX);
        lines.retain(|l| {
            used += l.len() + 1;
            used <= limit
        });
    }
    lines
}

/// Training loss and throughput at a step: what the progress lines (and the simulated MLflow
/// run) report.
pub(super) fn progress(step: u64, rank: u64) -> (f64, f64) {
    let x = step as f64;
    let loss = 0.35 + 2.2 * (-x / 120.0).exp() + 0.02 * (x / 7.0).sin();
    let throughput = 1480.0 + 40.0 * (x / 13.0 + rank as f64).sin();
    (loss, throughput)
}

pub(super) fn trainer_lines(
    out: &mut Vec<(f64, String)>,
    until: f64,
    rank: u64,
    ranks: u64,
    failures: u64,
    limit: u64,
    train: f64,
) {
    let attempts = failures.min(limit.saturating_add(1)) + u64::from(failures <= limit);
    let mut resume = 0u64;
    for k in 0..attempts {
        let begin = START + (STRIKE + RESTART) * k as f64;
        if begin > until {
            return;
        }
        let struck = k < failures;
        let stop = if struck {
            begin + STRIKE
        } else {
            begin + train
        };
        out.push((
            begin,
            format!(
                "hyperpodrun: starting rank {rank} of {ranks} (attempt {})",
                k + 1
            ),
        ));
        out.push((begin, format!("[rank{rank}] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)")));
        out.push((
            begin,
            format!("[rank{rank}] NCCL INFO Connected all rings, comm {ranks} ranks"),
        ));
        let mut t = begin + EVERY;
        let mut step = resume;
        while t <= stop.min(until) {
            step = resume + ((t - begin) * STEPS_PER_SEC) as u64;
            let (loss, throughput) = progress(step, rank);
            out.push((t, format!("[rank{rank}] step={step} loss={loss:.4} throughput={throughput:.1} samples/s lr=2.0e-05")));
            t += EVERY;
        }
        if struck && stop <= until {
            if rank == 0 {
                out.push((stop, format!("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.", 400 + step)));
                out.push((stop, "[rank0] NCCL WARN NET/OFI Request completed with error. RC: 12. Error: remote access error".into()));
                out.push((
                    stop,
                    "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0."
                        .into(),
                ));
                out.push((
                    stop,
                    "hyperpodrun: worker process exited with code 1; process-level restart".into(),
                ));
            } else {
                out.push((
                    stop,
                    format!("hyperpodrun: peer rank 0 failed; rank {rank} waits for the restart"),
                ));
            }
            resume = step;
        } else if !struck && stop <= until {
            let (loss, _) = progress(step, rank);
            out.push((
                stop,
                format!("[rank{rank}] training complete: {step} steps, final loss {loss:.4}"),
            ));
        }
    }
}
