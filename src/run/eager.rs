//! The eager schedule (beyond the seeds) on this machine: the engine loop
//! ([`crate::exec::Eager`]) with the local executor — each attempt in a worktree from the
//! branch as it stands, a failed attempt retried in place at once, each batch of arrivals
//! integrated and committed as it lands (each batch commit counts as a round), with the same
//! verification, retries, cascade and circuit breaker as `rounds`. Ctrl-C stops the workers
//! and leaves their tasks in progress for a resume.

use std::path::Path;
use std::sync::Arc;

use tokio::task::JoinSet;

use super::attempt::{self, AttemptEnd, Judged};
use super::{
    RunEnd, RunError, RunOptions, Ui, attempt_input, failpoint, finish, integrate_and_commit, save,
};
use crate::events::Event;
use crate::exec::{Arrivals, Eager, Ending, Executor, Integrated, Start};
use crate::git::Repo;
use crate::graph::Dag;
use crate::overlap::Conflicts;
use crate::plan::model::Plan;
use crate::prompt::{self, Unit};

/// The local executor: attempts in worktrees, as tasks of the run's async runtime.
pub(super) struct Local<'a> {
    pub repo: &'a Arc<Repo>,
    pub pool: &'a Arc<attempt::Pool>,
    pub dag: &'a Dag,
    pub opts: &'a RunOptions,
    pub ui: &'a Ui,
    pub scratch: &'a Path,
    pub cancel: &'a tokio::sync::watch::Receiver<bool>,
    pub rt: &'a tokio::runtime::Runtime,
    pub running: JoinSet<Result<AttemptEnd, crate::git::GitError>>,
}

impl Executor for Local<'_> {
    type Error = RunError;

    fn slots(&self) -> usize {
        self.opts.settings.jobs
    }

    fn running(&self) -> usize {
        self.running.len()
    }

    fn retries_in_place(&self) -> bool {
        true
    }

    fn save(&mut self, plan: &mut Plan) -> Result<(), RunError> {
        // Attempts in flight write their reviews to the plan file: keep them.
        let _held = self.pool.memory.plan_file();
        self.pool.memory.apply(plan);
        save(plan, self.opts)
    }

    fn start(&mut self, plan: &mut Plan, start: Start, round: u32) -> Result<(), RunError> {
        let base = self.repo.head()?;
        let base_prompt = start
            .retry_prompt
            .unwrap_or_else(|| prompt::original_prompt(plan, start.task, Unit::Batch));
        let input = attempt_input(
            plan,
            start.task,
            start.attempt,
            &base_prompt,
            round,
            &base,
            self.opts,
            self.scratch,
        );
        self.emit(Event::AttemptStarted {
            task: start.task,
            attempt: start.attempt,
            subject: plan.tasks[start.task].subject.clone(),
            run: None,
        });
        self.running.spawn_on(
            attempt::run(
                self.repo.clone(),
                self.pool.clone(),
                input,
                self.cancel.clone(),
            ),
            self.rt.handle(),
        );
        Ok(())
    }

    fn wait(&mut self, _plan: &mut Plan) -> Result<Arrivals, RunError> {
        let mut arrivals = Arrivals::default();
        let first = self.rt.block_on(self.running.join_next());
        let mut next = first;
        while let Some(joined) = next.take().or_else(|| self.running.try_join_next()) {
            match joined.expect("attempts do not panic")? {
                AttemptEnd::Cancelled => arrivals.cancelled = true,
                AttemptEnd::Judged(j) => arrivals.judged.push(*j),
            }
        }
        if *self.cancel.borrow() {
            arrivals.cancelled = true;
        }
        Ok(arrivals)
    }

    fn integrate(
        &mut self,
        plan: &mut Plan,
        batch: Vec<Judged>,
        round: u32,
    ) -> Result<Integrated, RunError> {
        let tasks: Vec<usize> = batch.iter().map(|j| j.index).collect();
        let held = self.pool.memory.plan_file();
        self.pool.memory.apply(plan);
        let end = integrate_and_commit(
            self.repo, plan, self.dag, &tasks, batch, round, None, self.opts, self.ui,
        )?;
        drop(held);
        failpoint("eager-after-round", round);
        Ok(end.map_or(Integrated::Continue, Integrated::End))
    }

    fn emit(&self, event: Event) {
        self.ui.emit(event);
    }
}

/// Runs the plan eagerly until nothing is pending or in flight, the breaker trips, or Ctrl-C.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    repo: &Arc<Repo>,
    pool: &Arc<attempt::Pool>,
    dag: &Dag,
    conflicts: &Conflicts,
    opts: &RunOptions,
    ui: &Ui,
    scratch: &Path,
    cancel: &tokio::sync::watch::Receiver<bool>,
    rt: &tokio::runtime::Runtime,
    plan: &mut Plan,
    round: u32,
) -> Result<RunEnd, RunError> {
    let mut local = Local {
        repo,
        pool,
        dag,
        opts,
        ui,
        scratch,
        cancel,
        rt,
        running: JoinSet::new(),
    };
    let engine = Eager {
        dag,
        conflicts,
        budget: opts.settings.max_cost,
    };
    let (ending, _) = engine.run(&mut local, plan, round, [])?;
    match ending {
        Ending::Done => finish(repo, plan, opts, ui, None),
        Ending::Deadlock { pending } => {
            ui.say(crate::engine::deadlock_message(pending));
            finish(repo, plan, opts, ui, Some(RunEnd::Deadlock))
        }
        Ending::Budget(_) => super::stop_for_budget(repo, plan, opts, ui),
        Ending::Ended(end) => {
            // Stop what is still running: its workers' groups are killed and their
            // worktrees removed; their tasks stay in progress for a resume.
            rt.block_on(local.running.shutdown());
            finish(repo, plan, opts, ui, Some(end))
        }
        Ending::Interrupted | Ending::Aborted | Ending::Handover | Ending::Stale => {
            super::keep_interrupted(pool, plan, opts)?;
            ui.say(
                "Interrupted: tasks in flight are left in progress; run `dagexec run` again to resume.",
            );
            Ok(RunEnd::Interrupted)
        }
    }
}
