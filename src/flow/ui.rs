//! What a run shows. On a terminal (and not under `CI` or `NO_COLOR`): a live display with the
//! overall progress and one line per running task with its elapsed time, events printed above
//! it as they land. Elsewhere: plain output, one line per event, nothing redrawn.
//!
//! The runners report what happens as typed events ([`Ui::emit`], [`crate::pure::events`]); the
//! display renders them and keeps them ([`Ui::activity`]) for the reports written at the end
//! of a job (on GitHub: the job summary, the pull request body, the status comment).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::edge::lock::held;
use crate::pure::events::{Event, Stamped};
use crate::pure::plan::ids::TaskNames;

/// The run's display; shared by the tasks running at once.
pub struct Ui {
    mode: Mode,
    /// The events emitted so far (the newest [`KEPT_EVENTS`]).
    journal: Mutex<std::collections::VecDeque<Stamped>>,
    /// How lines name the run's tasks ([`Ui::name_tasks`]; plan indices until then).
    names: std::sync::RwLock<TaskNames>,
}

/// How many events a display keeps for the reports.
const KEPT_EVENTS: usize = 10_000;

enum Mode {
    Plain(Mutex<Box<dyn Write + Send>>),
    Live {
        multi: MultiProgress,
        overall: ProgressBar,
        tasks: Mutex<BTreeMap<usize, ProgressBar>>,
    },
}

impl Ui {
    /// One line per event to `out`.
    pub fn plain(out: Box<dyn Write + Send>) -> Ui {
        Ui::with(Mode::Plain(Mutex::new(out)))
    }

    fn with(mode: Mode) -> Ui {
        Ui {
            mode,
            journal: Mutex::default(),
            names: std::sync::RwLock::default(),
        }
    }

    /// The live display, drawn on stdout (a terminal).
    fn live() -> Ui {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(
            ProgressStyle::with_template(
                "{bar:30.green/dim} {pos}/{len} tasks completed  {elapsed_precise}",
            )
            .expect("a valid template")
            .progress_chars("█▉░"),
        );
        overall.enable_steady_tick(Duration::from_millis(200));
        Ui::with(Mode::Live {
            multi,
            overall,
            tasks: Mutex::new(BTreeMap::new()),
        })
    }

    /// Live on an interactive terminal unless `CI` or `NO_COLOR` is set; plain otherwise.
    pub fn for_stdout() -> Ui {
        let quiet = std::env::var_os("CI").is_some() || std::env::var_os("NO_COLOR").is_some();
        if std::io::stdout().is_terminal() && !quiet {
            Ui::live()
        } else {
            Ui::plain(Box::new(std::io::stdout()))
        }
    }

    /// Prints one event line (several lines are fine). Escape sequences and other control
    /// characters in it are neutralised ([`crate::pure::sanitize::text`]): what it shows can come
    /// from a worker.
    pub fn say(&self, line: impl AsRef<str>) {
        let line = crate::pure::sanitize::text(line.as_ref());
        match &self.mode {
            Mode::Plain(out) => {
                let mut out = held(out);
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            Mode::Live { multi, .. } => {
                let _ = multi.println(line);
            }
        }
    }

    /// Names the tasks of `plan` in every line from now on as messages name them (a task
    /// list's own IDs, [`TaskNames`]); a run calls it once it has read its plan.
    pub fn name_tasks(&self, plan: &crate::pure::plan::model::Plan) {
        *self
            .names
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = TaskNames::of(plan);
    }

    /// How lines name task `index` ([`Ui::name_tasks`]).
    pub(crate) fn task(&self, index: usize) -> String {
        self.names().get(index)
    }

    /// `task T002, task T004`, or `the branch` for none: what a rebase builds on, as lines
    /// name the tasks.
    pub(crate) fn onto(&self, tasks: &[usize]) -> String {
        if tasks.is_empty() {
            return "the branch".into();
        }
        let names = self.names();
        let named: Vec<String> = tasks
            .iter()
            .map(|&k| format!("task {}", names.get(k)))
            .collect();
        named.join(", ")
    }

    fn names(&self) -> std::sync::RwLockReadGuard<'_, TaskNames> {
        self.names
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reports `event`: its line ([`crate::pure::events::line`]), the live display's task lines, and
    /// the journal the job's reports read.
    pub fn emit(&self, event: Event) {
        match &event {
            Event::AttemptStarted {
                task,
                attempt,
                subject,
                run: None,
            } => self.task_started(*task, *attempt, subject),
            Event::AttemptEnded(e) => self.task_finished(e.task),
            _ => {}
        }
        let line = crate::pure::events::line(&event, &self.names());
        if let Some(line) = line {
            self.say(line);
        }
        let mut journal = held(&self.journal);
        if journal.len() == KEPT_EVENTS {
            journal.pop_front();
        }
        journal.push_back(Stamped {
            at: jiff::Timestamp::now(),
            event,
        });
    }

    /// The events emitted so far, oldest first.
    pub fn activity(&self) -> Vec<Stamped> {
        held(&self.journal).iter().cloned().collect()
    }

    /// Sets the overall progress: `done` of `total` tasks completed.
    pub fn progress(&self, done: usize, total: usize) {
        if let Mode::Live { overall, .. } = &self.mode {
            overall.set_length(total as u64);
            overall.set_position(done as u64);
        }
    }

    /// A worker started (live: a spinner line with its elapsed time).
    pub fn task_started(&self, index: usize, attempt: u32, subject: &str) {
        if let Mode::Live { multi, tasks, .. } = &self.mode {
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("  {spinner} task {prefix} {msg} {elapsed}")
                    .expect("a valid template"),
            );
            let names = self.names();
            bar.set_prefix(names.get(index));
            let attempt = if attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            };
            bar.set_message(format!(
                "{}{attempt}",
                crate::pure::sanitize::line(names.subject(index, subject))
            ));
            drop(names);
            bar.enable_steady_tick(Duration::from_millis(120));
            let old = held(tasks).insert(index, bar);
            if let Some(old) = old {
                old.finish_and_clear();
                multi.remove(&old);
            }
        }
    }

    /// A worker finished (live: its line goes away).
    pub fn task_finished(&self, index: usize) {
        if let Mode::Live { multi, tasks, .. } = &self.mode {
            let bar = held(tasks).remove(&index);
            if let Some(bar) = bar {
                bar.finish_and_clear();
                multi.remove(&bar);
            }
        }
    }

    /// Ends the live display (the overall bar stays as the last line).
    pub fn finish(&self) {
        if let Mode::Live { overall, .. } = &self.mode {
            overall.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Sink(std::sync::Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plain_is_one_line_per_event_and_ignores_live_calls() {
        let sink = Sink::default();
        let ui = Ui::plain(Box::new(sink.clone()));
        ui.progress(1, 3);
        ui.task_started(2, 1, "x");
        ui.say("Round 1: starting 1 task(s): 2");
        ui.task_finished(2);
        ui.finish();
        ui.say("  task 2: \u{1b}]0;pwned\u{7}\u{1b}[2Jdone\nnext line");
        assert_eq!(
            String::from_utf8(sink.0.lock().unwrap().clone()).unwrap(),
            "Round 1: starting 1 task(s): 2\n  task 2: done\nnext line\n"
        );
    }
}
