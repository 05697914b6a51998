//! A parent issue and its sub-issues read from GitHub, for a plan made of issues
//! (`sources::issues`): GraphQL reads a page of 100 sub-issues with their titles, bodies,
//! states, authors and native "blocked by" dependencies in one request (a sub-issue with
//! sub-issues of its own costs one more per page of them); where GraphQL refuses the query
//! (a server without these fields), REST reads the same — `issues/get`, `issues/list-sub-issues`
//! and `issues/list-dependencies-blocked-by`, one call per issue and page. Every call goes
//! through [`Client`], so the retry policy covers rate limits (secondary ones included) and
//! [`Client::requests_sent`] counts them. A sub-issue GitHub no longer returns (deleted, or
//! transferred away between pages) is simply absent; an issue named from outside the set that
//! is gone (404, 410, or 301 for a transferred one) is reported as not found.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::identity;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ops::encode_segment;
use super::{ApiError, Client, nullable};

/// An issue as read, with its sub-issues in GitHub's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    /// `owner/name`.
    pub repo: String,
    pub number: u64,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub closed: bool,
    /// The author's login (empty for a deleted account).
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub url: String,
    /// Its native "blocked by" dependencies.
    #[serde(default)]
    pub blocked_by: Vec<Linked>,
    #[serde(default)]
    pub sub_issues: Vec<Issue>,
}

/// An issue another one names, with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Linked {
    pub repo: String,
    pub number: u64,
    pub closed: bool,
}

/// How deep sub-issues are read (GitHub allows eight levels).
pub const MAX_DEPTH: usize = 8;
/// The most pages of 100 read from one list (sub-issues of one issue, its blockers); a
/// longer list is refused ([`ApiError::TooLong`]), never cut.
pub const MAX_PAGES: u32 = 50;

/// Which API reads the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// GraphQL, falling back to REST when GraphQL refuses the query.
    Graphql,
    /// REST only (`DAGEXEC_ISSUES_API=rest`).
    Rest,
}

impl Api {
    /// From `DAGEXEC_ISSUES_API` (`rest` or `graphql`, the default).
    pub fn from_env() -> Api {
        match std::env::var("DAGEXEC_ISSUES_API").as_deref() {
            Ok("rest") => Api::Rest,
            _ => Api::Graphql,
        }
    }
}

/// The query: one issue and a page of its sub-issues, each with its blockers. Its fields are
/// GitHub's schema's (`tests/fixtures/github/graphql-issues.graphql`).
pub const TREE_QUERY: &str =
    "query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      number title body state url
      author { login }
      repository { nameWithOwner }
      subIssues(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          number title body state url
          author { login }
          repository { nameWithOwner }
          subIssuesSummary { total }
          blockedBy(first: 100) {
            pageInfo { hasNextPage }
            nodes { number state repository { nameWithOwner } }
          }
        }
      }
    }
  }
}";

#[derive(Deserialize)]
struct TreeData {
    repository: Option<RepoNode>,
}
#[derive(Deserialize)]
struct RepoNode {
    issue: Option<IssueNode>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IssueNode {
    #[serde(flatten)]
    text: IssueText,
    #[serde(default, deserialize_with = "nullable")]
    url: String,
    author: Option<Login>,
    repository: NameWithOwner,
    #[serde(default)]
    sub_issues: Option<Connection<Option<IssueNode>>>,
    #[serde(default)]
    sub_issues_summary: Option<Summary>,
    #[serde(default)]
    blocked_by: Option<Connection<Option<BlockerNode>>>,
}
#[derive(Deserialize)]
struct Login {
    login: String,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NameWithOwner {
    name_with_owner: String,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Connection<T> {
    #[serde(default)]
    page_info: Option<PageInfo>,
    #[serde(default)]
    nodes: Vec<T>,
}
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct PageInfo {
    has_next_page: bool,
    end_cursor: Option<String>,
}
#[derive(Deserialize)]
struct Summary {
    total: u64,
}
#[derive(Deserialize)]
struct BlockerNode {
    #[serde(flatten)]
    text: IssueText,
    repository: NameWithOwner,
}

/// What GraphQL's issue node and REST's issue object name alike.
#[derive(Deserialize)]
struct IssueText {
    number: u64,
    #[serde(default, deserialize_with = "nullable")]
    title: String,
    #[serde(default, deserialize_with = "nullable")]
    body: String,
    state: String,
}

impl IssueText {
    fn closed(&self) -> bool {
        self.state.eq_ignore_ascii_case("closed")
    }

    /// The issue as another one names it, in `repo`.
    fn linked(&self, repo: String) -> Linked {
        Linked {
            repo,
            number: self.number,
            closed: self.closed(),
        }
    }

    /// The issue in `repo` at `url` by `author`, with no blockers or sub-issues yet.
    fn issue(&self, repo: String, author: Option<&Login>, url: &str) -> Issue {
        Issue {
            repo,
            number: self.number,
            title: self.title.clone(),
            body: self.body.clone(),
            closed: self.closed(),
            author: author.map(|a| a.login.clone()).unwrap_or_default(),
            url: url.to_string(),
            blocked_by: Vec::new(),
            sub_issues: Vec::new(),
        }
    }
}

impl IssueNode {
    fn issue(&self) -> Issue {
        Issue {
            blocked_by: self
                .blocked_by
                .iter()
                .flat_map(|c| c.nodes.iter().flatten())
                .map(|b| b.text.linked(b.repository.name_with_owner.clone()))
                .collect(),
            ..self.text.issue(
                self.repository.name_with_owner.clone(),
                self.author.as_ref(),
                &self.url,
            )
        }
    }
}

/// The fields of REST's issue object read here (`issues/get`, `issues/list-sub-issues`,
/// `issues/list-dependencies-blocked-by`).
#[derive(Deserialize)]
struct IssueJson {
    #[serde(flatten)]
    text: IssueText,
    #[serde(default, deserialize_with = "nullable")]
    html_url: String,
    /// `https://api.github.com/repos/OWNER/NAME`.
    repository_url: String,
    #[serde(default)]
    user: Option<Login>,
    #[serde(default)]
    sub_issues_summary: Option<Summary>,
}

impl IssueJson {
    fn repo(&self) -> String {
        let mut parts = self.repository_url.trim_end_matches('/').rsplit('/');
        let name = parts.next().unwrap_or_default();
        let owner = parts.next().unwrap_or_default();
        format!("{owner}/{name}")
    }
    fn issue(&self) -> Issue {
        self.text
            .issue(self.repo(), self.user.as_ref(), &self.html_url)
    }
}

fn split_repo(repo: &str) -> (&str, &str) {
    repo.split_once('/').unwrap_or((repo, ""))
}

fn issue_path(repo: &str, number: u64, rest: &str) -> String {
    let (o, n) = split_repo(repo);
    format!(
        "/repos/{}/{}/issues/{number}{rest}",
        encode_segment(o),
        encode_segment(n)
    )
}

/// The refusal of a list longer than [`MAX_PAGES`] pages of 100.
fn too_long(op: &str, repo: &str, number: u64, what: &str) -> ApiError {
    ApiError::TooLong {
        op: op.into(),
        what: format!("the {what} of {repo}#{number}"),
        limit: MAX_PAGES as usize * 100,
    }
}

impl Client {
    /// Issue `number` of this repository with its sub-issues, recursively, in GitHub's order.
    pub async fn issue_tree(&self, number: u64, api: Api) -> Result<Issue, ApiError> {
        let repo = self.repo.to_string();
        if api == Api::Graphql {
            match self.tree_graphql(&repo, number, 0).await {
                Ok(tree) => return Ok(tree),
                Err(e)
                    if e.transient()
                        || e.status() == Some(401)
                        || matches!(e, ApiError::TooLong { .. }) =>
                {
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(
                        "GraphQL could not read the issues ({e}); reading them with REST"
                    );
                    eprintln!(
                        "note: GraphQL could not read the issues ({e}); reading them with REST"
                    );
                }
            }
        }
        let me: IssueJson = self
            .get("issues/get", &issue_path(&repo, number, ""))
            .await?;
        let mut issue = me.issue();
        issue.sub_issues = self.sub_issues_rest(&repo, number, 0).await?;
        Ok(issue)
    }

    async fn tree_graphql(&self, repo: &str, number: u64, depth: usize) -> Result<Issue, ApiError> {
        let (owner, name) = split_repo(repo);
        let mut after: Option<String> = None;
        let mut me: Option<Issue> = None;
        for read in 1..=MAX_PAGES {
            let data: TreeData = self
                .graphql(
                    "graphql: issue with sub-issues",
                    TREE_QUERY,
                    json!({"owner": owner, "name": name, "number": number, "after": after}),
                )
                .await?;
            let node = data
                .repository
                .and_then(|r| r.issue)
                .ok_or_else(|| ApiError::Status {
                    op: "graphql: issue with sub-issues".into(),
                    status: 404,
                    message: format!("{repo}#{number}: no such issue"),
                    why: None,
                })?;
            let issue = me.get_or_insert_with(|| node.issue());
            let Some(subs) = node.sub_issues else { break };
            for sub in subs.nodes.into_iter().flatten() {
                let mut child = sub.issue();
                if sub
                    .blocked_by
                    .as_ref()
                    .is_some_and(|b| b.page_info.as_ref().is_some_and(|p| p.has_next_page))
                {
                    child.blocked_by = self.blockers_rest(&child.repo, child.number).await?;
                }
                if sub.sub_issues_summary.is_some_and(|s| s.total > 0) && depth + 1 < MAX_DEPTH {
                    // Boxed: the reading recurses into sub-issues.
                    child.sub_issues =
                        Box::pin(self.tree_graphql(&child.repo, child.number, depth + 1))
                            .await?
                            .sub_issues;
                }
                issue.sub_issues.push(child);
            }
            let page = subs.page_info.unwrap_or_default();
            if !page.has_next_page {
                break;
            }
            if read == MAX_PAGES {
                return Err(too_long(
                    "graphql: issue with sub-issues",
                    repo,
                    number,
                    "sub-issues",
                ));
            }
            after = page.end_cursor;
        }
        // The first page either answered with the issue or returned its error.
        Ok(me.expect("the first page read the issue"))
    }

    async fn sub_issues_rest(
        &self,
        repo: &str,
        number: u64,
        depth: usize,
    ) -> Result<Vec<Issue>, ApiError> {
        let mut out = Vec::new();
        for sub in self
            .issue_list("issues/list-sub-issues", repo, number, "/sub_issues")
            .await?
        {
            let mut child = sub.issue();
            child.blocked_by = self.blockers_rest(&child.repo, child.number).await?;
            // The summary may be missing: ask when it is not known to be zero.
            if sub.sub_issues_summary.is_none_or(|s| s.total > 0) && depth + 1 < MAX_DEPTH {
                child.sub_issues =
                    Box::pin(self.sub_issues_rest(&child.repo, child.number, depth + 1)).await?;
            }
            out.push(child);
        }
        Ok(out)
    }

    async fn blockers_rest(&self, repo: &str, number: u64) -> Result<Vec<Linked>, ApiError> {
        let list = self
            .issue_list(
                "issues/list-dependencies-blocked-by",
                repo,
                number,
                "/dependencies/blocked_by",
            )
            .await?;
        Ok(list.iter().map(|b| b.text.linked(b.repo())).collect())
    }

    /// Every page (100 a page, at most [`MAX_PAGES`]) of an issue's list at `suffix`; a
    /// longer list is refused.
    async fn issue_list(
        &self,
        op: &str,
        repo: &str,
        number: u64,
        suffix: &str,
    ) -> Result<Vec<IssueJson>, ApiError> {
        // One page past the most read: a list that fills it is longer than dagexec reads.
        let path = issue_path(repo, number, suffix);
        let list = self
            .pages(op, &path, MAX_PAGES + 1, identity::<Vec<IssueJson>>)
            .await?;
        if list.len() > MAX_PAGES as usize * 100 {
            let what = if suffix == "/sub_issues" {
                "sub-issues"
            } else {
                "\"blocked by\" dependencies"
            };
            return Err(too_long(op, repo, number, what));
        }
        Ok(list)
    }

    /// Whether each issue is closed (`issues/get`); an issue GitHub no longer has here (404,
    /// 410, or 301: transferred) is left out of the answer.
    pub async fn issue_states(
        &self,
        issues: &[(String, u64)],
    ) -> Result<BTreeMap<(String, u64), bool>, ApiError> {
        let mut out = BTreeMap::new();
        for (repo, number) in issues {
            match self
                .get::<IssueJson>("issues/get", &issue_path(repo, *number, ""))
                .await
            {
                Ok(i) => {
                    out.insert((repo.clone(), *number), i.text.closed());
                }
                Err(e) if matches!(e.status(), Some(301 | 404 | 410)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The `logins` with write access or more (the rule of `/execute`'s gate): one
    /// `repos/get-collaborator-permission-level` each. A login GitHub does not know is not a
    /// writer.
    pub async fn writers(&self, logins: &BTreeSet<String>) -> Result<BTreeSet<String>, ApiError> {
        let mut out = BTreeSet::new();
        for login in logins.iter().filter(|l| !l.is_empty()) {
            match self.permission(login).await {
                Ok((permission, role)) => {
                    if matches!(permission.as_str(), "admin" | "write")
                        || matches!(role.as_deref(), Some("admin" | "maintain" | "write"))
                    {
                        out.insert(login.clone());
                    }
                }
                Err(e) if matches!(e.status(), Some(404)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
