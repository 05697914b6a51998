//! `dagexec action plan`: the first job of a workflow run. Finds the execution branch (or
//! starts it from the triggering commit), reads the plan there, and writes the next part of
//! the round (see [`crate::action::rounds`]) as a job matrix. Read-only: the branch is created by the
//! first finalize's push.
//!
//! One execution branch is one concurrency group (`dagexec-<branch>`) from its first round
//! on. A run started without a `branch` input on another ref (Run workflow on `main`) is in
//! that ref's group, not the branch's, so it does no work: it resolves the branch and
//! concludes `redirect`, and finalize dispatches the first round again with the branch named,
//! into the branch's group. A run on the default branch redirects even with the branch named,
//! and finalize then starts the round on the execution branch itself (creating it at the
//! run's commit): no task code runs in a run of the default branch, whose Actions cache scope
//! every branch restores from.

use std::path::Path;

use crate::action::matrix::{MAX_MATRIX_JOBS, Matrix};
use crate::action::protocol::PlanConclusion;
use crate::action::{ActionError, Inputs, default_branch_name};
use crate::edge::git::{RemoteAuth, Repo};
use crate::flow::preflight::Overlaps;
use crate::flow::preflight::{self, checks};
use crate::pure::engine::{self, Next, Schedule, View};
use crate::pure::overlap::Policy;
use crate::pure::plan::{self, model::Status};

/// What the plan job decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub branch: String,
    pub base: String,
    pub round: u32,
    pub matrix: Option<Matrix>,
    /// What finalize (or the conductor) is handed: see [`PlanConclusion`].
    pub conclusion: PlanConclusion,
    /// Said in the log and the job summary.
    pub message: String,
}

/// Whether the plan's pre-flight checks (its commands) may run in this job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preflight {
    /// They run here: the read-only plan job, or, in a plan job that also conducts, as the
    /// agent's unprivileged user in a checkout it cannot write.
    Here,
    /// Not beside this job's write token (why): the checks count as failed, unless
    /// `/execute proceed` asked to go on without them.
    Refused(String),
}

/// Where the plan job runs: the run's ref (`GITHUB_REF_NAME`; empty outside Actions), the
/// repository's default branch (empty when unknown), the schedule and who may run the
/// pre-flight checks.
pub struct PlanJob<'a> {
    pub ref_name: &'a str,
    pub default_branch: &'a str,
    pub schedule: Schedule,
    pub preflight: Preflight,
}

/// Runs the plan job in the checkout at `root`.
pub fn run(root: &Path, inputs: &Inputs, job: &PlanJob<'_>) -> Result<Planned, ActionError> {
    let schedule = job.schedule;
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    let branch = match branch_of(&repo, inputs, job.ref_name, job.default_branch)? {
        Ok(branch) => branch,
        Err(redirect) => return Ok(redirect),
    };
    // The branch, when it exists, is where the state is; otherwise this commit starts it.
    let head = repo.head()?;
    let base = match repo.fetch_branch(&branch, &auth)? {
        Some(tip) if tip != head => {
            repo.checkout_detached(&tip)?;
            tip
        }
        _ => head,
    };
    let inputs = &crate::action::with_plan(repo.root(), inputs)?;
    let (mut plan, archived) = crate::action::load_plan(&repo, &inputs.plan_rel)?;
    // Every task completed and the plan archived, but the run not finished on GitHub (its
    // last job died after pushing the archive): finalize finishes it (pull request ready,
    // status comment, check run).
    if let Some(rel) = archived {
        let round = crate::flow::round_counter(&plan);
        return Ok(Planned {
            message: format!(
                "All {} tasks are completed and the plan is archived as {rel}; finishing the run (pull request, status comment, check run).",
                plan.total()
            ),
            branch,
            base,
            round,
            matrix: None,
            conclusion: PlanConclusion::Completed,
        });
    }
    let dag = crate::pure::validate::check(&plan, Some(&inputs.plan_rel))?;
    // A run that died mid-round leaves nothing in progress on the branch (finalize commits
    // resolved states only), but a plan pushed from a local run might.
    (plan.tasks.iter_mut())
        .filter(|t| t.status == Status::InProgress)
        .for_each(|t| t.status = Status::Pending);
    let round = crate::flow::round_counter(&plan) + 1;
    let overlaps = Overlaps::of(&plan, &dag);
    let at = At {
        branch,
        base,
        round,
    };
    // A fresh start runs the pre-flight checks: not a resume, and no round open on the branch
    // (round 1 retried in a later part is not a fresh start).
    if !plan.is_resume()
        && round == 1
        && !plan
            .progress
            .extra
            .contains_key(crate::action::rounds::FIELD)
        && let Some(failed) =
            preflight_failed(&repo, &plan, &dag, &overlaps, inputs, &job.preflight)
    {
        return Ok(at.done(PlanConclusion::PreflightFailed, failed));
    }
    // `overlap: merge`: a round's tasks that share files form one matrix, and the matrix says
    // so, so finalize integrates it by merging (see `rounds::follow`); under `schedule: eager`
    // the conductor starts them side by side and merges each arrival as it comes
    // (`conduct::merging`).
    let policy = crate::action::overlap_policy(repo.root(), inputs)?;
    let merge = policy == Policy::Merge && schedule != Schedule::Eager;
    if policy == Policy::Merge && !merge {
        println!(
            "overlap: merge: the conductor starts tasks that share files side by side and merges each result onto the branch; a merge that combined work lands after a re-check run."
        );
    }
    let policy = if merge { policy } else { Policy::Serial };
    let conflicts = policy.for_scheduling(overlaps.for_scheduling(), plan.tasks.len());
    let view = View {
        plan: &plan,
        dag: &dag,
        conflicts: &conflicts,
    };
    let mut planned = next(view, schedule, inputs, at);
    if let Some(m) = planned.matrix.as_mut() {
        m.merge = merge;
    }
    Ok(planned)
}

/// The execution branch: the `branch` input, else the goal's. A run started on another ref
/// (`ref_name`) without a `branch` input, or on the default branch (`default_branch`) at all,
/// is redirected (`Err`) into the branch's concurrency group.
fn branch_of(
    repo: &Repo,
    inputs: &Inputs,
    ref_name: &str,
    default_branch: &str,
) -> Result<Result<String, Planned>, ActionError> {
    // Without a `branch` input, the goal names it: only the goal is read, and not held while
    // the branch's plan is read. With one, the plan need not exist here (a plan made of
    // issues is committed on its branch only).
    let branch = if inputs.branch.is_empty() {
        let first_inputs = crate::action::with_plan(repo.root(), inputs)?;
        let first_goal = crate::edge::plan_file::load(&repo.root().join(&first_inputs.plan_rel))
            .map_err(crate::pure::plan::error::PlanErrors::from)?
            .goal;
        default_branch_name(&first_goal)
    } else {
        inputs.branch.clone()
    };
    // A run on the default branch never runs task code, even with the branch named: the work
    // jobs' runtime token could write the default branch's Actions cache scope, which every
    // branch's runs restore from and the install step trusts without a pin.
    let on_default = !default_branch.is_empty() && ref_name == default_branch;
    if !default_branch.is_empty() && branch == default_branch {
        return Err(ActionError::Input(format!(
            "the execution branch is the default branch ({branch}): rounds are committed to a branch of their own and reviewed in a pull request to {branch}, and no task code runs in a run of the default branch. Leave the branch input empty (dagexec/<goal slug>) or name another branch"
        )));
    }
    if !((inputs.branch.is_empty() || on_default) && !ref_name.is_empty() && ref_name != branch) {
        return Ok(Ok(branch));
    }
    Ok(Err(Planned {
        base: repo.head()?,
        round: 0,
        matrix: None,
        conclusion: PlanConclusion::Redirect,
        message: format!(
            "The plan runs on {branch}; its rounds run in that branch's concurrency group, so this run starts the round there (workflow_dispatch with branch: {branch})."
        ),
        branch,
    }))
}

/// Where the plan job concludes: the branch, its base and the round.
struct At {
    branch: String,
    base: String,
    round: u32,
}

impl At {
    /// A conclusion without work.
    fn done(self, conclusion: PlanConclusion, message: String) -> Planned {
        Planned {
            branch: self.branch,
            base: self.base,
            round: self.round,
            matrix: None,
            conclusion,
            message,
        }
    }
}

/// A fresh run's blocking pre-flight checks: what failed (unless `/execute proceed` asked
/// to run anyway). Where they may not run (`preflight`), each counts as failed with the
/// reason, and none runs.
fn preflight_failed(
    repo: &Repo,
    plan: &plan::model::Plan,
    dag: &crate::pure::graph::Dag,
    overlaps: &Overlaps,
    inputs: &Inputs,
    preflight: &Preflight,
) -> Option<String> {
    let refused = match preflight {
        Preflight::Here => None,
        Preflight::Refused(why) => Some(why),
    };
    let validation = checks::gather(
        plan,
        repo.root(),
        checks::CheckOptions {
            skip_checks: refused.is_some(),
            timeout: inputs.timeout,
        },
    );
    let setup = preflight::output(plan, dag, overlaps, validation);
    let mut failed: Vec<String> = setup
        .validation
        .blocking_checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("task {}: {} — `{}` failed", c.task, c.claim, c.verify))
        .collect();
    if let Some(why) = refused {
        for (i, t) in plan.tasks.iter().enumerate() {
            for a in t.assumptions().iter().filter(|a| a.is_blocking()) {
                failed.push(format!(
                    "task {i}: {} — `{}` not run: {why}",
                    a.claim, a.verify
                ));
            }
        }
    }
    let proceed = plan
        .progress
        .extra
        .get(crate::action::steering::PROCEED_FIELD)
        .and_then(|v| v.as_str())
        == Some("proceed");
    if failed.is_empty() {
        return None;
    }
    if proceed {
        println!(
            "{} blocking pre-flight check(s) failed; proceeding, as `/execute proceed` asked.",
            failed.len()
        );
        return None;
    }
    Some(format!(
        "{} blocking pre-flight check(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    ))
}

/// What runs next. `rounds`: the seed's round is the whole ready set; a job matrix cannot
/// order its jobs, so a round takes a workflow run per group of tasks that share files and
/// per retry (see `rounds`). An open round on the branch goes on before anything else.
fn next(view: View<'_>, schedule: Schedule, inputs: &Inputs, at: At) -> Planned {
    let View {
        plan,
        dag,
        conflicts,
    } = view;
    let current = (schedule != Schedule::Eager)
        .then(|| crate::action::rounds::current(plan, dag))
        .flatten();
    for note in current.iter().flat_map(|c| &c.notes) {
        println!("{note}");
    }
    // Once the `max-cost` budget is spent no worker starts: no round, and no part of one (as
    // locally, where a round's groups that have not started never start) but for the
    // re-checks of merges it bought, which run none.
    let spent = inputs.max_cost.and_then(|b| b.exhausted(plan));
    if let Some(c) = current.as_ref().filter(|c| c.resumed) {
        let part = c.open.next_part(plan, dag, conflicts);
        if part.is_empty() {
            let message = format!(
                "Round {} on {}: every task of it is resolved; finalize ends the round (its update and circuit breaker).",
                c.open.round, at.branch
            );
            return at.done(PlanConclusion::CloseRound, message);
        }
        let part = match spent {
            Some(why) if !part.iter().any(|&t| c.open.rechecks(t)) => {
                return at.done(PlanConclusion::Budget, why);
            }
            Some(_) => part.into_iter().filter(|&t| c.open.rechecks(t)).collect(),
            None => part,
        };
        return work(plan, &c.open, part, at.branch, at.base);
    }
    // The Action has no waves: its rounds.
    let policy = match schedule {
        Schedule::Eager => Schedule::Eager,
        _ => Schedule::Rounds,
    };
    match policy.next(view, None) {
        Next::Done => {
            let all = plan
                .tasks
                .iter()
                .all(|t| t.join || t.status == Status::Completed);
            if all {
                let message = format!("All {} tasks are completed.", plan.total());
                at.done(PlanConclusion::Completed, message)
            } else {
                let message = format!(
                    "No task is pending: {}/{} completed; the rest failed, were blocked or skipped.",
                    plan.count(Status::Completed),
                    plan.total()
                );
                at.done(PlanConclusion::Incomplete, message)
            }
        }
        Next::Deadlock { pending } => {
            at.done(PlanConclusion::Deadlock, engine::deadlock_message(pending))
        }
        // Work waits, but the budget is spent.
        Next::Batch { .. } if spent.is_some() => {
            at.done(PlanConclusion::Budget, spent.unwrap_or_default())
        }
        Next::Batch { tasks, .. } if schedule == Schedule::Eager => {
            let ready = tasks.len();
            let message = format!(
                "Eager on {} at {}: the conductor starts each task as its own run as soon as it is ready ({ready} ready now).",
                at.branch,
                &at.base[..at.base.len().min(12)]
            );
            at.done(PlanConclusion::Conduct, message)
        }
        Next::Batch { .. } => {
            let open = current.map(|c| c.open).expect("a ready set starts a round");
            let part = open.next_part(plan, dag, conflicts);
            work(plan, &open, part, at.branch, at.base)
        }
    }
}

/// A part of round `open` (its first when `open.parts` is 0): `part`'s tasks as the matrix;
/// the round's other unresolved tasks wait for a later part.
#[expect(
    clippy::needless_pass_by_value,
    reason = "the part is the matrix this job hands on"
)]
fn work(
    plan: &plan::model::Plan,
    open: &crate::action::rounds::OpenRound,
    part: Vec<usize>,
    branch: String,
    base: String,
) -> Planned {
    let mut m = Matrix::of(plan, &part, MAX_MATRIX_JOBS);
    // A merge's re-check or a rebase continues its attempt (`overlap: merge`).
    for e in &mut m.include {
        e.attempt = open.entry_attempt(plan, e.task);
    }
    m.waiting.extend(
        open.unresolved(plan)
            .into_iter()
            .filter(|t| !part.contains(t)),
    );
    m.waiting.sort_unstable();
    let names: Vec<String> = m.include.iter().map(|e| e.name.clone()).collect();
    let round = open.round;
    // A part larger than a matrix holds runs its first jobs now, the rest in a later part.
    let cut = if part.len() > m.include.len() {
        format!(" exceed the {MAX_MATRIX_JOBS} jobs a matrix holds, or")
    } else {
        String::new()
    };
    let of = if m.include.len() == open.tasks.len() {
        String::new()
    } else {
        format!(
            " of the round's {} (part {}; the rest{cut} share files with them, wait for a retry or were resolved earlier)",
            open.tasks.len(),
            open.parts + 1
        )
    };
    let message = format!(
        "Round {round} on {branch} at {}: {} task(s){of}\n{}",
        &base[..base.len().min(12)],
        m.include.len(),
        names.join("\n")
    );
    Planned {
        branch,
        base,
        round,
        matrix: Some(m),
        conclusion: PlanConclusion::Work,
        message,
    }
}

/// The step outputs of a plan.
pub fn outputs(p: &Planned) -> Vec<(&'static str, String)> {
    vec![
        (
            "matrix",
            p.matrix
                .as_ref()
                .map_or_else(|| r#"{"include":[]}"#.into(), Matrix::to_json),
        ),
        ("has-work", p.matrix.is_some().to_string()),
        ("base", p.base.clone()),
        ("round", p.round.to_string()),
        ("branch", p.branch.clone()),
        ("conclusion", p.conclusion.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_cut_to_the_matrix_limit_says_so() {
        let tasks: Vec<serde_json::Value> = (0..300)
            .map(|i| serde_json::json!({"subject": format!("T{i}"), "status": "pending", "blockedBy": []}))
            .collect();
        let plan: plan::model::Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "tasks": tasks
        }))
        .unwrap();
        let open = crate::action::rounds::OpenRound {
            round: 1,
            tasks: (0..300).collect(),
            parts: 0,
            follow_ups: Vec::new(),
        };
        let p = work(
            &plan,
            &open,
            (0..300).collect(),
            "b".into(),
            "c0ffee".into(),
        );
        let m = p.matrix.unwrap();
        assert_eq!((m.include.len(), m.waiting.len()), (256, 44));
        assert!(
            p.message.contains("256 task(s) of the round's 300 (part 1; the rest exceed the 256 jobs a matrix holds"),
            "{}",
            p.message
        );
    }
}
