//! The GitHub operations dagexec performs, each a documented REST operation (named by its
//! OpenAPI `operationId` in errors) or the one GraphQL mutation REST lacks.

use http::Method;
use serde_json::{Value, json};

use super::{ApiError, Client};

/// The pull request an execution branch is reviewed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub node_id: String,
    pub html_url: String,
    pub draft: bool,
    pub head_ref: String,
    pub base_ref: String,
}

impl PullRequest {
    fn from_json(v: &Value) -> Option<PullRequest> {
        Some(PullRequest {
            number: v.get("number")?.as_u64()?,
            node_id: v
                .get("node_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            html_url: v
                .get("html_url")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            draft: v.get("draft").and_then(Value::as_bool).unwrap_or(false),
            head_ref: v["head"]["ref"].as_str().unwrap_or("").to_string(),
            base_ref: v["base"]["ref"].as_str().unwrap_or("").to_string(),
        })
    }
}

/// A check run's ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    Success,
    Failure,
    ActionRequired,
    Neutral,
}

impl Conclusion {
    pub fn as_str(self) -> &'static str {
        match self {
            Conclusion::Success => "success",
            Conclusion::Failure => "failure",
            Conclusion::ActionRequired => "action_required",
            Conclusion::Neutral => "neutral",
        }
    }
}

fn bad_answer(op: &str) -> ApiError {
    ApiError::Invalid {
        op: op.to_string(),
        message: "GitHub's answer lacks the fields dagexec reads".into(),
    }
}

impl Client {
    /// The repository's default branch (`repos/get`).
    pub async fn default_branch(&self) -> Result<String, ApiError> {
        let v = self
            .rest("repos/get", Method::GET, &self.repo_path(""), None)
            .await?;
        v.get("default_branch")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad_answer("repos/get"))
    }

    /// The open pull request whose head is `branch` in this repository, if any (`pulls/list`).
    pub async fn find_pull(&self, branch: &str) -> Result<Option<PullRequest>, ApiError> {
        let path = self.repo_path(&format!(
            "/pulls?state=open&head={}:{}",
            self.repo.owner,
            encode(branch)
        ));
        let v = self.rest("pulls/list", Method::GET, &path, None).await?;
        let list = v.as_array().ok_or_else(|| bad_answer("pulls/list"))?;
        // Filter again: a server that ignores `head` must not make us adopt a stranger's PR.
        Ok(list
            .iter()
            .filter_map(PullRequest::from_json)
            .find(|p| p.head_ref == branch))
    }

    /// The pull request `number` (`pulls/get`).
    pub async fn get_pull(&self, number: u64) -> Result<PullRequest, ApiError> {
        let v = self
            .rest(
                "pulls/get",
                Method::GET,
                &self.repo_path(&format!("/pulls/{number}")),
                None,
            )
            .await?;
        PullRequest::from_json(&v).ok_or_else(|| bad_answer("pulls/get"))
    }

    /// Opens a pull request (`pulls/create`).
    pub async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, ApiError> {
        let req =
            json!({ "title": title, "head": head, "base": base, "body": body, "draft": draft });
        let v = self
            .rest(
                "pulls/create",
                Method::POST,
                &self.repo_path("/pulls"),
                Some(&req),
            )
            .await?;
        PullRequest::from_json(&v).ok_or_else(|| bad_answer("pulls/create"))
    }

    /// Replaces a pull request's body (`pulls/update`).
    pub async fn update_pull_body(&self, number: u64, body: &str) -> Result<(), ApiError> {
        let req = json!({ "body": body });
        self.rest(
            "pulls/update",
            Method::PATCH,
            &self.repo_path(&format!("/pulls/{number}")),
            Some(&req),
        )
        .await
        .map(drop)
    }

    /// Marks a draft ready for review. REST cannot; GraphQL's
    /// `markPullRequestReadyForReview` can.
    pub async fn mark_ready(&self, pr: &PullRequest) -> Result<(), ApiError> {
        const MUTATION: &str = "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft number } } }";
        self.graphql(
            "graphql markPullRequestReadyForReview",
            MUTATION,
            json!({ "id": pr.node_id }),
        )
        .await
        .map(drop)
    }

    /// Creates a completed check run named `name` on `head_sha` (`checks/create`).
    pub async fn complete_check_run(
        &self,
        name: &str,
        head_sha: &str,
        conclusion: Conclusion,
        title: &str,
        summary: &str,
        details_url: Option<&str>,
    ) -> Result<u64, ApiError> {
        let mut req = json!({
            "name": name,
            "head_sha": head_sha,
            "status": "completed",
            "conclusion": conclusion.as_str(),
            "output": { "title": title, "summary": clip(summary, 65_000) },
        });
        if let Some(url) = details_url {
            req["details_url"] = url.into();
        }
        let v = self
            .rest(
                "checks/create",
                Method::POST,
                &self.repo_path("/check-runs"),
                Some(&req),
            )
            .await?;
        v.get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad_answer("checks/create"))
    }

    /// Starts `workflow` (a file name such as `dagexec.yml`, or an id) on `git_ref` with
    /// `inputs` (`actions/create-workflow-dispatch`).
    pub async fn dispatch(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &serde_json::Map<String, Value>,
    ) -> Result<(), ApiError> {
        let req = json!({ "ref": git_ref, "inputs": inputs });
        self.rest(
            "actions/create-workflow-dispatch",
            Method::POST,
            &self.repo_path(&format!(
                "/actions/workflows/{}/dispatches",
                encode(workflow)
            )),
            Some(&req),
        )
        .await
        .map(drop)
    }

    /// Artifact names → ids of a workflow run (`actions/list-workflow-run-artifacts`), for links.
    pub async fn run_artifacts(
        &self,
        run_id: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, ApiError> {
        let v = self
            .rest(
                "actions/list-workflow-run-artifacts",
                Method::GET,
                &self.repo_path(&format!("/actions/runs/{run_id}/artifacts?per_page=100")),
                None,
            )
            .await?;
        Ok(v.get("artifacts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), a.get("id")?.as_u64()?)))
            .collect())
    }
}

/// Percent-encodes what may not appear raw in a path segment or query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// At most `max` bytes, cut on a character boundary with a note.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n\n… (cut to fit GitHub's limit)", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_branch_slashes_and_escapes_the_rest() {
        assert_eq!(encode("dagexec/add-auth"), "dagexec/add-auth");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }

    #[test]
    fn clipping_respects_characters() {
        let s = "é".repeat(100);
        let c = clip(&s, 60);
        assert!(c.len() < 80 && c.ends_with("limit)"), "{c}");
        assert_eq!(clip("short", 60), "short");
    }
}
