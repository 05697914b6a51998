//! What dagexec's model gateway decides without touching the network (the server is
//! `edge::gateway`): which provider a request is for and whether the gateway passes it
//! ([`route`]), the attempt's token a request carries ([`token_of`]), the tokens a response
//! spent, read from its stream or its JSON as it arrives ([`meter::Meter`]), what they cost
//! ([`cost`]), whether a request may start ([`Limits::admit`]), how long a provider's rate
//! limit holds every worker ([`hold_of`]), and the errors the gateway answers in each
//! provider's own shape ([`refusal`]) so the agent CLI shows them; and the requests- and
//! tokens-per-minute window a provider's requests are held to ([`window`]); and what an
//! attempt saw of a provider's rate limit, carried in its record to the Action's conductor
//! ([`held`]).
//!
//! Each provider has its own path prefix on the gateway, its base URL: a CLI pointed at
//! `http://127.0.0.1:PORT/anthropic` sends `/anthropic/v1/messages`, which goes upstream to
//! `$ANTHROPIC_BASE_URL/v1/messages` (the provider's own base URL by default).

pub mod codex;
pub mod held;
pub mod meter;
pub mod window;

use std::time::Duration;

/// A model provider the gateway passes requests to (in a record: `anthropic`, `openai`,
/// `gemini`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Anthropic Messages (`claude`).
    Anthropic,
    /// `OpenAI` Responses (`codex`).
    OpenAi,
    /// Gemini `generateContent` / `streamGenerateContent` (`gemini`).
    Gemini,
}

impl Provider {
    /// Every provider, in the order they are shown.
    pub const ALL: [Provider; 3] = [Provider::Anthropic, Provider::OpenAi, Provider::Gemini];

    /// Its path prefix on the gateway (`/anthropic`).
    pub fn prefix(self) -> &'static str {
        match self {
            Provider::Anthropic => "/anthropic",
            Provider::OpenAi => "/openai",
            Provider::Gemini => "/gemini",
        }
    }

    /// Its name in records and in the conductor's status (`anthropic`).
    pub fn key(self) -> &'static str {
        &self.prefix()[1..]
    }

    /// Its name in messages.
    pub fn label(self) -> &'static str {
        match self {
            Provider::Anthropic => "Anthropic",
            Provider::OpenAi => "OpenAI",
            Provider::Gemini => "Gemini",
        }
    }

    /// The variable of dagexec's environment its base URL is read from, and the default.
    pub fn base(self) -> (&'static str, &'static str) {
        match self {
            Provider::Anthropic => ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
            Provider::OpenAi => ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            Provider::Gemini => (
                "GOOGLE_GEMINI_BASE_URL",
                "https://generativelanguage.googleapis.com",
            ),
        }
    }

    /// The variables its key is read from, first found wins.
    pub fn key_vars(self) -> &'static [&'static str] {
        match self {
            Provider::Anthropic => &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
            Provider::OpenAi => &["OPENAI_API_KEY", "CODEX_API_KEY"],
            Provider::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }

    /// The header its key goes upstream in, and the value for `key` (`ANTHROPIC_AUTH_TOKEN`
    /// is a bearer token).
    pub fn key_header(self, var: &str, key: &str) -> (&'static str, String) {
        match (self, var) {
            (Provider::Anthropic, "ANTHROPIC_AUTH_TOKEN") | (Provider::OpenAi, _) => {
                ("authorization", format!("Bearer {key}"))
            }
            (Provider::Anthropic, _) => ("x-api-key", key.to_string()),
            (Provider::Gemini, _) => ("x-goog-api-key", key.to_string()),
        }
    }

    /// Whether `rest` (the path after the prefix) is an endpoint the gateway passes: the
    /// model calls the CLIs make, and listing models; nothing else of the provider's API
    /// (files, batches, fine-tuning, the admin API) is reachable with an attempt's token.
    fn passes(self, rest: &str) -> bool {
        let path = &*path_of(rest);
        let segments_ok = !path.split(['/', '\\']).any(|s| s == ".." || s == ".");
        // The model calls, and the model listings with every path under them.
        let (calls, listings): (&[&str], &[&str]) = match self {
            Provider::Anthropic => (
                &["/v1/messages", "/v1/messages/count_tokens"],
                &["/v1/models"],
            ),
            Provider::OpenAi => (&["/responses", "/responses/compact"], &["/models"]),
            Provider::Gemini => (&[], &["/v1beta/models", "/v1/models", "/v1alpha/models"]),
        };
        let under = |p: &&str| {
            path.strip_prefix(*p)
                .is_some_and(|r| r.is_empty() || r.starts_with('/'))
        };
        segments_ok && (calls.contains(&path) || listings.iter().any(under))
    }

    /// Whether `rest` asks for a model's answer (metered, counted and held to the budget),
    /// not a listing or a token count.
    pub fn is_model_call(self, rest: &str) -> bool {
        let path = &*path_of(rest);
        match self {
            Provider::Anthropic => path == "/v1/messages",
            Provider::OpenAi => path == "/responses" || path == "/responses/compact",
            Provider::Gemini => {
                path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent")
            }
        }
    }
}

/// The path of `rest` (its query left out) as the upstream reads it: percent-decoded, so an
/// encoded dot segment or letter is judged as what it stands for.
fn path_of(rest: &str) -> std::borrow::Cow<'_, str> {
    let path = rest.split('?').next().unwrap_or_default();
    percent_encoding::percent_decode_str(path).decode_utf8_lossy()
}

/// A request the gateway passes: its provider and the path and query after the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub provider: Provider,
    /// Path and query after the provider's prefix (`/v1/messages?beta=true`), a Gemini
    /// `key=` parameter taken out.
    pub rest: String,
}

/// Which provider the request for `path_and_query` goes to, or why the gateway refuses it.
pub fn route(path_and_query: &str) -> Result<Route, Refused> {
    let routed = Provider::ALL.into_iter().find_map(|p| {
        let rest = path_and_query.strip_prefix(p.prefix())?;
        rest.starts_with('/').then_some((p, rest))
    });
    let Some((provider, rest)) = routed else {
        return Err(Refused::NotFound(None));
    };
    if !provider.passes(rest) {
        return Err(Refused::NotFound(Some(provider)));
    }
    Ok(Route {
        provider,
        rest: without_key_param(rest).0,
    })
}

/// `rest` without a `key=` query parameter, and that parameter's value (Gemini's clients may
/// send the key in the query).
pub fn without_key_param(rest: &str) -> (String, Option<String>) {
    let Some((path, query)) = rest.split_once('?') else {
        return (rest.to_string(), None);
    };
    let (keys, kept): (Vec<&str>, Vec<&str>) =
        query.split('&').partition(|kv| kv.starts_with("key="));
    let key = keys.last().map(|kv| kv["key=".len()..].to_string());
    if kept.is_empty() {
        (path.to_string(), key)
    } else {
        (format!("{path}?{}", kept.join("&")), key)
    }
}

/// The headers that may carry a key or a token: the gateway reads the attempt's token from
/// them and sends none of them upstream.
pub const KEY_HEADERS: [&str; 4] = [
    "x-api-key",
    "authorization",
    "x-goog-api-key",
    "proxy-authorization",
];

/// The attempt's token among the request's key headers (`(name, value)`, lowercase names)
/// and its `key=` query parameter: `x-api-key`, `x-goog-api-key`, a bearer `authorization`.
pub fn token_of<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    query_key: Option<&'a str>,
) -> Option<&'a str> {
    headers
        .into_iter()
        .find_map(|(name, value)| {
            let token = match name {
                "x-api-key" | "x-goog-api-key" => Some(value.trim()),
                "authorization" => value
                    .trim()
                    .strip_prefix("Bearer ")
                    .or_else(|| value.trim().strip_prefix("bearer "))
                    .map(str::trim),
                _ => None,
            };
            token.filter(|t| !t.is_empty())
        })
        .or(query_key)
}

/// Tokens one response spent ([`crate::pure::prices`] prices them).
pub use crate::pure::prices::Tokens;

/// What `tokens` of `model` cost at `prices`, `None` for a model the table lacks.
pub fn cost(prices: &crate::pure::prices::Prices, model: &str, tokens: Tokens) -> Option<f64> {
    prices.find(model).map(|(_, p)| p.cost(tokens))
}

/// Why the gateway answers a request itself instead of passing it on.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// No token, or one no running attempt holds.
    Token,
    /// A path the gateway does not pass (the provider, when the prefix named one).
    NotFound(Option<Provider>),
    /// The run's or the task's budget is spent: what to tell the agent.
    Budget(String),
    /// The attempt made its last allowed request.
    Requests(u32),
    /// The upstream could not be reached or answered nothing usable.
    Upstream(String),
}

impl Refused {
    /// The HTTP status and the message. A budget and the request cap are 400s: the CLIs
    /// retry 429s and 5xx, never a 400, so the agent stops at once and shows the message.
    fn status_and_message(&self) -> (u16, String) {
        match self {
            Refused::Token => (
                401,
                "dagexec's gateway: this token is not an attempt's that is running (each attempt gets its own, valid while it runs)".into(),
            ),
            Refused::NotFound(None) => (
                404,
                "dagexec's gateway passes only /anthropic, /openai and /gemini model requests".into(),
            ),
            Refused::NotFound(Some(p)) => (
                404,
                format!("dagexec's gateway passes only {}'s model requests on this path", p.label()),
            ),
            Refused::Budget(why) => (400, format!("dagexec: {why}")),
            Refused::Requests(n) => (
                400,
                format!("dagexec: this attempt made its {n} allowed model requests (max-requests); it stops here"),
            ),
            Refused::Upstream(why) => (502, format!("dagexec's gateway: {why}")),
        }
    }
}

/// The answer to a refused request in `provider`'s own error shape (its CLI parses and shows
/// it): the status and the JSON body. Without a provider, Anthropic's shape.
pub fn refusal(provider: Option<Provider>, refused: &Refused) -> (u16, String) {
    let (status, message) = refused.status_and_message();
    let body = match provider.unwrap_or(Provider::Anthropic) {
        Provider::Anthropic => {
            let kind = match status {
                401 => "authentication_error",
                404 => "not_found_error",
                400 => "invalid_request_error",
                _ => "api_error",
            };
            serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Provider::OpenAi => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", "invalid_api_key"),
                404 => ("invalid_request_error", "not_found"),
                400 => ("invalid_request_error", "dagexec_budget"),
                _ => ("server_error", "upstream_error"),
            };
            serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Provider::Gemini => {
            let s = match status {
                401 => "UNAUTHENTICATED",
                404 => "NOT_FOUND",
                400 => "FAILED_PRECONDITION",
                _ => "UNAVAILABLE",
            };
            serde_json::json!({"error": {"code": status, "message": message, "status": s}})
        }
    };
    (status, body.to_string())
}

/// What bounds an attempt's requests: the run's and the task's budgets with what each has
/// spent, and the cap on requests per attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// The run's budget in USD and the run's spend so far (recorded and live).
    pub run: Option<(f64, f64)>,
    /// The task's cap in USD and the task's spend so far (recorded and live).
    pub task: Option<(f64, f64)>,
    /// At most this many model requests per attempt.
    pub max_requests: Option<u32>,
}

impl Limits {
    /// Whether the attempt's next model request (after `made` of them) may start: `Err` says
    /// which limit stops it.
    pub fn admit(&self, made: u32) -> Result<(), Refused> {
        let money = crate::pure::prices::money;
        let budgets = [
            (self.run, "the run's", "max-cost"),
            (self.task, "this task's", "max-task-cost"),
        ];
        for (limit, whose, setting) in budgets {
            if let Some((budget, spent)) = limit
                && spent >= budget
            {
                return Err(Refused::Budget(format!(
                    "{whose} budget of {} is spent ({} so far); no further model request starts ({setting})",
                    money(budget),
                    money(spent)
                )));
            }
        }
        if let Some(max) = self.max_requests
            && made >= max
        {
            return Err(Refused::Requests(max));
        }
        Ok(())
    }
}

/// The longest a provider's `retry-after` holds the workers: more is taken for a hostile or
/// broken answer.
pub const MAX_HOLD: Duration = Duration::from_secs(300);

/// How long a `status` answer with `retry_after` (the header's value) holds every worker's
/// next request to the provider: a 429 or 529 with a retry-after in seconds (an HTTP date
/// is not honoured), at most [`MAX_HOLD`]; `jitter` (0..1) adds up to a tenth more, so the
/// held requests do not all start at one instant.
pub fn hold_of(status: u16, retry_after: Option<&str>, jitter: f64) -> Option<Duration> {
    if status != 429 && status != 529 {
        return None;
    }
    let secs: f64 = retry_after?.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    let base = Duration::from_secs_f64(secs.min(MAX_HOLD.as_secs_f64()));
    Some(base + base.mul_f64(jitter.clamp(0.0, 1.0) / 10.0))
}

#[cfg(test)]
mod tests;
