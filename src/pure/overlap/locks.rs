//! What scheduling needs instead of the pairwise matrix: exclusive per-file locks.
//!
//! Two tasks conflict when they share a declared file and neither reaches the other, or when a
//! v3 plan declares them overlapping (`fileOverlaps`). Tasks that are ready (or in flight) at
//! the same time are almost never ordered — a ready task's blockers are completed, and so,
//! in any plan the runner wrote, are all its ancestors — so "shares a file with a task
//! already chosen" is the whole test: a lock per file. [`Locks`] keeps that exact when a plan
//! was edited into a state where two candidates are ordered (a completed task with a pending
//! ancestor): it then asks the DAG about the few tasks that share a file with a holder.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{FileIndex, OverlapMatrix};
use crate::pure::graph::Dag;
#[cfg(test)]
use crate::pure::plan::model::Plan;

/// The conflicts scheduling respects (computed ∪ declared), as file locks; linear in the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conflicts {
    index: FileIndex,
    /// v3: the plan's `fileOverlaps`, symmetric.
    declared: Option<OverlapMatrix>,
}

impl Conflicts {
    /// The locks of a plan's declared files, and for v3 its `fileOverlaps`.
    #[cfg(test)]
    pub fn of(plan: &Plan) -> Self {
        Conflicts {
            index: FileIndex::of(plan),
            declared: (plan.schema_version >= 3).then(|| OverlapMatrix::declared(plan)),
        }
    }

    /// From parts already made.
    pub fn new(index: FileIndex, declared: Option<OverlapMatrix>) -> Self {
        Conflicts { index, declared }
    }

    /// No conflicts at all, for `n` tasks without files.
    pub fn none(n: usize) -> Self {
        Conflicts {
            index: FileIndex::empty(n),
            declared: None,
        }
    }

    /// The file index.
    pub fn index(&self) -> &FileIndex {
        &self.index
    }

    pub(crate) fn declared_of(&self, task: usize) -> &[u32] {
        self.declared.as_ref().map_or(&[], |d| d.conflicts(task))
    }

    /// Whether the two tasks may not run at the same time (the matrix's answer for one pair).
    pub fn conflict(&self, dag: &Dag, a: usize, b: usize) -> bool {
        a != b
            && ((self.index.share(a, b) && !dag.ordered(a, b))
                || self.declared_of(a).binary_search(&(b as u32)).is_ok())
    }
}

/// Whether two of `tasks` might be ordered (one an ancestor of the other). `false` is certain;
/// `true` is checked by a pass over the topological range the tasks span.
pub fn may_be_ordered(dag: &Dag, tasks: &[usize]) -> bool {
    if tasks.len() < 2 {
        return false;
    }
    // An ancestor is strictly shallower and heads a strictly longer chain.
    let mut by_depth: Vec<(u32, u32)> = tasks
        .iter()
        .map(|&t| (dag.depth(t), dag.height(t)))
        .collect();
    by_depth.sort_unstable();
    let mut shallower_max = 0u32;
    let mut level_max = 0u32;
    let mut level = by_depth[0].0;
    let mut candidate = false;
    for &(d, h) in &by_depth {
        if d != level {
            shallower_max = shallower_max.max(level_max);
            level_max = 0;
            level = d;
        }
        if shallower_max > h {
            candidate = true;
            break;
        }
        level_max = level_max.max(h);
    }
    if !candidate {
        return false;
    }
    let members: FxHashSet<u32> = tasks.iter().map(|&t| t as u32).collect();
    let first = tasks.iter().map(|&t| dag.topo_pos(t)).min().unwrap_or(0);
    let last = tasks.iter().map(|&t| dag.topo_pos(t)).max().unwrap_or(0);
    // below[x - first]: x is a member or has a member among its ancestors (within the range).
    let mut below = vec![false; last - first + 1];
    for (k, &x) in dag.topo()[first..=last].iter().enumerate() {
        let from_member = dag.deps(x as usize).iter().any(|&d| {
            let p = dag.topo_pos(d as usize);
            p >= first && below[p - first]
        });
        if from_member && members.contains(&x) {
            return true;
        }
        below[k] = from_member || members.contains(&x);
    }
    false
}

/// The files (and declared partners) held by the tasks chosen so far.
pub struct Locks<'a> {
    conflicts: &'a Conflicts,
    dag: &'a Dag,
    /// Some candidates may be ordered: a holder blocks only if it is not ordered with the task.
    exact: bool,
    holders: FxHashMap<u32, Vec<u32>>,
    chosen: FxHashSet<u32>,
}

impl<'a> Locks<'a> {
    /// No locks held, for choosing among `candidates` (every task that will be asked about or
    /// take locks: the ready tasks and those in flight).
    pub fn new(conflicts: &'a Conflicts, dag: &'a Dag, candidates: &[usize]) -> Self {
        Locks {
            exact: may_be_ordered(dag, candidates),
            ..Locks::unordered(conflicts, dag)
        }
    }

    /// No locks held, for candidates the caller knows are pairwise unordered.
    pub fn unordered(conflicts: &'a Conflicts, dag: &'a Dag) -> Self {
        Locks {
            conflicts,
            dag,
            exact: false,
            holders: FxHashMap::default(),
            chosen: FxHashSet::default(),
        }
    }

    /// Whether `task` conflicts with a task holding locks.
    pub fn blocked(&self, task: usize) -> bool {
        for f in self.conflicts.index.files_of(task) {
            if let Some(h) = self.holders.get(f)
                && (!self.exact || h.iter().any(|&x| !self.dag.ordered(x as usize, task)))
            {
                return true;
            }
        }
        self.conflicts
            .declared_of(task)
            .iter()
            .any(|d| self.chosen.contains(d))
    }

    /// `task` takes the locks of its files.
    pub fn take(&mut self, task: usize) {
        for &f in self.conflicts.index.files_of(task) {
            self.holders.entry(f).or_default().push(task as u32);
        }
        self.chosen.insert(task as u32);
    }
}
