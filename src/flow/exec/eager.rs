//! Eager scheduling as an engine loop over an [`Executor`](super::Executor): a task starts as
//! soon as its blockers are completed and a slot is free; each batch of arrivals is
//! integrated and committed as a round.

use crate::flow::exec::Ending;
use crate::flow::exec::Executor;
use crate::flow::exec::Integrated;
use crate::flow::exec::Settled;
use crate::flow::exec::Start;
use crate::flow::exec::arrive;
use crate::flow::exec::begin;
use crate::flow::exec::count;
use crate::flow::exec::halts;
use crate::flow::exec::lands;
use crate::flow::exec::settle;
use crate::flow::exec::uncount;
use crate::flow::pool::Judged;
use crate::pure::engine::{self, Schedule};
use crate::pure::events::Event;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::Plan;
use crate::pure::prompt::Unit;
use crate::pure::usage::Budget;
use std::collections::BTreeSet;

/// The eager schedule.
#[derive(Debug, Clone, Copy)]
pub struct Eager<'a> {
    pub dag: &'a Dag,
    pub conflicts: &'a Conflicts,
    pub budget: Option<Budget>,
}

impl Eager<'_> {
    fn spent(&self, plan: &Plan) -> Option<String> {
        self.budget?.exhausted(plan)
    }

    /// Starts as many ready tasks as there are free slots; `busy` are tasks in flight or
    /// landed and not yet integrated (kept apart from conflicting ones alike).
    fn fill<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        busy: &BTreeSet<usize>,
        round: u32,
    ) -> Result<Vec<usize>, X::Error> {
        let free = x.slots().saturating_sub(x.running());
        if free == 0 || self.spent(plan).is_some() {
            return Ok(Vec::new());
        }
        let busy: Vec<usize> = busy.iter().copied().collect();
        let picks = engine::eager_pick(plan, self.dag, self.conflicts, &busy, free);
        if picks.is_empty() {
            return Ok(picks);
        }
        x.emit(Event::Starting {
            tasks: picks.clone(),
        });
        begin(x, plan, &picks)?;
        for &i in &picks {
            let start = Start {
                task: i,
                attempt: plan.tasks[i].attempts(),
                retry_prompt: None,
            };
            x.start(plan, start, round + 1)?;
        }
        Ok(picks)
    }

    /// The run's end once nothing runs.
    fn settle(&self, plan: &Plan) -> Ending {
        match settle(plan, self.dag, self.conflicts, Schedule::Eager, self.budget) {
            Settled::Done => Ending::Done,
            Settled::Deadlock { pending } => Ending::Deadlock { pending },
            Settled::Budget(why) => Ending::Budget(why),
            // Ready tasks did not start though nothing runs: only the budget holds them back
            // (spent between the check and the pick).
            Settled::More => Ending::Budget(self.spent(plan).unwrap_or_default()),
        }
    }

    /// Runs until nothing is pending or in flight, or the run stops; `round` is the last
    /// round committed, `in_flight` the tasks already running (adopted). Returns how it
    /// ended and the last round committed.
    #[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
    pub fn run<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        mut round: u32,
        in_flight: impl IntoIterator<Item = usize>,
    ) -> Result<(Ending, u32), X::Error> {
        let mut in_flight: BTreeSet<usize> = in_flight.into_iter().collect();
        let mut cancelled = false;
        let mut aborted = false;
        // Why nothing new starts: refused credentials, or a CLI's own spending limit.
        let mut stop: Option<Ending> = None;
        loop {
            if !cancelled && !aborted && stop.is_none() {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            if x.running() == 0 {
                let end = if cancelled {
                    Ending::Interrupted { committed: false }
                } else if aborted {
                    Ending::Aborted
                } else if let Some(stop) = stop {
                    stop
                } else {
                    self.settle(plan)
                };
                return Ok((end, round));
            }
            if x.handover_due() {
                return Ok((Ending::Handover, round));
            }
            let arrivals = x.wait(plan)?;
            cancelled |= arrivals.cancelled;
            let mut landed: Vec<Judged> = Vec::new();
            for j in arrivals.judged {
                let retry = arrive(x, plan, &j, Unit::Batch);
                if let Some(end) = halts(x, plan, &j)? {
                    stop = stop.or(Some(end));
                }
                if !lands(&j) {
                    in_flight.remove(&j.index);
                    continue;
                }
                match retry {
                    Some((attempt, prompt)) if x.retries_in_place() => {
                        if self.spent(plan).is_some() || stop.is_some() {
                            // Never started: the task is pending with the attempts it made.
                            uncount(plan, j.index, attempt);
                            in_flight.remove(&j.index);
                            x.save(plan)?;
                        } else if !cancelled {
                            count(x, plan, j.index, attempt)?;
                            let start = Start {
                                task: j.index,
                                attempt,
                                retry_prompt: Some(prompt),
                            };
                            x.start(plan, start, round + 1)?;
                        }
                    }
                    _ => landed.push(j),
                }
            }
            if cancelled || landed.is_empty() {
                continue;
            }
            // Start what is ready already before integrating: integration takes a moment, and
            // work that does not depend on what just arrived need not wait for it. What just
            // arrived still counts as busy for conflicts until it is committed.
            if !aborted && stop.is_none() {
                let started = self.fill(x, plan, &in_flight, round)?;
                in_flight.extend(started);
            }
            landed.sort_by_key(|j| j.index);
            let tasks: Vec<usize> = landed.iter().map(|j| j.index).collect();
            for i in &tasks {
                in_flight.remove(i);
            }
            round += 1;
            x.emit(Event::Integrating {
                round,
                tasks: tasks.clone(),
            });
            x.stage(plan, landed)?;
            let committed = x.commit(plan, &tasks, round, None)?;
            x.reached("eager-after-round", round);
            match committed {
                Integrated::Continue => {}
                Integrated::Abort => aborted = true,
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
        }
    }
}
