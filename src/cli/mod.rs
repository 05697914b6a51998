//! The command line: parses arguments (clap), converts them to domain values at this edge,
//! runs the command, renders errors once with their hints, and decides the exit code.
//!
//! Exit codes are a contract, one table: [`exit::Exit`].

// The doc comments of the argument types are `--help` text, printed as written.
#![allow(clippy::doc_markdown)]

pub mod action;
mod args;
mod commands;
pub mod exit;
#[cfg(test)]
mod guide_tests;
mod issues;
mod location;
mod report;

pub use exit::Exit;

use clap::Parser;
use std::io::{self, Write};
use std::process::ExitCode;

use args::Cli;
use location::{Location, source_location};
use report::{install_panic_hook, report};

/// Sends `tracing` events to stderr when `DAGEXEC_LOG` is set (e.g. `DAGEXEC_LOG=debug`
/// shows how long each phase of a command took).
fn init_logging() {
    let Ok(filter) = std::env::var("DAGEXEC_LOG") else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

/// Runs the CLI with the process's arguments.
pub fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Success
            }
            .into();
        }
    };
    let loc = match Location::resolve(cli.plan.clone()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot determine the current directory: {e}");
            return Exit::Usage.into();
        }
    };
    // No `--plan`, no `.design/plan.json`, several task lists: which one is for the user.
    if cli.plan.is_none()
        && location::plan_use(&cli.command).is_some()
        && !loc.plan.exists()
        && let Some(e) = location::several_task_lists(&loc.root)
    {
        report(&e, &loc);
        return Exit::Usage.into();
    }
    // `--plan specs/001-x/tasks.md` (or another task list), `run --long-run DIR`, `--issue N`:
    // the plan generated from it.
    let given = loc.clone();
    let (loc, _prepared) = match source_location(&cli.command, loc) {
        Ok(Some(l)) => l,
        Ok(None) => return Exit::Success.into(),
        Err(e) => {
            report(&e, &given);
            return Exit::Usage.into();
        }
    };
    install_panic_hook(loc.plan.clone());
    // Not `stdout().lock()`: the live display of `run` writes from its own thread.
    let mut out = io::BufWriter::with_capacity(1 << 20, io::stdout());
    let ran = commands::run(cli.command, &loc, &mut out);
    let _ = out.flush();
    ran.unwrap_or_else(|e| {
        report(&e, &loc);
        Exit::Usage
    })
    .into()
}
