//! What an attempt does beyond the `/execute` seed, for the other two specifications: the
//! conductor's reviewer loop and the long-run executor's worker contract. Called from
//! [`super::attempt`] at three points — before the worker (the final prompt), after it (a
//! long-run worker's `OUTPUT_JSON` block), after judging (the reviewer) — and from the round
//! integration and the end of the run (the plan fields, the questions to the user).
//!
//! "Fresh tree": every attempt is a new worker process in a worktree reset to the base
//! (`git reset --hard` + `git clean -ffdx`). After a rejection of attempt 1 the rejected
//! changes are applied again in that tree, so attempt 2 fixes its predecessor's work (the
//! seed's "same implementer"); attempt 3, and the first attempt after the user's answer,
//! start from the clean tree with all the feedback (the seed's "fresh implementer"). A
//! rejected attempt's changes are kept in memory only: after an interruption the retry
//! starts fresh. A long-run worker that stops to ask keeps its work: it is committed with the
//! round, and the attempt after the answer resumes from its checkpoint.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use super::attempt::{AttemptInput, Judged, Pool};
use super::{RunEnd, RunOptions, Ui};
use crate::git::Worktree;
use crate::longrun::folder::LONG_RUN_FIELD;
use crate::longrun::output::{self, Output};
use crate::longrun::prompt as lr_prompt;
use crate::outcome::Verdict;
use crate::plan::model::{Plan, Status, Task};
use crate::question::{self, Kind, Question};
use crate::review::{self, Review, ReviewEntry, ReviewInput, Start, Word};
use crate::worker::{self, Stop, WorkerSpec};

/// What the run remembers between the attempts of a task: the review history (seeded from
/// the plan) and the changes of a rejected attempt that the next one continues from.
#[derive(Debug, Default)]
pub struct Memory {
    reviews: Mutex<BTreeMap<usize, Vec<ReviewEntry>>>,
    carry: Mutex<BTreeMap<usize, Vec<u8>>>,
}

impl Memory {
    fn history(&self, index: usize, task: &Task) -> Vec<ReviewEntry> {
        lock(&self.reviews)
            .entry(index)
            .or_insert_with(|| review::history(task))
            .clone()
    }

    fn set(&self, index: usize, history: Vec<ReviewEntry>) {
        lock(&self.reviews).insert(index, history);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The long-run paths of a task, when it is one.
fn long_run(task: &Task) -> Option<&serde_json::Map<String, serde_json::Value>> {
    task.extra.get(LONG_RUN_FIELD).and_then(|v| v.as_object())
}

fn field<'a>(lr: &'a serde_json::Map<String, serde_json::Value>, key: &str) -> &'a str {
    lr.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// The prompt the worker gets: the runner's prompt with a long-run task's resume state
/// filled in from the checkpoint in `wt`, then the reviewer feedback so far, then the user's
/// answer. Applies a rejected attempt's changes to `wt` when this attempt continues them.
pub(super) fn prepare(input: &AttemptInput, wt: &Worktree, pool: &Pool) -> String {
    let prompt = crate::longrun::with_checkpoint(&input.task, wt.path(), &input.prompt);
    let mem = &pool.memory;
    let carry = lock(&mem.carry).remove(&input.index);
    let history = mem.history(input.index, &input.task);
    let start = match carry {
        Some(patch) if review::start_for(input.attempt) == Start::Continue => {
            match wt.apply(&patch) {
                Ok(()) => Start::Continue,
                Err(e) => {
                    tracing::debug!(
                        "task {}: the rejected changes no longer apply ({e}); starting fresh",
                        input.index
                    );
                    Start::Fresh
                }
            }
        }
        _ => Start::Fresh,
    };
    with_feedback(&prompt, &input.task, &history, start)
}

/// `prompt` with the reviewer feedback so far (`history`, for an attempt starting as `start`)
/// and then the user's answer to the task's question appended. Shared by the local runner
/// and the Action's work job.
pub(crate) fn with_feedback(
    prompt: &str,
    task: &Task,
    history: &[ReviewEntry],
    start: Start,
) -> String {
    let mut prompt = prompt.to_string();
    for extra in [
        review::feedback_section(history, start),
        question::reply_section(task),
    ] {
        if !extra.is_empty() {
            prompt = format!("{}\n\n{extra}", prompt.trim_end());
        }
    }
    prompt
}

/// A long-run worker's `OUTPUT_JSON` block, turned into the status line the processor reads
/// (appended to its output): COMPLETED writes the plan's summary into `wt` first (its
/// declared file, committed with the round); NEEDS_DECISION and NEEDS_ACTION block the task
/// with a question; a missing or malformed block is a failure, the raw output kept in the
/// long-run folder's `logs/`. Returns the question, if any.
pub(crate) fn long_run_output(
    (task, attempt): (&Task, u32),
    stdout: &mut String,
    wt: &Path,
    root: &Path,
) -> Option<Question> {
    let lr = long_run(task)?;
    let number = field(lr, "number");
    let line = match output::parse(stdout) {
        Ok(Output::Completed(c)) => {
            let summary = lr_prompt::summary_markdown(number, field(lr, "title"), &c);
            let path = wt.join(field(lr, "summary"));
            let written = crate::fsx::write(wt, &path, summary.as_bytes());
            match written {
                Ok(()) if c.summary.is_empty() => format!("COMPLETED: plan {number} completed"),
                Ok(()) => format!("COMPLETED: {}", c.summary.lines().next().unwrap_or("")),
                Err(e) => format!("FAILED: cannot write {}: {e}", field(lr, "summary")),
            }
        }
        Ok(Output::NeedsDecision(q)) | Ok(Output::NeedsAction(q)) => {
            let what = if q.kind == Kind::Decision {
                "needs a decision"
            } else {
                "needs an action"
            };
            let first = q.text.lines().next().unwrap_or("").to_string();
            stdout.push_str(&format!("\nBLOCKED: {what}: {first}\n"));
            return Some(q);
        }
        Ok(Output::Failed { reason }) => format!("FAILED: {reason}"),
        Err(e) => {
            let rel = format!("{}/{number}-attempt-{}.log", field(lr, "logs"), attempt);
            let path = root.join(&rel);
            let kept = crate::fsx::write(root, &path, stdout.as_bytes());
            match kept {
                Ok(()) => format!("FAILED: {e}; the raw output is in {rel}"),
                Err(w) => format!("FAILED: {e} (the raw output could not be kept: {w})"),
            }
        }
    };
    stdout.push('\n');
    stdout.push_str(&line);
    stdout.push('\n');
    None
}

/// Long-run plans name their files inside PLAN.md, not in the plan: changes outside the
/// declared summary are expected, so those warnings go (an edit of the plan file stays).
pub(crate) fn quiet_long_run(task: &Task, verdict: &mut Verdict) {
    if long_run(task).is_some() {
        verdict
            .warnings
            .retain(|w| !w.starts_with("unexpected file changed"));
    }
}

/// What the reviewer made of an attempt.
pub(super) enum Reviewed {
    /// Not reviewed: no reviewer for this task, or the attempt did not complete.
    Skipped,
    /// The verdict was updated; the history and any question go to the plan.
    Done {
        history: Vec<ReviewEntry>,
        question: Option<Question>,
    },
    Cancelled,
}

/// A completed attempt, as the reviewer is given it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToReview<'a> {
    pub index: usize,
    pub task: &'a Task,
    pub attempt: u32,
    pub round: u32,
    /// The commit the attempt's changes are against (`DAGEXEC_BASE`).
    pub base: &'a str,
    /// The attempt's tree, where the reviewer runs.
    pub tree: &'a Path,
    /// Where the review's prompt and log files go (outside the repository).
    pub scratch: &'a Path,
    pub timeout: std::time::Duration,
    /// The implementer's summary (the verdict's result).
    pub summary: &'a str,
    /// The attempt's changes, as a binary patch against `base`.
    pub patch: &'a [u8],
    /// The files the patch touches.
    pub touched: &'a [String],
}

/// Runs `reviewer` on a completed attempt in its tree, under the worker contract plus
/// `DAGEXEC_REVIEW=1` and `DAGEXEC_BASE`, with the seed's review prompt. Returns the run and
/// its parsed verdict (`Err`: why there is none — a crash, a timeout, no verdict line), or
/// `None` when cancelled. Shared by the local runner and the Action's work job.
pub(crate) async fn run_reviewer(
    reviewer: &str,
    r: &ToReview<'_>,
    cancel: &tokio::sync::watch::Receiver<bool>,
) -> Option<(worker::WorkerRun, Result<Review, String>)> {
    let diff = String::from_utf8_lossy(r.patch);
    let prompt = review::review_prompt(&ReviewInput {
        index: r.index,
        task: r.task,
        attempt: r.attempt,
        worker_summary: r.summary,
        changed: r.touched,
        diff: &diff,
    });
    let name = format!("task-{}-attempt-{}-review", r.index, r.attempt);
    let spec = WorkerSpec {
        command: reviewer.to_string(),
        cwd: r.tree.to_path_buf(),
        prompt,
        task_index: r.index,
        attempt: r.attempt,
        round: r.round,
        model: r.task.model().unwrap_or_default().to_string(),
        prompt_file: r.scratch.join(format!("{name}.md")),
        log_file: r.scratch.join(format!("{name}.log")),
        timeout: r.timeout,
        extra_env: vec![
            ("DAGEXEC_REVIEW".into(), "1".into()),
            ("DAGEXEC_BASE".into(), r.base.to_string()),
        ],
    };
    let run = match worker::run(&spec, cancel).await {
        Stop::Finished(run) => run,
        Stop::Cancelled => return None,
    };
    let parsed = match &run.exit {
        crate::outcome::Exit::Success => review::parse(&run.stdout).map_err(|e| e.to_string()),
        other => Err(format!("the reviewer did not finish cleanly: {other:?}")),
    };
    Some((run, parsed))
}

/// Runs the reviewer on a completed attempt in its tree ([`run_reviewer`]) and updates the
/// verdict by the seed's rules ([`review::conclude`]). A rejected attempt 1 leaves its
/// changes for attempt 2 to continue from. Anything the reviewer changes in the tree is
/// ignored: the patch is taken before.
#[allow(clippy::too_many_arguments)]
pub(super) async fn review(
    input: &AttemptInput,
    wt: &Worktree,
    pool: &Pool,
    verdict: &mut Verdict,
    patch: &[u8],
    touched: &[String],
    cancel: &tokio::sync::watch::Receiver<bool>,
) -> Reviewed {
    let Some(reviewer) = review::reviewer_for(&input.task, input.reviewer.as_deref()) else {
        return Reviewed::Skipped;
    };
    if verdict.status != Status::Completed {
        return Reviewed::Skipped;
    }
    let to_review = ToReview {
        index: input.index,
        task: &input.task,
        attempt: input.attempt,
        round: input.round,
        base: &input.base,
        tree: wt.path(),
        scratch: &input.scratch,
        timeout: input.timeout,
        summary: &verdict.result.clone(),
        patch,
        touched,
    };
    let Some((_, parsed)) = run_reviewer(reviewer, &to_review, cancel).await else {
        return Reviewed::Cancelled;
    };
    let mem = &pool.memory;
    let before = mem.history(input.index, &input.task);
    let c = review::conclude(
        input.index,
        &input.task,
        input.attempt,
        verdict,
        before,
        parsed.as_ref().map_err(String::as_str),
    );
    mem.set(input.index, c.history.clone());
    if c.retry && review::start_for(input.attempt + 1) == Start::Continue {
        lock(&mem.carry).insert(input.index, patch.to_vec());
    }
    Reviewed::Done {
        history: c.history,
        question: c.question,
    }
}

/// Writes what an attempt adds to the plan before the round's update: the review history and
/// the question into the task, and a completed review into `progress.reviews` (kept when the
/// completed task is trimmed, for the summary).
pub(super) fn record(plan: &mut Plan, j: &Judged) {
    let task = &mut plan.tasks[j.index];
    if let Some(h) = &j.reviews {
        review::set_history(task, h);
        if j.verdict.status == Status::Completed {
            let rejections = h.iter().filter(|e| e.verdict == Word::Rejected).count();
            let entry = serde_json::json!({
                "task": j.index,
                "verdict": "approved",
                "rejections": rejections,
                "summary": h.last().map(|e| e.summary.clone()).unwrap_or_default(),
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

/// Whether a blocked attempt's changes are committed with the round: a long-run worker that
/// stopped to ask (NEEDS_DECISION, NEEDS_ACTION) keeps what it did — its commits and its
/// checkpoint — so the attempt after the answer continues from there, as the seed's
/// "Continue from {blocked_at}" expects. A rejected review's changes are never kept.
pub(super) fn keeps_partial(j: &Judged) -> bool {
    j.verdict.status == Status::Blocked
        && !j.patch.is_empty()
        && j.question.as_ref().is_some_and(|q| q.kind != Kind::Review)
}

/// For a Spec Kit plan, ticks the completed tasks in its tasks.md and returns the file's
/// path, to commit with the round; nothing for other plans.
pub(super) fn tasks_md(plan: &Plan, opts: &RunOptions) -> Result<Vec<String>, super::RunError> {
    crate::speckit::tick_file(&opts.root, plan).map_err(|e| super::RunError::Other(e.to_string()))
}

/// The state files committed with the round: a Spec Kit plan's ticked tasks.md
/// ([`tasks_md`]); for a long-run plan, `DIR/STATE.md` with its Current Position section
/// rewritten (the seed's Step 5). Nothing for other plans.
pub(super) fn state_md(plan: &Plan, opts: &RunOptions) -> Result<Vec<String>, super::RunError> {
    let ticked = tasks_md(plan, opts)?;
    if !plan.extra.contains_key(LONG_RUN_FIELD) {
        return Ok(ticked);
    }
    let rel = match opts.plan_rel.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/STATE.md"),
        None => "STATE.md".to_string(),
    };
    let path = opts.root.join(&rel);
    let existing = std::fs::read_to_string(&path).ok();
    let text = crate::longrun::state::with_position(
        existing.as_deref(),
        &crate::longrun::state::current_position(plan),
    );
    crate::fsx::write(&opts.root, &path, text.as_bytes()).map_err(|e| super::RunError::Write {
        path,
        source: e.into(),
    })?;
    Ok(vec![rel])
}

/// The reviewer's part of the final summary: one line per reviewed task.
pub(super) fn review_summary(plan: &Plan) -> String {
    let mut lines = Vec::new();
    if let Some(items) = plan
        .progress
        .extra
        .get("reviews")
        .and_then(|v| v.as_array())
    {
        for i in items {
            lines.push(format!(
                "- Task {}: approved after {} rejection(s): {}",
                i["task"],
                i["rejections"],
                i["summary"].as_str().unwrap_or("")
            ));
        }
    }
    for (i, t) in plan.tasks.iter().enumerate() {
        let h = review::history(t);
        if t.status != Status::Completed && !h.is_empty() {
            let rejections = h.iter().filter(|e| e.verdict == Word::Rejected).count();
            lines.push(format!(
                "- Task {i}: {} after {rejections} rejection(s)",
                t.status
            ));
        }
    }
    if lines.is_empty() {
        String::new()
    } else {
        format!("Reviews:\n{}", lines.join("\n"))
    }
}

/// At the end of a run: the reviewer summary, then the questions waiting for the user. A
/// run that stops with open questions (and was not interrupted or deadlocked) ends
/// [`RunEnd::NeedsInput`].
pub(super) fn ask(plan: &Plan, opts: &RunOptions, ui: &Ui, end: Option<RunEnd>) -> Option<RunEnd> {
    let reviews = review_summary(plan);
    if !reviews.is_empty() {
        ui.say(reviews);
    }
    let plan_arg = if opts.plan_rel == crate::plan::validate::DEFAULT_PLAN_REL {
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
        None | Some(RunEnd::Incomplete) | Some(RunEnd::CircuitBreaker(_)) => {
            Some(RunEnd::NeedsInput)
        }
        other => other,
    }
}
