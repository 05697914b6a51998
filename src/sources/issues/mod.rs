//! A plan made of GitHub issues: a parent issue's sub-issues are the tasks, their native
//! "blocked by" dependencies and `Depends on #N` lines the edges. [`body`] reads what a body
//! declares, [`convert()`] makes the plan (pure); [`read`] fetches the issues
//! (`edge::github::issues`) and writes the plan at `.design/issues/<N>/plan.json`, committed
//! so the run resumes from the branch alone like any plan; `--reread` reads the issues again;
//! [`write_back`]: each task's issue, the parent, the `Closes #N` lines of the pull request
//! body and a blocked task's note. `/execute` on a parent issue is `action::steering::issue`.

pub mod body;
pub mod convert;
pub mod read;
#[cfg(test)]
mod tests;
pub mod write_back;

pub use convert::{Converted, Issue, Linked, Note, PLAN_FIELD, ReadIssues, TASK_FIELD, convert};
