//! The implementer + reviewer loop of the conductor seed (`seeds/conductor.md`), as pure
//! functions: the reviewer's verdict (`APPROVED` / `REJECTED` with summary, issues and
//! suggestions), the hash of a rejection's issues, the review prompt with the seed's
//! checklist, the feedback block an implementer's retry prompt gets, and what follows a
//! rejection (retry on the same work, retry from a clean tree, or escalate to the user, early
//! when the same rejection comes three times in a row).
//!
//! The history of a task's reviews lives in the plan, in the task's `reviews` field (see
//! [`REVIEWS_FIELD`]), so a resumed run and a run in another process see it.

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::Task;

pub use crate::pure::plan::fields::REVIEWS as REVIEWS_FIELD;

pub use crate::pure::plan::fields::REVIEWER as REVIEWER_FIELD;

mod prompt;
mod reviewer;
mod rules;

pub use prompt::{ReviewInput, escalation_question, review_prompt};
pub use reviewer::{program, reviewer_failure, reviewer_for};
#[cfg(test)]
use rules::{AfterRejection, after_rejection};
pub use rules::{
    Concluded, Escalation, NextTree, conclude, feedback_section, latest_word, start_for,
};

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
    /// The review (its fields beside the others in the entry).
    #[serde(flatten)]
    pub review: Review,
    /// [`issues_hash`] of `issues`: equal hashes are the same rejection.
    #[serde(default)]
    pub hash: String,
}

impl ReviewEntry {
    /// The entry for `review` of attempt `attempt`.
    pub fn new(attempt: u32, review: &Review) -> ReviewEntry {
        ReviewEntry {
            attempt,
            review: review.clone(),
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
    enum Section {
        None,
        Summary,
        Issues,
        Suggestions,
    }
    let mut key = Section::None;
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
            key = Section::Summary;
            review.summary = line[line.len() - rest.len()..].trim().to_string();
            continue;
        }
        if lower.starts_with("issues:") {
            key = Section::Issues;
            continue;
        }
        if lower.starts_with("suggestions:") {
            key = Section::Suggestions;
            continue;
        }
        let item = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .map(str::trim);
        match (&key, item) {
            (Section::Issues, Some(i)) if !i.is_empty() => review.issues.push(i.to_string()),
            (Section::Suggestions, Some(s)) if !s.is_empty() => {
                review.suggestions.push(s.to_string());
            }
            (Section::Summary, _) => {
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
    // The issues one per line, as bytes.
    let h = crate::pure::hash::fnv1a(sorted.join("\n").as_bytes());
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

#[cfg(test)]
mod tests;
