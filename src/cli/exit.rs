//! The exit codes, one table: every command's status is one of these, decided here and
//! nowhere else (a run's end maps through [`Exit::of_run`]; a panic is 101, Rust's own, and
//! the panic hook says it is a bug). Scripts and CI rely on them: a code never changes
//! meaning. `dagexec run --help` and the guide's command table list them
//! (`tests/it/cli.rs` checks both against [`Exit::TABLE`]).

use std::process::ExitCode;

use crate::flow::RunEnd;

/// How a command ended, as a process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did its job; a run completed every task.
    Success,
    /// It ran but did not finish clean: tasks remain (the run is incomplete, or the
    /// `--max-cost` budget is spent), a blocking check failed, or an Action job stopped on
    /// something a person must fix.
    Incomplete,
    /// Usage or plan error: dagexec could not do what was asked.
    Usage,
    /// The circuit breaker stopped the run.
    CircuitBreaker,
    /// Pending tasks remain but none can start.
    Deadlock,
    /// Questions wait for the user's answer (`dagexec answer`), then run again.
    NeedsInput,
    /// A worker's credentials were refused: nothing new was started.
    CredentialsRefused,
    /// Ctrl-C (or SIGTERM): the plan is left resumable.
    Interrupted,
}

impl Exit {
    /// Every status with its code and what it means, in code order.
    pub const TABLE: [(Exit, u8, &'static str); 8] = [
        (Exit::Success, 0, "all completed"),
        (
            Exit::Incomplete,
            1,
            "finished incomplete (or --max-cost spent)",
        ),
        (Exit::Usage, 2, "usage or plan error"),
        (Exit::CircuitBreaker, 3, "circuit breaker"),
        (Exit::Deadlock, 4, "deadlock"),
        (Exit::NeedsInput, 5, "questions wait for your answer"),
        (
            Exit::CredentialsRefused,
            6,
            "a worker's credentials were refused",
        ),
        (Exit::Interrupted, 130, "interrupted"),
    ];

    /// The process exit status.
    pub fn code(self) -> u8 {
        Self::TABLE
            .iter()
            .find(|(e, _, _)| *e == self)
            .map_or(2, |(_, code, _)| *code)
    }

    /// How a run's end exits.
    pub fn of_run(end: RunEnd) -> Exit {
        match end {
            RunEnd::Completed => Exit::Success,
            RunEnd::Incomplete | RunEnd::BudgetSpent => Exit::Incomplete,
            RunEnd::CircuitBreaker(_) => Exit::CircuitBreaker,
            RunEnd::Deadlock => Exit::Deadlock,
            RunEnd::Interrupted => Exit::Interrupted,
            RunEnd::NeedsInput => Exit::NeedsInput,
            RunEnd::Halted => Exit::CredentialsRefused,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_distinct_and_every_run_end_has_one() {
        let mut codes: Vec<u8> = Exit::TABLE.iter().map(|(_, c, _)| *c).collect();
        codes.dedup();
        assert_eq!(
            codes.len(),
            Exit::TABLE.len(),
            "codes are unique and sorted"
        );
        assert!(codes.windows(2).all(|w| w[0] < w[1]));
        for (e, code, _) in Exit::TABLE {
            assert_eq!(e.code(), code);
        }
        assert_eq!(Exit::of_run(RunEnd::BudgetSpent).code(), 1);
        assert_eq!(Exit::of_run(RunEnd::Halted).code(), 6);
        assert_eq!(Exit::of_run(RunEnd::Interrupted).code(), 130);
    }
}
