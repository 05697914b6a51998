//! The command line: parses arguments (clap), converts them to domain values at this edge,
//! runs the command, renders errors once with their hints, and decides the exit code.
//!
//! Exit codes are a contract: 0 success; 1 finished but not clean (e.g. a failed blocking
//! check); 2 usage or plan error.

pub mod action;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::flow::preflight::{self, Overlaps, checks};
use crate::pure::graph::Dag;
use crate::pure::plan::{self, Plan, PlanErrors};
use crate::pure::prompt::{self, Unit};
use crate::pure::render;

/// Exit status when a command ran but found a problem (e.g. a failed blocking check).
pub const EXIT_INCOMPLETE: u8 = 1;
/// Exit status for usage and plan errors.
pub const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Examples:
  dagexec demo                          a real run of a small plan, no API key needed
  dagexec run --worker 'claude -p --output-format json --permission-mode acceptEdits'
                                        execute .design/plan.json here with Claude Code
  dagexec run --dry-run                 the rounds that would run
  dagexec simulate --duration 10m       how long each schedule would take, here and on Actions
  dagexec validate                      check .design/plan.json and print the setup report
  dagexec validate --json --no-checks   the setup output object, without running assumption checks
  dagexec status                        the tasks and where each one stands
  dagexec prompt 2                      the prompt task 2's worker will receive
  dagexec graph --format dot | dot -Tsvg > plan.svg
  dagexec init --worker claude          write the workflow that runs the plan on GitHub Actions
  dagexec run --reviewer 'claude -p --output-format json'   each completed task reviewed
  dagexec run --long-run .long-run      the NN-PLAN.md files of .long-run, one worker per plan
  dagexec --plan specs/001-x/tasks.md run   a Spec Kit task list, ticked as tasks complete
  dagexec answer 3 \"use sqlite\"         answer task 3's question; run again to resume

The plan is .design/plan.json in the current directory unless --plan says otherwise.
Plan format and worker contract: see README.md.";

/// Execute a .design/plan.json — a DAG of AI-agent tasks — in verified, retried, committed rounds.
#[derive(Debug, Parser)]
#[command(name = "dagexec", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The plan file, or a Spec Kit tasks.md [default: .design/plan.json]
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
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
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
    ///
    /// With --gantt, then a chart of the run as it happened: one row per task, one bar per
    /// recorded attempt (progress.dagexecAttempts) coloured by outcome, and below it what
    /// `dagexec simulate` predicts for the schedule `run` uses here (--jobs, --schedule as
    /// `run` resolves them), from the same attempts' times: `predicted 4m10s · actual 5m2s`.
    Status {
        /// Print the table as JSON.
        #[arg(long, conflicts_with = "gantt")]
        json: bool,
        /// Also draw the recorded attempts as a Gantt chart, beside simulate's prediction.
        #[arg(long)]
        gantt: bool,
        /// The charts' width in columns [default: the terminal's, else 100].
        #[arg(long, value_name = "COLUMNS", requires = "gantt")]
        width: Option<usize>,
    },
    /// Execute the plan here: parallel workers in isolated worktrees, verified, retried, one
    /// commit per round.
    ///
    /// Each round runs the ready tasks (blockers completed, no shared files in flight) with the
    /// worker command, each in its own git worktree at the round's base commit. A result counts
    /// only if the worker's last line is COMPLETED: …, the declared files exist or changed, and
    /// the acceptance checks pass in the task's tree; failures are retried (3 attempts) with
    /// the reason in the prompt. Completed work is applied in plan order and committed as
    /// `dagexec: round N — …`. Interrupt at any moment and run again to resume.
    ///
    /// Worker: --worker, else $`DAGEXEC_WORKER`, else `worker:` in .design/dagexec.yml. It gets
    /// the prompt on stdin and in $`DAGEXEC_PROMPT_FILE`, and `DAGEXEC_TASK_INDEX`, `DAGEXEC_ATTEMPT`,
    /// `DAGEXEC_ROUND`, `DAGEXEC_MODEL` and `DAGEXEC_LOG_FILE`, and may report what it spent in the
    /// JSON file $`DAGEXEC_USAGE_FILE` (`cost_usd`, `input_tokens`, `output_tokens`, model); the
    /// outputs of `claude -p --output-format json`, `codex exec --json` and `gemini
    /// --output-format json` are read natively (spend, status line, failures; a usage error,
    /// a missing command or refused credentials are not retried, and refused credentials stop
    /// the run with exit status 6).
    ///
    /// Reviewer (--reviewer, $`DAGEXEC_REVIEWER`, `reviewer:` in .design/dagexec.yml, or a task's
    /// own `reviewer` field): runs in the task's tree after its checks pass, with the review
    /// prompt on stdin, and ends with APPROVED or REJECTED. Rejected: attempt 2 fixes the
    /// rejected changes, attempt 3 starts from a clean tree with all feedback, then (or after
    /// the same rejection three times in a row) the task is blocked with a question for you.
    ///
    /// Long-run plans (--long-run DIR): DIR/plans/NN-PLAN.md run as one task per plan (order:
    /// front matter `depends_on`, else number order), each a fresh worker with the long-run
    /// executor prompt and its checkpoint; the state is DIR/plan.json.
    ///
    /// Worktrees: outside the repository and its .git, in $`XDG_CACHE_HOME/dagexec/worktrees`
    /// (else ~/.cache/dagexec/worktrees), a folder per repository; $`DAGEXEC_WORKTREES` or
    /// `worktrees:` in .design/dagexec.yml names another place (never inside the work tree).
    ///
    /// Exit status: 0 all completed; 1 finished incomplete (or --max-cost spent); 2 usage or
    /// plan error; 3 circuit breaker; 4 deadlock; 5 questions wait for your answer (`dagexec
    /// answer`); 6 the agent's API refused its credentials (the secret to fix is named); 130
    /// interrupted.
    Run {
        /// The worker command line, run with `sh -c` in the task's tree.
        #[arg(long, value_name = "CMD")]
        worker: Option<String>,
        /// Workers running at once [default: number of cores].
        #[arg(long, short = 'j', value_name = "N")]
        jobs: Option<usize>,
        /// rounds (ready-set rounds), waves (wave by wave) or eager (start tasks as soon as
        /// their blockers land) [default: rounds].
        #[arg(long, value_name = "MODE", value_parser = crate::flow::settings::parse_schedule)]
        schedule: Option<crate::pure::engine::Schedule>,
        /// Per-task time limit (e.g. 30m); the worker's process group is killed after it
        /// [default: 30m].
        #[arg(long, value_name = "DURATION", value_parser = crate::flow::settings::parse_duration)]
        timeout: Option<Duration>,
        /// Proceed even when blocking assumption checks fail.
        #[arg(long)]
        yes: bool,
        /// Print the rounds that would run, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Time allowed for each assumption check.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
        check_timeout: Duration,
        /// The reviewer command line, run with `sh -c` in the task's tree after it completes.
        #[arg(long, value_name = "CMD")]
        reviewer: Option<String>,
        /// Run the long-run plans (NN-PLAN.md) of this folder instead of a plan.json.
        #[arg(long, value_name = "DIR", conflicts_with = "plan")]
        long_run: Option<PathBuf>,
        /// A budget in USD (e.g. 5 or 12.50): once the plan's recorded spend (what workers
        /// report, see `dagexec status`) reaches it, no new attempt starts and the run ends
        /// with exit status 1 [default: none].
        #[arg(long, value_name = "USD", value_parser = crate::pure::usage::Budget::parse)]
        max_cost: Option<crate::pure::usage::Budget>,
    },
    /// Answer the question a blocked task asks, and put it back to pending.
    ///
    /// A task asks when the reviewer loop escalates, or when a long-run worker returns
    /// `NEEDS_DECISION` (answer an option's key or number, or `defer` to skip the plan) or
    /// `NEEDS_ACTION` (answer `done`). The answer is recorded in the task's `question` field and
    /// given to its next attempt; tasks skipped because of it are pending again. Then run
    /// `dagexec run` to resume. For a long-run folder pass --plan DIR/plan.json.
    Answer {
        /// The task's plan index.
        task: usize,
        /// The answer (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Run a failed, blocked or skipped task again: it gets a fresh set of attempts, and the
    /// tasks the cascade skipped because of it are pending again.
    ///
    /// The local twin of `/execute retry N` on a pull request. Fix what made the task fail
    /// first (its reason is in `dagexec status`, its logs under .git/dagexec/logs/), then
    /// `dagexec retry N` and `dagexec run` to resume.
    Retry {
        /// The task's plan index.
        task: usize,
    },
    /// Run a real demo with no API key: a small repository and plan executed by a bundled
    /// scripted worker, then its round commits.
    Demo {
        /// Where to create the demo (a new directory) [default: a new temporary directory].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Workers running at once.
        #[arg(long, short = 'j', value_name = "N", default_value_t = 2)]
        jobs: usize,
    },
    /// Draw the task DAG coloured by status.
    Graph {
        /// mermaid (renders in GitHub markdown) or dot (Graphviz).
        #[arg(long, value_enum, default_value_t = Format::Mermaid)]
        format: Format,
    },
    /// Predict each schedule's wall time and jobs, locally and on GitHub Actions, before spending
    ///
    /// Plays the scheduler's own decisions on a clock: `rounds` (each round's tasks sharing
    /// files in groups one after another), `waves` and `eager` locally on --jobs slots; on
    /// Actions, `rounds` as the Action runs them (a round is the whole ready set; one workflow
    /// run per group of it that shares no files, and per retry: a plan job, up to
    /// --max-parallel work jobs at once, a finalize job) and `eager` (the plan job, then a
    /// conductor that dispatches one run per task attempt, polls them every --poll, and
    /// integrates what ended), every job paying --job-start and every integration
    /// --integrate. Prints each one's wall time, jobs, and ratio to the lower bound
    /// max(critical path, total work ÷ slots); on a terminal (or with --gantt) a chart of the
    /// rounds and eager schedules, one row per task.
    ///
    /// To describe your GitHub, measure on a run there (or take the defaults): --job-start is
    /// a task run's duration (or a work job's, queueing included) minus its attempt's seconds
    /// in progress.dagexecAttempts; --integrate is the `dagexec finalize` step's time in a
    /// finalize job; --poll and --polls-per-hour are the action's inputs of the same name.
    ///
    /// Task durations: --duration 3=20m for task 3; else the plan's history (the attempts
    /// `run` recorded in progress.dagexecAttempts: a task's completed attempt, preceded by the
    /// failed ones that were retried); else --duration 10m; else the history's median; else
    /// 10 minutes, said as an assumption. Every task is assumed to complete (after the
    /// failed attempts its history records); dagexec's own time (git, checks, commits) is
    /// not counted.
    ///
    /// Examples:
    ///   dagexec simulate --duration 10m                  every task 10 minutes
    ///   dagexec simulate -d 15m -d 3=1h -d 7=2m           task 3 an hour, task 7 two minutes
    ///   dagexec simulate --max-parallel 20 --job-start 45s   a bigger matrix, slower runners
    ///   dagexec simulate --poll 10s --polls-per-hour 4000     eager with a GitHub App's token
    ///   dagexec simulate --remaining                     what is left of a run, from its history
    ///   dagexec simulate --json | jq '.schedules[] | {schedule, where, seconds}'
    #[command(verbatim_doc_comment)]
    Simulate {
        /// How long tasks take: `10m` for every task without history, `3=20m` for task 3
        /// (repeat it for several).
        #[arg(long, short = 'd', value_name = "[TASK=]DURATION", value_parser = parse_task_duration)]
        duration: Vec<TaskDuration>,
        /// Ignore the attempts recorded in the plan (progress.dagexecAttempts).
        #[arg(long)]
        no_history: bool,
        /// Workers at once locally [default: as `run`: $`DAGEXEC_JOBS`, `jobs:` in
        /// .design/dagexec.yml, else the number of cores].
        #[arg(long, short = 'j', value_name = "N")]
        jobs: Option<usize>,
        /// Work jobs at once on Actions (the action's max-parallel input).
        #[arg(long, value_name = "N", default_value_t = 8)]
        max_parallel: usize,
        /// A job's time on Actions that is not a task's work: queueing, runner, checkout,
        /// installing dagexec and the worker, uploading the artifact. Every job pays it (plan,
        /// work, finalize, conductor). Measured: a task run's duration minus its attempt's
        /// seconds in progress.dagexecAttempts.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
        job_start: Duration,
        /// dagexec's own step where results land on Actions: a finalize job's (download and
        /// judge the artifacts, apply, commit, push, update the pull request, start the next
        /// run), and the conductor's for each batch of arrivals (and once as it starts).
        /// Measured: the `dagexec finalize` step's time in the Actions tab.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::flow::settings::parse_duration)]
        integrate: Duration,
        /// `schedule: eager`: the conductor's `poll` input, its least wait between two polls
        /// of the runs in flight; a run that ends is integrated at the next poll.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
        poll: Duration,
        /// `schedule: eager`: the conductor's `polls-per-hour` input. With many runs in flight
        /// it waits longer than --poll between polls: 3600 s × runs ÷ this (600: 48 s with 8
        /// runs).
        #[arg(long, value_name = "N", default_value_t = crate::action::jobs::conduct::POLLS_PER_HOUR)]
        polls_per_hour: u64,
        /// Only the tasks not completed yet (a run in progress); completed ones stay done.
        #[arg(long)]
        remaining: bool,
        /// Print the prediction as JSON (shape: see README.md, "dagexec simulate").
        #[arg(long)]
        json: bool,
        /// Draw the charts even when the output is not a terminal.
        #[arg(long, overrides_with = "no_gantt")]
        gantt: bool,
        /// Do not draw the charts.
        #[arg(long)]
        no_gantt: bool,
        /// Which place the charts show the rounds and eager schedules of.
        #[arg(long, value_enum, value_name = "WHERE", default_value_t = ChartPlace::Actions)]
        chart: ChartPlace,
        /// The charts' width in columns [default: the terminal's, else 100].
        #[arg(long, value_name = "COLUMNS")]
        width: Option<usize>,
    },
    /// Write the GitHub Actions workflow that runs the plan, one workflow run per round.
    ///
    /// Writes .github/workflows/dagexec.yml: job `plan` (the round's batch as a job matrix),
    /// job `work` (one job per task, read-only token, installs the worker and checks its
    /// secret, uploads the worker's log and patch as an artifact), job `finalize` (verifies,
    /// commits the round on the execution branch, keeps a draft pull request current, starts
    /// the next round). The action is pinned by commit. Without --worker, asks on a terminal
    /// (which worker, which secret) and otherwise uses Claude Code; then prints the next three
    /// commands (set the secret, commit and push the workflow, start a run).
    Init {
        /// The worker: claude, codex, gemini or aider (installed at a pinned version), or any
        /// command line that reads the prompt on stdin.
        #[arg(long, value_name = "claude|codex|gemini|aider|CMD")]
        worker: Option<String>,
        /// The repository secret the worker needs, passed to it as an environment variable of
        /// the same name and checked before it runs (default: the worker's own, e.g.
        /// `ANTHROPIC_API_KEY`; none for a command).
        #[arg(long, value_name = "NAME")]
        secret: Option<String>,
        /// Keep the secret in this GitHub environment (the work job runs in it, so no other
        /// job can read the secret) instead of the repository's secrets.
        #[arg(long, value_name = "NAME")]
        environment: Option<String>,
        /// The action reference the workflow uses (default: this dagexec's own commit, e.g.
        /// org/dagexec@<commit>); `./` builds it from the repository's own source.
        #[arg(long, value_name = "REF")]
        action: Option<String>,
        /// `rounds`: one workflow run per round (a job matrix; the seeds' rounds). `eager`: a
        /// conductor job starts each task as its own run as soon as its blockers are
        /// committed and a slot is free, and commits each result as it arrives.
        #[arg(long, value_name = "rounds|eager", default_value = "rounds", value_parser = ["rounds", "eager"])]
        schedule: String,
        /// Replace an existing workflow file.
        #[arg(long)]
        force: bool,
        /// Print the workflow instead of writing it.
        #[arg(long)]
        stdout: bool,
    },
    /// The jobs of a round on GitHub Actions (run by action.yml; see `dagexec init`).
    ///
    /// Inputs come from flags or the DAGEXEC_* variables action.yml sets, and the GITHUB_*
    /// variables of the runner. Exit status: 0 done; 1 the run stopped on something a person
    /// must fix (circuit breaker, deadlock, failed pre-flight); 2 dagexec could not do its job.
    #[command(subcommand)]
    Action(crate::cli::action::ActionCommand),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Mermaid,
    Dot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ChartPlace {
    Local,
    Actions,
}

/// `--duration`: for every task without history, or for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskDuration {
    All(Duration),
    Task(usize, Duration),
}

/// `10m` or `3=10m`.
fn parse_task_duration(s: &str) -> Result<TaskDuration, String> {
    match s.split_once('=') {
        None => crate::flow::settings::parse_duration(s).map(TaskDuration::All),
        Some((task, d)) => {
            let task = task.trim().parse::<usize>().map_err(|_| {
                format!("{task:?} is not a task number (expected TASK=DURATION, e.g. 3=20m)")
            })?;
            crate::flow::settings::parse_duration(d).map(|d| TaskDuration::Task(task, d))
        }
    }
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

#[expect(
    clippy::needless_pass_by_value,
    reason = "`map_err` hands the error over by value"
)]
fn config_error(e: crate::flow::settings::ConfigError) -> CliError {
    CliError::Usage {
        message: e.to_string(),
        hint: e.hint(),
    }
}

fn run_error(e: crate::flow::RunError) -> CliError {
    match e {
        crate::flow::RunError::Plan(p) => CliError::Plan(p),
        other => CliError::Usage {
            hint: other.hint(),
            message: other.to_string(),
        },
    }
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
        let plan = plan.unwrap_or_else(|| PathBuf::from(crate::pure::validate::DEFAULT_PLAN_REL));
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

/// For `--plan …/tasks.md` (a Spec Kit task list), the location of the plan generated from
/// it (`speckit::prepare`): written next to tasks.md for the commands that change the state
/// (`run`, `answer`, `retry`), else in a temporary directory that lives as long as the
/// returned value. Other plans and commands: `loc` unchanged.
fn speckit_location(
    command: &Command,
    loc: Location,
) -> Result<(Location, Option<crate::sources::speckit::Prepared>), CliError> {
    if !crate::sources::speckit::is_tasks_md(&loc.plan) {
        return Ok((loc, None));
    }
    let write = match command {
        Command::Run { dry_run, .. } => !dry_run,
        Command::Answer { .. } | Command::Retry { .. } => true,
        Command::Validate { .. }
        | Command::Status { .. }
        | Command::Graph { .. }
        | Command::Simulate { .. }
        | Command::Prompt { .. } => false,
        Command::Demo { .. } | Command::Init { .. } | Command::Action(_) => {
            return Ok((loc, None));
        }
    };
    let prepared =
        crate::sources::speckit::prepare(&loc.root, &loc.plan, write).map_err(|errors| {
            let (message, hint) = crate::sources::speckit::describe(&errors);
            CliError::Usage { message, hint }
        })?;
    if matches!(command, Command::Validate { .. } | Command::Run { .. }) {
        for w in &prepared.warnings {
            eprintln!("warning: {w}");
        }
    }
    let loc = Location {
        plan: prepared.plan.clone(),
        root: loc.root,
        plan_rel: Some(prepared.plan_rel.clone()),
    };
    Ok((loc, Some(prepared)))
}

/// A plan that loaded and validated.
struct Loaded {
    plan: Plan,
    dag: Dag,
}

/// Where a completed run archived the plan at `plan`: `plan.done.json` beside it (schema 2),
/// or the newest `history/<timestamp>-plan.json` (schema 3).
fn archived_plan(plan: &Path) -> Option<PathBuf> {
    let dir = plan.parent()?;
    let done = dir.join("plan.done.json");
    let newest = std::fs::read_dir(dir.join("history"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-plan.json"))
        .max();
    match (done.is_file(), newest) {
        (true, Some(h)) => {
            // Both: the one written last.
            let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
            Some(if modified(&h) > modified(&done) {
                h
            } else {
                done
            })
        }
        (true, None) => Some(done),
        (false, h) => h,
    }
}

fn load(loc: &Location) -> Result<Loaded, CliError> {
    let plan = {
        let _span = tracing::debug_span!("parse").entered();
        crate::edge::plan_file::load(&loc.plan).map_err(PlanErrors::from)?
    };
    let dag = {
        let _span = tracing::debug_span!("check").entered();
        crate::edge::plan_file::check_in(&plan, loc.plan_rel.as_deref(), &loc.root)?
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
    // `--plan specs/001-x/tasks.md`: the plan generated next to it.
    let given = loc.clone();
    let (loc, _speckit) = match speckit_location(&cli.command, loc) {
        Ok(l) => l,
        Err(e) => {
            report(&e, &given);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    install_panic_hook(loc.plan.clone());
    // Not `stdout().lock()`: the live display of `run` writes from its own thread.
    let mut out = io::BufWriter::with_capacity(1 << 20, io::stdout());
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

/// Where bugs are reported.
const BUG_REPORTS: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/issues");

/// Makes a panic a bug report instead of a bare exit 101: what happened and where (the
/// source location), that it is a bug in dagexec and where to report it, and where the plan
/// at `plan` stands (it is written atomically, so it is either the last saved state or the
/// one before). A second panic (a task's, then the main thread's that joins it) adds one line.
fn install_panic_hook(plan: PathBuf) {
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
fn plan_state(path: &Path) -> String {
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

#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
fn run(command: Command, loc: &Location, out: &mut impl Write) -> Result<u8, CliError> {
    match command {
        Command::Run {
            worker,
            jobs,
            schedule,
            timeout,
            yes,
            dry_run,
            check_timeout,
            reviewer,
            long_run,
            max_cost,
        } => {
            let flags = crate::flow::settings::Flags {
                worker,
                jobs,
                timeout,
                schedule,
                reviewer,
                max_cost,
            };
            let file = crate::flow::settings::read_file_config(&loc.root).map_err(config_error)?;
            let env = |k: &str| std::env::var(k).ok();
            let settings = match crate::flow::settings::resolve(&flags, &env, &file) {
                Ok(s) => s,
                Err(crate::flow::settings::ConfigError::NoWorker) if dry_run => {
                    let flags = crate::flow::settings::Flags {
                        worker: Some("(none)".into()),
                        ..flags
                    };
                    crate::flow::settings::resolve(&flags, &env, &file).map_err(config_error)?
                }
                Err(e) => return Err(config_error(e)),
            };
            // What tokens cost, for the CLIs that report no cost of their own.
            crate::pure::prices::install(file.prices().map_err(config_error)?);
            let long_run = long_run
                .map(|dir| crate::sources::longrun::prepare(&loc.root, &dir, dry_run))
                .transpose()
                .map_err(|e| CliError::Usage {
                    hint: e.hint(),
                    message: e.to_string(),
                })?;
            let loc = &match &long_run {
                Some(p) => Location {
                    plan: p.plan.clone(),
                    root: loc.root.clone(),
                    plan_rel: Some(p.plan_rel.clone()),
                },
                None => loc.clone(),
            };
            let Some(plan_rel) = loc.plan_rel.clone() else {
                return Err(CliError::Usage {
                    message: format!(
                        "{} is outside the project directory {}",
                        loc.plan.display(),
                        loc.root.display()
                    ),
                    hint: "run dagexec from the repository that holds the plan".into(),
                });
            };
            let opts = crate::flow::RunOptions {
                plan: loc.plan.clone(),
                plan_rel,
                root: loc.root.clone(),
                settings,
                yes,
                dry_run,
                check_timeout,
            };
            out.flush()?;
            let ui = crate::flow::Ui::for_stdout();
            crate::local::run(&opts, &ui)
                .map(super::flow::exec::RunEnd::code)
                .map_err(run_error)
        }
        Command::Answer { task, text } => {
            let Loaded { mut plan, dag } = load(loc)?;
            let answered = crate::pure::question::answer(&mut plan, &dag, task, &text.join(" "))
                .map_err(|e| CliError::Usage {
                    hint: e.hint(),
                    message: e.to_string(),
                })?;
            crate::edge::plan_file::save(&plan, &loc.plan)?;
            writeln!(
                out,
                "Task {task}: answered {:?}; it is {} now.",
                answered.reply, answered.status
            )?;
            let written = crate::sources::longrun::defer(&loc.root, &plan, task).map_err(|e| {
                CliError::Usage {
                    hint: e.hint(),
                    message: e.to_string(),
                }
            })?;
            if !written.is_empty() {
                writeln!(
                    out,
                    "Logged the deferred decision: {} (committed with the next round).",
                    written.join(", ")
                )?;
            }
            if !answered.reopened.is_empty() {
                let ids: Vec<String> = answered
                    .reopened
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect();
                writeln!(out, "Tasks {} are pending again.", ids.join(", "))?;
            }
            writeln!(
                out,
                "Run `dagexec run` again, with the same options, to resume."
            )?;
            Ok(0)
        }
        Command::Retry { task } => {
            let Loaded { mut plan, dag } = load(loc)?;
            let reopened =
                crate::action::jobs::steer::retry(&mut plan, &dag, task).map_err(|message| {
                    CliError::Usage {
                        message,
                        hint: "`dagexec status` lists the tasks and where each stands".into(),
                    }
                })?;
            crate::edge::plan_file::save(&plan, &loc.plan)?;
            writeln!(
                out,
                "Task {task} is pending again, with a fresh set of attempts."
            )?;
            let others: Vec<String> = reopened
                .iter()
                .filter(|&&i| i != task)
                .map(ToString::to_string)
                .collect();
            if !others.is_empty() {
                writeln!(
                    out,
                    "Tasks {} (skipped because of it) are pending again.",
                    others.join(", ")
                )?;
            }
            writeln!(
                out,
                "Run `dagexec run` again, with the same options, to resume."
            )?;
            Ok(0)
        }
        Command::Demo { dir, jobs } => {
            out.flush()?;
            let ui = crate::flow::Ui::for_stdout();
            crate::local::demo::demo(dir, jobs.max(1), &ui)
                .map(super::flow::exec::RunEnd::code)
                .map_err(run_error)
        }
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
                let text = prompt::spawn_prompt(&plan, task, &base);
                let text =
                    crate::sources::longrun::with_checkpoint(&plan.tasks[task], &loc.root, &text);
                // The user's answer to the task's question goes to its next attempt.
                match crate::pure::question::reply_section(&plan.tasks[task]) {
                    reply if reply.is_empty() => text,
                    reply => format!("{}\n\n{reply}", text.trim_end()),
                }
            };
            out.write_all(text.as_bytes())?;
            Ok(0)
        }
        Command::Status { json, gantt, width } => {
            // After a completed run the plan is archived (seed Step 4): show that run.
            let archived = (!loc.plan.exists())
                .then(|| archived_plan(&loc.plan))
                .flatten();
            let Loaded { plan, .. } = match &archived {
                Some(path) => load(&Location {
                    plan: path.clone(),
                    root: loc.root.clone(),
                    plan_rel: None,
                })?,
                None => load(loc)?,
            };
            if let (Some(path), false) = (&archived, json) {
                writeln!(
                    out,
                    "The run is complete: {} (the plan was archived at {}).\n",
                    crate::pure::update::closing_line(&plan),
                    path.strip_prefix(&loc.root).unwrap_or(path).display()
                )?;
            }
            // The attempts' kept stdout, stderr and work logs, when the plan is in a repository.
            let (logs_dir, logs) = match crate::edge::git::Repo::discover(&loc.root) {
                Ok(repo) => (
                    crate::flow::attempt::logs_dir_shown(repo.root(), repo.common_dir()),
                    crate::flow::attempt::kept_logs(repo.common_dir()),
                ),
                Err(_) => (String::new(), render::status::KeptLogs::new()),
            };
            if json {
                let spent = crate::pure::usage::per_task(&plan);
                let rows: Vec<serde_json::Value> = plan
                    .tasks
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let mut row = serde_json::json!({
                            "index": i, "subject": t.subject, "status": t.status,
                            "attempts": plan.attempts_of(i), "result": t.result,
                        });
                        // The recorded attempts' wall time and reported usage, summed.
                        if let Some(t) = spent.get(&i) {
                            row["seconds"] = t.seconds.into();
                            for (k, v) in [
                                ("costUsd", t.cost_usd.map(Into::into)),
                                ("inputTokens", t.input_tokens.map(Into::into)),
                                ("outputTokens", t.output_tokens.map(Into::into)),
                            ] {
                                if let Some(v) = v {
                                    row[k] = v;
                                }
                            }
                        }
                        if let Some(attempts) = logs.get(&i) {
                            let logs_dir = &logs_dir;
                            let files: Vec<String> = attempts
                                .iter()
                                .flat_map(|a| {
                                    a.kinds
                                        .iter()
                                        .map(move |kind| format!("{logs_dir}/{}", a.file(i, kind)))
                                })
                                .collect();
                            row["logs"] = files.into();
                        }
                        row
                    })
                    .collect();
                serde_json::to_writer_pretty(&mut *out, &rows).map_err(io::Error::other)?;
                writeln!(out)?;
            } else {
                render::status::status_table(&plan, out)?;
                let section = render::status::logs_section(&plan, &logs_dir, &logs, false);
                if !section.is_empty() {
                    writeln!(out)?;
                    out.write_all(section.as_bytes())?;
                }
                if gantt {
                    writeln!(out)?;
                    status_gantt(loc, &plan, width, out)?;
                }
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
        Command::Simulate {
            duration,
            no_history,
            jobs,
            max_parallel,
            job_start,
            integrate,
            poll,
            polls_per_hour,
            remaining,
            json,
            gantt,
            no_gantt,
            chart,
            width,
        } => {
            let args = SimulateArgs {
                duration,
                no_history,
                jobs,
                max_parallel,
                job_start,
                integrate,
                poll,
                polls_per_hour,
                remaining,
                json,
                gantt,
                no_gantt,
                chart,
                width,
            };
            simulate(loc, out, args)
        }
        Command::Init {
            worker,
            secret,
            environment,
            action,
            schedule,
            force,
            stdout,
        } => {
            let usage = |message: String| CliError::Usage {
                message,
                hint: "see `dagexec init --help`".into(),
            };
            let args = crate::action::init::Args {
                worker,
                secret,
                environment,
                action,
                eager: schedule == "eager",
                force,
                stdout,
            };
            crate::action::init::run(&loc.root, &args, out).map_err(usage)
        }
        Command::Action(cmd) => {
            out.flush()?;
            Ok(crate::cli::action::run(cmd))
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
    let validation = tracing::debug_span!("checks").in_scope(|| {
        checks::gather(
            &plan,
            &loc.root,
            checks::CheckOptions {
                skip_checks: no_checks,
                timeout,
            },
        )
    });
    let setup = preflight::output(&plan, &dag, &overlaps, validation);
    let _span = tracing::debug_span!("write").entered();
    if json {
        let missed = overlaps.missed_by_plan();
        if !missed.is_empty() {
            eprintln!(
                "warning: the plan's fileOverlaps miss {} conflict(s) dagexec found (first: {} ↔ {}); they will not run at the same time either",
                missed.count, missed.first[0].0, missed.first[0].1
            );
        }
        setup.write_json(out)?;
        writeln!(out)?;
    } else {
        preflight::report::write(out, &plan, &setup, &overlaps)?;
    }
    out.flush()?;
    let failed = setup.validation.blocking_checks.iter().any(|c| !c.passed);
    // The process ends right after this; freeing a 100k-task plan piece by piece would only
    // delay the exit (about a tenth of a second), so leave it to the OS.
    drop(setup);
    std::mem::forget((plan, dag, overlaps));
    Ok(if failed { EXIT_INCOMPLETE } else { 0 })
}

/// `dagexec status --gantt`: the recorded attempts as a chart, then simulate's prediction
/// for the schedule and workers `run` would use here, and the two wall times side by side.
fn status_gantt(
    loc: &Location,
    plan: &crate::pure::plan::model::Plan,
    width: Option<usize>,
    out: &mut impl Write,
) -> Result<(), CliError> {
    use crate::pure::timeline;
    use std::io::IsTerminal;
    let Some(actual) = timeline::actual(plan) else {
        writeln!(
            out,
            "No attempt is recorded yet (progress.dagexecAttempts): nothing to chart."
        )?;
        return Ok(());
    };
    let width = width
        .or_else(|| {
            io::stdout()
                .is_terminal()
                .then(terminal_size::terminal_size)
                .flatten()
                .map(|(w, _)| usize::from(w.0))
        })
        .unwrap_or(100);
    let file = crate::flow::settings::read_file_config(&loc.root).map_err(config_error)?;
    let flags = crate::flow::settings::Flags {
        worker: Some("(none)".into()),
        ..Default::default()
    };
    let env = |k: &str| std::env::var(k).ok();
    let settings = crate::flow::settings::resolve(&flags, &env, &file).map_err(config_error)?;
    let ran = timeline::Ran {
        schedule: settings.schedule,
        place: crate::pure::simulate::Place::Local,
        slots: settings.jobs,
    };
    let predicted = timeline::predicted(plan, ran);
    out.write_all(timeline::terminal(plan, &actual, width).as_bytes())?;
    if let Some(p) = &predicted {
        writeln!(out, "\npredicted by `dagexec simulate`:")?;
        out.write_all(crate::pure::simulate::render::gantt(plan, &p.prediction, width).as_bytes())?;
    }
    writeln!(out, "\n{}", timeline::versus(&actual, predicted.as_ref()))?;
    Ok(())
}

/// `dagexec simulate`'s arguments.
struct SimulateArgs {
    duration: Vec<TaskDuration>,
    no_history: bool,
    jobs: Option<usize>,
    max_parallel: usize,
    job_start: Duration,
    integrate: Duration,
    poll: Duration,
    polls_per_hour: u64,
    remaining: bool,
    json: bool,
    gantt: bool,
    no_gantt: bool,
    chart: ChartPlace,
    width: Option<usize>,
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "clap hands the arguments over by value"
)]
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
fn simulate(loc: &Location, out: &mut impl Write, a: SimulateArgs) -> Result<u8, CliError> {
    use crate::pure::simulate::{self, DurationInput, Place, Setting};
    use std::io::IsTerminal;
    let usage = |message: String, hint: &str| CliError::Usage {
        message,
        hint: hint.into(),
    };
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    // After a completed run the plan is archived (seed Step 4): its history is there.
    let archived = (!loc.plan.exists())
        .then(|| archived_plan(&loc.plan))
        .flatten();
    let Loaded { plan, dag } = match &archived {
        Some(path) => {
            eprintln!(
                "(the run is complete: simulating the archived plan {})",
                path.strip_prefix(&loc.root).unwrap_or(path).display()
            );
            load(&Location {
                plan: path.clone(),
                root: loc.root.clone(),
                plan_rel: None,
            })?
        }
        None => load(loc)?,
    };
    // Locally the same number of workers `run` would start.
    let jobs = if let Some(j) = a.jobs {
        j
    } else {
        let file = crate::flow::settings::read_file_config(&loc.root).map_err(config_error)?;
        let flags = crate::flow::settings::Flags {
            worker: Some("(none)".into()),
            ..Default::default()
        };
        let env = |k: &str| std::env::var(k).ok();
        crate::flow::settings::resolve(&flags, &env, &file)
            .map_err(config_error)?
            .jobs
    };
    if jobs == 0 || a.max_parallel == 0 || a.polls_per_hour == 0 {
        return Err(usage(
            "--jobs, --max-parallel and --polls-per-hour must be at least 1".into(),
            "the first two are how many tasks run at once, the last the conductor's budget of run reads",
        ));
    }
    let mut input = DurationInput {
        use_history: !a.no_history,
        ..Default::default()
    };
    for d in &a.duration {
        match *d {
            TaskDuration::All(d) => {
                if input.default.replace(ms(d)).is_some() {
                    return Err(usage(
                        "--duration without a task is given twice".into(),
                        "give it once (every task without history); `--duration 3=20m` sets task 3's",
                    ));
                }
            }
            TaskDuration::Task(task, d) => {
                if input.per_task.insert(task, ms(d)).is_some() {
                    return Err(usage(
                        format!("--duration {task}=… is given twice"),
                        "give each task's duration once",
                    ));
                }
            }
        }
    }
    let times = simulate::durations::durations(&plan, &input).map_err(|e| CliError::Usage {
        hint: e.hint(),
        message: e.to_string(),
    })?;
    let conflicts = Overlaps::of(&plan, &dag).for_scheduling();
    let setting = Setting {
        jobs,
        max_parallel: a.max_parallel,
        job_start: ms(a.job_start),
        integrate: ms(a.integrate),
        poll: ms(a.poll),
        polls_per_hour: a.polls_per_hour,
        remaining: a.remaining,
    };
    let report = simulate::predict(&plan, &dag, &conflicts, &times, setting);
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &simulate::render::json(&report, &times))
            .map_err(io::Error::other)?;
        writeln!(out)?;
        return Ok(0);
    }
    out.write_all(simulate::render::table(&report, &times).as_bytes())?;
    let terminal = io::stdout().is_terminal();
    if !a.no_gantt && (a.gantt || terminal) {
        let width = a
            .width
            .or_else(|| {
                terminal
                    .then(terminal_size::terminal_size)
                    .flatten()
                    .map(|(w, _)| usize::from(w.0))
            })
            .unwrap_or(100);
        let place = match a.chart {
            ChartPlace::Local => Place::Local,
            ChartPlace::Actions => Place::Actions,
        };
        for p in report
            .predictions
            .iter()
            .filter(|p| p.place == place && p.schedule != crate::pure::engine::Schedule::Waves)
        {
            writeln!(out)?;
            out.write_all(simulate::render::gantt(&plan, p, width).as_bytes())?;
        }
    }
    Ok(0)
}
