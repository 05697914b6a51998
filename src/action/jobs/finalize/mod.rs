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
//! worker's job, which had no write token. Under `overlap: merge` a result that shares paths
//! with one landed before it is merged without landing and re-checked in the next part
//! (`merging`).
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

use std::path::Path;

use crate::action::arrival::{Integrator, check_entries, done_stop};
use crate::action::protocol::{Conclusion, PlanConclusion};
use crate::action::publish::Publisher;
use crate::action::report::{self, Links, RunStop};
use crate::action::runtime::Runner;
use crate::action::writer::{Checkout, Finalized, WriterJob, stale};
use crate::action::{ActionError, Inputs};
use crate::action::{matrix, steering};
use crate::edge::github::Client;
use crate::flow::RunEnd;
use crate::flow::exec::Settled;
use crate::flow::preflight::Overlaps;
use crate::pure::engine;
use crate::pure::plan::model::Status;

mod judge;
mod merging;
mod part;

pub use crate::action::rounds::Round;
use part::{integrate_part, saved_logs};

/// Runs finalize in the checkout at `root`. `client` is `None` without a repository or token
/// (a local try-out): then nothing is pushed and GitHub is not called.
pub async fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Runner,
    round: &Round,
    client: Option<&Client>,
) -> Result<Finalized, ActionError> {
    let job = WriterJob::open(root, inputs, &round.base, engine::Schedule::Rounds)?;
    let links = Links {
        run: ctx.run_url(),
        logs: saved_logs(&job.checkout.plan),
    };
    let mut f = Finalize {
        job,
        given: inputs,
        round,
        ctx,
        client,
        links,
    };
    match round.planned {
        PlanConclusion::Redirect => f.redirect().await,
        PlanConclusion::Work | PlanConclusion::CloseRound => f.integrate_run().await,
        other => f.no_work(other).await,
    }
}

/// One finalize job: the checkout and plan it opened, what the plan job handed over, and
/// where it reports.
struct Finalize<'a> {
    job: WriterJob,
    /// The inputs as given (the plan as named, not the plan a Spec Kit tasks.md or a long-run
    /// folder prepares): what a redirected run is started with.
    given: &'a Inputs,
    round: &'a Round,
    ctx: &'a Runner,
    client: Option<&'a Client>,
    links: Links,
}

impl Finalize<'_> {
    /// Pushes, and brings the pull request, its comments and the check run up to date.
    fn ending(&self) -> Publisher<'_> {
        Publisher {
            client: self.client,
            ctx: self.ctx,
            repo: &self.job.checkout.repo,
            auth: &self.job.checkout.auth,
            round: self.round,
            inputs: &self.job.checkout.inputs,
            ui: &self.job.ui,
            schedule: engine::Schedule::Rounds,
            holding: None,
        }
    }

    /// The run was started outside the branch's concurrency group: start it there.
    async fn redirect(&self) -> Result<Finalized, ActionError> {
        let (round, ui, ctx) = (self.round, &self.job.ui, self.ctx);
        ui.say(&round.planned_message);
        if let Some(c) = self.client {
            // A run of the default branch runs no task code (see `plan`): the round runs on
            // the execution branch, started here at this run's commit when it is new.
            let on = if !ctx.default_branch.is_empty() && ctx.ref_name == ctx.default_branch {
                let (repo, auth) = (&self.job.checkout.repo, &self.job.checkout.auth);
                if repo.fetch_branch(&round.branch, auth)?.is_none()
                    && let crate::edge::git::Pushed::Rejected(why) =
                        repo.push_head(&round.branch, None, auth)?
                {
                    ui.say(format!(
                        "{} was created meanwhile ({}); starting the round on it.",
                        round.branch,
                        why.lines().last().unwrap_or("")
                    ));
                }
                round.branch.as_str()
            } else {
                ctx.ref_name.as_str()
            };
            crate::action::dispatch_round(c, self.given, &round.branch, on).await?;
            ui.say(format!(
                "Dispatched the round on {on} (branch: {}).",
                round.branch
            ));
        }
        Ok(Finalized {
            conclusion: Conclusion::Redirect,
            pr: None,
            failed: false,
            spent: None,
        })
    }

    /// No work: the plan job already knows how this ends (`planned`).
    async fn no_work(&self, planned: PlanConclusion) -> Result<Finalized, ActionError> {
        let message = &self.round.planned_message;
        let (stop, preflight) = match planned {
            PlanConclusion::Completed => (Some(RunStop::Completed), None),
            PlanConclusion::Deadlock => (Some(RunStop::Deadlock(message.clone())), None),
            PlanConclusion::Budget => (Some(RunStop::Budget(message.clone())), None),
            PlanConclusion::PreflightFailed => (
                Some(RunStop::NeedsInput(
                    "blocking pre-flight checks failed; reply `/execute proceed` to run anyway"
                        .into(),
                )),
                Some(message.as_str()),
            ),
            _ => (None, None),
        };
        self.job.ui.say(message);
        // The branch exists from the first round on, so the pull request (and any question
        // on it) has a head.
        let published = self
            .ending()
            .finish(
                &self.job.checkout.plan,
                &self.links,
                stop.as_ref(),
                false,
                preflight,
            )
            .await?;
        if published.stale {
            return Ok(stale(published));
        }
        self.ctx.summary(&format!("## dagexec\n\n{message}\n"))?;
        let conclusion = planned.passed_on().expect("work and close-round integrate");
        let plan = &self.job.checkout.plan;
        Ok(Finalized::ended(
            conclusion,
            published.pr,
            stop.as_ref(),
            plan,
        ))
    }

    /// A part of a round (or the close of one): judge, integrate, catch up on steering,
    /// decide the stop, publish and report.
    async fn integrate_run(&mut self) -> Result<Finalized, ActionError> {
        let mut open = self.open_round()?;
        // Committed with the part: a re-run of this job knows its push by it.
        crate::action::writer::sign(&mut self.job.checkout.plan, self.ctx);
        let entries = self.entries(&open)?;
        let batch: Vec<usize> = entries.iter().map(|e| e.task).collect();
        let judged = self.judge(&entries).await?;
        // Refused credentials: every task would fail the same way, so nothing more is
        // dispatched (the check run names the secret to fix).
        let halted = judged.iter().find_map(|j| {
            matches!(j.verdict.halt, Some(crate::pure::said::Halt::Run { .. }))
                .then(|| format!("task {}: {}", j.index, j.verdict.result))
        });
        let (closed, end) = self.integrate(judged, &mut open)?;
        // Plan changes queued on the pull request while this run ran (`/execute answer|retry|
        // proceed`; their steer job, pending behind this run, is cancelled by GitHub when the
        // next round queues): applied now, before deciding what runs next.
        let steered_on = self.catch_up().await?;
        let stop = match halted.clone() {
            Some(why) => Some(RunStop::CircuitBreaker(why)),
            None => self.stop(&open, closed, end)?,
        };
        let plan = &self.job.checkout.plan;
        let more = stop.is_none() && plan.count(Status::Pending) > 0;
        let published = self
            .ending()
            .finish(plan, &self.links, stop.as_ref(), more, None)
            .await?;
        if published.stale {
            return Ok(stale(published));
        }
        if let (Some(pr), Some(c)) = (steered_on, self.client) {
            let k = &self.job.checkout;
            let queue =
                steering::Queue::new(c, pr, &k.repo, &k.auth, &self.round.branch, &k.inputs);
            for line in steering::confirm(queue).await {
                self.job.ui.say(line);
            }
        }
        self.summary(&batch)?;
        self.say_next(&published, &open, closed);
        let conclusion = match &stop {
            // The conductor's word for the same ending.
            Some(_) if halted.is_some() => Conclusion::Halted,
            Some(stop) => Conclusion::of(stop),
            None if more && published.aborted => Conclusion::Aborted,
            None if more => Conclusion::Continue,
            None => Conclusion::Incomplete,
        };
        let plan = &self.job.checkout.plan;
        Ok(Finalized::ended(
            conclusion,
            published.pr,
            stop.as_ref(),
            plan,
        ))
    }

    /// The round this run is a part of: the one open on the branch, else the one it starts
    /// (the plan job read the same plan at the same base).
    fn open_round(&mut self) -> Result<crate::action::rounds::OpenRound, ActionError> {
        let (round, plan) = (self.round, &mut self.job.checkout.plan);
        (plan.tasks.iter_mut())
            .filter(|t| t.status == Status::InProgress)
            .for_each(|t| t.status = Status::Pending);
        let Some(current) = crate::action::rounds::current(plan, &self.job.checkout.dag) else {
            return Err(ActionError::Input(format!(
                "the plan at {} has no open round and no ready task, but the plan job planned round {} ({}); was the base changed between the jobs? Nothing of this run was judged",
                round.base, round.round, round.planned
            )));
        };
        let open = current.open;
        if open.round != round.round {
            self.job.ui.say(format!(
                "  the plan job said round {}, but the plan at {} is in round {}: it is that round's part",
                round.round, round.base, open.round
            ));
        }
        Ok(open)
    }

    /// The matrix the plan job handed over, each entry checked: a task of the plan at the
    /// base, unresolved in the open round.
    fn entries(
        &self,
        open: &crate::action::rounds::OpenRound,
    ) -> Result<Vec<matrix::MatrixEntry>, ActionError> {
        let (round, plan) = (self.round, &self.job.checkout.plan);
        let entries = if round.planned == PlanConclusion::Work {
            matrix::Matrix::parse(&round.matrix).map_err(ActionError::Input)?
        } else {
            Vec::new()
        };
        check_entries(&entries, plan, &round.base)?;
        let unresolved = open.unresolved(plan);
        if let Some(e) = entries.iter().find(|e| !unresolved.contains(&e.task)) {
            return Err(ActionError::Input(format!(
                "the matrix names task {}, which is not an unresolved task of round {} at {} (those are {unresolved:?}); the matrix was not the plan job's, so nothing of this run was judged",
                e.task, open.round, round.base
            )));
        }
        Ok(entries)
    }

    /// Integrates the part's `judged` attempts: whether the round ended with it, and the
    /// circuit breaker's end when it tripped.
    fn integrate(
        &mut self,
        judged: Vec<crate::flow::attempt::Judged>,
        open: &mut crate::action::rounds::OpenRound,
    ) -> Result<(bool, Option<RunEnd>), ActionError> {
        let job = &mut self.job;
        let at = Integrator {
            repo: &job.checkout.repo,
            dag: &job.checkout.dag,
            opts: &job.opts,
            ui: &job.ui,
        };
        let merge = matrix::Matrix::merges(&self.round.matrix);
        let plan = &mut job.checkout.plan;
        integrate_part(at, plan, open, judged, merge, &self.round.base)
    }

    /// Applies the plan changes queued on the pull request; the pull request whose queued
    /// markers are to be rewritten once the round is pushed, when any was applied.
    async fn catch_up(&mut self) -> Result<Option<u64>, ActionError> {
        let round = self.round;
        let Some(c) = self.client else {
            return Ok(None);
        };
        let Some(pr) = c.find_pull(&round.branch).await?.map(|p| p.number) else {
            return Ok(None);
        };
        let job = &mut self.job;
        let k = &mut job.checkout;
        let queue = steering::Queue::new(c, pr, &k.repo, &k.auth, &round.branch, &k.inputs);
        let applied = steering::catch_up(queue, &mut k.plan, &k.dag, None)
            .await?
            .lines;
        let steered_on = (!applied.is_empty()).then_some(pr);
        for line in applied {
            job.ui.say(line);
        }
        Ok(steered_on)
    }

    /// How the run stops after this part of `open` (`closed`: it ended the round, `end`: the
    /// circuit breaker's end), if it does.
    fn stop(
        &mut self,
        open: &crate::action::rounds::OpenRound,
        closed: bool,
        end: Option<RunEnd>,
    ) -> Result<Option<RunStop>, ActionError> {
        let Checkout { plan, inputs, .. } = &self.job.checkout;
        Ok(match end {
            // A part that leaves tasks of the round unresolved: the next part runs them, unless
            // the budget is spent (as locally, a round's groups not started then never start)
            // and no merge it bought waits for its re-check (which runs no worker).
            _ if !closed => inputs
                .max_cost
                .and_then(|b| b.exhausted(plan))
                .filter(|_| !open.unresolved(plan).iter().any(|&t| open.rechecks(t)))
                .map(RunStop::Budget),
            // The numbers the breaker decided on: pending before this round's cascade, and
            // what the cascade skipped (not a recount after it).
            Some(RunEnd::CircuitBreaker(breaker)) => {
                Some(RunStop::CircuitBreaker(breaker.message()))
            }
            _ => {
                let job = &mut self.job;
                let Checkout {
                    plan, dag, inputs, ..
                } = &job.checkout;
                let conflicts = Overlaps::of(plan, dag).for_scheduling();
                let (schedule, budget) = (engine::Schedule::Rounds, inputs.max_cost);
                match crate::flow::exec::settle(plan, dag, &conflicts, schedule, budget) {
                    Settled::Done => done_stop(
                        &job.checkout.repo,
                        &mut job.checkout.plan,
                        &job.opts,
                        &job.ui,
                    )?,
                    Settled::Deadlock { pending } => {
                        Some(RunStop::Deadlock(engine::deadlock_message(pending)))
                    }
                    // More to do, unless the budget is spent: then nothing is dispatched.
                    Settled::Budget(why) => Some(RunStop::Budget(why)),
                    Settled::More => None,
                }
            }
        })
    }

    /// The job summary: the part's tasks and the attempts this job judged.
    fn summary(&self, batch: &[usize]) -> Result<(), ActionError> {
        let part = report::Part {
            round: self.round.round,
            batch,
            waiting: &[],
        };
        self.ctx.summary(&report::round_summary(
            &self.job.checkout.plan,
            part,
            &self.links,
            &self.job.ui.activity(),
            self.job.checkout.inputs.ran(
                engine::Schedule::Rounds,
                matrix::Matrix::merges(&self.round.matrix),
            ),
        ))?;
        Ok(())
    }

    /// Says what runs next: the round's next part, the next round, or nothing (aborted).
    fn say_next(
        &self,
        published: &crate::action::publish::Published,
        open: &crate::action::rounds::OpenRound,
        closed: bool,
    ) {
        let (ui, round) = (&self.job.ui, self.round);
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
    }
}
