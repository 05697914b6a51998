//! `dagexec simulate`: the schedules predicted for the plan.

use crate::flow::preflight::Overlaps;
use std::io::{self, Write};
use std::time::Duration;

use crate::cli::args::{SimulateArgs, TaskDuration};
use crate::cli::location::{Loaded, archived, load};
use crate::cli::report::CliError;
use crate::cli::{Exit, Location};
use crate::flow::settings::Flags;

pub(crate) fn simulate(
    loc: &Location,
    out: &mut impl Write,
    a: &SimulateArgs,
) -> Result<Exit, CliError> {
    use crate::pure::simulate::{self, Setting};
    use std::io::IsTerminal;
    let archived = archived(loc);
    if let Some(Location { plan: path, .. }) = &archived {
        eprintln!(
            "(the run is complete: simulating the archived plan {})",
            loc.shown(path)
        );
    }
    let Loaded { plan, dag } = load(archived.as_ref().unwrap_or(loc))?;
    let jobs = match a.jobs {
        Some(j) => j,
        None => super::settings(loc, Flags::default(), true)?.0.jobs,
    };
    if jobs == 0 || a.max_parallel == 0 || a.polls_per_hour == 0 {
        return Err(CliError::usage(
            "--jobs, --max-parallel and --polls-per-hour must be at least 1",
            "the first two are how many tasks run at once, the last the conductor's budget of run reads",
        ));
    }
    let input = duration_input(a, &plan)?;
    let times = simulate::durations::durations(&plan, &input)
        .map_err(|e| CliError::usage(e.to_string(), e.hint()))?;
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
        return Ok(Exit::Success);
    }
    out.write_all(simulate::render::table(&report, &times).as_bytes())?;
    let terminal = io::stdout().is_terminal();
    if !a.no_gantt && (a.gantt || terminal) {
        let width = super::chart_width(a.width, terminal);
        for p in report
            .predictions
            .iter()
            .filter(|p| p.place == a.chart && p.schedule != crate::pure::engine::Schedule::Waves)
        {
            writeln!(out)?;
            out.write_all(simulate::render::gantt(&plan, p, width).as_bytes())?;
        }
    }
    Ok(Exit::Success)
}

/// The durations given with `--duration` (each task's once, one for every task). A task is
/// named as every command names it: a task list's own ID, a plan.json's index (whether the
/// plan has it, `durations` says).
fn duration_input(
    a: &SimulateArgs,
    plan: &crate::pure::plan::Plan,
) -> Result<crate::pure::simulate::DurationInput, CliError> {
    let mut input = crate::pure::simulate::DurationInput {
        use_history: !a.no_history,
        ..Default::default()
    };
    let listed = crate::pure::plan::ids::list_ids(plan).is_some();
    for d in &a.duration {
        match d {
            &TaskDuration::All(d) => {
                if input.default.replace(ms(d)).is_some() {
                    return Err(CliError::usage(
                        "--duration without a task is given twice",
                        "give it once (every task without history); `--duration 3=20m` sets task 3's",
                    ));
                }
            }
            TaskDuration::Task(name, d) => {
                let task = if listed {
                    super::find_task(plan, name)?
                } else {
                    name.parse().map_err(|_| {
                        CliError::usage(
                            format!("--duration {name}=…: {name:?} is not a task number"),
                            "expected TASK=DURATION, e.g. 3=20m: task numbers are plan indices",
                        )
                    })?
                };
                if input.per_task.insert(task, ms(*d)).is_some() {
                    return Err(CliError::usage(
                        format!("--duration {name}=… is given twice"),
                        "give each task's duration once",
                    ));
                }
            }
        }
    }
    Ok(input)
}

/// A duration in milliseconds, as the simulation counts time.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The prediction `status` and the job summaries show beside a run
    /// ([`crate::pure::timeline::predicted`]) assumes `dagexec simulate`'s defaults for the
    /// Action; those are the action's own defaults (a `poll` of 10 s).
    #[test]
    fn the_status_prediction_uses_simulates_defaults() {
        let cli = crate::cli::args::Cli::try_parse_from(["dagexec", "simulate"]).unwrap();
        let crate::cli::args::Command::Simulate(a) = cli.command else {
            panic!("not simulate: {:?}", cli.command)
        };
        use crate::pure::timeline::{INTEGRATE_MS, JOB_START_MS, POLL_MS};
        assert_eq!(
            (ms(a.job_start), ms(a.integrate), ms(a.poll)),
            (JOB_START_MS, INTEGRATE_MS, POLL_MS)
        );
        assert_eq!(POLL_MS, 10_000, "the action's `poll` input defaults to 10s");
    }
}
