//! The chain of a part under `overlap: merge` (see [`super`]): the previous finalize's
//! re-checked merges landed as far as their re-checks passed, the rest merged again; then each
//! other arrival landed as under `serial` or merged aside, a rebase whose job built on that
//! chain landed after it or merged again — each as the rules' ledger
//! ([`crate::pure::integration::Ledger`]) decides; this module does the I/O.

use std::collections::BTreeSet;

use crate::action::ActionError;
use crate::action::rounds::FollowUp;
use crate::edge::git::PatchRef;
use crate::flow::attempt::Judged;
use crate::pure::integration::{Arrival, CannotLand, Start, Step, names, paths_of};
use crate::pure::plan::model::Status;

use super::{Aside, Integrating};

/// An arrival `j` of the part (started at `start`) that is not the chain's: one that shares no
/// path with what landed before it or with the new chain lands as under `serial`; one that
/// does is merged aside onto the round's tree and the new chain and re-checked in the next
/// part ([`Integrating::aside`]). A rebase whose job built on the previous chain's candidates
/// `on` (task, merged patch; its patch was read against the base with them applied) lands as
/// it is when the ledger says it lands as built
/// ([`crate::pure::integration::Ledger::lands_as_built`]: the tree it lands on is, in its
/// paths, the one its job judged it on and ran their checks on); otherwise it is merged with
/// those patches as the merge base (a cherry-pick that leaves out a candidate that did not
/// land); a conflict fails it when everything it built on landed, else sends it back once
/// more.
pub(super) fn arrived(
    at: &mut Integrating<'_>,
    mut j: Judged,
    start: &Start,
    on: &[(usize, Vec<u8>)],
) -> Result<(), ActionError> {
    let mine = paths_of(at.plan, j.index, &j.touched);
    let meeting = at.ledger.meeting(start, &mine);
    let rejected = at.ledger.not_landed(start);
    let beside_rejected = j.verdict.status == Status::Failed && !rejected.is_empty();
    // A rebase that failed beside a change that did not land goes back uncounted: no retry.
    super::ended(at.plan, &j, !beside_rejected, at.ui);
    // Its job judged it on a tree holding a candidate that did not land (its re-check
    // failed): a failed verdict may be that change's, not its own (another task's check
    // failing beside it), so it is no failed attempt — like the chain's later candidates, it
    // is tried again without that change: sent back once more, uncounted, building again on
    // what it shares paths with (not on the rejected change, which goes back itself).
    if beside_rejected {
        let why = format!(
            "it failed beside the change of {}, which did not land: {}",
            names(&rejected),
            j.verdict.result.lines().next().unwrap_or_default()
        );
        j.patch.clear();
        let cannot = CannotLand { onto: meeting, why };
        let a = j.arrival(start, &mine);
        let step = at.ledger.refused(&a, cannot);
        at.send_back(&mut j, step);
        return Ok(());
    }
    if j.verdict.status != Status::Completed
        || j.patch.is_empty()
        || at.ledger.lands_as_built(start, &meeting)
    {
        return at.land(j);
    }
    let made_on = on.iter().map(|(_, p)| p.clone()).collect();
    match at.aside(&mut j, start, &mine, made_on, meeting)? {
        // Its review (if any) concluded now: the re-check reports none.
        Step::Recheck { .. } => crate::flow::steps::questions::record(at.plan, &j),
        Step::Land | Step::Rebase(_) => {}
        Step::Fail { .. } => at.land(j)?,
    }
    Ok(())
}

/// The previous finalize's chain, in its order, each with this part's re-check of it (`None`:
/// it did not run in this part). The ledger lands the prefix whose re-checks passed and sends
/// the first failure back (a rebase, or a failed attempt after one); each later one was
/// checked on a tree holding a change that does not land, so its kept change is merged again
/// onto what landed.
pub(super) fn land_chain(
    at: &mut Integrating<'_>,
    chain: Vec<(FollowUp, Option<Judged>)>,
) -> Result<(), ActionError> {
    let kept: Vec<Vec<u8>> = chain
        .iter()
        .map(|(f, _)| f.patch().unwrap_or_default())
        .collect();
    for (n, (f, j)) in chain.into_iter().enumerate() {
        let FollowUp::Recheck { checks, .. } = &f else {
            continue;
        };
        let start = at
            .ledger
            .resumed(f.task(), at.base, f.rebase_onto(), Vec::new());
        let Some(mut j) = j else {
            let a = Arrival {
                task: f.task(),
                attempt: f.attempt(),
                start: &start,
                own: &BTreeSet::new(),
            };
            at.ledger.chain_rechecked(&a, checks, None);
            at.ui.say(format!(
                "  task {}: the re-check of its merge did not run in this part; it runs an ordinary attempt",
                f.task()
            ));
            continue;
        };
        let own = paths_of(at.plan, j.index, &j.touched);
        let passed = if j.verdict.status == Status::Completed && f.patch().is_some() {
            Ok(())
        } else {
            Err(j.verdict.result.clone())
        };
        let a = j.arrival(&start, &own);
        let step = at.ledger.chain_rechecked(&a, checks, Some(passed));
        // Its kept change was made on the base with the chain's earlier changes applied: it
        // is read there (onto the base alone its hunks may not apply).
        let before: Vec<PatchRef<'_>> = kept[..n].iter().map(Into::into).collect();
        let made_at = at.repo.tree_with_chain("HEAD", &before)?;
        let made_at = made_at.as_deref().unwrap_or("HEAD");
        let failed = match step {
            Some(Step::Land) => {
                let patch = f.patch().unwrap_or_default();
                crate::action::arrival::rechecked_lands(at.repo, &mut j, patch, made_at, at.ui);
                true
            }
            Some(step) => at.send_back(&mut j, step),
            None => merge_again(at, &f, &mut j, &start, &kept[..n], made_at)?,
        };
        if failed {
            at.land(j)?;
        }
    }
    Ok(())
}

/// Chain member `f` (this part's re-check `j`, started at `start`), whose re-check is void,
/// merged again from its kept change (made on the part's base with `before` applied: the
/// tree `made_at`) onto the round's tree and the new chain. Whether the caller integrates `j`
/// as a failed attempt.
fn merge_again(
    at: &mut Integrating<'_>,
    f: &FollowUp,
    j: &mut Judged,
    start: &Start,
    before: &[Vec<u8>],
    made_at: &str,
) -> Result<bool, ActionError> {
    let FollowUp::Recheck { checks, .. } = f else {
        return Ok(false);
    };
    let patch = f.patch().unwrap_or_default();
    j.touched = at
        .repo
        .patch_changes_at(made_at, &patch)
        .map(|(t, _)| t)
        .unwrap_or_default();
    let mine = paths_of(at.plan, j.index, &j.touched);
    // The checks it ran with, less those of changes that no longer come before it.
    let plan = &*at.plan;
    let on_tree = |k: usize| {
        plan.tasks
            .get(k)
            .is_some_and(|t| t.status == Status::Completed)
    };
    let who = at.ledger.merge_again_onto(start, &mine, checks, on_tree);
    j.patch = crate::edge::git::Patch::Bytes(patch);
    Ok(match at.aside(j, start, &mine, before.to_vec(), who)? {
        Step::Recheck { .. } => {
            at.ui.say(format!(
                "  task {}: its re-check ran beside a change that does not land; merged again onto what landed",
                j.index
            ));
            false
        }
        Step::Land | Step::Rebase(_) => false,
        Step::Fail { .. } => true,
    })
}
