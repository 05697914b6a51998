//! One attempt at one task: a fresh worktree at the round's base, the worker, the facts the
//! processor needs (changes, acceptance checks run in that tree), and the verdict.
//!
//! Each attempt's stdout, stderr and work log are kept as
//! `<git-common-dir>/dagexec/logs/run-R/task-N-attempt-K.{stdout,stderr,log}` ([`keep_logs`]):
//! every run that keeps logs gets a folder of its own, numbered on ([`RunLogs`]), so no attempt
//! ever overwrites another's (`dagexec retry N` and a new plan start a task's attempts at 1
//! again, in a new run). When a run makes its folder, older runs are pruned ([`prune_logs`]:
//! the newest [`KEEP_RUNS`] kept, older ones dropped while all logs pass [`LOGS_CAP`]). The
//! logs are listed by `dagexec status` and the run's summary ([`kept_logs`]). The folder is
//! inside git's own directory, where no patch can place a file; it is still written without
//! following links (each folder checked, a run's folder made anew, each file created anew with
//! `O_EXCL|O_NOFOLLOW`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::edge::git::{Repo, Worktree};
use crate::edge::shell;
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::pure::outcome::{self, AttemptReport, CheckRun, Verdict};
use crate::pure::plan::model::Task;

/// What the runner hands an attempt.
#[derive(Debug, Clone)]
pub(crate) struct AttemptInput {
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
    /// A Spec Kit plan's tasks.md, relative to the root: only dagexec ticks it, so a worker's
    /// edit of it is dropped from the patch.
    pub tasks_md: Option<String>,
    /// The run's reviewer command (a task's own `reviewer` field wins).
    pub reviewer: Option<String>,
}

/// What came of it.
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    Judged(Box<Judged>),
    /// Ctrl-C arrived while the worker ran.
    Cancelled,
}

pub(crate) use crate::flow::exec::Judged;

/// Worktrees kept between attempts: a finished attempt's tree is reset to the next base
/// instead of being removed and checked out again (checkout time grows with the tree) — only
/// when no process still holds anything in it, and moved to a new path ([`reusable`]);
/// otherwise it is removed and the next attempt gets a new tree. No two attempts work at one
/// path.
/// Whatever is left when the run ends is removed on drop.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: std::sync::Mutex<Vec<Worktree>>,
    created: std::sync::atomic::AtomicUsize,
    /// Review history and rejected changes between a task's attempts.
    pub(crate) memory: super::hooks::Memory,
    /// The records of attempts Ctrl-C stopped, for the plan ([`Pool::take_interrupted`]).
    interrupted: std::sync::Mutex<Vec<crate::pure::usage::AttemptRecord>>,
    /// This run's folder of kept logs, made when the first attempt's logs are kept.
    pub(super) logs: RunLogs,
}

impl Pool {
    /// A worktree at `base`, at a path no earlier attempt or run used: a pooled one moved
    /// there when it is proven quiet and, after the reset, exactly the base ([`reusable`]);
    /// else a new one.
    fn acquire(&self, repo: &Repo, base: &str) -> Result<Worktree, crate::edge::git::GitError> {
        let n = self
            .created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("slot-{}-{n}", run_id());
        loop {
            let reused = self
                .free
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            let Some(mut wt) = reused else { break };
            match reusable(&mut wt, base, &name) {
                Ok(()) => return Ok(wt),
                // Dropped: removed.
                Err(why) => tracing::debug!(
                    "not reusing the worktree {}: {why}; making a new one",
                    wt.path().display()
                ),
            }
        }
        retry_git(|| repo.add_worktree(base, &name))
    }

    /// Keeps the record of an attempt Ctrl-C stopped.
    fn interrupted(&self, input: &AttemptInput, start: jiff::Timestamp) {
        let measured =
            crate::pure::usage::Measured::since(start, crate::pure::usage::Usage::default());
        let outcome = crate::pure::usage::Outcome::Interrupted;
        let record =
            crate::pure::usage::AttemptRecord::new(input.index, input.attempt, &measured, outcome);
        self.interrupted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record);
    }

    /// The records of the attempts Ctrl-C stopped since the last call, in the order they
    /// stopped.
    pub(super) fn take_interrupted(&self) -> Vec<crate::pure::usage::AttemptRecord> {
        std::mem::take(
            &mut *self
                .interrupted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Takes a finished attempt's worktree back for later attempts — unless a process the
    /// attempt started still holds something in it: then the tree is removed, and the warning
    /// saying so is returned.
    fn release(&self, wt: Worktree) -> Option<String> {
        match crate::edge::procs::inside(wt.path()) {
            Some(holders) if holders.is_empty() => {
                self.free
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(wt);
                None
            }
            // Without /proc nothing proves the tree quiet: a new one for the next attempt.
            None => None,
            Some(holders) => Some(format!(
                "a process the attempt started is still running in its worktree ({}); that worktree is removed and never given to another attempt (stop the process if it should not run)",
                holders
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Whether a pooled worktree may serve the next attempt, made ready for it: no process holds
/// anything in it ([`crate::edge::procs::inside`]: an escaped process of an earlier attempt would
/// keep writing into it); then it moves to the new path `name` (a process that only knows the
/// old path writes nowhere), and after the reset to `base` it must be exactly `base`,
/// untracked and ignored files included.
fn reusable(wt: &mut Worktree, base: &str, name: &str) -> Result<(), String> {
    match crate::edge::procs::inside(wt.path()) {
        None => return Err("no /proc to tell whether a process still works in it".into()),
        Some(h) if !h.is_empty() => {
            let h: Vec<String> = h.iter().map(ToString::to_string).collect();
            return Err(format!("still in use by {}", h.join(", ")));
        }
        Some(_) => {}
    }
    wt.move_to(name).map_err(|e| e.to_string())?;
    wt.reset_to(base).map_err(|e| e.to_string())?;
    match wt.differs_from_base() {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(format!("not its base after the reset: {why}")),
        Err(e) => Err(e.to_string()),
    }
}

/// This process's run, in its worktrees' names: a run never makes a worktree at a path an
/// earlier run used, so a process that run left behind (after a kill -9) cannot write into a
/// tree of this one through the path it knows.
fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| format!("{:08x}", fastrand::u32(..)))
}

/// Retries a git operation twice more after a short pause: git commands left running by a
/// run that was killed can hold git's own locks for a moment after the next run starts.
pub(crate) fn retry_git<T>(
    mut op: impl FnMut() -> Result<T, crate::edge::git::GitError>,
) -> Result<T, crate::edge::git::GitError> {
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
    all: &crate::edge::git::Changes,
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
    pub all: crate::edge::git::Changes,
    /// The changes to integrate: without the plan file, a Spec Kit plan's tasks.md and the
    /// work log.
    pub kept: crate::edge::git::Changes,
}

/// The attempt pipeline after the worker ran in `tree` — observe, then judge — shared by
/// local attempts and the Action's work job: the changes to integrate (`all` without the plan
/// file, a Spec Kit plan's tasks.md and the work log, `(plan_rel, tasks_md, log_rel)`: a
/// worker's edit of them is dropped, with a warning), the facts ([`observe`]: acceptance checks
/// run in `tree`), the processor's verdict, with the worker's failure `detail` (a missing
/// command, the stderr tail) on a failed exit, a long-run plan's quiet status, and the usage
/// report's warning.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
pub(crate) fn observe_and_judge(
    tree: &Path,
    (index, task): (usize, &Task),
    run: &worker::WorkerRun,
    all: crate::edge::git::Changes,
    (plan_rel, tasks_md, log_rel): (&str, Option<&str>, &str),
    timeout: Duration,
    (detail, said, warnings): (&str, &crate::pure::said::Said, Vec<String>),
) -> Result<Observed, crate::edge::git::GitError> {
    let mut own = vec![plan_rel, log_rel];
    own.extend(tasks_md);
    let kept = all.without(&own)?;
    let report = observe(tree, task, run, &all, timeout);
    let mut verdict = outcome::judge_among(index, task, &report, (plan_rel, tasks_md));
    if verdict.status == crate::pure::plan::model::Status::Failed
        && report.exit != outcome::Exit::Success
    {
        verdict.result.push_str(detail);
    }
    // What the agent CLI said: its failure in its words, what it refused, no retry.
    crate::pure::outcome::heed(&mut verdict, said);
    super::hooks::quiet_long_run(task, &mut verdict);
    verdict.warnings.extend(warnings);
    Ok(Observed {
        report,
        verdict,
        all,
        kept,
    })
}

/// Runs one attempt. Git and check commands block, so they run on the blocking pool.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub(crate) async fn run(
    repo: Arc<Repo>,
    pool: Arc<Pool>,
    input: AttemptInput,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<AttemptEnd, crate::edge::git::GitError> {
    let start = jiff::Timestamp::now();
    let (r, p, base) = (repo.clone(), pool.clone(), input.base.clone());
    let wt: Worktree = tokio::task::spawn_blocking(move || p.acquire(&r, &base))
        .await
        .expect("worktree creation does not panic")?;
    let store = crate::sources::longrun::partial::Store::new(repo.common_dir());
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
        (input.round, vec![input.plan_rel.clone(), log_rel.clone()]),
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
        let _ = crate::edge::fsx::write(repo.root(), &repo.root().join(&log_rel), text.as_bytes());
        run.log = Some(text);
    }
    let kept = pool
        .logs
        .dir(repo.common_dir())
        .and_then(|dir| keep_logs(repo.common_dir(), &dir, input.index, input.attempt, &run));
    if let Err(e) = kept {
        tracing::warn!("task {}: cannot keep the attempt's logs: {e}", input.index);
    }
    // What the worker spent; a structured output (claude's result object, codex's events)
    // stands for its output by its text (the raw output is in the kept logs).
    let (usage, said, warnings) = reported_usage(&mut run);
    let detail = worker::failure_detail(&run, &input.worker);
    let question = super::hooks::long_run_output(
        (&input.task, input.attempt),
        &mut run.stdout,
        wt.path(),
        repo.root(),
    );
    let plan_rel = input.plan_rel.clone();
    let tasks_md = input.tasks_md.clone();
    let task = input.task.clone();
    let index = input.index;
    let timeout = input.timeout;
    let duration = run.duration;
    let timed_out = matches!(run.exit, outcome::Exit::TimedOut(_));
    let asked = question.clone();
    let judged = tokio::task::spawn_blocking(
        move || -> Result<(Verdict, Vec<u8>, Vec<String>, Worktree), crate::edge::git::GitError> {
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
                (&plan_rel, tasks_md.as_deref(), &log_rel),
                timeout,
                (&detail, &said, warnings),
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
    if let Some(warning) = pool.release(wt) {
        verdict.warnings.push(warning);
    }
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
        patch: patch.into(),
        touched,
        duration,
        reviews,
        question,
        measured: Some(crate::pure::usage::Measured::since(start, usage)),
        timed_out,
    })))
}

/// Reads what the worker reported spending ([`crate::pure::usage::gather`], token-only CLIs priced
/// with [`crate::pure::prices::current`]) and what it said about how it ended (its structured
/// output, else its exit: [`worker::classify`]); when its output was structured, replaces it
/// with the text that stands for it. Returns the usage, what the CLI said, and warnings (an
/// unusable usage file, a model without a price).
pub(crate) fn reported_usage(
    run: &mut worker::WorkerRun,
) -> (
    crate::pure::usage::Usage,
    crate::pure::said::Said,
    Vec<String>,
) {
    let g = crate::pure::usage::gather(
        &run.stdout,
        &run.stderr_tail,
        run.usage.as_deref(),
        crate::pure::prices::current(),
    );
    let said = g.said.or(worker::classify(run));
    if let Some(text) = g.text {
        run.stdout = text;
    }
    (g.usage, said, g.warnings)
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

/// Runs kept in [`logs_dir`]: when a run makes its folder, only the newest this many (its own
/// included) stay.
pub(crate) const KEEP_RUNS: usize = 20;

/// Older runs' folders are also dropped, oldest first, while everything in [`logs_dir`] is
/// larger than this (the current run's folder is never dropped).
pub(crate) const LOGS_CAP: u64 = 256 << 20;

/// This run's folder of kept logs (`run-R` in [`logs_dir`]), made on first use, so a run that
/// starts no attempt neither makes one nor prunes the earlier runs' logs.
#[derive(Debug, Default)]
pub(crate) struct RunLogs {
    dir: std::sync::Mutex<Option<PathBuf>>,
}

impl RunLogs {
    /// The folder, made ([`new_run_dir`]) and the older runs pruned ([`prune_logs`]) the first
    /// time.
    pub(crate) fn dir(&self, common_dir: &Path) -> Result<PathBuf, crate::edge::fsx::Error> {
        let mut dir = self
            .dir
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = dir.as_ref() {
            return Ok(d.clone());
        }
        let made = new_run_dir(common_dir)?;
        if let Err(e) = prune_logs(common_dir, &made, KEEP_RUNS, LOGS_CAP) {
            tracing::warn!("cannot prune the kept logs of earlier runs: {e}");
        }
        *dir = Some(made.clone());
        Ok(made)
    }
}

/// The run number of a folder name in [`logs_dir`] (`run-12` → 12).
fn run_number(name: &str) -> Option<u32> {
    let n = name.strip_prefix("run-")?;
    (!n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// Makes the next run's folder in [`logs_dir`]: `run-R`, R one more than any run there (so
/// numbers keep rising while older runs are pruned). The folder is created anew (`mkdir`,
/// never an existing one or a link planted at its name: another number is taken then).
pub(crate) fn new_run_dir(common_dir: &Path) -> Result<PathBuf, crate::edge::fsx::Error> {
    let dir = logs_dir(common_dir);
    crate::edge::fsx::create_dir_all(common_dir, &dir)?;
    let last = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| run_number(&e.file_name().to_string_lossy()))
        .max()
        .unwrap_or(0);
    let mut n = last.saturating_add(1);
    loop {
        let path = dir.join(format!("run-{n}"));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < u32::MAX => n += 1,
            Err(source) => {
                return Err(crate::edge::fsx::Error::Io {
                    action: "create",
                    path,
                    source,
                });
            }
        }
    }
}

/// Bytes in `path`: a file's size, or the files directly in a folder (links not followed).
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
        .map(|m| m.len())
        .sum()
}

/// The pruning rule of [`logs_dir`], applied when `current` (a run's new folder) is made: the
/// newest `keep_runs` runs stay (by run number; `current` is the newest), and older ones are
/// dropped, oldest first, while the folder holds more than `cap` bytes — never `current`. Files
/// kept flat by an older dagexec (`task-N-attempt-K.*`) count as the oldest run. Returns the
/// runs removed, oldest first.
pub(crate) fn prune_logs(
    common_dir: &Path,
    current: &Path,
    keep_runs: usize,
    cap: u64,
) -> Result<Vec<String>, crate::edge::fsx::Error> {
    let dir = logs_dir(common_dir);
    // (run number, the paths that make it up, their size); the flat files are run 0.
    let mut runs: Vec<(u32, Vec<PathBuf>, u64)> = Vec::new();
    let mut flat = (0, Vec::new(), 0);
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path == current {
            continue;
        }
        if let Some(n) = run_number(&name) {
            let size = size_of(&path);
            runs.push((n, vec![path], size));
        } else if name.starts_with("task-") {
            flat.2 += size_of(&path);
            flat.1.push(path);
        }
    }
    if !flat.1.is_empty() {
        runs.push(flat);
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut total = size_of(current) + runs.iter().map(|r| r.2).sum::<u64>();
    let mut removed = Vec::new();
    // Newest first: the first `keep_runs - 1` older runs may stay (with `current`).
    for (kept, (n, paths, size)) in runs.into_iter().enumerate().rev() {
        if kept + 1 < keep_runs && total <= cap {
            continue;
        }
        for path in &paths {
            crate::edge::fsx::remove_all(common_dir, path)?;
        }
        total = total.saturating_sub(size);
        removed.push(if n == 0 {
            "task-*".to_string()
        } else {
            format!("run-{n}")
        });
    }
    Ok(removed)
}

/// Keeps what attempt `attempt` of task `index` printed — its stdout and stderr (the tails the
/// worker runner keeps) and its work log — as `task-N-attempt-K.{stdout,stderr,log}` in the
/// run's folder `run_dir` ([`RunLogs::dir`]), through [`crate::edge::fsx`] (a link on the way is
/// refused; one at a file's name is removed, not followed). An attempt number is started once
/// per run, so nothing of another attempt is overwritten. Returns the files written.
pub(crate) fn keep_logs(
    common_dir: &Path,
    run_dir: &Path,
    index: usize,
    attempt: u32,
    run: &worker::WorkerRun,
) -> Result<Vec<PathBuf>, crate::edge::fsx::Error> {
    keep_run_logs(
        common_dir,
        run_dir,
        &format!("task-{index}-attempt-{attempt}"),
        run,
    )
}

/// Writes `run`'s stdout, stderr tail and work log to `<stem>.{stdout,stderr,log}` in
/// `run_dir`, as [`keep_logs`] does for a worker (the reviewer's are `<stem>.review`).
pub(crate) fn keep_run_logs(
    common_dir: &Path,
    run_dir: &Path,
    stem: &str,
    run: &worker::WorkerRun,
) -> Result<Vec<PathBuf>, crate::edge::fsx::Error> {
    crate::edge::fsx::create_dir_all(common_dir, run_dir)?;
    let mut written = Vec::new();
    let files = [
        ("stdout", Some(&run.stdout)),
        ("stderr", Some(&run.stderr_tail)),
        ("log", run.log.as_ref()),
    ];
    for (ext, text) in files {
        let Some(text) = text else { continue };
        let path = run_dir.join(format!("{stem}.{ext}"));
        crate::edge::fsx::remove_file(common_dir, &path)?;
        crate::edge::fsx::write(common_dir, &path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// `task-N-attempt-K.kind` → (N, K, kind).
fn parse_log_name(name: &str) -> Option<(usize, u32, String)> {
    let rest = name.strip_prefix("task-")?;
    let (task, rest) = rest.split_once("-attempt-")?;
    let (attempt, kind) = rest.split_once('.')?;
    Some((task.parse().ok()?, attempt.parse().ok()?, kind.to_string()))
}

/// The kept logs: for each task index, each attempt kept (its run, its number, the kinds kept:
/// `stdout`, `stderr`, `log`), oldest run first. Files kept flat by an older dagexec are run 0.
/// Empty when there are none.
pub(crate) fn kept_logs(common_dir: &Path) -> crate::pure::render::status::KeptLogs {
    use crate::pure::render::status::KeptAttempt;
    let mut found: std::collections::BTreeMap<(usize, u32, u32), Vec<String>> =
        std::collections::BTreeMap::new();
    let dir = logs_dir(common_dir);
    let mut add = |run: u32, name: &str| {
        if let Some((task, attempt, kind)) = parse_log_name(name) {
            found.entry((task, run, attempt)).or_default().push(kind);
        }
    };
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        match run_number(&name) {
            Some(run) if is_dir => {
                for file in std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    add(run, &file.file_name().to_string_lossy());
                }
            }
            _ => add(0, &name),
        }
    }
    let mut kept = crate::pure::render::status::KeptLogs::default();
    for ((task, run, attempt), mut kinds) in found {
        let rank = |k: &String| ["stdout", "stderr", "log"].iter().position(|x| x == k);
        kinds.sort_by_key(|k| (rank(k).unwrap_or(3), k.clone()));
        kept.entry(task).or_default().push(KeptAttempt {
            run,
            attempt,
            kinds,
        });
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
        let logs = RunLogs::default();
        let run1 = logs.dir(common.path()).expect("run folder");
        assert_eq!(run1, logs_dir(common.path()).join("run-1"));
        assert_eq!(logs.dir(common.path()).expect("the same"), run1);
        let run = finished("out\n", "err\n", Some("log\n"));
        keep_logs(common.path(), &run1, 3, 1, &run).expect("kept");
        keep_logs(common.path(), &run1, 3, 2, &finished("o2", "e2", None)).expect("kept");
        assert_eq!(
            std::fs::read_to_string(run1.join("task-3-attempt-1.stderr")).expect("stderr"),
            "err\n"
        );
        let kept = kept_logs(common.path());
        let shown: Vec<_> = kept[&3]
            .iter()
            .map(|a| (a.run, a.attempt, a.kinds.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    1,
                    1,
                    vec!["stdout".to_string(), "stderr".into(), "log".into()]
                ),
                (1, 2, vec!["stdout".to_string(), "stderr".into()]),
            ]
        );
    }

    /// Issue 20 §4: `dagexec retry N` and a new plan start a task's attempts at 1 again; a new
    /// run keeps them in a folder of its own, so the first run's attempt 1 is still there.
    #[test]
    fn a_new_run_never_overwrites_an_earlier_runs_attempt() {
        let common = tempfile::tempdir().expect("tempdir");
        let first = RunLogs::default().dir(common.path()).expect("run 1");
        keep_logs(common.path(), &first, 0, 1, &finished("first", "", None)).expect("kept");
        let second = RunLogs::default().dir(common.path()).expect("run 2");
        assert_eq!(second, logs_dir(common.path()).join("run-2"));
        keep_logs(common.path(), &second, 0, 1, &finished("again", "", None)).expect("kept");
        assert_eq!(
            std::fs::read_to_string(first.join("task-0-attempt-1.stdout")).expect("kept"),
            "first"
        );
        let runs: Vec<u32> = kept_logs(common.path())[&0].iter().map(|a| a.run).collect();
        assert_eq!(runs, [1, 2]);
    }

    #[test]
    fn old_runs_are_pruned_by_count_and_by_size() {
        let common = tempfile::tempdir().expect("tempdir");
        let dir = logs_dir(common.path());
        std::fs::create_dir_all(&dir).expect("dir");
        // Logs an older dagexec kept flat count as the oldest run.
        std::fs::write(dir.join("task-0-attempt-1.stdout"), "flat").expect("write");
        for n in 1..=5 {
            std::fs::create_dir(dir.join(format!("run-{n}"))).expect("dir");
            std::fs::write(
                dir.join(format!("run-{n}/task-0-attempt-1.stdout")),
                "0123456789",
            )
            .expect("write");
        }
        std::fs::write(dir.join("notes.txt"), "not ours").expect("write");
        let current = new_run_dir(common.path()).expect("run 6");
        assert_eq!(current, dir.join("run-6"));
        let removed = prune_logs(common.path(), &current, 4, u64::MAX).expect("pruned");
        assert_eq!(removed, ["task-*", "run-1", "run-2"]);
        // Ten bytes a run: a cap of 25 keeps the two newest older runs besides the current one.
        std::fs::write(current.join("task-1-attempt-1.stdout"), "").expect("write");
        let removed = prune_logs(common.path(), &current, 4, 25).expect("pruned");
        assert_eq!(removed, ["run-3"]);
        // Never the current run, however large.
        let removed = prune_logs(common.path(), &current, 1, 0).expect("pruned");
        assert_eq!(removed, ["run-4", "run-5"]);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(left, ["notes.txt", "run-6"]);
        // Numbers keep rising after pruning.
        assert_eq!(
            new_run_dir(common.path()).expect("run 7"),
            dir.join("run-7")
        );
    }

    #[test]
    fn a_run_folder_is_made_anew_never_through_a_planted_link() {
        let common = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let dir = logs_dir(common.path());
        std::fs::create_dir_all(&dir).expect("dir");
        std::os::unix::fs::symlink(outside.path(), dir.join("run-2")).expect("link");
        let logs = RunLogs::default();
        let made = logs.dir(common.path()).expect("a run folder");
        assert_eq!(made, dir.join("run-3"));
        keep_logs(common.path(), &made, 0, 1, &finished("x", "y", None)).expect("kept");
        assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 0);
    }

    #[test]
    fn a_linked_log_folder_is_refused() {
        let common = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(common.path().join("dagexec")).expect("dir");
        std::os::unix::fs::symlink(outside.path(), logs_dir(common.path())).expect("link");
        let err = RunLogs::default().dir(common.path()).unwrap_err();
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
