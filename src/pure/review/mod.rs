//! The implementer + reviewer loop of the conductor seed (`seeds/conductor.md`), as pure
//! functions: the reviewer's verdict (`APPROVED` / `REJECTED` with summary, issues and
//! suggestions), the hash of a rejection's issues, the review prompt with the seed's
//! checklist, the feedback block an implementer's retry prompt gets, and what follows a
//! rejection (retry on the same work, retry from a clean tree, or escalate to the user, early
//! when the same rejection comes three times in a row).
//!
//! The history of a task's reviews lives in the plan, in the task's `reviews` field (see
//! [`REVIEWS_FIELD`]), so a resumed run and a run in another process see it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::pure::outcome::{MAX_ATTEMPTS, Verdict};
use crate::pure::plan::model::{Status, Task};
use crate::pure::question::{Kind, Question};

pub use crate::pure::plan::fields::REVIEWS as REVIEWS_FIELD;

pub use crate::pure::plan::fields::REVIEWER as REVIEWER_FIELD;

/// Identical rejections in a row that stop the loop (the seed's `max_identical_rejections`).
pub const MAX_IDENTICAL_REJECTIONS: usize = 3;

/// Longest diff put into a review prompt, in bytes; a longer one is cut with a note.
pub const MAX_DIFF_BYTES: usize = 200_000;

/// The reviewer's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Word {
    Approved,
    Rejected,
}

/// A parsed review, as the seed's reviewer outputs it (in JSON, as the Action's work job hands
/// it to finalize: `{"verdict": "rejected", "summary": …, "issues": […], "suggestions": […]}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    #[serde(rename = "verdict")]
    pub word: Word,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub issues: Vec<String>,
    #[serde(default)]
    pub suggestions: Vec<String>,
}

/// One review of one attempt, as kept in the task's `reviews` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewEntry {
    pub attempt: u32,
    pub verdict: Word,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub issues: Vec<String>,
    #[serde(default)]
    pub suggestions: Vec<String>,
    /// [`issues_hash`] of `issues`: equal hashes are the same rejection.
    #[serde(default)]
    pub hash: String,
}

impl ReviewEntry {
    /// The entry for `review` of attempt `attempt`.
    pub fn new(attempt: u32, review: &Review) -> ReviewEntry {
        ReviewEntry {
            attempt,
            verdict: review.word,
            summary: review.summary.clone(),
            issues: review.issues.clone(),
            suggestions: review.suggestions.clone(),
            hash: issues_hash(&review.issues),
        }
    }
}

/// Why a reviewer's output is not a verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewParseError {
    /// No line `APPROVED` or `REJECTED`.
    #[error(
        "the reviewer's output has no line APPROVED or REJECTED (last output: {last:?}); a reviewer must end with the seed's verdict block"
    )]
    NoVerdict { last: String },
}

/// The verdict word of one line: `APPROVED`, `REJECTED`, also written `**APPROVED**`,
/// `## REJECTED` or with a trailing colon.
fn verdict_word(line: &str) -> Option<Word> {
    let bare = line
        .trim()
        .trim_matches(|c: char| c == '*' || c == '#' || c == '`' || c.is_whitespace())
        .trim_end_matches(':');
    match bare {
        "APPROVED" => Some(Word::Approved),
        "REJECTED" => Some(Word::Rejected),
        _ => None,
    }
}

/// Parses the reviewer's output: the last `APPROVED` / `REJECTED` line and the block after
/// it — `summary: …` (continued on following lines until the next key), `issues:` and
/// `suggestions:` each followed by `- item` lines. Code fences are ignored.
pub fn parse(output: &str) -> Result<Review, ReviewParseError> {
    let lines: Vec<&str> = output.lines().collect();
    let Some((at, word)) = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| verdict_word(l).map(|w| (i, w)))
    else {
        let last = crate::pure::outcome::last_nonempty_line(output)
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        return Err(ReviewParseError::NoVerdict { last });
    };
    #[derive(PartialEq)]
    enum Key {
        None,
        Summary,
        Issues,
        Suggestions,
    }
    let mut key = Key::None;
    let mut review = Review {
        word,
        summary: String::new(),
        issues: Vec::new(),
        suggestions: Vec::new(),
    };
    for raw in &lines[at + 1..] {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("```") {
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("summary:") {
            key = Key::Summary;
            review.summary = line[line.len() - rest.len()..].trim().to_string();
            continue;
        }
        if lower.starts_with("issues:") {
            key = Key::Issues;
            continue;
        }
        if lower.starts_with("suggestions:") {
            key = Key::Suggestions;
            continue;
        }
        let item = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .map(str::trim);
        match (&key, item) {
            (Key::Issues, Some(i)) if !i.is_empty() => review.issues.push(i.to_string()),
            (Key::Suggestions, Some(s)) if !s.is_empty() => review.suggestions.push(s.to_string()),
            (Key::Summary, _) => {
                if !review.summary.is_empty() {
                    review.summary.push(' ');
                }
                review.summary.push_str(line);
            }
            _ => {}
        }
    }
    Ok(review)
}

/// The seed's rejection identity: its issues, each trimmed, sorted — hashed (FNV-1a, 64 bits,
/// hex) so the plan keeps a short, stable key. The order the reviewer listed them in does not
/// matter.
pub fn issues_hash(issues: &[String]) -> String {
    let mut sorted: Vec<&str> = issues.iter().map(|i| i.trim()).collect();
    sorted.sort_unstable();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (n, issue) in sorted.iter().enumerate() {
        if n > 0 {
            h ^= 0x0a;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in issue.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The task's review history (`reviews`), oldest first; empty when it has none or the field
/// is not a list of reviews.
pub fn history(task: &Task) -> Vec<ReviewEntry> {
    task.extra
        .get(REVIEWS_FIELD)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Stores `entries` as the task's `reviews`.
pub fn set_history(task: &mut Task, entries: &[ReviewEntry]) {
    task.extra.insert(
        REVIEWS_FIELD.into(),
        serde_json::to_value(entries).expect("reviews serialise"),
    );
}

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
/// the line starts with a shell builtin or keyword, or the word holds expansions (`$`, `` ` ``,
/// globs), parentheses or redirections — then only running it can tell.
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
        if word.is_empty() || SHELL_WORDS.contains(&word.as_str()) {
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
        Exit::Success => "the reviewer finished".to_string(),
        Exit::Code(c @ 129..=192) => format!(
            "the reviewer crashed: killed by signal {} (exit status {c})",
            c - 128
        ),
        Exit::Code(126) => {
            "the reviewer exited with status 126 (its command is not executable)".into()
        }
        Exit::Code(127) => "the reviewer exited with status 127 (its command was not found)".into(),
        Exit::Code(c) => format!("the reviewer exited with status {c}"),
        Exit::Signal(sig) => format!("the reviewer crashed: killed by signal {sig}"),
        Exit::TimedOut(d) => format!(
            "the reviewer timed out after {}",
            crate::pure::outcome::human_duration(*d)
        ),
        Exit::SpawnFailed(e) => format!("the reviewer could not be started: {e}"),
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
        if text.chars().count() > 400 {
            let cut: String = text
                .chars()
                .rev()
                .take(400)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            text = format!("…{cut}");
        }
        format!("{how}; its stderr ends: {text}")
    }
}

/// What follows a rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRejection {
    /// Try again (the runner decides the tree from the attempt number, see [`Start`]).
    Retry,
    /// Stop and ask the user.
    Escalate(Escalation),
}

/// Why the loop stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Escalation {
    /// The attempts are used up (seed: attempts ≥ 3).
    MaxAttempts,
    /// The same rejection (same issues hash) [`MAX_IDENTICAL_REJECTIONS`] times in a row.
    NoProgress,
}

/// The seed's retry logic after attempt `attempt` was rejected, `history` already holding
/// that rejection: no progress (the last three rejections identical) escalates at once;
/// otherwise attempts below [`MAX_ATTEMPTS`] retry and the last one escalates.
pub fn after_rejection(history: &[ReviewEntry], attempt: u32) -> AfterRejection {
    let recent: Vec<&ReviewEntry> = history
        .iter()
        .rev()
        .take_while(|e| e.verdict == Word::Rejected)
        .take(MAX_IDENTICAL_REJECTIONS)
        .collect();
    if recent.len() == MAX_IDENTICAL_REJECTIONS && recent.iter().all(|e| e.hash == recent[0].hash) {
        return AfterRejection::Escalate(Escalation::NoProgress);
    }
    if attempt >= MAX_ATTEMPTS {
        AfterRejection::Escalate(Escalation::MaxAttempts)
    } else {
        AfterRejection::Retry
    }
}

/// Where the next attempt after a rejection starts (the seed's "same implementer" and "fresh
/// implementer"). Every attempt is a new worker process; what differs is the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Attempt 2: the tree holds the rejected attempt's changes, to be fixed.
    Continue,
    /// Attempt 3 (and the first attempt after the user's answer): a clean checkout of the
    /// base (`git reset --hard` + `git clean -ffdx`), none of the earlier changes.
    Fresh,
}

/// Which start the attempt numbered `attempt` gets after a rejection.
pub fn start_for(attempt: u32) -> Start {
    if attempt == 2 {
        Start::Continue
    } else {
        Start::Fresh
    }
}

/// The seed's "Previous Attempts" block for the implementer: every rejection's summary,
/// issues and suggestions, then how this attempt starts. Empty without rejections.
pub fn feedback_section(history: &[ReviewEntry], start: Start) -> String {
    let rejected: Vec<&ReviewEntry> = history
        .iter()
        .filter(|e| e.verdict == Word::Rejected)
        .collect();
    if rejected.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "## Previous attempts\nThis task has been attempted before. Learn from the reviewer feedback:",
    );
    for (n, e) in rejected.iter().enumerate() {
        let _ = write!(
            s,
            "\n\n**Attempt {} Feedback:**\n{}",
            n + 1,
            if e.summary.is_empty() {
                "(no summary)"
            } else {
                &e.summary
            }
        );
        if !e.issues.is_empty() {
            s.push_str("\n\nIssues identified:");
            for i in &e.issues {
                let _ = write!(s, "\n- {i}");
            }
        }
        if !e.suggestions.is_empty() {
            s.push_str("\n\nSuggestions:");
            for i in &e.suggestions {
                let _ = write!(s, "\n- {i}");
            }
        }
    }
    s.push_str("\n\n");
    s.push_str(match start {
        Start::Continue => {
            "Your previous attempt's changes are already in this tree. Fix the issues above in place; do not start over."
        }
        Start::Fresh => {
            "This attempt starts from a clean tree: none of the earlier attempts' changes are here. Take a fresh approach that avoids every issue above."
        }
    });
    s.push('\n');
    s
}

/// What a review made of a completed attempt (see [`conclude`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concluded {
    /// The task's review history after this review (unchanged when the reviewer failed).
    pub history: Vec<ReviewEntry>,
    /// The question to the user, when the loop escalated.
    pub question: Option<Question>,
    /// The attempt was rejected and the task is tried again.
    pub retry: bool,
}

/// The seed's rules applied to the review of a completed attempt, the same for the local
/// runner and the Action's finalize: `reviewed` is the parsed review, or why the reviewer
/// gave none; `history` the task's reviews before this one. Updates `verdict`: approved stays
/// completed, its summary added to the result; rejected fails the attempt (to be retried)
/// or, when [`after_rejection`] escalates, blocks the task with a question; a reviewer that
/// failed or printed no verdict fails the attempt.
pub fn conclude(
    index: usize,
    task: &Task,
    attempt: u32,
    verdict: &mut Verdict,
    mut history: Vec<ReviewEntry>,
    reviewed: Result<&Review, &str>,
) -> Concluded {
    let r = match reviewed {
        Ok(r) => r,
        Err(why) => {
            verdict.status = Status::Failed;
            verdict.result = format!("review failed: {why}");
            return Concluded {
                history,
                question: None,
                retry: false,
            };
        }
    };
    history.push(ReviewEntry::new(attempt, r));
    let rejections = history
        .iter()
        .filter(|e| e.verdict == Word::Rejected)
        .count();
    if r.word == Word::Approved {
        let after = if rejections > 0 {
            format!(" after {rejections} rejection(s)")
        } else {
            String::new()
        };
        verdict.result = format!(
            "{} (reviewer approved{after}: {})",
            verdict.result,
            if r.summary.is_empty() {
                "no summary"
            } else {
                &r.summary
            }
        );
        return Concluded {
            history,
            question: None,
            retry: false,
        };
    }
    let summary = if r.summary.is_empty() {
        r.issues
            .first()
            .cloned()
            .unwrap_or_else(|| "no summary".into())
    } else {
        r.summary.clone()
    };
    match after_rejection(&history, attempt) {
        AfterRejection::Retry => {
            verdict.status = Status::Failed;
            verdict.result = format!("reviewer rejected: {summary}");
            Concluded {
                history,
                question: None,
                retry: true,
            }
        }
        AfterRejection::Escalate(why) => {
            let text = escalation_question(index, task, &history, &why);
            verdict.status = Status::Blocked;
            verdict.result =
                format!("escalated to the user after {rejections} rejection(s): {summary}");
            Concluded {
                history,
                question: Some(Question {
                    kind: Kind::Review,
                    text,
                    options: Vec::new(),
                    blocked_at: None,
                    reply: None,
                }),
                retry: false,
            }
        }
    }
}

/// The latest review of a task in a few words, for tables: `approved` (`approved after 2
/// rejections`), `rejected`, `rejected ×2` (rejections since the last approval), or empty
/// when it was never reviewed. `approved_after` is the number of rejections kept in the
/// plan's `progress.reviews` for a completed (trimmed) task, whose own history is gone.
pub fn latest_word(task: &Task, approved_after: Option<u64>) -> String {
    let h = history(task);
    match h.last() {
        Some(e) if e.verdict == Word::Rejected => {
            let streak = h
                .iter()
                .rev()
                .take_while(|e| e.verdict == Word::Rejected)
                .count();
            if streak > 1 {
                format!("rejected ×{streak}")
            } else {
                "rejected".into()
            }
        }
        Some(_) => {
            let before = h.iter().filter(|e| e.verdict == Word::Rejected).count();
            approved_word(before as u64)
        }
        None => approved_after.map(approved_word).unwrap_or_default(),
    }
}

fn approved_word(rejections: u64) -> String {
    match rejections {
        0 => "approved".into(),
        1 => "approved after 1 rejection".into(),
        n => format!("approved after {n} rejections"),
    }
}

/// What the reviewer is shown of one attempt.
#[derive(Debug, Clone, Copy)]
pub struct ReviewInput<'a> {
    pub index: usize,
    pub task: &'a Task,
    pub attempt: u32,
    /// The implementer's one-line summary (its COMPLETED message).
    pub worker_summary: &'a str,
    /// Files the attempt changed.
    pub changed: &'a [String],
    /// The attempt's changes as a patch against the round's base.
    pub diff: &'a str,
}

/// The seed's reviewer prompt, with dagexec's facts: the task specification, the changed
/// files and the diff (the changes are in the reviewer's working tree, relative to the base
/// commit the runner passes as `DAGEXEC_BASE`), the checklist verbatim, and the output format
/// verbatim.
pub fn review_prompt(input: &ReviewInput<'_>) -> String {
    let task = input.task;
    let mut s = String::from(
        "## Code Review Task\n\nYou are reviewing an implementation for the workflow.\n\n### Task Specification\n\n",
    );
    let _ = write!(
        s,
        "**Task ID:** {}\n**Title:** {}\n**Description:**\n{}\n\n**Acceptance Criteria:**",
        input.index,
        task.subject,
        task.description.as_deref().unwrap_or("(none)").trim()
    );
    if task.acceptance_criteria().is_empty() {
        s.push_str("\n(none declared)");
    }
    for c in task.acceptance_criteria() {
        let _ = write!(s, "\n- {}: `{}`", c.criterion, c.check);
    }
    let _ = write!(
        s,
        "\n\n### Implementation Details\n\n**Attempt:** {} of {MAX_ATTEMPTS}\n**Implementer's summary:** {}\n**Commits:** the changes are in this working tree, relative to the round's base commit in $DAGEXEC_BASE (`git diff $DAGEXEC_BASE` shows them, committed or not)\n**Files Changed:**",
        input.attempt, input.worker_summary
    );
    if input.changed.is_empty() {
        s.push_str("\n(none)");
    }
    for f in input.changed {
        let _ = write!(s, "\n- `{f}`");
    }
    let diff = if input.diff.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !input.diff.is_char_boundary(cut) {
            cut -= 1;
        }
        format!(
            "{}\n… (diff cut at {MAX_DIFF_BYTES} bytes; run `git diff HEAD` for the rest)",
            &input.diff[..cut]
        )
    } else {
        input.diff.trim_end().to_string()
    };
    let _ = write!(s, "\n\n**Diff:**\n```diff\n{diff}\n```");
    s.push_str(REVIEW_TAIL);
    s
}

/// The seed's checklist, instructions and output format, verbatim.
const REVIEW_TAIL: &str = "

### Review Checklist

Verify each item:

- [ ] **Functionality** - Implementation meets acceptance criteria
- [ ] **Tests** - Test coverage is adequate and tests pass
- [ ] **Code Quality** - Code is clean, readable, follows conventions
- [ ] **No Regressions** - Existing functionality not broken
- [ ] **Documentation** - Code is appropriately documented
- [ ] **Security** - No obvious security issues introduced

### Instructions

1. Read the task specification carefully
2. Review all changed files and commits
3. Run the tests and verify they pass
4. Check each item on the review checklist
5. Provide detailed feedback

### Output

If the implementation is acceptable, output:

```
APPROVED
summary: [brief summary of what was implemented]
```

If the implementation needs changes, output:

```
REJECTED
summary: [overall assessment]
issues:
- [specific issue 1]
- [specific issue 2]
suggestions:
- [actionable suggestion 1]
- [actionable suggestion 2]
```
";

/// The question put to the user when the loop escalates.
pub fn escalation_question(
    index: usize,
    task: &Task,
    history: &[ReviewEntry],
    why: &Escalation,
) -> String {
    let last = history.last();
    let mut s = match why {
        Escalation::MaxAttempts => format!(
            "The reviewer rejected task {index} ({}) on all {MAX_ATTEMPTS} attempts.",
            task.subject
        ),
        Escalation::NoProgress => format!(
            "The reviewer rejected task {index} ({}) with the same issues {MAX_IDENTICAL_REJECTIONS} times in a row: the loop makes no progress.",
            task.subject
        ),
    };
    if let Some(e) = last {
        if !e.summary.is_empty() {
            let _ = write!(s, "\nLast review: {}", e.summary);
        }
        for i in &e.issues {
            let _ = write!(s, "\n- {i}");
        }
    }
    s.push_str("\nHow should the implementer proceed? (for example: simplify the task, split it, clarify the requirements, or accept a different approach)");
    s
}

#[cfg(test)]
mod tests;
