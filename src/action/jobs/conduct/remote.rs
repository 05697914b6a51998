//! The conductor's executor and its dealings with the branch and GitHub: a start made
//! durable before its run is dispatched, the dispatch, the commit and the publication.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::{DISPATCH_PATIENCE, Flight, RUN_FIELD, run_name, save};
use crate::action::protocol::PlanConclusion;
use crate::action::report::{Links, Stop};
use crate::action::rounds::Round;
use crate::action::runtime::Context;
use crate::action::{ActionError, Inputs};
use crate::edge::github::Client;
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::exec::Executor;
use crate::pure::pace::Timing;
use crate::pure::plan::model::{Plan, Status};

/// The conductor's executor: each attempt a workflow run of this workflow, polled, its
/// artifact read through the API; each batch integrated, committed and pushed, the pull
/// request and status comment moved with it.
pub(super) struct Remote<'a> {
    pub(super) client: &'a Client,
    pub(super) rt: &'a tokio::runtime::Runtime,
    pub(super) ctx: &'a Context,
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
    pub(super) stale: Option<crate::action::publish::Published>,
    /// The batch of arrivals to commit next.
    pub(super) staged: Vec<Judged>,
    /// The pull request, once published.
    pub(super) pr: Option<u64>,
    /// Polls in a row at which GitHub failed (down, or rate limiting): the next waits longer.
    pub(super) outages: u32,
    /// `overlap: merge` ([`super::merging`]).
    pub(super) merging: super::merging::State,
}

impl Remote<'_> {
    /// Pushes onto what was pushed last and brings the PR, comments and, with a stop, the
    /// check run up to date.
    pub(super) fn publish(
        &self,
        n: u32,
        plan: &Plan,
        stop: Option<&Stop>,
    ) -> Result<crate::action::publish::Published, ActionError> {
        let r = Round {
            branch: self.branch.to_string(),
            base: self.pushed.clone(),
            round: n,
            matrix: String::new(),
            planned: PlanConclusion::Conduct,
            planned_message: String::new(),
        };
        let ending = crate::action::publish::Ending {
            rt: self.rt,
            client: Some(self.client),
            ctx: self.ctx,
            repo: self.repo,
            auth: self.auth,
            round: &r,
            inputs: self.inputs,
            ui: self.ui,
            schedule: crate::pure::engine::Schedule::Eager,
        };
        ending.finish(plan, &self.links, stop, false, None)
    }

    /// Makes the attempts `plan` counts as started, and the branch does not record yet,
    /// durable before their runs are dispatched: the plan last pushed, with just those tasks
    /// in progress and their attempts counted, is committed (`dagexec: starting task N
    /// attempt K, …`) and pushed; the run dispatched next starts from that commit. A conductor
    /// that dies after a dispatch thus leaves the attempt on the branch, and its successor
    /// finds the run by its run-name and adopts it ([`find_unrecorded`]) or counts the attempt
    /// as interrupted — never starts it again as the same attempt. A rejected push means
    /// another writer: nothing is dispatched and the conductor stops.
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
        let mut starts = Vec::new();
        for (i, t) in plan.tasks.iter().enumerate() {
            if t.status != Status::InProgress || self.flights.contains_key(&i) {
                continue;
            }
            let p = &mut pushed.tasks[i];
            if p.status == Status::InProgress && p.attempts() == t.attempts() {
                continue; // recorded already (an arrival not integrated yet)
            }
            p.status = Status::InProgress;
            p.attempts = t.attempts;
            p.extra.shift_remove(RUN_FIELD);
            starts.push(format!("task {i} attempt {}", t.attempts()));
        }
        if starts.is_empty() {
            return Ok(());
        }
        save(&pushed, self.plan_path)?;
        self.repo.commit(
            &format!("dagexec: starting {}", starts.join(", ")),
            std::slice::from_ref(rel),
        )?;
        match self.repo.push_head(self.branch, self.auth)? {
            crate::edge::git::Pushed::Done => self.pushed = self.repo.head()?,
            crate::edge::git::Pushed::Rejected(why) => {
                self.ui.say(format!(
                    "{} moved since this conductor last pushed ({}): another writer; nothing more is started, and this conductor stops.",
                    self.branch,
                    why.lines().last().unwrap_or("").trim()
                ));
                self.stale = Some(crate::action::publish::Published {
                    stale: true,
                    ..Default::default()
                });
            }
        }
        save(plan, self.plan_path)
    }

    /// Dispatches the run of task `i` attempt `attempt` (its start is on the branch already)
    /// and returns its id. A dispatch GitHub fails (5xx, network, rate limit) after the retry
    /// policy's tries is waited out with back-off, said in the log, for at most
    /// [`DISPATCH_PATIENCE`]: before each new try the branch's runs are searched for one of
    /// this task and attempt from this base (a failed answer may still have started it), and
    /// such a run is taken instead of starting a second.
    pub(super) fn dispatch_task_run(
        &self,
        i: usize,
        attempt: u32,
        inputs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<u64, ActionError> {
        let since = Instant::now();
        let mut failures = 0;
        loop {
            let e = match self.rt.block_on(self.client.dispatch_run(
                &self.inputs.workflow,
                self.branch,
                inputs,
            )) {
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
            self.emit(crate::pure::events::Event::Note(format!(
                "GitHub could not start the run of task {i} attempt {attempt} ({e}); its start is on the branch, so this costs no attempt: trying again in {}.",
                humantime::format_duration(pause)
            )));
            std::thread::sleep(pause);
            let name = run_name(self.branch, i, attempt);
            if let Ok(runs) = self.rt.block_on(self.client.dispatched_runs(
                &self.inputs.workflow,
                self.branch,
                1,
            )) && let Some(run) = runs.iter().find(|r| {
                r.event == "workflow_dispatch"
                    && r.display_title == name
                    && r.head_sha == self.pushed
            }) {
                return Ok(run.id);
            }
        }
    }

    /// [`Remote::publish`] while the run goes on (no stop): when GitHub fails the pull
    /// request's or the comments' update after the push landed, the conductor goes on — the
    /// next commit brings them up to date.
    pub(super) fn publish_through(
        &self,
        n: u32,
        plan: &Plan,
    ) -> Result<crate::action::publish::Published, ActionError> {
        let mine = self.repo.head()?;
        match self.publish(n, plan, None) {
            Err(ActionError::Api(e))
                if e.transient()
                    && self.repo.fetch_branch(self.branch, self.auth)?.as_deref()
                        == Some(mine.as_str()) =>
            {
                self.emit(crate::pure::events::Event::Note(format!(
                    "Pushed to {}, but GitHub could not update the pull request ({e}); the next commit brings it up to date.",
                    self.branch
                )));
                Ok(crate::action::publish::Published {
                    pr: self.pr,
                    ..Default::default()
                })
            }
            other => other,
        }
    }

    /// Commits the plan as it stands with `message`.
    pub(super) fn commit(&self, plan: &Plan, message: &str) -> Result<(), ActionError> {
        save(plan, self.plan_path)?;
        self.repo
            .commit(message, std::slice::from_ref(&self.inputs.plan_rel))?;
        Ok(())
    }
}
