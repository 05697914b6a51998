//! The GitHub operations dagexec performs, each a documented REST operation (named by its
//! `OpenAPI` `operationId` in errors) or the one GraphQL mutation REST lacks.

use http::Method;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ApiError, Call, Client, Resend, nullable};

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

/// The fields of GitHub's pull request object dagexec reads (`pulls/get`, `pulls/list`,
/// `pulls/create`); also [`super::comments::PullHead`]'s source.
#[derive(Debug, Deserialize)]
pub(crate) struct PullJson {
    pub number: u64,
    #[serde(default, deserialize_with = "nullable")]
    pub node_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub html_url: String,
    #[serde(default, deserialize_with = "nullable")]
    pub draft: bool,
    /// `open` or `closed`.
    #[serde(default, deserialize_with = "nullable")]
    pub state: String,
    pub head: BranchJson,
    pub base: BranchJson,
}

/// `head` / `base` of a pull request.
#[derive(Debug, Deserialize)]
pub(crate) struct BranchJson {
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// `owner:branch`.
    #[serde(default)]
    pub label: Option<String>,
    /// Null once a fork is deleted.
    #[serde(default)]
    pub repo: Option<RepoJson>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RepoJson {
    pub owner: LoginJson,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoginJson {
    pub login: String,
}

impl From<PullJson> for PullRequest {
    fn from(p: PullJson) -> PullRequest {
        PullRequest {
            number: p.number,
            node_id: p.node_id,
            html_url: p.html_url,
            draft: p.draft,
            head_ref: p.head.git_ref,
            base_ref: p.base.git_ref,
        }
    }
}

/// A completed check run ([`Client::complete_check_run`]): `name` on `head_sha`, its
/// conclusion, title and summary (cut to GitHub's limit), and the link to its details.
#[derive(Debug, Clone, Copy)]
pub struct CompletedCheckRun<'a> {
    pub name: &'a str,
    pub head_sha: &'a str,
    pub conclusion: Conclusion,
    pub title: &'a str,
    pub summary: &'a str,
    pub details_url: Option<&'a str>,
}

/// A check run's ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    Success,
    Failure,
    ActionRequired,
    Neutral,
}

/// An answer dagexec reads only the `id` of.
#[derive(Deserialize)]
pub(crate) struct Id {
    pub id: u64,
}

impl Client {
    /// The repository's default branch (`repos/get`).
    pub async fn default_branch(&self) -> Result<String, ApiError> {
        #[derive(Deserialize)]
        struct RepoFields {
            default_branch: String,
        }
        let repo: RepoFields = self.get("repos/get", &self.repo_path("")).await?;
        Ok(repo.default_branch)
    }

    /// The open pull request whose head is `branch` in this repository, if any (`pulls/list`).
    pub async fn find_pull(&self, branch: &str) -> Result<Option<PullRequest>, ApiError> {
        let path = self.repo_path(&format!(
            "/pulls?state=open&head={}:{}",
            self.repo.owner,
            encode(branch)
        ));
        let list: Vec<PullJson> = self.get("pulls/list", &path).await?;
        // Filter again: a server that ignores `head` must not make us adopt a stranger's PR.
        Ok(list
            .into_iter()
            .map(PullRequest::from)
            .find(|p| p.head_ref == branch))
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
        let pull: PullJson = self
            .send(
                "pulls/create",
                Method::POST,
                &self.repo_path("/pulls"),
                &req,
            )
            .await?;
        Ok(pull.into())
    }

    /// Replaces a pull request's body (`pulls/update`).
    pub async fn update_pull_body(&self, number: u64, body: &str) -> Result<(), ApiError> {
        self.send::<IgnoredAny, _>(
            "pulls/update",
            Method::PATCH,
            &self.repo_path(&format!("/pulls/{number}")),
            &json!({ "body": body }),
        )
        .await
        .map(drop)
    }

    /// Marks a draft ready for review. REST cannot; GraphQL's
    /// `markPullRequestReadyForReview` can.
    pub async fn mark_ready(&self, pr: &PullRequest) -> Result<(), ApiError> {
        const MUTATION: &str = "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft number } } }";
        self.graphql::<IgnoredAny>(
            "graphql markPullRequestReadyForReview",
            MUTATION,
            json!({ "id": pr.node_id }),
        )
        .await
        .map(drop)
    }

    /// Creates a completed check run named `name` on `head_sha` (`checks/create`).
    pub async fn complete_check_run(&self, run: &CompletedCheckRun<'_>) -> Result<u64, ApiError> {
        let summary = crate::pure::clip::bytes(run.summary, MAX_BODY, CUT_MARK);
        let mut req = json!({
            "name": run.name,
            "head_sha": run.head_sha,
            "status": "completed",
            "conclusion": run.conclusion,
            "output": { "title": run.title, "summary": summary },
        });
        if let Some(url) = run.details_url {
            req["details_url"] = url.into();
        }
        let run: Id = self
            .send(
                "checks/create",
                Method::POST,
                &self.repo_path("/check-runs"),
                &req,
            )
            .await?;
        Ok(run.id)
    }

    /// Whether `run` is on its commit already: a latest check run of its name there has its
    /// conclusion, title and details URL (`checks/list-for-ref`).
    pub async fn has_check_run(&self, run: &CompletedCheckRun<'_>) -> Result<bool, ApiError> {
        #[derive(Deserialize)]
        struct CheckOutput {
            title: Option<String>,
        }
        #[derive(Deserialize)]
        struct Listed {
            conclusion: Option<Value>,
            output: CheckOutput,
            details_url: Option<String>,
        }
        #[derive(Deserialize)]
        struct List {
            check_runs: Vec<Listed>,
        }
        let path = self.repo_path(&format!(
            "/commits/{}/check-runs?check_name={}&filter=latest",
            encode_segment(run.head_sha),
            encode(run.name)
        ));
        let list: List = self.get("checks/list-for-ref", &path).await?;
        let conclusion = serde_json::to_value(run.conclusion).ok();
        Ok(list.check_runs.iter().any(|there| {
            there.conclusion == conclusion
                && there.output.title.as_deref() == Some(run.title)
                && there.details_url.as_deref() == run.details_url
        }))
    }

    /// Starts `workflow` (a file name such as `dagexec.yml`, or an id) on `git_ref` with
    /// `inputs` (`actions/create-workflow-dispatch`).
    pub async fn dispatch(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &serde_json::Map<String, Value>,
    ) -> Result<(), ApiError> {
        self.create_dispatch::<IgnoredAny>(workflow, git_ref, inputs, false)
            .await
            .map(drop)
    }

    /// The one `actions/create-workflow-dispatch` request: `workflow` on `git_ref` with
    /// `inputs`, asking for the new run's details when `return_run_details` (the field is left
    /// out otherwise, as GitHub Enterprise Server versions before it expect). The answer is
    /// read as `T` (empty, `null`, without the details).
    pub(crate) async fn create_dispatch<T: DeserializeOwned>(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &serde_json::Map<String, Value>,
        return_run_details: bool,
    ) -> Result<T, ApiError> {
        let path = self.repo_path(&format!(
            "/actions/workflows/{}/dispatches",
            encode(workflow)
        ));
        let op = "actions/create-workflow-dispatch";
        // Asking for the run's details is asking to know which run started: that dispatch is
        // never sent twice blindly (a 5xx may come after GitHub started it; the caller looks
        // for the run first, `conduct`). Without details nobody could look: retried as any call.
        let send = async |inputs| {
            let mut body = json!({ "ref": git_ref, "inputs": inputs });
            if return_run_details {
                body["return_run_details"] = true.into();
            }
            let resend = if return_run_details {
                Resend::OnlyRefused
            } else {
                Resend::Always
            };
            let call = Call::new(op, Method::POST, &path, Some(&body));
            self.json(Call { resend, ..call }).await
        };
        match send(inputs).await {
            // A workflow written before one of dagexec's optional inputs existed declares no
            // such input, and GitHub refuses the whole dispatch (422 "Unexpected inputs
            // provided") without starting a run: the same dispatch without them.
            Err(ApiError::Status {
                status: 422,
                message,
                ..
            }) if message.contains("Unexpected inputs")
                && OPTIONAL_DISPATCH_INPUTS
                    .iter()
                    .any(|k| inputs.contains_key(*k)) =>
            {
                tracing::warn!(
                    "GitHub refused the dispatch of {workflow} on {git_ref} ({message}); dispatching again without {OPTIONAL_DISPATCH_INPUTS:?}"
                );
                let mut fewer = inputs.clone();
                for k in OPTIONAL_DISPATCH_INPUTS {
                    fewer.remove(*k);
                }
                send(&fewer).await
            }
            answer => answer,
        }
    }

    /// Artifact names → ids of a workflow run (`actions/list-workflow-run-artifacts`), for links.
    pub async fn run_artifacts(
        &self,
        run_id: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, ApiError> {
        let list = self.artifacts_of(run_id, None).await?;
        Ok(list.into_iter().map(|a| (a.name, a.id)).collect())
    }
}

/// Dispatch inputs a workflow written by an older `dagexec init` may not declare: a dispatch
/// GitHub refuses for an unexpected input is sent again without them. `build` is the SHA-256
/// pin of the dagexec binary (`scripts/install-action.sh`); without it, the started run's jobs
/// build the action afresh rather than run a restored build.
pub const OPTIONAL_DISPATCH_INPUTS: &[&str] = &["build"];

/// What [`encode`] escapes: everything but RFC 3986's unreserved characters and `/`.
const KEEP_SLASH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// What [`encode_segment`] escapes: `/` too.
const SEGMENT: &AsciiSet = &KEEP_SLASH.add(b'/');

/// Percent-encodes what may not appear raw in a query value or a path (a branch name keeps
/// its `/`; spaces, `&`, `:`, `#`, `%` and non-ASCII UTF-8 bytes are escaped).
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, KEEP_SLASH).to_string()
}

/// Percent-encodes one path segment: as [`encode`], and `/` too, so a value (a login, an id)
/// can never change which path is asked for.
pub fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The bound on a body dagexec writes (a comment's, a check run's summary), in bytes: GitHub's
/// limit is 65,536 characters, and this stays clear of it.
pub(super) const MAX_BODY: usize = 65_000;

/// What a body cut to [`MAX_BODY`] ends with ([`crate::pure::clip::bytes`]).
pub(super) const CUT_MARK: &str = "\n\n… (cut to fit GitHub's limit)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_branch_slashes_and_escapes_the_rest() {
        assert_eq!(encode("dagexec/add-auth"), "dagexec/add-auth");
        assert_eq!(encode("a b&c"), "a%20b%26c");
        assert_eq!(encode("feat/x_1.2~rc"), "feat/x_1.2~rc");
        assert_eq!(encode("dagexec/añadir auth"), "dagexec/a%C3%B1adir%20auth");
        assert_eq!(
            encode("日本/ブランチ"),
            "%E6%97%A5%E6%9C%AC/%E3%83%96%E3%83%A9%E3%83%B3%E3%83%81"
        );
        assert_eq!(encode("a:b?c=d#e%f+g"), "a%3Ab%3Fc%3Dd%23e%25f%2Bg");
        assert_eq!(encode("tab\tnl\n"), "tab%09nl%0A");
    }

    #[test]
    fn a_segment_escapes_slashes_too() {
        assert_eq!(encode_segment("a/../b"), "a%2F..%2Fb");
        assert_eq!(encode_segment("octo-cat_1"), "octo-cat_1");
        assert_eq!(encode_segment("ü b"), "%C3%BC%20b");
    }

    #[test]
    fn a_body_is_cut_on_a_character_with_the_mark() {
        let s = "é".repeat(100);
        let c = crate::pure::clip::bytes(&s, 60, CUT_MARK);
        assert!(c.len() < 80 && c.ends_with("limit)"), "{c}");
        assert_eq!(crate::pure::clip::bytes("short", 60, CUT_MARK), "short");
    }
}
