//! The fake's issues: sub-issues and "blocked by" dependencies, answered through REST
//! (`issues/get`, `issues/list-sub-issues`, `issues/list-dependencies-blocked-by`, from GitHub's
//! examples with the state layered on, paginated as GitHub pages them) and through GraphQL: a
//! query that reads `subIssues` is checked field by field against
//! `tests/fixtures/github/graphql-issues.graphql` (GitHub's schema, cut) and answered in its
//! shape. An issue removed ([`FakeGitHub::delete_issue`]) is GitHub's 404 and no longer listed;
//! a transferred one ([`FakeGitHub::transfer_issue`]) answers 301 at its old place.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use super::{FakeGitHub, Inner, reply};

/// An issue of the fake. `repo` is `owner/name`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FakeIssue {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub closed: bool,
    pub author: String,
    /// Its sub-issues, in order: (`owner/name`, number).
    pub sub_issues: Vec<(String, u64)>,
    /// Its native blockers.
    pub blocked_by: Vec<(String, u64)>,
}

impl FakeIssue {
    pub fn new(repo: &str, number: u64, title: &str, body: &str) -> FakeIssue {
        FakeIssue {
            repo: repo.into(),
            number,
            title: title.into(),
            body: body.into(),
            author: "octocat".into(),
            ..FakeIssue::default()
        }
    }
}

/// The issues by (`owner/name`, number), and where transferred ones went.
#[derive(Clone, Debug, Default)]
pub struct Issues {
    pub by_key: BTreeMap<(String, u64), FakeIssue>,
    pub moved: BTreeMap<(String, u64), (String, u64)>,
}

impl FakeGitHub {
    /// Adds (or replaces) an issue.
    pub fn add_issue(&self, issue: FakeIssue) {
        let key = (issue.repo.clone(), issue.number);
        self.lock().state.issues.by_key.insert(key, issue);
    }

    /// Changes an issue in place.
    pub fn edit_issue(&self, repo: &str, number: u64, f: impl FnOnce(&mut FakeIssue)) {
        let mut inner = self.lock();
        let issue = inner
            .state
            .issues
            .by_key
            .get_mut(&(repo.to_string(), number))
            .expect("no such fake issue");
        f(issue);
    }

    /// Deletes an issue: 404, and gone from every list.
    pub fn delete_issue(&self, repo: &str, number: u64) {
        let mut inner = self.lock();
        let key = (repo.to_string(), number);
        inner.state.issues.by_key.remove(&key);
        for i in inner.state.issues.by_key.values_mut() {
            i.sub_issues.retain(|k| *k != key);
            i.blocked_by.retain(|k| *k != key);
        }
    }

    /// Transfers an issue to `to` as number `new_number`: its old place answers 301, the lists
    /// that held it hold its new place.
    pub fn transfer_issue(&self, repo: &str, number: u64, to: &str, new_number: u64) {
        let mut inner = self.lock();
        let old = (repo.to_string(), number);
        let new = (to.to_string(), new_number);
        let mut issue = inner
            .state
            .issues
            .by_key
            .remove(&old)
            .expect("no such fake issue");
        issue.repo = to.into();
        issue.number = new_number;
        inner.state.issues.by_key.insert(new.clone(), issue);
        for i in inner.state.issues.by_key.values_mut() {
            for k in i.sub_issues.iter_mut().chain(i.blocked_by.iter_mut()) {
                if *k == old {
                    *k = new.clone();
                }
            }
        }
        inner.state.issues.moved.insert(old, new);
    }
}

/// The three REST operations on issues; `None` for any other operation.
pub(super) fn answer_rest(
    inner: &Inner,
    op: &str,
    template: &Value,
    p: &HashMap<String, String>,
    q: &HashMap<String, String>,
) -> Option<ResponseTemplate> {
    if !matches!(
        op,
        "issues/get" | "issues/list-sub-issues" | "issues/list-dependencies-blocked-by"
    ) {
        return None;
    }
    let repo = format!("{}/{}", p["owner"], p["repo"]);
    let number: u64 = p["issue_number"].parse().unwrap_or(0);
    let issues = &inner.state.issues;
    let key = (repo.clone(), number);
    let Some(issue) = issues.by_key.get(&key) else {
        if let Some((to, n)) = issues.moved.get(&key) {
            let url = format!("{}/repos/{to}/issues/{n}", inner.base_url);
            return Some(
                reply(301, json!({"message": "Moved Permanently", "url": url}))
                    .insert_header("location", url.as_str()),
            );
        }
        return Some(reply(
            404,
            json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest/issues/issues#get-an-issue"}),
        ));
    };
    let item = |t: &Value, i: &FakeIssue| issue_json(t.clone(), i, &inner.base_url, issues);
    if op == "issues/get" {
        return Some(reply(200, item(template, issue)));
    }
    let list = if op == "issues/list-sub-issues" {
        &issue.sub_issues
    } else {
        &issue.blocked_by
    };
    let per_page: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30);
    let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1);
    let first = template
        .as_array()
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or(json!({}));
    let items: Vec<Value> = list
        .iter()
        .filter_map(|k| issues.by_key.get(k))
        .skip(per_page * (page.max(1) - 1))
        .take(per_page)
        .map(|i| item(&first, i))
        .collect();
    Some(reply(200, Value::Array(items)))
}

fn issue_json(mut v: Value, i: &FakeIssue, base: &str, issues: &Issues) -> Value {
    let html = format!("https://github.com/{}/issues/{}", i.repo, i.number);
    let subs = i
        .sub_issues
        .iter()
        .filter_map(|k| issues.by_key.get(k))
        .collect::<Vec<_>>();
    let done = subs.iter().filter(|s| s.closed).count();
    let fields = [
        ("number", json!(i.number)),
        ("title", json!(i.title)),
        ("body", json!(i.body)),
        ("state", json!(if i.closed { "closed" } else { "open" })),
        ("html_url", json!(html)),
        (
            "url",
            json!(format!("{base}/repos/{}/issues/{}", i.repo, i.number)),
        ),
        ("repository_url", json!(format!("{base}/repos/{}", i.repo))),
        (
            "sub_issues_summary",
            json!({"total": subs.len(), "completed": done,
                   "percent_completed": if subs.is_empty() { 0 } else { done * 100 / subs.len() }}),
        ),
    ];
    for (k, val) in fields {
        v[k] = val;
    }
    v["user"]["login"] = json!(i.author);
    v
}

// ------------------------------------------------------------------ GraphQL

/// Whether a GraphQL body is the issue query (it reads `subIssues`).
pub(super) fn is_issue_query(body: Option<&Value>) -> bool {
    body.and_then(|b| b["query"].as_str())
        .is_some_and(|q| q.contains("subIssues"))
}

/// The schema cut: type → field → the field's type name.
fn schema() -> &'static BTreeMap<String, BTreeMap<String, String>> {
    static SCHEMA: OnceLock<BTreeMap<String, BTreeMap<String, String>>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/github/graphql-issues.graphql");
        let text = std::fs::read_to_string(&path).expect("graphql-issues.graphql");
        parse_schema(&text)
    })
}

fn parse_schema(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    // Descriptions out: the parts between `"""` pairs.
    let bare: String = text
        .split("\"\"\"")
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect();
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut pending: Option<String> = None; // a field whose arguments are open
    for line in bare.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        if matches!(words.first(), Some(&("type" | "interface" | "enum"))) {
            current = Some(words[1].to_string());
            out.insert(words[1].to_string(), BTreeMap::new());
            continue;
        }
        let Some(ty) = &current else { continue };
        if t == "}" {
            current = None;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent != 2 {
            continue;
        }
        if let Some(rest) = t.strip_prefix("):") {
            if let Some(f) = pending.take() {
                out.get_mut(ty).unwrap().insert(f, type_name(rest));
            }
            continue;
        }
        let name: String = t
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = &t[name.len()..];
        if after.starts_with('(') {
            pending = Some(name);
        } else if let Some(rest) = after.strip_prefix(':') {
            out.get_mut(ty).unwrap().insert(name, type_name(rest));
        }
    }
    out
}

fn type_name(s: &str) -> String {
    s.trim()
        .trim_matches(|c| c == '[' || c == ']' || c == '!')
        .to_string()
}

/// The fields of `query` not in the schema (empty: valid), walking its selections from `Query`.
pub(super) fn check_query(query: &str) -> Vec<String> {
    let schema = schema();
    let mut problems = Vec::new();
    // Tokens: names, `{`, `}`, with `( … )` argument lists and the operation header dropped.
    let body = match query.find('{') {
        Some(i) => &query[i..],
        None => return vec!["GraphQL query without a selection".into()],
    };
    let mut tokens = Vec::new();
    let mut depth = 0;
    let mut word = String::new();
    for c in body.chars() {
        if depth > 0 {
            depth += i32::from(c == '(') - i32::from(c == ')');
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        match c {
            '(' => depth = 1,
            '{' | '}' => tokens.push(c.to_string()),
            _ => {}
        }
    }
    // The first `{` opens the operation itself: its fields are `Query`'s.
    let mut stack = vec!["Query".to_string()];
    let mut last: Option<String> = None;
    for t in tokens {
        match t.as_str() {
            "{" => {
                let Some(field) = last.take() else { continue };
                let ty = stack.last().cloned().unwrap_or_default();
                let next = schema
                    .get(&ty)
                    .and_then(|f| f.get(&field))
                    .cloned()
                    .unwrap_or_default();
                stack.push(next);
            }
            "}" => {
                stack.pop();
                last = None;
            }
            name => {
                let ty = stack.last().cloned().unwrap_or_default();
                if !ty.is_empty() && !schema.get(&ty).is_some_and(|f| f.contains_key(name)) {
                    problems.push(format!("GraphQL: type `{ty}` has no field `{name}`"));
                }
                last = Some(name.to_string());
            }
        }
    }
    problems
}

/// The answer to the issue query, in the schema's shape.
pub(super) fn answer_graphql(inner: &Inner, body: &Value) -> ResponseTemplate {
    let v = &body["variables"];
    let repo = format!(
        "{}/{}",
        v["owner"].as_str().unwrap_or_default(),
        v["name"].as_str().unwrap_or_default()
    );
    let number = v["number"].as_u64().unwrap_or(0);
    let after: usize = v["after"]
        .as_str()
        .and_then(|c| c.strip_prefix("cursor:"))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let issues = &inner.state.issues;
    let Some(issue) = issues.by_key.get(&(repo.clone(), number)) else {
        let message = format!("Could not resolve to an Issue with the number of {number}.");
        return reply(
            200,
            json!({"data": {"repository": {"issue": null}},
                   "errors": [{"type": "NOT_FOUND", "path": ["repository", "issue"], "message": message}]}),
        );
    };
    let subs: Vec<&FakeIssue> = issue
        .sub_issues
        .iter()
        .filter_map(|k| issues.by_key.get(k))
        .collect();
    let page: Vec<Value> = subs
        .iter()
        .skip(after)
        .take(100)
        .map(|s| {
            let mut n = node(s);
            let blockers: Vec<Value> = s
                .blocked_by
                .iter()
                .filter_map(|k| issues.by_key.get(k))
                .map(|b| {
                    json!({"number": b.number, "state": state(b),
                           "repository": {"nameWithOwner": b.repo}})
                })
                .collect();
            let more = blockers.len() > 100;
            n["blockedBy"] = json!({"pageInfo": {"hasNextPage": more},
                                    "nodes": blockers.into_iter().take(100).collect::<Vec<_>>()});
            n["subIssuesSummary"] = json!({"total": s.sub_issues.len()});
            n
        })
        .collect();
    let end = after + page.len();
    let mut me = node(issue);
    me["subIssues"] = json!({
        "pageInfo": {"hasNextPage": end < subs.len(), "endCursor": format!("cursor:{end}")},
        "nodes": page,
    });
    reply(200, json!({"data": {"repository": {"issue": me}}}))
}

fn state(i: &FakeIssue) -> &'static str {
    if i.closed { "CLOSED" } else { "OPEN" }
}

fn node(i: &FakeIssue) -> Value {
    json!({
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": state(i),
        "url": format!("https://github.com/{}/issues/{}", i.repo, i.number),
        "author": {"login": i.author},
        "repository": {"nameWithOwner": i.repo},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_dagexec_sends_fits_the_schema_and_a_wrong_field_does_not() {
        assert_eq!(
            check_query(dagexec::edge::github::issues::TREE_QUERY),
            Vec::<String>::new()
        );
        let bad = "query { repository(owner: \"o\", name: \"r\") { issue(number: 1) { subIssues(first: 1) { nodes { blockers { number } } } } } }";
        assert_eq!(
            check_query(bad),
            ["GraphQL: type `Issue` has no field `blockers`"]
        );
    }
}
