//! What happens during a run, as typed events: the engine loop ([`crate::flow::exec`]) and the
//! runners emit them, and every place that shows a run renders them — the terminal display
//! ([`crate::flow::Ui`]: a line each, live bars on a terminal), and on GitHub the job summary,
//! the pull request body and the status comment ([`crate::action::report::activity`]), which
//! read the events the job recorded ([`crate::flow::Ui::activity`]). Pure: building and
//! rendering, no I/O.
//!
//! Modelled on nextest's reporter events: the runner says what happened, once, with the facts
//! (task, attempt, outcome, time, cost); each reporter decides how to show it.

use std::time::Duration;

use crate::pure::plan::ids::TaskNames;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::usage::Outcome;

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A round of the seeds' rounds or waves starts: its tasks, in the sequential groups
    /// they run in (one group unless some share files), on `slots` workers at once (when the
    /// first group has more tasks, only its first `slots` start now; the others are
    /// [`Event::Starting`] as workers free up).
    RoundStarted {
        round: u32,
        tasks: Vec<usize>,
        groups: Vec<Vec<usize>>,
        slots: usize,
    },
    /// The next sequential group of the round starts (`group` of `of`, from 1).
    GroupStarted {
        group: usize,
        of: usize,
        tasks: Vec<usize>,
    },
    /// Ready tasks that wait for a later round (they share files with this one's).
    Waiting { tasks: Vec<usize> },
    /// These tasks start (ascending): the eager scheduler's picks, or a round's tasks that
    /// waited for a free worker.
    Starting { tasks: Vec<usize> },
    /// The budget is spent: these tasks of the round do not start (they stay pending).
    NotStarted { tasks: Vec<usize> },
    /// An attempt's worker starts: locally in a worktree, on GitHub as workflow run `run`.
    AttemptStarted {
        task: usize,
        attempt: u32,
        subject: String,
        run: Option<u64>,
    },
    /// An attempt ended and was judged.
    AttemptEnded(Ended),
    /// A judged attempt's warning (for example, an unreadable usage report).
    Warning { task: usize, text: String },
    /// The arrivals of a batch are integrated and committed as round `round`.
    Integrating { round: u32, tasks: Vec<usize> },
    /// Anything else worth a line (adoptions, handovers, aborts).
    Note(String),
}

/// A judged attempt, as reporters show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub task: usize,
    pub attempt: u32,
    pub subject: String,
    /// The verdict's status (a failed attempt that is retried is `failed` here).
    pub status: Status,
    /// How it ended, as its record says (a failure refined: timeout, rejected).
    pub outcome: Outcome,
    /// The verdict's result line (untrusted worker text; reporters neutralise it).
    pub result: String,
    pub took: Duration,
    pub cost_usd: Option<f64>,
    /// The next attempt's number when the task is tried again.
    pub retry: Option<u32>,
}

impl Ended {
    /// `, $0.12` when the attempt reported a cost.
    fn cost_text(&self) -> String {
        self.cost_usd
            .map(|c| format!(", {}", crate::pure::usage::money(c)))
            .unwrap_or_default()
    }
}

/// An event and when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped {
    pub at: jiff::Timestamp,
    pub event: Event,
}

/// The attempts the plan records (`progress.dagexecAttempts`), as the events that ended them,
/// oldest first: what any job can show of a run's history, since the branch is the only
/// state between jobs. The result line is not recorded (empty here).
pub fn of_records(plan: &Plan) -> Vec<Stamped> {
    let records = crate::pure::usage::records(plan);
    let mut out: Vec<Stamped> = records
        .iter()
        .map(|r| {
            let status = match r.outcome {
                Outcome::Completed => Status::Completed,
                Outcome::Blocked => Status::Blocked,
                Outcome::Interrupted => Status::InProgress,
                Outcome::Failed | Outcome::Timeout | Outcome::Rejected | Outcome::Conflict => {
                    Status::Failed
                }
            };
            let retried = records
                .iter()
                .any(|o| o.task == r.task && o.attempt == r.attempt + 1);
            Stamped {
                at: r.end.parse().unwrap_or_default(),
                event: Event::AttemptEnded(Ended {
                    task: r.task,
                    attempt: r.attempt,
                    subject: plan.tasks[r.task].subject.clone(),
                    status,
                    outcome: r.outcome,
                    result: String::new(),
                    took: Duration::from_secs_f64(r.seconds.max(0.0)),
                    cost_usd: r.usage.cost_usd,
                    retry: retried.then_some(r.attempt + 1),
                }),
            }
        })
        .collect();
    out.sort_by_key(|s| s.at);
    out
}

/// A round's first line, and its groups when it has several.
fn round_started(
    round: u32,
    tasks: &[usize],
    groups: &[Vec<usize>],
    slots: usize,
    names: &TaskNames,
) -> String {
    let list = |t: &[usize]| names.list(t);
    let first = groups.first().map_or(tasks, Vec::as_slice);
    let mut s = if first.len() > slots {
        format!(
            "\nRound {round}: {} task(s): {}; starting {} now ({slots} at a time, the others as workers free up)",
            tasks.len(),
            list(tasks),
            list(&first[..slots])
        )
    } else {
        format!(
            "\nRound {round}: starting {} task(s): {}",
            tasks.len(),
            list(tasks)
        )
    };
    if groups.len() > 1 {
        let text = groups
            .iter()
            .map(|g| list(g))
            .collect::<Vec<_>>()
            .join(", then ");
        s.push_str(&format!(
            "\n  they share files, so they run in {} groups one after another: {text}",
            groups.len()
        ));
    }
    s
}

/// An attempt's end: its outcome, time and cost, and the retry when one follows.
fn attempt_ended(e: &Ended, names: &TaskNames) -> String {
    let (task, subject) = (names.get(e.task), names.subject(e.task, &e.subject));
    match e.retry {
        Some(next) => format!(
            "  task {task} ({subject}) attempt {} failed: {} — retrying (attempt {next} of {}); it took {}{}",
            e.attempt,
            e.result,
            crate::pure::outcome::MAX_ATTEMPTS,
            crate::pure::outcome::human_duration(e.took),
            e.cost_text(),
        ),
        None => format!(
            "  task {task} ({subject}): {} in {}{} — {}",
            e.status,
            crate::pure::outcome::human_duration(e.took),
            e.cost_text(),
            e.result
        ),
    }
}

/// The event's line on a plain terminal or a job log; `None` for events only a live display
/// shows (a local attempt starting is a spinner line there, nothing in plain output). Tasks
/// are named as `names` names them (a task list's own IDs).
pub fn line(event: &Event, names: &TaskNames) -> Option<String> {
    let list = |t: &[usize]| names.list(t);
    Some(match event {
        Event::RoundStarted {
            round,
            tasks,
            groups,
            slots,
        } => round_started(*round, tasks, groups, *slots, names),
        Event::GroupStarted { group, of, tasks } => {
            format!("  group {group} of {of}: {}", list(tasks))
        }
        Event::Waiting { tasks } if tasks.len() == 1 => format!(
            "(task {} waits for a later round: it shares files with a task in this one)",
            list(tasks)
        ),
        Event::Waiting { tasks } => format!(
            "(tasks {} wait for a later round: they share files with tasks in this one)",
            list(tasks)
        ),
        Event::Starting { tasks } => format!("starting task(s) {}", list(tasks)),
        Event::NotStarted { tasks } => format!(
            "  the budget is spent: task(s) {} not started (they stay pending)",
            list(tasks)
        ),
        Event::AttemptStarted {
            task,
            attempt,
            subject,
            run: Some(run),
        } => format!(
            "Started task {} ({}) attempt {attempt}: run {run}.",
            names.get(*task),
            names.subject(*task, subject)
        ),
        Event::AttemptStarted { run: None, .. } => return None,
        Event::AttemptEnded(e) => attempt_ended(e, names),
        Event::Warning { task, text } => format!(
            "  task {}: warning: {}",
            names.get(*task),
            crate::pure::sanitize::line(text)
        ),
        Event::Integrating { round, tasks } => {
            format!("\nRound {round}: integrating task(s) {}", list(tasks))
        }
        Event::Note(text) => text.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(retry: Option<u32>, cost_usd: Option<f64>) -> Event {
        Event::AttemptEnded(Ended {
            task: 3,
            attempt: 1,
            subject: "Add login".into(),
            status: Status::Failed,
            outcome: Outcome::Failed,
            result: "tests fail".into(),
            took: Duration::from_secs(75),
            cost_usd,
            retry,
        })
    }

    fn line_of(event: &Event) -> Option<String> {
        line(event, &TaskNames::default())
    }

    /// A warning names what a worker wrote (a file name may hold a line break): one line,
    /// or a worker's file `b\nRound 9: all done.txt` printed a line that looked like
    /// dagexec's own.
    #[test]
    fn a_warning_is_one_line_whatever_file_name_it_names() {
        let w = Event::Warning {
            task: 0,
            text: "unexpected file changed: b\nRound 9: all done\r.txt".into(),
        };
        assert_eq!(
            line_of(&w).unwrap(),
            "  task 0: warning: unexpected file changed: b Round 9: all done .txt"
        );
    }

    #[test]
    fn each_event_has_its_line() {
        assert_eq!(
            line_of(&ended(Some(2), Some(0.5))).unwrap(),
            "  task 3 (Add login) attempt 1 failed: tests fail — retrying (attempt 2 of 3); it took 1m15s, $0.50"
        );
        assert_eq!(
            line_of(&ended(None, None)).unwrap(),
            "  task 3 (Add login): failed in 1m15s — tests fail"
        );
        assert_eq!(
            line_of(&Event::Starting { tasks: vec![1, 4] }).unwrap(),
            "starting task(s) 1, 4"
        );
        assert_eq!(
            line_of(&Event::AttemptStarted {
                task: 2,
                attempt: 1,
                subject: "s".into(),
                run: Some(9)
            })
            .unwrap(),
            "Started task 2 (s) attempt 1: run 9."
        );
        assert_eq!(
            line_of(&Event::AttemptStarted {
                task: 2,
                attempt: 1,
                subject: "s".into(),
                run: None
            }),
            None
        );
        assert_eq!(
            line_of(&Event::Integrating {
                round: 4,
                tasks: vec![0, 2]
            })
            .unwrap(),
            "\nRound 4: integrating task(s) 0, 2"
        );
        assert_eq!(
            line_of(&Event::RoundStarted {
                round: 2,
                tasks: vec![0, 1, 3],
                groups: vec![vec![0, 3], vec![1]],
                slots: 4,
            })
            .unwrap(),
            "\nRound 2: starting 3 task(s): 0, 1, 3\n  they share files, so they run in 2 groups one after another: 0, 3, then 1"
        );
        // More tasks than workers: the line says which start now.
        assert_eq!(
            line_of(&Event::RoundStarted {
                round: 1,
                tasks: vec![0, 1, 2],
                groups: vec![vec![0, 1, 2]],
                slots: 1,
            })
            .unwrap(),
            "\nRound 1: 3 task(s): 0, 1, 2; starting 0 now (1 at a time, the others as workers free up)"
        );
        assert_eq!(
            line_of(&Event::NotStarted { tasks: vec![2] }).unwrap(),
            "  the budget is spent: task(s) 2 not started (they stay pending)"
        );
        assert_eq!(
            line_of(&Event::Waiting { tasks: vec![5] }).unwrap(),
            "(task 5 waits for a later round: it shares files with a task in this one)"
        );
    }

    #[test]
    fn a_task_lists_tasks_are_named_by_their_ids() {
        let names = TaskNames::from_ids(["T001", "T002", "T003", "T004"]);
        let mut e = ended(Some(2), None);
        if let Event::AttemptEnded(x) = &mut e {
            x.subject = "T004 [P] Add login".into();
        }
        assert_eq!(
            line(&e, &names).unwrap(),
            "  task T004 ([P] Add login) attempt 1 failed: tests fail — retrying (attempt 2 of 3); it took 1m15s"
        );
        assert_eq!(
            line(
                &Event::RoundStarted {
                    round: 1,
                    tasks: vec![0, 1, 2],
                    groups: vec![vec![0, 2], vec![1]],
                    slots: 1,
                },
                &names
            )
            .unwrap(),
            "\nRound 1: 3 task(s): T001, T002, T003; starting T001 now (1 at a time, the others as workers free up)\n  they share files, so they run in 2 groups one after another: T001, T003, then T002"
        );
        assert_eq!(
            line(
                &Event::Warning {
                    task: 1,
                    text: "w".into()
                },
                &names
            )
            .unwrap(),
            "  task T002: warning: w"
        );
    }
}
