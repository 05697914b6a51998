//! A part under `overlap: merge` (see [`crate::action::rounds::FollowUp`]): its arrivals
//! integrated one by one — the chain of re-checked merges first, then the rest in plan order.
//!
//! The chain: the previous finalize merged its later candidates cumulatively aside (each onto
//! the round's tree with the earlier candidates' merged changes applied), and this part's jobs
//! re-checked each on exactly the tree that would be committed with it. The longest prefix of
//! the chain whose re-checks passed lands, in order, each as finalize's own kept copy; the
//! first that failed goes back as a rebase; the ones after it were checked on trees holding a
//! change that does not land, so their kept changes are merged again (a cherry-pick, trees
//! only) onto what landed and wait for a new re-check.
//!
//! The rest: one that shares no path with what landed before it or with the chain lands as
//! under `serial`; one that does is merged three-way onto the round's tree with the chain
//! applied ([`Repo::merge_aside`]: trees only, no code runs here) and joins the chain: a clean
//! merge is re-checked in the next part by a job without the write token, a conflict runs
//! again as an uncounted rebase attempt. An attempt that was a rebase already and still cannot
//! land is a failed attempt. A rebase whose job built on candidates of the previous chain (its
//! patch read against the base with their merged patches) lands as it is once they all landed
//! and nothing else that landed shares its paths; otherwise it is merged with their patches as
//! the merge base and joins the new chain, or — when one of them did not land — goes back once
//! more, uncounted, on a conflict. A task sent back here builds on every candidate of the new
//! chain whose paths meet its own, those merged after it too (its record moves after the last
//! of them, and its `onto` names them).
//!
//! Every one of those decisions is the rules' ledger's ([`Ledger::later`], rebuilt each part
//! from the open round's record: who runs as a rebase, onto what, on which kept merges), a
//! merge aside taking the ledger's one sequence as the conductor's does ([`merge_aside`]);
//! this module does the I/O: the merges (trees only), the records, the plan's outcomes, the
//! display. Everything it decides follows from
//! the part's base and its artifacts, so a re-run decides the same and lands nothing twice.

use std::collections::{BTreeMap, BTreeSet};

use crate::action::ActionError;
use crate::action::arrival::{Aside, Integrator, merge_aside, prepare_arrivals};
use crate::action::rounds::{FollowUp, OpenRound};
use crate::edge::git::{Merged, PatchRef, Repo};
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::integrate::RoundBuild;
use crate::pure::integration::{Ledger, Meets, Start, Step};
use crate::pure::outcome::{self, Decision};
use crate::pure::plan::model::{Plan, Status};
use crate::pure::prompt::Unit;

mod chain;

/// A part being integrated: where (the repository, the display, the round's tree, the plan
/// and the open round's record the follow-ups go into), the rules' ledger of what landed in
/// it, what is kept aside and who was sent back ([`Ledger`], rebuilt from the record each
/// part), the merged patches of the new chain, in the ledger's order, and the patches the
/// change being merged aside was made on.
struct Integrating<'a> {
    repo: &'a Repo,
    ui: &'a Ui,
    build: &'a mut RoundBuild,
    plan: &'a mut Plan,
    open: &'a mut OpenRound,
    /// The commit every job of the part started from.
    base: &'a str,
    ledger: Ledger,
    kept: Vec<Vec<u8>>,
    made_on: Vec<Vec<u8>>,
}

/// Integrates the part's `judged` attempts into `build` (the round's tree at `base`, where
/// every job of the part started); the follow-ups for the next part go into `open`.
pub(super) fn add(
    run: Integrator<'_>,
    build: &mut RoundBuild,
    plan: &mut Plan,
    open: &mut OpenRound,
    judged: Vec<Judged>,
    base: &str,
) -> Result<(), ActionError> {
    // What each rebase of the part builds on, read before the chain leaves the record.
    let built: BTreeMap<usize, crate::action::rounds::BuiltOn> = open
        .follow_ups
        .iter()
        .filter(|f| matches!(f, FollowUp::Rebase { .. }))
        .map(|f| {
            (
                f.task(),
                FollowUp::built_on_in(open, f.task()).unwrap_or_default(),
            )
        })
        .collect();
    let (chain, items) = in_order(open, judged);
    let mut at = Integrating {
        repo: run.repo,
        ui: run.ui,
        build,
        plan,
        open,
        base,
        ledger: Ledger::later(),
        kept: Vec::new(),
        made_on: Vec::new(),
    };
    chain::land_chain(&mut at, chain)?;
    for (mut j, follow) in items {
        let onto = follow.as_ref().and_then(FollowUp::rebase_onto);
        j.rebase = onto.is_some();
        let on = follow
            .and_then(|_| built.get(&j.index).cloned())
            .unwrap_or_default();
        let built_on = on.iter().map(|(k, _)| *k).collect();
        let start = at.ledger.resumed(j.index, base, onto, built_on);
        chain::arrived(&mut at, j, &start, &on)?;
    }
    at.build_on_the_chain();
    Ok(())
}

impl Integrating<'_> {
    /// Each rebase sent back in this part builds on every candidate of the new chain whose paths
    /// meet its own ([`Ledger::building_on_aside`]) — those merged after it too: its record
    /// moves after the last of them (what [`FollowUp::built_on`] reads) and its `onto` names
    /// them. Its job then starts from the tree that lands before it when the chain's
    /// re-checks pass.
    fn build_on_the_chain(&mut self) {
        let open = &mut *self.open;
        for (task, meets) in self.ledger.building_on_aside() {
            let is_rebase =
                |f: &FollowUp| matches!(f, FollowUp::Rebase { task: t, .. } if *t == task);
            let Some(at_now) = open.follow_ups.iter().position(is_rebase) else {
                continue;
            };
            let last = meets.last().and_then(|k| {
                open.follow_ups
                    .iter()
                    .position(|f| matches!(f, FollowUp::Recheck { .. }) && f.task() == *k)
            });
            let mut f = open.follow_ups.remove(at_now);
            if let FollowUp::Rebase { onto, .. } = &mut f {
                for k in &meets {
                    if !onto.contains(k) {
                        onto.push(*k);
                    }
                }
            }
            let to = last.filter(|&last| last >= at_now).unwrap_or(at_now);
            open.follow_ups.insert(to, f);
        }
    }

    /// `j` integrated as under `serial` (landed when it completed and applies, else decided as
    /// any attempt); the ledger learns what landed.
    fn land(&mut self, mut j: Judged) -> Result<(), ActionError> {
        prepare_arrivals(self.plan, std::slice::from_mut(&mut j), "in this round");
        let (repo, ui) = (self.repo, self.ui);
        Ok(self
            .build
            .add_serial(repo, self.plan, &j, ui, &mut self.ledger)?)
    }

    /// Attempt `j`'s completed change (owning `mine`; made on the part's base with `made_on`
    /// applied) merged onto the round's tree with the chain applied, without landing, through
    /// the ledger's sequence ([`merge_aside`]): kept for a re-check in the next part with the
    /// checks of `checks` ([`Step::Recheck`]), sent back ([`Step::Rebase`]), or a failed
    /// attempt the caller integrates as one ([`Step::Fail`]).
    fn aside(
        &mut self,
        j: &mut Judged,
        start: &Start,
        mine: &BTreeSet<String>,
        made_on: Vec<Vec<u8>>,
        checks: Vec<usize>,
    ) -> Result<Step, ActionError> {
        self.made_on = made_on;
        let onto = self.ledger.meeting(start, mine);
        // The ledger steps out of the part while it drives the part's I/O.
        let mut ledger = std::mem::take(&mut self.ledger);
        let step = merge_aside(&mut ledger, self, j, start, mine, Meets { checks, onto });
        self.ledger = ledger;
        step
    }
}

impl Aside for Integrating<'_> {
    const LATER: &'static str = " in the round's next part";
    const NOBODY: &'static str = "the tasks landed before it";
    const RECHECKER: &'static str = "the next part's job re-checks the merged tree";
    const RECHECK_RUNS: &'static str = "in the round's next part";

    fn plan_ui(&mut self) -> (&mut Plan, &Ui) {
        (self.plan, self.ui)
    }

    /// Onto the round's tree with the chain applied (trees only), the change read against the
    /// part's base with `made_on` applied.
    fn merge_aside(&mut self, j: &Judged, _: &Start) -> Result<Merged, ActionError> {
        let tree = self.build.next_base(self.repo)?;
        let chain: Vec<PatchRef<'_>> = self.kept.iter().map(Into::into).collect();
        let made_on: Vec<PatchRef<'_>> = self.made_on.iter().map(Into::into).collect();
        let patch = j.patch.borrowed();
        Ok(self
            .repo
            .merge_aside(&tree, &chain, self.base, &made_on, patch)?)
    }

    /// Joins the chain (its record is kept in the open round for a re-check in the next part).
    fn keep(&mut self, _: &Judged, patch: Vec<u8>, _: &[usize]) {
        self.kept.push(patch);
    }

    /// A re-check or a rebase in the next part.
    fn wait(&mut self, j: &Judged, f: FollowUp, result: String) {
        waits(self.plan, j, result);
        self.open.follow_ups.push(f);
    }
}

/// The part's arrivals: the chain the open round kept (every re-check of the record, in its
/// order, each with its arrival), then the rest in plan order, each with the follow-up it
/// continues (taken out of `open`).
#[allow(
    clippy::type_complexity,
    reason = "two lists of pairs, named at the call"
)]
fn in_order(
    open: &mut OpenRound,
    judged: Vec<Judged>,
) -> (
    Vec<(FollowUp, Option<Judged>)>,
    Vec<(Judged, Option<FollowUp>)>,
) {
    let part: BTreeSet<usize> = judged.iter().map(|j| j.index).collect();
    let mut chain = Vec::new();
    let mut following = Vec::new();
    open.follow_ups.retain(|f| match f {
        FollowUp::Recheck { .. } => {
            chain.push((f.clone(), None));
            false
        }
        FollowUp::Rebase { .. } if part.contains(&f.task()) => {
            following.push(f.clone());
            false
        }
        FollowUp::Rebase { .. } => true,
    });
    let mut items = Vec::new();
    for j in judged {
        let member = chain
            .iter_mut()
            .find(|(f, _): &&mut (FollowUp, Option<Judged>)| {
                f.task() == j.index && f.attempt() == j.attempt
            });
        match member {
            Some((_, slot)) if slot.is_none() => *slot = Some(j),
            _ => {
                let f = following
                    .iter()
                    .find(|f| f.task() == j.index && f.attempt() == j.attempt)
                    .cloned();
                items.push((j, f));
            }
        }
    }
    items.sort_by_key(|(j, _)| j.index);
    (chain, items)
}

/// An attempt's end, recorded and shown (a re-check is not an attempt: it is not recorded).
pub(super) fn ended(plan: &mut Plan, j: &Judged, counted: bool, ui: &Ui) {
    if let Some(r) = j.record() {
        crate::pure::usage::record(plan, &r);
    }
    let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch) {
        Decision::Retry { attempt, .. } if counted => Some(attempt),
        _ => None,
    };
    ui.emit(crate::pure::events::Event::AttemptEnded(
        crate::flow::exec::ended(plan, j, retry),
    ));
}

/// Task `j` stays pending in the round with its attempt counted, `result` saying why.
fn waits(plan: &mut Plan, j: &Judged, result: String) {
    let t = &mut plan.tasks[j.index];
    t.status = Status::Pending;
    t.attempts = Some(t.attempts().max(j.attempt));
    t.result = Some(result);
}

/// The tree entry `e`'s job started from when it is a rebase built on candidates of the
/// chain (`HEAD` with their merged changes, from the open round's record, applied; trees only),
/// else `None` (`HEAD`). A record whose patches do not apply reads the patch against `HEAD`,
/// where it does not apply either: the attempt is judged as broken.
pub(super) fn built_on_tree(
    repo: &Repo,
    plan: &Plan,
    e: &crate::action::matrix::MatrixEntry,
) -> Result<Option<String>, ActionError> {
    if !matches!(
        FollowUp::of(plan, e.task, e.attempt),
        Some(FollowUp::Rebase { .. })
    ) {
        return Ok(None);
    }
    let chain = FollowUp::built_on(plan, e.task).unwrap_or_default();
    if chain.is_empty() {
        return Ok(None);
    }
    let patches: Vec<PatchRef<'_>> = chain.iter().map(|(_, p)| p.into()).collect();
    Ok(repo.tree_with_chain("HEAD", &patches)?)
}
