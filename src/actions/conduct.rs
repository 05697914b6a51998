//! `dagexec action conduct`: `schedule: eager` on GitHub Actions. One job — the conductor —
//! holds the write token and never runs task code; every task attempt is its own workflow
//! run (`workflow_dispatch` with `task`, `attempt` and `base`; its run-name says which), so
//! a task starts as soon as its blockers are committed and a slot is free, and its result is
//! integrated, committed and pushed as soon as its run ends — the pull request and status
//! comment move with it.
//!
//! The loop is the local eager engine's: [`engine::eager_pick`] (longest remaining chain
//! first, never beside a task it conflicts with, at most `max-parallel` at once), the same
//! judging as finalize ([`super::finalize`]: the artifact read back, refusals, reviews,
//! questions), the same integration, plan update, retries, cascade and circuit breaker
//! ([`super::finalize::integrate`]), one round commit per batch of arrivals (the runs found
//! ended at one poll), and the same stops (completed, deadlock, questions, breaker).
//!
//! State and crash safety: the execution branch is the only state. A started attempt is
//! recorded on its task (`status: in_progress`, its attempt counted, and the field
//! `dagexecRun` with the run's id, attempt and base) and committed with the next round
//! commit (or the handover commit). A conductor that starts — the first, a successor, or one
//! started by `/execute` after any crash — adopts the runs its branch records and polls them
//! again; a task in progress without a run record (its conductor died before committing it)
//! is an interrupted attempt: counted, and retried while attempts remain. Its orphaned run,
//! if one was dispatched, is never read: at worst work is done twice, never lost or
//! integrated twice. The conductor pushes only onto the commit it last pushed (a rejected
//! push means another writer: it stops without publishing), so the branch has exactly one
//! writer at a time; its runs sit in the branch's concurrency group, task runs each in a
//! group of their own.
//!
//! GitHub's limits: each poll reads each run in flight once, and polls are spaced so that
//! they stay under 600 requests an hour (GITHUB_TOKEN allows 1,000 per repository); every
//! call goes through the one retry policy ([`crate::github::retry`]). Before the 6-hour job
//! limit (`handover-after`, 5h30m by default) the conductor commits its state, dispatches a
//! successor conductor run (which waits in the branch's concurrency group until this one
//! ends) and exits; the successor adopts the runs still in flight.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::arrival;
use super::finalize::{self, Finalized, Round};
use super::matrix::Entry;
use super::report::{Links, Stop};
use super::runtime::Context;
use super::{ActionError, Inputs};
use crate::engine;
use crate::exec::{Arrivals, Eager, Ending, Executor, Integrated, Start};
use crate::github::Client;
use crate::github::runs::WorkflowRun;
use crate::plan::model::{Plan, Status};
use crate::run::attempt::Judged;

fn save(plan: &Plan, path: &Path) -> Result<(), ActionError> {
    crate::plan::save(plan, path).map_err(|source| ActionError::Write {
        path: path.to_path_buf(),
        source,
    })
}
use crate::run::{RunEnd, Ui};
use crate::setup::Overlaps;

/// The task field that records a started attempt's workflow run.
pub const RUN_FIELD: &str = "dagexecRun";

/// The largest artifact archive the conductor downloads.
const MAX_ARTIFACT_BYTES: u64 = 256 << 20;

/// At most this many run polls an hour by default (GITHUB_TOKEN: 1,000 requests an hour).
pub const POLLS_PER_HOUR: u64 = 600;

/// A started attempt: its workflow run, and the commit it started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    pub run: u64,
    pub attempt: u32,
    pub base: String,
}

/// The conductor's own settings.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long to wait between polls (at least; see [`poll_interval`]).
    pub poll: Duration,
    /// When to hand over to a successor run (before GitHub's 6-hour job limit).
    pub handover_after: Duration,
    /// The most run polls an hour (a token with a larger rate limit may allow more).
    pub polls_per_hour: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_secs(30),
            handover_after: Duration::from_secs(5 * 3600 + 30 * 60),
            polls_per_hour: POLLS_PER_HOUR,
        }
    }
}

/// The wait between two polls with `in_flight` runs: at least `poll`, and long enough that
/// one read of each run per poll stays under `per_hour` reads an hour.
pub fn poll_interval(poll: Duration, in_flight: usize, per_hour: u64) -> Duration {
    let budget = Duration::from_millis(3_600_000 * in_flight as u64 / per_hour.max(1));
    poll.max(budget)
}

/// The run-name of a task run (the template's `run-name` expression gives the same).
pub fn run_name(branch: &str, task: usize, attempt: u32) -> String {
    format!("dagexec {branch}: task {task} attempt {attempt}")
}

/// The flight recorded on task `t`, if any.
pub fn flight_of(t: &crate::plan::model::Task) -> Option<Flight> {
    serde_json::from_value(t.extra.get(RUN_FIELD)?.clone()).ok()
}

/// Reads the three files of a work job's artifact from its zip archive, in memory: only
/// regular entries with exactly the expected names are read, each bounded in size; links,
/// directories and every other entry are ignored (nothing is extracted to disk).
pub fn read_zip(bytes: &[u8]) -> Result<super::artifact::Collected, String> {
    use super::artifact::{LOG_FILE, PATCH_FILE, RESULT_FILE, WorkResult};
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("the artifact is not a zip archive: {e}"))?;
    let mut entry = |name: &str, limit: u64| -> Result<Option<Vec<u8>>, String> {
        let mut f = match zip.by_name(name) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(format!("{name}: {e}")),
        };
        if !f.is_file() || f.is_symlink() {
            return Err(format!("{name} is not a regular file in the artifact"));
        }
        let mut out = Vec::new();
        (&mut f)
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("{name}: {e}"))?;
        if out.len() as u64 > limit {
            return Err(format!("{name} is larger than {limit} bytes; refused"));
        }
        Ok(Some(out))
    };
    let result = entry(RESULT_FILE, 32 << 20)?
        .ok_or_else(|| format!("the artifact has no {RESULT_FILE}"))?;
    let result: WorkResult = serde_json::from_slice(&result)
        .map_err(|e| format!("{RESULT_FILE} is not a dagexec work result: {e}"))?;
    let patch = entry(PATCH_FILE, 128 << 20)?.unwrap_or_default();
    let log = entry(LOG_FILE, 32 << 20)?
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .filter(|l| !l.trim().is_empty());
    Ok(super::artifact::Collected { result, patch, log })
}

/// The conductor's executor: each attempt a workflow run of this workflow, polled, its
/// artifact read through the API; each batch integrated, committed and pushed, the pull
/// request and status comment moved with it.
struct Remote<'a> {
    client: &'a Client,
    rt: &'a tokio::runtime::Runtime,
    ctx: &'a Context,
    repo: &'a crate::git::Repo,
    auth: &'a crate::git::RemoteAuth,
    inputs: &'a Inputs,
    branch: &'a str,
    plan_path: &'a Path,
    dag: &'a crate::graph::Dag,
    opts: &'a crate::run::RunOptions,
    ui: &'a Ui,
    timing: Timing,
    started: Instant,
    /// The runs in flight, by task.
    flights: BTreeMap<usize, Flight>,
    /// What this conductor pushed last (task runs start from it; pushes go only onto it).
    pushed: String,
    links: Links,
    /// The publication that found the branch moved by another writer.
    stale: Option<super::publish::Published>,
    /// The batch of arrivals to commit next.
    staged: Vec<Judged>,
    /// The pull request, once published.
    pr: Option<u64>,
}

impl Remote<'_> {
    /// Pushes onto what was pushed last and brings the PR, comments and, with a stop, the
    /// check run up to date.
    fn publish(
        &self,
        n: u32,
        plan: &Plan,
        stop: Option<&Stop>,
    ) -> Result<super::publish::Published, ActionError> {
        let r = Round {
            branch: self.branch.to_string(),
            base: self.pushed.clone(),
            round: n,
            matrix: String::new(),
            planned: "conduct".into(),
            planned_message: String::new(),
        };
        let ending = super::publish::Ending {
            rt: self.rt,
            client: Some(self.client),
            ctx: self.ctx,
            repo: self.repo,
            auth: self.auth,
            round: &r,
            inputs: self.inputs,
            ui: self.ui,
            schedule: crate::engine::Schedule::Eager,
        };
        ending.finish(plan, &self.links, stop, false, None)
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

    fn running(&self) -> usize {
        self.flights.len()
    }

    /// A retry's prompt must be on the branch before its run can read it.
    fn retries_in_place(&self) -> bool {
        false
    }

    fn save(&mut self, plan: &mut Plan) -> Result<(), ActionError> {
        save(plan, self.plan_path)
    }

    fn start(&mut self, plan: &mut Plan, start: Start, _round: u32) -> Result<(), ActionError> {
        let (i, attempt) = (start.task, start.attempt);
        let mut dispatch = super::dispatch_inputs(&self.inputs.plan_rel, self.branch);
        dispatch.insert("task".into(), i.to_string().into());
        dispatch.insert("attempt".into(), attempt.to_string().into());
        dispatch.insert("base".into(), self.pushed.clone().into());
        let id = self
            .rt
            .block_on(self.client.dispatch_run(&self.inputs.workflow, self.branch, &dispatch))?
            .ok_or_else(|| {
                ActionError::Input(
                    "GitHub started the task's run but did not say which run it is (`return_run_details`); `schedule: eager` needs a GitHub that answers a dispatch with the run's id (github.com does). Use `schedule: rounds` here.".into(),
                )
            })?;
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
        self.emit(crate::events::Event::AttemptStarted {
            task: i,
            attempt,
            subject: t.subject.clone(),
            run: Some(id),
        });
        self.flights.insert(i, f);
        save(plan, self.plan_path)
    }

    /// One poll of every run in flight, after the poll interval; the ended ones are judged.
    fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, ActionError> {
        std::thread::sleep(poll_interval(
            self.timing.poll,
            self.flights.len(),
            self.timing.polls_per_hour,
        ));
        let mut arrivals = Arrivals::default();
        for (&i, f) in &self.flights {
            let (found, log_url, conclusion) =
                match self.rt.block_on(self.client.workflow_run(f.run)) {
                    Ok(run) if !run.completed() => continue,
                    Ok(run) => {
                        let (found, url) = fetch(self.client, self.rt, &run, i, f.attempt, self.ui);
                        let conclusion = run.conclusion.unwrap_or_else(|| "no conclusion".into());
                        (found, url, conclusion)
                    }
                    // The run is gone (deleted by hand): its attempt ends with nothing to show.
                    Err(e) if e.status() == Some(404) => (None, None, "gone".to_string()),
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
            self.emit(crate::events::Event::Note(format!(
                "Run {} of task {i} ended ({conclusion}).",
                f.run
            )));
            arrivals.judged.push(arrival::judge_entry(
                self.repo,
                plan,
                self.inputs,
                &entry,
                found.as_ref(),
                self.ui,
            )?);
        }
        for j in &arrivals.judged {
            self.flights.remove(&j.index);
            plan.tasks[j.index].extra.shift_remove(RUN_FIELD);
        }
        Ok(arrivals)
    }

    /// The arrivals of one poll are one batch: kept until it is committed.
    fn stage(&mut self, _plan: &mut Plan, judged: Vec<Judged>) -> Result<(), ActionError> {
        self.staged.extend(judged);
        Ok(())
    }

    /// Integrates the batch as finalize integrates a round ([`finalize::integrate`]: the
    /// same refusals, retries, questions, update and round commit), then pushes and publishes.
    fn commit(
        &mut self,
        plan: &mut Plan,
        _tasks: &[usize],
        round: u32,
        _wave: Option<u64>,
    ) -> Result<Integrated, ActionError> {
        let batch = std::mem::take(&mut self.staged);
        let end = finalize::integrate(self.repo, plan, self.dag, batch, round, self.opts, self.ui)?;
        if let Some(end) = end {
            return Ok(Integrated::End(end));
        }
        // Plan changes queued on the pull request (`/execute answer|retry|proceed`: their
        // steer job waits in the branch's group until this conductor ends), applied now.
        if let Some(pr) = self.pr {
            let me = super::comment::Identity {
                app_id: self.inputs.app_id,
            };
            let applied = self.rt.block_on(super::steer::catch_up(
                self.client,
                pr,
                me,
                self.repo,
                self.plan_path,
                &self.inputs.plan_rel,
                plan,
                self.dag,
                None,
            ))?;
            for line in applied {
                self.emit(crate::events::Event::Note(line));
            }
        }
        let published = self.publish(round, plan, None)?;
        self.pr = published.pr.or(self.pr);
        if published.stale {
            self.stale = Some(published);
            return Ok(Integrated::Stale);
        }
        self.pushed = self.repo.head()?;
        if published.aborted {
            self.emit(crate::events::Event::Note(
                "`/execute abort`: no new task starts; what is in flight is integrated.".into(),
            ));
            return Ok(Integrated::Abort);
        }
        Ok(Integrated::Continue)
    }

    fn handover_due(&self) -> bool {
        self.started.elapsed() >= self.timing.handover_after
    }

    fn emit(&self, event: crate::events::Event) {
        self.ui.emit(event);
    }
}

/// Runs the conductor in the checkout at `root` (the plan job's `base` of `branch`).
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
    let finalize::Job {
        repo,
        auth,
        inputs,
        plan_path,
        mut plan,
        dag,
        ui,
        opts,
    } = finalize::Job::open(root, inputs, &round.base, engine::Schedule::Eager)?;
    let inputs = &inputs;
    let overlaps = Overlaps::of(&plan, &dag);
    let conflicts = overlaps.for_scheduling();

    // Adopt what the branch records as running; a task in progress without a run is an
    // interrupted attempt.
    let mut flights: BTreeMap<usize, Flight> = BTreeMap::new();
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
                ui.say(format!(
                    "Task {i}: attempt {} was interrupted (no run recorded); it counts.",
                    t.attempts()
                ));
                t.status = Status::Pending;
            }
        }
    }
    let exhausted = crate::update::fail_exhausted(&mut plan, &dag);
    for i in &exhausted.failed {
        ui.say(format!(
            "Task {i}: no attempts left after an interrupted one."
        ));
    }

    let round_no = crate::run::round_counter(&plan);
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
    };
    // The branch (and the pull request) exist before any run is dispatched on it.
    remote.commit(
        &plan,
        &format!(
            "dagexec: conductor starts ({} run(s) adopted)",
            adopted.len()
        ),
    )?;
    let published = remote.publish(round_no, &plan, None)?;
    if published.stale {
        return Ok(finalize::stale(published));
    }
    remote.pushed = repo.head()?;
    remote.pr = published.pr;

    let engine = Eager {
        dag: &dag,
        conflicts: &conflicts,
        budget: inputs.max_cost,
    };
    let (ending, round_no) = engine.run(&mut remote, &mut plan, round_no, adopted)?;
    let in_flight = remote.flights.len();
    let (conclusion, stop) = match ending {
        Ending::Stale => {
            let published = remote.stale.take().unwrap_or_default();
            return Ok(finalize::stale(published));
        }
        Ending::Handover => {
            remote.commit(
                &plan,
                &format!("dagexec: conductor hands over ({in_flight} run(s) in flight)"),
            )?;
            let published = remote.publish(round_no, &plan, None)?;
            if published.stale {
                return Ok(finalize::stale(published));
            }
            let next = super::dispatch_inputs(&inputs.plan_rel, &round.branch);
            rt.block_on(client.dispatch(&inputs.workflow, &round.branch, &next))?;
            ui.emit(crate::events::Event::Note(format!(
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
                conclusion: "handover".into(),
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
            ("circuit-breaker", Some(Stop::CircuitBreaker(why)))
        }
        // Only `/execute abort` stops a conductor early (no Ctrl-C reaches it).
        Ending::Aborted | Ending::Interrupted { .. } => ("aborted", None),
        Ending::Deadlock { pending } => (
            "deadlock",
            Some(Stop::Deadlock(engine::deadlock_message(pending))),
        ),
        Ending::Budget(why) => ("budget", Some(Stop::Budget(why))),
        Ending::Done => {
            let stop = finalize::done_stop(&repo, &mut plan, &opts, &ui)?;
            repo.commit(
                "dagexec: run complete",
                std::slice::from_ref(&inputs.plan_rel),
            )?;
            let conclusion = match stop {
                Some(Stop::Completed) => "completed",
                Some(_) => "needs-input",
                None => "incomplete",
            };
            (conclusion, stop)
        }
    };
    let published = remote.publish(round_no, &plan, stop.as_ref())?;
    if published.stale {
        return Ok(finalize::stale(published));
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
        conclusion: conclusion.into(),
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
            crate::events::Event::AttemptEnded(e) => Some(e.task),
            _ => None,
        })
        .collect();
    let ended: Vec<usize> = ended.into_iter().collect();
    ctx.summary(&super::report::round_summary(
        plan,
        round,
        &ended,
        links,
        &[],
        &events,
        crate::timeline::Ran {
            schedule: crate::engine::Schedule::Eager,
            place: crate::simulate::Place::Actions,
            slots: max_parallel,
        },
    ))?;
    Ok(())
}

/// The artifact of task `task` attempt `attempt` from its ended `run`: the exact name its job
/// uploads (the latest run attempt first, see [`arrival::accepted_names`]), downloaded and
/// read in memory; `None` when the run left none (it failed before uploading, was
/// cancelled, or the artifact expired). Also the artifact's page, for the logs link.
fn fetch(
    client: &Client,
    rt: &tokio::runtime::Runtime,
    run: &WorkflowRun,
    task: usize,
    attempt: u32,
    ui: &Ui,
) -> (
    Option<Result<super::artifact::Collected, String>>,
    Option<String>,
) {
    let entry = Entry {
        task,
        attempt,
        name: String::new(),
    };
    let names = arrival::accepted_names(&run.id.to_string(), run.run_attempt.max(1), &entry);
    let listed = match rt.block_on(client.artifacts_of(run.id, None)) {
        Ok(l) => l,
        Err(e) => {
            return (
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
        return (None, None);
    };
    let url = (!run.html_url.is_empty()).then(|| {
        format!(
            "{}/artifacts/{}",
            run.html_url.trim_end_matches('/'),
            artifact.id
        )
    });
    let read = rt
        .block_on(client.download_artifact(artifact.id, MAX_ARTIFACT_BYTES))
        .map_err(|e| format!("cannot download {}: {e}", artifact.name))
        .and_then(|bytes| read_zip(&bytes))
        .and_then(|c| {
            if (c.result.task, c.result.attempt) == (task, attempt) {
                Ok(c)
            } else {
                Err(format!(
                    "{} holds the result of task {} attempt {}, not of task {task} attempt {attempt}",
                    artifact.name, c.result.task, c.result.attempt
                ))
            }
        });
    (Some(read), url)
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
        let report = crate::outcome::AttemptReport {
            output: "COMPLETED: ok\n".into(),
            exit: crate::outcome::Exit::Success,
            log: None,
            present: Default::default(),
            changed: Default::default(),
            acceptance: None,
        };
        let r = super::super::artifact::WorkResult::new(
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
        let c = read_zip(&bytes).unwrap();
        assert_eq!((c.result.task, c.result.attempt), (3, 2));
        assert_eq!(c.patch, b"\x00patch");
        assert_eq!(c.log.as_deref(), Some("log\n"));
    }

    #[test]
    fn hostile_archives_are_refused_with_the_reason() {
        assert!(read_zip(b"not a zip").unwrap_err().contains("not a zip"));
        let none = zip_of(&[("changes.patch", b"")], None);
        assert!(read_zip(&none).unwrap_err().contains("no result.json"));
        let linked = zip_of(
            &[("result.json", &result_json(0, 1))],
            Some(("changes.patch", "/etc/passwd")),
        );
        assert!(
            read_zip(&linked)
                .unwrap_err()
                .contains("changes.patch is not a regular file")
        );
        let junk = zip_of(&[("result.json", b"{\"no\": 1}")], None);
        assert!(
            read_zip(&junk)
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
