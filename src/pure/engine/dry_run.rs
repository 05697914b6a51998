//! The dry run: the batches the engine would pick if every task completed, keeping the
//! ready set as tasks complete instead of recomputing it.

use crate::pure::engine::{Schedule, round_of, select_batch, wave_of};
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::overlap::locks::Locks;
use crate::pure::plan::model::{Plan, Status};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// The batches a run would execute if every task completed: what `--dry-run` shows, and what
/// the property tests check. Returns the batches, and the deadlock if one is reached.
///
/// The same decisions as [`Schedule::next`] on the plan with each batch marked completed in
/// turn, with the ready set kept as tasks complete (a count of open blockers per task) instead
/// of found anew each step, so a 100,000-task chain is not 100,000 scans.
pub fn simulate(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    schedule: Schedule,
    cap: Option<usize>,
) -> (Vec<Vec<usize>>, Option<usize>) {
    let n = plan.tasks.len();
    let mut status: Vec<Status> = plan.tasks.iter().map(|t| t.status).collect();
    let mut open = open_blockers(&status, dag);
    // A join is never a job: it completes once its blockers have (`pure::join`).
    let join = |i: usize| plan.tasks[i].join;
    let joins: Vec<usize> = (0..n)
        .filter(|&i| join(i) && status[i] == Status::Pending && open[i] == 0)
        .collect();
    for j in joins {
        status[j] = Status::Completed;
        // The tasks it opens are found ready below.
        drop(opened(plan, dag, j, &mut status, &mut open));
    }
    // When every completed task's blockers are completed (so all its ancestors are), every
    // step keeps it so, and ready tasks are never ordered: plain file locks, no DAG questions.
    let unordered = (0..n).all(|i| status[i] != Status::Completed || open[i] == 0);
    // Waves choose within the lowest wave with pending tasks; the others from all ready tasks.
    let wave = |i: usize| match schedule {
        Schedule::Waves => wave_of(plan, dag, i),
        Schedule::Rounds | Schedule::Eager => 0,
    };
    let mut ready = ReadySet::default();
    let mut pending = 0;
    let mut waves: BTreeMap<u64, usize> = BTreeMap::new();
    for i in (0..n).filter(|&i| status[i] == Status::Pending && !join(i)) {
        pending += 1;
        *waves.entry(wave(i)).or_default() += 1;
        if open[i] == 0 {
            ready.insert(i, wave(i), dag, conflicts);
        }
    }
    let mut batches = Vec::new();
    loop {
        let Some(&current) = waves.keys().next() else {
            return (batches, None);
        };
        let Some(set) = ready.by_wave.get(&current) else {
            return (batches, Some(pending));
        };
        let tasks = match schedule {
            Schedule::Rounds => {
                let all: Vec<usize> = set.iter().map(|&(_, i)| i).collect();
                round_of(&all, dag, cap).0
            }
            Schedule::Waves | Schedule::Eager if unordered => {
                ready.choose_unordered(current, dag, conflicts, cap)
            }
            Schedule::Waves | Schedule::Eager => {
                let all: Vec<usize> = set.iter().map(|&(_, i)| i).collect();
                select_batch(&all, dag, conflicts, cap).0
            }
        };
        for &t in &tasks {
            status[t] = Status::Completed;
            pending -= 1;
            let w = wave(t);
            ready.remove(t, w, dag, conflicts);
            let left = waves.get_mut(&w).expect("a pending task's wave is counted");
            *left -= 1;
            if *left == 0 {
                waves.remove(&w);
            }
            for d in opened(plan, dag, t, &mut status, &mut open) {
                ready.insert(d, wave(d), dag, conflicts);
            }
        }
        batches.push(tasks);
    }
}

/// The pending tasks that task `t`, just completed, leaves with no open blocker, through the
/// joins it completes on the way (each completed here).
fn opened(
    plan: &Plan,
    dag: &Dag,
    t: usize,
    status: &mut [Status],
    open: &mut [usize],
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![t];
    while let Some(x) = stack.pop() {
        for &d in dag.dependents(x) {
            let d = d as usize;
            open[d] -= 1;
            if open[d] == 0 && status[d] == Status::Pending {
                if plan.tasks[d].join {
                    status[d] = Status::Completed;
                    stack.push(d);
                } else {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// How many of each task's blockers are not completed.
pub(super) fn open_blockers(status: &[Status], dag: &Dag) -> Vec<usize> {
    (0..status.len())
        .map(|i| {
            dag.deps(i)
                .iter()
                .filter(|&&d| status[d as usize] != Status::Completed)
                .count()
        })
        .collect()
}

/// [`simulate`]'s ready tasks: per wave in the order of choice, and how many of a wave's
/// ready tasks touch each file.
#[derive(Default)]
pub(super) struct ReadySet {
    by_wave: BTreeMap<u64, BTreeSet<(Reverse<u32>, usize)>>,
    on_file: FxHashMap<(u64, u32), usize>,
}

impl ReadySet {
    /// `choose` over wave `current`'s candidates in order when ready tasks are never
    /// ordered, stopping once nothing more can join: the cap is reached, or every candidate
    /// touches a file now held.
    fn choose_unordered(
        &self,
        current: u64,
        dag: &Dag,
        conflicts: &Conflicts,
        cap: Option<usize>,
    ) -> Vec<usize> {
        let set = &self.by_wave[&current];
        let cap = cap.unwrap_or(usize::MAX).max(1);
        let mut locks = Locks::unordered(conflicts, dag);
        let mut chosen = Vec::new();
        for &(_, i) in set {
            if chosen.len() == cap {
                break;
            }
            if locks.blocked(i) {
                continue;
            }
            locks.take(i);
            chosen.push(i);
            let files = conflicts.index().files_of(i);
            if files
                .iter()
                .any(|&f| self.on_file[&(current, f)] == set.len())
            {
                break;
            }
        }
        chosen.sort_unstable();
        chosen
    }

    fn insert(&mut self, task: usize, wave: u64, dag: &Dag, conflicts: &Conflicts) {
        self.by_wave
            .entry(wave)
            .or_default()
            .insert((Reverse(dag.height(task)), task));
        for &f in conflicts.index().files_of(task) {
            *self.on_file.entry((wave, f)).or_default() += 1;
        }
    }

    fn remove(&mut self, task: usize, wave: u64, dag: &Dag, conflicts: &Conflicts) {
        if let Some(set) = self.by_wave.get_mut(&wave) {
            set.remove(&(Reverse(dag.height(task)), task));
            if set.is_empty() {
                self.by_wave.remove(&wave);
            }
        }
        for &f in conflicts.index().files_of(task) {
            if let Some(c) = self.on_file.get_mut(&(wave, f)) {
                *c -= 1;
                if *c == 0 {
                    self.on_file.remove(&(wave, f));
                }
            }
        }
    }
}
