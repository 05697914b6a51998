//! dagexec executes a `.design/plan.json` — a DAG of AI-agent tasks — deterministically:
//! ready-set rounds of parallel workers, each result verified, retried, and committed round by
//! round.
//!
//! The folders are the architecture (ARCHITECTURE.md draws it); each room uses only the rooms
//! listed before it (`tests/it/layout.rs` holds the crate to that):
//! - [`pure`]: the plan model, the DAG, the engine, the result processor, the plan updater,
//!   prompts, reviews, questions, rendering, time and cost, the simulator — values in, values
//!   out, nothing spawned, no disk, git or network;
//! - [`edge`]: files, processes, workers, git and the GitHub API;
//! - [`sources`]: plan formats beside `plan.json` (Spec Kit `tasks.md`, long-run folders);
//! - [`flow`]: the kernel the local run and the Action's jobs share (attempts, the engine
//!   loops, round integration, pre-flight, settings, the display);
//! - [`local`]: `dagexec run` and the demo;
//! - [`action`]: the GitHub Action's jobs and what they share;
//! - [`cli`]: the command line, and the exit codes.

pub mod pure;

pub mod edge;

pub mod sources;

pub mod flow;

pub mod local;

pub mod action;

pub mod cli;

#[cfg(test)]
mod testing;
