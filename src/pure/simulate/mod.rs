//! `dagexec simulate`: the predicted wall time and jobs of each schedule, locally and on
//! GitHub Actions, from task durations ([`durations`]) — before spending money on a run.
//! Pure: the schedules are played with the engine's own decisions ([`engine::Rounds`],
//! [`engine::sequential_groups`], [`engine::Waves`], [`engine::eager_pick`]) on a clock
//! instead of workers. Deterministic: times are whole milliseconds, ties go by plan index.
//! Locally, integration, commits, git and dagexec's own work take no time in the model; on
//! Actions they are the jobs' start-up and the integrations' time. Every task completes,
//! after the failed attempts its history records (see [`durations`]).
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
//!   running for conflicts), then they are completed and the slots filled again, as
//!   `run::eager` does.
//! * Every job on Actions pays T, its time that is not a task's work (queueing, runner,
//!   checkout, installs, artifact upload, tear-down), counted before its work.
//! * Actions `rounds` (`actions::rounds`): a round is the whole ready set (`engine::Rounds`),
//!   as locally; it takes one workflow run (*part*) per sequential group of its unresolved
//!   tasks (at most 256 jobs; the rest wait for the next part), and a failed attempt stays
//!   unresolved, so its retry is a later part of the same round. A part is a plan job (T),
//!   the matrix (N jobs at once, in matrix order, each T and the attempt's time), a finalize
//!   job (T, then I: judge, apply, commit, push, pull request, next run). Jobs = 2 per part
//!   + 1 per task attempt.
//! * Actions `eager` (`actions::conduct`): the run's plan job (T), the conductor job (T, and
//!   its first commit and pull request, I), then the conductor's loop: it dispatches what
//!   `engine::eager_pick` picks (one run per attempt: T, then the attempt), at most N at once;
//!   waits `conduct::poll_interval(P, runs in flight, H)`, polls, and waits again until a
//!   run has ended; integrates every ended run at once (I; a failed attempt's task is ready
//!   again and dispatched as a new run), and loops. After 5½ hours (`handover-after`) it
//!   commits and hands over (I): the successor run's plan job and conductor (2T) and first
//!   commit (I) while the runs in flight go on.
//! * The Action has no `waves`.
//!
//! The lower bound is max(critical path, total work ÷ slots): locally over the tasks'
//! times (all attempts), on Actions over the tasks' jobs (each attempt's T plus its time),
//! with N slots; it ignores file conflicts and the plan and conductor jobs.

pub mod durations;
pub mod render;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::pure::engine::{self, Next, Policy, Schedule, View};
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};

pub use durations::{DurationInput, Durations, Source, TaskTime};

/// A job matrix holds at most this many jobs (the plan job's limit).
const MATRIX_LIMIT: usize = crate::pure::pace::MAX_MATRIX_JOBS;

/// When the conductor hands over to a successor (its `handover-after` default, before
/// GitHub's 6-hour job limit), in ms.
fn handover_ms() -> u64 {
    let t = crate::pure::pace::Timing::default().handover_after;
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}

/// The conductor's wait between two polls with `in_flight` runs (`conduct::poll_interval`), ms.
fn poll_wait(s: &Setting, in_flight: usize) -> u64 {
    let d = crate::pure::pace::poll_interval(
        std::time::Duration::from_millis(s.poll),
        in_flight,
        s.polls_per_hour,
    );
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Where the plan runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    Local,
    Actions,
}

impl Place {
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Local => "local",
            Place::Actions => "actions",
        }
    }
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
    /// `--polls-per-hour`: the conductor's most run reads an hour (with many runs in flight it
    /// waits longer than `poll`).
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

/// The plan as the simulation starts it: everything pending, or with `remaining` the
/// completed tasks kept completed.
fn start_state(plan: &Plan, remaining: bool) -> Plan {
    let mut state = plan.clone();
    for t in &mut state.tasks {
        if !(remaining && t.status == Status::Completed) {
            t.status = Status::Pending;
        }
    }
    state
}

/// The tasks, their times and the conflicts the schedules see.
struct Sim<'a> {
    plan: &'a Plan,
    dag: &'a Dag,
    conflicts: &'a Conflicts,
    times: &'a Durations,
    setting: Setting,
}

/// A run's spans kept by task.
struct Clock {
    spans: Vec<Span>,
    /// The next attempt (0-based) of each task.
    next: Vec<usize>,
}

impl Clock {
    fn new(n: usize) -> Self {
        Clock {
            spans: Vec::new(),
            next: vec![0; n],
        }
    }

    /// Runs task `i`'s remaining attempts back to back from `start`, each after a start-up
    /// of `startup`; returns the end.
    fn all_attempts(&mut self, times: &Durations, i: usize, start: u64, startup: u64) -> u64 {
        let attempts = &times.tasks[i].attempts;
        let mut t = start;
        while self.next[i] < attempts.len() {
            t = self.one_attempt(times, i, t, startup).0;
        }
        t
    }

    /// Runs task `i`'s next attempt from `start`: its end, and whether it failed.
    fn one_attempt(
        &mut self,
        times: &Durations,
        i: usize,
        start: u64,
        startup: u64,
    ) -> (u64, bool) {
        let attempts = &times.tasks[i].attempts;
        let k = self.next[i];
        let failed = k + 1 < attempts.len();
        let work = start + startup;
        let end = work + attempts[k];
        self.spans.push(Span {
            task: i,
            attempt: k as u32 + 1,
            start,
            work,
            end,
            failed,
        });
        self.next[i] += 1;
        (end, failed)
    }

    fn into_spans(mut self) -> Vec<Span> {
        self.spans.sort_by_key(|s| (s.task, s.attempt));
        self.spans
    }
}

/// Queues `tasks` in order on `slots` slots from `t0` (each starts when one is free, the
/// earliest-free slot first; `run` starts the next queued attempt whenever one ends); `job`
/// runs one task from a start time and returns its end. Returns the last end.
fn list_schedule(
    tasks: &[usize],
    slots: usize,
    t0: u64,
    mut job: impl FnMut(usize, u64) -> u64,
) -> u64 {
    let mut free: BinaryHeap<Reverse<u64>> = (0..slots.max(1)).map(|_| Reverse(t0)).collect();
    let mut last = t0;
    for &i in tasks {
        let Reverse(start) = free.pop().expect("at least one slot");
        let end = job(i, start);
        last = last.max(end);
        free.push(Reverse(end));
    }
    last
}

impl Sim<'_> {
    fn view<'b>(&'b self, state: &'b Plan) -> View<'b> {
        View {
            plan: state,
            dag: self.dag,
            conflicts: self.conflicts,
        }
    }

    /// Local rounds and waves: one batch after another, its groups in sequence.
    fn local_rounds(&self, schedule: Schedule) -> Prediction {
        let mut state = start_state(self.plan, self.setting.remaining);
        let mut clock = Clock::new(state.tasks.len());
        let (mut t, mut rounds) = (0u64, 0u64);
        let deadlock = loop {
            let tasks = match schedule.policy().next(self.view(&state), None) {
                Next::Batch { tasks, .. } => tasks,
                Next::Done => break None,
                Next::Deadlock { pending } => break Some(pending),
            };
            let groups = match schedule {
                Schedule::Rounds => engine::sequential_groups(&tasks, self.dag, self.conflicts),
                _ => vec![tasks.clone()],
            };
            for group in &groups {
                t = list_schedule(group, self.setting.jobs, t, |i, start| {
                    clock.all_attempts(self.times, i, start, 0)
                });
            }
            for &i in &tasks {
                state.tasks[i].status = Status::Completed;
            }
            rounds += 1;
        };
        let spans = clock.into_spans();
        Prediction {
            schedule,
            place: Place::Local,
            wall: t,
            jobs: spans.len() as u64,
            rounds,
            spans,
            deadlock,
        }
    }

    /// Local eager with `slots` slots: the spans, the end, the number of integrations and the
    /// deadlock.
    fn eager(&self, slots: usize) -> (Vec<Span>, u64, u64, Option<usize>) {
        let mut state = start_state(self.plan, self.setting.remaining);
        let mut clock = Clock::new(state.tasks.len());
        // (end, task) of the tasks in flight.
        let mut running: Vec<(u64, usize)> = Vec::new();
        let (mut now, mut integrations) = (0u64, 0u64);
        let mut fill =
            |state: &mut Plan, running: &mut Vec<(u64, usize)>, landed: &[usize], now: u64| {
                let busy: Vec<usize> = running
                    .iter()
                    .map(|&(_, i)| i)
                    .chain(landed.iter().copied())
                    .collect();
                let free = slots.saturating_sub(running.len());
                for i in engine::eager_pick(state, self.dag, self.conflicts, &busy, free) {
                    state.tasks[i].status = Status::InProgress;
                    let end = clock.all_attempts(self.times, i, now, 0);
                    running.push((end, i));
                }
            };
        loop {
            fill(&mut state, &mut running, &[], now);
            let Some(&(next, _)) = running.iter().min() else {
                break;
            };
            now = next;
            let mut arrived: Vec<usize> =
                running.iter().filter(|r| r.0 == now).map(|r| r.1).collect();
            arrived.sort_unstable();
            running.retain(|r| r.0 != now);
            fill(&mut state, &mut running, &arrived, now);
            for &i in &arrived {
                state.tasks[i].status = Status::Completed;
            }
            integrations += 1;
        }
        let pending = state.count(Status::Pending);
        (
            clock.into_spans(),
            now,
            integrations,
            (pending > 0).then_some(pending),
        )
    }

    fn local_eager(&self) -> Prediction {
        let (spans, wall, rounds, deadlock) = self.eager(self.setting.jobs);
        Prediction {
            schedule: Schedule::Eager,
            place: Place::Local,
            wall,
            jobs: spans.len() as u64,
            rounds,
            spans,
            deadlock,
        }
    }

    /// The Action's rounds: each round the whole ready set, one workflow run (plan job,
    /// matrix, finalize) per part: the first sequential group of its unresolved tasks.
    fn actions_rounds(&self) -> Prediction {
        let js = self.setting.job_start;
        let mut state = start_state(self.plan, self.setting.remaining);
        let mut clock = Clock::new(state.tasks.len());
        let (mut t, mut jobs, mut runs) = (0u64, 0u64, 0u64);
        let deadlock = loop {
            let round = match engine::Rounds.next(self.view(&state), None) {
                Next::Batch { tasks, .. } => tasks,
                Next::Done => break None,
                Next::Deadlock { pending } => break Some(pending),
            };
            let mut unresolved = round.clone();
            while !unresolved.is_empty() {
                let part = engine::sequential_groups(&unresolved, self.dag, self.conflicts)
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                let matrix = &part[..part.len().min(MATRIX_LIMIT)];
                if matrix.is_empty() {
                    break;
                }
                let mut resolved = Vec::new();
                t += js; // the plan job
                t = list_schedule(matrix, self.setting.max_parallel, t, |i, start| {
                    let (end, failed) = clock.one_attempt(self.times, i, start, js);
                    if !failed {
                        resolved.push(i);
                    }
                    end
                });
                t += js + self.setting.integrate; // finalize
                unresolved.retain(|i| !resolved.contains(i));
                jobs += 2 + matrix.len() as u64;
                runs += 1;
            }
            for &i in &round {
                state.tasks[i].status = Status::Completed;
            }
        };
        Prediction {
            schedule: Schedule::Rounds,
            place: Place::Actions,
            wall: t,
            jobs,
            rounds: runs,
            spans: clock.into_spans(),
            deadlock,
        }
    }

    /// Eager on Actions: the plan job, the conductor, and its loop of dispatches, polls and
    /// integrations (`actions::conduct`), one run per task attempt.
    fn actions_eager(&self) -> Prediction {
        let s = &self.setting;
        let js = s.job_start;
        let mut state = start_state(self.plan, s.remaining);
        let mut clock = Clock::new(state.tasks.len());
        // (end, task, failed) of the runs in flight.
        let mut flights: Vec<(u64, usize, bool)> = Vec::new();
        let handover = handover_ms();
        // The plan job and the conductor's start-up (when the conductor starts), then its
        // first commit and pull request.
        let mut since = 2 * js;
        let mut now = since + s.integrate;
        let mut conductors = 1u64;
        loop {
            let busy: Vec<usize> = flights.iter().map(|f| f.1).collect();
            let free = s.max_parallel.saturating_sub(flights.len());
            for i in engine::eager_pick(&state, self.dag, self.conflicts, &busy, free) {
                state.tasks[i].status = Status::InProgress;
                let (end, failed) = clock.one_attempt(self.times, i, now, js);
                flights.push((end, i, failed));
            }
            let Some(first) = flights.iter().map(|f| f.0).min() else {
                break;
            };
            if now - since >= handover {
                // It commits and hands over; the successor run (pending until this one
                // ends) pays its plan job and conductor, adopts the runs and commits.
                now += s.integrate + 2 * js;
                since = now;
                now += s.integrate;
                conductors += 1;
                continue;
            }
            // A poll after the wait, then one every wait until a run has ended or it is
            // time to hand over.
            let wait = poll_wait(s, flights.len());
            now += wait;
            let until = first.min(since + handover);
            if until > now {
                now += match wait {
                    0 => until - now,
                    w => (until - now).div_ceil(w) * w,
                };
            }
            let mut arrived: Vec<(usize, bool)> = flights
                .iter()
                .filter(|f| f.0 <= now)
                .map(|f| (f.1, f.2))
                .collect();
            arrived.sort_unstable();
            flights.retain(|f| f.0 > now);
            if arrived.is_empty() {
                continue;
            }
            now += s.integrate;
            for (i, failed) in arrived {
                state.tasks[i].status = if failed {
                    Status::Pending
                } else {
                    Status::Completed
                };
            }
        }
        let pending = state.count(Status::Pending);
        let spans = clock.into_spans();
        Prediction {
            schedule: Schedule::Eager,
            place: Place::Actions,
            wall: now,
            // Each conductor's run: a plan job and the conductor job.
            jobs: 2 * conductors + spans.len() as u64,
            rounds: conductors,
            spans,
            deadlock: (pending > 0).then_some(pending),
        }
    }

    /// max(critical path, work ÷ slots) over the simulated tasks, each costing `cost`.
    fn bound(&self, slots: usize, cost: impl Fn(&TaskTime) -> u64) -> Bound {
        let n = self.plan.tasks.len();
        let counted =
            |i: usize| !(self.setting.remaining && self.plan.tasks[i].status == Status::Completed);
        let mut finish = vec![0u64; n];
        for &i in self.dag.topo() {
            let i = i as usize;
            let ready = self
                .dag
                .deps(i)
                .iter()
                .map(|&d| finish[d as usize])
                .max()
                .unwrap_or(0);
            finish[i] = ready
                + if counted(i) {
                    cost(&self.times.tasks[i])
                } else {
                    0
                };
        }
        let critical_path = finish.iter().copied().max().unwrap_or(0);
        let work: u64 = (0..n)
            .filter(|&i| counted(i))
            .map(|i| cost(&self.times.tasks[i]))
            .sum();
        let slots = slots.max(1);
        Bound {
            critical_path,
            work,
            slots,
            value: critical_path.max(work.div_ceil(slots as u64)),
        }
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
    let tasks = plan
        .tasks
        .iter()
        .filter(|t| !(setting.remaining && t.status == Status::Completed))
        .count();
    Report {
        setting,
        tasks,
        local_bound: sim.bound(setting.jobs, TaskTime::total),
        actions_bound: sim.bound(setting.max_parallel, |t| {
            t.total() + js * t.attempts.len() as u64
        }),
        predictions: vec![
            sim.local_rounds(Schedule::Rounds),
            sim.local_rounds(Schedule::Waves),
            sim.local_eager(),
            sim.actions_rounds(),
            sim.actions_eager(),
        ],
    }
}

#[cfg(test)]
mod tests;
