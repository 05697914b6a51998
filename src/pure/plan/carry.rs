//! Carrying a run's state from an earlier generated plan to one read afresh from its source
//! (an edited `tasks.md`, a re-read parent issue): every source pairs its old and new tasks
//! by its own identity (ID and text, issue number), and the state moves the same way.

use serde_json::Value;

use super::fields;
use super::model::{CompletedTask, Plan, Status, Task};

/// Carries the state of `old`'s tasks to `fresh` along `moved` (old task index → fresh task
/// index): a paired task that is not completed in `fresh` and not `held` keeps its status,
/// result, attempts and extra fields (reviews, questions), except the source's own field
/// `own`; a completed task keeps the summary it was completed with, and the Action's records
/// (the open round, the logs' links, a task's follow-up) name its fresh index. Unpaired tasks
/// start afresh. The records of the attempts (`progress.dagexecAttempts`) follow `same`, the
/// pairing by the source's identity alone (a task whose state does not carry over is still
/// the task those attempts were of): one of a task no longer in the source is dropped, never
/// left to charge the task now at its index, and what it cost is counted apart
/// ([`crate::pure::usage::removed`]): the money was spent.
pub fn carry_state(
    fresh: &mut Plan,
    old: &Plan,
    moved: &[Option<usize>],
    same: &[Option<usize>],
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
        let to = Moved(moved);
        if let Some(f) = new.extra.get_mut(fields::FOLLOW_UP) {
            to.follow_up(f);
        }
        if let Some(Value::Object(checks)) = new.extra.get_mut(fields::FOLLOW_UP_CHECKS) {
            to.keys(checks);
        }
    }
    let mut progress = old.progress.clone();
    let to = Moved(moved);
    if let Some(Value::Object(round)) = progress.extra.get_mut(fields::ROUND) {
        if let Some(Value::Array(tasks)) = round.get_mut("tasks") {
            to.list(tasks);
        }
        if let Some(Value::Array(follow_ups)) = round.get_mut("followUps") {
            follow_ups.retain_mut(|f| to.follow_up(f));
        }
    }
    if let Some(Value::Object(logs)) = progress.extra.get_mut(fields::LOGS) {
        to.keys(logs);
    }
    let mut removed = Vec::new();
    if let Some(Value::Array(records)) = progress.extra.get_mut(fields::ATTEMPTS) {
        records.retain_mut(|r| {
            let to = r["task"].as_u64().map(|j| Moved(same).to(j));
            if let Some(Some(i)) = to {
                r["task"] = i.into();
            }
            if to == Some(None) {
                removed.push(std::mem::take(r));
            }
            to != Some(None)
        });
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
    crate::pure::usage::add_removed_records(fresh, &removed);
}

/// Old task index → fresh task index, for the Action's own records that name tasks by
/// index (`progress.dagexecRound`, `progress.dagexecLogs`, a task's `dagexecFollowUp` and
/// `dagexecFollowUpChecks`): an index whose task is unpaired is dropped from them.
struct Moved<'a>(&'a [Option<usize>]);

impl Moved<'_> {
    fn to(&self, j: u64) -> Option<usize> {
        self.0.get(usize::try_from(j).ok()?).copied().flatten()
    }

    /// A list of task indices.
    fn list(&self, tasks: &mut Vec<Value>) {
        tasks.retain_mut(|t| match t.as_u64().and_then(|j| self.to(j)) {
            Some(i) => {
                *t = i.into();
                true
            }
            None => false,
        });
    }

    /// A map keyed by task index.
    fn keys(&self, map: &mut serde_json::Map<String, Value>) {
        *map = std::mem::take(map)
            .into_iter()
            .filter_map(|(k, v)| Some((self.to(k.parse().ok()?)?.to_string(), v)))
            .collect();
    }

    /// A follow-up (`action::rounds::FollowUp`'s record): its task, the checks it runs and
    /// the tasks it builds on; `false` when its own task is unpaired.
    fn follow_up(&self, f: &mut Value) -> bool {
        let Some(task) = f
            .get("task")
            .and_then(Value::as_u64)
            .and_then(|j| self.to(j))
        else {
            return false;
        };
        f["task"] = task.into();
        for k in ["checks", "onto"] {
            if let Some(Value::Array(tasks)) = f.get_mut(k) {
                self.list(tasks);
            }
        }
        true
    }
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
        let moved = [Some(1), Some(2)];
        carry_state(&mut fresh, &old, &moved, &moved, "own", |_| false);
        assert_eq!(fresh.tasks[2].status, Status::Failed);
        let records = &fresh.progress.extra[crate::pure::plan::fields::ATTEMPTS];
        assert_eq!(records[0]["task"], 2, "{records}");
    }

    /// A task the team removed from its list between two runs takes its attempts' records
    /// out of the plan, but not what they cost: `max-cost` still counts it (the money was
    /// spent), as it counts a removed task's attempt a crash cut short.
    #[test]
    fn a_removed_tasks_recorded_spend_still_counts() {
        let task = |subject: &str| Task {
            subject: subject.into(),
            ..Default::default()
        };
        let record = |task: usize, cost: f64| {
            serde_json::json!({"task": task, "attempt": 1, "start": "2026-01-01T00:00:00Z",
                "end": "2026-01-01T00:01:00Z", "seconds": 60.0, "outcome": "failed",
                "costUsd": cost})
        };
        let mut old = Plan::new("g".into(), vec![task("a"), task("b")]);
        old.tasks[1].status = Status::Failed;
        old.progress.extra.insert(
            crate::pure::plan::fields::ATTEMPTS.into(),
            vec![record(0, 0.5), record(1, 2.0)].into(),
        );
        assert!((crate::pure::usage::spent(&old) - 2.5).abs() < 1e-9);
        let mut fresh = Plan::new("g".into(), vec![task("a")]);
        let moved = [Some(0), None];
        carry_state(&mut fresh, &old, &moved, &moved, "own", |_| false);
        let records = &fresh.progress.extra[crate::pure::plan::fields::ATTEMPTS];
        assert_eq!(records.as_array().map(Vec::len), Some(1), "{records}");
        let spent = crate::pure::usage::spent(&fresh);
        assert!((spent - 2.5).abs() < 1e-9, "{spent}");
        // Carried again (another edit), it is counted once.
        let again_old = fresh.clone();
        let mut again = Plan::new("g".into(), vec![task("a")]);
        carry_state(
            &mut again,
            &again_old,
            &[Some(0)],
            &[Some(0)],
            "own",
            |_| false,
        );
        let spent = crate::pure::usage::spent(&again);
        assert!((spent - 2.5).abs() < 1e-9, "{spent}");
    }

    /// The Action's own records that name tasks by index move with their tasks too: the open
    /// round (its tasks and its follow-ups' tasks, checks and `onto`), the links to the
    /// attempts' logs, and a task's follow-up and the checks kept beside it. Otherwise, after
    /// the team puts a task first in tasks.md mid-round, the round's next part re-checks a
    /// kept merge as another task's, with another task's checks, and links another's log.
    #[test]
    fn the_actions_records_follow_their_task_to_its_new_index() {
        use crate::pure::plan::fields::{FOLLOW_UP, FOLLOW_UP_CHECKS, LOGS, ROUND};
        use serde_json::json;
        let task = |subject: &str| Task {
            subject: subject.into(),
            ..Default::default()
        };
        let mut old = Plan::new("g".into(), vec![task("a"), task("b"), task("c")]);
        old.tasks[1].status = Status::InProgress;
        old.tasks[1].extra.insert(
            FOLLOW_UP.into(),
            json!({"kind": "rebase", "task": 1, "attempt": 1, "onto": [0, 2], "why": "x"}),
        );
        old.tasks[1]
            .extra
            .insert(FOLLOW_UP_CHECKS.into(), json!({"0": [], "2": []}));
        old.progress.extra.insert(
            ROUND.into(),
            json!({"round": 1, "tasks": [0, 1, 2], "parts": 1, "followUps": [
                {"kind": "recheck", "task": 1, "attempt": 1, "patch": "", "checks": [0, 2]},
                {"kind": "recheck", "task": 2, "attempt": 1, "patch": "", "checks": [1]}]}),
        );
        old.progress
            .extra
            .insert(LOGS.into(), json!({"0": "u0", "1": "u1", "2": "u2"}));
        let mut fresh = Plan::new("g".into(), vec![task("new"), task("a"), task("b")]);
        // `c` was rewritten: it is no longer paired.
        let moved = [Some(1), Some(2), None];
        carry_state(&mut fresh, &old, &moved, &moved, "own", |_| false);
        let b = &fresh.tasks[2].extra;
        assert_eq!(
            b[FOLLOW_UP],
            json!({"kind": "rebase", "task": 2, "attempt": 1, "onto": [1], "why": "x"})
        );
        assert_eq!(b[FOLLOW_UP_CHECKS], json!({"1": []}));
        assert_eq!(
            fresh.progress.extra[ROUND],
            json!({"round": 1, "tasks": [1, 2], "parts": 1, "followUps": [
                {"kind": "recheck", "task": 2, "attempt": 1, "patch": "", "checks": [1]}]})
        );
        assert_eq!(fresh.progress.extra[LOGS], json!({"1": "u0", "2": "u1"}));
    }
}
