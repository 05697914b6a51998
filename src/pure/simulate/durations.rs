//! How long each task takes, for [`super::predict`]: given on the command line, or learned from
//! the plan's history (`progress.dagexecAttempts`, one record per attempt:
//! `{"task": 3, "attempt": 1, "start": "…Z", "end": "…Z", "seconds": 147.2, "outcome": "completed"}`).
//!
//! The rules, in order, for each task:
//! 1. `--duration 3=20m`: task 3 takes 20 minutes, one attempt (history ignored for it).
//! 2. History: the task's last `completed` attempt, preceded by the attempts that did not
//!    complete since its previous completed one (a failure, a timeout, an interrupted
//!    attempt: each one cost its time and was tried again). They are kept as separate attempts,
//!    not summed: locally a retry takes its slot again at once, but on Actions every attempt
//!    is a job with its own start-up, and in rounds a retry waits for the next workflow run.
//!    A record without `seconds` uses `end − start`.
//!    Under `overlap: merge`, an attempt recorded as `conflict` counts as the completed one
//!    and a rebase attempt (`"rebase": true`) is left out: what merging costs is
//!    [`super::merge`]'s.
//! 3. Without a completed attempt in the history (never run, or never completed — its failed
//!    attempts are not repeated: a prediction assumes their cause is fixed), one attempt of
//!    the default: `--duration 10m`, else the median of the completed attempts in the
//!    history (the mean of the two middle ones for an even count), else 10 minutes, said in
//!    the output as an assumption.
//!
//! Records that cannot be read (not an object, a task not in the plan, a negative or missing
//! time) are skipped and counted in a warning. Times are whole milliseconds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::Plan;

pub use crate::pure::plan::fields::ATTEMPTS as HISTORY_FIELD;

/// The duration assumed when nothing else is known: 10 minutes.
pub const ASSUMED_MS: u64 = 10 * 60 * 1000;

/// Longest attempt taken from a record (30 days); longer ones are read as this.
const MAX_MS: u64 = 30 * 24 * 3600 * 1000;

/// Where a task's duration comes from (its name in the JSON output: `given`, `history`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// `--duration N=…`.
    Given,
    /// The plan's history.
    History,
    /// `--duration …` for tasks without history.
    Default,
    /// The median of the history's completed attempts.
    Median,
    /// Nothing known: [`ASSUMED_MS`].
    Assumed,
    /// A join (`pure::join`): no work, no time, never counted.
    Join,
}

/// One task's predicted attempts: every one but the last fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTime {
    /// Milliseconds per attempt, in order; never empty.
    pub attempts: Vec<u64>,
    pub source: Origin,
}

impl TaskTime {
    /// The time of all its attempts.
    pub fn total(&self) -> u64 {
        self.attempts.iter().sum()
    }
}

/// What the command line says about durations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurationInput {
    /// `--duration 10m`: tasks without history (ms).
    pub default: Option<u64>,
    /// `--duration 3=20m` (ms).
    pub per_task: BTreeMap<usize, u64>,
    /// Read `progress.dagexecAttempts` (off with `--no-history`).
    pub use_history: bool,
}

/// Every task's duration, and how they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durations {
    pub tasks: Vec<TaskTime>,
    /// What tasks without history got, and where it came from.
    pub default: (u64, Origin),
    /// Records skipped, said once each.
    pub warnings: Vec<String>,
}

impl Durations {
    /// How many tasks got their duration from `source`.
    pub fn count(&self, source: Origin) -> usize {
        self.tasks.iter().filter(|t| t.source == source).count()
    }
}

/// A duration the command line gives that cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("--duration {task}=…: the plan has no task {task} (it has {tasks})")]
    NoTask { task: usize, tasks: usize },
}

impl DurationError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            DurationError::NoTask { tasks, .. } => format!(
                "task numbers are plan indices, 0 to {}; `dagexec status` lists them",
                tasks.saturating_sub(1)
            ),
        }
    }
}

/// One record of `progress.dagexecAttempts` (other fields, e.g. cost, are ignored); the
/// merge rate (`super::merge`) reads it too.
#[derive(Debug, Deserialize)]
pub(super) struct Record {
    pub(super) task: usize,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
    #[serde(default)]
    seconds: Option<f64>,
    #[serde(default)]
    pub(super) outcome: Option<String>,
    /// A rebase attempt (`overlap: merge`).
    #[serde(default)]
    pub(super) rebase: bool,
}

/// A record's time in ms, if it has a usable one.
fn record_ms(r: &Record) -> Option<u64> {
    if let Some(s) = r.seconds {
        return (s.is_finite() && s >= 0.0).then(|| ((s * 1000.0).round() as u64).min(MAX_MS));
    }
    let start: jiff::Timestamp = r.start.as_deref()?.parse().ok()?;
    let end: jiff::Timestamp = r.end.as_deref()?.parse().ok()?;
    let ms = end.as_millisecond() - start.as_millisecond();
    (ms >= 0).then(|| (ms as u64).min(MAX_MS))
}

/// Each task's attempts as the history tells them (empty: no completed attempt).
fn learned(plan: &Plan, warnings: &mut Vec<String>) -> Vec<Vec<u64>> {
    let n = plan.tasks.len();
    let mut out: Vec<Vec<u64>> = vec![Vec::new(); n];
    let Some(records) = plan.progress.extra.get(HISTORY_FIELD) else {
        return out;
    };
    let Some(records) = records.as_array() else {
        warnings.push(format!(
            "progress.{HISTORY_FIELD} is not a list: the history is not used"
        ));
        return out;
    };
    // Attempts since the task's last completed one, not yet followed by a completion.
    let mut open: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut skipped = 0usize;
    for value in records {
        let Ok(r) = Record::deserialize(value) else {
            skipped += 1;
            continue;
        };
        let Some(ms) = record_ms(&r).filter(|_| r.task < n) else {
            skipped += 1;
            continue;
        };
        // A task's time is its work as `serial` would do it: a change that merely could not
        // be merged (`conflict`) is its completed attempt, the rebase that followed is what
        // `merge` costs (its rate is learned apart: `simulate::merge`).
        if r.rebase {
            continue;
        }
        open[r.task].push(ms);
        if matches!(r.outcome.as_deref(), Some("completed" | "conflict")) {
            out[r.task] = std::mem::take(&mut open[r.task]);
        }
    }
    if skipped > 0 {
        warnings.push(format!(
            "{skipped} record(s) of progress.{HISTORY_FIELD} skipped (no task of this plan, or no usable time)"
        ));
    }
    out
}

/// The median of `values` (sorted here), the mean of the two middle ones for an even count.
fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some(u64::midpoint(values[n / 2 - 1], values[n / 2])),
    }
}

/// Every task's duration by the rules of this module.
pub fn durations(plan: &Plan, input: &DurationInput) -> Result<Durations, DurationError> {
    let n = plan.tasks.len();
    if let Some((&task, _)) = input.per_task.range(n..).next() {
        return Err(DurationError::NoTask { task, tasks: n });
    }
    let mut warnings = Vec::new();
    let history = if input.use_history {
        learned(plan, &mut warnings)
    } else {
        vec![Vec::new(); n]
    };
    let completed: Vec<u64> = history.iter().filter_map(|a| a.last().copied()).collect();
    let default = match (input.default, median(completed)) {
        (Some(ms), _) => (ms, Origin::Default),
        (None, Some(ms)) => (ms, Origin::Median),
        (None, None) => (ASSUMED_MS, Origin::Assumed),
    };
    let tasks = history
        .into_iter()
        .enumerate()
        .map(|(i, attempts)| match input.per_task.get(&i) {
            _ if plan.tasks[i].join => TaskTime {
                attempts: vec![0],
                source: Origin::Join,
            },
            Some(&ms) => TaskTime {
                attempts: vec![ms],
                source: Origin::Given,
            },
            None if !attempts.is_empty() => TaskTime {
                attempts,
                source: Origin::History,
            },
            None => TaskTime {
                attempts: vec![default.0],
                source: default.1,
            },
        })
        .collect();
    Ok(Durations {
        tasks,
        default,
        warnings,
    })
}

/// Reads a record list as JSON (for the tests).
#[cfg(test)]
pub(crate) fn with_history(mut plan: Plan, records: serde_json::Value) -> Plan {
    plan.progress.extra.insert(HISTORY_FIELD.into(), records);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan_of, task};
    use serde_json::json;

    fn three() -> Plan {
        plan_of(vec![
            task(&[], &[], &[]),
            task(&[], &[], &[]),
            task(&[], &[], &[]),
        ])
    }

    fn input() -> DurationInput {
        DurationInput {
            use_history: true,
            ..Default::default()
        }
    }

    #[test]
    fn nothing_known_assumes_ten_minutes() {
        let d = durations(&three(), &input()).unwrap();
        assert_eq!(d.default, (ASSUMED_MS, Origin::Assumed));
        assert!(
            d.tasks
                .iter()
                .all(|t| t.attempts == [ASSUMED_MS] && t.source == Origin::Assumed)
        );
    }

    #[test]
    fn history_with_retries_median_and_overrides() {
        let plan = with_history(
            three(),
            json!([
                {"task": 0, "attempt": 1, "seconds": 10.0, "outcome": "failed"},
                {"task": 1, "attempt": 1, "seconds": 30.0, "outcome": "completed", "cost_usd": 0.2},
                {"task": 0, "attempt": 2, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:20.5Z", "outcome": "completed"},
                {"task": 2, "attempt": 1, "seconds": 99.0, "outcome": "failed"},
                {"task": 7, "attempt": 1, "seconds": 1.0, "outcome": "completed"},
                {"task": 1, "seconds": -3.0, "outcome": "completed"},
                "junk"
            ]),
        );
        let d = durations(&plan, &input()).unwrap();
        assert_eq!(d.tasks[0].attempts, [10_000, 20_500]);
        assert_eq!(d.tasks[0].source, Origin::History);
        assert_eq!(d.tasks[1].attempts, [30_000]);
        // Never completed: one attempt of the median of the completed ones (20.5 s and 30 s).
        assert_eq!(d.default, (25_250, Origin::Median));
        assert_eq!(d.tasks[2].attempts, [25_250]);
        assert_eq!(d.tasks[2].source, Origin::Median);
        assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
        assert!(d.warnings[0].starts_with("3 record(s)"));

        // --duration for the rest, --duration N=… over the history.
        let mut given = input();
        given.default = Some(5_000);
        given.per_task.insert(0, 1_000);
        let d = durations(&plan, &given).unwrap();
        assert_eq!(d.tasks[0].attempts, [1_000]);
        assert_eq!(d.tasks[0].source, Origin::Given);
        assert_eq!(d.tasks[2].attempts, [5_000]);
        assert_eq!(d.tasks[2].source, Origin::Default);
        assert_eq!(d.count(Origin::History), 1);

        // --no-history.
        given.use_history = false;
        let d = durations(&plan, &given).unwrap();
        assert_eq!(d.tasks[1].attempts, [5_000]);
    }

    #[test]
    fn a_later_completion_starts_the_attempts_over() {
        let plan = with_history(
            three(),
            json!([
                {"task": 0, "seconds": 1.0, "outcome": "failed"},
                {"task": 0, "seconds": 2.0, "outcome": "completed"},
                {"task": 0, "seconds": 3.0, "outcome": "timeout"},
                {"task": 0, "seconds": 4.0, "outcome": "completed"},
                {"task": 1, "seconds": 6.0, "outcome": "completed"},
                {"task": 1, "seconds": 7.0, "outcome": "failed"},
            ]),
        );
        let d = durations(&plan, &input()).unwrap();
        assert_eq!(d.tasks[0].attempts, [3_000, 4_000]);
        // A failure after the last completion (a re-run that failed) is not predicted.
        assert_eq!(d.tasks[1].attempts, [6_000]);
    }

    #[test]
    fn a_duration_for_a_task_not_in_the_plan_is_refused() {
        let mut i = input();
        i.per_task.insert(3, 1);
        let e = durations(&three(), &i).unwrap_err();
        assert_eq!(e, DurationError::NoTask { task: 3, tasks: 3 });
        assert_eq!(
            e.to_string(),
            "--duration 3=…: the plan has no task 3 (it has 3)"
        );
        assert!(e.hint().contains("0 to 2"));
    }

    #[test]
    fn history_not_a_list_is_a_warning() {
        let plan = with_history(three(), json!({"task": 0}));
        let d = durations(&plan, &input()).unwrap();
        assert_eq!(d.count(Origin::Assumed), 3);
        assert_eq!(d.warnings.len(), 1);
    }
}
