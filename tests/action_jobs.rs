//! The Action's `work` and `finalize` commands run directly (no act): what finalize refuses
//! (patches touching the plan or workflows, a patch that does not apply), what it makes of a
//! missing artifact, retries carried to the next round, and GitHub App authentication, against
//! a local bare remote and the fake GitHub API.

#[path = "common/fake_github.rs"]
mod fake_github;

mod common;

use std::path::{Path, PathBuf};

use fake_github::FakeGitHub;
use serde_json::{Value, json};

use common::{dagexec, git, manifest};

const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo a > a.txt; mkdir -p .github/workflows; echo "on: push" > .github/workflows/evil.yml; echo "COMPLETED: a" ;;
1) echo b > b.txt; echo "COMPLETED: b" ;;
*) echo "COMPLETED: nothing" ;;
esac
"#;

fn task(subject: &str, creates: &[&str]) -> Value {
    json!({
        "subject": subject, "description": subject, "status": "pending", "blockedBy": [],
        "metadata": {"files": {"create": creates, "modify": []}}
    })
}

/// A repository pushed to a bare remote; returns (repo, origin, base sha).
fn setup(tmp: &Path) -> (PathBuf, PathBuf, String) {
    let origin = tmp.join("origin.git");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    let repo = tmp.join("repo");
    std::fs::create_dir_all(repo.join(".design")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(
        &repo,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    let plan = json!({
        "schemaVersion": 2, "goal": "Jobs", "context": {}, "progress": {"completedTasks": []},
        "tasks": [task("A", &["a.txt"]), task("B", &["b.txt"]), task("C", &["c.txt"])]
    });
    std::fs::write(
        repo.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    std::fs::write(repo.join("worker.sh"), WORKER).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "plan"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    (repo, origin, base)
}

/// `dagexec action work` for attempt 1 of task 0 in run `run_id`, round `round`, its files
/// left in `dir`.
fn work_job(
    repo: &Path,
    (run_id, round): (&str, u32),
    base: &str,
    worker: &str,
    dir: impl AsRef<Path>,
) -> std::process::Output {
    dagexec(repo)
        .args(["action", "work"])
        .env("GITHUB_RUN_ID", run_id)
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", round.to_string())
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_WORKER", worker)
        .env("DAGEXEC_ARTIFACTS", dir.as_ref())
        .output()
        .unwrap()
}

/// `dagexec action work` for one task, its files left under `artifacts/<name>`.
fn work(repo: &Path, artifacts: &Path, task: usize, base: &str) {
    let name = format!("dagexec-77-1-task-{task}-attempt-1");
    let out = dagexec(repo)
        .args(["action", "work"])
        .env("GITHUB_RUN_ID", "77")
        .env("DAGEXEC_TASK", task.to_string())
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_WORKER", "sh ./worker.sh")
        .env("DAGEXEC_ARTIFACTS", artifacts.join(&name))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Undo the worker's changes, as a fresh job would start clean.
    git(repo, &["reset", "-q", "--hard", base]);
    git(repo, &["clean", "-qfdx"]);
}

#[test]
fn finalize_refuses_what_a_task_may_not_change_and_authenticates_as_an_app() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, base) = setup(tmp.path());
    let artifacts = tmp.path().join("artifacts");
    work(&repo, &artifacts, 0, &base);
    work(&repo, &artifacts, 1, &base);
    // Task 1's job is tampered with: its patch now edits the plan itself.
    let plan_patch = {
        let scratch = tmp.path().join("scratch");
        git(
            tmp.path(),
            &[
                "clone",
                "-q",
                origin.to_str().unwrap(),
                scratch.to_str().unwrap(),
            ],
        );
        std::fs::write(scratch.join(".design/plan.json"), "{}\n").unwrap();
        std::fs::write(scratch.join("b.txt"), "b\n").unwrap();
        git(&scratch, &["add", "-A"]);
        git(&scratch, &["diff", "--cached", "--binary", "--full-index"])
    };
    std::fs::write(
        artifacts.join("dagexec-77-1-task-1-attempt-1/changes.patch"),
        plan_patch,
    )
    .unwrap();
    // Task 2's job left nothing.
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let matrix = r#"{"include":[{"task":0,"attempt":1,"name":"task 0: A"},{"task":1,"attempt":1,"name":"task 1: B"},{"task":2,"attempt":1,"name":"task 2: C"}]}"#;
    let key = std::fs::read_to_string(manifest().join("tests/fixtures/app-key.pem")).unwrap();
    let out = dagexec(&repo)
        .args(["action", "finalize"])
        .env("GITHUB_RUN_ID", "77")
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "acme/widgets")
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_REF_NAME", "main")
        .env("DAGEXEC_TOKEN", "ghs_actions_token_unused")
        .env("DAGEXEC_APP_ID", "123456")
        .env("DAGEXEC_APP_PRIVATE_KEY", &key)
        .env("DAGEXEC_MATRIX", matrix)
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/jobs")
        .env("DAGEXEC_ARTIFACTS", &artifacts)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("BEGIN RSA"), "the key never reaches the log");
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/jobs:.design/plan.json"])).unwrap();
    let t = |i: usize, f: &str| state["tasks"][i][f].clone();
    // Task 0 changed a workflow: refused, and retried next round with its prompt kept.
    assert_eq!(t(0, "status"), "pending", "{state:#}");
    assert!(
        t(0, "result")
            .as_str()
            .unwrap()
            .contains("allow-workflow-changes"),
        "{state:#}"
    );
    assert!(
        t(0, "dagexecRetryPrompt")
            .as_str()
            .unwrap()
            .contains("allow-workflow-changes")
    );
    assert!(
        t(1, "result").as_str().unwrap().contains("the plan itself"),
        "{state:#}"
    );
    assert!(
        t(2, "result")
            .as_str()
            .unwrap()
            .contains("No status line returned and no log file found"),
        "{state:#}"
    );
    // Nothing a refused patch carried was committed.
    let files = git(&origin, &["ls-tree", "-r", "--name-only", "dagexec/jobs"]);
    assert!(
        !files.contains("evil.yml") && !files.contains("a.txt"),
        "{files}"
    );
    // The app's installation token did the work.
    assert_eq!(gh.calls("apps/get-repo-installation").len(), 1);
    assert_eq!(gh.calls("apps/create-installation-access-token").len(), 1);
    let pr = &gh.calls("pulls/create")[0];
    assert_eq!(
        pr.headers["authorization"],
        "Bearer ghs_fake_installation_token"
    );
    // Both tokens are masked in the log before anything else is printed.
    assert!(
        text.contains("::add-mask::ghs_fake_installation_token"),
        "{text}"
    );
    assert!(
        text.contains("::add-mask::ghs_actions_token_unused"),
        "{text}"
    );
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 1);
    gh.assert_clean();
}

// ---- Questions on the pull request and `/execute` comments ---------------------------------

const REPO: &str = "Codertocat/Hello-World";

const ASKING_WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$prompt" in
*"use sqlite"*) echo db > a.txt; echo "COMPLETED: used sqlite" ;;
*) echo "BLOCKED: which database should the model use?" ;;
esac
"#;

/// A repository whose one task asks a question, pushed to a bare remote.
fn asking(tmp: &Path) -> (PathBuf, PathBuf, String) {
    let (repo, origin, _) = setup(tmp);
    let plan = json!({
        "schemaVersion": 2, "goal": "Ask", "context": {}, "progress": {"completedTasks": []},
        "tasks": [task("A", &["a.txt"])]
    });
    std::fs::write(
        repo.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    std::fs::write(repo.join("worker.sh"), ASKING_WORKER).unwrap();
    git(&repo, &["commit", "-qam", "one asking task"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    (repo, origin, base)
}

/// `dagexec` with the GitHub context of a run in `REPO` on the fake.
fn in_actions(repo: &Path, gh: &FakeGitHub, run_id: &str) -> std::process::Command {
    let mut cmd = dagexec(repo);
    cmd.env("GITHUB_RUN_ID", run_id)
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_REF_NAME", "main")
        .env("DAGEXEC_TOKEN", "ghs_token");
    cmd
}

fn finalize(
    repo: &Path,
    gh: &FakeGitHub,
    run_id: &str,
    task_attempt: (usize, u32),
    base: &str,
    artifacts: &Path,
) -> String {
    let (t, a) = task_attempt;
    let matrix = format!(r#"{{"include":[{{"task":{t},"attempt":{a},"name":"task {t}: A"}}]}}"#);
    let out = in_actions(repo, gh, run_id)
        .args(["action", "finalize"])
        .env("DAGEXEC_MATRIX", matrix)
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/ask")
        .env("DAGEXEC_ARTIFACTS", artifacts)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

/// GitHub's example comment event, made a comment on pull request #1 saying `body`.
fn comment_event(dir: &Path, body: &str) -> PathBuf {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/webhooks/issue_comment.created.0.json"
    );
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    p["issue"]["number"] = json!(1);
    p["issue"]["pull_request"] =
        json!({"url": format!("https://api.github.com/repos/{REPO}/pulls/1")});
    p["comment"]["body"] = json!(body);
    let file = dir.join(format!("event-{}.json", body.len()));
    std::fs::write(&file, p.to_string()).unwrap();
    file
}

fn comment(repo: &Path, gh: &FakeGitHub, event: &Path) -> String {
    let out = in_actions(repo, gh, "90")
        .args(["action", "comment"])
        .env("GITHUB_EVENT_NAME", "issue_comment")
        .env("GITHUB_EVENT_PATH", event)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

fn branch_plan(origin: &Path) -> Value {
    serde_json::from_str(&git(origin, &["show", "dagexec/ask:.design/plan.json"])).unwrap()
}

#[test]
fn a_blocked_task_asks_on_the_pull_request_and_the_answer_resumes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, base) = asking(tmp.path());
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let artifacts = tmp.path().join("artifacts");
    let name = "dagexec-77-1-task-0-attempt-1";
    let out = work_job(
        &repo,
        ("77", 1),
        &base,
        "sh ./worker.sh",
        artifacts.join(name),
    );
    assert!(out.status.success());
    finalize(&repo, &gh, "77", (0, 1), &base, &artifacts);
    // One question comment with the exact reply, one status comment, action_required, no
    // next round.
    let comments = gh.state().comments;
    assert_eq!(comments.len(), 2, "{comments:#?}");
    let question = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:question:0 -->"))
        .unwrap();
    assert!(
        question
            .body
            .contains("which database should the model use?"),
        "{}",
        question.body
    );
    assert!(
        question.body.contains("/execute answer 0 <your answer>"),
        "{}",
        question.body
    );
    assert!(
        comments
            .iter()
            .any(|c| c.body.starts_with("<!-- dagexec:status -->"))
    );
    let checks = gh.calls("checks/create");
    assert_eq!(
        checks.last().unwrap().body.as_ref().unwrap()["conclusion"],
        "action_required"
    );
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 0);
    // Re-running the same finalize creates no second PR, status comment or question.
    git(&repo, &["checkout", "-q", "--detach", &base]);
    finalize(&repo, &gh, "77", (0, 1), &base, &artifacts);
    assert_eq!(gh.calls("pulls/create").len(), 1);
    assert_eq!(gh.state().comments.len(), 2);
    assert_eq!(gh.calls("issues/create-comment").len(), 2);
    // The answer, as a comment: 👀, committed to the plan on the branch, a round started.
    let text = comment(
        &repo,
        &gh,
        &comment_event(tmp.path(), "/execute answer 0 use sqlite\r\nplease"),
    );
    assert!(text.contains("Started a round on dagexec/ask"), "{text}");
    assert_eq!(gh.calls("reactions/create-for-issue-comment").len(), 1);
    let d = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].body.as_ref().unwrap()["ref"], "dagexec/ask");
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["status"], "pending", "{plan:#}");
    assert_eq!(plan["tasks"][0]["question"]["reply"], "use sqlite\nplease");
    let log = git(&origin, &["log", "--format=%s", "dagexec/ask"]);
    assert!(log.starts_with("dagexec: answer to task 0\n"), "{log}");
    // The next round's work job gives the worker the answer; the task completes.
    let tip = git(&origin, &["rev-parse", "dagexec/ask"])
        .trim()
        .to_string();
    git(&repo, &["fetch", "-q", "origin"]);
    let out = work_job(
        &repo,
        ("78", 2),
        &tip,
        "sh ./worker.sh",
        artifacts.join("dagexec-78-1-task-0-attempt-1"),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("completed — used sqlite"), "{text}");
    gh.assert_clean();
}

#[test]
fn execute_comments_retry_abort_proceed_status_and_refuse_strangers() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, base) = asking(tmp.path());
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let artifacts = tmp.path().join("artifacts");
    let out = work_job(
        &repo,
        ("77", 1),
        &base,
        "sh ./worker.sh",
        artifacts.join("dagexec-77-1-task-0-attempt-1"),
    );
    assert!(out.status.success());
    finalize(&repo, &gh, "77", (0, 1), &base, &artifacts);
    let status_comments = |gh: &FakeGitHub| {
        gh.state()
            .comments
            .iter()
            .filter(|c| c.body.starts_with("<!-- dagexec:status -->"))
            .map(|c| c.body.clone())
            .collect::<Vec<_>>()
    };
    // A stranger: one reply saying who may, nothing else.
    gh.set_permission("Codertocat", "read");
    let before = gh.requests().len();
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute"));
    let after: Vec<String> = gh.requests()[before..]
        .iter()
        .map(|r| r.operation_id.clone())
        .collect();
    assert_eq!(
        after,
        [
            "repos/get-collaborator-permission-level",
            "issues/create-comment"
        ]
    );
    gh.set_permission("Codertocat", "write");
    // A collaborator's `/execute`: 👀, and a round starts on the PR's branch.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute"));
    assert_eq!(gh.calls("reactions/create-for-issue-comment").len(), 1);
    let d = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].body.as_ref().unwrap()["inputs"]["branch"],
        "dagexec/ask"
    );
    // status: the one status comment, refreshed.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute status"));
    assert_eq!(status_comments(&gh).len(), 1);
    // retry: the blocked task is pending again with fresh attempts, and a round starts.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute retry 0"));
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["status"], "pending", "{plan:#}");
    assert_eq!(plan["tasks"][0]["attempts"], 0);
    assert!(plan["tasks"][0].get("question").is_none(), "{plan:#}");
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 2);
    // retry of a task that is pending is refused with a reply.
    let replies = gh.calls("issues/create-comment").len();
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute retry 0 "));
    assert_eq!(gh.calls("issues/create-comment").len(), replies + 1);
    assert!(
        gh.state()
            .comments
            .last()
            .unwrap()
            .body
            .contains("only a failed, blocked or skipped task")
    );
    // proceed: recorded in the plan for the plan job's pre-flight gate.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute proceed"));
    assert_eq!(
        branch_plan(&origin)["progress"]["dagexecPreflight"],
        "proceed"
    );
    let dispatches = gh.calls("actions/create-workflow-dispatch").len();
    // abort: the status comment records it, and the next finalize starts no round.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute abort"));
    assert!(status_comments(&gh)[0].contains("dagexec:abort-requested"));
    assert_eq!(
        gh.calls("actions/create-workflow-dispatch").len(),
        dispatches
    );
    let tip = git(&origin, &["rev-parse", "dagexec/ask"])
        .trim()
        .to_string();
    git(&repo, &["fetch", "-q", "origin"]);
    std::fs::write(
        repo.join("worker.sh"),
        "cat >/dev/null; echo 'FAILED: still thinking'\n",
    )
    .unwrap();
    let out = work_job(
        &repo,
        ("79", 2),
        &tip,
        "cat >/dev/null; echo 'FAILED: still thinking'",
        artifacts.join("dagexec-79-1-task-0-attempt-1"),
    );
    assert!(out.status.success());
    let text = finalize(&repo, &gh, "79", (0, 1), &tip, &artifacts);
    assert!(text.contains("Stopped after this round"), "{text}");
    assert_eq!(
        gh.calls("actions/create-workflow-dispatch").len(),
        dispatches
    );
    let status = status_comments(&gh);
    assert_eq!(status.len(), 1);
    assert!(
        !status[0].contains("dagexec:abort-requested"),
        "{}",
        status[0]
    );
    assert!(
        status[0].contains("comment `/execute` to resume"),
        "{}",
        status[0]
    );
    gh.assert_clean();
}

#[test]
fn a_workers_decision_becomes_a_question_with_options_and_a_numbered_reply_picks_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, base) = asking(tmp.path());
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let artifacts = tmp.path().join("artifacts");
    let worker = r#"cat >/dev/null; echo 'OUTPUT_JSON_START'; echo '{"status":"NEEDS_DECISION","blocked_at":"schema","decision_needed":"Which database?","options":[{"key":"pg","description":"Postgres"},"sqlite"]}'; echo 'OUTPUT_JSON_END'"#;
    let out = work_job(
        &repo,
        ("77", 1),
        &base,
        worker,
        artifacts.join("dagexec-77-1-task-0-attempt-1"),
    );
    assert!(out.status.success());
    finalize(&repo, &gh, "77", (0, 1), &base, &artifacts);
    let q = gh
        .state()
        .comments
        .into_iter()
        .find(|c| c.body.starts_with("<!-- dagexec:question:0 -->"))
        .expect("a question comment");
    assert!(q.body.contains("Which database?"), "{}", q.body);
    assert!(
        q.body.contains("1. `pg` — Postgres") && q.body.contains("2. `sqlite`"),
        "{}",
        q.body
    );
    assert!(q.body.contains("/execute answer 0 pg"), "{}", q.body);
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["status"], "blocked", "{plan:#}");
    assert_eq!(plan["tasks"][0]["question"]["kind"], "decision");
    comment(
        &repo,
        &gh,
        &comment_event(tmp.path(), "/execute answer 0 2"),
    );
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["question"]["reply"], "sqlite", "{plan:#}");
    assert_eq!(plan["tasks"][0]["status"], "pending");
    gh.assert_clean();
}

#[test]
fn a_workers_needs_action_status_line_becomes_a_question_as_locally() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, base) = asking(tmp.path());
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let artifacts = tmp.path().join("artifacts");
    let worker = r#"cat >/dev/null; echo working; echo 'NEEDS_ACTION: Verify the email address'"#;
    let out = work_job(
        &repo,
        ("78", 1),
        &base,
        worker,
        artifacts.join("dagexec-78-1-task-0-attempt-1"),
    );
    assert!(out.status.success());
    finalize(&repo, &gh, "78", (0, 1), &base, &artifacts);
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["status"], "blocked", "{plan:#}");
    assert_eq!(plan["tasks"][0]["question"]["kind"], "action", "{plan:#}");
    assert_eq!(
        plan["tasks"][0]["question"]["text"], "Verify the email address",
        "{plan:#}"
    );
    gh.assert_clean();
}

/// `dagexec action plan` in `repo`; its outputs by name.
fn plan_job(repo: &Path, dir: &Path) -> std::collections::BTreeMap<String, String> {
    let out_file = dir.join(format!("plan-output-{}", fastrand_suffix()));
    let out = dagexec(repo)
        .args(["action", "plan"])
        .env("GITHUB_OUTPUT", &out_file)
        .env("DAGEXEC_BRANCH", "dagexec/ask")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&out_file).unwrap();
    let mut outputs = std::collections::BTreeMap::new();
    let mut lines = text.lines();
    while let Some(head) = lines.next() {
        let (key, delim) = head.split_once("<<").unwrap();
        let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delim).collect();
        outputs.insert(key.to_string(), value.join("\n"));
    }
    outputs
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn failed_preflight_checks_ask_on_the_pull_request_and_proceed_runs_anyway() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, _) = asking(tmp.path());
    // Task 0 claims something that is not true here.
    let mut plan: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".design/plan.json")).unwrap())
            .unwrap();
    plan["tasks"][0]["agent"] = json!({"assumptions": [
        {"claim": "the database is up", "verify": "test -e /nonexistent/db.sock", "severity": "blocking"}
    ]});
    std::fs::write(
        repo.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    git(&repo, &["commit", "-qam", "an assumption that fails"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let outputs = plan_job(&repo, tmp.path());
    assert_eq!(outputs["conclusion"], "preflight-failed", "{outputs:#?}");
    assert_eq!(outputs["has-work"], "false");
    assert!(
        outputs["message"].contains("the database is up"),
        "{outputs:#?}"
    );
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let out = in_actions(&repo, &gh, "80")
        .args(["action", "finalize"])
        .env("DAGEXEC_BASE", &outputs["base"])
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/ask")
        .env("DAGEXEC_CONCLUSION", &outputs["conclusion"])
        .env("DAGEXEC_MESSAGE", &outputs["message"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The branch exists (the PR has a head), the question is on the PR, the check run waits.
    assert!(git(&origin, &["branch", "--list", "dagexec/ask"]).contains("dagexec/ask"));
    let q = gh
        .state()
        .comments
        .into_iter()
        .find(|c| c.body.starts_with("<!-- dagexec:question:preflight -->"))
        .expect("the pre-flight question");
    assert!(
        q.body.contains("/execute proceed") && q.body.contains("the database is up"),
        "{}",
        q.body
    );
    let checks = gh.calls("checks/create");
    assert_eq!(
        checks[0].body.as_ref().unwrap()["conclusion"],
        "action_required"
    );
    // `/execute proceed`: recorded on the branch; the next plan job runs the batch anyway.
    comment(&repo, &gh, &comment_event(tmp.path(), "/execute proceed"));
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 1);
    git(&repo, &["checkout", "-q", "main"]);
    let outputs = plan_job(&repo, tmp.path());
    assert_eq!(outputs["conclusion"], "work", "{outputs:#?}");
    assert_eq!(
        outputs["matrix"],
        r#"{"include":[{"task":0,"attempt":1,"name":"task 0: A"}]}"#
    );
    assert_eq!(
        outputs["base"],
        git(&origin, &["rev-parse", "dagexec/ask"]).trim()
    );
    gh.assert_clean();
}

#[test]
fn a_long_run_folder_runs_on_actions_through_the_same_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, origin, _) = setup(tmp.path());
    for (path, text) in [
        (".long-run/spec/spec.md", "# Spec\nA tiny app.\n"),
        (
            ".long-run/plans/01-PLAN.md",
            "# Models\n<task>1. m.txt</task>\n",
        ),
        (
            ".long-run/plans/02-PLAN.md",
            "---\ntitle: Routes\ndepends_on: [\"01\"]\n---\n<task>1. r.txt</task>\n",
        ),
    ] {
        let p = repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "a long-run folder"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    // The plan input names the folder: the plan job derives the plan and its first batch.
    let outputs = {
        let out_file = tmp.path().join("out");
        let o = dagexec(&repo)
            .args(["action", "plan"])
            .env("GITHUB_OUTPUT", &out_file)
            .env("DAGEXEC_PLAN", ".long-run")
            .env("DAGEXEC_BRANCH", "dagexec/lr")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(out_file).unwrap()
    };
    assert!(
        outputs.contains(r#"{"include":[{"task":0,"attempt":1,"name":"task 0: Models"}]}"#),
        "{outputs}"
    );
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    git(&repo, &["status", "--porcelain"]);
    git(&repo, &["clean", "-qfdx"]);
    let artifacts = tmp.path().join("artifacts");
    let worker = r#"grep -q 'CHECKPOINT' "$DAGEXEC_PROMPT_FILE" || exit 3; echo m > m.txt; printf 'OUTPUT_JSON_START\n{"status":"COMPLETED","summary":"models done","tasks_completed":["1"],"files_modified":["m.txt"]}\nOUTPUT_JSON_END\n'"#;
    let o = dagexec(&repo)
        .args(["action", "work"])
        .env("GITHUB_RUN_ID", "91")
        .env("DAGEXEC_PLAN", ".long-run")
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_WORKER", worker)
        .env(
            "DAGEXEC_ARTIFACTS",
            artifacts.join("dagexec-91-1-task-0-attempt-1"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success() && text.contains("completed — models done"),
        "{text}"
    );
    git(&repo, &["reset", "-q", "--hard", &base]);
    git(&repo, &["clean", "-qfdx"]);
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let o = in_actions(&repo, &gh, "91")
        .args(["action", "finalize"])
        .env("DAGEXEC_PLAN", ".long-run")
        .env(
            "DAGEXEC_MATRIX",
            r#"{"include":[{"task":0,"attempt":1,"name":"task 0: Models"}]}"#,
        )
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/lr")
        .env("DAGEXEC_ARTIFACTS", &artifacts)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The round committed the work, the seed's summary and the folder's plan with its state;
    // plan 02 is next.
    let files = git(&origin, &["ls-tree", "-r", "--name-only", "dagexec/lr"]);
    for f in [
        "m.txt",
        ".long-run/summaries/01-SUMMARY.md",
        ".long-run/plan.json",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} not in\n{files}");
    }
    let plan: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/lr:.long-run/plan.json"])).unwrap();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert_eq!(plan["tasks"][1]["status"], "pending");
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 1);
    gh.assert_clean();
}
