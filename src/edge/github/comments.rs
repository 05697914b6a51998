//! Pull request conversation operations for `/execute` comments: the commenter's permission,
//! the 👀 acknowledgement, replies, and the one status comment dagexec keeps up to date
//! (found again by a hidden marker). Each is a documented REST operation named by its
//! `OpenAPI` `operationId` in errors.
//!
//! Anyone who can comment can write a comment that starts with dagexec's marker, so a listed
//! comment carries its author ([`Author`]), and the marked comments dagexec updates or
//! believes are chosen by the caller (see `actions::comment::trusted_marked`), never by the
//! marker alone.

use std::convert::identity;

use http::Method;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;

use super::ops::{CUT_MARK, Id, MAX_BODY, PullJson, encode_segment};
use super::{ApiError, Client, MAX_LIST_PAGES, nullable};
use crate::pure::clip::bytes as clip;

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
    /// The number of the issue or pull request it is on (the last segment of `issue_url`).
    pub issue: Option<u64>,
}

impl IssueComment {
    /// Whether the body starts with `marker` (leading whitespace aside).
    pub fn starts_with(&self, marker: &str) -> bool {
        self.body.trim_start().starts_with(marker)
    }
}

/// The fields of GitHub's issue comment object dagexec reads.
#[derive(Deserialize)]
struct CommentJson {
    id: u64,
    #[serde(default, deserialize_with = "nullable")]
    body: String,
    /// Null for a deleted account.
    #[serde(default)]
    user: Option<UserJson>,
    #[serde(default)]
    performed_via_github_app: Option<AppJson>,
    /// `https://api.github.com/repos/o/r/issues/<number>`.
    #[serde(default, deserialize_with = "nullable")]
    issue_url: String,
}

#[derive(Default, Deserialize)]
struct UserJson {
    #[serde(default, deserialize_with = "nullable")]
    login: String,
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    kind: String,
}

#[derive(Deserialize)]
struct AppJson {
    #[serde(default)]
    id: Option<u64>,
}

impl From<CommentJson> for IssueComment {
    fn from(c: CommentJson) -> IssueComment {
        let user = c.user.unwrap_or_default();
        let issue = c
            .issue_url
            .rsplit_once("/issues/")
            .and_then(|(_, n)| n.parse().ok());
        IssueComment {
            id: c.id,
            issue,
            body: c.body,
            author: Author {
                bot: user.kind == "Bot",
                login: user.login,
                app_id: c.performed_via_github_app.and_then(|a| a.id),
            },
        }
    }
}

impl Client {
    /// `user`'s access to the repository: (`permission`, `role_name`)
    /// (`repos/get-collaborator-permission-level`). `permission` is `admin`, `write`, `read` or
    /// `none`; `role_name` also tells `maintain` and `triage` (and custom roles) apart.
    pub async fn permission(&self, user: &str) -> Result<(String, Option<String>), ApiError> {
        #[derive(Deserialize)]
        struct Permission {
            permission: String,
            #[serde(default)]
            role_name: Option<String>,
        }
        // A login never holds a slash; make sure one cannot change the path either.
        let user = encode_segment(user);
        let p: Permission = self
            .get(
                "repos/get-collaborator-permission-level",
                &self.repo_path(&format!("/collaborators/{user}/permission")),
            )
            .await?;
        Ok((p.permission, p.role_name))
    }

    /// Reacts to an issue or pull request comment (`reactions/create-for-issue-comment`);
    /// `content` is one of GitHub's reaction names (`eyes`, `+1`, `rocket`, …). Reacting twice
    /// is not an error.
    pub async fn react(&self, comment_id: u64, content: &str) -> Result<(), ApiError> {
        self.send::<IgnoredAny, _>(
            "reactions/create-for-issue-comment",
            Method::POST,
            &self.repo_path(&format!("/issues/comments/{comment_id}/reactions")),
            &json!({ "content": content }),
        )
        .await
        .map(drop)
    }

    /// Comments on issue or pull request `issue_number` (`issues/create-comment`); the new
    /// comment's id.
    pub async fn comment(&self, issue_number: u64, body: &str) -> Result<u64, ApiError> {
        let created: Id = self
            .send(
                "issues/create-comment",
                Method::POST,
                &self.repo_path(&format!("/issues/{issue_number}/comments")),
                &json!({ "body": clip(body, MAX_BODY, CUT_MARK) }),
            )
            .await?;
        Ok(created.id)
    }

    /// Replaces comment `id`'s body (`issues/update-comment`).
    pub async fn update_comment(&self, id: u64, body: &str) -> Result<(), ApiError> {
        self.send::<IgnoredAny, _>(
            "issues/update-comment",
            Method::PATCH,
            &self.repo_path(&format!("/issues/comments/{id}")),
            &json!({ "body": clip(body, MAX_BODY, CUT_MARK) }),
        )
        .await
        .map(drop)
    }

    /// Every comment on issue or pull request `issue_number`, oldest first
    /// (`issues/list-comments`, 100 a page, page after page until a short one; at most
    /// [`MAX_LIST_PAGES`] pages).
    pub async fn list_comments(&self, issue_number: u64) -> Result<Vec<IssueComment>, ApiError> {
        let path = self.repo_path(&format!("/issues/{issue_number}/comments"));
        let list = self
            .pages(
                "issues/list-comments",
                &path,
                MAX_LIST_PAGES,
                identity::<Vec<CommentJson>>,
            )
            .await?;
        Ok(list.into_iter().map(IssueComment::from).collect())
    }

    /// One comment (`issues/get-comment`).
    pub async fn get_comment(&self, id: u64) -> Result<IssueComment, ApiError> {
        let c: CommentJson = self
            .get(
                "issues/get-comment",
                &self.repo_path(&format!("/issues/comments/{id}")),
            )
            .await?;
        Ok(c.into())
    }

    /// Keeps one comment per `marker` on `issue_number`: updates the oldest of `own` (the
    /// comments dagexec wrote, as the caller found them) whose body starts with `marker`
    /// (leading whitespace aside), or creates one. `body` is prefixed with the marker when it
    /// does not start with it, so the comment is always found again and a second call never
    /// creates a second comment; one deleted since the caller read `own` is created again.
    /// The comment's id.
    pub async fn upsert_marked_comment(
        &self,
        issue_number: u64,
        marker: &str,
        body: &str,
        own: &[IssueComment],
    ) -> Result<u64, ApiError> {
        let body = if body.trim_start().starts_with(marker) {
            clip(body, MAX_BODY, CUT_MARK)
        } else {
            clip(&format!("{marker}\n{body}"), MAX_BODY, CUT_MARK)
        };
        match own.iter().find(|c| c.starts_with(marker)) {
            Some(c) if c.body == body => Ok(c.id),
            Some(c) => match self.update_comment(c.id, &body).await {
                Err(e) if e.status() == Some(404) => self.comment(issue_number, &body).await,
                done => done.map(|()| c.id),
            },
            None => self.comment(issue_number, &body).await,
        }
    }

    /// The head of pull request `number` (`pulls/get`): its branch, the owner of the
    /// repository that branch lives in, and whether it is open.
    pub async fn pull_head(&self, number: u64) -> Result<PullHead, ApiError> {
        const OP: &str = "pulls/get";
        let pull: PullJson = self
            .get(OP, &self.repo_path(&format!("/pulls/{number}")))
            .await?;
        // `head.label` is `owner:branch`; `head.repo` is null once a fork is deleted.
        let head_owner = pull
            .head
            .label
            .as_deref()
            .and_then(|l| l.split_once(':'))
            .map(|(owner, _)| owner.to_string())
            .or_else(|| pull.head.repo.map(|r| r.owner.login))
            .ok_or_else(|| {
                let missing = "GitHub's answer is not what dagexec reads: `head.label` (or \
                               `head.repo.owner.login`) is missing";
                ApiError::invalid(OP, missing)
            })?;
        Ok(PullHead {
            head_ref: pull.head.git_ref,
            head_owner,
            state: if pull.state.is_empty() {
                "open".into()
            } else {
                pull.state
            },
        })
    }
}
