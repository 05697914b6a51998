//! What follows a rejection (retry, fresh start, escalation), the feedback block, and the
//! conclusion of a review.

use super::{MAX_IDENTICAL_REJECTIONS, Review, ReviewEntry, Word, escalation_question, history};
use crate::pure::outcome::{MAX_ATTEMPTS, Verdict};
use crate::pure::plan::model::{Status, Task};
use crate::pure::question::{Kind, Question};
use std::fmt::Write as _;

/// What follows a rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AfterRejection {
    /// Try again (the runner decides the tree from the attempt number, see [`NextTree`]).
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
pub(crate) fn after_rejection(history: &[ReviewEntry], attempt: u32) -> AfterRejection {
    let recent: Vec<&ReviewEntry> = history
        .iter()
        .rev()
        .take_while(|e| e.review.word == Word::Rejected)
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
pub enum NextTree {
    /// Attempt 2: the tree holds the rejected attempt's changes, to be fixed.
    Continue,
    /// Attempt 3 (and the first attempt after the user's answer): a clean checkout of the
    /// base (`git reset --hard` + `git clean -ffdx`), none of the earlier changes.
    Fresh,
}

/// Which start the attempt numbered `attempt` gets after a rejection.
pub fn start_for(attempt: u32) -> NextTree {
    if attempt == 2 {
        NextTree::Continue
    } else {
        NextTree::Fresh
    }
}

/// The seed's "Previous Attempts" block for the implementer: every rejection's summary,
/// issues and suggestions, then how this attempt starts. Empty without rejections.
pub fn feedback_section(history: &[ReviewEntry], start: NextTree) -> String {
    let rejected: Vec<&ReviewEntry> = history
        .iter()
        .filter(|e| e.review.word == Word::Rejected)
        .collect();
    if rejected.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "## Previous attempts\nThis task has been attempted before. Learn from the reviewer feedback:",
    );
    for (n, e) in rejected.iter().enumerate() {
        let e = &e.review;
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
        for (title, items) in [
            ("Issues identified", &e.issues),
            ("Suggestions", &e.suggestions),
        ] {
            if !items.is_empty() {
                let _ = write!(s, "\n\n{title}:");
                for i in items {
                    let _ = write!(s, "\n- {i}");
                }
            }
        }
    }
    s.push_str("\n\n");
    s.push_str(match start {
        NextTree::Continue => {
            "Your previous attempt's changes are already in this tree. Fix the issues above in place; do not start over."
        }
        NextTree::Fresh => {
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
        .filter(|e| e.review.word == Word::Rejected)
        .count();
    let summary = if r.summary.is_empty() {
        let first = r.issues.first().filter(|_| r.word == Word::Rejected);
        first.map_or("no summary", String::as_str)
    } else {
        &r.summary
    };
    let (question, retry) = match (r.word, after_rejection(&history, attempt)) {
        (Word::Approved, _) => {
            let after = if rejections > 0 {
                format!(" after {rejections} rejection(s)")
            } else {
                String::new()
            };
            verdict.result = format!("{} (reviewer approved{after}: {summary})", verdict.result);
            (None, false)
        }
        (Word::Rejected, AfterRejection::Retry) => {
            verdict.status = Status::Failed;
            verdict.result = format!("reviewer rejected: {summary}");
            (None, true)
        }
        (Word::Rejected, AfterRejection::Escalate(why)) => {
            let text = escalation_question(index, task, &history, &why);
            verdict.status = Status::Blocked;
            verdict.result =
                format!("escalated to the user after {rejections} rejection(s): {summary}");
            (Some(Question::new(Kind::Review, text)), false)
        }
    };
    Concluded {
        history,
        question,
        retry,
    }
}

/// The latest review of a task in a few words, for tables: `approved` (`approved after 2
/// rejections`), `rejected`, `rejected ×2` (rejections since the last approval), or empty
/// when it was never reviewed. `approved_after` is the number of rejections kept in the
/// plan's `progress.reviews` for a completed (trimmed) task, whose own history is gone.
pub fn latest_word(task: &Task, approved_after: Option<u64>) -> String {
    let h = history(task);
    match h.last() {
        Some(e) if e.review.word == Word::Rejected => {
            let streak = h
                .iter()
                .rev()
                .take_while(|e| e.review.word == Word::Rejected)
                .count();
            if streak > 1 {
                format!("rejected ×{streak}")
            } else {
                "rejected".into()
            }
        }
        Some(_) => {
            let before = h.iter().filter(|e| e.review.word == Word::Rejected).count();
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
