//! How the command line reports what went wrong: one error type with its hint, a panic as a
//! bug report that says where the plan stands.

use crate::cli::Location;
use crate::pure::plan::{self, PlanErrors};
use crate::pure::render;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A failure the CLI reports and maps to an exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    #[error(transparent)]
    Plan(#[from] PlanErrors),
    #[error("{message}")]
    Usage { message: String, hint: String },
    #[error("cannot write output: {0}")]
    Io(#[from] io::Error),
}

impl CliError {
    /// A usage error: what is wrong (`message`), and what to do about it (`hint`).
    pub(crate) fn usage(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        CliError::Usage {
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl From<crate::flow::settings::ConfigError> for CliError {
    fn from(e: crate::flow::settings::ConfigError) -> CliError {
        CliError::usage(e.to_string(), e.hint())
    }
}

impl From<crate::flow::RunError> for CliError {
    fn from(e: crate::flow::RunError) -> CliError {
        match e {
            crate::flow::RunError::Plan(p) => CliError::Plan(p),
            other => CliError::usage(other.to_string(), other.hint()),
        }
    }
}

/// Where bugs are reported.
pub(crate) const BUG_REPORTS: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/issues");

/// Makes a panic a bug report instead of a bare exit 101: what happened and where (the
/// source location), that it is a bug in dagexec and where to report it, and where the plan
/// at `plan` stands (it is written atomically, so it is either the last saved state or the
/// one before). A second panic (a task's, then the main thread's that joins it) adds one line.
pub(crate) fn install_panic_hook(plan: PathBuf) {
    static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let what = payload
            .downcast_ref::<&str>()
            .map(std::string::ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let what = crate::pure::sanitize::line(&what);
        let location = info.location().map_or_else(
            || "an unknown place".to_string(),
            |l| format!("{}:{}:{}", l.file(), l.line(), l.column()),
        );
        let mut err = io::stderr().lock();
        if REPORTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = writeln!(err, "dagexec: and then: {what} (at {location})");
            return;
        }
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        let _ = writeln!(
            err,
            "\ndagexec: internal error — this is a bug in dagexec, not in your plan or worker.\n  what:  {what}\n  where: {location} (thread {thread}), dagexec {}\n  plan:  {}\nPlease report it at {BUG_REPORTS} with this message and the command you ran (RUST_BACKTRACE=1 and DAGEXEC_LOG=debug add detail).",
            env!("CARGO_PKG_VERSION"),
            plan_state(&plan)
        );
        let trace = std::backtrace::Backtrace::capture();
        if trace.status() == std::backtrace::BacktraceStatus::Captured {
            let _ = writeln!(err, "{trace}");
        }
    }));
}

/// One sentence on the plan file after a crash.
pub(crate) fn plan_state(path: &Path) -> String {
    match crate::edge::plan_file::load(path) {
        Ok(p) => format!(
            "{} is intact ({}); it is saved whenever a status changes, so run `dagexec run` again to resume — tasks left in progress start over.",
            path.display(),
            render::status::summary_line(&p)
        ),
        Err(plan::PlanError::NoPlan { .. }) => format!("no plan at {}.", path.display()),
        Err(e) => format!("{} cannot be read back: {e}", path.display()),
    }
}

pub(crate) fn report(e: &CliError, loc: &Location) {
    let mut err = io::stderr().lock();
    match e {
        CliError::Plan(PlanErrors(list)) => {
            for pe in list {
                let _ = if pe.names_file() {
                    writeln!(err, "error: {pe}")
                } else {
                    writeln!(err, "error: {}: {pe}", loc.plan.display())
                };
                let _ = writeln!(err, "  hint: {}", pe.hint());
            }
            if list.len() > 1 {
                let _ = writeln!(err, "{} problems in {}", list.len(), loc.plan.display());
            }
        }
        CliError::Usage { message, hint } => {
            let _ = writeln!(err, "error: {message}");
            if !hint.is_empty() {
                let _ = writeln!(err, "  hint: {hint}");
            }
        }
        CliError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        CliError::Io(e) => {
            let _ = writeln!(err, "error: cannot write output: {e}");
        }
    }
}
