//! Each command of the command line, as a function of its arguments ([`run()`] dispatches):
//! `run` and `demo` in [`run`](mod@self::run), what reads a plan without running it in
//! [`inspect`], `simulate` in [`simulate`](mod@self::simulate); `answer`, `retry`, `init` and
//! `action` here.

pub(crate) mod inspect;
pub(crate) mod run;
pub(crate) mod simulate;

pub(crate) use inspect::*;
pub(crate) use run::*;
pub(crate) use simulate::*;

use std::io::Write;

use crate::cli::args::{AnswerArgs, Command, RetryArgs};
use crate::cli::location::{Loaded, load};
use crate::cli::report::CliError;
use crate::cli::{Exit, Location};
use crate::flow::settings::{ConfigError, FileConfig, Flags, Settings};

pub(crate) fn run(
    command: Command,
    loc: &Location,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    match command {
        Command::Run(a) => cmd_run(loc, out, a),
        Command::Answer(a) => cmd_answer(loc, out, a),
        Command::Retry(a) => cmd_retry(loc, out, &a),
        Command::Demo(a) => cmd_demo(loc, out, a),
        Command::Validate(a) => validate(loc, out, &a),
        Command::Prompt(a) => cmd_prompt(loc, out, &a),
        Command::Status(a) => cmd_status(loc, out, &a),
        Command::Graph(a) => cmd_graph(loc, out, &a),
        Command::Simulate(a) => simulate(loc, out, &a),
        Command::Init(a) => cmd_init(loc, out, &a),
        Command::Action(cmd) => {
            out.flush()?;
            Ok(crate::cli::action::run(cmd))
        }
    }
}

pub(crate) fn cmd_answer(
    loc: &Location,
    out: &mut impl Write,
    a: AnswerArgs,
) -> Result<Exit, CliError> {
    let AnswerArgs { task: given, text } = a;
    let _lock = no_run_executing(loc)?;
    let Loaded { mut plan, dag } = load(loc)?;
    let task = find_task(&plan, &given)?;
    let name = crate::pure::plan::ids::name(&plan, task);
    let answered = crate::pure::question::answer(&mut plan, &dag, task, &text.join(" "))
        .map_err(|e| CliError::usage(e.to_string(), e.hint()))?;
    crate::edge::plan_file::save(&plan, &loc.plan)?;
    writeln!(
        out,
        "Task {name}: answered {:?}; it is {} now.",
        answered.reply, answered.status
    )?;
    let written = crate::sources::longrun::defer(&loc.root, &plan, task)
        .map_err(|e| CliError::usage(e.to_string(), e.hint()))?;
    if !written.is_empty() {
        writeln!(
            out,
            "Logged the deferred decision: {} (committed with the next round).",
            written.join(", ")
        )?;
    }
    pending_again(out, &plan, &answered.reopened, "")
}

/// The settings `run` resolves here from `flags`, and the settings file they were read with.
/// With `no_worker` (a dry run; the commands that do not run the plan, which call it with
/// no flags) no worker is needed: without one, it is `(none)`.
fn settings(
    loc: &Location,
    flags: Flags,
    no_worker: bool,
) -> Result<(Settings, FileConfig), CliError> {
    let file = crate::flow::settings::read_file_config(&loc.root)?;
    let env = |k: &str| std::env::var(k).ok();
    let worker = Some("(none)".to_string());
    let settings = match crate::flow::settings::resolve(&flags, &env, &file) {
        Err(ConfigError::NoWorker) if no_worker => {
            crate::flow::settings::resolve(&Flags { worker, ..flags }, &env, &file)
        }
        resolved => resolved,
    };
    Ok((settings?, file))
}

/// A chart's width: `given`, else the terminal's when `terminal`, else 100 columns.
fn chart_width(given: Option<usize>, terminal: bool) -> usize {
    given
        .or_else(|| {
            terminal
                .then(terminal_size::terminal_size)
                .flatten()
                .map(|(w, _)| usize::from(w.0))
        })
        .unwrap_or(100)
}

/// Says which of `tasks` are pending again (`why` after it), when any are, and how to resume.
fn pending_again(
    out: &mut impl Write,
    plan: &crate::pure::plan::Plan,
    tasks: &[usize],
    why: &str,
) -> Result<Exit, CliError> {
    if !tasks.is_empty() {
        writeln!(
            out,
            "{} pending again{why}.",
            crate::pure::plan::ids::tasks_subject(plan, tasks, "is", "are")
        )?;
    }
    writeln!(
        out,
        "Run `dagexec run` again, with the same options, to resume."
    )?;
    Ok(Exit::Success)
}

/// The task `given` on the command line names: a task list's own ID, a plan.json's index.
pub(super) fn find_task(plan: &crate::pure::plan::Plan, given: &str) -> Result<usize, CliError> {
    crate::pure::plan::ids::find(plan, given).map_err(task_usage)
}

/// A usage error about the task the command line names (none such, or not in a state the
/// command acts on), with where to look.
fn task_usage(message: String) -> CliError {
    CliError::usage(
        message,
        "`dagexec status` lists the tasks and where each stands",
    )
}

pub(crate) fn cmd_retry(
    loc: &Location,
    out: &mut impl Write,
    a: &RetryArgs,
) -> Result<Exit, CliError> {
    let _lock = no_run_executing(loc)?;
    let Loaded { mut plan, dag } = load(loc)?;
    let task = find_task(&plan, &a.task)?;
    let name = crate::pure::plan::ids::name(&plan, task);
    let reopened = crate::action::steering::retry(&mut plan, &dag, task).map_err(task_usage)?;
    crate::edge::plan_file::save(&plan, &loc.plan)?;
    writeln!(
        out,
        "Task {name} is pending again, with a fresh set of attempts."
    )?;
    let others: Vec<usize> = reopened.iter().copied().filter(|&i| i != task).collect();
    pending_again(out, &plan, &others, " (skipped because of it)")
}

/// The run lock, held while `answer` or `retry` changes the plan: a run executing it would
/// save its own copy over the change, which was said done. `None` outside a repository.
fn no_run_executing(loc: &Location) -> Result<Option<crate::edge::lock::RunLock>, CliError> {
    let Ok(repo) = crate::edge::git::Repo::discover(&loc.root) else {
        return Ok(None);
    };
    let path = crate::edge::lock::path_in(repo.common_dir());
    crate::edge::lock::RunLock::for_a_change(&path)
        .map(Some)
        .map_err(|e| {
            let hint = "it saves its own copy of the plan: run this again when it has ended (Ctrl-C stops it; `dagexec run` resumes)";
            CliError::usage(e.to_string(), hint)
        })
}

pub(crate) fn cmd_init(
    loc: &Location,
    out: &mut impl Write,
    a: &crate::action::init::Args,
) -> Result<Exit, CliError> {
    // The plan `run` would read here: the workflow runs the same one.
    let plan = run::plan_rel(
        loc,
        "run `dagexec init` in the repository that holds the plan, with --plan relative to it",
    )?;
    crate::action::init::run(&loc.root, plan, a, out)
        .map(|()| Exit::Success)
        .map_err(|message| CliError::usage(message, "see `dagexec init --help`"))
}
