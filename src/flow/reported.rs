//! What a worker's or reviewer's run reported: its usage (tokens, cost) and what its CLI
//! said about how it ended, read from its output.

use crate::edge::worker;

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
