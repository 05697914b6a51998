//! What `dagexec simulate` prints: the table, the Gantt chart ([`chart`], also drawn by
//! `dagexec status --gantt`), and the JSON for tools.
//!
//! The JSON shape (stable; times in seconds, ms precision):
//! ```json
//! {
//!   "tasks": 30,
//!   "settings": {"jobs": 4, "maxParallel": 8, "jobStartSeconds": 30.0, "integrateSeconds": 10.0,
//!                "pollSeconds": 30.0, "pollsPerHour": 600, "remaining": false},
//!   "durations": {
//!     "default": {"seconds": 147.2, "source": "median"},
//!     "sources": {"given": 0, "history": 24, "default": 0, "median": 6, "assumed": 0},
//!     "tasks": [{"task": 0, "source": "history", "attempts": [12.0, 147.2]}],
//!     "warnings": []
//!   },
//!   "bounds": {
//!     "local": {"seconds": 2050.0, "criticalPathSeconds": 1800.0, "workSeconds": 8200.0, "slots": 4},
//!     "actions": {"seconds": …, "criticalPathSeconds": …, "workSeconds": …, "slots": 8}
//!   },
//!   "schedules": [
//!     {"schedule": "rounds", "where": "local", "seconds": 3720.0, "jobs": 30, "rounds": 7,
//!      "vsBound": 1.815, "deadlock": null,
//!      "attempts": [{"task": 0, "attempt": 1, "start": 0.0, "work": 0.0, "end": 147.2, "failed": false}]}
//!   ]
//! }
//! ```
//! `schedules` holds, in this order: rounds, waves, eager locally; rounds, eager on Actions.
//! When tasks share files, `merge` adds `overlap: merge` locally:
//! `{"conflictRate": 0.2, "learnedFrom": 0, "schedules": [rounds, eager]}` (`learnedFrom` 0:
//! the rate is assumed; [`super::merge`]).
//! `source` is one of given, history, default, median, assumed ([`super::durations`]);
//! `rounds` counts round commits locally (eager: batches of arrivals integrated), workflow runs
//! for the Action's rounds and conductor jobs for its eager; `vsBound` is null when the bound
//! is 0, `deadlock` the number of pending tasks left when none could start.

use serde_json::{Value, json};

use super::{Origin, Place, Prediction, Report, durations::Durations};
use crate::pure::engine::Schedule;
use crate::pure::plan::ids::TaskNames;
use crate::pure::plan::model::Plan;

/// `42.5s`, `12m30s`, `1h2m`.
pub fn human(ms: u64) -> String {
    if ms < 60_000 {
        let tenths = (ms + 50) / 100;
        return if tenths.is_multiple_of(10) {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        };
    }
    let s = (ms + 500) / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

pub(crate) fn schedule_name(s: Schedule) -> &'static str {
    match s {
        Schedule::Rounds => "rounds",
        Schedule::Waves => "waves",
        Schedule::Eager => "eager",
    }
}

fn place_name(p: Place) -> &'static str {
    match p {
        Place::Local => "local",
        Place::Actions => "Actions",
    }
}

/// What the durations are, in one sentence.
fn durations_line(d: &Durations) -> String {
    let mut parts = Vec::new();
    let n = |s: Origin| d.count(s);
    if n(Origin::Given) > 0 {
        parts.push(format!("{} given", n(Origin::Given)));
    }
    if n(Origin::History) > 0 {
        parts.push(format!("{} from the plan's history", n(Origin::History)));
    }
    let rest = n(d.default.1);
    if rest > 0 {
        let t = human(d.default.0);
        parts.push(match d.default.1 {
            Origin::Default => format!("{rest} without history {t} (--duration)"),
            Origin::Median => format!("{rest} without history the median, {t}"),
            _ => format!("{rest} assumed {t} (no history; --duration sets it)"),
        });
    }
    if parts.is_empty() {
        return "no tasks".into();
    }
    format!("durations: {}", parts.join(", "))
}

/// The report as a table, with the settings and the lower bounds.
pub fn table(report: &Report, durations: &Durations) -> String {
    let mut out = settings_lines(report, durations);
    out.push_str(&prediction_rows(report));
    let bound = |b: super::Bound| {
        format!(
            "{} = max(critical path {}, work {} ÷ {})",
            human(b.value),
            human(b.critical_path),
            human(b.work),
            b.slots
        )
    };
    out.push_str(&format!(
        "\nlower bound: local {}\n             Actions {}, job start-ups counted\n",
        bound(report.local_bound),
        bound(report.actions_bound)
    ));
    if let Some((rate, _)) = &report.merge {
        let whence = match rate.learned_from {
            0 => "assumed: no merge run in the history".to_string(),
            n => format!("learned from {n} recorded attempt(s)"),
        };
        out.push_str(&format!(
            "merge: tasks sharing files run together; {:.0}% of their changes need a rebase attempt ({whence}).\n",
            rate.fraction() * 100.0
        ));
    }
    out.push_str(
        "jobs: worker processes locally; every job on Actions (rounds: a plan and a finalize job\nper workflow run and one per task attempt; eager: a conductor and one per task attempt).\n",
    );
    out
}

/// The table's head: the tasks, the durations, their warnings and the settings.
fn settings_lines(report: &Report, durations: &Durations) -> String {
    let s = report.setting;
    let mut out = String::new();
    let what = if s.remaining {
        "tasks not completed yet"
    } else {
        "tasks"
    };
    out.push_str(&format!(
        "{} {what}; {}.\n",
        report.tasks,
        durations_line(durations)
    ));
    for w in &durations.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out.push_str(&format!(
        "local: {} job(s) at once.\nActions: {} job(s) at once (max-parallel), {} per job besides its work, {} per integration;\neager's conductor polls every {} or more ({} polls an hour at most).\n\n",
        s.jobs,
        s.max_parallel,
        human(s.job_start),
        human(s.integrate),
        human(s.poll),
        s.polls_per_hour
    ));
    out
}

/// One row per prediction, under the column names, aligned.
fn prediction_rows(report: &Report) -> String {
    let merged = report
        .merge
        .iter()
        .flat_map(|(_, ps)| ps)
        .map(|p| (p, " + merge"));
    let head = ["schedule", "where", "wall time", "jobs", "× bound"];
    // The column names, then a row per prediction.
    let mut rows: Vec<Vec<String>> = vec![head.map(String::from).to_vec()];
    rows.extend(
        report
            .predictions
            .iter()
            .map(|p| (p, ""))
            .chain(merged)
            .map(|(p, policy)| {
                let wall = match p.deadlock {
                    Some(n) => format!("deadlock ({n} left)"),
                    None => human(p.wall),
                };
                let ratio = report
                    .ratio(p)
                    .map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
                vec![
                    format!("{}{policy}", schedule_name(p.schedule)),
                    place_name(p.place).to_string(),
                    wall,
                    p.jobs.to_string(),
                    ratio,
                ]
            }),
    );
    // The schedule and the place left-aligned, the figures right-aligned.
    crate::pure::render::columns(&rows, 2)
}

/// The label of task `i`: `  3 Add the parser`, clipped to `width` characters.
fn label(plan: &Plan, names: &TaskNames, i: usize, width: usize, index_width: usize) -> String {
    let subject = crate::pure::sanitize::line(names.subject(i, &plan.tasks[i].subject));
    let name = names.get(i);
    let full = format!("{name:>index_width$} {subject}");
    if full.chars().count() <= width {
        return format!("{full:<width$}");
    }
    let mut s: String = full.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A text Gantt chart of one prediction, `width` columns wide: one row per task (plan
/// order), `░` a job's start-up, `█` work, `▒` a failed attempt's work, then the time axis.
pub fn gantt(plan: &Plan, p: &Prediction, width: usize) -> String {
    let heading = format!(
        "{} {}: {}, {} jobs  (░ job start-up, █ work, ▒ failed attempt)",
        schedule_name(p.schedule),
        match p.place {
            Place::Local => "locally",
            Place::Actions => "on Actions",
        },
        human(p.wall),
        p.jobs
    );
    let bars: Vec<Bar> = p
        .spans
        .iter()
        .map(|s| Bar {
            task: s.task,
            start: s.start,
            work: s.work,
            end: s.end,
            glyph: if s.failed { '▒' } else { '█' },
        })
        .collect();
    chart(plan, &heading, &bars, p.wall, width)
}

/// One bar of a [`chart`], in ms from the chart's start: `start..work` is drawn `░` (a job's
/// start-up), `work..end` with `glyph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub task: usize,
    pub start: u64,
    pub work: u64,
    pub end: u64,
    pub glyph: char,
}

/// A text Gantt chart, `width` columns wide: `heading`, one row per task (plan order) with
/// each of its bars (every bar gets at least one cell), then the time axis from 0 to `wall`
/// ms. Shared by `dagexec simulate` and `dagexec status --gantt` ([`crate::pure::timeline`]).
pub fn chart(plan: &Plan, heading: &str, bars: &[Bar], wall: u64, width: usize) -> String {
    let mut out = format!("{heading}\n");
    let mut tasks: Vec<usize> = bars.iter().map(|s| s.task).collect();
    tasks.sort_unstable();
    tasks.dedup();
    if tasks.is_empty() {
        out.push_str("(no tasks)\n");
        return out;
    }
    let names = TaskNames::of(plan);
    let index_width = tasks
        .iter()
        .map(|&t| names.get(t).chars().count())
        .max()
        .unwrap_or(1);
    let label_width = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| tasks.binary_search(i).is_ok())
        .map(|(i, t)| index_width + 1 + names.subject(i, &t.subject).chars().count())
        .max()
        .unwrap_or(0)
        .min(28)
        .min(width.saturating_sub(13))
        .max(index_width + 2);
    let cells = width.saturating_sub(label_width + 3).max(10);
    let wall = wall.max(1);
    let cell = |t: u64| ((u128::from(t) * cells as u128) / u128::from(wall)) as usize;
    let cell_end =
        |t: u64| (((u128::from(t) * cells as u128).div_ceil(u128::from(wall))) as usize).min(cells);
    for &task in &tasks {
        let mut row = vec![' '; cells];
        for s in bars.iter().filter(|s| s.task == task) {
            // Every start-up and every attempt's work gets at least one cell, in order.
            let mut from = cell(s.start).min(cells - 1);
            if s.work > s.start {
                let to = cell(s.work).max(from + 1).min(cells);
                row[from..to].fill('░');
                from = to.min(cells - 1);
            }
            let to = cell_end(s.end).max(from + 1).min(cells);
            row[from..to].fill(s.glyph);
        }
        let bar: String = row.into_iter().collect();
        out.push_str(&format!(
            "{} │{bar}│\n",
            label(plan, &names, task, label_width, index_width)
        ));
    }
    let end = human(wall);
    out.push_str(&format!(
        "{} 0{}{end}\n",
        " ".repeat(label_width),
        " ".repeat((cells + 1).saturating_sub(end.chars().count()))
    ));
    out
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// The report as the documented JSON object (see the module's docs).
pub fn json(report: &Report, durations: &Durations) -> Value {
    let s = report.setting;
    let sources = [
        Origin::Given,
        Origin::History,
        Origin::Default,
        Origin::Median,
        Origin::Assumed,
    ];
    let bound = |b: super::Bound| {
        json!({
            "seconds": secs(b.value),
            "criticalPathSeconds": secs(b.critical_path),
            "workSeconds": secs(b.work),
            "slots": b.slots,
        })
    };
    // What every prediction says; a plain schedule's row goes on with its deadlock and its
    // attempts.
    let prediction = |p: &super::Prediction| {
        json!({
            "schedule": schedule_name(p.schedule),
            "where": p.place,
            "seconds": secs(p.wall),
            "jobs": p.jobs,
            "rounds": p.rounds,
            "vsBound": report.ratio(p).map(|r| (r * 1000.0).round() / 1000.0),
        })
    };
    let mut out = json!({
        "tasks": report.tasks,
        "settings": {
            "jobs": s.jobs,
            "maxParallel": s.max_parallel,
            "jobStartSeconds": secs(s.job_start),
            "integrateSeconds": secs(s.integrate),
            "pollSeconds": secs(s.poll),
            "pollsPerHour": s.polls_per_hour,
            "remaining": s.remaining,
        },
        "durations": {
            "default": {"seconds": secs(durations.default.0), "source": durations.default.1},
            "sources": sources.iter().map(|&x| (x, durations.count(x))).collect::<std::collections::BTreeMap<_, _>>(),
            "tasks": durations.tasks.iter().enumerate().filter(|(_, t)| t.source != Origin::Join).map(|(i, t)| json!({
                "task": i,
                "source": t.source,
                "attempts": t.attempts.iter().map(|&a| secs(a)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "warnings": durations.warnings,
        },
        "bounds": {
            "local": bound(report.local_bound),
            "actions": bound(report.actions_bound),
        },
        "schedules": report.predictions.iter().map(|p| {
            let mut row = prediction(p);
            row["deadlock"] = json!(p.deadlock);
            row["attempts"] = p.spans.iter().map(|sp| json!({
                "task": sp.task,
                "attempt": sp.attempt,
                "start": secs(sp.start),
                "work": secs(sp.work),
                "end": secs(sp.end),
                "failed": sp.failed,
            })).collect();
            row
        }).collect::<Vec<_>>(),
    });
    if let Some((rate, predictions)) = &report.merge {
        out["merge"] = json!({
            "conflictRate": rate.fraction(),
            "learnedFrom": rate.learned_from,
            "schedules": predictions.iter().map(prediction).collect::<Vec<_>>(),
        });
    }
    out
}
