//! One attempt at one task: a fresh worktree at the round's base, the worker, the facts the
//! processor needs (changes, acceptance checks run in that tree), and the verdict.
//!
//! Each attempt's stdout, stderr and work log are kept as
//! `<git-common-dir>/dagexec/logs/task-N-attempt-K.{stdout,stderr,log}` ([`keep_logs`]),
//! listed by `dagexec status` and the run's summary ([`kept_logs`]). The folder is inside
//! git's own directory, where no patch can place a file; it is still written without
//! following links (each folder checked, each file created anew with `O_EXCL|O_NOFOLLOW`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::git::{Repo, Worktree};
use crate::outcome::{self, AttemptReport, CheckRun, Verdict};
use crate::plan::model::Task;
use crate::shell;
use crate::worker::{self, Stop, WorkerSpec};

/// What the runner hands an attempt.
#[derive(Debug, Clone)]
pub struct AttemptInput {
    pub index: usize,
    pub attempt: u32,
    pub round: u32,
    /// A snapshot of the task (its declared files and checks).
    pub task: Task,
    /// The prompt with dependency results filled in.
    pub prompt: String,
    pub base: String,
    pub worker: String,
    pub timeout: Duration,
    /// Where prompt files go (outside the repository).
    pub scratch: PathBuf,
    /// The plan's path relative to the root.
    pub plan_rel: String,
    /// The run's reviewer command (a task's own `reviewer` field wins).
    pub reviewer: Option<String>,
}

/// What came of it.
#[derive(Debug)]
pub enum AttemptEnd {
    Judged(Box<Judged>),
    /// Ctrl-C arrived while the worker ran.
    Cancelled,
}

pub use crate::exec::Judged;

/// Worktrees kept between attempts: a finished attempt's tree is reset to the next base
/// instead of being removed and checked out again (checkout time grows with the tree). Whatever
/// is left when the run ends is removed on drop.
#[derive(Debug, Default)]
pub struct Pool {
    free: std::sync::Mutex<Vec<Worktree>>,
    created: std::sync::atomic::AtomicUsize,
    /// Review history and rejected changes between a task's attempts.
    pub(super) memory: super::hooks::Memory,
    /// The records of attempts Ctrl-C stopped, for the plan ([`Pool::take_interrupted`]).
    interrupted: std::sync::Mutex<Vec<crate::usage::AttemptRecord>>,
}

impl Pool {
    fn acquire(&self, repo: &Repo, base: &str) -> Result<Worktree, crate::git::GitError> {
        let reused = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        if let Some(mut wt) = reused {
            match wt.reset_to(base) {
                Ok(()) => return Ok(wt),
                Err(e) => {
                    tracing::debug!("a pooled worktree could not be reset ({e}); making a new one")
                }
            }
        }
        let n = self
            .created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        retry_git(|| repo.add_worktree(base, &format!("slot-{n}")))
    }

    /// Keeps the record of an attempt Ctrl-C stopped.
    fn interrupted(&self, input: &AttemptInput, start: jiff::Timestamp) {
        let measured = crate::usage::Measured::since(start, crate::usage::Usage::default());
        let outcome = crate::usage::Outcome::Interrupted;
        let record =
            crate::usage::AttemptRecord::new(input.index, input.attempt, &measured, outcome);
        self.interrupted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record);
    }

    /// The records of the attempts Ctrl-C stopped since the last call, in the order they
    /// stopped.
    pub(super) fn take_interrupted(&self) -> Vec<crate::usage::AttemptRecord> {
        std::mem::take(
            &mut *self
                .interrupted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn release(&self, wt: Worktree) {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(wt);
    }
}

/// Retries a git operation twice more after a short pause: git commands left running by a
/// run that was killed can hold git's own locks for a moment after the next run starts.
pub(super) fn retry_git<T>(
    mut op: impl FnMut() -> Result<T, crate::git::GitError>,
) -> Result<T, crate::git::GitError> {
    let mut tries = 0;
    loop {
        match op() {
            Err(e) if tries < 2 => {
                tracing::debug!("retrying after a git failure: {e}");
                tries += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            other => return other,
        }
    }
}

/// What the processor needs to know about an attempt that ran in `tree`: the worker's output,
/// exit and log, the files it changed, and — when the task completed and its files are there —
/// the acceptance checks, run in `tree`. Shared by local attempts and the Action's work job.
pub(crate) fn observe(
    tree: &std::path::Path,
    task: &Task,
    run: &worker::WorkerRun,
    all: &crate::git::Changes,
    timeout: Duration,
) -> AttemptReport {
    let mut report = AttemptReport {
        output: run.stdout.clone(),
        exit: run.exit.clone(),
        log: run.log.clone(),
        present: all.present.clone(),
        changed: all.changed.clone(),
        acceptance: None,
    };
    if outcome::wants_acceptance(task, &report) {
        let checks = task
            .acceptance_criteria()
            .iter()
            .map(|c| {
                let o = shell::run(&c.check, tree, timeout);
                CheckRun {
                    criterion: c.criterion.clone(),
                    check: c.check.clone(),
                    passed: o.passed,
                    output: o.output,
                }
            })
            .collect();
        report.acceptance = Some(checks);
    }
    report
}

/// The work log a worker wrote inside its tree at `log_rel` (the prompt names that path), when
/// it is a regular file: a link there could point at any file the job can read, which would
/// then travel with the attempt's logs (and, on GitHub, its artifact).
pub(crate) fn log_in_tree(tree: &Path, log_rel: &str) -> Option<String> {
    let path = tree.join(log_rel);
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
    regular
        .then(|| std::fs::read_to_string(&path).ok())
        .flatten()
}

/// An attempt after its worker, observed and judged.
pub(crate) struct Observed {
    pub report: AttemptReport,
    pub verdict: Verdict,
    /// Every change in the tree (the refusals read its links and forbidden paths).
    pub all: crate::git::Changes,
    /// The changes to integrate: without the plan file and the work log.
    pub kept: crate::git::Changes,
}

/// The attempt pipeline after the worker ran in `tree` — observe, then judge — shared by
/// local attempts and the Action's work job: the changes to integrate (`all` without the plan
/// file and the work log, `(plan_rel, log_rel)`), the facts ([`observe`]: acceptance checks
/// run in `tree`), the processor's verdict, with the worker's failure `detail` (a missing
/// command, the stderr tail) on a failed exit, a long-run plan's quiet status, and the usage
/// report's warning.
pub(crate) fn observe_and_judge(
    tree: &Path,
    (index, task): (usize, &Task),
    run: &worker::WorkerRun,
    all: crate::git::Changes,
    (plan_rel, log_rel): (&str, &str),
    timeout: Duration,
    (detail, usage_warning): (&str, Option<String>),
) -> Result<Observed, crate::git::GitError> {
    let kept = all.without(&[plan_rel, log_rel])?;
    let report = observe(tree, task, run, &all, timeout);
    let mut verdict = outcome::judge(index, task, &report, plan_rel);
    if verdict.status == crate::plan::model::Status::Failed && report.exit != outcome::Exit::Success
    {
        verdict.result.push_str(detail);
    }
    super::hooks::quiet_long_run(task, &mut verdict);
    verdict.warnings.extend(usage_warning);
    Ok(Observed {
        report,
        verdict,
        all,
        kept,
    })
}

/// Runs one attempt. Git and check commands block, so they run on the blocking pool.
pub async fn run(
    repo: Arc<Repo>,
    pool: Arc<Pool>,
    input: AttemptInput,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<AttemptEnd, crate::git::GitError> {
    let start = jiff::Timestamp::now();
    let (r, p, base) = (repo.clone(), pool.clone(), input.base.clone());
    let wt: Worktree = tokio::task::spawn_blocking(move || p.acquire(&r, &base))
        .await
        .expect("worktree creation does not panic")?;
    let store = crate::longrun::partial::Store::new(repo.common_dir());
    let prompt = super::hooks::prepare(&input, &wt, &pool, &store);
    let log_rel = format!(".design/worker-{}.log", input.index);
    let spec = WorkerSpec {
        command: input.worker.clone(),
        cwd: wt.path().to_path_buf(),
        prompt,
        task_index: input.index,
        attempt: input.attempt,
        round: input.round,
        model: input.task.model().unwrap_or_default().to_string(),
        prompt_file: input
            .scratch
            .join(format!("task-{}-attempt-{}.md", input.index, input.attempt)),
        log_file: repo.root().join(&log_rel),
        usage_file: Some(input.scratch.join(format!(
            "task-{}-attempt-{}.usage.json",
            input.index, input.attempt
        ))),
        timeout: input.timeout,
        extra_env: Vec::new(),
    };
    // A long-run worker's progress is kept as it goes, for a crash of this process.
    let watch = super::hooks::watch_checkpoint(
        &input.task,
        wt.path().to_path_buf(),
        input.base.clone(),
        repo.clone(),
        input.round,
    );
    let stop = tokio::select! {
        stop = worker::run(&spec, &cancel) => stop,
        () = watch => unreachable!("the checkpoint watch never ends"),
    };
    let mut run = match stop {
        Stop::Finished(run) => run,
        Stop::Cancelled => {
            pool.interrupted(&input, start);
            return Ok(AttemptEnd::Cancelled);
        }
    };
    // A worker following the prompt literally writes its log inside its own tree.
    if run.log.is_none()
        && let Some(text) = log_in_tree(wt.path(), &log_rel)
    {
        let _ = crate::fsx::write(repo.root(), &repo.root().join(&log_rel), text.as_bytes());
        run.log = Some(text);
    }
    if let Err(e) = keep_logs(repo.common_dir(), input.index, input.attempt, &run) {
        tracing::warn!("task {}: cannot keep the attempt's logs: {e}", input.index);
    }
    // What the worker spent; a structured output (claude's result object, codex's events)
    // stands for its output by its text (the raw output is in the kept logs).
    let (usage, usage_warning) = reported_usage(&mut run);
    let detail = worker::failure_detail(&run, &input.worker);
    let question = super::hooks::long_run_output(
        (&input.task, input.attempt),
        &mut run.stdout,
        wt.path(),
        repo.root(),
    );
    let plan_rel = input.plan_rel.clone();
    let task = input.task.clone();
    let index = input.index;
    let timeout = input.timeout;
    let duration = run.duration;
    let timed_out = matches!(run.exit, outcome::Exit::TimedOut(_));
    let asked = question.clone();
    let judged = tokio::task::spawn_blocking(
        move || -> Result<(Verdict, Vec<u8>, Vec<String>, Worktree), crate::git::GitError> {
            let Observed {
                mut verdict,
                all,
                kept,
                ..
            } = observe_and_judge(
                wt.path(),
                (index, &task),
                &run,
                wt.changes()?,
                (&plan_rel, &log_rel),
                timeout,
                (&detail, usage_warning),
            )?;
            let mut patch = kept.patch;
            super::hooks::blocked_on(&task, asked.as_ref(), &mut verdict, &mut patch);
            let touched = if patch.is_empty() {
                Vec::new()
            } else {
                kept.changed.iter().cloned().collect()
            };
            let changed = all.changed.iter().chain(&all.forbidden);
            if let Some(reason) = outcome::refused_changes(&task, changed, &all.links, &plan_rel) {
                outcome::refuse(&mut verdict, reason);
                return Ok((verdict, Vec::new(), touched, wt));
            }
            Ok((verdict, patch, touched, wt))
        },
    )
    .await
    .expect("judging does not panic")?;
    let (mut verdict, patch, touched, wt) = judged;
    let plan_path = repo.root().join(&input.plan_rel);
    let reviewed = super::hooks::review(
        &input,
        &wt,
        &pool,
        &plan_path,
        &mut verdict,
        &patch,
        &touched,
        repo.common_dir(),
        &cancel,
    )
    .await;
    pool.release(wt);
    let (reviews, question, usage) = match reviewed {
        super::hooks::Reviewed::Cancelled => {
            pool.interrupted(&input, start);
            return Ok(AttemptEnd::Cancelled);
        }
        super::hooks::Reviewed::Skipped => (None, question, usage),
        super::hooks::Reviewed::Done {
            history,
            question,
            usage: reviewer,
        } => (Some(history), question, usage.plus(reviewer)),
    };
    super::hooks::keep_partial(
        &input.task,
        &store,
        &input.base,
        &verdict,
        &patch,
        question.as_ref(),
    );
    Ok(AttemptEnd::Judged(Box::new(Judged {
        index: input.index,
        attempt: input.attempt,
        verdict,
        patch,
        touched,
        duration,
        reviews,
        question,
        measured: Some(crate::usage::Measured::since(start, usage)),
        timed_out,
    })))
}

/// Reads what the worker reported spending ([`crate::usage::gather`]); when its output was
/// structured, replaces it with the text that stands for it. Returns the usage and, when the
/// usage file was unusable, a warning.
pub(crate) fn reported_usage(run: &mut worker::WorkerRun) -> (crate::usage::Usage, Option<String>) {
    let (text, usage, warning) = crate::usage::gather(&run.stdout, run.usage.as_deref());
    if let Some(text) = text {
        run.stdout = text;
    }
    (usage, warning)
}

/// The folder of kept attempt logs in the repository's common git directory.
pub(crate) fn logs_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("logs")
}

/// [`logs_dir`] as shown to the user: relative to the work tree `root` when inside it.
pub(crate) fn logs_dir_shown(root: &Path, common_dir: &Path) -> String {
    let dir = logs_dir(common_dir);
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    dir.strip_prefix(&root)
        .unwrap_or(&dir)
        .display()
        .to_string()
}

/// Keeps what attempt `attempt` of task `index` printed — its stdout and stderr (the tails the
/// worker runner keeps) and its work log — as `task-N-attempt-K.{stdout,stderr,log}` in
/// [`logs_dir`], through [`crate::fsx`] (a link on the way is refused; one at a file's name is
/// removed, not followed); a first attempt also clears the task's files of an earlier plan.
/// Returns the files written.
pub(crate) fn keep_logs(
    common_dir: &Path,
    index: usize,
    attempt: u32,
    run: &worker::WorkerRun,
) -> Result<Vec<PathBuf>, crate::fsx::Error> {
    let dir = logs_dir(common_dir);
    crate::fsx::create_dir_all(common_dir, &dir)?;
    if attempt == 1 {
        let stale = format!("task-{index}-attempt-");
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&stale) {
                crate::fsx::remove_file(common_dir, &entry.path())?;
            }
        }
    }
    let mut written = Vec::new();
    let files = [
        ("stdout", Some(&run.stdout)),
        ("stderr", Some(&run.stderr_tail)),
        ("log", run.log.as_ref()),
    ];
    for (ext, text) in files {
        let Some(text) = text else { continue };
        let path = dir.join(format!("task-{index}-attempt-{attempt}.{ext}"));
        crate::fsx::remove_file(common_dir, &path)?;
        crate::fsx::write(common_dir, &path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// The kept logs: for each task index, for each attempt, the kinds kept (`stdout`, `stderr`,
/// `log`), in order. Empty when there are none.
pub(crate) fn kept_logs(common_dir: &Path) -> crate::render::status::KeptLogs {
    let mut kept = crate::render::status::KeptLogs::default();
    let Ok(entries) = std::fs::read_dir(logs_dir(common_dir)) else {
        return kept;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let parsed = name.strip_prefix("task-").and_then(|rest| {
            let (task, rest) = rest.split_once("-attempt-")?;
            let (attempt, kind) = rest.split_once('.')?;
            Some((task.parse().ok()?, attempt.parse().ok()?, kind.to_string()))
        });
        if let Some((task, attempt, kind)) = parsed {
            let kinds: &mut Vec<String> = kept.entry(task).or_default().entry(attempt).or_default();
            kinds.push(kind);
        }
    }
    for kinds in kept.values_mut().flat_map(|a| a.values_mut()) {
        let rank = |k: &String| ["stdout", "stderr", "log"].iter().position(|x| x == k);
        kinds.sort_by_key(|k| (rank(k).unwrap_or(3), k.clone()));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(stdout: &str, stderr: &str, log: Option<&str>) -> worker::WorkerRun {
        worker::WorkerRun {
            stdout: stdout.into(),
            stderr_tail: stderr.into(),
            exit: outcome::Exit::Code(1),
            log: log.map(String::from),
            duration: Duration::ZERO,
            usage: None,
        }
    }

    #[test]
    fn logs_are_kept_per_attempt_and_listed() {
        let common = tempfile::tempdir().expect("tempdir");
        let run = finished("out\n", "err\n", Some("log\n"));
        keep_logs(common.path(), 3, 1, &run).expect("kept");
        keep_logs(common.path(), 3, 2, &finished("o2", "e2", None)).expect("kept");
        let dir = logs_dir(common.path());
        assert_eq!(
            std::fs::read_to_string(dir.join("task-3-attempt-1.stderr")).expect("stderr"),
            "err\n"
        );
        let kept = kept_logs(common.path());
        assert_eq!(kept[&3][&1], ["stdout", "stderr", "log"]);
        assert_eq!(kept[&3][&2], ["stdout", "stderr"]);
        // A new first attempt (a new plan, the same index) starts the task's list afresh.
        keep_logs(common.path(), 3, 1, &finished("", "", None)).expect("kept");
        assert_eq!(kept_logs(common.path())[&3].len(), 1);
    }

    #[test]
    fn a_linked_log_folder_is_refused() {
        let common = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(common.path().join("dagexec")).expect("dir");
        std::os::unix::fs::symlink(outside.path(), logs_dir(common.path())).expect("link");
        let err = keep_logs(common.path(), 0, 1, &finished("x", "y", None)).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 0);
    }

    #[test]
    fn a_work_log_is_read_from_the_tree_only_when_it_is_a_regular_file() {
        let tree = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("credentials");
        std::fs::write(&secret, "token=ghs_secret").expect("write");
        std::fs::create_dir(tree.path().join(".design")).expect("dir");
        let rel = ".design/worker-0.log";
        // A worker (hostile, or on the Action a task that wants the job's files in its
        // artifact) links its log to a file outside: nothing is read.
        std::os::unix::fs::symlink(&secret, tree.path().join(rel)).expect("link");
        assert_eq!(log_in_tree(tree.path(), rel), None);
        std::fs::remove_file(tree.path().join(rel)).expect("rm");
        assert_eq!(log_in_tree(tree.path(), rel), None, "no log");
        std::fs::write(tree.path().join(rel), "did the work\n").expect("write");
        assert_eq!(
            log_in_tree(tree.path(), rel).as_deref(),
            Some("did the work\n")
        );
    }
}
