//! The seeds' rounds (and waves) as an engine loop over an [`Executor`]: the
//! whole ready set, tasks that share files in sequential groups, failures retried inside the
//! round, then one update, one circuit-breaker decision and one commit.

use super::{
    Ending, Executor, Integrated, Judged, Launch, Standing, arrive, begin, count, lands, put_back,
};
use crate::pure::engine::{self, Next, Schedule, View};
use crate::pure::events::Event;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::usage::Budget;
use std::collections::{BTreeSet, VecDeque};

/// A group's judged attempts (ascending), its tasks the budget kept from starting (or whose
/// attempt its CLI's spending limit stopped), and why the run stops after this round.
type GroupEnd = (Vec<Judged>, Vec<usize>, Option<Ending>);

/// A round's groups run: the tasks that never started, and why the run stops after it.
type RoundEnd = (Vec<usize>, Option<Ending>);

/// The seeds' rounds (`schedule: rounds`) or waves (`schedule: waves`).
#[derive(Debug, Clone, Copy)]
pub struct RoundLoop<'a> {
    pub dag: &'a Dag,
    pub conflicts: &'a Conflicts,
    pub budget: Option<Budget>,
    /// [`Schedule::Rounds`] or [`Schedule::Waves`].
    pub schedule: Schedule,
}

impl RoundLoop<'_> {
    fn spent(&self, plan: &Plan) -> Option<String> {
        self.budget?.exhausted(plan)
    }

    /// Runs round after round until nothing is pending, the run stops, or it is cancelled;
    /// `round` is the last round committed. Returns how it ended and the last round.
    pub async fn run<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        mut round: u32,
    ) -> Result<(Ending, u32), X::Error> {
        let mut standing = Standing::default();
        loop {
            x.withdraw(plan, false)?;
            let batch = match self.next_batch(x, plan) {
                Ok(batch) => batch,
                Err(ending) => return Ok((ending, round)),
            };
            round += 1;
            let wave = (self.schedule == Schedule::Waves)
                .then(|| engine::current_wave(plan, self.dag))
                .flatten();
            // Seed 3b: a round's tasks that share files "run sequentially" — in groups one
            // after another, each starting from the round's tree with the earlier groups'
            // work applied.
            let groups = match self.schedule {
                Schedule::Rounds => engine::sequential_groups(&batch, self.dag, self.conflicts),
                _ => vec![batch.clone()],
            };
            x.emit(Event::RoundStarted {
                round,
                tasks: batch.clone(),
                groups: groups.clone(),
                slots: x.slots(),
            });
            let Some((unstarted, stop)) = self
                .run_groups(x, plan, &groups, round, &mut standing)
                .await?
            else {
                // Interrupted: what dagexec stopped is not counted against its task.
                standing.give_back(x, plan)?;
                return Ok((Ending::Interrupted { committed: false }, round));
            };
            x.reached("after-workers", round);
            // One update (results, cascade, circuit breaker) and one commit for the whole
            // round (of the tasks that ran: not those the budget or the task list, edited
            // while an earlier group ran, kept from starting).
            let ran: Vec<usize> = batch
                .iter()
                .copied()
                .filter(|&i| !unstarted.contains(&i) && plan.tasks[i].status != Status::Skipped)
                .collect();
            match x.commit(plan, &ran, round, wave).await? {
                Integrated::Continue => {}
                Integrated::End(end) => return Ok((Ending::Ended(end), round)),
                Integrated::Abort => return Ok((Ending::Aborted, round)),
                Integrated::Stale => return Ok((Ending::Stale, round)),
            }
            if let Some(stop) = stop {
                return Ok((stop, round));
            }
            if !unstarted.is_empty() {
                return Ok((Ending::Budget(self.spent(plan).unwrap_or_default()), round));
            }
            if x.cancelled() {
                return Ok((Ending::Interrupted { committed: true }, round));
            }
        }
    }

    /// The next round's tasks, or how the run ends before it (done, deadlock, the budget).
    fn next_batch<X: Executor>(&self, x: &mut X, plan: &Plan) -> Result<Vec<usize>, Ending> {
        let view = View {
            plan,
            dag: self.dag,
            conflicts: self.conflicts,
        };
        match self.schedule.next(view, None) {
            Next::Done => Err(Ending::Done),
            Next::Deadlock { pending } => Err(Ending::Deadlock { pending }),
            Next::Batch { .. } if self.spent(plan).is_some() => {
                Err(Ending::Budget(self.spent(plan).unwrap_or_default()))
            }
            Next::Batch { tasks, waiting } => {
                if !waiting.is_empty() {
                    x.emit(Event::Waiting { tasks: waiting });
                }
                Ok(tasks)
            }
        }
    }

    /// Runs a round's groups one after another, each staged when it is resolved. Returns
    /// the tasks that never started (the budget ran out first) and why the run stops after
    /// this round; `None` when cancelled inside a group.
    async fn run_groups<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        groups: &[Vec<usize>],
        round: u32,
        standing: &mut Standing,
    ) -> Result<Option<RoundEnd>, X::Error> {
        // Tasks of the round that never started: the budget ran out first.
        let mut unstarted: Vec<usize> = Vec::new();
        let mut stop: Option<Ending> = None;
        for (k, group) in groups.iter().enumerate() {
            if self.spent(plan).is_some() || stop.is_some() {
                not_started(x, group.clone(), stop.is_none(), &mut unstarted);
                continue;
            }
            let group = if k > 0 {
                // The task list may have changed while the earlier groups ran.
                x.withdraw(plan, true)?;
                let group: Vec<usize> = group
                    .iter()
                    .copied()
                    .filter(|&i| plan.tasks[i].status != Status::Skipped)
                    .collect();
                if group.is_empty() {
                    continue;
                }
                x.emit(Event::GroupStarted {
                    group: k + 1,
                    of: groups.len(),
                    tasks: group.clone(),
                });
                group
            } else {
                group.clone()
            };
            let group = &group;
            begin(x, plan, group, standing)?;
            let mut starts: Vec<Launch> = group
                .iter()
                .map(|&i| Launch {
                    task: i,
                    attempt: plan.tasks[i].attempts().max(1),
                    retry_prompt: None,
                })
                .collect();
            // `overlap: merge`: what could not be merged runs again from the round so far
            // (each task at most once, so this ends), inside the round.
            loop {
                let Some((judged, kept, halted)) =
                    self.group(x, plan, starts, round, standing).await?
                else {
                    return Ok(None);
                };
                unstarted.extend(kept);
                stop = stop.or(halted);
                x.stage(plan, judged)?;
                starts = x.rebases(plan);
                if starts.is_empty() {
                    break;
                }
                if self.spent(plan).is_some() || stop.is_some() {
                    // Not started: pending again, with the attempts they made.
                    let held = put_back(x, plan, starts, |_| true)?;
                    not_started(x, held, stop.is_none(), &mut unstarted);
                    break;
                }
            }
            if k + 1 < groups.len() {
                x.reached("between-groups", round);
            }
        }
        Ok(Some((unstarted, stop)))
    }

    /// Runs one group's attempts, retrying failures until every task is resolved, or the
    /// budget is spent: then the attempts not yet started never start, and their tasks are
    /// pending again (returned beside the judged attempts). `None` when cancelled.
    async fn group<X: Executor>(
        &self,
        x: &mut X,
        plan: &mut Plan,
        starts: Vec<Launch>,
        round: u32,
        standing: &mut Standing,
    ) -> Result<Option<GroupEnd>, X::Error> {
        // The group's first launches that carry a prompt are rebases (`overlap: merge`),
        // which are not counted: held back, they keep the attempt they repeat.
        let mut rebasing: BTreeSet<usize> = starts
            .iter()
            .filter(|s| s.retry_prompt.is_some())
            .map(|s| s.task)
            .collect();
        // Attempts waiting for a slot, in plan order; a retry goes to the front.
        let mut queue: VecDeque<Launch> = starts.into();
        let mut done: Vec<Judged> = Vec::new();
        let mut unstarted = Vec::new();
        let mut cancelled = false;
        let mut stop: Option<Ending> = None;
        // The group's first starts are announced by its round's (or group's) line; tasks that
        // waited for a free worker are announced as they start.
        let mut announced = false;
        loop {
            let free = x.slots().saturating_sub(x.running());
            if free > 0 && !cancelled {
                if (self.spent(plan).is_some() || stop.is_some()) && !queue.is_empty() {
                    let held = put_back(x, plan, queue.drain(..), |s| rebasing.contains(&s.task))?;
                    not_started(x, held, stop.is_none(), &mut unstarted);
                }
                let starts: Vec<Launch> = queue.drain(..free.min(queue.len())).collect();
                let mut fresh: Vec<usize> = starts
                    .iter()
                    .filter(|s| s.retry_prompt.is_none())
                    .map(|s| s.task)
                    .collect();
                fresh.sort_unstable();
                if announced && !fresh.is_empty() {
                    x.emit(Event::Starting { tasks: fresh });
                }
                for start in starts {
                    x.start(plan, start, round).await?;
                }
            }
            announced = true;
            if x.running() == 0 {
                break;
            }
            let arrivals = x.wait(plan).await?;
            cancelled |= arrivals.cancelled;
            for j in arrivals.judged {
                let retry = arrive(x, plan, &j, self.schedule.unit(), standing, &mut stop)?;
                match retry {
                    Some((attempt, prompt)) if x.retries_in_place() => {
                        count(x, plan, j.index, attempt)?;
                        rebasing.remove(&j.index);
                        queue.push_front(Launch {
                            task: j.index,
                            attempt,
                            retry_prompt: Some(prompt),
                        });
                    }
                    _ if !lands(&j) => unstarted.push(j.index),
                    _ => done.push(j),
                }
            }
        }
        if cancelled {
            return Ok(None);
        }
        done.sort_by_key(|j| j.index);
        Ok(Some((done, unstarted, stop)))
    }
}

/// Tasks of a round that will not start now (the budget ran out first), said when `say` (not
/// when the run stops anyway) and added to `unstarted`.
fn not_started<X: Executor>(x: &X, mut tasks: Vec<usize>, say: bool, unstarted: &mut Vec<usize>) {
    tasks.sort_unstable();
    if say {
        x.emit(Event::NotStarted {
            tasks: tasks.clone(),
        });
    }
    unstarted.extend(tasks);
}
