//! Requests and tokens per minute per provider (`rate-limits:` in `.design/dagexec.yml`):
//! a sliding window of one minute that the gateway holds a provider's next model request to,
//! for every worker at once. Time is given, never read ([`Window::admit`] takes `now`, any
//! clock's time since a fixed origin), so the limiter is tested without waiting.
//!
//! A request may start when fewer than `requests-per-minute` requests started in the minute
//! before it, and fewer than `tokens-per-minute` tokens (prompt and output, as the gateway
//! counted them streaming) were spent in that minute; otherwise it waits until the oldest
//! ones that stand in its way are a minute old.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::Provider;

/// The window's length.
pub const MINUTE: Duration = Duration::from_secs(60);

/// One provider's limits; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rate {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
}

/// One provider's last minute: when its requests started, and the tokens spent when.
#[derive(Debug, Clone, Default)]
pub struct Window {
    rate: Rate,
    starts: VecDeque<Duration>,
    tokens: VecDeque<(Duration, u64)>,
}

impl Window {
    /// An empty window for `rate`.
    pub fn new(rate: Rate) -> Window {
        Window {
            rate,
            ..Window::default()
        }
    }

    /// How many requests it counted as started (in the last minute, as of its last use).
    #[cfg(test)]
    pub fn requests(&self) -> usize {
        self.starts.len()
    }

    /// Forgets what is a minute old at `now`.
    fn age(&mut self, now: Duration) {
        while self.starts.front().is_some_and(|&t| t + MINUTE <= now) {
            self.starts.pop_front();
        }
        while self.tokens.front().is_some_and(|&(t, _)| t + MINUTE <= now) {
            self.tokens.pop_front();
        }
    }

    /// Whether a request may start at `now`: `Ok` counts it as started, `Err` is how long
    /// until the window may let it (ask again then: others may have spent meanwhile).
    pub fn admit(&mut self, now: Duration) -> Result<(), Duration> {
        self.age(now);
        let mut wait = Duration::ZERO;
        if let Some(rpm) = self.rate.requests_per_minute
            && self.starts.len() >= rpm as usize
        {
            // The request that must leave the window for one more to fit.
            let oldest = self.starts[self.starts.len() - rpm as usize];
            wait = wait.max((oldest + MINUTE).saturating_sub(now));
        }
        if let Some(tpm) = self.rate.tokens_per_minute {
            let mut spent: u64 = self.tokens.iter().map(|&(_, n)| n).sum();
            let mut until = None;
            for &(t, n) in &self.tokens {
                if spent < tpm {
                    break;
                }
                spent -= n;
                until = Some(t + MINUTE);
            }
            if let Some(until) = until {
                wait = wait.max(until.saturating_sub(now));
            }
        }
        if wait > Duration::ZERO {
            return Err(wait);
        }
        self.starts.push_back(now);
        Ok(())
    }

    /// Forgets the request [`Window::admit`] counted as started at `at` (it did not start).
    pub fn withdraw(&mut self, at: Duration) {
        if let Some(i) = self.starts.iter().rposition(|&t| t == at) {
            self.starts.remove(i);
        }
    }

    /// `tokens` spent at `now`.
    pub fn spent(&mut self, now: Duration, tokens: u64) {
        if tokens > 0 && self.rate.tokens_per_minute.is_some() {
            self.age(now);
            self.tokens.push_back((now, tokens));
        }
    }
}

/// The `rate-limits:` setting: each provider (`anthropic`, `openai`, `gemini`) to its
/// `requests-per-minute` and `tokens-per-minute`. `Err` is `(field, message)`: the field's
/// path in the file and what is wrong with it, with the fix.
pub fn rates(v: &serde_yaml::Value) -> Result<BTreeMap<Provider, Rate>, (String, String)> {
    const EXAMPLE: &str =
        "e.g. `rate-limits: {anthropic: {requests-per-minute: 50, tokens-per-minute: 400000}}`";
    let Some(map) = v.as_mapping() else {
        return Err((
            "rate-limits".into(),
            format!("must map a provider (anthropic, openai, gemini) to its limits; {EXAMPLE}"),
        ));
    };
    let mut out = BTreeMap::new();
    for (name, limits) in map {
        let name = name.as_str().unwrap_or_default();
        let field = format!("rate-limits.{name}");
        let Some(provider) = Provider::ALL.into_iter().find(|p| p.key() == name) else {
            return Err((
                field,
                "is not a provider: use anthropic, openai or gemini".into(),
            ));
        };
        let Some(limits) = limits.as_mapping() else {
            return Err((
                field,
                format!("must hold requests-per-minute and/or tokens-per-minute; {EXAMPLE}"),
            ));
        };
        let mut rate = Rate::default();
        for (key, value) in limits {
            let key = key.as_str().unwrap_or_default();
            let field = format!("{field}.{key}");
            let n = value.as_u64().filter(|&n| n >= 1).ok_or_else(|| {
                (
                    field.clone(),
                    format!(
                        "must be a whole number of at least 1, not {}; e.g. `{key}: 50`",
                        serde_yaml::to_string(value).unwrap_or_default().trim()
                    ),
                )
            })?;
            match key {
                "requests-per-minute" => {
                    rate.requests_per_minute = Some(u32::try_from(n).unwrap_or(u32::MAX));
                }
                "tokens-per-minute" => rate.tokens_per_minute = Some(n),
                _ => {
                    return Err((
                        field,
                        "is not a limit: use requests-per-minute or tokens-per-minute".into(),
                    ));
                }
            }
        }
        out.insert(provider, rate);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn requests_per_minute_hold_the_next_until_the_oldest_is_a_minute_old() {
        let mut w = Window::new(Rate {
            requests_per_minute: Some(2),
            tokens_per_minute: None,
        });
        assert_eq!(w.admit(s(0)), Ok(()));
        assert_eq!(w.admit(s(10)), Ok(()));
        // The third within the minute waits until the first is a minute old.
        assert_eq!(w.admit(s(20)), Err(s(40)));
        assert_eq!(w.admit(s(59)), Err(s(1)));
        assert_eq!(w.admit(s(60)), Ok(()));
        // Now 10 s and 60 s are in the window: the next waits for 10 s's to leave.
        assert_eq!(w.admit(s(61)), Err(s(9)));
        assert_eq!(w.admit(s(70)), Ok(()));
    }

    #[test]
    fn tokens_per_minute_hold_requests_once_the_minute_spent_them() {
        let mut w = Window::new(Rate {
            requests_per_minute: None,
            tokens_per_minute: Some(1000),
        });
        assert_eq!(w.admit(s(0)), Ok(()));
        w.spent(s(1), 600);
        assert_eq!(w.admit(s(2)), Ok(()));
        w.spent(s(5), 500);
        // 1100 spent in the minute: the next waits until the 600 of 1 s have left it.
        assert_eq!(w.admit(s(6)), Err(s(55)));
        assert_eq!(w.admit(s(61)), Ok(()));
        // Tokens spent after the wait began push it further.
        w.spent(s(62), 2000);
        assert_eq!(w.admit(s(63)), Err(s(59)));
    }

    #[test]
    fn both_limits_wait_for_the_later_and_no_limit_never_waits() {
        let mut w = Window::new(Rate {
            requests_per_minute: Some(1),
            tokens_per_minute: Some(10),
        });
        assert_eq!(w.admit(s(0)), Ok(()));
        w.spent(s(30), 50);
        assert_eq!(w.admit(s(31)), Err(s(59)));
        let mut free = Window::new(Rate::default());
        for t in 0..1000 {
            free.spent(s(t), 1_000_000);
            assert_eq!(free.admit(s(t)), Ok(()));
        }
        assert!(free.tokens.is_empty(), "nothing is kept without a limit");
    }

    #[test]
    fn settings_name_the_field_and_the_fix() {
        let parse = |y: &str| rates(&serde_yaml::from_str(y).unwrap());
        let ok = parse("anthropic: {requests-per-minute: 50, tokens-per-minute: 400000}\ngemini: {requests-per-minute: 10}").unwrap();
        assert_eq!(
            ok[&Provider::Anthropic],
            Rate {
                requests_per_minute: Some(50),
                tokens_per_minute: Some(400_000)
            }
        );
        assert_eq!(ok[&Provider::Gemini].tokens_per_minute, None);
        assert!(!ok.contains_key(&Provider::OpenAi));
        let bad = |y: &str| parse(y).unwrap_err();
        assert_eq!(
            bad("claude: {requests-per-minute: 5}"),
            (
                "rate-limits.claude".into(),
                "is not a provider: use anthropic, openai or gemini".into()
            )
        );
        assert_eq!(
            bad("openai: {rpm: 5}"),
            (
                "rate-limits.openai.rpm".into(),
                "is not a limit: use requests-per-minute or tokens-per-minute".into()
            )
        );
        assert_eq!(
            bad("openai: {requests-per-minute: 0}"),
            (
                "rate-limits.openai.requests-per-minute".into(),
                "must be a whole number of at least 1, not 0; e.g. `requests-per-minute: 50`"
                    .into()
            )
        );
        assert_eq!(
            bad("openai: {tokens-per-minute: lots}").1,
            "must be a whole number of at least 1, not lots; e.g. `tokens-per-minute: 50`"
        );
        assert!(
            bad("openai: 5")
                .1
                .starts_with("must hold requests-per-minute")
        );
        assert!(bad("[anthropic]").1.starts_with("must map a provider"));
    }
}
