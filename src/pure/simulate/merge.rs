//! `overlap: merge` predicted beside `serial`: tasks that share files run together (no file
//! conflicts kept apart), and each task that shares a file with one it could run beside
//! pays, on average, its conflict rate times a rebase attempt as long as its own last one
//! (expected value, so the prediction stays deterministic): under eager on its slot at once,
//! under rounds after the round's other work, as `run` starts rebases.
//!
//! The conflict rate is learned from `progress.dagexecAttempts`: of the attempts a merge
//! run integrated that were not rebases themselves (recorded `completed` or `conflict`, of
//! tasks that share files), the share recorded `conflict`. A history with no sign of a merge
//! run (no `conflict` record, no rebase) says nothing about it: then the rate is
//! [`ASSUMED_PERMILLE`], said as an assumption.

use serde::Deserialize;

use super::Durations;
use super::durations::{HISTORY_FIELD, Record};
use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::plan::model::Plan;

/// The conflict rate assumed without a merge run in the history: one in five.
pub const ASSUMED_PERMILLE: u32 = 200;

/// The conflict rate a merge prediction uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeRate {
    /// Conflicts per thousand integrated attempts.
    pub permille: u32,
    /// How many recorded attempts it was learned from; 0 when assumed.
    pub learned_from: usize,
}

impl MergeRate {
    /// The rate as a fraction.
    pub fn fraction(self) -> f64 {
        f64::from(self.permille) / 1000.0
    }

    /// The expected share of `x` at this rate, rounded.
    fn of(self, x: u64) -> u64 {
        (x * u64::from(self.permille) + 500) / 1000
    }
}

/// Which tasks share a declared file with a task they could run beside.
pub fn sharing(plan: &Plan, dag: &Dag, conflicts: &Conflicts) -> Vec<bool> {
    let index = conflicts.index();
    (0..plan.tasks.len())
        .map(|a| {
            index.files_of(a).iter().any(|&f| {
                index
                    .tasks_of(f)
                    .iter()
                    .any(|&b| b as usize != a && conflicts.conflict(dag, a, b as usize))
            })
        })
        .collect()
}

/// The conflict rate the history of `plan` shows for its tasks that share files.
pub fn rate(plan: &Plan, sharing: &[bool]) -> MergeRate {
    let records: Vec<Record> = plan
        .progress
        .extra
        .get(HISTORY_FIELD)
        .and_then(|v| v.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|v| Record::deserialize(v).ok())
                .filter(|r| sharing.get(r.task).copied().unwrap_or(false))
                .collect()
        })
        .unwrap_or_default();
    let conflict = |r: &Record| r.outcome.as_deref() == Some("conflict");
    let merged = records.iter().any(|r| r.rebase || conflict(r));
    let integrated: Vec<&Record> = records
        .iter()
        .filter(|r| !r.rebase && matches!(r.outcome.as_deref(), Some("completed" | "conflict")))
        .collect();
    if !merged || integrated.is_empty() {
        return MergeRate {
            permille: ASSUMED_PERMILLE,
            learned_from: 0,
        };
    }
    let conflicts = integrated.iter().filter(|r| conflict(r)).count();
    let permille = (conflicts * 1000 + integrated.len() / 2) / integrated.len();
    MergeRate {
        permille: u32::try_from(permille).unwrap_or(1000),
        learned_from: integrated.len(),
    }
}

/// Each task's expected rebase under `merge`, ms: `rate` of its last attempt for a sharing
/// task, 0 otherwise.
pub fn rebases(times: &Durations, sharing: &[bool], rate: MergeRate) -> Vec<u64> {
    times
        .tasks
        .iter()
        .zip(sharing)
        .map(|(t, &shares)| match t.attempts.last() {
            Some(&last) if shares => rate.of(last),
            _ => 0,
        })
        .collect()
}

/// The task times under `merge` with each expected rebase added to the last attempt.
pub fn times(times: &Durations, sharing: &[bool], rate: MergeRate) -> Durations {
    with_last(times, rebases(times, sharing, rate))
}

/// `times` with each of `extra` (in task order) added to its task's last attempt.
fn with_last(times: &Durations, extra: impl IntoIterator<Item = u64>) -> Durations {
    let mut out = times.clone();
    for (t, extra) in out.tasks.iter_mut().zip(extra) {
        if let Some(last) = t.attempts.last_mut() {
            *last += extra;
        }
    }
    out
}

/// The conductor under `merge` (`schedule: eager` on the Action): each sharing task's run is
/// followed by a re-check run, and by its expected rebase's run, each `run` ms (a job's
/// start-up and an integration; the checks' own time is not modelled), added to its last
/// attempt; and how many runs that adds (the rebases rounded).
pub fn recheck_runs(
    times: &Durations,
    sharing: &[bool],
    rate: MergeRate,
    run: u64,
) -> (Durations, u64) {
    let per = run + rate.of(run);
    // A task's attempts are never empty: every sharing task gets its runs.
    let n = sharing.iter().filter(|&&s| s).count() as u64;
    let extra = sharing.iter().map(|&s| if s { per } else { 0 });
    (with_last(times, extra), n + rate.of(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::simulate::{Origin, TaskTime};
    use serde_json::json;

    fn plan(records: &serde_json::Value) -> Plan {
        serde_json::from_value(json!({
            "schemaVersion": 2, "goal": "g",
            "progress": {"dagexecAttempts": records},
            "tasks": [
                {"subject": "a", "status": "completed", "metadata": {"files": {"modify": ["x"]}}},
                {"subject": "b", "status": "completed", "metadata": {"files": {"modify": ["x"]}}},
                {"subject": "c", "status": "completed", "metadata": {"files": {"modify": ["y"]}}}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn the_rate_is_learned_from_a_merge_runs_records_of_sharing_tasks() {
        let p = plan(&json!([
            {"task": 0, "attempt": 1, "seconds": 1.0, "outcome": "completed"},
            {"task": 1, "attempt": 1, "seconds": 1.0, "outcome": "conflict"},
            {"task": 1, "attempt": 1, "seconds": 1.0, "outcome": "completed", "rebase": true},
            {"task": 0, "attempt": 2, "seconds": 1.0, "outcome": "completed"},
            {"task": 0, "attempt": 3, "seconds": 1.0, "outcome": "failed"},
            // Task 2 shares nothing: not counted.
            {"task": 2, "attempt": 1, "seconds": 1.0, "outcome": "conflict"}
        ]));
        let dag = crate::pure::validate::check(&p, None).unwrap();
        let sharing = sharing(&p, &dag, &Conflicts::of(&p));
        assert_eq!(sharing, [true, true, false]);
        // 1 conflict among 3 integrated attempts (the rebase and the failure not counted).
        assert_eq!(
            rate(&p, &sharing),
            MergeRate {
                permille: 333,
                learned_from: 3
            }
        );
    }

    #[test]
    fn a_history_without_a_merge_run_says_nothing_and_the_rate_is_assumed() {
        let p = plan(&json!([
            {"task": 0, "attempt": 1, "seconds": 1.0, "outcome": "completed"},
            {"task": 1, "attempt": 1, "seconds": 1.0, "outcome": "completed"}
        ]));
        let rate = rate(&p, &[true, true, false]);
        assert_eq!(rate.permille, ASSUMED_PERMILLE);
        assert_eq!(rate.learned_from, 0);
    }

    #[test]
    fn sharing_tasks_pay_the_rate_of_a_rebase_on_their_last_attempt() {
        let given = Durations {
            tasks: vec![
                TaskTime {
                    attempts: vec![1000, 10_000],
                    source: Origin::Given,
                },
                TaskTime {
                    attempts: vec![10_000],
                    source: Origin::Given,
                },
            ],
            default: (10_000, Origin::Given),
            warnings: Vec::new(),
        };
        let rate = MergeRate {
            permille: 250,
            learned_from: 4,
        };
        let t = times(&given, &[true, false], rate);
        assert_eq!(t.tasks[0].attempts, [1000, 12_500]);
        assert_eq!(t.tasks[1].attempts, [10_000]);
    }
}
