//! A part under `overlap: merge` (see [`crate::action::rounds::follow`]): its arrivals
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
//! of them, and its `onto` names them). Everything this finalize decides follows from the part's base and
//! its artifacts, so a re-run decides the same and lands nothing twice.

use std::collections::BTreeSet;

use crate::action::ActionError;
use crate::action::arrival::{Integrator, prepare_arrivals};
use crate::action::rounds::{FollowUp, OpenRound};
use crate::edge::git::{Patch, PatchRef, Repo};
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::integrate::RoundBuild;
use crate::pure::integration::{CannotLand, paths_of};
use crate::pure::outcome::{self, Decision};
use crate::pure::plan::model::{Plan, Status};
use crate::pure::prompt::Unit;

mod chain;

/// A part being integrated: where (the repository, the display, the round's tree, the plan
/// and the open round's record the follow-ups go into) and what it has integrated so far: the
/// tasks landed in it and the chain of merges kept aside for the next part, each with its
/// paths (changed or declared).
struct Integrating<'a> {
    repo: &'a Repo,
    ui: &'a Ui,
    build: &'a mut RoundBuild,
    plan: &'a mut Plan,
    open: &'a mut OpenRound,
    /// The commit every job of the part started from.
    base: &'a str,
    landed: Vec<(usize, BTreeSet<String>)>,
    /// The new chain: (task, paths, merged patch onto the round's tree and the earlier ones).
    aside: Vec<(usize, BTreeSet<String>, Vec<u8>)>,
    /// The tasks sent back (as a rebase, or failed after one), with their paths.
    sent: Vec<(usize, BTreeSet<String>)>,
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
    let built: Vec<(usize, crate::action::rounds::BuiltOn)> = open
        .follow_ups
        .iter()
        .filter(|f| matches!(f, FollowUp::Rebase { .. }))
        .map(|f| {
            let on = FollowUp::built_on_in(open, f.task()).unwrap_or_default();
            (f.task(), on)
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
        landed: Vec::new(),
        aside: Vec::new(),
        sent: Vec::new(),
    };
    chain::land_chain(&mut at, chain)?;
    for (mut j, follow) in items {
        let after_rebase = follow.as_ref().is_some_and(FollowUp::after_rebase);
        j.rebase = matches!(follow, Some(FollowUp::Rebase { .. }));
        let on = match &follow {
            Some(FollowUp::Rebase { .. }) => built
                .iter()
                .find(|(k, _)| *k == j.index)
                .map(|(_, on)| on.clone())
                .unwrap_or_default(),
            None | Some(FollowUp::Recheck { .. }) => Vec::new(),
        };
        // A rebase that failed beside a rejected candidate goes back uncounted: no retry.
        let landed: Vec<usize> = at.landed.iter().map(|(l, _)| *l).collect();
        ended(
            at.plan,
            &j,
            !chain::failed_beside_rejected(&j, &on, &landed),
            at.ui,
        );
        if !on.is_empty() {
            chain::rebased_on_chain(&mut at, j, &on)?;
            continue;
        }
        let mine = paths_of(at.plan, j.index, &j.touched);
        let sharing = at.sharing(&mine);
        if j.verdict.status == Status::Completed && !j.patch.is_empty() && !sharing.is_empty() {
            let merged = at.merge_aside(&[], j.patch.borrowed(), j.index, &mine)?;
            let kept = merged.and_then(|p| at.keep(&j, p, &sharing, after_rebase));
            let why = match kept {
                Ok(kept) => {
                    // Its review (if any) concluded now: the re-check reports none.
                    crate::flow::steps::questions::record(at.plan, &j);
                    at.aside.push((j.index, mine, kept));
                    continue;
                }
                Err(why) => why,
            };
            at.sent.push((j.index, mine.clone()));
            let cannot = CannotLand { onto: sharing, why };
            if !at.send_back(&mut j, cannot, after_rebase) {
                continue;
            }
        }
        at.land(j, mine)?;
    }
    at.build_on_the_chain();
    Ok(())
}

impl Integrating<'_> {
    /// Each rebase sent back in this part builds on every candidate of the new chain whose paths
    /// meet its own — those merged after it too: its record moves after the last of them (what
    /// [`FollowUp::built_on`] reads) and its `onto` names them. Its job then starts from the tree
    /// that lands before it when the chain's re-checks pass.
    fn build_on_the_chain(&mut self) {
        let Integrating {
            open, aside, sent, ..
        } = self;
        for (task, paths) in sent.iter() {
            let is_rebase =
                |f: &FollowUp| matches!(f, FollowUp::Rebase { task: t, .. } if t == task);
            let Some(at_now) = open.follow_ups.iter().position(is_rebase) else {
                continue;
            };
            let meets: Vec<usize> = aside
                .iter()
                .filter(|(_, p, _)| !p.is_disjoint(paths))
                .map(|(k, _, _)| *k)
                .collect();
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
            let to = match last {
                Some(last) if last >= at_now => last,
                _ => at_now,
            };
            open.follow_ups.insert(to, f);
        }
    }

    /// The landed tasks and the chain's candidates whose paths meet `mine`, in that order.
    fn sharing(&self, mine: &BTreeSet<String>) -> Vec<usize> {
        let landed = self.landed.iter().map(|(k, p)| (*k, p));
        let aside = self.aside.iter().map(|(k, p, _)| (*k, p));
        landed
            .chain(aside)
            .filter(|(_, p)| !p.is_disjoint(mine))
            .map(|(k, _)| k)
            .collect()
    }

    /// `j` integrated as under `serial` (landed when it completed and applies, else decided as
    /// any attempt).
    fn land(&mut self, mut j: Judged, mine: BTreeSet<String>) -> Result<(), ActionError> {
        prepare_arrivals(self.plan, std::slice::from_mut(&mut j), "in this round");
        self.build
            .add(self.repo, self.plan, std::slice::from_ref(&j), self.ui)?;
        let lands = self
            .build
            .results()
            .iter()
            .rev()
            .find(|r| r.index == j.index)
            .is_some_and(|r| r.status == Status::Completed);
        if lands {
            self.landed.push((j.index, mine));
        }
        Ok(())
    }

    /// A change (`patch`, made on the part's base with `made_on` applied) merged onto the
    /// round's tree with the chain applied, without landing: its merged patch, or why it
    /// cannot land (a conflict, a path task `j` does not declare).
    fn merge_aside(
        &self,
        made_on: &[PatchRef<'_>],
        patch: PatchRef<'_>,
        task: usize,
        mine: &BTreeSet<String>,
    ) -> Result<Result<Vec<u8>, String>, ActionError> {
        let tree = self.build.next_base(self.repo)?;
        let chain: Vec<PatchRef<'_>> = self.aside.iter().map(|(_, _, p)| p.into()).collect();
        let merged = self
            .repo
            .merge_aside(&tree, &chain, self.base, made_on, patch)?;
        Ok(crate::action::rounds::kept_merge(merged, task, mine))
    }

    /// Attempt `j`'s clean merge (`patch`) kept in the open round for a re-check in the next part
    /// with the checks of `checks` (`rebased`: `j` ran as a rebase): the patch, or why it cannot
    /// be kept (too large).
    fn keep(
        &mut self,
        j: &Judged,
        patch: Vec<u8>,
        checks: &[usize],
        rebased: bool,
    ) -> Result<Vec<u8>, String> {
        let (plan, ui) = (&mut *self.plan, self.ui);
        let f = FollowUp::recheck(j.index, j.attempt, &patch, checks.to_vec(), rebased)?;
        self.open.follow_ups.push(f);
        let names: Vec<String> = checks.iter().map(|k| format!("task {k}")).collect();
        let names = if names.is_empty() {
            "the tasks landed before it".to_string()
        } else {
            names.join(", ")
        };
        ui.say(format!(
            "  task {}: attempt {} merges cleanly onto {names}; it lands after the next part's job re-checks the merged tree",
            j.index, j.attempt
        ));
        waits(
            plan,
            j,
            format!(
                "attempt {} merged cleanly beside {names}; its re-check runs in the round's next part",
                j.attempt
            ),
        );
        Ok(patch)
    }

    /// Attempt `j` `cannot` land: the first time, it waits for a rebase attempt in the next part
    /// (`false`: nothing more to do with it now); after a rebase (`after_rebase`) it is a failed
    /// attempt, decided as any (`true`: the caller integrates it as failed).
    fn send_back(&mut self, j: &mut Judged, cannot: CannotLand, after_rebase: bool) -> bool {
        let (plan, ui) = (&mut *self.plan, self.ui);
        let onto_names = crate::pure::integration::names(&cannot.onto);
        let Some((f, line)) = crate::action::rounds::refused(plan, j, cannot, after_rebase) else {
            return true;
        };
        ui.say(format!(
            "  task {}: attempt {} cannot land beside {onto_names} ({line}); it runs again as a rebase attempt from the integrated tree in the round's next part",
            j.index, j.attempt
        ));
        waits(
            plan,
            j,
            format!(
                "attempt {} runs again as a rebase attempt: {line}",
                j.attempt
            ),
        );
        self.open.follow_ups.push(f);
        false
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

/// A re-check's arrival: whether it passed (then `j` carries finalize's own merged patch,
/// never the job's).
fn rechecked_lands(repo: &Repo, j: &mut Judged, f: &FollowUp, ui: &Ui) -> bool {
    let patch = f.patch().filter(|_| j.verdict.status == Status::Completed);
    let Some(p) = patch else {
        return false;
    };
    j.touched = repo.patch_changes(&p).map(|(t, _)| t).unwrap_or_default();
    j.patch = Patch::Bytes(p);
    ui.say(format!(
        "  task {}: attempt {}'s merge passed its re-check",
        j.index, j.attempt
    ));
    true
}

/// An attempt's end, recorded and shown (a re-check is not an attempt: it is not recorded).
fn ended(plan: &mut Plan, j: &Judged, counted: bool, ui: &Ui) {
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
    repo: &crate::edge::git::Repo,
    plan: &crate::pure::plan::model::Plan,
    e: &crate::action::matrix::MatrixEntry,
) -> Result<Option<String>, ActionError> {
    use crate::action::rounds::FollowUp;
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
    let patches: Vec<crate::edge::git::PatchRef<'_>> =
        chain.iter().map(|(_, p)| p.into()).collect();
    Ok(repo.tree_with_chain("HEAD", &patches)?)
}
