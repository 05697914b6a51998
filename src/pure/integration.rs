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
//! On the Action a re-check runs in a later job, so a clean merge is kept aside until it
//! passed: a result whose paths (changed or declared) meet what landed since its base or a
//! merge kept aside is merged aside and re-checked ([`Ledger::meeting`], [`Ledger::merged`]
//! with what it [`Meets`]); the kept merges form a chain that lands as far as its re-checks
//! passed, the rest merged again ([`Ledger::chain_rechecked`]); a rebase that started with
//! merges kept aside lands as its job judged it when they all landed, and one of them that did
//! not land sends it back once more rather than failing it ([`Ledger::refused`]).
//!
//! The conductor judges against the branch's history instead: every task landed before, by
//! what it declares, and what the branch changed since a run's base ([`Ledger::meeting_history`]).
//!
//! One set of transitions serves every driver: [`Ledger::merged`] (a merge's outcome),
//! [`Ledger::rechecked`] (a re-check's), [`Ledger::refused`] (the send-back rule), and the
//! sequence of one arrival is written once, [`Ledger::integrate`]: merge, re-check (now, or
//! kept aside for a later job), land or send back, each step's I/O through the driver's
//! [`Driver`]. Three drivers implement it and do only their I/O: the local executor
//! (`flow::merge`, re-checking inline, its ledger kept in the git directory at each decision
//! and read back by a resume: [`Ledger::after_crash`]), the Action's finalize
//! (`action::jobs::finalize::merging`, its ledger rebuilt each part from the open round's
//! record: [`Ledger::later`]) and the conductor (`action::jobs::conduct::merging`, its ledger
//! built for each batch from the branch's plan and history). What each asks before a merge
//! differs with where it judges: the local executor merges every completed change; the Action's
//! drivers merge only what [`Ledger::meeting`] / [`Ledger::meeting_history`] says it meets.

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
    /// The rebase attempts taken to start ([`Ledger::take_asked`]) that have not arrived:
    /// what a run restarted after a crash runs again ([`Ledger::after_crash`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rebasing: BTreeMap<usize, Rebase>,
    /// The acceptance checks of the tasks landed, as they were when they landed (the plan
    /// update trims a completed task's).
    checks: BTreeMap<usize, Vec<AcceptanceCriterion>>,
    /// Clean merges kept aside for a re-check by a later job, in chain order, with their
    /// paths (changed or declared): a driver that cannot run checks itself (the Action's
    /// finalize) lands them only after that job passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    aside: Vec<TaskPaths>,
    /// The tasks sent back in this integration by such a driver, with their paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    back: Vec<TaskPaths>,
    /// The previous chain of merges kept aside is broken: a candidate of it did not land, so
    /// the later ones were re-checked beside a change that does not land.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    broken: bool,
    /// Its driver re-checks in a later job ([`Ledger::later`]): a task sent back is recorded
    /// with its paths (what its rebase builds on is known once the integration ends), not asked
    /// for. Never kept: such a ledger is rebuilt from the driver's record each time.
    #[serde(skip)]
    later: bool,
}

/// What an arrival meets, for a driver that merges it aside and re-checks it in a later job
/// ([`Ledger::later`]): the tasks whose checks its re-check runs with, and those it builds on
/// when sent back. Empty for a driver that re-checks now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meets {
    pub checks: Vec<usize>,
    pub onto: Vec<usize>,
}

/// How a clean merge's re-check went ([`Driver::recheck`]): it ran now and passed (`None`) or
/// failed, saying why; or it was kept aside for a later job's re-check; or it could not be
/// kept (why: a merge too large to record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rechecked {
    Ran(Option<String>),
    Kept,
    NotKept(String),
}

/// A driver's I/O for one arrival, in the order [`Ledger::integrate`] calls it: the three-way
/// merge onto its tree (landing nothing), the re-check (run now, or kept for a later job),
/// then the landing or the send-back. The rules between those steps are the ledger's.
pub trait Driver {
    type Error;
    /// The arrival's change merged three-way onto the driver's tree, without landing.
    fn merge(&mut self, a: &Arrival<'_>) -> Result<Merge, Self::Error>;
    /// The merge re-checked with the checks of `tasks` ([`Step::Recheck`]).
    fn recheck(
        &mut self,
        ledger: &Ledger,
        a: &Arrival<'_>,
        tasks: Vec<usize>,
    ) -> Result<Rechecked, Self::Error>;
    /// The merge lands, changing `changed` on the tree; the driver tells the ledger
    /// ([`Ledger::landed`]). A driver that keeps its merges aside lands none here (each lands
    /// after its re-check, in a later integration).
    fn land(&mut self, ledger: &mut Ledger, changed: BTreeSet<String>) -> Result<(), Self::Error> {
        let _ = (ledger, changed);
        Ok(())
    }
    /// It cannot land: `step` is [`Step::Rebase`] or [`Step::Fail`].
    fn send_back(&mut self, ledger: &mut Ledger, step: Step) -> Result<(), Self::Error>;
}

/// A task and its paths (changed or declared): a merge kept aside, or a task sent back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPaths {
    pub task: usize,
    pub paths: BTreeSet<String>,
}

/// A landed task: the paths it changed and those it declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Landed {
    pub task: usize,
    pub changed: BTreeSet<String>,
    pub declared: BTreeSet<String>,
}

/// An attempt as a driver asks about it: its task, the attempt it continues, where it started
/// and the paths it owns (changed or declared).
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    pub task: usize,
    pub attempt: u32,
    pub start: &'a Start,
    pub own: &'a BTreeSet<String>,
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
    /// The changes kept aside (merged, not landed) its job started with applied: a rebase
    /// sent back beside them builds on them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub built_on: Vec<usize>,
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
    /// Merged cleanly: the acceptance checks of these tasks (its own first, for a driver that
    /// re-checks now) must pass on the merged tree before it lands ([`Ledger::rechecked`]).
    Recheck { tasks: Vec<usize> },
    /// It cannot land and runs again as an uncounted rebase attempt
    /// ([`Ledger::take_asked`] starts it).
    Rebase(Rebase),
    /// It cannot land after its rebase, `why`: a failed attempt (retried while attempts
    /// remain, then failed; its result says it cannot be merged after its rebase).
    Fail { why: String },
}

impl Ledger {
    /// The ledger of a driver whose re-check runs in a later job (the Action's finalize and
    /// conductor): a clean merge is kept aside, a task sent back is recorded with its paths.
    pub fn later() -> Ledger {
        Ledger {
            later: true,
            ..Ledger::default()
        }
    }

    /// Attempt of `task` starts from `base`; whether it is a rebase attempt.
    pub fn start(&mut self, task: usize, base: &str) -> bool {
        let rebase = self.next_is_rebase.remove(&task);
        let start = Start {
            base: base.to_string(),
            since: self.landed.len(),
            rebase,
            built_on: Vec::new(),
        };
        self.started.insert(task, start);
        rebase
    }

    /// An integration begins: a rebase asked for and never started (the budget, a stop) is
    /// forgotten, so the task's next attempt is an ordinary one.
    pub fn integrating(&mut self) {
        for task in std::mem::take(&mut self.next_is_rebase) {
            self.rebasing.remove(&task);
        }
    }

    /// The rebase attempts asked for, to start now.
    pub fn take_asked(&mut self) -> Vec<Rebase> {
        let asked = std::mem::take(&mut self.asked);
        self.next_is_rebase.extend(asked.iter().map(|r| r.task));
        self.rebasing
            .extend(asked.iter().map(|r| (r.task, r.clone())));
        asked
    }

    /// The rebase that `task`'s running attempt repeats, when it runs one.
    pub fn rebasing(&self, task: usize) -> Option<&Rebase> {
        self.rebasing.get(&task)
    }

    /// This ledger as a run killed while it was kept left it, made true again for the run
    /// that resumes: what landed without its round being committed (`committed` says which
    /// tasks were) did not land; no attempt is running. A rebase asked for or running then,
    /// onto tasks that are committed, is run again as that rebase (uncounted, its task not
    /// sent back once more for it); one onto a change that was lost is forgotten with its
    /// send-back (the task runs again as an ordinary attempt). Returns the rebases to run
    /// again, by task.
    pub fn after_crash(&mut self, committed: impl Fn(usize) -> bool) -> Vec<Rebase> {
        self.landed.retain(|l| committed(l.task));
        self.checks.retain(|&k, _| committed(k));
        self.started.clear();
        let mut again: BTreeMap<usize, Rebase> = std::mem::take(&mut self.rebasing);
        again.extend(
            std::mem::take(&mut self.asked)
                .into_iter()
                .map(|r| (r.task, r)),
        );
        again.retain(|&t, r| !committed(t) && r.onto.iter().all(|&k| committed(k)));
        self.rebased
            .retain(|&t, onto| !committed(t) && onto.iter().all(|&k| committed(k)));
        self.next_is_rebase = again.keys().copied().collect();
        self.rebasing.clone_from(&again);
        again.into_values().collect()
    }

    /// This ledger for its plan read again from its source, whose tasks moved (`to`: a task's
    /// index now, `None` when it is gone), kept by a run that ended (no attempt is running):
    /// every record follows its task; a gone task's records are dropped, and so is a send-back
    /// onto it (its task runs again as an ordinary attempt).
    pub fn moved(&mut self, to: impl Fn(usize) -> Option<usize>) {
        let all = |ks: &[usize]| ks.iter().map(|&k| to(k)).collect::<Option<Vec<_>>>();
        let rebase = |r: &Rebase| {
            let (task, onto) = (to(r.task)?, all(&r.onto)?);
            Some(Rebase {
                task,
                onto,
                ..r.clone()
            })
        };
        self.started.clear();
        self.landed
            .retain_mut(|l| to(l.task).map(|i| l.task = i).is_some());
        for paths in [&mut self.aside, &mut self.back] {
            paths.retain_mut(|p| to(p.task).map(|i| p.task = i).is_some());
        }
        let rebased = std::mem::take(&mut self.rebased).into_iter();
        self.rebased = rebased
            .filter_map(|(k, onto)| Some((to(k)?, all(&onto)?)))
            .collect();
        self.asked = self.asked.iter().filter_map(rebase).collect();
        let rebasing = self.rebasing.values().filter_map(rebase);
        self.rebasing = rebasing.map(|r| (r.task, r)).collect();
        self.next_is_rebase = self.next_is_rebase.iter().filter_map(|&k| to(k)).collect();
        let checks = std::mem::take(&mut self.checks).into_iter();
        self.checks = checks.filter_map(|(k, c)| Some((to(k)?, c))).collect();
    }

    /// A running attempt of `task` ended without a result (killed, cancelled): it starts again
    /// as it was started — a rebase again when it was one.
    #[cfg(test)]
    pub fn interrupted(&mut self, task: usize) {
        if self.started.remove(&task).is_some_and(|s| s.rebase) {
            self.next_is_rebase.insert(task);
        }
    }

    /// `task`'s attempt arrived: where it started (`None`: not started under this ledger —
    /// it is decided as under `serial`).
    pub fn arrived(&mut self, task: usize) -> Option<Start> {
        self.rebasing.remove(&task);
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

    /// One arrival `a` integrated through its driver `d` (the driver's I/O, the ledger's
    /// rules): merged onto the driver's tree; a clean merge lands, or is re-checked first —
    /// now, or kept aside for a later job's re-check; what cannot land is sent back. `meets`:
    /// what it meets, for a driver that re-checks in a later job ([`Ledger::later`]; empty for
    /// one that re-checks now, which works that out itself: [`Ledger::merged`]). Returns the step
    /// taken: [`Step::Land`] landed, [`Step::Recheck`] kept aside, [`Step::Rebase`] sent back,
    /// [`Step::Fail`] a failed attempt.
    pub fn integrate<D: Driver>(
        &mut self,
        d: &mut D,
        a: &Arrival<'_>,
        meets: Meets,
    ) -> Result<Step, D::Error> {
        let merge = d.merge(a)?;
        let changed = match &merge {
            Merge::Clean { changed, .. } => changed.clone(),
            Merge::Conflict { .. } => BTreeSet::new(),
        };
        let onto = self.later.then(|| meets.onto.clone());
        let mut step = self.merged(a, merge, meets);
        if let Step::Recheck { tasks } = &step {
            step = match d.recheck(self, a, tasks.clone())? {
                Rechecked::Kept => return Ok(step),
                Rechecked::NotKept(why) => self.cannot_keep(a, onto.unwrap_or_default(), why),
                Rechecked::Ran(failed) => {
                    let onto = onto.unwrap_or_else(|| self.at_fault(a.start, &changed));
                    self.rechecked(a, onto, failed)
                }
            };
        }
        match &step {
            Step::Land => d.land(self, changed)?,
            Step::Rebase(_) | Step::Fail { .. } => d.send_back(self, step.clone())?,
            Step::Recheck { .. } => {}
        }
        Ok(step)
    }

    /// What a merge of arrival `a`'s completed change came to decides its next step: a
    /// conflict or a path it does not own sends it back (for a driver that re-checks in a later
    /// job, onto `meets.onto`; else onto the tasks landed since its start at fault:
    /// [`Ledger::at_fault`]). A clean merge, for a driver that re-checks in a later job, is kept
    /// aside and re-checked with the checks of `meets.checks`; for one that re-checks now (its
    /// `meets` is empty), it lands, or is re-checked first when it
    /// combined work, meets a path a task landed since its start holds, or is a rebase's.
    pub fn merged(&mut self, a: &Arrival<'_>, merge: Merge, meets: Meets) -> Step {
        let (changed, combined) = match merge {
            Merge::Conflict { files, why } => return self.cannot_merge(a, meets, &files, why),
            Merge::Clean { changed, combined } => (changed, combined),
        };
        // A path the merge changes that the task neither declared nor changed: a rename
        // carrying another task's edit is never accepted behind its back.
        let foreign: BTreeSet<String> = changed.difference(a.own).cloned().collect();
        if !foreign.is_empty() {
            let list: Vec<&str> = foreign.iter().map(String::as_str).collect();
            let why = format!(
                "the merge changes {}, which task {} does not declare",
                list.join(", "),
                a.task
            );
            return self.cannot_merge(a, meets, &foreign, why);
        }
        if self.later {
            self.aside.push(TaskPaths {
                task: a.task,
                paths: a.own.clone(),
            });
            return Step::Recheck {
                tasks: meets.checks,
            };
        }
        let onto = self.rebased.get(&a.task);
        let sharing = self.sharing(a.start.since, &changed);
        if !combined && onto.is_none() && sharing.is_empty() {
            return Step::Land;
        }
        let mut tasks = vec![a.task];
        tasks.extend(sharing);
        tasks.extend(onto.into_iter().flatten());
        let mut seen = BTreeSet::new();
        tasks.retain(|k| seen.insert(*k));
        Step::Recheck { tasks }
    }

    /// Arrival `a`'s merge cannot land (at fault: `paths`, `why`): not kept aside, sent back
    /// onto what it `meets` ([`Ledger::cannot_keep`]), or onto the tasks landed since its start
    /// at fault.
    fn cannot_merge(
        &mut self,
        a: &Arrival<'_>,
        meets: Meets,
        paths: &BTreeSet<String>,
        why: String,
    ) -> Step {
        if self.later {
            return self.cannot_keep(a, meets.onto, why);
        }
        let onto = self.at_fault(a.start, paths);
        self.refused(a, CannotLand { onto, why })
    }

    /// The re-check of arrival `a`'s merge passed (`failed` is `None`) or failed, saying why:
    /// it lands, or it is sent back onto `onto` ([`Ledger::refused`]).
    pub fn rechecked(&mut self, a: &Arrival<'_>, onto: Vec<usize>, failed: Option<String>) -> Step {
        match failed {
            None => Step::Land,
            Some(why) => self.refused(a, CannotLand { onto, why }),
        }
    }

    /// The tasks an attempt started at `start` that cannot land builds on, for a driver that
    /// re-checks now: those landed since its start that share `paths` (the ones at fault),
    /// else all landed since.
    fn at_fault(&self, start: &Start, paths: &BTreeSet<String>) -> Vec<usize> {
        let onto = self.sharing(start.since, paths);
        if onto.is_empty() {
            return self.since(start.since).map(|l| l.task).collect();
        }
        onto
    }

    /// A failed attempt of `task` ([`Step::Fail`]) is decided: `for_good` when it will not
    /// run again (its send-back is over; a retry still keeps the change it was sent to build
    /// on: those tasks' checks run on it).
    pub fn failed(&mut self, task: usize, for_good: bool) {
        if for_good {
            self.rebased.remove(&task);
        }
    }

    /// An attempt that started from `base` before anything this ledger holds landed, read
    /// back from a record (the Action rebuilds its ledger from the branch's plan each run):
    /// `rebase_onto` when it runs as a rebase (the tasks it was sent back onto), `built_on` the
    /// changes kept aside its job started with.
    pub fn resumed(
        &mut self,
        task: usize,
        base: &str,
        rebase_onto: Option<Vec<usize>>,
        built_on: Vec<usize>,
    ) -> Start {
        let rebase = rebase_onto.is_some();
        if let Some(onto) = rebase_onto {
            self.rebased.insert(task, onto);
        }
        Start {
            base: base.to_string(),
            since: 0,
            rebase,
            built_on,
        }
    }

    /// The tasks landed since `start` and then the changes kept aside whose paths (changed or
    /// declared) meet `own`: none, and the attempt lands as under `serial`; else, for a driver
    /// that re-checks in a later job, it is merged aside beside them ([`Ledger::merged`])
    /// and their checks run with its own.
    pub fn meeting(&self, start: &Start, own: &BTreeSet<String>) -> Vec<usize> {
        let mut tasks = self.sharing(start.since, own);
        tasks.extend(
            self.aside
                .iter()
                .filter(|a| !a.paths.is_disjoint(own))
                .map(|a| a.task),
        );
        tasks
    }

    /// The changes kept aside that a rebase started with (`start.built_on`) and that did not
    /// land: a failure of its job may be theirs, not its own.
    pub fn not_landed(&self, start: &Start) -> Vec<usize> {
        start
            .built_on
            .iter()
            .copied()
            .filter(|k| !self.landed.iter().any(|l| l.task == *k))
            .collect()
    }

    /// Whether a rebase that started with changes kept aside (`start.built_on`) lands as its
    /// job judged it: they all landed and nothing else that landed meets it (`meeting`).
    pub fn lands_as_built(&self, start: &Start, meeting: &[usize]) -> bool {
        self.not_landed(start).is_empty() && meeting.iter().all(|k| start.built_on.contains(k))
    }

    /// Attempt `a`'s merge cannot be kept aside (`why`: a conflict, a path it does not own, a
    /// merge too large to record): it is sent back onto `onto` ([`Ledger::refused`]).
    pub fn cannot_keep(&mut self, a: &Arrival<'_>, onto: Vec<usize>, why: String) -> Step {
        self.aside.retain(|k| k.task != a.task);
        self.refused(a, CannotLand { onto, why })
    }

    /// For a driver that judges against the branch's history (the conductor: every task
    /// landed before this ledger was built is in it, by what it declares): `None` when `own`
    /// meets nothing changed on the branch since `start` (`moved`, read from its history) nor
    /// by a task landed since — the attempt lands as under `serial`; else the landed tasks,
    /// before or since its start, whose paths meet what it shares with those changes, in
    /// task order (their checks run with its own, and it builds on them when sent back).
    pub fn meeting_history(
        &self,
        start: &Start,
        moved: BTreeSet<String>,
        own: &BTreeSet<String>,
    ) -> Option<Vec<usize>> {
        let mut moved = moved;
        for l in self.since(start.since) {
            moved.extend(l.changed.iter().chain(&l.declared).cloned());
        }
        let shared: BTreeSet<String> = moved.intersection(own).cloned().collect();
        if shared.is_empty() {
            return None;
        }
        let onto: BTreeSet<usize> = self
            .landed
            .iter()
            .filter(|l| !l.changed.is_disjoint(&shared) || !l.declared.is_disjoint(&shared))
            .map(|l| l.task)
            .collect();
        Some(onto.into_iter().collect())
    }

    /// Attempt `a` `cannot` land: the first time in this integration an uncounted rebase onto
    /// `cannot.onto`, asked for ([`Ledger::take_asked`]) — or, for a driver that re-checks in a
    /// later job, recorded with its paths ([`Ledger::building_on_aside`]); after that a failed
    /// attempt, unless it ran as a rebase beside changes kept aside that did not land (one of
    /// those may be at fault, so it goes back once more).
    pub fn refused(&mut self, a: &Arrival<'_>, cannot: CannotLand) -> Step {
        let again = self.rebased.contains_key(&a.task) && self.not_landed(a.start).is_empty();
        if self.later {
            self.back.push(TaskPaths {
                task: a.task,
                paths: a.own.clone(),
            });
        }
        let CannotLand { onto, why } = cannot;
        if again {
            return Step::Fail { why };
        }
        self.rebased.insert(a.task, onto.clone());
        let r = Rebase {
            task: a.task,
            attempt: a.attempt,
            onto,
            why,
        };
        if !self.later {
            self.asked.push(r.clone());
        }
        Step::Rebase(r)
    }

    /// The previous chain's next candidate `a`, whose job re-checked its merge (`passed`: `Ok`,
    /// or why it failed; `None`: its job did not run): it lands while every candidate before
    /// it landed ([`Step::Land`]); the first that failed is sent back onto the tasks its
    /// re-check named (`checks`). `None` when its re-check is void — it ran beside a change
    /// that does not land, so its kept change is merged again onto what landed
    /// ([`Ledger::merge_again_onto`]) — or did not run (an ordinary attempt follows).
    pub fn chain_rechecked(
        &mut self,
        a: &Arrival<'_>,
        checks: &[usize],
        passed: Option<Result<(), String>>,
    ) -> Option<Step> {
        let Some(passed) = passed else {
            self.broken = true;
            return None;
        };
        if self.broken {
            return None;
        }
        let failed = passed.err();
        self.broken = failed.is_some();
        Some(self.rechecked(a, checks.to_vec(), failed))
    }

    /// The checks a chain candidate merged again runs with: those of its last re-check whose
    /// change is still on the tree (`on_tree`), then what it meets now.
    pub fn merge_again_onto(
        &self,
        start: &Start,
        own: &BTreeSet<String>,
        checks: &[usize],
        on_tree: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut tasks: Vec<usize> = checks.iter().copied().filter(|&k| on_tree(k)).collect();
        tasks.extend(self.meeting(start, own));
        let mut seen = BTreeSet::new();
        tasks.retain(|k| seen.insert(*k));
        tasks
    }

    /// The tasks sent back in this integration ([`Ledger::refused`]), each with the changes
    /// kept aside whose paths meet its own, in chain order: its rebase builds on them — those
    /// kept after it was sent back too.
    pub fn building_on_aside(&self) -> Vec<(usize, Vec<usize>)> {
        self.back
            .iter()
            .map(|b| {
                let meets = self
                    .aside
                    .iter()
                    .filter(|a| !a.paths.is_disjoint(&b.paths))
                    .map(|a| a.task)
                    .collect();
                (b.task, meets)
            })
            .collect()
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
