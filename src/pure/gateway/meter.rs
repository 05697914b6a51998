//! The tokens a response spent, read as its bytes pass through the gateway: server-sent
//! events parsed line by line as they arrive, or a JSON body once it has all arrived. The
//! upstream's answer is hostile input: a line, an event and a JSON body are read only up to
//! their caps (what is longer passes through unread), numbers are bounded, and nothing read
//! here changes the bytes forwarded.
//!
//! Where each provider reports usage:
//! - Anthropic: `message_start`'s `message.usage` (`input_tokens`, `cache_read_input_tokens`,
//!   `cache_creation_input_tokens`, `output_tokens`) and `message_delta`'s `usage` (the output
//!   so far; newer streams repeat the input counts there);
//! - `OpenAI` Responses: `response.completed` (or `.incomplete`, `.failed`)'s
//!   `response.usage` (`input_tokens`, cached ones included as
//!   `input_tokens_details.cached_tokens`, `output_tokens`);
//! - Gemini: every chunk's `usageMetadata` (`promptTokenCount`, cached ones included as
//!   `cachedContentTokenCount`, `toolUsePromptTokenCount`, `candidatesTokenCount`,
//!   `thoughtsTokenCount`), the last one standing.

use serde_json::Value;

use super::{Provider, Tokens};

/// The longest SSE line read; a longer one is skipped to its end.
pub const LINE_CAP: usize = 1 << 20;
/// The largest event (its `data:` lines together) read.
pub const EVENT_CAP: usize = 4 << 20;
/// The largest JSON body read.
pub const JSON_CAP: usize = 16 << 20;
/// The largest token count believed from one response.
const MAX_TOKENS: u64 = 100_000_000;

/// What a response has spent so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// The model the response names.
    pub model: Option<String>,
    pub tokens: Tokens,
}

/// How the response's body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `text/event-stream`.
    Events,
    /// JSON, read whole at its end.
    Json,
}

/// Bytes gathered up to a cap: past it, what came is dropped and the rest skipped until
/// the bytes are taken.
#[derive(Debug, Default)]
struct Capped {
    bytes: Vec<u8>,
    over: bool,
}

impl Capped {
    fn push(&mut self, part: &[u8], cap: usize) {
        if self.over || self.bytes.len() + part.len() > cap {
            self.over = true;
            self.bytes = Vec::new();
        } else {
            self.bytes.extend_from_slice(part);
        }
    }

    /// What was gathered, `None` when it went past its cap; empty again after.
    fn take(&mut self) -> Option<Vec<u8>> {
        let bytes = std::mem::take(&mut self.bytes);
        (!std::mem::take(&mut self.over)).then_some(bytes)
    }
}

/// Reads one response's usage from its bytes as they pass.
#[derive(Debug)]
pub struct Meter {
    provider: Provider,
    body: Body,
    /// The current line, up to [`LINE_CAP`] (a longer one is skipped to its end).
    line: Capped,
    /// The current event's `data:` lines, up to [`EVENT_CAP`] (a larger one is dropped).
    data: Capped,
    /// A JSON body, up to [`JSON_CAP`].
    json: Capped,
    reading: Reading,
}

impl Meter {
    /// A meter for a `provider` response whose body is `body`.
    pub fn new(provider: Provider, body: Body) -> Meter {
        Meter {
            provider,
            body,
            line: Capped::default(),
            data: Capped::default(),
            json: Capped::default(),
            reading: Reading::default(),
        }
    }

    /// The provider whose response it reads.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// What the response has spent so far.
    pub fn reading(&self) -> &Reading {
        &self.reading
    }

    /// Reads `bytes`, the next part of the body; returns whether the reading changed.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        match self.body {
            Body::Json => {
                self.json.push(bytes, JSON_CAP);
                false
            }
            Body::Events => {
                let before = self.reading.clone();
                let mut rest = bytes;
                while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                    self.line.push(&rest[..nl], LINE_CAP);
                    if let Some(line) = self.line.take() {
                        self.line_done(&line);
                    }
                    rest = &rest[nl + 1..];
                }
                self.line.push(rest, LINE_CAP);
                self.reading != before
            }
        }
    }

    /// The body ended: a JSON body is read, a last event without its blank line too. Returns
    /// whether the reading changed.
    pub fn finish(&mut self) -> bool {
        let before = self.reading.clone();
        match self.body {
            Body::Json => {
                if let Some(json) = self.json.take()
                    && let Ok(v) = serde_json::from_slice::<Value>(&json)
                {
                    self.whole(&v);
                }
            }
            Body::Events => {
                if let Some(line) = self.line.take() {
                    self.line_done(&line);
                }
                self.dispatch();
            }
        }
        self.reading != before
    }

    fn line_done(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch();
            return;
        }
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if !self.data.bytes.is_empty() {
            self.data.push(b"\n", EVENT_CAP);
        }
        self.data
            .push(data.strip_prefix(b" ").unwrap_or(data), EVENT_CAP);
    }

    fn dispatch(&mut self) {
        if let Some(data) = self.data.take()
            && !data.is_empty()
            && let Ok(v) = serde_json::from_str::<Value>(&String::from_utf8_lossy(&data))
        {
            self.event(&v);
        }
    }

    /// One streamed event: Anthropic's `message_start` carries a whole message, `OpenAI`'s
    /// ending events a whole response.
    fn event(&mut self, v: &Value) {
        match (self.provider, v["type"].as_str()) {
            (Provider::Anthropic, Some("message_start")) => self.whole(&v["message"]),
            (Provider::Anthropic, Some("message_delta")) => self.anthropic(&v["usage"]),
            (
                Provider::OpenAi,
                Some("response.completed" | "response.incomplete" | "response.failed"),
            ) => self.whole(&v["response"]),
            (Provider::OpenAi, _) => self.model(&v["response"]["model"]),
            (Provider::Gemini, _) => self.gemini(v),
            (Provider::Anthropic, _) => {}
        }
    }

    /// A whole JSON body.
    fn whole(&mut self, v: &Value) {
        match self.provider {
            Provider::Anthropic => {
                self.model(&v["model"]);
                self.anthropic(&v["usage"]);
            }
            Provider::OpenAi => {
                self.model(&v["model"]);
                self.openai(&v["usage"]);
            }
            // `streamGenerateContent` without `alt=sse` answers a JSON array of chunks.
            Provider::Gemini => match v {
                Value::Array(chunks) => chunks.iter().for_each(|c| self.gemini(c)),
                _ => self.gemini(v),
            },
        }
    }

    fn model(&mut self, v: &Value) {
        if let Some(m) = v.as_str().and_then(crate::pure::usage::model_name) {
            self.reading.model = Some(m);
        }
    }

    /// Each count the usage gives replaces the one read before (`message_delta` gives the
    /// output alone).
    fn anthropic(&mut self, usage: &Value) {
        let t = &mut self.reading.tokens;
        for (k, slot) in [
            ("input_tokens", &mut t.input),
            ("cache_read_input_tokens", &mut t.cache_read),
            ("cache_creation_input_tokens", &mut t.cache_write),
            ("output_tokens", &mut t.output),
        ] {
            if let Some(n) = count(&usage[k]) {
                *slot = n;
            }
        }
    }

    fn openai(&mut self, usage: &Value) {
        let (Some(input), Some(output)) = (
            count(&usage["input_tokens"]),
            count(&usage["output_tokens"]),
        ) else {
            return;
        };
        let cached = count(&usage["input_tokens_details"]["cached_tokens"]).unwrap_or(0);
        self.reading.tokens = Tokens::with_cached(input, cached, output);
    }

    fn gemini(&mut self, v: &Value) {
        self.model(&v["modelVersion"]);
        let u = &v["usageMetadata"];
        let Some(prompt) = count(&u["promptTokenCount"]) else {
            return;
        };
        let n = |k: &str| count(&u[k]).unwrap_or(0);
        let output = n("candidatesTokenCount").saturating_add(n("thoughtsTokenCount"));
        let mut tokens = Tokens::with_cached(prompt, n("cachedContentTokenCount"), output);
        // Tool results are prompt tokens Gemini counts apart.
        tokens.input += n("toolUsePromptTokenCount");
        self.reading.tokens = tokens;
    }
}

/// A token count that can be believed.
fn count(v: &Value) -> Option<u64> {
    v.as_u64().filter(|&n| n <= MAX_TOKENS)
}
