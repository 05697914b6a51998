//! Carrying a run's state from an earlier generated plan to one read afresh from its source
//! (an edited `tasks.md`, a re-read parent issue): every source pairs its old and new tasks
//! by its own identity (ID and text, issue number), and the state moves the same way.

use serde_json::Value;

use super::model::{CompletedTask, Plan, Status, Task};

/// Carries the state of `old`'s tasks to `fresh` along `moved` (old task index → fresh task
/// index): a paired task that is not completed in `fresh` and not `held` keeps its status,
/// result, attempts and extra fields (reviews, questions), except the source's own field
/// `own`; a completed task keeps the summary it was completed with, and the records of a
/// paired task's attempts (`progress.dagexecAttempts`) name its fresh index. Unpaired tasks
/// start afresh.
pub fn carry_state(
    fresh: &mut Plan,
    old: &Plan,
    moved: &[Option<usize>],
    own: &str,
    held: impl Fn(&Task) -> bool,
) {
    for (j, old_t) in old.tasks.iter().enumerate() {
        let Some(i) = moved.get(j).copied().flatten() else {
            continue;
        };
        let Some(new) = fresh.tasks.get_mut(i) else {
            continue;
        };
        if new.status == Status::Completed || held(old_t) {
            continue;
        }
        new.status = old_t.status;
        new.result.clone_from(&old_t.result);
        new.attempts = old_t.attempts;
        for (k, v) in &old_t.extra {
            if k != own {
                new.extra.insert(k.clone(), v.clone());
            }
        }
    }
    let mut progress = old.progress.clone();
    // An attempt's record follows its task; one of a task left unpaired stays where it was.
    if let Some(Value::Array(records)) = progress.extra.get_mut(super::fields::ATTEMPTS) {
        for r in records {
            let to = r["task"]
                .as_u64()
                .and_then(|j| moved.get(j as usize)?.as_ref());
            if let Some(&i) = to {
                r["task"] = i.into();
            }
        }
    }
    progress.completed_tasks = fresh
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Completed)
        .map(|(i, t)| {
            let kept = old
                .progress
                .completed_tasks
                .iter()
                .find(|c| moved.get(c.index).copied().flatten() == Some(i));
            let summary = kept.map_or_else(
                || t.result.clone().unwrap_or_default(),
                |c| c.summary.clone(),
            );
            CompletedTask {
                extra: kept.map(|c| c.extra.clone()).unwrap_or_default(),
                ..CompletedTask::new(i, summary)
            }
        })
        .collect();
    fresh.progress = progress;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task list edited with a task put first: every task moves one index on, and the
    /// records of what its attempts took and cost (`progress.dagexecAttempts`) move with it,
    /// or the status table, `max-task-cost` and `simulate` read them as another task's.
    #[test]
    fn attempt_records_follow_their_task_to_its_new_index() {
        let task = |subject: &str| Task {
            subject: subject.into(),
            ..Default::default()
        };
        let mut old = Plan::new("g".into(), vec![task("a"), task("b")]);
        old.tasks[1].status = Status::Failed;
        let record = serde_json::json!({"task": 1, "attempt": 1, "start": "2026-01-01T00:00:00Z",
            "end": "2026-01-01T00:01:00Z", "seconds": 60.0, "outcome": "failed", "costUsd": 2.0});
        old.progress.extra.insert(
            crate::pure::plan::fields::ATTEMPTS.into(),
            vec![record].into(),
        );
        let mut fresh = Plan::new("g".into(), vec![task("new"), task("a"), task("b")]);
        carry_state(&mut fresh, &old, &[Some(1), Some(2)], "own", |_| false);
        assert_eq!(fresh.tasks[2].status, Status::Failed);
        let records = &fresh.progress.extra[crate::pure::plan::fields::ATTEMPTS];
        assert_eq!(records[0]["task"], 2, "{records}");
    }
}
