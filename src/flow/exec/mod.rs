//! One engine loop per schedule, two executors. Whoever runs the attempts, the policy is
//! decided here, once:
//!
//! * [`Rounds`] — the seeds' rounds (and waves): the whole ready set, its tasks that share
//!   files in sequential groups (each group starting from the round's tree with the earlier
//!   groups' work applied), failures retried inside the round, then one update, one circuit
//!   breaker decision and one commit;
//! * [`Eager`] — a task starts as soon as its blockers are completed and a slot is free,
//!   longest remaining chain first, never beside a task it conflicts with; each batch of
//!   arrivals is integrated and committed as a round.
//!
//! An [`Executor`] runs attempts and integrates what they leave:
//!
//! * the local executor ([`crate::flow`]): worktrees on this machine (rounds, waves and eager);
//!   Ctrl-C stops it;
//! * the conductor ([`crate::action::jobs::conduct`], eager on GitHub): one workflow run per
//!   attempt, polled, its artifact read through the API, each batch committed and pushed;
//!   `/execute abort` stops it, another writer on the branch ends it, and it hands over
//!   before GitHub's job limit.
//!
//! The rounds workflow on GitHub cannot be one process — each part of a round is a workflow
//! run — so its plan and finalize jobs take the same decisions from the same engine
//! ([`engine::sequential_groups`], [`crate::action::rounds`]) and integrate with the same
//! integrator ([`crate::flow::integrate::RoundBuild`]).
//!
//! The loops own the policy: which tasks start, when an attempt is counted (when it starts,
//! saved before it runs), the `--max-cost` budget (nothing new starts once it is spent),
//! retries — none for a failure a retry cannot help ([`crate::pure::said::Halt`]) — and how the
//! run ends ([`Ending`]): an attempt whose credentials were refused stops the run
//! ([`Ending::Halted`]: every task would fail the same way), one its CLI stopped at its own
//! spending limit stops it as the budget does, its task pending again. Executors differ only where the machine does:
//! a local failed attempt is retried in place at once ([`Executor::retries_in_place`]), while
//! on GitHub the retry's prompt must be committed before its run can read it, so the failure
//! is integrated and the task picked again. What happens is emitted as typed [`Event`]s.
//! The loops do no I/O of their own: they call the executor and the pure engine.

use std::collections::{BTreeSet, VecDeque};

use crate::pure::engine::{self, Next, Schedule, View};
use crate::pure::events::{Ended, Event};
use crate::pure::graph::Dag;
use crate::pure::outcome::{self, Decision};
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::prompt::Unit;
use crate::pure::usage::Budget;

/// How a run ended; each maps to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every task completed (0).
    Completed,
    /// Finished with failed, blocked or skipped tasks (1).
    Incomplete,
    /// The circuit breaker stopped the run (3), with the numbers it decided on.
    CircuitBreaker(crate::pure::update::CircuitBreaker),
    /// Pending tasks remain but none can start (4).
    Deadlock,
    /// Ctrl-C (130).
    Interrupted,
    /// Stopped with questions for the user: answer them (`dagexec answer`) and run again (5).
    NeedsInput,
    /// The budget (`--max-cost`) is spent: no new attempt was started (1, as incomplete).
    BudgetSpent,
    /// A worker's credentials were refused: every task would fail the same way, so nothing
    /// new was started (6).
    Halted,
}

/// A judged attempt.
#[derive(Debug)]
pub struct Judged {
    pub index: usize,
    pub attempt: u32,
    pub verdict: crate::pure::outcome::Verdict,
    /// The changes to integrate (without the plan file and the work log), for a completed task:
    /// in memory for a local attempt, in a file for an artifact's (see [`crate::edge::git::Patch`]).
    pub patch: crate::edge::git::Patch,
    /// Paths the patch touches.
    pub touched: Vec<String>,
    pub duration: std::time::Duration,
    /// The task's review history after this attempt, when a reviewer ran.
    pub reviews: Option<Vec<crate::pure::review::ReviewEntry>>,
    /// What the task asks the user (a blocked attempt only).
    pub question: Option<crate::pure::question::Question>,
    /// The attempt's span and what its worker reported spending; `None` when nothing is known
    /// of it (an Action job that left no artifact).
    pub measured: Option<crate::pure::usage::Measured>,
    /// The worker was killed at the task's timeout.
    pub timed_out: bool,
}

impl Judged {
    /// The record this attempt leaves in the plan ([`crate::pure::usage`]), when it was measured.
    pub fn record(&self) -> Option<crate::pure::usage::AttemptRecord> {
        let measured = self.measured.as_ref()?;
        let rejected = self
            .reviews
            .as_ref()
            .and_then(|h| h.last())
            .is_some_and(|e| {
                e.attempt == self.attempt && e.verdict == crate::pure::review::Word::Rejected
            });
        let outcome =
            crate::pure::usage::Outcome::of(self.verdict.status, self.timed_out, rejected);
        Some(crate::pure::usage::AttemptRecord::new(
            self.index,
            self.attempt,
            measured,
            outcome,
        ))
    }
}

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

/// What came of committing a round.
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

/// How a loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Nothing pending: the plan's own end (completion, or questions left open).
    Done,
    /// Pending tasks remain and none can start.
    Deadlock { pending: usize },
    /// The budget is spent and ready tasks wait (why).
    Budget(String),
    /// A commit ended the run (the circuit breaker); attempts may still be in flight.
    Ended(RunEnd),
    /// Ctrl-C: attempts were stopped and their tasks left in progress; `committed` when it
    /// came between rounds (nothing was in flight).
    Interrupted { committed: bool },
    /// `/execute abort`: what was in flight is integrated, nothing new started.
    Aborted,
    /// Time to hand over to a successor (attempts in flight stay recorded).
    Handover,
    /// Another writer moved the branch.
    Stale,
    /// A worker's credentials were refused ([`crate::pure::said::Halt::Run`]): what was in flight is
    /// integrated, nothing new started (why, naming the secret to fix).
    Halted(String),
}

/// Where a plan stands between rounds: what the engine says comes next, with the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Nothing is pending.
    Done,
    /// Pending tasks remain and none can start.
    Deadlock { pending: usize },
    /// Ready tasks wait, but the budget is spent (why).
    Budget(String),
    /// Ready tasks can start.
    More,
}

/// Where `plan` stands under `schedule` and `budget`: the one answer the loops, finalize
/// (after each part of a round on GitHub) and the conductor give to "does the run go on?".
pub fn settle(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    schedule: Schedule,
    budget: Option<Budget>,
) -> Settled {
    let view = View {
        plan,
        dag,
        conflicts,
    };
    match schedule.policy().next(view, None) {
        Next::Done => Settled::Done,
        Next::Deadlock { pending } => Settled::Deadlock { pending },
        Next::Batch { .. } => match budget.and_then(|b| b.exhausted(plan)) {
            Some(why) => Settled::Budget(why),
            None => Settled::More,
        },
    }
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
    /// Starts an attempt from the round as staged so far; its task is in progress and the
    /// attempt counted (and saved). `round` is the round it belongs to.
    fn start(&mut self, plan: &mut Plan, start: Start, round: u32) -> Result<(), Self::Error>;
    /// Waits for running attempts to end (at least one, or the executor's poll): the judged
    /// ones, and whether the run is cancelled.
    fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, Self::Error>;
    /// Adds judged attempts to the round being built: completed patches applied on top of
    /// what it holds (attempts started later begin from there), outcomes decided.
    fn stage(&mut self, plan: &mut Plan, judged: Vec<Judged>) -> Result<(), Self::Error>;
    /// Commits the round built from `tasks` as round `round`: one plan update (results,
    /// cascade, circuit breaker) and one commit (on GitHub: pushed and published).
    fn commit(
        &mut self,
        plan: &mut Plan,
        tasks: &[usize],
        round: u32,
        wave: Option<u64>,
    ) -> Result<Integrated, Self::Error>;
    /// Whether the run was asked to stop (checked between rounds).
    fn cancelled(&self) -> bool {
        false
    }
    /// Whether to stop and hand over to a successor now.
    fn handover_due(&self) -> bool {
        false
    }
    /// The loop reached a step of round `round` (`between-groups`, `after-workers`): the
    /// crash tests' failpoints hook here.
    fn reached(&self, _step: &str, _round: u32) {}
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
            crate::pure::usage::Outcome::of(j.verdict.status, j.timed_out, false),
            |r| r.outcome,
        ),
        result: j.verdict.result.clone(),
        took: j.duration,
        cost_usd: record.and_then(|r| r.cost_usd),
        retry,
    }
}

/// Records judged attempt `j` in the plan (its time and cost), reports it and its warnings,
/// and decides: `Some((next attempt, retry prompt))` when the task is to be tried again.
fn arrive<X: Executor>(x: &X, plan: &mut Plan, j: &Judged, unit: Unit) -> Option<(u32, String)> {
    if let Some(r) = j.record() {
        crate::pure::usage::record(plan, &r);
    }
    for w in &j.verdict.warnings {
        x.emit(Event::Warning {
            task: j.index,
            text: w.clone(),
        });
    }
    let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, unit) {
        Decision::Retry { attempt, prompt } => Some((attempt, prompt)),
        _ => None,
    };
    x.emit(Event::AttemptEnded(ended(
        plan,
        j,
        retry.as_ref().map(|r| r.0),
    )));
    retry
}

/// What a judged attempt means for the run beyond its task: `Some` when the run must stop —
/// [`Ending::Halted`] for refused credentials, [`Ending::Budget`] when the CLI stopped at
/// its own spending limit (the task is then pending again, this attempt not counted).
fn halts<X: Executor>(x: &mut X, plan: &mut Plan, j: &Judged) -> Result<Option<Ending>, X::Error> {
    use crate::pure::said::Halt;
    Ok(match &j.verdict.halt {
        Some(Halt::Run { .. }) => Some(Ending::Halted(format!(
            "task {}: {}",
            j.index, j.verdict.result
        ))),
        Some(Halt::Budget) => {
            uncount(plan, j.index, j.attempt);
            x.save(plan)?;
            Some(Ending::Budget(format!(
                "task {}: {}",
                j.index, j.verdict.result
            )))
        }
        Some(Halt::Task { .. }) | None => None,
    })
}

/// Whether a judged attempt is integrated: not when its CLI stopped at its own spending
/// limit (its task is pending again, as if it never started).
fn lands(j: &Judged) -> bool {
    j.verdict.halt != Some(crate::pure::said::Halt::Budget)
}

/// Puts back a task whose next attempt `attempt` was never started (the budget ran out
/// first): pending, with the attempts it really made.
fn uncount(plan: &mut Plan, task: usize, attempt: u32) {
    let t = &mut plan.tasks[task];
    t.status = Status::Pending;
    t.attempts = Some(attempt.saturating_sub(1)).filter(|&n| n > 0);
}

/// Counts retry `attempt` of `task` (saved before it starts).
fn count<X: Executor>(
    x: &mut X,
    plan: &mut Plan,
    task: usize,
    attempt: u32,
) -> Result<(), X::Error> {
    let t = &mut plan.tasks[task];
    if t.attempts() < attempt {
        t.attempts = Some(attempt);
        x.save(plan)?;
    }
    Ok(())
}

/// Marks `tasks` in progress with an attempt more each, saved before any of them starts.
fn begin<X: Executor>(x: &mut X, plan: &mut Plan, tasks: &[usize]) -> Result<(), X::Error> {
    for &i in tasks {
        let t = &mut plan.tasks[i];
        t.status = Status::InProgress;
        // Counted when it starts: a crash never gives a task an attempt more.
        t.attempts = Some(t.attempts() + 1);
    }
    x.save(plan)
}

/// A group's judged attempts (ascending), its tasks the budget kept from starting (or whose
/// attempt its CLI's spending limit stopped), and why the run stops after this round.
type GroupEnd = (Vec<Judged>, Vec<usize>, Option<Ending>);

/// The seeds' rounds (`schedule: rounds`) or waves (`schedule: waves`).
#[derive(Debug, Clone, Copy)]
pub struct Rounds<'a> {
    pub dag: &'a Dag,
    pub conflicts: &'a Conflicts,
    pub budget: Option<Budget>,
    /// [`Schedule::Rounds`] or [`Schedule::Waves`].
    pub schedule: Schedule,
}

impl Rounds<'_> {
    fn spent(&self, plan: &Plan) -> Option<String> {
        self.budget?.exhausted(plan)
    }

    fn unit(&self) -> Unit {
        self.schedule.unit()
    }

    /// Runs round after round until nothing is pending, the run stops, or it is cancelled;
    /// `round` is the last round committed. Returns how it ended and the last round.
    #[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
    pub fn run<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        mut round: u32,
    ) -> Result<(Ending, u32), X::Error> {
        loop {
            let view = View {
                plan,
                dag: self.dag,
                conflicts: self.conflicts,
            };
            let batch = match self.schedule.policy().next(view, None) {
                Next::Done => return Ok((Ending::Done, round)),
                Next::Deadlock { pending } => return Ok((Ending::Deadlock { pending }, round)),
                Next::Batch { .. } if self.spent(plan).is_some() => {
                    return Ok((Ending::Budget(self.spent(plan).unwrap_or_default()), round));
                }
                Next::Batch { tasks, waiting } => {
                    if !waiting.is_empty() {
                        x.emit(Event::Waiting { tasks: waiting });
                    }
                    tasks
                }
            };
            round += 1;
            let wave = (self.schedule == Schedule::Waves)
                .then(|| engine::current_wave(plan, self.dag))
                .flatten();
            // Seed 3b: a round's tasks that share files "run sequentially" — in groups one
            // after another, each starting from the round's tree with the earlier groups'
            // work applied.
            let groups = match self.schedule {
                Schedule::Rounds => engine::sequential_groups(&batch, self.dag, self.conflicts),
                _ => vec![batch.clone()],
            };
            x.emit(Event::RoundStarted {
                round,
                tasks: batch.clone(),
                groups: groups.clone(),
                slots: x.slots(),
            });
            // Tasks of the round that never started: the budget ran out first.
            let mut unstarted: Vec<usize> = Vec::new();
            let mut stop: Option<Ending> = None;
            for (k, group) in groups.iter().enumerate() {
                if self.spent(plan).is_some() || stop.is_some() {
                    if stop.is_none() {
                        let mut held = group.clone();
                        held.sort_unstable();
                        x.emit(Event::NotStarted { tasks: held });
                    }
                    unstarted.extend(group);
                    continue;
                }
                if k > 0 {
                    x.emit(Event::GroupStarted {
                        group: k + 1,
                        of: groups.len(),
                        tasks: group.clone(),
                    });
                }
                begin(x, plan, group)?;
                let Some((judged, not_started, halted)) = self.group(x, plan, group, round)? else {
                    return Ok((Ending::Interrupted { committed: false }, round));
                };
                unstarted.extend(not_started);
                stop = stop.or(halted);
                x.stage(plan, judged)?;
                if k + 1 < groups.len() {
                    x.reached("between-groups", round);
                }
            }
            x.reached("after-workers", round);
            // One update (results, cascade, circuit breaker) and one commit for the whole
            // round (of the tasks that ran).
            let ran: Vec<usize> = batch
                .iter()
                .copied()
                .filter(|i| !unstarted.contains(i))
                .collect();
            match x.commit(plan, &ran, round, wave)? {
                Integrated::Continue => {}
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Abort => return Ok((Ending::Aborted, round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
            if let Some(stop) = stop {
                return Ok((stop, round));
            }
            if !unstarted.is_empty() {
                return Ok((Ending::Budget(self.spent(plan).unwrap_or_default()), round));
            }
            if x.cancelled() {
                return Ok((Ending::Interrupted { committed: true }, round));
            }
        }
    }

    /// Runs one group's attempts, retrying failures until every task is resolved, or the
    /// budget is spent: then the attempts not yet started never start, and their tasks are
    /// pending again (returned beside the judged attempts). `None` when cancelled.
    fn group<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        group: &[usize],
        round: u32,
    ) -> Result<Option<GroupEnd>, X::Error> {
        // Attempts waiting for a slot, in plan order; a retry goes to the front.
        let mut queue: VecDeque<Start> = group
            .iter()
            .map(|&i| Start {
                task: i,
                attempt: plan.tasks[i].attempts().max(1),
                retry_prompt: None,
            })
            .collect();
        let mut done: Vec<Judged> = Vec::new();
        let mut unstarted = Vec::new();
        let mut cancelled = false;
        let mut stop: Option<Ending> = None;
        // The group's first starts are announced by its round's (or group's) line; tasks that
        // waited for a free worker are announced as they start.
        let mut announced = false;
        loop {
            let free = x.slots().saturating_sub(x.running());
            if free > 0 && !cancelled {
                if (self.spent(plan).is_some() || stop.is_some()) && !queue.is_empty() {
                    let mut held = Vec::new();
                    for s in queue.drain(..) {
                        uncount(plan, s.task, s.attempt);
                        held.push(s.task);
                    }
                    x.save(plan)?;
                    held.sort_unstable();
                    if stop.is_none() {
                        x.emit(Event::NotStarted {
                            tasks: held.clone(),
                        });
                    }
                    unstarted.extend(held);
                }
                let starts: Vec<Start> = queue.drain(..free.min(queue.len())).collect();
                let mut fresh: Vec<usize> = starts
                    .iter()
                    .filter(|s| s.retry_prompt.is_none())
                    .map(|s| s.task)
                    .collect();
                fresh.sort_unstable();
                if announced && !fresh.is_empty() {
                    x.emit(Event::Starting { tasks: fresh });
                }
                for start in starts {
                    x.start(plan, start, round)?;
                }
            }
            announced = true;
            if x.running() == 0 {
                break;
            }
            let arrivals = x.wait(plan)?;
            cancelled |= arrivals.cancelled;
            for j in arrivals.judged {
                let retry = arrive(x, plan, &j, self.unit());
                if let Some(end) = halts(x, plan, &j)? {
                    stop = stop.or(Some(end));
                }
                match retry {
                    Some((attempt, prompt)) if x.retries_in_place() => {
                        count(x, plan, j.index, attempt)?;
                        queue.push_front(Start {
                            task: j.index,
                            attempt,
                            retry_prompt: Some(prompt),
                        });
                    }
                    _ if !lands(&j) => unstarted.push(j.index),
                    _ => done.push(j),
                }
            }
        }
        if cancelled {
            return Ok(None);
        }
        done.sort_by_key(|j| j.index);
        Ok(Some((done, unstarted, stop)))
    }
}

/// The eager schedule.
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
        begin(x, plan, &picks)?;
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
        match settle(plan, self.dag, self.conflicts, Schedule::Eager, self.budget) {
            Settled::Done => Ending::Done,
            Settled::Deadlock { pending } => Ending::Deadlock { pending },
            Settled::Budget(why) => Ending::Budget(why),
            // Ready tasks did not start though nothing runs: only the budget holds them back
            // (spent between the check and the pick).
            Settled::More => Ending::Budget(self.spent(plan).unwrap_or_default()),
        }
    }

    /// Runs until nothing is pending or in flight, or the run stops; `round` is the last
    /// round committed, `in_flight` the tasks already running (adopted). Returns how it
    /// ended and the last round committed.
    #[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
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
        // Why nothing new starts: refused credentials, or a CLI's own spending limit.
        let mut stop: Option<Ending> = None;
        loop {
            if !cancelled && !aborted && stop.is_none() {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            if x.running() == 0 {
                let end = if cancelled {
                    Ending::Interrupted { committed: false }
                } else if aborted {
                    Ending::Aborted
                } else if let Some(stop) = stop {
                    stop
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
                let retry = arrive(x, plan, &j, Unit::Batch);
                if let Some(end) = halts(x, plan, &j)? {
                    stop = stop.or(Some(end));
                }
                if !lands(&j) {
                    in_flight.remove(&j.index);
                    continue;
                }
                match retry {
                    Some((attempt, prompt)) if x.retries_in_place() => {
                        if self.spent(plan).is_some() || stop.is_some() {
                            // Never started: the task is pending with the attempts it made.
                            uncount(plan, j.index, attempt);
                            in_flight.remove(&j.index);
                            x.save(plan)?;
                        } else if !cancelled {
                            count(x, plan, j.index, attempt)?;
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
            if !aborted && stop.is_none() {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            landed.sort_by_key(|j| j.index);
            let tasks: Vec<usize> = landed.iter().map(|j| j.index).collect();
            for i in &tasks {
                in_flight.remove(i);
            }
            round += 1;
            x.emit(Event::Integrating {
                round,
                tasks: tasks.clone(),
            });
            x.stage(plan, landed)?;
            let committed = x.commit(plan, &tasks, round, None)?;
            x.reached("eager-after-round", round);
            match committed {
                Integrated::Continue => {}
                Integrated::Abort => aborted = true,
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
