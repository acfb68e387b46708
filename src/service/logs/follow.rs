//! Following a workload's logs: one Kubernetes log stream per running pod (an HTTP stream on the
//! cluster's client, never a process), pods that appear later — a restarted job's — join, a
//! bounded buffer sits between the streams and the client (a slow or paused client loses lines,
//! counted, never memory), and the session ends with the reason once the workload ends.
//! Dropping a [`Session`] aborts its task, which drops every upstream stream at once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{select_pods, workload, Grep, LogsQuery, PodRef, Workload, MAX_PODS};
use crate::cloud::LogQuery;
use crate::error::{ApiError, ApiResult};
use crate::ops::Engine;

/// How often a session looks for new pods and whether the workload ended.
const POLL: Duration = Duration::from_secs(2);
/// Events buffered between the pod streams and the client.
const BUFFER: usize = 2000;
/// Events one message to the client carries at most.
const BATCH: usize = 256;
/// Polls a session waits, once its workload ended, for streams that do not end by themselves.
const GRACE_POLLS: u32 = 5;

/// One line of a followed log.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowLine {
    pub pod: String,
    pub rank: Option<String>,
    pub text: String,
}

/// What the client receives, one JSON message each.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FollowEvent {
    Lines {
        lines: Vec<FollowLine>,
    },
    /// A pod's log joined the stream.
    Joined {
        pod: PodRef,
    },
    /// A pod's log ended.
    Left {
        pod: String,
        reason: String,
    },
    /// Lines lost because the client did not keep up (or paused) and the buffer was full.
    Dropped {
        lines: u64,
    },
    /// The workload ended or is gone; nothing follows.
    End {
        reason: String,
    },
}

/// A live follow.
pub struct Session {
    events: mpsc::Receiver<FollowEvent>,
    dropped: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    _permit: crate::service::caps::Permit,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Session {
    /// The next messages for the client (lines batched); `None` once the session ended.
    pub async fn next(&mut self) -> Option<Vec<FollowEvent>> {
        let mut buf = Vec::with_capacity(BATCH);
        if self.events.recv_many(&mut buf, BATCH).await == 0 {
            return None;
        }
        let mut out = Vec::new();
        let lost = self.dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            out.push(FollowEvent::Dropped { lines: lost });
        }
        for event in buf {
            match (event, out.last_mut()) {
                (FollowEvent::Lines { lines }, Some(FollowEvent::Lines { lines: acc })) => {
                    acc.extend(lines)
                }
                (event, _) => out.push(event),
            }
        }
        Some(out)
    }
}

/// Starts following a workload's pods (one pod with `pod`): the last `tail` lines of the pods
/// running now, then everything new, including pods that start later.
pub async fn follow(
    engine: &Engine,
    cluster: &str,
    kind: &str,
    name: &str,
    q: &LogsQuery,
    permit: crate::service::caps::Permit,
) -> ApiResult<Session> {
    if q.since.is_some() {
        return Err(ApiError::validation(
            "since",
            "a follow starts from `tail`; `since` is for snapshots",
        ));
    }
    let tail = q.tail.unwrap_or(super::DEFAULT_TAIL);
    if !(0..=super::MAX_TAIL).contains(&tail) {
        return Err(ApiError::validation(
            "tail",
            format!("tail is 0 to {} lines per pod", super::MAX_TAIL),
        ));
    }
    let grep = Grep::parse(q.grep.as_deref())?;
    let w = workload(engine, cluster, kind, name).await?;
    // A named pod must exist now, so a typo is refused before the socket opens.
    select_pods(w.pods(engine).await?, q.pod.as_deref())?;
    let (tx, events) = mpsc::channel(BUFFER);
    let dropped = Arc::new(AtomicU64::new(0));
    let watch = Watch {
        engine: engine.clone(),
        workload: w,
        pod: q.pod.clone(),
        container: q.container.clone(),
        tail,
        grep,
        tx,
        dropped: dropped.clone(),
    };
    Ok(Session {
        events,
        dropped,
        task: tokio::spawn(watch.run()),
        _permit: permit,
    })
}

struct Watch {
    engine: Engine,
    workload: Workload,
    pod: Option<String>,
    container: Option<String>,
    tail: u32,
    grep: Grep,
    tx: mpsc::Sender<FollowEvent>,
    dropped: Arc<AtomicU64>,
}

impl Watch {
    async fn run(self) {
        // Aborting this task drops the set, which aborts every reader and with it its stream.
        let mut readers = JoinSet::new();
        let mut followed: HashSet<String> = HashSet::new();
        let mut first = true;
        let mut grace = 0;
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.workload.pods(&self.engine).await {
                Ok(pods) => {
                    for pod in pods {
                        let wanted = self.pod.as_deref().is_none_or(|p| p == pod.pod);
                        // A pending pod has no log yet: it joins once it runs.
                        if !wanted || pod.phase == "Pending" || followed.len() >= MAX_PODS {
                            continue;
                        }
                        if !followed.insert(pod.uid.clone()) {
                            continue;
                        }
                        // Pods running when the follow starts show their tail; pods that start
                        // later show everything.
                        let tail = if first {
                            Some(i64::from(self.tail))
                        } else {
                            None
                        };
                        if self
                            .tx
                            .send(FollowEvent::Joined { pod: pod.clone() })
                            .await
                            .is_err()
                        {
                            return;
                        }
                        readers.spawn(self.reader(pod, tail));
                    }
                }
                Err(e) => tracing::debug!(error = %e, "log follow: listing pods"),
            }
            first = false;
            while readers.try_join_next().is_some() {}
            match self.workload.ended(&self.engine).await {
                Ok(Some(reason)) => {
                    let gone = reason.ends_with("was deleted");
                    grace += 1;
                    if gone || readers.is_empty() || grace > GRACE_POLLS {
                        let _ = self.tx.send(FollowEvent::End { reason }).await;
                        return;
                    }
                }
                Ok(None) => grace = 0,
                Err(e) => tracing::debug!(error = %e, "log follow: reading the workload"),
            }
        }
    }

    fn reader(&self, pod: PodRef, tail: Option<i64>) -> impl std::future::Future<Output = ()> {
        let kube = self.engine.cloud().kube.clone();
        let target = self.workload.target.clone();
        let namespace = self.workload.namespace.clone();
        let tx = self.tx.clone();
        let dropped = self.dropped.clone();
        let grep = self.grep.clone();
        let query = LogQuery {
            container: self
                .container
                .clone()
                .or_else(|| Some(pod.container.clone()).filter(|c| !c.is_empty())),
            tail_lines: tail,
            ..Default::default()
        };
        async move {
            let reason = match kube.follow_log(&target, &namespace, &pod.pod, &query).await {
                Err(e) => e.message,
                Ok(mut lines) => loop {
                    match lines.next().await {
                        None => break "the container ended".to_string(),
                        Some(Err(e)) => break e.message,
                        Some(Ok(text)) if grep.matches(&text) => {
                            let line = FollowLine {
                                pod: pod.pod.clone(),
                                rank: pod.rank.clone(),
                                text,
                            };
                            let event = FollowEvent::Lines { lines: vec![line] };
                            if tx.try_send(event).is_err() {
                                dropped.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Some(Ok(_)) => {}
                    }
                },
            };
            let _ = tx
                .send(FollowEvent::Left {
                    pod: pod.pod.clone(),
                    reason,
                })
                .await;
        }
    }
}
