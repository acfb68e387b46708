//! The simulated admission, checked case by case.

use super::*;

const G5: &str = "ml.g5.8xlarge";

fn team(name: &str, gpus: u32, sharing: Sharing, preempt: Preempt) -> Team {
    Team {
        name: name.into(),
        earlier: vec![],
        nominal: BTreeMap::from([(G5.to_string(), gpus)]),
        sharing,
        borrow_limit: Some(100),
        preempt,
    }
}

fn job(id: &str, team: &str, priority: i64, arrive: f64, gpus: u32) -> Job {
    Job {
        id: id.into(),
        team: team.into(),
        priority,
        arrive,
        leave: None,
        gpus,
        flavor: G5.into(),
        run: 1000.0,
    }
}

fn standing(o: &Outcome, id: &str) -> Standing {
    o.jobs[id].standing.clone()
}

#[test]
fn a_borrower_is_preempted_when_the_lender_reclaims_and_resumes_when_it_is_done() {
    let teams = [
        team("a", 2, Sharing::LendAndBorrow, Preempt::Never),
        team("b", 2, Sharing::Lend, Preempt::Never),
    ];
    let none = BTreeMap::new();
    // a borrows b's idle GPUs.
    let mut jobs = vec![job("a1", "a", 50, -100.0, 4)];
    let o = simulate(&teams, &jobs, &none);
    assert_eq!(
        standing(&o, "a1"),
        Standing::Admitted {
            since: -100.0,
            borrowing: true
        }
    );
    assert_eq!(
        o.usage["a"][G5],
        Use {
            total: 4,
            borrowed: 2
        }
    );
    // b submits within its quota: a's borrowing job is preempted by reclamation and waits
    // for the 2 GPUs b now uses.
    jobs.push(job("b1", "b", 90, -50.0, 2));
    let o = simulate(&teams, &jobs, &none);
    assert_eq!(
        standing(&o, "b1"),
        Standing::Admitted {
            since: -50.0,
            borrowing: false
        }
    );
    assert_eq!(
        standing(&o, "a1"),
        Standing::Preempted {
            at: -50.0,
            by: "b1".into(),
            reclaim: true,
            why: Why::Short { more: 2 }
        }
    );
    assert_eq!(o.jobs["a1"].evictions, 1);
    assert_eq!(o.usage["a"][G5], Use::default());
    // b's job deleted: a's is admitted again, once evicted.
    jobs[1].leave = Some(-10.0);
    let o = simulate(&teams, &jobs, &none);
    assert_eq!(
        standing(&o, "a1"),
        Standing::Admitted {
            since: -10.0,
            borrowing: true
        }
    );
    assert_eq!(o.jobs["a1"].evictions, 1);
    assert!(!o.jobs.contains_key("b1"), "a deleted job has no workload");
    // Had it run to its end instead, a's job resumes at that moment.
    jobs[1].leave = None;
    jobs[1].run = 30.0;
    let o = simulate(&teams, &jobs, &none);
    assert_eq!(standing(&o, "b1"), Standing::Finished { at: -20.0 });
    assert_eq!(
        standing(&o, "a1"),
        Standing::Admitted {
            since: -20.0,
            borrowing: true
        }
    );
}

#[test]
fn a_team_that_does_not_lend_leaves_its_idle_gpus_idle() {
    let teams = [
        team("a", 2, Sharing::LendAndBorrow, Preempt::Never),
        team("b", 2, Sharing::DontLend, Preempt::Never),
    ];
    let o = simulate(&teams, &[job("a1", "a", 50, -100.0, 3)], &BTreeMap::new());
    assert_eq!(
        standing(&o, "a1"),
        Standing::Pending {
            since: -100.0,
            why: Why::Short { more: 1 }
        }
    );
    // Unassigned GPUs lent under idle-resource sharing let it borrow all the same.
    let pool = BTreeMap::from([(G5.to_string(), 1)]);
    let o = simulate(&teams, &[job("a1", "a", 50, -100.0, 3)], &pool);
    assert!(matches!(
        standing(&o, "a1"),
        Standing::Admitted {
            borrowing: true,
            ..
        }
    ));
}

#[test]
fn borrowing_stops_at_the_limit_and_a_lender_only_team_never_borrows() {
    let mut a = team("a", 2, Sharing::LendAndBorrow, Preempt::Never);
    a.borrow_limit = None; // 50 % of 2 GPUs: 1 more.
    let teams = [a, team("b", 4, Sharing::Lend, Preempt::Never)];
    let none = BTreeMap::new();
    let o = simulate(&teams, &[job("a1", "a", 50, -9.0, 4)], &none);
    assert_eq!(
        standing(&o, "a1"),
        Standing::Pending {
            since: -9.0,
            why: Why::TooBig { max: 3 }
        }
    );
    let o = simulate(&teams, &[job("a1", "a", 50, -9.0, 3)], &none);
    assert!(matches!(standing(&o, "a1"), Standing::Admitted { .. }));
    let o = simulate(&teams, &[job("b1", "b", 50, -9.0, 5)], &none);
    assert_eq!(
        standing(&o, "b1"),
        Standing::Pending {
            since: -9.0,
            why: Why::TooBig { max: 4 }
        }
    );
}

#[test]
fn lower_priority_work_of_the_team_is_preempted_only_under_lower_priority() {
    let none = BTreeMap::new();
    let jobs = [
        job("low", "a", 10, -100.0, 2),
        job("high", "a", 90, -50.0, 2),
        job("later", "a", 10, -40.0, 1),
    ];
    for (preempt, expect_high) in [(Preempt::LowerPriority, true), (Preempt::Never, false)] {
        let teams = [team("a", 2, Sharing::DontLend, preempt)];
        let o = simulate(&teams, &jobs, &none);
        let high = standing(&o, "high");
        assert_eq!(
            matches!(high, Standing::Admitted { .. }),
            expect_high,
            "{preempt:?}: {high:?}"
        );
        if expect_high {
            assert_eq!(
                standing(&o, "low"),
                Standing::Preempted {
                    at: -50.0,
                    by: "high".into(),
                    reclaim: false,
                    why: Why::Short { more: 2 }
                }
            );
        } else {
            assert!(matches!(standing(&o, "low"), Standing::Admitted { .. }));
        }
        // Nothing is left for a third: it waits behind them.
        assert!(matches!(
            standing(&o, "later"),
            Standing::Pending {
                why: Why::Short { more: 1 },
                ..
            }
        ));
    }
}

#[test]
fn a_queue_without_a_cluster_queue_admits_nothing() {
    let teams = [team("a", 2, Sharing::Lend, Preempt::Never)];
    let o = simulate(&teams, &[job("z1", "z", 10, -5.0, 1)], &BTreeMap::new());
    assert_eq!(
        standing(&o, "z1"),
        Standing::Pending {
            since: -5.0,
            why: Why::NoQueue
        }
    );
}

#[test]
fn a_smaller_quota_evicts_nothing_it_admitted_and_holds_what_comes_after() {
    // Four GPUs until -50 s, one after: the two jobs admitted before keep running; a third,
    // arriving after the change, waits for the new quota.
    let mut a = team("a", 1, Sharing::DontLend, Preempt::Never);
    a.earlier = vec![(-50.0, BTreeMap::from([(G5.to_string(), 4)]))];
    let jobs = [
        job("one", "a", 0, -100.0, 1),
        job("two", "a", 0, -90.0, 1),
        job("three", "a", 0, -10.0, 1),
    ];
    let o = simulate(&[a], &jobs, &BTreeMap::new());
    assert!(matches!(standing(&o, "one"), Standing::Admitted { .. }));
    assert!(matches!(standing(&o, "two"), Standing::Admitted { .. }));
    assert!(
        matches!(
            standing(&o, "three"),
            Standing::Pending {
                why: Why::Short { .. },
                ..
            }
        ),
        "{:?}",
        standing(&o, "three")
    );
}
