//! The kernel every way of running shares — the local `dagexec run`, the Action's finalize and
//! its conductor: one attempt in a worktree (`attempt`), the engine loops (`exec`), the round's
//! integration and commit (`integrate`), the steps around an attempt beyond the `/execute` seed
//! (`steps`: the reviewer loop, the long-run contract, questions), the worktree pool
//! (`pool`), what a run remembers between attempts (`memory`), the attempts' logs (`logs`), pre-flight (`preflight`),
//! the settings (`settings`), what a run shows (`ui`), and the end of a run ([`finish`]).

pub(crate) mod attempt;
pub mod exec;
pub(crate) mod integrate;
pub(crate) mod live;
pub(crate) mod logs;
pub(crate) mod memory;
pub(crate) mod merge;
pub(crate) mod pool;
pub mod preflight;
pub(crate) mod reported;
pub mod settings;
pub(crate) mod steps;
pub mod ui;

use std::io;
use std::path::{Path, PathBuf};

use crate::edge::git::{GitError, Repo};
use crate::edge::lock;
use crate::pure::plan::PlanErrors;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::render::summary;
use crate::pure::update;
pub use integrate::commit_message;
use preflight::checks;
pub use settings::Settings;
pub use ui::Ui;

pub use exec::RunEnd;

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
        "{path} has uncommitted changes ({how}); dagexec marks the completed tasks in the committed file in each round commit and never commits your edits"
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
    /// `run --branch NAME` cannot start that branch.
    #[error(transparent)]
    Branch(#[from] crate::edge::git::BranchError),
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
            RunError::Uncommitted(_) => "Commit them, or put them aside (`git stash -u`), then run again: dagexec never overwrites your changes, so a task that writes one of these files could never be committed (--yes does not skip this).".into(),
            RunError::TasksMdUncommitted { path, .. } => format!(
                "Commit it (`git add {path} && git commit`) so the run executes what you wrote and marks it done there, or restore it (`git restore {path}`), then run again."
            ),
            RunError::Lock(_) => "Wait for it to finish, or stop it (Ctrl-C); a lock from a crashed run is taken over automatically.".into(),
            RunError::Preflight(_) => "Fix them and run again, or pass --yes to proceed anyway.".into(),
            RunError::Write { .. } => "Check the permissions of .design/.".into(),
            RunError::Worktrees { .. } => "Name a folder outside the repository's work tree, or unset it: the worktrees then go to $XDG_CACHE_HOME (else ~/.cache)/dagexec/worktrees.".into(),
            RunError::StateDeleted { .. } => "Every round committed so far is kept: run `dagexec run` again and it resumes from there (tasks that were in progress start again).".into(),
            RunError::Branch(crate::edge::git::BranchError::Exists(name)) => format!(
                "Name a new branch (e.g. --branch {name}-2); to go on with the run on {name}, `git switch {name}` and run again without --branch."
            ),
            RunError::Branch(crate::edge::git::BranchError::BadName(_)) => {
                "Name it as git names branches: e.g. --branch dagexec/my-plan (no spaces, no `..`, not starting with -).".into()
            }
            RunError::Branch(crate::edge::git::BranchError::Git(_)) | RunError::Other(_) => {
                String::new()
            }
        }
    }
}

/// [`RunError::Write`] of `path`, for `map_err` on an I/O error or a safe write's
/// ([`crate::edge::fsx`]).
pub(crate) fn cannot_write<E: Into<io::Error>>(path: &Path) -> impl FnOnce(E) -> RunError {
    let path = path.to_path_buf();
    move |e| RunError::Write {
        path,
        source: e.into(),
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
    /// `run --branch NAME`: the rounds go on this new branch, made from `HEAD` before the
    /// first round (`None`: on the current branch).
    pub branch: Option<String>,
}

/// The commit that archives a completed plan: `dagexec: all 6 tasks completed` (one task:
/// `the plan's one task completed`), and where the plan went.
fn archive_message(tasks: usize, rel: &str) -> String {
    let what = match tasks {
        1 => "the plan's one task completed".to_string(),
        n => format!("all {n} tasks completed"),
    };
    format!("dagexec: {what}\n\nThe plan is archived as {rel}.\n")
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
    assert!(
        v != format!("panic:{name}:{round}"),
        "failpoint {name}:{round} reached (DAGEXEC_FAILPOINT asked for a panic)"
    );
}

/// Removes, in `.design/` and the plan's folder, the temporary files of atomic writes a
/// killed run left there (`fsx`'s `.<name>.dagexec-<16 hex>.tmp`: written, never renamed)
/// and, with `intermediate` (a run's end), the run's own intermediate files of `.design/`
/// (worker logs, processor batches, `tasks.json`). Only under the run's lock: no other
/// dagexec is writing there then.
pub(crate) fn remove_leftovers(root: &Path, plan: &Path, intermediate: bool) {
    let design = root.join(".design");
    let plan_dir = plan.parent().map(Path::to_path_buf);
    for dir in std::iter::once(design.clone()).chain(plan_dir.filter(|d| *d != design)) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let own = intermediate && dir == design && checks::is_intermediate(&name);
            if own || checks::is_dagexec_temp(&name) {
                let _ = crate::edge::fsx::remove_file(root, &e.path());
            }
        }
    }
}

pub(crate) fn save(plan: &Plan, opts: &RunOptions) -> Result<(), RunError> {
    crate::edge::plan_file::save(plan, &opts.plan).map_err(cannot_write(&opts.plan))
}

/// Records the attempts Ctrl-C (or SIGTERM: `signal`) stopped — outcome `interrupted`, with
/// the signal, so the record says the user stopped them and they were not counted — and saves
/// the plan, keeping the review histories attempts in flight wrote to the plan file. Returns
/// the attempts stopped, `(task, attempt)` in the order they stopped.
pub(crate) fn keep_interrupted(
    pool: &attempt::Pool,
    plan: &mut Plan,
    opts: &RunOptions,
    signal: &str,
) -> Result<Vec<(usize, u32)>, RunError> {
    let records = pool.take_interrupted();
    if records.is_empty() {
        return Ok(Vec::new());
    }
    for r in &records {
        let mut r = r.clone();
        r.signal = Some(signal.to_string());
        crate::pure::usage::record(plan, &r);
    }
    let _held = pool.memory.apply(plan);
    save(plan, opts)?;
    Ok(records.iter().map(|r| (r.task, r.attempt)).collect())
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
    let stopped = budget_stopped(opts.settings.max_cost, plan, why);
    let end = finish(repo, plan, opts, ui, Some(RunEnd::BudgetSpent))?;
    ui.say(stopped);
    Ok(end)
}

/// The line a budget stop ends with: `--max-cost`'s own words when it is spent (raise it to go
/// on), else why the loop stopped — an attempt stopped at a spending limit (its CLI's own,
/// the task's cap), which a higher `--max-cost` would not lift.
fn budget_stopped(
    max_cost: Option<crate::pure::usage::Budget>,
    plan: &Plan,
    why: String,
) -> String {
    let (why, then) = match max_cost.and_then(|b| b.exhausted(plan)) {
        Some(spent) => (spent, "Run again with a higher --max-cost to go on."),
        None => (why, "Raise the limit it names, then run again to go on."),
    };
    format!("\nStopped: {why}. {then}")
}

/// The last round number recorded in the plan (`progress.round`, dagexec's own field).
pub(crate) fn round_counter(plan: &Plan) -> u32 {
    plan.progress
        .extra
        .get("round")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0) as u32
}

/// The final summary, and what committing a task list edited during the run would undo.
fn say_summary(repo: &Repo, plan: &Plan, ui: &Ui) {
    ui.say(String::new());
    ui.say(summary::final_summary(plan).trim_end());
    if let Some(note) = crate::sources::edit_would_undo(repo, plan) {
        ui.say(format!("\n{note}"));
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
    say_summary(repo, plan, ui);
    let logs = logs::kept_logs(repo.common_dir());
    let shown = logs::logs_dir_shown(repo.root(), repo.common_dir());
    let logs = crate::pure::render::status::logs_section(plan, &shown, &logs, true);
    if !logs.is_empty() {
        ui.say(format!("\n{}", logs.trim_end()));
    }
    remove_leftovers(&opts.root, &opts.plan, true);
    let end = crate::flow::steps::questions::ask(plan, opts, ui, end);
    let all_done = plan.tasks.iter().all(|t| t.status == Status::Completed);
    if all_done {
        // UTC, for the v3 history archive.
        let stamp = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string();
        if let update::Completion::Archive { to } = update::completion(plan, &opts.plan, &stamp) {
            if let Some(dir) = to.parent() {
                crate::edge::fsx::create_dir_all(crate::edge::fsx::default_root(dir), dir)
                    .map_err(cannot_write(dir))?;
            }
            // The archive is a copy until the commit that moves it lands: a crash before
            // then leaves the plan in place (every task completed), and the next run
            // archives it again.
            let bytes = std::fs::read(&opts.plan).map_err(cannot_write(&opts.plan))?;
            crate::edge::plan_file::write_atomic(&to, &bytes).map_err(cannot_write(&to))?;
            let rel = to
                .strip_prefix(repo.root())
                .unwrap_or(&to)
                .to_string_lossy()
                .to_string();
            let index = repo.round_index()?;
            // With a Spec Kit plan's tasks.md, ticked (when the last round had nothing to commit).
            crate::flow::steps::questions::tasks_md(plan, &index, ui)?;
            index.add_own_files(repo, std::slice::from_ref(&rel))?;
            index.remove(std::slice::from_ref(&opts.plan_rel))?;
            let message = archive_message(plan.total(), &rel);
            if let Some(prepared) = index.prepare(repo, &message)? {
                prepared.publish(repo)?;
                failpoint("archive-after-ref", 0);
                prepared.sync(repo)?;
            }
            if let Err(e) = std::fs::remove_file(&opts.plan)
                && e.kind() != io::ErrorKind::NotFound
            {
                return Err(cannot_write(&opts.plan)(e));
            }
            ui.say(format!("The plan is archived as {rel}."));
        }
        return Ok(end.unwrap_or(RunEnd::Completed));
    }
    Ok(end.unwrap_or(RunEnd::Incomplete))
}

#[cfg(test)]
mod tests {
    /// A stop that `--max-cost` did not cause (a task's cap, an agent's own limit) is not
    /// told to raise `--max-cost`: that would not let the run go on.
    #[test]
    fn a_budget_stop_says_which_limit_to_raise() {
        let plan = crate::testing::plan_of(vec![crate::testing::task(&[], &["a"], &[])]);
        let why = "task 0: this task's budget of $0.50 is spent".to_string();
        let budget = crate::pure::usage::Budget::parse("5").ok();
        let line = super::budget_stopped(budget, &plan, why.clone());
        assert!(!line.contains("--max-cost"), "{line}");
        assert!(line.contains(&why), "{line}");
        let line = super::budget_stopped(None, &plan, why);
        assert!(!line.contains("--max-cost"), "{line}");
    }
}
