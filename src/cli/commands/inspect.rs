//! The commands that read a plan without running it: `validate`, `prompt`, `status`
//! (and its Gantt chart), `graph`.

use crate::flow::preflight::{self, Overlaps, checks};
use crate::pure::prompt::{self, Unit};
use crate::pure::render;
use std::io::{self, Write};

use crate::cli::args::{GraphArgs, PromptArgs, StatusArgs, ValidateArgs};
use crate::cli::location::{Loaded, archived, load};
use crate::cli::report::CliError;
use crate::cli::{Exit, Location};
use crate::edge::lock;
use crate::flow::settings::Flags;
use crate::pure::plan::model::Status;

pub(crate) fn validate(
    loc: &Location,
    out: &mut impl Write,
    a: &ValidateArgs,
) -> Result<Exit, CliError> {
    let Loaded { plan, dag } = tracing::debug_span!("load").in_scope(|| load(loc))?;
    // A plan runs in a git repository (worktrees, a commit per round): outside one, the
    // setup report could only repeat git's own complaint.
    if let Err(crate::edge::git::GitError::NotARepository { .. }) =
        crate::edge::git::Repo::discover(&loc.root)
    {
        return Err(CliError::usage(
            format!(
                "{} is not in a git repository; dagexec runs a plan in one (each task in a worktree, a commit per round)",
                loc.root.display()
            ),
            "run dagexec from the repository that holds the plan, or make this directory one: `git init && git add -A && git commit -m start`",
        ));
    }
    let overlaps = tracing::debug_span!("overlap").in_scope(|| Overlaps::of(&plan, &dag));
    let validation = tracing::debug_span!("checks").in_scope(|| {
        checks::gather(
            &plan,
            &loc.root,
            checks::CheckOptions {
                skip_checks: a.no_checks,
                timeout: a.check_timeout,
            },
        )
    });
    let setup = preflight::output(&plan, &dag, &overlaps, validation);
    let _span = tracing::debug_span!("write").entered();
    if a.json {
        let missed = overlaps.missed_by_plan();
        if !missed.is_empty() {
            eprintln!(
                "warning: the plan's fileOverlaps miss {} conflict(s) dagexec found (first: {} ↔ {}); they will not run at the same time either",
                missed.count, missed.first[0].0, missed.first[0].1
            );
        }
        serde_json::to_writer(&mut *out, &setup).map_err(io::Error::from)?;
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
    Ok(if failed {
        Exit::Incomplete
    } else {
        Exit::Success
    })
}

/// `dagexec status --gantt`: the recorded attempts as a chart, then simulate's prediction
/// for the schedule and workers `run` would use here, and the two wall times side by side.
pub(crate) fn status_gantt(
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
    let width = super::chart_width(width, io::stdout().is_terminal());
    let settings = super::settings(loc, Flags::default(), true)?.0;
    let ran = timeline::Ran {
        schedule: settings.schedule,
        place: crate::pure::simulate::Place::Local,
        slots: settings.jobs,
        merge: settings.overlap == crate::pure::overlap::Policy::Merge,
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

pub(crate) fn cmd_prompt(
    loc: &Location,
    out: &mut impl Write,
    a: &PromptArgs,
) -> Result<Exit, CliError> {
    let Loaded { plan, .. } = load(loc)?;
    let task = super::find_task(&plan, &a.task)?;
    let unit = if plan.is_waves() {
        Unit::Wave
    } else {
        Unit::Batch
    };
    let base = prompt::original_prompt(&plan, task, unit);
    let text = if a.raw {
        base
    } else {
        let text = prompt::spawn_prompt(&plan, task, &base);
        let text = crate::sources::longrun::with_checkpoint(&plan.tasks[task], &loc.root, &text);
        // The user's answer to the task's question goes to its next attempt.
        match crate::pure::question::reply_section(&plan.tasks[task]) {
            reply if reply.is_empty() => text,
            reply => format!("{}\n\n{reply}", text.trim_end()),
        }
    };
    out.write_all(text.as_bytes())?;
    Ok(Exit::Success)
}

pub(crate) fn cmd_status(
    loc: &Location,
    out: &mut impl Write,
    a: &StatusArgs,
) -> Result<Exit, CliError> {
    let &StatusArgs { json, gantt, width } = a;
    // After a completed run the plan is archived (seed Step 4): show that run.
    let archived = archived(loc);
    let Loaded { plan, .. } = load(archived.as_ref().unwrap_or(loc))?;
    if let (Some(Location { plan: path, .. }), false) = (&archived, json) {
        writeln!(
            out,
            "The run is complete: {} (the plan was archived at {}).\n",
            crate::pure::update::closing_line(&plan),
            loc.shown(path)
        )?;
    }
    // The attempts' kept stdout, stderr and work logs, when the plan is in a repository.
    let repo = crate::edge::git::Repo::discover(&loc.root).ok();
    let (logs_dir, logs) = match &repo {
        Some(repo) => (
            crate::flow::logs::logs_dir_shown(repo.root(), repo.common_dir()),
            crate::flow::logs::kept_logs(repo.common_dir()),
        ),
        None => (String::new(), render::status::KeptLogs::new()),
    };
    if json {
        let spent = crate::pure::usage::per_task(&plan);
        let rows: Vec<serde_json::Value> = plan
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.join)
            .map(|(i, t)| {
                let mut row = serde_json::json!({
                    "index": i, "subject": t.subject, "status": t.status,
                    "attempts": plan.attempts_of(i), "result": t.result,
                });
                // The recorded attempts' wall time and reported usage, summed.
                if let Some(t) = spent.get(&i) {
                    spent_figures(&mut row, t);
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
        let running = (plan.tasks.iter()).any(|t| !t.join && t.status == Status::InProgress);
        let lock = repo.map(|r| lock::path_in(r.common_dir()));
        if let Some(pid) = lock
            .filter(|_| running)
            .and_then(|l| lock::died_holding(&l))
        {
            writeln!(
                out,
                "\nNo run is executing these tasks: the run that started them (pid {pid}) stopped before it finished (killed, or its machine went down). `dagexec run` resumes: they start again."
            )?;
        }
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
    Ok(Exit::Success)
}

pub(crate) fn cmd_graph(
    loc: &Location,
    out: &mut impl Write,
    a: &GraphArgs,
) -> Result<Exit, CliError> {
    let Loaded { plan, .. } = load(loc)?;
    out.write_all(render::graph::render(&plan, a.format).as_bytes())?;
    Ok(Exit::Success)
}

/// A task's recorded attempts' wall time and usage, summed (`seconds`, `costUsd`,
/// `inputTokens`, `outputTokens`), and where an agent CLI's own report of its spend disagrees
/// with the model gateway's count (those figures), what the CLI said: `cliCostUsd`,
/// `cliInputTokens`, `cliOutputTokens`.
fn spent_figures(row: &mut serde_json::Value, t: &crate::pure::usage::Totals) {
    row["seconds"] = t.seconds.into();
    let cli = t.cli.clone().filter(|_| t.differs).unwrap_or_default();
    for (k, v) in [
        ("costUsd", t.cost_usd.map(serde_json::Value::from)),
        ("inputTokens", t.input_tokens.map(Into::into)),
        ("outputTokens", t.output_tokens.map(Into::into)),
        ("cliCostUsd", cli.cost_usd.map(Into::into)),
        ("cliInputTokens", cli.input_tokens.map(Into::into)),
        ("cliOutputTokens", cli.output_tokens.map(Into::into)),
    ] {
        if let Some(v) = v {
            row[k] = v;
        }
    }
}
