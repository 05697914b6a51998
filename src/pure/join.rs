//! Joins: tasks with no work of their own (`"join": true` in plan.json), done when their
//! blockers are. A Spec Kit phase after a phase of N parallel tasks waits for one join
//! instead of each of its M tasks waiting for each of the N (N + M edges, not N × M).
//!
//! The one place their meaning is kept:
//! - a join is never ready, batched, dispatched or simulated as a job;
//! - [`done`] says which tasks count as done for the ready set, a join counting once its
//!   blockers do (so every driver's ready set, the eager look-ahead's too, is right before a
//!   plan update settles the join);
//! - [`settle`] makes a join's status follow its blockers (completed once all of them are,
//!   with no attempt and no commit line of its own); plan updates call it where statuses
//!   change, and a skipped blocker skips it through the cascade like any dependent;
//! - [`through`] looks through joins to the real tasks they join (a prompt's dependency
//!   results, a skip's cause).

use crate::pure::graph::Dag;
use crate::pure::plan::model::{Plan, Status};

/// Whether the plan has any join (the common case has none, and skips the work).
pub fn any(plan: &Plan) -> bool {
    plan.tasks.iter().any(|t| t.join)
}

/// For each task: completed, about to be (`landing`), or a join whose blockers all are.
pub fn done(plan: &Plan, dag: &Dag, landing: impl Fn(usize) -> bool) -> Vec<bool> {
    let mut done: Vec<bool> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| t.status == Status::Completed || landing(i))
        .collect();
    if any(plan) {
        for &t in dag.topo() {
            let t = t as usize;
            if plan.tasks[t].join && !done[t] {
                done[t] = dag.deps(t).iter().all(|&d| done[d as usize]);
            }
        }
    }
    done
}

/// Makes each join's status follow its blockers: completed once every blocker is (no
/// attempts, no result of its own), pending again when one of them no longer is. A skipped
/// join is the cascade's ([`crate::pure::update::cascade`]). Returns whether any changed.
pub fn settle(plan: &mut Plan, dag: &Dag) -> bool {
    if !any(plan) {
        return false;
    }
    let mut changed = false;
    for &t in dag.topo() {
        let t = t as usize;
        if !plan.tasks[t].join {
            continue;
        }
        let all = dag
            .deps(t)
            .iter()
            .all(|&d| plan.tasks[d as usize].status == Status::Completed);
        let task = &mut plan.tasks[t];
        let to = match task.status {
            Status::Pending | Status::InProgress if all => Status::Completed,
            Status::Completed | Status::InProgress if !all => Status::Pending,
            s => s,
        };
        if to != task.status {
            task.status = to;
            task.attempts = None;
            task.result = None;
            changed = true;
        }
    }
    changed
}

/// `tasks` with each join replaced by the real tasks it joins (through joins of joins),
/// ascending and without repeats.
pub fn through(plan: &Plan, tasks: &[usize]) -> Vec<usize> {
    let mut out = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<usize> = tasks.to_vec();
    while let Some(t) = stack.pop() {
        match plan.tasks.get(t) {
            Some(task) if !task.join => {
                out.insert(t);
            }
            Some(task) if seen.insert(t) => {
                stack.extend(task.blocked_by.iter().copied().filter(|&d| d != t));
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::Task;
    use crate::pure::update::{TaskResult, apply_round, cascade};
    use crate::testing::{plan_of, task};

    /// Tasks 0 and 1, the join 2 of them, tasks 3 and 4 after it.
    fn joined() -> (Plan, Dag) {
        let mut tasks = vec![task(&[], &["a"], &[]), task(&[], &["b"], &[])];
        tasks.push(Task {
            subject: "Phase 1 done".into(),
            blocked_by: vec![0, 1],
            join: true,
            ..Default::default()
        });
        tasks.push(task(&[2], &["c"], &[]));
        tasks.push(task(&[2], &["d"], &[]));
        for (i, t) in tasks.iter_mut().enumerate() {
            if !t.join {
                t.subject = format!("task {i}");
            }
        }
        let plan = plan_of(tasks);
        let dag = Dag::build(&plan).unwrap();
        (plan, dag)
    }

    fn done(index: usize) -> TaskResult {
        TaskResult {
            index,
            status: Status::Completed,
            result: format!("{index} done"),
            attempts: 1,
        }
    }

    #[test]
    fn a_join_completes_in_the_update_that_completes_its_last_blocker() {
        let (mut plan, dag) = joined();
        // No work: the join adds nothing to a depth or a chain.
        assert_eq!((dag.depth(2), dag.depth(3), dag.max_depth()), (1, 2, 2));
        assert_eq!((dag.height(0), dag.height(2)), (2, 1));
        assert!(dag.reaches(0, 3) && dag.reaches(2, 4) && !dag.reaches(3, 4));
        assert_eq!(crate::pure::engine::ready_set(&plan, &dag), [0, 1]);
        apply_round(&mut plan, &dag, &[done(0)], &Default::default());
        assert_eq!(plan.tasks[2].status, Status::Pending);
        // Before an update settles it, the ready set already looks through it.
        assert_eq!(
            crate::pure::engine::ready_set_after(&plan, &dag, &[1]),
            [3, 4]
        );
        apply_round(&mut plan, &dag, &[done(1)], &Default::default());
        assert_eq!(plan.tasks[2].status, Status::Completed);
        assert_eq!(plan.tasks[2].attempts, None);
        assert!(plan.tasks[2].join, "trimming keeps the mark");
        assert_eq!(
            plan.progress.completed_tasks.len(),
            2,
            "no entry for the join"
        );
        assert_eq!(crate::pure::engine::ready_set(&plan, &dag), [3, 4]);
        assert_eq!(plan.count(Status::Completed), 2);
        assert_eq!(plan.total(), 4);
        assert_eq!(through(&plan, &plan.tasks[3].blocked_by), [0, 1]);
    }

    #[test]
    fn a_failed_blocker_skips_through_the_join_naming_itself() {
        let (mut plan, dag) = joined();
        plan.tasks[0].status = Status::Completed;
        plan.tasks[1].status = Status::Failed;
        let skipped = cascade(&mut plan, &dag);
        assert_eq!(skipped, [3, 4], "the join is skipped but not listed");
        assert_eq!(plan.tasks[2].status, Status::Skipped);
        assert_eq!(
            plan.tasks[3].result.as_deref(),
            Some("Skipped: dependency task 1 (task 1) failed")
        );
        // Reopened when the failed task gets another chance, and settled again after.
        plan.tasks[1].status = Status::Pending;
        let reopened = crate::pure::update::reopen_skipped_dependents(&mut plan, &dag, 1);
        assert_eq!(reopened, [3, 4]);
        assert_eq!(plan.tasks[2].status, Status::Pending);
        plan.tasks[1].status = Status::Completed;
        assert!(settle(&mut plan, &dag));
        assert_eq!(plan.tasks[2].status, Status::Completed);
        plan.tasks[0].status = Status::Pending;
        assert!(settle(&mut plan, &dag));
        assert_eq!(plan.tasks[2].status, Status::Pending);
    }

    /// On resume a completed task whose work is not in the commits runs again: a join it
    /// completed waits again, and a join is never verified (it has no files).
    #[test]
    fn a_join_waits_again_when_resume_resets_one_of_its_blockers() {
        let (mut plan, dag) = joined();
        apply_round(&mut plan, &dag, &[done(0), done(1)], &Default::default());
        assert_eq!(plan.tasks[2].status, Status::Completed);
        let work = crate::pure::update::prepare_resume(&mut plan);
        let verified: Vec<usize> = work.verify.iter().map(|v| v.task).collect();
        assert_eq!(verified, [0, 1]);
        let failures = [(1, "its file is missing".to_string())].into();
        crate::pure::update::fail_verification(&mut plan, &failures);
        assert_eq!(plan.tasks[1].status, Status::Pending);
        assert_eq!(plan.tasks[2].status, Status::Pending);
        assert_eq!(crate::pure::engine::ready_set(&plan, &dag), [1]);
    }

    /// `graph` draws a join as a junction point, without a status class or a label.
    #[test]
    fn a_join_is_drawn_as_a_junction_point() {
        use crate::pure::render::graph::{GraphFormat, render};
        let (plan, _) = joined();
        let mermaid = render(&plan, GraphFormat::Mermaid);
        assert!(mermaid.contains("    t2(( ))\n"), "{mermaid}");
        assert!(mermaid.contains("t0 --> t2") && mermaid.contains("t2 --> t3"));
        assert!(mermaid.contains("class t0,t1,t3,t4 pending"), "{mermaid}");
        assert!(!mermaid.contains("Phase 1 done"), "{mermaid}");
        let dot = render(&plan, GraphFormat::Dot);
        assert!(dot.contains("t2 [shape=point"), "{dot}");
        assert!(!dot.contains("Phase 1 done"), "{dot}");
    }
}
