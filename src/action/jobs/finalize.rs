//! `dagexec action finalize`: the last job of a workflow run, which is a round or a part of
//! one (see [`crate::action::rounds`]). Reads each worker job's artifact, judges it with the local
//! runner's own processor, refuses patches that touch the plan or (unless allowed)
//! workflows, integrates the part and, when it resolves the round's last task, ends the
//! round exactly as `dagexec run` does (one update, one circuit-breaker decision, the round
//! commit); pushes onto the commit the run was planned on (a moved branch makes the run
//! stale: nothing is pushed, see `publish`), keeps the pull request current, reports a stop
//! as a failing `dagexec` check run, and dispatches the next run.
//!
//! It runs no code from the plan or a task: acceptance checks and the reviewer ran in the
//! worker's job, which had no write token.
//!
//! The reviewer loop: a completed attempt whose job reported a review is concluded by the
//! seed's rules exactly as locally ([`crate::pure::review::conclude`]): approved completes, its
//! summary in the result and the round commit; rejected fails the attempt, retried in the
//! round's next part with every review's feedback in its prompt (attempts 1–2); a rejection
//! of attempt 3, or the same rejection three times in a row, blocks the task with a
//! question, which becomes a comment on the pull request. A reviewer that failed or printed
//! no verdict fails the attempt. The history goes into the task's `reviews` field through
//! the local runner's own recording, so the next part's work job finds it at its base. Every
//! attempt on Actions starts from a fresh checkout of its run's base (see [`super::work`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::work::RETRY_PROMPT_FIELD;
use crate::action::arrival::{accepted_names, check_entries, collect, judge_entry};
use crate::action::matrix::{self};
use crate::action::publish::Ending;
use crate::action::report::{self, Links, Stop};
use crate::action::runtime::Context;
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::flow::attempt::Judged;
use crate::flow::exec::Settled;
use crate::flow::preflight::Overlaps;
use crate::flow::{RunEnd, RunOptions, Settings, Ui};
use crate::pure::engine;
use crate::pure::outcome::{self, Decision};
use crate::pure::plan::{self, model::Status};
use crate::pure::prompt::Unit;

pub use crate::action::rounds::Round;

/// How the round ended, for outputs and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalized {
    /// `continue`, `completed`, `incomplete`, `circuit-breaker`, `deadlock`, `preflight-failed`,
    /// `budget`.
    pub conclusion: String,
    pub pr: Option<u64>,
    /// The job fails (a stop the user must act on).
    pub failed: bool,
}

/// Runs finalize in the checkout at `root`. `client` is `None` without a repository or token
/// (a local try-out): then nothing is pushed and GitHub is not called.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Context,
    round: &Round,
    client: Option<&Client>,
    rt: &tokio::runtime::Runtime,
) -> Result<Finalized, ActionError> {
    let Job {
        repo,
        auth,
        inputs,
        plan_path,
        mut plan,
        dag,
        ui,
        opts,
    } = Job::open(root, inputs, &round.base, engine::Schedule::Rounds)?;
    let inputs = &inputs;
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
        schedule: engine::Schedule::Rounds,
    };

    // The run was started outside the branch's concurrency group: start it there.
    if round.planned == "redirect" {
        ui.say(&round.planned_message);
        if let Some(c) = client {
            let inputs_json = crate::action::dispatch_inputs(&inputs.plan_rel, &round.branch);
            rt.block_on(c.dispatch(&inputs.workflow, &ctx.ref_name, &inputs_json))?;
            ui.say(format!(
                "Dispatched the round on {} (branch: {}).",
                ctx.ref_name, round.branch
            ));
        }
        return Ok(Finalized {
            conclusion: "redirect".into(),
            pr: None,
            failed: false,
        });
    }
    // No work: the plan job already knows how this ends.
    if round.planned != "work" && round.planned != "close-round" {
        let (stop, preflight) = match round.planned.as_str() {
            "completed" => (Some(Stop::Completed), None),
            "deadlock" => (Some(Stop::Deadlock(round.planned_message.clone())), None),
            "budget" => (Some(Stop::Budget(round.planned_message.clone())), None),
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
        if published.stale {
            return Ok(stale(published));
        }
        let failed = matches!(
            stop,
            Some(Stop::Deadlock(_) | Stop::CircuitBreaker(_) | Stop::Budget(_))
        );
        ctx.summary(&format!("## dagexec\n\n{}\n", round.planned_message))?;
        return Ok(Finalized {
            conclusion: round.planned.clone(),
            pr: published.pr,
            failed,
        });
    }

    // The round this run is a part of: the one open on the branch, else the one it starts
    // (the plan job read the same plan at the same base).
    for t in &mut plan.tasks {
        if t.status == Status::InProgress {
            t.status = Status::Pending;
        }
    }
    let Some(current) = crate::action::rounds::current(&plan, &dag) else {
        return Err(ActionError::Input(format!(
            "the plan at {} has no open round and no ready task, but the plan job planned round {} ({}); was the base changed between the jobs? Nothing of this run was judged",
            round.base, round.round, round.planned
        )));
    };
    let mut open = current.open;
    if open.round != round.round {
        ui.say(format!(
            "  the plan job said round {}, but the plan at {} is in round {}: it is that round's part",
            round.round, round.base, open.round
        ));
    }
    let entries = if round.planned == "work" {
        matrix::Matrix::parse(&round.matrix).map_err(ActionError::Input)?
    } else {
        Vec::new()
    };
    check_entries(&entries, &plan, &round.base)?;
    let unresolved = open.unresolved(&plan);
    if let Some(e) = entries.iter().find(|e| !unresolved.contains(&e.task)) {
        return Err(ActionError::Input(format!(
            "the matrix names task {}, which is not an unresolved task of round {} at {} (those are {unresolved:?}); the matrix was not the plan job's, so nothing of this run was judged",
            e.task, open.round, round.base
        )));
    }

    let run_attempt = ctx.run_attempt.parse::<u32>().unwrap_or(1).max(1);
    let (found, ignored) = collect(&inputs.artifacts, &ctx.run_id, run_attempt, &entries);
    for name in &ignored {
        ui.say(format!(
            "  ignored artifact {name}: not the one of a matrix entry of this run and attempt"
        ));
    }
    if let Some(c) = client
        && let Ok(ids) = rt.block_on(c.run_artifacts(&ctx.run_id))
    {
        for e in &entries {
            let best = accepted_names(&ctx.run_id, run_attempt, e)
                .into_iter()
                .find(|n| ids.contains_key(n));
            if let Some(url) = best.and_then(|n| ctx.artifact_url(ids[&n])) {
                links.logs.insert(e.task, url);
            }
        }
    }
    save_logs(&mut plan, &links.logs);
    let batch: Vec<usize> = entries.iter().map(|e| e.task).collect();
    // A matrix job that left no readable artifact (cancelled, failed before its upload)
    // still ended an attempt: its record spans this run, as far as GitHub says.
    let now = jiff::Timestamp::now();
    let run_start = client
        .zip(ctx.run_id.parse::<u64>().ok())
        .and_then(|(c, id)| rt.block_on(c.workflow_run(id)).ok())
        .map_or(now, |r| r.span(now).0);
    let mut judged = Vec::new();
    for e in &entries {
        let mut j = judge_entry(
            &repo,
            &plan,
            inputs,
            e,
            found.get(&(e.task, e.attempt)),
            &ui,
        )?;
        if j.measured.is_none() {
            j.measured = Some(crate::pure::usage::Measured {
                start: run_start,
                end: now,
                usage: Default::default(),
            });
        }
        judged.push(j);
    }
    // Refused credentials: every task would fail the same way, so nothing more is dispatched
    // (the check run names the secret to fix).
    let halted = judged.iter().find_map(|j| {
        matches!(j.verdict.halt, Some(crate::pure::said::Halt::Run { .. }))
            .then(|| format!("task {}: {}", j.index, j.verdict.result))
    });
    let (closed, end) = integrate_part(&repo, &mut plan, &dag, judged, &mut open, &opts, &ui)?;
    // Plan changes queued on the pull request while this run ran (`/execute answer|retry|
    // proceed`; their steer job, pending behind this run, is cancelled by GitHub when the
    // next round queues): applied now, before deciding what runs next.
    // The pull request whose queued markers are to be rewritten once the round is pushed.
    let mut steered_on = None;
    if let Some(c) = client
        && let Some(pr) = rt.block_on(c.find_pull(&round.branch))?.map(|p| p.number)
    {
        let me = super::comment::Identity {
            app_id: inputs.app_id,
        };
        let applied = rt.block_on(super::steer::catch_up(
            c,
            pr,
            me,
            &repo,
            &plan_path,
            &inputs.plan_rel,
            &mut plan,
            &dag,
            None,
        ))?;
        if !applied.is_empty() {
            steered_on = Some((c, pr, me));
        }
        for line in applied {
            ui.say(line);
        }
    }

    let stop = match end {
        _ if halted.is_some() => halted.map(Stop::CircuitBreaker),
        // A part that leaves tasks of the round unresolved: the next part runs them.
        _ if !closed => None,
        // The numbers the breaker decided on: pending before this round's cascade, and what
        // the cascade skipped (not a recount after it).
        Some(RunEnd::CircuitBreaker(breaker)) => Some(Stop::CircuitBreaker(breaker.message())),
        _ => {
            let conflicts = Overlaps::of(&plan, &dag).for_scheduling();
            let schedule = engine::Schedule::Rounds;
            match crate::flow::exec::settle(&plan, &dag, &conflicts, schedule, inputs.max_cost) {
                Settled::Done => done_stop(&repo, &mut plan, &opts, &ui)?,
                Settled::Deadlock { pending } => {
                    Some(Stop::Deadlock(engine::deadlock_message(pending)))
                }
                // More to do, unless the budget is spent: then nothing is dispatched.
                Settled::Budget(why) => Some(Stop::Budget(why)),
                Settled::More => None,
            }
        }
    };
    let more = stop.is_none() && plan.count(Status::Pending) > 0;
    let published = ending.finish(&plan, &links, stop.as_ref(), more, None)?;
    if published.stale {
        return Ok(stale(published));
    }
    if let Some((c, pr, me)) = steered_on {
        for line in rt.block_on(super::steer::confirm(c, pr, me, &repo)) {
            ui.say(line);
        }
    }
    let waiting: Vec<usize> = Vec::new();
    ctx.summary(&report::round_summary(
        &plan,
        round.round,
        &batch,
        &links,
        &waiting,
        &ui.activity(),
        crate::pure::timeline::Ran {
            schedule: engine::Schedule::Rounds,
            place: crate::pure::simulate::Place::Actions,
            slots: inputs.max_parallel,
        },
    ))?;
    if published.dispatched && !closed {
        ui.say(format!(
            "Dispatched the next part of round {} on {}.",
            open.round, round.branch
        ));
    } else if published.dispatched {
        ui.say(format!(
            "Dispatched round {} on {}.",
            round.round + 1,
            round.branch
        ));
    } else if published.aborted && !closed {
        ui.say(format!(
            "Stopped after part {} of round {}, as `/execute abort` asked; `/execute` resumes the round.",
            open.parts, open.round
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
        Some(Stop::Budget(_)) => "budget",
        None if more && published.aborted => "aborted",
        None if more => "continue",
        None => "incomplete",
    };
    Ok(Finalized {
        conclusion: conclusion.into(),
        pr,
        failed: matches!(
            stop,
            Some(Stop::CircuitBreaker(_) | Stop::Deadlock(_) | Stop::Budget(_))
        ),
    })
}

/// Integrates one part of the open round `open` (one workflow run: the judged attempts of
/// one conflict-free group of the round's unresolved tasks). A failed attempt with attempts
/// left stays pending in the round, its retry prompt kept in the plan for the next part; a
/// BLOCKED task asks its question; completed patches are applied on top of the earlier
/// parts' ([`crate::flow::integrate::RoundBuild`]). While tasks of the round remain
/// unresolved, the part commits its patches and the tasks' outcomes
/// (`dagexec: round R (part P) — …`, [`crate::action::rounds::part_message`]) and records the round
/// as open. The part that resolves the round's last task ends it as `dagexec run` ends a
/// round: one update (results, cascade) over the whole round, one circuit-breaker decision,
/// the round commit in its one format. Returns whether the round ended, and the end when
/// the circuit breaker trips.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
fn integrate_part(
    repo: &Repo,
    plan: &mut plan::model::Plan,
    dag: &crate::pure::graph::Dag,
    mut judged: Vec<Judged>,
    open: &mut crate::action::rounds::OpenRound,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(bool, Option<RunEnd>), ActionError> {
    for j in &judged {
        if let Some(r) = j.record() {
            crate::pure::usage::record(plan, &r);
        }
        let retry = match outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch) {
            Decision::Retry { attempt, .. } => Some(attempt),
            _ => None,
        };
        ui.emit(crate::pure::events::Event::AttemptEnded(
            crate::flow::exec::ended(plan, j, retry),
        ));
    }
    prepare_arrivals(plan, &mut judged, "in this round");
    let part: Vec<usize> = judged.iter().map(|j| j.index).collect();
    let mut build = crate::flow::integrate::RoundBuild::start();
    build.add(repo, plan, &judged, ui)?;
    // The part's outcomes go into its tasks now (a pending one runs in a later part); the
    // update itself waits for the round's end.
    let now: Vec<crate::pure::update::TaskResult> = build.results().to_vec();
    for r in &now {
        let t = &mut plan.tasks[r.index];
        t.status = r.status;
        t.result = Some(r.result.clone());
        t.attempts = Some(r.attempts);
    }
    if !open.unresolved(plan).is_empty() {
        open.parts += 1;
        open.write(plan);
        let message = crate::action::rounds::part_message(plan, open, open.parts, &now);
        build.commit_part(repo, plan, opts, &message, ui)?;
        ui.say(format!(
            "Round {}: part {} committed; {} of its {} task(s) wait for a later part.",
            open.round,
            open.parts,
            open.unresolved(plan).len(),
            open.tasks.len()
        ));
        return Ok((false, None));
    }
    let earlier: Vec<crate::pure::update::TaskResult> = open
        .results(plan)
        .into_iter()
        .filter(|r| !part.contains(&r.index))
        .collect();
    build.resolved_earlier(earlier);
    crate::action::rounds::clear(plan);
    let end = build.commit(repo, plan, dag, &open.tasks, open.round, None, opts, ui)?;
    // The state is committed every round, even when no task completed, in the one round
    // commit format.
    let message = crate::flow::integrate::commit_message(
        plan,
        open.round,
        &open.tasks,
        &open.results(plan),
        plan.count(Status::Completed),
    );
    repo.commit(&message, std::slice::from_ref(&opts.plan_rel))?;
    let batch_file = format!(".design/processor-batch-{}.json", open.round);
    let _ = crate::edge::fsx::remove_file(repo.root(), &repo.root().join(batch_file));
    Ok((true, end))
}

/// What every arrival goes through before it is integrated (its time and cost are recorded
/// by the caller: finalize, or the engine loop for the conductor): a failed attempt with attempts left turned back to pending, its patch
/// dropped and its retry prompt kept in the plan for the next attempt's job (`when` says
/// when that runs); the others' retry prompts dropped; a BLOCKED task's question asked.
fn prepare_arrivals(plan: &mut plan::model::Plan, judged: &mut [Judged], when: &str) {
    judged.sort_by_key(|j| j.index);
    let retries: BTreeMap<usize, String> = judged
        .iter()
        .filter_map(|j| {
            let Decision::Retry { prompt, .. } =
                outcome::decide(plan, j.index, &j.verdict, j.attempt, Unit::Batch)
            else {
                return None;
            };
            Some((j.index, prompt))
        })
        .collect();
    for j in judged.iter_mut() {
        let t = &mut plan.tasks[j.index];
        match retries.get(&j.index) {
            Some(p) => {
                j.verdict.result = format!(
                    "attempt {} failed: {} — retried {when} (attempt {} of {})",
                    j.attempt,
                    j.verdict.result,
                    j.attempt + 1,
                    outcome::MAX_ATTEMPTS
                );
                j.verdict.status = Status::Pending;
                j.patch.clear();
                t.extra.insert(RETRY_PROMPT_FIELD.into(), p.clone().into());
            }
            None => {
                t.extra.shift_remove(RETRY_PROMPT_FIELD);
            }
        }
    }
    ask_blocked(plan, judged);
}

fn ask_blocked(plan: &mut plan::model::Plan, judged: &[Judged]) {
    for j in judged {
        if j.verdict.status == Status::Blocked && j.question.is_none() {
            let t = &mut plan.tasks[j.index];
            if crate::pure::question::get(t).is_none_or(|q| q.reply.is_some()) {
                crate::pure::question::set(
                    t,
                    &super::steer::blocked_question(j.index, &j.verdict.result),
                );
            }
        }
    }
}

/// Integrates judged attempts as one round `round`, exactly as `dagexec run` does: a failed
/// attempt with attempts left goes back to pending with its retry prompt kept in the plan
/// (the next attempt's job reads it at its base), a BLOCKED task asks its question, completed
/// patches are applied and the plan updated ([`crate::flow::integrate::integrate_and_commit`]),
/// and the plan is committed in the one round-commit format even when no task completed.
/// Only the judged tasks' retry prompts are touched. Shared by finalize (a round's matrix)
/// by the conductor (`schedule: eager`, a batch of arrivals). Returns an end when the circuit
/// breaker trips.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
pub(super) fn integrate(
    repo: &Repo,
    plan: &mut plan::model::Plan,
    dag: &crate::pure::graph::Dag,
    mut judged: Vec<Judged>,
    round: u32,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<Option<RunEnd>, ActionError> {
    let batch: Vec<usize> = {
        let mut b: Vec<usize> = judged.iter().map(|j| j.index).collect();
        b.sort_unstable();
        b
    };
    prepare_arrivals(plan, &mut judged, "as soon as a slot is free");
    let end = crate::flow::integrate::integrate_and_commit(
        repo, plan, dag, &batch, judged, round, None, opts, ui,
    )?;
    // The state is committed every round, even when no task completed, in the one round
    // commit format (the plan now holds each batch task's outcome).
    let outcomes: Vec<crate::pure::update::TaskResult> = batch
        .iter()
        .map(|&i| crate::pure::update::TaskResult {
            index: i,
            status: plan.tasks[i].status,
            result: plan.tasks[i].result.clone().unwrap_or_default(),
            attempts: plan.attempts_of(i),
        })
        .collect();
    let message = crate::flow::integrate::commit_message(
        plan,
        round,
        &batch,
        &outcomes,
        plan.count(Status::Completed),
    );
    repo.commit(&message, std::slice::from_ref(&opts.plan_rel))?;
    let batch_file = format!(".design/processor-batch-{round}.json");
    let _ = crate::edge::fsx::remove_file(repo.root(), &repo.root().join(batch_file));
    Ok(end)
}

/// The stop when nothing is pending (finalize's last round, the conductor's end): the seed's
/// Step 4 summary and clean-up ([`crate::flow::finish`]), then every task completed, or the
/// questions that wait for answers, or nothing to say (tasks failed or were skipped).
pub(super) fn done_stop(
    repo: &Repo,
    plan: &mut plan::model::Plan,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<Option<Stop>, ActionError> {
    let all = plan.tasks.iter().all(|t| t.status == Status::Completed);
    let open = crate::pure::question::open(plan).len();
    crate::flow::finish(repo, plan, opts, ui, None)?;
    Ok(if all {
        Some(Stop::Completed)
    } else if open > 0 {
        Some(Stop::NeedsInput(format!(
            "{open} question(s) wait for your answer; nothing else can run until then"
        )))
    } else {
        None
    })
}

/// What a job that writes the branch (finalize, conduct) starts from: the checkout at the
/// base it was handed, the plan there (resolved as every job resolves it), its DAG, and the
/// options the local runner's integration takes.
pub(super) struct Job {
    pub repo: Repo,
    pub auth: RemoteAuth,
    pub inputs: Inputs,
    pub plan_path: std::path::PathBuf,
    pub plan: plan::model::Plan,
    pub dag: crate::pure::graph::Dag,
    pub ui: Ui,
    pub opts: RunOptions,
}

impl Job {
    /// Checks out `base` in the repository at `root` and reads the plan there.
    pub(super) fn open(
        root: &Path,
        inputs: &Inputs,
        base: &str,
        schedule: engine::Schedule,
    ) -> Result<Job, ActionError> {
        let repo = Repo::discover(root)?;
        let auth = RemoteAuth::token(inputs.token.expose());
        if repo.head()? != base {
            repo.ensure_commit(base, &auth)?;
            repo.checkout_detached(base)?;
        }
        let inputs = crate::action::with_plan(repo.root(), inputs)?;
        let plan_path = repo.root().join(&inputs.plan_rel);
        // A completed plan may be archived already (see `load_plan`): then it is what the
        // job publishes.
        let (plan, archived) = crate::action::load_plan(&repo, &inputs.plan_rel)?;
        let dag = crate::pure::validate::check(
            &plan,
            Some(archived.as_deref().unwrap_or(&inputs.plan_rel)),
        )?;
        let opts = RunOptions {
            plan: plan_path.clone(),
            plan_rel: inputs.plan_rel.clone(),
            root: repo.root().to_path_buf(),
            settings: Settings {
                worker: inputs.worker.clone(),
                jobs: inputs.max_parallel.max(1),
                timeout: inputs.timeout,
                schedule,
                // The reviewer ran in the work job; the verdict is concluded from its record.
                reviewer: None,
                max_cost: inputs.max_cost,
                worktrees: None,
            },
            yes: true,
            dry_run: false,
            check_timeout: inputs.timeout,
        };
        Ok(Job {
            repo,
            auth,
            inputs,
            plan_path,
            plan,
            dag,
            ui: Ui::plain(Box::new(std::io::stdout())),
            opts,
        })
    }
}

/// A stale round's end: not a failure (the fresh round carries on), nothing to report.
pub(super) fn stale(published: crate::action::publish::Published) -> Finalized {
    Finalized {
        conclusion: "stale".into(),
        pr: published.pr,
        failed: false,
    }
}

use crate::pure::plan::fields::LOGS as LOGS_FIELD;

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
