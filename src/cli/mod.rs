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
    let filter = log_filter(&filter);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

/// The filter `DAGEXEC_LOG` asks for (`info` when it cannot be read). octocrab's own events
/// stay at `info` unless it names octocrab: its debug spans carry each request's whole URL,
/// and an artifact's storage URL is signed, a credential while it lasts.
fn log_filter(spec: &str) -> tracing_subscriber::EnvFilter {
    let spec = if spec.contains("octocrab") {
        spec.to_string()
    } else {
        format!("{spec},octocrab=info")
    };
    tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
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
    let (loc, prepared) = match source_location(&cli.command, loc) {
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
    if let Some(p) = &prepared {
        p.forget_unused();
    }
    ran.unwrap_or_else(|e| {
        report(&e, &loc);
        Exit::Usage
    })
    .into()
}

#[cfg(test)]
mod tests {
    use super::log_filter;
    use tracing_subscriber::layer::SubscriberExt;

    /// What each filter lets through of a debug event from dagexec and one from octocrab.
    fn through(spec: &str) -> (bool, bool) {
        let subscriber = tracing_subscriber::registry().with(log_filter(spec));
        tracing::subscriber::with_default(subscriber, || {
            (
                tracing::enabled!(target: "dagexec", tracing::Level::DEBUG),
                tracing::enabled!(target: "octocrab", tracing::Level::DEBUG),
            )
        })
    }

    #[test]
    fn dagexec_log_debug_leaves_octocrabs_urls_out_unless_asked() {
        assert_eq!(through("debug"), (true, false));
        assert_eq!(through("debug,octocrab=debug"), (true, true));
        assert_eq!(through("not a filter ["), (false, false));
    }
}
