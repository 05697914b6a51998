//! One engine loop, two executors. The eager schedule — a task starts as soon as its blockers
//! are completed and a slot is free, longest remaining chain first, never beside a task it
//! conflicts with; what ends is judged, and each batch of arrivals is integrated and
//! committed as a round — is this one loop, [`eager`], whoever runs the attempts:
//!
//! * the local runner ([`crate::run`]): worktrees on this machine, Ctrl-C stops it;
//! * the conductor ([`crate::actions::conduct`]): one workflow run per attempt on GitHub,
//!   polled, its artifact read through the API; `/execute abort` stops it, another writer
//!   on the branch ends it, and it hands over before GitHub's job limit.
//!
//! An [`Executor`] starts attempts, waits for them, and integrates a batch of judged
//! arrivals (verification, refusals, reviews, the plan update and the round commit, then — on
//! GitHub — the push and the pull request). The loop owns the policy: which tasks start
//! ([`engine::eager_pick`]), when an attempt is counted (when it starts), the `--max-cost`
//! budget (nothing new starts once it is spent), retries, and how the run ends
//! ([`Ending`]). Executors differ only where the machine differs: a local failed attempt is
//! retried in place at once ([`Executor::retries_in_place`]), while on GitHub the retry's
//! prompt must be committed before its run can read it, so the failure is integrated and the
//! task picked again. What happens is emitted as typed [`Event`]s.
//!
//! The loop does no I/O of its own: it calls the executor and the pure engine.

use std::collections::BTreeSet;

use crate::engine::{self, Next, View};
use crate::events::{Ended, Event};
use crate::graph::Dag;
use crate::outcome::{self, Decision};
use crate::overlap::Conflicts;
use crate::plan::model::{Plan, Status};
use crate::prompt::Unit;
use crate::run::RunEnd;
use crate::run::attempt::Judged;
use crate::usage::Budget;

/// One attempt to start: its task, its number (already counted in the plan) and, for a
/// retry in place, the seed's retry prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub task: usize,
    pub attempt: u32,
    pub retry_prompt: Option<String>,
}

/// What a wait brought.
#[derive(Debug, Default)]
pub struct Arrivals {
    /// Attempts that ended, judged.
    pub judged: Vec<Judged>,
    /// The run is asked to stop now (Ctrl-C): nothing new starts, nothing more is integrated.
    pub cancelled: bool,
}

/// What came of integrating a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrated {
    /// Committed (and, on GitHub, published): go on.
    Continue,
    /// Committed; nothing new may start (`/execute abort`): what is in flight is integrated.
    Abort,
    /// The run ends here (the circuit breaker).
    End(RunEnd),
    /// Another writer moved the branch: stop without publishing.
    Stale,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Nothing pending: the plan's own end (completion, or questions left open).
    Done,
    /// Pending tasks remain and none can start.
    Deadlock { pending: usize },
    /// The budget is spent and ready tasks wait (why).
    Budget(String),
    /// An integration ended the run (the circuit breaker); attempts may still be in flight.
    Ended(RunEnd),
    /// Ctrl-C: attempts were stopped and their tasks left in progress.
    Interrupted,
    /// `/execute abort`: what was in flight is integrated, nothing new started.
    Aborted,
    /// Time to hand over to a successor (attempts in flight stay recorded).
    Handover,
    /// Another writer moved the branch.
    Stale,
}

/// Runs attempts somewhere: worktrees on this machine, or workflow runs on GitHub.
pub trait Executor {
    type Error;
    /// How many attempts may run at once.
    fn slots(&self) -> usize;
    /// How many attempts are running (started and not yet returned by [`Executor::wait`]).
    fn running(&self) -> usize;
    /// Whether a failed attempt with attempts left is started again at once, without being
    /// integrated (locally: the retry continues in its own worktree). Otherwise the failure
    /// is integrated — its retry prompt kept in the plan — and the task is picked again.
    fn retries_in_place(&self) -> bool;
    /// Writes the plan where the executor keeps it (an attempt is counted before it starts).
    fn save(&mut self, plan: &mut Plan) -> Result<(), Self::Error>;
    /// Starts an attempt; its task is in progress and the attempt counted (and saved).
    /// `round` is the round its result will be integrated in at the earliest.
    fn start(&mut self, plan: &mut Plan, start: Start, round: u32) -> Result<(), Self::Error>;
    /// Blocks until at least one running attempt ends, or the run is cancelled.
    fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, Self::Error>;
    /// Integrates a batch of arrivals as round `round` and commits it.
    fn integrate(
        &mut self,
        plan: &mut Plan,
        batch: Vec<Judged>,
        round: u32,
    ) -> Result<Integrated, Self::Error>;
    /// Whether to stop and hand over to a successor now.
    fn handover_due(&self) -> bool {
        false
    }
    /// Reports an event.
    fn emit(&self, event: Event);
}

/// The event of judged attempt `j`; `retry` is the next attempt's number when the task is
/// tried again.
pub fn ended(plan: &Plan, j: &Judged, retry: Option<u32>) -> Ended {
    let record = j.record();
    Ended {
        task: j.index,
        attempt: j.attempt,
        subject: plan.tasks[j.index].subject.clone(),
        status: j.verdict.status,
        outcome: record.as_ref().map_or(
            crate::usage::Outcome::of(j.verdict.status, j.timed_out, false),
            |r| r.outcome,
        ),
        result: j.verdict.result.clone(),
        took: j.duration,
        cost_usd: record.and_then(|r| r.cost_usd),
        retry,
    }
}

/// What the loop reads.
#[derive(Debug, Clone, Copy)]
pub struct Eager<'a> {
    pub dag: &'a Dag,
    pub conflicts: &'a Conflicts,
    pub budget: Option<Budget>,
}

impl Eager<'_> {
    fn spent(&self, plan: &Plan) -> Option<String> {
        self.budget?.exhausted(plan)
    }

    /// Starts as many ready tasks as there are free slots; `busy` are tasks in flight or
    /// landed and not yet integrated (kept apart from conflicting ones alike).
    fn fill<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        busy: &BTreeSet<usize>,
        round: u32,
    ) -> Result<Vec<usize>, X::Error> {
        let free = x.slots().saturating_sub(x.running());
        if free == 0 || self.spent(plan).is_some() {
            return Ok(Vec::new());
        }
        let busy: Vec<usize> = busy.iter().copied().collect();
        let picks = engine::eager_pick(plan, self.dag, self.conflicts, &busy, free);
        if picks.is_empty() {
            return Ok(picks);
        }
        x.emit(Event::Starting {
            tasks: picks.clone(),
        });
        for &i in &picks {
            let t = &mut plan.tasks[i];
            t.status = Status::InProgress;
            // Counted when it starts (saved before it runs): a crash never gives a task an
            // attempt more.
            t.attempts = Some(t.attempts() + 1);
        }
        x.save(plan)?;
        for &i in &picks {
            let start = Start {
                task: i,
                attempt: plan.tasks[i].attempts(),
                retry_prompt: None,
            };
            x.start(plan, start, round + 1)?;
        }
        Ok(picks)
    }

    /// The run's end once nothing runs.
    fn settle(&self, plan: &Plan) -> Ending {
        let view = View {
            plan,
            dag: self.dag,
            conflicts: self.conflicts,
        };
        match engine::Schedule::Eager.policy().next(view, None) {
            Next::Done => Ending::Done,
            Next::Deadlock { pending } => Ending::Deadlock { pending },
            // Ready tasks that did not start: only the budget holds them back.
            Next::Batch { .. } => Ending::Budget(self.spent(plan).unwrap_or_default()),
        }
    }

    /// Runs until nothing is pending or in flight, or the run stops; `round` is the last
    /// round committed, `in_flight` the tasks already running (adopted). Returns how it
    /// ended and the last round committed.
    pub fn run<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        mut round: u32,
        in_flight: impl IntoIterator<Item = usize>,
    ) -> Result<(Ending, u32), X::Error> {
        let mut in_flight: BTreeSet<usize> = in_flight.into_iter().collect();
        let mut cancelled = false;
        let mut aborted = false;
        loop {
            if !cancelled && !aborted {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            if x.running() == 0 {
                let end = if cancelled {
                    Ending::Interrupted
                } else if aborted {
                    Ending::Aborted
                } else {
                    self.settle(plan)
                };
                return Ok((end, round));
            }
            if x.handover_due() {
                return Ok((Ending::Handover, round));
            }
            let arrivals = x.wait(plan)?;
            cancelled |= arrivals.cancelled;
            let mut landed: Vec<Judged> = Vec::new();
            for j in arrivals.judged {
                if let Some(r) = j.record() {
                    crate::usage::record(plan, &r);
                }
                for w in &j.verdict.warnings {
                    x.emit(Event::Warning {
                        task: j.index,
                        text: w.clone(),
                    });
                }
                let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch)
                {
                    Decision::Retry { attempt, prompt } => Some((attempt, prompt)),
                    _ => None,
                };
                x.emit(Event::AttemptEnded(ended(
                    plan,
                    &j,
                    retry.as_ref().map(|r| r.0),
                )));
                match retry {
                    Some((attempt, prompt)) if x.retries_in_place() => {
                        if self.spent(plan).is_some() {
                            // Never started: the task is pending with the attempts it made.
                            let t = &mut plan.tasks[j.index];
                            t.status = Status::Pending;
                            t.attempts = Some(attempt.saturating_sub(1)).filter(|&n| n > 0);
                            in_flight.remove(&j.index);
                            x.save(plan)?;
                        } else if !cancelled {
                            let t = &mut plan.tasks[j.index];
                            if t.attempts() < attempt {
                                t.attempts = Some(attempt);
                                x.save(plan)?;
                            }
                            let start = Start {
                                task: j.index,
                                attempt,
                                retry_prompt: Some(prompt),
                            };
                            x.start(plan, start, round + 1)?;
                        }
                    }
                    _ => landed.push(j),
                }
            }
            if cancelled || landed.is_empty() {
                continue;
            }
            // Start what is ready already before integrating: integration takes a moment, and
            // work that does not depend on what just arrived need not wait for it. What just
            // arrived still counts as busy for conflicts until it is committed.
            if !aborted {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            landed.sort_by_key(|j| j.index);
            for j in &landed {
                in_flight.remove(&j.index);
            }
            round += 1;
            x.emit(Event::Integrating {
                round,
                tasks: landed.iter().map(|j| j.index).collect(),
            });
            match x.integrate(plan, landed, round)? {
                Integrated::Continue => {}
                Integrated::Abort => aborted = true,
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The loop against an executor on a virtual clock: each attempt takes the time its
    //! script says and ends as scripted. The two flavours — retries in place (the local
    //! runner) and retries through the plan (the conductor) — must agree on everything the
    //! policy decides.

    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::outcome::Verdict;
    use crate::testing::{plan_of, task};
    use crate::update::{RoundNotes, TaskResult};
    use crate::usage::{Measured, Usage};

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
        dag: crate::graph::Dag,
        events: RefCell<Vec<Event>>,
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
                dag: crate::plan::validate::check(plan, None).unwrap(),
                events: RefCell::default(),
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
        fn start(&mut self, plan: &mut Plan, start: Start, _round: u32) -> Result<(), Self::Error> {
            assert_eq!(plan.tasks[start.task].status, Status::InProgress);
            assert_eq!(
                plan.tasks[start.task].attempts(),
                start.attempt,
                "counted first"
            );
            assert_eq!(
                start.retry_prompt.is_some(),
                start.attempt > 1 && self.in_place
            );
            let (took, _, _) = self.script[&(start.task, start.attempt)];
            self.running
                .push((self.now + took, start.task, start.attempt));
            self.started.push((self.now, start.task, start.attempt));
            Ok(())
        }
        fn wait(&mut self, _plan: &mut Plan) -> Result<Arrivals, Self::Error> {
            let next = self.running.iter().map(|r| r.0).min().unwrap();
            self.now = next;
            let (ended, left): (Vec<_>, Vec<_>) = self.running.iter().partition(|r| r.0 == next);
            self.running = left;
            let judged = ended
                .into_iter()
                .map(|(end, task, attempt)| {
                    let (took, ok, cost) = self.script[&(task, attempt)];
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
                        },
                        patch: Vec::new(),
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
                    }
                })
                .collect();
            Ok(Arrivals {
                judged,
                cancelled: false,
            })
        }
        fn integrate(
            &mut self,
            plan: &mut Plan,
            batch: Vec<Judged>,
            _round: u32,
        ) -> Result<Integrated, Self::Error> {
            self.rounds.push(batch.iter().map(|j| j.index).collect());
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
                crate::update::apply_round(plan, &self.dag, &results, &RoundNotes::default());
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
        fn emit(&self, event: Event) {
            self.events.borrow_mut().push(event);
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

    fn drive(plan: &mut Plan, x: &mut Virtual, budget: Option<Budget>) -> Ending {
        let dag = x.dag.clone();
        let conflicts = Conflicts::of(plan);
        let engine = Eager {
            dag: &dag,
            conflicts: &conflicts,
            budget,
        };
        engine.run(x, plan, 0, []).unwrap().0
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
            let records = crate::usage::records(&plan);
            assert_eq!(records.len(), 6, "in place: {in_place}");
            assert_eq!(crate::usage::spent(&plan), 4.5);
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
            v.sort();
            v
        };
        assert_eq!(sorted(outcomes[0].1.clone()), sorted(outcomes[1].1.clone()));
        assert_eq!(&outcomes[0].1[2..4], &[(1, 1), (1, 2)]);
        assert_eq!(&outcomes[1].1[2..4], &[(1, 1), (2, 1)]);
        // Task 3 starts as soon as 2 lands (t = 50, task 4 holding the other slot until then).
        assert_eq!((outcomes[0].2, outcomes[1].2), (60, 60));
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
}
