//! What a writer of the branch does with the arrivals it judged — finalize with a round's
//! part, the conductor with a batch of task runs: a failed attempt with attempts left turned
//! back to pending (its retry prompt kept in the plan), a BLOCKED task's question asked,
//! the rest integrated and committed in the one round-commit format; and the stop when
//! nothing is pending.

use crate::action::report::RunStop;
use crate::action::{ActionError, steering};
use crate::edge::git::Repo;
use crate::flow::attempt::Judged;
use crate::flow::{RunEnd, RunOptions, Ui};
use crate::pure::graph::Dag;
use crate::pure::outcome::{self, Decision};
use crate::pure::plan::{self, fields::RETRY_PROMPT as RETRY_PROMPT_FIELD, model::Status};
use crate::pure::prompt::Unit;

/// Where a writer integrates: its checkout of the branch, the plan's DAG, the options the
/// local runner's integration takes, and the display.
#[derive(Clone, Copy)]
pub(crate) struct Integrator<'a> {
    pub repo: &'a Repo,
    pub dag: &'a Dag,
    pub opts: &'a RunOptions,
    pub ui: &'a Ui,
}

/// What every arrival goes through before it is integrated (its time and cost are recorded
/// by the caller: finalize, or the engine loop for the conductor): a failed attempt with attempts left turned back to pending, its patch
/// dropped and its retry prompt kept in the plan for the next attempt's job (`when` says
/// when that runs); the others' retry prompts dropped; a BLOCKED task's question asked.
pub(crate) fn prepare_arrivals(plan: &mut plan::model::Plan, judged: &mut [Judged], when: &str) {
    judged.sort_by_key(|j| j.index);
    for j in judged.iter_mut() {
        let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch) {
            Decision::Retry { prompt, .. } => Some(prompt),
            _ => None,
        };
        let t = &mut plan.tasks[j.index];
        match retry {
            Some(p) => {
                j.verdict.result = format!(
                    "attempt {} failed: {} — retried {when} (attempt {} of {})",
                    j.attempt,
                    j.verdict.result,
                    j.attempt + 1,
                    outcome::MAX_ATTEMPTS
                );
                j.verdict.status = Status::Pending;
                j.patch.clear();
                t.extra.insert(RETRY_PROMPT_FIELD.into(), p.into());
            }
            None => {
                t.extra.shift_remove(RETRY_PROMPT_FIELD);
            }
        }
    }
    for j in judged.iter() {
        if j.verdict.status == Status::Blocked && j.question.is_none() {
            let name = crate::pure::plan::ids::name(plan, j.index);
            let t = &mut plan.tasks[j.index];
            if crate::pure::question::get(t).is_none_or(|q| q.reply.is_some()) {
                crate::pure::question::set(
                    t,
                    &steering::blocked_question(&name, &j.verdict.result),
                );
            }
        }
    }
}

/// Integrates judged attempts as one round `round`, exactly as `dagexec run` does: a failed
/// attempt with attempts left goes back to pending with its retry prompt kept in the plan
/// (the next attempt's job reads it at its base), a BLOCKED task asks its question, completed
/// patches are applied and the plan updated ([`crate::flow::integrate::RoundBuild`]),
/// and the plan is committed in the one round-commit format even when no task completed.
/// Only the judged tasks' retry prompts are touched. Shared by finalize (a round's matrix)
/// by the conductor (`schedule: eager`, a batch of arrivals). Returns an end when the circuit
/// breaker trips.
pub(crate) fn integrate(
    at: Integrator<'_>,
    plan: &mut plan::model::Plan,
    mut judged: Vec<Judged>,
    round: u32,
) -> Result<Option<RunEnd>, ActionError> {
    let Integrator {
        repo,
        dag,
        opts,
        ui,
    } = at;
    // In task order, as `prepare_arrivals` sorts them.
    prepare_arrivals(plan, &mut judged, "as soon as a slot is free");
    let batch: Vec<usize> = judged.iter().map(|j| j.index).collect();
    let at = crate::flow::integrate::RoundCommit {
        repo,
        dag,
        batch: &batch,
        round,
        wave: None,
        opts,
        ui,
    };
    let mut build = crate::flow::integrate::RoundBuild::start();
    build.add(repo, plan, &judged, ui)?;
    let end = build.commit(at, plan)?;
    // The state is committed every round, even when no task completed, in the one round
    // commit format (the plan now holds each batch task's outcome).
    commit_round(repo, opts, plan, round, &batch)?;
    Ok(end)
}

/// The plan committed once a round (`batch`) is integrated, in the one round commit format
/// (the plan holds each task's outcome), and the round's processor batch file removed.
pub(crate) fn commit_round(
    repo: &Repo,
    opts: &RunOptions,
    plan: &plan::model::Plan,
    round: u32,
    batch: &[usize],
) -> Result<(), ActionError> {
    let done = plan.count(Status::Completed);
    let outcomes = crate::action::rounds::results_of(plan, batch);
    let message = crate::flow::integrate::commit_message(plan, round, batch, &outcomes, done);
    // The round's commit holds the plan as it stands, unless it made none (one git process
    // asks, for the three of staging it again to find nothing to commit).
    let text = crate::pure::plan::load::to_text(plan);
    if repo.read_at("HEAD", &opts.plan_rel)?.as_deref() != Some(text.as_bytes()) {
        repo.commit(&message, std::slice::from_ref(&opts.plan_rel))?;
    }
    let batch_file = format!(".design/processor-batch-{round}.json");
    let _ = crate::edge::fsx::remove_file(repo.root(), &repo.root().join(batch_file));
    Ok(())
}

/// The stop when nothing is pending (finalize's last round, the conductor's end): the seed's
/// Step 4 summary and clean-up ([`crate::flow::finish`]), then every task completed, or the
/// questions that wait for answers, or nothing to say (tasks failed or were skipped).
pub(crate) fn done_stop(
    repo: &Repo,
    plan: &mut plan::model::Plan,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<Option<RunStop>, ActionError> {
    let all = plan.tasks.iter().all(|t| t.status == Status::Completed);
    let open = crate::pure::question::open(plan).len();
    crate::flow::finish(repo, plan, opts, ui, None)?;
    Ok(if all {
        Some(RunStop::Completed)
    } else if open > 0 {
        Some(RunStop::NeedsInput(format!(
            "{open} question(s) wait for your answer; nothing else can run until then"
        )))
    } else {
        None
    })
}
