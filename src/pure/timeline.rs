//! The run as it happened, from the plan's attempt records (`progress.dagexecAttempts`,
//! [`crate::pure::usage`]): one bar per attempt on the wall clock, by outcome ([`actual`]), drawn on
//! the terminal by `dagexec status --gantt` with `dagexec simulate`'s chart ([`terminal`],
//! [`crate::pure::simulate::render::chart`]) and as a Mermaid `gantt` in the pull request body and
//! the job summary ([`mermaid`]); and beside it what `dagexec simulate` predicts for the
//! schedule that ran, from the same attempts' times ([`predicted`], [`versus`]). Pure.
//!
//! The actual wall time runs from the first recorded attempt's start to the last one's end,
//! pauses between runs of the plan included. Task subjects are untrusted: in Mermaid they keep
//! only letters, digits, spaces and `.,-_/()+!?=@'` (nothing that ends a line, a statement, a
//! section or the fence, no `%%` directive, no HTML) and at most [`MERMAID_SUBJECT`] chars;
//! the chart draws at most `max_bars` attempts (the latest) and says how many it left out.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::pure::engine::Schedule;
use crate::pure::plan::model::Plan;
use crate::pure::simulate::render::{Bar, chart, human, schedule_name};
use crate::pure::simulate::{Origin, Place, Prediction, Setting};
use crate::pure::usage::Outcome;

/// Most attempts the pull request body's and job summary's chart draws (the latest).
pub const MERMAID_BARS: usize = 100;
/// Longest task subject in a Mermaid section name, in chars.
pub const MERMAID_SUBJECT: usize = 40;

/// `dagexec simulate`'s defaults for the Action (`--job-start`, `--integrate`, `--poll`), ms.
pub const JOB_START_MS: u64 = 30_000;
pub const INTEGRATE_MS: u64 = 10_000;
pub const POLL_MS: u64 = 10_000;

/// One recorded attempt on the run's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub task: usize,
    pub attempt: u32,
    /// When it started (UTC, to the second, as recorded).
    pub at: jiff::Timestamp,
    /// ms from the run's start.
    pub start: u64,
    pub end: u64,
    pub outcome: Outcome,
}

/// The recorded attempts, oldest start first.
#[derive(Debug, Clone, PartialEq)]
pub struct Actual {
    /// The first attempt's start.
    pub start: jiff::Timestamp,
    /// From the first start to the last end, ms.
    pub wall: u64,
    pub attempts: Vec<Attempt>,
}

/// The plan's recorded attempts on one clock; `None` when none is recorded.
pub fn actual(plan: &Plan) -> Option<Actual> {
    let records = crate::pure::usage::records(plan);
    let parsed: Vec<(jiff::Timestamp, &crate::pure::usage::AttemptRecord)> = records
        .iter()
        .filter_map(|r| Some((r.start.parse().ok()?, r)))
        .collect();
    let start = parsed.iter().map(|(t, _)| *t).min()?;
    let mut attempts: Vec<Attempt> = parsed
        .into_iter()
        .map(|(at, r)| {
            let from = at.duration_since(start).as_millis().max(0);
            let from = u64::try_from(from).unwrap_or(u64::MAX);
            let took = (r.seconds * 1000.0).round() as u64;
            Attempt {
                task: r.task,
                attempt: r.attempt,
                at,
                start: from,
                end: from.saturating_add(took),
                outcome: r.outcome,
            }
        })
        .collect();
    attempts.sort_by_key(|a| (a.start, a.task, a.attempt));
    let wall = attempts.iter().map(|a| a.end).max().unwrap_or(0);
    Some(Actual {
        start,
        wall,
        attempts,
    })
}

/// How an outcome is drawn: its glyph in the terminal chart, and its Mermaid tag (completed
/// `done`, failed, timed out or rejected `crit`, blocked or interrupted `active`).
fn look(o: Outcome) -> (char, &'static str) {
    match o {
        Outcome::Completed => ('█', "done"),
        Outcome::Failed | Outcome::Timeout | Outcome::Rejected | Outcome::Conflict => ('▒', "crit"),
        Outcome::Blocked | Outcome::Interrupted => ('▓', "active"),
    }
}

/// The actual run as a text chart `width` columns wide: one row per task, one bar per
/// attempt (`█` completed, `▒` failed, timed out or rejected, `▓` blocked or interrupted).
pub fn terminal(plan: &Plan, actual: &Actual, width: usize) -> String {
    let heading = format!(
        "actual: {}, {} attempt(s)  (█ completed, ▒ failed, timed out or rejected, ▓ blocked or interrupted)",
        human(actual.wall),
        actual.attempts.len()
    );
    let bars: Vec<Bar> = actual
        .attempts
        .iter()
        .map(|a| Bar {
            task: a.task,
            start: a.start,
            work: a.start,
            end: a.end,
            glyph: look(a.outcome).0,
        })
        .collect();
    chart(plan, &heading, &bars, actual.wall, width)
}

/// Where and how a run ran, for the prediction beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    pub schedule: Schedule,
    pub place: Place,
    /// Workers at once locally (`--jobs`); work jobs at once on Actions (`max-parallel`).
    pub slots: usize,
    /// Under `overlap: merge` (tasks that share files side by side): its prediction is the
    /// `… + merge` row.
    pub merge: bool,
}

impl Ran {
    /// `rounds locally on 4 worker(s)`, `eager on Actions, max-parallel 8, …`.
    pub fn describe(&self) -> String {
        let text = match self.place {
            Place::Local => format!(
                "{} locally on {} worker(s)",
                schedule_name(self.schedule),
                self.slots
            ),
            Place::Actions => format!(
                "{} on Actions, max-parallel {}, its default job start-up {} and integration {}",
                schedule_name(self.schedule),
                self.slots,
                human(JOB_START_MS),
                human(INTEGRATE_MS)
            ),
        };
        if self.merge {
            format!("{text}, overlap: merge")
        } else {
            text
        }
    }
}

/// What `dagexec simulate` predicts for the schedule that ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicted {
    pub prediction: Prediction,
    pub ran: Ran,
    /// Tasks without a completed attempt, given the history's median (or simulate's
    /// assumption).
    pub guessed: usize,
}

/// `dagexec simulate`'s prediction for `ran` (the Action has no `waves`: its rounds), every
/// task's time from the plan's history; `None` for a plan whose graph cannot be built.
pub fn predicted(plan: &Plan, ran: Ran) -> Option<Predicted> {
    let dag = crate::pure::graph::Dag::build(plan).ok()?;
    let conflicts = crate::pure::overlap::Overlaps::of(plan, &dag).for_scheduling();
    let input = crate::pure::simulate::DurationInput {
        use_history: true,
        ..Default::default()
    };
    let times = crate::pure::simulate::durations::durations(plan, &input).ok()?;
    let setting = Setting {
        jobs: ran.slots.max(1),
        max_parallel: ran.slots.max(1),
        job_start: JOB_START_MS,
        integrate: INTEGRATE_MS,
        poll: POLL_MS,
        polls_per_hour: crate::pure::pace::POLLS_PER_HOUR,
        remaining: false,
    };
    let schedule = match (ran.place, ran.schedule) {
        (Place::Actions, Schedule::Waves) => Schedule::Rounds,
        (_, s) => s,
    };
    let report = crate::pure::simulate::predict(plan, &dag, &conflicts, &times, setting);
    let rows = if ran.merge {
        // No task shares a file: merge runs as serial does.
        report
            .merge
            .map_or(report.predictions, |(_, merged)| merged)
    } else {
        report.predictions
    };
    let prediction = rows
        .into_iter()
        .find(|p| p.place == ran.place && p.schedule == schedule)?;
    let guessed = times
        .tasks
        .iter()
        .filter(|t| !matches!(t.source, Origin::History | Origin::Join))
        .count();
    Some(Predicted {
        prediction,
        ran: Ran { schedule, ..ran },
        guessed,
    })
}

/// `predicted 4m10s · actual 5m2s`, then what the prediction is of.
pub fn versus(actual: &Actual, predicted: Option<&Predicted>) -> String {
    let Some(p) = predicted else {
        return format!("actual {}", human(actual.wall));
    };
    let mut s = format!(
        "predicted {} · actual {}  (`dagexec simulate`: {}; each task's time as recorded",
        human(p.prediction.wall),
        human(actual.wall),
        p.ran.describe()
    );
    if p.guessed > 0 {
        let _ = write!(
            s,
            ", {} task(s) without a completed attempt at the median",
            p.guessed
        );
    }
    s.push(')');
    s
}

/// `text` as Mermaid gantt text: letters, digits, spaces and `.,-_/()+!?=@'` kept, anything
/// else a space, runs of spaces one, at most `max` chars (cut with `…`).
pub fn mermaid_text(text: &str, max: usize) -> String {
    let kept: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || " .,-_/()+!?=@'".contains(c) {
                c
            } else {
                ' '
            }
        })
        .collect();
    let one = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::pure::clip::chars(&one, max)
}

/// The actual run as a fenced Mermaid `gantt` block (Markdown): a section per task (ordered by
/// its first attempt), a bar per attempt named by its number and outcome and tagged by it,
/// at most `max_bars` of them (the latest starts), then a line saying how many were left out.
pub fn mermaid(plan: &Plan, actual: &Actual, max_bars: usize) -> String {
    let n = actual.attempts.len();
    let shown = &actual.attempts[n.saturating_sub(max_bars)..];
    let axis = match actual.wall {
        w if w < 10 * 60_000 => "%H:%M:%S",
        w if w < 2 * 24 * 3_600_000 => "%H:%M",
        _ => "%m-%d %H:%M",
    };
    // A section per task, in the order of its first attempt shown.
    let mut order: Vec<usize> = shown.iter().map(|a| a.task).collect();
    let mut seen = BTreeSet::new();
    order.retain(|&t| seen.insert(t));
    let mut s = format!(
        "```mermaid\ngantt\n    title Attempts (UTC)\n    dateFormat YYYY-MM-DD HH:mm:ss\n    axisFormat {axis}\n"
    );
    for task in order {
        let subject = mermaid_text(&plan.tasks[task].subject, MERMAID_SUBJECT);
        let _ = writeln!(s, "    section {task} {subject}");
        for a in shown.iter().filter(|a| a.task == task) {
            let took = a.end.saturating_sub(a.start) as f64 / 1000.0;
            let _ = writeln!(
                s,
                "    attempt {} {} :{}, {}, {}s",
                a.attempt,
                a.outcome,
                look(a.outcome).1,
                a.at.strftime("%Y-%m-%d %H:%M:%S"),
                (took * 10.0).round() / 10.0
            );
        }
    }
    s.push_str("```\n");
    if n > shown.len() {
        let _ = writeln!(
            s,
            "\n_The chart shows the latest {} of {n} attempts ({} left out); `dagexec status --gantt` draws them all._",
            shown.len(),
            n - shown.len()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::usage::Outcome::*;

    /// A plan of three tasks (1 and 2 after 0) with attempts recorded.
    fn plan() -> Plan {
        let mut p: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "context": {}, "progress": {"completedTasks": []},
            "tasks": [
                {"subject": "Model", "status": "completed", "attempts": 2, "blockedBy": [], "files": {"create": ["a"]}},
                {"subject": "API: login ```; %%{init}%% <b>x</b>\nsection evil", "status": "completed", "attempts": 1, "blockedBy": [0], "files": {"create": ["b"]}},
                {"subject": "UI", "status": "failed", "attempts": 1, "blockedBy": [0], "files": {"create": ["c"]}}
            ]
        }))
        .unwrap();
        // (task, attempt, start second, seconds, outcome)
        for (task, attempt, at, seconds, outcome) in [
            (0, 1, 0, 95.0, Failed),
            (0, 2, 96, 61.0, Completed),
            (1, 1, 160, 120.5, Completed),
            (2, 1, 160, 40.0, Timeout),
        ] {
            let start = jiff::Timestamp::from_second(1_795_000_000 + at).unwrap();
            let end = start + jiff::SignedDuration::from_secs_f64(seconds);
            let usage = crate::pure::usage::Usage::default();
            let measured = crate::pure::usage::Measured { start, end, usage };
            let record = crate::pure::usage::AttemptRecord::new(task, attempt, &measured, outcome);
            crate::pure::usage::record(&mut p, &record);
        }
        p
    }

    /// A run under `overlap: merge` is compared with the `… + merge` prediction, where tasks
    /// that share a file run side by side (serial runs them one after the other).
    #[test]
    fn a_merge_run_is_predicted_by_the_merge_row() {
        let mut p = plan();
        p.tasks[2].status = crate::pure::plan::model::Status::Completed;
        let mut shared: serde_json::Value = serde_json::to_value(&p).unwrap();
        for t in [1, 2] {
            shared["tasks"][t]["metadata"] =
                serde_json::json!({"files": {"create": [], "modify": ["shared.txt"]}});
        }
        let p: Plan = serde_json::from_value(shared).unwrap();
        let ran = |merge| Ran {
            schedule: Schedule::Eager,
            place: Place::Local,
            slots: 2,
            merge,
        };
        let serial = predicted(&p, ran(false)).unwrap();
        let merged = predicted(&p, ran(true)).unwrap();
        assert!(
            merged.prediction.wall < serial.prediction.wall,
            "{} vs {}",
            merged.prediction.wall,
            serial.prediction.wall
        );
        assert!(
            merged
                .ran
                .describe()
                .ends_with("locally on 2 worker(s), overlap: merge")
        );
    }

    /// A join has no work and no attempt: it is not a task "without a completed attempt".
    #[test]
    fn a_join_is_not_counted_as_a_task_without_a_completed_attempt() {
        let mut p = plan();
        p.tasks.push(crate::pure::plan::model::Task {
            subject: "all".into(),
            join: true,
            blocked_by: vec![1, 2],
            ..Default::default()
        });
        let ran = Ran {
            schedule: Schedule::Eager,
            place: Place::Local,
            slots: 2,
            merge: false,
        };
        // Task 2 only timed out; the join is no task of work.
        assert_eq!(predicted(&p, ran).unwrap().guessed, 1);
    }

    #[test]
    fn the_actual_run_is_every_attempt_on_one_clock() {
        let a = actual(&plan()).unwrap();
        assert_eq!(a.wall, 280_500);
        let spans: Vec<(usize, u32, u64, u64)> = a
            .attempts
            .iter()
            .map(|a| (a.task, a.attempt, a.start, a.end))
            .collect();
        assert_eq!(
            spans,
            [
                (0, 1, 0, 95_000),
                (0, 2, 96_000, 157_000),
                (1, 1, 160_000, 280_500),
                (2, 1, 160_000, 200_000)
            ]
        );
        let mut none = plan();
        none.progress.extra.clear();
        assert_eq!(actual(&none), None);
    }

    #[test]
    fn the_terminal_chart_and_the_prediction_beside_it() {
        let p = plan();
        let a = actual(&p).unwrap();
        let ran = Ran {
            schedule: Schedule::Rounds,
            place: Place::Local,
            slots: 2,
            merge: false,
        };
        let predicted = predicted(&p, ran).unwrap();
        // Task 2 never completed: it is given the median of the completed attempts.
        assert_eq!(predicted.guessed, 1);
        let text = format!(
            "{}\n{}\n{}\n",
            terminal(&p, &a, 80),
            crate::pure::simulate::render::gantt(&p, &predicted.prediction, 80),
            versus(&a, Some(&predicted))
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_mermaid_chart_is_bounded_and_hostile_subjects_stay_text() {
        let p = plan();
        let a = actual(&p).unwrap();
        let all = mermaid(&p, &a, MERMAID_BARS);
        insta::assert_snapshot!(all);
        let inner = all
            .trim_start_matches("```mermaid\n")
            .trim_end_matches("```\n");
        for bad in ["`", "%%", "<", ";", "#", "{"] {
            assert!(!inner.contains(bad), "{bad:?} in {all}");
        }
        // A section name ends at `:`, so none is left in one.
        for line in inner.lines().filter(|l| l.contains("section")) {
            assert!(!line.contains(':'), "{line}");
        }
        // Every line is ours: a keyword we wrote, then text.
        for line in all.lines().skip(2).take_while(|l| *l != "```") {
            let l = line.trim_start();
            assert!(
                [
                    "title ",
                    "dateFormat ",
                    "axisFormat ",
                    "section ",
                    "attempt "
                ]
                .iter()
                .any(|k| l.starts_with(k)),
                "{line}"
            );
        }
        let two = mermaid(&p, &a, 2);
        assert_eq!(two.matches(" :").count(), 2, "{two}");
        assert!(
            two.contains("The chart shows the latest 2 of 4 attempts (2 left out)"),
            "{two}"
        );
        // The section names are length-bounded.
        let long = "x".repeat(500);
        assert_eq!(mermaid_text(&long, 40).chars().count(), 40);
    }
}
