//! The plan updater (seed section C) and the plan-state decisions around it: applying a
//! round's results, progressive trimming, the cascading skip, the circuit breaker, completion
//! (archive or keep), and resume reset. Pure: it mutates a [`Plan`] in memory and returns what
//! the runner must do on disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::pure::graph::Dag;
use crate::pure::plan::model::{Agent, CompletedTask, Metadata, Plan, Status, Task};

/// One task's outcome for the round, as the processor decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    pub index: usize,
    pub status: Status,
    pub result: String,
    pub attempts: u32,
}

/// The updater's input beyond the results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundNotes {
    pub surprises: Vec<String>,
    pub decisions: Vec<String>,
    /// Waves mode: the wave just finished (`progress.currentWave`, `completedTasks[].wave`).
    pub wave: Option<u64>,
}

/// The seed's `circuitBreaker` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    pub total_tasks: usize,
    /// Tasks still pending before this round's cascade was applied.
    pub pending_count: usize,
    /// Tasks this round's cascade marked skipped.
    pub would_be_skipped: usize,
    pub should_abort: bool,
}

impl CircuitBreaker {
    /// Abort when the plan has more than 3 tasks, the cascade skipped at least one, and
    /// 2·skipped ≥ pending.
    pub fn evaluate(total_tasks: usize, pending_count: usize, would_be_skipped: usize) -> Self {
        CircuitBreaker {
            total_tasks,
            pending_count,
            would_be_skipped,
            should_abort: total_tasks > 3
                && would_be_skipped >= 1
                && 2 * would_be_skipped >= pending_count,
        }
    }

    /// The seed's abort message.
    pub fn message(&self) -> String {
        format!(
            "Circuit breaker triggered: {}/{} pending tasks would be skipped due to cascading failures.",
            self.would_be_skipped, self.pending_count
        )
    }
}

/// The updater's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateReport {
    pub skip_list: Vec<usize>,
    pub circuit_breaker: CircuitBreaker,
}

/// Applies a round (seed C.3 steps 2–6, 8): results, completedTasks, surprises/decisions,
/// trimming, cascade, circuit breaker.
pub fn apply_round(
    plan: &mut Plan,
    dag: &Dag,
    results: &[TaskResult],
    notes: &RoundNotes,
) -> UpdateReport {
    for r in results {
        let task = &mut plan.tasks[r.index];
        task.status = r.status;
        task.result = Some(r.result.clone());
        task.attempts = Some(r.attempts);
        if r.status == Status::Completed {
            let mut entry = CompletedTask {
                wave: notes.wave,
                ..CompletedTask::new(r.index, r.result.clone())
            };
            entry.extra.insert(
                crate::pure::plan::fields::COMPLETED_ATTEMPTS.into(),
                r.attempts.into(),
            );
            let list = &mut plan.progress.completed_tasks;
            match list.iter_mut().find(|c| c.index == r.index) {
                Some(existing) => *existing = entry,
                None => list.push(entry),
            }
        }
    }
    // A join whose last blocker completed in this round completes with it (no entry in
    // completedTasks: it did no work).
    crate::pure::join::settle(plan, dag);
    if let Some(w) = notes.wave {
        plan.progress.current_wave = Some(w);
    }
    plan.progress
        .surprises
        .extend(notes.surprises.iter().cloned().map(Into::into));
    plan.progress
        .decisions
        .extend(notes.decisions.iter().cloned().map(Into::into));
    for t in &mut plan.tasks {
        if t.status == Status::Completed {
            trim(t);
        }
    }
    let pending_count = plan.count(Status::Pending);
    let skip_list = cascade(plan, dag);
    UpdateReport {
        circuit_breaker: CircuitBreaker::evaluate(plan.total(), pending_count, skip_list.len()),
        skip_list,
    }
}

/// Puts the tasks the cascade skipped downstream of `index` back to pending, for when `index`
/// gets another chance: those another failed or blocked task still cuts off stay skipped
/// ([`reopen`]). Returns the reopened, in plan order.
pub fn reopen_skipped_dependents(plan: &mut Plan, dag: &Dag, index: usize) -> Vec<usize> {
    let mut below = vec![false; plan.tasks.len()];
    below[index] = true;
    for &t in dag.topo() {
        let t = t as usize;
        below[t] |= dag.deps(t).iter().any(|&d| below[d as usize]);
    }
    reopen(plan, dag, |i| i != index && below[i])
}

/// A plan read again from its task list: every skipped task is pending again, then the
/// cascade skips those whose chain still reaches a failed or blocked task. What the team
/// settled in the file (a failed task cancelled, reopened or marked done) frees what waited
/// for it. Returns the tasks reopened, ascending.
pub fn reopen_stale_skips(plan: &mut Plan, dag: &Dag) -> Vec<usize> {
    reopen(plan, dag, |_| true)
}

/// How the result of a task [`withdraw`] skipped starts.
pub const NOT_RUN: &str = "not run: ";

/// Tasks the team took out of the run while it ran (`tasks`, by `why`: its task list, edited
/// in the work tree, no longer leaves them open): each is skipped, and so is every pending
/// task that waits for one, directly or not — none of them starts in this run. The next
/// reading of the list reopens every skip ([`reopen_stale_skips`]), so the team's file, as
/// committed then, decides. Returns the tasks skipped because they wait, ascending.
pub fn withdraw(plan: &mut Plan, dag: &Dag, tasks: &[usize], why: &str) -> Vec<usize> {
    let skip = |t: &mut Task, why: String| {
        t.status = Status::Skipped;
        t.result = Some(format!("{NOT_RUN}{why}"));
    };
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    let mut waiting = Vec::new();
    let mut stack = tasks.to_vec();
    for &t in tasks {
        skip(&mut plan.tasks[t], why.to_string());
    }
    while let Some(t) = stack.pop() {
        for &d in dag.dependents(t) {
            let task = &mut plan.tasks[d as usize];
            if task.status == Status::Pending {
                skip(task, format!("it waits for task {}", names.get(t)));
                waiting.push(d as usize);
                stack.push(d as usize);
            }
        }
    }
    waiting.sort_unstable();
    waiting
}

/// The skipped tasks `which` picks are pending again, then the cascade skips those whose chain
/// still reaches a failed or blocked task; the others' skip results are cleared. Returns them
/// (joins aside), ascending.
fn reopen(plan: &mut Plan, dag: &Dag, which: impl Fn(usize) -> bool) -> Vec<usize> {
    let skipped: Vec<usize> = (0..plan.tasks.len())
        .filter(|&i| which(i) && plan.tasks[i].status == Status::Skipped)
        .collect();
    for &i in &skipped {
        plan.tasks[i].status = Status::Pending;
    }
    crate::pure::join::settle(plan, dag);
    cascade(plan, dag);
    let mut reopened = Vec::new();
    for i in skipped {
        let t = &mut plan.tasks[i];
        if t.status == Status::Pending {
            t.result = None;
            if !t.join {
                reopened.push(i);
            }
        }
    }
    reopened
}

/// Progressive trimming (seed C.3 step 5; v3 finalizer phase 2 step 3): a completed task
/// keeps only subject, status, result, metadata.files, blockedBy, agent.role and agent.model
/// (and, in the waves variant, `wave`). Everything else goes, including v3's `prompt` and
/// `fileOverlaps` and fields dagexec does not know: the seed's list is exhaustive.
pub fn trim(task: &mut Task) {
    let agent = task.agent.take().map(|a| Agent {
        role: a.role,
        model: a.model,
        ..Default::default()
    });
    let metadata = task.metadata.take().map(|m| Metadata {
        files: m.files,
        ..Default::default()
    });
    *task = Task {
        subject: std::mem::take(&mut task.subject),
        status: task.status,
        result: task.result.take(),
        blocked_by: std::mem::take(&mut task.blocked_by),
        metadata,
        agent,
        wave: task.wave,
        join: task.join,
        ..Default::default()
    };
}

/// Cascading skip (seed C.3 step 6): every pending task whose `blockedBy` chain reaches a
/// failed or blocked task becomes skipped, with a result naming the dependency and the root
/// cause. Returns the newly skipped tasks, ascending. A join is skipped like any dependent
/// but neither returned nor named: a task behind one names the task the join waited for.
pub fn cascade(plan: &mut Plan, dag: &Dag) -> Vec<usize> {
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    // root[t]: the failed/blocked task that t's failure traces back to.
    let mut root: Vec<Option<usize>> = vec![None; plan.tasks.len()];
    let mut skipped = Vec::new();
    for &t in dag.topo() {
        let t = t as usize;
        let status = plan.tasks[t].status;
        if status.is_failure() {
            root[t] = Some(t);
            continue;
        }
        if !matches!(status, Status::Pending | Status::Skipped) {
            continue;
        }
        let Some(&dep) = dag.deps(t).iter().find(|&&d| root[d as usize].is_some()) else {
            continue;
        };
        let mut dep = dep as usize;
        let cause = root[dep].expect("checked above");
        root[t] = Some(cause);
        // Through joins, to the real task whose failure or skip reached this one.
        while plan.tasks[dep].join {
            let Some(&next) = dag.deps(dep).iter().find(|&&d| root[d as usize].is_some()) else {
                break;
            };
            dep = next as usize;
        }
        if status == Status::Pending {
            let verb = |i: usize| match plan.tasks[i].status {
                Status::Blocked => "was blocked",
                _ => "failed",
            };
            let named = |i: usize| {
                let subject = names.subject(i, &plan.tasks[i].subject);
                format!("task {} ({subject})", names.get(i))
            };
            let why = if dep == cause {
                verb(dep).to_string()
            } else {
                format!("was skipped because {} {}", named(cause), verb(cause))
            };
            let result = format!("Skipped: dependency {} {why}", named(dep));
            let task = &mut plan.tasks[t];
            task.status = Status::Skipped;
            task.result = Some(result);
            if !task.join {
                skipped.push(t);
            }
        }
    }
    skipped.sort_unstable();
    skipped
}

/// What becomes of the plan file when a run ends (seed Step 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Every task completed: move the plan to `to` (v2: `plan.done.json`; v3:
    /// `history/<UTC timestamp>-plan.json`).
    Archive { to: PathBuf },
    /// Something is not completed: the plan stays for resume.
    Keep,
}

/// Decides completion. `plan_path` is the plan file; `timestamp` is UTC `%Y%m%dT%H%M%SZ`.
pub fn completion(plan: &Plan, plan_path: &Path, timestamp: &str) -> Completion {
    if plan
        .tasks
        .iter()
        .any(|t| !t.join && t.status != Status::Completed)
    {
        return Completion::Keep;
    }
    let dir = plan_path.parent().unwrap_or(Path::new(""));
    let to = if plan.schema_version >= 3 {
        dir.join("history").join(format!("{timestamp}-plan.json"))
    } else {
        dir.join("plan.done.json")
    };
    Completion::Archive { to }
}

/// The seed's closing line: "All {count} tasks completed." or "Execution incomplete. …".
pub fn closing_line(plan: &Plan) -> String {
    let total = plan.total();
    let done = plan.count(Status::Completed);
    if done == total && total == 1 {
        "The plan's one task completed.".to_string()
    } else if done == total {
        format!("All {total} tasks completed.")
    } else {
        format!("Execution incomplete. {done}/{total} completed.")
    }
}

/// A completed task whose files must be verified on resume: `creates` must exist, `modifies`
/// must be committed (no uncommitted change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub task: usize,
    pub creates: Vec<String>,
    pub modifies: Vec<String>,
}

/// What the runner must do on disk after [`prepare_resume`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeWork {
    /// Tasks moved from `in_progress` back to pending. (The seed also reverts and deletes their
    /// declared files; dagexec does not: a task's work never reaches the work tree before its
    /// round is committed, so what is there is the user's.)
    pub reset: Vec<usize>,
    /// Of those, the tasks whose last attempt had completed (or asked a question) before the
    /// run stopped: the attempt is given back, as a Ctrl-C gives back what it keeps from
    /// being committed.
    pub given_back: Vec<usize>,
    pub verify: Vec<Verify>,
}

/// Resume reset (seed Step 1): `in_progress` → pending, and the verification the runner must
/// perform. Call [`fail_verification`] with what failed.
///
/// The seed increments `attempts` here to count the interrupted attempt; dagexec counts an
/// attempt when it starts it (the plan is saved with the new count before the worker runs),
/// so the interrupted one is already counted and a crash loop can never run a task more than
/// [`MAX_ATTEMPTS`](crate::pure::outcome::MAX_ATTEMPTS) times. An attempt the plan records as
/// having completed (or asked a question) was not cut short: only its round's commit was, so
/// it is given back. A task left with no attempts is failed by [`fail_exhausted`].
pub fn prepare_resume(plan: &mut Plan) -> ResumeWork {
    let mut work = ResumeWork::default();
    let records = crate::pure::usage::records(plan);
    for (i, t) in plan.tasks.iter_mut().enumerate() {
        match t.status {
            Status::InProgress => {
                t.status = Status::Pending;
                work.reset.push(i);
                let last = records
                    .iter()
                    .rfind(|r| r.task == i && r.attempt == t.attempts() && !r.rebase);
                if last.is_some_and(|r| r.outcome.ended_well()) {
                    t.attempts = Some(t.attempts() - 1).filter(|&n| n > 0);
                    work.given_back.push(i);
                }
            }
            Status::Completed if !t.join => work.verify.push(Verify {
                task: i,
                creates: t.creates().to_vec(),
                modifies: t.modifies().to_vec(),
            }),
            _ => {}
        }
    }
    work
}

/// What [`fail_exhausted`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exhausted {
    /// Pending tasks that had used every attempt, now failed.
    pub failed: Vec<usize>,
    /// Tasks the cascade skipped because of them.
    pub skipped: Vec<usize>,
}

/// Pending tasks that have already used [`MAX_ATTEMPTS`](crate::pure::outcome::MAX_ATTEMPTS)
/// attempts fail instead of getting another, and the cascade skips their dependents. A task
/// gets here only when its last attempt's result was never committed: it was cut short
/// without a word (`kill -9`, a power loss: counted when it started, no record of an
/// interrupt), or it failed and the user interrupted the run before its round was committed.
/// An attempt the user's interrupt stopped was given back when it stopped.
pub fn fail_exhausted(plan: &mut Plan, dag: &Dag) -> Exhausted {
    let max = crate::pure::outcome::MAX_ATTEMPTS;
    let mut failed = Vec::new();
    for (i, t) in plan.tasks.iter_mut().enumerate() {
        if t.status == Status::Pending && !t.join && t.attempts() >= max {
            t.status = Status::Failed;
            t.result = Some(format!(
                "attempt {} of {max} never had its result committed (the run was killed while it ran, or interrupted after it failed); no attempts left",
                t.attempts()
            ));
            failed.push(i);
        }
    }
    if failed.is_empty() {
        return Exhausted::default();
    }
    let skipped = cascade(plan, dag);
    Exhausted { failed, skipped }
}

/// Completed tasks whose verification failed go back to pending, with the reason as result,
/// and leave `progress.completedTasks`.
pub fn fail_verification(plan: &mut Plan, failures: &BTreeMap<usize, String>) {
    for (&i, why) in failures {
        let t = &mut plan.tasks[i];
        if t.status == Status::Completed {
            t.status = Status::Pending;
            t.result = Some(format!("reset on resume: {why}"));
        }
    }
    // A join completed with a task reset here waits again.
    if crate::pure::join::any(plan)
        && let Ok(dag) = Dag::build(plan)
    {
        crate::pure::join::settle(plan, &dag);
    }
    plan.progress
        .completed_tasks
        .retain(|c| !failures.contains_key(&c.index));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::example;

    fn res(index: usize, status: Status, result: &str, attempts: u32) -> TaskResult {
        TaskResult {
            index,
            status,
            result: result.into(),
            attempts,
        }
    }

    #[test]
    fn results_progress_and_trim() {
        let mut p = example("auth-v2.json");
        let dag = Dag::build(&p).unwrap();
        let notes = RoundNotes {
            surprises: vec!["schema had a User already".into()],
            decisions: vec!["kept bcrypt".into()],
            wave: None,
        };
        let rep = apply_round(
            &mut p,
            &dag,
            &[
                res(0, Status::Completed, "User model added", 1),
                res(1, Status::Completed, "helper", 2),
            ],
            &notes,
        );
        assert_eq!(rep.skip_list, Vec::<usize>::new());
        assert!(!rep.circuit_breaker.should_abort);
        let v = serde_json::to_value(&p.tasks[0]).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "subject": "Create user model", "status": "completed", "result": "User model added",
                "blockedBy": [],
                "metadata": {"files": {"create": ["prisma/migrations/001_user/migration.sql"], "modify": ["prisma/schema.prisma"]}},
                "agent": {"role": "backend engineer", "model": "sonnet"}
            })
        );
        let progress = serde_json::to_value(&p.progress).unwrap();
        assert_eq!(
            progress,
            serde_json::json!({
                "completedTasks": [
                    {"index": 0, "summary": "User model added", "attempts": 1},
                    {"index": 1, "summary": "helper", "attempts": 2}
                ],
                "surprises": ["schema had a User already"], "decisions": ["kept bcrypt"]
            })
        );
        // Pending tasks are untouched.
        assert!(p.tasks[2].description.is_some());
    }

    #[test]
    fn v3_trim_drops_prompt_and_waves_keep_wave() {
        let mut p = example("auth-v3.json");
        let dag = Dag::build(&p).unwrap();
        apply_round(
            &mut p,
            &dag,
            &[res(0, Status::Completed, "ok", 1)],
            &RoundNotes::default(),
        );
        assert!(p.tasks[0].prompt.is_none() && p.tasks[0].file_overlaps.is_none());
        assert!(p.tasks[1].prompt.is_some());

        let mut w = example("auth-v2-waves.json");
        let dag = Dag::build(&w).unwrap();
        let notes = RoundNotes {
            wave: Some(1),
            ..Default::default()
        };
        apply_round(&mut w, &dag, &[res(0, Status::Completed, "ok", 1)], &notes);
        assert_eq!(w.tasks[0].wave, Some(1));
        assert_eq!(w.progress.current_wave, Some(1));
        assert_eq!(w.progress.completed_tasks[0].wave, Some(1));
        assert!(w.is_resume());
        let mut fresh = example("auth-v2-waves.json");
        assert!(!fresh.is_resume(), "currentWave 0 is a fresh start");
        fresh.progress.current_wave = Some(2);
        assert!(
            fresh.is_resume(),
            "currentWave > 0 is a resume even with every task pending"
        );
    }

    #[test]
    fn cascade_names_the_failed_dependency() {
        // auth-v2: 2 ← {0,1}, 3 ← 0, 4 ← {2,3}, 5 independent.
        let mut p = example("auth-v2.json");
        let dag = Dag::build(&p).unwrap();
        let rep = apply_round(
            &mut p,
            &dag,
            &[
                res(0, Status::Failed, "prisma broke", 3),
                res(1, Status::Completed, "ok", 1),
                res(5, Status::Completed, "ok", 1),
            ],
            &RoundNotes::default(),
        );
        assert_eq!(rep.skip_list, [2, 3, 4]);
        assert_eq!(
            p.tasks[2].result.as_deref(),
            Some("Skipped: dependency task 0 (Create user model) failed")
        );
        assert_eq!(
            p.tasks[4].result.as_deref(),
            Some(
                "Skipped: dependency task 2 (Implement sign-up endpoint) was skipped because task 0 (Create user model) failed"
            )
        );
        // pending before the cascade: 2, 3, 4 → 3 skipped of 3 pending → abort (6 tasks > 3).
        assert_eq!(
            rep.circuit_breaker,
            CircuitBreaker {
                total_tasks: 6,
                pending_count: 3,
                would_be_skipped: 3,
                should_abort: true
            }
        );
        assert_eq!(
            rep.circuit_breaker.message(),
            "Circuit breaker triggered: 3/3 pending tasks would be skipped due to cascading failures."
        );

        let mut p = example("auth-v2.json");
        let rep = apply_round(
            &mut p,
            &dag,
            &[res(1, Status::Blocked, "no bcrypt", 1)],
            &RoundNotes::default(),
        );
        assert_eq!(rep.skip_list, [2, 4]);
        assert_eq!(
            p.tasks[2].result.as_deref(),
            Some("Skipped: dependency task 1 (Add password hashing helper) was blocked")
        );
        // pending before: 0, 2, 3, 4, 5 = 5; skipped 2; 4 < 5 → no abort.
        assert!(!rep.circuit_breaker.should_abort);
    }

    /// A task skipped because of two failures stays skipped when one of them gets another
    /// chance (`dagexec retry`, `answer`): the other still cuts it off, so it is not said to
    /// be pending again, and its skip names the failure that holds it now.
    #[test]
    fn reopening_leaves_skipped_what_another_failure_still_cuts_off() {
        // auth-v2: 2 ← {0,1}, 3 ← 0, 4 ← {2,3}.
        let mut p = example("auth-v2.json");
        let dag = Dag::build(&p).unwrap();
        let results = [
            res(0, Status::Blocked, "which database?", 1),
            res(1, Status::Failed, "bcrypt broke", 3),
        ];
        apply_round(&mut p, &dag, &results, &RoundNotes::default());
        assert_eq!(p.count(Status::Skipped), 3);
        p.tasks[0].status = Status::Pending;
        assert_eq!(reopen_skipped_dependents(&mut p, &dag, 0), [3]);
        assert_eq!(p.tasks[3].status, Status::Pending);
        assert_eq!(
            p.tasks[2].result.as_deref(),
            Some("Skipped: dependency task 1 (Add password hashing helper) failed")
        );
        assert_eq!(p.tasks[4].status, Status::Skipped);
    }

    #[test]
    fn circuit_breaker_table() {
        let cases = [
            // (total, pending, skipped, abort)
            (6, 3, 3, true),
            (6, 4, 2, true),
            (6, 5, 2, false),
            (4, 2, 1, true),
            (3, 2, 2, false), // 3 tasks or fewer: never
            (10, 0, 0, false),
            (10, 1, 0, false), // nothing skipped: never
            (10, 9, 5, true),
            (10, 9, 4, false),
        ];
        for (total, pending, skipped, abort) in cases {
            assert_eq!(
                CircuitBreaker::evaluate(total, pending, skipped).should_abort,
                abort,
                "{total} {pending} {skipped}"
            );
        }
    }

    #[test]
    fn completion_and_closing_line() {
        let mut p = example("auth-v2.json");
        let plan_path = Path::new(".design/plan.json");
        assert_eq!(
            completion(&p, plan_path, "20261122T000000Z"),
            Completion::Keep
        );
        assert_eq!(closing_line(&p), "Execution incomplete. 0/6 completed.");
        for t in &mut p.tasks {
            t.status = Status::Completed;
        }
        assert_eq!(
            completion(&p, plan_path, "x"),
            Completion::Archive {
                to: ".design/plan.done.json".into()
            }
        );
        assert_eq!(closing_line(&p), "All 6 tasks completed.");
        p.tasks.truncate(1);
        assert_eq!(closing_line(&p), "The plan's one task completed.");
        p.schema_version = 3;
        assert_eq!(
            completion(&p, plan_path, "20261122T031500Z"),
            Completion::Archive {
                to: ".design/history/20261122T031500Z-plan.json".into()
            }
        );
    }

    #[test]
    fn resume_resets_and_verifies() {
        let mut p = example("auth-v2.json");
        p.tasks[0].status = Status::Completed;
        p.tasks[1].status = Status::InProgress;
        p.tasks[1].attempts = Some(1);
        p.tasks[3].status = Status::InProgress;
        p.progress.completed_tasks.push(CompletedTask {
            index: 0,
            summary: "x".into(),
            wave: None,
            extra: Default::default(),
        });
        let work = prepare_resume(&mut p);
        assert_eq!(work.reset, [1, 3]);
        // The interrupted attempt was counted when it started.
        assert_eq!(
            (p.tasks[1].status, p.tasks[1].attempts),
            (Status::Pending, Some(1))
        );
        assert_eq!(p.tasks[3].attempts, None);
        assert_eq!(
            work.verify,
            [Verify {
                task: 0,
                creates: vec!["prisma/migrations/001_user/migration.sql".into()],
                modifies: vec!["prisma/schema.prisma".into()]
            }]
        );
        fail_verification(
            &mut p,
            &BTreeMap::from([(
                0,
                "prisma/schema.prisma has uncommitted changes".to_string(),
            )]),
        );
        assert_eq!(p.tasks[0].status, Status::Pending);
        assert!(p.progress.completed_tasks.is_empty());
    }

    /// An attempt recorded as completed (or blocked) was not cut short by the crash, only its
    /// round's commit: given back. One cut short (no record, or its own record failed), a
    /// rebase's record, or an earlier attempt's completion: still counted.
    #[test]
    fn resume_gives_back_an_attempt_that_completed_before_the_crash() {
        use crate::pure::usage::{AttemptRecord, Measured, Outcome, record};
        let mut p = example("auth-v2.json");
        let at = |task, attempt, outcome| {
            let m = Measured::since(jiff::Timestamp::now(), Default::default());
            AttemptRecord::new(task, attempt, &m, outcome)
        };
        for i in 0..5 {
            p.tasks[i].status = Status::InProgress;
            p.tasks[i].attempts = Some(2);
        }
        record(&mut p, &at(0, 2, Outcome::Completed));
        record(&mut p, &at(1, 2, Outcome::Failed));
        record(&mut p, &at(2, 1, Outcome::Completed));
        let mut rebase = at(3, 2, Outcome::Completed);
        rebase.rebase = true;
        record(&mut p, &rebase);
        record(&mut p, &at(4, 2, Outcome::Completed));
        record(&mut p, &at(4, 2, Outcome::Blocked));
        let work = prepare_resume(&mut p);
        assert_eq!(work.reset, [0, 1, 2, 3, 4]);
        assert_eq!(work.given_back, [0, 4]);
        let attempts: Vec<_> = p.tasks[..5].iter().map(|t| t.attempts).collect();
        assert_eq!(attempts, [Some(1), Some(2), Some(2), Some(2), Some(1)]);
    }
}
