//! dagexec executes a `.design/plan.json` — a DAG of AI-agent tasks — deterministically:
//! ready-set rounds of parallel workers, each result verified, retried, and committed round by
//! round.
//!
//! The crate is split into a pure core (no processes, git writes or network) and edges:
//! - core: [`plan`] (model, load/save, validation), [`paths`] (one form per path), [`graph`]
//!   (the DAG), [`overlap`] (the concurrency-aware file-overlap matrix), [`engine`] (ready sets,
//!   batches, deadlock), [`outcome`] (the result processor), [`update`] (the plan updater,
//!   cascade, circuit breaker, completion, resume), [`prompt`] (worker and retry prompts),
//!   [`render`] (tables, graphs), [`usage`] (time and cost per attempt, the budget);
//! - edges: [`fsx`] (file writes that never follow a link), [`setup`] (git status, assumption
//!   checks, context files), [`shell`] (one command with a timeout), [`worker`] (a worker
//!   process), [`git`] (worktrees, patches, commits), [`run`] (the local runner), [`demo`] and
//!   [`cli`].

pub mod actions;
pub mod cli;
pub mod demo;
pub mod engine;
pub mod events;
pub mod exec;
pub mod fsx;
pub mod git;
pub mod github;
pub mod graph;
pub mod outcome;
pub mod overlap;
pub mod paths;
pub mod plan;
pub mod prices;
pub mod procs;
pub mod prompt;
pub mod reaper;
pub mod render;
pub mod run;
pub mod said;
pub mod sanitize;
pub mod setup;
pub mod shell;
pub mod simulate;
pub mod timeline;
pub mod update;
pub mod usage;
pub mod worker;

// The other two specifications: the reviewer loop (`review`, `question`; pure) and long-run
// PLAN.md folders (`longrun`: pure `folder`, `prompt`, `output`; `prepare` reads the folder).
pub mod longrun;
// Spec Kit tasks.md files (`speckit`: pure `parse`; `prepare` writes the generated plan).
pub mod question;
pub mod review;
pub mod speckit;

#[cfg(test)]
mod testing;
