//! Workflow runs the conductor starts and watches (`schedule: eager` on Actions): a dispatch
//! that answers with the new run's id (`return_run_details`), a run's state, its artifacts,
//! and an artifact's zip archive.
//!
//! The answers are read into serde structs of our own, keeping only the fields dagexec uses;
//! an answer without them is [`ApiError::Invalid`]. An artifact download follows GitHub's
//! redirect to its storage by hand, without the token: the redirect target is another host
//! with a signed URL, and the repository's token must never be sent there.

use std::time::Duration;

use http::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ops::encode;
use super::{ApiError, Client};

/// A workflow run, as far as the conductor cares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkflowRun {
    pub id: u64,
    /// `queued`, `in_progress`, `completed`, `waiting`, `requested`, `pending`.
    pub status: Option<String>,
    /// When completed: `success`, `failure`, `cancelled`, `timed_out`, `skipped`, …
    pub conclusion: Option<String>,
    /// Which attempt of the run this is (a re-run is attempt 2, …).
    #[serde(default = "one")]
    pub run_attempt: u32,
    #[serde(default)]
    pub html_url: String,
    /// The run-name (`run-name:` of the workflow), which names the task and attempt.
    #[serde(default)]
    pub display_title: String,
}

fn one() -> u32 {
    1
}

impl WorkflowRun {
    /// The run has ended (whatever its conclusion).
    pub fn completed(&self) -> bool {
        self.status.as_deref() == Some("completed")
    }
}

/// An artifact of a run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Artifact {
    pub id: u64,
    pub name: String,
    #[serde(default)]
    pub size_in_bytes: u64,
    #[serde(default)]
    pub expired: bool,
}

#[derive(Deserialize)]
struct ArtifactList {
    #[serde(default)]
    artifacts: Vec<Artifact>,
}

#[derive(Deserialize)]
struct DispatchDetails {
    workflow_run_id: u64,
}

fn invalid(op: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::Invalid {
        op: op.to_string(),
        message: format!("GitHub's answer lacks what dagexec reads ({e})"),
    }
}

impl Client {
    /// Starts `workflow` on `git_ref` with `inputs` and returns the new run's id
    /// (`actions/create-workflow-dispatch` with `return_run_details: true`). `None` when the
    /// server answered without details (a GitHub Enterprise Server that predates them).
    pub async fn dispatch_run(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &serde_json::Map<String, Value>,
    ) -> Result<Option<u64>, ApiError> {
        const OP: &str = "actions/create-workflow-dispatch";
        let req = json!({ "ref": git_ref, "inputs": inputs, "return_run_details": true });
        let v = self
            .rest(
                OP,
                Method::POST,
                &self.repo_path(&format!(
                    "/actions/workflows/{}/dispatches",
                    encode(workflow)
                )),
                Some(&req),
            )
            .await?;
        if v.is_null() {
            return Ok(None);
        }
        let d: DispatchDetails = serde_json::from_value(v).map_err(|e| invalid(OP, e))?;
        Ok(Some(d.workflow_run_id))
    }

    /// One workflow run (`actions/get-workflow-run`).
    pub async fn workflow_run(&self, run_id: u64) -> Result<WorkflowRun, ApiError> {
        const OP: &str = "actions/get-workflow-run";
        let v = self
            .rest(
                OP,
                Method::GET,
                &self.repo_path(&format!(
                    "/actions/runs/{run_id}?exclude_pull_requests=true"
                )),
                None,
            )
            .await?;
        serde_json::from_value(v).map_err(|e| invalid(OP, e))
    }

    /// The artifacts of a run (`actions/list-workflow-run-artifacts`, `name` filtered when
    /// given).
    pub async fn artifacts_of(
        &self,
        run_id: u64,
        name: Option<&str>,
    ) -> Result<Vec<Artifact>, ApiError> {
        const OP: &str = "actions/list-workflow-run-artifacts";
        let filter = name
            .map(|n| format!("&name={}", encode(n)))
            .unwrap_or_default();
        let v = self
            .rest(
                OP,
                Method::GET,
                &self.repo_path(&format!(
                    "/actions/runs/{run_id}/artifacts?per_page=100{filter}"
                )),
                None,
            )
            .await?;
        let list: ArtifactList = serde_json::from_value(v).map_err(|e| invalid(OP, e))?;
        Ok(list.artifacts)
    }

    /// An artifact's zip archive (`actions/download-artifact`), at most `limit` bytes.
    /// GitHub answers with a redirect to its storage; that URL is fetched without the token.
    pub async fn download_artifact(&self, id: u64, limit: u64) -> Result<Vec<u8>, ApiError> {
        const OP: &str = "actions/download-artifact";
        let path = self.repo_path(&format!("/actions/artifacts/{id}/zip"));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let next = match self.rest._get(&path).await {
                Err(e) => match self.policy.after_network_error(attempt) {
                    super::retry::Next::Fail(_) => {
                        return Err(ApiError::Network {
                            op: OP.into(),
                            url: format!("{}{path}", self.api_url),
                            message: super::error_chain(&e),
                        });
                    }
                    next => next,
                },
                Ok(response) => {
                    let status = response.status().as_u16();
                    if (300..400).contains(&status) {
                        let location = response
                            .headers()
                            .get(http::header::LOCATION)
                            .and_then(|l| l.to_str().ok())
                            .map(str::to_string)
                            .ok_or_else(|| invalid(OP, "a redirect without a Location"))?;
                        return fetch_unauthenticated(OP, &location, limit).await;
                    }
                    let limits = super::retry::Limits::from_headers(response.headers());
                    if (200..300).contains(&status) {
                        return read_limited(OP, response, limit).await;
                    }
                    let text = self.rest.body_to_string(response).await.unwrap_or_default();
                    let message = super::github_message(&text, status);
                    match self
                        .policy
                        .after_status(status, &limits, &message, attempt, super::now())
                    {
                        super::retry::Next::Fail(why) => {
                            return Err(ApiError::Status {
                                op: OP.into(),
                                status,
                                message,
                                why,
                            });
                        }
                        next => next,
                    }
                }
            };
            if let super::retry::Next::Retry(wait) = next {
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The body of `response`, refused once it passes `limit` bytes.
async fn read_limited(
    op: &str,
    response: http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>>,
    limit: u64,
) -> Result<Vec<u8>, ApiError> {
    use http_body_util::BodyExt;
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::Network {
            op: op.into(),
            url: String::new(),
            message: super::error_chain(&e),
        })?;
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
            if out.len() as u64 > limit {
                return Err(ApiError::Invalid {
                    op: op.into(),
                    message: format!("the artifact is larger than {limit} bytes; refused"),
                });
            }
        }
    }
    Ok(out)
}

/// GETs `url` with no credentials (a signed storage URL), at most `limit` bytes.
async fn fetch_unauthenticated(op: &str, url: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| invalid(op, format!("a redirect to an invalid URL: {e}")))?;
    let base = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let setup = |e: octocrab::Error| ApiError::Setup {
        url: base.clone(),
        message: e.to_string(),
    };
    let octo = octocrab::Octocrab::builder()
        .base_uri(base.as_str())
        .map_err(setup)?
        .set_connect_timeout(Some(Duration::from_secs(30)))
        .set_read_timeout(Some(Duration::from_secs(120)))
        .build()
        .map_err(setup)?;
    let response = octo._get(url).await.map_err(|e| ApiError::Network {
        op: op.into(),
        url: base.clone(),
        message: super::error_chain(&e),
    })?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(ApiError::Invalid {
            op: op.into(),
            message: format!("the artifact's storage answered HTTP {status}"),
        });
    }
    read_limited(op, response, limit).await
}
