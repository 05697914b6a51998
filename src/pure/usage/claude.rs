//! `claude -p --output-format json`'s result object.

use serde_json::Value;

use super::Usage;
use super::native::{Native, one_line, refused_call, says_auth};
use crate::pure::said::{Halt, Said};

/// The output of a worker run under `claude -p --output-format json` (the whole output is the
/// final result object) or `stream-json` (its last line is): `total_cost_usd`, `usage`, the
/// costliest model of `modelUsage`, and the `result` text; and how it ended: `is_error` with
/// `api_error_status` (401 or an authentication error stops the run), `subtype`
/// `error_max_turns` (a failure), `error_max_budget_usd` (a budget stop, not a failure), and
/// the tool calls in `permission_denials`. `None` for any other output.
pub fn claude_result(stdout: &str) -> Option<Native> {
    let object = result_object(stdout)?;
    let count = |k: &str| object["usage"][k].as_u64();
    let input_tokens = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|k| count(k))
    .reduce(u64::saturating_add);
    let text = object["result"].as_str().map(str::to_string);
    let said = said_of(&object, text.as_deref());
    Some(Native {
        // An error's text is not a status line; the failure says it.
        text: text.filter(|_| said.failure.is_none()),
        usage: Usage {
            cost_usd: object["total_cost_usd"].as_f64(),
            input_tokens,
            output_tokens: count("output_tokens"),
            model: costliest_model(&object),
        }
        .checked(),
        said: said.checked(),
        tokens: Vec::new(),
        cli: "claude",
    })
}

/// The whole output, else its last line, when it is a `"type": "result"` object.
fn result_object(stdout: &str) -> Option<Value> {
    let trimmed = stdout.trim();
    let last = trimmed.lines().next_back().unwrap_or_default();
    [trimmed, last].into_iter().find_map(|s| {
        let v: Value = serde_json::from_str(s).ok()?;
        (v["type"] == "result").then_some(v)
    })
}

/// The model of `modelUsage` that cost most (ties: the first name in order), for the record.
fn costliest_model(object: &Value) -> Option<String> {
    let models = object["modelUsage"].as_object()?;
    let cost = |u: &Value| u["costUSD"].as_f64().unwrap_or(0.0);
    let costlier = |a: &(&String, &Value), b: &(&String, &Value)| {
        cost(b.1).total_cmp(&cost(a.1)).then_with(|| a.0.cmp(b.0))
    };
    models.iter().min_by(costlier).map(|(n, _)| n.clone())
}

/// How it ended: `subtype`, `is_error` with the API's status, and the refused tool calls.
fn said_of(object: &Value, text: Option<&str>) -> Said {
    let first_error = object["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .map(|e| format!(": {}", one_line(e)))
        .unwrap_or_default();
    let turns = object["num_turns"].as_u64().unwrap_or(0);
    let mut halt = None;
    let failure = match object["subtype"].as_str().unwrap_or_default() {
        "error_max_turns" => Some(format!(
            "claude stopped at its turn limit after {turns} turn(s) (error_max_turns){first_error}"
        )),
        "error_max_budget_usd" => {
            halt = Some(Halt::Budget);
            Some(format!(
                "claude stopped at its spending limit (error_max_budget_usd){first_error}"
            ))
        }
        s if s.starts_with("error") => {
            Some(format!("claude ended with {}{first_error}", one_line(s)))
        }
        _ if object["is_error"] == true => {
            let status = object["api_error_status"].as_u64();
            let kind = object["api_error_type"].as_str().unwrap_or_default();
            let what = text.map(one_line).unwrap_or_default();
            if status == Some(401) || says_auth(kind) || says_auth(&what) {
                halt = Some(Halt::refused_key("claude"));
            }
            Some(match status {
                Some(s) => format!("claude: API error {s}: {what}"),
                None => format!("claude: {what}"),
            })
        }
        _ => None,
    };
    Said {
        failure,
        halt,
        refused: object["permission_denials"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(refused_call)
            .collect(),
    }
}
