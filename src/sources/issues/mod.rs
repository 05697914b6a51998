//! A plan made of GitHub issues: a parent issue's sub-issues are the tasks, their native
//! "blocked by" dependencies and `Depends on #N` lines the edges. [`body`] reads what a body
//! declares, [`convert`] makes the plan (pure).

pub mod body;
pub mod convert;
#[cfg(test)]
mod tests;

pub use convert::{
    Converted, Issue, IssueError, Linked, Note, PLAN_FIELD, Reading, TASK_FIELD, convert,
};
