//! `codex exec --json`'s events.

use serde_json::Value;

use super::Usage;
use super::native::{Native, one_line, says_auth};
use crate::pure::said::{Halt, Said};

/// The output of a worker run under `codex exec --json` (JSON lines): every `turn.completed`
/// event's `usage` (`input_tokens`, which include `cached_input_tokens`, and
/// `output_tokens`) summed, the text of the last `item.completed` whose item is an
/// `agent_message`, and how it failed: a `turn.failed` event's `error.message`, else the last
/// `error` event that is not a reconnection notice (`Reconnecting... 2/5 (…)`); a 401 or a
/// missing key stops the run. Lines that are not events are skipped; `None` when no line is a
/// codex event.
pub fn codex_events(stdout: &str) -> Option<Native> {
    // Whether any line is a codex event; of them, only those read below are kept.
    let mut seen = false;
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .filter(|event| {
            let kind = event["type"].as_str().unwrap_or_default();
            seen |= ["thread.", "turn.", "item."]
                .iter()
                .any(|p| kind.starts_with(p))
                || kind == "error";
            matches!(kind, "turn.completed" | "turn.failed" | "error")
                || kind == "item.completed" && event["item"]["type"] == "agent_message"
        })
        .collect();
    if !seen {
        return None;
    }
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);
    let sum = |k: &str| {
        of("turn.completed")
            .filter_map(|e| e["usage"][k].as_u64())
            .reduce(u64::saturating_add)
    };
    let (input, output) = (sum("input_tokens"), sum("output_tokens"));
    // The last `turn.failed` event's message, else the last `error` event's that is not a
    // reconnection notice.
    let failed = of("turn.failed")
        .next_back()
        .and_then(|e| e["error"]["message"].as_str().map(one_line));
    let error = of("error")
        .filter_map(|e| e["message"].as_str().map(one_line))
        .rfind(|m| !m.starts_with("Reconnecting..."));
    let mut said = Said::default();
    if let Some(why) = failed.or(error) {
        if says_auth(&why) {
            said.halt = Some(Halt::refused_key("codex"));
        }
        said.failure = Some(format!("codex: the turn failed: {why}"));
    }
    let tokens = match (input, output) {
        (None, None) => Vec::new(),
        (i, o) => vec![crate::pure::prices::ModelTokens {
            model: None,
            input: i.unwrap_or(0),
            cached: sum("cached_input_tokens").unwrap_or(0),
            output: o.unwrap_or(0),
        }],
    };
    // The last agent message stands for the output.
    let text = of("item.completed")
        .filter_map(|e| e["item"]["text"].as_str())
        .next_back()
        .map(str::to_string);
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
