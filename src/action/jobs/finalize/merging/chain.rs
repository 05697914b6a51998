//! The chain of a part under `overlap: merge` (see [`super`]): the previous finalize's
//! re-checked merges landed as far as their re-checks passed, the rest merged again, and a
//! rebase whose job built on that chain landed after it or merged again.

use std::collections::BTreeSet;

use crate::action::ActionError;
use crate::action::rounds::FollowUp;
use crate::edge::git::PatchRef;
use crate::flow::attempt::Judged;
use crate::pure::integration::CannotLand;
use crate::pure::plan::model::Status;

use super::{Integrating, rechecked_lands};
use crate::pure::integration::paths_of;

/// Whether rebase `j`, built on the chain's candidates `on`, failed beside one that did not
/// land (`landed`: what landed so far): its failure may be that change's, not its own.
pub(super) fn failed_beside_rejected(
    j: &Judged,
    on: &[(usize, Vec<u8>)],
    landed: &[usize],
) -> bool {
    j.verdict.status == Status::Failed && !on.iter().all(|(k, _)| landed.contains(k))
}

/// A rebase `j` whose job built on the previous chain's candidates `on` (task, merged patch;
/// its patch was read against the base with them applied). When they all landed and nothing
/// else that landed shares its paths, the tree it lands on is, in its paths, the one its job
/// judged it on (and ran their checks on): it lands as under `serial`. Otherwise it is merged
/// onto the round's tree and the new chain with those patches as the merge base (a cherry-pick
/// that leaves out a candidate that did not land) and re-checked in the next part; a conflict
/// fails it when everything it built on landed, else sends it back once more.
pub(super) fn rebased_on_chain(
    at: &mut Integrating<'_>,
    mut j: Judged,
    on: &[(usize, Vec<u8>)],
) -> Result<(), ActionError> {
    let mine = paths_of(at.plan, j.index, &j.touched);
    let sharing = at.sharing(&mine);
    let landed: Vec<usize> = at.landed.iter().map(|(l, _)| *l).collect();
    let all_landed = on.iter().all(|(k, _)| landed.contains(k));
    let built_on = |k: &usize| on.iter().any(|(o, _)| o == k);
    // Its job judged it on a tree holding a candidate that did not land (its re-check
    // failed): a failed verdict may be that change's, not its own (another task's check
    // failing beside it), so it is no failed attempt — like the chain's later candidates, it
    // is tried again without that change: sent back once more, uncounted.
    if failed_beside_rejected(&j, on, &landed) {
        let rejected: Vec<usize> = on
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !landed.contains(k))
            .collect();
        let why = format!(
            "it failed beside the change of {}, which did not land: {}",
            crate::pure::integration::names(&rejected),
            j.verdict.result.lines().next().unwrap_or_default()
        );
        at.sent.push((j.index, mine.clone()));
        j.patch.clear();
        // It builds again on what it shares paths with (not on the rejected change, which
        // goes back itself): their checks run with its own.
        let cannot = CannotLand {
            onto: sharing.clone(),
            why,
        };
        // Not after a rebase of its own (`false`): it always waits for the next part.
        at.send_back(&mut j, cannot, false);
        return Ok(());
    }
    if j.verdict.status != Status::Completed
        || j.patch.is_empty()
        || (all_landed && sharing.iter().all(built_on))
    {
        return at.land(j, mine);
    }
    let made_on: Vec<PatchRef<'_>> = on.iter().map(|(_, p)| p.into()).collect();
    let merged = at.merge_aside(&made_on, j.patch.borrowed(), j.index, &mine)?;
    match merged.and_then(|p| at.keep(&j, p, &sharing, true)) {
        Ok(kept) => {
            crate::flow::steps::questions::record(at.plan, &j);
            at.aside.push((j.index, mine, kept));
            Ok(())
        }
        Err(why) => {
            at.sent.push((j.index, mine.clone()));
            let cannot = CannotLand { onto: sharing, why };
            if at.send_back(&mut j, cannot, all_landed) {
                at.land(j, mine)?;
            }
            Ok(())
        }
    }
}

/// The previous finalize's chain, in its order, each with this part's re-check of it (`None`:
/// it did not run in this part). The prefix whose re-checks passed lands; the first failure
/// goes back (a rebase, or a failed attempt after one); each later one was checked on a tree
/// holding a change that does not land, so its kept change is merged again onto what landed.
pub(super) fn land_chain(
    at: &mut Integrating<'_>,
    chain: Vec<(FollowUp, Option<Judged>)>,
) -> Result<(), ActionError> {
    let kept: Vec<Vec<u8>> = chain
        .iter()
        .map(|(f, _)| f.patch().unwrap_or_default())
        .collect();
    let mut intact = true;
    for (n, (f, j)) in chain.into_iter().enumerate() {
        let FollowUp::Recheck {
            checks, rebased, ..
        } = &f
        else {
            continue;
        };
        let Some(mut j) = j else {
            intact = false;
            at.ui.say(format!(
                "  task {}: the re-check of its merge did not run in this part; it runs an ordinary attempt",
                f.task()
            ));
            continue;
        };
        if intact && rechecked_lands(at.repo, &mut j, &f, at.ui) {
            let mine = paths_of(at.plan, j.index, &j.touched);
            at.land(j, mine)?;
            continue;
        }
        let back = if intact {
            intact = false;
            let cannot = CannotLand {
                onto: checks.clone(),
                why: j.verdict.result.clone(),
            };
            at.sent
                .push((j.index, paths_of(at.plan, j.index, &j.touched)));
            at.send_back(&mut j, cannot, *rebased)
        } else {
            merge_again(at, &f, &mut j, &kept[..n])?
        };
        if back {
            let mine = paths_of(at.plan, j.index, &j.touched);
            at.land(j, mine)?;
        }
    }
    Ok(())
}

/// Chain member `f` (this part's re-check `j`), whose re-check is void, merged again from its
/// kept change (made on the part's base with `before` applied) onto the round's tree and the
/// new chain. Whether the caller integrates `j` as a failed attempt (see [`send_back`]).
fn merge_again(
    at: &mut Integrating<'_>,
    f: &FollowUp,
    j: &mut Judged,
    before: &[Vec<u8>],
) -> Result<bool, ActionError> {
    let FollowUp::Recheck {
        checks, rebased, ..
    } = f
    else {
        return Ok(false);
    };
    let patch = f.patch().unwrap_or_default();
    j.touched = at
        .repo
        .patch_changes(&patch)
        .map(|(t, _)| t)
        .unwrap_or_default();
    let mine = paths_of(at.plan, j.index, &j.touched);
    let sharing = at.sharing(&mine);
    // The checks it ran with, less those of changes that no longer come before it.
    let mut who: Vec<usize> = checks
        .iter()
        .copied()
        .filter(|&k| {
            at.plan
                .tasks
                .get(k)
                .is_some_and(|t| t.status == Status::Completed)
        })
        .chain(sharing.iter().copied())
        .collect();
    let mut seen = BTreeSet::new();
    who.retain(|k| seen.insert(*k));
    let made_on: Vec<PatchRef<'_>> = before.iter().map(Into::into).collect();
    let merged = at.merge_aside(&made_on, (&patch).into(), j.index, &mine)?;
    match merged.and_then(|p| at.keep(j, p, &who, *rebased)) {
        Ok(kept) => {
            at.ui.say(format!(
                "  task {}: its re-check ran beside a change that does not land; merged again onto what landed",
                j.index
            ));
            at.aside.push((j.index, mine, kept));
            Ok(false)
        }
        Err(why) => {
            at.sent.push((j.index, mine));
            let cannot = CannotLand { onto: sharing, why };
            Ok(at.send_back(j, cannot, *rebased))
        }
    }
}
