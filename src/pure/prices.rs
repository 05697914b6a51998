//! The price table: what a token costs, for the agent CLIs that report tokens but no cost
//! (`codex exec --json`, `gemini --output-format json`). Claude Code reports its own cost
//! (`total_cost_usd`), which always wins over a price computed here.
//!
//! Prices are **list prices in USD per million tokens** — `input` (uncached prompt tokens),
//! `cached-input` (prompt tokens read from the provider's cache) and `output` (reasoning or
//! thinking tokens included) — as the providers' pricing pages showed them on 2026-11-25.
//! They change: a repository's `.design/dagexec.yml` may name its own under `prices:`, each
//! entry replacing the default of that name:
//!
//! ```yaml
//! prices:
//!   gpt-5.5: {input: 5.00, cached-input: 0.50, output: 30.00}
//!   codex: {input: 5.00, cached-input: 0.50, output: 30.00}   # codex runs whose model is unknown
//! ```
//!
//! A model is looked up by its exact name, then by the longest name in the table that it
//! starts with (`gemini-3.1-pro-preview` is priced as `gemini-3.1-pro`). `codex exec --json`
//! names no model: its runs are priced by the entry `codex` (the defaults price it as
//! `gpt-5.5`, the model `dagexec init --worker codex` passes). A model the table lacks
//! gets no cost (its tokens are still recorded), with a warning naming it.
//!
//! The table is read once per process ([`install`]); workers' spend is priced with
//! [`current`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// `$1.23`; below a cent `<$0.01`; nothing, `$0.00`.
pub fn money(usd: f64) -> String {
    if usd > 0.0 && usd < 0.005 {
        "<$0.01".into()
    } else {
        format!("${usd:.2}")
    }
}

/// Tokens one response spent (or an attempt, summed): each prompt token counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    /// Prompt tokens neither read from nor written to the cache.
    pub input: u64,
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache.
    pub cache_write: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
}

impl Tokens {
    /// Every prompt token (fresh, cache read and cache write), as the record counts input.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// `input` prompt tokens of which `cached` (at most all of them) were read from the
    /// cache, and `output`: how `OpenAI`, Gemini and the CLIs that report tokens count them.
    pub fn with_cached(input: u64, cached: u64, output: u64) -> Tokens {
        let cached = cached.min(input);
        Tokens {
            input: input - cached,
            cache_read: cached,
            cache_write: 0,
            output,
        }
    }

    /// Both together.
    pub fn plus(self, o: Tokens) -> Tokens {
        self.each(o, u64::saturating_add)
    }

    /// What `self` has more than `before`, field by field (a stream's usage grows).
    pub fn since(self, before: Tokens) -> Tokens {
        self.each(before, u64::saturating_sub)
    }

    /// `f` of `self`'s and `o`'s counts, field by field.
    fn each(self, o: Tokens, f: fn(u64, u64) -> u64) -> Tokens {
        Tokens {
            input: f(self.input, o.input),
            cache_read: f(self.cache_read, o.cache_read),
            cache_write: f(self.cache_write, o.cache_write),
            output: f(self.output, o.output),
        }
    }
}

/// One model's list prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Cached prompt tokens; the `input` price when not given.
    #[serde(rename = "cached-input", default)]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache (Anthropic's cache writes); the `input`
    /// price when not given.
    #[serde(rename = "cache-write", default)]
    pub cache_write: Option<f64>,
    pub output: f64,
}

/// An override [`Prices::with_floor`] did not follow: the model, the price asked, the price
/// kept.
pub type Lowered = (String, Price, Price);

impl Price {
    /// The four prices in effect: input, output, cached input and cache write (the last two
    /// the input price when not given).
    fn rates(&self) -> [f64; 4] {
        [
            self.input,
            self.output,
            self.cached_input.unwrap_or(self.input),
            self.cache_write.unwrap_or(self.input),
        ]
    }

    /// What `tokens` cost at this price, in USD.
    pub fn cost(&self, tokens: Tokens) -> f64 {
        let [input, output, cache_read, cache_write] = self.rates();
        (tokens.input as f64 * input
            + tokens.cache_read as f64 * cache_read
            + tokens.cache_write as f64 * cache_write
            + tokens.output as f64 * output)
            / 1e6
    }
}

impl std::fmt::Display for Price {
    /// `{input: 3, cached-input: 0.3, output: 15}`, as `prices:` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{input: {}", self.input)?;
        if let Some(c) = self.cached_input {
            write!(f, ", cached-input: {c}")?;
        }
        if let Some(c) = self.cache_write {
            write!(f, ", cache-write: {c}")?;
        }
        write!(f, ", output: {}}}", self.output)
    }
}

/// The default list prices (USD per million tokens, taken on 2026-11-25): `OpenAI`'s
/// (openai.com/api/pricing), Google's Gemini API, paid tier, prompts up to 200k tokens
/// (ai.google.dev/gemini-api/docs/pricing), and Anthropic's (claude.com/pricing; cache write
/// for 5 minutes). Claude Code reports its own cost; dagexec's gateway prices what it sees on
/// the wire with these.
pub const DEFAULTS: &[(&str, f64, f64, Option<f64>, f64)] = &[
    // name, input, cached input (cache read), cache write, output
    ("codex", 5.00, 0.50, None, 30.00),
    ("gpt-5.5", 5.00, 0.50, None, 30.00),
    ("gpt-5.4", 2.50, 0.25, None, 15.00),
    ("gpt-5.4-mini", 0.75, 0.075, None, 4.50),
    ("gpt-5.4-nano", 0.20, 0.02, None, 1.25),
    ("gemini-3.5-flash", 1.50, 0.15, None, 9.00),
    ("gemini-3.1-pro", 2.00, 0.20, None, 12.00),
    ("gemini-3.1-flash-lite", 0.25, 0.025, None, 1.50),
    ("gemini-3-flash", 0.50, 0.05, None, 3.00),
    ("gemini-2.5-pro", 1.25, 0.125, None, 10.00),
    ("gemini-2.5-flash", 0.30, 0.03, None, 2.50),
    ("gemini-2.5-flash-lite", 0.10, 0.01, None, 0.40),
    ("claude-opus-4", 15.00, 1.50, Some(18.75), 75.00),
    ("claude-opus-4-5", 5.00, 0.50, Some(6.25), 25.00),
    ("claude-sonnet-4", 3.00, 0.30, Some(3.75), 15.00),
    ("claude-haiku-4-5", 1.00, 0.10, Some(1.25), 5.00),
];

/// Model name → price.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    table: BTreeMap<String, Price>,
}

impl Default for Prices {
    fn default() -> Self {
        let table = DEFAULTS
            .iter()
            .map(|&(name, input, cached, cache_write, output)| {
                let cached_input = Some(cached);
                let price = Price {
                    input,
                    cached_input,
                    cache_write,
                    output,
                };
                (name.to_string(), price)
            });
        Prices {
            table: table.collect(),
        }
    }
}

/// Tokens one model used, as a token-only CLI reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelTokens {
    /// The model, when the CLI names it.
    pub model: Option<String>,
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Of `input`, those read from the cache.
    pub cached: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
}

impl Prices {
    /// The defaults with `overrides` (the `prices:` of `.design/dagexec.yml`, a YAML map of
    /// name → `{input, cached-input, output}`) put over them. `Err` names the entry and what
    /// is wrong with it.
    pub fn with(overrides: Option<&serde_yaml::Value>) -> Result<Prices, String> {
        let mut prices = Prices::default();
        let Some(value) = overrides else {
            return Ok(prices);
        };
        let map: BTreeMap<String, Price> = serde_yaml::from_value(value.clone())
            .map_err(|e| format!("prices: {e} (expected `model: {{input: 1.25, cached-input: 0.125, output: 10}}`, USD per million tokens)"))?;
        for (name, price) in map {
            let ok = |x: f64| x.is_finite() && (0.0..=10_000.0).contains(&x);
            if !ok(price.input)
                || !ok(price.output)
                || !price.cached_input.is_none_or(ok)
                || !price.cache_write.is_none_or(ok)
            {
                return Err(format!(
                    "prices: {name}: a price must be a number of USD per million tokens from 0 to 10000"
                ));
            }
            prices.table.insert(name.trim().to_string(), price);
        }
        Ok(prices)
    }

    /// [`Prices::with`] where `overrides` may not make a model cheaper than the defaults
    /// price it (the Action, where they come from the execution branch: a cheaper price
    /// would make `max-cost` and `max-task-cost` slower to bite). An entry for a model the
    /// defaults price, with any price below theirs, keeps the defaults' price for that name;
    /// each such entry is returned with what it asked (`model`, asked, kept).
    pub fn with_floor(
        overrides: Option<&serde_yaml::Value>,
    ) -> Result<(Prices, Vec<Lowered>), String> {
        let defaults = Prices::default();
        let mut prices = Prices::with(overrides)?;
        let mut lowered = Vec::new();
        for (name, asked) in &mut prices.table {
            let Some((_, floor)) = defaults.find(name) else {
                continue;
            };
            if asked.rates().iter().zip(floor.rates()).any(|(a, f)| *a < f) {
                lowered.push((name.clone(), *asked, floor));
                *asked = floor;
            }
        }
        Ok((prices, lowered))
    }

    /// The price of `model`: its exact name, else the longest name it starts with.
    pub fn find(&self, model: &str) -> Option<(&str, Price)> {
        if let Some((k, p)) = self.table.get_key_value(model) {
            return Some((k, *p));
        }
        self.table
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(k, p)| (k.as_str(), *p))
    }

    /// What `tokens` cost, each model priced by its entry (a model the CLI does not name by
    /// `unnamed`, the CLI's own entry). `Err` names a model the table lacks.
    pub fn cost(&self, tokens: &[ModelTokens], unnamed: &str) -> Result<f64, String> {
        let mut sum = 0.0;
        for t in tokens {
            let name = t.model.as_deref().unwrap_or(unnamed);
            let Some((_, p)) = self.find(name) else {
                return Err(format!(
                    "no price for the model {name:?}: its cost is not recorded; add it under `prices:` in .design/dagexec.yml (USD per million tokens)"
                ));
            };
            sum += p.cost(Tokens::with_cached(t.input, t.cached, t.output));
        }
        Ok(sum)
    }
}

static CURRENT: OnceLock<Prices> = OnceLock::new();

/// Sets this process's price table (the first call wins).
pub fn install(prices: Prices) {
    let _ = CURRENT.set(prices);
}

/// This process's price table: the one [`install`]ed, else the defaults.
pub fn current() -> &'static Prices {
    CURRENT.get_or_init(Prices::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_name_then_longest_prefix() {
        let p = Prices::default();
        assert_eq!(p.find("gpt-5.5").unwrap().0, "gpt-5.5");
        assert_eq!(
            p.find("gemini-3.1-pro-preview").unwrap().0,
            "gemini-3.1-pro"
        );
        assert_eq!(
            p.find("gemini-2.5-flash-lite-001").unwrap().0,
            "gemini-2.5-flash-lite"
        );
        assert_eq!(p.find("claude-opus-5"), None);
    }

    #[test]
    fn tokens_are_priced_per_million_with_the_cached_rate() {
        let p = Prices::default();
        // gpt-5.5: 200 fresh at $5, 40 cached at $0.50, 60 out at $30 per million.
        let t = ModelTokens {
            model: None,
            input: 240,
            cached: 40,
            output: 60,
        };
        let c = p.cost(&[t], "codex").unwrap();
        assert!((c - (200.0 * 5.0 + 40.0 * 0.5 + 60.0 * 30.0) / 1e6).abs() < 1e-12);
        let unknown = ModelTokens {
            model: Some("gpt-9".into()),
            ..Default::default()
        };
        let e = p.cost(&[unknown], "codex").unwrap_err();
        assert!(e.contains("no price for the model \"gpt-9\""), "{e}");
    }

    #[test]
    fn a_users_table_overrides_and_adds() {
        let y: serde_yaml::Value = serde_yaml::from_str(
            "gpt-5.5: {input: 1, output: 2}\nmy-model: {input: 3, cached-input: 0.3, output: 4}\n",
        )
        .unwrap();
        let p = Prices::with(Some(&y)).unwrap();
        let gpt = p.find("gpt-5.5").unwrap().1;
        assert_eq!((gpt.input, gpt.cached_input, gpt.output), (1.0, None, 2.0));
        assert_eq!(p.find("my-model").unwrap().1.input, 3.0);
        assert_eq!(p.find("gemini-2.5-pro").unwrap().1.output, 10.0);
        for bad in [
            "gpt-5.5: {input: -1, output: 2}",
            "gpt-5.5: {input: 1}",
            "gpt-5.5: 3",
            "gpt-5.5: {input: 1, output: 2, extra: 1}",
        ] {
            let y: serde_yaml::Value = serde_yaml::from_str(bad).unwrap();
            let e = Prices::with(Some(&y)).unwrap_err();
            assert!(e.starts_with("prices: "), "{bad}: {e}");
        }
    }
}
