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
//! start from the clean tree with all the feedback (the seed's "fresh implementer"). Every
//! verdict is written to the plan file as soon as it is given, so a run killed between two
//! reviews resumes with all the feedback; a rejected attempt's changes are kept in memory
//! only: after an interruption the retry starts fresh. A long-run worker that stops to ask
//! keeps its work: it is committed with the round, and the attempt after the answer resumes
//! from its checkpoint. A long-run attempt that fails leaves its work and checkpoint for the
//! next attempt, and while a long-run worker runs, each checkpoint it writes is kept with the
//! tree it was written in (its commits and its uncommitted work), for a crash
//! ([`crate::sources::longrun::partial`]): the next attempt resumes "from the failed task", in that
//! tree, as the seed re-spawns it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use super::attempt::{AttemptInput, Judged, Pool};
use super::{RunEnd, RunOptions, Ui};
use crate::edge::git::Worktree;
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::pure::outcome::Verdict;
use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::question::{self, Kind, Question};
use crate::pure::review::{self, Review, ReviewEntry, ReviewInput, Start, Word};
use crate::sources::longrun::folder::LONG_RUN_FIELD;
use crate::sources::longrun::output::{self, Output};
use crate::sources::longrun::partial::{Partial, Store};
use crate::sources::longrun::prompt as lr_prompt;

/// What the run remembers between the attempts of a task: the review history (seeded from
/// the plan) and the changes of a rejected attempt that the next one continues from.
///
/// Each verdict is also written to the plan file at once ([`Memory::persist`]), so that a
/// run killed before the next step (the next attempt, the round commit) loses no rejection.
/// Whoever else writes the plan file while attempts run (the eager loop) holds
/// [`Memory::plan_file`] and puts the histories in first ([`Memory::apply`]).
#[derive(Debug, Default)]
pub(crate) struct Memory {
    reviews: Mutex<BTreeMap<usize, Vec<ReviewEntry>>>,
    carry: Mutex<BTreeMap<usize, Vec<u8>>>,
    plan_file: Mutex<()>,
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

    /// Held while the plan file is read and written during a round, by [`Memory::persist`]
    /// and by a runner saving its own copy of the plan while attempts run.
    pub(crate) fn plan_file(&self) -> std::sync::MutexGuard<'_, ()> {
        lock(&self.plan_file)
    }

    /// Puts the review histories of this run into the tasks still in progress in `plan` (a
    /// resolved task's history arrives with its judged attempt).
    pub(crate) fn apply(&self, plan: &mut Plan) {
        for (&i, h) in lock(&self.reviews).iter() {
            if let Some(t) = plan.tasks.get_mut(i)
                && t.status == Status::InProgress
            {
                review::set_history(t, h);
            }
        }
    }

    /// Writes task `index`'s review history into the plan file at `plan_path` (read, changed,
    /// saved atomically), the seed's "state updated at each stage of the loop".
    fn persist(
        &self,
        plan_path: &Path,
        index: usize,
        history: &[ReviewEntry],
    ) -> Result<(), String> {
        let _held = self.plan_file();
        let mut plan = crate::edge::plan_file::load(plan_path).map_err(|e| e.to_string())?;
        let task = plan
            .tasks
            .get_mut(index)
            .ok_or_else(|| format!("the plan file has no task {index}"))?;
        review::set_history(task, history);
        crate::edge::plan_file::save(&plan, plan_path).map_err(|e| e.to_string())
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
/// answer. Applies a rejected attempt's changes to `wt` when this attempt continues them, and
/// a long-run plan's kept partial work ([`restore_partial`]) otherwise.
pub(super) fn prepare(input: &AttemptInput, wt: &Worktree, pool: &Pool, store: &Store) -> String {
    let mem = &pool.memory;
    let carry = lock(&mem.carry).remove(&input.index);
    if carry.is_none() {
        restore_partial(input, wt, store);
    }
    let prompt = crate::sources::longrun::with_checkpoint(&input.task, wt.path(), &input.prompt);
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

/// The checkpoint file of a long-run task (`DIR/plans/NN-CHECKPOINT.json`).
fn checkpoint_rel(task: &Task) -> Option<&str> {
    long_run(task)
        .map(|lr| field(lr, "checkpoint"))
        .filter(|c| !c.is_empty())
}

/// Puts the partial work an earlier attempt of this long-run plan left (see
/// [`crate::sources::longrun::partial`]) into `wt`: its changes, then its checkpoint file. When the
/// changes no longer apply, the attempt starts from the base, without the checkpoint (it would
/// describe work that is not there).
fn restore_partial(input: &AttemptInput, wt: &Worktree, store: &Store) {
    let Some(rel) = checkpoint_rel(&input.task) else {
        return;
    };
    let Some(partial) = store.load(rel) else {
        return;
    };
    if !partial.patch.is_empty()
        && let Err(e) = wt.apply(&partial.patch)
    {
        tracing::warn!(
            "task {}: the work of its earlier attempt no longer applies ({e}); it starts from Task 1",
            input.index
        );
        return;
    }
    if let Some(text) = &partial.checkpoint {
        let path = wt.path().join(rel);
        let written = crate::edge::fsx::write(wt.path(), &path, text.as_bytes());
        if let Err(e) = written {
            tracing::warn!("task {}: cannot restore its checkpoint: {e}", input.index);
        }
    }
}

/// Longest checkpoint file read while a worker runs; a bigger one is not kept.
const MAX_CHECKPOINT_BYTES: u64 = 1 << 20;

/// While a long-run worker works: each time its checkpoint file changes, keeps the tree the
/// checkpoint was written in — everything in it against `base`, committed or not, less
/// `excluded` (the plan file, the work log) — and the checkpoint
/// ([`crate::sources::longrun::partial`]), so that a crash of the runner (or of the machine) loses no
/// work the checkpoint describes: the next attempt is told to resume from it and starts from
/// that tree. Read-only on the worker's tree and index. Never returns (for other tasks it
/// waits forever): race it against the worker.
pub(super) async fn watch_checkpoint(
    task: &Task,
    tree: std::path::PathBuf,
    base: String,
    repo: std::sync::Arc<crate::edge::git::Repo>,
    (round, excluded): (u32, Vec<String>),
) {
    let Some(rel) = checkpoint_rel(task).map(str::to_string) else {
        return std::future::pending().await;
    };
    let store = Store::new(repo.common_dir());
    // Closed when this watch is dropped (the worker ended): a snapshot still being taken then
    // is not kept, so it never replaces what the judged attempt keeps ([`keep_partial`]).
    let gate = Gate(std::sync::Arc::new(Mutex::new(false)));
    let path = tree.join(&rel);
    let read = |p: &Path| -> Option<Vec<u8>> {
        let meta = std::fs::symlink_metadata(p).ok()?;
        (meta.is_file() && meta.len() <= MAX_CHECKPOINT_BYTES)
            .then(|| std::fs::read(p).ok())
            .flatten()
    };
    let mut seen = read(&path);
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let now = read(&path);
        if now.is_none() || now == seen {
            continue;
        }
        seen.clone_from(&now);
        let (repo, tree, base, rel, store, excluded, closed) = (
            repo.clone(),
            tree.clone(),
            base.clone(),
            rel.clone(),
            store.clone(),
            excluded.clone(),
            gate.0.clone(),
        );
        let checkpoint = now.map(|b| String::from_utf8_lossy(&b).into_owned());
        let kept = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let patch = repo
                .tree_changes(&tree, &base, &excluded)
                .map_err(|e| e.to_string())?;
            let closed = lock(&closed);
            if *closed {
                return Err("the worker has ended".into());
            }
            store
                .save(
                    &rel,
                    &Partial {
                        base,
                        patch,
                        checkpoint,
                    },
                )
                .map_err(|e| e.to_string())
        })
        .await;
        match kept {
            Ok(Ok(())) => super::failpoint("checkpoint-saved", round),
            Ok(Err(e)) => tracing::debug!("the checkpoint could not be kept yet: {e}"),
            Err(e) => tracing::debug!("keeping the checkpoint panicked: {e}"),
        }
    }
}

/// Closes a checkpoint watch's snapshots when dropped (waiting for one being saved).
struct Gate(std::sync::Arc<Mutex<bool>>);

impl Drop for Gate {
    fn drop(&mut self) {
        *lock(&self.0) = true;
    }
}

/// After a long-run attempt is judged: a failed one leaves its work (`patch`, checkpoint
/// included) for the next attempt; one that completed, or stopped with a question (its work
/// is committed with the round), leaves nothing.
pub(super) fn keep_partial(
    task: &Task,
    store: &Store,
    base: &str,
    verdict: &Verdict,
    patch: &[u8],
    question: Option<&Question>,
) {
    let Some(rel) = checkpoint_rel(task) else {
        return;
    };
    let committed = verdict.status == Status::Completed
        || (verdict.status == Status::Blocked && question.is_some_and(|q| q.kind != Kind::Review));
    if committed || patch.is_empty() {
        if committed {
            store.remove(rel);
        }
        return;
    }
    let partial = Partial {
        base: base.to_string(),
        patch: patch.to_vec(),
        checkpoint: None,
    };
    if let Err(e) = store.save(rel, &partial) {
        tracing::warn!("cannot keep the partial work of {rel}: {e}");
    }
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
/// declared file, committed with the round); `NEEDS_DECISION` and `NEEDS_ACTION` block the task
/// with a question; a missing or malformed block is a failure, the raw output kept in the
/// long-run folder's `logs/`. Returns the question, if any — also for any task whose last line
/// is `NEEDS_DECISION: …` or `NEEDS_ACTION: …` (the worker contract's form, left in the
/// output as it is; [`blocked_on`] turns the verdict).
pub(crate) fn long_run_output(
    (task, attempt): (&Task, u32),
    stdout: &mut String,
    wt: &Path,
    root: &Path,
) -> Option<Question> {
    let Some(lr) = long_run(task) else {
        // Any task may stop with a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` status line.
        return question::from_status_line(stdout);
    };
    let number = field(lr, "number");
    let line = match output::parse(stdout) {
        Ok(Output::Completed(c)) => {
            let summary = lr_prompt::summary_markdown(number, field(lr, "title"), &c);
            let path = wt.join(field(lr, "summary"));
            let written = crate::edge::fsx::write(wt, &path, summary.as_bytes());
            match written {
                Ok(()) if c.summary.is_empty() => format!("COMPLETED: plan {number} completed"),
                Ok(()) => format!("COMPLETED: {}", c.summary.lines().next().unwrap_or("")),
                Err(e) => format!("FAILED: cannot write {}: {e}", field(lr, "summary")),
            }
        }
        Ok(Output::NeedsDecision(q) | Output::NeedsAction(q)) => {
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
        // No block, but the contract's status-line form of the same question.
        Err(_) if question::from_status_line(stdout).is_some() => {
            return question::from_status_line(stdout);
        }
        Err(e) => {
            let rel = format!("{}/{number}-attempt-{}.log", field(lr, "logs"), attempt);
            let path = root.join(&rel);
            let kept = crate::edge::fsx::write(root, &path, stdout.as_bytes());
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

/// A worker that stopped with a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` status line (see
/// [`long_run_output`]) is blocked on its question, not failed — the judge does not know
/// those lines. Its changes are kept only for a long-run plan (whose attempt after the answer
/// continues from its checkpoint); a plan.json task starts again from the base.
pub(super) fn blocked_on(
    task: &Task,
    question: Option<&Question>,
    verdict: &mut Verdict,
    patch: &mut Vec<u8>,
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
    /// The verdict was updated; the history and any question go to the plan, and what the
    /// reviewer spent is the attempt's too.
    Done {
        history: Vec<ReviewEntry>,
        question: Option<Question>,
        usage: crate::pure::usage::Usage,
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
    /// The repository's common git directory and this run's folder of kept logs, to keep
    /// what the reviewer printed beside the attempt's own logs ([`keep_review_logs`]); `None`
    /// keeps nothing (the work job carries it in its artifact's log).
    pub keep_logs_in: Option<(&'a Path, &'a Path)>,
}

/// Keeps what the reviewer of attempt `attempt` of task `index` printed — its stdout (as it
/// printed it), stderr (the tail the worker runner keeps) and work log — beside the attempt's
/// own logs, as `task-N-attempt-K.review.{stdout,stderr,log}` in the run's folder `dir`
/// ([`super::attempt::RunLogs::dir`]), through [`crate::edge::fsx`]: a link on the way is refused,
/// one at a file's name removed, not followed. Returns the files written.
pub(crate) fn keep_review_logs(
    common_dir: &Path,
    dir: &Path,
    index: usize,
    attempt: u32,
    run: &worker::WorkerRun,
) -> Result<Vec<std::path::PathBuf>, crate::edge::fsx::Error> {
    super::attempt::keep_run_logs(
        common_dir,
        dir,
        &format!("task-{index}-attempt-{attempt}.review"),
        run,
    )
}

/// Runs `reviewer` on a completed attempt in its tree, under the worker contract plus
/// `DAGEXEC_REVIEW=1` and `DAGEXEC_BASE`, with the seed's review prompt. Returns the run and
/// its parsed verdict (`Err`: why there is none — a crash, a timeout, no verdict line), or
/// `None` when cancelled. Shared by the local runner and the Action's work job.
pub(crate) async fn run_reviewer(
    reviewer: &str,
    r: &ToReview<'_>,
    cancel: &tokio::sync::watch::Receiver<bool>,
) -> Option<Reviewer> {
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
        usage_file: Some(r.scratch.join(format!("{name}.usage.json"))),
        timeout: r.timeout,
        extra_env: vec![
            ("DAGEXEC_REVIEW".into(), "1".into()),
            ("DAGEXEC_BASE".into(), r.base.to_string()),
        ],
    };
    let mut run = match worker::run(&spec, cancel).await {
        Stop::Finished(run) => run,
        Stop::Cancelled => return None,
    };
    if let Some((common, dir)) = r.keep_logs_in
        && let Err(e) = keep_review_logs(common, dir, r.index, r.attempt, &run)
    {
        tracing::warn!("task {}: cannot keep the reviewer's logs: {e}", r.index);
    }
    // What the reviewer spent counts as the attempt's (and toward `--max-cost`); a structured
    // output (claude's result object, codex's events) stands for its verdict by its text.
    let (usage, _, _) = crate::flow::attempt::reported_usage(&mut run);
    let parsed = match &run.exit {
        crate::pure::outcome::Exit::Success => {
            review::parse(&run.stdout).map_err(|e| e.to_string())
        }
        other => Err(review::reviewer_failure(other, &run.stderr_tail)),
    };
    Some(Reviewer { run, parsed, usage })
}

/// A reviewer's run: the process, its parsed verdict (or why there is none), and what it
/// reported spending.
pub(crate) struct Reviewer {
    pub run: worker::WorkerRun,
    pub parsed: Result<Review, String>,
    pub usage: crate::pure::usage::Usage,
}

/// Before any worker runs: every reviewer command the run will use (the run's, and the
/// `reviewer` field of each task still to run) must start a program that exists — on `PATH`,
/// or a path (relative to `root`, where the attempts' trees are checkouts of). A command line
/// whose program only a shell can tell (a builtin, an expansion) is not checked.
pub(crate) fn check_reviewers(plan: &Plan, run: Option<&str>, root: &Path) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, task) in plan.tasks.iter().enumerate() {
        if task.status.is_resolved() && task.status != Status::Blocked {
            continue;
        }
        let Some(command) = review::reviewer_for(task, run) else {
            continue;
        };
        if !seen.insert(command) {
            continue;
        }
        let Some(program) = review::program(command) else {
            continue;
        };
        if !program_exists(&program, root) {
            let source = if task.extra.contains_key(review::REVIEWER_FIELD) {
                format!("task {i}'s `reviewer` field")
            } else {
                "--reviewer (or DAGEXEC_REVIEWER, or `reviewer:` in .design/dagexec.yml)".into()
            };
            let where_ = if program.contains('/') {
                "no such executable file"
            } else {
                "not on PATH"
            };
            return Err(format!(
                "reviewer command not found: `{program}` ({where_}), from {source}: `{command}`. Install it or fix the command; no task was started."
            ));
        }
    }
    Ok(())
}

/// Whether `program` names an executable file: a path (with a `/`, relative to `root`), or a
/// name found in a `PATH` directory.
fn program_exists(program: &str, root: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&root.join(program));
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .filter(|d| !d.as_os_str().is_empty())
            .any(|d| executable(&d.join(program)))
    })
}

/// Runs the reviewer on a completed attempt in its tree ([`run_reviewer`]) and updates the
/// verdict by the seed's rules ([`review::conclude`]), writing the new history to the plan
/// file (`plan_path`) before anything else happens. A rejected attempt 1 leaves its
/// changes for attempt 2 to continue from. Anything the reviewer changes in the tree is
/// ignored: the patch is taken before.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
pub(super) async fn review(
    input: &AttemptInput,
    wt: &Worktree,
    pool: &std::sync::Arc<Pool>,
    plan_path: &Path,
    verdict: &mut Verdict,
    patch: &[u8],
    touched: &[String],
    common_dir: &Path,
    cancel: &tokio::sync::watch::Receiver<bool>,
) -> Reviewed {
    let Some(reviewer) = review::reviewer_for(&input.task, input.reviewer.as_deref()) else {
        return Reviewed::Skipped;
    };
    if verdict.status != Status::Completed {
        return Reviewed::Skipped;
    }
    let logs_dir = pool
        .logs
        .dir(common_dir)
        .map_err(|e| tracing::warn!("task {}: cannot keep the reviewer's logs: {e}", input.index))
        .ok();
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
        keep_logs_in: logs_dir.as_deref().map(|d| (common_dir, d)),
    };
    let Some(Reviewer { parsed, usage, .. }) = run_reviewer(reviewer, &to_review, cancel).await
    else {
        return Reviewed::Cancelled;
    };
    let mem = &pool.memory;
    let before = mem.history(input.index, &input.task);
    let history_len = before.len();
    let c = review::conclude(
        input.index,
        &input.task,
        input.attempt,
        verdict,
        before,
        parsed.as_ref().map_err(String::as_str),
    );
    mem.set(input.index, c.history.clone());
    if c.history.len() != history_len {
        let (path, index, history) = (plan_path.to_path_buf(), input.index, c.history.clone());
        let p = pool.clone();
        let saved =
            tokio::task::spawn_blocking(move || p.memory.persist(&path, index, &history)).await;
        match saved {
            Ok(Ok(())) => super::failpoint("after-review", input.round),
            Ok(Err(e)) => tracing::warn!(
                "task {}: the review could not be written to the plan file yet: {e}",
                input.index
            ),
            Err(e) => tracing::warn!("task {}: saving the review panicked: {e}", input.index),
        }
    }
    if c.retry && review::start_for(input.attempt + 1) == Start::Continue {
        lock(&mem.carry).insert(input.index, patch.to_vec());
    }
    Reviewed::Done {
        history: c.history,
        question: c.question,
        usage,
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
/// stopped to ask (`NEEDS_DECISION`, `NEEDS_ACTION`) keeps what it did — its commits and its
/// checkpoint — so the attempt after the answer continues from there, as the seed's
/// "Continue from {`blocked_at`}" expects. A rejected review's changes are never kept.
pub(super) fn keeps_partial(j: &Judged) -> bool {
    j.verdict.status == Status::Blocked
        && !j.patch.is_empty()
        && j.question.as_ref().is_some_and(|q| q.kind != Kind::Review)
}

/// For a Spec Kit plan, ticks the completed tasks in the tasks.md of the round's `index`
/// (see [`crate::sources::speckit::tick_index`]); whether it changed. A tasks.md that cannot be ticked
/// is said with a warning naming it, and the round is committed without the tick.
pub(super) fn tasks_md(
    plan: &Plan,
    index: &crate::edge::git::RoundIndex,
    ui: &super::Ui,
) -> Result<bool, super::RunError> {
    Ok(match crate::sources::speckit::tick_index(index, plan)? {
        crate::sources::speckit::Tick::Nothing => false,
        crate::sources::speckit::Tick::Ticked(_) => true,
        crate::sources::speckit::Tick::Skipped { path, why } => {
            ui.say(format!(
                "  warning: {path} is not ticked in this commit: {why}; the completed tasks are recorded in the plan"
            ));
            false
        }
    })
}

/// For a long-run plan, the state files committed with the round: `DIR/STATE.md` with its
/// Current Position section rewritten (the seed's Step 5), `DIR/ISSUES.md` and the summaries
/// of deferred plans. Nothing for other plans (a Spec Kit plan's tasks.md is [`tasks_md`]).
pub(super) fn state_md(plan: &Plan, opts: &RunOptions) -> Result<Vec<String>, super::RunError> {
    if !plan.extra.contains_key(LONG_RUN_FIELD) {
        return Ok(Vec::new());
    }
    let rel = match opts.plan_rel.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/STATE.md"),
        None => "STATE.md".to_string(),
    };
    let path = opts.root.join(&rel);
    let existing = std::fs::read_to_string(&path).ok();
    let text = crate::sources::longrun::state::with_position(
        existing.as_deref(),
        &crate::sources::longrun::state::current_position(plan),
    );
    crate::edge::fsx::write(&opts.root, &path, text.as_bytes()).map_err(|e| {
        super::RunError::Write {
            path,
            source: e.into(),
        }
    })?;
    let mut paths = vec![rel.clone()];
    // What `dagexec answer N defer` wrote: the issue log and the skipped summaries.
    let issues = format!("{}ISSUES.md", rel.trim_end_matches("STATE.md"));
    if opts.root.join(&issues).is_file() {
        paths.push(issues);
    }
    for t in plan.tasks.iter().filter(|t| question::deferred(t)) {
        for summary in t.creates() {
            if opts.root.join(summary).is_file() {
                paths.push(summary.clone());
            }
        }
    }
    Ok(paths)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(stdout: &str, stderr: &str) -> worker::WorkerRun {
        worker::WorkerRun {
            stdout: stdout.into(),
            stderr_tail: stderr.into(),
            exit: crate::pure::outcome::Exit::Success,
            log: None,
            duration: std::time::Duration::ZERO,
            usage: None,
        }
    }

    /// The reviewer's output lands beside the attempt's logs and is listed with them; a link
    /// planted at one of its names is replaced, never written through.
    #[test]
    fn a_reviewers_logs_are_kept_beside_the_attempts_and_links_are_not_followed() {
        let common = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let dir = super::super::attempt::RunLogs::default()
            .dir(common.path())
            .expect("run folder");
        let target = outside.path().join("victim");
        std::fs::write(&target, "keep me").expect("write");
        std::os::unix::fs::symlink(&target, dir.join("task-2-attempt-1.review.stdout"))
            .expect("link");
        keep_review_logs(common.path(), &dir, 2, 1, &finished("APPROVED\n", "warn\n"))
            .expect("kept");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep me");
        assert_eq!(
            std::fs::read_to_string(dir.join("task-2-attempt-1.review.stdout")).expect("read"),
            "APPROVED\n"
        );
        let kept = super::super::attempt::kept_logs(common.path());
        assert_eq!(kept[&2][0].kinds, ["review.stderr", "review.stdout"]);
    }
}
