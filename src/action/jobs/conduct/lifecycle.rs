//! The conductor's life around the engine loop: adopting the runs its branch records (and
//! finding those a dead conductor dispatched without recording them), and its end — a stop
//! published, or a handover to a successor run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::remote::Remote;
use super::{DISPATCH_PATIENCE, Flight, RUN_FIELD, run_name};
use crate::action::protocol::Conclusion;
use crate::action::report::RunStop;
use crate::action::rounds::FollowUp;
use crate::action::writer::{self, Finalized};
use crate::action::{ActionError, arrival};
use crate::edge::github::ApiError;
use crate::flow::RunEnd;
use crate::flow::exec::{Ending, Launch};
use crate::pure::engine;
use crate::pure::events::Event;
use crate::pure::plan::fields::{FOLLOW_UP, FOLLOW_UP_CHECKS};
use crate::pure::plan::model::{Plan, Status};

impl Remote<'_> {
    /// Adopts what the branch records as running, and the attempts the record of starts
    /// beside it holds ([`Remote::read_starts`]). A task in progress without a run has its run
    /// looked for ([`Remote::find_unrecorded`]); when GitHub has none, the attempt was
    /// interrupted before its run started and does not count (an attempt is counted once per
    /// run GitHub started) — unless it waited for a re-check or rebase run (`overlap: merge`):
    /// that follow-up keeps the merged work and is returned, to be dispatched now. When GitHub
    /// cannot say, the attempt counts (none runs twice).
    pub(super) async fn adopt(&mut self, plan: &mut Plan) -> Vec<Launch> {
        let recorded = self.read_starts(plan);
        let mut unrecorded = Vec::new();
        for (i, t) in plan.tasks.iter_mut().enumerate() {
            if t.status != Status::InProgress {
                t.extra.shift_remove(RUN_FIELD);
                t.extra.shift_remove(FOLLOW_UP);
                t.extra.shift_remove(FOLLOW_UP_CHECKS);
                continue;
            }
            // The flight recorded on the task, if any.
            match (t.extra.get(RUN_FIELD))
                .and_then(|f| serde_json::from_value::<Flight>(f.clone()).ok())
            {
                Some(f) => {
                    self.ui.say(format!(
                        "Adopting task {i} attempt {} (run {}), started earlier.",
                        f.attempt, f.run
                    ));
                    self.flights.insert(i, f);
                }
                None => unrecorded.push(i),
            }
        }
        // Attempts recorded as started without their run: a conductor died between the
        // dispatch and the commit that records it — or before the dispatch.
        let mut again = Vec::new();
        if unrecorded.is_empty() {
            return again;
        }
        let (found, listed) = self.find_unrecorded(plan, &unrecorded, &recorded).await;
        for i in unrecorded {
            let attempt = plan.tasks[i].attempts();
            if let Some(f) = found.get(&i) {
                self.ui.say(format!(
                    "Adopting task {i} attempt {} (run {}), dispatched by a conductor that died before recording it.",
                    f.attempt, f.run
                ));
                self.fly(plan, i, f.clone());
                continue;
            }
            let follow = FollowUp::of(plan, i, attempt);
            if listed && let Some(follow) = follow {
                let what = match follow {
                    FollowUp::Recheck { .. } => "re-check",
                    FollowUp::Rebase { .. } => "rebase",
                };
                self.ui.emit(Event::Note(format!(
                    "Task {i} attempt {attempt}: its {what} was not started before the conductor stopped (GitHub has no run of it); it starts now from the commit that keeps the merge."
                )));
                again.push(Launch {
                    task: i,
                    attempt,
                    retry_prompt: None,
                });
                continue;
            }
            let t = &mut plan.tasks[i];
            t.status = Status::Pending;
            t.extra.shift_remove(FOLLOW_UP_CHECKS);
            let merged = t.extra.shift_remove(FOLLOW_UP).is_some();
            if listed && !merged {
                t.attempts = attempt.checked_sub(1).filter(|&a| a > 0);
                self.ui.emit(Event::Note(format!(
                    "Task {i}: attempt {attempt} was interrupted before its run started (GitHub has no run of it); it does not count."
                )));
                continue;
            }
            self.ui.emit(Event::Note(format!(
                "Task {i}: attempt {attempt} was interrupted (no run recorded, and GitHub could not list the runs to find one); it counts."
            )));
            // `overlap: merge`: an attempt that waited for its re-check or rebase run had
            // its record already; its change never landed.
            if merged {
                crate::pure::usage::amend(plan, i, attempt, |r| {
                    r.outcome = crate::pure::usage::Outcome::Interrupted;
                });
            }
        }
        again
    }

    /// The conductor's start once it adopted what its branch records: a task an interrupted
    /// attempt left without attempts failed, said; that committed and published (the branch
    /// and the pull request exist before any run is dispatched on it); an `/execute abort`
    /// given while it waited to start (a handover's successor) heeded — the runs adopted are
    /// integrated, nothing new starts —; and the follow-ups `adopt` returned (`again`:
    /// `overlap: merge`, recorded by a dead conductor, never dispatched) dispatched from the
    /// commit just pushed, which keeps their merges, or put back to pending after an abort.
    /// `Some`: how the conductor ends right there.
    pub(super) async fn take_over(
        &mut self,
        plan: &mut Plan,
        again: Vec<Launch>,
        round_no: u32,
    ) -> Result<Option<Finalized>, ActionError> {
        for i in crate::pure::update::fail_exhausted(plan, self.dag).failed {
            self.ui.say(format!(
                "Task {i}: no attempts left after an interrupted one."
            ));
        }
        let n = self.flights.len();
        // Signed for a re-run of this job ([`writer::sign`]): with this commit when there is
        // one to make, else with the next.
        let unsigned = crate::pure::plan::load::to_text(plan);
        writer::sign(plan, self.ctx);
        let rel = &self.inputs.plan_rel;
        if self.repo.read_at(&self.pushed, rel)?.as_deref() != Some(unsigned.as_bytes()) {
            self.commit(
                plan,
                &format!("dagexec: conductor starts ({n} run(s) adopted)"),
            )?;
        }
        let mine = self.repo.head()?;
        let published = self.publish_through(round_no, plan, &mine).await?;
        if published.stale {
            return Ok(Some(writer::stale(published)));
        }
        self.pushed = mine;
        self.pr = published.pr;
        if published.aborted {
            self.abort();
        }
        for start in again {
            if self.aborted {
                self.ui.say(format!(
                    "Task {}: it does not start after all, as `/execute abort` asked; pending again.",
                    start.task
                ));
                plan.tasks[start.task].status = Status::Pending;
                crate::flow::exec::Executor::save(self, plan)?;
            } else {
                crate::flow::exec::Executor::start(self, plan, start, round_no).await?;
            }
        }
        if self.aborted && self.flights.is_empty() {
            return Ok(Some(self.end(plan, Ending::Aborted, round_no).await?));
        }
        Ok(None)
    }

    /// The record of starts beside the branch ([`super::starts_ref`]), read into `plan`: each
    /// attempt it holds that the branch's tip does not (a conductor died after recording it,
    /// before the branch's next commit) is in progress again, counted, with its run when the
    /// record has one. Only a record made on a commit of the branch's first-parent history is
    /// read, and of it only the tasks that the branch left unchanged since. Returns, by task,
    /// the commit its run was dispatched from (the record's parent).
    fn read_starts(&mut self, plan: &mut Plan) -> BTreeMap<usize, String> {
        let mut out = BTreeMap::new();
        let name = super::starts_ref(self.branch);
        let at = match self.repo.fetch_ref(&name, self.auth) {
            Ok(Some(at)) => at,
            Ok(None) => return out,
            Err(e) => {
                self.ui.say(format!(
                    "Cannot read {name}, the record of the attempts started since the branch's last commit: {e}"
                ));
                return out;
            }
        };
        self.starts.remote = Some(at.clone());
        let Ok(Some(parent)) = self.repo.rev_parse(&format!("{at}^")) else {
            return out;
        };
        if !self
            .repo
            .first_parents(64)
            .unwrap_or_default()
            .contains(&parent)
        {
            return out;
        }
        let (Some(record), Some(then)) = (self.plan_at(&at), self.plan_at(&parent)) else {
            return out;
        };
        if record.tasks.len() != plan.tasks.len() || then.tasks.len() != plan.tasks.len() {
            return out;
        }
        let json = |t: &crate::pure::plan::model::Task| serde_json::to_value(t).ok();
        for (i, r) in record.tasks.iter().enumerate() {
            let t = &mut plan.tasks[i];
            let started = r.status == Status::InProgress
                && !(then.tasks[i].status == Status::InProgress
                    && then.tasks[i].attempts() == r.attempts());
            if !started || json(t) != json(&then.tasks[i]) {
                continue;
            }
            t.status = Status::InProgress;
            t.attempts = r.attempts;
            match r.extra.get(RUN_FIELD) {
                Some(run) => t.extra.insert(RUN_FIELD.into(), run.clone()),
                None => t.extra.shift_remove(RUN_FIELD),
            };
            self.ui.say(format!(
                "Task {i} attempt {}: started by a conductor that stopped before the branch's next commit ({name}).",
                r.attempts()
            ));
            out.insert(i, parent.clone());
        }
        out
    }

    /// The runs of attempts the branch records as started (`tasks`: in progress, no run
    /// recorded) that a conductor dispatched before dying: a run of `workflow` on `branch` whose
    /// run-name names the task and its attempt, started from a commit that records the attempt
    /// as started and that the branch kept unchanged for the task since (the first-parent
    /// history of `HEAD`, newest first, while the task stays in progress at that attempt with no
    /// run and the same follow-up — `overlap: merge`'s re-check or rebase of the attempt, whose
    /// run has the attempt's run-name — or none), so a run of the same task and attempt number from before a `/execute retry` is never
    /// taken for it. Up to 10 pages of runs, newest first, are read; a failure to list them is
    /// said, and the attempts then count as interrupted.
    async fn find_unrecorded(
        &self,
        plan: &Plan,
        tasks: &[usize],
        recorded: &BTreeMap<usize, String>,
    ) -> (BTreeMap<usize, Flight>, bool) {
        // The commits each start may have been dispatched from.
        let mut from: BTreeMap<usize, std::collections::BTreeSet<String>> = BTreeMap::new();
        let mut alive: Vec<usize> = tasks.to_vec();
        for c in self.repo.first_parents(64).unwrap_or_default() {
            let Some(there) = self.plan_at(&c) else {
                break;
            };
            alive.retain(|&i| {
                let same = there.tasks.get(i).is_some_and(|t| {
                    t.status == Status::InProgress
                        && t.attempts() == plan.tasks[i].attempts()
                        && !t.extra.contains_key(RUN_FIELD)
                        && t.extra.get(FOLLOW_UP) == plan.tasks[i].extra.get(FOLLOW_UP)
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
        // Starts from the record beside the branch: dispatched from the commit it was made on.
        for (&i, on) in recorded {
            from.entry(i).or_default().insert(on.clone());
        }
        let mut found = BTreeMap::new();
        for page in 1..=10 {
            let Some(runs) = self.runs_page(page).await else {
                return (found, false);
            };
            for run in &runs {
                for (&i, commits) in &from {
                    let attempt = plan.tasks[i].attempts();
                    if found.contains_key(&i)
                        || run.event != "workflow_dispatch"
                        || run.display_title != run_name(self.branch, i, attempt)
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
        (found, true)
    }

    /// Page `page` of the branch's dispatched runs, an outage waited out (whether a run
    /// started decides whether its attempt counts) for at most [`DISPATCH_PATIENCE`]; `None`,
    /// said, when GitHub cannot give it.
    async fn runs_page(&self, page: u32) -> Option<Vec<crate::edge::github::runs::WorkflowRun>> {
        let what = format!(
            "Cannot list the runs of {} to find the runs of attempts started without one recorded",
            self.branch
        );
        let call = || {
            self.client
                .dispatched_runs(&self.inputs.workflow, self.branch, page)
        };
        let again = |e: &ApiError, pause| format!("{what} ({e}); asking again in {pause}.");
        let listed = self.patiently(call, again).await;
        listed.map_err(|e| self.ui.say(format!("{what}: {e}"))).ok()
    }

    /// `call` made again while GitHub fails it for a while (a transient failure, for at most
    /// [`DISPATCH_PATIENCE`]), each failure said (`again`: the failure, the pause) before the
    /// pause; its answer, or the failure that ends the wait.
    async fn patiently<T, F>(
        &self,
        mut call: impl FnMut() -> F,
        again: impl Fn(&ApiError, humantime::FormattedDuration) -> String,
    ) -> Result<T, ApiError>
    where
        F: Future<Output = Result<T, ApiError>>,
    {
        let since = Instant::now();
        let mut failures = 0;
        loop {
            match call().await {
                Err(e) if e.transient() && since.elapsed() < DISPATCH_PATIENCE => {
                    failures += 1;
                    let pause = self.client.policy.backoff(failures);
                    self.ui.say(again(&e, humantime::format_duration(pause)));
                    tokio::time::sleep(pause).await;
                }
                answer => return answer,
            }
        }
    }

    /// How the engine loop ended (`ending`, after round `round_no`): committed, published and
    /// summed up. Before GitHub's job limit (a handover) the state is committed and pushed and
    /// a successor conductor run dispatched (it adopts the runs in flight).
    pub(super) async fn end(
        &mut self,
        plan: &mut Plan,
        ending: Ending,
        round_no: u32,
    ) -> Result<Finalized, ActionError> {
        let in_flight = self.flights.len();
        let (conclusion, stop) = match ending {
            Ending::Stale => return Ok(writer::stale(Default::default())),
            // A successor would not know of the abort (its marker is consumed): the runs in
            // flight stay recorded on their tasks for a later conductor, as at the breaker.
            Ending::Handover if self.aborted => {
                self.commit(
                    plan,
                    &format!(
                        "dagexec: conductor stops at `/execute abort` ({in_flight} run(s) left in flight)"
                    ),
                )?;
                self.ui.emit(Event::Note(format!(
                    "`/execute abort`: no successor conductor is started; the {in_flight} run(s) in flight stay recorded, and `/execute` integrates them."
                )));
                (Conclusion::Aborted, None)
            }
            Ending::Handover => {
                self.commit(
                    plan,
                    &format!("dagexec: conductor hands over ({in_flight} run(s) in flight)"),
                )?;
                (Conclusion::Handover, None)
            }
            Ending::Ended(end) => {
                // Runs still in flight stay recorded on their tasks: a later conductor adopts
                // them.
                self.commit(
                    plan,
                    &format!("dagexec: circuit breaker ({in_flight} run(s) left in flight)"),
                )?;
                let why = match end {
                    RunEnd::CircuitBreaker(b) => b.message(),
                    other => format!("the run ended ({other:?})"),
                };
                (
                    Conclusion::CircuitBreaker,
                    Some(RunStop::CircuitBreaker(why)),
                )
            }
            // Only `/execute abort` stops a conductor early (no Ctrl-C reaches it).
            Ending::Aborted | Ending::Interrupted { .. } => {
                // A re-check or rebase the batch that found the abort asked for never starts:
                // its task, put back to pending after that batch's commit, is committed so.
                self.commit(plan, "dagexec: conductor stops at `/execute abort`")?;
                (Conclusion::Aborted, None)
            }
            Ending::Deadlock { pending } => (
                Conclusion::Deadlock,
                Some(RunStop::Deadlock(engine::deadlock_message(pending))),
            ),
            Ending::Budget(why) => (Conclusion::Budget, Some(RunStop::Budget(why))),
            // Refused credentials: every task would fail the same way (the check run says
            // which secret to fix).
            Ending::Halted(why) => (Conclusion::Halted, Some(RunStop::CircuitBreaker(why))),
            Ending::Done => self.done(plan)?,
        };
        let handover = conclusion == Conclusion::Handover;
        let published = if handover {
            let mine = self.repo.head()?;
            self.publish_through(round_no, plan, &mine).await?
        } else {
            self.publish(round_no, plan, stop.as_ref()).await?
        };
        if published.stale {
            return Ok(writer::stale(published));
        }
        if handover {
            self.dispatch_successor().await?;
            self.ui.emit(Event::Note(format!(
                "Handed over after {}: a new conductor run adopts the {in_flight} run(s) in flight.",
                humantime::format_duration(Duration::from_secs(self.started.elapsed().as_secs())),
            )));
        } else if self.flights.is_empty() {
            self.drop_starts_record();
        }
        self.summary(plan, round_no)?;
        Ok(Finalized::ended(
            conclusion,
            published.pr,
            stop.as_ref(),
            plan,
        ))
    }

    /// A re-run at the archived plan an earlier attempt of this job pushed ([`writer::WriterJob::carry_on`]):
    /// the run is complete, so only what that attempt did not publish is left (the pull
    /// request ready, the status comment, the check run), and nothing is committed.
    pub(super) async fn finished(&mut self, plan: &Plan) -> Result<Finalized, ActionError> {
        let (round_no, stop) = (crate::flow::round_counter(plan), RunStop::Completed);
        let published = self.publish(round_no, plan, Some(&stop)).await?;
        if published.stale {
            return Ok(writer::stale(published));
        }
        self.summary(plan, round_no)?;
        let conclusion = Conclusion::Completed;
        Ok(Finalized::ended(
            conclusion,
            published.pr,
            Some(&stop),
            plan,
        ))
    }

    /// Nothing is pending: the seed's summary and clean-up, committed.
    fn done(&self, plan: &mut Plan) -> Result<(Conclusion, Option<RunStop>), ActionError> {
        let stop = arrival::done_stop(self.repo, plan, self.opts, self.ui)?;
        self.repo.commit(
            "dagexec: run complete",
            std::slice::from_ref(&self.inputs.plan_rel),
        )?;
        let conclusion = stop.as_ref().map_or(Conclusion::Incomplete, Conclusion::of);
        Ok((conclusion, stop))
    }

    /// The successor's start: the state is pushed, so only this is left; an outage is waited
    /// out (a second successor would only wait in the branch's group).
    async fn dispatch_successor(&self) -> Result<(), ActionError> {
        let (inputs, branch) = (self.inputs, self.branch);
        let call = || crate::action::dispatch_round(self.client, inputs, branch, branch);
        let again = |e: &ApiError, pause| {
            format!(
                "GitHub could not start the successor conductor ({e}); trying again in {pause}."
            )
        };
        Ok(self.patiently(call, again).await?)
    }

    /// The conductor's job summary: the tasks whose attempts ended in this job (its events),
    /// the whole table, and those attempts one by one.
    fn summary(&self, plan: &Plan, round: u32) -> Result<(), ActionError> {
        let events = self.ui.activity();
        let ended: std::collections::BTreeSet<usize> = events
            .iter()
            .filter_map(|s| match &s.event {
                Event::AttemptEnded(e) => Some(e.task),
                _ => None,
            })
            .collect();
        let ended: Vec<usize> = ended.into_iter().collect();
        let part = crate::action::report::Part {
            round,
            batch: &ended,
            waiting: &[],
        };
        self.ctx.summary(&crate::action::report::round_summary(
            plan,
            part,
            &self.links,
            &events,
            self.inputs
                .ran(crate::pure::engine::Schedule::Eager, self.merging.on),
        ))?;
        // What a provider's rate limit held back during this job, when it began and ended.
        let holds: Vec<String> = events
            .iter()
            .filter_map(|s| match &s.event {
                Event::Note(n) => n
                    .strip_prefix("Rate limits: ")
                    .map(|l| format!("- {}: {}", s.at.strftime("%H:%M:%SZ"), l)),
                _ => None,
            })
            .collect();
        if !holds.is_empty() {
            self.ctx
                .summary(&format!("### Rate limits\n\n{}\n", holds.join("\n")))?;
        }
        Ok(())
    }
}
