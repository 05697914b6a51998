//! `dagexec action conduct`: `schedule: eager` on GitHub Actions. One job — the conductor —
//! holds the write token and never runs task code; every task attempt is its own workflow
//! run (`workflow_dispatch` with `task`, `attempt` and `base`; its run-name says which), so
//! a task starts as soon as its blockers are committed and a slot is free, and its result is
//! integrated, committed and pushed as soon as its run ends — the pull request and status
//! comment move with it.
//!
//! The loop is the local eager engine's: [`engine::eager_pick`] (longest remaining chain
//! first, never beside a task it conflicts with, at most `max-parallel` at once), the same
//! judging as finalize ([`crate::action::arrival`]: the artifact read back, refusals, reviews,
//! questions), the same integration, plan update, retries, cascade and circuit breaker
//! ([`crate::action::arrival::integrate`]), one round commit per batch of arrivals (the runs found
//! ended at one poll), and the same stops (completed, deadlock, questions, breaker).
//!
//! State and crash safety: the execution branch is the only state. A started attempt is
//! committed and pushed before its run is dispatched (`dagexec: starting task N attempt K`:
//! `status: in_progress`, its attempt counted); its run (the field `dagexecRun` with the
//! run's id, attempt and base) is committed with the next round commit (or the handover
//! commit). A conductor that starts — the first, a successor, or one started by `/execute`
//! after any crash — adopts the runs its branch records and polls them again; a task in
//! progress without a run record (its conductor died between the start's commit and the
//! next) has its run looked up by its run-name among the branch's dispatched runs, from the
//! commit that recorded the start, and adopted; with none found the attempt is interrupted:
//! counted, and retried while attempts remain. No attempt is dispatched twice, and none is
//! integrated twice. The conductor pushes only onto the commit it last pushed (a rejected
//! push means another writer: it stops without publishing), so the branch has exactly one
//! writer at a time; its runs sit in the branch's concurrency group, task runs each in a
//! group of their own. When everything completed, the plan is archived on the branch before
//! the pull request is marked ready: a conductor killed between the two is finished by the
//! next run's plan job and finalize, which read the archive.
//!
//! GitHub's limits: each poll reads each run in flight once, and polls are spaced so that
//! they stay under 600 requests an hour (`GITHUB_TOKEN` allows 1,000 per repository); every
//! call goes through the one retry policy ([`crate::edge::github::retry`]). An outage outlasting
//! the policy's tries costs time only: a run's state, artifact listing or download that
//! GitHub fails (5xx, network, rate limit) is asked again at the next poll, the polls backing
//! off as the policy does and the log saying so, for as long as the result is retrievable
//! ([`RESULT_PATIENCE`] after the run ended); a run without a readable result still leaves
//! its attempt's record (spanning the run). Before the 6-hour job
//! limit (`handover-after`, 5h30m by default) the conductor commits its state, dispatches a
//! successor conductor run (which waits in the branch's concurrency group until this one
//! ends) and exits; the successor adopts the runs still in flight.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::action::arrival;
use crate::action::matrix::Entry;
use crate::action::protocol::{Conclusion, PlanConclusion};
use crate::action::report::{Links, Stop};
use crate::action::rounds::Round;
use crate::action::runtime::Context;
use crate::action::steering;
use crate::action::writer::{self, Finalized};
use crate::action::{ActionError, Inputs};
use crate::edge::github::Client;
use crate::edge::github::runs::WorkflowRun;
use crate::flow::attempt::Judged;
use crate::flow::exec::{Arrivals, Eager, Ending, Executor, Integrated, Start};
use crate::pure::engine;
pub use crate::pure::pace::{POLLS_PER_HOUR, Timing, poll_interval};
use crate::pure::plan::model::{Plan, Status};

fn save(plan: &Plan, path: &Path) -> Result<(), ActionError> {
    crate::edge::plan_file::save(plan, path).map_err(|source| ActionError::Write {
        path: path.to_path_buf(),
        source,
    })
}
use crate::flow::preflight::Overlaps;
use crate::flow::{RunEnd, Ui};

pub use crate::pure::plan::fields::RUN as RUN_FIELD;

/// The largest artifact archive the conductor downloads (streamed into a temporary file).
pub const MAX_ARTIFACT_BYTES: u64 = 256 << 20;

/// How long a dispatch that GitHub keeps failing is tried again before the conductor gives
/// up (and a later conductor counts the attempt as interrupted).
pub const DISPATCH_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// A started attempt: its workflow run, and the commit it started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    pub run: u64,
    pub attempt: u32,
    pub base: String,
}

/// The run-name of a task run (the template's `run-name` expression gives the same).
pub fn run_name(branch: &str, task: usize, attempt: u32) -> String {
    format!("dagexec {branch}: task {task} attempt {attempt}")
}

/// The flight recorded on task `t`, if any.
pub fn flight_of(t: &crate::pure::plan::model::Task) -> Option<Flight> {
    serde_json::from_value(t.extra.get(RUN_FIELD)?.clone()).ok()
}

/// Reads the three files of a work job's artifact from its zip archive (the temporary file
/// the download streamed it into): only regular entries with exactly the expected names are
/// read, each bounded in size (`changes.patch` into a temporary file of its own, the log's
/// tail); links, directories and every other entry are ignored (nothing else is extracted),
/// and an archive of more entries than an artifact has is refused
/// before its directory is parsed ([`crate::action::artifact_zip`]).
pub fn read_zip(
    archive: impl std::io::Read + std::io::Seek,
) -> Result<crate::action::artifact::Collected, String> {
    crate::action::artifact_zip::read(archive)
}

/// The conductor's executor: each attempt a workflow run of this workflow, polled, its
/// artifact read through the API; each batch integrated, committed and pushed, the pull
/// request and status comment moved with it.
struct Remote<'a> {
    client: &'a Client,
    rt: &'a tokio::runtime::Runtime,
    ctx: &'a Context,
    repo: &'a crate::edge::git::Repo,
    auth: &'a crate::edge::git::RemoteAuth,
    inputs: &'a Inputs,
    branch: &'a str,
    plan_path: &'a Path,
    dag: &'a crate::pure::graph::Dag,
    opts: &'a crate::flow::RunOptions,
    ui: &'a Ui,
    timing: Timing,
    started: Instant,
    /// The runs in flight, by task.
    flights: BTreeMap<usize, Flight>,
    /// What this conductor pushed last (task runs start from it; pushes go only onto it).
    pushed: String,
    links: Links,
    /// The publication that found the branch moved by another writer.
    stale: Option<crate::action::publish::Published>,
    /// The batch of arrivals to commit next.
    staged: Vec<Judged>,
    /// The pull request, once published.
    pr: Option<u64>,
    /// Polls in a row at which GitHub failed (down, or rate limiting): the next waits longer.
    outages: u32,
}

impl Remote<'_> {
    /// Pushes onto what was pushed last and brings the PR, comments and, with a stop, the
    /// check run up to date.
    fn publish(
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
    fn record_starts(&mut self, plan: &Plan) -> Result<(), ActionError> {
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
    fn dispatch_task_run(
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
    fn publish_through(
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
    fn commit(&self, plan: &Plan, message: &str) -> Result<(), ActionError> {
        save(plan, self.plan_path)?;
        self.repo
            .commit(message, std::slice::from_ref(&self.inputs.plan_rel))?;
        Ok(())
    }
}

impl Executor for Remote<'_> {
    type Error = ActionError;

    fn slots(&self) -> usize {
        self.inputs.max_parallel.max(1)
    }

    /// Nothing runs for a conductor that found another writer on the branch: it stops.
    fn running(&self) -> usize {
        if self.stale.is_some() {
            0
        } else {
            self.flights.len()
        }
    }

    /// A retry's prompt must be on the branch before its run can read it.
    fn retries_in_place(&self) -> bool {
        false
    }

    /// Saved, and the attempts counted since the last push made durable on the branch before
    /// their runs are dispatched ([`Remote::record_starts`]).
    fn save(&mut self, plan: &mut Plan) -> Result<(), ActionError> {
        save(plan, self.plan_path)?;
        self.record_starts(plan)
    }

    fn start(&mut self, plan: &mut Plan, start: Start, round: u32) -> Result<(), ActionError> {
        if self.stale.is_some() {
            return Ok(());
        }
        let (i, attempt) = (start.task, start.attempt);
        let mut dispatch = crate::action::dispatch_inputs(&self.inputs.plan_rel, self.branch);
        dispatch.insert("task".into(), i.to_string().into());
        dispatch.insert("attempt".into(), attempt.to_string().into());
        dispatch.insert("base".into(), self.pushed.clone().into());
        let id = self.dispatch_task_run(i, attempt, &dispatch)?;
        // The crash tests' kill -9 between a dispatch and the commit that records its run.
        crate::flow::failpoint("dispatched", round);
        let f = Flight {
            run: id,
            attempt,
            base: self.pushed.clone(),
        };
        let t = &mut plan.tasks[i];
        t.extra.insert(
            RUN_FIELD.into(),
            serde_json::to_value(&f).expect("a flight serialises"),
        );
        self.emit(crate::pure::events::Event::AttemptStarted {
            task: i,
            attempt,
            subject: t.subject.clone(),
            run: Some(id),
        });
        self.flights.insert(i, f);
        save(plan, self.plan_path)
    }

    /// One poll of every run in flight, after the poll interval; the ended ones are judged.
    #[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
    fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, ActionError> {
        let mut pause = poll_interval(
            self.timing.poll,
            self.flights.len(),
            self.timing.polls_per_hour,
        );
        // GitHub failed at the last polls: back off as the retry policy does.
        if self.outages > 0 {
            pause += self.client.policy.backoff(self.outages);
        }
        std::thread::sleep(pause);
        let mut arrivals = Arrivals::default();
        // What GitHub failed to answer at this poll (the first such failure).
        let mut outage: Option<String> = None;
        for (&i, f) in &self.flights {
            let now = jiff::Timestamp::now();
            let (found, log_url, conclusion, span) = match self
                .rt
                .block_on(self.client.workflow_run(f.run))
            {
                Ok(run) if !run.completed() => continue,
                Ok(run) => match fetch(self.client, self.rt, &run, i, f.attempt, self.ui) {
                    Fetched::Later(e) => {
                        outage
                            .get_or_insert(format!("the result of run {} (task {i}): {e}", f.run));
                        continue;
                    }
                    Fetched::Done(found, url) => {
                        let span = run.span(now);
                        let conclusion = run.conclusion.unwrap_or_else(|| "no conclusion".into());
                        (found, url, conclusion, span)
                    }
                },
                // The run is gone (deleted by hand): its attempt ends with nothing to show.
                Err(e) if e.status() == Some(404) => (None, None, "gone".to_string(), (now, now)),
                // GitHub is down or limits us: the run goes on regardless and stays readable.
                Err(e) if e.transient() => {
                    outage.get_or_insert(format!("the state of run {} (task {i}): {e}", f.run));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(url) = log_url {
                self.links.logs.insert(i, url);
            }
            let entry = Entry {
                task: i,
                attempt: f.attempt,
                name: run_name(self.branch, i, f.attempt),
            };
            self.emit(crate::pure::events::Event::Note(format!(
                "Run {} of task {i} ended ({conclusion}).",
                f.run
            )));
            let found = found.map(|r| r.map(|c| *c));
            let mut judged = arrival::judge_entry(
                self.repo,
                plan,
                self.inputs,
                &entry,
                found.as_ref(),
                self.ui,
            )?;
            // A run that left no readable result (cancelled, failed before its upload, gone)
            // still ended an attempt: its record spans the run as GitHub reports it.
            if judged.measured.is_none() {
                judged.measured = Some(crate::pure::usage::Measured {
                    start: span.0,
                    end: span.1,
                    usage: Default::default(),
                });
            }
            arrivals.judged.push(judged);
        }
        for j in &arrivals.judged {
            self.flights.remove(&j.index);
            plan.tasks[j.index].extra.shift_remove(RUN_FIELD);
        }
        match outage {
            Some(what) => {
                self.outages += 1;
                self.emit(crate::pure::events::Event::Note(format!(
                    "GitHub could not give {what}. A run and its result stay retrievable for days, so this costs no attempt: waiting {} more before the next poll (failing poll {} in a row).",
                    humantime::format_duration(self.client.policy.backoff(self.outages)),
                    self.outages
                )));
            }
            None if self.outages > 0 => {
                self.emit(crate::pure::events::Event::Note(format!(
                    "GitHub answers again after {} failing poll(s).",
                    self.outages
                )));
                self.outages = 0;
            }
            None => {}
        }
        Ok(arrivals)
    }

    /// The arrivals of one poll are one batch: kept until it is committed.
    fn stage(&mut self, _plan: &mut Plan, judged: Vec<Judged>) -> Result<(), ActionError> {
        self.staged.extend(judged);
        Ok(())
    }

    /// Integrates the batch as finalize integrates a round ([`arrival::integrate`]: the
    /// same refusals, retries, questions, update and round commit), then pushes and publishes.
    fn commit(
        &mut self,
        plan: &mut Plan,
        _tasks: &[usize],
        round: u32,
        _wave: Option<u64>,
    ) -> Result<Integrated, ActionError> {
        let batch = std::mem::take(&mut self.staged);
        let at = arrival::Integrator {
            repo: self.repo,
            dag: self.dag,
            opts: self.opts,
            ui: self.ui,
        };
        let end = arrival::integrate(at, plan, batch, round)?;
        if let Some(end) = end {
            return Ok(Integrated::End(end));
        }
        // Plan changes queued on the pull request (`/execute answer|retry|proceed`: their
        // steer job waits in the branch's group until this conductor ends), applied now.
        if let Some(pr) = self.pr {
            let queue = steering::Queue {
                client: self.client,
                pr,
                me: steering::comment::Identity {
                    app_id: self.inputs.app_id,
                },
                repo: self.repo,
                plan_path: self.plan_path,
                plan_rel: &self.inputs.plan_rel,
            };
            let applied = self
                .rt
                .block_on(steering::catch_up(queue, plan, self.dag, None));
            match applied {
                Ok(applied) => {
                    for line in applied {
                        self.emit(crate::pure::events::Event::Note(line));
                    }
                }
                // Queued commands stay queued on the pull request: the next commit applies them.
                Err(ActionError::Api(e)) if e.transient() => {
                    self.emit(crate::pure::events::Event::Note(format!(
                        "GitHub could not give the commands queued on the pull request ({e}); they are applied at the next commit."
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        let published = self.publish_through(round, plan)?;
        self.pr = published.pr.or(self.pr);
        if published.stale {
            self.stale = Some(published);
            return Ok(Integrated::Stale);
        }
        // Pushed: the markers of the commands applied above say so now.
        if let Some(pr) = self.pr
            && steering::settled_since(self.repo, &self.pushed)
        {
            let me = steering::comment::Identity {
                app_id: self.inputs.app_id,
            };
            let confirmed = self
                .rt
                .block_on(steering::confirm(self.client, pr, me, self.repo));
            for line in confirmed {
                self.emit(crate::pure::events::Event::Note(line));
            }
        }
        self.pushed = self.repo.head()?;
        if published.aborted {
            self.emit(crate::pure::events::Event::Note(
                "`/execute abort`: no new task starts; what is in flight is integrated.".into(),
            ));
            return Ok(Integrated::Abort);
        }
        Ok(Integrated::Continue)
    }

    fn handover_due(&self) -> bool {
        self.started.elapsed() >= self.timing.handover_after
    }

    fn emit(&self, event: crate::pure::events::Event) {
        self.ui.emit(event);
    }
}

/// Runs the conductor in the checkout at `root` (the plan job's `base` of `branch`).
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Context,
    round: &Round,
    timing: Timing,
    client: Option<&Client>,
    rt: &tokio::runtime::Runtime,
) -> Result<Finalized, ActionError> {
    let Some(client) = client else {
        return Err(ActionError::Input(
            "conduct needs GitHub (GITHUB_REPOSITORY and a token): it starts every task as a workflow run; run the plan locally with `dagexec run --schedule eager` instead".into(),
        ));
    };
    let writer::Job {
        repo,
        auth,
        inputs,
        plan_path,
        mut plan,
        dag,
        ui,
        opts,
    } = writer::Job::open(root, inputs, &round.base, engine::Schedule::Eager)?;
    let inputs = &inputs;
    let overlaps = Overlaps::of(&plan, &dag);
    let conflicts = overlaps.for_scheduling();

    // Adopt what the branch records as running; a task in progress without a run is an
    // interrupted attempt.
    let mut flights: BTreeMap<usize, Flight> = BTreeMap::new();
    let mut unrecorded = Vec::new();
    for (i, t) in plan.tasks.iter_mut().enumerate() {
        if t.status != Status::InProgress {
            t.extra.shift_remove(RUN_FIELD);
            continue;
        }
        match flight_of(t) {
            Some(f) => {
                ui.say(format!(
                    "Adopting task {i} attempt {} (run {}), started earlier.",
                    f.attempt, f.run
                ));
                flights.insert(i, f);
            }
            None => {
                unrecorded.push(i);
            }
        }
    }
    // Attempts the branch records as started without their run: a conductor died between
    // the dispatch and the commit that records it. Its run is found by its run-name, from
    // the commit that recorded the start, and adopted; else the attempt counts.
    if !unrecorded.is_empty() {
        let found = find_unrecorded(
            &repo,
            client,
            rt,
            inputs,
            &round.branch,
            &plan,
            &unrecorded,
            &ui,
        );
        for i in unrecorded {
            let t = &mut plan.tasks[i];
            if let Some(f) = found.get(&i) {
                ui.say(format!(
                    "Adopting task {i} attempt {} (run {}), dispatched by a conductor that died before recording it.",
                    f.attempt, f.run
                ));
                t.extra.insert(
                    RUN_FIELD.into(),
                    serde_json::to_value(f).expect("a flight serialises"),
                );
                flights.insert(i, f.clone());
            } else {
                ui.say(format!(
                    "Task {i}: attempt {} was interrupted (no run recorded or found); it counts.",
                    t.attempts()
                ));
                t.status = Status::Pending;
            }
        }
    }
    let exhausted = crate::pure::update::fail_exhausted(&mut plan, &dag);
    for i in &exhausted.failed {
        ui.say(format!(
            "Task {i}: no attempts left after an interrupted one."
        ));
    }

    let round_no = crate::flow::round_counter(&plan);
    let adopted: Vec<usize> = flights.keys().copied().collect();
    let mut remote = Remote {
        client,
        rt,
        ctx,
        repo: &repo,
        auth: &auth,
        inputs,
        branch: &round.branch,
        plan_path: &plan_path,
        dag: &dag,
        opts: &opts,
        ui: &ui,
        timing,
        started: Instant::now(),
        flights,
        pushed: repo.head()?,
        links: Links {
            run: ctx.run_url(),
            logs: BTreeMap::new(),
        },
        stale: None,
        staged: Vec::new(),
        pr: None,
        outages: 0,
    };
    // The branch (and the pull request) exist before any run is dispatched on it.
    remote.commit(
        &plan,
        &format!(
            "dagexec: conductor starts ({} run(s) adopted)",
            adopted.len()
        ),
    )?;
    let published = remote.publish_through(round_no, &plan)?;
    if published.stale {
        return Ok(writer::stale(published));
    }
    remote.pushed = repo.head()?;
    remote.pr = published.pr;

    let engine = Eager {
        dag: &dag,
        conflicts: &conflicts,
        budget: inputs.max_cost,
    };
    let (ending, round_no) = engine.run(&mut remote, &mut plan, round_no, adopted)?;
    if let Some(published) = remote.stale.take() {
        return Ok(writer::stale(published));
    }
    let in_flight = remote.flights.len();
    let (conclusion, stop) = match ending {
        Ending::Stale => return Ok(writer::stale(Default::default())),
        Ending::Handover => {
            remote.commit(
                &plan,
                &format!("dagexec: conductor hands over ({in_flight} run(s) in flight)"),
            )?;
            let published = remote.publish_through(round_no, &plan)?;
            if published.stale {
                return Ok(writer::stale(published));
            }
            let next = crate::action::dispatch_inputs(&inputs.plan_rel, &round.branch);
            // The state is pushed; only the successor's start is left: an outage is waited
            // out (a second successor would only wait in the branch's group).
            let since = Instant::now();
            let mut failures = 0;
            loop {
                match rt.block_on(client.dispatch(&inputs.workflow, &round.branch, &next)) {
                    Ok(()) => break,
                    Err(e) if e.transient() && since.elapsed() < DISPATCH_PATIENCE => {
                        failures += 1;
                        let pause = client.policy.backoff(failures);
                        ui.say(format!(
                            "GitHub could not start the successor conductor ({e}); trying again in {}.",
                            humantime::format_duration(pause)
                        ));
                        std::thread::sleep(pause);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            ui.emit(crate::pure::events::Event::Note(format!(
                "Handed over after {}: a new conductor run adopts the {in_flight} run(s) in flight.",
                humantime::format_duration(Duration::from_secs(
                    remote.started.elapsed().as_secs()
                )),
            )));
            summary(
                ctx,
                &plan,
                round_no,
                &remote.links,
                &ui,
                inputs.max_parallel,
            )?;
            return Ok(Finalized {
                conclusion: Conclusion::Handover,
                pr: published.pr,
                failed: false,
            });
        }
        Ending::Ended(end) => {
            // Runs still in flight stay recorded on their tasks: a later conductor adopts them.
            remote.commit(
                &plan,
                &format!("dagexec: circuit breaker ({in_flight} run(s) left in flight)"),
            )?;
            let why = match end {
                RunEnd::CircuitBreaker(b) => b.message(),
                other => format!("the run ended ({other:?})"),
            };
            (Conclusion::CircuitBreaker, Some(Stop::CircuitBreaker(why)))
        }
        // Only `/execute abort` stops a conductor early (no Ctrl-C reaches it).
        Ending::Aborted | Ending::Interrupted { .. } => (Conclusion::Aborted, None),
        Ending::Deadlock { pending } => (
            Conclusion::Deadlock,
            Some(Stop::Deadlock(engine::deadlock_message(pending))),
        ),
        Ending::Budget(why) => (Conclusion::Budget, Some(Stop::Budget(why))),
        // Refused credentials: every task would fail the same way (the check run says which
        // secret to fix).
        Ending::Halted(why) => (Conclusion::Halted, Some(Stop::CircuitBreaker(why))),
        Ending::Done => {
            let stop = arrival::done_stop(&repo, &mut plan, &opts, &ui)?;
            repo.commit(
                "dagexec: run complete",
                std::slice::from_ref(&inputs.plan_rel),
            )?;
            let conclusion = match stop {
                Some(Stop::Completed) => Conclusion::Completed,
                Some(_) => Conclusion::NeedsInput,
                None => Conclusion::Incomplete,
            };
            (conclusion, stop)
        }
    };
    let published = remote.publish(round_no, &plan, stop.as_ref())?;
    if published.stale {
        return Ok(writer::stale(published));
    }
    summary(
        ctx,
        &plan,
        round_no,
        &remote.links,
        &ui,
        inputs.max_parallel,
    )?;
    Ok(Finalized {
        conclusion,
        pr: published.pr,
        failed: matches!(
            stop,
            Some(Stop::CircuitBreaker(_) | Stop::Deadlock(_) | Stop::Budget(_))
        ),
    })
}

/// The conductor's job summary: the tasks whose attempts ended in this job (its events), the
/// whole table, and those attempts one by one.
fn summary(
    ctx: &Context,
    plan: &Plan,
    round: u32,
    links: &Links,
    ui: &Ui,
    max_parallel: usize,
) -> Result<(), ActionError> {
    let events = ui.activity();
    let ended: std::collections::BTreeSet<usize> = events
        .iter()
        .filter_map(|s| match &s.event {
            crate::pure::events::Event::AttemptEnded(e) => Some(e.task),
            _ => None,
        })
        .collect();
    let ended: Vec<usize> = ended.into_iter().collect();
    ctx.summary(&crate::action::report::round_summary(
        plan,
        round,
        &ended,
        links,
        &[],
        &events,
        crate::pure::timeline::Ran {
            schedule: crate::pure::engine::Schedule::Eager,
            place: crate::pure::simulate::Place::Actions,
            slots: max_parallel,
        },
    ))?;
    Ok(())
}

/// The runs of attempts the branch records as started (`tasks`: in progress, no run
/// recorded) that a conductor dispatched before dying: a run of `workflow` on `branch` whose
/// run-name names the task and its attempt, started from a commit that records the attempt
/// as started and that the branch kept unchanged for the task since (the first-parent
/// history of `HEAD`, newest first, while the task stays in progress at that attempt with no
/// run), so a run of the same task and attempt number from before a `/execute retry` is never
/// taken for it. Up to 10 pages of runs, newest first, are read; a failure to list them is
/// said, and the attempts then count as interrupted.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
fn find_unrecorded(
    repo: &crate::edge::git::Repo,
    client: &Client,
    rt: &tokio::runtime::Runtime,
    inputs: &Inputs,
    branch: &str,
    plan: &Plan,
    tasks: &[usize],
    ui: &Ui,
) -> BTreeMap<usize, Flight> {
    // The commits each start may have been dispatched from.
    let mut from: BTreeMap<usize, std::collections::BTreeSet<String>> = BTreeMap::new();
    let mut alive: Vec<usize> = tasks.to_vec();
    for c in repo.first_parents(64).unwrap_or_default() {
        let Ok(Some(bytes)) = repo.read_at(&c, &inputs.plan_rel) else {
            break;
        };
        let Ok(there) = crate::pure::plan::load::parse(
            &String::from_utf8_lossy(&bytes),
            Path::new(&inputs.plan_rel),
        ) else {
            break;
        };
        alive.retain(|&i| {
            let same = there.tasks.get(i).is_some_and(|t| {
                t.status == Status::InProgress
                    && t.attempts() == plan.tasks[i].attempts()
                    && !t.extra.contains_key(RUN_FIELD)
            });
            if same {
                from.entry(i).or_default().insert(c.clone());
            }
            same
        });
        if alive.is_empty() {
            break;
        }
    }
    let mut found = BTreeMap::new();
    for page in 1..=10 {
        let runs = match rt.block_on(client.dispatched_runs(&inputs.workflow, branch, page)) {
            Ok(r) => r,
            Err(e) => {
                ui.say(format!(
                    "Cannot list the runs of {branch} to find the runs of attempts started without one recorded: {e}"
                ));
                break;
            }
        };
        for run in &runs {
            for (&i, commits) in &from {
                let attempt = plan.tasks[i].attempts();
                if found.contains_key(&i)
                    || run.event != "workflow_dispatch"
                    || run.display_title != run_name(branch, i, attempt)
                    || !commits.contains(&run.head_sha)
                {
                    continue;
                }
                found.insert(
                    i,
                    Flight {
                        run: run.id,
                        attempt,
                        base: run.head_sha.clone(),
                    },
                );
            }
        }
        if runs.len() < 100 || found.len() == from.len() {
            break;
        }
    }
    found
}

/// How long after its run ended an artifact that GitHub fails to list or serve is waited
/// for; past it the attempt is judged without its result. GitHub keeps artifacts for 90 days
/// by default and at least one day.
pub const RESULT_PATIENCE: Duration = Duration::from_secs(24 * 3600);

/// What a poll got of an ended run's result.
enum Fetched {
    /// The artifact read (or why it could not be: `None` when the run left none — it failed
    /// before uploading, was cancelled, or the artifact expired), and its page for the logs
    /// link.
    Done(
        Option<Result<Box<crate::action::artifact::Collected>, String>>,
        Option<String>,
    ),
    /// GitHub failed to list or serve it (down, or rate limiting): the result is still
    /// there, to be read at a later poll.
    Later(crate::edge::github::ApiError),
}

/// The artifact of task `task` attempt `attempt` from its ended `run`: the exact name its job
/// uploads (the latest run attempt first, see [`arrival::accepted_names`]), downloaded into
/// an anonymous temporary file and read from it. A listing or download GitHub fails (after the retry policy's tries) is
/// [`Fetched::Later`] for [`RESULT_PATIENCE`] after the run ended.
fn fetch(
    client: &Client,
    rt: &tokio::runtime::Runtime,
    run: &WorkflowRun,
    task: usize,
    attempt: u32,
    ui: &Ui,
) -> Fetched {
    let ended = run
        .updated_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let patient = ended.is_none_or(|e| {
        jiff::Timestamp::now().duration_since(e).as_secs() < RESULT_PATIENCE.as_secs() as i64
    });
    let entry = Entry {
        task,
        attempt,
        name: String::new(),
    };
    let names = arrival::accepted_names(&run.id.to_string(), run.run_attempt.max(1), &entry);
    let listed = match rt.block_on(client.artifacts_of(run.id, None)) {
        Ok(l) => l,
        Err(e) if e.transient() && patient => return Fetched::Later(e),
        Err(e) => {
            return Fetched::Done(
                Some(Err(format!("cannot list the run's artifacts: {e}"))),
                None,
            );
        }
    };
    for a in listed.iter().filter(|a| !names.contains(&a.name)) {
        ui.say(format!(
            "  ignored artifact {} of run {}: not task {task} attempt {attempt}'s",
            a.name, run.id
        ));
    }
    let Some(artifact) = names
        .iter()
        .find_map(|n| listed.iter().find(|a| &a.name == n && !a.expired))
    else {
        return Fetched::Done(None, None);
    };
    let url = (!run.html_url.is_empty()).then(|| {
        format!(
            "{}/artifacts/{}",
            run.html_url.trim_end_matches('/'),
            artifact.id
        )
    });
    let file = match rt.block_on(client.download_artifact(artifact.id, MAX_ARTIFACT_BYTES)) {
        Ok(f) => f,
        Err(e) if e.transient() && patient => return Fetched::Later(e),
        Err(e) => {
            return Fetched::Done(
                Some(Err(format!("cannot download {}: {e}", artifact.name))),
                url,
            );
        }
    };
    let read = read_zip(file).and_then(|c| {
        if (c.result.task, c.result.attempt) == (task, attempt) {
            Ok(c)
        } else {
            Err(format!(
                "{} holds the result of task {} attempt {}, not of task {task} attempt {attempt}",
                artifact.name, c.result.task, c.result.attempt
            ))
        }
    });
    Fetched::Done(Some(read.map(Box::new)), url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_stay_under_the_hourly_budget() {
        let poll = Duration::from_secs(30);
        assert_eq!(poll_interval(poll, 1, POLLS_PER_HOUR), poll);
        assert_eq!(
            poll_interval(poll, 8, POLLS_PER_HOUR),
            Duration::from_secs(48)
        );
        for n in 1..=256 {
            let per_hour = 3600 / poll_interval(poll, n, POLLS_PER_HOUR).as_secs() * n as u64;
            assert!(
                per_hour <= POLLS_PER_HOUR,
                "{n} runs: {per_hour} polls an hour"
            );
        }
    }

    fn read_zip_bytes(bytes: &[u8]) -> Result<crate::action::artifact::Collected, String> {
        read_zip(std::io::Cursor::new(bytes))
    }

    fn zip_of(entries: &[(&str, &[u8])], link: Option<(&str, &str)>) -> Vec<u8> {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, data) in entries {
            w.start_file(*name, o).unwrap();
            w.write_all(data).unwrap();
        }
        if let Some((name, target)) = link {
            w.add_symlink(name, target, o).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn result_json(task: usize, attempt: u32) -> Vec<u8> {
        let report = crate::pure::outcome::AttemptReport {
            output: "COMPLETED: ok\n".into(),
            exit: crate::pure::outcome::Exit::Success,
            log: None,
            present: Default::default(),
            changed: Default::default(),
            acceptance: None,
        };
        let r = crate::action::artifact::WorkResult::new(
            (task, attempt, 1),
            "abc",
            &report,
            Duration::from_millis(5),
        );
        serde_json::to_vec(&r).unwrap()
    }

    #[test]
    fn an_artifact_is_read_from_its_zip_without_touching_the_disk() {
        let bytes = zip_of(
            &[
                ("result.json", &result_json(3, 2)),
                ("changes.patch", b"\x00patch"),
                ("worker.log", b"log\n"),
                ("../../evil", b"x"),
            ],
            None,
        );
        let c = read_zip_bytes(&bytes).unwrap();
        assert_eq!((c.result.task, c.result.attempt), (3, 2));
        assert_eq!(c.patch.read_to_vec(), b"\x00patch");
        assert_eq!(c.log.as_deref(), Some("log\n"));
    }

    #[test]
    fn hostile_archives_are_refused_with_the_reason() {
        assert!(
            read_zip_bytes(b"not a zip")
                .unwrap_err()
                .contains("not a zip")
        );
        let none = zip_of(&[("changes.patch", b"")], None);
        assert!(
            read_zip_bytes(&none)
                .unwrap_err()
                .contains("no result.json")
        );
        let linked = zip_of(
            &[("result.json", &result_json(0, 1))],
            Some(("changes.patch", "/etc/passwd")),
        );
        assert!(
            read_zip_bytes(&linked)
                .unwrap_err()
                .contains("changes.patch is not a regular file")
        );
        let junk = zip_of(&[("result.json", b"{\"no\": 1}")], None);
        assert!(
            read_zip_bytes(&junk)
                .unwrap_err()
                .contains("not a dagexec work result")
        );
    }

    #[test]
    fn run_names_say_branch_task_and_attempt() {
        assert_eq!(
            run_name("dagexec/x", 3, 2),
            "dagexec dagexec/x: task 3 attempt 2"
        );
    }
}
