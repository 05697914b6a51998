use super::meter::{Body, EVENT_CAP, LINE_CAP, Meter, Reading};
use super::*;

/// Anthropic's stream as the API sends it (usage in `message_start` and `message_delta`).
const ANTHROPIC_SSE: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":20}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// `OpenAI` Responses' stream (usage in `response.completed`), CRLF line ends.
const OPENAI_SSE: &str = "event: response.created\r\n\
data: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"gpt-5.5\",\"status\":\"in_progress\",\"output\":[]}}\r\n\r\n\
event: response.output_text.delta\r\n\
data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\r\n\r\n\
event: response.completed\r\n\
data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"gpt-5.5\",\"status\":\"completed\",\"usage\":{\"input_tokens\":120,\"input_tokens_details\":{\"cached_tokens\":20},\"output_tokens\":30,\"output_tokens_details\":{\"reasoning_tokens\":4},\"total_tokens\":150}}}\r\n\r\n";

/// Gemini's `alt=sse` stream: every chunk carries the usage so far.
const GEMINI_SSE: &str = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"H\"}]}}],\"usageMetadata\":{\"promptTokenCount\":90,\"candidatesTokenCount\":1},\"modelVersion\":\"gemini-2.5-pro\"}\n\n\
data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"i\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":90,\"cachedContentTokenCount\":30,\"candidatesTokenCount\":15,\"thoughtsTokenCount\":5,\"totalTokenCount\":110},\"modelVersion\":\"gemini-2.5-pro\"}\n\n";

fn read(provider: Provider, body: Body, bytes: &[u8], chunk: usize) -> Reading {
    let mut m = Meter::new(provider, body);
    for part in bytes.chunks(chunk) {
        m.feed(part);
    }
    m.finish();
    m.reading().clone()
}

#[test]
fn each_providers_stream_is_read_whatever_its_chunks() {
    let want = [
        (Provider::Anthropic, ANTHROPIC_SSE),
        (Provider::OpenAi, OPENAI_SSE),
        (Provider::Gemini, GEMINI_SSE),
    ];
    let mut shown = Vec::new();
    for (provider, sse) in want {
        let whole = read(provider, Body::Events, sse.as_bytes(), usize::MAX);
        for chunk in [1, 2, 7, 64] {
            assert_eq!(
                read(provider, Body::Events, sse.as_bytes(), chunk),
                whole,
                "{provider:?} in chunks of {chunk}"
            );
        }
        shown.push(format!("{provider:?}: {whole:?}"));
    }
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn a_streams_usage_grows_as_its_events_arrive() {
    let mut m = Meter::new(Provider::Anthropic, Body::Events);
    let (start, rest) =
        ANTHROPIC_SSE.split_at(ANTHROPIC_SSE.find("event: content_block_start").unwrap());
    assert!(m.feed(start.as_bytes()));
    assert_eq!(
        m.reading().tokens,
        Tokens {
            input: 100,
            cache_read: 10,
            cache_write: 5,
            output: 1
        }
    );
    assert!(m.feed(rest.as_bytes()));
    assert_eq!(m.reading().tokens.output, 20);
    // A stream cut before its end keeps what it said so far.
    let mut cut = Meter::new(Provider::Anthropic, Body::Events);
    cut.feed(&ANTHROPIC_SSE.as_bytes()[..ANTHROPIC_SSE.find("message_delta").unwrap() + 30]);
    cut.finish();
    assert_eq!(cut.reading().tokens.input, 100);
    assert_eq!(cut.reading().tokens.output, 1);
}

#[test]
fn json_bodies_are_read_at_their_end() {
    let anthropic = r#"{"id":"m","type":"message","model":"claude-haiku-4-5","content":[],"usage":{"input_tokens":7,"cache_read_input_tokens":3,"cache_creation_input_tokens":2,"output_tokens":4}}"#;
    let openai = r#"{"id":"r","object":"response","model":"gpt-5.4","usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":60},"output_tokens":9}}"#;
    let gemini = r#"[{"usageMetadata":{"promptTokenCount":8}},{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":3,"toolUsePromptTokenCount":2},"modelVersion":"gemini-2.5-flash"}]"#;
    let mut shown = Vec::new();
    for (p, body) in [
        (Provider::Anthropic, anthropic),
        (Provider::OpenAi, openai),
        (Provider::Gemini, gemini),
    ] {
        let mut m = Meter::new(p, Body::Json);
        for part in body.as_bytes().chunks(5) {
            assert!(!m.feed(part), "nothing read before the end");
        }
        assert!(m.finish());
        shown.push(format!("{p:?}: {:?}", m.reading()));
    }
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn hostile_answers_are_read_only_up_to_their_caps() {
    // A line longer than the cap is skipped, and the next event still counts.
    let mut m = Meter::new(Provider::Anthropic, Body::Events);
    m.feed(b"data: ");
    let big = vec![b'x'; LINE_CAP + 10];
    for part in big.chunks(4096) {
        m.feed(part);
    }
    m.feed(b"\n\n");
    m.feed(ANTHROPIC_SSE.as_bytes());
    assert_eq!(m.reading().tokens.output, 20);
    // An event of many lines past the event cap is dropped whole.
    let mut m = Meter::new(Provider::Anthropic, Body::Events);
    let line = format!("data: {}\n", "y".repeat(LINE_CAP / 2));
    for _ in 0..(EVENT_CAP / (LINE_CAP / 2) + 2) {
        m.feed(line.as_bytes());
    }
    m.feed(b"\n");
    assert_eq!(m.reading(), &Reading::default());
    // Numbers past belief, not JSON, a model name with escapes: nothing of it is taken.
    let mut m = Meter::new(Provider::Anthropic, Body::Events);
    m.feed(b"data: {\"type\":\"message_start\",\"message\":{\"model\":\"\\u001b[31mx\",\"usage\":{\"input_tokens\":18446744073709551615,\"output_tokens\":-3}}}\n\ndata: {not json\n\n");
    assert_eq!(m.reading().tokens, Tokens::default());
    assert_eq!(m.reading().model.as_deref(), Some("[31mx"));
}

#[test]
fn routes_pass_model_requests_only() {
    let ok = |p: &str| route(p).map(|r| (r.provider, r.rest));
    assert_eq!(
        ok("/anthropic/v1/messages?beta=true"),
        Ok((Provider::Anthropic, "/v1/messages?beta=true".into()))
    );
    assert_eq!(
        ok("/openai/responses"),
        Ok((Provider::OpenAi, "/responses".into()))
    );
    assert_eq!(
        ok("/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=dgx-1"),
        Ok((
            Provider::Gemini,
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse".into()
        ))
    );
    for refused in [
        "/",
        "/anthropicx/v1/messages",
        "/v1/messages",
        "/anthropic/v1/files",
        "/anthropic/v1/organizations/api_keys",
        "/openai/files",
        "/openai/fine_tuning/jobs",
        "/gemini/v1beta/files",
        "/gemini/v1beta/models/../../upload",
    ] {
        assert!(route(refused).is_err(), "{refused}");
    }
    assert!(Provider::Gemini.is_model_call("/v1beta/models/m:generateContent"));
    assert!(!Provider::Gemini.is_model_call("/v1beta/models/m:countTokens"));
    assert!(!Provider::Anthropic.is_model_call("/v1/messages/count_tokens"));
}

#[test]
fn the_token_is_read_from_whichever_header_the_cli_uses() {
    assert_eq!(token_of([("x-api-key", "dgx-a")], None), Some("dgx-a"));
    assert_eq!(
        token_of([("authorization", "Bearer dgx-b")], None),
        Some("dgx-b")
    );
    assert_eq!(token_of([("x-goog-api-key", "dgx-c")], None), Some("dgx-c"));
    assert_eq!(
        token_of([("authorization", "Basic abc")], Some("dgx-d")),
        Some("dgx-d")
    );
    assert_eq!(token_of([("x-api-key", " ")], None), None);
    // An empty key header does not hide the token another one carries.
    assert_eq!(
        token_of([("x-api-key", ""), ("authorization", "Bearer dgx-e")], None),
        Some("dgx-e")
    );
    assert_eq!(token_of([], None), None);
    assert_eq!(
        without_key_param("/m?key=k&alt=sse"),
        ("/m?alt=sse".into(), Some("k".into()))
    );
    assert_eq!(
        without_key_param("/m?key=k"),
        ("/m".into(), Some("k".into()))
    );
}

#[test]
fn refusals_speak_each_providers_error_shape() {
    let mut shown = Vec::new();
    let reasons = [
        Refused::Token,
        Refused::NotFound(Some(Provider::OpenAi)),
        Refused::Requests(40),
        Limits {
            run: Some((1.0, 1.25)),
            ..Limits::default()
        }
        .admit(0)
        .unwrap_err(),
        Refused::Upstream("cannot reach https://api.anthropic.com".into()),
    ];
    for p in Provider::ALL {
        for r in &reasons {
            let (status, body) = refusal(Some(p), r);
            shown.push(format!("{p:?} {status} {body}"));
        }
    }
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn a_request_starts_only_inside_every_limit() {
    let l = Limits {
        run: Some((2.0, 1.99)),
        task: Some((0.5, 0.49)),
        max_requests: Some(3),
    };
    assert_eq!(l.admit(2), Ok(()));
    assert_eq!(l.admit(3), Err(Refused::Requests(3)));
    let run_spent = Limits {
        run: Some((2.0, 2.0)),
        ..l
    };
    assert!(
        matches!(run_spent.admit(0), Err(Refused::Budget(m)) if m.contains("run's budget of $2.00"))
    );
    let task_spent = Limits {
        task: Some((0.5, 0.6)),
        ..l
    };
    assert!(
        matches!(task_spent.admit(0), Err(Refused::Budget(m)) if m.contains("task's budget of $0.50"))
    );
    // The refusal names the setting as it is written (max-task-cost), for the agent's log.
    assert!(
        matches!(task_spent.admit(0), Err(Refused::Budget(m)) if m.ends_with("(max-task-cost)"))
    );
    assert_eq!(Limits::default().admit(u32::MAX), Ok(()));
}

#[test]
fn a_rate_limit_holds_for_its_retry_after_jittered_and_bounded() {
    let s = Duration::from_secs;
    assert_eq!(hold_of(429, Some("2"), 0.0), Some(s(2)));
    assert_eq!(hold_of(529, Some(" 10 "), 1.0), Some(s(11)));
    assert_eq!(
        hold_of(429, Some("0.5"), 0.0),
        Some(Duration::from_millis(500))
    );
    assert_eq!(hold_of(429, Some("999999"), 0.0), Some(MAX_HOLD));
    assert_eq!(hold_of(429, None, 0.0), None);
    assert_eq!(hold_of(429, Some("-1"), 0.0), None);
    assert_eq!(
        hold_of(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0),
        None
    );
    assert_eq!(hold_of(500, Some("3"), 0.0), None);
}

#[test]
fn wire_tokens_are_priced_with_cache_reads_and_writes() {
    let p = crate::pure::prices::Prices::default();
    let t = Tokens {
        input: 100,
        cache_read: 10,
        cache_write: 5,
        output: 20,
    };
    let c = cost(&p, "claude-sonnet-4-5-20250929", t).unwrap();
    let want = (100.0 * 3.0 + 10.0 * 0.3 + 5.0 * 3.75 + 20.0 * 15.0) / 1e6;
    assert!((c - want).abs() < 1e-12, "{c} {want}");
    assert!(cost(&p, "claude-opus-4-5", t).unwrap() < cost(&p, "claude-opus-4-1", t).unwrap());
    assert_eq!(cost(&p, "no-such-model", t), None);
    assert_eq!(t.prompt(), 115);
    assert_eq!(t.plus(t).since(t), t);
}

/// The upstream (and the proxies before it) reads a path percent-decoded: an encoded dot
/// segment reaches the endpoints the gateway does not pass, an encoded letter makes a model
/// call the gateway would neither meter nor count against the budget.
#[test]
fn an_encoded_path_is_judged_as_the_upstream_reads_it() {
    for refused in [
        "/anthropic/v1/models/%2e%2e/files",
        "/anthropic/v1/models/%2E%2E/organizations/api_keys",
        "/openai/models/.%2e/files",
        "/gemini/v1beta/models/%2e%2e%2f%2e%2e%2fupload",
        "/gemini/v1beta/models/..%5c..%5cupload",
    ] {
        assert!(route(refused).is_err(), "{refused}");
    }
    assert!(Provider::Gemini.is_model_call("/v1beta/models/m:gener%61teContent"));
    assert!(Provider::Anthropic.is_model_call("/v1/m%65ssages"));
}
