//! The GitHub edge: one [`Client`] (octocrab underneath, base URL from `GITHUB_API_URL`)
//! through which every REST and GraphQL call goes, under one retry policy ([`retry`]).
//! Tokens live in [`Token`], whose `Debug` never shows them. Typed operations are in [`ops`].

pub mod app;
pub mod comments;
pub mod issues;
pub mod ops;
pub mod retry;
pub mod runs;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use retry::RetryPolicy;

/// A secret token. `Debug` and `Display` are redacted; [`Token::expose`] is the only way out.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(s: impl Into<String>) -> Token {
        Token(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoName {
    pub owner: String,
    pub name: String,
}

impl RepoName {
    /// Parses `owner/name` (as in `GITHUB_REPOSITORY`).
    pub fn parse(s: &str) -> Option<RepoName> {
        let (owner, name) = s.split_once('/')?;
        (!owner.is_empty() && !name.is_empty() && !name.contains('/')).then(|| RepoName {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
}

impl std::fmt::Display for RepoName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// A call that failed, naming the operation and carrying GitHub's own message.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{op}: GitHub answered {status}: {message}{}", why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    Status {
        op: String,
        status: u16,
        message: String,
        why: Option<String>,
    },
    #[error("{op}: cannot reach GitHub at {url}: {message}")]
    Network {
        op: String,
        url: String,
        message: String,
    },
    #[error("{op}: {message}")]
    Invalid { op: String, message: String },
    #[error("cannot set up the GitHub client for {url}: {message}")]
    Setup { url: String, message: String },
    /// A list longer than dagexec reads: refused whole rather than read in part.
    #[error("{op}: {what} number more than {}, the most dagexec reads; it reads none rather than a part", thousands(*.limit))]
    TooLong {
        op: String,
        what: String,
        limit: usize,
    },
}

/// `5000` → `5,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl ApiError {
    /// An answer (or a request) dagexec cannot use, for operation `op`.
    pub(crate) fn invalid(op: &str, message: impl Into<String>) -> ApiError {
        ApiError::Invalid {
            op: op.to_string(),
            message: message.into(),
        }
    }

    /// A failure of GitHub rather than of the request: unreachable, a 5xx, or a rate limit
    /// (a 403 or 429 the retry policy recognised) — worth waiting out, as the same request
    /// may succeed later.
    pub fn transient(&self) -> bool {
        match self {
            ApiError::Network { .. } => true,
            ApiError::Status { status, why, .. } => {
                *status >= 500 || *status == 429 || (*status == 403 && why.is_some())
            }
            _ => false,
        }
    }

    /// The HTTP status, when GitHub answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The most pages of 100 read from one list that is not refused whole when longer (the
/// comments on a pull request, the artifacts of a run): 10,000 items.
pub const MAX_LIST_PAGES: u32 = 100;

/// A GitHub REST + GraphQL client for one repository.
#[derive(Debug, Clone)]
pub struct Client {
    rest: Octocrab,
    graphql: Octocrab,
    api_url: String,
    pub repo: RepoName,
    pub policy: RetryPolicy,
    /// Requests sent (REST, GraphQL), retries included; shared by clones.
    sent: std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>,
}

impl Client {
    /// A client for `api_url` (`GITHUB_API_URL`: `https://api.github.com`, or
    /// `https://HOST/api/v3` on GitHub Enterprise Server) authenticated with `token`.
    pub fn new(api_url: &str, token: &Token, repo: RepoName) -> Result<Client, ApiError> {
        let api_url = api_url.trim_end_matches('/').to_string();
        Ok(Client {
            rest: octocrab(&api_url, Some(token))?,
            graphql: octocrab(&graphql_root(&api_url), Some(token))?,
            api_url,
            repo,
            policy: RetryPolicy::from_env(),
            sent: std::sync::Arc::default(),
        })
    }

    /// The requests this client (and its clones) sent so far: (REST, GraphQL), each retry
    /// counted.
    pub fn requests_sent(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.sent[0].load(Relaxed), self.sent[1].load(Relaxed))
    }

    /// The REST base URL.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// `/repos/{owner}/{repo}` + `rest`.
    pub fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.repo.owner, self.repo.name)
    }

    /// One REST `GET` whose answer is read as `T` (a serde struct of the fields dagexec
    /// reads): `op` names it in errors and logs (`pulls/get`), `path` is relative to the API
    /// root.
    pub async fn get<T: DeserializeOwned>(&self, op: &str, path: &str) -> Result<T, ApiError> {
        let call = Call::new(op, Method::GET, path, None::<&()>);
        self.json(call).await
    }

    /// One REST call with a JSON `body` (a `json!` value), its answer read as `T`
    /// ([`serde::de::IgnoredAny`] when dagexec needs nothing from it).
    pub async fn send<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        op: &str,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        self.json(Call::new(op, method, path, Some(body))).await
    }

    /// Every item of the REST list at `path` (with its query, if any), 100 a page from page
    /// 1 until a short page, at most `most` pages; `items` takes a page's items out of its
    /// answer (`identity` for a list GitHub answers as a JSON array).
    pub(crate) async fn pages<P: DeserializeOwned, T>(
        &self,
        op: &str,
        path: &str,
        most: u32,
        items: impl Fn(P) -> Vec<T>,
    ) -> Result<Vec<T>, ApiError> {
        let query = if path.contains('?') { '&' } else { '?' };
        let mut all = Vec::new();
        for page in 1..=most {
            let path = format!("{path}{query}per_page=100&page={page}");
            let list = items(self.get(op, &path).await?);
            let last = list.len() < 100;
            all.extend(list);
            if last {
                break;
            }
        }
        Ok(all)
    }

    /// One REST call with its answer as untyped JSON (`Null` for an empty body); the typed
    /// [`Client::get`] and [`Client::send`] are preferred.
    pub async fn rest(
        &self,
        op: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.json(Call::new(op, method, path, body)).await
    }

    /// One GraphQL query or mutation, its `data` read as `T`. GraphQL reports errors in a 200
    /// answer; they fail the call, but for an exhausted rate limit (`RATE_LIMITED`), waited out
    /// as a REST 429 is.
    pub async fn graphql<T: DeserializeOwned>(
        &self,
        op: &str,
        query: &str,
        variables: Value,
    ) -> Result<T, ApiError> {
        #[derive(Deserialize)]
        struct Answer {
            data: Option<Value>,
            #[serde(default)]
            errors: Vec<GraphqlError>,
        }
        #[derive(Deserialize)]
        struct GraphqlError {
            message: Option<String>,
            /// `RATE_LIMITED` (`RATE_LIMIT` in some answers): the rate limit is exhausted.
            #[serde(default, rename = "type")]
            kind: Option<String>,
        }
        let body = serde_json::json!({ "query": query, "variables": variables });
        let to = self.endpoint(true);
        let mut attempt = 0;
        let answer: Answer = loop {
            attempt += 1;
            let call = Call::new(op, Method::POST, "/graphql", Some(&body));
            let response = respond(to, call).await?;
            let limits = retry::RateLimitHeaders::from_headers(response.headers());
            let text = to.octo.body_to_string(response).await.unwrap_or_default();
            let answer: Answer = decode(op, &text)?;
            let limited =
                |e: &GraphqlError| matches!(e.kind.as_deref(), Some("RATE_LIMITED" | "RATE_LIMIT"));
            if !answer.errors.iter().any(limited) {
                break answer;
            }
            match self.policy.after_status(429, &limits, "", attempt, now()) {
                retry::RetryOrFail::Retry(wait) => {
                    tracing::warn!("{op}: GitHub's GraphQL rate limit; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                }
                retry::RetryOrFail::Fail(_) => break answer,
            }
        };
        if !answer.errors.is_empty() {
            let message = answer
                .errors
                .iter()
                .filter_map(|e| e.message.as_deref())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ApiError::invalid(op, format!("GraphQL error: {message}")));
        }
        let data = answer
            .data
            .ok_or_else(|| ApiError::invalid(op, "GitHub's GraphQL answer has no `data`"))?;
        serde_path_to_error::deserialize(data).map_err(|e| shape_error(op, e))
    }

    /// Sends one REST request under the retry policy; the body of the 2xx answer read as `T`.
    async fn json<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        call: Call<'_, B>,
    ) -> Result<T, ApiError> {
        let op = call.op;
        let to = self.endpoint(false);
        let response = respond(to, call).await?;
        decode(
            op,
            &to.octo.body_to_string(response).await.unwrap_or_default(),
        )
    }

    /// One REST `GET` whose answer is not JSON (an artifact's zip): the 2xx response, or a
    /// 3xx redirect as it came (its `Location` is for the caller to follow, and to decide
    /// which credentials go there), under the same retry policy as every other call.
    pub(crate) async fn get_raw(&self, op: &str, path: &str) -> Result<RawResponse, ApiError> {
        let call = Call {
            redirects: Redirects::Return,
            ..Call::new(op, Method::GET, path, None::<&()>)
        };
        respond(self.endpoint(false), call).await
    }

    /// The REST API, or the GraphQL root when `graphql`, each request counted.
    fn endpoint(&self, graphql: bool) -> Endpoint<'_> {
        Endpoint {
            octo: if graphql { &self.graphql } else { &self.rest },
            policy: &self.policy,
            base: &self.api_url,
            sent: Some(&self.sent[usize::from(graphql)]),
            storage: false,
        }
    }
}

/// Sends one request to `to` under its retry policy ([`retry::RetryPolicy`]): network errors,
/// 5xx and rate limits are retried, anything else that is not 2xx (nor, with
/// [`Redirects::Return`], 3xx) fails naming `op` with GitHub's message (the status, for an
/// artifact's storage). The answer is returned unread.
pub(super) async fn respond<B: Serialize + ?Sized>(
    to: Endpoint<'_>,
    call: Call<'_, B>,
) -> Result<RawResponse, ApiError> {
    let Call {
        op,
        method,
        path,
        body,
        redirects,
        resend,
    } = call;
    let octo = to.octo;
    // A GET is sent without a body, whatever it was given.
    let body = body.filter(|_| method != Method::GET);
    let mut attempt = 0;
    loop {
        attempt += 1;
        tracing::debug!(op, %method, url = to.shown(path), attempt, "GitHub call");
        if let Some(sent) = to.sent {
            sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let sent = async {
            let request = http::Request::builder().method(&method).uri(path);
            octo.execute(octo.build_request(request, body)?).await
        }
        .await;
        let next = match sent {
            Err(e) => {
                let next = match resend {
                    Resend::Always => to.policy.after_network_error(attempt),
                    Resend::OnlyRefused => retry::RetryOrFail::Fail(None),
                };
                if let retry::RetryOrFail::Fail(_) = next {
                    return Err(ApiError::Network {
                        op: op.to_string(),
                        url: to.shown(path),
                        message: error_chain(&e),
                    });
                }
                tracing::warn!("{op}: network error ({}); retrying", error_chain(&e));
                next
            }
            Ok(response) => {
                let status = response.status().as_u16();
                let redirect = (300..400).contains(&status) && redirects == Redirects::Return;
                if (200..300).contains(&status) || redirect {
                    return Ok(response);
                }
                let (message, next) = to.refused(response, resend, attempt).await;
                if let retry::RetryOrFail::Fail(why) = next {
                    return Err(ApiError::Status {
                        op: op.to_string(),
                        status,
                        message,
                        why,
                    });
                }
                tracing::warn!("{op}: GitHub answered {status} ({message}); retrying");
                next
            }
        };
        if let retry::RetryOrFail::Retry(wait) = next {
            tokio::time::sleep(wait).await;
        }
    }
}

/// An octocrab client for `base` (with `token` when given and not empty), under the
/// timeouts every call of dagexec's has.
pub(super) fn octocrab(base: &str, token: Option<&Token>) -> Result<Octocrab, ApiError> {
    let setup = |e: octocrab::Error| ApiError::Setup {
        url: base.to_string(),
        message: e.to_string(),
    };
    let mut b = Octocrab::builder().base_uri(base).map_err(setup)?;
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        b = b.personal_token(token.expose().to_string());
    }
    b.set_connect_timeout(Some(Duration::from_secs(30)))
        .set_read_timeout(Some(Duration::from_secs(120)))
        .build()
        .map_err(setup)
}

/// Where [`respond`] sends a request, and under which policy: GitHub's REST or GraphQL API
/// (`base`, its root; each request counted in `sent`; an error's body read for GitHub's
/// message), or an artifact's `storage` (a client of its own without the token for a signed
/// URL given whole, `base` its `scheme://host` for errors).
#[derive(Clone, Copy)]
pub(super) struct Endpoint<'a> {
    pub(super) octo: &'a Octocrab,
    pub(super) policy: &'a RetryPolicy,
    pub(super) base: &'a str,
    pub(super) sent: Option<&'a std::sync::atomic::AtomicU64>,
    pub(super) storage: bool,
}

impl Endpoint<'_> {
    /// Where a request to `path` went, as errors and the debug log name it: an artifact's
    /// storage by its `scheme://host` only (its URL is signed, a credential while it lasts).
    fn shown(&self, path: &str) -> String {
        if self.storage {
            self.base.to_string()
        } else {
            format!("{}{path}", self.base)
        }
    }

    /// What an answer that is neither 2xx nor a redirect returned says: GitHub's message (the
    /// status, from an artifact's storage), and whether the request is sent again.
    async fn refused(
        &self,
        response: RawResponse,
        resend: Resend,
        attempt: u32,
    ) -> (String, retry::RetryOrFail) {
        let status = response.status().as_u16();
        let limits = retry::RateLimitHeaders::from_headers(response.headers());
        let text = self.octo.body_to_string(response).await.unwrap_or_default();
        let message = if self.storage {
            format!("the artifact's storage answered HTTP {status}")
        } else {
            github_message(&text, status)
        };
        let next = match resend {
            // GitHub may have done it: not sent again.
            Resend::OnlyRefused if status >= 500 => retry::RetryOrFail::Fail(None),
            _ => self
                .policy
                .after_status(status, &limits, &message, attempt, now()),
        };
        (message, next)
    }
}

/// An answer as it came off the wire, its body unread.
pub(crate) type RawResponse =
    http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>>;

/// One request [`respond`] sends: `op` names it in errors.
pub(super) struct Call<'a, B: ?Sized> {
    op: &'a str,
    method: Method,
    path: &'a str,
    body: Option<&'a B>,
    redirects: Redirects,
    resend: Resend,
}

impl<'a, B: ?Sized> Call<'a, B> {
    /// A request sent again after every failure the policy retries, a 3xx failing it.
    pub(super) fn new(op: &'a str, method: Method, path: &'a str, body: Option<&'a B>) -> Self {
        Call {
            op,
            method,
            path,
            body,
            redirects: Redirects::Fail,
            resend: Resend::Always,
        }
    }
}

/// Which failures [`respond`] sends a request again after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resend {
    /// Every failure the retry policy retries (a request that does the same twice over).
    Always,
    /// Only a refusal that did nothing (a rate limit): a request GitHub may have carried out
    /// before failing to answer (5xx, a lost connection) is not sent twice.
    OnlyRefused,
}

/// What [`respond`] makes of a 3xx answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redirects {
    /// An error, as any other status that is not 2xx (JSON calls: GitHub does not redirect
    /// them).
    Fail,
    /// The answer itself, for the caller to follow.
    Return,
}

/// A 2xx answer read as `T` (an empty body as `null`). When it does not fit, the error names
/// the field (``head.ref: missing field `ref` ``), never the answer's content.
fn decode<T: DeserializeOwned>(op: &str, text: &str) -> Result<T, ApiError> {
    let text = if text.trim().is_empty() { "null" } else { text };
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| shape_error(op, e))
}

fn shape_error(op: &str, e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    let message = if inner.is_syntax() || inner.is_eof() {
        format!("GitHub's answer is not JSON ({inner})")
    } else if path == "." {
        format!("GitHub's answer is not what dagexec reads ({inner})")
    } else {
        format!("GitHub's answer is not what dagexec reads: `{path}`: {inner}")
    };
    ApiError::invalid(op, message)
}

/// A string, number or flag GitHub may send as `null` or leave out: its default then.
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// GitHub's `message` (and the first of its `errors`) from an error body.
fn github_message(text: &str, status: u16) -> String {
    /// GitHub's error body: `errors` items are objects with a `message`, or anything else.
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(default, deserialize_with = "nullable")]
        message: String,
        #[serde(default)]
        errors: Value,
    }
    let Ok(body) = serde_json::from_str::<ErrorBody>(text) else {
        let t = text.trim();
        return if t.is_empty() {
            format!("HTTP {status} with no message")
        } else {
            t.chars().take(200).collect()
        };
    };
    let mut m = if body.message.is_empty() {
        "no message".to_string()
    } else {
        body.message
    };
    if let Some(first) = body.errors.as_array().and_then(|e| e.first()) {
        let detail = match first.get("message").and_then(Value::as_str) {
            Some(message) => message.to_string(),
            None => first.to_string(),
        };
        m.push_str(&format!(" — {detail}"));
    }
    m
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Where GraphQL lives for a REST root: `…/api/v3` → `…/api` (GHES), otherwise the root itself.
pub fn graphql_root(api_url: &str) -> String {
    let api = api_url.trim_end_matches('/');
    api.strip_suffix("/v3").unwrap_or(api).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_and_rate_limits_are_transient_other_refusals_are_not() {
        let status = |status, why: Option<&str>| ApiError::Status {
            op: "op".into(),
            status,
            message: "m".into(),
            why: why.map(str::to_string),
        };
        let network = ApiError::Network {
            op: "op".into(),
            url: "u".into(),
            message: "reset".into(),
        };
        assert!(network.transient());
        assert!(status(502, Some("still failing after 6 attempts")).transient());
        assert!(status(429, Some("rate limited on every attempt")).transient());
        assert!(status(403, Some("rate limited on every attempt")).transient());
        for s in [400, 401, 404, 410, 422] {
            assert!(!status(s, None).transient(), "{s}");
        }
        assert!(!status(403, None).transient(), "a plain 403 is a refusal");
        let invalid = ApiError::Invalid {
            op: "op".into(),
            message: "m".into(),
        };
        assert!(!invalid.transient());
    }

    /// GraphQL answers an exhausted rate limit with a 200 whose `errors` say `RATE_LIMITED`
    /// (GitHub's GraphQL rate-limit docs): it failed the call at once, as a refusal, where
    /// every REST rate limit is waited out. It is waited out the same way.
    #[tokio::test]
    async fn a_graphql_rate_limit_is_waited_out() {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        let limited = serde_json::json!({ "errors": [{ "type": "RATE_LIMITED",
            "message": "API rate limit already exceeded for user ID 1." }] });
        Mock::given(method("POST"))
            .and(path("/graphql"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("retry-after", "1")
                    .set_body_json(limited),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        let data = serde_json::json!({ "data": { "n": 7 } });
        Mock::given(method("POST"))
            .and(path("/graphql"))
            .respond_with(ResponseTemplate::new(200).set_body_json(data))
            .mount(&server)
            .await;
        let repo = RepoName::parse("o/r").unwrap();
        let client = Client::new(&server.uri(), &Token::new("t"), repo).unwrap();
        let got: Value = client.graphql("op", "{ n }", Value::Null).await.unwrap();
        assert_eq!(got["n"], 7);
        assert_eq!(client.requests_sent(), (0, 2));
    }

    #[test]
    fn tokens_never_show_in_debug_or_display() {
        let t = Token::new("ghs_secret");
        assert_eq!(format!("{t:?}"), "Token(***)");
        assert_eq!(format!("{t}"), "***");
        assert_eq!(t.expose(), "ghs_secret");
    }

    #[test]
    fn graphql_lives_beside_the_rest_root() {
        assert_eq!(
            graphql_root("https://api.github.com"),
            "https://api.github.com"
        );
        assert_eq!(
            graphql_root("https://ghe.example/api/v3/"),
            "https://ghe.example/api"
        );
    }

    #[test]
    fn github_messages_are_extracted() {
        assert_eq!(
            github_message(
                r#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists"}]}"#,
                422
            ),
            "Validation Failed — A pull request already exists"
        );
        assert_eq!(github_message("", 502), "HTTP 502 with no message");
        assert_eq!(
            github_message("<html>bad gateway</html>", 502),
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn repo_names_parse() {
        assert_eq!(RepoName::parse("o/r").unwrap().to_string(), "o/r");
        assert!(RepoName::parse("o").is_none());
        assert!(RepoName::parse("o/r/x").is_none());
    }
}
