//! Questions to the user and what the round records: a blocked task's question, the plan
//! fields an attempt leaves at integration, the Spec Kit tasks.md ticks, and the question
//! asked at the end of a run.

use crate::flow::exec::Judged;
use crate::flow::steps::longrun::long_run;
use crate::flow::steps::review::review_summary;
use crate::flow::{RunEnd, RunOptions, Ui};
use crate::pure::outcome::Verdict;
use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::question::{self, Kind, Question};
use crate::pure::review::{self, Word};

/// A worker that stopped with a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` status line (see
/// [`long_run_output`](super::longrun::long_run_output)) is blocked on its question, not
/// failed — the judge does not know those lines. Its changes are kept only for a long-run
/// plan (whose attempt after the answer continues from its checkpoint); a plan.json task
/// starts again from the base.
pub(crate) fn blocked_on(
    task: &Task,
    question: Option<&Question>,
    verdict: &mut Verdict,
    patch: &mut crate::edge::git::Patch,
) {
    let Some(q) = question else {
        return;
    };
    if verdict.status == Status::Completed {
        return;
    }
    if verdict.status != Status::Blocked {
        let what = if q.kind == Kind::Decision {
            "needs a decision"
        } else {
            "needs an action"
        };
        verdict.status = Status::Blocked;
        verdict.result = format!("{what}: {}", q.text.lines().next().unwrap_or(""));
        verdict.acceptance_passed = false;
        verdict.failed_checks.clear();
    }
    if long_run(task).is_none() {
        patch.clear();
    }
}

/// Writes what an attempt adds to the plan before the round's update: the review history and
/// the question into the task, and a completed review into `progress.reviews` (kept when the
/// completed task is trimmed, for the summary).
pub(crate) fn record(plan: &mut Plan, j: &Judged) {
    let task = &mut plan.tasks[j.index];
    if let Some(h) = &j.reviews {
        review::set_history(task, h);
        if j.verdict.status == Status::Completed {
            let rejections = h.iter().filter(|e| e.review.word == Word::Rejected).count();
            let entry = serde_json::json!({
                "task": j.index,
                "verdict": "approved",
                "rejections": rejections,
                "summary": h.last().map(|e| e.review.summary.clone()).unwrap_or_default(),
            });
            let list = plan
                .progress
                .extra
                .entry("reviews")
                .or_insert_with(|| serde_json::Value::Array(Vec::new()));
            if let Some(items) = list.as_array_mut() {
                items.retain(|i| i["task"] != j.index);
                items.push(entry);
            }
        }
    }
    if let Some(q) = &j.question {
        question::set(&mut plan.tasks[j.index], q);
    }
}

/// For a plan generated from a task list, writes the completed tasks into the list in the
/// round's `index` (see [`crate::sources::write_back`]: Spec Kit ticks, Taskmaster statuses,
/// Kiro ticks). A file that cannot be written is said with a warning
/// naming it, and the round is committed without it.
pub(crate) fn tasks_md(
    plan: &Plan,
    index: &crate::edge::git::RoundIndex,
    ui: &crate::flow::Ui,
) -> Result<(), crate::flow::RunError> {
    if let crate::sources::Tick::Skipped { path, why } = crate::sources::write_back(index, plan)? {
        ui.say(format!(
            "  warning: {path} is not ticked in this commit: {why}; the completed tasks are recorded in the plan"
        ));
    }
    Ok(())
}

/// At the end of a run: the reviewer summary, then the questions waiting for the user. A
/// run that stops with open questions (and was not interrupted or deadlocked) ends
/// [`RunEnd::NeedsInput`].
pub(crate) fn ask(plan: &Plan, opts: &RunOptions, ui: &Ui, end: Option<RunEnd>) -> Option<RunEnd> {
    let reviews = review_summary(plan);
    if !reviews.is_empty() {
        ui.say(reviews);
    }
    let plan_arg = if opts.plan_rel == crate::pure::validate::DEFAULT_PLAN_REL {
        String::new()
    } else {
        format!(" --plan {}", opts.plan_rel)
    };
    let open = question::render_open(plan, &plan_arg);
    if open.is_empty() {
        return end;
    }
    ui.say(format!(
        "\nQuestions for you (the run stops here; answer, then run again to resume):{}",
        open.trim_end()
    ));
    match end {
        None | Some(RunEnd::Incomplete | RunEnd::CircuitBreaker(_)) => Some(RunEnd::NeedsInput),
        other => other,
    }
}
