//! A fake GitHub REST API for integration tests, checked against GitHub's own OpenAPI description.
//!
//! Every request is matched against `tests/fixtures/github/rest-api-subset.json` (GitHub's
//! published OpenAPI description, vendored; see its README): the method and path must be a documented
//! operation, documented query parameters must have valid values, and a JSON body must validate
//! against the operation's `requestBody` schema. A request that fails is answered 404 (no such
//! operation) or 422 (bad query/body) *and* recorded as a violation; end each test with
//! [`FakeGitHub::assert_clean`].
//!
//! Valid requests are answered with GitHub's own example response for the operation (the first
//! example of its lowest 2xx response), with a little state layered on top so a multi-step run is
//! coherent: pull requests (numbers 1, 2, …; node ids `PR_<n>`), issue comments (ids 1000+),
//! check runs (ids 5000+; listed by commit), workflow dispatches and the runs they start (their run-name,
//! `head_sha` read from the lab's bare repository, times, artifacts served from a storage URL),
//! reactions and collaborator permissions. Lists are not paginated, except comments and workflow
//! runs, as GitHub pages them; `pulls/list` is newest first like GitHub's default.
//! Faults are injected per operation ([`FakeGitHub::fail_next`], [`FakeGitHub::outage`];
//! `storage` names the artifact storage; [`FakeGitHub::fail_after`]: the operation is done
//! and its answer lost to a 5xx, as a gateway timeout of GitHub's front end leaves it). A missing pull request,
//! comment or check run is GitHub's 404 (not a violation). `POST /graphql` accepts only the
//! `markPullRequestReadyForReview` mutation and the issue query (`fake_github/issues.rs`:
//! sub-issues and blockers, its fields checked against GitHub's GraphQL schema).
//!
//! The server runs on its own thread (wiremock), so it keeps answering while the test thread
//! blocks, e.g. on a subprocess:
//!
//! ```ignore
//! let gh = FakeGitHub::start().await; // from a blocking #[test]:
//! // let gh = tokio::runtime::Runtime::new().unwrap().block_on(FakeGitHub::start());
//! gh.fail_next("pulls/create", 502, &[], serde_json::json!({"message": "Bad Gateway"}));
//! cmd.env("GITHUB_API_URL", gh.url()).assert().success();
//! assert_eq!(gh.calls("pulls/create").len(), 2);
//! assert!(gh.state().pulls[0].draft);
//! gh.assert_clean();
//! ```
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

mod issues;
pub use issues::FakeIssue;

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Upper-case HTTP method.
    pub method: String,
    /// The URL path as sent (percent-encoding kept).
    pub path: String,
    /// The raw query string, if any.
    pub query: Option<String>,
    /// The matched operation, e.g. `pulls/create`; `graphql` for `POST /graphql`; empty if none.
    pub operation_id: String,
    /// The body, if it was non-empty JSON.
    pub body: Option<Value>,
    /// Headers by lower-case name (repeated headers joined with `, `), `authorization` included.
    pub headers: BTreeMap<String, String>,
}

/// The fake's state, layered on GitHub's examples. `repo` fields are `owner/repo`.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Pull requests in creation order.
    pub pulls: Vec<Pull>,
    /// Issue comments in creation order.
    pub comments: Vec<Comment>,
    /// Check runs in creation order.
    pub check_runs: Vec<CheckRun>,
    /// `actions/create-workflow-dispatch` calls that started a run.
    pub dispatches: Vec<Dispatch>,
    /// Dispatches refused because the workflow at the dispatched ref declares no such input
    /// (422 "Unexpected inputs provided", as GitHub answers): the inputs it lacks.
    pub refused_inputs: Vec<Vec<String>>,
    /// `reactions/create-for-issue-comment` calls.
    pub reactions: Vec<Reaction>,
    /// Workflow runs started by dispatches, by id.
    pub runs: BTreeMap<u64, Run>,
    /// Runs finished so far (artifact ids are numbered from it).
    pub artifacts: usize,
    /// Role of a user, as seeded by [`FakeGitHub::set_permission`]; unlisted users have `write`.
    pub permissions: BTreeMap<String, String>,
    /// Issues with their sub-issues and blockers ([`FakeGitHub::add_issue`]).
    pub issues: issues::Issues,
}

/// A pull request created through `pulls/create`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pull {
    pub repo: String,
    pub number: u64,
    /// As sent: `branch` or `owner:branch`.
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: Option<String>,
    pub draft: bool,
    /// `open` or `closed`.
    pub state: String,
    pub node_id: String,
}

/// An issue (or pull request) comment.
#[derive(Clone, Debug, PartialEq)]
pub struct Comment {
    pub repo: String,
    pub id: u64,
    pub issue_number: u64,
    pub body: String,
    /// The author's login: the token's identity for comments made through the API
    /// ([`author_of`]), anyone for [`FakeGitHub::add_comment`].
    pub user: String,
}

/// The installation token the fake hands out for a GitHub App (`apps/create-installation-access-token`).
pub const APP_TOKEN: &str = "ghs_fake_installation_token";
/// The app id its comments carry in `performed_via_github_app`.
pub const APP_ID: u64 = 123456;
/// Its bot user.
pub const APP_BOT: &str = "dagexec-test-app[bot]";
/// The bot user of every other token, as `GITHUB_TOKEN` comments are GitHub Actions'.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// Who a request with `authorization` acts as.
fn author_of(authorization: &str) -> &'static str {
    if authorization.ends_with(APP_TOKEN) {
        APP_BOT
    } else {
        ACTIONS_BOT
    }
}

/// A check run.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckRun {
    pub repo: String,
    pub id: u64,
    pub name: String,
    pub head_sha: String,
    pub status: String,
    pub conclusion: Option<String>,
    /// The `output` object as last sent.
    pub output: Option<Value>,
    /// `details_url` as sent.
    pub details_url: Option<String>,
}

/// A workflow dispatch.
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    pub repo: String,
    pub workflow_id: String,
    pub git_ref: String,
    /// `null` when no inputs were sent.
    pub inputs: Value,
    /// The run it started (every dispatch starts one; its id is answered only with
    /// `return_run_details`).
    pub run_id: u64,
}

/// A workflow run started by a dispatch: `queued` until [`FakeGitHub::finish_run`].
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub id: u64,
    pub status: String,
    pub conclusion: Option<String>,
    /// (artifact id, name, zip archive)
    pub artifacts: Vec<(u64, String, Vec<u8>)>,
    /// The workflow file it runs, the ref it was dispatched on and that ref's commit then
    /// (`head_sha`, when [`FakeGitHub::resolve_refs_in`] names the repository), its event.
    pub workflow_id: String,
    pub head_branch: String,
    pub head_sha: String,
    /// The workflow's `run-name` for it (the template's: `dagexec <branch>: task N attempt K`
    /// for a task run, else the workflow's name).
    pub display_title: String,
    /// When it was created, started (its first job) and last changed (RFC 3339).
    pub created_at: String,
    pub run_started_at: String,
    pub updated_at: String,
}

/// Now, as GitHub writes times (RFC 3339, whole seconds, UTC).
fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A reaction to an issue comment.
#[derive(Clone, Debug, PartialEq)]
pub struct Reaction {
    pub repo: String,
    pub comment_id: u64,
    pub content: String,
}

/// The running fake; dropping it stops the server.
pub struct FakeGitHub {
    server: MockServer,
    inner: Arc<Mutex<Inner>>,
}

impl FakeGitHub {
    /// Starts a fake on 127.0.0.1 and a free port. Panics if the spec file is missing.
    pub async fn start() -> FakeGitHub {
        let spec = spec();
        let inner = Arc::new(Mutex::new(Inner::default()));
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        let responder = Responder {
            spec,
            inner: inner.clone(),
        };
        inner.lock().unwrap().base_url = server.uri();
        Mock::given(wiremock::matchers::any())
            .respond_with(responder)
            .mount(&server)
            .await;
        FakeGitHub { server, inner }
    }

    /// Base URL without a trailing slash: use it as `GITHUB_API_URL`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// The requests matched to one operation (e.g. `pulls/create`, `graphql`), in arrival order.
    pub fn calls(&self, operation_id: &str) -> Vec<Recorded> {
        let inner = self.lock();
        inner
            .requests
            .iter()
            .filter(|r| r.operation_id == operation_id)
            .cloned()
            .collect()
    }

    /// Every violation so far: undocumented operations, bad query parameters, invalid bodies.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Panics listing every violation, if there is any.
    pub fn assert_clean(&self) {
        let v = self.violations();
        assert!(
            v.is_empty(),
            "fake GitHub saw {} violation(s):\n  {}",
            v.len(),
            v.join("\n  ")
        );
    }

    /// Queues a scripted response for the next call of `operation_id` (one per call; queue several
    /// for several calls). It is given instead of the normal answer and changes no state, e.g.
    /// `fail_next("pulls/create", 429, &[("retry-after", "1")], json!({"message": "slow down"}))`.
    /// A `null` body sends an empty body. Requests that are violations do not consume it.
    pub fn fail_next(
        &self,
        operation_id: &str,
        status: u16,
        headers: &[(&str, &str)],
        body: Value,
    ) {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut inner = self.lock();
        inner
            .failures
            .entry(operation_id.to_owned())
            .or_default()
            .push_back((status, headers, body));
    }

    /// Reads the refs of dispatches from the (bare) repository `git_dir`: each run records
    /// the commit its branch pointed at when it was dispatched (`head_sha`), as GitHub does.
    pub fn resolve_refs_in(&self, git_dir: &Path) {
        self.lock().git_dir = Some(git_dir.to_path_buf());
    }

    /// A GitHub outage of `operation_id` (`storage` for artifact storage, where
    /// `actions/download-artifact` redirects): its next `calls` calls are answered 502 Bad
    /// Gateway, as GitHub's front end answers when a backend is down.
    pub fn outage(&self, operation_id: &str, calls: usize) {
        for _ in 0..calls {
            self.fail_next(operation_id, 502, &[], json!({"message": "Server Error"}));
        }
    }

    /// The next call of `operation_id` is carried out (its run started, its comment made…)
    /// and then answered `status` (a 5xx) instead of its answer, as GitHub's front end
    /// answers 502 or 504 when its backend did the work but did not answer in time: the
    /// caller cannot tell from the answer whether anything happened.
    pub fn fail_after(&self, operation_id: &str, status: u16) {
        self.lock()
            .failures_after
            .entry(operation_id.to_owned())
            .or_default()
            .push_back((status, Vec::new(), json!({"message": "Server Error"})));
    }

    /// Moves run `run_id`'s times (created, started, last changed) `hours` into the past: a
    /// run that ended that long before anyone asked for it.
    pub fn age_run(&self, run_id: u64, hours: i64) {
        let mut inner = self.lock();
        let Some(run) = inner.state.runs.get_mut(&run_id) else {
            return;
        };
        let back = |t: &str| {
            t.parse::<jiff::Timestamp>()
                .ok()
                .and_then(|t| t.checked_sub(jiff::SignedDuration::from_hours(hours)).ok())
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_else(|| t.to_string())
        };
        run.created_at = back(&run.created_at);
        run.run_started_at = back(&run.run_started_at);
        run.updated_at = back(&run.updated_at);
    }

    /// Sets the role `user` has on every repository (`admin`, `maintain`, `write`, `triage`,
    /// `read` or `none`), as answered by `repos/get-collaborator-permission-level`.
    pub fn set_permission(&self, user: &str, permission: &str) {
        self.lock()
            .state
            .permissions
            .insert(user.to_owned(), permission.to_owned());
    }

    /// A comment by `user` (a person, `type: User`) on issue or pull request `issue_number`
    /// of `repo`, as if written on the web; its id.
    pub fn add_comment(&self, repo: &str, issue_number: u64, user: &str, body: &str) -> u64 {
        let mut inner = self.lock();
        let id = 1000 + inner.state.comments.len() as u64;
        inner.state.comments.push(Comment {
            repo: repo.into(),
            id,
            issue_number,
            body: body.into(),
            user: user.into(),
        });
        id
    }

    /// Ends run `run_id` with `conclusion` and the artifacts it uploaded (name, zip archive),
    /// as GitHub shows it once its jobs are done.
    pub fn finish_run(&self, run_id: u64, conclusion: &str, artifacts: Vec<(String, Vec<u8>)>) {
        let mut inner = self.lock();
        inner.state.artifacts += 1;
        let next = 8000 + inner.state.artifacts * 10;
        let run = inner.state.runs.get_mut(&run_id).expect("a dispatched run");
        run.updated_at = now_rfc3339();
        run.status = "completed".into();
        run.conclusion = Some(conclusion.into());
        run.artifacts = artifacts
            .into_iter()
            .enumerate()
            .map(|(k, (name, zip))| ((next + k) as u64, name, zip))
            .collect();
    }

    /// A run of `workflow_id` on `branch` at `head_sha` named `display_title`, started
    /// earlier by a `workflow_dispatch` (completed, with no artifact); its id.
    pub fn add_run(
        &self,
        workflow_id: &str,
        branch: &str,
        head_sha: &str,
        display_title: &str,
    ) -> u64 {
        let mut inner = self.lock();
        let id = 6001 + inner.state.runs.len() as u64;
        let now = now_rfc3339();
        inner.state.runs.insert(
            id,
            Run {
                id,
                status: "completed".into(),
                conclusion: Some("success".into()),
                artifacts: Vec::new(),
                workflow_id: workflow_id.into(),
                head_branch: branch.into(),
                head_sha: head_sha.into(),
                display_title: display_title.into(),
                created_at: now.clone(),
                run_started_at: now.clone(),
                updated_at: now,
            },
        );
        id
    }

    /// Marks run `run_id` as running (`in_progress`).
    pub fn start_run(&self, run_id: u64) {
        let mut inner = self.lock();
        if let Some(run) = inner.state.runs.get_mut(&run_id) {
            run.status = "in_progress".into();
            (run.run_started_at, run.updated_at) = (now_rfc3339(), now_rfc3339());
        }
    }

    /// Rewrites comment `id`'s body, as an edit on the web would (or the comment job's
    /// `/execute abort`).
    pub fn edit_comment(&self, id: u64, body: &str) {
        let mut inner = self.lock();
        if let Some(c) = inner.state.comments.iter_mut().find(|c| c.id == id) {
            c.body = body.into();
        }
    }

    /// Comment `id` deleted by its author: GitHub answers 404 for it from now on (a tombstone
    /// in no repository is kept, so the next comment's id stays unique).
    pub fn delete_comment(&self, id: u64) {
        let mut inner = self.lock();
        if let Some(c) = inner.state.comments.iter_mut().find(|c| c.id == id) {
            c.repo.clear();
            c.body.clear();
        }
    }

    /// A snapshot of the state.
    pub fn state(&self) -> State {
        self.lock().state.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// ---------------------------------------------------------------- the spec

enum Seg {
    Lit(String),
    Param(String),
}

struct Operation {
    id: String,
    method: String,
    segs: Vec<Seg>,
    path_params: HashMap<String, Value>,
    query_params: HashMap<String, Value>,
    /// (required, validator) for a JSON request body.
    body: Option<(bool, jsonschema::Validator)>,
    /// 2xx status → its first example (`None`: no body).
    examples: BTreeMap<u16, Option<Value>>,
    docs: String,
}

struct Spec {
    ops: Vec<Operation>,
}

fn spec() -> Arc<Spec> {
    static SPEC: OnceLock<Arc<Spec>> = OnceLock::new();
    SPEC.get_or_init(|| Arc::new(load_spec())).clone()
}

fn load_spec() -> Spec {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github/rest-api-subset.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fake GitHub: cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("rest-api-subset.json is JSON");
    let mut ops = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("spec has `paths`") {
        for (method, op) in item.as_object().into_iter().flatten() {
            if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let id = op["operationId"].as_str().unwrap_or_default().to_owned();
            let (mut path_params, mut query_params) = (HashMap::new(), HashMap::new());
            let params = item
                .get("parameters")
                .into_iter()
                .chain(op.get("parameters"));
            for p in params.filter_map(Value::as_array).flatten() {
                let (name, schema) = (p["name"].as_str().unwrap_or_default(), p["schema"].clone());
                match p["in"].as_str() {
                    Some("path") => path_params.insert(name.to_owned(), schema),
                    Some("query") => query_params.insert(name.to_owned(), schema),
                    _ => None,
                };
            }
            let body = op.get("requestBody").map(|rb| {
                let schema = rb.pointer("/content/application~1json/schema").cloned();
                let schema = nullable_to_null(schema.unwrap_or(json!({})));
                let validator = jsonschema::draft4::options()
                    .should_validate_formats(true)
                    .build(&schema)
                    .unwrap_or_else(|e| {
                        panic!("fake GitHub: schema of {id} does not compile: {e}")
                    });
                (rb["required"].as_bool().unwrap_or(false), validator)
            });
            let mut examples = BTreeMap::new();
            for (code, resp) in op["responses"].as_object().into_iter().flatten() {
                let Some(code) = code.parse::<u16>().ok().filter(|c| (200..300).contains(c)) else {
                    continue;
                };
                let ex = resp
                    .pointer("/content/application~1json/examples")
                    .and_then(Value::as_object);
                examples.insert(
                    code,
                    ex.and_then(|e| e.values().next())
                        .map(|e| e["value"].clone()),
                );
            }
            let segs = template.trim_start_matches('/').split('/').map(|s| {
                match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(name) => Seg::Param(name.to_owned()),
                    None => Seg::Lit(s.to_owned()),
                }
            });
            let docs = op
                .pointer("/externalDocs/url")
                .and_then(Value::as_str)
                .unwrap_or_default();
            ops.push(Operation {
                method: method.to_uppercase(),
                segs: segs.collect(),
                path_params,
                query_params,
                body,
                examples,
                docs: docs.to_owned(),
                id,
            });
        }
    }
    // Most literal segments first, so a literal beats a parameter at the same position.
    ops.sort_by_key(|o| {
        std::cmp::Reverse(o.segs.iter().filter(|s| matches!(s, Seg::Lit(_))).count())
    });
    Spec { ops }
}

/// OpenAPI 3.0's `nullable: true` → JSON Schema's `type: [T, "null"]` (and `null` in an `enum`).
fn nullable_to_null(mut v: Value) -> Value {
    match &mut v {
        Value::Object(map) => {
            if map.remove("nullable") == Some(Value::Bool(true)) {
                if let Some(Value::String(t)) = map.get("type") {
                    let t = t.clone();
                    map.insert("type".into(), json!([t, "null"]));
                }
                if let Some(Value::Array(e)) = map.get_mut("enum") {
                    e.push(Value::Null);
                }
            }
            for (_, child) in map.iter_mut() {
                *child = nullable_to_null(child.take());
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|c| *c = nullable_to_null(c.take())),
        _ => {}
    }
    v
}

/// Whether a path or query value fits a parameter's (simple) schema: integer and enum checks.
fn param_ok(schema: &Value, value: &str) -> bool {
    let int_ok = schema["type"] != "integer" || value.parse::<i64>().is_ok();
    let enum_ok = schema["enum"]
        .as_array()
        .is_none_or(|e| e.iter().any(|x| x == value));
    int_ok && enum_ok
}

fn percent_decode(s: &str) -> String {
    let (b, mut out, mut i) = (s.as_bytes(), Vec::new(), 0);
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if b[i] == b'%' => {
                out.push(byte);
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Operation {
    /// Path parameters if `segs` (the request path split on `/`) fits this template. A trailing
    /// `{ref}` takes the rest of the path, since git refs contain slashes.
    fn matches(&self, method: &str, segs: &[&str]) -> Option<HashMap<String, String>> {
        let n = self.segs.len();
        let greedy = matches!(self.segs.last(), Some(Seg::Param(p)) if p == "ref");
        if method != self.method || segs.len() < n || (segs.len() > n && !greedy) {
            return None;
        }
        let mut params = HashMap::new();
        for (i, seg) in self.segs.iter().enumerate() {
            match seg {
                Seg::Lit(l) if segs[i] == l => {}
                Seg::Lit(_) => return None,
                Seg::Param(name) => {
                    let raw = if i + 1 == n {
                        segs[i..].join("/")
                    } else {
                        segs[i].to_owned()
                    };
                    let value = percent_decode(&raw);
                    let schema = self.path_params.get(name).unwrap_or(&Value::Null);
                    if value.is_empty() || !param_ok(schema, &value) {
                        return None;
                    }
                    params.insert(name.clone(), value);
                }
            }
        }
        Some(params)
    }

    /// The lowest documented 2xx status and its example (`Null`: empty body).
    fn example(&self) -> (u16, Value) {
        let (code, ex) = self
            .examples
            .iter()
            .next()
            .map_or((200, None), |(c, e)| (*c, e.clone()));
        (code, ex.unwrap_or(Value::Null))
    }

    fn not_found(&self) -> ResponseTemplate {
        reply(
            404,
            json!({"message": "Not Found", "documentation_url": self.docs}),
        )
    }
}

// ---------------------------------------------------------------- serving

type Scripted = (u16, Vec<(String, String)>, Value);

#[derive(Default)]
struct Inner {
    state: State,
    /// The server's own URL (for redirects to its artifact storage).
    base_url: String,
    /// The `authorization` header of the request being answered.
    authorization: String,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    failures: HashMap<String, VecDeque<Scripted>>,
    /// Failures given after the operation was carried out ([`FakeGitHub::fail_after`]).
    failures_after: HashMap<String, VecDeque<Scripted>>,
    /// The repository whose refs a dispatch's `head_sha` is read from.
    git_dir: Option<std::path::PathBuf>,
}

/// The commit `git_ref` (a branch) points at in the repository `git_dir`, as GitHub records
/// it for a run started on it; empty without one.
fn head_of(git_dir: Option<&Path>, git_ref: &str) -> String {
    {
        let Some(dir) = git_dir else {
            return String::new();
        };
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{git_ref}^{{commit}}"))
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }
}

/// The inputs of a dispatch's `body` that the workflow `workflow` (a file name) at the
/// dispatched ref of the repository `git_dir` does not declare under
/// `on.workflow_dispatch.inputs`; none when there is no repository or no such file there.
fn undeclared_inputs(git_dir: Option<&Path>, workflow: &str, body: &Value) -> Vec<String> {
    let (Some(dir), Some(git_ref)) = (git_dir, body["ref"].as_str()) else {
        return Vec::new();
    };
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .arg("show")
        .arg(format!("refs/heads/{git_ref}:.github/workflows/{workflow}"))
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return Vec::new();
    };
    let Ok(yaml) = serde_yaml::from_slice::<serde_yaml::Value>(&out.stdout) else {
        return Vec::new();
    };
    // `on` is read by YAML 1.1 loaders as `true`; serde_yaml keeps it a string.
    let declared = &yaml["on"]["workflow_dispatch"]["inputs"];
    body["inputs"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|k| declared.get(k.as_str()).is_none())
        .cloned()
        .collect()
}

struct Responder {
    spec: Arc<Spec>,
    inner: Arc<Mutex<Inner>>,
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.serve(&self.spec, req)
    }
}

fn reply(status: u16, body: Value) -> ResponseTemplate {
    match body {
        Value::Null => ResponseTemplate::new(status),
        body => ResponseTemplate::new(status).set_body_json(body),
    }
}

/// Sets `ptr` (`/a/b`) in `v`, creating objects on the way.
fn set(v: &mut Value, ptr: &str, new: Value) {
    let mut cur = v;
    for key in ptr.split('/').skip(1) {
        cur = &mut cur[key];
    }
    *cur = new;
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v[key].as_str().map(str::to_owned)
}

impl Inner {
    fn serve(&mut self, spec: &Spec, req: &Request) -> ResponseTemplate {
        let method = req.method.as_str().to_uppercase();
        let path = req.url.path().to_owned();
        let query: HashMap<String, String> = req
            .url
            .query_pairs()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let mut problems = Vec::new();
        let mut body = None;
        if !req.body.is_empty() {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(v) => body = Some(v),
                Err(e) => problems.push(format!("body is not JSON: {e}")),
            }
        }
        // Artifact storage, where `actions/download-artifact` redirects: not the API, and
        // never to be sent the API's token.
        if let Some(id) = path.strip_prefix("/_storage/artifacts/") {
            if req.headers.contains_key("authorization") {
                self.violations.push(format!(
                    "GET {path}: the API token was sent to artifact storage"
                ));
            }
            self.requests.push(Recorded {
                method: method.clone(),
                path: path.clone(),
                query: None,
                operation_id: "storage".into(),
                body: None,
                headers: BTreeMap::new(),
            });
            if let Some((status, _, _)) = self
                .failures
                .get_mut("storage")
                .and_then(VecDeque::pop_front)
            {
                return ResponseTemplate::new(status);
            }
            let id: u64 = id.trim_end_matches(".zip").parse().unwrap_or(0);
            let zip = self
                .state
                .runs
                .values()
                .flat_map(|r| &r.artifacts)
                .find(|a| a.0 == id)
                .map(|a| a.2.clone());
            return match zip {
                Some(z) => ResponseTemplate::new(200)
                    .insert_header("content-type", "application/zip")
                    .set_body_bytes(z),
                None => ResponseTemplate::new(404),
            };
        }
        let graphql = method == "POST" && path == "/graphql";
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let found = spec
            .ops
            .iter()
            .find_map(|op| Some((op, op.matches(&method, &segs)?)));
        let op_id = match (graphql, &found) {
            (true, _) => "graphql".to_owned(),
            (false, found) => found
                .as_ref()
                .map_or(String::new(), |(op, _)| op.id.clone()),
        };
        let mut headers = BTreeMap::<String, String>::new();
        for (name, value) in &req.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            let slot = headers.entry(name.as_str().to_owned()).or_default();
            *slot = if slot.is_empty() {
                value.into_owned()
            } else {
                format!("{slot}, {value}")
            };
        }
        self.authorization = headers.get("authorization").cloned().unwrap_or_default();
        self.requests.push(Recorded {
            method: method.clone(),
            path: path.clone(),
            query: req.url.query().map(str::to_owned),
            operation_id: op_id.clone(),
            body: body.clone(),
            headers,
        });
        let what = format!(
            "{method} {path}{}",
            req.url.query().map(|q| format!("?{q}")).unwrap_or_default()
        );
        let mut docs = String::new();
        let mut graphql_pr = None;
        let issue_query = graphql && issues::is_issue_query(body.as_ref());
        if issue_query {
            let q = body
                .as_ref()
                .and_then(|b| b["query"].as_str())
                .unwrap_or_default();
            problems.extend(issues::check_query(q));
        } else if graphql {
            match graphql_pr_id(body.as_ref()) {
                Ok(id) => graphql_pr = Some(id),
                Err(e) => problems.push(e),
            }
        } else if let Some((op, _)) = &found {
            docs.clone_from(&op.docs);
            for (k, v) in &query {
                match op.query_params.get(k) {
                    None => problems.push(format!("undocumented query parameter `{k}`")),
                    Some(s) if !param_ok(s, v) => {
                        problems.push(format!("query `{k}={v}` does not fit {s}"))
                    }
                    Some(_) => {}
                }
            }
            match (&op.body, &body) {
                (Some((true, _)), None) if req.body.is_empty() => {
                    problems.push("required JSON body missing".into())
                }
                (Some((_, validator)), Some(b)) => {
                    for e in validator.iter_errors(b) {
                        let at = e.instance_path().to_string();
                        problems.push(format!(
                            "body invalid at `{}`: {e}",
                            if at.is_empty() { "/" } else { &at }
                        ));
                    }
                }
                (None, Some(_)) => {
                    problems.push("body sent to an operation that takes none".into())
                }
                _ => {}
            }
        } else {
            self.violations.push(format!(
                "{what}: no documented operation has this method and path"
            ));
            return reply(
                404,
                json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
            );
        }
        if !problems.is_empty() {
            let context = if op_id.is_empty() {
                String::new()
            } else {
                format!(" ({op_id})")
            };
            self.violations
                .extend(problems.iter().map(|p| format!("{what}{context}: {p}")));
            return reply(
                422,
                json!({"message": "Validation Failed", "errors": problems, "documentation_url": docs}),
            );
        }
        if let Some((status, headers, body)) =
            self.failures.get_mut(&op_id).and_then(VecDeque::pop_front)
        {
            let t = headers
                .into_iter()
                .fold(reply(status, body), |t, (k, v)| t.insert_header(k, v));
            return t;
        }
        if issue_query {
            return issues::answer_graphql(self, body.as_ref().unwrap_or(&Value::Null));
        }
        let answer = match (graphql_pr, found) {
            (Some(node_id), _) => self.ready_for_review(&node_id),
            (None, Some((op, params))) => {
                self.answer(op, &params, &query, body.unwrap_or(Value::Null))
            }
            (None, None) => unreachable!("handled above"),
        };
        match self
            .failures_after
            .get_mut(&op_id)
            .and_then(VecDeque::pop_front)
        {
            Some((status, _, body)) => reply(status, body),
            None => answer,
        }
    }

    fn ready_for_review(&mut self, node_id: &str) -> ResponseTemplate {
        let Some(pr) = self.state.pulls.iter_mut().find(|p| p.node_id == node_id) else {
            let message = format!("Could not resolve to a node with the global id of '{node_id}'.");
            return reply(
                200,
                json!({"data": {"markPullRequestReadyForReview": null},
                "errors": [{"type": "NOT_FOUND", "path": ["markPullRequestReadyForReview"], "message": message}]}),
            );
        };
        pr.draft = false;
        let pull = json!({"isDraft": false, "number": pr.number});
        reply(
            200,
            json!({"data": {"markPullRequestReadyForReview": {"pullRequest": pull}}}),
        )
    }

    /// The example answer for a valid request, with state layered on.
    fn answer(
        &mut self,
        op: &Operation,
        p: &HashMap<String, String>,
        q: &HashMap<String, String>,
        body: Value,
    ) -> ResponseTemplate {
        let (mut status, mut ex) = op.example();
        if let Some(answer) = issues::answer_rest(self, &op.id, &ex, p, q) {
            return answer;
        }
        let param = |k: &str| p.get(k).cloned().unwrap_or_default();
        let num = |k: &str| param(k).parse::<u64>().unwrap_or(0);
        let repo = format!("{}/{}", param("owner"), param("repo"));
        let first = |ex: &Value| {
            ex.as_array()
                .and_then(|a| a.first())
                .cloned()
                .unwrap_or(json!({}))
        };
        let st = &mut self.state;
        match op.id.as_str() {
            "pulls/create" => {
                let number = st.pulls.len() as u64 + 1;
                let pr = Pull {
                    repo: repo.clone(),
                    number,
                    head: str_of(&body, "head").unwrap_or_default(),
                    base: str_of(&body, "base").unwrap_or_default(),
                    title: str_of(&body, "title").unwrap_or_default(),
                    body: str_of(&body, "body"),
                    draft: body["draft"].as_bool().unwrap_or(false),
                    state: "open".into(),
                    node_id: format!("PR_{number}"),
                };
                ex = pull_json(ex, &pr);
                st.pulls.push(pr);
            }
            "pulls/list" => {
                let want = q.get("state").map_or("open", String::as_str);
                let (item, owner) = (first(&ex), param("owner"));
                let hit = |pr: &&Pull| {
                    let head_ok = q.get("head").is_none_or(|h| {
                        let (o, b) = h.split_once(':').unwrap_or((&owner, h));
                        pull_head(pr) == (o.to_owned(), b.to_owned())
                    });
                    let base_ok = q.get("base").is_none_or(|b| &pr.base == b);
                    pr.repo == repo && (want == "all" || pr.state == want) && head_ok && base_ok
                };
                ex = st
                    .pulls
                    .iter()
                    .rev()
                    .filter(hit)
                    .map(|pr| pull_json(item.clone(), pr))
                    .collect();
            }
            "pulls/get" | "pulls/update" => {
                let n = num("pull_number");
                let Some(pr) = st
                    .pulls
                    .iter_mut()
                    .find(|pr| pr.repo == repo && pr.number == n)
                else {
                    return op.not_found();
                };
                pr.title = str_of(&body, "title").unwrap_or(pr.title.clone());
                pr.body = str_of(&body, "body").or(pr.body.clone());
                pr.state = str_of(&body, "state").unwrap_or(pr.state.clone());
                pr.base = str_of(&body, "base").unwrap_or(pr.base.clone());
                ex = pull_json(ex, pr);
            }
            "issues/create-comment" => {
                let c = Comment {
                    repo: repo.clone(),
                    id: 1000 + st.comments.len() as u64,
                    issue_number: num("issue_number"),
                    body: str_of(&body, "body").unwrap_or_default(),
                    user: author_of(&self.authorization).into(),
                };
                ex = comment_json(ex, &c);
                st.comments.push(c);
            }
            "issues/get-comment" | "issues/update-comment" => {
                let id = num("comment_id");
                let Some(c) = st
                    .comments
                    .iter_mut()
                    .find(|c| c.repo == repo && c.id == id)
                else {
                    return op.not_found();
                };
                c.body = str_of(&body, "body").unwrap_or(c.body.clone());
                ex = comment_json(ex, c);
            }
            "issues/list-comments" => {
                // Paginated as GitHub does: `per_page` (default 30, at most 100), `page` from 1.
                let (n, item) = (num("issue_number"), first(&ex));
                let qnum = |k: &str, d: usize| q.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
                let per_page = qnum("per_page", 30).clamp(1, 100);
                let page = qnum("page", 1).max(1);
                let hit = |c: &&Comment| c.repo == repo && c.issue_number == n;
                ex = st
                    .comments
                    .iter()
                    .filter(hit)
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(|c| comment_json(item.clone(), c))
                    .collect();
            }
            "checks/create" => {
                let conclusion = str_of(&body, "conclusion");
                let default_status = if conclusion.is_some() {
                    "completed"
                } else {
                    "queued"
                };
                let run = CheckRun {
                    repo: repo.clone(),
                    id: 5000 + st.check_runs.len() as u64,
                    name: str_of(&body, "name").unwrap_or_default(),
                    head_sha: str_of(&body, "head_sha").unwrap_or_default(),
                    status: str_of(&body, "status").unwrap_or(default_status.into()),
                    conclusion,
                    output: body.get("output").cloned(),
                    details_url: str_of(&body, "details_url"),
                };
                ex = check_json(ex, &run);
                st.check_runs.push(run);
            }
            "checks/list-for-ref" => {
                // The check runs on a commit (`ref`: its SHA), newest first, by `check_name`.
                let item = ex["check_runs"][0].clone();
                let list: Vec<Value> = (st.check_runs.iter().rev())
                    .filter(|r| r.repo == repo && r.head_sha == param("ref"))
                    .filter(|r| q.get("check_name").is_none_or(|n| *n == r.name))
                    .map(|r| check_json(item.clone(), r))
                    .collect();
                ex = json!({"total_count": list.len(), "check_runs": list});
            }
            "checks/get" | "checks/update" => {
                let id = num("check_run_id");
                let Some(run) = st
                    .check_runs
                    .iter_mut()
                    .find(|r| r.repo == repo && r.id == id)
                else {
                    return op.not_found();
                };
                run.name = str_of(&body, "name").unwrap_or(run.name.clone());
                if let Some(c) = str_of(&body, "conclusion") {
                    (run.conclusion, run.status) = (Some(c), "completed".into());
                }
                run.status = str_of(&body, "status").unwrap_or(run.status.clone());
                run.output = body.get("output").cloned().or(run.output.clone());
                ex = check_json(ex, run);
            }
            "actions/create-workflow-dispatch"
                if !undeclared_inputs(self.git_dir.as_deref(), &param("workflow_id"), &body)
                    .is_empty() =>
            {
                let missing =
                    undeclared_inputs(self.git_dir.as_deref(), &param("workflow_id"), &body);
                let list = missing
                    .iter()
                    .map(|k| format!("\"{k}\""))
                    .collect::<Vec<_>>();
                st.refused_inputs.push(missing);
                (status, ex) = (
                    422,
                    json!({
                        "message": format!("Unexpected inputs provided: [{}]", list.join(", ")),
                        "documentation_url": "https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event",
                        "status": "422"
                    }),
                );
            }
            "actions/create-workflow-dispatch" => {
                let run_id = 7001 + st.dispatches.len() as u64;
                st.dispatches.push(Dispatch {
                    repo: repo.clone(),
                    workflow_id: param("workflow_id"),
                    git_ref: str_of(&body, "ref").unwrap_or_default(),
                    inputs: body["inputs"].clone(),
                    run_id,
                });
                let git_ref = str_of(&body, "ref").unwrap_or_default();
                let input = |k: &str| body["inputs"][k].as_str().unwrap_or_default().to_string();
                let display_title = if input("task").is_empty() {
                    "dagexec".to_string()
                } else {
                    format!(
                        "dagexec {}: task {} attempt {}",
                        input("branch"),
                        input("task"),
                        input("attempt")
                    )
                };
                let head_sha = head_of(self.git_dir.as_deref(), &git_ref);
                let now = now_rfc3339();
                st.runs.insert(
                    run_id,
                    Run {
                        id: run_id,
                        status: "queued".into(),
                        conclusion: None,
                        artifacts: Vec::new(),
                        workflow_id: param("workflow_id"),
                        head_branch: git_ref,
                        head_sha,
                        display_title,
                        created_at: now.clone(),
                        run_started_at: now.clone(),
                        updated_at: now,
                    },
                );
                if body["return_run_details"] != true {
                    (status, ex) = (204, Value::Null);
                } else {
                    set(&mut ex, "/workflow_run_id", json!(run_id));
                    let url = format!("https://api.github.com/repos/{repo}/actions/runs/{run_id}");
                    set(&mut ex, "/run_url", json!(url));
                    let html = format!("https://github.com/{repo}/actions/runs/{run_id}");
                    set(&mut ex, "/html_url", json!(html));
                }
            }
            "actions/list-workflow-run-artifacts" if st.runs.contains_key(&num("run_id")) => {
                let run = &st.runs[&num("run_id")];
                let template = ex["artifacts"][0].clone();
                let list: Vec<Value> = run
                    .artifacts
                    .iter()
                    .filter(|a| q.get("name").is_none_or(|n| *n == a.1))
                    .map(|(id, name, zip)| {
                        let mut a = template.clone();
                        set(&mut a, "/id", json!(id));
                        set(&mut a, "/name", json!(name));
                        set(&mut a, "/size_in_bytes", json!(zip.len()));
                        set(&mut a, "/expired", json!(false));
                        set(&mut a, "/workflow_run/id", json!(run.id));
                        a
                    })
                    .collect();
                ex = json!({"total_count": list.len(), "artifacts": list});
            }
            "actions/list-workflow-runs" => {
                // Newest first and paginated, as GitHub lists them (`per_page` default 30, at
                // most 100); filtered by the workflow, `branch`, `event` and `head_sha`.
                let (workflow, item) = (param("workflow_id"), ex["workflow_runs"][0].clone());
                let qnum = |k: &str, d: usize| q.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
                let per_page = qnum("per_page", 30).clamp(1, 100);
                let page = qnum("page", 1).max(1);
                let hit = |r: &&Run| {
                    r.workflow_id == workflow
                        && q.get("branch").is_none_or(|b| *b == r.head_branch)
                        && q.get("event").is_none_or(|e| e == "workflow_dispatch")
                        && q.get("head_sha").is_none_or(|h| *h == r.head_sha)
                };
                let all: Vec<&Run> = st.runs.values().rev().filter(hit).collect();
                let list: Vec<Value> = all
                    .iter()
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(|r| run_json(item.clone(), r, &repo))
                    .collect();
                ex = json!({"total_count": all.len(), "workflow_runs": list});
            }
            "actions/download-artifact" => {
                let id = num("artifact_id");
                if !st
                    .runs
                    .values()
                    .flat_map(|r| &r.artifacts)
                    .any(|a| a.0 == id)
                {
                    return op.not_found();
                }
                return ResponseTemplate::new(302).insert_header(
                    "location",
                    format!("{}/_storage/artifacts/{id}.zip", self.base_url),
                );
            }
            "reactions/create-for-issue-comment" => {
                let content = str_of(&body, "content").unwrap_or_default();
                (status, ex) = (201, op.examples.get(&201).cloned().flatten().unwrap_or(ex));
                set(&mut ex, "/content", json!(content));
                st.reactions.push(Reaction {
                    repo: repo.clone(),
                    comment_id: num("comment_id"),
                    content,
                });
            }
            "repos/get-collaborator-permission-level" => {
                let user = param("username");
                let role = st.permissions.get(&user).map_or("write", String::as_str);
                let permission = match role {
                    "maintain" => "write",
                    "triage" => "read",
                    r => r,
                };
                set(&mut ex, "/permission", json!(permission));
                set(&mut ex, "/role_name", json!(role));
                set(&mut ex, "/user/login", json!(user));
            }
            "apps/create-installation-access-token" => {
                set(&mut ex, "/token", json!(APP_TOKEN));
            }
            "git/get-ref" | "git/update-ref" => {
                set(&mut ex, "/ref", json!(format!("refs/{}", param("ref"))));
                if let Some(sha) = str_of(&body, "sha") {
                    set(&mut ex, "/object/sha", json!(sha));
                }
            }
            "git/create-ref" => {
                set(&mut ex, "/ref", body["ref"].clone());
                set(&mut ex, "/object/sha", body["sha"].clone());
            }
            "repos/get" => {
                set(&mut ex, "/name", json!(param("repo")));
                set(&mut ex, "/full_name", json!(repo));
                set(&mut ex, "/owner/login", json!(param("owner")));
            }
            "actions/get-workflow-run" => {
                set(&mut ex, "/id", json!(num("run_id")));
                if let Some(run) = st.runs.get(&num("run_id")) {
                    ex = run_json(ex, run, &repo);
                }
            }
            _ => {}
        }
        reply(status, ex)
    }
}

/// A workflow run as GitHub answers it, from its example `item`.
fn run_json(mut v: Value, run: &Run, repo: &str) -> Value {
    set(&mut v, "/id", json!(run.id));
    set(&mut v, "/status", json!(run.status));
    set(&mut v, "/conclusion", json!(run.conclusion));
    set(&mut v, "/run_attempt", json!(1));
    let html = format!("https://github.com/{repo}/actions/runs/{}", run.id);
    set(&mut v, "/html_url", json!(html));
    set(&mut v, "/event", json!("workflow_dispatch"));
    set(&mut v, "/head_branch", json!(run.head_branch));
    set(&mut v, "/head_sha", json!(run.head_sha));
    set(&mut v, "/display_title", json!(run.display_title));
    set(&mut v, "/created_at", json!(run.created_at));
    set(&mut v, "/run_started_at", json!(run.run_started_at));
    set(&mut v, "/updated_at", json!(run.updated_at));
    v
}

/// (owner, branch) of a PR's head.
fn pull_head(pr: &Pull) -> (String, String) {
    let owner = pr.repo.split('/').next().unwrap_or_default();
    let (o, b) = pr.head.split_once(':').unwrap_or((owner, &pr.head));
    (o.to_owned(), b.to_owned())
}

fn pull_json(mut v: Value, pr: &Pull) -> Value {
    let (head_owner, head_ref) = pull_head(pr);
    let owner = pr.repo.split('/').next().unwrap_or_default();
    let fields = [
        ("/number", json!(pr.number)),
        ("/title", json!(pr.title)),
        ("/body", json!(pr.body)),
        ("/draft", json!(pr.draft)),
        ("/state", json!(pr.state)),
        ("/node_id", json!(pr.node_id)),
        (
            "/html_url",
            json!(format!("https://github.com/{}/pull/{}", pr.repo, pr.number)),
        ),
        ("/head/ref", json!(head_ref)),
        ("/head/label", json!(format!("{head_owner}:{head_ref}"))),
        ("/base/ref", json!(pr.base)),
        ("/base/label", json!(format!("{owner}:{}", pr.base))),
    ];
    fields
        .into_iter()
        .for_each(|(ptr, val)| set(&mut v, ptr, val));
    v
}

fn comment_json(mut v: Value, c: &Comment) -> Value {
    let html = format!(
        "https://github.com/{}/issues/{}#issuecomment-{}",
        c.repo, c.issue_number, c.id
    );
    set(&mut v, "/id", json!(c.id));
    set(&mut v, "/node_id", json!(format!("IC_{}", c.id)));
    set(&mut v, "/body", json!(c.body));
    set(&mut v, "/html_url", json!(html));
    set(
        &mut v,
        "/issue_url",
        json!(format!(
            "https://api.github.com/repos/{}/issues/{}",
            c.repo, c.issue_number
        )),
    );
    let bot = c.user.ends_with("[bot]");
    set(&mut v, "/user/login", json!(c.user));
    set(
        &mut v,
        "/user/type",
        json!(if bot { "Bot" } else { "User" }),
    );
    let app = match c.user.as_str() {
        APP_BOT => json!({"id": APP_ID, "slug": "dagexec-test-app", "name": "dagexec test app"}),
        ACTIONS_BOT => json!({"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}),
        _ => Value::Null,
    };
    if app.is_null() {
        if let Some(o) = v.as_object_mut() {
            o.insert("performed_via_github_app".into(), Value::Null);
        }
    } else {
        let mut full = v["performed_via_github_app"].clone();
        if !full.is_object() {
            full = json!({});
        }
        for (k, val) in app.as_object().unwrap() {
            full[k] = val.clone();
        }
        if let Some(o) = v.as_object_mut() {
            o.insert("performed_via_github_app".into(), full);
        }
    }
    v
}

fn check_json(mut v: Value, run: &CheckRun) -> Value {
    set(&mut v, "/id", json!(run.id));
    set(&mut v, "/name", json!(run.name));
    set(&mut v, "/head_sha", json!(run.head_sha));
    set(&mut v, "/status", json!(run.status));
    set(&mut v, "/conclusion", json!(run.conclusion));
    set(
        &mut v,
        "/html_url",
        json!(format!("https://github.com/{}/runs/{}", run.repo, run.id)),
    );
    set(&mut v, "/details_url", json!(run.details_url));
    for key in ["title", "summary", "text"] {
        let sent = run.output.as_ref().map_or(Value::Null, |o| o[key].clone());
        set(&mut v, &format!("/output/{key}"), sent);
    }
    v
}

/// The pull request node id of a `markPullRequestReadyForReview` mutation, or why it is refused.
fn graphql_pr_id(body: Option<&Value>) -> Result<String, String> {
    let body = body.ok_or("GraphQL request without a JSON body")?;
    let query = body["query"]
        .as_str()
        .ok_or("GraphQL body without a string `query`")?;
    if !query.trim_start().starts_with("mutation")
        || !query.contains("markPullRequestReadyForReview")
    {
        return Err(format!(
            "only the mutation markPullRequestReadyForReview is allowed, got: {query}"
        ));
    }
    // `pullRequestId: $var` or `pullRequestId: "PR_1"`, skipping a `$pullRequestId` declaration.
    let arg = query.match_indices("pullRequestId").find_map(|(i, m)| {
        let rest = query[i + m.len()..]
            .trim_start()
            .strip_prefix(':')?
            .trim_start();
        if query[..i].ends_with('$') {
            return None;
        }
        if let Some(var) = rest.strip_prefix('$') {
            let name: String = var
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return body["variables"][name.as_str()].as_str().map(str::to_owned);
        }
        rest.strip_prefix('"')?.split('"').next().map(str::to_owned)
    });
    arg.or_else(|| str_of(&body["variables"], "pullRequestId"))
        .ok_or_else(|| format!("markPullRequestReadyForReview without a pullRequestId: {body}"))
}
