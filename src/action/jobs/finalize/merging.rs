//! A part under `overlap: merge` (see [`crate::action::rounds::follow`]): its arrivals
//! integrated one by one — the re-checked follow-ups first, then the rest in plan order. One
//! that shares no path with what landed before it lands as under `serial`; one that does is
//! merged three-way onto the round's tree without landing ([`RoundBuild::trial_merge`]: trees
//! only, no code runs here) and waits for the next part: a clean merge to be re-checked there
//! by a job without the write token, a conflict to run again as an uncounted rebase attempt.
//! An attempt that was a rebase already and still cannot land is a failed attempt.

use std::collections::BTreeSet;

use crate::action::ActionError;
use crate::action::arrival::prepare_arrivals;
use crate::action::rounds::{FollowUp, OpenRound};
use crate::edge::git::{Merged, Patch, Repo};
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::integrate::RoundBuild;
use crate::pure::outcome::{self, Decision};
use crate::pure::plan::model::{Plan, Status};
use crate::pure::prompt::Unit;

/// Integrates the part's `judged` attempts into `build` (the round's tree at `base`, where
/// every job of the part started); the follow-ups for the next part go into `open`.
pub(super) fn add(
    (repo, ui): (&Repo, &Ui),
    build: &mut RoundBuild,
    plan: &mut Plan,
    judged: Vec<Judged>,
    open: &mut OpenRound,
    base: &str,
) -> Result<(), ActionError> {
    let items = in_order(open, judged);
    let mut landed: Vec<(usize, BTreeSet<String>)> = Vec::new();
    for (mut j, follow) in items {
        let after_rebase = follow.as_ref().is_some_and(FollowUp::after_rebase);
        if let Some(f @ FollowUp::Recheck { checks, .. }) = &follow {
            if !rechecked_lands(repo, &mut j, f, ui) {
                let why = j.verdict.result.clone();
                if !send_back(plan, open, &mut j, (checks.clone(), why, after_rebase), ui) {
                    continue;
                }
            }
        } else {
            j.rebase = matches!(follow, Some(FollowUp::Rebase { .. }));
            ended(plan, &j, ui);
        }
        let mine: BTreeSet<String> = j
            .touched
            .iter()
            .cloned()
            .chain(
                plan.tasks[j.index]
                    .files()
                    .map(|f| crate::pure::paths::key(f)),
            )
            .collect();
        let sharing: Vec<usize> = landed
            .iter()
            .filter(|(_, p)| !p.is_disjoint(&mine))
            .map(|(k, _)| *k)
            .collect();
        if j.verdict.status == Status::Completed && !j.patch.is_empty() && !sharing.is_empty() {
            let at = Trial {
                repo,
                build,
                base,
                ui,
            };
            let why = match merge_aside(&at, plan, &j, (&mine, &sharing), after_rebase)? {
                Ok(f) => {
                    open.follow_ups.push(f);
                    continue;
                }
                Err(why) => why,
            };
            if !send_back(plan, open, &mut j, (sharing, why, after_rebase), ui) {
                continue;
            }
        }
        prepare_arrivals(plan, std::slice::from_mut(&mut j), "in this round");
        build.add(repo, plan, std::slice::from_ref(&j), ui)?;
        let lands = build
            .results()
            .iter()
            .rev()
            .find(|r| r.index == j.index)
            .is_some_and(|r| r.status == Status::Completed);
        if lands {
            landed.push((j.index, mine));
        }
    }
    Ok(())
}

/// The part's arrivals, each with the follow-up it continues (taken out of `open`): the
/// re-checks first, then the rest, each in plan order.
fn in_order(open: &mut OpenRound, judged: Vec<Judged>) -> Vec<(Judged, Option<FollowUp>)> {
    let part: BTreeSet<usize> = judged.iter().map(|j| j.index).collect();
    let mut following = Vec::new();
    open.follow_ups.retain(|f| {
        let mine = part.contains(&f.task());
        if mine {
            following.push(f.clone());
        }
        !mine
    });
    let mut items: Vec<(Judged, Option<FollowUp>)> = judged
        .into_iter()
        .map(|j| {
            let f = following
                .iter()
                .find(|f| f.task() == j.index && f.attempt() == j.attempt)
                .cloned();
            (j, f)
        })
        .collect();
    let rechecked = |f: &Option<FollowUp>| matches!(f, Some(FollowUp::Recheck { .. }));
    items.sort_by_key(|(j, f)| (!rechecked(f), j.index));
    items
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
fn ended(plan: &mut Plan, j: &Judged, ui: &Ui) {
    if let Some(r) = j.record() {
        crate::pure::usage::record(plan, &r);
    }
    let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch) {
        Decision::Retry { attempt, .. } => Some(attempt),
        _ => None,
    };
    ui.emit(crate::pure::events::Event::AttemptEnded(
        crate::flow::exec::ended(plan, j, retry),
    ));
}

/// Where a merge is tried: the checkout, the round so far, the part's base, the display.
struct Trial<'a> {
    repo: &'a Repo,
    build: &'a RoundBuild,
    base: &'a str,
    ui: &'a Ui,
}

/// Merges completed attempt `j` (its paths `mine`) onto the round beside `sharing` without
/// landing it: the re-check it waits for, or why it cannot land (a conflict, a path it does
/// not declare, a merge too large to keep).
fn merge_aside(
    at: &Trial<'_>,
    plan: &mut Plan,
    j: &Judged,
    (mine, sharing): (&BTreeSet<String>, &[usize]),
    after_rebase: bool,
) -> Result<Result<FollowUp, String>, ActionError> {
    let (changed, patch) = match at.build.trial_merge(at.repo, at.base, j.patch.borrowed())? {
        Merged::Clean { changed, patch, .. } => (changed, patch),
        Merged::Conflict { files, account } => {
            return Ok(Err(format!("conflict in {}\n{account}", files.join(", "))));
        }
    };
    let foreign: Vec<&str> = changed
        .iter()
        .filter(|c| !mine.contains(*c))
        .map(String::as_str)
        .collect();
    if !foreign.is_empty() {
        return Ok(Err(format!(
            "the merge changes {}, which task {} does not declare",
            foreign.join(", "),
            j.index
        )));
    }
    let f = match FollowUp::recheck(j.index, j.attempt, &patch, sharing.to_vec(), after_rebase) {
        Ok(f) => f,
        Err(why) => return Ok(Err(why)),
    };
    // Its review (if any) concluded now: the re-check reports none.
    crate::flow::steps::questions::record(plan, j);
    let names: Vec<String> = sharing.iter().map(|k| format!("task {k}")).collect();
    at.ui.say(format!(
        "  task {}: attempt {} merges cleanly onto {}; it lands after the next part's job re-checks the merged tree",
        j.index,
        j.attempt,
        names.join(", ")
    ));
    waits(
        plan,
        j,
        format!(
            "attempt {} merged cleanly beside {}; its re-check runs in the round's next part",
            j.attempt,
            names.join(", ")
        ),
    );
    Ok(Ok(f))
}

/// Attempt `j` cannot land (`why`, beside `onto`): the first time, it waits for a rebase
/// attempt in the next part (`false`: nothing more to do with it now); after a rebase it is a
/// failed attempt, decided as any (`true`: the caller integrates it as failed).
fn send_back(
    plan: &mut Plan,
    open: &mut OpenRound,
    j: &mut Judged,
    (onto, why, after_rebase): (Vec<usize>, String, bool),
    ui: &Ui,
) -> bool {
    let line = crate::pure::sanitize::line(why.lines().next().unwrap_or_default());
    let line: String = line.chars().take(300).collect();
    crate::pure::usage::amend(plan, j.index, j.attempt, |r| {
        r.outcome = crate::pure::usage::Outcome::Conflict;
    });
    if after_rebase {
        j.verdict.status = Status::Failed;
        j.verdict.result = format!("it cannot be merged after its rebase: {line}");
        j.patch.clear();
        return true;
    }
    let names: Vec<String> = onto.iter().map(|k| format!("task {k}")).collect();
    ui.say(format!(
        "  task {}: attempt {} cannot land beside {} ({line}); it runs again as a rebase attempt from the integrated tree in the round's next part",
        j.index,
        j.attempt,
        names.join(", ")
    ));
    waits(
        plan,
        j,
        format!(
            "attempt {} runs again as a rebase attempt: {line}",
            j.attempt
        ),
    );
    const KEPT: usize = 16 << 10;
    open.follow_ups.push(FollowUp::Rebase {
        task: j.index,
        attempt: j.attempt,
        onto,
        why: why.chars().take(KEPT).collect(),
    });
    false
}

/// Task `j` stays pending in the round with its attempt counted, `result` saying why.
fn waits(plan: &mut Plan, j: &Judged, result: String) {
    let t = &mut plan.tasks[j.index];
    t.status = Status::Pending;
    t.attempts = Some(t.attempts().max(j.attempt));
    t.result = Some(result);
}
