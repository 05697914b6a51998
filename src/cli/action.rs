//! `dagexec action plan|work|finalize`: the commands `action.yml` runs. Every value comes
//! from a flag or from the `DAGEXEC_*` variable the action sets from its inputs (never from
//! `${{ }}` text inside a script).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::action::jobs::finalize::{self, Round};
use crate::action::jobs::plan as plan_job;
use crate::action::jobs::work::{self, Job};
use crate::action::runtime::{self, Context};
use crate::action::{ActionError, Inputs};
use crate::edge::github::{Client, Token};

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
    plan: String,
    /// The execution branch [default: dagexec/<goal slug>].
    #[arg(long, env = "DAGEXEC_BRANCH", default_value = "")]
    branch: String,
    /// Per-task timeout (work) and check timeout.
    #[arg(long, env = "DAGEXEC_TIMEOUT", default_value = "30m", value_parser = crate::flow::settings::parse_duration)]
    timeout: Duration,
    /// A budget in USD (plan, finalize): once the plan's recorded spend reaches it, no round
    /// is planned or dispatched [default: none].
    #[arg(long, env = "DAGEXEC_MAX_COST", default_value = "", value_parser = parse_budget)]
    max_cost: Budget,
}

/// The `max-cost` input: empty for none.
#[derive(Debug, Clone, Copy)]
struct Budget(Option<crate::pure::usage::Budget>);

fn parse_budget(s: &str) -> Result<Budget, String> {
    if s.trim().is_empty() {
        return Ok(Budget(None));
    }
    crate::pure::usage::Budget::parse(s).map(|b| Budget(Some(b)))
}

/// The inputs of the jobs that write the execution branch (finalize, conduct).
#[derive(Debug, Args)]
pub struct Writer {
    /// Accept task patches that change .github/ (all of it), a root action.yml/action.yaml
    /// and, in a repository that is itself the action, the files it is built from
    /// (Cargo.toml, Cargo.lock, build.rs, src/, scripts/install-action.sh). Off: such a
    /// patch fails its attempt with the reason.
    #[arg(long, env = "DAGEXEC_ALLOW_WORKFLOW_CHANGES", default_value = "false", value_parser = parse_bool, action = clap::ArgAction::Set)]
    allow_workflow_changes: bool,
    /// The workflow file the next round (or a task run, or a successor conductor) is
    /// dispatched to.
    #[arg(long, env = "DAGEXEC_WORKFLOW", default_value = "dagexec.yml")]
    workflow: String,
    /// A GitHub App's id: with --private-key, the job works with an installation token of
    /// the app instead of the token (so its pushes trigger the PR's own CI).
    #[arg(long, env = "DAGEXEC_APP_ID", default_value = "")]
    app_id: String,
    /// The GitHub App's private key (PEM), from a secret. Never echoed.
    #[arg(
        long,
        env = "DAGEXEC_APP_PRIVATE_KEY",
        default_value = "",
        hide_env_values = true
    )]
    private_key: String,
}

#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// Job `plan`: the round's batch as a job matrix (outputs: matrix, has-work, base, round,
    /// branch, conclusion, message).
    Plan {
        #[command(flatten)]
        common: Common,
        /// Worker jobs of a round running at once (passed on as the `max-parallel` output).
        #[arg(long, env = "DAGEXEC_MAX_PARALLEL", default_value = "8", value_parser = clap::value_parser!(u16).range(1..=256))]
        max_parallel: u16,
        /// `rounds`: each workflow run is a round (a job matrix). `eager`: the conductor job
        /// starts each task as its own run as soon as it is ready (conclusion `conduct`).
        #[arg(long, env = "DAGEXEC_SCHEDULE", default_value = "rounds", value_parser = parse_schedule)]
        schedule: Schedule,
    },
    /// Job `work`: one attempt at one task in this checkout; leaves result.json,
    /// changes.patch and worker.log (outputs: artifact-name, artifact-path).
    Work {
        #[command(flatten)]
        common: Common,
        #[arg(long, env = "DAGEXEC_TASK")]
        task: usize,
        #[arg(long, env = "DAGEXEC_ATTEMPT")]
        attempt: u32,
        #[arg(long, env = "DAGEXEC_ROUND")]
        round: u32,
        #[arg(long, env = "DAGEXEC_BASE")]
        base: String,
        /// The worker command line.
        #[arg(long, env = "DAGEXEC_WORKER")]
        worker: String,
        /// The reviewer command line, run with `sh -c` in this checkout after the attempt
        /// completes (a task's own `reviewer` field wins; empty: none).
        #[arg(long, env = "DAGEXEC_REVIEWER", default_value = "")]
        reviewer: String,
        /// Where to leave the files [default: $RUNNER_TEMP/dagexec-work].
        #[arg(long, env = "DAGEXEC_ARTIFACTS", default_value = "")]
        artifacts: String,
    },
    /// Job `comment`: an `/execute` comment on a pull request (an `issue_comment` event, read
    /// from `GITHUB_EVENT_PATH)`: checks the commenter's permission, reacts, replies, refreshes
    /// the status comment or records an abort, starts a round (`/execute`), and hands a
    /// command that changes the plan to the `steer` job (outputs: dispatched, the branch a
    /// round was started on; steer-branch, the branch whose plan the steer job changes).
    Comment {
        #[command(flatten)]
        common: Common,
        /// The workflow file rounds are dispatched to.
        #[arg(long, env = "DAGEXEC_WORKFLOW", default_value = "dagexec.yml")]
        workflow: String,
    },
    /// Job `steer`, in the execution branch's concurrency group: the same comment, checked
    /// again; `/execute proceed|answer|retry` committed to the plan on the branch, pushed,
    /// and a round started (output: dispatched).
    Steer {
        #[command(flatten)]
        common: Common,
        /// The workflow file rounds are dispatched to.
        #[arg(long, env = "DAGEXEC_WORKFLOW", default_value = "dagexec.yml")]
        workflow: String,
    },
    /// Job `conduct` (`schedule: eager`): starts every ready task as its own workflow run,
    /// polls them, integrates, commits and pushes each batch of arrivals, keeps the PR
    /// current, and reports the end as finalize does (outputs: conclusion, pr-number).
    Conduct {
        #[command(flatten)]
        common: Common,
        #[arg(long, env = "DAGEXEC_BASE")]
        base: String,
        #[arg(long, env = "DAGEXEC_ROUND", default_value = "1")]
        round: u32,
        /// Task runs at once.
        #[arg(long, env = "DAGEXEC_MAX_PARALLEL", default_value = "8", value_parser = clap::value_parser!(u16).range(1..=256))]
        max_parallel: u16,
        /// The least time between two polls of the runs in flight (longer with many runs, to
        /// stay under GitHub's rate limit).
        #[arg(long, env = "DAGEXEC_POLL", default_value = "30s", value_parser = crate::flow::settings::parse_duration)]
        poll: Duration,
        /// Hand over to a fresh conductor run after this long (GitHub ends a job at 6 hours).
        #[arg(long, env = "DAGEXEC_HANDOVER_AFTER", default_value = "5h30m", value_parser = crate::flow::settings::parse_duration)]
        handover_after: Duration,
        /// The most polls of runs an hour (`GITHUB_TOKEN` allows 1,000 API requests an hour).
        #[arg(long, env = "DAGEXEC_POLLS_PER_HOUR", default_value_t = crate::action::jobs::conduct::POLLS_PER_HOUR)]
        polls_per_hour: u64,
        #[command(flatten)]
        writer: Writer,
    },
    /// Job `finalize`: verify, integrate, commit and push the round, update the PR, report
    /// stops, dispatch the next round (outputs: conclusion, pr-number).
    Finalize {
        #[command(flatten)]
        common: Common,
        #[arg(long, env = "DAGEXEC_MATRIX", default_value = "")]
        matrix: String,
        #[arg(long, env = "DAGEXEC_BASE")]
        base: String,
        #[arg(long, env = "DAGEXEC_ROUND")]
        round: u32,
        #[arg(long, env = "DAGEXEC_CONCLUSION", default_value = "work")]
        conclusion: String,
        #[arg(long, env = "DAGEXEC_MESSAGE", default_value = "")]
        message: String,
        /// Where the round's artifacts were downloaded.
        #[arg(long, env = "DAGEXEC_ARTIFACTS", default_value = "")]
        artifacts: String,
        #[command(flatten)]
        writer: Writer,
    },
}

/// A schedule on Actions: the engine's rounds or eager (waves are a local schedule only).
use crate::pure::engine::Schedule;

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
fn parse_bool(s: &str) -> Result<bool, String> {
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

/// The token: `DAGEXEC_TOKEN` (the action's `token` input), else `GITHUB_TOKEN`. Masked.
fn token() -> Token {
    let t = std::env::var("DAGEXEC_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .or_else(|| std::env::var("GITHUB_TOKEN").ok())
        .unwrap_or_default();
    let t = Token::new(t);
    runtime::mask(&t);
    t
}

fn inputs(common: &Common, worker: String, artifacts: PathBuf) -> Inputs {
    Inputs {
        // An input the workflow left empty arrives as an empty variable.
        plan_rel: if common.plan.trim().is_empty() {
            crate::pure::validate::DEFAULT_PLAN_REL.to_string()
        } else {
            common.plan.clone()
        },
        worker,
        reviewer: None,
        max_parallel: 1,
        timeout: common.timeout,
        branch: common.branch.clone(),
        allow_workflow_changes: false,
        token: token(),
        app_id: None,
        workflow: "dagexec.yml".into(),
        artifacts,
        max_cost: common.max_cost.0,
    }
}

/// Runs an action command; the exit status (0 fine, 1 the run stopped on something a person
/// must fix, 2 dagexec could not do its job).
pub fn run(cmd: ActionCommand) -> u8 {
    let ctx = Context::from_env();
    match execute(cmd, &ctx) {
        Ok(code) => code,
        Err(e) => {
            runtime::error_annotation("dagexec", &e.to_string());
            2
        }
    }
}

#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
fn execute(cmd: ActionCommand, ctx: &Context) -> Result<u8, ActionError> {
    let root = std::env::current_dir()
        .map_err(|e| ActionError::Input(format!("no current directory: {e}")))?;
    match cmd {
        ActionCommand::Plan {
            common,
            max_parallel,
            schedule,
        } => {
            let inputs = inputs(&common, String::new(), PathBuf::new());
            // The pre-flight checks are the plan's commands: what they wrote to the runner's
            // files is undone before the matrix is set.
            let guard = runtime::FileGuard::from_env();
            let reaper = crate::edge::reaper::Reaper::start();
            let planned = plan_job::run(&root, &inputs, &ctx.ref_name, schedule);
            reaped(&reaper);
            for line in guard.restore()? {
                println!("warning: {line}");
            }
            let planned = planned?;
            println!("{}", planned.message);
            let mut outs = plan_job::outputs(&planned);
            outs.push(("message", planned.message.clone()));
            outs.push(("max-parallel", max_parallel.to_string()));
            ctx.set_outputs(
                &outs
                    .iter()
                    .map(|(k, v)| (*k, v.clone()))
                    .collect::<Vec<_>>(),
            )?;
            ctx.summary(&format!(
                "## dagexec: plan of round {}\n\n```\n{}\n```\n",
                planned.round, planned.message
            ))?;
            Ok(0)
        }
        ActionCommand::Work {
            common,
            task,
            attempt,
            round,
            base,
            worker,
            reviewer,
            artifacts,
        } => {
            // An input the workflow left empty arrives as an empty variable.
            let dir = if artifacts.is_empty() {
                ctx.runner_temp
                    .clone()
                    .unwrap_or_else(std::env::temp_dir)
                    .join("dagexec-work")
            } else {
                PathBuf::from(artifacts)
            };
            let name =
                crate::action::matrix::artifact_name(&ctx.run_id, &ctx.run_attempt, task, attempt);
            let mut inputs = inputs(&common, worker, dir.clone());
            inputs.reviewer = Some(reviewer).filter(|r| !r.trim().is_empty());
            // The work job holds no write token; it needs none to fetch a public base, and
            // the checkout's own credentials otherwise.
            inputs.token = Token::new(String::new());
            // Task code (worker, checks, reviewer) runs without the runner's files in its
            // environment; whatever it wrote to them anyway is undone before the outputs are
            // written, after it exited — and they are written even if the attempt errors out,
            // since the upload step needs the name.
            let guard = runtime::FileGuard::from_env();
            // And nothing it started outlives this step (see `reaper`).
            let reaper = crate::edge::reaper::Reaper::start();
            let verdict = work::run(
                &root,
                &inputs,
                Job {
                    task,
                    attempt,
                    round,
                },
                &base,
            );
            reaped(&reaper);
            for line in guard.restore()? {
                println!("warning: {line}");
            }
            ctx.set_outputs(&[
                ("artifact-name", name),
                ("artifact-path", dir.to_string_lossy().to_string()),
            ])?;
            let verdict = verdict?;
            println!(
                "task {task} attempt {attempt}: {} — {}",
                verdict.status, verdict.result
            );
            for w in &verdict.warnings {
                println!("warning: {w}");
            }
            ctx.summary(&format!(
                "### task {task}, attempt {attempt}: {}\n\n{}\n",
                verdict.status, verdict.result
            ))?;
            Ok(0)
        }
        ActionCommand::Comment { common, workflow } => steer_job(
            &root,
            ctx,
            &common,
            workflow,
            crate::action::jobs::steer::Phase::Route,
        ),
        ActionCommand::Steer { common, workflow } => steer_job(
            &root,
            ctx,
            &common,
            workflow,
            crate::action::jobs::steer::Phase::Apply,
        ),
        ActionCommand::Conduct {
            common,
            base,
            round,
            max_parallel,
            poll,
            handover_after,
            polls_per_hour,
            writer,
        } => {
            let mut inputs = inputs(&common, String::new(), PathBuf::new());
            inputs.max_parallel = max_parallel.into();
            let rt = crate::action::runtime()?;
            let client = writer_client(ctx, &mut inputs, &writer, &rt, "conduct")?;
            if common.branch.is_empty() {
                return Err(ActionError::Input(
                    "conduct needs the execution branch (the plan job's `branch` output)".into(),
                ));
            }
            let r = Round {
                branch: common.branch.clone(),
                base,
                round,
                matrix: String::new(),
                planned: "conduct".into(),
                planned_message: String::new(),
            };
            let timing = crate::action::jobs::conduct::Timing {
                poll,
                handover_after,
                polls_per_hour,
            };
            let done = crate::action::jobs::conduct::run(
                &root,
                &inputs,
                ctx,
                &r,
                timing,
                client.as_ref(),
                &rt,
            )?;
            println!("Conductor: {}.", done.conclusion);
            let mut outs = vec![("conclusion", done.conclusion.clone())];
            if let Some(pr) = done.pr {
                outs.push(("pr-number", pr.to_string()));
            }
            ctx.set_outputs(&outs)?;
            Ok(u8::from(done.failed))
        }
        ActionCommand::Finalize {
            common,
            matrix,
            base,
            round,
            conclusion,
            message,
            artifacts,
            writer,
        } => {
            let mut inputs = inputs(&common, String::new(), PathBuf::from(artifacts));
            let rt = crate::action::runtime()?;
            let client = writer_client(ctx, &mut inputs, &writer, &rt, "finalize")?;
            let branch = if common.branch.is_empty() {
                return Err(ActionError::Input(
                    "finalize needs the execution branch (the plan job's `branch` output)".into(),
                ));
            } else {
                common.branch.clone()
            };
            let r = Round {
                branch,
                base,
                round,
                matrix,
                planned: conclusion,
                planned_message: message,
            };
            let done = finalize::run(&root, &inputs, ctx, &r, client.as_ref(), &rt)?;
            let mut outs = vec![("conclusion", done.conclusion.clone())];
            if let Some(pr) = done.pr {
                outs.push(("pr-number", pr.to_string()));
            }
            ctx.set_outputs(&outs)?;
            Ok(u8::from(done.failed))
        }
    }
}

/// The client of a job that writes (finalize, conduct): with `app_id` and `private_key`, a
/// GitHub App's installation token replaces the token. `None` outside a repository.
fn writer_client(
    ctx: &Context,
    inputs: &mut Inputs,
    writer: &Writer,
    rt: &tokio::runtime::Runtime,
    job: &str,
) -> Result<Option<Client>, ActionError> {
    inputs.allow_workflow_changes = writer.allow_workflow_changes;
    inputs.workflow.clone_from(&writer.workflow);
    let (app_id, private_key) = (writer.app_id.as_str(), writer.private_key.as_str());
    if !app_id.trim().is_empty() || !private_key.trim().is_empty() {
        let (Some(repo), false, false) = (
            &ctx.repository,
            app_id.trim().is_empty(),
            private_key.trim().is_empty(),
        ) else {
            return Err(ActionError::Input(
                    "GitHub App authentication needs both `app-id` and `private-key`, in a run with GITHUB_REPOSITORY set".into(),
                ));
        };
        let _entered = rt.enter();
        let token = rt.block_on(crate::edge::github::app::installation_token(
            &ctx.api_url,
            repo,
            app_id,
            private_key,
        ))?;
        runtime::mask(&token);
        println!(
            "Authenticated as GitHub App {} (installation token).",
            app_id.trim()
        );
        inputs.token = token;
        inputs.app_id = app_id.trim().parse().ok();
    }
    let client = match &ctx.repository {
        Some(repo) if !inputs.token.is_empty() => {
            // The HTTP client needs the runtime it will run on.
            let _entered = rt.enter();
            Some(Client::new(&ctx.api_url, &inputs.token, repo.clone())?)
        }
        Some(_) => {
            return Err(ActionError::Input(format!(
                "{job} needs a token (the action's `token` input, e.g. ${{{{ secrets.GITHUB_TOKEN }}}}) to push and update the pull request"
            )));
        }
        None => None,
    };
    Ok(client)
}

/// The `comment` and `steer` jobs: one `/execute` comment, `phase` of it.
fn steer_job(
    root: &std::path::Path,
    ctx: &Context,
    common: &Common,
    workflow: String,
    phase: crate::action::jobs::steer::Phase,
) -> Result<u8, ActionError> {
    let mut inputs = inputs(common, String::new(), PathBuf::new());
    inputs.workflow = workflow;
    if inputs.token.is_empty() {
        return Err(ActionError::Input(
            "comment needs a token (the action's `token` input) to read permissions, reply and start rounds".into(),
        ));
    }
    let rt = crate::action::runtime()?;
    let api_url = ctx.api_url.clone();
    let token = inputs.token.clone();
    let client_for = |t: &crate::action::jobs::comment::Trigger| {
        let _entered = rt.enter();
        Client::new(&api_url, &token, t.repo.clone()).map_err(ActionError::from)
    };
    let done = crate::action::jobs::steer::run(root, &inputs, ctx, client_for, &rt, phase)?;
    println!("{}", done.message);
    ctx.set_outputs(&[
        ("dispatched", done.dispatched.unwrap_or_default()),
        ("steer-branch", done.to_apply.unwrap_or_default()),
    ])?;
    Ok(0)
}

/// Ends what task code left running in this step, saying what it could not end.
fn reaped(reaper: &crate::edge::reaper::Reaper) {
    let reaped = reaper.finish();
    if reaped.killed > 0 {
        println!(
            "Stopped {} process(es) task code left running.",
            reaped.killed
        );
    }
    for who in &reaped.survivors {
        println!(
            "warning: process {who}, started by task code, runs as another user and could not be stopped: it can still change the runner's files and read later steps' environment"
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[test]
    fn every_action_command_parses_with_the_global_options() {
        for args in [
            vec![
                "dagexec",
                "--plan",
                "x.json",
                "action",
                "plan",
                "--plan-rel",
                "p.json",
            ],
            vec![
                "dagexec",
                "action",
                "work",
                "--task",
                "1",
                "--attempt",
                "2",
                "--round",
                "3",
                "--base",
                "abc",
                "--worker",
                "w",
                "--reviewer",
                "r",
            ],
            vec![
                "dagexec",
                "action",
                "finalize",
                "--base",
                "abc",
                "--round",
                "1",
                "--allow-workflow-changes",
                "yes",
            ],
        ] {
            crate::cli::Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        // The action passes every input, so unset ones arrive as empty variables.
        let with_empty = [
            "dagexec",
            "action",
            "finalize",
            "--base",
            "b",
            "--round",
            "1",
            "--artifacts",
            "",
            "--plan-rel",
            ".design/plan.json",
            "--branch",
            "",
        ];
        crate::cli::Cli::try_parse_from(with_empty).unwrap();
    }

    #[test]
    fn booleans_read_as_clap_reads_them_and_empty_is_false() {
        for (s, want) in [
            ("true", true),
            (" TRUE ", true),
            ("yes", true),
            ("on", true),
            ("1", true),
            ("false", false),
            ("No", false),
            ("off", false),
            ("0", false),
            ("", false),
            ("  ", false),
        ] {
            assert_eq!(super::parse_bool(s), Ok(want), "{s:?}");
        }
        for s in ["ture", "2", "enabled"] {
            let e = super::parse_bool(s).unwrap_err();
            assert!(
                e.contains(&format!("{s:?}")) && e.contains("true, false"),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_values_name_the_flag_and_show_examples() {
        let finalize = |flag: &str, value: &str| {
            let args = [
                "dagexec", "action", "finalize", "--base", "b", "--round", "1", flag, value,
            ];
            crate::cli::Cli::try_parse_from(args)
                .unwrap_err()
                .to_string()
        };
        let e = finalize("--allow-workflow-changes", "ture");
        assert!(e.contains("--allow-workflow-changes"), "{e}");
        assert!(e.contains("neither true nor false"), "{e}");
        let e = finalize("--timeout", "soon");
        assert!(e.contains("--timeout"), "{e}");
        assert!(e.contains("examples: 30s, 5m, 1h30m"), "{e}");
    }
}
