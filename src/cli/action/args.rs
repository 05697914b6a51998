//! The arguments of `dagexec action <job>`: a flag per input, each also read from the
//! `DAGEXEC_*` variable `action.yml` sets, and the parsers of the action's input forms.

// The doc comments of the argument types are `--help` text, printed as written.
#![allow(clippy::doc_markdown)]

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::action::protocol::PlanConclusion;
use crate::pure::engine::Schedule;

/// The inputs every command shares.
#[derive(Debug, Args)]
pub struct Common {
    /// The plan, relative to the repository root.
    #[arg(
        id = "action_plan",
        long = "plan-rel",
        value_name = "PATH",
        env = "DAGEXEC_PLAN",
        default_value = ".design/plan.json"
    )]
    pub(super) plan: String,
    /// The execution branch [default: dagexec/<goal slug>].
    #[arg(
        long,
        env = "DAGEXEC_BRANCH",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) branch: String,
    /// Per-task timeout (work) and check timeout.
    #[arg(long, env = "DAGEXEC_TIMEOUT", default_value = "30m", value_parser = crate::flow::settings::parse_duration)]
    pub(super) timeout: Duration,
    /// A budget in USD (plan, finalize): once the plan's recorded spend reaches it, no round
    /// is planned or dispatched [default: none].
    #[arg(long, env = "DAGEXEC_MAX_COST", default_value = "", hide_default_value = true, value_parser = unless_empty(crate::pure::usage::Budget::parse))]
    pub(super) max_cost: Given<crate::pure::usage::Budget>,
    /// The SHA-256 of this dagexec binary, as the action's install step checked or built it:
    /// passed on as the `build` input of every run this job dispatches (the pin later jobs run
    /// a restored build by) [default: none].
    #[arg(long, env = "DAGEXEC_BUILD_SHA256", default_value = "", hide_default_value = true, value_parser = parse_build)]
    pub(super) build: String,
    /// Tasks of a round that share files (plan): serial or merge [default: `overlap` in
    /// .design/dagexec.yml, else serial].
    #[arg(long, env = "DAGEXEC_OVERLAP", default_value = "", hide_default_value = true, value_parser = unless_empty(crate::pure::overlap::Policy::parse))]
    pub(super) overlap: Given<crate::pure::overlap::Policy>,
    /// The jobs read the plan at --plan-rel: this takes the place of the global --plan, so
    /// their help does not offer two plan flags.
    #[arg(long = "plan", id = "plan", hide = true, value_name = "PATH")]
    pub(super) _global_plan: Option<std::path::PathBuf>,
}

/// An input that may be empty: `max-cost` (empty for none), `overlap` (empty for the settings
/// file's). Not an `Option`, which clap would read as a flag that may be left out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Given<T>(pub(super) Option<T>);

/// Reads an input with `parse`, empty as not given.
fn unless_empty<T>(
    parse: fn(&str) -> Result<T, String>,
) -> impl Fn(&str) -> Result<Given<T>, String> + Clone {
    move |s| match s.trim() {
        "" => Ok(Given(None)),
        _ => parse(s).map(|v| Given(Some(v))),
    }
}

/// The `build` pin: empty, or a SHA-256 in lower-case hex.
fn parse_build(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || (s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is not a SHA-256 (64 lower-case hex digits)"))
    }
}

/// The inputs of the jobs that write the execution branch (finalize, conduct).
#[derive(Debug, Args)]
pub struct Writer {
    /// Accept task patches that change .github/ (all of it), a root action.yml/action.yaml
    /// and, in a repository that is itself the action, the files it is built from
    /// (Cargo.toml, Cargo.lock, build.rs, src/, scripts/install-action.sh). Off: such a
    /// patch fails its attempt with the reason.
    #[arg(long, env = "DAGEXEC_ALLOW_WORKFLOW_CHANGES", default_value = "false", value_parser = parse_bool, action = clap::ArgAction::Set)]
    pub(super) allow_workflow_changes: bool,
    /// The workflow file the next round (or a task run, or a successor conductor) is
    /// dispatched to.
    #[arg(long, env = "DAGEXEC_WORKFLOW", default_value = "dagexec.yml")]
    pub(super) workflow: String,
    /// A GitHub App's id: with --private-key, the job works with an installation token of
    /// the app instead of the token (so its pushes trigger the PR's own CI).
    #[arg(
        long,
        env = "DAGEXEC_APP_ID",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) app_id: String,
    /// The GitHub App's private key (PEM), from a secret. Never echoed.
    #[arg(
        long,
        env = "DAGEXEC_APP_PRIVATE_KEY",
        default_value = "",
        hide_default_value = true,
        hide_env_values = true
    )]
    pub(super) private_key: String,
}

/// How the conductor paces itself (conduct, and a plan job that conducts).
#[derive(Debug, Args)]
pub struct Pace {
    /// The least time between two polls of the runs in flight (a poll is one request, the
    /// listing of the branch's runs; longer when --polls-per-hour asks it).
    #[arg(long, env = "DAGEXEC_POLL", default_value = "10s", value_parser = crate::flow::settings::parse_duration)]
    pub(super) poll: Duration,
    /// Hand over to a fresh conductor run after this long (GitHub ends a job at 6 hours).
    #[arg(long, env = "DAGEXEC_HANDOVER_AFTER", default_value = "5h30m", value_parser = crate::flow::settings::parse_duration)]
    pub(super) handover_after: Duration,
    /// The most poll requests an hour (GITHUB_TOKEN allows 1,000 API requests an hour).
    #[arg(long, env = "DAGEXEC_POLLS_PER_HOUR", default_value_t = crate::action::jobs::conduct::POLLS_PER_HOUR)]
    pub(super) polls_per_hour: u64,
}

impl Pace {
    /// The conductor's timing.
    pub(super) fn timing(&self) -> crate::action::jobs::conduct::Timing {
        crate::action::jobs::conduct::Timing {
            poll: self.poll,
            handover_after: self.handover_after,
            polls_per_hour: self.polls_per_hour,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// Job `plan`: the round's batch as a job matrix (outputs: matrix, has-work, base, round,
    /// branch, conclusion, message).
    Plan(PlanArgs),
    /// Job `work`: one attempt at one task in this checkout; leaves result.json,
    /// changes.patch and worker.log (outputs: artifact-name, artifact-path).
    Work(WorkArgs),
    /// Job `comment`: an `/execute` comment on a pull request (an `issue_comment` event, read
    /// from GITHUB_EVENT_PATH): checks the commenter's permission, reacts, replies, refreshes
    /// the status comment or records an abort, starts a round (`/execute`), and hands a
    /// command that changes the plan to the `steer` job (outputs: dispatched, the branch a
    /// round was started on; steer-branch, the branch whose plan the steer job changes).
    Comment(SteerArgs),
    /// Job `steer`, in the execution branch's concurrency group: the same comment, checked
    /// again; `/execute proceed|answer|retry` committed to the plan on the branch, pushed,
    /// and a round started (output: dispatched).
    Steer(SteerArgs),
    /// Job `conduct` (`schedule: eager`): starts every ready task as its own workflow run,
    /// polls them, integrates, commits and pushes each batch of arrivals, keeps the PR
    /// current, and reports the end as finalize does (outputs: conclusion, pr-number).
    Conduct(ConductArgs),
    /// Job `finalize`: verify, integrate, commit and push the round, update the PR, report
    /// stops, dispatch the next round (outputs: conclusion, pr-number).
    Finalize(FinalizeArgs),
}

// The arguments of each job: a struct per subcommand, handed whole to the job (their `--help`
// text is the variant's).

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub(super) common: Common,
    /// Worker jobs of a round running at once (passed on as the `max-parallel` output).
    #[arg(long, env = "DAGEXEC_MAX_PARALLEL", default_value = "8", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(super) max_parallel: u16,
    /// `rounds`: each workflow run is a round (a job matrix). `eager`: the conductor job
    /// starts each task as its own run as soon as it is ready (conclusion `conduct`).
    #[arg(long, env = "DAGEXEC_SCHEDULE", default_value = "rounds", value_parser = parse_schedule)]
    pub(super) schedule: Schedule,
    /// `schedule: eager`: this job also conducts the run (conclusion `conducted`; the
    /// conduct job does not run). It needs the conduct job's permissions; its pre-flight
    /// checks run as the agent's unprivileged user, or not beside its token at all.
    #[arg(long, env = "DAGEXEC_CONDUCT", default_value = "false", value_parser = parse_bool, action = clap::ArgAction::Set)]
    pub(super) conduct: bool,
    #[command(flatten)]
    pub(super) pace: Pace,
    #[command(flatten)]
    pub(super) writer: Writer,
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    #[command(flatten)]
    pub(super) common: Common,
    #[arg(long, env = "DAGEXEC_TASK")]
    pub(super) task: usize,
    #[arg(long, env = "DAGEXEC_ATTEMPT")]
    pub(super) attempt: u32,
    #[arg(long, env = "DAGEXEC_ROUND")]
    pub(super) round: u32,
    #[arg(long, env = "DAGEXEC_BASE")]
    pub(super) base: String,
    /// The worker command line.
    #[arg(long, env = "DAGEXEC_WORKER")]
    pub(super) worker: String,
    /// The reviewer command line, run with `sh -c` in this checkout after the attempt
    /// completes (a task's own `reviewer` field wins; empty: none).
    #[arg(
        long,
        env = "DAGEXEC_REVIEWER",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) reviewer: String,
    /// Where to leave the files [default: $RUNNER_TEMP/dagexec-work].
    #[arg(
        long,
        env = "DAGEXEC_ARTIFACTS",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) artifacts: String,
}

#[derive(Debug, Args)]
pub struct SteerArgs {
    #[command(flatten)]
    pub(super) common: Common,
    /// The workflow file rounds are dispatched to.
    #[arg(long, env = "DAGEXEC_WORKFLOW", default_value = "dagexec.yml")]
    pub(super) workflow: String,
}

#[derive(Debug, Args)]
pub struct ConductArgs {
    #[command(flatten)]
    pub(super) common: Common,
    #[arg(long, env = "DAGEXEC_BASE")]
    pub(super) base: String,
    #[arg(long, env = "DAGEXEC_ROUND", default_value = "1")]
    pub(super) round: u32,
    /// Task runs at once.
    #[arg(long, env = "DAGEXEC_MAX_PARALLEL", default_value = "8", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(super) max_parallel: u16,
    #[command(flatten)]
    pub(super) pace: Pace,
    #[command(flatten)]
    pub(super) writer: Writer,
}

#[derive(Debug, Args)]
pub struct FinalizeArgs {
    #[command(flatten)]
    pub(super) common: Common,
    #[arg(
        long,
        env = "DAGEXEC_MATRIX",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) matrix: String,
    #[arg(long, env = "DAGEXEC_BASE")]
    pub(super) base: String,
    #[arg(long, env = "DAGEXEC_ROUND")]
    pub(super) round: u32,
    /// The plan job's conclusion (`work`, `close-round`, `completed`, …).
    #[arg(long, env = "DAGEXEC_CONCLUSION", default_value = "work", value_parser = str::parse::<PlanConclusion>)]
    pub(super) conclusion: PlanConclusion,
    #[arg(
        long,
        env = "DAGEXEC_MESSAGE",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) message: String,
    /// Where the round's artifacts were downloaded.
    #[arg(
        long,
        env = "DAGEXEC_ARTIFACTS",
        default_value = "",
        hide_default_value = true
    )]
    pub(super) artifacts: String,
    #[command(flatten)]
    pub(super) writer: Writer,
}

/// A schedule on Actions: the engine's rounds or eager (waves are a local schedule only).
fn parse_schedule(s: &str) -> Result<Schedule, String> {
    match s.trim() {
        "" | "rounds" => Ok(Schedule::Rounds),
        "eager" => Ok(Schedule::Eager),
        other => Err(format!(
            "{other:?}: the schedule on Actions is `rounds` (a workflow run per round) or `eager` (a run per task, started as soon as it is ready)"
        )),
    }
}

/// A boolean input as clap's [`BoolishValueParser`] reads it (`true`/`false`, `yes`/`no`,
/// `on`/`off`, `1`/`0`, any case), and an empty value as false: an action input that is not
/// set (`${{ vars.UNSET }}`) arrives as an empty variable. Anything else is refused, never
/// read as true.
///
/// [`BoolishValueParser`]: clap::builder::BoolishValueParser
pub(super) fn parse_bool(s: &str) -> Result<bool, String> {
    use clap::builder::{BoolishValueParser, TypedValueParser};
    let s = s.trim();
    if s.is_empty() {
        return Ok(false);
    }
    BoolishValueParser::new()
        .parse_ref(
            &clap::Command::new("dagexec"),
            None,
            std::ffi::OsStr::new(s),
        )
        .map_err(|_| {
            format!("{s:?} is neither true nor false (true, false, yes, no, on, off, 1, 0)")
        })
}
