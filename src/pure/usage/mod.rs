//! Time and cost per attempt: the record kept in the plan, what a worker reports it spent, and
//! the budget.
//!
//! Every finished attempt — locally and on Actions — leaves one [`AttemptRecord`] in
//! `progress.dagexecAttempts` ([`ATTEMPTS_FIELD`]), in the order the attempts finished. It lives in
//! `progress`, so the trimming of a completed task's fields keeps it, and it is the history
//! `dagexec simulate` learns task durations from:
//!
//! ```json
//! {"task": 3, "attempt": 1, "start": "2026-11-23T05:20:13Z", "end": "2026-11-23T05:22:40Z",
//!  "seconds": 147.2, "outcome": "completed", "costUsd": 0.1234, "inputTokens": 1200,
//!  "outputTokens": 340, "model": "claude-sonnet-4-5"}
//! ```
//!
//! `seconds` is the attempt's wall time (worktree, worker, checks and reviewer), `start` and
//! `end` its UTC wall-clock bounds to the second. The last four fields are present only when the
//! worker reported them ([`Usage`]), from (first wins, field by field):
//! 1. the JSON file the worker may write at `$DAGEXEC_USAGE_FILE` ([`parse_usage_file`]:
//!    `cost_usd`, `input_tokens`, `output_tokens`, `model`);
//! 2. its standard output when that is the final result object of
//!    `claude -p --output-format json` (or the last line of `stream-json`): `total_cost_usd`,
//!    `usage` (input tokens are `input_tokens` plus both `cache_*` counts) and the model of
//!    `modelUsage` that cost most — its `result` text then stands for the output, so the status
//!    line is read from it ([`claude_result`]);
//! 3. or the JSONL events of `codex exec --json`: the `usage` of every `turn.completed` summed
//!    (codex reports no cost), the last `agent_message` item standing for the output
//!    ([`codex_events`]).
//!
//! All of it is worker output, and on Actions it arrives in an artifact: hostile. Numbers are
//! bounded ([`Usage::checked`], [`AttemptRecord::checked`]) and a model name is cut to
//! [`MODEL_MAX`] characters of a safe alphabet, so nothing here can break a table, a terminal or
//! a sum.
//!
//! The budget ([`Budget`], `dagexec run --max-cost`, the Action's `max-cost`) is compared with
//! the recorded spend of the whole plan ([`spent`]): only reported costs count.
//!
//! Outcomes: `completed`, `blocked` and `failed` are the verdict; a failed attempt whose worker
//! was killed at the task's timeout is `timeout`, one the reviewer rejected is `rejected`, and a
//! local attempt stopped by Ctrl-C (or SIGTERM) is `interrupted`, with the `signal` that stopped it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pure::plan::model::{Plan, Status};

pub use crate::pure::plan::fields::ATTEMPTS as ATTEMPTS_FIELD;

mod claude;
mod codex;
mod file;
mod gemini;
pub mod limited;
mod native;

pub use claude::claude_result;
pub use codex::codex_events;
pub use file::parse_usage_file;
pub use gemini::gemini_json;
pub use native::gather;
#[cfg(test)]
use native::{Native, from_output};
/// The variable naming the file a worker may report its usage in.
pub const USAGE_FILE_VAR: &str = "DAGEXEC_USAGE_FILE";
/// A model name is cut to this many characters.
pub const MODEL_MAX: usize = 80;
/// The largest cost one attempt may report, in USD; more is taken for garbage.
const MAX_COST_USD: f64 = 100_000.0;
/// The largest token count one attempt may report.
const MAX_TOKENS: u64 = 1_000_000_000_000;
/// The longest attempt believed, in seconds (GitHub's job limit is 6 hours; a week is plenty).
const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;
/// The largest budget accepted, in USD.
const MAX_BUDGET_USD: f64 = 1_000_000.0;

/// What a worker reported it spent; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Usage {
    /// Field by field: `self`'s value, else `other`'s.
    pub fn or(self, other: Usage) -> Usage {
        Usage {
            cost_usd: self.cost_usd.or(other.cost_usd),
            input_tokens: self.input_tokens.or(other.input_tokens),
            output_tokens: self.output_tokens.or(other.output_tokens),
            model: self.model.or(other.model),
        }
    }

    /// Two runs' spend together (an attempt's worker and its reviewer): costs and token
    /// counts added where either reported one; the model is `self`'s, else `other`'s.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            cost_usd: either(self.cost_usd, other.cost_usd, |a, b| a + b),
            input_tokens: either(self.input_tokens, other.input_tokens, u64::saturating_add),
            output_tokens: either(self.output_tokens, other.output_tokens, u64::saturating_add),
            model: self.model.or(other.model),
        }
    }

    /// Nothing reported.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// The values that can be believed: a cost that is finite, not negative and at most
    /// [`MAX_COST_USD`]; token counts up to [`MAX_TOKENS`]; the model name made safe
    /// ([`model_name`]). Anything else is dropped (unknown), never clamped into a number.
    pub fn checked(self) -> Usage {
        Usage {
            cost_usd: self
                .cost_usd
                .filter(|c| c.is_finite() && (0.0..=MAX_COST_USD).contains(c)),
            input_tokens: self.input_tokens.filter(|&t| t <= MAX_TOKENS),
            output_tokens: self.output_tokens.filter(|&t| t <= MAX_TOKENS),
            model: self.model.as_deref().and_then(model_name),
        }
    }
}

/// `a` and `b` combined with `f` when both are known, else the one that is.
fn either<T>(a: Option<T>, b: Option<T>, f: impl FnOnce(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

/// A model name as shown and kept: ASCII letters, digits and `. _ - : / @ [ ]`, at most
/// [`MODEL_MAX`] characters; `None` when nothing of it is left.
pub fn model_name(raw: &str) -> Option<String> {
    let safe = |c: char| c.is_ascii_alphanumeric() || "._-:/@[]".contains(c);
    let name: String = raw
        .trim()
        .chars()
        .filter(|&c| safe(c))
        .take(MODEL_MAX)
        .collect();
    (!name.is_empty()).then_some(name)
}

/// What a CLI reported spending (`cli`) against what dagexec's gateway counted on the wire
/// (`wire`), when they disagree: tokens that differ, or a cost more than a cent and 1% apart.
/// `None` when the CLI reported nothing or both agree.
pub fn mismatch(cli: &Usage, wire: &Usage) -> Option<String> {
    let tokens_differ = |a: Option<u64>, b: Option<u64>| a.zip(b).is_some_and(|(a, b)| a != b);
    let cost_differs = cli
        .cost_usd
        .zip(wire.cost_usd)
        .is_some_and(|(a, b)| (a - b).abs() > 0.01_f64.max(0.01 * a.max(b)));
    let differs = tokens_differ(cli.input_tokens, wire.input_tokens)
        || tokens_differ(cli.output_tokens, wire.output_tokens)
        || cost_differs;
    differs.then(|| {
        format!(
            "the agent CLI reported {} but the gateway counted {} on the wire; the record keeps the gateway's",
            spend_text(cli),
            spend_text(wire)
        )
    })
}

/// `115 in / 20 out tokens, $0.0012` (`?` for a count not known, the cost when known).
pub fn spend_text(u: &Usage) -> String {
    let cost = u.cost_usd.map(|c| format!(", {}", money(c)));
    format!("{} tokens{}", tokens_text(u), cost.unwrap_or_default())
}

/// `115 in / 20 out` (`?` for a count not known).
fn tokens_text(u: &Usage) -> String {
    let count = |n: Option<u64>| n.map_or("?".into(), |t| t.to_string());
    format!(
        "{} in / {} out",
        count(u.input_tokens),
        count(u.output_tokens)
    )
}

/// How an attempt ended, in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Completed,
    Failed,
    Blocked,
    /// Failed: the worker was killed at the task's timeout.
    Timeout,
    /// Stopped by Ctrl-C (or SIGTERM) while it ran.
    Interrupted,
    /// Failed: the reviewer rejected it.
    Rejected,
    /// Completed, but its change could not be merged (`overlap: merge`): sent back as a
    /// rebase attempt, or failed.
    Conflict,
}

impl Outcome {
    /// The outcome of a judged attempt: its verdict's status, refined for a failure by why.
    pub fn of(status: Status, timed_out: bool, rejected: bool) -> Outcome {
        match status {
            Status::Completed => Outcome::Completed,
            Status::Blocked => Outcome::Blocked,
            _ if timed_out => Outcome::Timeout,
            _ if rejected => Outcome::Rejected,
            _ => Outcome::Failed,
        }
    }

    /// Whether the attempt ended without failing (completed, or asked a question): one a
    /// crash or an interrupt kept from its round's commit is given back, not counted.
    pub fn ended_well(self) -> bool {
        matches!(self, Outcome::Completed | Outcome::Blocked)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).expect("an outcome serialises");
        f.write_str(s.as_str().unwrap_or_default())
    }
}

/// One finished attempt, as kept in `progress.dagexecAttempts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub task: usize,
    pub attempt: u32,
    /// UTC, `2026-11-23T05:20:13Z`.
    pub start: String,
    pub end: String,
    /// Wall time, to a tenth of a second.
    pub seconds: f64,
    pub outcome: Outcome,
    /// What the worker reported it spent (its fields beside the others in the record).
    #[serde(flatten)]
    pub usage: Usage,
    /// A rebase attempt (`overlap: merge`): it repeated attempt `attempt` from the
    /// integrated tree, and is not counted as one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebase: bool,
    /// An `interrupted` attempt the user stopped: the signal dagexec received (`SIGINT`:
    /// Ctrl-C; `SIGTERM`). Such an attempt is not counted as one; an attempt a `kill -9`
    /// or a power loss cut short stays counted, and its record (what it spent through the
    /// model gateway, kept as it streamed: `crate::flow::live`) has no signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// What the agent CLI itself reported spending, when the record's figures are the model
    /// gateway's (counted on the wire): both are kept, and a mismatch is shown
    /// ([`mismatches`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<Usage>,
    /// What the attempt's network guards saw (on the Action).
    #[serde(flatten)]
    pub network: Network,
}

/// What an attempt's network guards saw, on the Action: the hosts its egress proxy refused
/// and what its model gateway saw of each provider's rate limit. The work job writes it in its
/// `result.json` and the attempt's record keeps it, beside their other fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// The hosts the work job's egress proxy refused the agent (the Action's `egress` input).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_blocked: Vec<String>,
    /// What the attempt's model gateway saw of each provider's rate limit (its 429 and 529
    /// answers, the latest held-until a `retry-after` asked for): on the Action the
    /// conductor holds new work for a provider from it ([`crate::pure::gateway::held`]). Read
    /// leniently: the file is the job's.
    #[serde(
        default,
        deserialize_with = "crate::pure::usage::limited::lenient",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub rate_limits: Vec<crate::pure::usage::limited::Limited>,
}

impl Network {
    /// Bounded and made safe (it comes from the job that ran task code): at most
    /// [`EGRESS_BLOCKED_MAX`] hosts, each one safe line, and the rate limits
    /// [`crate::pure::usage::limited::checked`].
    pub fn checked(&self) -> Network {
        Network {
            egress_blocked: self
                .egress_blocked
                .iter()
                .take(EGRESS_BLOCKED_MAX)
                .map(|h| crate::pure::clip::line(h, 100))
                .collect(),
            rate_limits: crate::pure::usage::limited::checked(&self.rate_limits),
        }
    }
}

/// How many blocked hosts a record keeps.
pub const EGRESS_BLOCKED_MAX: usize = 20;

/// The signals a user stops a run with, as [`AttemptRecord::signal`] names them.
pub const STOP_SIGNALS: [&str; 2] = ["SIGINT", "SIGTERM"];

/// A timestamp as the record writes it: UTC to the second.
pub fn timestamp(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The span of one attempt and what its worker reported: what a record is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub start: jiff::Timestamp,
    pub end: jiff::Timestamp,
    pub usage: Usage,
}

impl Measured {
    /// An attempt that started at `start` and ends now.
    pub fn since(start: jiff::Timestamp, usage: Usage) -> Measured {
        Measured {
            start,
            end: jiff::Timestamp::now(),
            usage,
        }
    }

    /// The wall time.
    pub fn duration(&self) -> Duration {
        self.end
            .duration_since(self.start)
            .try_into()
            .unwrap_or(Duration::ZERO)
    }
}

impl AttemptRecord {
    /// The record of attempt `attempt` of task `task`.
    pub fn new(task: usize, attempt: u32, measured: &Measured, outcome: Outcome) -> AttemptRecord {
        AttemptRecord {
            task,
            attempt,
            start: timestamp(measured.start),
            end: timestamp(measured.end),
            seconds: tenths(measured.duration().as_secs_f64()),
            outcome,
            usage: measured.usage.clone().checked(),
            rebase: false,
            signal: None,
            cli: None,
            network: Network::default(),
        }
    }

    /// The record if it can be believed: timestamps that parse with `end` not before `start`,
    /// `seconds` finite, not negative and at most a week, and its usage [`Usage::checked`].
    pub fn checked(self) -> Option<AttemptRecord> {
        let start: jiff::Timestamp = self.start.parse().ok()?;
        let end: jiff::Timestamp = self.end.parse().ok()?;
        let ok =
            end >= start && self.seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&self.seconds);
        if !ok || self.attempt == 0 {
            return None;
        }
        Some(AttemptRecord {
            start: timestamp(start),
            end: timestamp(end),
            usage: self.usage.checked(),
            signal: self.signal.filter(|s| STOP_SIGNALS.contains(&s.as_str())),
            cli: self.cli.map(Usage::checked).filter(|u| !u.is_empty()),
            network: self.network.checked(),
            ..self
        })
    }
}

fn tenths(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The plan's attempt records that can be believed ([`AttemptRecord::checked`]), in the order
/// they were kept; an entry that is not a record (a hand edit, a newer dagexec) is skipped.
pub fn records(plan: &Plan) -> Vec<AttemptRecord> {
    plan.progress
        .extra
        .get(ATTEMPTS_FIELD)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| serde_json::from_value::<AttemptRecord>(v.clone()).ok())
        .filter(|r| r.task < plan.tasks.len())
        .filter_map(AttemptRecord::checked)
        .collect()
}

/// Keeps `record` in the plan, after the others.
pub fn record(plan: &mut Plan, record: &AttemptRecord) {
    let value = serde_json::to_value(record).expect("a record serialises");
    let slot = plan
        .progress
        .extra
        .entry(ATTEMPTS_FIELD)
        .or_insert_with(|| Value::Array(Vec::new()));
    match slot {
        Value::Array(list) => list.push(value),
        other => *other = Value::Array(vec![value]),
    }
}

/// Changes the last record of attempt `attempt` of `task` (an attempt whose change could not
/// be merged: [`Outcome::Conflict`]); nothing when there is none.
pub fn amend(plan: &mut Plan, task: usize, attempt: u32, f: impl FnOnce(&mut AttemptRecord)) {
    let Some(Value::Array(list)) = plan.progress.extra.get_mut(ATTEMPTS_FIELD) else {
        return;
    };
    let found = list.iter_mut().rev().find_map(|v| {
        let r = AttemptRecord::deserialize(&*v).ok()?;
        (r.task == task && r.attempt == attempt).then_some((v, r))
    });
    if let Some((value, mut record)) = found {
        f(&mut record);
        *value = serde_json::to_value(&record).expect("a record serialises");
    }
}

/// The recorded spend of the whole plan, in USD (reported costs only), what attempts of tasks
/// no longer in it spent included ([`removed`]).
pub fn spent(plan: &Plan) -> f64 {
    let of_tasks: f64 = records(plan).iter().filter_map(|r| r.usage.cost_usd).sum();
    of_tasks + removed(plan).cost_usd.unwrap_or_default()
}

/// What attempts of tasks no longer in the plan spent, together
/// (`progress.dagexecRemovedSpend`): a crash cut them short and their task was removed
/// before the run resumed, so no task holds their record, but the money was spent.
pub fn removed(plan: &Plan) -> Usage {
    plan.progress
        .extra
        .get(crate::pure::plan::fields::REMOVED_SPEND)
        .and_then(|v| Usage::deserialize(v).ok())
        .map(Usage::checked)
        .unwrap_or_default()
}

/// Adds `usage`, spent by an attempt of a task no longer in the plan, to [`removed`].
pub fn add_removed(plan: &mut Plan, usage: &Usage) {
    let sum = removed(plan).plus(usage.clone());
    let value = serde_json::to_value(sum).expect("a usage serialises");
    let key = crate::pure::plan::fields::REMOVED_SPEND.to_string();
    plan.progress.extra.insert(key, value);
}

/// Adds what `records` (attempt records of tasks taken out of the plan) spent to
/// [`removed`]; a record that does not read as one adds nothing.
pub fn add_removed_records(plan: &mut Plan, records: &[Value]) {
    for r in records {
        if let Some(r) = AttemptRecord::deserialize(r)
            .ok()
            .and_then(AttemptRecord::checked)
        {
            add_removed(plan, &r.usage);
        }
    }
}

/// Time and cost summed over attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub attempts: u32,
    pub seconds: f64,
    /// `None` when no attempt reported a cost.
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// What the agent CLIs themselves reported, summed over the attempts whose record also
    /// keeps the CLI's report (`None`: none does).
    pub cli: Option<Usage>,
    /// Of those, the figures the record keeps (the gateway's), summed the same way.
    pub wire: Option<Usage>,
    /// Some attempt's CLI report disagrees with the gateway's count ([`mismatch`]).
    pub differs: bool,
}

impl Totals {
    fn add(&mut self, r: &AttemptRecord) {
        if let Some(cli) = &r.cli {
            self.differs |= mismatch(cli, &r.usage).is_some();
            let sum = |a: Option<Usage>, b: &Usage| {
                let b = Usage {
                    model: None,
                    ..b.clone()
                };
                Some(a.unwrap_or_default().plus(b))
            };
            self.cli = sum(self.cli.take(), cli);
            self.wire = sum(self.wire.take(), &r.usage);
        }
        self.attempts += 1;
        self.seconds = tenths(self.seconds + r.seconds);
        self.cost_usd = either(self.cost_usd, r.usage.cost_usd, |a, b| a + b);
        self.input_tokens = either(self.input_tokens, r.usage.input_tokens, u64::saturating_add);
        self.output_tokens = either(
            self.output_tokens,
            r.usage.output_tokens,
            u64::saturating_add,
        );
    }

    /// The wall time as `2m27s` (empty when no attempt was recorded). Records keep tenths of
    /// a second, so less than a second is `under 1s`: an attempt the run showed as `14ms` is
    /// not summed up as `100ms`.
    pub fn time_text(&self) -> String {
        if self.attempts == 0 {
            return String::new();
        }
        if self.seconds < 1.0 {
            return "under 1s".to_string();
        }
        crate::pure::outcome::human_duration(Duration::from_secs_f64(self.seconds))
    }

    /// The cost as `$0.12` (empty when none was reported).
    pub fn cost_text(&self) -> String {
        self.cost_usd.map(money).unwrap_or_default()
    }

    /// [`Totals::cost_text`], and when an agent CLI's own report disagrees with the
    /// gateway's count, what the CLI said: `$0.12 (CLI: $0.15)`, or its tokens when it
    /// reported no cost (`$0.12 (CLI: 230 in / 40 out)`).
    pub fn cost_and_cli_text(&self) -> String {
        let cost = self.cost_text();
        let Some(cli) = self.cli.as_ref().filter(|_| self.differs) else {
            return cost;
        };
        let said = cli.cost_usd.map_or_else(|| tokens_text(cli), money);
        let cost = if cost.is_empty() { "-".into() } else { cost };
        format!("{cost} (CLI: {said})")
    }
}

/// Where an agent CLI's own report of what it spent disagrees with what the model gateway
/// counted on the wire (the figures the records keep): one line per such task, in plan
/// order, `task 0: the CLI reported 230 in / 40 out tokens, $0.50; the gateway counted 115 in
/// / 20 out tokens, $0.42`.
pub fn mismatches(plan: &Plan) -> Vec<String> {
    per_task(plan)
        .into_iter()
        .filter(|(_, t)| t.differs)
        .filter_map(|(task, t)| {
            let (cli, wire) = (t.cli?, t.wire?);
            Some(format!(
                "task {}: the CLI reported {}; the gateway counted {}",
                crate::pure::plan::ids::name(plan, task),
                spend_text(&cli),
                spend_text(&wire)
            ))
        })
        .collect()
}

/// The lines that show [`mismatches`] under a summary: a heading and one line per task;
/// empty when there are none.
pub fn mismatch_lines(plan: &Plan) -> String {
    let found = mismatches(plan);
    if found.is_empty() {
        return String::new();
    }
    format!(
        "Spend reported by the agent CLI differs from the gateway's count (the totals are the gateway's):\n- {}\n",
        found.join("\n- ")
    )
}

/// Per task index, the totals of its recorded attempts.
pub fn per_task(plan: &Plan) -> BTreeMap<usize, Totals> {
    let mut map: BTreeMap<usize, Totals> = BTreeMap::new();
    for r in records(plan) {
        map.entry(r.task).or_default().add(&r);
    }
    map
}

/// The totals of every recorded attempt (the time is the sum of the attempts' wall times, not
/// the run's).
pub fn total(plan: &Plan) -> Totals {
    let mut t = Totals::default();
    for r in records(plan) {
        t.add(&r);
    }
    t
}

pub use crate::pure::prices::money;

/// `12 attempts · 14m3s of work · $3.21` (the cost left out when none was reported).
pub fn total_line(plan: &Plan) -> Option<String> {
    let t = total(plan);
    if t.attempts == 0 {
        return None;
    }
    let mut s = format!("{} attempt(s) · {} of work", t.attempts, t.time_text());
    if let Some(c) = t.cost_usd {
        s.push_str(&format!(" · {}", money(c)));
    }
    Some(s)
}

/// A spending limit in USD (kept in millionths, so settings stay comparable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    micros: u64,
}

impl Budget {
    /// Parses `5`, `5.50` or `$5.50`: a positive amount of USD up to a million.
    pub fn parse(s: &str) -> Result<Budget, String> {
        let t = s.trim();
        let t = t.strip_prefix('$').unwrap_or(t).trim();
        let usd: f64 = t
            .parse()
            .map_err(|_| format!("{s:?} is not an amount of USD (examples: 5, 12.50)"))?;
        // Kept in millionths of a dollar: a budget that rounds to none is refused too.
        let micros = (usd * 1e6).round();
        if !usd.is_finite() || micros < 1.0 || usd > MAX_BUDGET_USD {
            return Err(format!(
                "{s:?}: the budget must be at least 0.000001 and at most {MAX_BUDGET_USD} USD"
            ));
        }
        Ok(Budget {
            micros: micros as u64,
        })
    }

    /// The limit in USD.
    pub fn usd(self) -> f64 {
        self.micros as f64 / 1e6
    }

    /// Whether `spent` USD reaches the limit.
    pub fn reached(self, spent: f64) -> bool {
        (spent * 1e6).round() >= self.micros as f64
    }

    /// `None` while there is money left; once it is spent, what to tell the user: the budget,
    /// what was spent, and what it bought.
    pub fn exhausted(self, plan: &Plan) -> Option<String> {
        let spent = spent(plan);
        self.reached(spent).then(|| {
            let attempts = records(plan).len();
            let gone = match removed(plan).cost_usd {
                Some(usd) if usd > 0.0 => {
                    format!(", {} of it by tasks no longer in the plan,", money(usd))
                }
                _ => String::new(),
            };
            format!(
                "the budget of {self} is spent: {} recorded over {attempts} attempt(s){gone} bought {} of {} task(s) completed; no new attempt is started (raise the budget to go on)",
                money(spent),
                plan.count(Status::Completed),
                plan.total()
            )
        })
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&money(self.usd()))
    }
}

#[cfg(test)]
mod tests;
