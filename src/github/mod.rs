//! The GitHub edge: one [`Client`] (octocrab underneath, base URL from `GITHUB_API_URL`)
//! through which every REST and GraphQL call goes, under one retry policy ([`retry`]).
//! Tokens live in [`Token`], whose `Debug` never shows them. Typed operations are in [`ops`].

pub mod app;
pub mod comments;
pub mod ops;
pub mod retry;
pub mod runs;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use octocrab::Octocrab;
use serde_json::Value;

pub use retry::Policy;

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
}

impl ApiError {
    /// The HTTP status, when GitHub answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A GitHub REST + GraphQL client for one repository.
#[derive(Debug, Clone)]
pub struct Client {
    rest: Octocrab,
    graphql: Octocrab,
    api_url: String,
    pub repo: RepoName,
    pub policy: Policy,
}

impl Client {
    /// A client for `api_url` (`GITHUB_API_URL`: `https://api.github.com`, or
    /// `https://HOST/api/v3` on GitHub Enterprise Server) authenticated with `token`.
    pub fn new(api_url: &str, token: &Token, repo: RepoName) -> Result<Client, ApiError> {
        let api_url = api_url.trim_end_matches('/').to_string();
        let build = |base: &str| -> Result<Octocrab, ApiError> {
            let setup = |e: octocrab::Error| ApiError::Setup {
                url: base.to_string(),
                message: e.to_string(),
            };
            let mut b = Octocrab::builder().base_uri(base).map_err(setup)?;
            if !token.is_empty() {
                b = b.personal_token(token.expose().to_string());
            }
            b.set_connect_timeout(Some(Duration::from_secs(30)))
                .set_read_timeout(Some(Duration::from_secs(120)))
                .build()
                .map_err(setup)
        };
        Ok(Client {
            rest: build(&api_url)?,
            graphql: build(&graphql_root(&api_url))?,
            api_url,
            repo,
            policy: Policy::default(),
        })
    }

    /// The REST base URL.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// `/repos/{owner}/{repo}` + `rest`.
    pub fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.repo.owner, self.repo.name)
    }

    /// One REST call: `op` names it in errors and logs (`pulls/create`), `path` is relative to
    /// the API root. The answer's JSON (`Null` for an empty body).
    pub async fn rest(
        &self,
        op: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.send(&self.rest, op, method, path, body).await
    }

    /// One GraphQL query or mutation. GraphQL reports errors in a 200 answer; they fail the call.
    pub async fn graphql(
        &self,
        op: &str,
        query: &str,
        variables: Value,
    ) -> Result<Value, ApiError> {
        let body = serde_json::json!({ "query": query, "variables": variables });
        let v = self
            .send(&self.graphql, op, Method::POST, "/graphql", Some(&body))
            .await?;
        if let Some(errors) = v.get("errors").and_then(Value::as_array) {
            if !errors.is_empty() {
                let message = errors
                    .iter()
                    .filter_map(|e| e.get("message").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(ApiError::Invalid {
                    op: op.to_string(),
                    message: format!("GraphQL error: {message}"),
                });
            }
        }
        Ok(v.get("data").cloned().unwrap_or(Value::Null))
    }

    async fn send(
        &self,
        octo: &Octocrab,
        op: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            tracing::debug!(op, %method, path, attempt, "GitHub call");
            let sent = match method.as_str() {
                "GET" => octo._get(path).await,
                "POST" => octo._post(path, body).await,
                "PATCH" => octo._patch(path, body).await,
                "PUT" => octo._put(path, body).await,
                "DELETE" => octo._delete(path, body).await,
                other => {
                    return Err(ApiError::Invalid {
                        op: op.to_string(),
                        message: format!("unsupported method {other}"),
                    });
                }
            };
            let next = match sent {
                Err(e) => {
                    let next = self.policy.after_network_error(attempt);
                    if let retry::Next::Fail(_) = next {
                        return Err(ApiError::Network {
                            op: op.to_string(),
                            url: format!("{}{path}", self.api_url),
                            message: error_chain(&e),
                        });
                    }
                    tracing::warn!("{op}: network error ({}); retrying", error_chain(&e));
                    next
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let limits = retry::Limits::from_headers(response.headers());
                    let text = octo.body_to_string(response).await.unwrap_or_default();
                    if (200..300).contains(&status) {
                        if text.trim().is_empty() {
                            return Ok(Value::Null);
                        }
                        return serde_json::from_str(&text).map_err(|e| ApiError::Invalid {
                            op: op.to_string(),
                            message: format!("GitHub's answer is not JSON ({e})"),
                        });
                    }
                    let message = github_message(&text, status);
                    match self
                        .policy
                        .after_status(status, &limits, &message, attempt, now())
                    {
                        retry::Next::Fail(why) => {
                            return Err(ApiError::Status {
                                op: op.to_string(),
                                status,
                                message,
                                why,
                            });
                        }
                        retry @ retry::Next::Retry(_) => {
                            tracing::warn!("{op}: GitHub answered {status} ({message}); retrying");
                            retry
                        }
                    }
                }
            };
            if let retry::Next::Retry(wait) = next {
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// GitHub's `message` (and the first of its `errors`) from an error body.
fn github_message(text: &str, status: u16) -> String {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        let t = text.trim();
        return if t.is_empty() {
            format!("HTTP {status} with no message")
        } else {
            t.chars().take(200).collect()
        };
    };
    let mut m = v
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message")
        .to_string();
    if let Some(first) = v
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        let detail = first
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| first.to_string());
        m.push_str(&format!(" — {detail}"));
    }
    m
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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
