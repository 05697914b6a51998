//! `dagexec run` and `dagexec demo`.

use std::io::Write;

use crate::cli::args::{DemoArgs, RunArgs};
use crate::cli::report::CliError;
use crate::cli::{Exit, Location};
use crate::flow::settings::Flags;

pub(crate) fn cmd_run(loc: &Location, out: &mut impl Write, a: RunArgs) -> Result<Exit, CliError> {
    // --long-run and --issue chose the plan already (`cli::location`).
    let flags = Flags {
        worker: a.worker,
        jobs: a.jobs,
        timeout: a.timeout,
        schedule: a.schedule,
        overlap: a.overlap,
        reviewer: a.reviewer,
        max_cost: a.max_cost,
    };
    let (settings, file) = super::settings(loc, flags, a.dry_run)?;
    // What tokens cost, for the CLIs that report no cost of their own.
    crate::pure::prices::install(file.prices()?);
    // `--long-run DIR`: `loc` is its plan already (`cli::location::source_location`).
    // After the end: the plan was archived by the run that completed it (a crash in the
    // archiving commit finished first).
    if !loc.plan.exists()
        && let Some(rel) = &loc.plan_rel
    {
        crate::local::finish_interrupted_round(&loc.root, rel, &crate::flow::Ui::for_stdout())?;
    }
    if let Some(done) = crate::cli::location::archived(loc) {
        return completed(loc, &done.plan, out);
    }
    let opts = crate::flow::RunOptions {
        plan: loc.plan.clone(),
        plan_rel: plan_rel(loc, "run dagexec from the repository that holds the plan")?,
        root: loc.root.clone(),
        settings,
        yes: a.yes,
        dry_run: a.dry_run,
        check_timeout: a.check_timeout,
        branch: a.branch,
    };
    out.flush()?;
    let ui = crate::flow::Ui::for_stdout();
    Ok(Exit::of_run(crate::local::run(&opts, &ui)?))
}

/// The plan's path relative to the project root, which `run` and `init` need; `hint` says
/// what to do when it is outside.
pub(super) fn plan_rel(loc: &Location, hint: &str) -> Result<String, CliError> {
    loc.plan_rel.clone().ok_or_else(|| {
        let message = format!(
            "{} is outside the project directory {}",
            loc.plan.display(),
            loc.root.display()
        );
        CliError::usage(message, hint)
    })
}

/// `run` when the plan is complete: where it is archived, and what to do for a new one.
fn completed(
    loc: &Location,
    done: &std::path::Path,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    let plan = crate::edge::plan_file::load(done).map_err(crate::pure::plan::PlanErrors::from)?;
    writeln!(
        out,
        "Nothing to run: the plan is complete. {}\nIt is archived as {}; `dagexec status` shows how it went. For a new plan, write {} (/design <goal>) and run again.",
        crate::pure::update::closing_line(&plan),
        loc.shown(done),
        loc.shown(&loc.plan),
    )?;
    Ok(Exit::Success)
}

pub(crate) fn cmd_demo(
    _loc: &Location,
    out: &mut impl Write,
    a: DemoArgs,
) -> Result<Exit, CliError> {
    let DemoArgs { dir, jobs, plan } = a;
    if let Some(plan) = plan {
        return Err(CliError::usage(
            format!(
                "--plan {}: the demo writes and runs its own plan",
                plan.display()
            ),
            "run `dagexec demo` without --plan; to run your plan, `dagexec --plan PATH run`",
        ));
    }
    out.flush()?;
    let ui = crate::flow::Ui::for_stdout();
    let end = crate::local::demo::demo(dir, jobs.max(1), &ui)?;
    Ok(Exit::of_run(end))
}
