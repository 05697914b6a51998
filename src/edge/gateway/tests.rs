use super::*;
use crate::pure::gateway::Tokens;
use wiremock::matchers::{header, header_exists, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SSE: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n";

fn env_of(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect();
    move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

/// A gateway in front of `upstreams`, held to `budgets`, at the default prices.
async fn start(upstreams: Upstreams, budgets: Budgets) -> Gateway {
    Gateway::start(Config {
        upstreams,
        budgets,
        prices: crate::pure::prices::Prices::default(),
        task_recorded: BTreeMap::new(),
    })
    .await
    .unwrap()
}

async fn gateway(upstream: &MockServer, budgets: Budgets) -> Gateway {
    let env = env_of(&[
        ("ANTHROPIC_BASE_URL", upstream.uri()),
        ("ANTHROPIC_API_KEY", "sk-ant-real".into()),
    ]);
    start(Upstreams::from_env(&env), budgets).await
}

/// A POST of `body` to `url` with `headers`: the status and the answer's text.
async fn post(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let mut req = hyper::Request::post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"{\"model\":\"m\",\"stream\":true}",
        )))
        .unwrap();
    let res = client.request(req).await.unwrap();
    let status = res.status().as_u16();
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn upstream() -> MockServer {
    let server = MockServer::start().await;
    // Only the real key reaches the provider, never the attempt's token.
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-real"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(SSE.as_bytes().to_vec(), "text/event-stream"),
        )
        .mount(&server)
        .await;
    Mock::given(header_exists("authorization"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_request_with_the_attempts_token_passes_with_the_key_and_is_metered() {
    let server = upstream().await;
    let gw = gateway(&server, Budgets::default()).await;
    assert!(gw.url().starts_with("http://127.0.0.1:"), "{}", gw.url());
    let pass = gw.open(3).unwrap();
    let url = format!("{}/anthropic/v1/messages", gw.url());
    let (status, body) = post(&url, &[("x-api-key", &pass.token)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, SSE, "the stream passes unchanged");
    let spend = pass.spend();
    assert_eq!(
        spend.tokens["claude-sonnet-4-5"],
        Tokens {
            input: 100,
            cache_read: 10,
            cache_write: 5,
            output: 20
        }
    );
    assert_eq!(spend.requests, 1);
    let usage = spend.usage();
    assert_eq!(usage.input_tokens, Some(115));
    assert_eq!(usage.output_tokens, Some(20));
    assert!(usage.cost_usd.unwrap() > 0.0);
    assert!((held(&gw.shared.run_spend).0 - usage.cost_usd.unwrap()).abs() < 1e-12);
}

#[tokio::test]
async fn a_json_answer_of_known_length_is_metered_at_its_end() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "model": "claude-haiku-4-5", "usage": {"input_tokens": 7, "output_tokens": 4}})))
        .mount(&server)
        .await;
    let gw = gateway(&server, Budgets::default()).await;
    let pass = gw.open(0).unwrap();
    let url = format!("{}/anthropic/v1/messages", gw.url());
    assert_eq!(post(&url, &[("x-api-key", &pass.token)]).await.0, 200);
    let t = pass.spend().tokens["claude-haiku-4-5"];
    assert_eq!((t.input, t.output), (7, 4));
}

#[tokio::test]
async fn a_wrong_missing_or_expired_token_is_refused() {
    let server = upstream().await;
    let gw = gateway(&server, Budgets::default()).await;
    let url = format!("{}/anthropic/v1/messages", gw.url());
    assert_eq!(post(&url, &[]).await.0, 401);
    assert_eq!(post(&url, &[("x-api-key", "sk-ant-real")]).await.0, 401);
    let pass = gw.open(0).unwrap();
    let token = pass.token.clone();
    assert_eq!(post(&url, &[("x-api-key", &token)]).await.0, 200);
    drop(pass);
    let (status, body) = post(&url, &[("x-api-key", &token)]).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("authentication_error"), "{body}");
    // The provider's other endpoints are not reachable with a token.
    let pass = gw.open(0).unwrap();
    let files = format!("{}/anthropic/v1/files", gw.url());
    assert_eq!(post(&files, &[("x-api-key", &pass.token)]).await.0, 404);
    assert!(!format!("{pass:?}{gw:?}").contains(&pass.token));
    assert!(!format!("{gw:?}").contains("sk-ant-real"));
}

#[tokio::test]
async fn past_the_budget_or_the_request_cap_no_request_starts() {
    let server = upstream().await;
    // A run budget a single response spends.
    let gw = gateway(
        &server,
        Budgets {
            run: Some((0.0001, 0.0)),
            task: None,
            max_requests: None,
        },
    )
    .await;
    let pass = gw.open(0).unwrap();
    let url = format!("{}/anthropic/v1/messages", gw.url());
    assert_eq!(post(&url, &[("x-api-key", &pass.token)]).await.0, 200);
    let (status, body) = post(&url, &[("x-api-key", &pass.token)]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("the run's budget of"), "{body}");
    let spend = pass.spend();
    assert_eq!(spend.requests, 1);
    assert!(spend.refused.unwrap().contains("budget"));
    let capped = gateway(
        &server,
        Budgets {
            max_requests: Some(1),
            ..Budgets::default()
        },
    )
    .await;
    let pass = capped.open(0).unwrap();
    let url = format!("{}/anthropic/v1/messages", capped.url());
    assert_eq!(post(&url, &[("x-api-key", &pass.token)]).await.0, 200);
    let (status, body) = post(&url, &[("x-api-key", &pass.token)]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("max-requests"), "{body}");
}

#[test]
fn codex_gets_the_users_configuration_with_the_gateway_as_its_provider() {
    let user = "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"http://x/v1\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[model_providers.dagexec]\nbase_url = \"http://evil\"\n";
    insta::assert_snapshot!(codex_config(user, "http://127.0.0.1:9"));
}

#[test]
fn no_profile_of_the_users_codex_configuration_chooses_a_provider_past_the_gateway() {
    let user = "profile = \"p\"\n[profiles.p]\nmodel = \"o3\"\nmodel_provider = \"direct\"\n";
    let config = codex_config(user, "http://127.0.0.1:9");
    assert!(!config.contains("\"direct\""), "{config}");
    assert!(config.contains("model = \"o3\""), "{config}");
    assert!(
        config.starts_with("model_provider = \"dagexec\"\n"),
        "{config}"
    );
}

#[test]
fn keys_come_from_dagexecs_environment() {
    let env = env_of(&[
        ("ANTHROPIC_AUTH_TOKEN", "tok".into()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1/".into()),
        ("GOOGLE_API_KEY", "g".into()),
    ]);
    let u = Upstreams::from_env(&env);
    let a = &u.0[&Provider::Anthropic];
    assert_eq!(a.base, "https://api.anthropic.com");
    assert_eq!(a.key.as_ref().unwrap().header, "authorization");
    assert_eq!(u.0[&Provider::OpenAi].base, "http://127.0.0.1:1/v1");
    assert!(u.0[&Provider::OpenAi].key.is_none());
    assert_eq!(
        u.0[&Provider::Gemini].key.as_ref().unwrap().header,
        "x-goog-api-key"
    );
    assert!(!format!("{u:?}").contains("tok"));
}

/// Issue 35: `max-requests` N lets exactly N model requests of an attempt through however
/// many arrive together: the count is checked and taken in one step. The window between a
/// request's check and its count is made wide on purpose: the run's spend, which the check
/// reads, is held locked while the requests arrive, and released once two of them have
/// passed the provider's per-minute window (they are then past every wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_never_overrun_max_requests() {
    const CAP: u32 = 1;
    const AT_ONCE: usize = 3;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "model": "claude-haiku-4-5", "usage": {"input_tokens": 1, "output_tokens": 1}})))
        .mount(&server)
        .await;
    let gw = gateway(
        &server,
        Budgets {
            max_requests: Some(CAP),
            ..Budgets::default()
        },
    )
    .await;
    let rate = crate::pure::gateway::window::Rate {
        requests_per_minute: Some(1000),
        tokens_per_minute: None,
    };
    gw.pace(&BTreeMap::from([(Provider::Anthropic, rate)]));
    let pass = gw.open(0).unwrap();
    let url = format!("{}/anthropic/v1/messages", gw.url());
    let mut fired = tokio::task::JoinSet::new();
    let spend = held(&gw.shared.run_spend);
    for _ in 0..AT_ONCE {
        let (url, token) = (url.clone(), pass.token.clone());
        fired.spawn(async move { post(&url, &[("x-api-key", &token)]).await.0 });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while held(&gw.shared.windows)[&Provider::Anthropic].requests() < 2 {
        assert!(
            Instant::now() < deadline,
            "the requests never reached the gateway"
        );
        std::thread::yield_now();
    }
    drop(spend);
    let statuses = fired.join_all().await;
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(passed, CAP as usize, "{statuses:?}");
    assert_eq!(pass.spend().requests, CAP);
    let reached = server.received_requests().await.unwrap().len();
    assert_eq!(reached, CAP as usize);
}

/// Issue 35: a user's Codex provider is `OpenAI`'s upstream when `OPENAI_BASE_URL` is unset
/// (its base URL, its `env_key`'s key, its query parameters and headers); the variable wins.
#[tokio::test]
async fn codexs_own_provider_is_the_openai_upstream_unless_openai_base_url_is_set() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/proxy/v1/responses"))
        .and(header("authorization", "Bearer sk-proxy"))
        .and(header("x-team", "agents"))
        .and(header("x-org", "org-7"))
        .and(wiremock::matchers::query_param("api-version", "2025-04-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "model": "gpt-5.5", "usage": {"input_tokens": 3, "output_tokens": 2}})))
        .mount(&server)
        .await;
    let config = format!(
        "model_provider = \"proxy\"\n[model_providers.proxy]\nbase_url = \"{}/proxy/v1/\"\nenv_key = \"PROXY_KEY\"\nquery_params = {{ api-version = \"2025-04-01\" }}\nhttp_headers = {{ x-team = \"agents\" }}\nenv_http_headers = {{ x-org = \"ORG\" }}\n",
        server.uri()
    );
    let codex = crate::pure::gateway::codex::selected(&config)
        .unwrap()
        .unwrap();
    let env = env_of(&[
        ("PROXY_KEY", "sk-proxy".into()),
        ("ORG", "org-7".into()),
        ("OPENAI_API_KEY", "sk-not-this".into()),
    ]);
    let upstreams = Upstreams::from_env(&env).with_codex(Some(&codex), &env);
    assert!(!format!("{upstreams:?}").contains("org-7"));
    let gw = start(upstreams, Budgets::default()).await;
    let pass = gw.open(0).unwrap();
    let url = format!("{}/openai/responses", gw.url());
    let auth = format!("Bearer {}", pass.token);
    let (status, body) = post(&url, &[("authorization", &auth)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(pass.spend().tokens["gpt-5.5"].output, 2);
    // OPENAI_BASE_URL, when set, wins.
    let env = env_of(&[("OPENAI_BASE_URL", "http://127.0.0.1:1/v1".into())]);
    let u = Upstreams::from_env(&env).with_codex(Some(&codex), &env);
    assert_eq!(u.0[&Provider::OpenAi].base, "http://127.0.0.1:1/v1");
}

/// The provider a profile chooses is the one Codex uses (`codex::selected` reads it so): its
/// retry and timeout settings go to the gateway's provider as a top-level choice's do.
#[test]
fn a_profiles_provider_keeps_its_retry_settings() {
    let user = "profile = \"p\"\n[profiles.p]\nmodel_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://x/v1\"\nstream_idle_timeout_ms = 900000\n";
    let config = codex_config(user, "http://127.0.0.1:9");
    let ours = config.split("[model_providers.dagexec]").nth(1).unwrap();
    assert!(ours.contains("stream_idle_timeout_ms = 900000"), "{config}");
}

/// A Codex provider's headers and query parameters may be credentials: the gateway adds them
/// upstream ([`Upstreams::with_codex`]), and the attempt's `config.toml`, which the agent's
/// user reads, carries none of them.
#[test]
fn the_attempts_codex_configuration_carries_no_header_of_the_users_provider() {
    let user = "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://a/v1\"\nhttp_headers = { \"X-Api-Key\" = \"sk-header-secret\" }\nquery_params = { api-key = \"sk-query-secret\" }\nexperimental_bearer_token = \"sk-bearer-secret\"\n[model_providers.other.http_headers]\nX-Other = \"sk-table-secret\"\n";
    let config = codex_config(user, "http://127.0.0.1:9");
    assert!(!config.contains("secret"), "{config}");
    assert!(config.contains("base_url = \"https://a/v1\""), "{config}");
}

/// Issue 35: a stream's usage is the latest reading, not the sum of what grew: Gemini names
/// the cached part of a prompt in a later chunk than the prompt, which moves tokens from
/// `input` to `cache_read`; the attempt is charged what the response's last chunk says.
#[tokio::test]
async fn a_reading_that_moves_tokens_between_kinds_is_counted_once() {
    const GEMINI: &str = "data: {\"usageMetadata\":{\"promptTokenCount\":90,\"candidatesTokenCount\":1},\"modelVersion\":\"gemini-2.5-pro\"}\n\n\
data: {\"usageMetadata\":{\"promptTokenCount\":90,\"cachedContentTokenCount\":30,\"candidatesTokenCount\":20},\"modelVersion\":\"gemini-2.5-pro\"}\n\n";
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A provider that streams its chunks one by one, as a real stream arrives.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let _ = s.read(&mut [0u8; 4096]).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        s.write_all(head.as_bytes()).await.unwrap();
        for chunk in GEMINI.split_inclusive("\n\n") {
            let frame = format!("{:x}\r\n{chunk}\r\n", chunk.len());
            s.write_all(frame.as_bytes()).await.unwrap();
            s.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        s.write_all(b"0\r\n\r\n").await.unwrap();
    });
    let env = env_of(&[
        ("GOOGLE_GEMINI_BASE_URL", upstream),
        ("GEMINI_API_KEY", "g-real".into()),
    ]);
    let gw = start(Upstreams::from_env(&env), Budgets::default()).await;
    let pass = gw.open(0).unwrap();
    let url = format!(
        "{}/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        gw.url()
    );
    assert_eq!(post(&url, &[("x-goog-api-key", &pass.token)]).await.0, 200);
    let spend = pass.spend();
    let want = Tokens::with_cached(90, 30, 20);
    assert_eq!(spend.tokens["gemini-2.5-pro"], want);
    let prices = crate::pure::prices::Prices::default();
    let cost = crate::pure::gateway::cost(&prices, "gemini-2.5-pro", want).unwrap();
    assert!(
        (spend.cost_usd - cost).abs() < 1e-12,
        "{} {cost}",
        spend.cost_usd
    );
    assert_eq!(spend.usage().input_tokens, Some(90));
}

/// The same keys written as dotted keys or in an inline table (TOML's other ways to write
/// them) are left out too.
#[test]
fn a_providers_secret_written_as_a_dotted_key_or_inline_is_left_out_too() {
    let dotted = "model_provider = \"azure\"\nmodel_providers.azure.base_url = \"https://a/v1\"\nmodel_providers.azure.http_headers = { \"X-Api-Key\" = \"sk-dotted-secret\" }\n";
    let inline = "model_provider = \"azure\"\n[model_providers]\nazure = { base_url = \"https://a/v1\", query_params = { api-key = \"sk-inline-secret\" } }\nother.experimental_bearer_token = \"sk-other-secret\"\n";
    for user in [dotted, inline] {
        let config = codex_config(user, "http://127.0.0.1:9");
        assert!(!config.contains("secret"), "{config}");
    }
}

/// A profile's choice written as a dotted key chooses no provider past the gateway either.
#[test]
fn a_profiles_choice_written_as_a_dotted_key_is_left_out() {
    let user = "profile = \"p\"\nprofiles.p.model_provider = \"direct\"\n[model_providers.direct]\nbase_url = \"https://d/v1\"\nrequest_max_retries = 7\n";
    let config = codex_config(user, "http://127.0.0.1:9");
    assert!(!config.contains("profiles.p.model_provider"), "{config}");
    let ours = config.split("[model_providers.dagexec]").nth(1).unwrap();
    assert!(ours.contains("request_max_retries = 7"), "{config}");
}

/// A multi-line string is one TOML value, whatever its lines look like: one holding a line
/// like a table header hides nothing from the attempt's configuration.
#[test]
fn a_multi_line_string_under_a_provider_hides_no_secret() {
    let user = "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://a/v1\"\nname = \"\"\"\n[profiles.p]\n\"\"\"\nexperimental_bearer_token = \"sk-hidden-secret\"\n";
    let config = codex_config(user, "http://127.0.0.1:9");
    assert!(!config.contains("secret"), "{config}");
    let doc: toml::Table = toml::from_str(&config).unwrap();
    assert_eq!(doc["model_provider"].as_str(), Some("dagexec"));
    assert_eq!(
        doc["model_providers"]["azure"]["name"].as_str(),
        Some("[profiles.p]\n")
    );
}

/// A mock provider answering a Responses call at `at` when `auth` (the whole
/// `authorization` header, or none at all) is what reaches it.
async fn responses_upstream(at: &str, auth: Option<&str>) -> MockServer {
    let server = MockServer::start().await;
    let answer = ResponseTemplate::new(200).set_body_json(serde_json::json!({
        "model": "qwen3", "usage": {"input_tokens": 3, "output_tokens": 2}}));
    let call = Mock::given(method("POST")).and(path(at));
    match auth {
        Some(auth) => call.and(header("authorization", auth)),
        None => call.and(wiremock::matchers::any()),
    }
    .respond_with(answer)
    .mount(&server)
    .await;
    if auth.is_none() {
        Mock::given(header_exists("authorization"))
            .respond_with(ResponseTemplate::new(500))
            .with_priority(1)
            .mount(&server)
            .await;
    }
    server
}

/// The status of one Responses call of an attempt through a gateway whose `OpenAI`
/// upstream is the provider `config` (a Codex `config.toml`) selects, in `env`.
async fn call_through_codex(config: &str, env: &[(&str, String)]) -> (u16, String) {
    let codex = crate::pure::gateway::codex::selected(config)
        .unwrap()
        .unwrap();
    let env = env_of(env);
    let gw = start(
        Upstreams::from_env(&env).with_codex(Some(&codex), &env),
        Budgets::default(),
    )
    .await;
    let pass = gw.open(0).unwrap();
    let auth = format!("Bearer {}", pass.token);
    post(
        &format!("{}/openai/responses", gw.url()),
        &[("authorization", &auth)],
    )
    .await
}

/// Codex sends a provider that names no `env_key` (its built-in `ollama` and `lmstudio`, a
/// local server) no key of its own: without an `OpenAI` key in the environment the request
/// goes without one, as Codex's own would, instead of being refused for want of
/// `OPENAI_API_KEY`.
#[tokio::test]
async fn a_codex_provider_without_env_key_is_reached_without_a_key() {
    let server = responses_upstream("/v1/responses", None).await;
    let config = format!(
        "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"{}/v1\"\n",
        server.uri()
    );
    let (status, body) = call_through_codex(&config, &[]).await;
    assert_eq!(status, 200, "{body}");
}

/// Nor with one: the user's `OPENAI_API_KEY` is `OpenAI`'s, and Codex sends it to no
/// provider that names no `env_key` (a local server, a third party's endpoint).
#[tokio::test]
async fn a_codex_provider_without_env_key_never_gets_the_openai_key() {
    let server = responses_upstream("/v1/responses", None).await;
    let config = format!(
        "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"{}/v1\"\n",
        server.uri()
    );
    let env = [("OPENAI_API_KEY", "sk-openai".to_string())];
    let (status, body) = call_through_codex(&config, &env).await;
    assert_eq!(status, 200, "{body}");
}

/// A provider that `requires_openai_auth` (a proxy in front of `OpenAI`) gets that key.
#[tokio::test]
async fn a_codex_provider_that_requires_openai_auth_gets_the_openai_key() {
    let server = responses_upstream("/v1/responses", Some("Bearer sk-openai")).await;
    let config = format!(
        "model_provider = \"p\"\n[model_providers.p]\nbase_url = \"{}/v1\"\nrequires_openai_auth = true\n",
        server.uri()
    );
    let env = [("OPENAI_API_KEY", "sk-openai".to_string())];
    let (status, body) = call_through_codex(&config, &env).await;
    assert_eq!(status, 200, "{body}");
}

/// A provider's `experimental_bearer_token` is its key, as Codex uses it (before `env_key`):
/// it is kept out of the attempt's configuration, so the gateway sends it upstream.
#[tokio::test]
async fn a_codex_providers_bearer_token_is_the_key_sent_upstream() {
    let server = responses_upstream("/v1/responses", Some("Bearer sk-bearer")).await;
    let config = format!(
        "model_provider = \"p\"\n[model_providers.p]\nbase_url = \"{}/v1\"\nenv_key = \"P_KEY\"\nexperimental_bearer_token = \"sk-bearer\"\n",
        server.uri()
    );
    let env = [
        ("P_KEY", "sk-env".to_string()),
        ("OPENAI_API_KEY", "sk-openai".to_string()),
    ];
    let (status, body) = call_through_codex(&config, &env).await;
    assert_eq!(status, 200, "{body}");
}

/// A request the budget refuses is answered at once: it neither waits for the provider's
/// requests-per-minute window nor takes a place in it from the requests that may start (the
/// second would fill it, and the third wait a minute).
#[tokio::test]
async fn a_request_past_the_budget_takes_no_place_in_the_rate_window() {
    let server = upstream().await;
    let gw = gateway(
        &server,
        Budgets {
            run: Some((0.0001, 0.0)),
            ..Budgets::default()
        },
    )
    .await;
    let rate = crate::pure::gateway::window::Rate {
        requests_per_minute: Some(2),
        tokens_per_minute: None,
    };
    gw.pace(&BTreeMap::from([(Provider::Anthropic, rate)]));
    let pass = gw.open(0).unwrap();
    let url = format!("{}/anthropic/v1/messages", gw.url());
    assert_eq!(post(&url, &[("x-api-key", &pass.token)]).await.0, 200);
    let key = [("x-api-key", pass.token.as_str())];
    for _ in 0..2 {
        let refused = tokio::time::timeout(Duration::from_secs(5), post(&url, &key));
        let (status, body) = refused.await.expect("answered without waiting");
        assert_eq!(status, 400, "{body}");
    }
    let started = held(&gw.shared.windows)[&Provider::Anthropic].requests();
    assert_eq!(started, 1);
}
