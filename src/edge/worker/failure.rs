//! How a worker failed, in words: [`classify`] (an exit no retry can help) and the failure
//! detail (a missing command, the tail of stderr).

use super::WorkerRun;
use crate::pure::outcome::Exit;

/// What a worker's exit says about whether another attempt could help
/// ([`crate::pure::said::Halt::Task`]): not when the command could not be started, was not found
/// (127) or not executable (126), or the CLI refused its command line — a non-zero exit with
/// nothing on stdout and a usage message on stderr (`error: unexpected argument '--full-auto'
/// found`, `error: unknown option`, `Unknown argument:`, `Usage: …` with exit status 2).
pub fn classify(run: &WorkerRun) -> crate::pure::said::Said {
    use crate::pure::said::{Halt, Said};
    let halt = |why: String| Said {
        halt: Some(Halt::Task { why }),
        ..Said::default()
    };
    match &run.exit {
        Exit::SpawnFailed(_) => halt("the worker command could not be started".into()),
        Exit::Code(127) => {
            halt("the command was not found (install it, or fix the worker command)".into())
        }
        Exit::Code(126) => halt(
            "the command is not executable (fix its permissions, or the worker command)".into(),
        ),
        Exit::Code(code) if (1..=2).contains(code) && run.stdout.trim().is_empty() => {
            let usage = |l: &str| {
                const SAYS: [&str; 9] = [
                    "error: unexpected argument",
                    "error: unknown option",
                    "error: option '",
                    "error: missing required argument",
                    "error: invalid value",
                    "error: unrecognized",
                    "unknown argument",
                    "unknown arguments",
                    "not enough non-option arguments",
                ];
                let l = l.trim().to_ascii_lowercase();
                SAYS.iter().any(|s| l.starts_with(s)) || (*code == 2 && l.starts_with("usage:"))
            };
            match run.stderr_tail.lines().find(|l| usage(l)) {
                Some(line) => halt(format!(
                    "the agent CLI refused its command line ({}); check the worker command against the CLI's --help",
                    crate::pure::sanitize::line(line.trim())
                )),
                None => Said::default(),
            }
        }
        _ => Said::default(),
    }
}

/// Lines of stderr shown in a failure reason (all of it is kept in the attempt's log files).
const STDERR_LINES_SHOWN: usize = 5;
/// At most this many chars of them.
const STDERR_CHARS_SHOWN: usize = 400;

/// What a failed worker's run leaves unsaid, to add to the failure reason: for exit status
/// 127 and 126 which command the shell could not find or run, then the last lines of its
/// stderr (sanitised, on one line) — also after a clean exit, for a worker that printed no
/// status line but said why on stderr. Empty when there is nothing to add.
pub fn failure_detail(run: &WorkerRun, command: &str) -> String {
    let mut detail = String::new();
    if let Exit::Code(code @ (126 | 127)) = run.exit {
        let name = culprit(&run.stderr_tail, code).unwrap_or_else(|| first_word(command));
        let what = if code == 127 {
            "not found"
        } else {
            "not executable (permission denied, or not a program)"
        };
        detail.push_str(&format!(" — `{name}`: {what}"));
    }
    let tail = stderr_tail_line(&run.stderr_tail);
    if !tail.is_empty() {
        detail.push_str(&format!("; stderr: {tail}"));
    }
    detail
}

/// The last [`STDERR_LINES_SHOWN`] non-empty lines of `stderr`, sanitised, joined with ` | `,
/// cut from the front to [`STDERR_CHARS_SHOWN`] chars.
pub(crate) fn stderr_tail_line(stderr: &str) -> String {
    let lines: Vec<String> = stderr
        .lines()
        .map(|l| crate::pure::sanitize::line(l).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let shown = lines[lines.len().saturating_sub(STDERR_LINES_SHOWN)..].join(" | ");
    let count = shown.chars().count();
    if count <= STDERR_CHARS_SHOWN {
        return shown;
    }
    let kept: String = shown.chars().skip(count - STDERR_CHARS_SHOWN + 1).collect();
    format!("…{kept}")
}

/// The command a shell names in its "not found" (127) or "Permission denied" (126) message:
/// dash `sh: 1: foo: not found`, bash `bash: line 1: foo: command not found`, busybox
/// `sh: foo: not found`.
fn culprit(stderr: &str, code: i32) -> Option<String> {
    let markers: &[&str] = if code == 127 {
        &[
            ": command not found",
            ": not found",
            ": No such file or directory",
        ]
    } else {
        &[
            ": Permission denied",
            ": cannot execute",
            ": Is a directory",
        ]
    };
    stderr.lines().rev().find_map(|line| {
        let line = crate::pure::sanitize::line(line);
        markers.iter().find_map(|m| {
            let before = &line[..line.find(m)?];
            let name = before.rsplit(": ").next()?.trim();
            (!name.is_empty()).then(|| name.to_string())
        })
    })
}

/// The first word of a command line (what `sh -c` would run first), for messages.
fn first_word(command: &str) -> String {
    let word = command.split_whitespace().next().unwrap_or(command);
    crate::pure::sanitize::line(word)
}
