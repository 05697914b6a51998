//! A part of a round integrated (its outcomes into the plan, its patches on top of the
//! earlier parts'), and the round ended with the part that resolves its last task; the
//! artifacts' pages kept in the plan for the logs links.

use std::collections::BTreeMap;

use crate::action::ActionError;
use crate::action::arrival::{Integrator, prepare_arrivals};
use crate::flow::RunEnd;
use crate::flow::attempt::Judged;
use crate::pure::plan;

/// Integrates one part of the open round `open` (one workflow run: the judged attempts of
/// one conflict-free group of the round's unresolved tasks). A failed attempt with attempts
/// left stays pending in the round, its retry prompt kept in the plan for the next part; a
/// BLOCKED task asks its question; completed patches are applied on top of the earlier
/// parts' ([`crate::flow::integrate::RoundBuild`]). While tasks of the round remain
/// unresolved, the part commits its patches and the tasks' outcomes
/// (`dagexec: round R (part P) — …`, [`crate::action::rounds::part_message`]) and records the round
/// as open. The part that resolves the round's last task ends it as `dagexec run` ends a
/// round: one update (results, cascade) over the whole round, one circuit-breaker decision,
/// the round commit in its one format. Returns whether the round ended, and the end when
/// the circuit breaker trips. `merge`: the round runs under `overlap: merge`; `base`: the
/// commit every job of the part started from.
pub(super) fn integrate_part(
    at: Integrator<'_>,
    plan: &mut plan::model::Plan,
    open: &mut crate::action::rounds::OpenRound,
    judged: Vec<Judged>,
    merge: bool,
    base: &str,
) -> Result<(bool, Option<RunEnd>), ActionError> {
    let part: Vec<usize> = judged.iter().map(|j| j.index).collect();
    let mut build = crate::flow::integrate::RoundBuild::start();
    // `overlap: merge` (or follow-ups a merge left in the round): merged one by one.
    if merge || !open.follow_ups.is_empty() {
        super::merging::add(at, &mut build, plan, open, judged, base)?;
    } else {
        integrate_serial(at, &mut build, plan, judged)?;
    }
    finish_part(at, plan, build, open, &part)
}

/// The part's `judged` attempts integrated as under `serial`: each recorded and decided, the
/// completed ones' patches applied on `build`.
fn integrate_serial(
    at: Integrator<'_>,
    build: &mut crate::flow::integrate::RoundBuild,
    plan: &mut plan::model::Plan,
    mut judged: Vec<Judged>,
) -> Result<(), ActionError> {
    let Integrator { repo, ui, .. } = at;
    for j in &judged {
        super::merging::ended(plan, j, true, ui);
    }
    prepare_arrivals(plan, &mut judged, "in this round");
    build.add(repo, plan, &judged, ui)?;
    Ok(())
}

/// The part's outcomes into the plan, and its commit (or the round's, when it resolves the
/// round's last task).
fn finish_part(
    at: Integrator<'_>,
    plan: &mut plan::model::Plan,
    mut build: crate::flow::integrate::RoundBuild,
    open: &mut crate::action::rounds::OpenRound,
    part: &[usize],
) -> Result<(bool, Option<RunEnd>), ActionError> {
    let Integrator {
        repo,
        dag,
        opts,
        ui,
    } = at;
    // The part's outcomes go into its tasks now (a pending one runs in a later part); the
    // update itself waits for the round's end.
    let now: Vec<crate::pure::update::TaskResult> = build.results().to_vec();
    for r in &now {
        let t = &mut plan.tasks[r.index];
        t.status = r.status;
        t.result = Some(r.result.clone());
        t.attempts = Some(r.attempts);
    }
    if !open.unresolved(plan).is_empty() {
        open.parts += 1;
        open.write(plan);
        let message = crate::action::rounds::part_message(plan, open, open.parts, &now);
        build.commit_part(repo, plan, opts, &message, ui)?;
        ui.say(format!(
            "Round {}: part {} committed; {} of its {} task(s) wait for a later part.",
            open.round,
            open.parts,
            open.unresolved(plan).len(),
            open.tasks.len()
        ));
        return Ok((false, None));
    }
    // The round's update applies each task's outcome as the plan holds it (the parts wrote
    // them there).
    let earlier: Vec<usize> = open
        .tasks
        .iter()
        .copied()
        .filter(|t| !part.contains(t))
        .collect();
    build.resolved_earlier(crate::action::rounds::results_of(plan, &earlier));
    crate::action::rounds::clear(plan);
    let at = crate::flow::integrate::RoundCommit {
        repo,
        dag,
        batch: &open.tasks,
        round: open.round,
        wave: None,
        opts,
        ui,
    };
    let end = build.commit(at, plan)?;
    // The state is committed every round, even when no task completed, in the one round
    // commit format.
    crate::action::arrival::commit_round(repo, opts, plan, open.round, &open.tasks)?;
    Ok((true, end))
}

use crate::pure::plan::fields::LOGS as LOGS_FIELD;

pub(super) fn saved_logs(plan: &plan::model::Plan) -> BTreeMap<usize, String> {
    plan.progress
        .extra
        .get(LOGS_FIELD)
        .and_then(|v| v.as_object())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn save_logs(plan: &mut plan::model::Plan, logs: &BTreeMap<usize, String>) {
    if logs.is_empty() {
        return;
    }
    let map = serde_json::to_value(logs).expect("a map of strings serialises");
    plan.progress.extra.insert(LOGS_FIELD.into(), map);
}
