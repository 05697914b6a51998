//! The end of a round: completed patches applied in plan-index order (a patch that no longer
//! applies sends its task back to the next round), the processor batch file, the plan
//! update, and the round commit.

use std::collections::BTreeSet;

use super::attempt::Judged;
use super::{RunEnd, RunError, RunOptions, Ui, failpoint, list, save};
use crate::git::Repo;
use crate::graph::Dag;
use crate::outcome::{self, BatchEntry};
use crate::plan;
use crate::plan::model::{Plan, Status};
use crate::render::summary;
use crate::update::{self, RoundNotes, TaskResult};

/// Applies completed patches in plan-index order, updates the plan, writes the processor
/// batch file, and commits the round. Returns an end when the circuit breaker trips.
#[allow(clippy::too_many_arguments)]
pub(crate) fn integrate_and_commit(
    repo: &Repo,
    plan: &mut Plan,
    dag: &Dag,
    batch: &[usize],
    judged: Vec<Judged>,
    round: u32,
    wave: Option<u64>,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<Option<RunEnd>, RunError> {
    let mut results = Vec::new();
    let mut entries = Vec::new();
    let mut applied: Vec<(usize, BTreeSet<String>)> = Vec::new();
    for j in &judged {
        super::hooks::record(plan, j);
        let mut status = j.verdict.status;
        let mut result = j.verdict.result.clone();
        if status == Status::Completed && !j.patch.is_empty() {
            match repo.check_patch(&j.patch) {
                Ok(()) => {
                    repo.apply_patch(&j.patch)
                        .map_err(|e| RunError::Other(e.message))?;
                    applied.push((j.index, j.touched.iter().cloned().collect()));
                }
                Err(e) => {
                    let touched: BTreeSet<&String> = j.touched.iter().collect();
                    let culprit = applied
                        .iter()
                        .find(|(_, files)| files.iter().any(|f| touched.contains(f)))
                        .map_or("the branch".to_string(), |(k, _)| format!("task {k}"));
                    status = Status::Pending;
                    result = format!(
                        "conflicts with {culprit}: {}",
                        e.message.lines().next().unwrap_or("")
                    );
                    ui.say(format!(
                        "  task {}: {result}; it runs again next round on the new base",
                        j.index
                    ));
                }
            }
        } else if status == Status::Completed {
            applied.push((j.index, BTreeSet::new()));
        } else if super::hooks::keeps_partial(j) {
            match repo.check_patch(&j.patch) {
                Ok(()) => {
                    repo.apply_patch(&j.patch)
                        .map_err(|e| RunError::Other(e.message))?;
                    applied.push((j.index, j.touched.iter().cloned().collect()));
                }
                Err(e) => ui.say(format!(
                    "  task {}: its work so far is dropped, it conflicts: {}",
                    j.index,
                    e.message.lines().next().unwrap_or("")
                )),
            }
        }
        entries.push(BatchEntry {
            plan_index: j.index,
            status,
            result: result.clone(),
            attempts: j.attempt,
            acceptance_passed: j.verdict.acceptance_passed,
        });
        results.push(TaskResult {
            index: j.index,
            status,
            result,
            attempts: j.attempt,
        });
    }
    let batch_path = opts
        .root
        .join(format!(".design/processor-batch-{round}.json"));
    let text = serde_json::to_string_pretty(&entries).expect("entries serialise");
    plan::load::write_atomic(&batch_path, text.as_bytes()).map_err(|source| RunError::Write {
        path: batch_path.clone(),
        source,
    })?;
    let notes = RoundNotes {
        wave,
        ..Default::default()
    };
    let report = update::apply_round(plan, dag, &results, &notes);
    plan.progress.extra.insert("round".into(), round.into());
    save(plan, opts)?;
    let completed: Vec<usize> = applied.iter().map(|(i, _)| *i).collect();
    let files = outcome::completed_files(plan, &completed);
    let mut paths: Vec<String> = files.create.iter().chain(&files.modify).cloned().collect();
    // Files a completed task changed without declaring them were applied too (and flagged).
    for (_, touched) in &applied {
        for f in touched {
            if !paths.contains(f) {
                paths.push(f.clone());
            }
        }
    }
    let overall = plan.count(Status::Completed);
    let message = commit_message(plan, round, batch, &results, overall);
    failpoint("before-commit", round);
    // A question is committed even when nothing else is: the branch is the state a later run
    // (or the Action) reads it from.
    if !paths.is_empty() || judged.iter().any(|j| j.question.is_some()) {
        paths.extend(super::hooks::state_md(plan, opts)?);
        paths.push(opts.plan_rel.clone());
        if let Some(sha) = repo.commit(&message, &paths)? {
            ui.say(format!("  committed {}", &sha[..sha.len().min(12)]));
        }
    }
    failpoint("after-commit", round);
    ui.progress(plan.count(Status::Completed), plan.tasks.len());
    ui.say(summary::round_progress(plan, round, batch).trim_end());
    if !report.skip_list.is_empty() {
        ui.say(format!(
            "  skipped because a dependency failed or was blocked: {}",
            list(&report.skip_list)
        ));
    }
    if report.circuit_breaker.should_abort {
        ui.say(report.circuit_breaker.message());
        return Ok(Some(RunEnd::CircuitBreaker(report.circuit_breaker)));
    }
    Ok(None)
}

/// `dagexec: round N — x/y tasks (a/b overall)` and one body line per task.
pub fn commit_message(
    plan: &Plan,
    round: u32,
    batch: &[usize],
    results: &[TaskResult],
    overall: usize,
) -> String {
    let done = results
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count();
    let mut s = format!(
        "dagexec: round {round} — {done}/{} tasks ({overall}/{} overall)\n",
        batch.len(),
        plan.tasks.len()
    );
    s.push('\n');
    for r in results {
        let result = r.result.lines().next().unwrap_or("");
        s.push_str(&format!(
            "- task {}: {} — {}: {}\n",
            r.index, plan.tasks[r.index].subject, r.status, result
        ));
    }
    s
}
