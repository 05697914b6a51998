//! The model gateway's settings on the Action, where they come from two sides of unequal
//! trust: the workflow's inputs (`gateway`, `max-task-cost`, `max-requests`, from the
//! workflow file on the default branch) and the checkout's `.design/dagexec.yml` (a file on
//! the execution branch, which a task's agent or a pull request's author can edit). The file
//! may only tighten what the inputs say: turn the gateway on, lower a cap or add one, add
//! rate limits — never turn the gateway off or raise a cap. What it asked and was not given
//! is returned as [`Loosening`]s, for the job's summary.
//!
//! Locally (`dagexec run`) the file is the user's own and keeps its meaning
//! ([`super::gateway`]).

use super::{ConfigError, FileConfig, GatewaySettings};

/// A setting of the branch's `.design/dagexec.yml` that would have loosened the gateway, and
/// what was kept instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loosening {
    /// The file's key (`gateway`, `max-task-cost`, `max-requests`).
    pub field: &'static str,
    /// What the file asked for.
    pub asked: String,
    /// What the job kept.
    pub kept: String,
    /// Where the kept value came from (the input, or the default when the input is empty).
    pub from: String,
}

impl std::fmt::Display for Loosening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}: {}` in the branch's .design/dagexec.yml was not followed: kept {} ({}); on the Action the branch's settings may only tighten the gateway",
            self.field, self.asked, self.kept, self.from
        )
    }
}

/// The price table for the Action's work job: the defaults with the branch's `prices:`,
/// which may add models and raise prices but not make a model the defaults price cheaper
/// (that would make `max-cost` and `max-task-cost` slower to bite); what it asked and was
/// not given is returned as [`Loosening`]s.
pub fn prices_on_action(
    file: &FileConfig,
) -> Result<(crate::pure::prices::Prices, Vec<Loosening>), ConfigError> {
    let (prices, lowered) = crate::pure::prices::Prices::with_floor(file.prices.as_ref())
        .map_err(|message| super::value("prices", message))?;
    let loosened = lowered
        .into_iter()
        .map(|(model, asked, kept)| Loosening {
            field: "prices",
            asked: format!("{model}: {asked}"),
            kept: kept.to_string(),
            from: "the built-in price table".into(),
        })
        .collect();
    Ok((prices, loosened))
}

/// The gateway's settings for the Action's work job: the inputs (`env`: `DAGEXEC_GATEWAY`,
/// `DAGEXEC_MAX_TASK_COST`, `DAGEXEC_MAX_REQUESTS`, empty = unset) tightened by `file`.
/// Empty inputs mean the gateway on and no cap; the file can then add a cap, not lift one.
pub fn gateway_on_action(
    env: &dyn Fn(&str) -> Option<String>,
    file: &FileConfig,
) -> Result<(GatewaySettings, Vec<Loosening>), ConfigError> {
    // Each side read on its own, with the same parsing and messages as locally.
    let inputs = super::gateway(env, &FileConfig::default())?;
    let none = |_: &str| None;
    let branch = super::gateway(&none, file)?;
    let mut loosened = Vec::new();
    let gateway_input = env("DAGEXEC_GATEWAY");
    let on = if gateway_input.is_some() && !inputs.on {
        // The input turned it off: the file may turn it back on.
        file.gateway.is_some() && branch.on
    } else {
        if file.gateway.is_some() && !branch.on {
            loosened.push(Loosening {
                field: "gateway",
                asked: "off".into(),
                kept: "on".into(),
                from: if gateway_input.is_some() {
                    "the `gateway` input".into()
                } else {
                    "the `gateway` input is empty, and on is the default".into()
                },
            });
        }
        true
    };
    let max_task_cost = tighter(
        "max-task-cost",
        inputs.max_task_cost,
        branch.max_task_cost,
        crate::pure::usage::Budget::usd,
        |b| dollars(b.usd()),
        &mut loosened,
    );
    let max_requests = tighter(
        "max-requests",
        inputs.max_requests,
        branch.max_requests,
        f64::from,
        |n| n.to_string(),
        &mut loosened,
    );
    Ok((
        GatewaySettings {
            on,
            max_task_cost,
            max_requests,
            rates: branch.rates,
        },
        loosened,
    ))
}

/// `$0.50`, `$1000.00`; `$0.0001` where cents would hide the amount.
fn dollars(usd: f64) -> String {
    let cents = format!("{usd:.2}");
    if cents.parse::<f64>().is_ok_and(|c| (c - usd).abs() < 1e-9) {
        format!("${cents}")
    } else {
        format!("${usd}")
    }
}

/// The tighter of a cap the input set and one the file asks for: the file's when lower or
/// when the input sets none; a higher one is a [`Loosening`].
fn tighter<T: Copy>(
    field: &'static str,
    input: Option<T>,
    file: Option<T>,
    size: impl Fn(T) -> f64,
    show: impl Fn(T) -> String,
    loosened: &mut Vec<Loosening>,
) -> Option<T> {
    match (input, file) {
        (Some(i), Some(f)) if size(f) > size(i) => {
            loosened.push(Loosening {
                field,
                asked: show(f),
                kept: show(i),
                from: format!("the `{field}` input"),
            });
            Some(i)
        }
        (_, Some(f)) => Some(f),
        (i, None) => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::usage::Budget;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    fn file(yaml: &str) -> FileConfig {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// (inputs, file) → (on, max-task-cost, max-requests, the fields not followed).
    #[test]
    fn the_branchs_file_only_tightens_the_inputs() {
        type Tightening = (
            &'static [(&'static str, &'static str)],
            &'static str,
            (bool, Option<f64>, Option<u32>),
            &'static [&'static str],
        );
        let rows: [Tightening; 11] = [
            // Empty inputs: on, no cap.
            (&[], "{}", (true, None, None), &[]),
            // The file cannot turn it off, with the input empty or on.
            (&[], "gateway: off", (true, None, None), &["gateway"]),
            (
                &[("DAGEXEC_GATEWAY", "on")],
                "gateway: off",
                (true, None, None),
                &["gateway"],
            ),
            // The input turns it off; the file may turn it back on.
            (
                &[("DAGEXEC_GATEWAY", "off")],
                "{}",
                (false, None, None),
                &[],
            ),
            (
                &[("DAGEXEC_GATEWAY", "off")],
                "gateway: on",
                (true, None, None),
                &[],
            ),
            (
                &[("DAGEXEC_GATEWAY", "off")],
                "gateway: off",
                (false, None, None),
                &[],
            ),
            // No cap in the inputs: the file adds one.
            (
                &[],
                "max-task-cost: 2\nmax-requests: 30",
                (true, Some(2.0), Some(30)),
                &[],
            ),
            // A lower cap in the file wins.
            (
                &[
                    ("DAGEXEC_MAX_TASK_COST", "5"),
                    ("DAGEXEC_MAX_REQUESTS", "50"),
                ],
                "max-task-cost: 1.5\nmax-requests: 10",
                (true, Some(1.5), Some(10)),
                &[],
            ),
            // A higher one is not followed.
            (
                &[
                    ("DAGEXEC_MAX_TASK_COST", "5"),
                    ("DAGEXEC_MAX_REQUESTS", "50"),
                ],
                "max-task-cost: 1000\nmax-requests: 5000",
                (true, Some(5.0), Some(50)),
                &["max-task-cost", "max-requests"],
            ),
            // The same is no loosening.
            (
                &[("DAGEXEC_MAX_REQUESTS", "50")],
                "max-requests: 50",
                (true, None, Some(50)),
                &[],
            ),
            // Inputs alone.
            (
                &[
                    ("DAGEXEC_MAX_TASK_COST", "$0.50"),
                    ("DAGEXEC_MAX_REQUESTS", "7"),
                ],
                "{}",
                (true, Some(0.5), Some(7)),
                &[],
            ),
        ];
        for (env, yaml, want, fields) in rows {
            let (got, loosened) = gateway_on_action(&env_of(env), &file(yaml)).unwrap();
            let got_t = (got.on, got.max_task_cost.map(Budget::usd), got.max_requests);
            assert_eq!(got_t, want, "{env:?} {yaml:?}");
            let named: Vec<&str> = loosened.iter().map(|l| l.field).collect();
            assert_eq!(named, fields, "{env:?} {yaml:?}");
        }
    }

    #[test]
    fn rate_limits_in_the_file_are_added_and_bad_values_named() {
        let (got, _) = gateway_on_action(
            &env_of(&[]),
            &file("rate-limits:\n  anthropic:\n    requests-per-minute: 5\n"),
        )
        .unwrap();
        assert_eq!(got.rates.len(), 1);
        let e = gateway_on_action(&env_of(&[]), &file("max-task-cost: lots")).unwrap_err();
        assert!(e.to_string().starts_with("max-task-cost: "), "{e}");
        let e = gateway_on_action(&env_of(&[("DAGEXEC_MAX_REQUESTS", "many")]), &file("{}"))
            .unwrap_err();
        assert!(e.to_string().starts_with("DAGEXEC_MAX_REQUESTS: "), "{e}");
    }

    #[test]
    fn what_the_summary_says_of_a_setting_not_followed() {
        let (_, loosened) = gateway_on_action(
            &env_of(&[("DAGEXEC_MAX_TASK_COST", "0.5")]),
            &file("gateway: off\nmax-task-cost: 1000\n"),
        )
        .unwrap();
        let lines: Vec<String> = loosened.iter().map(ToString::to_string).collect();
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn the_branchs_prices_may_add_and_raise_but_not_lower_a_built_in_price() {
        let file: FileConfig = serde_yaml::from_str(
            "prices:\n  gpt-5.5: {input: 0.001, output: 0.001}\n  gemini-3.1-pro: {input: 100, cached-input: 10, output: 200}\n  my-own-model: {input: 0.01, output: 0.02}\n",
        )
        .unwrap();
        let (prices, loosened) = prices_on_action(&file).unwrap();
        let defaults = crate::pure::prices::Prices::default();
        assert_eq!(prices.find("gpt-5.5"), defaults.find("gpt-5.5"));
        assert_eq!(prices.find("gemini-3.1-pro").unwrap().1.input, 100.0);
        assert_eq!(prices.find("my-own-model").unwrap().1.output, 0.02);
        assert_eq!(loosened.len(), 1, "{loosened:?}");
        let said = loosened[0].to_string();
        assert!(
            said.starts_with("`prices: gpt-5.5: {input: 0.001, output: 0.001}` in the branch's .design/dagexec.yml was not followed: kept {input: "),
            "{said}"
        );
        assert!(said.contains("(the built-in price table)"), "{said}");
    }
}
