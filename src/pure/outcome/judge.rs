//! Judging one attempt (seed B.3 steps 1–5, 8): the exit, the status line, spot-checks, acceptance.

use super::{
    AttemptReport, Exit, NO_STATUS_NO_LOG, OwnFiles, Reported, Verdict, human_duration,
    last_nonempty_line, parse_status_line, spot_check, unexpected_files_among,
};
use crate::pure::clip::{chars as clip, line as clip_line};
use crate::pure::plan::model::{Status, Task};
use crate::pure::prompt::FailedCheck;

/// Judges one attempt (seed B.3 steps 1–5, 8).
#[cfg(test)]
pub fn judge(index: usize, task: &Task, report: &AttemptReport, plan_rel: &str) -> Verdict {
    judge_among(index, task, report, OwnFiles::plan(plan_rel))
}

/// Judges one attempt (seed B.3 steps 1–5, 8), where `own` is the plan file and, for a Spec
/// Kit plan, its tasks.md: a worker's edit of them is discarded, with a warning.
pub fn judge_among(
    index: usize,
    task: &Task,
    report: &AttemptReport,
    own: OwnFiles<'_>,
) -> Verdict {
    let warnings = unexpected_files_among(index, task, report, own);
    // A failed verdict (no check failed, no halt), given its status.
    let verdict = |status: Status, result: String| Verdict {
        status,
        ..Verdict::refused(result, warnings.clone())
    };
    let failed = |result: String| verdict(Status::Failed, result);
    let last = last_nonempty_line(&report.output);
    if let Some(reason) = exit_failure(&report.exit, last) {
        return failed(reason);
    }
    let Some(status) = last.and_then(parse_status_line) else {
        return failed(no_status(&report.output, report.log.as_deref()));
    };
    match status.kind {
        Reported::Failed => return failed(status.message),
        Reported::Blocked => return verdict(Status::Blocked, status.message),
        Reported::Completed => {}
    }
    let spot = spot_check(task, report);
    if !spot.is_empty() {
        return failed(format!("spot-check failed: {}", spot.join("; ")));
    }
    let failed_checks = failed_checks(report);
    if !failed_checks.is_empty() {
        let details = check_details(&failed_checks);
        return Verdict {
            failed_checks,
            ..failed(format!("acceptance check failed: {details}"))
        };
    }
    Verdict {
        acceptance_passed: report.acceptance.is_some() || task.acceptance_criteria().is_empty(),
        ..verdict(Status::Completed, status.message)
    }
}

/// Why an attempt whose worker did not exit 0 failed, with its last output when it ran;
/// `None` when it did.
fn exit_failure(exit: &Exit, last: Option<&str>) -> Option<String> {
    let shown = last
        .map(|l| format!(" (last output: {:?})", clip(l, 120)))
        .unwrap_or_default();
    Some(match exit {
        Exit::TimedOut(d) => format!("timed out after {}", human_duration(*d)),
        Exit::SpawnFailed(_) => exit.failure("worker")?,
        _ => format!("{}{shown}", exit.failure("worker")?),
    })
}

/// What a status line is, as a reason that lacks one says.
pub(super) const EXPECTED_STATUS: &str = "the last non-empty line of stdout must be the status line: \"COMPLETED: <summary>\", \"FAILED: <reason>\" or \"BLOCKED: <question>\"";

/// Why an attempt without a status line failed, as precisely as its output allows: a last
/// line that is almost a status line (not in capitals, no space or no text after the colon)
/// with the form it should have had; a status line that is not the last non-empty line, with
/// what came after it; else its last output (or its log's last line) and the form expected.
fn no_status(output: &str, log: Option<&str>) -> String {
    let last = last_nonempty_line(output);
    if let Some(fix) = last.and_then(almost_status) {
        return fix;
    }
    if let Some(line) = output
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| parse_status_line(l).is_some())
    {
        return format!(
            "The status line {:?} is not the last non-empty line of stdout (the last is {:?}); print it last",
            clip_line(line, 120),
            clip_line(last.unwrap_or_default(), 120)
        );
    }
    let said = match (log, last) {
        (None, None) => NO_STATUS_NO_LOG.to_string(),
        (None, Some(l)) => format!(
            "No status line returned (last output: {:?}) and no log file found",
            clip(l, 120)
        ),
        (Some(log), _) => match last_nonempty_line(log) {
            Some(l) => format!(
                "No status line returned; last log line: {}",
                clip_line(l, 200)
            ),
            None => "No status line returned and the log file is empty".to_string(),
        },
    };
    format!("{said}; {EXPECTED_STATUS}")
}

/// When `line` is nearly a status line — `completed: done`, `Completed: done`,
/// `COMPLETED:done`, `COMPLETED:` — what is wrong with it and the line it should be.
fn almost_status(line: &str) -> Option<String> {
    let (word, rest) = line.split_once(':')?;
    let kind = ["COMPLETED", "FAILED", "BLOCKED"]
        .into_iter()
        .find(|k| word.trim().eq_ignore_ascii_case(k))?;
    let text = rest.trim();
    let placeholder = match kind {
        "COMPLETED" => "<summary>",
        "FAILED" => "<reason>",
        _ => "<question>",
    };
    let shown = clip_line(line, 120);
    if text.is_empty() {
        return Some(format!(
            "The status line {shown:?} has no text after the colon; it must read \"{kind}: {placeholder}\""
        ));
    }
    let fixed = clip_line(&format!("{kind}: {text}"), 120);
    let why = if word.trim() == kind {
        "is not written as the word, a colon, one space and the text"
    } else {
        "is not in capitals"
    };
    Some(format!(
        "The status line {shown:?} {why}; it must read {fixed:?}"
    ))
}

/// The acceptance checks that failed.
pub(super) fn failed_checks(report: &AttemptReport) -> Vec<FailedCheck> {
    let checks = report.acceptance.as_deref().unwrap_or(&[]);
    checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| FailedCheck {
            criterion: c.criterion.clone(),
            check: c.check.clone(),
            output: c.output.clone(),
        })
        .collect()
}

/// The failed checks in a reason: each command with the first line of its output.
fn check_details(failed_checks: &[FailedCheck]) -> String {
    failed_checks
        .iter()
        .map(|c| {
            let first = c
                .output
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no output");
            format!("`{}`: {}", c.check, clip_line(first, 160))
        })
        .collect::<Vec<_>>()
        .join("; ")
}
