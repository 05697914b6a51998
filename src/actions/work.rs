//! `dagexec action work`: one matrix job, one attempt at one task, in the job's own checkout
//! of the round's base. The worker runs under the same contract as locally; then the
//! acceptance checks run here (never in finalize, which holds a write token), and the job
//! leaves `result.json`, `changes.patch` and `worker.log` in the artifact directory.

use std::path::Path;

use super::artifact::{self, WorkResult};
use super::{ActionError, Inputs};
use crate::git::{RemoteAuth, Repo, changes_in};
use crate::outcome;
use crate::plan;
use crate::prompt::{self, Unit};
use crate::worker::{self, Stop, WorkerSpec};

/// The key under a task's fields where finalize keeps the prompt of its next attempt.
pub const RETRY_PROMPT_FIELD: &str = "dagexecRetryPrompt";

/// Which attempt to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub task: usize,
    pub attempt: u32,
    pub round: u32,
}

/// Runs the attempt in the checkout at `root`, at commit `base`; returns the verdict this job
/// would give (finalize judges again from the files).
pub fn run(
    root: &Path,
    inputs: &Inputs,
    job: Job,
    base: &str,
) -> Result<outcome::Verdict, ActionError> {
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    if repo.head()? != base {
        repo.ensure_commit(base, &auth)?;
        repo.checkout_detached(base)?;
    }
    let plan_path = repo.root().join(&inputs.plan_rel);
    let plan = plan::load(&plan_path).map_err(crate::plan::error::PlanErrors::from)?;
    plan::validate::check(&plan, Some(&inputs.plan_rel))?;
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
    let mut text = prompt::spawn_prompt(&plan, job.task, &base_prompt);
    // The user's answer to the task's question, as locally.
    let reply = crate::question::reply_section(task);
    if !reply.is_empty() {
        text = format!("{}\n\n{reply}", text.trim_end());
    }
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
        timeout: inputs.timeout,
        extra_env: Vec::new(),
    };
    let rt = super::runtime()?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let mut run = match rt.block_on(worker::run(&spec, &rx)) {
        Stop::Finished(run) => run,
        Stop::Cancelled => return Err(ActionError::Input("the worker was cancelled".into())),
    };
    let log_rel = format!(".design/worker-{}.log", job.task);
    if run.log.is_none() {
        run.log = std::fs::read_to_string(repo.root().join(&log_rel)).ok();
    }
    let all = changes_in(repo.root(), base)?;
    let kept = all.without(&[inputs.plan_rel.as_str(), log_rel.as_str()])?;
    let report = crate::run::attempt::observe(repo.root(), task, &run, &all, inputs.timeout);
    let verdict = outcome::judge(job.task, task, &report, &inputs.plan_rel);
    let result = WorkResult::new(
        (job.task, job.attempt, job.round),
        base,
        &report,
        run.duration,
    );
    artifact::write(&inputs.artifacts, &result, &kept.patch, run.log.as_deref()).map_err(
        |source| ActionError::Write {
            path: inputs.artifacts.clone(),
            source,
        },
    )?;
    Ok(verdict)
}
