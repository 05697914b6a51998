//! `dagexec run`: executes the plan on this machine, following the seed's orchestration flow
//! (Steps 1–4) through the pure engine: pre-flight, then ready-set rounds of workers in
//! isolated worktrees, each attempt verified, failures retried before the round is
//! committed, completed patches integrated in plan-index order, the plan updated, one commit
//! per round, and completion. Everything on disk is left resumable at every moment.
//! The executor is `executor`, resume after a crash `resume`, and the embedded demo `demo`.

pub mod demo;
mod executor;
mod gateway;
mod resume;

use std::io::{self, BufRead, IsTerminal};
use std::path::Path;
use std::sync::Arc;

use crate::edge::git::Repo;
use crate::edge::lock;
use crate::flow::attempt::{self, AttemptInput};
use crate::flow::preflight::{self, Overlaps, checks};
use crate::flow::{RunEnd, RunError, RunOptions, Ui, finish, round_counter};
use crate::pure::engine::{self, Schedule};
use crate::pure::graph::Dag;
use crate::pure::plan::PlanErrors;
use crate::pure::plan::model::{Plan, Status};
use resume::resume;

/// Runs the plan, showing its progress on `ui`.
pub fn run(opts: &RunOptions, ui: &Ui) -> Result<RunEnd, RunError> {
    let mut plan = crate::edge::plan_file::load(&opts.plan).map_err(PlanErrors::from)?;
    let dag = crate::edge::plan_file::check_in(&plan, Some(&opts.plan_rel), &opts.root)?;
    let overlaps = Overlaps::of(&plan, &dag);
    let conflicts = opts
        .settings
        .overlap
        .for_scheduling(overlaps.for_scheduling(), plan.tasks.len());
    if opts.dry_run {
        return Ok(dry_run(&plan, &dag, &conflicts, opts, ui));
    }
    crate::flow::steps::review::check_programs(&plan, &opts.settings, &opts.root)
        .map_err(RunError::Other)?;
    // The model gateway's settings and the user's Codex configuration it follows, before
    // anything is written (a branch made, a round recovered); warned about once, here.
    gateway::check(&plan, opts)?;
    let repo = Arc::new(open_repo(opts)?);
    repo.head()?;
    let _lock = take_lock(&repo, ui)?;
    crate::flow::remove_leftovers(&opts.root, &opts.plan, false);
    let interrupted = resume::recover(&repo, &opts.plan_rel, ui)?;
    if interrupted == resume::Interrupted::Finished && opts.plan.is_file() {
        // The plan in the work tree was brought to the round commit a crash interrupted (an
        // archiving commit removed it: the plan read before, every task completed, is
        // archived again).
        plan = crate::edge::plan_file::load(&opts.plan).map_err(PlanErrors::from)?;
    }
    keep_live_spend(&repo, &mut plan, opts, ui)?;
    // A task list (Spec Kit, Kiro, Taskmaster) is written back in its committed version; an
    // edit not committed would be neither run nor kept as written, so it is committed first
    // (never by dagexec).
    if let Some(tasks_md) = crate::sources::own_file(&plan)
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
        resume(&repo, &mut plan, interrupted, opts, ui)?;
    }
    // Before the attempts used up are failed: a rebase the ledger gives back its attempt.
    let merges = merge_ledger(&repo, &mut plan, is_resume, opts, ui)?;
    resume::fail_exhausted(&mut plan, &dag, opts, ui)?;
    preflight(&repo, &plan, &dag, &overlaps, opts, ui)?;
    where_rounds_go(&repo, opts, ui)?;
    if is_resume {
        ui.say("Resuming execution.");
        if plan.count(Status::Pending) == 0 {
            ui.say(
                crate::pure::render::summary::nothing_runs(&plan)
                    .unwrap_or_else(|| "All tasks are already resolved — nothing to do.".into()),
            );
            return finish(&repo, &mut plan, opts, ui, None);
        }
    }
    let scratch = prepare_state(&repo)?;
    let (runtime, cancel_rx, stopped_by) = start_runtime()?;
    let gateway = gateway::start(&runtime, &plan, opts)?;
    let pool = Arc::new(attempt::Pool {
        gateway,
        ..attempt::Pool::default()
    });
    let round = round_counter(&plan);
    ui.progress(plan.count(Status::Completed), plan.total());
    let local = executor::Local {
        repo: &repo,
        pool: &pool,
        dag: &dag,
        opts,
        ui,
        scratch: scratch.path(),
        cancel: &cancel_rx,
        stopped_by: &stopped_by,
        running: tokio::task::JoinSet::new(),
        build: crate::flow::integrate::RoundBuild::start(),
        base: None,
        ledger: merges,
        ids: crate::sources::identities(&plan),
    };
    // The one place a local run blocks on a future: the loop, which drives the attempts
    // (tasks of `runtime`); its blocking steps (git, the plan file) hold up only the loop.
    runtime.block_on(executor::run(local, &conflicts, &mut plan, round))
}

/// `overlap: merge`: the integration's ledger — when the run resumes, the one the run it
/// resumes kept, made true again ([`crate::flow::merge::Merges::open`]). Under another policy
/// none, and a ledger an earlier run left is removed.
fn merge_ledger(
    repo: &Repo,
    plan: &mut Plan,
    resume: bool,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<Option<crate::flow::merge::Merges>, RunError> {
    if opts.settings.overlap != crate::pure::overlap::Policy::Merge {
        crate::flow::merge::forget(repo)?;
        return Ok(None);
    }
    crate::flow::merge::Merges::open(repo, &opts.plan_rel, plan, resume, ui).map(Some)
}

/// What the attempts in flight when the last run died (`kill -9`, a power loss) had spent
/// through the model gateway, kept on disk as it grew ([`crate::flow::live`]): recorded in
/// the plan (outcome `interrupted`, no signal), so the totals and `max-cost` count it — of a
/// task removed since, counted apart ([`crate::pure::usage::add_removed`]).
fn keep_live_spend(
    repo: &Repo,
    plan: &mut Plan,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(), RunError> {
    let left = crate::flow::live::left(repo.common_dir(), plan);
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    let cut = |task: String, r: &crate::pure::usage::AttemptRecord| {
        ui.say(format!(
            "Task {task} attempt {} was cut short when the last run stopped; what it spent through the model gateway is recorded: {}.",
            r.attempt,
            crate::pure::usage::spend_text(&r.usage)
        ));
    };
    for r in &left.records {
        crate::pure::usage::record(plan, r);
        // One that ended is given back when resume finds it (`update::prepare_resume`).
        if r.outcome != crate::pure::usage::Outcome::Interrupted {
            continue;
        }
        let done = plan.tasks[r.task].status == crate::pure::plan::model::Status::Completed;
        cut(
            format!(
                "{}{}",
                names.get(r.task),
                if done { " (marked done since)" } else { "" }
            ),
            r,
        );
    }
    for (id, r) in &left.removed {
        crate::pure::usage::add_removed(plan, &r.usage);
        cut(format!("{id} (no longer in the plan)"), r);
    }
    if left != crate::flow::live::Left::default() {
        crate::flow::save(plan, opts)?;
    }
    crate::flow::live::clear(repo.common_dir());
    Ok(())
}

/// Before `run` reads the work tree's plan as gone (archived, or never written): a round
/// commit an interrupted run published and did not finish bringing to the work tree — the
/// archiving commit, killed after it removed the plan there — is finished first, under the
/// run's lock, so the plan's place is read as the commit left it and no record is left for
/// a later run (of a new plan at the same path) to act on. The temporary files of plan writes
/// a killed run left beside it go too, unless another run holds the lock.
pub fn finish_interrupted_round(root: &Path, plan_rel: &str, ui: &Ui) -> Result<(), RunError> {
    let Ok(repo) = Repo::discover(root) else {
        return Ok(());
    };
    let unfinished = repo.round_left_unfinished();
    let _lock = match take_lock(&repo, ui) {
        Ok(held) => held,
        // A run of another plan is going: what it writes is its own.
        Err(RunError::Lock(lock::LockError::Held { .. })) if !unfinished => return Ok(()),
        Err(e) => return Err(e),
    };
    if unfinished {
        resume::recover(&repo, plan_rel, ui)?;
    }
    crate::flow::remove_leftovers(root, &root.join(plan_rel), false);
    Ok(())
}

/// The repository, with the worktrees folder a setting names.
fn open_repo(opts: &RunOptions) -> Result<Repo, RunError> {
    let repo = Repo::discover(&opts.root)?;
    let Some(home) = &opts.settings.worktrees else {
        return Ok(repo);
    };
    repo.with_worktrees_home(&home.dir)
        .map_err(|source| RunError::Worktrees {
            from: home.from,
            source,
        })
}

/// One run per repository: the lock, taken over from a run that died (and what it left
/// running stopped).
fn take_lock(repo: &Repo, ui: &Ui) -> Result<lock::RunLock, RunError> {
    let lock_path = lock::path_in(repo.common_dir());
    let (held, taken) = lock::RunLock::acquire(&lock_path)?;
    if let lock::Taken::TakenOver(pid) = taken {
        ui.say(format!(
            "Took over the lock of an earlier run (pid {pid}) that is no longer running."
        ));
        let stopped = (pid > 0).then(|| crate::edge::procs::kill_left_by(pid));
        let stopped = stopped.unwrap_or(0);
        if stopped > 0 {
            ui.say(format!(
                "Stopped {stopped} process(es) it left running (its workers, checks or reviewers)."
            ));
        }
    }
    Ok(held)
}

/// Pre-flight (seed Steps 1–2): the setup report, then the failed blocking checks and the
/// user's uncommitted files where pending tasks write, each asked about (or `--yes`).
fn preflight(
    repo: &Repo,
    plan: &Plan,
    dag: &Dag,
    overlaps: &Overlaps,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(), RunError> {
    // Pre-flight (seed Steps 1–2).
    let mut validation = checks::gather(
        plan,
        &opts.root,
        checks::CheckOptions {
            skip_checks: false,
            timeout: opts.check_timeout,
        },
    );
    checks::drop_own_files(&mut validation, &opts.plan_rel);
    let setup = preflight::output(plan, dag, overlaps, validation);
    let v = &setup.validation;
    ui.say(preflight::report::header(&setup));
    // The user's uncommitted files where pending tasks write: asked about before any
    // worker runs (dagexec never overwrites or cleans them up).
    let declared = checks::declared_paths(plan);
    let theirs = checks::declared_changes(plan, &repo.uncommitted(&declared)?, &opts.plan_rel);
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
    // The user's uncommitted files where pending tasks write stop the run before any attempt,
    // `--yes` or not: dagexec never overwrites them, so a task writing one could never be
    // committed — its attempts would be spent for nothing.
    if !theirs.is_empty() {
        ui.say("Uncommitted changes at files that pending tasks declare (yours, not this run's):");
        for c in &theirs {
            ui.say(format!("  {} ({}) — {}", c.path, c.how, c.tasks_text(plan)));
        }
        return Err(RunError::Uncommitted(
            theirs.iter().map(|c| c.path.clone()).collect(),
        ));
    }
    Ok(())
}

/// Where the rounds are committed, said before the first one: the current branch, or the
/// new branch `--branch` names, made from `HEAD` and checked out now.
fn where_rounds_go(repo: &Repo, opts: &RunOptions, ui: &Ui) -> Result<(), RunError> {
    let from = repo.current_branch()?;
    match (&opts.branch, from) {
        // The same command again after a run it started was killed: the branch is its.
        (Some(name), Some(current)) if *name == current => ui.say(format!(
            "Committing rounds on {name} (the current branch, which --branch names)."
        )),
        (Some(name), from) => {
            repo.start_branch(name)?;
            let from = from.unwrap_or_else(|| "the detached HEAD".to_string());
            ui.say(format!(
                "Committing rounds on {name}, a new branch from {from} (now checked out)."
            ));
        }
        (None, Some(branch)) => ui.say(format!(
            "Committing rounds on {branch} (the current branch; --branch NAME puts them on a new one)."
        )),
        (None, None) => ui.say(
            "Committing rounds on the detached HEAD (no branch moves; --branch NAME puts them on a new one).",
        ),
    }
    Ok(())
}

/// dagexec's state in the git directory made ready for the rounds; the run's scratch folder.
fn prepare_state(repo: &Repo) -> Result<tempfile::TempDir, RunError> {
    // Rounds (seed Step 3).
    // Prompt files live inside the repository's git directory (never in the work tree), in
    // a folder emptied at every start, so even a killed run leaves nothing in /tmp.
    let prompts = repo.common_dir().join("dagexec").join("prompts");
    let _ = crate::edge::fsx::remove_all(repo.common_dir(), &prompts);
    // The temporary indexes of long-run snapshots a killed run was taking.
    let state = repo.common_dir().join("dagexec");
    for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("snapshot-") {
            let _ = crate::edge::fsx::remove_all(repo.common_dir(), &e.path());
        }
    }
    crate::edge::fsx::create_dir_all(repo.common_dir(), &prompts)
        .map_err(crate::flow::cannot_write(&prompts))?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&prompts)
        .map_err(|e| RunError::Other(format!("cannot create a temporary directory: {e}")))?;
    Ok(scratch)
}

/// The async runtime the workers run on, the channel Ctrl-C (or SIGTERM) sets, and which of
/// the two it was (`SIGINT`, `SIGTERM`), set before the channel.
type Runtime = (
    tokio::runtime::Runtime,
    tokio::sync::watch::Receiver<bool>,
    Arc<std::sync::OnceLock<&'static str>>,
);

/// Starts the [`Runtime`] and the task that waits for Ctrl-C (or SIGTERM).
fn start_runtime() -> Result<Runtime, RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::Other(format!("cannot start the async runtime: {e}")))?;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let stopped_by = Arc::new(std::sync::OnceLock::new());
    let by = stopped_by.clone();
    runtime.spawn(async move {
        // Ctrl-C, or a polite stop (SIGTERM from a service manager or `timeout`): finish
        // cleanly, killing the workers and leaving the plan resumable.
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        // Without SIGTERM's handler, its branch is disabled and Ctrl-C alone ends the wait.
        let signal = tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            Some(()) = async { term.as_mut()?.recv().await } => "SIGTERM",
        };
        let _ = by.set(signal);
        let _ = cancel_tx.send(true);
    });
    Ok((runtime, cancel_rx, stopped_by))
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
    let dir = repo.common_dir().join("dagexec");
    if dir.join("run.lock").is_file() && scratch.is_dir() {
        return Ok(());
    }
    let shown = crate::flow::logs::shown(repo.root(), &dir);
    Err(RunError::StateDeleted { shown })
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

/// `--dry-run`: the rounds the engine would run if every task completed.
fn dry_run(
    plan: &Plan,
    dag: &Dag,
    conflicts: &crate::pure::overlap::Conflicts,
    opts: &RunOptions,
    ui: &Ui,
) -> RunEnd {
    let (batches, deadlock) = engine::simulate(plan, dag, conflicts, opts.settings.schedule, None);
    ui.say(format!(
        "Dry run: {} round(s) if every task completes (nothing is changed).",
        batches.len()
    ));
    let task_names = crate::pure::plan::ids::TaskNames::of(plan);
    for (r, b) in batches.iter().enumerate() {
        let names = |g: &[usize]| {
            g.iter()
                .map(|&i| task_names.label(i, &plan.tasks[i].subject))
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
        return RunEnd::Deadlock;
    }
    RunEnd::Completed
}
