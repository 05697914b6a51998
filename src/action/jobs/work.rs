//! `dagexec action work`: one matrix job, one attempt at one task, in the job's own checkout
//! of the round's base. The worker runs under the same contract as locally; then the
//! acceptance checks run here (never in finalize, which holds a write token), and the job
//! leaves `result.json`, `changes.patch` and `worker.log` in the artifact directory.
//! Under `overlap: merge` the open round (or, under `schedule: eager`, the conductor's record
//! on the task) may say this job continues an attempt instead: a merge's re-check (`recheck`: no worker, finalize's merged change applied and checked) or a
//! rebase (the worker, its prompt with the local `## Rebase` section; sent back beside
//! candidates of the round's chain, it builds on their merged changes, committed in the
//! checkout and never pushed, and runs their checks, and those of the tasks it was sent back
//! beside, with its own).
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
use std::time::Duration;

use crate::action::artifact::{self, WorkResult};
use crate::action::rounds::FollowUp;
use crate::action::{ActionError, Inputs};
use crate::edge::git::{Repo, changes_within};
use crate::edge::worker::{self, Stop, WorkerSpec};
use crate::flow::steps::review::ToReview;
use crate::pure::prompt::{self, Unit};
use crate::pure::{outcome, plan, review};

mod gateway;
mod live;
mod protections;
mod recheck;

pub use protections::Protections;

/// Which attempt to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub task: usize,
    pub attempt: u32,
    pub round: u32,
}

impl Assignment {
    /// The `result.json` of this attempt, made at `base`, observed as `report`, which took
    /// `duration`.
    fn result(self, base: &str, report: &outcome::AttemptReport, duration: Duration) -> WorkResult {
        WorkResult::new(self.task, self.attempt, self.round, base, report, duration)
    }
}

/// The work job's attempt and where it runs: which attempt, the commit it starts from (the
/// round's base), the repository checked out there, the inputs with the plan resolved there,
/// and that plan (which has the task).
struct WorkJob {
    job: Assignment,
    base: String,
    repo: Repo,
    inputs: Inputs,
    plan: plan::model::Plan,
    /// The branch's `prices:` that would have made a model cheaper, not followed.
    prices_lowered: Vec<crate::flow::settings::Loosening>,
}

impl WorkJob {
    /// The attempt's run (its output; its log at `log_rel`) observed in this checkout, its
    /// change read against `on`, and judged as locally, with what the worker `told`.
    fn judge(
        &self,
        run: &crate::edge::worker::WorkerRun,
        log_rel: &str,
        on: &str,
        told: crate::flow::reported::Told,
    ) -> Result<crate::flow::attempt::Observed, ActionError> {
        let (repo, plan) = (&self.repo, &self.plan);
        Ok(crate::flow::attempt::observe_and_judge(
            &crate::flow::attempt::Observing {
                tree: repo.root(),
                index: self.job.task,
                task: &plan.tasks[self.job.task],
                plan_rel: &self.inputs.plan_rel,
                tasks_md: crate::sources::own_file(plan).as_deref(),
                log_rel,
                timeout: self.inputs.timeout,
            },
            run,
            changes_within(repo.root(), on)?,
            told,
        )?)
    }

    /// What the reviewer sees of the attempt: its change (`patch`, against `on`, touching
    /// `touched`; its status line's `summary`) in this checkout, its files in `scratch`.
    fn to_review<'a>(
        &'a self,
        on: &'a str,
        scratch: &'a Path,
        summary: &'a str,
        patch: &'a crate::edge::git::Patch,
        touched: &'a [String],
    ) -> ToReview<'a> {
        ToReview {
            index: self.job.task,
            task: &self.plan.tasks[self.job.task],
            attempt: self.job.attempt,
            round: self.job.round,
            base: on,
            tree: self.repo.root(),
            scratch,
            timeout: self.inputs.timeout,
            summary,
            patch,
            touched,
            keep_logs_in: None,
            live: None,
        }
    }

    /// The worker's output as the attempt is judged by (`run`'s): its work log, when it wrote
    /// none where `$DAGEXEC_LOG_FILE` says, read from the checkout (the path returned); a
    /// long-run worker's `OUTPUT_JSON` block made its status line (and, on COMPLETED, the
    /// plan's summary in this checkout), as locally — unusable raw output stays in the
    /// artifact, its files in `scratch`.
    fn read_output(&self, run: &mut worker::WorkerRun, scratch: &Path) -> String {
        let log_rel = format!(".design/worker-{}.log", self.job.task);
        if run.log.is_none() {
            run.log = crate::flow::attempt::log_in_tree(self.repo.root(), &log_rel);
        }
        crate::flow::steps::longrun::long_run_output(
            &self.plan.tasks[self.job.task],
            self.job.attempt,
            &mut run.stdout,
            self.repo.root(),
            scratch,
        );
        log_rel
    }
}

/// What the work job did: the verdict it would give (finalize judges again from the files),
/// and whether its worker reached its provider through the model gateway (`None`: no worker
/// ran, a merge's re-check).
#[derive(Debug)]
pub struct Worked {
    pub verdict: outcome::Verdict,
    pub gateway: Option<bool>,
    /// The gateway's settings the branch's `.design/dagexec.yml` asked to loosen, not
    /// followed (for the job's summary).
    pub loosened: Vec<crate::flow::settings::Loosening>,
}

impl Worked {
    /// What the job's log prints of the attempt, one plain line each: its warnings name the
    /// worker's files and the branch's settings are task code's too, so no line break in them
    /// may start a workflow command (a forged annotation, a mask) in the job's log.
    fn plain(mut self) -> Worked {
        let line = crate::pure::sanitize::line;
        self.verdict.result = line(&self.verdict.result);
        for w in &mut self.verdict.warnings {
            *w = line(w);
        }
        for l in &mut self.loosened {
            l.asked = line(&l.asked);
        }
        self
    }
}

/// Runs the attempt in the checkout at `root`, at commit `base`.
pub async fn run(
    root: &Path,
    inputs: &Inputs,
    job: Assignment,
    base: &str,
) -> Result<Worked, ActionError> {
    let start = jiff::Timestamp::now();
    let at = open(root, inputs, job, base)?;
    let (repo, plan) = (&at.repo, &at.plan);
    // `overlap: merge`: this job may continue an attempt instead of starting one.
    let follow = FollowUp::of(plan, job.task, job.attempt);
    if let Some(f @ FollowUp::Recheck { .. }) = &follow {
        return recheck::run(&at, f).map(|verdict| {
            Worked {
                verdict,
                gateway: None,
                loosened: Vec::new(),
            }
            .plain()
        });
    }
    // A rebase sent back beside candidates of the chain builds on them: their merged changes
    // are committed in the checkout (never pushed), and the worker's change is its own.
    let chain = match &follow {
        Some(FollowUp::Rebase { .. }) => {
            FollowUp::built_on(plan, job.task).ok_or_else(|| {
                ActionError::Input(format!(
                    "task {}: the open round's record holds an unreadable merged change of the chain its rebase builds on",
                    job.task
                ))
            })?
        }
        _ => Vec::new(),
    };
    let patches: Vec<Vec<u8>> = chain.iter().map(|(_, p)| p.clone()).collect();
    let on = recheck::commit_chain(repo, base, &patches, job.task, "rebase").map_err(|why| {
        ActionError::Input(format!(
            "task {}: the merged changes of the chain its rebase builds on do not apply at {base}: {why}",
            job.task
        ))
    })?;
    // Those it was sent back beside too (landed earlier in the round): their checks run here.
    let mut chain: Vec<usize> = chain.iter().map(|(k, _)| *k).collect();
    if let Some(FollowUp::Rebase { onto, .. }) = &follow
        && !chain.is_empty()
    {
        let later: Vec<usize> = chain.drain(..).filter(|k| !onto.contains(k)).collect();
        chain = onto.iter().copied().chain(later).collect();
    }
    hand_over(repo.root())?;
    attempt(&at, &on, &chain, start, follow.as_ref())
        .await
        .map(Worked::plain)
}

/// Gives the agent's unprivileged user, when task code runs as one, the checkout at `root`
/// (or the attempt's scratch folder) to work in.
fn hand_over(root: &Path) -> Result<(), ActionError> {
    let handed = if root.join(".git").exists() {
        crate::edge::agent_user::hand_over_tree(root)
    } else {
        crate::edge::agent_user::hand_over(root)
    };
    handed.map_err(ActionError::write(root))
}

/// An attempt (started at `start`, its change read against `on`: the base, or the chain's
/// merged changes a rebase builds on committed on it): the worker (a rebase's prompt says so),
/// its judgement here, the checks of the tasks in `chain`, the reviewer, the artifact's files.
async fn attempt(
    at: &WorkJob,
    on: &str,
    chain: &[usize],
    start: jiff::Timestamp,
    follow: Option<&FollowUp>,
) -> Result<Worked, ActionError> {
    let (job, repo, inputs, plan) = (at.job, &at.repo, &at.inputs, &at.plan);
    let task = &plan.tasks[job.task];
    let history = review::history(task);
    let text = prompt_text(plan, job, repo.root(), &history);
    let text = rebased(plan, follow, chain, text);
    // Prompt and log files live outside the checkout, so they are never part of the patch.
    let scratch = tempfile::Builder::new()
        .prefix("dagexec-work-")
        .tempdir()
        .map_err(ActionError::write(&std::env::temp_dir()))?;
    let spec = worker_spec(inputs, job, task, repo.root(), scratch.path(), text);
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let WorkerRan {
        mut run,
        wire,
        served,
        live,
    } = run_worker(at, spec, scratch.path(), &rx, start).await?;
    // What the worker spent (the wire's count first); a structured output (claude's result
    // object, codex's events) stands for its output by its text, as locally.
    let (mut usage, told, budget_stop) =
        crate::flow::reported::through_gateway(&mut run, &inputs.worker, wire.as_ref());
    let mut said = told.said.clone();
    let log_rel = at.read_output(&mut run, scratch.path());
    let crate::flow::attempt::Observed {
        mut report,
        mut verdict,
        kept,
        refused,
        ..
    } = at.judge(&run, &log_rel, on, told)?;
    // Built on candidates of the chain: their checks run on this tree too, as a re-check's.
    recheck::with_checks_of(at, chain, &mut report, &mut verdict);
    gateway::budget_stop(budget_stop, &mut verdict, &mut said);
    let mut result = at.job.result(&at.base, &report, run.duration);
    result.said = said;
    result.refused = refused;
    let mut review_log = None;
    let reviewer = review::reviewer_for(task, inputs.reviewer.as_deref());
    if let (Some(reviewer), crate::pure::plan::model::Status::Completed) =
        (reviewer, verdict.status)
    {
        let touched: Vec<String> = kept.changed.iter().cloned().collect();
        let summary = verdict.result.clone();
        let to_review = at.to_review(on, scratch.path(), &summary, &kept.patch, &touched);
        let through = served.as_ref().map(|s| &s.gateway);
        let (to, v) = (&to_review, &mut verdict);
        let reviewed = review_attempt(&rx, reviewer, through, to, history, v).await?;
        // What the reviewer spent is the attempt's too (and counts toward `max-cost`).
        usage = usage.plus(reviewed.spent);
        review_log = Some(reviewed.log);
        // A request of the reviewer's the gateway refused past a budget: a budget stop, as
        // the worker's is, and no review to conclude.
        match reviewed.budget {
            Some(why) => gateway::budget_stop(Some(why), &mut verdict, &mut result.said),
            None => result.review = Some(reviewed.record),
        }
    }
    // The hosts the egress proxy refused the worker, its checks and the reviewer.
    result.network.egress_blocked = crate::edge::egress::blocked();
    result.network.rate_limits = gateway::rate_limits(served.as_ref());
    result.set_measured(&crate::pure::usage::Measured::since(start, usage));
    if let Some(live) = live {
        live.finish();
    }
    write_files(inputs, &result, &kept.patch, run.log.as_deref(), review_log)?;
    let gateway = Some(served.is_some());
    let mut loosened = served.map(|s| s.loosened).unwrap_or_default();
    loosened.extend(at.prices_lowered.iter().cloned());
    Ok(Worked {
        verdict,
        gateway,
        loosened,
    })
}

/// The worker's run, and what the attempt goes on with.
struct WorkerRan {
    run: worker::WorkerRun,
    /// What the worker spent on the wire, its token ended with it.
    wire: Option<crate::edge::gateway::Spend>,
    /// The gateway, for the reviewer.
    served: Option<gateway::Served>,
    /// The keeper of the attempt's provisional result, while the gateway serves it.
    live: Option<live::Live>,
}

/// The worker's run under `spec` (the attempt started at `start`), through the model gateway
/// unless it is off (its URL and the attempt's token in the worker's environment, no
/// provider key; the attempt's provisional result kept in the artifact as the wire's spend
/// grows, [`live`]).
async fn run_worker(
    at: &WorkJob,
    mut spec: WorkerSpec,
    scratch: &Path,
    rx: &tokio::sync::watch::Receiver<bool>,
    start: jiff::Timestamp,
) -> Result<WorkerRan, ActionError> {
    let served = gateway::start(
        at.repo.root(),
        &at.plan,
        at.job.task,
        at.inputs.max_cost,
        scratch,
        &at.inputs.worker,
    )
    .await?;
    if let Some(s) = &served {
        spec.extra_env.extend(s.env.iter().cloned());
    }
    // The prompt, log and usage files and the Codex home are the agent's to use.
    hand_over(scratch)?;
    let live = served.as_ref().map(|s| {
        let attempt = live::Provisional {
            dir: at.inputs.artifacts.clone(),
            job: at.job,
            base: at.base.clone(),
            start,
        };
        live::keep(attempt, s.gateway.watch())
    });
    let mut served = served;
    let run = match worker::run(&spec, rx).await {
        Stop::Finished(run) => run,
        Stop::Cancelled(_) => return Err(ActionError::Input("the worker was cancelled".into())),
    };
    // Nothing the worker left runs while this job, as root, reads and writes its tree.
    crate::edge::reaper::sweep_now();
    let wire = served.as_mut().map(gateway::Served::close);
    Ok(WorkerRan {
        run,
        wire,
        served,
        live,
    })
}

/// The prompt of a rebase attempt (`overlap: merge`): `text` with the local run's `## Rebase`
/// section (the tasks it builds on — those it was sent back beside and the chain's candidates
/// in `chain` — and what went wrong); any other prompt as it is.
fn rebased(
    plan: &plan::model::Plan,
    follow: Option<&FollowUp>,
    chain: &[usize],
    text: String,
) -> String {
    let Some(FollowUp::Rebase { onto, why, .. }) = follow else {
        return text;
    };
    // `run` put the tasks it was sent back beside first in a chain it builds on.
    let named = if chain.is_empty() { onto } else { chain };
    let onto: Vec<(usize, &str)> = named
        .iter()
        .filter_map(|&k| Some((k, plan.tasks.get(k)?.subject.as_str())))
        .collect();
    prompt::rebase_prompt(&text, &onto, why)
}

/// The checkout at `base`, the inputs with the plan resolved there, and the plan (which must
/// have the task); the checkout's price table installed.
fn open(root: &Path, inputs: &Inputs, job: Assignment, base: &str) -> Result<WorkJob, ActionError> {
    let (repo, _, inputs) = crate::action::check_out(root, inputs, base)?;
    // The checkout's price table, for the CLIs that report tokens but no cost and for the
    // gateway's budgets: the branch's may add models and raise prices, never lower one the
    // defaults have (an unreadable one leaves the defaults).
    let mut prices_lowered = Vec::new();
    if let Ok((prices, lowered)) = crate::flow::settings::read_file_config(repo.root())
        .and_then(|f| crate::flow::settings::prices_on_action(&f))
    {
        crate::pure::prices::install(prices);
        prices_lowered = lowered;
    }
    let plan_path = repo.root().join(&inputs.plan_rel);
    let plan = crate::edge::plan_file::load(&plan_path)
        .map_err(crate::pure::plan::error::PlanErrors::from)?;
    crate::pure::validate::check(&plan, Some(&inputs.plan_rel))?;
    if plan.tasks.get(job.task).is_none() {
        return Err(ActionError::Input(format!(
            "task {}: no such task (the plan has {}); the matrix and the plan at {base} disagree",
            job.task,
            plan.tasks.len()
        )));
    }
    Ok(WorkJob {
        job,
        base: base.to_string(),
        repo,
        inputs,
        plan,
        prices_lowered,
    })
}

/// The worker's prompt: the task's (or its retry's), a long-run plan's resume state from the
/// checkpoint in the checkout at `root`, the reviewer feedback so far and the user's answer.
fn prompt_text(
    plan: &plan::model::Plan,
    job: Assignment,
    root: &Path,
    history: &[crate::pure::review::ReviewEntry],
) -> String {
    let task = &plan.tasks[job.task];
    let retry = task
        .extra
        .get(plan::fields::RETRY_PROMPT)
        .and_then(|v| v.as_str())
        .filter(|_| job.attempt > 1);
    let base_prompt = match retry {
        Some(p) => p.to_string(),
        None => prompt::original_prompt(plan, job.task, Unit::Batch),
    };
    let text = prompt::spawn_prompt(plan, job.task, &base_prompt);
    // A long-run plan's resume state, from the checkpoint in this checkout.
    let text = crate::sources::longrun::with_checkpoint(task, root, &text);
    // The reviewer feedback so far and the user's answer to the task's question, as locally;
    // this checkout holds none of an earlier attempt's changes.
    crate::flow::steps::review::with_feedback(&text, task, history, review::NextTree::Fresh)
}

/// The worker's run in the checkout at `cwd`, its prompt and log files in `scratch`.
fn worker_spec(
    inputs: &Inputs,
    job: Assignment,
    task: &plan::model::Task,
    cwd: &Path,
    scratch: &Path,
    prompt: String,
) -> WorkerSpec {
    WorkerSpec {
        command: inputs.worker.clone(),
        cwd: cwd.to_path_buf(),
        prompt,
        task_index: job.task,
        attempt: job.attempt,
        round: job.round,
        model: task.model().unwrap_or_default().to_string(),
        prompt_file: scratch.join("prompt.md"),
        log_file: scratch.join(artifact::LOG_FILE),
        usage_file: Some(scratch.join("usage.json")),
        timeout: inputs.timeout,
        extra_env: Vec::new(),
    }
}

/// What the reviewer made of a completed attempt.
struct ReviewerRan {
    spent: crate::pure::usage::Usage,
    record: artifact::ReviewRecord,
    log: String,
    /// The budget the gateway refused one of the reviewer's requests past, if it did.
    budget: Option<String>,
}

/// Runs the reviewer on the attempt — through the job's model gateway when it serves the
/// attempt, as a local run's reviewer: a pass of its own, and what it spent counted on the
/// wire — and concludes, as this job would (finalize concludes again from result.json), into
/// `verdict`.
async fn review_attempt(
    rx: &tokio::sync::watch::Receiver<bool>,
    reviewer: &str,
    gateway: Option<&crate::edge::gateway::Gateway>,
    to_review: &ToReview<'_>,
    history: Vec<crate::pure::review::ReviewEntry>,
    verdict: &mut outcome::Verdict,
) -> Result<ReviewerRan, ActionError> {
    let Ok(crate::flow::steps::review::Reviewer {
        run: review_run,
        parsed,
        usage: spent,
        budget,
        ..
    }) = crate::flow::steps::review::run_reviewer_through(reviewer, to_review, rx, gateway).await
    else {
        return Err(ActionError::Input("the reviewer was cancelled".into()));
    };
    crate::edge::reaper::sweep_now();
    let log = match review_run.log {
        Some(log) if !log.trim().is_empty() => format!("{}\n{log}", review_run.stdout),
        _ => review_run.stdout,
    };
    // Past a budget there is no review to conclude (the caller stops the attempt).
    if budget.is_none() {
        review::conclude(
            to_review.index,
            to_review.task,
            to_review.attempt,
            verdict,
            history,
            parsed.as_ref().map_err(String::as_str),
        );
    }
    Ok(ReviewerRan {
        spent,
        record: artifact::ReviewRecord::new(&parsed),
        log,
        budget,
    })
}

/// The artifact's files: result.json, changes.patch, the worker's log and the reviewer's.
pub(super) fn write_files(
    inputs: &Inputs,
    result: &WorkResult,
    patch: &crate::edge::git::Patch,
    log: Option<&str>,
    review_log: Option<String>,
) -> Result<(), ActionError> {
    let dir = &inputs.artifacts;
    artifact::write(dir, result, patch.borrowed(), log).map_err(ActionError::write(dir))?;
    if let Some(log) = review_log {
        let path = dir.join(artifact::REVIEW_LOG_FILE);
        crate::edge::fsx::write(dir, &path, log.as_bytes()).map_err(ActionError::write(dir))?;
    }
    Ok(())
}
