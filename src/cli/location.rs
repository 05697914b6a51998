//! Where the plan is: the `--plan` given or found, the project root, a Spec Kit `tasks.md`
//! or an archived plan in its place, and the plan loaded and validated.

use crate::cli::args::Command;
use crate::cli::report::CliError;
use crate::pure::graph::Dag;
use crate::pure::plan::{Plan, PlanErrors};
use crate::sources::{Prepared, Source};
use std::io::{self};
use std::path::{Path, PathBuf};

/// Where the plan is and which directory is the project root.
#[derive(Debug, Clone)]
pub(crate) struct Location {
    pub(crate) plan: PathBuf,
    pub(crate) root: PathBuf,
    /// The plan's path relative to the root, when it is inside it.
    pub(crate) plan_rel: Option<String>,
}

impl Location {
    /// `path` as messages show it: relative to the root when it is inside.
    pub(crate) fn shown<'a>(&self, path: &'a Path) -> std::path::Display<'a> {
        path.strip_prefix(&self.root).unwrap_or(path).display()
    }

    pub(crate) fn resolve(plan: Option<PathBuf>) -> io::Result<Self> {
        let cwd = std::env::current_dir()?;
        // Without `--plan`: `.design/plan.json`, or the one task list here ([`task_lists`]).
        let plan = plan.unwrap_or_else(|| match task_lists(&cwd).as_slice() {
            [(_, one)] => PathBuf::from(one),
            _ => PathBuf::from(crate::pure::validate::DEFAULT_PLAN_REL),
        });
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
        // `Path::strip_prefix` keeps a `..` (`../elsewhere/plan.json`): such a plan is not
        // inside the root either.
        let plan_rel = abs
            .strip_prefix(&root)
            .ok()
            .and_then(|p| crate::pure::paths::normalize(&p.to_string_lossy()).ok());
        Ok(Location {
            plan,
            root,
            plan_rel,
        })
    }
}

/// The task lists that may be the plan of `cwd` without `--plan`, relative to it: none when
/// `.design/` holds a plan (or an archived one), else the task lists in their usual places
/// (`sources::Format::find`: Taskmaster, Kiro / cc-sdd, Spec Kit). The plan is the one task
/// list, else `.design/plan.json`; of several, the user must choose. `run`, `init` and every
/// other command decide the same way.
fn task_lists(cwd: &Path) -> Vec<(crate::sources::Format, String)> {
    let design = cwd.join(".design");
    if ["plan.json", "plan.done.json", "history"]
        .iter()
        .any(|n| design.join(n).exists())
    {
        return Vec::new();
    }
    crate::sources::Format::find(cwd)
}

/// Without `--plan`, when `cwd` holds no `.design/plan.json` but several task lists: which
/// they are and how to choose one (rather than "No plan found").
pub(crate) fn several_task_lists(cwd: &Path) -> Option<CliError> {
    let lists = task_lists(cwd);
    if lists.len() < 2 {
        return None;
    }
    let named: Vec<String> = lists
        .iter()
        .map(|(format, rel)| format!("  {rel} ({})", format.label()))
        .collect();
    Some(CliError::usage(
        format!(
            "no .design/plan.json here, and {} task lists, so dagexec cannot tell which one is the plan:\n{}",
            lists.len(),
            named.join("\n")
        ),
        format!(
            "choose one with --plan before the command, e.g. `dagexec --plan {} run` (every command takes it)",
            lists[0].1
        ),
    ))
}

/// How a command uses the plan `--plan` names, or the one found here: `None` when it reads
/// none — `demo` (its own), `action` (the Action's inputs), `run --long-run` / `--issue`
/// (theirs) —, else whether it writes the plan's state (`run` but a dry run, `answer`,
/// `retry`).
pub(crate) fn plan_use(command: &Command) -> Option<bool> {
    match command {
        Command::Run(a) => (a.long_run.is_none() && a.issue.issue.is_none()).then_some(!a.dry_run),
        Command::Validate(a) => a.issue.issue.is_none().then_some(false),
        Command::Answer(_) | Command::Retry(_) => Some(true),
        Command::Prompt(_)
        | Command::Status(_)
        | Command::Graph(_)
        | Command::Simulate(_)
        | Command::Init(_) => Some(false),
        Command::Demo(_) | Command::Action(_) => None,
    }
}

/// The plan of a source other than a plan.json (`sources::Source`: `--plan` naming a task
/// list — Spec Kit or Kiro `tasks.md`, Taskmaster `tasks.json` —, `run --long-run DIR`,
/// `--issue N`), prepared (`Source::prepare`): written where runs keep it for the commands
/// that change the state (`run`, `answer`, `retry`), else in a temporary directory that lives
/// as long as the returned value; what reading it said goes to stderr. `None`: every task of
/// it is completed, nothing to do. Other plans and commands: `loc` unchanged.
pub(crate) fn source_location(
    command: &Command,
    loc: Location,
) -> Result<Option<(Location, Option<Prepared>)>, CliError> {
    let Some((source, write)) = source_of(command, &loc)? else {
        return Ok(Some((loc, None)));
    };
    let prepared = source.prepare(&loc.root, write).map_err(|errors| {
        let (message, hint) = crate::sources::describe(&errors);
        CliError::usage(message, hint)
    })?;
    if matches!(command, Command::Validate(_) | Command::Run(_)) {
        for w in &prepared.warnings {
            eprintln!("warning: {w}");
        }
    }
    eprint!("{}", prepared.notes);
    if prepared.archived {
        return Ok(None);
    }
    let loc = Location {
        plan: prepared.plan.clone(),
        root: loc.root,
        plan_rel: Some(prepared.plan_rel.clone()),
    };
    Ok(Some((loc, Some(prepared))))
}

/// The source the command reads its plan from, and whether it writes the plan in place.
fn source_of(command: &Command, loc: &Location) -> Result<Option<(Source, bool)>, CliError> {
    if let Some(issues) = crate::cli::issues::issue_source(command, &loc.root)? {
        return Ok(Some(issues));
    }
    if let Command::Run(a) = command
        && let Some(dir) = &a.long_run
    {
        return Ok(Some((Source::LongRun(dir.clone()), !a.dry_run)));
    }
    let Some(format) = crate::sources::Format::detect(&loc.plan) else {
        return Ok(None);
    };
    // `init` names the task list itself in the workflow: no plan is generated for it.
    let Some(write) = plan_use(command).filter(|_| !matches!(command, Command::Init(_))) else {
        return Ok(None);
    };
    let path = loc.plan.clone();
    Ok(Some((Source::TaskList { format, path }, write)))
}

/// A plan that loaded and validated.
pub(crate) struct Loaded {
    pub(crate) plan: Plan,
    pub(crate) dag: Dag,
}

/// The plan once a completed run archived it (no plan at `loc.plan`): `plan.done.json` beside
/// it (schema 2), or the newest `history/<timestamp>-plan.json` (schema 3), read as a plan
/// outside the project.
pub(crate) fn archived(loc: &Location) -> Option<Location> {
    if loc.plan.exists() {
        return None;
    }
    let dir = loc.plan.parent()?;
    let done = dir.join("plan.done.json");
    let newest = std::fs::read_dir(dir.join("history"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-plan.json"))
        .max();
    let plan = match (done.is_file(), newest) {
        (true, Some(h)) => {
            // Both: the one written last.
            let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
            if modified(&h) > modified(&done) {
                h
            } else {
                done
            }
        }
        (true, None) => done,
        (false, h) => h?,
    };
    Some(Location {
        plan,
        root: loc.root.clone(),
        plan_rel: None,
    })
}

pub(crate) fn load(loc: &Location) -> Result<Loaded, CliError> {
    let plan = tracing::debug_span!("parse")
        .in_scope(|| crate::edge::plan_file::load(&loc.plan))
        .map_err(PlanErrors::from)?;
    let dag = tracing::debug_span!("check")
        .in_scope(|| crate::edge::plan_file::check_in(&plan, loc.plan_rel.as_deref(), &loc.root))?;
    Ok(Loaded { plan, dag })
}
