//! Simulated Kueue admission: a pure function of what the teams' ClusterQueues hold and which
//! workloads were submitted (and deleted) when. It replays the cluster's history event by event
//! as Kueue would decide it — admit within the team's quota; borrow the cohort's idle GPUs up
//! to the team's limit (none from a `DontLend` team, none for a team that only lends); reclaim
//! a team's lent quota by preempting the borrowers; preempt the team's own lower-priority work
//! under `LowerPriority`; requeue what was preempted — so every call sees the same past.
//!
//! Times are simulated seconds relative to now (≤ 0 happened). Quantities are GPUs
//! (`nvidia.com/gpu`) per flavor, one flavor per instance type.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use cloud::{Preempt, Sharing};

/// `BorrowLimit` when a quota names none: SageMaker's documented default, percent of the quota.
pub(super) const DEFAULT_BORROW_LIMIT: u32 = 50;

/// A team's ClusterQueue.
#[derive(Debug, Clone)]
pub(super) struct Team {
    pub name: String,
    /// GPUs per flavor (`nominalQuota`); flavors it was not given are 0, so it may borrow them.
    pub nominal: BTreeMap<String, u32>,
    /// Its quotas before its latest changes: `(until, nominal)`, oldest first. A quota made
    /// smaller never evicts what it admitted, so each moment is decided by its own quota.
    pub earlier: Vec<(f64, BTreeMap<String, u32>)>,
    pub sharing: Sharing,
    /// Percent of its quota it may borrow on top (`BorrowLimit`), with `LendAndBorrow`.
    pub borrow_limit: Option<u32>,
    pub preempt: Preempt,
}

impl Team {
    fn nominal(&self, flavor: &str) -> u32 {
        self.nominal_at(flavor, f64::INFINITY)
    }

    /// Its quota of `flavor` at simulated time `t`.
    fn nominal_at(&self, flavor: &str, t: f64) -> u32 {
        self.earlier
            .iter()
            .find(|(until, _)| t < *until)
            .map_or(&self.nominal, |(_, n)| n)
            .get(flavor)
            .copied()
            .unwrap_or(0)
    }

    /// GPUs of `flavor` it may use beyond its quota (`borrowingLimit`).
    pub(super) fn borrowing_limit(&self, flavor: &str) -> u32 {
        self.borrowing_limit_at(flavor, f64::INFINITY)
    }

    fn borrowing_limit_at(&self, flavor: &str, t: f64) -> u32 {
        match self.sharing {
            Sharing::LendAndBorrow => {
                let pct = self.borrow_limit.unwrap_or(DEFAULT_BORROW_LIMIT);
                self.nominal_at(flavor, t).saturating_mul(pct) / 100
            }
            Sharing::Lend | Sharing::DontLend => 0,
        }
    }
}

/// A queued workload.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub id: String,
    /// The team its queue belongs to (none: a queue no ClusterQueue serves).
    pub team: String,
    pub priority: i64,
    pub arrive: f64,
    /// When it was deleted, if it was.
    pub leave: Option<f64>,
    pub gpus: u32,
    pub flavor: String,
    /// Simulated seconds it runs once admitted, to its end.
    pub run: f64,
}

/// Why a workload waits.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Why {
    /// Its LocalQueue has no active ClusterQueue behind it.
    NoQueue,
    /// Not enough unused quota now: `more` GPUs more needed.
    Short { more: u32 },
    /// More than the team could ever be given (quota plus borrowing limit).
    TooBig { max: u32 },
}

/// Where a workload stands now.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Standing {
    Admitted {
        since: f64,
        borrowing: bool,
    },
    Pending {
        since: f64,
        why: Why,
    },
    /// Evicted to make room for `by` and requeued: `reclaim` when its team was borrowing the
    /// quota another team took back, else within its own team by priority.
    Preempted {
        at: f64,
        by: String,
        reclaim: bool,
        why: Why,
    },
    Finished {
        at: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdict {
    pub standing: Standing,
    /// How often it was preempted: each readmission restarts its pods.
    pub evictions: u32,
}

/// A team's use of one flavor now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Use {
    pub total: u32,
    pub borrowed: u32,
}

#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub jobs: HashMap<String, Verdict>,
    pub usage: HashMap<String, BTreeMap<String, Use>>,
}

/// A queued job as Kueue holds it now.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub verdict: Verdict,
    /// Wall-clock ms its current admission began (its pods' start), once admitted.
    pub admitted_ms: Option<i64>,
    /// Kueue's message while it waits.
    pub message: String,
}

/// The cluster's Kueue: each queued job's standing (by its resource id) and the objects
/// Kueue keeps for them.
#[derive(Debug, Default)]
pub(crate) struct Kueue {
    pub(super) jobs: HashMap<String, Queued>,
    /// Deployment resource id → the replicas (by index) Kueue has not admitted.
    pub(super) gated: HashMap<String, Vec<u64>>,
    pub(super) workloads: Vec<Value>,
    pub(super) cluster_queues: Vec<Value>,
    /// The LocalQueue of each team in force, in the team's namespace: the task governance
    /// add-on makes both when SageMaker creates the team's compute quota.
    pub(super) local_queues: Vec<Value>,
}

impl Kueue {
    /// When the stored workload `id` (made at `created_ms`) started its pods: its current
    /// admission for a queued job, its creation otherwise; `Err` with Kueue's hold while it
    /// waits for quota.
    pub(super) fn started_ms(&self, id: &str, created_ms: i64) -> Result<i64, &Queued> {
        match self.jobs.get(id) {
            None => Ok(created_ms),
            Some(q) => q.admitted_ms.ok_or(q),
        }
    }
}

struct Sim<'a> {
    teams: &'a [Team],
    jobs: &'a [Job],
    /// GPUs per flavor no team was given, lent too under idle-resource sharing.
    pool: &'a BTreeMap<String, u32>,
    /// Admitted jobs (index) → admitted at.
    running: BTreeMap<usize, f64>,
    /// The moment being decided.
    now: f64,
    verdicts: Vec<Option<Verdict>>,
}

impl Sim<'_> {
    fn team(&self, name: &str) -> Option<&Team> {
        self.teams.iter().find(|t| t.name == name)
    }

    fn used(&self, running: &BTreeMap<usize, f64>, team: &str, flavor: &str) -> u32 {
        running
            .keys()
            .map(|&i| &self.jobs[i])
            .filter(|j| j.team == team && j.flavor == flavor)
            .map(|j| j.gpus)
            .sum()
    }

    /// Whether the cohort can hold what `running` admits of `flavor`: every team within its
    /// quota plus its borrowing limit, and all that is borrowed covered by the idle quota of
    /// the teams that lend (and the unassigned pool).
    fn feasible(&self, running: &BTreeMap<usize, f64>, flavor: &str) -> bool {
        self.feasible_with(running, "", flavor, 0)
    }

    /// Why job `i` does not fit now.
    fn why(&self, i: usize) -> Why {
        let j = &self.jobs[i];
        let Some(t) = self.team(&j.team) else {
            return Why::NoQueue;
        };
        let max = t.nominal_at(&j.flavor, self.now) + t.borrowing_limit_at(&j.flavor, self.now);
        if j.gpus > max {
            return Why::TooBig { max };
        }
        // The most it could be given now.
        let room = (0..j.gpus)
            .rev()
            .find(|&g| self.feasible_with(&self.running, &j.team, &j.flavor, g))
            .unwrap_or(0);
        Why::Short {
            more: j.gpus - room,
        }
    }

    /// `feasible` with `extra` GPUs more for `team` (what a waiting job would add).
    fn feasible_with(
        &self,
        running: &BTreeMap<usize, f64>,
        team: &str,
        flavor: &str,
        extra: u32,
    ) -> bool {
        let mut borrowed = 0u64;
        let mut lendable = u64::from(self.pool.get(flavor).copied().unwrap_or(0));
        for t in self.teams {
            let mut u = self.used(running, &t.name, flavor);
            if t.name == team {
                u += extra;
            }
            let n = t.nominal_at(flavor, self.now);
            if u > n {
                if u - n > t.borrowing_limit_at(flavor, self.now) {
                    return false;
                }
                borrowed += u64::from(u - n);
            } else if t.sharing != Sharing::DontLend {
                lendable += u64::from(n - u);
            }
        }
        borrowed <= lendable
    }

    /// Admits job `i` at `now` if it fits, preempting what Kueue would to make room; returns
    /// the jobs preempted (and whether by reclamation), or None if it stays pending.
    fn try_admit(&mut self, i: usize, now: f64) -> Option<Vec<(usize, bool)>> {
        let jobs = self.jobs;
        let j = &jobs[i];
        let team = self.team(&j.team)?.clone();
        let mut trial = self.running.clone();
        trial.insert(i, now);
        if self.feasible(&trial, &j.flavor) {
            self.running = trial;
            return Some(vec![]);
        }
        // Candidates, cheapest first: other teams' borrowing workloads (reclaim, only while
        // the job itself stays within its team's quota), then its team's own lower-priority
        // ones under `LowerPriority`; lowest priority, then latest admitted, first.
        let order = |a: &usize, b: &usize| {
            let (ja, jb) = (&self.jobs[*a], &self.jobs[*b]);
            ja.priority
                .cmp(&jb.priority)
                .then(self.running[b].total_cmp(&self.running[a]))
        };
        let mut reclaim: Vec<usize> = self
            .running
            .keys()
            .copied()
            .filter(|&k| {
                let o = &self.jobs[k];
                o.team != j.team && o.flavor == j.flavor
            })
            .collect();
        reclaim.sort_by(order);
        let mut own: Vec<usize> = if team.preempt == Preempt::LowerPriority {
            self.running
                .keys()
                .copied()
                .filter(|&k| {
                    let o = &self.jobs[k];
                    o.team == j.team && o.flavor == j.flavor && o.priority < j.priority
                })
                .collect()
        } else {
            vec![]
        };
        own.sort_by(order);
        let mut chosen: Vec<(usize, bool)> = vec![];
        for (k, by_reclaim) in reclaim
            .into_iter()
            .map(|k| (k, true))
            .chain(own.into_iter().map(|k| (k, false)))
        {
            if by_reclaim {
                let o = &self.jobs[k];
                let borrowing = self.used(&trial, &o.team, &o.flavor)
                    > self
                        .team(&o.team)
                        .map_or(0, |t| t.nominal_at(&o.flavor, now));
                let within =
                    self.used(&trial, &j.team, &j.flavor) <= team.nominal_at(&j.flavor, now);
                if !borrowing || !within {
                    continue;
                }
            }
            trial.remove(&k);
            chosen.push((k, by_reclaim));
            if self.feasible(&trial, &j.flavor) {
                // Keep only the preemptions needed, last chosen kept first.
                for idx in (0..chosen.len().saturating_sub(1)).rev() {
                    let (c, _) = chosen[idx];
                    let mut back = trial.clone();
                    back.insert(c, self.running[&c]);
                    if self.feasible(&back, &j.flavor) {
                        trial = back;
                        chosen.remove(idx);
                    }
                }
                self.running = trial;
                return Some(chosen);
            }
        }
        None
    }

    fn pending(&self, now: f64) -> Vec<usize> {
        let mut waiting: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| {
                let j = &self.jobs[i];
                j.arrive <= now
                    && j.leave.is_none_or(|l| l > now)
                    && !self.running.contains_key(&i)
                    && !matches!(
                        self.verdicts[i].as_ref().map(|v| &v.standing),
                        Some(Standing::Finished { .. })
                    )
            })
            .collect();
        // Kueue's order: higher priority first, then older first.
        waiting.sort_by(|a, b| {
            let (ja, jb) = (&self.jobs[*a], &self.jobs[*b]);
            jb.priority
                .cmp(&ja.priority)
                .then(ja.arrive.total_cmp(&jb.arrive))
        });
        waiting
    }

    /// One scheduling pass at `now`: admit what fits, in queue order, until nothing changes.
    fn admit_all(&mut self, now: f64) {
        self.now = now;
        // Each pass admits one or stops; preemptions never cycle (a preemptor outranks or
        // reclaims), and the bound keeps a bug from spinning.
        for _ in 0..(self.jobs.len() * 4 + 1) {
            let mut admitted = false;
            for i in self.pending(now) {
                if let Some(preempted) = self.try_admit(i, now) {
                    let evictions = self.verdicts[i].as_ref().map_or(0, |v| v.evictions);
                    let borrowing = {
                        let j = &self.jobs[i];
                        self.used(&self.running, &j.team, &j.flavor)
                            > self
                                .team(&j.team)
                                .map_or(0, |t| t.nominal_at(&j.flavor, now))
                    };
                    self.verdicts[i] = Some(Verdict {
                        standing: Standing::Admitted {
                            since: now,
                            borrowing,
                        },
                        evictions,
                    });
                    for (k, reclaim) in preempted {
                        let evictions = self.verdicts[k].as_ref().map_or(0, |v| v.evictions) + 1;
                        self.verdicts[k] = Some(Verdict {
                            standing: Standing::Preempted {
                                at: now,
                                by: self.jobs[i].id.clone(),
                                reclaim,
                                why: Why::Short { more: 0 },
                            },
                            evictions,
                        });
                    }
                    admitted = true;
                    break;
                }
            }
            if !admitted {
                break;
            }
        }
        // What still waits, and why, as of now.
        for i in self.pending(now) {
            let why = self.why(i);
            let v = self.verdicts[i].take();
            self.verdicts[i] = Some(match v {
                Some(Verdict {
                    standing:
                        Standing::Preempted {
                            at, by, reclaim, ..
                        },
                    evictions,
                }) => Verdict {
                    standing: Standing::Preempted {
                        at,
                        by,
                        reclaim,
                        why,
                    },
                    evictions,
                },
                Some(Verdict {
                    standing: Standing::Pending { since, .. },
                    evictions,
                }) => Verdict {
                    standing: Standing::Pending { since, why },
                    evictions,
                },
                _ => Verdict {
                    standing: Standing::Pending { since: now, why },
                    evictions: 0,
                },
            });
        }
    }
}

/// Replays the cluster's queued workloads up to now (time 0).
pub(super) fn simulate(teams: &[Team], jobs: &[Job], pool: &BTreeMap<String, u32>) -> Outcome {
    let mut sim = Sim {
        teams,
        jobs,
        pool,
        running: BTreeMap::new(),
        now: f64::NEG_INFINITY,
        verdicts: vec![None; jobs.len()],
    };
    let mut t = f64::NEG_INFINITY;
    loop {
        // The next moment something changes: an arrival, a deletion, an admitted job's end, a
        // quota changed.
        let next = jobs
            .iter()
            .map(|j| j.arrive)
            .chain(
                teams
                    .iter()
                    .flat_map(|t| t.earlier.iter().map(|(until, _)| *until)),
            )
            .chain(jobs.iter().filter_map(|j| j.leave))
            .chain(sim.running.iter().map(|(&i, &at)| at + jobs[i].run))
            .filter(|&x| x > t && x <= 0.0)
            .fold(f64::INFINITY, f64::min);
        if !next.is_finite() {
            break;
        }
        t = next;
        let ended: Vec<usize> = sim
            .running
            .iter()
            .filter(|(&i, &at)| at + jobs[i].run <= t || jobs[i].leave.is_some_and(|l| l <= t))
            .map(|(&i, _)| i)
            .collect();
        for i in ended {
            let at = sim.running.remove(&i).unwrap_or(t);
            if jobs[i].leave.is_none_or(|l| l > t) {
                let evictions = sim.verdicts[i].as_ref().map_or(0, |v| v.evictions);
                sim.verdicts[i] = Some(Verdict {
                    standing: Standing::Finished {
                        at: (at + jobs[i].run).min(t),
                    },
                    evictions,
                });
            }
        }
        sim.admit_all(t);
    }
    let mut out = Outcome::default();
    for (i, v) in sim.verdicts.iter().enumerate() {
        if let Some(v) = v.as_ref().filter(|_| jobs[i].leave.is_none()) {
            out.jobs.insert(jobs[i].id.clone(), v.clone());
        }
    }
    for team in teams {
        let flavors = team.nominal.keys().chain(
            jobs.iter()
                .filter(|j| j.team == team.name)
                .map(|j| &j.flavor),
        );
        let mut usage = BTreeMap::new();
        for f in flavors {
            let total = sim.used(&sim.running, &team.name, f);
            usage.insert(
                f.clone(),
                Use {
                    total,
                    borrowed: total.saturating_sub(team.nominal(f)),
                },
            );
        }
        out.usage.insert(team.name.clone(), usage);
    }
    out
}

#[cfg(test)]
mod tests;
