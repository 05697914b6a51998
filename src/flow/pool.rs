//! The worktrees attempts run in, kept between attempts ([`Pool`]), the input of one
//! attempt ([`AttemptInput`]), and git retried when another process holds its lock.

use crate::edge::git::{Repo, Worktree};
use crate::pure::plan::model::Task;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::edge::lock::held;
use crate::flow::logs::RunLogs;

/// What the runner hands an attempt.
#[derive(Debug, Clone)]
pub(crate) struct AttemptInput {
    pub index: usize,
    /// The task's identity in its source ([`crate::sources::identities`]).
    pub id: String,
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
    /// A rebase attempt (`overlap: merge`): it repeats attempt `attempt` from the integrated
    /// tree; its logs are kept apart (`task-N-attempt-K.rebase.*`).
    pub rebase: bool,
}

impl AttemptInput {
    /// This attempt, started at `start`, as its live spend file and its interrupted record
    /// name it.
    pub(crate) fn running(&self, start: jiff::Timestamp) -> crate::flow::live::Running {
        crate::flow::live::Running {
            task: self.index,
            id: self.id.clone(),
            attempt: self.attempt,
            rebase: self.rebase,
            start,
        }
    }
}

/// Where an attempt runs: the repository, the worktree pool, the attempt's input, where in
/// its tree the prompt asks for the work log, and the run's Ctrl-C; its reviewer runs there
/// too ([`crate::flow::steps::review::review`]).
pub(crate) struct Attempting<'a> {
    pub repo: &'a Arc<Repo>,
    pub pool: &'a Arc<Pool>,
    pub input: &'a AttemptInput,
    pub log_rel: &'a str,
    pub cancel: &'a tokio::sync::watch::Receiver<bool>,
    /// When the attempt started.
    pub start: jiff::Timestamp,
}

/// Worktrees kept between attempts: a finished attempt's tree is reset to the next base
/// instead of being removed and checked out again (checkout time grows with the tree) — only
/// when no process still holds anything in it, and moved to a new path ([`reusable`]);
/// otherwise it is removed and the next attempt gets a new tree. No two attempts work at one
/// path.
/// Whatever is left when the run ends is removed on drop.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    pub(crate) free: std::sync::Mutex<Vec<Worktree>>,
    pub(crate) created: std::sync::atomic::AtomicUsize,
    /// Review history and rejected changes between a task's attempts.
    pub(crate) memory: crate::flow::memory::Memory,
    /// The records of attempts Ctrl-C stopped, for the plan ([`Pool::take_interrupted`]).
    pub(crate) interrupted: std::sync::Mutex<Vec<crate::pure::usage::AttemptRecord>>,
    /// This run's folder of kept logs, made when the first attempt's logs are kept.
    pub(crate) logs: RunLogs,
    /// The model gateway the workers reach their providers through (`None`: turned off, or
    /// not started by this runner).
    pub(crate) gateway: Option<std::sync::Arc<crate::edge::gateway::Gateway>>,
}

impl Pool {
    /// A worktree at `base`, at a path no earlier attempt or run used: a pooled one moved
    /// there when it is proven quiet and, after the reset, exactly the base ([`reusable`]);
    /// else a new one.
    pub(crate) fn acquire(
        &self,
        repo: &Repo,
        base: &str,
    ) -> Result<Worktree, crate::edge::git::GitError> {
        let n = self
            .created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("slot-{}-{n}", run_id());
        loop {
            let reused = held(&self.free).pop();
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

    /// Keeps the record of an attempt Ctrl-C stopped, with what it spent (`usage`).
    pub(crate) fn interrupted(
        &self,
        input: &AttemptInput,
        start: jiff::Timestamp,
        usage: crate::pure::usage::Usage,
    ) {
        // Built as its live file's record is: a rebase attempt's says so, and the next run
        // finds the attempt recorded rather than cut short by a crash.
        let running = input.running(start);
        held(&self.interrupted).push(running.record(usage));
    }

    /// The records of the attempts Ctrl-C stopped since the last call, in the order they
    /// stopped.
    pub(crate) fn take_interrupted(&self) -> Vec<crate::pure::usage::AttemptRecord> {
        std::mem::take(&mut *held(&self.interrupted))
    }

    /// Takes a finished attempt's worktree back for later attempts — unless a process the
    /// attempt started still holds something in it: then the tree is removed, and the warning
    /// saying so is returned.
    pub(crate) fn release(&self, wt: Worktree) -> Option<String> {
        match crate::edge::procs::inside(wt.path()) {
            Some(holders) if holders.is_empty() => {
                held(&self.free).push(wt);
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
pub(crate) fn reusable(wt: &mut Worktree, base: &str, name: &str) -> Result<(), String> {
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
pub(crate) fn run_id() -> &'static str {
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
