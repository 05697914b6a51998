//! `dagexec action plan|work|finalize`: the commands `action.yml` runs. Every value comes
//! from a flag or from the `DAGEXEC_*` variable the action sets from its inputs (never from
//! `${{ }}` text inside a script).

use crate::pure::engine::Schedule;
use std::path::{Path, PathBuf};

mod args;

pub use args::{
    ActionCommand, Common, ConductArgs, FinalizeArgs, Pace, PlanArgs, SteerArgs, WorkArgs, Writer,
};

use crate::action::jobs::steer::SteerPhase;
use crate::action::jobs::work::{self, Assignment};
use crate::action::jobs::{finalize, plan};
use crate::action::protocol::PlanConclusion;
use crate::action::rounds::Round;
use crate::action::runtime::{self, Runner};
use crate::action::writer::Finalized;
use crate::action::{ActionError, Inputs};
use crate::cli::Exit;
use crate::edge::agent_user::{self, AgentUser};
use crate::edge::github::{Client, Token};

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

fn inputs(common: &Common, worker: &str, artifacts: PathBuf) -> Inputs {
    Inputs {
        // An input the workflow left empty arrives as an empty variable.
        plan_rel: if common.plan.trim().is_empty() {
            crate::pure::validate::DEFAULT_PLAN_REL.to_string()
        } else {
            common.plan.clone()
        },
        // `claude`, `codex`, …: the command line `run --worker NAME` and `init` give it.
        worker: crate::pure::agents::command_of(worker),
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
        build: common.build.clone(),
        overlap: common.overlap.0,
    }
}

/// Runs an action command; the exit status (success; incomplete: the run stopped on something
/// a person must fix; usage: dagexec could not do its job).
pub fn run(cmd: ActionCommand) -> Exit {
    let ctx = Runner::from_env();
    std::env::current_dir()
        .map_err(|e| ActionError::Input(format!("no current directory: {e}")))
        // The one place an action command blocks on a future: every job is async and runs
        // on this runtime (how blocking work fits in: `crate::action::runtime`).
        .and_then(|root| crate::action::runtime()?.block_on(job(cmd, &ctx, &root)))
        .unwrap_or_else(|e| {
            runtime::annotation("error", "dagexec", &e.to_string());
            Exit::Usage
        })
}

/// The job `cmd` names, run in the checkout at `root`.
async fn job(cmd: ActionCommand, ctx: &Runner, root: &Path) -> Result<Exit, ActionError> {
    match cmd {
        ActionCommand::Plan(a) => plan_job(root, ctx, a).await,
        ActionCommand::Work(a) => work_job(root, ctx, a).await,
        ActionCommand::Comment(a) => steer_job(root, ctx, a, SteerPhase::Route).await,
        ActionCommand::Steer(a) => steer_job(root, ctx, a, SteerPhase::Apply).await,
        ActionCommand::Conduct(a) => {
            let mut inputs = inputs(&a.common, "", PathBuf::new());
            inputs.max_parallel = a.max_parallel.into();
            let r = round_of(a.common.branch.clone(), a.base, a.round);
            let done = conduct_job(root, ctx, inputs, &a.writer, r, a.pace.timing()).await?;
            writer_outputs(ctx, &done, true)
        }
        ActionCommand::Finalize(a) => {
            let r = Round {
                matrix: a.matrix,
                planned: a.conclusion,
                planned_message: a.message,
                ..round_of(a.common.branch.clone(), a.base, a.round)
            };
            // Job `finalize`: round `r` as the plan job handed it over, its artifacts'
            // folder among the inputs.
            let mut inputs = inputs(&a.common, "", PathBuf::from(a.artifacts));
            let client = writer_client(ctx, &mut inputs, &a.writer, "finalize", &r).await?;
            let done = finalize::run(root, &inputs, ctx, &r, client.as_ref()).await?;
            writer_outputs(ctx, &done, true)
        }
    }
}

/// The round a writer of the branch was handed: the branch, its base and number.
fn round_of(branch: String, base: String, round: u32) -> Round {
    Round {
        branch,
        base,
        round,
        ..Default::default()
    }
}

/// Where the plan job's pre-flight checks may run, and the agent's user they run as. A job
/// that also conducts (`conducts`) holds the write token: the plan's pre-flight checks run in
/// it only as the agent's unprivileged user (no token, no runner files, a checkout it cannot
/// write), never as dagexec's own.
fn preflight_where(conducts: bool) -> (AgentUser, plan::Preflight) {
    if !conducts {
        return (AgentUser::Off, plan::Preflight::Here);
    }
    let agent = agent_user::from_env();
    let missing = match &agent {
        AgentUser::On(_) => return (agent, plan::Preflight::Here),
        AgentUser::Unavailable(why) => format!(
            "is not there ({why}); give the plan job `agent-user: true` on a runner where it can be made"
        ),
        AgentUser::Off => {
            "is off (`agent-user: false`); give the plan job `agent-user: true`".into()
        }
    };
    let refused = format!(
        "this job holds the conductor's write token and the agent's user {missing}, or run the conductor as a job of its own (the plan job's `conduct: false`, its permissions `contents: read`)"
    );
    (agent, plan::Preflight::Refused(refused))
}

/// The plan job's summary: the plan of the round, and in a job that conducts where its
/// pre-flight checks ran.
fn plan_summary(planned: &plan::Planned, agent: &AgentUser, conducts: bool) -> String {
    let summary = format!(
        "## dagexec: plan of round {}\n\n```\n{}\n```\n",
        planned.round, planned.message
    );
    if !conducts {
        return summary;
    }
    let checks_as = match agent {
        AgentUser::On(a) => format!(
            "The plan's pre-flight checks ran as {}, without the token or the runner's files, in a checkout it cannot write; this job then conducts the run.",
            a.name
        ),
        _ => "This job conducts the run; no pre-flight check ran in it (the agent's user is not there to run them).".to_string(),
    };
    format!("{summary}\n{checks_as}\n")
}

/// Job `plan`: the round's next part as a job matrix, or how the run ends. Under
/// `schedule: eager` with the action's `conduct` input, the job goes on as the conductor
/// (with the writer's settings and the pace) when the plan says so.
async fn plan_job(root: &Path, ctx: &Runner, a: PlanArgs) -> Result<Exit, ActionError> {
    let (schedule, max_parallel) = (a.schedule, a.max_parallel);
    let conductor = a.conduct && schedule == Schedule::Eager;
    let mut inputs = inputs(&a.common, "", PathBuf::new());
    let (agent, preflight) = preflight_where(conductor);
    if let Err(e) = agent_user::let_pass(root) {
        println!(
            "warning: cannot let the agent's user reach {}: {e}",
            root.display()
        );
    }
    // The pre-flight checks are the plan's commands: what they wrote to the runner's
    // files is undone before the matrix is set.
    let guard = runtime::FileGuard::from_env();
    let reaper = crate::edge::reaper::Reaper::start();
    // All of it is blocking work (git, the pre-flight checks' processes): a blocking thread
    // does it.
    let (at, ref_name, default_branch) = (
        root.to_path_buf(),
        ctx.ref_name.clone(),
        ctx.default_branch.clone(),
    );
    let plan_inputs = inputs.clone();
    let planned = crate::action::blocking(move || {
        let job = plan::PlanJob {
            ref_name: &ref_name,
            default_branch: &default_branch,
            schedule,
            preflight,
        };
        plan::run(&at, &plan_inputs, &job)
    })
    .await;
    reaped(&reaper);
    for line in guard.restore()? {
        println!("warning: {line}");
    }
    let mut planned = planned?;
    println!("{}", planned.message);
    let conducts = planned.conclusion == PlanConclusion::Conduct && conductor;
    if conducts {
        planned.conclusion = PlanConclusion::Conducted;
    }
    let mut outs = plan::outputs(&planned);
    outs.push(("message", planned.message.clone()));
    outs.push(("max-parallel", max_parallel.to_string()));
    ctx.set_outputs(&outs)?;
    ctx.summary(&plan_summary(&planned, &agent, conducts))?;
    if !conducts {
        return Ok(Exit::Success);
    }
    // The conductor, in this job: the branch, base and round just planned.
    inputs.max_parallel = max_parallel.into();
    let r = round_of(planned.branch.clone(), planned.base.clone(), planned.round);
    let conducted = conduct_job(root, ctx, inputs, &a.writer, r, a.pace.timing()).await;
    // As root (through sudo), what git wrote in the checkout goes back to the runner's user.
    hand_back(root);
    writer_outputs(ctx, &conducted?, false)
}

/// Job `work`: one attempt at one task in this checkout, its files left for the upload.
async fn work_job(root: &Path, ctx: &Runner, given: WorkArgs) -> Result<Exit, ActionError> {
    let (task, attempt) = (given.task, given.attempt);
    let job = Assignment {
        task,
        attempt,
        round: given.round,
    };
    // Task code never runs in a run of the default branch: its runtime token could write
    // that branch's Actions cache scope, which the install step trusts unpinned.
    if !ctx.default_branch.is_empty() && ctx.ref_name == ctx.default_branch {
        return Err(ActionError::Input(format!(
            "task {task} attempt {attempt}: this run is on the default branch ({}); dagexec runs task code only in runs of the execution branch, whose Actions cache scope the install step does not trust. Start the round without naming a task (Run workflow, or `gh workflow run`): the plan job starts it on the execution branch",
            ctx.ref_name
        )));
    }
    // An input the workflow left empty arrives as an empty variable.
    let dir = if given.artifacts.is_empty() {
        ctx.runner_temp
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join("dagexec-work")
    } else {
        PathBuf::from(given.artifacts)
    };
    let name = crate::action::matrix::artifact_name(&ctx.run_id, &ctx.run_attempt, task, attempt);
    let mut inputs = inputs(&given.common, &given.worker, dir.clone());
    inputs.reviewer = Some(given.reviewer).filter(|r| !r.trim().is_empty());
    // The work job holds no write token; it needs none to fetch a public base, and
    // the checkout's own credentials otherwise.
    inputs.token = Token::new(String::new());
    // The upload step needs the artifact's name and folder even if the attempt errors out,
    // or the job is cancelled, passes its timeout or this process is killed while the
    // attempt runs (its provisional result.json then carries what it spent so far): so they
    // are the step's outputs from the start.
    ctx.set_outputs(&[
        ("artifact-name", name),
        ("artifact-path", dir.to_string_lossy().to_string()),
    ])?;
    // Task code (worker, checks, reviewer) runs without the runner's files in its
    // environment; whatever it wrote to them anyway is undone after it exited.
    let guard = runtime::FileGuard::from_env();
    // And nothing it started outlives this step (see `reaper`). Task code runs as the
    // agent's unprivileged user when the action made one.
    let agent = agent_user::from_env();
    // And it reaches only the listed hosts when the `egress` input asks for it.
    let egress_input = std::env::var(crate::edge::egress::VAR).unwrap_or_default();
    let egress = crate::edge::egress::start(&egress_input, &agent).await;
    if let Ok(Ok(e)) = &egress {
        println!("{}", e.describe());
    }
    let reaper = crate::edge::reaper::Reaper::start();
    let worked = match &egress {
        Err(e) => Err(ActionError::Input(e.to_string())),
        Ok(_) => work::run(root, &inputs, job, &given.base).await,
    };
    reaped(&reaper);
    let egress = match egress {
        Ok(Ok(e)) => e.finish(),
        Ok(Err(state)) => state,
        Err(_) => crate::edge::egress::Egressed::Off,
    };
    for line in guard.restore()? {
        println!("warning: {line}");
    }
    // The artifact is the runner's to upload, and the checkout its to clean up (task code
    // worked in it as the agent's user, dagexec's git as root).
    for path in [dir.as_path(), root] {
        hand_back(path);
    }
    let worked = worked?;
    let protections = work::Protections {
        gateway: worked.gateway,
        agent,
        egress,
    };
    ctx.summary(&work_summary(job, &worked, &protections))?;
    Ok(Exit::Success)
}

/// The work job's log lines and summary: the attempt's verdict and warnings, the protections
/// it ran under, and the gateway's settings of the branch not followed.
fn work_summary(job: Assignment, worked: &work::Worked, protections: &work::Protections) -> String {
    let (task, attempt, verdict) = (job.task, job.attempt, &worked.verdict);
    println!(
        "task {task} attempt {attempt}: {} — {}",
        verdict.status, verdict.result
    );
    for w in &verdict.warnings {
        println!("warning: {w}");
    }
    let mut not_followed = String::new();
    for l in &worked.loosened {
        println!("warning: {l}");
        not_followed.push_str(&format!("- {l}\n"));
    }
    if !not_followed.is_empty() {
        not_followed.insert_str(0, "\n#### Settings of the branch not followed\n\n");
    }
    format!(
        "### task {task}, attempt {attempt}: {}\n\n{}\n\n{}{not_followed}",
        verdict.status,
        verdict.result,
        protections.summary()
    )
}

/// Job `conduct` (`schedule: eager`): the conductor, on round `r` of the branch, with the
/// job's `inputs` (the writer's settings, `writer`, go into them) and its `timing`.
async fn conduct_job(
    root: &Path,
    ctx: &Runner,
    mut inputs: Inputs,
    writer: &Writer,
    mut r: Round,
    timing: crate::action::jobs::conduct::Timing,
) -> Result<Finalized, ActionError> {
    let client = writer_client(ctx, &mut inputs, writer, "conduct", &r).await?;
    r.planned = PlanConclusion::Conduct;
    let client = client.as_ref();
    let done = crate::action::jobs::conduct::run(root, &inputs, ctx, client, &r, timing).await?;
    println!("Conductor: {}.", done.conclusion);
    Ok(done)
}

/// A writer's outputs (`conclusion` unless a plan job conducted: its own is `conducted`,
/// which keeps the workflow's finalize from running; `pr-number`, the spend) and exit
/// status.
fn writer_outputs(ctx: &Runner, done: &Finalized, conclusion: bool) -> Result<Exit, ActionError> {
    let mut outs = Vec::new();
    if conclusion {
        outs.push(("conclusion", done.conclusion.to_string()));
    }
    if let Some(pr) = done.pr {
        outs.push(("pr-number", pr.to_string()));
    }
    outs.extend(done.spent_outputs());
    ctx.set_outputs(&outs)?;
    Ok(if done.failed {
        Exit::Incomplete
    } else {
        Exit::Success
    })
}

/// The client of a job that writes (finalize, conduct) round `r`'s branch, which it must be
/// told: with `app_id` and `private_key`, a GitHub App's installation token replaces the
/// token. `None` outside a repository.
async fn writer_client(
    ctx: &Runner,
    inputs: &mut Inputs,
    writer: &Writer,
    job: &str,
    r: &Round,
) -> Result<Option<Client>, ActionError> {
    inputs.allow_workflow_changes = writer.allow_workflow_changes;
    inputs.workflow.clone_from(&writer.workflow);
    // The app's id trimmed (as the JWT takes it), its key as given.
    let (app_id, key) = (writer.app_id.trim(), writer.private_key.as_str());
    if !app_id.is_empty() || !key.trim().is_empty() {
        let (Some(repo), false, false) =
            (&ctx.repository, app_id.is_empty(), key.trim().is_empty())
        else {
            return Err(ActionError::Input(
                    "GitHub App authentication needs both `app-id` and `private-key`, in a run with GITHUB_REPOSITORY set".into(),
                ));
        };
        let token =
            crate::edge::github::app::installation_token(&ctx.api_url, repo, app_id, key).await?;
        runtime::mask(&token);
        println!("Authenticated as GitHub App {app_id} (installation token).");
        inputs.token = token;
        inputs.app_id = app_id.parse().ok();
    }
    let client = match &ctx.repository {
        Some(repo) if !inputs.token.is_empty() => {
            // The HTTP client starts on the runtime this job runs on.
            Some(Client::new(&ctx.api_url, &inputs.token, repo.clone())?)
        }
        Some(_) => {
            return Err(ActionError::Input(format!(
                "{job} needs a token (the action's `token` input, e.g. ${{{{ secrets.GITHUB_TOKEN }}}}) to push and update the pull request"
            )));
        }
        None => None,
    };
    if r.branch.is_empty() {
        return Err(ActionError::Input(format!(
            "{job} needs the execution branch (the plan job's `branch` output)"
        )));
    }
    Ok(client)
}

/// The `comment` and `steer` jobs: one `/execute` comment, `phase` of it.
async fn steer_job(
    root: &std::path::Path,
    ctx: &Runner,
    a: SteerArgs,
    phase: SteerPhase,
) -> Result<Exit, ActionError> {
    let mut inputs = inputs(&a.common, "", PathBuf::new());
    inputs.workflow = a.workflow;
    if inputs.token.is_empty() {
        return Err(ActionError::Input(
            "comment needs a token (the action's `token` input) to read permissions, reply and start rounds".into(),
        ));
    }
    let client_for = |t: &crate::action::steering::comment::Trigger| {
        Client::new(&ctx.api_url, &inputs.token, t.repo.clone()).map_err(ActionError::from)
    };
    let done = crate::action::jobs::steer::run(root, &inputs, ctx, client_for, phase).await?;
    println!("{}", done.message);
    ctx.set_outputs(&[
        ("dispatched", done.dispatched.unwrap_or_default()),
        ("steer-branch", done.to_apply.unwrap_or_default()),
    ])?;
    Ok(Exit::Success)
}

/// Gives `path` back to the runner's user (as root through sudo), saying when it cannot.
fn hand_back(path: &Path) {
    if let Err(e) = agent_user::hand_back(path) {
        println!(
            "warning: cannot give {} back to the runner's user: {e}",
            path.display()
        );
    }
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
            assert_eq!(super::args::parse_bool(s), Ok(want), "{s:?}");
        }
        for s in ["ture", "2", "enabled"] {
            let e = super::args::parse_bool(s).unwrap_err();
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
        // The job protocol: an unknown conclusion from the plan job names the input.
        let e = finalize("--conclusion", "finished");
        assert!(e.contains("--conclusion"), "{e}");
        assert!(e.contains("finalize's `conclusion` input"), "{e}");
        assert!(e.contains("work, close-round, conduct"), "{e}");
    }
}
