//! An earlier run's state carried over to a plan read again from its file: each task is known
//! by the `(id, text)` its reader recorded under the plan's field; a task whose identity is
//! unchanged keeps its state, unless the team changed its status mark in the file since.

use crate::pure::plan::model::{Plan, Status};

/// The tasks kept under the plan field `field` (plan-level, since completion trims tasks);
/// none when it holds no list.
fn kept<'p>(plan: &'p Plan, field: &str) -> &'p [serde_json::Value] {
    plan.extra
        .get(field)
        .and_then(|v| v.get("tasks"))
        .and_then(|v| v.as_array())
        .map_or(&[], Vec::as_slice)
}

/// The `(id, text)` pairs kept under the plan field `field`.
pub(crate) fn identities(plan: &Plan, field: &str) -> Vec<(String, String)> {
    kept(plan, field)
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or("").to_string(),
                t["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The status marks kept under the plan field `field` (see [`super::Unit::mark`]), by task;
/// empty for a plan written before marks were kept.
fn marks(plan: &Plan, field: &str) -> Vec<Option<String>> {
    kept(plan, field)
        .iter()
        .map(|t| t.get("mark").and_then(|m| m.as_str()).map(str::to_string))
        .collect()
}

/// After an earlier run's state is carried over: a task the cascade skipped whose cause is
/// gone (the failed task the team cancelled, reopened or marked done) is pending again; then
/// each open task waits for the open ones before it through finished ones; a join is done
/// when its blockers are.
pub(crate) fn settle(plan: &mut Plan) {
    if let Ok(dag) = crate::pure::graph::Dag::build(plan) {
        crate::pure::update::reopen_stale_skips(plan, &dag);
    }
    crate::pure::graph::order_through_finished(plan);
    if crate::pure::join::any(plan)
        && let Ok(dag) = crate::pure::graph::Dag::build(plan)
    {
        crate::pure::join::settle(plan, &dag);
    }
}

/// Carries the state of `old` (an earlier generated plan) over to `fresh`, both with their
/// identities kept under the plan field `field`: a task whose ID and text are unchanged keeps
/// its status, result, attempts and extra fields (reviews, question); a task done in the file
/// stays completed. Other tasks start afresh. The records of its attempts follow a task by its
/// identity alone; those of a task no longer in the file are dropped.
pub(crate) fn carry_over(fresh: &mut Plan, old: &Plan, field: &str) {
    let old_ids = identities(old, field);
    let new_ids = identities(fresh, field);
    let (now, then) = (marks(fresh, field), marks(old, field));
    let mut same: Vec<Option<usize>> = vec![None; old.tasks.len()];
    for (i, id) in new_ids.iter().enumerate() {
        let Some(j) = old_ids.iter().position(|o| o == id) else {
            continue;
        };
        if j < old.tasks.len() && i < fresh.tasks.len() {
            same[j] = Some(i);
        }
    }
    // The task is the same; its state carries over unless the team changed its status.
    let mut moved = same.clone();
    for (j, to) in moved.iter_mut().enumerate() {
        if let Some(i) = *to
            && changed(
                now.get(i).cloned().flatten(),
                then.get(j).cloned().flatten(),
                fresh.tasks[i].status,
                old,
                j,
            )
        {
            *to = None;
        }
    }
    crate::pure::plan::carry::carry_state(fresh, old, &moved, &same, field, |_| false);
}

/// Whether the team changed the status of the task (old `j`, whose fresh status is `fresh`)
/// in its file since dagexec read it (its status mark there `now`, and `then` when dagexec
/// read it last): then
/// the file's status wins and the task starts afresh (`pending` gives fresh attempts; `done`
/// and `cancelled` are the file's already). A task dagexec completed whose file no longer says
/// so was reopened — unless its round is still open on the Action (`progress.dagexecRound`),
/// whose status is written when the round ends.
fn changed(now: Option<String>, then: Option<String>, fresh: Status, old: &Plan, j: usize) -> bool {
    let (Some(now), Some(then)) = (now, then) else {
        return false;
    };
    if fresh == Status::Completed {
        return false;
    }
    if old.tasks[j].status == Status::Completed {
        let open_round = old
            .progress
            .extra
            .get(crate::pure::plan::fields::ROUND)
            .and_then(|r| r.get("tasks"))
            .and_then(|t| t.as_array())
            .is_some_and(|t| t.iter().any(|x| x.as_u64() == Some(j as u64)));
        return !(open_round && now == then);
    }
    now != then
}
