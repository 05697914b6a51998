//! A provider's rate limit beyond one process (issue 35, "one back-off for all workers", on
//! the Action): what an attempt's gateway saw of it — the provider's 429 and 529 answers and
//! the latest instant a `retry-after` held its requests until ([`Limited`], an attempt
//! record's `rateLimits`) —, the hold per provider kept from those records ([`Holds`]: the
//! conductor's as arrivals come in, a work job's gateway's from the records at its base),
//! when a held task may start ([`Holds::release`]), which provider a task's worker uses
//! ([`provider_of`]), and the line that says what is held ([`holding_line`]).
//!
//! A record is written by the job that ran task code, so it is untrusted: a provider name
//! dagexec does not know drops that entry (never the record), and a held-until instant is
//! believed only up to [`super::MAX_HOLD`] after the record arrived — a far-future or absurd
//! value holds a provider for at most that long. Nothing here reads the clock: `now` and the
//! arrival's time are passed in.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{MAX_HOLD, Provider};
use crate::pure::usage::limited::{Limited, instant};

/// Until when each provider's rate limit holds new work for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds(BTreeMap<Provider, jiff::Timestamp>);

impl Holds {
    /// Takes in what an attempt that arrived at `arrived` saw: each provider's held-until,
    /// at most [`MAX_HOLD`] after `arrived` (a later hold than the one kept wins).
    pub fn note(&mut self, seen: &[Limited], arrived: jiff::Timestamp) {
        let cap = arrived.checked_add(MAX_HOLD).unwrap_or(arrived);
        for l in seen {
            let Some(until) = instant(l.held_until.as_deref()).map(|u| u.min(cap)) else {
                continue;
            };
            let slot = self.0.entry(l.provider).or_insert(until);
            *slot = (*slot).max(until);
        }
    }

    /// The holds the plan's attempt records leave: each record's, as if it arrived when its
    /// attempt ended.
    pub fn of_records(records: &[crate::pure::usage::AttemptRecord]) -> Holds {
        let mut holds = Holds::default();
        for r in records {
            if let Some(end) = instant(Some(&r.end)) {
                holds.note(&r.network.rate_limits, end);
            }
        }
        holds
    }

    /// Until when `provider` is held, if that is after `now`.
    #[cfg(test)]
    pub fn until(&self, provider: Provider, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        self.0.get(&provider).copied().filter(|u| *u > now)
    }

    /// The providers held after `now`, and until when.
    pub fn active(&self, now: jiff::Timestamp) -> Vec<(Provider, jiff::Timestamp)> {
        self.0
            .iter()
            .filter(|(_, u)| **u > now)
            .map(|(p, u)| (*p, *u))
            .collect()
    }

    /// When task `task`, whose worker uses `provider`, may start: the provider's hold plus
    /// the task's own [`spread`] (so the held tasks do not all start at one instant), when
    /// that is after `now`; `None`: it may start now.
    pub fn release(
        &self,
        provider: Option<Provider>,
        task: usize,
        now: jiff::Timestamp,
    ) -> Option<jiff::Timestamp> {
        let until = *self.0.get(&provider?)?;
        let at = until.checked_add(spread(task)).unwrap_or(until);
        (at > now).then_some(at)
    }
}

/// The most a held task's start is spread after its provider's hold ends.
pub const SPREAD: Duration = Duration::from_secs(2);

/// How long after its provider's hold ends task `task` starts: a fixed share of [`SPREAD`]
/// for each task (the same in every run), so held tasks start one after another.
pub fn spread(task: usize) -> Duration {
    let ms = u64::try_from(SPREAD.as_millis()).unwrap_or(2000);
    let mixed = (task as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    Duration::from_millis(mixed % ms)
}

/// The provider a task's worker sends its model requests to: the agent CLI the worker
/// command runs (`claude` → Anthropic, `codex` → `OpenAI`, `gemini` → Gemini; a known name
/// is its command), else the task's model (`agent.model`: `claude-…`, `gpt-…`, `o3…`,
/// `gemini-…`, with or without a `provider/` prefix), as a worker script that chooses its
/// CLI by `$DAGEXEC_MODEL` would; `None` when neither says (such a task is never held).
pub fn provider_of(worker: &str, model: Option<&str>) -> Option<Provider> {
    let command = crate::pure::agents::command_of(worker);
    let program = command
        .split_whitespace()
        .find(|w| !w.contains('='))
        .map(|w| w.rsplit('/').next().unwrap_or(w));
    let by_cli = match program {
        Some("claude") => Some(Provider::Anthropic),
        Some("codex") => Some(Provider::OpenAi),
        Some("gemini") => Some(Provider::Gemini),
        _ => None,
    };
    by_cli.or_else(|| {
        let model = model?.trim().to_ascii_lowercase();
        let name = model.rsplit('/').next().unwrap_or(&model);
        let prefix = model.split_once('/').map(|(p, _)| p);
        if name.starts_with("claude") || prefix == Some("anthropic") {
            Some(Provider::Anthropic)
        } else if name.starts_with("gemini") || matches!(prefix, Some("google" | "gemini")) {
            Some(Provider::Gemini)
        } else if name.starts_with("gpt")
            || name.starts_with("codex")
            || ["o1", "o3", "o4"]
                .iter()
                .any(|o| name == *o || name.starts_with(&format!("{o}-")))
            || prefix == Some("openai")
        {
            Some(Provider::OpenAi)
        } else {
            None
        }
    })
}

/// What waits for a rate limit: `held` are the ready tasks held and their providers, `holds`
/// the conductor's holds — `holding 2 tasks: anthropic rate-limited until
/// 04:12:30Z`; `None` when no task is held.
pub fn holding_line(held: &[(usize, Provider)], holds: &Holds) -> Option<String> {
    if held.is_empty() {
        return None;
    }
    let providers: std::collections::BTreeSet<Provider> = held.iter().map(|(_, p)| *p).collect();
    let why: Vec<String> = providers
        .iter()
        .filter_map(|p| {
            let until = holds.0.get(p)?;
            Some(format!(
                "{} rate-limited until {}",
                p.key(),
                until.strftime("%H:%M:%SZ")
            ))
        })
        .collect();
    let n = held.len();
    let tasks = if n == 1 { "task" } else { "tasks" };
    Some(format!("holding {n} {tasks}: {}", why.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::usage::limited::{lenient, saw};
    use serde::Deserialize;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn an_attempt_counts_each_429_and_keeps_the_latest_held_until_per_provider() {
        let mut seen = Vec::new();
        saw(&mut seen, Provider::Gemini, None);
        saw(
            &mut seen,
            Provider::Anthropic,
            Some(at("2026-11-29T04:00:30Z")),
        );
        saw(
            &mut seen,
            Provider::Anthropic,
            Some(at("2026-11-29T04:00:10Z")),
        );
        saw(&mut seen, Provider::Anthropic, None);
        assert_eq!(
            seen,
            [
                Limited {
                    provider: Provider::Anthropic,
                    answers: 3,
                    held_until: Some("2026-11-29T04:00:30Z".into()),
                },
                Limited {
                    provider: Provider::Gemini,
                    answers: 1,
                    held_until: None,
                },
            ]
        );
        let json = serde_json::to_string(&seen).unwrap();
        assert_eq!(
            json,
            r#"[{"provider":"anthropic","answers":3,"heldUntil":"2026-11-29T04:00:30Z"},{"provider":"gemini","answers":1}]"#
        );
    }

    #[derive(Deserialize)]
    struct Rec {
        #[serde(default, deserialize_with = "lenient")]
        limits: Vec<Limited>,
    }

    #[test]
    fn a_hostile_field_is_read_leniently_and_never_spoils_the_record() {
        let read = |j: &str| serde_json::from_str::<Rec>(j).unwrap().limits;
        assert!(read(r#"{"limits": "lots"}"#).is_empty());
        assert!(read(r#"{"limits": null}"#).is_empty());
        assert!(read(r"{}").is_empty());
        let got = read(
            r#"{"limits": [{"provider": "acme", "answers": 1}, 7,
                {"provider": "openai", "answers": 2, "heldUntil": "never"},
                {"provider": "openai", "answers": 9},
                {"provider": "anthropic", "answers": 1, "heldUntil": "2026-11-29T04:00:30.123Z"}]}"#,
        );
        assert_eq!(
            got,
            [
                Limited {
                    provider: Provider::Anthropic,
                    answers: 1,
                    held_until: Some("2026-11-29T04:00:30Z".into()),
                },
                Limited {
                    provider: Provider::OpenAi,
                    answers: 2,
                    held_until: None,
                },
            ]
        );
    }

    fn limited(p: Provider, until: &str) -> Limited {
        Limited {
            provider: p,
            answers: 1,
            held_until: Some(until.into()),
        }
    }

    #[test]
    fn a_hold_is_the_latest_held_until_and_far_future_ones_are_clamped_to_the_arrival() {
        let arrived = at("2026-11-29T04:00:00Z");
        let mut h = Holds::default();
        h.note(
            &[limited(Provider::Anthropic, "2026-11-29T04:00:20Z")],
            arrived,
        );
        h.note(
            &[limited(Provider::Anthropic, "2026-11-29T04:00:10Z")],
            arrived,
        );
        assert_eq!(
            h.until(Provider::Anthropic, arrived),
            Some(at("2026-11-29T04:00:20Z"))
        );
        assert_eq!(h.until(Provider::Gemini, arrived), None);
        // A hostile record: the year 9999 holds for MAX_HOLD after its arrival, no longer.
        h.note(
            &[limited(Provider::Gemini, "9999-01-01T00:00:00Z")],
            arrived,
        );
        assert_eq!(
            h.until(Provider::Gemini, arrived),
            Some(at("2026-11-29T04:05:00Z"))
        );
        assert_eq!(h.until(Provider::Gemini, at("2026-11-29T04:05:00Z")), None);
        assert_eq!(
            h.active(at("2026-11-29T04:00:30Z")),
            [(Provider::Gemini, at("2026-11-29T04:05:00Z"))]
        );
    }

    #[test]
    fn the_records_leave_their_holds_each_clamped_to_its_own_end() {
        let measured = crate::pure::usage::Measured {
            start: at("2026-11-29T03:59:00Z"),
            end: at("2026-11-29T04:00:00Z"),
            usage: Default::default(),
        };
        let mut r = crate::pure::usage::AttemptRecord::new(
            0,
            1,
            &measured,
            crate::pure::usage::Outcome::Completed,
        );
        r.network.rate_limits = vec![limited(Provider::OpenAi, "3000-01-01T00:00:00Z")];
        let h = Holds::of_records(&[r]);
        assert_eq!(
            h.until(Provider::OpenAi, at("2026-11-29T04:00:00Z")),
            Some(at("2026-11-29T04:05:00Z"))
        );
    }

    #[test]
    fn a_held_task_starts_after_the_hold_spread_by_its_index_and_an_unknown_provider_is_never_held()
    {
        let now = at("2026-11-29T04:00:00Z");
        let mut h = Holds::default();
        h.note(&[limited(Provider::Anthropic, "2026-11-29T04:00:20Z")], now);
        let until = at("2026-11-29T04:00:20Z");
        for task in 0..50 {
            let r = h.release(Some(Provider::Anthropic), task, now).unwrap();
            assert!(r >= until && r < until + jiff::SignedDuration::from_secs(2));
            assert_eq!(spread(task), spread(task));
        }
        let starts: std::collections::BTreeSet<Duration> = (0..8).map(spread).collect();
        assert!(starts.len() > 4, "{starts:?}");
        assert_eq!(h.release(None, 1, now), None);
        assert_eq!(h.release(Some(Provider::Gemini), 1, now), None);
        assert_eq!(
            h.release(Some(Provider::Anthropic), 1, at("2026-11-29T04:00:30Z")),
            None
        );
    }

    #[test]
    fn the_provider_comes_from_the_cli_the_worker_runs_else_the_tasks_model() {
        use Provider::*;
        let cases: [(&str, Option<&str>, Option<Provider>); 12] = [
            ("claude", None, Some(Anthropic)),
            ("codex", Some("claude-opus-4"), Some(OpenAi)),
            ("gemini", None, Some(Gemini)),
            (
                "CLAUDE_CODE_MAX_RETRIES=2 /usr/bin/claude -p",
                None,
                Some(Anthropic),
            ),
            ("./worker.sh", Some("claude-sonnet-4-5"), Some(Anthropic)),
            ("./worker.sh", Some("anthropic/whatever"), Some(Anthropic)),
            ("./worker.sh", Some("gpt-5.5"), Some(OpenAi)),
            ("./worker.sh", Some("o3-mini"), Some(OpenAi)),
            ("./worker.sh", Some("gemini-2.5-pro"), Some(Gemini)),
            ("aider", Some("google/gemini-2.5-flash"), Some(Gemini)),
            ("./worker.sh", Some("llama-3"), None),
            ("./worker.sh", None, None),
        ];
        for (worker, model, want) in cases {
            assert_eq!(provider_of(worker, model), want, "{worker} {model:?}");
        }
    }

    #[test]
    fn the_holding_line_names_the_count_the_providers_and_when_each_ends() {
        let now = at("2026-11-29T04:00:00Z");
        let mut h = Holds::default();
        h.note(
            &[
                limited(Provider::Anthropic, "2026-11-29T04:02:30Z"),
                limited(Provider::Gemini, "2026-11-29T04:01:00Z"),
            ],
            now,
        );
        assert_eq!(holding_line(&[], &h), None);
        assert_eq!(
            holding_line(&[(3, Provider::Anthropic)], &h).unwrap(),
            "holding 1 task: anthropic rate-limited until 04:02:30Z"
        );
        assert_eq!(
            holding_line(
                &[
                    (4, Provider::Gemini),
                    (1, Provider::Anthropic),
                    (2, Provider::Anthropic)
                ],
                &h
            )
            .unwrap(),
            "holding 3 tasks: anthropic rate-limited until 04:02:30Z, gemini rate-limited until 04:01:00Z"
        );
    }
}
