//! One attempt at one task: a fresh worktree at the round's base, the worker, the facts the
//! processor needs (changes, acceptance checks run in that tree), and the verdict.
//! Its worktree comes from the [`Pool`], its logs are kept by
//! [`crate::flow::logs`].

use crate::edge::git::{Patch, Repo, Worktree};
use crate::edge::shell;
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::flow::reported::Told;
use crate::flow::steps::review::{Reviewed, Spending, review};
use crate::pure::outcome::{self, AttemptReport, CheckRun, Verdict};
use crate::pure::plan::model::Task;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use crate::flow::exec::Judged;
use crate::flow::logs::keep_logs;
pub(crate) use crate::flow::pool::{AttemptInput, Attempting, Pool, retry_git};

/// What came of it.
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    Judged(Box<Judged>),
    /// Ctrl-C arrived while the worker ran.
    Cancelled,
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
    let mut report = left(run, all);
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

/// What the worker left: its output, exit and log, and the files `all` says it changed (no
/// check run yet).
fn left(run: &worker::WorkerRun, all: &crate::edge::git::Changes) -> AttemptReport {
    AttemptReport {
        output: run.stdout.clone(),
        exit: run.exit.clone(),
        log: run.log.clone(),
        present: all.present.clone(),
        changed: all.changed.clone(),
        acceptance: None,
    }
}

/// The work log a worker wrote inside its tree at `log_rel` (the prompt names that path), when
/// it is a regular file: a link there could point at any file the job can read, which would
/// then travel with the attempt's logs (and, on GitHub, its artifact). Read as the log file
/// the worker is given is: its last [`worker::LOG_CAP`] bytes, cut with a marker.
pub(crate) fn log_in_tree(tree: &Path, log_rel: &str) -> Option<String> {
    worker::read_tail(&tree.join(log_rel), worker::LOG_CAP)
        .map(|t| t.into_string(worker::CUT_MARKER))
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
    /// Why nothing of the tree was taken, when it was refused before it was staged (too
    /// large, or the disk filled up meanwhile): the attempt failed with it.
    pub refused: Option<String>,
}

/// What an attempt is judged in: its tree, the task, dagexec's own files in it (the plan, a
/// Spec Kit tasks.md, the work log: dropped from the patch) and the checks' timeout.
pub(crate) struct Observing<'a> {
    pub tree: &'a Path,
    pub index: usize,
    pub task: &'a Task,
    pub plan_rel: &'a str,
    pub tasks_md: Option<&'a str>,
    pub log_rel: &'a str,
    pub timeout: Duration,
}

/// The attempt pipeline after the worker ran in `tree` — observe, then judge — shared by
/// local attempts and the Action's work job: the changes to integrate (`all` without the plan
/// file, a Spec Kit plan's tasks.md and the work log, `(plan_rel, tasks_md, log_rel)`: a
/// worker's edit of them is dropped, with a warning), the facts ([`observe`]: acceptance checks
/// run in `tree`), the processor's verdict, with what the worker `told`: its failure detail on
/// a failed exit or a missing status line, what its CLI said, and the usage report's
/// warnings; and a long-run plan's quiet status.
pub(crate) fn observe_and_judge(
    at: &Observing<'_>,
    run: &worker::WorkerRun,
    staged: Result<crate::edge::git::Changes, String>,
    told: Told,
) -> Result<Observed, crate::edge::git::GitError> {
    let (task, plan_rel, tasks_md) = (at.task, at.plan_rel, at.tasks_md);
    // What the tree holds is the attempt's own problem, not the run's: a change too large to
    // integrate, or one that filled the disk while it was staged, fails this attempt and
    // nothing of it is taken (no check runs on it).
    let all = match staged {
        Ok(all) => all,
        Err(reason) => {
            let nothing = crate::edge::git::Changes::nothing(at.tree);
            let verdict = Verdict::refused(reason.clone(), told.warnings);
            return Ok(Observed {
                report: left(run, &nothing),
                verdict,
                all: nothing.clone(),
                kept: nothing,
                refused: Some(reason),
            });
        }
    };
    let mut own = vec![plan_rel, at.log_rel];
    own.extend(tasks_md);
    let kept = all.without(&own)?;
    let report = observe(at.tree, task, run, &all, at.timeout);
    let mut verdict = outcome::judge_among(
        at.index,
        task,
        &report,
        outcome::OwnFiles {
            plan: plan_rel,
            task_list: tasks_md,
        },
    );
    // A failure the worker's exit or its missing status line explains ends with its stderr:
    // a worker that exits 0 without a status line often says why there.
    let no_status = outcome::last_nonempty_line(&report.output)
        .and_then(outcome::parse_status_line)
        .is_none();
    if verdict.status == crate::pure::plan::model::Status::Failed
        && (report.exit != outcome::Exit::Success || no_status)
    {
        verdict.result.push_str(&told.detail);
    }
    // What the agent CLI said: its failure in its words, what it refused, no retry.
    crate::pure::outcome::heed(&mut verdict, &told.said);
    crate::flow::steps::longrun::quiet_long_run(task, &mut verdict);
    verdict.warnings.extend(told.warnings);
    Ok(Observed {
        report,
        verdict,
        all,
        kept,
        refused: None,
    })
}

/// Runs one attempt. Git and check commands block, so they run on the blocking pool.
pub(crate) async fn run(
    repo: Arc<Repo>,
    pool: Arc<Pool>,
    input: AttemptInput,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<AttemptEnd, crate::edge::git::GitError> {
    let start = jiff::Timestamp::now();
    let store = crate::sources::longrun::partial::Store::new(repo.common_dir());
    let log_rel = format!(".design/worker-{}.log", input.index);
    let running = Attempting {
        repo: &repo,
        pool: &pool,
        input: &input,
        log_rel: &log_rel,
        cancel: &cancel,
        start,
    };
    let (stop, wt, wire) = run_worker(&running, &store).await?;
    let mut run = match stop {
        Stop::Finished(run) => run,
        Stop::Cancelled(kept) => return Ok(stopped(&running, kept, &wt, wire.as_ref())),
    };
    tracing::debug!(task = input.index, attempt = input.attempt, "worker exited");
    keep_attempt_logs(&running, &mut run, &wt);
    // What the worker spent (a structured output stands for its output by its text).
    let (usage, mut told, budget_stop) =
        crate::flow::reported::through_gateway(&mut run, &input.worker, wire.as_ref());
    let reported = told.cli_usage.take();
    let mut spent = Spending { usage, reported };
    let question = crate::flow::steps::longrun::long_run_output(
        &input.task,
        input.attempt,
        &mut run.stdout,
        wt.path(),
        repo.root(),
    );
    let (mine, log, asked) = (input.clone(), log_rel.clone(), question.clone());
    let (duration, timed_out) = (run.duration, matches!(run.exit, outcome::Exit::TimedOut(_)));
    let (mut verdict, patch, touched, wt) =
        tokio::task::spawn_blocking(move || judge(&mine, &log, told, asked.as_ref(), wt, &run))
            .await
            .expect("judging does not panic")?;
    if let Some(why) = budget_stop {
        crate::pure::outcome::stopped_by_budget(&mut verdict, &why);
    }
    let reviewed = review(&running, &wt, &mut verdict, &patch, &touched, &mut spent).await;
    verdict.warnings.extend(pool.release(wt));
    tracing::debug!(
        task = input.index,
        attempt = input.attempt,
        "worktree released"
    );
    let (reviews, question) = match reviewed {
        Reviewed::Cancelled => return Ok(AttemptEnd::Cancelled),
        Reviewed::Skipped => (None, question),
        Reviewed::Done { history, question } => (Some(history), question),
    };
    crate::flow::steps::longrun::keep_partial(
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
        measured: Some(crate::pure::usage::Measured::since(start, spent.usage)),
        timed_out,
        rebase: input.rebase,
        reported: spent.reported,
        network: Default::default(),
    })))
}

/// An attempt Ctrl-C stopped (its worker in `wt`): what its worker
/// printed and logged until then (`kept`, `None` when it never started) is kept like any
/// attempt's, and its record waits in the pool.
fn stopped(
    at: &Attempting<'_>,
    kept: Option<Box<worker::WorkerRun>>,
    wt: &Worktree,
    wire: Option<&crate::edge::gateway::Spend>,
) -> AttemptEnd {
    if let Some(mut kept) = kept {
        keep_attempt_logs(at, &mut kept, wt);
    }
    let usage = wire.map(crate::edge::gateway::Spend::usage);
    at.pool
        .interrupted(at.input, at.start, usage.unwrap_or_default());
    AttemptEnd::Cancelled
}

/// The worker's run in a worktree at the round's base, a long-run worker's progress kept as
/// it goes (how it ended, Ctrl-C included), its worktree, and what it spent through the model
/// gateway (its pass, and with it its token, gone once the worker has ended).
async fn run_worker(
    at: &Attempting<'_>,
    store: &crate::sources::longrun::partial::Store,
) -> Result<(Stop, Worktree, Option<crate::edge::gateway::Spend>), crate::edge::git::GitError> {
    let &Attempting {
        repo,
        pool,
        input,
        log_rel,
        cancel,
        start,
    } = at;
    let (r, p, base) = (repo.clone(), pool.clone(), input.base.clone());
    let wt: Worktree = tokio::task::spawn_blocking(move || p.acquire(&r, &base))
        .await
        .expect("worktree creation does not panic")?;
    tracing::debug!(
        task = input.index,
        attempt = input.attempt,
        "worktree ready"
    );
    let prompt = crate::flow::steps::prepare(input, &wt, pool, store);
    let mut spec = worker_spec(input, &wt, prompt, repo.root(), log_rel);
    // The attempt's pass at the model gateway, its Codex home in the run's scratch folder.
    let rebase = if input.rebase { "-rebase" } else { "" };
    let codex_home = input.scratch.join(format!(
        "codex-home-{}-{}{rebase}",
        input.index, input.attempt
    ));
    let (pass, gateway_env) =
        crate::edge::gateway::pass_for(pool.gateway.as_deref(), input.index, &codex_home);
    spec.extra_env.extend(gateway_env);
    // What it spends is kept on disk as it grows, for a crash of this process.
    let live = pass.as_ref().map(|p| {
        let at = input.running(start);
        crate::flow::live::keep(repo.common_dir(), at, Default::default(), p.watch())
    });
    // A long-run worker's progress is kept as it goes, for a crash of this process.
    let watch = crate::flow::steps::longrun::watch_checkpoint(
        &input.task,
        wt.path().to_path_buf(),
        input.base.clone(),
        repo.clone(),
        input.round,
        vec![input.plan_rel.clone(), log_rel.to_string()],
    );
    let stop = tokio::select! {
        stop = worker::run(&spec, cancel) => stop,
        () = watch => unreachable!("the checkpoint watch never ends"),
    };
    // The file follows the spend until the gateway forgets the attempt (its pass dropped
    // here, its last response ended), its final count included.
    drop(live);
    let wire = pass.map(|p| p.spend());
    Ok((stop, wt, wire))
}

/// The worker's contract for this attempt: its command, tree, prompt, environment and files.
fn worker_spec(
    input: &AttemptInput,
    wt: &Worktree,
    prompt: String,
    root: &Path,
    log_rel: &str,
) -> WorkerSpec {
    WorkerSpec {
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
        log_file: root.join(log_rel),
        usage_file: Some(input.scratch.join(format!(
            "task-{}-attempt-{}.usage.json",
            input.index, input.attempt
        ))),
        timeout: input.timeout,
        extra_env: Vec::new(),
    }
}

/// Keeps the attempt's stdout, stderr and work log (a log the worker wrote inside its own
/// tree, following the prompt literally, included).
fn keep_attempt_logs(at: &Attempting<'_>, run: &mut worker::WorkerRun, wt: &Worktree) {
    let &Attempting {
        repo,
        pool,
        input,
        log_rel,
        ..
    } = at;
    // A worker following the prompt literally writes its log inside its own tree.
    if run.log.is_none()
        && let Some(text) = log_in_tree(wt.path(), log_rel)
    {
        let _ = crate::edge::fsx::write(repo.root(), &repo.root().join(log_rel), text.as_bytes());
        run.log = Some(text);
    }
    let kept = pool.logs.dir(repo.common_dir()).and_then(|dir| {
        if input.rebase {
            let stem = format!("task-{}-attempt-{}.rebase", input.index, input.attempt);
            crate::flow::logs::keep_run_logs(repo.common_dir(), &dir, &stem, run)
        } else {
            keep_logs(repo.common_dir(), &dir, input.index, input.attempt, run)
        }
    });
    if let Err(e) = kept {
        tracing::warn!("task {}: cannot keep the attempt's logs: {e}", input.index);
    }
}

/// The verdict on the attempt's tree (`input`'s, its work log at `log_rel`): its changes
/// observed and judged with what the worker `told`, a blocked task's question (`asked`), and
/// what the task may never change refused. Returns the verdict, the patch, the paths it
/// touches, and the tree.
fn judge(
    input: &AttemptInput,
    log_rel: &str,
    told: Told,
    asked: Option<&crate::pure::question::Question>,
    wt: Worktree,
    run: &worker::WorkerRun,
) -> Result<(Verdict, Patch, Vec<String>, Worktree), crate::edge::git::GitError> {
    let (task, plan_rel) = (&input.task, input.plan_rel.as_str());
    let Observed {
        mut verdict,
        all,
        kept,
        ..
    } = observe_and_judge(
        &Observing {
            tree: wt.path(),
            index: input.index,
            task,
            plan_rel,
            tasks_md: input.tasks_md.as_deref(),
            log_rel,
            timeout: input.timeout,
        },
        run,
        wt.changes_within()?,
        told,
    )?;
    let mut patch = kept.patch;
    crate::flow::steps::questions::blocked_on(task, asked, &mut verdict, &mut patch);
    let touched = if patch.is_empty() {
        Vec::new()
    } else {
        kept.changed.iter().cloned().collect()
    };
    let changed = all.changed.iter().chain(&all.forbidden);
    if let Some(reason) = outcome::refused_changes(task, changed, &all.links, plan_rel) {
        outcome::refuse(&mut verdict, reason);
        return Ok((verdict, Patch::default(), touched, wt));
    }
    Ok((verdict, patch, touched, wt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::logs::*;

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

    /// Issue 31 §9: an attempt kept again under the same name (a long-run attempt continued
    /// after its question) never shows the work log of the one before it when it wrote none.
    #[test]
    fn an_attempt_kept_again_without_a_work_log_drops_the_earlier_one() {
        let common = tempfile::tempdir().expect("tempdir");
        let run1 = RunLogs::default().dir(common.path()).expect("run folder");
        let first = finished("first\n", "", Some("the first attempt's log\n"));
        keep_logs(common.path(), &run1, 0, 1, &first).expect("kept");
        keep_logs(common.path(), &run1, 0, 1, &finished("again\n", "", None)).expect("kept");
        assert!(!run1.join("task-0-attempt-1.log").exists());
        assert_eq!(
            std::fs::read_to_string(run1.join("task-0-attempt-1.stdout")).expect("stdout"),
            "again\n"
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
        let fifo = std::process::Command::new("mkfifo")
            .arg(tree.path().join(rel))
            .status();
        assert!(fifo.expect("mkfifo").success());
        assert_eq!(log_in_tree(tree.path(), rel), None, "a FIFO");
        std::fs::remove_file(tree.path().join(rel)).expect("rm");
        std::fs::write(tree.path().join(rel), "did the work\n").expect("write");
        assert_eq!(
            log_in_tree(tree.path(), rel).as_deref(),
            Some("did the work\n")
        );
        // A flood is read as the worker's own log file is: its last LOG_CAP bytes, cut.
        let mut flood = vec![b'x'; worker::LOG_CAP + 10];
        flood.extend_from_slice(b"the end\n");
        std::fs::write(tree.path().join(rel), &flood).expect("write");
        let read = log_in_tree(tree.path(), rel).expect("a log");
        assert!(read.starts_with(worker::CUT_MARKER), "cut");
        assert!(read.ends_with("the end\n"));
        assert_eq!(read.len(), worker::CUT_MARKER.len() + worker::LOG_CAP);
    }
}
