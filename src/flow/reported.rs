//! What a worker's or reviewer's run reported: its usage (tokens, cost) and what its CLI
//! said about how it ended, read from its output.

use crate::edge::worker;

/// What a worker's run told beside its output: its failure detail
/// ([`worker::failure_detail`]: a missing command, the stderr tail), what its CLI said about
/// how it ended, and the usage report's warnings (an unusable usage file, a model without a
/// price). The verdict takes them in ([`crate::flow::attempt::observe_and_judge`]).
#[derive(Debug, Default)]
pub(crate) struct Told {
    pub detail: String,
    pub said: crate::pure::said::Said,
    pub warnings: Vec<String>,
}

/// [`reported_usage`] of the run of worker `command`, with its failure detail: what it spent
/// and what it told.
pub(crate) fn reported(
    run: &mut worker::WorkerRun,
    command: &str,
) -> (crate::pure::usage::Usage, Told) {
    let (usage, said, warnings) = reported_usage(run);
    let detail = worker::failure_detail(run, command);
    let told = Told {
        detail,
        said,
        warnings,
    };
    (usage, told)
}

/// Reads what the worker reported spending ([`crate::pure::usage::gather`], token-only CLIs priced
/// with [`crate::pure::prices::current`]) and what it said about how it ended (its structured
/// output, else its exit: [`worker::classify`]); when its output was structured, replaces it
/// with the text that stands for it. Returns the usage, what the CLI said, and warnings (an
/// unusable usage file, a model without a price).
pub(crate) fn reported_usage(
    run: &mut worker::WorkerRun,
) -> (
    crate::pure::usage::Usage,
    crate::pure::said::Said,
    Vec<String>,
) {
    let g = crate::pure::usage::gather(
        &run.stdout,
        &run.stderr_tail,
        run.usage.as_deref(),
        crate::pure::prices::current(),
    );
    let said = g.said.or(worker::classify(run));
    if let Some(text) = g.text {
        run.stdout = text;
    }
    (g.usage, said, g.warnings)
}
