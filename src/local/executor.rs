//! The local executor: each attempt in a worktree on this machine (pooled, reset between
//! attempts), a failed attempt retried in place at once, the round built in a temporary
//! index ([`RoundBuild`]; under `overlap: merge` each result merged three-way and re-checked,
//! what cannot land started again as a rebase attempt: [`crate::flow::merge`]) and committed
//! with one ref update. The engine loops
//! ([`crate::flow::exec::RoundLoop`] for rounds and waves, [`crate::flow::exec::Eager`]) drive it; Ctrl-C
//! (or SIGTERM) stops the workers and leaves their tasks in progress for a resume, the attempts
//! it stopped not counted and their logs kept, and says so.

use std::path::Path;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::edge::git::Repo;
use crate::flow::attempt::{self, AttemptEnd, Judged};
use crate::flow::exec::{Arrivals, Eager, Ending, Executor, Integrated, Launch, RoundLoop};
use crate::flow::integrate::RoundBuild;
use crate::flow::{RunEnd, RunError, RunOptions, Ui, failpoint, finish, save};
use crate::local::AttemptInput;
use crate::pure::engine::Schedule;
use crate::pure::events::Event;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::Plan;
use crate::pure::prompt::{self, Unit};

/// The local executor: attempts in worktrees, as tasks of the run's async runtime.
pub(crate) struct Local<'a> {
    pub repo: &'a Arc<Repo>,
    pub pool: &'a Arc<attempt::Pool>,
    pub dag: &'a Dag,
    pub opts: &'a RunOptions,
    pub ui: &'a Ui,
    pub scratch: &'a Path,
    pub cancel: &'a tokio::sync::watch::Receiver<bool>,
    /// The signal that set `cancel` (`SIGINT`: Ctrl-C; `SIGTERM`).
    pub stopped_by: &'a std::sync::OnceLock<&'static str>,
    pub running: JoinSet<Result<AttemptEnd, crate::edge::git::GitError>>,
    /// The round being built (the patches staged so far).
    pub build: RoundBuild,
    /// The commit attempts start from now: `HEAD`, or the round so far.
    pub base: Option<String>,
    /// `overlap: merge`: each attempt's base, the tasks landed, the rebases asked for.
    pub ledger: Option<crate::flow::merge::Merges>,
    /// Each task's identity in its source ([`crate::sources::identities`]), which its live
    /// file keeps ([`crate::flow::live`]).
    pub ids: Vec<String>,
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
        // Every attempt is counted through here before it starts.
        super::check_state(self.repo, self.scratch)?;
        // Attempts in flight write their reviews to the plan file: keep them.
        let _held = self.pool.memory.apply(plan);
        save(plan, self.opts)
    }

    fn keep(&mut self, record: &crate::pure::usage::AttemptRecord) {
        crate::flow::live::ended(self.repo.common_dir(), &self.ids[record.task], record);
    }

    async fn start(&mut self, plan: &mut Plan, start: Launch, round: u32) -> Result<(), RunError> {
        let base = match &self.base {
            Some(b) => b.clone(),
            // A round's later group starts from the round so far (its earlier groups'
            // accepted patches), unpublished.
            None if self.build.is_empty() => self.repo.head()?,
            None => self.build.next_base(self.repo)?,
        };
        self.base = Some(base.clone());
        let (rebase, resumed) = match &mut self.ledger {
            None => (false, None),
            Some(l) => {
                let rebase = l.started(plan, start.task, &base, round)?;
                // A rebase a crash interrupted runs again with its own prompt.
                let resumed = l.ledger.rebasing(start.task).filter(|_| rebase).cloned();
                (rebase, resumed)
            }
        };
        let unit = self.opts.settings.schedule.unit();
        let base_prompt = start
            .retry_prompt
            .or_else(|| resumed.map(|r| rebase_prompt(plan, &r, unit)))
            .unwrap_or_else(|| prompt::original_prompt(plan, start.task, unit));
        let input = AttemptInput {
            index: start.task,
            id: self.ids[start.task].clone(),
            attempt: start.attempt,
            round,
            task: plan.tasks[start.task].clone(),
            prompt: prompt::spawn_prompt(plan, start.task, &base_prompt),
            base: base.clone(),
            worker: self.opts.settings.worker.clone(),
            timeout: self.opts.settings.timeout,
            scratch: self.scratch.to_path_buf(),
            plan_rel: self.opts.plan_rel.clone(),
            tasks_md: crate::sources::own_file(plan),
            reviewer: self.opts.settings.reviewer.clone(),
            rebase,
        };
        tracing::debug!(
            task = start.task,
            attempt = start.attempt,
            rebase,
            "starting"
        );
        self.emit(Event::AttemptStarted {
            task: start.task,
            attempt: start.attempt,
            subject: plan.tasks[start.task].subject.clone(),
            run: None,
        });
        // On the runtime the run's loop is driven on (see `local::run`).
        self.running.spawn(attempt::run(
            self.repo.clone(),
            self.pool.clone(),
            input,
            self.cancel.clone(),
        ));
        Ok(())
    }

    async fn wait(&mut self, _plan: &mut Plan) -> Result<Arrivals, RunError> {
        let mut arrivals = Arrivals::default();
        let mut next = self.running.join_next().await;
        while let Some(joined) = next.take().or_else(|| self.running.try_join_next()) {
            match joined.expect("attempts do not panic")? {
                AttemptEnd::Cancelled => arrivals.cancelled = true,
                AttemptEnd::Judged(j) => arrivals.judged.push(*j),
            }
        }
        if *self.cancel.borrow() {
            arrivals.cancelled = true;
        }
        let tasks: Vec<usize> = arrivals.judged.iter().map(|j| j.index).collect();
        tracing::debug!(?tasks, "arrived");
        Ok(arrivals)
    }

    fn stage(&mut self, plan: &mut Plan, judged: Vec<Judged>) -> Result<(), RunError> {
        tracing::debug!(tasks = judged.len(), "integrating");
        self.base = None;
        match &mut self.ledger {
            None => self.build.add(self.repo, plan, &judged, self.ui),
            Some(ledger) => {
                ledger.ledger.integrating();
                let at = crate::flow::merge::Merging {
                    repo: self.repo,
                    pool: self.pool,
                    ui: self.ui,
                    round: ledger.round,
                    timeout: self.opts.settings.timeout,
                };
                self.build.add_merged(&at, ledger, plan, judged)
            }
        }
    }

    fn rebases(&mut self, plan: &Plan) -> Vec<Launch> {
        let Some(ledger) = &mut self.ledger else {
            return Vec::new();
        };
        let unit = self.opts.settings.schedule.unit();
        ledger
            .ledger
            .take_asked()
            .into_iter()
            .map(|r| Launch {
                task: r.task,
                attempt: r.attempt,
                retry_prompt: Some(rebase_prompt(plan, &r, unit)),
            })
            .collect()
    }

    async fn commit(
        &mut self,
        plan: &mut Plan,
        tasks: &[usize],
        round: u32,
        wave: Option<u64>,
    ) -> Result<Integrated, RunError> {
        self.base = None;
        let build = std::mem::replace(&mut self.build, RoundBuild::start());
        let _held = self.pool.memory.apply(plan);
        let at = crate::flow::integrate::RoundCommit {
            repo: self.repo,
            dag: self.dag,
            batch: tasks,
            round,
            wave,
            opts: self.opts,
            ui: self.ui,
        };
        tracing::debug!(?tasks, round, "committing");
        let end = build.commit(at, plan)?;
        tracing::debug!(round, "committed");
        Ok(end.map_or(Integrated::Continue, Integrated::End))
    }

    fn withdraw(&mut self, plan: &mut Plan, mid_round: bool) -> Result<(), RunError> {
        let Some((path, tasks)) = crate::sources::withdrawn(self.repo, plan) else {
            return Ok(());
        };
        let why = format!(
            "{path} in your work tree, edited during the run, takes it out or marks it done (the next run reads it again)"
        );
        let waiting = crate::pure::update::withdraw(plan, self.dag, &tasks, &why);
        let names = crate::pure::plan::ids::TaskNames::of(plan);
        let list = |t: &[usize]| {
            t.iter()
                .map(|&i| names.get(i).clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let also = if waiting.is_empty() {
            String::new()
        } else {
            format!(", nor {} that wait(s) for it", list(&waiting))
        };
        let indent = if mid_round { "  " } else { "" };
        self.emit(Event::Note(format!(
            "{indent}Not starting task(s) {}{also}: {why}.",
            list(&tasks)
        )));
        Ok(())
    }

    fn cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    fn reached(&self, step: &str, round: u32) {
        failpoint(step, round);
    }

    fn emit(&self, event: Event) {
        self.ui.emit(event);
    }
}

/// The prompt of rebase `r`: the task's own, with the tasks it builds on and what went wrong.
fn rebase_prompt(plan: &Plan, r: &crate::pure::integration::Rebase, unit: Unit) -> String {
    let onto: Vec<(usize, &str)> = r
        .onto
        .iter()
        .map(|&k| (k, plan.tasks[k].subject.as_str()))
        .collect();
    let original = prompt::original_prompt(plan, r.task, unit);
    prompt::rebase_prompt(&original, &onto, &r.why)
}

/// Runs the plan's rounds, waves or eager schedule on this machine until nothing is pending
/// or in flight, the breaker trips, the budget is spent, or Ctrl-C.
pub(crate) async fn run(
    mut local: Local<'_>,
    conflicts: &Conflicts,
    plan: &mut Plan,
    round: u32,
) -> Result<RunEnd, RunError> {
    let (repo, pool, dag, opts, ui) = (local.repo, local.pool, local.dag, local.opts, local.ui);
    ui.name_tasks(plan);
    let budget = opts.settings.max_cost;
    let (ending, _) = match opts.settings.schedule {
        Schedule::Eager => {
            Eager {
                dag,
                conflicts,
                budget,
            }
            .run(&mut local, plan, round, [])
            .await?
        }
        schedule => {
            RoundLoop {
                dag,
                conflicts,
                budget,
                schedule,
            }
            .run(&mut local, plan, round)
            .await?
        }
    };
    let eager = opts.settings.schedule == Schedule::Eager;
    match ending {
        Ending::Done => finish(repo, plan, opts, ui, None),
        Ending::Deadlock { pending } => {
            ui.say(crate::pure::engine::deadlock_message(pending));
            finish(repo, plan, opts, ui, Some(RunEnd::Deadlock))
        }
        Ending::Budget(why) => crate::flow::stop_for_budget(repo, plan, opts, ui, why),
        Ending::Halted(why) => {
            let end = finish(repo, plan, opts, ui, Some(RunEnd::Halted))?;
            ui.say(format!("\nStopped: {why}"));
            Ok(end)
        }
        Ending::Ended(end) => {
            // Stop what is still running (eager): its workers' groups are killed and their
            // worktrees removed; their tasks stay in progress for a resume.
            local.running.shutdown().await;
            finish(repo, plan, opts, ui, Some(end))
        }
        Ending::Interrupted { committed: true } => {
            ui.say("Interrupted after the round was committed; run `dagexec run` again to resume.");
            Ok(RunEnd::Interrupted)
        }
        Ending::Interrupted { committed: false }
        | Ending::Aborted
        | Ending::Handover
        | Ending::Stale => {
            let signal = local.stopped_by.get().copied().unwrap_or("SIGINT");
            let stopped = crate::flow::keep_interrupted(pool, plan, opts, signal)?;
            let logs = pool
                .logs
                .made()
                .map(|dir| crate::flow::logs::shown(repo.root(), &dir));
            ui.say(interrupted(&Interruption {
                signal,
                stopped: &stopped,
                names: &crate::pure::plan::ids::TaskNames::of(plan),
                logs: logs.as_deref(),
                eager,
            }));
            Ok(RunEnd::Interrupted)
        }
    }
}

/// What the run says when the user stopped it.
struct Interruption<'a> {
    /// `SIGINT` (Ctrl-C) or `SIGTERM`.
    signal: &'a str,
    /// The attempts stopped, `(task, attempt)`.
    stopped: &'a [(usize, u32)],
    /// How the run names its tasks (a task list's own IDs).
    names: &'a crate::pure::plan::ids::TaskNames,
    /// This run's folder of kept logs, as shown, when it made one.
    logs: Option<&'a str>,
    eager: bool,
}

/// The lines a run stopped by the user ends with: what was stopped (and not counted), what
/// was kept and where, and how to go on.
fn interrupted(i: &Interruption<'_>) -> String {
    let by = match i.signal {
        "SIGINT" => "SIGINT (Ctrl-C)".to_string(),
        other => other.to_string(),
    };
    let mut stopped: Vec<(usize, u32)> = i.stopped.to_vec();
    stopped.sort_unstable();
    let mut lines = vec![if stopped.is_empty() {
        format!("Interrupted by {by}: no attempt was running.")
    } else {
        let list: Vec<String> = stopped
            .iter()
            .map(|&(t, a)| format!("task {} attempt {a}", i.names.get(t)))
            .collect();
        format!(
            "Interrupted by {by}: stopped {}; an attempt you interrupt is not counted.",
            list.join(", ")
        )
    }];
    if let Some(dir) = i.logs {
        lines.push(format!(
            "Kept: each attempt's stdout, stderr and work log (a stopped one's up to the interrupt), in {dir} (task-N-attempt-K.stdout, .stderr, .log)."
        ));
    }
    lines.push(if i.eager {
        "Run `dagexec run` to resume: the tasks in flight start again, each at the attempt it was on.".to_string()
    } else {
        "Run `dagexec run` to resume: the round's tasks start again, each at the attempt it was on.".to_string()
    });
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::ids::TaskNames;

    #[test]
    fn an_interrupt_says_what_was_stopped_kept_and_how_to_go_on() {
        let shown = [
            interrupted(&Interruption {
                signal: "SIGINT",
                stopped: &[(3, 2), (0, 1)],
                names: &TaskNames::default(),
                logs: Some(".git/dagexec/logs/run-4"),
                eager: false,
            }),
            interrupted(&Interruption {
                signal: "SIGTERM",
                stopped: &[],
                names: &TaskNames::default(),
                logs: None,
                eager: true,
            }),
        ];
        insta::assert_snapshot!(shown.join("\n---\n"));
    }
}
