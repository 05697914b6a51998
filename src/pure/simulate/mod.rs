//! `dagexec simulate`: the predicted wall time and jobs of each schedule, locally and on GitHub
//! Actions, from task durations ([`durations`]) — before spending money on a run. Pure: the
//! schedules are played with the engine's own decisions (the rounds' and waves'
//! [`Schedule::next`](crate::pure::engine::Schedule::next) through their dry run
//! [`engine::simulate`](crate::pure::engine::simulate),
//! [`engine::sequential_groups`](crate::pure::engine::sequential_groups),
//! [`engine::eager_pick_with`](crate::pure::engine::eager_pick_with)) on a clock instead of
//! workers.
//! Deterministic: times are whole milliseconds, ties go by plan index. Locally, integration,
//! commits, git and dagexec's own work take no time in the model; on Actions they are the jobs'
//! start-up and the integrations' time. Every task completes, after the failed attempts its history
//! records (see [`durations`]).
//!
//! What is modelled (`--jobs N` locally; on Actions `--max-parallel N`, `--job-start T`,
//! `--integrate I`, and the conductor's `--poll P` and `--polls-per-hour H`):
//! * local `rounds`: a round is the whole ready set, its sequential groups one after another,
//!   each group's tasks queued in plan order on N slots; the round ends when all are done.
//!   A failed attempt's retry takes its slot again at once (as `run` does).
//! * local `waves`: the same, a conflict-free batch of the lowest wave per round.
//! * local `eager`: a task starts when its blockers are completed, a slot is free and no task
//!   it conflicts with runs; longest remaining chain first. Arrivals at one instant are
//!   integrated together: first the free slots are filled around them (they still count as
//!   running for conflicts; a slot goes only to a task that would also be picked once they
//!   are integrated), then they are completed and the slots filled again, as `run`'s eager
//!   loop does (`engine::eager_pick_with`).
//! * Every job on Actions pays T, its time that is not a task's work (queueing, runner,
//!   checkout, installs, artifact upload, tear-down), counted before its work.
//! * Actions `rounds` (`actions::rounds`): a round is the whole ready set (`Schedule::Rounds`),
//!   as locally; it takes one workflow run (*part*) per sequential group of its unresolved
//!   tasks (at most 256 jobs; the rest wait for the next part), and a failed attempt stays
//!   unresolved, so its retry is a later part of the same round. A part is a plan job (T),
//!   the matrix (N jobs at once, in matrix order, each T and the attempt's time), a finalize
//!   job (T, then I: judge, apply, commit, push, pull request, next run). Jobs = 2 per part
//!   + 1 per task attempt.
//! * Actions `eager` (`actions::conduct`): the run's plan job (T), the conductor job (T, and
//!   its first commit and pull request, I), then the conductor's loop: it dispatches what
//!   `engine::eager_pick` picks (one run per attempt: T, then the attempt), at most N at once;
//!   waits `conduct::poll_interval(P, 1, H)` (a poll is one listing of the branch's runs),
//!   polls, and waits again until a
//!   run has ended; integrates every ended run at once (I; a failed attempt's task is ready
//!   again and dispatched as a new run), and loops. After 5½ hours (`handover-after`) it
//!   commits and hands over (I): the successor run's plan job and conductor (2T) and first
//!   commit (I) while the runs in flight go on.
//! * The Action has no `waves`.
//!
//! * local `overlap: merge` (rounds and eager, beside the rows above, when tasks share
//!   files): as above with no file conflicts kept apart, each sharing task paying the
//!   conflict rate of its last attempt as a rebase ([`merge`]: learned from the history's
//!   merge runs, else assumed) — eager on its own slot at once, rounds after the round's
//!   other work (only a task that ran beside one it conflicts with).
//! * Actions `overlap: merge` (`play::merge_actions`): rounds put a round's tasks in one
//!   matrix; each part's finalize lands the re-checked merges, then in plan order what meets
//!   nothing landed or kept aside, and keeps the rest aside for the next part: a re-check job
//!   (T, no work) or, for the expected share that conflicts (the rate accumulated over the
//!   run, whole, the latest in plan order), a rebase job (T and the last attempt); a rebase
//!   merged beside what landed is re-checked in the part after. Eager is the local `eager`
//!   under `merge` played by the conductor, each sharing task's run followed by a re-check run
//!   and its expected rebase's (T + I each, added to its last attempt; their jobs counted).
//!
//! The lower bound is max(critical path, total work ÷ slots): locally over the tasks'
//! times (all attempts), on Actions over the tasks' jobs (each attempt's T plus its time),
//! with N slots; it ignores file conflicts and the plan and conductor jobs.

pub mod durations;
pub mod merge;
mod play;
pub mod render;

use crate::pure::engine::Schedule;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};

pub use durations::{DurationInput, Durations, Origin, TaskTime};
use play::Sim;

/// Where the plan runs (`local`, `actions` in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    Local,
    Actions,
}

/// The settings the prediction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// `--jobs`: workers at once locally.
    pub jobs: usize,
    /// `--max-parallel`: work jobs at once on Actions.
    pub max_parallel: usize,
    /// `--job-start`: a job's time on Actions that is not a task's work (queueing, runner,
    /// checkout, installs, artifact upload, tear-down), ms; every job pays it.
    pub job_start: u64,
    /// `--integrate`: dagexec's own step where results land on Actions, ms: a finalize job's
    /// (judge the artifacts, apply, commit, push, pull request, the next run's dispatch), the
    /// conductor's for each batch of arrivals and once as it starts.
    pub integrate: u64,
    /// `--poll`: the conductor's least wait between two polls of its runs, ms.
    pub poll: u64,
    /// `--polls-per-hour`: the conductor's most polls an hour (each one request, however many
    /// runs are in flight; it waits longer than `poll` when this asks it).
    pub polls_per_hour: u64,
    /// Only what is not completed yet (completed tasks stay done).
    pub remaining: bool,
}

/// One attempt on the predicted clock (ms from the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub task: usize,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// When its job or worker starts.
    pub start: u64,
    /// When the task's work starts (after the job's start-up; `start` locally).
    pub work: u64,
    pub end: u64,
    /// A failed attempt (a retry follows).
    pub failed: bool,
}

/// One schedule's prediction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub schedule: Schedule,
    pub place: Place,
    /// The wall time, ms.
    pub wall: u64,
    /// Locally: worker processes (one per attempt). On Actions: every job that starts.
    pub jobs: u64,
    /// Round commits locally (eager: one per batch of arrivals); workflow runs on Actions
    /// (eager: conductor jobs).
    pub rounds: u64,
    /// Every attempt, ordered by task, then attempt.
    pub spans: Vec<Span>,
    /// Pending tasks left when none could start (waves out of dependency order).
    pub deadlock: Option<usize>,
}

/// max(critical path, work ÷ slots), ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub critical_path: u64,
    pub work: u64,
    pub slots: usize,
    pub value: u64,
}

/// Everything `dagexec simulate` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub setting: Setting,
    /// The tasks simulated (all, or those not completed with `remaining`).
    pub tasks: usize,
    pub local_bound: Bound,
    pub actions_bound: Bound,
    /// Local rounds, waves, eager; then Actions rounds, eager.
    pub predictions: Vec<Prediction>,
    /// `overlap: merge` locally (rounds, eager) with the conflict rate it assumes, when the
    /// plan has tasks that share files ([`merge`]).
    pub merge: Option<(merge::MergeRate, Vec<Prediction>)>,
}

impl Report {
    /// The bound a prediction is compared with.
    pub fn bound(&self, place: Place) -> Bound {
        match place {
            Place::Local => self.local_bound,
            Place::Actions => self.actions_bound,
        }
    }

    /// A prediction's wall time over its bound (`None` when the bound is 0).
    pub fn ratio(&self, p: &Prediction) -> Option<f64> {
        let b = self.bound(p.place).value;
        (b > 0).then(|| p.wall as f64 / b as f64)
    }
}

/// Predicts every schedule of `plan` (validated: `dag` and `conflicts` are its own) with the
/// task times `times`.
pub fn predict(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    times: &Durations,
    setting: Setting,
) -> Report {
    let setting = Setting {
        jobs: setting.jobs.max(1),
        max_parallel: setting.max_parallel.max(1),
        ..setting
    };
    let sim = Sim {
        plan,
        dag,
        conflicts,
        times,
        setting,
    };
    let js = setting.job_start;
    Report {
        setting,
        tasks: (0..plan.tasks.len())
            .filter(|&i| simulated(plan, setting, i))
            .count(),
        local_bound: sim.bound(setting.jobs, TaskTime::total),
        actions_bound: sim.bound(setting.max_parallel, |t| {
            t.total() + js * t.attempts.len() as u64
        }),
        predictions: vec![
            sim.local_rounds(Schedule::Rounds, None),
            sim.local_rounds(Schedule::Waves, None),
            sim.local_eager(),
            sim.actions_rounds(),
            sim.actions_eager(),
        ],
        merge: predict_merge(&sim),
    }
}

/// Whether task `i` is simulated: not a join (no work: `pure::join`), and with `remaining`
/// not completed.
fn simulated(plan: &Plan, setting: Setting, i: usize) -> bool {
    let t = &plan.tasks[i];
    !(t.join || setting.remaining && t.status == Status::Completed)
}

/// `overlap: merge` locally and on the Action, when some tasks share files: no conflicts kept
/// apart, the sharing tasks' times with the expected rebase ([`merge`]).
fn predict_merge(sim: &Sim<'_>) -> Option<(merge::MergeRate, Vec<Prediction>)> {
    let sharing = merge::sharing(sim.plan, sim.dag, sim.conflicts);
    if !sharing.contains(&true) {
        return None;
    }
    let rate = merge::rate(sim.plan, &sharing);
    let times = merge::times(sim.times, &sharing, rate);
    let none = Conflicts::none(sim.plan.tasks.len());
    let free = Sim {
        conflicts: &none,
        ..*sim
    };
    // Rounds: the tasks' own times, their rebases after the round's other work.
    let rebases = merge::rebases(sim.times, &sharing, rate);
    let rounds = free.local_rounds(Schedule::Rounds, Some((sim.conflicts, &rebases)));
    // Eager: a rebase starts as soon as its task is integrated, on its slot.
    let eager = Sim {
        times: &times,
        ..free
    }
    .local_eager();
    // The Action's rounds: one matrix, the merges re-checked in the parts after.
    let actions_rounds = free.actions_rounds_merge(sim.conflicts, rate);
    // The conductor: as locally, each sharing task's run followed by its re-check run, and
    // the expected rebase's.
    let s = sim.setting;
    let (with_runs, runs) = merge::recheck_runs(&times, &sharing, rate, s.job_start + s.integrate);
    let mut actions_eager = Sim {
        times: &with_runs,
        ..free
    }
    .actions_eager();
    actions_eager.jobs += runs;
    Some((rate, vec![rounds, eager, actions_rounds, actions_eager]))
}

#[cfg(test)]
mod tests;
