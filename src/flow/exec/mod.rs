//! One engine loop per schedule, two executors. Whoever runs the attempts, the policy is
//! decided here, once:
//!
//! * [`RoundLoop`] — the seeds' rounds (and waves): the whole ready set, its tasks that share
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
//! ([`engine::sequential_groups`](crate::pure::engine::sequential_groups),
//! [`crate::action::rounds`]) and integrate with the same integrator
//! ([`crate::flow::integrate::RoundBuild`]).
//!
//! The loops own the policy: which tasks start, when an attempt is counted (when it starts,
//! saved before it runs; an interrupt the user asks for gives back what it stopped:
//! [`Standing`]), the `--max-cost` budget (nothing new starts once it is spent),
//! retries — none for a failure a retry cannot help ([`crate::pure::said::Halt`]) — and how the
//! run ends ([`Ending`]): an attempt whose credentials were refused stops the run
//! ([`Ending::Halted`]: every task would fail the same way), one its CLI stopped at its own
//! spending limit stops it as the budget does, its task pending again. Executors differ only where the machine does:
//! a local failed attempt is retried in place at once ([`Executor::retries_in_place`]), while
//! on GitHub the retry's prompt must be committed before its run can read it, so the failure
//! is integrated and the task picked again. What happens is emitted as typed [`Event`]s.
//! The loops do no I/O of their own: they call the executor and the pure engine.

use crate::pure::engine::{Next, Schedule, View};
use crate::pure::events::{Ended, Event};
use crate::pure::graph::Dag;
use crate::pure::outcome::{self, Decision};
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::prompt::Unit;
use crate::pure::usage::Budget;

mod eager;
mod rounds;

pub use eager::Eager;
pub use rounds::RoundLoop;

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
    /// A rebase attempt (`overlap: merge`), recorded as one.
    pub rebase: bool,
    /// What the agent CLI itself reported spending when the model gateway counted the
    /// attempt (its figures are `measured`'s): kept beside them in the record.
    pub reported: Option<crate::pure::usage::Usage>,
    /// What the Action's work job's network guards saw (its `result.json`, checked): the hosts
    /// the egress proxy refused and the rate limits recorded and held by the conductor.
    pub network: crate::pure::usage::Network,
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
                e.attempt == self.attempt && e.review.word == crate::pure::review::Word::Rejected
            });
        let outcome =
            crate::pure::usage::Outcome::of(self.verdict.status, self.timed_out, rejected);
        let mut record =
            crate::pure::usage::AttemptRecord::new(self.index, self.attempt, measured, outcome);
        record.rebase = self.rebase;
        record.cli = self.reported.clone().filter(|u| !u.is_empty());
        record.network.clone_from(&self.network);
        Some(record)
    }

    /// This attempt as `overlap: merge`'s rules ask about it: started at `start`, owning `own`.
    pub(crate) fn arrival<'a>(
        &self,
        start: &'a crate::pure::integration::Start,
        own: &'a std::collections::BTreeSet<String>,
    ) -> crate::pure::integration::Arrival<'a> {
        crate::pure::integration::Arrival {
            task: self.index,
            attempt: self.attempt,
            start,
            own,
        }
    }
}

/// One attempt to start: its task, its number (already counted in the plan) and, for a
/// retry in place, the seed's retry prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub task: usize,
    pub attempt: u32,
    pub retry_prompt: Option<String>,
}

/// Ready tasks an executor keeps from starting for now ([`Executor::held`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub tasks: Vec<usize>,
    /// How long until the first of them may start.
    pub next: Option<std::time::Duration>,
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
    match schedule.next(view, None) {
        Next::Done => Settled::Done,
        Next::Deadlock { pending } => Settled::Deadlock { pending },
        Next::Batch { .. } => match budget.and_then(|b| b.exhausted(plan)) {
            Some(why) => Settled::Budget(why),
            None => Settled::More,
        },
    }
}

/// Runs attempts somewhere: worktrees on this machine, or workflow runs on GitHub. Starting,
/// waiting and committing are `async` (a dispatch, a poll, a publication on GitHub; an
/// attempt's end locally); the loops that drive an executor are driven by the command line
/// blocking on them, never spawned, so their futures need not be `Send`.
#[allow(
    async_fn_in_trait,
    reason = "an executor's futures run where the command blocks on them, never spawned"
)]
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
    /// Keeps the record of an attempt that ended without failing, before its round commits:
    /// locally, a crash before that commit then gives the attempt back
    /// ([`crate::flow::live::ended`]). Nothing where the plan is not resumed from the work
    /// tree (the conductor).
    fn keep(&mut self, _record: &crate::pure::usage::AttemptRecord) {}
    /// Starts an attempt from the round as staged so far; its task is in progress and the
    /// attempt counted (and saved). `round` is the round it belongs to.
    async fn start(
        &mut self,
        plan: &mut Plan,
        start: Launch,
        round: u32,
    ) -> Result<(), Self::Error>;
    /// Waits for running attempts to end (at least one, or the executor's poll): the judged
    /// ones, and whether the run is cancelled.
    async fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, Self::Error>;
    /// Adds judged attempts to the round being built: completed patches applied on top of
    /// what it holds (attempts started later begin from there), outcomes decided.
    fn stage(&mut self, plan: &mut Plan, judged: Vec<Judged>) -> Result<(), Self::Error>;
    /// Commits the round built from `tasks` as round `round`: one plan update (results,
    /// cascade, circuit breaker) and one commit (on GitHub: pushed and published).
    async fn commit(
        &mut self,
        plan: &mut Plan,
        tasks: &[usize],
        round: u32,
        wave: Option<u64>,
    ) -> Result<Integrated, Self::Error>;
    /// The rebase attempts the last [`Executor::stage`] asked for (`overlap: merge`: a task
    /// whose result could not be merged runs again, once, from the tree staged so far; its
    /// task stays in progress and the attempt is not counted). Started by the loop before the
    /// round is committed.
    fn rebases(&mut self, _plan: &Plan) -> Vec<Launch> {
        Vec::new()
    }
    /// The ready tasks (once `landing` lands) that may not start yet, and how long until the
    /// first of them may: on the Action a provider's rate limit, seen in the attempts'
    /// records, holds the tasks whose worker uses it (`pure::gateway::held`). None by
    /// default.
    fn held(&mut self, _plan: &Plan, _landing: &[usize]) -> Held {
        Held::default()
    }
    /// Before a round, or an eager pick: the pending tasks the team took out of the run since
    /// it started (locally, its task list edited in the work tree) are marked so that none
    /// starts ([`crate::pure::update::withdraw`]) and said (indented as a round's line when
    /// `mid_round`: before a round's later group); the next run reads the list again.
    /// Nothing by default.
    fn withdraw(&mut self, _plan: &mut Plan, _mid_round: bool) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Waits `_for` with nothing running, while only held tasks could start.
    async fn pause(&mut self, _for: std::time::Duration) {}
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
        cost_usd: record.and_then(|r| r.usage.cost_usd),
        retry,
    }
}

/// Records judged attempt `j` in the plan (its time and cost) and in `standing`, reports it
/// and its warnings, sets `stop` when it stops the run ([`halts`], the first reason kept),
/// and decides: `Some((next attempt, retry prompt))` when the task is to be tried again.
fn arrive<X: Executor>(
    x: &mut X,
    plan: &mut Plan,
    j: &Judged,
    unit: Unit,
    standing: &mut Standing,
    stop: &mut Option<Ending>,
) -> Result<Option<(u32, String)>, X::Error> {
    standing.judged(j);
    if let Some(r) = j.record() {
        crate::pure::usage::record(plan, &r);
        // Kept at once when it did not fail: a crash before the round's commit then gives
        // the attempt back; a failure stands, and its retry's start saves its record.
        if r.outcome.ended_well() && !j.rebase {
            x.keep(&r);
        }
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
    if let Some(end) = halts(x, plan, j)? {
        stop.get_or_insert(end);
    }
    Ok(retry)
}

/// What a judged attempt means for the run beyond its task: `Some` when the run must stop —
/// [`Ending::Halted`] for refused credentials, [`Ending::Budget`] when the CLI stopped at
/// its own spending limit (the task is then pending again, this attempt not counted; a
/// rebase, never counted, keeps the attempt it repeats).
fn halts<X: Executor>(x: &mut X, plan: &mut Plan, j: &Judged) -> Result<Option<Ending>, X::Error> {
    use crate::pure::said::Halt;
    let why = || {
        format!(
            "task {}: {}",
            crate::pure::plan::ids::name(plan, j.index),
            j.verdict.result
        )
    };
    Ok(match &j.verdict.halt {
        Some(Halt::Run { .. }) => Some(Ending::Halted(why())),
        Some(Halt::Budget) => {
            let why = why();
            let stopped = Launch {
                task: j.index,
                attempt: j.attempt,
                retry_prompt: None,
            };
            put_back(x, plan, [stopped], |_| j.rebase)?;
            Some(Ending::Budget(why))
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
/// first): pending, with the attempts it really made. Returns the task.
fn uncount(plan: &mut Plan, task: usize, attempt: u32) -> usize {
    let t = &mut plan.tasks[task];
    t.status = Status::Pending;
    t.attempts = Some(attempt.saturating_sub(1)).filter(|&n| n > 0);
    task
}

/// Puts back the tasks of `launches`, which will not start (the budget, a stop): pending,
/// each counted attempt uncounted, a rebase (`rebase`: never counted) keeping the attempt it
/// repeats; saved. Returns the tasks.
fn put_back<X: Executor>(
    x: &mut X,
    plan: &mut Plan,
    launches: impl IntoIterator<Item = Launch>,
    rebase: impl Fn(&Launch) -> bool,
) -> Result<Vec<usize>, X::Error> {
    let held = launches
        .into_iter()
        .map(|s| {
            if rebase(&s) {
                plan.tasks[s.task].status = Status::Pending;
                s.task
            } else {
                uncount(plan, s.task, s.attempt)
            }
        })
        .collect();
    x.save(plan)?;
    Ok(held)
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
fn begin<X: Executor>(
    x: &mut X,
    plan: &mut Plan,
    tasks: &[usize],
    standing: &mut Standing,
) -> Result<(), X::Error> {
    for &i in tasks {
        let t = &mut plan.tasks[i];
        t.status = Status::InProgress;
        standing.used.insert(i, t.attempts());
        // Counted when it starts: a crash never gives a task an attempt more.
        t.attempts = Some(t.attempts() + 1);
    }
    x.save(plan)
}

/// The attempts that stand for each task the run began, should the user interrupt it.
///
/// An attempt is counted when it starts (saved before it runs), so a `kill -9` or a power
/// loss — which leave no word — can never give a task a fourth. An interrupt the user asks
/// for (Ctrl-C, SIGTERM) is different: dagexec stops the attempts itself, so it gives back
/// every attempt that did not end in a failure of its own — the ones stopped, the ones
/// counted and not yet started, and the ones whose result the interrupt kept from being
/// committed — and the next run starts each task at the attempt it was on
/// ([`Standing::give_back`]). A failed attempt stands: its retry is the next one.
#[derive(Debug, Default)]
pub(crate) struct Standing {
    /// Task → the attempts it has used for good.
    used: std::collections::BTreeMap<usize, u32>,
}

impl Standing {
    /// Judged attempt `j` arrived: a failure stands (a completed or blocked one is given back
    /// when the interrupt keeps it from being committed).
    fn judged(&mut self, j: &Judged) {
        if j.verdict.status == Status::Failed && !j.rebase {
            let used = self.used.entry(j.index).or_default();
            *used = (*used).max(j.attempt);
        }
    }

    /// After an interrupt: each task the run began that is still in progress keeps only the
    /// attempts that stand; saved. Returns the tasks given an attempt back, ascending.
    fn give_back<X: Executor>(&self, x: &mut X, plan: &mut Plan) -> Result<Vec<usize>, X::Error> {
        let mut given = Vec::new();
        for (&i, &used) in &self.used {
            let t = &mut plan.tasks[i];
            if t.status == Status::InProgress && t.attempts() > used {
                t.attempts = Some(used).filter(|&n| n > 0);
                given.push(i);
            }
        }
        if !given.is_empty() {
            x.save(plan)?;
        }
        Ok(given)
    }
}

#[cfg(test)]
mod tests;
