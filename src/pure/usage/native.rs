//! What a worker's structured output says (claude, codex, gemini), and [`gather`], which puts
//! it together with the usage file.

use serde_json::Value;

use super::{USAGE_FILE_VAR, Usage, parse_usage_file};
use super::{claude_result, codex_events, gemini_json};
use crate::pure::said::Said;

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
    pub tokens: Vec<crate::pure::prices::ModelTokens>,
    /// The price table's entry for a model the CLI does not name (`codex`).
    pub cli: &'static str,
}

/// A failure text shown in a reason: sanitised, on one line.
pub(super) fn one_line(s: &str) -> String {
    crate::pure::sanitize::line(&s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `Write /abs/path` from one of claude's `permission_denials`.
pub(super) fn refused_call(d: &Value) -> Option<String> {
    let tool = d["tool_name"].as_str()?;
    let what = [
        "file_path",
        "notebook_path",
        "command",
        "path",
        "url",
        "pattern",
    ]
    .iter()
    .find_map(|k| d["tool_input"][*k].as_str());
    Some(match what {
        Some(w) => format!("{tool} {}", one_line(w)),
        None => tool.to_string(),
    })
}

/// Whether a failure text says the API key was refused or missing.
pub(super) fn says_auth(text: &str) -> bool {
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
/// The last JSON object in `text` that starts on a line of its own (`{` at the start of a
/// line) and runs to the end: how gemini prints its result (stdout) and its error (stderr).
pub(super) fn trailing_object(text: &str) -> Option<Value> {
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
        if starts_line && let Ok(o @ Value::Object(_)) = serde_json::from_str::<Value>(&t[i..]) {
            return Some(o);
        }
        at = i;
    }
    None
}

/// [`claude_result`], else [`codex_events`], else [`gemini_json`].
pub(crate) fn from_output(stdout: &str, stderr: &str) -> Option<Native> {
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
