//! What a run remembers between a task's attempts: the review history (kept in the plan
//! file as it changes) and the changes of a rejected attempt the next one continues from.

use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::review::{self, ReviewEntry};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use crate::edge::lock::held;

/// What the run remembers between the attempts of a task: the review history (seeded from
/// the plan) and the changes of a rejected attempt that the next one continues from.
///
/// Each verdict is also written to the plan file at once ([`Memory::persist`]), so that a
/// run killed before the next step (the next attempt, the round commit) loses no rejection.
/// Whoever else writes the plan file while attempts run (the eager loop) puts the histories
/// in first and holds the file meanwhile ([`Memory::apply`]).
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pub(crate) reviews: Mutex<BTreeMap<usize, Vec<ReviewEntry>>>,
    pub(crate) carry: Mutex<BTreeMap<usize, crate::edge::git::Patch>>,
    /// Held while the plan file is read and written during a round, by [`Memory::persist`]
    /// and by a runner saving its own copy of the plan while attempts run.
    pub(crate) plan_file: Mutex<()>,
}

impl Memory {
    pub(crate) fn history(&self, index: usize, task: &Task) -> Vec<ReviewEntry> {
        held(&self.reviews)
            .entry(index)
            .or_insert_with(|| review::history(task))
            .clone()
    }

    pub(crate) fn set(&self, index: usize, history: Vec<ReviewEntry>) {
        held(&self.reviews).insert(index, history);
    }

    /// Puts the review histories of this run into the tasks still in progress in `plan` (a
    /// resolved task's history arrives with its judged attempt), and holds the plan file
    /// until the guard it returns drops: the caller saves `plan` meanwhile.
    pub(crate) fn apply(&self, plan: &mut Plan) -> std::sync::MutexGuard<'_, ()> {
        let file = held(&self.plan_file);
        for (&i, h) in held(&self.reviews).iter() {
            if let Some(t) = plan.tasks.get_mut(i)
                && t.status == Status::InProgress
            {
                review::set_history(t, h);
            }
        }
        file
    }

    /// Writes task `index`'s review history into the plan file at `plan_path` (read, changed,
    /// saved atomically), the seed's "state updated at each stage of the loop".
    pub(crate) fn persist(
        &self,
        plan_path: &Path,
        index: usize,
        history: &[ReviewEntry],
    ) -> Result<(), String> {
        let _held = held(&self.plan_file);
        let mut plan = crate::edge::plan_file::load(plan_path).map_err(|e| e.to_string())?;
        let task = plan
            .tasks
            .get_mut(index)
            .ok_or_else(|| format!("the plan file has no task {index}"))?;
        review::set_history(task, history);
        crate::edge::plan_file::save(&plan, plan_path).map_err(|e| e.to_string())
    }
}
