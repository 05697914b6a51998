//! The seed's round on Actions (`schedule: rounds`). A round is the whole ready set, as
//! locally: its tasks that share files run one after another, retries belong to the round,
//! and the plan update (results, cascade) and the circuit breaker run once, when every task
//! of the round is resolved. A job matrix cannot order its jobs, so a round may take several
//! workflow runs ("parts"): each part runs the next conflict-free group of the round's
//! unresolved tasks ([`crate::pure::engine::sequential_groups`]; a retry is unresolved until it
//! completes or fails for good), and its finalize commits the accepted patches and the
//! tasks' outcomes so the next part's jobs start from them. The part that resolves the last
//! task closes the round: one update, one breaker decision, the round commit.
//!
//! The branch is the only state between runs, so an open round is recorded in the plan
//! (`progress.dagexecRound`, [`OpenRound`]). What a part decided is in the tasks themselves
//! (status, result, attempts, `dagexecRetryPrompt`), so a plan read mid-round (the PR body,
//! a local `dagexec run` on the branch) never redoes committed work. Pure: reads and writes a
//! [`Plan`] in memory.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

mod follow;
pub use follow::{BuiltOn, FollowUp};

use crate::pure::engine;
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::update::TaskResult;

/// What the plan job handed over.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub branch: String,
    pub base: String,
    pub round: u32,
    /// The matrix JSON (empty when the plan job found no work).
    pub matrix: String,
    /// The plan job's conclusion and message.
    pub planned: crate::action::protocol::PlanConclusion,
    pub planned_message: String,
}

pub use crate::pure::plan::fields::ROUND as FIELD;

/// A round that has started on the branch and is not yet closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRound {
    /// The round's number (`progress.round` + 1 while it is open).
    pub round: u32,
    /// The round: the whole ready set when it started, ascending.
    pub tasks: Vec<usize>,
    /// The parts (workflow runs) committed so far.
    pub parts: u32,
    /// `overlap: merge` only: the tasks whose next job re-checks a merge or rebases (see
    /// [`follow`]); absent from the record otherwise.
    #[serde(default, rename = "followUps", skip_serializing_if = "Vec::is_empty")]
    pub follow_ups: Vec<FollowUp>,
}

/// The round the next workflow run works on, and what happened to a record that no longer fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub open: OpenRound,
    /// The round was already open on the branch (not started by this run).
    pub resumed: bool,
    /// Said in the log: a record dropped, or tasks taken out of the round.
    pub notes: Vec<String>,
}

/// The open round recorded in `plan`, reconciled with what the plan says now (a person may
/// have changed it between two parts: `/execute retry`, an answer, an edit by hand):
/// - a record that is not dagexec's, is not the round after `progress.round`, or names a task
///   the plan lacks (or one twice) is dropped, and a new round starts;
/// - a task of the round that is pending but no longer ready (a blocker is not completed) is
///   taken out of it (it waits for a later round);
/// - a task resolved in an earlier part that is pending again (`/execute retry`, an answer)
///   runs again in this round.
///
/// Without a usable record, the next round starts: the whole ready set (`None` when nothing
/// is ready).
pub fn current(plan: &Plan, dag: &Dag) -> Option<Current> {
    let mut notes = Vec::new();
    let next = crate::flow::round_counter(plan) + 1;
    if let Some(v) = plan.progress.extra.get(FIELD) {
        match serde_json::from_value::<OpenRound>(v.clone()) {
            Err(e) => notes.push(format!(
                "progress.{FIELD} is not dagexec's open-round record ({e}); it is dropped and a new round starts"
            )),
            Ok(r) if r.round != next => notes.push(format!(
                "progress.{FIELD} is for round {}, but the plan's last round is {} (progress.round); the record is dropped and round {next} starts",
                r.round,
                next - 1
            )),
            Ok(r) if r.tasks.iter().any(|&t| t >= plan.tasks.len()) => notes.push(format!(
                "the open round {} names tasks {:?}, but the plan has {} task(s) (was it edited?); the record is dropped and a new round starts",
                r.round,
                r.tasks,
                plan.tasks.len()
            )),
            Ok(r) if r.tasks.iter().collect::<BTreeSet<_>>().len() != r.tasks.len() => notes.push(format!(
                "the open round {} names a task twice ({:?}); the record is dropped and a new round starts",
                r.round, r.tasks
            )),
            Ok(mut r) => {
                let ready = engine::ready_set(plan, dag);
                let (keep, out): (Vec<usize>, Vec<usize>) = r
                    .tasks
                    .iter()
                    .partition(|&&t| plan.tasks[t].status != Status::Pending || ready.contains(&t));
                if !out.is_empty() {
                    notes.push(format!(
                        "task(s) {out:?} of the open round {} are no longer ready (a blocker is not completed); they wait for a later round",
                        r.round
                    ));
                }
                r.tasks = keep;
                r.tasks.sort_unstable();
                // A follow-up holds only while its task is pending in the round at the
                // attempt it continues (an `/execute retry` or an edit starts it afresh).
                let before = r.follow_ups.len();
                r.follow_ups.retain(|f| {
                    let t = f.task();
                    r.tasks.contains(&t)
                        && plan.tasks[t].status == Status::Pending
                        && plan.tasks[t].attempts() == f.attempt()
                });
                r.follow_ups.dedup_by_key(|f| f.task());
                if r.follow_ups.len() != before {
                    notes.push(format!(
                        "{} merge follow-up(s) of the open round {} no longer fit the plan; those tasks run an ordinary attempt",
                        before - r.follow_ups.len(),
                        r.round
                    ));
                }
                return Some(Current {
                    open: r,
                    resumed: true,
                    notes,
                });
            }
        }
    }
    let ready = engine::ready_set(plan, dag);
    (!ready.is_empty()).then_some(Current {
        open: OpenRound {
            round: next,
            tasks: ready,
            parts: 0,
            follow_ups: Vec::new(),
        },
        resumed: false,
        notes,
    })
}

impl OpenRound {
    /// The round's tasks not yet resolved: pending in the plan (never run, retried, or
    /// reopened by a person).
    pub fn unresolved(&self, plan: &Plan) -> Vec<usize> {
        self.tasks
            .iter()
            .copied()
            .filter(|&t| plan.tasks[t].status == Status::Pending)
            .collect()
    }

    /// What the next part runs: the first sequential group of the unresolved tasks (no two
    /// of them conflict; the tasks sharing files with them wait for a later part).
    pub fn next_part(&self, plan: &Plan, dag: &Dag, conflicts: &Conflicts) -> Vec<usize> {
        engine::sequential_groups(&self.unresolved(plan), dag, conflicts)
            .into_iter()
            .next()
            .unwrap_or_default()
    }

    /// The follow-up `task` waits for, if any (`overlap: merge`).
    pub fn follow_up(&self, task: usize) -> Option<&FollowUp> {
        self.follow_ups.iter().find(|f| f.task() == task)
    }

    /// Whether `task`'s next job re-checks a merge (`overlap: merge`): no worker runs in it.
    pub fn rechecks(&self, task: usize) -> bool {
        matches!(self.follow_up(task), Some(FollowUp::Recheck { .. }))
    }

    /// The attempt number `task`'s next job carries: a follow-up's own (a re-check or a
    /// rebase is not a new attempt), else the task's attempts + 1.
    pub fn entry_attempt(&self, plan: &Plan, task: usize) -> u32 {
        self.follow_up(task)
            .map_or_else(|| plan.tasks[task].attempts() + 1, FollowUp::attempt)
    }

    /// Records the round as open in `plan`.
    pub fn write(&self, plan: &mut Plan) {
        plan.progress.extra.insert(
            FIELD.into(),
            serde_json::to_value(self).expect("the record serialises"),
        );
    }
}

/// Each of `tasks`' outcome as the plan holds it.
pub fn results_of(plan: &Plan, tasks: &[usize]) -> Vec<TaskResult> {
    tasks
        .iter()
        .map(|&i| TaskResult {
            index: i,
            status: plan.tasks[i].status,
            result: plan.tasks[i].result.clone().unwrap_or_default(),
            attempts: plan.attempts_of(i),
        })
        .collect()
}

/// Removes the open-round record (the round closed, or it is dropped).
pub fn clear(plan: &mut Plan) {
    plan.progress.extra.shift_remove(FIELD);
}

/// How far the plan's execution is: (rounds closed, parts of the open round committed). A
/// later state compares greater; the stale-round check uses it.
pub fn position(plan: &Plan) -> (u32, u32) {
    let closed = crate::flow::round_counter(plan);
    let parts = plan
        .progress
        .extra
        .get(FIELD)
        .and_then(|v| serde_json::from_value::<OpenRound>(v.clone()).ok())
        .filter(|r| r.round == closed + 1)
        .map_or(0, |r| r.parts);
    (closed, parts)
}

/// The commit of a part that does not close its round:
/// `dagexec: round 3 (part 1) — 1/3 tasks resolved`, and one line per task of the part (its
/// result made inert on GitHub: [`crate::pure::sanitize::unreferenced`]).
pub fn part_message(plan: &Plan, open: &OpenRound, part: u32, results: &[TaskResult]) -> String {
    let resolved = open
        .tasks
        .iter()
        .filter(|&&t| plan.tasks[t].status != Status::Pending)
        .count();
    let mut s = format!(
        "dagexec: round {} (part {part}) — {resolved}/{} tasks resolved\n\n",
        open.round,
        open.tasks.len()
    );
    for r in results {
        // A worker's words: shown, never a reference GitHub acts on (as in the round's).
        let result =
            crate::pure::sanitize::unreferenced(r.result.lines().next().unwrap_or(""), false);
        let status = if r.status == Status::Pending {
            "to retry".to_string()
        } else {
            r.status.to_string()
        };
        s.push_str(&format!(
            "- task {}: {} — {status}: {result}\n",
            r.index, plan.tasks[r.index].subject
        ));
    }
    s.push_str(&format!(
        "\nThe round's update and circuit breaker run when all {} of its tasks are resolved.\n",
        open.tasks.len()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::Plan;

    fn plan(statuses: &[&str], deps: &[&[usize]]) -> (Plan, Dag) {
        let tasks: Vec<serde_json::Value> = statuses
            .iter()
            .zip(deps)
            .enumerate()
            .map(|(i, (s, d))| {
                serde_json::json!({"subject": format!("T{i}"), "status": s, "blockedBy": d})
            })
            .collect();
        let p: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "context": {}, "progress": {"completedTasks": []},
            "tasks": tasks
        }))
        .unwrap();
        let dag = crate::pure::validate::check(&p, None).unwrap();
        (p, dag)
    }

    #[test]
    fn without_a_record_the_round_is_the_whole_ready_set() {
        let (p, dag) = plan(&["pending", "pending", "pending"], &[&[], &[], &[0]]);
        let c = current(&p, &dag).unwrap();
        assert_eq!(
            c.open,
            OpenRound {
                round: 1,
                tasks: vec![0, 1],
                parts: 0,
                follow_ups: Vec::new(),
            }
        );
        assert!(!c.resumed && c.notes.is_empty());
        let (done, dag) = plan(&["completed"], &[&[]]);
        assert!(current(&done, &dag).is_none());
    }

    #[test]
    fn an_open_record_is_resumed_and_reconciled_with_the_plan() {
        let (mut p, dag) = plan(
            &["completed", "pending", "pending", "failed"],
            &[&[], &[], &[3], &[]],
        );
        OpenRound {
            round: 1,
            tasks: vec![0, 1, 2],
            parts: 2,
            follow_ups: Vec::new(),
        }
        .write(&mut p);
        let c = current(&p, &dag).unwrap();
        assert!(c.resumed);
        // Task 2 now waits on the failed task 3 (its blocker was changed by hand).
        assert_eq!(c.open.tasks, vec![0, 1]);
        assert!(c.notes[0].contains("[2]"), "{:?}", c.notes);
        assert_eq!(c.open.unresolved(&p), vec![1]);
        assert_eq!(position(&p), (0, 2));
        clear(&mut p);
        assert_eq!(position(&p), (0, 0));
    }

    /// A part's commit message holds each worker's first line made inert on GitHub, as the
    /// round's does: `Fixes #1` closes no issue when the pull request merges, `@login` pings
    /// nobody.
    #[test]
    fn a_part_message_makes_the_workers_words_inert() {
        let (p, _) = plan(&["completed", "pending"], &[&[], &[]]);
        let open = OpenRound {
            round: 1,
            tasks: vec![0, 1],
            parts: 1,
            follow_ups: Vec::new(),
        };
        let said = |index, status| TaskResult {
            index,
            status,
            result: "Fixes #1, cc @octocat\nand a second line".into(),
            attempts: 1,
        };
        let results = [said(0, Status::Completed), said(1, Status::Pending)];
        let message = part_message(&p, &open, 1, &results);
        assert!(
            !message.contains("#1") && !message.contains("@o"),
            "{message}"
        );
        assert!(
            message.contains("Fixes #\u{200B}1, cc @\u{200B}octocat"),
            "{message}"
        );
        assert!(!message.contains("second line"), "{message}");
    }

    #[test]
    fn a_record_that_does_not_fit_is_dropped_and_a_new_round_starts() {
        let (mut p, dag) = plan(&["pending", "pending"], &[&[], &[]]);
        for bad in [
            serde_json::json!({"round": 1, "tasks": [0, 7], "parts": 1}),
            serde_json::json!({"round": 4, "tasks": [0], "parts": 1}),
            serde_json::json!({"round": 1, "tasks": [0, 0], "parts": 1}),
            serde_json::json!("nonsense"),
        ] {
            p.progress.extra.insert(FIELD.into(), bad.clone());
            let c = current(&p, &dag).unwrap();
            assert!(!c.resumed, "{bad}");
            assert_eq!(c.open.tasks, vec![0, 1]);
            assert_eq!(c.notes.len(), 1, "{bad}");
        }
    }

    #[test]
    fn a_serial_record_is_unchanged_and_a_stale_follow_up_is_dropped() {
        let (mut p, dag) = plan(&["pending", "pending", "pending"], &[&[], &[], &[]]);
        p.tasks[1].attempts = Some(1);
        p.tasks[2].attempts = Some(1);
        let serial = OpenRound {
            round: 1,
            tasks: vec![0, 1, 2],
            parts: 1,
            follow_ups: Vec::new(),
        };
        // Without follow-ups the record is what `serial` always wrote.
        assert_eq!(
            serde_json::to_value(&serial).unwrap(),
            serde_json::json!({"round": 1, "tasks": [0, 1, 2], "parts": 1})
        );
        let mut open = serial;
        open.follow_ups = vec![
            FollowUp::recheck(1, 1, b"patch", vec![0], false).unwrap(),
            // Attempt 3 of task 2 is not the one it continues (it made 1): dropped.
            FollowUp::Rebase {
                task: 2,
                attempt: 3,
                onto: vec![0],
                why: "conflict".into(),
            },
        ];
        open.write(&mut p);
        let c = current(&p, &dag).unwrap();
        assert_eq!(c.open.follow_ups.len(), 1, "{:?}", c.open.follow_ups);
        assert!(c.notes[0].contains("1 merge follow-up"), "{:?}", c.notes);
        assert_eq!(c.open.entry_attempt(&p, 1), 1);
        assert_eq!(c.open.entry_attempt(&p, 2), 2);
        assert_eq!(c.open.entry_attempt(&p, 0), 1);
    }
}
