//! The conductor's reviewer loop around an attempt: the reviewer run after the checks pass,
//! its verdict, the feedback a rejected attempt's retry gets, and the review summary.

use crate::edge::git::Worktree;
use crate::edge::lock::held;
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::flow::pool::Attempting;
use crate::pure::outcome::Verdict;
use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::question::{self, Question};
use crate::pure::review::{self, NextTree, Review, ReviewEntry, ReviewInput, Word};
use std::path::Path;

/// `prompt` with the reviewer feedback so far (`history`, for an attempt starting as `start`)
/// and then the user's answer to the task's question appended. Shared by the local runner
/// and the Action's work job.
pub(crate) fn with_feedback(
    prompt: &str,
    task: &Task,
    history: &[ReviewEntry],
    start: NextTree,
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

/// What the reviewer made of an attempt.
pub(crate) enum Reviewed {
    /// Not reviewed: no reviewer for this task, or the attempt did not complete.
    Skipped,
    /// The verdict was updated; the history and any question go to the plan, and what the
    /// reviewer spent is the attempt's too ([`Spending`]).
    Done {
        history: Vec<ReviewEntry>,
        question: Option<Question>,
    },
    /// Ctrl-C stopped the reviewer: the attempt's record, with what the worker and the
    /// reviewer spent, waits in the pool ([`crate::flow::pool::Pool::interrupted`]).
    Cancelled,
}

/// What a local attempt has spent: the wire's count first (its CLI's report where the wire
/// has none), and what its worker's CLI reported beside it, when it reported anything — its
/// worker's, then its reviewer's added ([`review`]).
#[derive(Debug, Clone)]
pub(crate) struct Spending {
    pub usage: crate::pure::usage::Usage,
    pub reported: Option<crate::pure::usage::Usage>,
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
    pub patch: &'a crate::edge::git::Patch,
    /// The files the patch touches.
    pub touched: &'a [String],
    /// The repository's common git directory and this run's folder of kept logs, to keep
    /// what the reviewer printed beside the attempt's own logs ([`keep_review_logs`]); `None`
    /// keeps nothing (the work job carries it in its artifact's log).
    pub keep_logs_in: Option<(&'a Path, &'a Path)>,
    /// A local attempt's live spend file ([`crate::flow::live`]) in the repository's common
    /// git directory: the attempt, and what its worker spent, to which the reviewer's spend
    /// is added as it grows, for a crash of this process; `None` on the Action (the work
    /// job keeps its provisional result from its gateway's total).
    pub live: Option<(
        &'a Path,
        &'a crate::flow::live::Running,
        &'a crate::pure::usage::Usage,
    )>,
}

/// Keeps what the reviewer of attempt `attempt` of task `index` printed — its stdout (as it
/// printed it), stderr (the tail the worker runner keeps) and work log — beside the attempt's
/// own logs, as `task-N-attempt-K.review.{stdout,stderr,log}` in the run's folder `dir`
/// ([`crate::flow::logs::RunLogs::dir`]), through [`crate::edge::fsx`]: a link on the way is refused,
/// one at a file's name removed, not followed. Returns the files written.
pub(crate) fn keep_review_logs(
    common_dir: &Path,
    dir: &Path,
    index: usize,
    attempt: u32,
    run: &worker::WorkerRun,
) -> Result<Vec<std::path::PathBuf>, crate::edge::fsx::Error> {
    crate::flow::logs::keep_run_logs(
        common_dir,
        dir,
        &format!("task-{index}-attempt-{attempt}.review"),
        run,
    )
}

/// Runs `reviewer` on a completed attempt in its tree, under the worker contract plus
/// `DAGEXEC_REVIEW=1` and `DAGEXEC_BASE`, with the seed's review prompt, through the model
/// gateway (`gateway`, when it is on), as a worker runs: a pass of its own for the task (its
/// token, its Codex home, handed to the agent's user on the Action), no provider key in its
/// environment, and what it spent counted on the wire (the wire's figures first, its own
/// report where the wire has none), toward the task's and the run's budgets. Returns the run
/// and its parsed verdict (`Err`: why there is none — a crash, a timeout, no verdict line),
/// or, when cancelled, `Err` with what it spent on the wire until then. The local executor
/// and the Action's work job both review through it.
pub(crate) async fn run_reviewer_through(
    reviewer: &str,
    r: &ToReview<'_>,
    cancel: &tokio::sync::watch::Receiver<bool>,
    gateway: Option<&crate::edge::gateway::Gateway>,
) -> Result<Reviewer, crate::pure::usage::Usage> {
    // What the prompt shows of it at most (one byte more, so it knows to say it cut).
    let diff = r.patch.head(review::MAX_DIFF_BYTES + 1);
    let diff = String::from_utf8_lossy(&diff);
    let prompt = review::review_prompt(&ReviewInput {
        index: r.index,
        task: r.task,
        attempt: r.attempt,
        worker_summary: r.summary,
        changed: r.touched,
        diff: &diff,
    });
    let name = format!("task-{}-attempt-{}-review", r.index, r.attempt);
    let mut spec = WorkerSpec {
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
        extra_env: [
            ("DAGEXEC_REVIEW".to_string(), "1".to_string()),
            ("DAGEXEC_BASE".to_string(), r.base.to_string()),
        ]
        .into(),
    };
    let codex_home = r.scratch.join(format!("codex-home-{name}"));
    let (pass, gateway_env) = crate::edge::gateway::pass_for(gateway, r.index, &codex_home);
    spec.extra_env.extend(gateway_env);
    if let (Some(p), Some((common, running, before))) = (&pass, r.live) {
        crate::flow::live::keep(common, running.clone(), before.clone(), p.watch());
    }
    let ran = worker::run(&spec, cancel).await;
    let wire = pass.map(|p| p.spend());
    // Stopped by Ctrl-C, it spent what the wire counted.
    let spent = || wire.as_ref().map(crate::edge::gateway::Spend::usage);
    let (mut run, stopped) = match ran {
        Stop::Finished(run) => (run, false),
        // Stopped by Ctrl-C: what it printed until then is kept all the same.
        Stop::Cancelled(Some(run)) => (*run, true),
        Stop::Cancelled(None) => return Err(spent().unwrap_or_default()),
    };
    if let Some((common, dir)) = r.keep_logs_in
        && let Err(e) = keep_review_logs(common, dir, r.index, r.attempt, &run)
    {
        tracing::warn!("task {}: cannot keep the reviewer's logs: {e}", r.index);
    }
    if stopped {
        return Err(spent().unwrap_or_default());
    }
    // What the reviewer spent counts as the attempt's (and toward `--max-cost`); a structured
    // output (claude's result object, codex's events) stands for its verdict by its text.
    let (usage, told, budget) =
        crate::flow::reported::through_gateway(&mut run, reviewer, wire.as_ref());
    let reported = told.cli_usage.unwrap_or_else(|| usage.clone());
    let parsed = match &run.exit {
        crate::pure::outcome::Exit::Success => {
            review::parse(&run.stdout).map_err(|e| e.to_string())
        }
        other => Err(review::reviewer_failure(other, &run.stderr_tail)),
    };
    Ok(Reviewer {
        run,
        parsed,
        usage,
        reported,
        budget,
    })
}

/// A reviewer's run: the process, its parsed verdict (or why there is none), what it spent
/// (the wire's count first), what its CLI reported (the wire's count where it reported
/// nothing: beside a worker CLI's own report, the record compares like with like), and the
/// budget the gateway refused one of its requests past, if it did.
pub(crate) struct Reviewer {
    pub run: worker::WorkerRun,
    pub parsed: Result<Review, String>,
    pub usage: crate::pure::usage::Usage,
    pub reported: crate::pure::usage::Usage,
    pub budget: Option<String>,
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
                let task = crate::pure::plan::ids::name(plan, i);
                format!("task {task}'s `reviewer` field")
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

/// Before any worker runs: the programs of the worker command ([`check_worker`]) and of every
/// reviewer command ([`check_reviewers`]) exist.
pub(crate) fn check_programs(
    plan: &Plan,
    settings: &crate::flow::settings::Settings,
    root: &Path,
) -> Result<(), String> {
    check_worker(&settings.worker, root)?;
    check_reviewers(plan, settings.reviewer.as_deref(), root)
}

/// The worker command's program exists, as [`check_reviewers`] asks of the reviewers' (a
/// missing one would fail every task of the first round, not retried, and commit that
/// round's failures). A known agent CLI's message says how to install it.
fn check_worker(command: &str, root: &Path) -> Result<(), String> {
    let Some(program) = review::program(command).filter(|p| !program_exists(p, root)) else {
        return Ok(());
    };
    let where_ = if program.contains('/') {
        "no such executable file"
    } else {
        "not on PATH"
    };
    let install = crate::pure::agents::named(&program).map_or_else(
        || "Install it".to_string(),
        |a| format!("Install {} (`{}`)", a.label, a.install()),
    );
    Err(format!(
        "worker command not found: `{program}` ({where_}), from --worker (or DAGEXEC_WORKER, or `worker:` in .design/dagexec.yml): `{command}`. {install} or fix the command; no task was started."
    ))
}

/// Whether `program` names an executable file: a path (with a `/`, relative to `root`), or a
/// name found in a `PATH` directory.
pub(crate) fn program_exists(program: &str, root: &Path) -> bool {
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

/// Runs the reviewer on a completed attempt in its tree ([`run_reviewer_through`]) and updates the
/// verdict by the seed's rules ([`review::conclude`]), writing the new history to the plan
/// file before anything else happens. A rejected attempt 1 leaves its
/// changes for attempt 2 to continue from. Anything the reviewer changes in the tree is
/// ignored: the patch is taken before. What the reviewer spends adds to what the worker
/// spent (`spent`): in the attempt's live spend file as it grows, in its record when Ctrl-C
/// stops the reviewer, and in `spent` once it ends (what its CLI reported beside the worker
/// CLI's report).
pub(crate) async fn review(
    at: &Attempting<'_>,
    wt: &Worktree,
    verdict: &mut Verdict,
    patch: &crate::edge::git::Patch,
    touched: &[String],
    spent: &mut Spending,
) -> Reviewed {
    let &Attempting {
        repo,
        input,
        pool,
        cancel,
        start,
        ..
    } = at;
    let common_dir = repo.common_dir();
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
        live: Some((common_dir, &input.running(start), &spent.usage)),
    };
    let ran = run_reviewer_through(reviewer, &to_review, cancel, pool.gateway.as_deref()).await;
    let Reviewer {
        parsed,
        usage,
        reported,
        budget,
        ..
    } = match ran {
        Ok(reviewer) => reviewer,
        Err(stopped) => {
            pool.interrupted(input, start, spent.usage.clone().plus(stopped));
            return Reviewed::Cancelled;
        }
    };
    spent.usage = spent.usage.clone().plus(usage);
    spent.reported = spent.reported.take().map(|r| r.plus(reported));
    let before = pool.memory.history(input.index, &input.task);
    // The gateway refused a request of the reviewer's past a budget: a budget stop, as a
    // worker's is (the task pending again), not a failed review.
    if let Some(why) = budget {
        crate::pure::outcome::stopped_by_budget(verdict, &why);
        return Reviewed::Done {
            history: before,
            question: None,
        };
    }
    let history_len = before.len();
    let c = review::conclude(
        input.index,
        &input.task,
        input.attempt,
        verdict,
        before,
        parsed.as_ref().map_err(String::as_str),
    );
    keep_concluded(at, &c, c.history.len() != history_len, patch).await;
    Reviewed::Done {
        history: c.history,
        question: c.question,
    }
}

/// Keeps what the review concluded (`c`) for the task's next attempts: its history in
/// memory and, when it `grew`, in the plan file (then the `after-review` failpoint fires);
/// a rejected attempt's `patch` when the next attempt continues from it.
async fn keep_concluded(
    at: &Attempting<'_>,
    c: &review::Concluded,
    grew: bool,
    patch: &crate::edge::git::Patch,
) {
    let (input, pool, index) = (at.input, at.pool, at.input.index);
    pool.memory.set(index, c.history.clone());
    if grew {
        let (path, history, p) = (
            at.repo.root().join(&input.plan_rel),
            c.history.clone(),
            pool.clone(),
        );
        let saved =
            tokio::task::spawn_blocking(move || p.memory.persist(&path, index, &history)).await;
        match saved {
            Ok(Ok(())) => crate::flow::failpoint("after-review", input.round),
            Ok(Err(e)) => tracing::warn!(
                "task {index}: the review could not be written to the plan file yet: {e}"
            ),
            Err(e) => tracing::warn!("task {index}: saving the review panicked: {e}"),
        }
    }
    if c.retry && review::start_for(input.attempt + 1) == NextTree::Continue {
        held(&pool.memory.carry).insert(index, patch.clone());
    }
}

/// The reviewer's part of the final summary: one line per reviewed task.
pub(crate) fn review_summary(plan: &Plan) -> String {
    let mut lines = Vec::new();
    if let Some(items) = plan
        .progress
        .extra
        .get("reviews")
        .and_then(|v| v.as_array())
    {
        for i in items {
            // A task list's own ID (`13.3`), else the plan index.
            let name = i["task"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map_or_else(
                    || i["task"].to_string(),
                    |n| crate::pure::plan::ids::name(plan, n),
                );
            lines.push(format!(
                "- Task {name}: approved after {} rejection(s): {}",
                i["rejections"],
                i["summary"].as_str().unwrap_or("")
            ));
        }
    }
    for (i, t) in plan.tasks.iter().enumerate() {
        let h = review::history(t);
        if t.status != Status::Completed && !h.is_empty() {
            let rejections = h.iter().filter(|e| e.review.word == Word::Rejected).count();
            lines.push(format!(
                "- Task {}: {} after {rejections} rejection(s)",
                crate::pure::plan::ids::name(plan, i),
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

    /// A task list's task whose own reviewer is missing is named as the list names it.
    #[test]
    fn a_missing_reviewer_names_the_task_whose_field_it_is() {
        let mut plan = crate::testing::plan_of(vec![
            crate::testing::task(&[], &["a"], &[]),
            crate::testing::task(&[], &["b"], &[]),
        ]);
        plan.tasks[1].extra.insert(
            review::REVIEWER_FIELD.into(),
            "no-such-reviewer-anywhere --check".into(),
        );
        let ids = serde_json::json!({"tasks": [{"id": "T001"}, {"id": "T002"}]});
        plan.extra
            .insert(crate::pure::plan::fields::SOURCE.into(), ids);
        let e = check_reviewers(&plan, None, Path::new("/")).unwrap_err();
        assert!(e.contains("from task T002's `reviewer` field"), "{e}");
    }

    /// The reviewer's output lands beside the attempt's logs and is listed with them; a link
    /// planted at one of its names is replaced, never written through.
    #[test]
    fn a_reviewers_logs_are_kept_beside_the_attempts_and_links_are_not_followed() {
        let common = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let dir = crate::flow::logs::RunLogs::default()
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
        let kept = crate::flow::logs::kept_logs(common.path());
        assert_eq!(kept[&2][0].kinds, ["review.stderr", "review.stdout"]);
    }
}
