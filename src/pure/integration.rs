//! `overlap: merge`'s rules as one state machine: what happens to a judged result — it lands,
//! it is kept aside for a re-check, it is sent back as a rebase (uncounted, onto which landed
//! tasks), or it is a failed attempt — over a ledger of what landed on which paths. No I/O:
//! a driver asks it at each step, does the step's I/O (the three-way merge, the checks, the
//! worker run) and tells it what came of it. Its state serialises ([`Ledger`] is `serde`), so
//! a driver that is killed between integrations reloads it and decides the same.
//!
//! The rules (`docs/src/overlap.md`):
//!
//! - An attempt starts from a base; the tasks that land after that are the ones it may meet.
//! - A completed change that shares no path (changed or declared) with what landed since its
//!   base lands as under `serial` ([`Step::Land`]).
//! - A clean merge that combined work, that changes a path a task landed since its base
//!   declared or changed, or that is a rebase's (it must keep the change it builds on) is
//!   re-checked first: the checks of the task and of those tasks ([`Step::Recheck`]).
//! - A conflict, a path the merge changes that the task neither declared nor changed, or a
//!   failed re-check, sends the task back: the first time in an integration as an uncounted
//!   rebase onto the landed tasks at fault ([`Step::Rebase`]), after that as a failed attempt
//!   ([`Step::Fail`], counted: retried while attempts remain). A rebase asked for and never
//!   started (a stop, the budget) is forgotten at the next integration.
//!
//! The local executor drives it (`flow::merge`); the Action's finalize and conductor share its
//! path rules ([`paths_of`], [`foreign`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::{AcceptanceCriterion, Plan};

/// The paths of task `task`'s attempt that changed `touched`: those and the ones it declares.
pub fn paths_of(plan: &Plan, task: usize, touched: &[String]) -> BTreeSet<String> {
    touched
        .iter()
        .cloned()
        .chain(declared(plan, task))
        .collect()
}

/// The paths task `task` declares, in their one lexical form.
pub fn declared(plan: &Plan, task: usize) -> BTreeSet<String> {
    plan.tasks
        .get(task)
        .map(|t| t.files().map(|f| crate::pure::paths::key(f)).collect())
        .unwrap_or_default()
}

/// Why a clean merge of task `task` cannot land although git merged it: the paths it
/// changes that `own` (declared or changed by the task) does not hold — a rename carrying
/// another task's edit is never accepted behind its back. `None` when there are none.
pub fn foreign(
    task: usize,
    changed: &BTreeSet<String>,
    own: &BTreeSet<String>,
) -> Option<(BTreeSet<String>, String)> {
    let foreign: BTreeSet<String> = changed.difference(own).cloned().collect();
    if foreign.is_empty() {
        return None;
    }
    let list: Vec<&str> = foreign.iter().map(String::as_str).collect();
    let why = format!(
        "the merge changes {}, which task {task} does not declare",
        list.join(", ")
    );
    Some((foreign, why))
}

/// An attempt that cannot land: the landed tasks it must build on (`onto`: none is the
/// branch) and why (git's account of the conflict, a path the task does not declare, the
/// failed check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CannotLand {
    pub onto: Vec<usize>,
    pub why: String,
}

/// `task 3, task 5`, or `the branch` for none: what a send-back builds on, in a message.
pub fn names(tasks: &[usize]) -> String {
    if tasks.is_empty() {
        return "the branch".into();
    }
    tasks
        .iter()
        .map(|k| format!("task {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The send-back rule, for every driver: task `task`'s attempt `attempt` `cannot` land; the
/// first time in an integration it runs again as an uncounted rebase onto `cannot.onto`,
/// and after its rebase (`again`) it is a failed attempt.
pub fn send_back(task: usize, attempt: u32, cannot: CannotLand, again: bool) -> Step {
    let CannotLand { onto, why } = cannot;
    if again {
        return Step::Fail { why };
    }
    Step::Rebase(Rebase {
        task,
        attempt,
        onto,
        why,
    })
}

/// What landed, who is running from where, and who was sent back: everything the rules read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// The tasks landed, in the order they landed.
    landed: Vec<Landed>,
    /// Each running attempt's start, by task.
    started: BTreeMap<usize, Start>,
    /// Tasks sent back for a rebase in the integration under way (at most once each), with
    /// the tasks they must build on.
    rebased: BTreeMap<usize, Vec<usize>>,
    /// Rebase attempts asked for and not started yet.
    asked: Vec<Rebase>,
    /// Tasks whose next start is a rebase attempt.
    next_is_rebase: BTreeSet<usize>,
    /// The acceptance checks of the tasks landed, as they were when they landed (the plan
    /// update trims a completed task's).
    checks: BTreeMap<usize, Vec<AcceptanceCriterion>>,
}

/// A landed task: the paths it changed and those it declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Landed {
    pub task: usize,
    pub changed: BTreeSet<String>,
    pub declared: BTreeSet<String>,
}

/// Where a running attempt started: its base commit, how many tasks had landed then (those
/// landed since are the ones it may meet), and whether it is a rebase attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    pub base: String,
    pub since: usize,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebase: bool,
}

/// A task sent back to build on the integrated tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rebase {
    pub task: usize,
    /// The attempt it repeats (a rebase is not counted).
    pub attempt: u32,
    /// The landed tasks whose change it must build on (none: the branch).
    pub onto: Vec<usize>,
    /// What went wrong (git's account of the conflict, or the failed check).
    pub why: String,
}

/// What a three-way merge of a completed change onto the integrated tree came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// The same lines changed twice (or a binary file, a delete beside a change): the files.
    Conflict {
        files: BTreeSet<String>,
        why: String,
    },
    /// Merged: the paths the merge changes on the integrated tree, and whether it combined
    /// work (a path it changes had also changed since the attempt's base).
    Clean {
        changed: BTreeSet<String>,
        combined: bool,
    },
}

/// What happens next to a judged result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// It lands now.
    Land,
    /// Merged cleanly: the acceptance checks of these tasks (its own first) must pass on the
    /// merged tree before it lands ([`Ledger::rechecked`]).
    Recheck { tasks: Vec<usize> },
    /// It cannot land and runs again as an uncounted rebase attempt
    /// ([`Ledger::take_asked`] starts it).
    Rebase(Rebase),
    /// It cannot land after its rebase, `why`: a failed attempt (retried while attempts
    /// remain, then failed; its result says it cannot be merged after its rebase).
    Fail { why: String },
}

impl Ledger {
    /// Attempt of `task` starts from `base`; whether it is a rebase attempt.
    pub fn start(&mut self, task: usize, base: &str) -> bool {
        let rebase = self.next_is_rebase.remove(&task);
        let start = Start {
            base: base.to_string(),
            since: self.landed.len(),
            rebase,
        };
        self.started.insert(task, start);
        rebase
    }

    /// An integration begins: a rebase asked for and never started (the budget, a stop) is
    /// forgotten, so the task's next attempt is an ordinary one.
    pub fn integrating(&mut self) {
        self.next_is_rebase.clear();
    }

    /// The rebase attempts asked for, to start now.
    pub fn take_asked(&mut self) -> Vec<Rebase> {
        let asked = std::mem::take(&mut self.asked);
        self.next_is_rebase.extend(asked.iter().map(|r| r.task));
        asked
    }

    /// A running attempt of `task` ended without a result (killed, cancelled): it starts again
    /// as it was started — a rebase again when it was one.
    pub fn interrupted(&mut self, task: usize) {
        if self.started.remove(&task).is_some_and(|s| s.rebase) {
            self.next_is_rebase.insert(task);
        }
    }

    /// `task`'s attempt arrived: where it started (`None`: not started under this ledger —
    /// it is decided as under `serial`).
    pub fn arrived(&mut self, task: usize) -> Option<Start> {
        self.started.remove(&task)
    }

    /// `task` landed (changing `changed`, declaring `declared`, its checks `checks` as they
    /// are before the plan's update trims them): its send-back is over.
    pub fn landed(
        &mut self,
        task: usize,
        changed: BTreeSet<String>,
        declared: BTreeSet<String>,
        checks: Vec<AcceptanceCriterion>,
    ) {
        self.landed.push(Landed {
            task,
            changed,
            declared,
        });
        self.checks.insert(task, checks);
        self.rebased.remove(&task);
    }

    /// `task`'s attempt was decided without landing and without a send-back (a failed
    /// worker, a question, a failed attempt that will not run again): its send-back is over.
    pub fn ended(&mut self, task: usize) {
        self.rebased.remove(&task);
    }

    /// The tasks landed, in order.
    pub fn landed_tasks(&self) -> impl Iterator<Item = usize> + '_ {
        self.landed.iter().map(|l| l.task)
    }

    /// The checks `task` had when it landed (`None`: it did not land under this ledger).
    pub fn checks_of(&self, task: usize) -> Option<&[AcceptanceCriterion]> {
        self.checks.get(&task).map(Vec::as_slice)
    }

    /// What a merge of `task`'s completed change (started at `start`, owning `own`: the paths
    /// it declares or changed) came to decides its next step: a conflict or a foreign path
    /// sends it back; a clean merge lands, or is re-checked first when it combined work, meets
    /// a path a task landed since its start holds, or is a rebase's.
    pub fn merged(
        &mut self,
        task: usize,
        attempt: u32,
        start: &Start,
        own: &BTreeSet<String>,
        merge: Merge,
    ) -> Step {
        let (changed, combined) = match merge {
            Merge::Conflict { files, why } => {
                return self.cannot_land(task, attempt, start, &files, why);
            }
            Merge::Clean { changed, combined } => (changed, combined),
        };
        if let Some((paths, why)) = foreign(task, &changed, own) {
            return self.cannot_land(task, attempt, start, &paths, why);
        }
        let onto = self.rebased.get(&task);
        let sharing = self.sharing(start.since, &changed);
        if !combined && onto.is_none() && sharing.is_empty() {
            return Step::Land;
        }
        let mut tasks = vec![task];
        tasks.extend(sharing);
        tasks.extend(onto.into_iter().flatten());
        let mut seen = BTreeSet::new();
        tasks.retain(|k| seen.insert(*k));
        Step::Recheck { tasks }
    }

    /// The re-check of `task`'s merge (changing `changed`) passed (`failed` is `None`) or
    /// failed, saying why: it lands, or it is sent back.
    pub fn rechecked(
        &mut self,
        task: usize,
        attempt: u32,
        start: &Start,
        changed: &BTreeSet<String>,
        failed: Option<String>,
    ) -> Step {
        match failed {
            None => Step::Land,
            Some(why) => self.cannot_land(task, attempt, start, changed, why),
        }
    }

    /// `task`'s attempt cannot land (at fault: `paths`): the first time in this integration it
    /// is sent back as a rebase onto the tasks landed since its start that share those paths
    /// (else all landed since), uncounted; after that it is a failed attempt.
    fn cannot_land(
        &mut self,
        task: usize,
        attempt: u32,
        start: &Start,
        paths: &BTreeSet<String>,
        why: String,
    ) -> Step {
        let mut onto = self.sharing(start.since, paths);
        if onto.is_empty() {
            onto = self.since(start.since).map(|l| l.task).collect();
        }
        let again = self.rebased.contains_key(&task);
        let step = send_back(task, attempt, CannotLand { onto, why }, again);
        if let Step::Rebase(r) = &step {
            self.rebased.insert(task, r.onto.clone());
            self.asked.push(r.clone());
        }
        step
    }

    /// A failed attempt of `task` ([`Step::Fail`]) is decided: `for_good` when it will not
    /// run again (its send-back is over; a retry still keeps the change it was sent to build
    /// on: those tasks' checks run on it).
    pub fn failed(&mut self, task: usize, for_good: bool) {
        if for_good {
            self.rebased.remove(&task);
        }
    }

    /// The tasks landed since index `since`.
    fn since(&self, since: usize) -> impl Iterator<Item = &Landed> {
        self.landed.get(since..).unwrap_or_default().iter()
    }

    /// The tasks landed since index `since` that share a path with `paths`, by what they
    /// changed or by what they declare.
    fn sharing(&self, since: usize, paths: &BTreeSet<String>) -> Vec<usize> {
        self.since(since)
            .filter(|l| !l.changed.is_disjoint(paths) || !l.declared.is_disjoint(paths))
            .map(|l| l.task)
            .collect()
    }
}

#[cfg(test)]
mod tests;
