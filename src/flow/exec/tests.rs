//! The loops against an executor on a virtual clock: each attempt takes the time its
//! script says and ends as scripted. The two flavours — retries in place (the local
//! runner) and retries through the plan (the conductor) — must agree on everything the
//! policy decides.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::pure::outcome::Verdict;
use crate::pure::update::{RoundNotes, TaskResult};
use crate::pure::usage::{Measured, Usage};
use crate::testing::{plan_of, task};

/// What each attempt does: (seconds, completes, cost).
type Script = BTreeMap<(usize, u32), (u64, bool, f64)>;

struct Virtual {
    in_place: bool,
    slots: usize,
    now: u64,
    script: Script,
    /// (ends at, task, attempt)
    running: Vec<(u64, usize, u32)>,
    /// (at, task, attempt)
    started: Vec<(u64, usize, u32)>,
    /// Each integration's tasks.
    rounds: Vec<Vec<usize>>,
    /// `/execute abort` arrives with this integration (1-based).
    abort_at: Option<usize>,
    dag: crate::pure::graph::Dag,
    events: RefCell<Vec<Event>>,
    staged: Vec<Judged>,
    /// Attempts that fail with a reason no retry can help.
    halts: BTreeMap<(usize, u32), crate::pure::said::Halt>,
    /// Ctrl-C at this second: what runs then is stopped (not judged).
    cancel_at: Option<u64>,
    /// Tasks a provider's rate limit holds, until this second (the conductor's holds).
    holds: BTreeMap<usize, u64>,
    /// `overlap: merge`: tasks whose first completed attempt cannot be merged, sent back as
    /// a rebase (the same attempt, run again as its script says).
    unmergeable: std::collections::BTreeSet<usize>,
    /// The rebases the last stage asked for, and the tasks in one.
    asked: Vec<Launch>,
    rebasing: std::collections::BTreeSet<usize>,
    /// Tasks whose rebase its CLI stops at its own spending limit.
    rebase_halts: std::collections::BTreeSet<usize>,
}

impl Virtual {
    fn new(plan: &Plan, in_place: bool, slots: usize, script: Script) -> Virtual {
        Virtual {
            in_place,
            slots,
            now: 0,
            script,
            running: Vec::new(),
            started: Vec::new(),
            rounds: Vec::new(),
            abort_at: None,
            dag: crate::pure::validate::check(plan, None).unwrap(),
            events: RefCell::default(),
            staged: Vec::new(),
            halts: BTreeMap::new(),
            cancel_at: None,
            holds: BTreeMap::new(),
            unmergeable: Default::default(),
            asked: Vec::new(),
            rebasing: Default::default(),
            rebase_halts: Default::default(),
        }
    }
}

fn at(seconds: u64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + seconds as i64).unwrap()
}

impl Executor for Virtual {
    type Error = std::convert::Infallible;
    fn slots(&self) -> usize {
        self.slots
    }
    fn running(&self) -> usize {
        self.running.len()
    }
    fn retries_in_place(&self) -> bool {
        self.in_place
    }
    fn save(&mut self, _plan: &mut Plan) -> Result<(), Self::Error> {
        Ok(())
    }
    async fn start(
        &mut self,
        plan: &mut Plan,
        start: Launch,
        _round: u32,
    ) -> Result<(), Self::Error> {
        assert_eq!(plan.tasks[start.task].status, Status::InProgress);
        assert_eq!(
            plan.tasks[start.task].attempts(),
            start.attempt,
            "counted first"
        );
        assert_eq!(
            start.retry_prompt.is_some(),
            start.attempt > 1 && self.in_place || self.rebasing.contains(&start.task)
        );
        let (took, _, _) = self.script[&(start.task, start.attempt)];
        self.running
            .push((self.now + took, start.task, start.attempt));
        self.started.push((self.now, start.task, start.attempt));
        Ok(())
    }
    async fn wait(&mut self, _plan: &mut Plan) -> Result<Arrivals, Self::Error> {
        let next = self.running.iter().map(|r| r.0).min().unwrap();
        if let Some(c) = self.cancel_at
            && next > c
        {
            // Ctrl-C: the workers still running are stopped.
            self.now = c;
            self.running.clear();
            return Ok(Arrivals {
                judged: Vec::new(),
                cancelled: true,
            });
        }
        self.now = next;
        let (ended, left): (Vec<_>, Vec<_>) = self.running.iter().partition(|r| r.0 == next);
        self.running = left;
        let judged = ended
            .into_iter()
            .map(|(end, task, attempt)| {
                let (took, ok, cost) = self.script[&(task, attempt)];
                let rebase = self.rebasing.remove(&task);
                let halt = if rebase && self.rebase_halts.contains(&task) {
                    Some(crate::pure::said::Halt::Budget)
                } else {
                    self.halts.get(&(task, attempt)).cloned()
                };
                Judged {
                    index: task,
                    attempt,
                    verdict: Verdict {
                        status: if ok {
                            Status::Completed
                        } else {
                            Status::Failed
                        },
                        result: if ok { "done".into() } else { "broke".into() },
                        acceptance_passed: ok,
                        failed_checks: Vec::new(),
                        warnings: Vec::new(),
                        halt,
                    },
                    patch: Default::default(),
                    touched: Vec::new(),
                    duration: Duration::from_secs(took),
                    reviews: None,
                    question: None,
                    measured: Some(Measured {
                        start: at(end - took),
                        end: at(end),
                        usage: Usage {
                            cost_usd: Some(cost),
                            ..Usage::default()
                        },
                    }),
                    timed_out: false,
                    rebase,
                    reported: None,
                    network: Default::default(),
                }
            })
            .collect();
        Ok(Arrivals {
            judged,
            cancelled: false,
        })
    }
    fn stage(&mut self, _plan: &mut Plan, judged: Vec<Judged>) -> Result<(), Self::Error> {
        for j in judged {
            if j.verdict.status == Status::Completed && self.unmergeable.remove(&j.index) {
                self.rebasing.insert(j.index);
                self.asked.push(Launch {
                    task: j.index,
                    attempt: j.attempt,
                    retry_prompt: Some("rebase".into()),
                });
            } else {
                self.staged.push(j);
            }
        }
        Ok(())
    }
    fn rebases(&mut self, _plan: &Plan) -> Vec<Launch> {
        std::mem::take(&mut self.asked)
    }
    async fn commit(
        &mut self,
        plan: &mut Plan,
        tasks: &[usize],
        _round: u32,
        _wave: Option<u64>,
    ) -> Result<Integrated, Self::Error> {
        let batch = std::mem::take(&mut self.staged);
        let mut staged: Vec<usize> = batch.iter().map(|j| j.index).collect();
        staged.sort_unstable();
        assert_eq!(staged, tasks, "the round commits what was staged");
        self.rounds.push(staged);
        let mut results = Vec::new();
        for j in &batch {
            let retried = !self.in_place
                && matches!(
                    outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch),
                    Decision::Retry { .. }
                );
            if retried {
                plan.tasks[j.index].status = Status::Pending;
                continue;
            }
            results.push(TaskResult {
                index: j.index,
                status: j.verdict.status,
                result: j.verdict.result.clone(),
                attempts: j.attempt,
            });
        }
        let report =
            crate::pure::update::apply_round(plan, &self.dag, &results, &RoundNotes::default());
        if report.circuit_breaker.should_abort {
            return Ok(Integrated::End(RunEnd::CircuitBreaker(
                report.circuit_breaker,
            )));
        }
        if self.abort_at == Some(self.rounds.len()) {
            return Ok(Integrated::Abort);
        }
        Ok(Integrated::Continue)
    }
    fn held(&mut self, plan: &Plan, _landing: &[usize]) -> Held {
        let held: Vec<(usize, u64)> = self
            .holds
            .iter()
            .filter(|(i, until)| plan.tasks[**i].status == Status::Pending && **until > self.now)
            .map(|(i, until)| (*i, *until))
            .collect();
        Held {
            tasks: held.iter().map(|h| h.0).collect(),
            next: held
                .iter()
                .map(|h| Duration::from_secs(h.1 - self.now))
                .min(),
        }
    }
    async fn pause(&mut self, wait: Duration) {
        self.now += wait.as_secs();
    }
    fn emit(&self, event: Event) {
        self.events.borrow_mut().push(event);
    }
}

#[test]
fn a_held_task_waits_for_its_hold_while_others_start_and_the_run_does_not_end_meanwhile() {
    // 0 and 2 are free; 1 is held until second 20 (its provider rate-limited): 2 takes its
    // slot at once, and once nothing else runs the loop waits for the hold instead of
    // ending the run with a ready task never started.
    let plan = plan_of(vec![
        task(&[], &["a"], &[]),
        task(&[], &["b"], &[]),
        task(&[], &["c"], &[]),
    ]);
    let script: Script = [
        ((0, 1), (5, true, 0.0)),
        ((1, 1), (5, true, 0.0)),
        ((2, 1), (3, true, 0.0)),
    ]
    .into();
    for in_place in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        x.holds.insert(1, 20);
        assert_eq!(drive(&mut plan, &mut x, None), Ending::Done);
        assert_eq!(
            x.started,
            [(0, 0, 1), (0, 2, 1), (20, 1, 1)],
            "in place: {in_place}"
        );
        assert!(plan.tasks.iter().all(|t| t.status == Status::Completed));
    }
}

/// 0 → {1, 2}; 1, 2 → 3; 4 alone. Task 1 fails once.
fn diamond() -> (Plan, Script) {
    let plan = plan_of(vec![
        task(&[], &["a"], &[]),
        task(&[0], &["b"], &[]),
        task(&[0], &["c"], &[]),
        task(&[1, 2], &["d"], &[]),
        task(&[], &["e"], &[]),
    ]);
    let script: Script = [
        ((0, 1), (10, true, 0.5)),
        ((1, 1), (5, false, 0.25)),
        ((1, 2), (5, true, 0.25)),
        ((2, 1), (30, true, 1.0)),
        ((3, 1), (10, true, 0.5)),
        ((4, 1), (50, true, 2.0)),
    ]
    .into();
    (plan, script)
}

/// The outcome of a loop over the virtual executor, which never waits on anything real: its
/// future is ready at its first poll.
fn at_once<F: std::future::Future>(run: F) -> F::Output {
    let mut run = std::pin::pin!(run);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match run.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("the virtual executor never waits"),
    }
}

fn drive(plan: &mut Plan, x: &mut Virtual, budget: Option<Budget>) -> Ending {
    let dag = x.dag.clone();
    let conflicts = Conflicts::of(plan);
    let engine = Eager {
        dag: &dag,
        conflicts: &conflicts,
        budget,
    };
    at_once(engine.run(x, plan, 0, [])).unwrap().0
}

#[test]
fn both_executors_start_the_same_work_and_end_the_same_way() {
    let (plan, script) = diamond();
    let mut outcomes = Vec::new();
    for in_place in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        assert_eq!(drive(&mut plan, &mut x, None), Ending::Done);
        let statuses: Vec<(Status, u32)> = (0..plan.tasks.len())
            .map(|i| (plan.tasks[i].status, plan.attempts_of(i)))
            .collect();
        // Every attempt is recorded once, with its cost.
        let records = crate::pure::usage::records(&plan);
        assert_eq!(records.len(), 6, "in place: {in_place}");
        assert_eq!(crate::pure::usage::spent(&plan), 4.5);
        let tasks: Vec<(usize, u32)> = x.started.iter().map(|s| (s.1, s.2)).collect();
        outcomes.push((statuses, tasks, x.now));
    }
    assert_eq!(outcomes[0].0, outcomes[1].0);
    assert!(outcomes[0].0.iter().all(|s| s.0 == Status::Completed));
    assert_eq!(outcomes[0].0[1].1, 2, "task 1 took two attempts");
    // Longest chain first: 0 heads the longest chain; 4 takes the other slot.
    assert_eq!(&outcomes[0].1[..2], &[(0, 1), (4, 1)]);
    // The same attempts, in an order that differs only where the machine does: locally
    // task 1's retry starts at once, on GitHub after its failure is committed (so task 2
    // takes the free slot first).
    let sorted = |mut v: Vec<(usize, u32)>| {
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(outcomes[0].1.clone()), sorted(outcomes[1].1.clone()));
    assert_eq!(&outcomes[0].1[2..4], &[(1, 1), (1, 2)]);
    assert_eq!(&outcomes[1].1[2..4], &[(1, 1), (2, 1)]);
    // Task 3 starts as soon as 2 lands (t = 50, task 4 holding the other slot until then).
    assert_eq!((outcomes[0].2, outcomes[1].2), (60, 60));
}

#[test]
fn a_slot_freed_by_an_arrival_goes_to_the_work_it_unblocks_when_that_comes_first() {
    // 0 → 1 → 2 (the longest chain); 3, 4 and 5 alone; 10 s each, two slots. When 0 and 3
    // arrive (t = 10), 4 and 5 are ready at once and 1 only once 0 is committed: starting
    // 4 and 5 before integrating would keep 1 — and the chain behind it — waiting for a
    // slot until t = 20 (makespan 40 instead of 30).
    let plan = plan_of(vec![
        task(&[], &["a"], &[]),
        task(&[0], &["b"], &[]),
        task(&[1], &["c"], &[]),
        task(&[], &["d"], &[]),
        task(&[], &["e"], &[]),
        task(&[], &["f"], &[]),
    ]);
    let script: Script = (0..6).map(|i| ((i, 1), (10, true, 0.0))).collect();
    for in_place in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        assert_eq!(drive(&mut plan, &mut x, None), Ending::Done);
        let at_10: Vec<usize> = x
            .started
            .iter()
            .filter(|s| s.0 == 10)
            .map(|s| s.1)
            .collect();
        assert_eq!(at_10, vec![4, 1], "in place: {in_place}");
        assert_eq!(x.now, 30, "in place: {in_place}");
    }
}

#[test]
fn a_retry_in_place_is_not_integrated_a_retry_through_the_plan_is() {
    let (plan, script) = diamond();
    let mut local = Virtual::new(&plan, true, 2, script.clone());
    drive(&mut plan.clone(), &mut local, None);
    let mut remote = Virtual::new(&plan, false, 2, script);
    drive(&mut plan.clone(), &mut remote, None);
    assert_eq!(local.rounds.iter().filter(|r| r.contains(&1)).count(), 1);
    assert_eq!(remote.rounds.iter().filter(|r| r.contains(&1)).count(), 2);
    let ended: Vec<Option<u32>> = local
        .events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            Event::AttemptEnded(e) if e.task == 1 => Some(e.retry),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![Some(2), None]);
}

#[test]
fn nothing_new_starts_once_the_budget_is_spent() {
    let (plan, script) = diamond();
    for in_place in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        // Task 0 ($0.50) and task 1's failed first attempt ($0.25) spend it.
        let budget = Budget::parse("0.70").unwrap();
        let end = drive(&mut plan, &mut x, Some(budget));
        assert!(
            matches!(end, Ending::Budget(ref why) if why.contains("0.70")),
            "{end:?}"
        );
        // Task 1's retry never started: pending with the one attempt it made.
        assert_eq!(
            plan.tasks[1].status,
            Status::Pending,
            "in place: {in_place}"
        );
        assert_eq!(plan.tasks[1].attempts(), 1);
        assert!(x.started.iter().all(|s| s.2 == 1));
    }
}

#[test]
fn an_abort_integrates_what_is_in_flight_and_starts_nothing() {
    let (plan, script) = diamond();
    let mut plan = plan.clone();
    let mut x = Virtual::new(&plan, false, 2, script);
    x.abort_at = Some(1);
    assert_eq!(drive(&mut plan, &mut x, None), Ending::Aborted);
    // Task 0 landed first (t = 10); 4 was in flight and is integrated; nothing else ran.
    assert_eq!(x.rounds, vec![vec![0], vec![4]]);
    assert_eq!(plan.tasks[1].status, Status::Pending);
}

#[test]
fn a_failed_blocker_ends_in_the_breaker_or_a_deadlock_never_a_hang() {
    // 0 fails three times; 1, 2, 3 and 4 depend on it.
    let plan = plan_of(vec![
        task(&[], &["a"], &[]),
        task(&[0], &["b"], &[]),
        task(&[0], &["c"], &[]),
        task(&[0], &["d"], &[]),
        task(&[0], &["e"], &[]),
    ]);
    let script: Script = (1..=3).map(|a| ((0, a), (1, false, 0.0))).collect();
    for in_place in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        let end = drive(&mut plan, &mut x, None);
        assert!(
            matches!(end, Ending::Ended(RunEnd::CircuitBreaker(b)) if b.would_be_skipped == 4),
            "{end:?}"
        );
        assert_eq!(plan.tasks[0].status, Status::Failed);
        assert_eq!(plan.tasks[0].attempts(), 3);
    }
}

fn rounds(plan: &mut Plan, x: &mut Virtual, budget: Option<Budget>) -> Ending {
    let dag = x.dag.clone();
    let conflicts = Conflicts::of(plan);
    let engine = RoundLoop {
        dag: &dag,
        conflicts: &conflicts,
        budget,
        schedule: Schedule::Rounds,
    };
    at_once(engine.run(x, plan, 0)).unwrap().0
}

#[test]
fn a_round_waits_for_its_slowest_task_and_retries_inside_itself() {
    let (plan, script) = diamond();
    let mut plan = plan;
    let mut x = Virtual::new(&plan, true, 2, script);
    assert_eq!(rounds(&mut plan, &mut x, None), Ending::Done);
    // The seed's rounds: {0, 4} (4 takes 50 s), then {1, 2} with 1's retry inside the
    // round, then {3}: one commit each.
    assert_eq!(x.rounds, vec![vec![0, 4], vec![1, 2], vec![3]]);
    assert_eq!(x.now, 50 + 30 + 10, "eager took 60 s on the same plan");
    assert!(plan.tasks.iter().all(|t| t.status == Status::Completed));
    assert_eq!(crate::pure::usage::records(&plan).len(), 6);
}

#[test]
fn tasks_sharing_a_file_run_in_sequential_groups_of_one_round() {
    // 0 and 1 both modify `shared`; 2 is free: one round, groups {0, 2} then {1}.
    let plan = plan_of(vec![
        task(&[], &[], &["shared"]),
        task(&[], &[], &["shared"]),
        task(&[], &["c"], &[]),
    ]);
    let script: Script = (0..3).map(|i| ((i, 1), (5, true, 0.0))).collect();
    let mut p = plan.clone();
    let mut x = Virtual::new(&plan, true, 4, script);
    assert_eq!(rounds(&mut p, &mut x, None), Ending::Done);
    assert_eq!(x.rounds, vec![vec![0, 1, 2]], "one round, one commit");
    let starts: Vec<(u64, usize)> = x.started.iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(
        starts,
        vec![(0, 0), (0, 2), (5, 1)],
        "1 starts after 0's group"
    );
    let groups: Vec<Event> = x
        .events
        .borrow()
        .iter()
        .filter(|e| matches!(e, Event::RoundStarted { .. } | Event::GroupStarted { .. }))
        .cloned()
        .collect();
    assert_eq!(
        groups,
        vec![
            Event::RoundStarted {
                round: 1,
                tasks: vec![0, 1, 2],
                groups: vec![vec![0, 2], vec![1]],
                slots: 4,
            },
            Event::GroupStarted {
                group: 2,
                of: 2,
                tasks: vec![1]
            }
        ]
    );
}

#[test]
fn a_round_the_budget_cuts_short_commits_what_ran_and_stops() {
    let (plan, script) = diamond();
    let mut plan = plan;
    let mut x = Virtual::new(&plan, true, 2, script);
    // Round 1 ({0, 4}: $2.50) spends it; round 2 never starts.
    let budget = Budget::parse("2").unwrap();
    let end = rounds(&mut plan, &mut x, Some(budget));
    assert!(matches!(end, Ending::Budget(_)), "{end:?}");
    assert_eq!(x.rounds, vec![vec![0, 4]]);
    assert_eq!(plan.tasks[1].status, Status::Pending);
    assert_eq!(plan.tasks[1].attempts(), 0);
}

/// `overlap: merge`: a rebase is not counted, so one the budget keeps from starting leaves
/// its task pending with the attempt it made — whether the budget ran out before the
/// rebases started or while one of them waited for a slot.
#[test]
fn a_rebase_the_budget_holds_back_keeps_the_attempt_it_made() {
    let plan = plan_of(
        (0..3)
            .map(|i| task(&[], &[&format!("f{i}")], &[]))
            .collect(),
    );
    let script: Script = (0..3).map(|i| ((i, 1), (10, true, 1.0))).collect();
    // 0, 1 and 2 spend $3: with $3 the rebases never start; with $3.50 and one slot, 1's
    // rebase spends the rest while 2's waits.
    for (slots, budget) in [(3, "3"), (1, "3.5")] {
        let mut p = plan.clone();
        let mut x = Virtual::new(&p, true, slots, script.clone());
        x.unmergeable = [1, 2].into();
        let end = rounds(&mut p, &mut x, Some(Budget::parse(budget).unwrap()));
        assert!(matches!(end, Ending::Budget(_)), "{end:?}");
        assert_eq!(p.tasks[2].status, Status::Pending, "{slots} slots");
        assert_eq!(p.tasks[2].attempts(), 1, "{slots} slots");
    }
}

/// A rebase its CLI stops at its own spending limit is not counted either: its task is
/// pending again with the attempt the rebase repeats, in a round as in eager.
#[test]
fn a_rebase_a_clis_spending_limit_stops_keeps_the_attempt_it_repeats() {
    let plan = plan_of(
        (0..2)
            .map(|i| task(&[], &[&format!("f{i}")], &[]))
            .collect(),
    );
    let script: Script = (0..2).map(|i| ((i, 1), (10, true, 0.0))).collect();
    for eager in [false, true] {
        let mut p = plan.clone();
        let mut x = Virtual::new(&p, true, 2, script.clone());
        x.unmergeable = [1].into();
        x.rebase_halts = [1].into();
        let end = if eager {
            drive(&mut p, &mut x, None)
        } else {
            rounds(&mut p, &mut x, None)
        };
        assert!(matches!(end, Ending::Budget(_)), "{end:?}");
        assert_eq!(p.tasks[1].status, Status::Pending, "eager: {eager}");
        assert_eq!(p.tasks[1].attempts(), 1, "eager: {eager}");
    }
}

#[test]
fn settle_says_whether_a_run_goes_on() {
    let (plan, _) = diamond();
    let dag = crate::pure::validate::check(&plan, None).unwrap();
    let conflicts = Conflicts::of(&plan);
    let at = |p: &Plan, b: Option<Budget>| settle(p, &dag, &conflicts, Schedule::Rounds, b);
    assert_eq!(at(&plan, None), Settled::More);
    let mut spent = plan.clone();
    crate::pure::render::tests::spend(
        &mut spent,
        &[(0, 1, 10, Some(1.0), crate::pure::usage::Outcome::Failed)],
    );
    let budget = Budget::parse("1").unwrap();
    assert!(matches!(at(&spent, Some(budget)), Settled::Budget(why) if why.contains("$1.00")));
    let mut done = plan.clone();
    for t in &mut done.tasks {
        t.status = Status::Completed;
    }
    assert_eq!(at(&done, Some(budget)), Settled::Done);
    let mut stuck = plan.clone();
    stuck.tasks[0].status = Status::Failed;
    stuck.tasks[4].status = Status::Completed;
    assert_eq!(at(&stuck, None), Settled::Deadlock { pending: 3 });
}

#[test]
fn a_failure_no_retry_can_help_fails_its_task_at_once() {
    let (plan, mut script) = diamond();
    script.insert((4, 1), (50, false, 2.0));
    for in_place in [true, false] {
        for eager in [true, false] {
            let mut plan = plan.clone();
            let mut x = Virtual::new(&plan, in_place, 2, script.clone());
            let why = "the command was not found".to_string();
            x.halts
                .insert((4, 1), crate::pure::said::Halt::Task { why });
            let end = if eager {
                drive(&mut plan, &mut x, None)
            } else {
                rounds(&mut plan, &mut x, None)
            };
            assert_eq!(end, Ending::Done, "in place {in_place}, eager {eager}");
            assert_eq!(
                (plan.tasks[4].status, plan.tasks[4].attempts()),
                (Status::Failed, 1),
                "no second attempt"
            );
            assert!(!x.started.iter().any(|s| s.1 == 4 && s.2 == 2));
            // Task 1's ordinary failure is still retried.
            assert_eq!(plan.attempts_of(1), 2);
            assert!(
                plan.tasks[..4]
                    .iter()
                    .all(|t| t.status == Status::Completed)
            );
        }
    }
}

/// Five independent tasks; task 0 takes 10 s, the others 20 s.
fn five() -> (Plan, Script) {
    let plan = plan_of(
        ["a", "b", "c", "d", "e"]
            .iter()
            .map(|f| task(&[], &[f], &[]))
            .collect(),
    );
    let script: Script = (0..5)
        .map(|i| ((i, 1), (if i == 0 { 10 } else { 20 }, i != 0, 0.0)))
        .collect();
    (plan, script)
}

#[test]
fn refused_credentials_stop_the_run_once_what_is_in_flight_lands() {
    let (plan, script) = five();
    for (in_place, eager) in [(true, true), (false, true), (true, false)] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, in_place, 2, script.clone());
        let secret = "ANTHROPIC_API_KEY".to_string();
        x.halts
            .insert((0, 1), crate::pure::said::Halt::Run { secret });
        let end = if eager {
            drive(&mut plan, &mut x, None)
        } else {
            rounds(&mut plan, &mut x, None)
        };
        assert!(
            matches!(&end, Ending::Halted(why) if why.starts_with("task 0: broke")),
            "{end:?}"
        );
        assert!(matches!(end, Ending::Halted(_)), "{end:?}");
        // Task 1 was in flight and is integrated; nothing else started.
        assert_eq!(x.started.len(), 2, "in place {in_place}, eager {eager}");
        assert_eq!(plan.tasks[1].status, Status::Completed);
        assert_eq!(
            (plan.tasks[0].status, plan.tasks[0].attempts()),
            (Status::Failed, 1)
        );
        assert!(
            plan.tasks[2..]
                .iter()
                .all(|t| t.status == Status::Pending && t.attempts() == 0)
        );
    }
}

#[test]
fn a_clis_own_spending_limit_stops_the_run_without_failing_the_task() {
    let (plan, mut script) = diamond();
    script.insert((0, 1), (10, false, 1.5));
    for eager in [true, false] {
        let mut plan = plan.clone();
        let mut x = Virtual::new(&plan, true, 2, script.clone());
        x.halts.insert((0, 1), crate::pure::said::Halt::Budget);
        let end = if eager {
            drive(&mut plan, &mut x, None)
        } else {
            rounds(&mut plan, &mut x, None)
        };
        assert!(
            matches!(&end, Ending::Budget(why) if why.starts_with("task 0:")),
            "{end:?}"
        );
        // Pending again, the attempt not counted; what it spent is recorded.
        assert_eq!(
            (plan.tasks[0].status, plan.tasks[0].attempts()),
            (Status::Pending, 0)
        );
        assert_eq!(crate::pure::usage::spent(&plan), 1.5 + 2.0);
        assert_eq!(plan.tasks[4].status, Status::Completed);
        assert!(x.rounds.iter().all(|r| !r.contains(&0)), "not integrated");
    }
}

/// The display says what really starts: with one worker the round's line names the task
/// starting now, the next is announced as it starts, and those the budget holds back — in
/// this group and in a later one — are named as not started.
#[test]
fn a_round_on_fewer_workers_announces_each_start_and_what_the_budget_holds_back() {
    // 0 and 1 share `shared`: groups {0, 2} then {1}.
    let plan = plan_of(vec![
        task(&[], &[], &["shared"]),
        task(&[], &[], &["shared"]),
        task(&[], &["c"], &[]),
    ]);
    let script: Script = (0..3).map(|i| ((i, 1), (5, true, 1.0))).collect();
    let shown = |budget: Option<Budget>| {
        let mut p = plan.clone();
        let mut x = Virtual::new(&plan, true, 1, script.clone());
        rounds(&mut p, &mut x, budget);
        x.events
            .borrow()
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::RoundStarted { .. }
                        | Event::GroupStarted { .. }
                        | Event::Starting { .. }
                        | Event::NotStarted { .. }
                )
            })
            .filter_map(|e| {
                crate::pure::events::line(e, &crate::pure::plan::ids::TaskNames::default())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shown(None),
        [
            "\nRound 1: 3 task(s): 0, 1, 2; starting 0 now (1 at a time, the others as workers free up)\n  they share files, so they run in 2 groups one after another: 0, 2, then 1",
            "starting task(s) 2",
            "  group 2 of 2: 1",
        ]
    );
    assert_eq!(
        shown(Some(Budget::parse("0.5").unwrap())),
        [
            "\nRound 1: 3 task(s): 0, 1, 2; starting 0 now (1 at a time, the others as workers free up)\n  they share files, so they run in 2 groups one after another: 0, 2, then 1",
            "  the budget is spent: task(s) 2 not started (they stay pending)",
            "  the budget is spent: task(s) 1 not started (they stay pending)",
        ]
    );
}

/// Issue 33 §3: an interrupt the user asked for uses no attempt. Of the attempts a Ctrl-C
/// catches, only a failure stands: an attempt stopped, one counted and not yet started, and
/// one that completed but is not committed are given back, so the next run starts each task
/// at the attempt it was on — after three Ctrl-C's, still attempt 1.
#[test]
fn an_interrupt_gives_back_every_attempt_but_the_failures() {
    let plan = plan_of(
        (0..4)
            .map(|i| task(&[], &[&format!("f{i}")], &[]))
            .collect(),
    );
    let script: Script = [
        ((0, 1), (10, false, 0.0)),
        ((0, 2), (100, true, 0.0)),
        ((1, 1), (5, true, 0.0)),
        ((2, 1), (100, true, 0.0)),
        ((3, 1), (100, true, 0.0)),
    ]
    .into();
    let attempts = |plan: &Plan| -> Vec<(Status, Option<u32>)> {
        plan.tasks.iter().map(|t| (t.status, t.attempts)).collect()
    };
    // Rounds: all four counted when the round starts; 1 completes (t = 5), 2 starts in its
    // slot, 0 fails (t = 10) and its retry starts; 3 waits for a slot. Ctrl-C at t = 20.
    let mut p = plan.clone();
    let mut x = Virtual::new(&p, true, 2, script.clone());
    x.cancel_at = Some(20);
    let dag = x.dag.clone();
    let conflicts = Conflicts::of(&p);
    let rounds = RoundLoop {
        dag: &dag,
        conflicts: &conflicts,
        budget: None,
        schedule: Schedule::Rounds,
    };
    let (ending, _) = at_once(rounds.run(&mut x, &mut p, 0)).unwrap();
    assert_eq!(ending, Ending::Interrupted { committed: false });
    let started: Vec<(usize, u32)> = x.started.iter().map(|s| (s.1, s.2)).collect();
    assert_eq!(started, [(0, 1), (1, 1), (2, 1), (0, 2)]);
    use Status::InProgress as Running;
    assert_eq!(
        attempts(&p),
        [
            (Running, Some(1)),
            (Running, None),
            (Running, None),
            (Running, None)
        ]
    );
    // Eager: 1 lands and is committed before the Ctrl-C; the rest as above.
    let mut p = plan.clone();
    let mut x = Virtual::new(&p, true, 2, script);
    x.cancel_at = Some(20);
    assert_eq!(
        drive(&mut p, &mut x, None),
        Ending::Interrupted { committed: false }
    );
    assert_eq!(
        attempts(&p),
        [
            (Running, Some(1)),
            (Status::Completed, None),
            (Running, None),
            (Status::Pending, None)
        ]
    );
}
