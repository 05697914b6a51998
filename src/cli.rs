//! The command line: parses arguments (clap), converts them to domain values at this edge,
//! runs the command, renders errors once with their hints, and decides the exit code.
//!
//! Exit codes are a contract: 0 success; 1 finished but not clean (e.g. a failed blocking
//! check); 2 usage or plan error.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::graph::Dag;
use crate::plan::{self, Plan, PlanErrors};
use crate::prompt::{self, Unit};
use crate::render;
use crate::setup::{self, Overlaps, checks};

/// Exit status when a command ran but found a problem (e.g. a failed blocking check).
pub const EXIT_INCOMPLETE: u8 = 1;
/// Exit status for usage and plan errors.
pub const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Examples:
  dagexec validate                      check .design/plan.json and print the setup report
  dagexec validate --json --no-checks   the setup output object, without running assumption checks
  dagexec status                        the tasks and where each one stands
  dagexec prompt 2                      the prompt task 2's worker will receive
  dagexec graph --format dot | dot -Tsvg > plan.svg

The plan is .design/plan.json in the current directory unless --plan says otherwise.
Plan format and worker contract: see README.md.";

/// Execute a .design/plan.json — a DAG of AI-agent tasks — in verified, retried, committed rounds.
#[derive(Debug, Parser)]
#[command(name = "dagexec", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The plan file [default: .design/plan.json]
    #[arg(long, global = true, value_name = "PATH")]
    plan: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate the plan and report what execution would start from.
    ///
    /// Reads the plan, checks its structure (dependencies, cycles, file paths), runs every
    /// blocking assumption check (each distinct command once, with a timeout), checks that
    /// context files exist, and computes the dependency depths and the concurrency-aware
    /// file-overlap matrix. Never changes anything.
    ///
    /// Exit status: 0 valid; 1 valid but a blocking check failed; 2 the plan is broken.
    Validate {
        /// Print the seed's setup output object as JSON instead of the report.
        #[arg(long)]
        json: bool,
        /// Do not run the blocking assumption checks.
        #[arg(long)]
        no_checks: bool,
        /// Time allowed for each assumption check (e.g. 30s, 2m).
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        check_timeout: Duration,
    },
    /// Print the prompt a task's worker receives.
    ///
    /// The 9-section prompt assembled from the task's fields (or a v3 task's own `prompt`),
    /// with the dependency-results placeholder replaced by the results of completed blockers.
    Prompt {
        /// The task's plan index (its position in `tasks`, from 0).
        task: usize,
        /// Keep the dependency-results placeholder instead of filling it in.
        #[arg(long)]
        raw: bool,
    },
    /// Show every task's status, attempts and result.
    Status {
        /// Print the table as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Draw the task DAG coloured by status.
    Graph {
        /// mermaid (renders in GitHub markdown) or dot (Graphviz).
        #[arg(long, value_enum, default_value_t = Format::Mermaid)]
        format: Format,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Mermaid,
    Dot,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 30s, 5m, 1h30m)"))
}

/// A failure the CLI reports and maps to an exit code.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Plan(#[from] PlanErrors),
    #[error("{message}")]
    Usage { message: String, hint: String },
    #[error("cannot write output: {0}")]
    Io(#[from] io::Error),
}

/// Where the plan is and which directory is the project root.
#[derive(Debug, Clone)]
struct Location {
    plan: PathBuf,
    root: PathBuf,
    /// The plan's path relative to the root, when it is inside it.
    plan_rel: Option<String>,
}

impl Location {
    fn resolve(plan: Option<PathBuf>) -> io::Result<Self> {
        let cwd = std::env::current_dir()?;
        let plan = plan.unwrap_or_else(|| PathBuf::from(plan::validate::DEFAULT_PLAN_REL));
        let abs = if plan.is_absolute() {
            plan.clone()
        } else {
            cwd.join(&plan)
        };
        // `<root>/.design/plan.json` → `<root>`; anything else: the current directory.
        let root = abs
            .parent()
            .filter(|d| d.file_name().is_some_and(|n| n == ".design"))
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or(cwd);
        let plan_rel = abs
            .strip_prefix(&root)
            .ok()
            .map(|p| p.to_string_lossy().replace('\\', "/"));
        Ok(Location {
            plan,
            root,
            plan_rel,
        })
    }
}

/// A plan that loaded and validated.
struct Loaded {
    plan: Plan,
    dag: Dag,
}

fn load(loc: &Location) -> Result<Loaded, CliError> {
    let plan = {
        let _span = tracing::debug_span!("parse").entered();
        plan::load(&loc.plan).map_err(PlanErrors::from)?
    };
    let dag = {
        let _span = tracing::debug_span!("check").entered();
        plan::validate::check(&plan, loc.plan_rel.as_deref())?
    };
    Ok(Loaded { plan, dag })
}

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
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    let loc = match Location::resolve(cli.plan.clone()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot determine the current directory: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut out = io::BufWriter::with_capacity(1 << 20, io::stdout().lock());
    match run(cli.command, &loc, &mut out) {
        Ok(code) => {
            let _ = out.flush();
            ExitCode::from(code)
        }
        Err(e) => {
            let _ = out.flush();
            report(&e, &loc);
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn report(e: &CliError, loc: &Location) {
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
            let _ = writeln!(err, "  hint: {hint}");
        }
        CliError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        CliError::Io(e) => {
            let _ = writeln!(err, "error: cannot write output: {e}");
        }
    }
}

fn run(command: Command, loc: &Location, out: &mut impl Write) -> Result<u8, CliError> {
    match command {
        Command::Validate {
            json,
            no_checks,
            check_timeout,
        } => validate(loc, out, json, no_checks, check_timeout),
        Command::Prompt { task, raw } => {
            let Loaded { plan, .. } = load(loc)?;
            if task >= plan.tasks.len() {
                return Err(CliError::Usage {
                    message: format!("no task {task} (the plan has {} tasks)", plan.tasks.len()),
                    hint: format!(
                        "task numbers are plan indices, 0 to {}; `dagexec status` lists them",
                        plan.tasks.len() - 1
                    ),
                });
            }
            let unit = if plan.is_waves() {
                Unit::Wave
            } else {
                Unit::Batch
            };
            let base = prompt::original_prompt(&plan, task, unit);
            let text = if raw {
                base
            } else {
                prompt::spawn_prompt(&plan, task, &base)
            };
            out.write_all(text.as_bytes())?;
            Ok(0)
        }
        Command::Status { json } => {
            let Loaded { plan, .. } = load(loc)?;
            if json {
                let rows: Vec<serde_json::Value> = plan
                    .tasks
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        serde_json::json!({
                            "index": i, "subject": t.subject, "status": t.status,
                            "attempts": t.attempts(), "result": t.result,
                        })
                    })
                    .collect();
                serde_json::to_writer_pretty(&mut *out, &rows).map_err(io::Error::other)?;
                writeln!(out)?;
            } else {
                render::status::status_table(&plan, out)?;
            }
            Ok(0)
        }
        Command::Graph { format } => {
            let Loaded { plan, .. } = load(loc)?;
            let format = match format {
                Format::Mermaid => render::graph::GraphFormat::Mermaid,
                Format::Dot => render::graph::GraphFormat::Dot,
            };
            out.write_all(render::graph::render(&plan, format).as_bytes())?;
            Ok(0)
        }
    }
}

fn validate(
    loc: &Location,
    out: &mut impl Write,
    json: bool,
    no_checks: bool,
    timeout: Duration,
) -> Result<u8, CliError> {
    let Loaded { plan, dag } = {
        let _span = tracing::debug_span!("load").entered();
        load(loc)?
    };
    let overlaps = {
        let _span = tracing::debug_span!("overlap").entered();
        Overlaps::of(&plan, &dag)
    };
    let _span = tracing::debug_span!("checks").entered();
    let validation = checks::gather(
        &plan,
        &loc.root,
        checks::CheckOptions {
            skip_checks: no_checks,
            timeout,
        },
    );
    drop(_span);
    let setup = setup::output(&plan, &dag, &overlaps, validation);
    let _span = tracing::debug_span!("write").entered();
    if json {
        let missed = overlaps.missed_by_plan();
        if !missed.is_empty() {
            eprintln!(
                "warning: the plan's fileOverlaps miss {} conflict(s) dagexec found (first: {} ↔ {}); they will not run at the same time either",
                missed.len(),
                missed[0].0,
                missed[0].1
            );
        }
        setup.write_json(out)?;
        writeln!(out)?;
    } else {
        setup::report::write(out, &plan, &setup, &overlaps)?;
    }
    out.flush()?;
    let failed = setup.validation.blocking_checks.iter().any(|c| !c.passed);
    // The process ends right after this; freeing a 100k-task plan piece by piece would only
    // delay the exit (about a tenth of a second), so leave it to the OS.
    drop(setup);
    std::mem::forget((plan, dag, overlaps));
    Ok(if failed { EXIT_INCOMPLETE } else { 0 })
}
