//! `dagexec action finalize`: the last job of a round. Reads each worker job's artifact,
//! judges it with the local runner's own processor, refuses patches that touch the plan or
//! (unless allowed) workflows, integrates and commits the round exactly as `dagexec run`
//! does, pushes (rebasing when the branch moved), keeps the pull request current, reports a
//! stop as a failing `dagexec` check run, and dispatches the next round.
//!
//! It runs no code from the plan or a task: acceptance checks and the reviewer ran in the
//! worker's job, which had no write token.
//!
//! The reviewer loop: a completed attempt whose job reported a review is concluded by the
//! seed's rules exactly as locally ([`crate::review::conclude`]): approved completes, its
//! summary in the result and the round commit; rejected fails the attempt, retried next round
//! with every review's feedback in its prompt (attempts 1–2); a rejection of attempt 3, or the
//! same rejection three times in a row, blocks the task with a question, which becomes a
//! comment on the pull request. A reviewer that failed or printed no verdict fails the
//! attempt. The history goes into the task's `reviews` field through the local runner's own
//! recording, so the next round's work job finds it at its base. Every attempt on Actions
//! starts from a fresh checkout of its round's base (see [`super::work`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::artifact::{self, Collected};
use super::matrix::{self, Entry};
use super::publish::Ending;
use super::report::{self, Links, Stop};
use super::runtime::Context;
use super::work::RETRY_PROMPT_FIELD;
use super::{ActionError, Inputs};
use crate::engine::{self, Next, View};
use crate::git::{RemoteAuth, Repo};
use crate::github::Client;
use crate::outcome::{self, AttemptReport, Decision, Exit, Verdict};
use crate::plan::{self, model::Status};
use crate::prompt::Unit;
use crate::run::attempt::Judged;
use crate::run::{RunEnd, RunOptions, Settings, Ui};
use crate::setup::Overlaps;

/// What the plan job handed over.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub branch: String,
    pub base: String,
    pub round: u32,
    /// The matrix JSON (empty when the plan job found no work).
    pub matrix: String,
    /// The plan job's conclusion (`work`, `completed`, `deadlock`, …) and message.
    pub planned: String,
    pub planned_message: String,
}

/// How the round ended, for outputs and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalized {
    /// `continue`, `completed`, `incomplete`, `circuit-breaker`, `deadlock`, `preflight-failed`.
    pub conclusion: String,
    pub pr: Option<u64>,
    /// The job fails (a stop the user must act on).
    pub failed: bool,
}

/// Runs finalize in the checkout at `root`. `client` is `None` without a repository or token
/// (a local try-out): then nothing is pushed and GitHub is not called.
pub fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Context,
    round: &Round,
    client: Option<&Client>,
    rt: &tokio::runtime::Runtime,
) -> Result<Finalized, ActionError> {
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    if repo.head()? != round.base {
        repo.ensure_commit(&round.base, &auth)?;
        repo.checkout_detached(&round.base)?;
    }
    let inputs = &super::with_plan(repo.root(), inputs)?;
    let plan_path = repo.root().join(&inputs.plan_rel);
    let mut plan = plan::load(&plan_path).map_err(crate::plan::error::PlanErrors::from)?;
    let dag = plan::validate::check(&plan, Some(&inputs.plan_rel))?;
    let ui = Ui::plain(Box::new(std::io::stdout()));
    let opts = RunOptions {
        plan: plan_path.clone(),
        plan_rel: inputs.plan_rel.clone(),
        root: repo.root().to_path_buf(),
        settings: Settings {
            worker: inputs.worker.clone(),
            jobs: inputs.max_parallel.max(1),
            timeout: inputs.timeout,
            schedule: engine::Schedule::Rounds,
            // The reviewer ran in the work job; finalize concludes from its verdict.
            reviewer: None,
        },
        yes: true,
        dry_run: false,
        check_timeout: inputs.timeout,
    };
    let mut links = Links {
        run: ctx.run_url(),
        logs: saved_logs(&plan),
    };
    let ending = Ending {
        rt,
        client,
        ctx,
        repo: &repo,
        auth: &auth,
        round,
        inputs,
        ui: &ui,
    };

    // No work: the plan job already knows how this ends.
    if round.planned != "work" {
        let (stop, preflight) = match round.planned.as_str() {
            "completed" => (Some(Stop::Completed), None),
            "deadlock" => (Some(Stop::Deadlock(round.planned_message.clone())), None),
            "preflight-failed" => (
                Some(Stop::NeedsInput(
                    "blocking pre-flight checks failed; reply `/execute proceed` to run anyway"
                        .into(),
                )),
                Some(round.planned_message.as_str()),
            ),
            _ => (None, None),
        };
        ui.say(&round.planned_message);
        // The branch exists from the first round on, so the pull request (and any question
        // on it) has a head.
        let published = ending.finish(&plan, &links, stop.as_ref(), false, preflight)?;
        let failed = matches!(stop, Some(Stop::Deadlock(_) | Stop::CircuitBreaker(_)));
        ctx.summary(&format!("## dagexec\n\n{}\n", round.planned_message))?;
        return Ok(Finalized {
            conclusion: round.planned.clone(),
            pr: published.pr,
            failed,
        });
    }

    let entries = matrix::Matrix::parse(&round.matrix).map_err(ActionError::Input)?;
    let found = collect(&inputs.artifacts, &ctx.run_id);
    if let Some(c) = client {
        if let Ok(ids) = rt.block_on(c.run_artifacts(&ctx.run_id)) {
            for e in &entries {
                let name = matrix::artifact_name(&ctx.run_id, &ctx.run_attempt, e.task, e.attempt);
                let best = ids
                    .keys()
                    .filter(|n| {
                        matrix::parse_artifact_name(&ctx.run_id, n)
                            .is_some_and(|(_, t, a)| t == e.task && a == e.attempt)
                    })
                    .max()
                    .cloned()
                    .unwrap_or(name);
                if let Some(url) = ids.get(&best).and_then(|id| ctx.artifact_url(*id)) {
                    links.logs.insert(e.task, url);
                }
            }
        }
    }
    save_logs(&mut plan, &links.logs);
    let batch: Vec<usize> = entries.iter().map(|e| e.task).collect();
    let mut judged = Vec::new();
    for e in &entries {
        judged.push(judge_entry(
            &repo,
            &plan,
            inputs,
            e,
            found.get(&(e.task, e.attempt)),
            &ui,
        )?);
    }
    judged.sort_by_key(|j| j.index);
    // Retries run next round with their prompt kept in the plan; the rest drop theirs.
    let retries: BTreeMap<usize, String> = judged
        .iter()
        .filter_map(|j| {
            let Decision::Retry { prompt, .. } =
                outcome::decide(&plan, j.index, &j.verdict, j.attempt, Unit::Batch)
            else {
                return None;
            };
            Some((j.index, prompt))
        })
        .collect();
    let judged: Vec<Judged> = judged
        .into_iter()
        .map(|mut j| {
            if retries.contains_key(&j.index) {
                j.verdict.result = format!(
                    "attempt {} failed: {} — retried next round (attempt {} of {})",
                    j.attempt,
                    j.verdict.result,
                    j.attempt + 1,
                    outcome::MAX_ATTEMPTS
                );
                j.verdict.status = Status::Pending;
                j.patch.clear();
            }
            j
        })
        .collect();
    for (i, t) in plan.tasks.iter_mut().enumerate() {
        match retries.get(&i) {
            Some(p) => {
                t.extra.insert(RETRY_PROMPT_FIELD.into(), p.clone().into());
            }
            None => {
                t.extra.shift_remove(RETRY_PROMPT_FIELD);
            }
        }
    }
    // A task that answered BLOCKED asks its question on the pull request (kept in the plan).
    for j in &judged {
        if j.verdict.status == Status::Blocked && j.question.is_none() {
            let t = &mut plan.tasks[j.index];
            if crate::question::get(t).is_none_or(|q| q.reply.is_some()) {
                crate::question::set(
                    t,
                    &super::steer::blocked_question(j.index, &j.verdict.result),
                );
            }
        }
    }
    let end = crate::run::integrate::integrate_and_commit(
        &repo,
        &mut plan,
        &dag,
        &batch,
        judged,
        round.round,
        None,
        &opts,
        &ui,
    )?;
    // The state is committed every round, even when no task completed, in the one round
    // commit format (the plan now holds each batch task's outcome).
    let outcomes: Vec<crate::update::TaskResult> = batch
        .iter()
        .map(|&i| crate::update::TaskResult {
            index: i,
            status: plan.tasks[i].status,
            result: plan.tasks[i].result.clone().unwrap_or_default(),
            attempts: plan.attempts_of(i),
        })
        .collect();
    let message = crate::run::integrate::commit_message(
        &plan,
        round.round,
        &batch,
        &outcomes,
        plan.count(Status::Completed),
    );
    repo.commit(&message, std::slice::from_ref(&inputs.plan_rel))?;
    let batch_file = format!(".design/processor-batch-{}.json", round.round);
    let _ = crate::fsx::remove_file(repo.root(), &repo.root().join(batch_file));

    let stop = match end {
        // The numbers the breaker decided on: pending before this round's cascade, and what
        // the cascade skipped (not a recount after it).
        Some(RunEnd::CircuitBreaker(breaker)) => Some(Stop::CircuitBreaker(breaker.message())),
        _ => {
            let overlaps = Overlaps::of(&plan, &dag);
            let conflicts = overlaps.for_scheduling();
            let view = View {
                plan: &plan,
                dag: &dag,
                conflicts: &conflicts,
            };
            match engine::Schedule::Rounds.policy().next(view, None) {
                Next::Done => {
                    let all = plan.tasks.iter().all(|t| t.status == Status::Completed);
                    let open = crate::question::open(&plan).len();
                    crate::run::finish(&repo, &mut plan, &opts, &ui, None)?;
                    if all {
                        Some(Stop::Completed)
                    } else if open > 0 {
                        Some(Stop::NeedsInput(format!(
                            "{open} question(s) wait for your answer; nothing else can run until then"
                        )))
                    } else {
                        None
                    }
                }
                Next::Deadlock { pending } => {
                    Some(Stop::Deadlock(engine::deadlock_message(pending)))
                }
                Next::Batch { .. } => None,
            }
        }
    };
    let more = stop.is_none() && plan.count(Status::Pending) > 0;
    let published = ending.finish(&plan, &links, stop.as_ref(), more, None)?;
    let waiting: Vec<usize> = Vec::new();
    ctx.summary(&report::round_summary(
        &plan,
        round.round,
        &batch,
        &links,
        &waiting,
    ))?;
    if published.dispatched {
        ui.say(format!(
            "Dispatched round {} on {}.",
            round.round + 1,
            round.branch
        ));
    } else if published.aborted {
        ui.say("Stopped after this round, as `/execute abort` asked; `/execute` resumes.");
    }
    let pr = published.pr;
    let conclusion = match &stop {
        Some(Stop::Completed) => "completed",
        Some(Stop::CircuitBreaker(_)) => "circuit-breaker",
        Some(Stop::Deadlock(_)) => "deadlock",
        Some(Stop::NeedsInput(_)) => "needs-input",
        None if more && published.aborted => "aborted",
        None if more => "continue",
        None => "incomplete",
    };
    Ok(Finalized {
        conclusion: conclusion.into(),
        pr,
        failed: matches!(stop, Some(Stop::CircuitBreaker(_) | Stop::Deadlock(_))),
    })
}

/// Judges one matrix entry from its artifact (a missing one is the seed's "no status line and
/// no log"), refusing patches that touch what a task may never change.
fn judge_entry(
    repo: &Repo,
    plan: &plan::model::Plan,
    inputs: &Inputs,
    e: &Entry,
    found: Option<&Result<Collected, String>>,
    ui: &Ui,
) -> Result<Judged, ActionError> {
    let task = &plan.tasks[e.task];
    let (mut report, mut patch, duration, reviewed) = match found {
        Some(Ok(c)) => (
            c.result.report(c.log.clone()),
            c.patch.clone(),
            Duration::from_millis(c.result.duration_ms),
            c.result.review.as_ref(),
        ),
        Some(Err(why)) => {
            ui.say(format!("  task {}: unreadable artifact: {why}", e.task));
            (missing(), Vec::new(), Duration::ZERO, None)
        }
        None => {
            ui.say(format!("  task {}: no artifact from its job", e.task));
            (missing(), Vec::new(), Duration::ZERO, None)
        }
    };
    // The patch is what gets applied, so what it touches comes from the patch itself (applied
    // to a scratch index of the base), not from the job's own account.
    let mut broken = None;
    let (touched, links) = match repo.patch_changes(&patch) {
        Ok(found) => found,
        Err(err) => {
            broken = Some(format!(
                "the job's changes.patch does not apply to the round's base ({})",
                err.to_string().lines().next().unwrap_or("")
            ));
            patch.clear();
            (Vec::new(), Vec::new())
        }
    };
    report.changed.extend(touched.iter().cloned());
    let mut verdict = outcome::judge(e.task, task, &report, &inputs.plan_rel);
    crate::run::hooks::quiet_long_run(task, &mut verdict);
    // A worker that stops for the user (the long-run seed's NEEDS_DECISION / NEEDS_ACTION, as
    // an OUTPUT_JSON block or a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` last line) blocks
    // with a question.
    let question = (verdict.status != Status::Completed)
        .then(|| needs_input(&report.output))
        .flatten();
    if let Some(q) = &question {
        verdict = Verdict {
            status: Status::Blocked,
            result: format!(
                "waits for the user: {}",
                q.text.lines().next().unwrap_or("")
            ),
            acceptance_passed: false,
            failed_checks: Vec::new(),
            warnings: verdict.warnings,
        };
    }
    let refusal = broken
        .or_else(|| outcome::refused_changes(task, &touched, &links, &inputs.plan_rel))
        .or_else(|| refused(&touched, &inputs.plan_rel, inputs.allow_workflow_changes));
    if let Some(reason) = refusal {
        verdict = Verdict {
            status: Status::Failed,
            result: reason,
            acceptance_passed: false,
            failed_checks: Vec::new(),
            warnings: verdict.warnings,
        };
    }
    // The reviewer's verdict, concluded by the seed's rules as locally.
    let mut reviews = None;
    let mut question = question;
    if verdict.status == Status::Completed {
        let own = crate::review::reviewer_for(task, None).is_some();
        match reviewed {
            Some(r) => {
                let c = crate::review::conclude(
                    e.task,
                    task,
                    e.attempt,
                    &mut verdict,
                    crate::review::history(task),
                    r.outcome(),
                );
                reviews = Some(c.history);
                question = c.question;
            }
            // The task names its own reviewer, so its job must have run it.
            None if own => {
                verdict.status = Status::Failed;
                verdict.result =
                    "review failed: the task names a reviewer, but its job reported no review"
                        .into();
            }
            None => {}
        }
    }
    for w in &verdict.warnings {
        ui.say(format!("  task {}: warning: {w}", e.task));
    }
    ui.say(format!(
        "  task {} ({}) attempt {}: {} — {}",
        e.task, task.subject, e.attempt, verdict.status, verdict.result
    ));
    Ok(Judged {
        index: e.task,
        attempt: e.attempt,
        verdict,
        patch,
        touched,
        duration,
        reviews,
        question,
    })
}

/// The question a worker's output asks the user, if it stopped for one: an `OUTPUT_JSON`
/// block with status NEEDS_DECISION or NEEDS_ACTION, or a last line `NEEDS_DECISION: …` or
/// `NEEDS_ACTION: …`.
fn needs_input(output: &str) -> Option<crate::question::Question> {
    use crate::longrun::output::{self, Output};
    match output::parse(output) {
        Ok(Output::NeedsDecision(q) | Output::NeedsAction(q)) => return Some(q),
        Ok(_) => return None,
        Err(_) => {}
    }
    crate::question::from_status_line(output)
}

/// An attempt with nothing to show.
fn missing() -> AttemptReport {
    AttemptReport {
        output: String::new(),
        exit: Exit::Success,
        log: None,
        present: Default::default(),
        changed: Default::default(),
        acceptance: None,
    }
}

/// Why a patch touching `paths` is refused, if it is.
pub fn refused(paths: &[String], plan_rel: &str, allow_workflows: bool) -> Option<String> {
    if let Some(p) = paths.iter().find(|p| p.as_str() == plan_rel) {
        return Some(format!(
            "the patch changes {p}, the plan itself; a task may not edit the execution state, so the patch was refused"
        ));
    }
    if !allow_workflows {
        if let Some(p) = paths.iter().find(|p| p.starts_with(".github/workflows/")) {
            return Some(format!(
                "the patch changes {p}; workflow changes are refused unless the action's `allow-workflow-changes` input is true"
            ));
        }
    }
    None
}

/// The downloaded artifacts of run `run_id` under `dir`, by (task, attempt); of several run
/// attempts (a re-run job) the latest wins.
pub fn collect(dir: &Path, run_id: &str) -> BTreeMap<(usize, u32), Result<Collected, String>> {
    let mut best: BTreeMap<(usize, u32), (u32, std::path::PathBuf)> = BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some((run_attempt, task, attempt)) = matrix::parse_artifact_name(run_id, &name) {
            let slot = best
                .entry((task, attempt))
                .or_insert((run_attempt, e.path()));
            if run_attempt >= slot.0 {
                *slot = (run_attempt, e.path());
            }
        }
    }
    best.into_iter()
        .map(|(k, (_, path))| (k, artifact::read(&path)))
        .collect()
}

const LOGS_FIELD: &str = "dagexecLogs";

fn saved_logs(plan: &plan::model::Plan) -> BTreeMap<usize, String> {
    plan.progress
        .extra
        .get(LOGS_FIELD)
        .and_then(|v| v.as_object())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn save_logs(plan: &mut plan::model::Plan, logs: &BTreeMap<usize, String>) {
    if logs.is_empty() {
        return;
    }
    let map: serde_json::Map<String, serde_json::Value> = logs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone().into()))
        .collect();
    plan.progress.extra.insert(LOGS_FIELD.into(), map.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_touching_the_plan_or_workflows_are_refused() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(refused(&p(&["src/a.rs"]), ".design/plan.json", false).is_none());
        assert!(
            refused(&p(&[".design/plan.json"]), ".design/plan.json", true)
                .unwrap()
                .contains("the plan itself")
        );
        let w = refused(
            &p(&[".github/workflows/ci.yml"]),
            ".design/plan.json",
            false,
        )
        .unwrap();
        assert!(w.contains("allow-workflow-changes"), "{w}");
        assert!(refused(&p(&[".github/workflows/ci.yml"]), ".design/plan.json", true).is_none());
        assert!(refused(&p(&[".github/dependabot.yml"]), ".design/plan.json", false).is_none());
    }

    #[test]
    fn the_latest_run_attempt_of_an_artifact_wins() {
        let dir = tempfile::tempdir().unwrap();
        let report = missing();
        for (run_attempt, out) in [(1, "COMPLETED: first"), (2, "COMPLETED: second")] {
            let mut r = artifact::WorkResult::new((0, 1, 1), "b", &report, Duration::ZERO);
            r.output = out.into();
            let name = matrix::artifact_name("77", &run_attempt.to_string(), 0, 1);
            artifact::write(&dir.path().join(name), &r, b"", None).unwrap();
        }
        std::fs::create_dir(dir.path().join("unrelated")).unwrap();
        let found = collect(dir.path(), "77");
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[&(0, 1)].as_ref().unwrap().result.output,
            "COMPLETED: second"
        );
    }
}
