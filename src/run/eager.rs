//! The eager schedule (beyond the seeds): a task starts as soon as its blockers are completed
//! and a slot is free, longest remaining critical path first, never beside a task it
//! conflicts with; each new attempt starts from the branch as it stands. Work that finishes
//! is integrated and committed in batches as it arrives — each batch commit counts as a round
//! — with the same verification, retries, cascade and circuit breaker as `rounds`.

use std::path::Path;
use std::sync::Arc;

use tokio::task::JoinSet;

use super::attempt::{self, AttemptEnd, Judged};
use super::{
    RunEnd, RunError, RunOptions, Ui, attempt_input, failpoint, finish, integrate_and_commit,
    judged, list, save,
};
use crate::engine;
use crate::git::Repo;
use crate::graph::Dag;
use crate::overlap::Conflicts;
use crate::plan::model::{Plan, Status};
use crate::prompt::{self, Unit};

type Running = JoinSet<Result<AttemptEnd, crate::git::GitError>>;

/// Everything the loop reads.
pub(super) struct Eager<'a> {
    pub repo: &'a Arc<Repo>,
    pub pool: &'a Arc<attempt::Pool>,
    pub dag: &'a Dag,
    pub conflicts: &'a Conflicts,
    pub opts: &'a RunOptions,
    pub ui: &'a Ui,
    pub scratch: &'a Path,
    pub cancel: &'a tokio::sync::watch::Receiver<bool>,
}

impl Eager<'_> {
    fn spawn(
        &self,
        running: &mut Running,
        plan: &Plan,
        (index, attempt, base_prompt): (usize, u32, String),
        round: u32,
    ) -> Result<(), RunError> {
        let base = self.repo.head()?;
        let input = attempt_input(
            plan,
            index,
            attempt,
            &base_prompt,
            round,
            &base,
            self.opts,
            self.scratch,
        );
        self.ui
            .task_started(index, attempt, &plan.tasks[index].subject);
        running.spawn(attempt::run(
            self.repo.clone(),
            self.pool.clone(),
            input,
            self.cancel.clone(),
        ));
        Ok(())
    }

    /// Starts as many ready tasks as there are free slots; `landed` are finished tasks not yet
    /// integrated, kept apart from conflicting ones like tasks in flight.
    fn fill(
        &self,
        running: &mut Running,
        plan: &mut Plan,
        in_flight: &mut Vec<usize>,
        landed: &[usize],
        round: u32,
    ) -> Result<(), RunError> {
        let jobs = self.opts.settings.jobs;
        if running.len() >= jobs || super::over_budget(plan, self.opts).is_some() {
            return Ok(());
        }
        let busy: Vec<usize> = in_flight.iter().chain(landed).copied().collect();
        let picks = engine::eager_pick(plan, self.dag, self.conflicts, &busy, jobs - running.len());
        if picks.is_empty() {
            return Ok(());
        }
        self.ui.say(format!("starting task(s) {}", list(&picks)));
        for &i in &picks {
            let t = &mut plan.tasks[i];
            t.status = Status::InProgress;
            // Counted when it starts, as in rounds.
            t.attempts = Some(t.attempts() + 1);
        }
        // Attempts in flight write their reviews to the plan file: keep them.
        let _held = self.pool.memory.plan_file();
        self.pool.memory.apply(plan);
        save(plan, self.opts)?;
        for &i in &picks {
            let first = (
                i,
                plan.tasks[i].attempts(),
                prompt::original_prompt(plan, i, Unit::Batch),
            );
            self.spawn(running, plan, first, round + 1)?;
            in_flight.push(i);
        }
        Ok(())
    }

    /// Runs until nothing is pending or in flight, the breaker trips, or Ctrl-C.
    pub(super) async fn run(&self, plan: &mut Plan, mut round: u32) -> Result<RunEnd, RunError> {
        let mut running: Running = JoinSet::new();
        let mut in_flight: Vec<usize> = Vec::new();
        let mut arrived: Vec<Judged> = Vec::new();
        let mut cancelled = false;
        loop {
            if !cancelled {
                self.fill(&mut running, plan, &mut in_flight, &[], round)?;
            }
            let Some(joined) = running.join_next().await else {
                if cancelled {
                    super::keep_interrupted(self.pool, plan, self.opts)?;
                    self.ui.say("Interrupted: tasks in flight are left in progress; run `dagexec run` again to resume.");
                    return Ok(RunEnd::Interrupted);
                }
                let pending = plan.count(Status::Pending);
                if pending == 0 {
                    return finish(self.repo, plan, self.opts, self.ui, None);
                }
                if super::over_budget(plan, self.opts).is_some() {
                    return super::stop_for_budget(self.repo, plan, self.opts, self.ui);
                }
                self.ui.say(engine::deadlock_message(pending));
                return finish(self.repo, plan, self.opts, self.ui, Some(RunEnd::Deadlock));
            };
            let mut next = Some(joined);
            while let Some(joined) = next.take().or_else(|| running.try_join_next()) {
                match joined.expect("attempts do not panic")? {
                    AttemptEnd::Cancelled => cancelled = true,
                    AttemptEnd::Judged(j) => match judged(plan, *j, Unit::Batch, self.ui) {
                        Ok(j) => {
                            in_flight.retain(|&t| t != j.index);
                            arrived.push(j);
                        }
                        Err(retry) if super::over_budget(plan, self.opts).is_some() => {
                            in_flight.retain(|&t| t != retry.0);
                            super::uncount_attempt(plan, retry.0, retry.1, self.opts)?;
                        }
                        Err(retry) if !cancelled => {
                            super::count_attempt(
                                plan,
                                retry.0,
                                retry.1,
                                self.opts,
                                &self.pool.memory,
                            )?;
                            self.spawn(&mut running, plan, retry, round + 1)?
                        }
                        Err(_) => {}
                    },
                }
            }
            if *self.cancel.borrow() {
                cancelled = true;
            }
            if cancelled || arrived.is_empty() {
                continue;
            }
            // Start what is ready already before integrating: integration takes a moment, and
            // work that does not depend on what just arrived need not wait for it. (What just
            // arrived still counts as in flight for conflicts until it is committed.)
            let landed: Vec<usize> = arrived.iter().map(|j| j.index).collect();
            self.fill(&mut running, plan, &mut in_flight, &landed, round)?;
            round += 1;
            arrived.sort_by_key(|j| j.index);
            let batch: Vec<usize> = arrived.iter().map(|j| j.index).collect();
            self.ui.say(format!(
                "\nRound {round}: integrating task(s) {}",
                list(&batch)
            ));
            let held = self.pool.memory.plan_file();
            self.pool.memory.apply(plan);
            let end = integrate_and_commit(
                self.repo,
                plan,
                self.dag,
                &batch,
                std::mem::take(&mut arrived),
                round,
                None,
                self.opts,
                self.ui,
            )?;
            drop(held);
            failpoint("eager-after-round", round);
            if let Some(end) = end {
                // Stop what is still running: dropping the set kills the workers' groups and
                // removes their worktrees; their tasks stay in progress for a resume.
                running.shutdown().await;
                return finish(self.repo, plan, self.opts, self.ui, Some(end));
            }
        }
    }
}
