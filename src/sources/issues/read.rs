//! `--issue N`: the issues read from GitHub (`edge::github::issues`), made into a plan
//! ([`super::convert()`]) and written at `.design/issues/<N>/plan.json`, then committed, so the
//! run — and any later one — works from the branch alone. Once that plan exists it is the
//! plan: a later edit of an issue is read only when asked (`--reread`), and then the state of
//! the tasks already run is carried over by issue.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::body::{self, Ref};
use super::convert::{self, Converted, Note, ReadIssues, TASK_FIELD};
use super::write_back::issue_keys;
use crate::edge::github::issues::{Api, Issue};
use crate::edge::github::{ApiError, Client, RepoName, Token};
use crate::pure::plan::model::{Plan, Status};
use crate::sources::{Prepared, Problem};

/// What `--issue N` was given.
#[derive(Debug, Clone)]
pub struct Options {
    pub number: u64,
    pub repo: RepoName,
    pub api_url: String,
    pub token: Token,
    /// Issue numbers (of this repository) included despite their author.
    pub include: Vec<u64>,
    /// Read the issues again although the plan exists.
    pub reread: bool,
}

/// What reading the issues cost and noted.
#[derive(Debug, Default)]
pub struct ReadReport {
    pub rest_calls: u64,
    pub graphql_calls: u64,
    pub tasks: usize,
    pub left_out: Vec<Note>,
    pub outside: Vec<Note>,
    /// Tasks of the earlier plan whose issue is no longer a sub-issue.
    pub dropped: Vec<String>,
    /// The commit that recorded the plan.
    pub commit: Option<String>,
}

/// Why `--issue N` could not make a plan, said plainly (`see the message`).
fn other(message: String) -> Problem {
    Problem::new(message, "see the message")
}

/// Reading issue `number` from GitHub failed, with what to do about it.
fn unread(number: u64, source: &ApiError) -> Problem {
    let hint = match (source, source.status()) {
        (ApiError::TooLong { .. }, _) => {
            "split the sub-issues among several parent issues, each run on its own (`--issue N`)"
        }
        (_, Some(401)) => {
            "set GITHUB_TOKEN (or log in with `gh auth login`) to a token that can read the repository's issues"
        }
        (_, Some(404)) => {
            "check the issue number and the repository (`--repo OWNER/NAME`, else GITHUB_REPOSITORY, else the `origin` remote)"
        }
        _ => "try again; GITHUB_API_URL says which GitHub is asked",
    };
    Problem::new(format!("reading issue #{number}: {source}"), hint)
}

/// The plan for `--issue N`: the one committed at the start, or read now — and with `write`
/// written and committed, else in a temporary directory. Its notes say which, and what
/// reading cost and noted ([`ReadReport::describe`]); `read` is present when the issues were
/// read, `archived` when every task of the plan is completed.
pub fn prepare(root: &Path, opts: &Options, write: bool) -> Result<Prepared, Problem> {
    let number = opts.number;
    let plan_rel = super::convert::plan_rel(opts.number);
    let plan_path = root.join(&plan_rel);
    // The plan in progress, else the one a completed run archived beside it.
    let done = plan_path.with_file_name("plan.done.json");
    let old = [&plan_path, &done]
        .into_iter()
        .find(|p| p.is_file())
        .map(|p| {
            crate::edge::plan_file::load(p).map_err(|e| other(format!("{}: {e}", p.display())))
        })
        .transpose()?;
    if old.is_some() && !opts.reread {
        if plan_path.is_file() {
            return Ok(Prepared {
                notes: format!(
                    "Using the plan read from issue #{number} at the start ({plan_rel}); `--reread` reads the issues again.\n"
                ),
                ..Prepared::at(plan_path, plan_rel, None)
            });
        }
        return Ok(Prepared {
            notes: format!(
                "Every task of the plan read from issue #{number} is completed (archived as {}); `--reread` reads the issues again, new sub-issues becoming tasks.\n",
                done.display()
            ),
            archived: true,
            ..Prepared::at(done, plan_rel, None)
        });
    }
    let mut include: BTreeSet<Ref> = opts
        .include
        .iter()
        .map(|n| Ref::new(&opts.repo.to_string(), *n))
        .collect();
    if let Some(old) = &old {
        include.extend(included_before(old, &opts.repo.to_string()));
    }
    let (converted, rest_calls, graphql_calls) = fetch_and_convert(opts, include)?;
    let Converted {
        mut plan,
        left_out,
        outside,
    } = converted;
    let dropped = old
        .as_ref()
        .map(|o| carry_over(&mut plan, o))
        .unwrap_or_default();
    let mut report = ReadReport {
        rest_calls,
        graphql_calls,
        tasks: plan.tasks.len(),
        left_out,
        outside,
        dropped,
        commit: None,
    };
    let prepared = if write {
        report.commit = write_and_commit(root, opts, &plan, &plan_rel, old.is_some())?;
        Prepared::at(plan_path, plan_rel, None)
    } else {
        Prepared::save(&plan, plan_path, plan_rel, false)
            .map_err(|(path, e)| other(format!("{}: {e}", path.display())))?
    };
    Ok(Prepared {
        notes: report.describe(number),
        read: Some(report),
        ..prepared
    })
}

impl ReadReport {
    /// What reading issue `number` took and noted.
    pub fn describe(&self, number: u64) -> String {
        let mut s = format!(
            "Read issue #{number}: {} tasks in {} API requests ({} GraphQL, {} REST).\n",
            self.tasks,
            self.graphql_calls + self.rest_calls,
            self.graphql_calls,
            self.rest_calls
        );
        for n in &self.left_out {
            s.push_str(&format!("  left out {}: {}\n", n.issue, n.text));
        }
        for n in &self.outside {
            s.push_str(&format!("  {}: {}\n", n.issue, n.text));
        }
        // A task whose issue is left out is said so above, with why.
        let left_out = |d: &String| {
            let left = |n: &Note| d.strip_prefix(&n.issue).is_some_and(|t| t.starts_with(' '));
            self.left_out.iter().any(left)
        };
        for d in self.dropped.iter().filter(|d| !left_out(d)) {
            s.push_str(&format!("  dropped {d}: no longer a sub-issue\n"));
        }
        if let Some(c) = &self.commit {
            s.push_str(&format!("  committed as {}\n", &c[..c.len().min(12)]));
        }
        s
    }
}

/// Reads the tree, the writers among its authors, and the state of the issues its bodies
/// name outside it; then converts. Also the requests it took (REST, GraphQL).
fn fetch_and_convert(
    opts: &Options,
    include: BTreeSet<Ref>,
) -> Result<(Converted, u64, u64), Problem> {
    let api = |source| unread(opts.number, &source);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| other(format!("cannot start the async runtime: {e}")))?;
    // octocrab starts its service on the runtime it is built in.
    let client = {
        let _in = rt.enter();
        Client::new(&opts.api_url, &opts.token, opts.repo.clone()).map_err(api)?
    };
    // The reads run on this function's own runtime: a plan source is read by synchronous
    // code (`dagexec run`, `validate`, the plan job), and the steer job calls it on a
    // blocking thread (see `action::runtime`).
    let (parent, in_tree, found, writers) = rt
        .block_on(async {
            let parent = client.issue_tree(opts.number, Api::from_env()).await?;
            let mut in_tree: BTreeMap<Ref, bool> = BTreeMap::new();
            let mut authors = BTreeSet::new();
            let mut named = BTreeSet::new();
            walk(&parent, &mut |i: &Issue| {
                in_tree.insert(Ref::new(&i.repo, i.number), i.closed);
                authors.insert(i.author.clone());
                named.extend(body::declared(&i.repo, &i.body).depends_on);
            });
            let ask: Vec<(String, u64)> = named
                .iter()
                .filter(|r| !in_tree.contains_key(r))
                .map(|r| (r.repo.clone(), r.number))
                .collect();
            let found = client.issue_states(&ask).await?;
            let writers = client.writers(&authors).await?;
            Ok::<_, ApiError>((parent, in_tree, found, writers))
        })
        .map_err(api)?;
    let mut states = in_tree;
    states.extend(
        found
            .into_iter()
            .map(|((repo, n), c)| (Ref::new(&repo, n), c)),
    );
    let reading = ReadIssues {
        repo: opts.repo.to_string(),
        parent,
        states,
        writers,
        include,
    };
    let converted = convert::convert(&reading)?;
    let (rest, graphql) = client.requests_sent();
    Ok((converted, rest, graphql))
}

fn walk(issue: &Issue, f: &mut impl FnMut(&Issue)) {
    f(issue);
    for s in &issue.sub_issues {
        walk(s, f);
    }
}

/// The issues an earlier reading included (`/execute include`, `--include`).
fn included_before(old: &Plan, repo: &str) -> Vec<Ref> {
    super::write_back::recorded(old, "included")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .filter_map(|s| {
            let (r, n) = s.rsplit_once('#')?;
            let n = n.parse().ok()?;
            Some(Ref::new(if r.is_empty() { repo } else { r }, n))
        })
        .collect()
}

/// Carries the earlier plan's task states into the fresh one, by issue: what a run did stays
/// (completed, failed, a worker's question, attempts) unless the issue is closed now; a task
/// held only by an issue outside the plan takes the fresh reading. Returns the subjects of the
/// earlier tasks whose issue is no longer in the plan.
pub fn carry_over(fresh: &mut Plan, old: &Plan) -> Vec<String> {
    let fresh_keys = issue_keys(fresh);
    let old_keys = issue_keys(old);
    let mut moved: Vec<Option<usize>> = vec![None; old.tasks.len()];
    let mut dropped = Vec::new();
    for (j, old_t) in old.tasks.iter().enumerate() {
        let key = old_keys[j].clone();
        let Some(i) = fresh_keys.iter().position(|k| k.is_some() && *k == key) else {
            dropped.push(old_t.subject.clone());
            continue;
        };
        moved[j] = Some(i);
    }
    crate::pure::plan::carry::carry_state(fresh, old, &moved, &moved, TASK_FIELD, held_outside);
    dropped
}

/// A task blocked only because an issue outside the plan was open when it was read.
fn held_outside(t: &crate::pure::plan::model::Task) -> bool {
    t.status == Status::Blocked
        && crate::pure::question::get(t)
            .is_some_and(|q| q.blocked_at.as_deref() == Some(convert::OUTSIDE))
}

/// `GITHUB_TOKEN`, else `GH_TOKEN`, else what `gh auth token` prints.
pub fn token_from_env() -> Token {
    let env = ["GITHUB_TOKEN", "GH_TOKEN"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|t| !t.trim().is_empty()));
    let t = env.or_else(|| {
        let out = std::process::Command::new("gh")
            .args(["auth", "token"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    });
    Token::new(t.unwrap_or_default())
}

/// The repository: `--repo`, else `GITHUB_REPOSITORY`, else the `origin` remote's
/// `github.com`-style URL (`https://HOST/OWNER/NAME(.git)`, `git@HOST:OWNER/NAME(.git)`).
pub fn repo_from(given: Option<&str>, root: &Path) -> Option<RepoName> {
    if let Some(g) = given {
        return RepoName::parse(g);
    }
    if let Some(r) = std::env::var("GITHUB_REPOSITORY")
        .ok()
        .and_then(|s| RepoName::parse(&s))
    {
        return Some(r);
    }
    repo_of_url(&crate::edge::git::remote_url_in(root, "origin")?)
}

/// `OWNER/NAME` of a remote URL.
pub fn repo_of_url(url: &str) -> Option<RepoName> {
    let path = if let Some((_, rest)) = url.split_once("://") {
        rest.split_once('/')?.1
    } else {
        url.split_once(':')?.1
    };
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    let mut parts = path.rsplit('/');
    let name = parts.next()?;
    let owner = parts.next()?;
    RepoName::parse(&format!("{owner}/{name}"))
}

/// Writes the plan at `plan_rel` and commits it, and nothing else the user staged
/// (`dagexec: plan read from issue #N — …`, one line per task); the commit, or `None` when
/// the plan was already committed as it is.
fn write_and_commit(
    root: &Path,
    opts: &Options,
    plan: &Plan,
    plan_rel: &str,
    reread: bool,
) -> Result<Option<String>, Problem> {
    use std::fmt::Write as _;
    let failed = |e: &dyn std::fmt::Display| other(e.to_string());
    crate::edge::plan_file::check_in(plan, Some(plan_rel), root).map_err(|e| failed(&e))?;
    let plan_path = root.join(plan_rel);
    // Never through a link (a symlinked `.design/issues`): refused before anything is made.
    if let Some(dir) = plan_path.parent() {
        crate::edge::fsx::create_dir_all(root, dir).map_err(|e| failed(&e))?;
    }
    crate::edge::plan_file::save(plan, &plan_path)
        .map_err(|e| other(format!("{}: {e}", plan_path.display())))?;
    let repo = crate::edge::git::Repo::discover(root).map_err(|e| failed(&e))?;
    let verb = if reread { "re-read" } else { "read" };
    let mut message = format!(
        "dagexec: plan {verb} from issue #{} — {} tasks\n\n",
        opts.number,
        plan.tasks.len()
    );
    for t in &plan.tasks {
        let _ = writeln!(message, "- {}", t.subject);
    }
    // Only the plan: the user's staged changes stay staged, out of this commit.
    repo.commit_only(&message, &[plan_rel.to_string()])
        .map_err(|e| failed(&e))
}
