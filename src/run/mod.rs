//! `dagexec run`: executes the plan on this machine, following the seed's orchestration flow
//! (Steps 1–4) through the pure engine: pre-flight, then ready-set rounds of workers in
//! isolated worktrees, each attempt verified, failures retried before the round is
//! committed, completed patches integrated in plan-index order, the plan updated, one commit
//! per round, and completion. Everything on disk is left resumable at every moment.

pub(crate) mod attempt;
pub mod config;
pub(crate) mod integrate;
mod local;
pub mod lock;
mod resume;
pub mod ui;

// The reviewer loop, long-run output and questions around an attempt.
pub(crate) mod hooks;

use std::io::{self, BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{self, Schedule};
use crate::git::{GitError, Repo};
use crate::graph::Dag;
use crate::plan::model::{Plan, Status};
use crate::plan::{self, PlanErrors};
use crate::prompt;
use crate::render::summary;
use crate::setup::{self, Overlaps, checks};
use crate::update;
use attempt::AttemptInput;
pub use config::Settings;
pub use integrate::commit_message;
use resume::resume;
pub use ui::Ui;

pub use crate::exec::RunEnd;

/// Why a run could not start or continue.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] PlanErrors),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Lock(#[from] lock::LockError),
    #[error("{0} blocking assumption check(s) failed")]
    Preflight(usize),
    #[error("uncommitted changes at {} file(s) that pending tasks declare: {}", .0.len(), .0.join(", "))]
    Uncommitted(Vec<String>),
    #[error(
        "{path} has uncommitted changes ({how}); dagexec ticks the committed tasks.md in each round commit and never commits your edits"
    )]
    TasksMdUncommitted { path: String, how: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The worktrees folder a setting names cannot be used.
    #[error("{from}: {source}")]
    Worktrees {
        from: &'static str,
        #[source]
        source: GitError,
    },
    /// dagexec's own folder in the git directory vanished while the run went on.
    #[error(
        "{shown} was deleted while the run was going (its lock, prompt files and kept logs with it); the run stopped before starting more work"
    )]
    StateDeleted { shown: String },
    #[error("{0}")]
    Other(String),
}

impl RunError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            RunError::Plan(_) => String::new(),
            RunError::Git(GitError::NotARepository { .. } | GitError::NoCommits { .. }) => {
                "dagexec run needs a git repository with at least one commit.".into()
            }
            RunError::Git(_) => String::new(),
            RunError::Uncommitted(_) => "Commit or stash them and run again, or pass --yes to run anyway (a task's change to them then fails to integrate).".into(),
            RunError::TasksMdUncommitted { path, .. } => format!(
                "Commit it (`git add {path} && git commit`) so the run executes and ticks what you wrote, or restore it (`git restore {path}`), then run again."
            ),
            RunError::Lock(_) => "Wait for it to finish, or stop it (Ctrl-C); a lock from a crashed run is taken over automatically.".into(),
            RunError::Preflight(_) => "Fix them and run again, or pass --yes to proceed anyway.".into(),
            RunError::Write { .. } => "Check the permissions of .design/.".into(),
            RunError::Worktrees { .. } => "Name a folder outside the repository's work tree, or unset it: the worktrees then go to $XDG_CACHE_HOME (else ~/.cache)/dagexec/worktrees.".into(),
            RunError::StateDeleted { .. } => "Every round committed so far is kept: run `dagexec run` again and it resumes from there (tasks that were in progress start again).".into(),
            RunError::Other(_) => String::new(),
        }
    }
}

/// Everything `dagexec run` needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan: PathBuf,
    pub plan_rel: String,
    pub root: PathBuf,
    pub settings: Settings,
    pub yes: bool,
    pub dry_run: bool,
    pub check_timeout: std::time::Duration,
}

/// Runs the plan, showing its progress on `ui`.
pub fn run(opts: &RunOptions, ui: &Ui) -> Result<RunEnd, RunError> {
    let mut plan = plan::load(&opts.plan).map_err(PlanErrors::from)?;
    let dag = plan::validate::check_in(&plan, Some(&opts.plan_rel), &opts.root)?;
    let overlaps = Overlaps::of(&plan, &dag);
    let conflicts = overlaps.for_scheduling();
    if opts.dry_run {
        return dry_run(&plan, &dag, &conflicts, opts, ui);
    }
    hooks::check_reviewers(&plan, opts.settings.reviewer.as_deref(), &opts.root)
        .map_err(RunError::Other)?;
    let repo = Repo::discover(&opts.root)?;
    let repo = match &opts.settings.worktrees {
        Some(home) => {
            repo.with_worktrees_home(&home.dir)
                .map_err(|source| RunError::Worktrees {
                    from: home.from,
                    source,
                })?
        }
        None => repo,
    };
    let repo = Arc::new(repo);
    repo.head()?;
    let lock_path = repo.common_dir().join("dagexec").join("run.lock");
    let (_lock, taken) = lock::RunLock::acquire(&lock_path)?;
    if let lock::Taken::TakenOver(pid) = taken {
        ui.say(format!(
            "Took over the lock of an earlier run (pid {pid}) that is no longer running."
        ));
        let stopped = if pid > 0 {
            crate::procs::kill_left_by(pid)
        } else {
            0
        };
        if stopped > 0 {
            ui.say(format!(
                "Stopped {stopped} process(es) it left running (its workers, checks or reviewers)."
            ));
        }
    }
    resume::recover(&repo, ui)?;
    // A Spec Kit plan's tasks.md is ticked in its committed version; an edit not committed
    // would be neither run nor ticked as written, so it is committed first (never by dagexec).
    if let Some(tasks_md) = crate::speckit::own_tasks_md(&plan)
        && let Some((path, how)) = repo.uncommitted(std::slice::from_ref(&tasks_md))?.pop()
    {
        return Err(RunError::TasksMdUncommitted { path, how });
    }
    let pruned = attempt::retry_git(|| repo.prune_worktrees())?;
    // Declared before the pool and the runtime, so dropped after them: once their worktrees
    // are gone, the repository's folder goes too.
    let _folder = WorktreesFolder(&repo);
    if pruned > 0 {
        ui.say(format!(
            "Removed {pruned} worktree(s) left by an interrupted run."
        ));
    }
    let is_resume = plan.is_resume();
    if is_resume {
        resume(&repo, &mut plan, opts, ui)?;
    }
    resume::fail_exhausted(&mut plan, &dag, opts, ui)?;
    // Pre-flight (seed Steps 1–2).
    let validation = checks::gather(
        &plan,
        &opts.root,
        checks::CheckOptions {
            skip_checks: false,
            timeout: opts.check_timeout,
        },
    );
    let mut validation = validation;
    checks::drop_own_files(&mut validation, &opts.plan_rel);
    let setup = setup::output(&plan, &dag, &overlaps, validation);
    let v = &setup.validation;
    ui.say(format!("Executing: {}", setup.goal));
    ui.say(format!(
        "Tasks: {} (max dependency depth: {})",
        setup.task_count, setup.max_depth
    ));
    let passed = v.blocking_checks.iter().filter(|c| c.passed).count();
    ui.say(format!(
        "Validation: {passed}/{} blocking checks passed",
        v.blocking_checks.len()
    ));
    // The user's uncommitted files where pending tasks write: asked about before any
    // worker runs (dagexec never overwrites or cleans them up).
    let declared = checks::declared_paths(&plan);
    let theirs = checks::declared_changes(&plan, &repo.uncommitted(&declared)?, &opts.plan_rel);
    if !v.git_clean && theirs.is_empty() {
        ui.say("Note: the working tree has uncommitted changes; dagexec leaves them as they are.");
    }
    if !v.missing_context_files.is_empty() {
        ui.say(format!(
            "Missing context files: {}",
            v.missing_context_files.join(", ")
        ));
    }
    let failed: Vec<_> = v.blocking_checks.iter().filter(|c| !c.passed).collect();
    if !failed.is_empty() {
        for c in &failed {
            ui.say(format!(
                "  ✗ task {}: {} — `{}`: {}",
                c.task,
                c.claim,
                c.verify,
                c.output.lines().next().unwrap_or("")
            ));
        }
        if !opts.yes
            && !ask(
                ui,
                "Blocking checks failed. Fix them first (f), or proceed anyway (p)? [f/p]",
            )?
        {
            return Err(RunError::Preflight(failed.len()));
        }
        ui.say("Proceeding despite the failed checks.");
    }
    if !theirs.is_empty() {
        ui.say("Uncommitted changes at files that pending tasks declare (yours, not this run's):");
        for c in &theirs {
            ui.say(format!(
                "  {} ({}) — {}",
                c.path,
                c.how,
                c.tasks_text(&plan)
            ));
        }
        ui.say("dagexec never overwrites them: a task whose change touches one of them cannot be committed and fails after its attempts.");
        if !opts.yes
            && !ask(
                ui,
                "Commit or stash them first (f), or proceed anyway (p)? [f/p]",
            )?
        {
            return Err(RunError::Uncommitted(
                theirs.iter().map(|c| c.path.clone()).collect(),
            ));
        }
        ui.say("Proceeding with the uncommitted changes in place.");
    }
    if is_resume {
        ui.say("Resuming execution.");
        if plan.count(Status::Pending) == 0 {
            ui.say("All tasks are already resolved — nothing to do.");
            return finish(&repo, &mut plan, opts, ui, None);
        }
    }
    // Rounds (seed Step 3).
    // Prompt files live inside the repository's git directory (never in the work tree), in
    // a folder emptied at every start, so even a killed run leaves nothing in /tmp.
    let prompts = repo.common_dir().join("dagexec").join("prompts");
    let _ = crate::fsx::remove_all(repo.common_dir(), &prompts);
    // The temporary indexes of long-run snapshots a killed run was taking.
    let state = repo.common_dir().join("dagexec");
    for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("snapshot-") {
            let _ = crate::fsx::remove_all(repo.common_dir(), &e.path());
        }
    }
    crate::fsx::create_dir_all(repo.common_dir(), &prompts).map_err(|e| RunError::Write {
        path: prompts.clone(),
        source: e.into(),
    })?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&prompts)
        .map_err(|e| RunError::Other(format!("cannot create a temporary directory: {e}")))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::Other(format!("cannot start the async runtime: {e}")))?;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    runtime.spawn(async move {
        // Ctrl-C, or a polite stop (SIGTERM from a service manager or `timeout`): finish
        // cleanly, killing the workers and leaving the plan resumable.
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
        let _ = cancel_tx.send(true);
    });
    let pool = Arc::new(attempt::Pool::default());
    let round = round_counter(&plan);
    ui.progress(plan.count(Status::Completed), plan.tasks.len());
    local::run(
        &repo,
        &pool,
        &dag,
        &conflicts,
        opts,
        ui,
        scratch.path(),
        &cancel_rx,
        &runtime,
        &mut plan,
        round,
    )
}

/// Crash-testing seam: when `DAGEXEC_FAILPOINT` is `<name>:<round>`, the process kills itself
/// (SIGKILL, as a crash would) on reaching that point of that round. The resume tests use it to
/// stop a run before, between and after the steps of a round commit. `panic:<name>:<round>`
/// panics there instead (the panic-report test).
pub(crate) fn failpoint(name: &str, round: u32) {
    let Ok(v) = std::env::var("DAGEXEC_FAILPOINT") else {
        return;
    };
    if v == format!("{name}:{round}") {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
    if v == format!("panic:{name}:{round}") {
        panic!("failpoint {name}:{round} reached (DAGEXEC_FAILPOINT asked for a panic)");
    }
}

/// Removes the repository's worktree folder when the run ends, however it ends.
struct WorktreesFolder<'a>(&'a Repo);

impl Drop for WorktreesFolder<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.remove_worktrees_dir() {
            tracing::warn!("cannot remove the worktrees folder: {e}");
        }
    }
}

/// dagexec's folder in the git directory (`.git/dagexec`) still holds this run's lock and
/// prompt folder: someone deleting it during the run gets [`RunError::StateDeleted`] before
/// the next step, instead of the first file operation's raw error.
fn check_state(repo: &Repo, scratch: &Path) -> Result<(), RunError> {
    let lock = repo.common_dir().join("dagexec").join("run.lock");
    if lock.is_file() && scratch.is_dir() {
        return Ok(());
    }
    let dir = repo.common_dir().join("dagexec");
    let root = repo
        .root()
        .canonicalize()
        .unwrap_or_else(|_| repo.root().to_path_buf());
    let shown = dir
        .strip_prefix(&root)
        .unwrap_or(&dir)
        .display()
        .to_string();
    Err(RunError::StateDeleted { shown })
}

fn list(tasks: &[usize]) -> String {
    tasks
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn save(plan: &Plan, opts: &RunOptions) -> Result<(), RunError> {
    plan::save(plan, &opts.plan).map_err(|source| RunError::Write {
        path: opts.plan.clone(),
        source,
    })
}

/// Records the attempts Ctrl-C stopped (outcome `interrupted`) and saves the plan, keeping
/// the review histories attempts in flight wrote to the plan file.
pub(crate) fn keep_interrupted(
    pool: &attempt::Pool,
    plan: &mut Plan,
    opts: &RunOptions,
) -> Result<(), RunError> {
    let records = pool.take_interrupted();
    if records.is_empty() {
        return Ok(());
    }
    for r in &records {
        crate::usage::record(plan, r);
    }
    let _held = pool.memory.plan_file();
    pool.memory.apply(plan);
    save(plan, opts)
}

/// Why no new attempt may start, when the budget (`--max-cost`) is spent.
pub(crate) fn over_budget(plan: &Plan, opts: &RunOptions) -> Option<String> {
    opts.settings.max_cost?.exhausted(plan)
}

/// The run's end when the budget is spent (or an agent CLI stopped at its own spending
/// limit, `why`): the summary, then what the budget bought.
pub(crate) fn stop_for_budget(
    repo: &Repo,
    plan: &mut Plan,
    opts: &RunOptions,
    ui: &Ui,
    why: String,
) -> Result<RunEnd, RunError> {
    // `--max-cost`'s own words when it is spent, else why the loop stopped (a CLI's own
    // spending limit).
    let why = over_budget(plan, opts).unwrap_or(why);
    let end = finish(repo, plan, opts, ui, Some(RunEnd::BudgetSpent))?;
    ui.say(format!(
        "\nStopped: {why}. Run again with a higher --max-cost to go on."
    ));
    Ok(end)
}

/// The last round number recorded in the plan (`progress.round`, dagexec's own field).
pub(crate) fn round_counter(plan: &Plan) -> u32 {
    plan.progress
        .extra
        .get("round")
        .and_then(|v| v.as_u64())
        .unwrap_or(0) as u32
}

/// On a terminal, asks `question` (fix first, or proceed?); `true` to proceed.
fn ask(ui: &Ui, question: &str) -> Result<bool, RunError> {
    if !io::stdin().is_terminal() {
        return Ok(false);
    }
    ui.say(question);
    let mut line = String::new();
    io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| RunError::Other(e.to_string()))?;
    Ok(line.trim().eq_ignore_ascii_case("p"))
}

/// The input of one attempt of task `index`.
#[allow(clippy::too_many_arguments)]
fn attempt_input(
    plan: &Plan,
    index: usize,
    attempt: u32,
    base_prompt: &str,
    round: u32,
    base: &str,
    opts: &RunOptions,
    scratch: &Path,
) -> AttemptInput {
    AttemptInput {
        index,
        attempt,
        round,
        task: plan.tasks[index].clone(),
        prompt: prompt::spawn_prompt(plan, index, base_prompt),
        base: base.to_string(),
        worker: opts.settings.worker.clone(),
        timeout: opts.settings.timeout,
        scratch: scratch.to_path_buf(),
        plan_rel: opts.plan_rel.clone(),
        tasks_md: crate::speckit::own_tasks_md(plan),
        reviewer: opts.settings.reviewer.clone(),
    }
}

/// Seed Step 4: summary, clean-up, archive when everything completed.
pub(crate) fn finish(
    repo: &Repo,
    plan: &mut Plan,
    opts: &RunOptions,
    ui: &Ui,
    end: Option<RunEnd>,
) -> Result<RunEnd, RunError> {
    ui.finish();
    ui.say(String::new());
    ui.say(summary::final_summary(plan).trim_end());
    let logs = attempt::kept_logs(repo.common_dir());
    let shown = attempt::logs_dir_shown(repo.root(), repo.common_dir());
    let logs = crate::render::status::logs_section(plan, &shown, &logs, true);
    if !logs.is_empty() {
        ui.say(format!("\n{}", logs.trim_end()));
    }
    // Intermediate files, and the temporary files of atomic writes a crash may have left
    // beside the plan.
    let design = opts.root.join(".design");
    let plan_dir = opts.plan.parent().map(Path::to_path_buf);
    for dir in std::iter::once(design.clone()).chain(plan_dir.filter(|d| *d != design)) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let intermediate = dir == design
                && ((name.starts_with("worker-") && name.ends_with(".log"))
                    || (name.starts_with("processor-batch-") && name.ends_with(".json"))
                    || name == "tasks.json");
            if intermediate || checks::is_dagexec_temp(&name) {
                let _ = crate::fsx::remove_file(&opts.root, &e.path());
            }
        }
    }
    let end = hooks::ask(plan, opts, ui, end);
    let all_done = plan.tasks.iter().all(|t| t.status == Status::Completed);
    if all_done {
        let stamp = utc_timestamp();
        if let update::Completion::Archive { to } = update::completion(plan, &opts.plan, &stamp) {
            if let Some(dir) = to.parent() {
                crate::fsx::create_dir_all(crate::fsx::default_root(dir), dir).map_err(|e| {
                    RunError::Write {
                        path: dir.to_path_buf(),
                        source: e.into(),
                    }
                })?;
            }
            // The archive is a copy until the commit that moves it lands: a crash before
            // then leaves the plan in place (every task completed), and the next run
            // archives it again.
            let bytes = std::fs::read(&opts.plan).map_err(|source| RunError::Write {
                path: opts.plan.clone(),
                source,
            })?;
            plan::load::write_atomic(&to, &bytes).map_err(|source| RunError::Write {
                path: to.clone(),
                source,
            })?;
            let rel = to
                .strip_prefix(repo.root())
                .unwrap_or(&to)
                .to_string_lossy()
                .to_string();
            let index = repo.round_index()?;
            // With a Spec Kit plan's tasks.md, ticked (when the last round had nothing to commit).
            hooks::tasks_md(plan, &index, ui)?;
            index.add_own_files(repo, std::slice::from_ref(&rel))?;
            index.remove(std::slice::from_ref(&opts.plan_rel))?;
            let message = format!(
                "dagexec: all {} tasks completed\n\nThe plan is archived as {rel}.\n",
                plan.tasks.len()
            );
            if let Some(prepared) = index.prepare(repo, &message)? {
                prepared.publish(repo)?;
                failpoint("archive-after-ref", 0);
                prepared.sync(repo)?;
            }
            match std::fs::remove_file(&opts.plan) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(RunError::Write {
                        path: opts.plan.clone(),
                        source: e,
                    });
                }
                _ => {}
            }
            ui.say(format!("The plan is archived as {rel}."));
        }
        return Ok(end.unwrap_or(RunEnd::Completed));
    }
    Ok(end.unwrap_or(RunEnd::Incomplete))
}

/// UTC `%Y%m%dT%H%M%SZ` for the v3 history archive.
fn utc_timestamp() -> String {
    jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string()
}

/// `--dry-run`: the rounds the engine would run if every task completed.
fn dry_run(
    plan: &Plan,
    dag: &Dag,
    conflicts: &crate::overlap::Conflicts,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<RunEnd, RunError> {
    let (batches, deadlock) = engine::simulate(plan, dag, conflicts, opts.settings.schedule, None);
    ui.say(format!(
        "Dry run: {} round(s) if every task completes (nothing is changed).",
        batches.len()
    ));
    for (r, b) in batches.iter().enumerate() {
        let names = |g: &[usize]| {
            g.iter()
                .map(|&i| format!("{i} {}", plan.tasks[i].subject))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let groups = match opts.settings.schedule {
            Schedule::Rounds => engine::sequential_groups(b, dag, conflicts),
            _ => vec![b.clone()],
        };
        if groups.len() == 1 {
            ui.say(format!("Round {}: {}", r + 1, names(b)));
        } else {
            // Tasks sharing files run one after another inside the round.
            ui.say(format!(
                "Round {}: {} (sharing files: {} groups, one after another)",
                r + 1,
                groups
                    .iter()
                    .map(|g| names(g))
                    .collect::<Vec<_>>()
                    .join(", then "),
                groups.len()
            ));
        }
    }
    if let Some(p) = deadlock {
        ui.say(engine::deadlock_message(p));
        return Ok(RunEnd::Deadlock);
    }
    Ok(RunEnd::Completed)
}
