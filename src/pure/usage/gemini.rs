//! `gemini --output-format json`'s object.

use serde_json::Value;

use super::Usage;
use super::native::{Native, one_line, says_auth, trailing_object};
use crate::pure::prices::ModelTokens;
use crate::pure::said::{Halt, Said};

/// The output of a worker run under `gemini -p … --output-format json`: one JSON object on
/// stdout, `{"session_id", "response", "stats"}` — the status line is read from `response`,
/// the tokens from `stats.models.<model>.tokens` (`prompt`, which includes `cached`, and
/// `candidates` plus `thoughts` as output) — or, when it failed, `{"session_id", "error":
/// {"type", "message", "code"}}`, which gemini prints on stderr (the exit status is the code
/// modulo 256). A missing or refused key (401, `API_KEY_INVALID`, code 41) stops the run.
pub fn gemini_json(stdout: &str, stderr: &str) -> Option<Native> {
    let is_gemini = |o: &Value| {
        o.get("session_id").is_some()
            && ["response", "stats", "error"]
                .iter()
                .any(|k| o.get(k).is_some())
    };
    let object = trailing_object(stdout)
        .filter(is_gemini)
        .or_else(|| trailing_object(stderr).filter(is_gemini))?;
    let tokens = tokens_of(&object);
    let sum = |f: fn(&ModelTokens) -> u64| {
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
    let said = object.get("error").map(said_of).unwrap_or_default();
    Some(Native {
        text: object["response"]
            .as_str()
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

/// The tokens per model of `stats.models`.
fn tokens_of(object: &Value) -> Vec<ModelTokens> {
    let models = object["stats"]["models"].as_object();
    let model_tokens = |(name, m): (&String, &Value)| {
        let count = |k: &str| m["tokens"][k].as_u64().unwrap_or(0);
        ModelTokens {
            model: Some(name.clone()),
            input: count("prompt"),
            cached: count("cached"),
            output: count("candidates").saturating_add(count("thoughts")),
        }
    };
    models.into_iter().flatten().map(model_tokens).collect()
}

/// The failure of an `error` object, and whether it stops the run.
fn said_of(e: &Value) -> Said {
    let mut said = Said::default();
    let code = e["code"].as_i64();
    let raw = e["message"].as_str().unwrap_or_default();
    // The API's own error object, when the message is one.
    let message = serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| raw.to_string());
    if code == Some(401) || code == Some(41) || says_auth(raw) {
        said.halt = Some(Halt::refused_key("gemini"));
    }
    said.failure = Some(match code {
        Some(c) => format!("gemini: {} (code {c})", one_line(&message)),
        None => format!("gemini: {}", one_line(&message)),
    });
    said
}
