//! Renderers of plan state for people: the status table and the DAG picture.
//!
//! They write to `impl io::Write` or return a `String`, and do no I/O of their own. Output is
//! deterministic (it depends on the plan only) and has no colours or terminal escapes.

pub mod graph;
pub mod status;
pub mod summary;

/// The chars of `text` on one line: every control character (newline, tab, …) and Unicode
/// line or paragraph separator becomes a space, and `\r\n` a single space.
fn one_line(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut chars = text.chars().peekable();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        if c == '\r' {
            chars.next_if_eq(&'\n');
        }
        let breaks = c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
        Some(if breaks { ' ' } else { c })
    })
}

/// `rows` as a table: columns two spaces apart, each as wide as its widest cell (in chars),
/// those from `right_from` on right-aligned, the others left-aligned — the last one then
/// unpadded, so no line ends in spaces.
pub(crate) fn columns<S: AsRef<str>>(rows: &[Vec<S>], right_from: usize) -> String {
    use std::fmt::Write as _;
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        widths.resize(widths.len().max(row.len()), 0);
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.as_ref().chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        for (k, (cell, &w)) in row.iter().zip(&widths).enumerate() {
            let (cell, last) = (cell.as_ref(), k + 1 == row.len());
            // Writing to a String cannot fail.
            let _ = match k {
                _ if k >= right_from => write!(out, "{cell:>w$}"),
                _ if last => write!(out, "{cell}"),
                _ => write!(out, "{cell:<w$}"),
            };
            out.push_str(if last { "\n" } else { "  " });
        }
    }
    out
}

/// Fixtures shared by the renderers' tests.
#[cfg(test)]
pub(crate) mod tests {
    use crate::pure::plan::model::{Plan, Progress, Status, Task};

    /// The auth-v2 example plan, exactly as shipped.
    pub(crate) fn auth_v2() -> Plan {
        serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/auth-v2.json"
        )))
        .expect("examples/auth-v2.json is a valid plan")
    }

    /// The auth-v2 plan part-way through a run, with every status present:
    /// 0 completed, 1 failed after 3 attempts, 2 skipped (it needs 1), 3 in progress,
    /// 4 pending, 5 blocked.
    pub(crate) fn auth_v2_mid_run() -> Plan {
        let mut plan = auth_v2();
        let t = &mut plan.tasks;
        t[0].status = Status::Completed;
        t[0].attempts = Some(1);
        t[0].result = Some("Added the User model and migration 001_user".into());
        t[1].status = Status::Failed;
        t[1].attempts = Some(3);
        t[1].result = Some(
            "npm test -- password failed:\nbcrypt needs node-gyp, python3 and a C++ toolchain"
                .into(),
        );
        t[2].status = Status::Skipped;
        t[2].result = Some("dependency 1 failed".into());
        t[3].status = Status::InProgress;
        t[3].attempts = Some(1);
        t[5].status = Status::Blocked;
        t[5].attempts = Some(1);
        t[5].result = Some("blocked: no decision yet on \"Redis\" vs <in-memory> & co.".into());
        plan
    }

    /// Records attempts in `plan`: (task, attempt, seconds, cost, outcome), each starting at
    /// 2026-11-23T05:00:00Z.
    pub(crate) fn spend(
        plan: &mut Plan,
        rows: &[(usize, u32, i64, Option<f64>, crate::pure::usage::Outcome)],
    ) {
        let start: jiff::Timestamp = "2026-11-23T05:00:00Z".parse().expect("a timestamp");
        for &(task, attempt, secs, cost, outcome) in rows {
            let m = crate::pure::usage::Measured {
                start,
                end: start + jiff::SignedDuration::from_secs(secs),
                usage: crate::pure::usage::Usage {
                    cost_usd: cost,
                    ..Default::default()
                },
            };
            let r = crate::pure::usage::AttemptRecord::new(task, attempt, &m, outcome);
            crate::pure::usage::record(plan, &r);
        }
    }

    /// [`auth_v2_mid_run`] with its attempts' time and cost recorded.
    pub(crate) fn auth_v2_spent() -> Plan {
        use crate::pure::usage::Outcome::*;
        let mut plan = auth_v2_mid_run();
        spend(
            &mut plan,
            &[
                (0, 1, 123, Some(0.42), Completed),
                (1, 1, 60, Some(0.1), Failed),
                (1, 2, 1800, Some(1.25), Timeout),
                (1, 3, 30, None, Failed),
                (5, 1, 10, Some(0.004), Blocked),
            ],
        );
        plan
    }

    /// [`auth_v2_mid_run`] whose task 0 the gateway counted at $0.42 while the CLI said
    /// $0.50, task 5 where they agree, and task 1 where a token-only CLI (no cost) counted
    /// fewer tokens than the gateway.
    pub(crate) fn cli_disagrees() -> Plan {
        use crate::pure::usage::{Outcome, Usage};
        let mut plan = auth_v2_mid_run();
        let start: jiff::Timestamp = "2026-11-23T05:00:00Z".parse().expect("a timestamp");
        let tokens = |cost: Option<f64>, input: u64, output: u64| Usage {
            cost_usd: cost,
            input_tokens: Some(input),
            output_tokens: Some(output),
            model: Some("claude-sonnet-4-5".into()),
        };
        for (task, outcome, wire, cli) in [
            (
                0,
                Outcome::Completed,
                tokens(Some(0.42), 1200, 340),
                tokens(Some(0.5), 1400, 400),
            ),
            (
                1,
                Outcome::Failed,
                tokens(Some(0.1), 900, 100),
                tokens(None, 800, 100),
            ),
            (
                5,
                Outcome::Blocked,
                tokens(Some(0.004), 100, 10),
                tokens(Some(0.004), 100, 10),
            ),
        ] {
            let m = crate::pure::usage::Measured {
                start,
                end: start + jiff::SignedDuration::from_secs(60),
                usage: wire,
            };
            let mut r = crate::pure::usage::AttemptRecord::new(task, 1, &m, outcome);
            r.cli = Some(cli);
            crate::pure::usage::record(&mut plan, &r);
        }
        plan
    }

    /// A v3 plan with no context and the given tasks.
    pub(crate) fn plan_of(tasks: Vec<Task>) -> Plan {
        Plan {
            schema_version: 3,
            goal: "test".into(),
            context: None,
            progress: Progress::default(),
            tasks,
            extra: Default::default(),
        }
    }

    /// A pending task with the given subject and dependencies.
    pub(crate) fn task(subject: &str, blocked_by: &[usize]) -> Task {
        Task {
            subject: subject.into(),
            blocked_by: blocked_by.to_vec(),
            ..Task::default()
        }
    }

    #[test]
    fn mid_run_fixture_has_every_status() {
        let plan = auth_v2_mid_run();
        assert_eq!(plan.tasks.len(), 6);
        for status in Status::ALL {
            assert!(plan.count(status) >= 1, "no task is {status}");
        }
    }
}
