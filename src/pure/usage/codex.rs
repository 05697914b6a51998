//! `codex exec --json`'s events.

use serde_json::Value;

use super::native::{Native, one_line, says_auth};
use super::{Usage, either};
use crate::pure::said::{Halt, Said};

/// The output of a worker run under `codex exec --json` (JSON lines): every `turn.completed`
/// event's `usage` (`input_tokens`, which include `cached_input_tokens`, and
/// `output_tokens`) summed, the text of the last `item.completed` whose item is an
/// `agent_message`, and how it failed: a `turn.failed` event's `error.message`, else the last
/// `error` event that is not a reconnection notice (`Reconnecting... 2/5 (…)`); a 401 or a
/// missing key stops the run. Lines that are not events are skipped; `None` when no line is a
/// codex event.
pub fn codex_events(stdout: &str) -> Option<Native> {
    let mut tally = CodexTally::default();
    for line in stdout.lines() {
        if let Ok(event) = serde_json::from_str::<Value>(line.trim()) {
            tally.take(&event);
        }
    }
    if !tally.seen {
        return None;
    }
    let mut said = Said::default();
    if let Some(why) = tally.failed.or(tally.error) {
        if says_auth(&why) {
            said.halt = Some(Halt::refused_key("codex"));
        }
        said.failure = Some(format!("codex: the turn failed: {why}"));
    }
    let (input, output) = (tally.input, tally.output);
    let tokens = match (input, output) {
        (None, None) => Vec::new(),
        (i, o) => vec![crate::pure::prices::ModelTokens {
            model: None,
            input: i.unwrap_or(0),
            cached: tally.cached,
            output: o.unwrap_or(0),
        }],
    };
    Some(Native {
        text: tally.text.filter(|_| said.failure.is_none()),
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

/// What the events said so far.
#[derive(Default)]
struct CodexTally {
    /// Whether any line was a codex event.
    seen: bool,
    input: Option<u64>,
    cached: u64,
    output: Option<u64>,
    /// The last agent message.
    text: Option<String>,
    /// A `turn.failed` event's message.
    failed: Option<String>,
    /// The last `error` event's message that is not a reconnection notice.
    error: Option<String>,
}

impl CodexTally {
    /// One JSON line; anything that is not a codex event is skipped.
    fn take(&mut self, event: &Value) {
        let kind = event["type"].as_str().unwrap_or_default();
        let is_event = ["thread.", "turn.", "item."]
            .iter()
            .any(|p| kind.starts_with(p))
            || kind == "error";
        if !is_event {
            return;
        }
        self.seen = true;
        match kind {
            "turn.completed" => {
                let count = |k: &str| event["usage"][k].as_u64();
                let add = |sum: Option<u64>, n| either(sum, n, u64::saturating_add);
                self.input = add(self.input, count("input_tokens"));
                self.output = add(self.output, count("output_tokens"));
                self.cached = self
                    .cached
                    .saturating_add(count("cached_input_tokens").unwrap_or(0));
            }
            "item.completed" => {
                let item = &event["item"];
                if let (true, Some(t)) = (item["type"] == "agent_message", item["text"].as_str()) {
                    self.text = Some(t.to_string());
                }
            }
            "turn.failed" => {
                self.failed = event["error"]["message"].as_str().map(one_line);
            }
            "error" => {
                let m = event["message"].as_str().map(one_line);
                if let Some(m) = m.filter(|m| !m.starts_with("Reconnecting...")) {
                    self.error = Some(m);
                }
            }
            _ => {}
        }
    }
}
