//! The status table: one row per task, like a task list, then a one-line count by status.
//!
//! ```text
//! #  SUBJECT                   STATUS     ATTEMPTS  RESULT
//! 0  Create user model         completed  1         Added the User model
//! 1  Implement login endpoint  pending    0         -
//! 2 tasks: 1 pending, 1 completed
//! ```
//!
//! Once the plan holds attempt records ([`crate::pure::usage`]), TIME (the task's attempts' wall
//! time) and COST (what their workers reported; `-` when none did) come before RESULT, and a
//! total line follows the count line:
//!
//! ```text
//! #  SUBJECT                   STATUS     ATTEMPTS  TIME  COST   RESULT
//! 0  Create user model         completed  1         2m3s  $0.42  Added the User model
//! 1  Implement login endpoint  pending    0         -     -      -
//! 2 tasks: 1 pending, 1 completed
//! Total: 1 attempt(s) · 2m3s of work · $0.42
//! ```
//!
//! Where an agent CLI's own report of its spend disagrees with what the model gateway counted
//! (the figures shown), the COST cell adds the CLI's (`$0.42 (CLI: $0.50)`) and a line per
//! such task follows the total ([`crate::pure::usage::mismatch_lines`]).
//!
//! Columns are left-aligned and two spaces apart; widths count chars, not bytes. The last
//! column is not padded, so no line ends in spaces.

use std::borrow::Cow;
use std::io::{self, Write};

use super::one_line;
use crate::pure::plan::model::{Plan, Status, Task};

/// Longest subject or result shown in full, in chars; longer ones are cut to one char less
/// and end in `…`.
pub const MAX_CELL_CHARS: usize = 60;

/// What ends a cut cell.
const ELLIPSIS: char = '…';

/// Shown for an empty cell: a task without a result, or with an empty subject or result.
const NONE: &str = "-";

/// The column titles, in order.
const HEADERS: [&str; 5] = ["#", "SUBJECT", "STATUS", "ATTEMPTS", "RESULT"];
/// With attempt records: the column titles, in order.
const TIMED_HEADERS: [&str; 7] = [
    "#", "SUBJECT", "STATUS", "ATTEMPTS", "TIME", "COST", "RESULT",
];

/// Writes the status table of `plan` to `out`: a header row, one row per task in plan order,
/// then the count line (see [`summary_line`]).
///
/// Subjects and results longer than [`MAX_CELL_CHARS`] chars are cut to one char less plus
/// `…`; newlines and other control characters in them are shown as spaces.
///
/// # Errors
///
/// Whatever error writing to `out` returns; the table may then be partly written.
pub fn status_table(plan: &Plan, out: &mut impl Write) -> io::Result<()> {
    let spent = crate::pure::usage::per_task(plan);
    let timed = !spent.is_empty();
    let headers: &[&str] = if timed { &TIMED_HEADERS } else { &HEADERS };
    // The header row, then one row per task.
    let mut rows: Vec<Vec<Cow<'_, str>>> = vec![headers.iter().map(|&h| h.into()).collect()];
    rows.extend(
        plan.tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.join)
            .map(|(i, t)| row(i, t, plan.attempts_of(i), spent.get(&i), timed)),
    );
    // A task list's tasks go by its own IDs (what `retry` and `answer` take), not plan indices.
    if let Some(ids) = crate::pure::plan::ids::list_ids(plan) {
        rows[0][0] = "ID".into();
        for (row, id) in rows[1..].iter_mut().zip(ids) {
            row[0] = Cow::Owned(id);
        }
    }
    let mut text = super::columns(&rows, headers.len());
    text.push_str(&summary_line(plan));
    text.push('\n');
    if let Some(total) = crate::pure::usage::total_line(plan) {
        text.push_str(&format!("Total: {total}\n"));
    }
    text.push_str(&crate::pure::usage::mismatch_lines(plan));
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The count line under the table, e.g.
/// `6 tasks: 2 pending, 1 in progress, 1 completed, 1 failed, 1 skipped`.
///
/// Statuses come in [`Status::ALL`] order; one whose count is 0 is left out, except pending and
/// completed, which are always shown. `in_progress` is written `in progress`.
#[must_use]
pub fn summary_line(plan: &Plan) -> String {
    let mut counts = [0usize; Status::ALL.len()];
    for task in plan.tasks.iter().filter(|t| !t.join) {
        counts[task.status as usize] += 1;
    }
    let parts: Vec<String> = Status::ALL
        .iter()
        .zip(counts)
        .filter(|&(&status, n)| n > 0 || matches!(status, Status::Pending | Status::Completed))
        .map(|(&status, n)| format!("{n} {}", status.as_str().replace('_', " ")))
        .collect();
    let total = plan.total();
    let noun = if total == 1 { "task" } else { "tasks" };
    format!("{total} {noun}: {}", parts.join(", "))
}

/// One attempt's kept logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAttempt {
    /// The run that made the attempt (its folder `run-R`); 0 for logs an older dagexec kept
    /// directly in the logs folder.
    pub run: u32,
    pub attempt: u32,
    /// The kinds kept (`stdout`, `stderr`, `log`), in that order.
    pub kinds: Vec<String>,
}

impl KeptAttempt {
    /// The file of `kind` of task `task`'s attempt, relative to the logs folder
    /// (`run-R/task-N-attempt-K.kind`).
    #[must_use]
    pub fn file(&self, task: usize, kind: &str) -> String {
        let name = format!("task-{task}-attempt-{}.{kind}", self.attempt);
        match self.run {
            0 => name,
            r => format!("run-{r}/{name}"),
        }
    }
}

/// Kept attempt logs: task index → the attempts kept, oldest run first (a task's attempt
/// numbers start again at 1 after `dagexec retry` or in a new plan, each time in a new run).
pub type KeptLogs = std::collections::BTreeMap<usize, Vec<KeptAttempt>>;

/// The kept attempt logs of `plan`'s tasks, one line per task that has some, e.g.
///
/// ```text
/// Attempt logs in .git/dagexec/logs (run-R/task-N-attempt-K.stdout, .stderr, .log):
///   task 1: run-1 attempt 1 (stdout, stderr, log), run-2 attempt 2 (stdout, stderr)
/// ```
///
/// `unfinished_only` leaves out completed tasks (the run's summary); tasks the plan does not
/// have, and pending tasks never attempted (logs of an earlier plan), are always left out.
/// Empty when there is no line to show.
#[must_use]
pub fn logs_section(plan: &Plan, dir: &str, logs: &KeptLogs, unfinished_only: bool) -> String {
    use std::fmt::Write as _;
    let mut lines = String::new();
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for (&index, attempts) in logs {
        let Some(task) = plan.tasks.get(index) else {
            continue;
        };
        let stale = task.status == Status::Pending && task.attempts() == 0;
        if stale || (unfinished_only && task.status == Status::Completed) {
            continue;
        }
        let shown: Vec<String> = attempts
            .iter()
            .map(|a| {
                let run = match a.run {
                    0 => String::new(),
                    r => format!("run-{r} "),
                };
                format!("{run}attempt {} ({})", a.attempt, a.kinds.join(", "))
            })
            .collect();
        // A task list's task is named by its ID; its files by the plan index they carry.
        let name = names.get(index);
        let files = if name == index.to_string() {
            String::new()
        } else {
            format!(" (files task-{index}-…)")
        };
        let _ = writeln!(lines, "  task {name}{files}: {}", shown.join(", "));
    }
    if lines.is_empty() {
        return lines;
    }
    format!("Attempt logs in {dir} (run-R/task-N-attempt-K.stdout, .stderr, .log):\n{lines}")
}

/// The cells of the task at plan index `index`, in column order: index, subject and result
/// made fit for one line, status, attempts, and with `timed` the recorded attempts' wall time
/// and cost (or [`NONE`]) before the result.
fn row<'a>(
    index: usize,
    task: &'a Task,
    attempts: u32,
    spent: Option<&crate::pure::usage::Totals>,
    timed: bool,
) -> Vec<Cow<'a, str>> {
    let status = Cow::Borrowed(task.status.as_str());
    let mut cells = vec![index.to_string().into(), cell(&task.subject), status];
    cells.push(attempts.to_string().into());
    if timed {
        let or_none = |s: String| if s.is_empty() { NONE.to_string() } else { s };
        let time = spent.map(crate::pure::usage::Totals::time_text);
        let cost = spent.map(crate::pure::usage::Totals::cost_and_cli_text);
        cells.push(or_none(time.unwrap_or_default()).into());
        cells.push(or_none(cost.unwrap_or_default()).into());
    }
    cells.push(cell(task.result.as_deref().unwrap_or_default()));
    cells
}

/// `text` made fit for one table cell: trimmed, [`NONE`] if that leaves nothing, on one line
/// (see [`one_line`]) and cut to [`MAX_CELL_CHARS`] chars.
///
/// Reads at most [`MAX_CELL_CHARS`] + 1 chars past the trim, however long `text` is.
fn cell(text: &str) -> Cow<'_, str> {
    let text = text.trim();
    if text.is_empty() {
        return Cow::Borrowed(NONE);
    }
    if text.chars().nth(MAX_CELL_CHARS).is_none() && one_line(text).eq(text.chars()) {
        return Cow::Borrowed(text);
    }
    let mut chars = one_line(text);
    let mut shown: String = chars.by_ref().take(MAX_CELL_CHARS).collect();
    if chars.next().is_some() {
        let cut = shown
            .char_indices()
            .nth(MAX_CELL_CHARS - 1)
            .map_or(shown.len(), |(at, _)| at);
        shown.truncate(cut);
        shown.push(ELLIPSIS);
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::render::tests::{auth_v2, auth_v2_mid_run, plan_of, task};

    /// The table of `plan` as a String.
    fn table(plan: &Plan) -> String {
        let mut out = Vec::new();
        status_table(plan, &mut out).expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("the table is UTF-8")
    }

    #[test]
    fn a_task_lists_table_shows_its_own_ids_not_plan_indices() {
        let mut plan = plan_of(vec![task("1 a", &[]), task("2.1 s", &[0])]);
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [
                {"id": "1", "text": "a"}, {"id": "2.1", "text": "s"}
            ]}),
        );
        let t = table(&plan);
        let first: Vec<&str> = t
            .lines()
            .take(3)
            .map(|l| l.split("  ").next().unwrap())
            .collect();
        assert_eq!(first, ["ID", "1", "2.1"], "{t}");
    }

    #[test]
    fn logs_section_lists_the_tasks_with_kept_logs() {
        let plan = auth_v2_mid_run();
        let kept = |run: u32, attempt: u32, k: &[&str]| KeptAttempt {
            run,
            attempt,
            kinds: k.iter().map(std::string::ToString::to_string).collect(),
        };
        let mut logs = KeptLogs::new();
        logs.insert(0, vec![kept(0, 1, &["stdout", "stderr"])]); // kept flat, by an older dagexec
        logs.insert(
            1,
            vec![
                kept(1, 1, &["stdout", "stderr", "log"]),
                kept(2, 2, &["stdout", "stderr"]),
                kept(3, 1, &["stdout"]), // after `dagexec retry 1`
            ],
        );
        logs.insert(4, vec![kept(1, 1, &["stdout"])]); // pending, never tried
        logs.insert(99, vec![kept(1, 1, &["stdout"])]); // not in this plan
        let dir = ".git/dagexec/logs";
        assert_eq!(
            logs_section(&plan, dir, &logs, false),
            "Attempt logs in .git/dagexec/logs (run-R/task-N-attempt-K.stdout, .stderr, .log):\n  task 0: attempt 1 (stdout, stderr)\n  task 1: run-1 attempt 1 (stdout, stderr, log), run-2 attempt 2 (stdout, stderr), run-3 attempt 1 (stdout)\n"
        );
        let unfinished = logs_section(&plan, dir, &logs, true);
        assert!(!unfinished.contains("task 0:") && unfinished.contains("task 1:"));
        assert_eq!(logs_section(&plan, dir, &KeptLogs::new(), false), "");
        assert_eq!(
            logs[&1][1].file(1, "stderr"),
            "run-2/task-1-attempt-2.stderr"
        );
        assert_eq!(logs[&0][0].file(0, "stdout"), "task-0-attempt-1.stdout");
    }

    #[test]
    fn cells_are_made_fit_for_one_line() {
        let a59 = "a".repeat(59);
        let a60 = "a".repeat(60);
        let a61 = "a".repeat(61);
        let e60 = "é".repeat(60); // 120 bytes, 60 chars: fits
        let e61 = "é".repeat(61);
        let cases: &[(&str, &str, String)] = &[
            ("plain", "Create user model", "Create user model".into()),
            ("empty", "", "-".into()),
            ("blank", " \n\t ", "-".into()),
            ("trimmed", "  padded \n", "padded".into()),
            ("newline", "line one\nline two", "line one line two".into()),
            ("crlf is one space", "one\r\ntwo", "one two".into()),
            ("lone cr and tab", "a\rb\tc", "a b c".into()),
            (
                "unicode separators",
                "a\u{2028}b\u{2029}c\u{85}d",
                "a b c d".into(),
            ),
            ("59 chars", &a59, a59.clone()),
            ("60 chars fit", &a60, a60.clone()),
            ("61 chars are cut", &a61, format!("{a59}…")),
            ("60 two-byte chars fit", &e60, e60.clone()),
            ("61 two-byte chars", &e61, format!("{}…", "é".repeat(59))),
            (
                "cut after newlines become spaces",
                &format!("{a59}\nb"),
                format!("{a59}…"),
            ),
            (
                "emoji counted as chars",
                &"🦀".repeat(61),
                format!("{}…", "🦀".repeat(59)),
            ),
        ];
        for (name, input, want) in cases {
            let got = cell(input);
            assert_eq!(&got, want, "case {name}");
            assert!(got.chars().count() <= MAX_CELL_CHARS, "case {name}");
        }
    }

    #[test]
    fn summary_line_lists_statuses_in_status_all_order() {
        use Status::*;
        let cases: &[(&[Status], &str)] = &[
            (&[], "0 tasks: 0 pending, 0 completed"),
            (&[Pending], "1 task: 1 pending, 0 completed"),
            (&[Completed, Completed], "2 tasks: 0 pending, 2 completed"),
            (
                &[InProgress],
                "1 task: 0 pending, 1 in progress, 0 completed",
            ),
            (
                &[Skipped, Blocked],
                "2 tasks: 0 pending, 0 completed, 1 blocked, 1 skipped",
            ),
            (
                &[Completed, Failed, Pending, Skipped, Completed, Pending],
                "6 tasks: 2 pending, 2 completed, 1 failed, 1 skipped",
            ),
            (
                &[Skipped, Blocked, Failed, Completed, InProgress, Pending],
                "6 tasks: 1 pending, 1 in progress, 1 completed, 1 failed, 1 blocked, 1 skipped",
            ),
        ];
        for (statuses, want) in cases {
            let tasks = statuses
                .iter()
                .map(|&status| Task {
                    status,
                    ..task("t", &[])
                })
                .collect();
            assert_eq!(summary_line(&plan_of(tasks)), *want, "{statuses:?}");
        }
    }

    #[test]
    fn table_rows() {
        let cases: &[(&str, Task, &str)] = &[
            (
                "defaults",
                task("Do it", &[]),
                "0  Do it    pending  0         -",
            ),
            (
                "attempts and result",
                Task {
                    status: Status::Failed,
                    attempts: Some(3),
                    result: Some("boom\nbang".into()),
                    ..task("Do it", &[])
                },
                "0  Do it    failed  3         boom bang",
            ),
            (
                "in progress keeps the plan word",
                Task {
                    status: Status::InProgress,
                    ..task("Do it", &[])
                },
                "0  Do it    in_progress  0         -",
            ),
        ];
        for (name, task, want) in cases {
            let got = table(&plan_of(vec![task.clone()]));
            let row = got.lines().nth(1).expect("a row under the header");
            assert_eq!(row, *want, "case {name}");
        }
    }

    #[test]
    fn columns_are_aligned_by_chars_and_lines_have_no_trailing_space() {
        let plan = plan_of(vec![
            task("Ünïcödé subject", &[]),
            task("x", &[]),
            task(&"long ".repeat(20), &[]),
        ]);
        let got = table(&plan);
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 5, "{got}");
        let status_col = |line: &str| line.find("STATUS").or_else(|| line.find("pending"));
        let cols: Vec<usize> = lines[..4]
            .iter()
            .map(|l| {
                let byte = status_col(l).expect("a status cell");
                l[..byte].chars().count()
            })
            .collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{got}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{got}");
        assert!(got.ends_with("3 tasks: 3 pending, 0 completed\n"), "{got}");
    }

    #[test]
    fn empty_plan_has_header_and_count_only() {
        assert_eq!(
            table(&plan_of(Vec::new())),
            "#  SUBJECT  STATUS  ATTEMPTS  RESULT\n0 tasks: 0 pending, 0 completed\n"
        );
    }

    #[test]
    fn large_plans_render_in_linear_time() {
        let tasks = (0..100_000)
            .map(|i| Task {
                result: Some("r".repeat(i % 100)),
                ..task(&format!("task {i}"), &[])
            })
            .collect();
        let got = table(&plan_of(tasks));
        assert_eq!(got.lines().count(), 100_002);
    }

    #[test]
    fn write_errors_are_returned() {
        /// A writer whose every write fails.
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("broken pipe"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::other("broken pipe"))
            }
        }
        for plan in [plan_of(Vec::new()), auth_v2()] {
            let err = status_table(&plan, &mut Broken).expect_err("the write fails");
            assert_eq!(err.to_string(), "broken pipe");
        }
    }

    #[test]
    fn snapshot_auth_v2_pending() {
        insta::assert_snapshot!(table(&auth_v2()));
    }

    #[test]
    fn snapshot_auth_v2_mid_run() {
        insta::assert_snapshot!(table(&auth_v2_mid_run()));
    }

    /// With attempt records: TIME and COST columns and the total line.
    #[test]
    fn snapshot_auth_v2_with_time_and_cost() {
        insta::assert_snapshot!(table(&crate::pure::render::tests::auth_v2_spent()));
    }

    /// An agent CLI's own report that disagrees with the gateway's count: both in the COST
    /// cell, and a line per task under the total; one that agrees changes nothing.
    #[test]
    fn snapshot_a_cli_report_that_disagrees_with_the_gateway() {
        insta::assert_snapshot!(table(&crate::pure::render::tests::cli_disagrees()));
    }
}
