//! A scripted model server for the real agent CLIs (Claude Code, Codex, Gemini CLI) at the
//! versions `dagexec init` pins: the three streaming APIs they speak, answered from a script
//! written in the task's own prompt, with the faults a real API has.
//!
//! - **Anthropic Messages** (`POST /v1/messages`, what `claude` calls under
//!   `ANTHROPIC_BASE_URL`): server-sent events `message_start` … `message_stop`, the usage in
//!   `message_start` (input, cache reads, cache writes) and `message_delta` (output).
//! - **OpenAI Responses** (`POST /v1/responses`, what `codex` calls through a
//!   `[model_providers.*]` entry with `wire_api = "responses"`): `response.created` …
//!   `response.completed` with `usage`; edits are the freeform `apply_patch` custom tool.
//! - **Gemini** (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and
//!   `:generateContent`, what `gemini` calls under `GOOGLE_GEMINI_BASE_URL`): `candidates` with
//!   `functionCall` parts, `usageMetadata`; the CLI's model router (a JSON verdict on the
//!   prompt's complexity) is answered too.
//!
//! The script: every `[[write PATH]]` in the conversation is a file the model writes (content
//! [`content_of`]) in its first turn, through the CLI's own edit tool; once the conversation
//! holds the tool results, the model answers with its final text, which ends with
//! `COMPLETED: wrote PATH, …` (or the text of a `[[say TEXT]]` directive). Each response reports
//! fixed usage ([`ANTHROPIC_USAGE`], [`OPENAI_USAGE`], [`GEMINI_USAGE`]), so a test can check
//! the spend dagexec records to the token.
//!
//! A [`Fault`] set on the server answers every model request with it instead (an HTTP status
//! with the API's own error body, a malformed or truncated stream, or no answer at all).
#![allow(dead_code)]

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Usage per Anthropic response: input, cache creation (writes), cache reads, output.
pub const ANTHROPIC_USAGE: (u64, u64, u64, u64) = (100, 5, 10, 20);
/// Usage per OpenAI response: input (cached included), cached, output.
pub const OPENAI_USAGE: (u64, u64, u64) = (120, 20, 30);
/// Usage per Gemini response: prompt, candidates, total.
pub const GEMINI_USAGE: (u64, u64, u64) = (90, 15, 105);

/// A worker's one streamed Anthropic Messages request through the gateway with `curl`, printing
/// the HTTP status on a line of its own.
pub const CURL_MESSAGES: &str = r#"curl -s -o /dev/null -w '%{http_code}\n' -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '{"model":"claude-sonnet-4-5","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'"#;

/// What `who` saved of its environment and `curl`'s status (`env` then [`CURL_MESSAGES`]) shows
/// one request served through the gateway: no provider key in the environment, only the
/// attempt's token, a 200; the server saw that one request with the real key; `row` (a task's
/// `status --json` row) holds the tokens it streamed.
pub fn assert_served_through_the_gateway(who: &str, env: &str, server: &ModelServer, row: &Value) {
    assert!(
        !env.contains("secret"),
        "a provider key reached the {who}:\n{env}"
    );
    assert!(env.contains("ANTHROPIC_API_KEY=dagexec-"), "{env}");
    assert!(env.lines().any(|l| l == "200"), "{env}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].key.as_deref(), Some("sk-ant-secret-1"));
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["outputTokens"], json!(output), "{row}");
}

/// What one [`ANTHROPIC_USAGE`] response costs at claude-sonnet-4-5's default prices, in USD:
/// the cost a record of one such request holds.
pub fn anthropic_response_cost() -> f64 {
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    (input as f64 * 3.0 + reads as f64 * 0.3 + writes as f64 * 3.75 + output as f64 * 15.0) / 1e6
}

/// What the server does instead of following the script.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Every model request answered with this HTTP status and the API's error body (`429`
    /// with `retry-after: 0`).
    Status(u16),
    /// A 200 stream whose first event is not JSON.
    Malformed,
    /// A 200 stream cut after its first content event (no end event).
    Truncated,
    /// No answer at all (the response is held for an hour).
    Hang,
    /// A rate limit: from the first request on, every request for this long is answered
    /// `429` with `retry-after` (whole seconds); after it, the script again.
    RateLimitFor(Duration),
}

/// Which API a request spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAi,
    Gemini,
}

/// One model request the server answered.
#[derive(Clone, Debug)]
pub struct Seen {
    pub api: Api,
    /// The URL path as sent.
    pub path: String,
    /// The URL's query, if it had one.
    pub query: Option<String>,
    /// The model the request named.
    pub model: String,
    /// Whether the conversation already held tool results (the final turn).
    pub after_tools: bool,
    /// The key the request carried (`x-api-key`, a bearer `authorization`, `x-goog-api-key`
    /// or a `key=` parameter): dagexec's gateway puts the provider's key there, never the
    /// attempt's token.
    pub key: Option<String>,
}

#[derive(Default)]
struct Inner {
    fault: Option<Fault>,
    /// Until when [`Fault::RateLimitFor`] answers 429.
    limited_until: Option<std::time::Instant>,
    seen: Vec<Seen>,
    other: Vec<String>,
}

/// The running server; dropping it stops it.
pub struct ModelServer {
    server: MockServer,
    inner: Arc<Mutex<Inner>>,
    _runtime: Option<tokio::runtime::Runtime>,
}

impl ModelServer {
    /// Starts a server on 127.0.0.1 and a free port, from a blocking test.
    pub fn start() -> ModelServer {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let mut server = runtime.block_on(Self::start_async());
        server._runtime = Some(runtime);
        server
    }

    /// Starts a server from async code.
    pub async fn start_async() -> ModelServer {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        Mock::given(wiremock::matchers::any())
            .respond_with(Responder {
                inner: inner.clone(),
            })
            .mount(&server)
            .await;
        ModelServer {
            server,
            inner,
            _runtime: None,
        }
    }

    /// Base URL without a trailing slash (`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`; codex
    /// wants `{url}/v1` as its provider's `base_url`).
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// Answers every later model request with `fault` (`None`: follow the script again).
    pub fn set_fault(&self, fault: Option<Fault>) {
        self.lock().fault = fault;
    }

    /// The model requests answered so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.lock().seen.clone()
    }

    /// Requests that were not model requests (method and path), answered 404.
    pub fn other(&self) -> Vec<String> {
        self.lock().other.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the model writes into `path`.
pub fn content_of(path: &str) -> String {
    format!("{path} written by the scripted model\n")
}

struct Responder {
    inner: Arc<Mutex<Inner>>,
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path().to_owned();
        let api = if req.method.as_str() != "POST" {
            None
        } else if path.ends_with("/v1/messages") {
            Some(Api::Anthropic)
        } else if path.ends_with("/v1/responses") || path.ends_with("/responses") {
            Some(Api::OpenAi)
        } else if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
            Some(Api::Gemini)
        } else {
            None
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(api) = api else {
            inner.other.push(format!("{} {path}", req.method));
            // Gemini CLI counts tokens before it sends; answer that one plainly.
            if path.contains(":countTokens") {
                return ResponseTemplate::new(200).set_body_json(json!({"totalTokens": 10}));
            }
            return ResponseTemplate::new(404).set_body_json(json!({"error": "not found"}));
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let text = all_text(&body);
        let after_tools = match api {
            Api::Anthropic => text_has_type(&body, "tool_result"),
            Api::OpenAi => {
                text_has_type(&body, "custom_tool_call_output")
                    || text_has_type(&body, "function_call_output")
            }
            Api::Gemini => has_key(&body["contents"], "functionResponse"),
        };
        let model = match api {
            Api::Gemini => path
                .split("/models/")
                .nth(1)
                .and_then(|m| m.split(':').next())
                .unwrap_or("")
                .to_owned(),
            _ => body["model"].as_str().unwrap_or("").to_owned(),
        };
        let header = |name: &str| {
            req.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let key = header("x-api-key")
            .or_else(|| header("authorization").map(|v| v.trim_start_matches("Bearer ").to_owned()))
            .or_else(|| header("x-goog-api-key"))
            .or_else(|| {
                req.url
                    .query_pairs()
                    .find(|(k, _)| k == "key")
                    .map(|(_, v)| v.into_owned())
            });
        inner.seen.push(Seen {
            api,
            path: path.clone(),
            query: req.url.query().map(str::to_owned),
            model: model.clone(),
            after_tools,
            key,
        });
        let mut fault = inner.fault.clone();
        if let Some(Fault::RateLimitFor(d)) = fault {
            let now = std::time::Instant::now();
            let until = *inner.limited_until.get_or_insert(now + d);
            fault = (now < until).then_some(Fault::RateLimitFor(d));
        }
        drop(inner);
        let stream = match api {
            Api::Anthropic | Api::OpenAi => body["stream"].as_bool().unwrap_or(false),
            Api::Gemini => path.contains(":streamGenerateContent"),
        };
        if let Some(fault) = fault {
            return faulty(api, &fault);
        }
        let script = Script::read(&text);
        match api {
            Api::Anthropic => anthropic(&script, &text, &model, after_tools, stream),
            Api::OpenAi => openai(&script, &model, after_tools),
            Api::Gemini => gemini(&script, &body, &text, stream),
        }
    }
}

/// The directives found in a conversation.
struct Script {
    writes: Vec<String>,
    say: Option<String>,
}

impl Script {
    fn read(text: &str) -> Script {
        let mut writes = Vec::new();
        let mut say = None;
        let mut rest = text;
        while let Some(start) = rest.find("[[") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("]]") else { break };
            let directive = &after[..end];
            if let Some(path) = directive.strip_prefix("write ") {
                let path = path.trim().to_owned();
                if !writes.contains(&path) {
                    writes.push(path);
                }
            } else if let Some(line) = directive.strip_prefix("say ") {
                say.get_or_insert_with(|| line.trim().to_owned());
            }
            rest = &after[end + 2..];
        }
        Script { writes, say }
    }

    fn final_text(&self) -> String {
        match &self.say {
            Some(line) => format!("Done.\n{line}"),
            None if self.writes.is_empty() => "Done.\nCOMPLETED: nothing to write".to_owned(),
            None => format!("Done.\nCOMPLETED: wrote {}", self.writes.join(", ")),
        }
    }
}

/// Every string in a JSON value, joined by newlines (the prompt, system text, tool results).
fn all_text(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

/// Whether any object in `v` has `"type": ty`.
fn text_has_type(v: &Value, ty: &str) -> bool {
    match v {
        Value::Array(a) => a.iter().any(|x| text_has_type(x, ty)),
        Value::Object(o) => {
            o.get("type").and_then(Value::as_str) == Some(ty)
                || o.values().any(|x| text_has_type(x, ty))
        }
        _ => false,
    }
}

/// Whether any object in `v` has the key `key`.
fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        Value::Object(o) => o.contains_key(key) || o.values().any(|x| has_key(x, key)),
        _ => false,
    }
}

fn sse(events: &[Value], named: bool) -> String {
    let mut out = String::new();
    for e in events {
        if named {
            out.push_str(&format!("event: {}\n", e["type"].as_str().unwrap_or("")));
        }
        out.push_str(&format!("data: {e}\n\n"));
    }
    out
}

fn stream_reply(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body.into_bytes(), "text/event-stream")
}

// ------------------------------------------------------------------------------ Anthropic

fn anthropic(
    script: &Script,
    text: &str,
    model: &str,
    after_tools: bool,
    stream: bool,
) -> ResponseTemplate {
    let (input, cache_creation, cache_read, output) = ANTHROPIC_USAGE;
    let cwd = text
        .lines()
        .find_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix("Primary working directory: ")
        })
        .unwrap_or(".")
        .trim()
        .to_owned();
    let (blocks, stop): (Vec<Value>, &str) = if !after_tools && !script.writes.is_empty() {
        let calls = script
            .writes
            .iter()
            .enumerate()
            .map(|(k, path)| {
                json!({"type": "tool_use", "id": format!("toolu_{k:02}"), "name": "Write",
                       "input": {"file_path": format!("{cwd}/{path}"), "content": content_of(path)}})
            })
            .collect();
        (calls, "tool_use")
    } else {
        (
            vec![json!({"type": "text", "text": script.final_text()})],
            "end_turn",
        )
    };
    let usage_start = json!({"input_tokens": input, "cache_creation_input_tokens": cache_creation,
                             "cache_read_input_tokens": cache_read, "output_tokens": 1});
    if !stream {
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_creation,
                      "cache_read_input_tokens": cache_read, "output_tokens": output},
        }));
    }
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_start}})];
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("tool_use") => {
                events.push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}));
                events.push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}));
            }
            _ => {
                events.push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}));
                events.push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]}}));
            }
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                       "usage": {"output_tokens": output}}),
    );
    events.push(json!({"type": "message_stop"}));
    stream_reply(sse(&events, true))
}

// ------------------------------------------------------------------------------ OpenAI

fn openai(script: &Script, model: &str, after_tools: bool) -> ResponseTemplate {
    let (input, cached, output) = OPENAI_USAGE;
    let item = if !after_tools && !script.writes.is_empty() {
        let mut patch = String::from("*** Begin Patch\n");
        for path in &script.writes {
            patch.push_str(&format!("*** Add File: {path}\n"));
            for line in content_of(path).lines() {
                patch.push_str(&format!("+{line}\n"));
            }
        }
        patch.push_str("*** End Patch\n");
        json!({"type": "custom_tool_call", "id": "ctc_scripted", "call_id": "call_scripted",
               "name": "apply_patch", "input": patch, "status": "completed"})
    } else {
        json!({"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": script.final_text(), "annotations": []}]})
    };
    let response = json!({"id": "resp_scripted", "object": "response", "model": model,
                          "status": "in_progress", "output": []});
    let mut done = response.clone();
    done["status"] = json!("completed");
    done["output"] = json!([item.clone()]);
    done["usage"] = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                           "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": input + output});
    let events = [
        json!({"type": "response.created", "sequence_number": 0, "response": response}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
        json!({"type": "response.completed", "sequence_number": 3, "response": done}),
    ];
    stream_reply(sse(&events, true))
}

// ------------------------------------------------------------------------------ Gemini

fn gemini(script: &Script, body: &Value, text: &str, stream: bool) -> ResponseTemplate {
    let (prompt, candidates, total) = GEMINI_USAGE;
    let usage = json!({"promptTokenCount": prompt, "candidatesTokenCount": candidates,
                       "totalTokenCount": total});
    // The CLI's model router asks first (not streamed) for a JSON verdict on the prompt.
    if body["generationConfig"]["responseMimeType"] == "application/json" {
        let verdict = json!({"complexity_reasoning": "scripted", "complexity_score": 10});
        return ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": verdict.to_string()}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": "gemini-2.5-flash-lite"}));
    }
    let after_tools = has_key(&body["contents"], "functionResponse");
    // `- **Workspace Directories:**` then `  - /abs/cwd`: write_file wants absolute paths.
    let cwd = text
        .lines()
        .skip_while(|l| !l.contains("Workspace Directories:"))
        .nth(1)
        .map(|l| l.trim().trim_start_matches("- ").trim().to_owned())
        .unwrap_or_else(|| ".".to_owned());
    let parts: Vec<Value> = if !after_tools && !script.writes.is_empty() {
        script
            .writes
            .iter()
            .map(|path| {
                json!({"functionCall": {"name": "write_file",
                       "args": {"file_path": format!("{cwd}/{path}"), "content": content_of(path)}}})
            })
            .collect()
    } else {
        vec![json!({"text": script.final_text()})]
    };
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-pro",
        "responseId": "scripted",
    });
    if stream {
        stream_reply(sse(&[chunk], false))
    } else {
        ResponseTemplate::new(200).set_body_json(chunk)
    }
}

// ------------------------------------------------------------------------------ faults

fn faulty(api: Api, fault: &Fault) -> ResponseTemplate {
    match fault {
        Fault::Status(status) => {
            let body = match (api, status) {
                (Api::Anthropic, 401) => {
                    json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
                }
                (Api::Anthropic, 429) => {
                    json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}})
                }
                (Api::Anthropic, _) => {
                    json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
                }
                (Api::OpenAi, 401) => {
                    json!({"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
                }
                (Api::OpenAi, 429) => {
                    json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
                }
                (Api::OpenAi, _) => {
                    json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}})
                }
                (Api::Gemini, 401) => {
                    json!({"error": {"code": 401, "message": "API key not valid. Please pass a valid API key.", "status": "UNAUTHENTICATED"}})
                }
                (Api::Gemini, 429) => {
                    json!({"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}})
                }
                (Api::Gemini, _) => {
                    json!({"error": {"code": status, "message": "Internal error encountered.", "status": "INTERNAL"}})
                }
            };
            let mut reply = ResponseTemplate::new(*status).set_body_json(body);
            if *status == 429 {
                reply = reply.insert_header("retry-after", "0");
            }
            reply
        }
        Fault::Malformed => stream_reply("event: message_start\ndata: {not json\n\n".to_owned()),
        Fault::Truncated => {
            let first = match api {
                Api::Anthropic => json!({"type": "message_start", "message": {"id": "msg_cut",
                    "type": "message", "role": "assistant", "model": "m", "content": [],
                    "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
                Api::OpenAi => json!({"type": "response.created", "sequence_number": 0,
                    "response": {"id": "resp_cut", "object": "response", "status": "in_progress", "output": []}}),
                Api::Gemini => {
                    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Do"}]}}]})
                }
            };
            let mut body = sse(&[first], api != Api::Gemini);
            body.push_str("data: {\"type\":\"content_blo");
            stream_reply(body)
        }
        Fault::Hang => ResponseTemplate::new(200).set_delay(Duration::from_secs(3600)),
        Fault::RateLimitFor(d) => faulty(api, &Fault::Status(429))
            .insert_header("retry-after", d.as_secs().max(1).to_string().as_str()),
    }
}

// ------------------------------------------------------------------------------ a stalled stream

/// A Messages API that stalls in the middle of its stream: every `POST` is answered `200`
/// with `message_start` (the usage of [`ANTHROPIC_USAGE`]: input, cache writes, cache reads,
/// and 1 output token so far) and then nothing more, the connection held open until the
/// client goes away — a model that stops answering mid-stream, for a kill of the worker or
/// of dagexec while it waits. (wiremock answers whole bodies only.)
pub struct StallServer {
    url: String,
    /// Streams answered up to their stall.
    stalled: Arc<std::sync::atomic::AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

impl StallServer {
    /// Starts it on 127.0.0.1 and a free port.
    pub fn start() -> StallServer {
        use std::sync::atomic::Ordering;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stalled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = stalled.clone();
        runtime.spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 8192];
                    // The request's head and its body (by content-length).
                    loop {
                        let Ok(n) = socket.read(&mut buf).await else { return };
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&seen).to_string();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text[..end]
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.trim()
                                        .eq_ignore_ascii_case("content-length")
                                        .then(|| v.trim().parse::<usize>().ok())
                                        .flatten()
                                })
                                .unwrap_or(0);
                            if seen.len() >= end + 4 + length {
                                break;
                            }
                        }
                    }
                    let (input, cache_creation, cache_read, _) = ANTHROPIC_USAGE;
                    let start = json!({"type": "message_start", "message": {
                        "id": "msg_stalled", "type": "message", "role": "assistant",
                        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
                        "stop_sequence": null, "usage": {"input_tokens": input,
                        "cache_creation_input_tokens": cache_creation,
                        "cache_read_input_tokens": cache_read, "output_tokens": 1}}});
                    let event = sse(&[start], true);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                        event.len()
                    );
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    count.fetch_add(1, Ordering::SeqCst);
                    // Stalled: nothing more, until the client goes away.
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                });
            }
        });
        StallServer {
            url,
            stalled,
            _runtime: runtime,
        }
    }

    /// Base URL without a trailing slash.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Streams answered up to their stall so far.
    pub fn stalled(&self) -> usize {
        self.stalled.load(std::sync::atomic::Ordering::SeqCst)
    }
}
