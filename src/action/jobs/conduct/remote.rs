//! The conductor's executor and its dealings with the branch and GitHub: a start made
//! durable before its run is dispatched, the dispatch, the commit and the publication.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use super::{DISPATCH_PATIENCE, Flight, RUN_FIELD, run_name, save};
use crate::action::protocol::PlanConclusion;
use crate::action::publish::Published;
use crate::action::report::{Links, RunStop};
use crate::action::rounds::Round;
use crate::action::runtime::Runner;
use crate::action::{ActionError, Inputs};
use crate::edge::github::Client;
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::exec::{Executor, Launch};
use crate::pure::events::Event;
use crate::pure::pace::Timing;
use crate::pure::plan::model::{Plan, Status};

/// The conductor's executor: each attempt a workflow run of this workflow, polled, its
/// artifact read through the API; each batch integrated, committed and pushed, the pull
/// request and status comment moved with it.
pub(super) struct Remote<'a> {
    pub(super) client: &'a Client,
    pub(super) ctx: &'a Runner,
    pub(super) repo: &'a crate::edge::git::Repo,
    pub(super) auth: &'a crate::edge::git::RemoteAuth,
    pub(super) inputs: &'a Inputs,
    pub(super) branch: &'a str,
    pub(super) plan_path: &'a Path,
    pub(super) dag: &'a crate::pure::graph::Dag,
    pub(super) opts: &'a crate::flow::RunOptions,
    pub(super) ui: &'a Ui,
    pub(super) timing: Timing,
    pub(super) started: Instant,
    /// The runs in flight, by task.
    pub(super) flights: BTreeMap<usize, Flight>,
    /// What this conductor pushed last (task runs start from it; pushes go only onto it).
    pub(super) pushed: String,
    pub(super) links: Links,
    /// The publication that found the branch moved by another writer.
    pub(super) stale: Option<Published>,
    /// The batch of arrivals to commit next.
    pub(super) staged: Vec<Judged>,
    /// The pull request, once published.
    pub(super) pr: Option<u64>,
    /// `/execute abort` was found: nothing new starts (the engine learns it at the next
    /// commit).
    pub(super) aborted: bool,
    /// What the last polls cost and met: the next poll's wait follows from them.
    pub(super) polls: Polls,
    /// The round whose commit is pushed but not yet told on the pull request
    /// ([`Remote::tell`]).
    pub(super) untold: Option<u32>,
    /// `overlap: merge`: what is kept between a poll and the batch's commit.
    pub(super) merging: MergeState,
    /// The record of starts beside the branch ([`Remote::record_starts`]).
    pub(super) starts: Starts,
    /// Until when each provider's rate limit, seen in the attempts that arrived (and in the
    /// records on the branch when this conductor started), holds new runs for it; and what
    /// was said of it last (the status comment says it while it holds).
    pub(super) rate: RateHolds,
}

/// What the conductor's last polls cost and met ([`super::executor`]'s `wait`).
#[derive(Debug, Default)]
pub(super) struct Polls {
    /// Polls in a row at which GitHub failed (down, or rate limiting): the next waits longer.
    pub(super) outages: u32,
    /// The requests the last poll made: one listing of the branch's runs, and one read of
    /// each run in flight the listing did not hold (older than its newest 100).
    pub(super) reads: usize,
}

/// The conductor's holds per provider ([`crate::pure::gateway::held`]).
#[derive(Debug, Default)]
pub(super) struct RateHolds {
    pub(super) holds: crate::pure::gateway::held::Holds,
    /// `holding N tasks: anthropic rate-limited until HH:MM:SSZ`, while tasks are held.
    pub(super) holding: Option<String>,
}

/// What the conductor keeps between a poll and the batch's commit under `overlap: merge`.
#[derive(Debug, Default)]
pub(super) struct MergeState {
    /// Whether `overlap: merge` holds: tasks that share files run side by side and each
    /// arrival is merged.
    pub(super) on: bool,
    /// The base of each run that arrived at the last poll, by task.
    pub(super) bases: BTreeMap<usize, String>,
    /// The tasks whose re-check run arrived at the last poll.
    pub(super) rechecked: BTreeSet<usize>,
    /// The re-checks and rebases the last batch asked for, started after its commit.
    pub(super) again: Vec<Launch>,
    /// The acceptance checks of tasks as they were before they landed (the plan update trims
    /// a completed task's), for the re-checks.
    pub(super) landed_checks: BTreeMap<usize, Vec<crate::pure::plan::model::AcceptanceCriterion>>,
}

/// The record of the attempts started since the branch's tip, kept on [`super::starts_ref`].
#[derive(Debug, Default)]
pub(super) struct Starts {
    /// What the ref holds on `origin`, as far as this conductor knows (`None`: no such ref).
    pub(super) remote: Option<String>,
    /// The branch's commit the record was made on.
    pub(super) on: String,
    /// The (task, attempt) starts it holds.
    pub(super) recorded: std::collections::BTreeSet<(usize, u32)>,
}

impl Remote<'_> {
    /// Round `n` as the conductor publishes it: onto what it pushed last.
    fn round(&self, n: u32) -> Round {
        Round {
            branch: self.branch.to_string(),
            base: self.pushed.clone(),
            round: n,
            planned: PlanConclusion::Conduct,
            ..Default::default()
        }
    }

    /// Who publishes `round` for this conductor.
    fn publisher<'p>(&'p self, round: &'p Round) -> crate::action::publish::Publisher<'p> {
        crate::action::publish::Publisher {
            client: Some(self.client),
            ctx: self.ctx,
            repo: self.repo,
            auth: self.auth,
            round,
            inputs: self.inputs,
            ui: self.ui,
            schedule: crate::pure::engine::Schedule::Eager,
            holding: self.rate.holding.as_deref(),
        }
    }

    /// Pushes onto what was pushed last and brings the PR, comments and, with a stop, the
    /// check run up to date.
    pub(super) async fn publish(
        &self,
        n: u32,
        plan: &Plan,
        stop: Option<&RunStop>,
    ) -> Result<Published, ActionError> {
        let r = self.round(n);
        self.publisher(&r)
            .finish(plan, &self.links, stop, false, None)
            .await
    }

    /// Round `n`'s commit of a batch of arrivals, pushed, and `/execute abort` looked for on
    /// pull request `pr`: what the next dispatch needs. The pull request, its questions and
    /// the status comment are told after that dispatch ([`Remote::tell`], due from now on),
    /// so a task the batch unblocked does not wait for those calls. An API failure after
    /// the push landed is said; the next commit looks again. `mine` is `HEAD`, pushed.
    pub(super) async fn push_for_dispatch(
        &mut self,
        n: u32,
        plan: &Plan,
        pr: u64,
        mine: &str,
    ) -> Result<Published, ActionError> {
        let r = self.round(n);
        let pushed = self.publisher(&r).push_for_dispatch(plan, pr).await;
        let undone = "give the pull request's comments";
        let later = "they are read again at the next commit";
        let published = self.landed_anyway(pushed, mine, undone, later)?;
        if !published.stale {
            self.untold = Some(n);
        }
        Ok(published)
    }

    /// What [`Remote::push_for_dispatch`] left to tell, once the runs it let start are
    /// dispatched: the pull request's body, its questions and the status comment. An API
    /// failure is said; the next commit or the run's end tells it all again.
    pub(super) async fn tell(&mut self, plan: &Plan) -> Result<(), ActionError> {
        let Some(n) = self.untold.take() else {
            return Ok(());
        };
        let r = self.round(n);
        match self.publisher(&r).tell(plan, &self.links).await {
            Err(ActionError::Api(e)) if e.transient() => {
                self.emit(Event::Note(format!(
                    "GitHub could not bring the pull request up to date ({e}); the next commit does."
                )));
                Ok(())
            }
            other => other,
        }
    }

    /// Makes the attempts `plan` counts as started, and neither the branch nor the record
    /// of starts holds yet, durable before their runs are dispatched — off the reviewed
    /// history (issue 31): a commit on the branch's tip whose plan has every attempt started
    /// since that tip in progress and counted (with its run once dispatched), `dagexec:
    /// starting task N attempt K, …`, pushed to [`super::starts_ref`] beside the branch, never
    /// to the branch. A conductor that dies after a dispatch thus leaves the attempt
    /// recorded, and its successor reads the record ([`Remote::read_starts`]), finds the run
    /// by its run-name and adopts it, or learns that it never started — never starts it
    /// again as the same attempt. The branch's next commit records the runs themselves. A
    /// rejected push means another writer: nothing is dispatched and the conductor stops.
    pub(super) fn record_starts(&mut self, plan: &Plan) -> Result<(), ActionError> {
        let rel = &self.inputs.plan_rel;
        let Some(bytes) = self.repo.read_at(&self.pushed, rel)? else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut pushed = crate::pure::plan::load::parse(&text, self.plan_path)
            .map_err(crate::pure::plan::error::PlanErrors::from)?;
        if pushed.tasks.len() != plan.tasks.len() {
            return Ok(());
        }
        // What the record holds is of the branch's tip only: the branch's commits record
        // the runs started before them.
        if self.starts.on != self.pushed {
            self.starts.recorded.clear();
            self.starts.on.clone_from(&self.pushed);
        }
        let mut starts = Vec::new();
        let mut new = false;
        for (i, t) in plan.tasks.iter().enumerate() {
            if t.status != Status::InProgress {
                continue;
            }
            let p = &mut pushed.tasks[i];
            if p.status == Status::InProgress && p.attempts() == t.attempts() {
                continue; // on the branch already (an arrival not integrated yet)
            }
            p.status = Status::InProgress;
            p.attempts = t.attempts;
            if let Some(f) = self.flights.get(&i) {
                p.extra.insert(
                    RUN_FIELD.into(),
                    serde_json::to_value(f).expect("a flight serialises"),
                );
            } else {
                p.extra.shift_remove(RUN_FIELD);
                new |= !self.starts.recorded.contains(&(i, t.attempts()));
            }
            starts.push((i, t.attempts()));
        }
        if !new {
            return Ok(());
        }
        let names: Vec<String> = starts
            .iter()
            .map(|(i, a)| format!("task {i} attempt {a}"))
            .collect();
        let record = self.repo.commit_file_onto(
            &self.pushed,
            rel,
            crate::pure::plan::load::to_text(&pushed).as_bytes(),
            &format!("dagexec: starting {}", names.join(", ")),
        )?;
        let name = super::starts_ref(self.branch);
        match self
            .repo
            .push_ref(&record, &name, self.starts.remote.as_deref(), self.auth)?
        {
            crate::edge::git::Pushed::Done => {
                self.starts.remote = Some(record);
                self.starts.recorded = starts.into_iter().collect();
            }
            crate::edge::git::Pushed::Rejected(why) => {
                self.ui.say(format!(
                    "{name} moved since this conductor last pushed it ({}): another writer; nothing more is started, and this conductor stops.",
                    why.lines().last().unwrap_or("").trim()
                ));
                self.stale = Some(Published {
                    stale: true,
                    ..Default::default()
                });
            }
        }
        Ok(())
    }

    /// Deletes the record of starts once the run ends with no run in flight: the branch's
    /// last commit records every attempt, so the record says nothing more, and a ref nobody
    /// reads is not left on the repository. A record another writer moved is left, and a
    /// failure to delete is said, never fatal (the next conductor of the branch reads the
    /// record only against the branch's history).
    pub(super) fn drop_starts_record(&mut self) {
        let Some(at) = self.starts.remote.clone() else {
            return;
        };
        let name = super::starts_ref(self.branch);
        match self.repo.delete_remote_ref(&name, &at, self.auth) {
            Ok(crate::edge::git::Pushed::Done) => self.starts.remote = None,
            Ok(crate::edge::git::Pushed::Rejected(why)) => self.ui.say(format!(
                "{name} moved since this conductor last pushed it ({}); left as it is.",
                why.lines().last().unwrap_or("").trim()
            )),
            Err(e) => self.ui.say(format!(
                "Could not delete {name}, the record of started attempts, which is no longer needed: {e}"
            )),
        }
    }

    /// Dispatches the run of task `i` attempt `attempt` (its start is recorded already) and
    /// returns its id. The dispatch is sent once ([`crate::edge::github::Client::dispatch_run`]):
    /// GitHub may have started the run although it failed to answer (5xx, a lost connection),
    /// so before it is ever sent again the branch's dispatched runs are searched for one with
    /// this task's and attempt's run-name from this base, and such a run is taken instead of
    /// starting a second (issue 31). A failure is waited out with back-off, said in the log,
    /// for at most [`DISPATCH_PATIENCE`]; while GitHub cannot list the runs either, nothing is
    /// sent.
    pub(super) async fn dispatch_task_run(
        &self,
        i: usize,
        attempt: u32,
        inputs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<u64, ActionError> {
        let since = Instant::now();
        let mut failures = 0;
        let name = run_name(self.branch, i, attempt);
        loop {
            let e = match self
                .client
                .dispatch_run(&self.inputs.workflow, self.branch, inputs)
                .await
            {
                Ok(Some(id)) => return Ok(id),
                Ok(None) => {
                    return Err(ActionError::Input(
                        "GitHub started the task's run but did not say which run it is (`return_run_details`); `schedule: eager` needs a GitHub that answers a dispatch with the run's id (github.com does). Use `schedule: rounds` here.".into(),
                    ));
                }
                Err(e) if e.transient() && since.elapsed() < DISPATCH_PATIENCE => e,
                Err(e) => return Err(e.into()),
            };
            failures += 1;
            let pause = self.client.policy.backoff(failures);
            self.emit(Event::Note(format!(
                "GitHub could not start the run of task {i} attempt {attempt} ({e}); its start is recorded, so this costs no attempt: looking for its run in {} before sending it again.",
                humantime::format_duration(pause)
            )));
            // Looked for until GitHub answers: a dispatch is sent again only once GitHub said
            // it started no such run.
            loop {
                tokio::time::sleep(self.client.policy.backoff(failures)).await;
                let listed = self
                    .client
                    .dispatched_runs(&self.inputs.workflow, self.branch, 1)
                    .await;
                match listed {
                    Ok(runs) => {
                        if let Some(run) = runs.iter().find(|r| {
                            r.event == "workflow_dispatch"
                                && r.display_title == name
                                && r.head_sha == self.pushed
                        }) {
                            self.emit(Event::Note(format!(
                                "GitHub had started it: found its run {} (task {i} attempt {attempt}); not sent again.",
                                run.id
                            )));
                            return Ok(run.id);
                        }
                        break;
                    }
                    Err(e) if e.transient() && since.elapsed() < DISPATCH_PATIENCE => {
                        failures += 1;
                        self.emit(Event::Note(format!(
                            "GitHub cannot list the runs of {} ({e}) to find the run of task {i} attempt {attempt}: nothing is sent until it can.",
                            self.branch
                        )));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// The plan as commit `rev` holds it, when it holds a plan that reads.
    pub(super) fn plan_at(&self, rev: &str) -> Option<Plan> {
        let bytes = self.repo.read_at(rev, &self.inputs.plan_rel).ok()??;
        let text = String::from_utf8_lossy(&bytes);
        crate::pure::plan::load::parse(&text, std::path::Path::new(&self.inputs.plan_rel)).ok()
    }

    /// `published`, the publication after a push of `mine`, unless GitHub failed after that
    /// push landed (a transient failure, and the branch on GitHub is `mine`): then it costs
    /// only what it failed to do (`undone`, said with when it is done again, `later`), and
    /// the conductor goes on with the pull request it has.
    fn landed_anyway(
        &self,
        published: Result<Published, ActionError>,
        mine: &str,
        undone: &str,
        later: &str,
    ) -> Result<Published, ActionError> {
        match published {
            Err(ActionError::Api(e))
                if e.transient()
                    && self.repo.fetch_branch(self.branch, self.auth)?.as_deref() == Some(mine) =>
            {
                self.emit(Event::Note(format!(
                    "Pushed to {}, but GitHub could not {undone} ({e}); {later}.",
                    self.branch
                )));
                Ok(Published {
                    pr: self.pr,
                    ..Default::default()
                })
            }
            other => other,
        }
    }

    /// [`Remote::publish`] while the run goes on (no stop): when GitHub fails the pull
    /// request's or the comments' update after the push landed, the conductor goes on — the
    /// next commit brings them up to date. `mine` is `HEAD`, pushed.
    pub(super) async fn publish_through(
        &self,
        n: u32,
        plan: &Plan,
        mine: &str,
    ) -> Result<Published, ActionError> {
        let published = self.publish(n, plan, None).await;
        let later = "the next commit brings it up to date";
        self.landed_anyway(published, mine, "update the pull request", later)
    }

    /// Task `i`'s attempt in flight as `f`: recorded on its task (committed with the branch's
    /// next commit) and polled by this conductor.
    pub(super) fn fly(&mut self, plan: &mut Plan, i: usize, f: Flight) {
        let run = serde_json::to_value(&f).expect("a flight serialises");
        plan.tasks[i].extra.insert(RUN_FIELD.into(), run);
        self.flights.insert(i, f);
    }

    /// Commits the plan as it stands with `message`.
    pub(super) fn commit(&self, plan: &Plan, message: &str) -> Result<(), ActionError> {
        save(plan, self.plan_path)?;
        self.repo
            .commit(message, std::slice::from_ref(&self.inputs.plan_rel))?;
        Ok(())
    }
}
