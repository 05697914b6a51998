//! Eager scheduling as an engine loop over an [`Executor`]: a task starts as
//! soon as its blockers are completed and a slot is free; each batch of arrivals is
//! integrated and committed as a round.

use super::{
    Ending, Executor, Integrated, Judged, Launch, Settled, Standing, arrive, begin, count, lands,
    settle, uncount,
};
use crate::pure::engine::{self, Schedule};
use crate::pure::events::Event;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};
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

    /// Starts as many ready tasks as there are free slots (each added to the tasks in flight);
    /// the tasks in flight or landed and not yet integrated are kept apart from conflicting
    /// ones alike. `landing` are
    /// completed attempts about to be integrated: a slot goes now only to a task that would
    /// also be picked once they are committed, so work they unblock (the critical path,
    /// often) is not kept waiting for a slot by work of lower priority that started first.
    async fn fill<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        s: &mut EagerState,
        round: u32,
        landing: &[usize],
    ) -> Result<(), X::Error> {
        let free = x.slots().saturating_sub(x.running());
        if free == 0 || self.spent(plan).is_some() {
            return Ok(());
        }
        x.withdraw(plan, false)?;
        let busy: Vec<usize> = s.in_flight.iter().copied().collect();
        let held = x.held(plan, landing);
        let pick = engine::Pick {
            in_flight: &busy,
            slots: free,
            landing,
            held: &held.tasks,
        };
        let picks = engine::eager_pick_with(plan, self.dag, self.conflicts, pick);
        if picks.is_empty() {
            return Ok(());
        }
        x.emit(Event::Starting {
            tasks: picks.clone(),
        });
        begin(x, plan, &picks, &mut s.standing)?;
        for &i in &picks {
            let start = Launch {
                task: i,
                attempt: plan.tasks[i].attempts(),
                retry_prompt: None,
            };
            x.start(plan, start, round + 1).await?;
        }
        s.in_flight.extend(picks);
        Ok(())
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

    /// How the run ends once nothing runs (`s`: where it stands then).
    fn idle<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        s: EagerState,
    ) -> Result<Ending, X::Error> {
        Ok(if s.cancelled {
            // What dagexec stopped is not counted against its task.
            s.standing.give_back(x, plan)?;
            Ending::Interrupted { committed: false }
        } else if s.aborted {
            Ending::Aborted
        } else if let Some(stop) = s.stop {
            stop
        } else {
            self.settle(plan)
        })
    }

    /// With nothing running: when only tasks a provider's rate limit holds could start, waits
    /// for the first of them (`Some(true)`: go on), or hands over when that is due first
    /// (`Some(false)`); `None` when nothing is held and the run ends.
    async fn wait_for_holds<X: Executor>(
        &self,
        x: &mut X,
        plan: &Plan,
        s: &EagerState,
    ) -> Option<bool> {
        let open = !s.cancelled && !s.aborted && s.stop.is_none() && self.spent(plan).is_none();
        let wait = open.then(|| x.held(plan, &[]).next).flatten()?;
        if x.handover_due() {
            return Some(false);
        }
        x.pause(wait).await;
        Some(true)
    }

    /// Runs until nothing is pending or in flight, or the run stops; `round` is the last
    /// round committed, `in_flight` the tasks already running (adopted). Returns how it
    /// ended and the last round committed.
    pub async fn run<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        mut round: u32,
        in_flight: impl IntoIterator<Item = usize>,
    ) -> Result<(Ending, u32), X::Error> {
        let mut s = EagerState {
            in_flight: in_flight.into_iter().collect(),
            cancelled: false,
            aborted: false,
            stop: None,
            standing: Standing::default(),
        };
        loop {
            if !s.cancelled && !s.aborted && s.stop.is_none() {
                self.fill(x, plan, &mut s, round, &[]).await?;
            }
            if x.running() == 0 {
                match self.wait_for_holds(x, plan, &s).await {
                    Some(true) => continue,
                    Some(false) => return Ok((Ending::Handover, round)),
                    None => {}
                }
                return Ok((self.idle(x, plan, s)?, round));
            }
            if x.handover_due() {
                return Ok((Ending::Handover, round));
            }
            let arrivals = x.wait(plan).await?;
            s.cancelled |= arrivals.cancelled;
            let mut landed = self
                .receive(x, plan, &mut s, arrivals.judged, round)
                .await?;
            if s.cancelled || landed.is_empty() {
                continue;
            }
            // Start what is ready already before integrating: integration takes a moment, and
            // work that does not depend on what just arrived need not wait for it — unless
            // what it unblocks comes first (see `fill`). What just arrived still counts as
            // busy for conflicts until it is committed.
            if !s.aborted && s.stop.is_none() {
                let landing: Vec<usize> = landed
                    .iter()
                    .filter(|j| j.verdict.status == Status::Completed)
                    .map(|j| j.index)
                    .collect();
                self.fill(x, plan, &mut s, round, &landing).await?;
            }
            landed.sort_by_key(|j| j.index);
            let tasks: Vec<usize> = landed.iter().map(|j| j.index).collect();
            for i in &tasks {
                s.in_flight.remove(i);
            }
            round += 1;
            x.emit(Event::Integrating {
                round,
                tasks: tasks.clone(),
            });
            x.stage(plan, landed)?;
            // `overlap: merge`: what could not be merged is not resolved by this commit; it
            // runs again from the committed tree (once), still in flight.
            let again = x.rebases(plan);
            let tasks: Vec<usize> = tasks
                .into_iter()
                .filter(|i| !again.iter().any(|r| r.task == *i))
                .collect();
            let held = s.cancelled || s.aborted || s.stop.is_some() || self.spent(plan).is_some();
            if held {
                // Not started: pending again, with the attempts they made.
                super::put_back(x, plan, again.clone(), |_| true)?;
            } else {
                s.in_flight.extend(again.iter().map(|r| r.task));
            }
            let committed = x.commit(plan, &tasks, round, None).await?;
            x.reached("eager-after-round", round);
            for start in again.into_iter().filter(|_| !held) {
                if committed == Integrated::Continue {
                    x.start(plan, start, round + 1).await?;
                } else {
                    s.in_flight.remove(&start.task);
                    super::put_back(x, plan, [start], |_| true)?;
                }
            }
            match committed {
                Integrated::Continue => {}
                Integrated::Abort => s.aborted = true,
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
        }
    }

    /// Takes in the attempts that arrived: each recorded, a retry started at once where the
    /// executor retries in place (or given up when nothing new may start), and those that
    /// land returned for integration.
    async fn receive<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        s: &mut EagerState,
        judged: Vec<Judged>,
        round: u32,
    ) -> Result<Vec<Judged>, X::Error> {
        let mut landed: Vec<Judged> = Vec::new();
        for j in judged {
            let retry = arrive(x, plan, &j, Unit::Batch, &mut s.standing, &mut s.stop)?;
            if !lands(&j) {
                s.in_flight.remove(&j.index);
                continue;
            }
            match retry {
                Some((attempt, prompt)) if x.retries_in_place() => {
                    if self.spent(plan).is_some() || s.stop.is_some() {
                        // Never started: the task is pending with the attempts it made.
                        uncount(plan, j.index, attempt);
                        s.in_flight.remove(&j.index);
                        x.save(plan)?;
                    } else if !s.cancelled {
                        count(x, plan, j.index, attempt)?;
                        let start = Launch {
                            task: j.index,
                            attempt,
                            retry_prompt: Some(prompt),
                        };
                        x.start(plan, start, round + 1).await?;
                    }
                }
                _ => landed.push(j),
            }
        }
        Ok(landed)
    }
}

/// Where an eager run stands between arrivals: the tasks in flight, and whether Ctrl-C, an
/// `/execute abort` or a halt (refused credentials, a CLI's own spending limit) keeps anything
/// new from starting.
struct EagerState {
    in_flight: BTreeSet<usize>,
    cancelled: bool,
    aborted: bool,
    stop: Option<Ending>,
    /// The attempts that stand, should the run be interrupted.
    standing: Standing,
}
