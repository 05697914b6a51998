//! Which reviewer runs a task, the program it names, and how its own failure reads.

use crate::pure::plan::fields::REVIEWER as REVIEWER_FIELD;
use crate::pure::plan::model::Task;

/// The reviewer command for a task: its own `reviewer` field (a command, or `false` for
/// none), else the run's.
pub fn reviewer_for<'a>(task: &'a Task, run: Option<&'a str>) -> Option<&'a str> {
    match task.extra.get(REVIEWER_FIELD) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Some(s.as_str()),
        Some(serde_json::Value::Bool(false)) => None,
        _ => run.filter(|r| !r.trim().is_empty()),
    }
}

/// Shell words that are not programs on `PATH` (builtins and keywords of `sh`): a command
/// line starting with one of them is not checked for presence.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "alias", "case", "cd", "command", "eval", "exec", "exit", "export", "false",
    "for", "if", "read", "set", "source", "test", "then", "true", "ulimit", "umask", "unset",
    "until", "wait", "while", "{", "!",
];

/// The program a `sh -c` command line starts, when it can be told without running a shell:
/// the first word after any `NAME=value` assignments, unquoted (`'…'`, `"…"`). `None` when
/// the line starts with a shell builtin or keyword or a comment, or the word holds
/// expansions (`$`, `` ` ``, globs), parentheses or redirections — then only running it can
/// tell.
pub fn program(command: &str) -> Option<String> {
    let mut rest = command.trim_start();
    loop {
        let (word, after) = first_word(rest)?;
        rest = after.trim_start();
        let assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                && !name.starts_with(|c: char| c.is_ascii_digit())
        });
        if assignment {
            continue;
        }
        // A word starting with `#` starts a comment (a script's `#!/bin/sh` line too).
        if word.is_empty() || word.starts_with('#') || SHELL_WORDS.contains(&word.as_str()) {
            return None;
        }
        return Some(word);
    }
}

/// The first shell word of `s` and what follows; `None` when it has shell syntax that only a
/// shell can resolve.
fn first_word(s: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => return Some((word, &s[i..])),
            ';' | '&' | '|' => return Some((word, &s[i..])),
            '\'' => loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, q)) => word.push(q),
                    None => return None,
                }
            },
            '"' => loop {
                match chars.next() {
                    Some((_, '"')) => break,
                    Some((_, '$' | '`' | '\\')) | None => return None,
                    Some((_, q)) => word.push(q),
                }
            },
            '$' | '`' | '\\' | '*' | '?' | '[' | '(' | ')' | '<' | '>' | '~' | '{' | '}' => {
                return None;
            }
            c => word.push(c),
        }
    }
    Some((word, ""))
}

/// Why a reviewer run gave no verdict, in words: how it ended and the end of its stderr.
pub fn reviewer_failure(exit: &crate::pure::outcome::Exit, stderr_tail: &str) -> String {
    use crate::pure::outcome::Exit;
    let how = match exit {
        Exit::Code(126) => {
            "the reviewer exited with status 126 (its command is not executable)".into()
        }
        Exit::Code(127) => "the reviewer exited with status 127 (its command was not found)".into(),
        other => other
            .failure("the reviewer")
            .unwrap_or_else(|| "the reviewer finished".into()),
    };
    let tail: Vec<&str> = stderr_tail
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let tail = &tail[tail.len().saturating_sub(5)..];
    if tail.is_empty() {
        format!("{how} (no stderr)")
    } else {
        let mut text = tail.join(" | ");
        let n = text.chars().count();
        if n > 400 {
            text = format!("…{}", text.chars().skip(n - 400).collect::<String>());
        }
        format!("{how}; its stderr ends: {text}")
    }
}
