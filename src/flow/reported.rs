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
    /// What the CLI itself reported spending, when the model gateway counted the attempt
    /// (the record keeps both: [`crate::pure::usage::AttemptRecord::cli`]).
    pub cli_usage: Option<crate::pure::usage::Usage>,
}

/// What the run of worker `command` reported and its failure detail, with the model
/// gateway's count ([`with_wire`]) taken in: the usage, what the worker told, and a budget
/// stop. What it reported spending is read by [`crate::pure::usage::gather`] (token-only CLIs
/// priced with [`crate::pure::prices::current`]), what it said about how it ended from its
/// structured output, else its exit ([`worker::classify`]); a structured output is replaced
/// with the text that stands for it.
pub(crate) fn through_gateway(
    run: &mut worker::WorkerRun,
    command: &str,
    wire: Option<&crate::edge::gateway::Spend>,
) -> (crate::pure::usage::Usage, Told, Option<String>) {
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
    let mut told = Told {
        detail: worker::failure_detail(run, command),
        said,
        warnings: g.warnings,
        cli_usage: None,
    };
    let (usage, budget) = with_wire(g.usage, &mut told, wire);
    (usage, told, budget)
}

/// What the attempt spent, once the model gateway's count (`wire`, when it served the
/// worker) is taken in: the wire's tokens and cost first, the CLI's own report where the wire
/// has none (a model without a price: then what the wire priced of the others is its floor);
/// a CLI report that disagrees with the wire is shown as
/// a warning with both. A request the gateway refused past the request cap makes a failed
/// attempt's reason; one refused past a budget is returned: the attempt was stopped by the
/// budget, whatever its worker said after ([`crate::pure::outcome::stopped_by_budget`]).
fn with_wire(
    cli: crate::pure::usage::Usage,
    told: &mut Told,
    wire: Option<&crate::edge::gateway::Spend>,
) -> (crate::pure::usage::Usage, Option<String>) {
    let Some(wire) = wire else {
        return (cli, None);
    };
    let budget = wire.refused.clone().filter(|r| r.contains("budget"));
    if let Some(refused) = &wire.refused
        && budget.is_none()
    {
        told.said.failure = Some(refused.clone());
    }
    if wire.requests == 0 && wire.tokens.is_empty() {
        return (cli, budget);
    }
    let mut counted = wire.usage();
    // Beside an unpriced model the wire's cost is a floor, not a total to compare.
    let floor = counted.cost_usd.take_if(|_| !wire.unpriced.is_empty());
    if let Some(m) = crate::pure::usage::mismatch(&cli, &counted) {
        told.warnings.push(m);
    }
    told.cli_usage = Some(cli.clone()).filter(|u| !u.is_empty());
    let mut usage = counted.or(cli);
    if !wire.unpriced.is_empty() {
        told.warnings.push(format!(
            "no price for the model(s) {}: the gateway counted their tokens but not their cost; add them under `prices:` in .design/dagexec.yml",
            wire.unpriced.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
        // The CLI's own report may be fuller (its total), never lower.
        usage.cost_usd = usage.cost_usd.into_iter().chain(floor).reduce(f64::max);
    }
    (usage, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::usage::Usage;

    /// A model the price table lacks beside a priced one: what the gateway metered for the
    /// priced one is a floor the CLI's own report cannot lower (a worker that writes `$0` to
    /// its usage file), while a fuller report (a CLI's own total, the unpriced model's share
    /// in it) is taken.
    #[test]
    fn a_model_without_a_price_leaves_what_the_wire_priced_as_a_floor() {
        let mut wire = crate::edge::gateway::Spend::default();
        let tokens = crate::pure::gateway::Tokens {
            input: 1000,
            output: 100,
            ..Default::default()
        };
        wire.tokens.insert("claude-sonnet-4-5".into(), tokens);
        wire.tokens.insert("mystery-1".into(), tokens);
        wire.unpriced.insert("mystery-1".into());
        (wire.cost_usd, wire.requests) = (0.5, 2);
        for (reported, kept) in [(Some(0.0), 0.5), (None, 0.5), (Some(0.75), 0.75)] {
            let cli = Usage {
                cost_usd: reported,
                ..Default::default()
            };
            let (usage, _) = with_wire(cli, &mut Told::default(), Some(&wire));
            assert_eq!(usage.cost_usd, Some(kept), "{reported:?}");
            assert_eq!(usage.input_tokens, Some(2000));
        }
    }
}
