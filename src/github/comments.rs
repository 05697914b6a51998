//! Pull request conversation operations for `/execute` comments: the commenter's permission,
//! the 👀 acknowledgement, replies, and the one status comment dagexec keeps up to date
//! (found again by a hidden marker). Each is a documented REST operation named by its
//! OpenAPI `operationId` in errors.
//!
//! Anyone who can comment can write a comment that starts with dagexec's marker, so a listed
//! comment carries its author ([`Author`]), and the marked comments dagexec updates or
//! believes are chosen by the caller (see `actions::comment::trusted_marked`), never by the
//! marker alone.

use http::Method;
use serde_json::{Value, json};

use super::ops::{clip, encode};
use super::{ApiError, Client};

/// GitHub's limit on a comment body is 65,536 characters; stay clear of it.
const MAX_BODY: usize = 65_000;

/// The head of a pull request, as `/execute` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullHead {
    /// The head branch (`head.ref`).
    pub head_ref: String,
    /// The owner of the head repository (from `head.label`, `owner:branch`): another owner
    /// means the branch lives in a fork, not in this repository.
    pub head_owner: String,
    /// `open` or `closed`.
    pub state: String,
}

/// Who wrote a comment, from the REST comment object: `user.login`, `user.type` and the id of
/// `performed_via_github_app` (the App whose token wrote it; GitHub Actions for `GITHUB_TOKEN`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Author {
    pub login: String,
    /// `user.type` is `Bot`.
    pub bot: bool,
    pub app_id: Option<u64>,
}

/// A comment on an issue or pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueComment {
    pub id: u64,
    pub body: String,
    pub author: Author,
}

impl IssueComment {
    /// Whether the body starts with `marker` (leading whitespace aside).
    pub fn starts_with(&self, marker: &str) -> bool {
        self.body.trim_start().starts_with(marker)
    }

    /// From a REST comment object; `None` without an id.
    fn from_json(c: &Value) -> Option<IssueComment> {
        Some(IssueComment {
            id: c.get("id")?.as_u64()?,
            body: c.get("body").and_then(Value::as_str).unwrap_or("").into(),
            author: Author {
                login: c["user"]["login"].as_str().unwrap_or("").into(),
                bot: c["user"]["type"] == "Bot",
                app_id: c["performed_via_github_app"]["id"].as_u64(),
            },
        })
    }
}

fn bad_answer(op: &str, what: &str) -> ApiError {
    ApiError::Invalid {
        op: op.to_string(),
        message: format!("GitHub's answer lacks {what}"),
    }
}

fn id_of(op: &str, v: &Value) -> Result<u64, ApiError> {
    v.get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad_answer(op, "the comment's `id`"))
}

impl Client {
    /// `user`'s access to the repository: (`permission`, `role_name`)
    /// (`repos/get-collaborator-permission-level`). `permission` is `admin`, `write`, `read` or
    /// `none`; `role_name` also tells `maintain` and `triage` (and custom roles) apart.
    pub async fn permission(&self, user: &str) -> Result<(String, Option<String>), ApiError> {
        const OP: &str = "repos/get-collaborator-permission-level";
        // A login never holds a slash; make sure one cannot change the path either.
        let user = encode(user).replace('/', "%2F");
        let v = self
            .rest(
                OP,
                Method::GET,
                &self.repo_path(&format!("/collaborators/{user}/permission")),
                None,
            )
            .await?;
        let permission = v
            .get("permission")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_answer(OP, "`permission`"))?;
        let role = v.get("role_name").and_then(Value::as_str);
        Ok((permission.to_string(), role.map(str::to_string)))
    }

    /// Reacts to an issue or pull request comment (`reactions/create-for-issue-comment`);
    /// `content` is one of GitHub's reaction names (`eyes`, `+1`, `rocket`, …). Reacting twice
    /// is not an error.
    pub async fn react(&self, comment_id: u64, content: &str) -> Result<(), ApiError> {
        self.rest(
            "reactions/create-for-issue-comment",
            Method::POST,
            &self.repo_path(&format!("/issues/comments/{comment_id}/reactions")),
            Some(&json!({ "content": content })),
        )
        .await
        .map(drop)
    }

    /// Comments on issue or pull request `issue_number` (`issues/create-comment`); the new
    /// comment's id.
    pub async fn comment(&self, issue_number: u64, body: &str) -> Result<u64, ApiError> {
        const OP: &str = "issues/create-comment";
        let v = self
            .rest(
                OP,
                Method::POST,
                &self.repo_path(&format!("/issues/{issue_number}/comments")),
                Some(&json!({ "body": clip(body, MAX_BODY) })),
            )
            .await?;
        id_of(OP, &v)
    }

    /// Replaces comment `id`'s body (`issues/update-comment`).
    pub async fn update_comment(&self, id: u64, body: &str) -> Result<(), ApiError> {
        self.rest(
            "issues/update-comment",
            Method::PATCH,
            &self.repo_path(&format!("/issues/comments/{id}")),
            Some(&json!({ "body": clip(body, MAX_BODY) })),
        )
        .await
        .map(drop)
    }

    /// The first 100 comments on issue or pull request `issue_number`, oldest first
    /// (`issues/list-comments`). dagexec's status comment comes early in a thread, so one
    /// page is enough to find it.
    pub async fn list_comments(&self, issue_number: u64) -> Result<Vec<IssueComment>, ApiError> {
        const OP: &str = "issues/list-comments";
        let v = self
            .rest(
                OP,
                Method::GET,
                &self.repo_path(&format!("/issues/{issue_number}/comments?per_page=100")),
                None,
            )
            .await?;
        let list = v
            .as_array()
            .ok_or_else(|| bad_answer(OP, "the list of comments"))?;
        Ok(list.iter().filter_map(IssueComment::from_json).collect())
    }

    /// Keeps one comment per `marker` on `issue_number`: updates the oldest of `own` (the
    /// comments dagexec wrote, as the caller found them) whose body starts with `marker`
    /// (leading whitespace aside), or creates one. `body` is prefixed with the marker when it
    /// does not start with it, so the comment is always found again and a second call never
    /// creates a second comment. The comment's id.
    pub async fn upsert_marked_comment(
        &self,
        issue_number: u64,
        marker: &str,
        body: &str,
        own: &[IssueComment],
    ) -> Result<u64, ApiError> {
        let body = if body.trim_start().starts_with(marker) {
            clip(body, MAX_BODY)
        } else {
            clip(&format!("{marker}\n{body}"), MAX_BODY)
        };
        match own.iter().find(|c| c.starts_with(marker)) {
            Some(c) if c.body == body => Ok(c.id),
            Some(c) => self.update_comment(c.id, &body).await.map(|()| c.id),
            None => self.comment(issue_number, &body).await,
        }
    }

    /// The head of pull request `number` (`pulls/get`): its branch, the owner of the
    /// repository that branch lives in, and whether it is open.
    pub async fn pull_head(&self, number: u64) -> Result<PullHead, ApiError> {
        const OP: &str = "pulls/get";
        let v = self
            .rest(
                OP,
                Method::GET,
                &self.repo_path(&format!("/pulls/{number}")),
                None,
            )
            .await?;
        let head_ref = v["head"]["ref"]
            .as_str()
            .ok_or_else(|| bad_answer(OP, "`head.ref`"))?;
        // `head.label` is `owner:branch`; `head.repo` is null once a fork is deleted.
        let head_owner = v["head"]["label"]
            .as_str()
            .and_then(|l| l.split_once(':'))
            .map(|(owner, _)| owner)
            .or_else(|| v["head"]["repo"]["owner"]["login"].as_str())
            .ok_or_else(|| bad_answer(OP, "`head.label`"))?;
        Ok(PullHead {
            head_ref: head_ref.to_string(),
            head_owner: head_owner.to_string(),
            state: v["state"].as_str().unwrap_or("open").to_string(),
        })
    }
}
