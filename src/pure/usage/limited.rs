//! What an attempt's gateway saw of each provider's rate limit: the provider's 429 and 529
//! answers and the latest instant a `retry-after` held its requests until ([`Limited`], an
//! attempt record's `rateLimits`), counted as they come ([`saw`]) and read back from an
//! untrusted record leniently ([`lenient`], [`checked`]) or, from a stream too large to hold,
//! bounded ([`streamed`]). `gateway::held` keeps the hold per
//! provider from them.

use serde::{Deserialize, Serialize};

use crate::pure::gateway::Provider;

/// What one attempt's gateway saw of one provider's rate limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limited {
    pub provider: Provider,
    /// How many of its answers were a 429 or a 529.
    pub answers: u32,
    /// The latest instant (UTC, `2026-11-29T04:12:30Z`) a `retry-after` of its held the
    /// provider's requests until; absent when none said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<String>,
}

/// Counts one 429 or 529 answer of `provider` in `seen`, and `until`, the instant its
/// `retry-after` holds the provider until (a later one wins).
pub fn saw(seen: &mut Vec<Limited>, provider: Provider, until: Option<jiff::Timestamp>) {
    if !seen.iter().any(|l| l.provider == provider) {
        seen.push(Limited {
            provider,
            answers: 0,
            held_until: None,
        });
        seen.sort_by_key(|l| l.provider);
    }
    let Some(l) = seen.iter_mut().find(|l| l.provider == provider) else {
        return;
    };
    l.answers = l.answers.saturating_add(1);
    if let Some(until) = until.filter(|u| instant(l.held_until.as_deref()).is_none_or(|b| u > &b)) {
        l.held_until = Some(super::timestamp(until));
    }
}

/// An instant a record wrote (`2026-11-29T04:12:30Z`), when it parses.
pub fn instant(s: Option<&str>) -> Option<jiff::Timestamp> {
    s?.trim().parse().ok()
}

/// `seen` as a record keeps it: one entry per provider (the first), in provider order, a
/// held-until that does not parse dropped and the others written to the second.
pub fn checked(seen: &[Limited]) -> Vec<Limited> {
    let mut out = std::collections::BTreeMap::new();
    for l in seen {
        out.entry(l.provider).or_insert_with(|| Limited {
            held_until: instant(l.held_until.as_deref()).map(super::timestamp),
            ..l.clone()
        });
    }
    out.into_values().collect()
}

/// The most entries of a `rateLimits` list read: four per provider.
const KEPT: usize = Provider::ALL.len() * 4;

/// Reads a `rateLimits` list out of a stream too large to hold (an oversized `result.json`,
/// serde's `deserialize_with`): its first [`KEPT`] entries, each a [`Limited`], [`checked`];
/// the rest streamed past, never held. Unlike [`lenient`] it holds no entry but those.
pub fn streamed<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Limited>, D::Error> {
    struct Entries;
    impl<'de> serde::de::Visitor<'de> for Entries {
        type Value = Vec<Limited>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of rate limits")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut read = Vec::new();
            while let Some(l) = seq.next_element::<Limited>()? {
                read.push(l);
                if read.len() == KEPT {
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                }
            }
            Ok(checked(&read))
        }
    }
    d.deserialize_seq(Entries)
}

/// Reads a record's `rateLimits` leniently (serde's `deserialize_with`): anything but a list
/// is none, an entry that is not a [`Limited`] (a provider dagexec does not know) is
/// skipped, and the rest is [`checked`] — a hostile field never makes the whole record
/// unreadable.
pub fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Limited>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    let serde_json::Value::Array(items) = value else {
        return Ok(Vec::new());
    };
    let read: Vec<Limited> = items
        .into_iter()
        .take(KEPT)
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    Ok(checked(&read))
}
