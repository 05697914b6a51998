//! The command line's arguments (clap): the commands, their flags and the help text they
//! teach. Converted to domain values where each command runs ([`crate::cli::commands`]);
//! `init`'s flags are the struct it runs with, [`crate::action::init::Args`].

// The doc comments here are `--help` text, printed as written.
#![allow(clippy::doc_markdown)]

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

use crate::pure::render::graph::GraphFormat;
use crate::pure::simulate::Place;

pub(crate) const AFTER_HELP: &str = "\
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

The plan is .design/plan.json in the current directory unless --plan says otherwise (or,
without one, the only task list here). The user guide is docs/src/ in dagexec's repository:
the plan format in docs/src/plan-format.md, a first plan in docs/src/first-plan.md, the
worker contract in docs/src/workers.md.";

/// Execute a .design/plan.json — a DAG of AI-agent tasks — in verified, retried, committed rounds.
#[derive(Debug, Parser)]
#[command(name = "dagexec", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub(super) struct Cli {
    /// The plan file, or a task list (Spec Kit or Kiro tasks.md, Taskmaster tasks.json) [default: .design/plan.json]
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) plan: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate the plan and report what execution would start from.
    ///
    /// Reads the plan, checks its structure (dependencies, cycles, file paths), runs every
    /// blocking assumption check (each distinct command once, with a timeout), checks that
    /// context files exist, and computes the dependency depths and the concurrency-aware
    /// file-overlap matrix. Never changes anything.
    ///
    /// Exit status: 0 valid; 1 valid but a blocking check failed; 2 the plan is broken.
    Validate(ValidateArgs),
    /// Print the prompt a task's worker receives.
    ///
    /// The 9-section prompt assembled from the task's fields (or a v3 task's own `prompt`),
    /// with the dependency-results placeholder replaced by the results of completed blockers.
    Prompt(PromptArgs),
    /// Show every task's status, attempts and result.
    ///
    /// With --gantt, then a chart of the run as it happened: one row per task, one bar per
    /// recorded attempt (progress.dagexecAttempts) coloured by outcome, and below it what
    /// `dagexec simulate` predicts for the schedule `run` uses here (--jobs, --schedule as
    /// `run` resolves them), from the same attempts' times: `predicted 4m10s · actual 5m2s`.
    Status(StatusArgs),
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
    /// Worker: --worker, else $DAGEXEC_WORKER, else `worker:` in .design/dagexec.yml. It gets
    /// the prompt on stdin and in $DAGEXEC_PROMPT_FILE, and DAGEXEC_TASK_INDEX, DAGEXEC_ATTEMPT,
    /// DAGEXEC_ROUND, DAGEXEC_MODEL and DAGEXEC_LOG_FILE, and may report what it spent in the
    /// JSON file $DAGEXEC_USAGE_FILE (cost_usd, input_tokens, output_tokens, model); the
    /// outputs of `claude -p --output-format json`, `codex exec --json` and `gemini
    /// --output-format json` are read natively (spend, status line, failures; a usage error,
    /// a missing command or refused credentials are not retried, and refused credentials stop
    /// the run with exit status 6).
    ///
    /// Reviewer (--reviewer, $DAGEXEC_REVIEWER, `reviewer:` in .design/dagexec.yml, or a task's
    /// own `reviewer` field): runs in the task's tree after its checks pass, with the review
    /// prompt on stdin, and ends with APPROVED or REJECTED. Rejected: attempt 2 fixes the
    /// rejected changes, attempt 3 starts from a clean tree with all feedback, then (or after
    /// the same rejection three times in a row) the task is blocked with a question for you.
    ///
    /// Long-run plans (--long-run DIR): DIR/plans/NN-PLAN.md run as one task per plan (order:
    /// front matter `depends_on`, else number order), each a fresh worker with the long-run
    /// executor prompt and its checkpoint; the state is DIR/plan.json.
    ///
    /// Worktrees: outside the repository and its .git, in $XDG_CACHE_HOME/dagexec/worktrees
    /// (else ~/.cache/dagexec/worktrees), a folder per repository; $DAGEXEC_WORKTREES or
    /// `worktrees:` in .design/dagexec.yml names another place (never inside the work tree).
    ///
    /// Exit status: 0 all completed; 1 finished incomplete (or --max-cost spent); 2 usage or
    /// plan error; 3 circuit breaker; 4 deadlock; 5 questions wait for your answer (`dagexec
    /// answer`); 6 the agent's API refused its credentials (the secret to fix is named); 130
    /// interrupted.
    Run(RunArgs),
    /// Answer the question a blocked task asks, and put it back to pending.
    ///
    /// A task asks when the reviewer loop escalates, or when a long-run worker returns
    /// NEEDS_DECISION (answer an option's key or number, or `defer` to skip the plan) or
    /// NEEDS_ACTION (answer `done`). The answer is recorded in the task's `question` field and
    /// given to its next attempt; tasks skipped because of it are pending again. Then run
    /// `dagexec run` to resume. For a long-run folder pass --plan DIR/plan.json.
    Answer(AnswerArgs),
    /// Run a failed, blocked or skipped task again: it gets a fresh set of attempts, and the
    /// tasks the cascade skipped because of it are pending again.
    ///
    /// The local twin of `/execute retry N` on a pull request. Fix what made the task fail
    /// first (its reason is in `dagexec status`, its logs under .git/dagexec/logs/), then
    /// `dagexec retry N` and `dagexec run` to resume.
    Retry(RetryArgs),
    /// Run a real demo with no API key: a small repository and plan executed by a bundled
    /// scripted worker, then its round commits.
    Demo(DemoArgs),
    /// Draw the task DAG coloured by status.
    Graph(GraphArgs),
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
    ///   dagexec simulate --poll 2s --polls-per-hour 4000      eager with a GitHub App's token
    ///   dagexec simulate --remaining                     what is left of a run, from its history
    ///   dagexec simulate --json | jq '.schedules[] | {schedule, where, seconds}'
    #[command(verbatim_doc_comment)]
    Simulate(SimulateArgs),
    /// Write the GitHub Actions workflow that runs the plan, one workflow run per round.
    ///
    /// The plan is the one `run` would read here: --plan, else .design/plan.json, else the
    /// only task list in its usual place. Writes only inside a git repository.
    ///
    /// Writes .github/workflows/dagexec.yml: job `plan` (the round's batch as a job matrix),
    /// job `work` (one job per task, read-only token, installs the worker and checks its
    /// secret, uploads the worker's log and patch as an artifact), job `finalize` (verifies,
    /// commits the round on the execution branch, keeps a draft pull request current, starts
    /// the next round). The action is pinned by commit. Without --worker, asks on a terminal
    /// (which worker, which secret) and otherwise uses Claude Code; then prints the next three
    /// commands (set the secret, commit and push the workflow, start a run).
    Init(crate::action::init::Args),
    /// The jobs of a round on GitHub Actions (run by action.yml; see `dagexec init`).
    ///
    /// Inputs come from flags or the DAGEXEC_* variables action.yml sets, and the GITHUB_*
    /// variables of the runner. Exit status: 0 done; 1 the run stopped on something a person
    /// must fix (circuit breaker, deadlock, failed pre-flight); 2 dagexec could not do its job.
    #[command(subcommand)]
    Action(crate::cli::action::ActionCommand),
}

/// `--duration`: for every task without history, or for one task (as the command line names
/// it: [`crate::pure::plan::ids`], read once the plan is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TaskDuration {
    All(Duration),
    Task(String, Duration),
}

/// `10m`, `3=10m` or `T004=10m`.
pub(crate) fn parse_task_duration(s: &str) -> Result<TaskDuration, String> {
    match s.split_once('=') {
        None => crate::flow::settings::parse_duration(s).map(TaskDuration::All),
        Some((task, d)) => crate::flow::settings::parse_duration(d)
            .map(|d| TaskDuration::Task(task.trim().to_string(), d)),
    }
}

/// The arguments of `dagexec validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// Print the seed's setup output object as JSON instead of the report.
    #[arg(long)]
    pub(crate) json: bool,
    /// Do not run the blocking assumption checks.
    #[arg(long)]
    pub(crate) no_checks: bool,
    /// Time allowed for each assumption check (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) check_timeout: Duration,
    #[command(flatten)]
    pub(crate) issue: IssueArgs,
}

/// The arguments of `dagexec prompt`.
#[derive(Debug, clap::Args)]
pub(crate) struct PromptArgs {
    /// The task: its ID in the task list (`13.3`, `T004`), or for a plan.json its index.
    pub(crate) task: String,
    /// Keep the dependency-results placeholder instead of filling it in.
    #[arg(long)]
    pub(crate) raw: bool,
}

/// The arguments of `dagexec status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// Print the table as JSON.
    #[arg(long, conflicts_with = "gantt")]
    pub(crate) json: bool,
    /// Also draw the recorded attempts as a Gantt chart, beside simulate's prediction.
    #[arg(long)]
    pub(crate) gantt: bool,
    /// The charts' width in columns [default: the terminal's, else 100].
    #[arg(long, value_name = "COLUMNS", requires = "gantt")]
    pub(crate) width: Option<usize>,
}

/// A plan made of a GitHub issue's sub-issues (`run` and `validate`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct IssueArgs {
    /// The plan is issue N's sub-issues (blocked-by and `Depends on #N` are the edges), read
    /// from GitHub (GITHUB_TOKEN, else `gh auth token`; GITHUB_API_URL) into
    /// .design/issues/N/plan.json and committed; later runs use that file.
    #[arg(long, value_name = "N", conflicts_with = "plan")]
    pub(crate) issue: Option<u64>,
    /// Read the issues again (their edits since the plan was committed), keeping what ran.
    #[arg(long, requires = "issue")]
    pub(crate) reread: bool,
    /// Include sub-issue N although its author has no write access (repeatable).
    #[arg(long, value_name = "N", requires = "issue")]
    pub(crate) include: Vec<u64>,
    /// The repository of the issue (default: GITHUB_REPOSITORY, else the `origin` remote).
    #[arg(long, value_name = "OWNER/NAME", requires = "issue")]
    pub(crate) repo: Option<String>,
}

/// The arguments of `dagexec run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The worker command line, run with `sh -c` in the task's tree.
    #[arg(long, value_name = "CMD")]
    pub(crate) worker: Option<String>,
    /// Workers running at once [default: number of cores].
    #[arg(long, short = 'j', value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// rounds (ready-set rounds), waves (wave by wave) or eager (start tasks as soon as
    /// their blockers land) [default: rounds].
    #[arg(long, value_name = "MODE", value_parser = crate::flow::settings::parse_schedule)]
    pub(crate) schedule: Option<crate::pure::engine::Schedule>,
    /// serial (tasks that share declared files never run at the same time) or merge (they
    /// do, each from its base; results are merged three-way in plan order and their checks
    /// run again; a conflict sends the later task back once as a rebase attempt)
    /// [default: serial].
    #[arg(long, value_name = "POLICY", value_parser = crate::pure::overlap::Policy::parse)]
    pub(crate) overlap: Option<crate::pure::overlap::Policy>,
    /// Per-task time limit (e.g. 30m); the worker's process group is killed after it
    /// [default: 30m].
    #[arg(long, value_name = "DURATION", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) timeout: Option<Duration>,
    /// Ask nothing before the first round, answering "proceed" to every pre-flight question:
    /// run despite failed blocking assumption checks, and despite uncommitted changes of
    /// yours at files that pending tasks declare (left as they are: a task whose change
    /// touches one cannot be committed).
    #[arg(long)]
    pub(crate) yes: bool,
    /// Print the rounds that would run, change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Time allowed for each assumption check.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) check_timeout: Duration,
    /// The reviewer command line, run with `sh -c` in the task's tree after it completes.
    #[arg(long, value_name = "CMD")]
    pub(crate) reviewer: Option<String>,
    /// Commit the rounds on a new branch NAME, made from HEAD and checked out before the
    /// first round, instead of the current branch; the same command again after a crash goes
    /// on on NAME [default: the current branch].
    #[arg(long, value_name = "NAME", conflicts_with = "dry_run")]
    pub(crate) branch: Option<String>,
    /// Run the long-run plans (NN-PLAN.md) of this folder instead of a plan.json.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plan", "issue"])]
    pub(crate) long_run: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) issue: IssueArgs,
    /// A budget in USD (e.g. 5 or 12.50): once the plan's recorded spend (what workers
    /// report, see `dagexec status`) reaches it, no new attempt starts and the run ends
    /// with exit status 1 [default: none].
    #[arg(long, value_name = "USD", value_parser = crate::pure::usage::Budget::parse)]
    pub(crate) max_cost: Option<crate::pure::usage::Budget>,
}

/// The arguments of `dagexec answer`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnswerArgs {
    /// The task: its ID in the task list (`13.3`, `T004`), or for a plan.json its index.
    pub(crate) task: String,
    /// The answer (several words are joined with spaces).
    #[arg(required = true, num_args = 1..)]
    pub(crate) text: Vec<String>,
}

/// The arguments of `dagexec retry`.
#[derive(Debug, clap::Args)]
pub(crate) struct RetryArgs {
    /// The task: its ID in the task list (`13.3`, `T004`), or for a plan.json its index.
    pub(crate) task: String,
}

/// The arguments of `dagexec demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Where to create the demo (a new directory) [default: a new temporary directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Workers running at once.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 2)]
    pub(crate) jobs: usize,
    /// Not for the demo, which writes its own plan (takes the place of the global --plan,
    /// so the demo's help does not offer it).
    #[arg(long, hide = true, value_name = "PATH")]
    pub(crate) plan: Option<PathBuf>,
}

/// The arguments of `dagexec graph`.
#[derive(Debug, clap::Args)]
pub(crate) struct GraphArgs {
    /// mermaid (renders in GitHub markdown) or dot (Graphviz).
    #[arg(long, default_value = "mermaid", value_parser = PossibleValuesParser::new(["mermaid", "dot"])
        .map(|f| if f == "dot" { GraphFormat::Dot } else { GraphFormat::Mermaid }))]
    pub(crate) format: GraphFormat,
}

/// The arguments of `dagexec simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// How long tasks take: `10m` for every task without history, `3=20m` for task 3
    /// (repeat it for several).
    #[arg(long, short = 'd', value_name = "[TASK=]DURATION", value_parser = parse_task_duration)]
    pub(crate) duration: Vec<TaskDuration>,
    /// Ignore the attempts recorded in the plan (progress.dagexecAttempts).
    #[arg(long)]
    pub(crate) no_history: bool,
    /// Workers at once locally [default: as `run`: $DAGEXEC_JOBS, `jobs:` in
    /// .design/dagexec.yml, else the number of cores].
    #[arg(long, short = 'j', value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// Work jobs at once on Actions (the action's max-parallel input).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(crate) max_parallel: usize,
    /// A job's time on Actions that is not a task's work: queueing, runner, checkout,
    /// installing dagexec and the worker, uploading the artifact. Every job pays it (plan,
    /// work, finalize, conductor). Measured: a task run's duration minus its attempt's
    /// seconds in progress.dagexecAttempts.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) job_start: Duration,
    /// dagexec's own step where results land on Actions: a finalize job's (download and
    /// judge the artifacts, apply, commit, push, update the pull request, start the next
    /// run), and the conductor's for each batch of arrivals (and once as it starts).
    /// Measured: the `dagexec finalize` step's time in the Actions tab.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) integrate: Duration,
    /// `schedule: eager`: the conductor's `poll` input, its least wait between two polls
    /// of the runs in flight; a run that ends is integrated at the next poll.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::flow::settings::parse_duration)]
    pub(crate) poll: Duration,
    /// `schedule: eager`: the conductor's `polls-per-hour` input. A poll is one request
    /// however many runs are in flight, and the conductor waits at least 3600 s ÷ this
    /// between two (600: 6 s).
    #[arg(long, value_name = "N", default_value_t = crate::action::jobs::conduct::POLLS_PER_HOUR)]
    pub(crate) polls_per_hour: u64,
    /// Only the tasks not completed yet (a run in progress); completed ones stay done.
    #[arg(long)]
    pub(crate) remaining: bool,
    /// Print the prediction as JSON (its shape: docs/src/simulate.md).
    #[arg(long)]
    pub(crate) json: bool,
    /// Draw the charts even when the output is not a terminal.
    #[arg(long, overrides_with = "no_gantt")]
    pub(crate) gantt: bool,
    /// Do not draw the charts.
    #[arg(long)]
    pub(crate) no_gantt: bool,
    /// Which place the charts show the rounds and eager schedules of.
    #[arg(long, value_name = "WHERE", default_value = "actions", value_parser = PossibleValuesParser::new(["local", "actions"])
        .map(|p| if p == "local" { Place::Local } else { Place::Actions }))]
    pub(crate) chart: Place,
    /// The charts' width in columns [default: the terminal's, else 100].
    #[arg(long, value_name = "COLUMNS")]
    pub(crate) width: Option<usize>,
}
