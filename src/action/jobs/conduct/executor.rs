//! The conductor as the engine's [`Executor`]: a start is a dispatched run, a wait is a
//! poll of the runs in flight (an ended run's artifact read and judged), a commit integrates
//! the batch of arrivals, applies the commands queued on the pull request and publishes.

use super::fetch::fetch;
use super::remote::Remote;
use super::{Flight, RUN_FIELD, run_name, save};
use std::collections::BTreeMap;

use crate::action::matrix::MatrixEntry;
use crate::action::rounds::FollowUp;
use crate::action::{ActionError, arrival, steering};
use crate::edge::github::runs::WorkflowRun;
use crate::flow::attempt::Judged;
use crate::flow::exec::{Arrivals, Executor, Integrated, Launch};
use crate::pure::events::Event;
use crate::pure::pace::poll_interval;
use crate::pure::plan::model::Plan;

impl Executor for Remote<'_> {
    type Error = ActionError;

    /// None once `/execute abort` was found.
    fn slots(&self) -> usize {
        if self.aborted {
            0
        } else {
            self.inputs.max_parallel.max(1)
        }
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

    /// Saved, and the attempts counted since the last push made durable beside the branch
    /// (its record of starts) before their runs are dispatched ([`Remote::record_starts`]).
    fn save(&mut self, plan: &mut Plan) -> Result<(), ActionError> {
        super::merging::drop_stale(plan);
        save(plan, self.plan_path)?;
        self.record_starts(plan)
    }

    async fn start(
        &mut self,
        plan: &mut Plan,
        start: Launch,
        round: u32,
    ) -> Result<(), ActionError> {
        if self.stale.is_some() {
            return Ok(());
        }
        let (i, attempt) = (start.task, start.attempt);
        let follow = FollowUp::of(plan, i, attempt);
        let recheck = matches!(follow, Some(FollowUp::Recheck { .. }));
        let mut dispatch = crate::action::dispatch_inputs(self.inputs, self.branch);
        dispatch.insert("task".into(), i.to_string().into());
        dispatch.insert("attempt".into(), attempt.to_string().into());
        dispatch.insert("base".into(), self.pushed.clone().into());
        // The crash tests' kill -9 before the dispatch reaches GitHub (its start recorded).
        crate::flow::failpoint("dispatching", round);
        let id = self.dispatch_task_run(i, attempt, &dispatch).await?;
        // The crash tests' kill -9 between a dispatch and the commit that records its run.
        crate::flow::failpoint("dispatched", round);
        // `overlap: merge`: the same between a re-check's or a rebase's dispatch and its record
        // (`follow-up-dispatched:<task>`).
        if follow.is_some() {
            crate::flow::failpoint("follow-up-dispatched", u32::try_from(i).unwrap_or(u32::MAX));
        }
        let f = Flight {
            run: id,
            attempt,
            base: self.pushed.clone(),
        };
        self.fly(plan, i, f);
        // A re-check is no attempt (`overlap: merge`): its run is said as what it is.
        if recheck {
            self.emit(Event::Note(format!(
                "Task {i} attempt {attempt}: its merged change is re-checked in run {id} (no worker)."
            )));
        } else {
            if follow.is_some() {
                self.emit(Event::Note(format!(
                    "Task {i} attempt {attempt} runs again as a rebase from the integrated tree (not counted)."
                )));
            }
            self.emit(Event::AttemptStarted {
                task: i,
                attempt,
                subject: plan.tasks[i].subject.clone(),
                run: Some(id),
            });
        }
        save(plan, self.plan_path)
    }

    /// One poll of every run in flight, after the poll interval; the ended ones are judged.
    /// A poll is one request: the listing of the branch's dispatched runs (newest first)
    /// holds every run in flight but one older than its newest 100, which is read on its own.
    async fn wait(&mut self, plan: &mut Plan) -> Result<Arrivals, ActionError> {
        // The last commit's news, now that what it unblocked is dispatched.
        self.tell(plan).await?;
        let mut pause = poll_interval(
            self.timing.poll,
            self.polls.reads.max(1),
            self.timing.polls_per_hour,
        );
        // GitHub failed at the last polls: back off as the retry policy does.
        if self.polls.outages > 0 {
            pause += self.client.policy.backoff(self.polls.outages);
        }
        tokio::time::sleep(pause).await;
        let mut arrivals = Arrivals::default();
        self.polls.reads = 1;
        let listed = match self
            .client
            .dispatched_runs(&self.inputs.workflow, self.branch, 1)
            .await
        {
            Ok(runs) => runs.into_iter().map(|r| (r.id, r)).collect(),
            // GitHub is down or limits us: the runs go on regardless and stay readable.
            Err(e) if e.transient() => {
                self.count_outage(Some(format!("the state of the runs in flight: {e}")));
                return Ok(arrivals);
            }
            Err(e) => return Err(e.into()),
        };
        // What GitHub failed to answer at this poll (the first such failure).
        let mut outage: Option<String> = None;
        let flights: Vec<(usize, Flight)> =
            self.flights.iter().map(|(&i, f)| (i, f.clone())).collect();
        for (i, f) in flights {
            match self.poll(plan, i, &f, &listed).await? {
                Polled::Running => {}
                Polled::Later(what) => {
                    outage.get_or_insert(what);
                }
                Polled::Ended(judged) => arrivals.judged.push(*judged),
            }
        }
        // What the arrivals' gateways saw of rate limits holds new runs for those providers
        // (each held-until believed at most `MAX_HOLD` past its arrival: the file is the job's).
        let arrived = jiff::Timestamp::now();
        for j in &arrivals.judged {
            self.rate.holds.note(&j.network.rate_limits, arrived);
            if let Some(f) = self.flights.remove(&j.index) {
                self.merging.bases.insert(j.index, f.base);
            }
            if let Some(FollowUp::Recheck { .. }) = FollowUp::of(plan, j.index, j.attempt) {
                self.merging.rechecked.insert(j.index);
            }
            plan.tasks[j.index].extra.shift_remove(RUN_FIELD);
        }
        self.count_outage(outage);
        Ok(arrivals)
    }

    /// The arrivals of one poll are one batch: kept until it is committed. Under `overlap:
    /// merge` an arrival that meets what landed since its base waits instead, for a re-check
    /// or a rebase ([`Remote::sort_merged`]).
    fn stage(&mut self, plan: &mut Plan, judged: Vec<Judged>) -> Result<(), ActionError> {
        let judged = if self.merging.on {
            self.sort_merged(plan, judged)?
        } else {
            judged
        };
        self.merging.bases.clear();
        self.merging.rechecked.clear();
        self.staged.extend(judged);
        Ok(())
    }

    /// The re-check and rebase runs the last batch asked for (`overlap: merge`): dispatched
    /// once its commit, which records them on their tasks, is pushed.
    fn rebases(&mut self, _plan: &Plan) -> Vec<crate::flow::exec::Launch> {
        std::mem::take(&mut self.merging.again)
    }

    /// Integrates the batch as finalize integrates a round ([`arrival::integrate`]: the
    /// same refusals, retries, questions, update and round commit), then pushes and publishes.
    async fn commit(
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
            let (repo, auth) = (self.repo, self.auth);
            let queue = steering::Queue::new(self.client, pr, repo, auth, self.branch, self.inputs);
            let applied = steering::catch_up(queue, plan, self.dag, None).await;
            match applied {
                Ok(applied) => {
                    for line in applied.lines {
                        self.emit(Event::Note(line));
                    }
                }
                // Queued commands stay queued on the pull request: the next commit applies them.
                Err(ActionError::Api(e)) if e.transient() => {
                    self.emit(Event::Note(format!(
                        "GitHub could not give the commands queued on the pull request ({e}); they are applied at the next commit."
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        // Pushed, and `/execute abort` looked for, before what the batch unblocked is
        // dispatched; the pull request is told after that (`wait`).
        let mine = self.repo.head()?;
        let published = match self.pr {
            Some(pr) => self.push_for_dispatch(round, plan, pr, &mine).await?,
            None => self.publish_through(round, plan, &mine).await?,
        };
        self.pr = published.pr.or(self.pr);
        if published.stale {
            self.stale = Some(published);
            return Ok(Integrated::Stale);
        }
        // Pushed: the markers of the commands applied above say so now.
        if let Some(pr) = self.pr
            && steering::settled_since(self.repo, &self.pushed)
        {
            let (repo, auth) = (self.repo, self.auth);
            let queue = steering::Queue::new(self.client, pr, repo, auth, self.branch, self.inputs);
            let confirmed = steering::confirm(queue).await;
            for line in confirmed {
                self.emit(Event::Note(line));
            }
        }
        self.pushed = mine;
        if published.aborted && !self.aborted {
            self.abort();
        }
        Ok(if self.aborted {
            Integrated::Abort
        } else {
            Integrated::Continue
        })
    }

    /// The ready tasks whose worker's provider is rate-limited, each until its hold ends
    /// (spread a little by task); said once each time what is held changes.
    fn held(&mut self, plan: &Plan, landing: &[usize]) -> crate::flow::exec::Held {
        let now = jiff::Timestamp::now();
        let holds = &self.rate.holds;
        let mut held = crate::flow::exec::Held::default();
        let mut said: Vec<(usize, crate::pure::gateway::Provider)> = Vec::new();
        // A hold that just ended still spreads its tasks' starts (`held::SPREAD`).
        let spread =
            jiff::SignedDuration::try_from(crate::pure::gateway::held::SPREAD).unwrap_or_default();
        if !holds
            .active(now.checked_sub(spread).unwrap_or(now))
            .is_empty()
        {
            for i in crate::pure::engine::ready_set_after(plan, self.dag, landing) {
                if self.flights.contains_key(&i) {
                    continue;
                }
                let model = plan.tasks[i].model();
                let provider = crate::pure::gateway::held::provider_of(&self.inputs.worker, model);
                let Some(at) = holds.release(provider, i, now) else {
                    continue;
                };
                let wait =
                    std::time::Duration::try_from(now.duration_until(at)).unwrap_or_default();
                held.next = Some(held.next.map_or(wait, |n| n.min(wait)));
                held.tasks.push(i);
                said.extend(provider.map(|p| (i, p)));
            }
        }
        let line = crate::pure::gateway::held::holding_line(&said, holds);
        if line != self.rate.holding {
            match &line {
                Some(l) => self.emit(Event::Note(format!("Rate limits: {l}."))),
                None if self.rate.holding.is_some() => {
                    self.emit(Event::Note("Rate limits: no task is held any more.".into()));
                }
                None => {}
            }
            self.rate.holding = line;
        }
        held
    }

    async fn pause(&mut self, wait: std::time::Duration) {
        tokio::time::sleep(wait).await;
    }

    fn handover_due(&self) -> bool {
        self.started.elapsed() >= self.timing.handover_after
    }

    /// A re-check run's end is not an attempt's (`overlap: merge`): said as what it is, the
    /// attempt it continues neither ended nor retried by it.
    fn emit(&self, event: Event) {
        match event {
            Event::AttemptEnded(e) if self.merging.rechecked.contains(&e.task) => {
                let line = crate::pure::sanitize::line(e.result.lines().next().unwrap_or(""));
                let verdict = if e.status == crate::pure::plan::model::Status::Completed {
                    "passed"
                } else {
                    "failed"
                };
                self.ui.emit(Event::Note(format!(
                    "Task {} attempt {}: the re-check of its merged change {verdict}: {}",
                    e.task,
                    e.attempt,
                    line.chars().take(300).collect::<String>()
                )));
            }
            event => self.ui.emit(event),
        }
    }
}

/// What one poll learned of one run in flight.
enum Polled {
    /// It still runs.
    Running,
    /// GitHub failed to say (what it failed to give): asked again at the next poll.
    Later(String),
    /// It ended: its attempt, judged.
    Ended(Box<Judged>),
}

impl Remote<'_> {
    /// Polls the run of task `i` (flight `f`): as `listed` (the poll's listing of the
    /// branch's runs) holds it, else read on its own; an ended run's artifact is read and
    /// judged.
    async fn poll(
        &mut self,
        plan: &Plan,
        i: usize,
        f: &Flight,
        listed: &BTreeMap<u64, WorkflowRun>,
    ) -> Result<Polled, ActionError> {
        let now = jiff::Timestamp::now();
        let state = if let Some(run) = listed.get(&f.run) {
            Ok(run.clone())
        } else {
            self.polls.reads += 1;
            self.client.workflow_run(f.run).await
        };
        let (found, log_url, conclusion, span) = match state {
            Ok(run) if !run.completed() => return Ok(Polled::Running),
            Ok(run) => match fetch(self.client, &run, i, f.attempt, self.ui).await {
                Err(e) => {
                    return Ok(Polled::Later(format!(
                        "the result of run {} (task {i}): {e}",
                        f.run
                    )));
                }
                Ok((found, url)) => {
                    let span = run.span(now);
                    let conclusion = run.conclusion.unwrap_or_else(|| "no conclusion".into());
                    (found, url, conclusion, span)
                }
            },
            // The run is gone (deleted by hand): its attempt ends with nothing to show.
            Err(e) if e.status() == Some(404) => (None, None, "gone".to_string(), (now, now)),
            // GitHub is down or limits us: the run goes on regardless and stays readable.
            Err(e) if e.transient() => {
                return Ok(Polled::Later(format!(
                    "the state of run {} (task {i}): {e}",
                    f.run
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(url) = log_url {
            self.links.logs.insert(i, url);
        }
        let entry = MatrixEntry {
            task: i,
            attempt: f.attempt,
            name: run_name(self.branch, i, f.attempt),
        };
        self.emit(Event::Note(format!(
            "Run {} of task {i} ended ({conclusion}).",
            f.run
        )));
        // Under `overlap: merge` the run's patch is read at its own base: the branch may have
        // moved under its files since (the merge comes later, `Remote::sort_merged`).
        let base = self.merging.on.then_some(f.base.as_str());
        let at = arrival::Judge {
            repo: self.repo,
            plan,
            inputs: self.inputs,
            ui: self.ui,
        };
        let mut judged = arrival::judge_entry_at(at, &entry, base, found.as_ref());
        // `overlap: merge`: a re-check run continues the attempt (it is not one: no record of
        // its own); a rebase run is recorded as one.
        let follow = FollowUp::of(plan, i, f.attempt);
        if let Some(FollowUp::Recheck { .. }) = follow {
            judged.measured = None;
            return Ok(Polled::Ended(Box::new(judged)));
        }
        judged.rebase = matches!(follow, Some(FollowUp::Rebase { .. }));
        // A run that left no readable result (cancelled, failed before its upload, gone)
        // still ended an attempt: its record spans the run as GitHub reports it.
        if judged.measured.is_none() {
            judged.measured = Some(crate::pure::usage::Measured {
                start: span.0,
                end: span.1,
                usage: Default::default(),
            });
        }
        Ok(Polled::Ended(Box::new(judged)))
    }

    /// `/execute abort` found: said, and nothing new starts.
    pub(super) fn abort(&mut self) {
        self.aborted = true;
        self.emit(Event::Note(
            "`/execute abort`: no new task starts; what is in flight is integrated.".into(),
        ));
    }

    /// Counts a poll at which GitHub failed (`outage`: what it failed to give), or says that
    /// it answers again.
    fn count_outage(&mut self, outage: Option<String>) {
        match outage {
            Some(what) => {
                self.polls.outages += 1;
                self.emit(Event::Note(format!(
                    "GitHub could not give {what}. A run and its result stay retrievable for days, so this costs no attempt: waiting {} more before the next poll (failing poll {} in a row).",
                    humantime::format_duration(self.client.policy.backoff(self.polls.outages)),
                    self.polls.outages
                )));
            }
            None if self.polls.outages > 0 => {
                self.emit(Event::Note(format!(
                    "GitHub answers again after {} failing poll(s).",
                    self.polls.outages
                )));
                self.polls.outages = 0;
            }
            None => {}
        }
    }
}
