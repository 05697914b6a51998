//! The schedules played on a clock: the local rounds, waves and eager on slots, and the Action's
//! rounds and conductor, with the engine's own decisions.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Bound, Durations, Place, Prediction, Setting, Span, TaskTime, simulated};
use crate::pure::engine::{self, Schedule};
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};

mod merge_actions;

/// A job matrix holds at most this many jobs (the plan job's limit).
const MATRIX_LIMIT: usize = crate::pure::pace::MAX_MATRIX_JOBS;

/// `d` in ms.
fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
pub(super) struct Sim<'a> {
    pub(super) plan: &'a Plan,
    pub(super) dag: &'a Dag,
    pub(super) conflicts: &'a Conflicts,
    pub(super) times: &'a Durations,
    pub(super) setting: Setting,
}

/// The Action's workflow runs so far on the clock: the time, the jobs, the runs.
#[derive(Default)]
struct Tally {
    t: u64,
    jobs: u64,
    runs: u64,
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

    /// Runs task `i`'s remaining attempts back to back from `start` on one worker (no
    /// start-up: locally); returns the end.
    fn all_attempts(&mut self, times: &Durations, i: usize, start: u64) -> u64 {
        let attempts = &times.tasks[i].attempts;
        let mut t = start;
        while self.next[i] < attempts.len() {
            t = self.one_attempt(times, i, t, 0).0;
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

    /// The prediction of the run played on this clock, ended at `wall`: a job per attempt
    /// (the workers locally), `rounds` commits or workflow runs.
    fn prediction(
        mut self,
        schedule: Schedule,
        place: Place,
        wall: u64,
        rounds: u64,
        deadlock: Option<usize>,
    ) -> Prediction {
        self.spans.sort_by_key(|s| (s.task, s.attempt));
        Prediction {
            schedule,
            place,
            wall,
            jobs: self.spans.len() as u64,
            rounds,
            spans: self.spans,
            deadlock,
        }
    }
}

/// The pending tasks left when a loop ended, if any (none could start).
fn stuck(state: &Plan) -> Option<usize> {
    Some(state.count(Status::Pending)).filter(|&n| n > 0)
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
    /// Plays `schedule`'s batches from the start state as the engine decides them (its dry
    /// run: each batch completed in turn), each played on the clock by `round`; returns the
    /// deadlock, if one is reached.
    fn each_round(&self, schedule: Schedule, round: impl FnMut(&[usize])) -> Option<usize> {
        let state = start_state(self.plan, self.setting.remaining);
        let (batches, deadlock) =
            engine::simulate(&state, self.dag, self.conflicts, schedule, None);
        batches.iter().map(Vec::as_slice).for_each(round);
        deadlock
    }

    /// Local rounds and waves: one batch after another, its groups in sequence. With `tail`
    /// (`overlap: merge`, this `Sim` keeping no conflicts apart): each round's tasks, then the
    /// expected rebases — `rebase[i]` ms for task `i` — of those that ran beside a task they
    /// conflict with under `serial` (`conflicts`), queued on the slots after the round's
    /// other work, as `run` starts them.
    pub(super) fn local_rounds(
        &self,
        schedule: Schedule,
        tail: Option<(&Conflicts, &[u64])>,
    ) -> Prediction {
        let mut clock = Clock::new(self.plan.tasks.len());
        let (mut t, mut rounds) = (0u64, 0u64);
        let deadlock = self.each_round(schedule, |tasks| {
            let groups = match schedule {
                Schedule::Rounds => engine::sequential_groups(tasks, self.dag, self.conflicts),
                _ => vec![tasks.to_vec()],
            };
            for group in &groups {
                t = list_schedule(group, self.setting.jobs, t, |i, start| {
                    clock.all_attempts(self.times, i, start)
                });
            }
            if let Some((conflicts, rebase)) = tail {
                let beside: Vec<usize> = tasks
                    .iter()
                    .copied()
                    .filter(|&i| {
                        rebase[i] > 0
                            && tasks
                                .iter()
                                .any(|&j| j != i && conflicts.conflict(self.dag, i, j))
                    })
                    .collect();
                t = list_schedule(&beside, self.setting.jobs, t, |i, start| start + rebase[i]);
            }
            rounds += 1;
        });
        clock.prediction(schedule, Place::Local, t, rounds, deadlock)
    }

    /// Local eager on `--jobs` slots.
    pub(super) fn local_eager(&self) -> Prediction {
        let slots = self.setting.jobs;
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
                let pick = engine::Pick {
                    in_flight: &busy,
                    slots: slots.saturating_sub(running.len()),
                    landing: landed,
                    held: &[],
                };
                for i in engine::eager_pick_with(state, self.dag, self.conflicts, pick) {
                    state.tasks[i].status = Status::InProgress;
                    let end = clock.all_attempts(self.times, i, now);
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
        let deadlock = stuck(&state);
        clock.prediction(Schedule::Eager, Place::Local, now, integrations, deadlock)
    }

    /// The Action's rounds: each round the whole ready set, one workflow run (plan job,
    /// matrix, finalize) per part: the first sequential group of its unresolved tasks.
    pub(super) fn actions_rounds(&self) -> Prediction {
        let js = self.setting.job_start;
        self.actions_rounds_by(|round, clock, at| {
            let mut unresolved = round.to_vec();
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
                self.actions_run(at, matrix.len(), |t| {
                    list_schedule(matrix, self.setting.max_parallel, t, |i, start| {
                        let (end, failed) = clock.one_attempt(self.times, i, start, js);
                        if !failed {
                            resolved.push(i);
                        }
                        end
                    })
                });
                unresolved.retain(|i| !resolved.contains(i));
            }
        })
    }

    /// The Action's rounds, each the whole ready set, played by `round` on the clock (its
    /// workflow runs counted by [`Sim::actions_run`]); then the round's tasks are completed.
    fn actions_rounds_by(
        &self,
        mut round: impl FnMut(&[usize], &mut Clock, &mut Tally),
    ) -> Prediction {
        let mut clock = Clock::new(self.plan.tasks.len());
        let mut at = Tally::default();
        let deadlock = self.each_round(Schedule::Rounds, |tasks| {
            round(tasks, &mut clock, &mut at);
        });
        Prediction {
            jobs: at.jobs,
            ..clock.prediction(Schedule::Rounds, Place::Actions, at.t, at.runs, deadlock)
        }
    }

    /// One workflow run of a round's part on the clock: the plan job, the matrix of `n` jobs
    /// (`matrix` plays it from the time it is given and returns its end), finalize.
    fn actions_run(&self, at: &mut Tally, n: usize, matrix: impl FnOnce(u64) -> u64) {
        at.t += self.setting.job_start; // the plan job
        at.t = matrix(at.t);
        at.t += self.setting.job_start + self.setting.integrate; // finalize
        at.jobs += 2 + n as u64;
        at.runs += 1;
    }

    /// Eager on Actions: the plan job that conducts (`dagexec init --schedule eager`: one
    /// job, one start-up), and its loop of dispatches, polls and integrations
    /// (`actions::conduct`), one run per task attempt.
    pub(super) fn actions_eager(&self) -> Prediction {
        let s = &self.setting;
        let js = s.job_start;
        let mut state = start_state(self.plan, s.remaining);
        let mut clock = Clock::new(state.tasks.len());
        // (end, task, failed) of the runs in flight.
        let mut flights: Vec<(u64, usize, bool)> = Vec::new();
        // When the conductor hands over to a successor (its `handover-after` default, before
        // GitHub's 6-hour job limit).
        let handover = ms(crate::pure::pace::Timing::default().handover_after);
        // Its wait between two polls (`conduct::poll_interval`; a poll is one listing of the
        // branch's runs, however many are in flight).
        let poll = std::time::Duration::from_millis(s.poll);
        let wait = ms(crate::pure::pace::poll_interval(poll, 1, s.polls_per_hour));
        // The plan job's start-up (it goes on as the conductor), then its first commit and
        // pull request.
        let mut since = js;
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
                // ends) pays its plan job, which conducts, adopts the runs and commits.
                now += s.integrate + js;
                since = now;
                now += s.integrate;
                conductors += 1;
                continue;
            }
            // A poll after the wait, then one every wait until a run has ended or it is
            // time to hand over.
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
        let deadlock = stuck(&state);
        let p = clock.prediction(Schedule::Eager, Place::Actions, now, conductors, deadlock);
        // Each conductor's run: its plan job, which conducts.
        Prediction {
            jobs: conductors + p.jobs,
            ..p
        }
    }

    /// max(critical path, work ÷ slots) over the simulated tasks, each costing `cost`.
    pub(super) fn bound(&self, slots: usize, cost: impl Fn(&TaskTime) -> u64) -> Bound {
        let n = self.plan.tasks.len();
        let cost_of = |i: usize| {
            if simulated(self.plan, self.setting, i) {
                cost(&self.times.tasks[i])
            } else {
                0
            }
        };
        let mut finish = vec![0u64; n];
        for &i in self.dag.topo() {
            let i = i as usize;
            let deps = self.dag.deps(i).iter().map(|&d| finish[d as usize]);
            finish[i] = deps.max().unwrap_or(0) + cost_of(i);
        }
        let critical_path = finish.iter().copied().max().unwrap_or(0);
        let work: u64 = (0..n).map(cost_of).sum();
        let slots = slots.max(1);
        Bound {
            critical_path,
            work,
            slots,
            value: critical_path.max(work.div_ceil(slots as u64)),
        }
    }
}
