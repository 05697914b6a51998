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
//! local attempt stopped by Ctrl-C is `interrupted`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pure::plan::model::{Plan, Status};
use crate::pure::said::{Halt, Said};

pub use crate::pure::plan::fields::ATTEMPTS as ATTEMPTS_FIELD;
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
        fn add<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        Usage {
            cost_usd: add(self.cost_usd, other.cost_usd),
            input_tokens: add(self.input_tokens, other.input_tokens),
            output_tokens: add(self.output_tokens, other.output_tokens),
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

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
        let usage = measured.usage.clone().checked();
        AttemptRecord {
            task,
            attempt,
            start: timestamp(measured.start),
            end: timestamp(measured.end),
            seconds: tenths(measured.duration().as_secs_f64()),
            outcome,
            cost_usd: usage.cost_usd,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model: usage.model,
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
        let usage = self.usage().checked();
        Some(AttemptRecord {
            start: timestamp(start),
            end: timestamp(end),
            cost_usd: usage.cost_usd,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model: usage.model,
            ..self
        })
    }

    /// The usage part of the record.
    pub fn usage(&self) -> Usage {
        Usage {
            cost_usd: self.cost_usd,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            model: self.model.clone(),
        }
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

/// The recorded spend of the whole plan, in USD (reported costs only).
pub fn spent(plan: &Plan) -> f64 {
    records(plan).iter().filter_map(|r| r.cost_usd).sum()
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
}

impl Totals {
    fn add(&mut self, r: &AttemptRecord) {
        self.attempts += 1;
        self.seconds = tenths(self.seconds + r.seconds);
        let sum_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        let sum_u = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
        self.cost_usd = sum_f(self.cost_usd, r.cost_usd);
        self.input_tokens = sum_u(self.input_tokens, r.input_tokens);
        self.output_tokens = sum_u(self.output_tokens, r.output_tokens);
    }

    /// The wall time as `2m27s` (empty when no attempt was recorded).
    pub fn time_text(&self) -> String {
        if self.attempts == 0 {
            return String::new();
        }
        crate::pure::outcome::human_duration(Duration::from_secs_f64(self.seconds))
    }

    /// The cost as `$0.12` (empty when none was reported).
    pub fn cost_text(&self) -> String {
        self.cost_usd.map(money).unwrap_or_default()
    }
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

/// `$1.23`; below a cent `<$0.01`; nothing, `$0.00`.
pub fn money(usd: f64) -> String {
    if usd > 0.0 && usd < 0.005 {
        "<$0.01".into()
    } else {
        format!("${usd:.2}")
    }
}

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
        if !usd.is_finite() || usd <= 0.0 || usd > MAX_BUDGET_USD {
            return Err(format!(
                "{s:?}: the budget must be more than 0 and at most {MAX_BUDGET_USD} USD"
            ));
        }
        Ok(Budget {
            micros: (usd * 1e6).round() as u64,
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
            format!(
                "the budget of {self} is spent: {} recorded over {attempts} attempt(s) bought {} of {} task(s) completed; no new attempt is started (raise the budget to go on)",
                money(spent),
                plan.count(Status::Completed),
                plan.tasks.len()
            )
        })
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&money(self.usd()))
    }
}

/// The file at `$DAGEXEC_USAGE_FILE`: a JSON object with any of `cost_usd` (a number),
/// `input_tokens`, `output_tokens` (whole numbers) and `model` (a string); other fields are
/// ignored. `Err` names what is wrong. The values come back [`Usage::checked`].
pub fn parse_usage_file(text: &str) -> Result<Usage, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(o) = v else {
        return Err("not a JSON object".into());
    };
    let tokens = |k: &str| -> Result<Option<u64>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("`{k}` is not a whole number of tokens")),
        }
    };
    let cost_usd = match o.get("cost_usd") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .ok_or("`cost_usd` is not a number (USD, e.g. 0.42)")?,
        ),
    };
    let model = match o.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("`model` is not a string".into()),
    };
    let raw = Usage {
        cost_usd,
        input_tokens: tokens("input_tokens")?,
        output_tokens: tokens("output_tokens")?,
        model,
    };
    let checked = raw.clone().checked();
    if checked.cost_usd != raw.cost_usd {
        return Err(format!(
            "`cost_usd` {} is out of range (0 to {MAX_COST_USD})",
            raw.cost_usd.unwrap_or_default()
        ));
    }
    if checked.input_tokens != raw.input_tokens || checked.output_tokens != raw.output_tokens {
        return Err(format!("a token count is above {MAX_TOKENS}"));
    }
    Ok(checked)
}

/// What a worker's structured output said: the text standing for its output (where the status
/// line is read), when there is one, what it reported spending, what it said about how it
/// ended ([`Said`]), and — for a CLI that reports tokens but no cost — the tokens per model,
/// priced with [`crate::pure::prices`] by [`gather`].
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    pub text: Option<String>,
    pub usage: Usage,
    pub said: Said,
    /// Tokens per model, for pricing (empty when the CLI reports its cost).
    pub tokens: Vec<crate::pure::prices::Tokens>,
    /// The price table's entry for a model the CLI does not name (`codex`).
    pub cli: &'static str,
}

/// A failure text shown in a reason: sanitised, on one line.
fn one_line(s: &str) -> String {
    crate::pure::sanitize::line(&s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `Write /abs/path` from one of claude's `permission_denials`.
fn refused_call(d: &Value) -> Option<String> {
    let tool = d.get("tool_name")?.as_str()?;
    let input = d.get("tool_input");
    let what = [
        "file_path",
        "notebook_path",
        "command",
        "path",
        "url",
        "pattern",
    ]
    .iter()
    .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str));
    Some(match what {
        Some(w) => format!("{tool} {}", one_line(w)),
        None => tool.to_string(),
    })
}

/// Whether a failure text says the API key was refused or missing.
fn says_auth(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "401 unauthorized",
        "invalid api key",
        "invalid x-api-key",
        "incorrect api key",
        "invalid_api_key",
        "authentication_error",
        "not logged in",
        "missing environment variable: `openai_api_key`",
        "api key not valid",
        "api_key_invalid",
        "unauthenticated",
        "must specify the gemini_api_key",
        "please set an auth method",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// The output of a worker run under `claude -p --output-format json` (the whole output is the
/// final result object) or `stream-json` (its last line is): `total_cost_usd`, `usage`, the
/// costliest model of `modelUsage`, and the `result` text; and how it ended: `is_error` with
/// `api_error_status` (401 or an authentication error stops the run), `subtype`
/// `error_max_turns` (a failure), `error_max_budget_usd` (a budget stop, not a failure), and
/// the tool calls in `permission_denials`. `None` for any other output.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn claude_result(stdout: &str) -> Option<Native> {
    let trimmed = stdout.trim();
    let last = trimmed.lines().next_back().unwrap_or_default();
    let object = [trimmed, last].into_iter().find_map(|s| {
        let v: Value = serde_json::from_str(s).ok()?;
        (v.get("type")?.as_str()? == "result").then_some(v)
    })?;
    let usage = object.get("usage");
    let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
    let inputs = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];
    let input_tokens = inputs
        .iter()
        .filter_map(|k| count(k))
        .reduce(u64::saturating_add);
    // The model that cost most (ties: the first name in order), for the record.
    let model = object
        .get("modelUsage")
        .and_then(Value::as_object)
        .and_then(|models| {
            let mut named: Vec<(&String, f64)> = models
                .iter()
                .map(|(name, u)| {
                    (
                        name,
                        u.get("costUSD").and_then(Value::as_f64).unwrap_or(0.0),
                    )
                })
                .collect();
            named.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            named.first().map(|(n, _)| (*n).clone())
        });
    let text = object
        .get("result")
        .and_then(Value::as_str)
        .map(str::to_string);
    let str_of = |k: &str| object.get(k).and_then(Value::as_str);
    let errors: Vec<String> = object
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(one_line)
        .collect();
    let mut said = Said {
        refused: object
            .get("permission_denials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(refused_call)
            .collect(),
        ..Said::default()
    };
    let turns = object.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
    match str_of("subtype").unwrap_or_default() {
        "error_max_turns" => {
            said.failure = Some(format!(
                "claude stopped at its turn limit after {turns} turn(s) (error_max_turns){}",
                errors.first().map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        "error_max_budget_usd" => {
            said.failure = Some(format!(
                "claude stopped at its spending limit (error_max_budget_usd){}",
                errors.first().map(|e| format!(": {e}")).unwrap_or_default()
            ));
            said.halt = Some(Halt::Budget);
        }
        s if s.starts_with("error") => {
            said.failure = Some(format!(
                "claude ended with {}{}",
                one_line(s),
                errors.first().map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        _ if object.get("is_error").and_then(Value::as_bool) == Some(true) => {
            let status = object.get("api_error_status").and_then(Value::as_u64);
            let kind = str_of("api_error_type").unwrap_or_default();
            let what = text.as_deref().map(one_line).unwrap_or_default();
            said.failure = Some(match status {
                Some(s) => format!("claude: API error {s}: {what}"),
                None => format!("claude: {what}"),
            });
            if status == Some(401) || says_auth(kind) || says_auth(&what) {
                said.halt = Some(Halt::Run {
                    secret: crate::pure::said::secret_of("claude").into(),
                });
            }
        }
        _ => {}
    }
    Some(Native {
        // An error's text is not a status line; the failure says it.
        text: text.filter(|_| said.failure.is_none()),
        usage: Usage {
            cost_usd: object.get("total_cost_usd").and_then(Value::as_f64),
            input_tokens,
            output_tokens: count("output_tokens"),
            model,
        }
        .checked(),
        said: said.checked(),
        tokens: Vec::new(),
        cli: "claude",
    })
}

/// The output of a worker run under `codex exec --json` (JSON lines): every `turn.completed`
/// event's `usage` (`input_tokens`, which include `cached_input_tokens`, and
/// `output_tokens`) summed, the text of the last `item.completed` whose item is an
/// `agent_message`, and how it failed: a `turn.failed` event's `error.message`, else the last
/// `error` event that is not a reconnection notice (`Reconnecting... 2/5 (…)`); a 401 or a
/// missing key stops the run. Lines that are not events are skipped; `None` when no line is a
/// codex event.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn codex_events(stdout: &str) -> Option<Native> {
    let mut seen = false;
    let (mut input, mut cached, mut output): (Option<u64>, u64, Option<u64>) = (None, 0, None);
    let mut text = None;
    let (mut failed, mut error): (Option<String>, Option<String>) = (None, None);
    let add = |sum: &mut Option<u64>, n: Option<u64>| {
        if let Some(n) = n {
            *sum = Some(sum.unwrap_or(0).saturating_add(n));
        }
    };
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let is_event = ["thread.", "turn.", "item."]
            .iter()
            .any(|p| kind.starts_with(p))
            || kind == "error";
        if !is_event {
            continue;
        }
        seen = true;
        match kind {
            "turn.completed" => {
                let usage = event.get("usage");
                let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
                add(&mut input, count("input_tokens"));
                add(&mut output, count("output_tokens"));
                cached = cached.saturating_add(count("cached_input_tokens").unwrap_or(0));
            }
            "item.completed" => {
                let item = event.get("item");
                let is_message = item.and_then(|i| i.get("type")).and_then(Value::as_str)
                    == Some("agent_message");
                if let (true, Some(t)) = (
                    is_message,
                    item.and_then(|i| i.get("text")).and_then(Value::as_str),
                ) {
                    text = Some(t.to_string());
                }
            }
            "turn.failed" => {
                failed = event
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(one_line);
            }
            "error" => {
                let m = event.get("message").and_then(Value::as_str).map(one_line);
                if let Some(m) = m.filter(|m| !m.starts_with("Reconnecting...")) {
                    error = Some(m);
                }
            }
            _ => {}
        }
    }
    if !seen {
        return None;
    }
    let mut said = Said::default();
    if let Some(why) = failed.or(error) {
        if says_auth(&why) {
            said.halt = Some(Halt::Run {
                secret: crate::pure::said::secret_of("codex").into(),
            });
        }
        said.failure = Some(format!("codex: the turn failed: {why}"));
    }
    let tokens = match (input, output) {
        (None, None) => Vec::new(),
        (i, o) => vec![crate::pure::prices::Tokens {
            model: None,
            input: i.unwrap_or(0),
            cached,
            output: o.unwrap_or(0),
        }],
    };
    Some(Native {
        text: text.filter(|_| said.failure.is_none()),
        usage: Usage {
            cost_usd: None,
            input_tokens: input,
            output_tokens: output,
            model: None,
        }
        .checked(),
        said: said.checked(),
        tokens,
        cli: "codex",
    })
}

/// The last JSON object in `text` that starts on a line of its own (`{` at the start of a
/// line) and runs to the end: how gemini prints its result (stdout) and its error (stderr).
fn trailing_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    let t = text.trim_end();
    let mut at = t.len();
    // Worker output is hostile: a bounded number of tries.
    let mut tries = 0;
    while let Some(i) = t[..at].rfind('{') {
        let starts_line = i == 0 || t.as_bytes()[i - 1] == b'\n';
        tries += usize::from(starts_line);
        if tries > 16 {
            return None;
        }
        if starts_line && let Ok(Value::Object(o)) = serde_json::from_str::<Value>(&t[i..]) {
            return Some(o);
        }
        at = i;
    }
    None
}

/// The output of a worker run under `gemini -p … --output-format json`: one JSON object on
/// stdout, `{"session_id", "response", "stats"}` — the status line is read from `response`,
/// the tokens from `stats.models.<model>.tokens` (`prompt`, which includes `cached`, and
/// `candidates` plus `thoughts` as output) — or, when it failed, `{"session_id", "error":
/// {"type", "message", "code"}}`, which gemini prints on stderr (the exit status is the code
/// modulo 256). A missing or refused key (401, `API_KEY_INVALID`, code 41) stops the run.
/// `None` for any other output.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn gemini_json(stdout: &str, stderr: &str) -> Option<Native> {
    let is_gemini = |o: &serde_json::Map<String, Value>| {
        o.contains_key("session_id")
            && ["response", "stats", "error"]
                .iter()
                .any(|k| o.contains_key(*k))
    };
    let object = trailing_object(stdout)
        .filter(is_gemini)
        .or_else(|| trailing_object(stderr).filter(is_gemini))?;
    let mut tokens = Vec::new();
    for (name, m) in object
        .get("stats")
        .and_then(|s| s.get("models"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let count = |k: &str| {
            m.get("tokens")
                .and_then(|t| t.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        tokens.push(crate::pure::prices::Tokens {
            model: Some(name.clone()),
            input: count("prompt"),
            cached: count("cached"),
            output: count("candidates").saturating_add(count("thoughts")),
        });
    }
    let sum = |f: fn(&crate::pure::prices::Tokens) -> u64| {
        (!tokens.is_empty()).then(|| tokens.iter().map(f).fold(0u64, u64::saturating_add))
    };
    let model = tokens
        .iter()
        .max_by_key(|t| {
            (
                t.input.saturating_add(t.output),
                std::cmp::Reverse(t.model.clone()),
            )
        })
        .and_then(|t| t.model.clone());
    let mut said = Said::default();
    if let Some(e) = object.get("error") {
        let code = e.get("code").and_then(Value::as_i64);
        let raw = e.get("message").and_then(Value::as_str).unwrap_or_default();
        // The API's own error object, when the message is one.
        let message = serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| raw.to_string());
        if code == Some(401) || code == Some(41) || says_auth(raw) {
            said.halt = Some(Halt::Run {
                secret: crate::pure::said::secret_of("gemini").into(),
            });
        }
        said.failure = Some(match code {
            Some(c) => format!("gemini: {} (code {c})", one_line(&message)),
            None => format!("gemini: {}", one_line(&message)),
        });
    }
    Some(Native {
        text: object
            .get("response")
            .and_then(Value::as_str)
            .map(str::to_string)
            .filter(|_| said.failure.is_none()),
        usage: Usage {
            cost_usd: None,
            input_tokens: sum(|t| t.input),
            output_tokens: sum(|t| t.output),
            model,
        }
        .checked(),
        said: said.checked(),
        tokens,
        cli: "gemini",
    })
}

/// [`claude_result`], else [`codex_events`], else [`gemini_json`].
pub fn from_output(stdout: &str, stderr: &str) -> Option<Native> {
    claude_result(stdout)
        .or_else(|| codex_events(stdout))
        .or_else(|| gemini_json(stdout, stderr))
}

/// What one attempt's worker reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gathered {
    /// The text that stands for the output, when the output was structured.
    pub text: Option<String>,
    pub usage: Usage,
    /// What the CLI said about how it ended.
    pub said: Said,
    /// Why some of it was ignored or not priced.
    pub warnings: Vec<String>,
}

/// What one attempt's worker reported: the usage file (`file`: its text, when the worker wrote
/// one) first, then its structured output (`stdout`, and `stderr` where gemini prints its
/// errors). A token-only CLI's tokens are priced with `prices` when nothing reported a cost.
pub fn gather(
    stdout: &str,
    stderr: &str,
    file: Option<&str>,
    prices: &crate::pure::prices::Prices,
) -> Gathered {
    let mut warnings = Vec::new();
    let from_file = match file.map(parse_usage_file) {
        None => Usage::default(),
        Some(Ok(u)) => u,
        Some(Err(why)) => {
            warnings.push(format!(
                "the usage file ${USAGE_FILE_VAR} was ignored: {why}"
            ));
            Usage::default()
        }
    };
    let Some(native) = from_output(stdout, stderr) else {
        return Gathered {
            usage: from_file,
            warnings,
            ..Gathered::default()
        };
    };
    let mut usage = from_file.or(native.usage);
    if usage.cost_usd.is_none() && !native.tokens.is_empty() {
        match prices.cost(&native.tokens, native.cli) {
            Ok(cost) => usage.cost_usd = Some(cost),
            Err(why) => warnings.push(why),
        }
        usage = usage.checked();
    }
    Gathered {
        text: native.text,
        usage,
        said: native.said,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reviewers_spend_adds_to_the_workers() {
        let worker = Usage {
            cost_usd: Some(0.25),
            input_tokens: Some(10),
            output_tokens: None,
            model: Some("w".into()),
        };
        let reviewer = Usage {
            cost_usd: Some(0.5),
            input_tokens: None,
            output_tokens: Some(7),
            model: Some("r".into()),
        };
        assert_eq!(
            worker.clone().plus(reviewer.clone()),
            Usage {
                cost_usd: Some(0.75),
                input_tokens: Some(10),
                output_tokens: Some(7),
                model: Some("w".into()),
            }
        );
        assert_eq!(Usage::default().plus(reviewer.clone()), reviewer);
        assert_eq!(worker.clone().plus(Usage::default()), worker);
    }

    fn plan(tasks: usize) -> Plan {
        let tasks: Vec<Value> = (0..tasks)
            .map(|i| serde_json::json!({"subject": format!("t{i}"), "status": "pending", "blockedBy": []}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []}, "tasks": tasks
        }))
        .unwrap()
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_record_has_the_shared_shape() {
        let m = Measured {
            start: at("2026-11-23T05:20:13.4Z"),
            end: at("2026-11-23T05:22:40.62Z"),
            usage: Usage {
                cost_usd: Some(0.1234),
                input_tokens: Some(1200),
                output_tokens: Some(340),
                model: Some("claude-sonnet-4-5".into()),
            },
        };
        let r = AttemptRecord::new(3, 1, &m, Outcome::Completed);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"task": 3, "attempt": 1, "start": "2026-11-23T05:20:13Z",
                "end": "2026-11-23T05:22:40Z", "seconds": 147.2, "outcome": "completed",
                "costUsd": 0.1234, "inputTokens": 1200, "outputTokens": 340,
                "model": "claude-sonnet-4-5"})
        );
        let bare = AttemptRecord::new(
            0,
            2,
            &Measured {
                usage: Usage::default(),
                ..m
            },
            Outcome::Timeout,
        );
        let v = serde_json::to_value(&bare).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 6, "{v}");
        assert_eq!(v["outcome"], "timeout");
    }

    #[test]
    fn records_are_kept_in_order_and_summed() {
        let mut p = plan(3);
        let m = |secs: i64, cost: Option<f64>| Measured {
            start: at("2026-01-01T00:00:00Z"),
            end: at("2026-01-01T00:00:00Z") + jiff::SignedDuration::from_secs(secs),
            usage: Usage {
                cost_usd: cost,
                ..Default::default()
            },
        };
        record(
            &mut p,
            &AttemptRecord::new(1, 1, &m(60, Some(0.5)), Outcome::Failed),
        );
        record(
            &mut p,
            &AttemptRecord::new(1, 2, &m(30, Some(0.25)), Outcome::Completed),
        );
        record(
            &mut p,
            &AttemptRecord::new(0, 1, &m(5, None), Outcome::Completed),
        );
        let per = per_task(&p);
        assert_eq!(
            (per[&1].attempts, per[&1].seconds, per[&1].cost_usd),
            (2, 90.0, Some(0.75))
        );
        assert_eq!(
            (per[&0].cost_text(), per[&0].time_text()),
            (String::new(), "5s".into())
        );
        assert_eq!(spent(&p), 0.75);
        assert_eq!(
            total_line(&p).unwrap(),
            "3 attempt(s) · 1m35s of work · $0.75"
        );
        let order: Vec<_> = records(&p).iter().map(|r| (r.task, r.attempt)).collect();
        assert_eq!(order, [(1, 1), (1, 2), (0, 1)]);
    }

    #[test]
    fn hostile_records_and_usage_are_refused_or_bounded() {
        let mut p = plan(2);
        let list = serde_json::json!([
            "not a record",
            {"task": 9, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
            {"task": 0, "attempt": 1, "start": "yesterday", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
            {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:02Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
            {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1e300, "outcome": "completed"},
            {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "exploded"},
            {"task": 1, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "failed",
             "costUsd": -5.0, "inputTokens": 10, "model": "\u{1b}]0;pwned\u{7}gpt|5 <b>"}
        ]);
        p.progress.extra.insert(ATTEMPTS_FIELD.into(), list);
        let kept = records(&p);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].cost_usd, None);
        assert_eq!(kept[0].input_tokens, Some(10));
        assert_eq!(kept[0].model.as_deref(), Some("]0pwnedgpt5b"));
        assert_eq!(model_name(&"m".repeat(500)).unwrap().len(), MODEL_MAX);
        assert_eq!(model_name(" \u{7} "), None);
        // A field that is not a list is replaced, not appended to.
        p.progress.extra.insert(ATTEMPTS_FIELD.into(), "x".into());
        let m = Measured::since(jiff::Timestamp::now(), Usage::default());
        record(&mut p, &AttemptRecord::new(0, 1, &m, Outcome::Interrupted));
        assert_eq!(records(&p).len(), 1);
    }

    #[test]
    fn the_usage_file() {
        let u = parse_usage_file(r#"{"cost_usd": 0.42, "input_tokens": 1000, "output_tokens": 20, "model": "gpt-5", "extra": [1]}"#).unwrap();
        assert_eq!(
            u,
            Usage {
                cost_usd: Some(0.42),
                input_tokens: Some(1000),
                output_tokens: Some(20),
                model: Some("gpt-5".into())
            }
        );
        assert_eq!(parse_usage_file("{}").unwrap(), Usage::default());
        for (text, why) in [
            ("nope", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"cost_usd": "1"}"#, "`cost_usd` is not a number"),
            (r#"{"cost_usd": -1}"#, "out of range"),
            (r#"{"cost_usd": 1e9}"#, "out of range"),
            (
                r#"{"input_tokens": 1.5}"#,
                "`input_tokens` is not a whole number",
            ),
            (
                r#"{"output_tokens": -3}"#,
                "`output_tokens` is not a whole number",
            ),
            (r#"{"input_tokens": 18446744073709551615}"#, "above"),
            (r#"{"model": 5}"#, "`model` is not a string"),
        ] {
            let e = parse_usage_file(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    const CLAUDE: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":3952,"num_turns":4,"result":"Edited src/a.rs.\n\nCOMPLETED: added the parser","session_id":"s","total_cost_usd":0.10457895,"usage":{"input_tokens":2,"cache_creation_input_tokens":7924,"cache_read_input_tokens":13368,"output_tokens":9,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"},"modelUsage":{"claude-haiku-4-5":{"inputTokens":10,"outputTokens":2,"costUSD":0.001},"claude-sonnet-4-5-20250929":{"inputTokens":21294,"outputTokens":9,"costUSD":0.1035}}}"#;

    #[test]
    fn claude_json_result() {
        let n = claude_result(&format!("{CLAUDE}\n")).unwrap();
        assert_eq!(
            n.text.as_deref(),
            Some("Edited src/a.rs.\n\nCOMPLETED: added the parser")
        );
        assert_eq!(
            n.usage,
            Usage {
                cost_usd: Some(0.10457895),
                input_tokens: Some(21294),
                output_tokens: Some(9),
                model: Some("claude-sonnet-4-5-20250929".into())
            }
        );
        // stream-json: the result object is the last line.
        let stream = format!(
            "{{\"type\":\"system\",\"subtype\":\"init\"}}\n{{\"type\":\"assistant\"}}\n{CLAUDE}\n"
        );
        assert_eq!(claude_result(&stream), Some(n));
        // An error result has no text; what it cost still counts.
        let err =
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"total_cost_usd":2.5}"#;
        let n = claude_result(err).unwrap();
        assert_eq!((n.text, n.usage.cost_usd), (None, Some(2.5)));
        assert!(n.said.failure.unwrap().contains("error_max_turns"));
        for other in ["COMPLETED: plain", r#"{"type":"assistant"}"#, "", "{"] {
            assert_eq!(claude_result(other), None, "{other}");
        }
    }

    const CODEX: &str = r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Reading the task**"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a.rs\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done.\nCOMPLETED: wrote a.rs"}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
"#;

    #[test]
    fn codex_json_events() {
        let n = codex_events(CODEX).unwrap();
        assert_eq!(n.text.as_deref(), Some("Done.\nCOMPLETED: wrote a.rs"));
        assert_eq!(
            (
                n.usage.input_tokens,
                n.usage.output_tokens,
                n.usage.cost_usd
            ),
            (Some(24763), Some(122), None)
        );
        // Two turns add up; noise between events is skipped.
        let two = format!(
            "{CODEX}warning: something\n{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":7,\"output_tokens\":3}}}}\n"
        );
        let n = codex_events(&two).unwrap();
        assert_eq!(
            (n.usage.input_tokens, n.usage.output_tokens),
            (Some(24770), Some(125))
        );
        assert_eq!(codex_events("COMPLETED: plain\n{\"x\":1}\n"), None);
        assert_eq!(
            from_output(CODEX, "").unwrap().usage.output_tokens,
            Some(122)
        );
    }

    #[test]
    fn the_file_wins_field_by_field() {
        let file = r#"{"cost_usd": 1.5, "model": "mine"}"#;
        let prices = crate::pure::prices::Prices::default();
        let g = gather(CLAUDE, "", Some(file), &prices);
        assert!(g.text.unwrap().ends_with("COMPLETED: added the parser"));
        let usage = g.usage;
        assert_eq!(
            (usage.cost_usd, usage.model.as_deref(), usage.output_tokens),
            (Some(1.5), Some("mine"), Some(9))
        );
        assert_eq!(g.warnings, Vec::<String>::new());
        let g = gather("COMPLETED: x\n", "", Some("{oops"), &prices);
        assert_eq!((g.text, g.usage), (None, Usage::default()));
        assert!(g.warnings[0].contains("$DAGEXEC_USAGE_FILE was ignored: not JSON"));
    }

    #[test]
    fn the_budget() {
        assert_eq!(Budget::parse("5").unwrap().usd(), 5.0);
        assert_eq!(Budget::parse(" $12.50 ").unwrap().to_string(), "$12.50");
        for bad in ["0", "-1", "abc", "NaN", "inf", "1e12", ""] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
        let b = Budget::parse("1").unwrap();
        assert!(!b.reached(0.999) && b.reached(1.0) && b.reached(1.2));
        let mut p = plan(2);
        assert_eq!(b.exhausted(&p), None);
        let m = Measured {
            start: at("2026-01-01T00:00:00Z"),
            end: at("2026-01-01T00:01:00Z"),
            usage: Usage {
                cost_usd: Some(1.25),
                ..Default::default()
            },
        };
        record(&mut p, &AttemptRecord::new(0, 1, &m, Outcome::Completed));
        p.tasks[0].status = Status::Completed;
        assert_eq!(
            b.exhausted(&p).unwrap(),
            "the budget of $1.00 is spent: $1.25 recorded over 1 attempt(s) bought 1 of 2 task(s) completed; no new attempt is started (raise the budget to go on)"
        );
        assert_eq!(
            (money(0.0), money(0.004), money(12.346)),
            ("$0.00".into(), "<$0.01".into(), "$12.35".into())
        );
    }

    #[test]
    fn outcomes() {
        use Status::*;
        assert_eq!(Outcome::of(Completed, false, false), Outcome::Completed);
        assert_eq!(Outcome::of(Blocked, false, false), Outcome::Blocked);
        assert_eq!(Outcome::of(Failed, true, false), Outcome::Timeout);
        assert_eq!(Outcome::of(Failed, false, true), Outcome::Rejected);
        assert_eq!(Outcome::of(Failed, false, false), Outcome::Failed);
        assert_eq!(Outcome::Interrupted.to_string(), "interrupted");
    }

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/agents")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn halt_of(n: &Native) -> Option<&Halt> {
        n.said.halt.as_ref()
    }

    #[test]
    fn claude_says_what_it_refused_and_why_it_stopped() {
        // acceptEdits refused a Bash `npm test`; the run still "succeeded".
        let n = claude_result(&fixture("claude-refused-bash.json")).unwrap();
        assert_eq!(n.text.as_deref(), Some("done\nCOMPLETED: wrote x"));
        assert_eq!(n.said.refused, ["Bash npm test"]);
        assert_eq!((n.said.failure.as_deref(), halt_of(&n)), (None, None));
        assert_eq!(n.usage.cost_usd, Some(0.0016));
        // A refused key: the run stops, naming the secret.
        let n = claude_result(&fixture("claude-401.json")).unwrap();
        assert_eq!(
            n.said.failure.as_deref(),
            Some("claude: API error 401: Invalid API key · Fix external API key")
        );
        assert_eq!(
            halt_of(&n),
            Some(&Halt::Run {
                secret: "ANTHROPIC_API_KEY".into()
            })
        );
        assert_eq!(n.text, None, "an error's text is no status line");
        let n = claude_result(&fixture("claude-not-logged-in.json")).unwrap();
        assert!(matches!(halt_of(&n), Some(Halt::Run { .. })), "{n:?}");
        // A server error is an ordinary failure: retried.
        let n = claude_result(&fixture("claude-500.json")).unwrap();
        assert!(
            n.said
                .failure
                .as_deref()
                .unwrap()
                .starts_with("claude: API error 500: API Error: 500 Internal server error."),
            "{n:?}"
        );
        assert_eq!(halt_of(&n), None);
        let n = claude_result(&fixture("claude-max-turns.json")).unwrap();
        assert_eq!(
            n.said.failure.as_deref(),
            Some(
                "claude stopped at its turn limit after 2 turn(s) (error_max_turns): Reached maximum number of turns (1)"
            )
        );
        assert_eq!(halt_of(&n), None);
        // Its own spending limit: a budget stop, what it spent recorded.
        let n = claude_result(&fixture("claude-max-budget.json")).unwrap();
        assert_eq!(halt_of(&n), Some(&Halt::Budget));
        assert_eq!(n.usage.cost_usd, Some(0.0008));
        assert_eq!(
            n.said.failure.as_deref(),
            Some(
                "claude stopped at its spending limit (error_max_budget_usd): Reached maximum budget ($0.0001)"
            )
        );
    }

    #[test]
    fn codex_failures_are_read_not_shown_as_raw_json() {
        let n = codex_events(&fixture("codex-ok.jsonl")).unwrap();
        assert_eq!(n.text.as_deref(), Some("COMPLETED: wrote x"));
        assert_eq!(
            n.tokens,
            [crate::pure::prices::Tokens {
                model: None,
                input: 240,
                cached: 40,
                output: 60
            }]
        );
        assert_eq!(n.said, Said::default());
        let n = codex_events(&fixture("codex-401.jsonl")).unwrap();
        insta::assert_snapshot!(n.said.failure.unwrap(), @"codex: the turn failed: unexpected status 401 Unauthorized: Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys., url: http://127.0.0.1:18743/v1/responses");
        assert_eq!(
            n.said.halt,
            Some(Halt::Run {
                secret: "OPENAI_API_KEY".into()
            })
        );
        let n = codex_events(&fixture("codex-missing-key.jsonl")).unwrap();
        assert!(matches!(n.said.halt, Some(Halt::Run { .. })));
        let n = codex_events(&fixture("codex-500.jsonl")).unwrap();
        assert_eq!(
            n.said.failure.as_deref(),
            Some(
                "codex: the turn failed: We’re currently experiencing high demand, which may cause temporary errors."
            )
        );
        assert_eq!((n.said.halt, n.text), (None, None));
        // "Reconnecting..." notices alone are no failure.
        let notice = r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 500)"}"#;
        assert_eq!(codex_events(notice).unwrap().said.failure, None);
    }

    #[test]
    fn gemini_json_output_and_its_errors_on_stderr() {
        let n = gemini_json(&fixture("gemini-ok.json"), "").unwrap();
        assert_eq!(n.text.as_deref(), Some("done\nCOMPLETED: wrote x.txt"));
        assert_eq!(
            n.tokens,
            [crate::pure::prices::Tokens {
                model: Some("gemini-2.5-pro".into()),
                input: 360,
                cached: 60,
                output: 90 + 15
            }]
        );
        assert_eq!(
            (
                n.usage.input_tokens,
                n.usage.output_tokens,
                n.usage.model.as_deref()
            ),
            (Some(360), Some(105), Some("gemini-2.5-pro"))
        );
        // Priced from the table: 300 fresh at $1.25, 60 cached at $0.125, 105 out at $10.
        let g = gather(
            &fixture("gemini-ok.json"),
            "",
            None,
            &crate::pure::prices::Prices::default(),
        );
        let want = (300.0 * 1.25 + 60.0 * 0.125 + 105.0 * 10.0) / 1e6;
        assert!((g.usage.cost_usd.unwrap() - want).abs() < 1e-12, "{g:?}");
        for (name, code) in [
            ("gemini-401.stderr", 401),
            ("gemini-400-bad-key.stderr", 400),
            ("gemini-no-key.stderr", 41),
        ] {
            let n = from_output("", &fixture(name)).unwrap();
            assert_eq!(
                n.said.halt,
                Some(Halt::Run {
                    secret: "GEMINI_API_KEY".into()
                }),
                "{name}"
            );
            assert!(
                n.said
                    .failure
                    .as_deref()
                    .unwrap()
                    .ends_with(&format!("(code {code})")),
                "{name}: {n:?}"
            );
        }
        assert_eq!(
            from_output("", &fixture("gemini-401.stderr"))
                .unwrap()
                .said
                .failure
                .as_deref(),
            Some("gemini: Request had invalid authentication credentials. (code 401)")
        );
        assert_eq!(gemini_json("COMPLETED: x", "some\nnoise {\n"), None);
    }

    #[test]
    fn a_token_only_cli_is_priced_unless_its_cost_is_reported() {
        let prices = crate::pure::prices::Prices::default();
        let codex = fixture("codex-ok.jsonl");
        let g = gather(&codex, "", None, &prices);
        let want = (200.0 * 5.0 + 40.0 * 0.5 + 60.0 * 30.0) / 1e6;
        assert!((g.usage.cost_usd.unwrap() - want).abs() < 1e-12);
        // The usage file's cost wins.
        let g = gather(&codex, "", Some(r#"{"cost_usd": 0.5}"#), &prices);
        assert_eq!(g.usage.cost_usd, Some(0.5));
        // A model the table lacks: tokens kept, no cost, a warning saying how to add it.
        let y: serde_yaml::Value = serde_yaml::from_str("other: {input: 1, output: 1}").unwrap();
        let mut gemini = fixture("gemini-ok.json");
        gemini = gemini.replace("gemini-2.5-pro", "gemini-9-ultra");
        let g = gather(
            &gemini,
            "",
            None,
            &crate::pure::prices::Prices::with(Some(&y)).unwrap(),
        );
        assert_eq!((g.usage.cost_usd, g.usage.input_tokens), (None, Some(360)));
        assert!(g.warnings[0].contains("no price for the model \"gemini-9-ultra\""));
    }
}
