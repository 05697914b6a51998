//! The review prompt with the seed's checklist, and the escalation question.

use super::{Escalation, MAX_DIFF_BYTES, MAX_IDENTICAL_REJECTIONS, ReviewEntry};
use crate::pure::outcome::MAX_ATTEMPTS;
use crate::pure::plan::model::Task;
use std::fmt::Write as _;

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
            "{}\n… (diff cut at {MAX_DIFF_BYTES} bytes; run `git diff $DAGEXEC_BASE` for the rest)",
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
    if let Some(e) = last.map(|e| &e.review) {
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
