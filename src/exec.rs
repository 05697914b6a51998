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
                x.emit(Event::AttemptEnded(Ended {
                    task: j.index,
                    attempt: j.attempt,
                    subject: plan.tasks[j.index].subject.clone(),
                    status: j.verdict.status,
                    result: j.verdict.result.clone(),
                    took: j.duration,
                    cost_usd: j.record().and_then(|r| r.cost_usd),
                    retry: retry.as_ref().map(|r| r.0),
                }));
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
