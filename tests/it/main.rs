//! Every end-to-end test in one binary: each module was a test binary of its own, and each of
//! those compiled and linked the fake GitHub API, the shared helpers and the whole crate
//! again. `common` holds what they share (the binary in a neutral environment, git, scratch
//! repositories and workers, the fake GitHub API, and `common::lab`, the remote, fake API and
//! job environment the Action's job-by-job tests build on).
//!
//! Run one group with `cargo test --test it <module>::` (e.g. `cargo test --test it action::`,
//! the act runs, which need act: `source .ci/install-tools.sh`).

// The crate's lint policy (Cargo.toml [lints]) is for the program; these tests build plain
// fixtures (values passed by value, long scenario functions that read top to bottom).
#![allow(clippy::pedantic, unreachable_pub)]

mod common;

mod action;
mod action_eager;
mod action_eager_merge;
mod action_eager_rate;
mod action_gateway;
mod action_jobs;
mod action_merge;
mod action_review;
mod action_rounds;
mod action_steer;
mod ci_scripts;
mod cli;
mod comment;
mod commit_point;
mod demo;
mod exhaust;
mod fake_api;
mod first_hour;
mod github;
mod init;
mod install_action;
mod issues;
mod layout;
mod loops;
mod merge;
mod plan_formats;
mod real_agents;
mod recover;
mod resume;
mod rounds;
mod run;
mod safety_links;
mod self_contained;
mod simulate;
mod speckit;
mod task_list_edits;
mod taskmaster_cli;
mod tool_skips;
mod usage;
mod workers;
mod worktrees;
