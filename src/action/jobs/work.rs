//! `dagexec action work`: one matrix job, one attempt at one task, in the job's own checkout
//! of the round's base. The worker runs under the same contract as locally; then the
//! acceptance checks run here (never in finalize, which holds a write token), and the job
//! leaves `result.json`, `changes.patch` and `worker.log` in the artifact directory.
//!
//! The reviewer loop (the conductor seed): when the attempt completed and a reviewer is set
//! (the `reviewer` input, or the task's own `reviewer` field, as locally), the reviewer runs
//! here too, in this checkout, with the local runner's review prompt and under the worker
//! contract; its parsed verdict (or why it gave none) goes into `result.json` and its output
//! into `review.log`. Finalize applies the seed's rules to it. The review history a retry's
//! prompt carries comes from the task's `reviews` field in the plan at the round's base,
//! where finalize recorded it.
//!
//! "Fresh tree": every attempt on Actions is a new job with a fresh checkout of its round's
//! base — a rejected attempt's changes are never carried into the next one (locally attempt 2
//! continues attempt 1's changes). So every retry after a rejection is the seed's "fresh
//! implementer" with all the feedback, and its prompt says the tree is clean.

use std::path::Path;

use crate::action::artifact::{self, WorkResult};
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo, changes_in};
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::flow::hooks::{self, ToReview};
use crate::pure::outcome;
use crate::pure::prompt::{self, Unit};
use crate::pure::review;

pub use crate::pure::plan::fields::RETRY_PROMPT as RETRY_PROMPT_FIELD;

/// Which attempt to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub task: usize,
    pub attempt: u32,
    pub round: u32,
}

/// Runs the attempt in the checkout at `root`, at commit `base`; returns the verdict this job
/// would give (finalize judges again from the files).
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn run(
    root: &Path,
    inputs: &Inputs,
    job: Job,
    base: &str,
) -> Result<outcome::Verdict, ActionError> {
    let start = jiff::Timestamp::now();
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    if repo.head()? != base {
        repo.ensure_commit(base, &auth)?;
        repo.checkout_detached(base)?;
    }
    let inputs = &crate::action::with_plan(repo.root(), inputs)?;
    // The checkout's price table, for the CLIs that report tokens but no cost (an unreadable
    // one leaves the defaults: the spend is the worker's own account anyway).
    if let Ok(prices) =
        crate::flow::settings::read_file_config(repo.root()).and_then(|f| f.prices())
    {
        crate::pure::prices::install(prices);
    }
    let plan_path = repo.root().join(&inputs.plan_rel);
    let plan = crate::edge::plan_file::load(&plan_path)
        .map_err(crate::pure::plan::error::PlanErrors::from)?;
    crate::pure::validate::check(&plan, Some(&inputs.plan_rel))?;
    let Some(task) = plan.tasks.get(job.task) else {
        return Err(ActionError::Input(format!(
            "task {}: no such task (the plan has {}); the matrix and the plan at {base} disagree",
            job.task,
            plan.tasks.len()
        )));
    };
    let retry = task
        .extra
        .get(RETRY_PROMPT_FIELD)
        .and_then(|v| v.as_str())
        .filter(|_| job.attempt > 1);
    let base_prompt = match retry {
        Some(p) => p.to_string(),
        None => prompt::original_prompt(&plan, job.task, Unit::Batch),
    };
    let text = prompt::spawn_prompt(&plan, job.task, &base_prompt);
    // A long-run plan's resume state, from the checkpoint in this checkout.
    let text = crate::sources::longrun::with_checkpoint(task, repo.root(), &text);
    // The reviewer feedback so far and the user's answer to the task's question, as locally;
    // this checkout holds none of an earlier attempt's changes.
    let history = review::history(task);
    let text = hooks::with_feedback(&text, task, &history, review::Start::Fresh);
    // Prompt and log files live outside the checkout, so they are never part of the patch.
    let scratch = tempfile::Builder::new()
        .prefix("dagexec-work-")
        .tempdir()
        .map_err(|source| ActionError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let log_file = scratch.path().join(artifact::LOG_FILE);
    let spec = WorkerSpec {
        command: inputs.worker.clone(),
        cwd: repo.root().to_path_buf(),
        prompt: text,
        task_index: job.task,
        attempt: job.attempt,
        round: job.round,
        model: task.model().unwrap_or_default().to_string(),
        prompt_file: scratch.path().join("prompt.md"),
        log_file,
        usage_file: Some(scratch.path().join("usage.json")),
        timeout: inputs.timeout,
        extra_env: Vec::new(),
    };
    let rt = crate::action::runtime()?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let mut run = match rt.block_on(worker::run(&spec, &rx)) {
        Stop::Finished(run) => run,
        Stop::Cancelled => return Err(ActionError::Input("the worker was cancelled".into())),
    };
    // What the worker spent; a structured output (claude's result object, codex's events)
    // stands for its output by its text, as locally.
    let (mut usage, said, warnings) = crate::flow::attempt::reported_usage(&mut run);
    let log_rel = format!(".design/worker-{}.log", job.task);
    if run.log.is_none() {
        run.log = crate::flow::attempt::log_in_tree(repo.root(), &log_rel);
    }
    let detail = crate::edge::worker::failure_detail(&run, &inputs.worker);
    // A long-run worker's OUTPUT_JSON block becomes its status line (and, on COMPLETED, the
    // plan's summary in this checkout), as locally; unusable raw output stays in the artifact.
    hooks::long_run_output(
        (task, job.attempt),
        &mut run.stdout,
        repo.root(),
        scratch.path(),
    );
    let crate::flow::attempt::Observed {
        report,
        mut verdict,
        kept,
        ..
    } = crate::flow::attempt::observe_and_judge(
        repo.root(),
        (job.task, task),
        &run,
        changes_in(repo.root(), base)?,
        (
            &inputs.plan_rel,
            crate::sources::speckit::own_tasks_md(&plan).as_deref(),
            &log_rel,
        ),
        inputs.timeout,
        (&detail, &said, warnings),
    )?;
    let mut result = WorkResult::new(
        (job.task, job.attempt, job.round),
        base,
        &report,
        run.duration,
    );
    result.said = said;
    let mut review_log = None;
    let reviewer = review::reviewer_for(task, inputs.reviewer.as_deref());
    if let (Some(reviewer), crate::pure::plan::model::Status::Completed) =
        (reviewer, verdict.status)
    {
        let touched: Vec<String> = kept.changed.iter().cloned().collect();
        let to_review = ToReview {
            index: job.task,
            task,
            attempt: job.attempt,
            round: job.round,
            base,
            tree: repo.root(),
            scratch: scratch.path(),
            timeout: inputs.timeout,
            summary: &verdict.result.clone(),
            patch: &kept.patch,
            touched: &touched,
            keep_logs_in: None,
        };
        let Some(hooks::Reviewer {
            run: review_run,
            parsed,
            usage: spent,
        }) = rt.block_on(hooks::run_reviewer(reviewer, &to_review, &rx))
        else {
            return Err(ActionError::Input("the reviewer was cancelled".into()));
        };
        // What the reviewer spent is the attempt's too (and counts toward `max-cost`).
        usage = usage.plus(spent);
        // What this job would conclude (finalize concludes again from result.json).
        review::conclude(
            job.task,
            task,
            job.attempt,
            &mut verdict,
            history,
            parsed.as_ref().map_err(String::as_str),
        );
        result.review = Some(artifact::ReviewRecord::new(&parsed));
        review_log = Some(match review_run.log {
            Some(log) if !log.trim().is_empty() => format!("{}\n{log}", review_run.stdout),
            _ => review_run.stdout,
        });
    }
    result.set_measured(&crate::pure::usage::Measured::since(start, usage));
    let write_err = |source| ActionError::Write {
        path: inputs.artifacts.clone(),
        source,
    };
    artifact::write(&inputs.artifacts, &result, &kept.patch, run.log.as_deref())
        .map_err(write_err)?;
    if let Some(log) = review_log {
        let path = inputs.artifacts.join(artifact::REVIEW_LOG_FILE);
        crate::edge::fsx::write(&inputs.artifacts, &path, log.as_bytes())
            .map_err(|e| write_err(e.into()))?;
    }
    Ok(verdict)
}
