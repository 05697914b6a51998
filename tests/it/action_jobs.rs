//! The Action's `work` and `finalize` commands run directly (no act): what finalize refuses
//! (patches touching the plan or workflows, a patch that does not apply), what it makes of a
//! missing artifact, retries carried to the next round, and GitHub App authentication, against
//! a local bare remote and the fake GitHub API.

use crate::common::fake_github::FakeGitHub;
use crate::common::{dagexec, git, lab, manifest, succeed};

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo a > a.txt; mkdir -p .github/workflows; echo "on: push" > .github/workflows/evil.yml; echo "COMPLETED: a" ;;
1) echo b > b.txt; echo "COMPLETED: b" ;;
*) echo "COMPLETED: nothing" ;;
esac
"#;

fn task(subject: &str, creates: &[&str]) -> Value {
    lab::task(subject, creates, &[])
}

/// The shared lab ([`crate::common::lab`]): tasks A, B and C and [`WORKER`], on branch
/// `dagexec/jobs`; its jobs run one at a time in the seed clone.
fn setup() -> lab::Lab {
    lab::lab()
        .plan(
            "Jobs",
            vec![
                task("A", &["a.txt"]),
                task("B", &["b.txt"]),
                task("C", &["c.txt"]),
            ],
        )
        .worker(WORKER)
        .branch("dagexec/jobs")
        .start()
}

/// What the tests here use of a lab: its folder, the seed clone, the remote and `main`'s
/// commit.
fn parts(lab: &lab::Lab) -> (&tempfile::TempDir, PathBuf, PathBuf, String) {
    let base = git(&lab.repo, &["rev-parse", "HEAD"]).trim().to_string();
    (&lab.tmp, lab.repo.clone(), lab.origin.clone(), base)
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
    assert!(out.status.success(), "{}", lab::text(&out));
    // Undo the worker's changes, as a fresh job would start clean.
    git(repo, &["reset", "-q", "--hard", base]);
    git(repo, &["clean", "-qfdx"]);
}

#[test]
fn finalize_refuses_what_a_task_may_not_change_and_authenticates_as_an_app() {
    let lab = setup();
    let (tmp, repo, origin, base) = parts(&lab);
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
    let gh = &lab.gh;
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
    let text = lab::text(&out);
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

/// A lab whose one task asks a question ([`ASKING_WORKER`]), in `REPO` (the webhook
/// examples' repository), on branch `dagexec/ask`.
fn asking() -> lab::Lab {
    lab::lab()
        .plan("Ask", vec![task("A", &["a.txt"])])
        .worker(ASKING_WORKER)
        .repository(REPO)
        .branch("dagexec/ask")
        .start()
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
    let text = lab::text(&out);
    assert!(out.status.success(), "{text}");
    text
}

/// Codertocat comments `body` on pull request #1 (on the fake GitHub); then the `comment` job
/// for GitHub's event, and — when it hands the command on (`steer-branch`) — the `steer` job,
/// as the workflow runs them; their output.
fn comment(repo: &Path, gh: &FakeGitHub, body: &str) -> String {
    let p = lab::pr_comment_event(gh, REPO, 1, body);
    let event = repo.with_file_name(format!("event-{}.json", p["comment"]["id"]));
    std::fs::write(&event, p.to_string()).unwrap();
    let outputs = event.with_extension("outputs");
    let job = |command: &str| {
        let out = in_actions(repo, gh, "90")
            .args(["action", command])
            .env("GITHUB_EVENT_NAME", "issue_comment")
            .env("GITHUB_EVENT_PATH", &event)
            .env("GITHUB_OUTPUT", &outputs)
            .output()
            .unwrap();
        let text = lab::text(&out);
        assert!(out.status.success(), "{command}: {text}");
        text
    };
    let mut text = job("comment");
    let handed_on = outputs_in(&std::fs::read_to_string(&outputs).unwrap_or_default())
        .into_iter()
        .any(|(k, v)| k == "steer-branch" && !v.is_empty());
    if handed_on {
        text.push_str(&job("steer"));
    }
    text
}

fn branch_plan(origin: &Path) -> Value {
    serde_json::from_str(&git(origin, &["show", "dagexec/ask:.design/plan.json"])).unwrap()
}

#[test]
fn a_blocked_task_asks_on_the_pull_request_and_the_answer_resumes_it() {
    let lab = asking();
    let (tmp, repo, origin, base) = parts(&lab);
    let gh = &lab.gh;
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
    finalize(&repo, gh, "77", (0, 1), &base, &artifacts);
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
    finalize(&repo, gh, "77", (0, 1), &base, &artifacts);
    assert_eq!(gh.calls("pulls/create").len(), 1);
    assert_eq!(gh.state().comments.len(), 2);
    assert_eq!(gh.calls("issues/create-comment").len(), 2);
    // The answer, as a comment: 👀, committed to the plan on the branch, a round started.
    let text = comment(&repo, gh, "/execute answer 0 use sqlite\r\nplease");
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
    let lab = asking();
    let (tmp, repo, origin, base) = parts(&lab);
    let gh = &lab.gh;
    let artifacts = tmp.path().join("artifacts");
    let out = work_job(
        &repo,
        ("77", 1),
        &base,
        "sh ./worker.sh",
        artifacts.join("dagexec-77-1-task-0-attempt-1"),
    );
    assert!(out.status.success());
    finalize(&repo, gh, "77", (0, 1), &base, &artifacts);
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
    comment(&repo, gh, "/execute");
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
    comment(&repo, gh, "/execute");
    assert_eq!(gh.calls("reactions/create-for-issue-comment").len(), 1);
    let d = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].body.as_ref().unwrap()["inputs"]["branch"],
        "dagexec/ask"
    );
    // status: the one status comment, refreshed.
    comment(&repo, gh, "/execute status");
    assert_eq!(status_comments(gh).len(), 1);
    // retry: the blocked task is pending again with fresh attempts, and a round starts.
    comment(&repo, gh, "/execute retry 0");
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["status"], "pending", "{plan:#}");
    assert_eq!(plan["tasks"][0]["attempts"], 0);
    assert!(plan["tasks"][0].get("question").is_none(), "{plan:#}");
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 2);
    // retry of a task that is pending is refused with a reply.
    let replies = gh.calls("issues/create-comment").len();
    comment(&repo, gh, "/execute retry 0 ");
    // The queued note, then the refusal.
    assert_eq!(gh.calls("issues/create-comment").len(), replies + 2);
    assert!(
        gh.state()
            .comments
            .last()
            .unwrap()
            .body
            .contains("only a failed, blocked or skipped task")
    );
    // proceed: recorded in the plan for the plan job's pre-flight gate.
    comment(&repo, gh, "/execute proceed");
    assert_eq!(
        branch_plan(&origin)["progress"]["dagexecPreflight"],
        "proceed"
    );
    let dispatches = gh.calls("actions/create-workflow-dispatch").len();
    // abort: the status comment records it, and the next finalize starts no round.
    // (The comment is on the pull request: the round reads it again before it stops.)
    comment(&repo, gh, "/execute abort");
    assert!(status_comments(gh)[0].contains("dagexec:abort-requested"));
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
    let text = finalize(&repo, gh, "79", (0, 1), &tip, &artifacts);
    // The failed attempt is retried inside round 2, so the round is still open: the abort
    // stops after this part of it, and `/execute` resumes the round.
    assert!(text.contains("Stopped after part 1 of round 2"), "{text}");
    assert_eq!(
        gh.calls("actions/create-workflow-dispatch").len(),
        dispatches
    );
    let status = status_comments(gh);
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
    let lab = asking();
    let (tmp, repo, origin, base) = parts(&lab);
    let gh = &lab.gh;
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
    finalize(&repo, gh, "77", (0, 1), &base, &artifacts);
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
    comment(&repo, gh, "/execute answer 0 2");
    let plan = branch_plan(&origin);
    assert_eq!(plan["tasks"][0]["question"]["reply"], "sqlite", "{plan:#}");
    assert_eq!(plan["tasks"][0]["status"], "pending");
    gh.assert_clean();
}

#[test]
fn a_workers_needs_action_status_line_becomes_a_question_as_locally() {
    let lab = asking();
    let (tmp, repo, origin, base) = parts(&lab);
    let gh = &lab.gh;
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
    finalize(&repo, gh, "78", (0, 1), &base, &artifacts);
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
    succeed(
        dagexec(repo)
            .args(["action", "plan"])
            .env("GITHUB_OUTPUT", &out_file)
            .env("DAGEXEC_BRANCH", "dagexec/ask"),
    );
    outputs_in(&std::fs::read_to_string(&out_file).unwrap())
        .into_iter()
        .collect()
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn failed_preflight_checks_ask_on_the_pull_request_and_proceed_runs_anyway() {
    let lab = asking();
    let (tmp, repo, origin, _) = parts(&lab);
    // Task 0 claims something that is not true here.
    lab.edit_plan(|plan| {
        plan["tasks"][0]["agent"] = json!({"assumptions": [
            {"claim": "the database is up", "verify": "test -e /nonexistent/db.sock", "severity": "blocking"}
        ]});
    });
    git(&repo, &["commit", "-qam", "an assumption that fails"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let outputs = plan_job(&repo, tmp.path());
    assert_eq!(outputs["conclusion"], "preflight-failed", "{outputs:#?}");
    assert_eq!(outputs["has-work"], "false");
    assert!(
        outputs["message"].contains("the database is up"),
        "{outputs:#?}"
    );
    let gh = &lab.gh;
    succeed(
        in_actions(&repo, gh, "80")
            .args(["action", "finalize"])
            .env("DAGEXEC_BASE", &outputs["base"])
            .env("DAGEXEC_ROUND", "1")
            .env("DAGEXEC_BRANCH", "dagexec/ask")
            .env("DAGEXEC_CONCLUSION", &outputs["conclusion"])
            .env("DAGEXEC_MESSAGE", &outputs["message"]),
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
    comment(&repo, gh, "/execute proceed");
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
    let lab = setup();
    let (tmp, repo, origin, _) = parts(&lab);
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
    let gh = &lab.gh;
    let o = in_actions(&repo, gh, "91")
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
    assert!(o.status.success(), "{}", lab::text(&o));
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

// ---- The trust boundary of the work and plan jobs ------------------------------------------

/// The runner's files and secrets, as a job step has them: (file command files, variables).
fn runner_env(dir: &Path) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = [
        "GITHUB_OUTPUT",
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_STATE",
        "GITHUB_STEP_SUMMARY",
    ]
    .iter()
    .map(|v| {
        let path = dir.join(v.to_ascii_lowercase());
        std::fs::write(&path, "").unwrap();
        (v.to_string(), path.to_str().unwrap().to_string())
    })
    .collect();
    for (k, v) in [
        ("ACTIONS_RUNTIME_TOKEN", "runtime-secret"),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "oidc-secret"),
        (
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            "https://oidc.example/secret",
        ),
        ("ACTIONS_CACHE_URL", "https://cache.example/secret"),
        ("GITHUB_TOKEN", "ghs_github_token_secret"),
        ("GH_TOKEN", "ghs_gh_token_secret"),
        ("INPUT_TOKEN", "ghs_input_token_secret"),
        ("DAGEXEC_TOKEN", "ghs_dagexec_token_secret"),
    ] {
        vars.push((k.into(), v.into()));
    }
    vars
}

/// Task code that tries the runner's files: records its environment in `seen`, appends to
/// every file command it can see, and — as if it had found the runner's directory — to the
/// files at their real paths too.
fn hostile(seen: &Path, files: &Path, status: &str) -> String {
    let s = seen.display();
    let f = files.display();
    format!(
        r#"env >> "{s}"
[ -n "$GITHUB_OUTPUT" ] && echo "artifact-name=dagexec-77-1-task-1-attempt-1" >> "$GITHUB_OUTPUT"
echo "artifact-name=forged-by-task-code" >> "{f}/github_output"
echo "matrix={{\"include\":[]}}" >> "{f}/github_output"
echo "LD_PRELOAD=/tmp/evil.so" >> "{f}/github_env"
echo "/tmp/evil-bin" >> "{f}/github_path"
echo "pwned" >> "{f}/github_step_summary"
{status}"#
    )
}

/// The step outputs in a `$GITHUB_OUTPUT` file, by name, in the order written; a line that is
/// not dagexec's `name<<delimiter` form is kept as it is.
fn outputs_in(text: &str) -> Vec<(String, String)> {
    lab::output_file(text)
}

#[test]
fn task_code_in_the_work_job_sees_no_runner_files_or_tokens_and_cannot_set_outputs() {
    let lab = setup();
    let (tmp, repo, _origin, _) = parts(&lab);
    let files = tmp.path().join("runner");
    std::fs::create_dir_all(&files).unwrap();
    let seen = tmp.path().join("seen.txt");
    // Task 0's acceptance check tries the same as the worker.
    let check = hostile(&seen, &files, "true").replace('\n', "; ");
    lab.edit_plan(|plan| {
        plan["tasks"][0]["agent"] = json!({"role": "engineer", "acceptanceCriteria": [
            {"criterion": "the check runs", "check": check}
        ]});
    });
    std::fs::write(
        repo.join("hostile.sh"),
        format!(
            "cat > /dev/null\necho a > a.txt\n{}",
            hostile(&seen, &files, "echo 'COMPLETED: tried'")
        ),
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "hostile task code"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let dir = tmp.path().join("artifact");
    let mut cmd = dagexec(&repo);
    cmd.args(["action", "work"])
        .env("GITHUB_RUN_ID", "77")
        .env("GITHUB_ACTIONS", "true")
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_WORKER", "sh ./hostile.sh")
        .env("DAGEXEC_ARTIFACTS", &dir);
    for (k, v) in runner_env(&files) {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let log = lab::text(&out);
    assert!(out.status.success(), "{log}");
    // Both the worker and the check ran, and neither saw a runner file or a token.
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen.matches("DAGEXEC_TASK_INDEX=").count(), 1, "{seen}");
    assert_eq!(
        seen.matches("\nPWD=").count() + seen.starts_with("PWD=") as usize,
        2
    );
    for secret in [
        "GITHUB_OUTPUT",
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_STATE",
        "GITHUB_STEP_SUMMARY",
        "ACTIONS_",
        "secret",
    ] {
        assert!(!seen.contains(secret), "task code saw {secret}:\n{seen}");
    }
    // The step's outputs are dagexec's alone: what task code appended was undone.
    let outputs = outputs_in(&std::fs::read_to_string(files.join("github_output")).unwrap());
    assert_eq!(
        outputs,
        vec![
            (
                "artifact-name".to_string(),
                "dagexec-77-1-task-0-attempt-1".to_string()
            ),
            (
                "artifact-path".to_string(),
                dir.to_str().unwrap().to_string()
            ),
        ],
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(files.join("github_env")).unwrap(),
        ""
    );
    assert_eq!(
        std::fs::read_to_string(files.join("github_path")).unwrap(),
        ""
    );
    let summary = std::fs::read_to_string(files.join("github_step_summary")).unwrap();
    assert!(!summary.contains("pwned"), "{summary}");
    assert!(summary.contains("task 0, attempt 1"), "{summary}");
    assert!(log.contains("put back as it was"), "{log}");
    // The attempt itself is judged as usual.
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["acceptance"][0]["passed"], true, "{result:#}");
}

/// Task code that leaves its process group and session with an empty environment (so no tag
/// finds it) and keeps appending to the runner's output file: the work job ends it before it
/// puts the runner's files back and writes its outputs, so nothing it started outlives the
/// step (to forge the step's outputs, or to read the upload step's environment).
#[test]
fn nothing_task_code_starts_outlives_the_work_job() {
    let outside = tempfile::tempdir().unwrap();
    let pidfile = outside.path().join("escaped.pid");
    let output = outside.path().join("github_output");
    std::fs::write(&output, "").unwrap();
    let worker = format!(
        "cat > /dev/null\necho a > a.txt\nsetsid env -i /bin/sh -c 'echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; while :; do echo artifact-name=forged >> \"$2\"; sleep 0.05; done' sh '{}' '{}' </dev/null >/dev/null 2>&1 &\nwhile [ ! -e '{}' ]; do sleep 0.01; done\necho 'COMPLETED: a'\n",
        pidfile.display(),
        output.display(),
        pidfile.display()
    );
    let mut lab = lab::lab()
        .plan("Escape", vec![lab::task("A", &["a.txt"], &[])])
        .worker(&worker)
        .start();
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    lab.set_env("GITHUB_OUTPUT", output.to_str().unwrap());
    lab.work_job(
        1,
        (0, 1),
        &o["round"],
        &o["base"],
        &lab.tmp.path().join("art"),
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let running = stat
        .rfind(')')
        .is_some_and(|c| !stat[c + 1..].trim_start().starts_with('Z'));
    if running {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        !running,
        "process {pid}, started by task code, still runs: {stat}"
    );
    let outputs = std::fs::read_to_string(&output).unwrap();
    assert!(!outputs.contains("forged"), "{outputs}");
    assert!(
        outputs.contains("dagexec-1-1-task-0-attempt-1"),
        "{outputs}"
    );
}

/// A work job diffs the worker's changes once: leaving out the plan and the work log, which
/// the worker did not touch, needs no second diff (each git run is job start-up, issue 36).
#[test]
fn a_work_job_diffs_the_changes_once_when_the_worker_left_the_plan_alone() {
    let mut lab = lab::lab()
        .plan("Diffs", vec![lab::task("A", &["a.txt"], &[])])
        .worker("cat > /dev/null\necho a > a.txt\necho 'COMPLETED: a'\n")
        .start();
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    let seen = lab.log_git_calls("$*");
    let art = lab.tmp.path().join("art");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &art);
    let calls = std::fs::read_to_string(&seen).unwrap();
    let diffs = calls
        .lines()
        .filter(|l| l.contains("diff --cached") && l.contains("--raw"))
        .count();
    assert_eq!(diffs, 1, "{calls}");
    let patch = std::fs::read_to_string(art.join("changes.patch")).unwrap();
    assert!(patch.contains("a.txt"), "{patch}");
}

#[test]
fn pre_flight_checks_in_the_plan_job_cannot_set_its_outputs() {
    let lab = setup();
    let (tmp, repo, _origin, _) = parts(&lab);
    let files = tmp.path().join("runner");
    std::fs::create_dir_all(&files).unwrap();
    let seen = tmp.path().join("seen.txt");
    let verify = hostile(&seen, &files, "true").replace('\n', "; ");
    lab.edit_plan(|plan| {
        plan["tasks"][0]["agent"] = json!({"assumptions": [
            {"claim": "the tree is fine", "verify": verify, "severity": "blocking"}
        ]});
    });
    git(&repo, &["commit", "-qam", "a hostile pre-flight check"]);
    let mut cmd = dagexec(&repo);
    cmd.args(["action", "plan"])
        .env("DAGEXEC_BRANCH", "dagexec/jobs");
    for (k, v) in runner_env(&files) {
        cmd.env(k, v);
    }
    succeed(&mut cmd);
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert!(!seen.is_empty());
    assert!(
        !seen.contains("GITHUB_OUTPUT") && !seen.contains("secret"),
        "{seen}"
    );
    let outputs = outputs_in(&std::fs::read_to_string(files.join("github_output")).unwrap());
    let keys: Vec<&str> = outputs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "matrix",
            "has-work",
            "base",
            "round",
            "branch",
            "conclusion",
            "message",
            "max-parallel"
        ]
    );
    assert!(outputs[0].1.contains("\"task\":0"), "{outputs:?}");
    assert_eq!(
        std::fs::read_to_string(files.join("github_env")).unwrap(),
        ""
    );
}

/// `dagexec action finalize` of round 1 in run 77 (attempt `run_attempt`) with `matrix`.
fn finalize_77(
    repo: &Path,
    gh: &FakeGitHub,
    (run_attempt, matrix): (&str, &str),
    base: &str,
    artifacts: &Path,
) -> (bool, String) {
    let out = dagexec(repo)
        .args(["action", "finalize"])
        .env("GITHUB_RUN_ID", "77")
        .env("GITHUB_RUN_ATTEMPT", run_attempt)
        .env("GITHUB_REPOSITORY", "acme/widgets")
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_REF_NAME", "main")
        .env("DAGEXEC_TOKEN", "ghs_token")
        .env("DAGEXEC_MATRIX", matrix)
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/jobs")
        .env("DAGEXEC_ARTIFACTS", artifacts)
        .output()
        .unwrap();
    let text = lab::text(&out);
    (out.status.success(), text)
}

#[test]
fn finalize_takes_exactly_each_entrys_artifact_and_ignores_forged_ones() {
    let lab = setup();
    let (tmp, repo, origin, base) = parts(&lab);
    let artifacts = tmp.path().join("artifacts");
    work(&repo, &artifacts, 1, &base);
    // Another job of the run (any task's code can upload artifacts) forges task 1's result
    // under names that sort after the real one: a later run attempt, another spelling.
    let real = artifacts.join("dagexec-77-1-task-1-attempt-1");
    let mut forged: Value =
        serde_json::from_str(&std::fs::read_to_string(real.join("result.json")).unwrap()).unwrap();
    forged["output"] = json!("FAILED: forged by another job");
    for name in [
        "dagexec-77-999-task-1-attempt-1",
        "dagexec-77-2-task-1-attempt-1",
        "dagexec-77-01-task-1-attempt-1",
    ] {
        std::fs::create_dir_all(artifacts.join(name)).unwrap();
        std::fs::write(artifacts.join(name).join("result.json"), forged.to_string()).unwrap();
    }
    let gh = &lab.gh;
    let matrix = r#"{"include":[{"task":1,"attempt":1,"name":"task 1: B"}]}"#;
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{log}");
    for name in [
        "dagexec-77-999-task-1-attempt-1",
        "dagexec-77-2-task-1-attempt-1",
        "dagexec-77-01-task-1-attempt-1",
    ] {
        assert!(log.contains(&format!("ignored artifact {name}")), "{log}");
    }
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/jobs:.design/plan.json"])).unwrap();
    assert_eq!(state["tasks"][1]["status"], "completed", "{state:#}");
    assert_eq!(state["tasks"][1]["result"], "b", "{state:#}");
    // Issue 31 §9: every entry left its artifact, so finalize never asks GitHub for its own
    // run (only an attempt without a result is recorded as spanning the run).
    assert!(
        gh.calls("actions/get-workflow-run").is_empty(),
        "finalize asked for its own run though no artifact was missing:\n{log}"
    );
}

#[test]
fn a_matrix_entry_for_a_task_the_plan_lacks_is_an_error_not_a_panic() {
    let lab = setup();
    let (tmp, repo, _origin, base) = parts(&lab);
    let gh = &lab.gh;
    let matrix = r#"{"include":[{"task":7,"attempt":1,"name":"task 7: ghost"}]}"#;
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &tmp.path().join("none"));
    assert!(!ok, "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("the matrix names task 7, but the plan at") && log.contains("has 3 task(s)"),
        "{log}"
    );
    assert!(gh.calls("pulls/create").is_empty());
    let out = dagexec(&repo)
        .args(["action", "work"])
        .env("DAGEXEC_TASK", "7")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_WORKER", "sh ./worker.sh")
        .env("DAGEXEC_ARTIFACTS", tmp.path().join("a"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("task 7: no such task (the plan has 3)"),
        "{err}"
    );
}

#[test]
fn in_the_actions_own_repository_patches_to_its_source_and_github_dir_are_refused() {
    let lab = setup();
    let (tmp, repo, origin, _) = parts(&lab);
    // The repository is an action that `uses: ./` builds from source.
    std::fs::write(
        repo.join("action.yml"),
        "name: x\nruns:\n  using: composite\n",
    )
    .unwrap();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(
        repo.join("worker.sh"),
        r#"cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo 'fn main() { steal() }' > src/main.rs; echo a > a.txt; echo "COMPLETED: a" ;;
1) mkdir -p .GitHub/actions/x; echo "runs: {}" > .GitHub/actions/x/action.yml; echo b > b.txt; echo "COMPLETED: b" ;;
2) echo c > c.txt; echo "COMPLETED: c" ;;
esac
"#,
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "an action repository"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let artifacts = tmp.path().join("artifacts");
    for t in 0..3 {
        work(&repo, &artifacts, t, &base);
    }
    let gh = &lab.gh;
    let matrix = r#"{"include":[{"task":0,"attempt":1,"name":"task 0: A"},{"task":1,"attempt":1,"name":"task 1: B"},{"task":2,"attempt":1,"name":"task 2: C"}]}"#;
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{log}");
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/jobs:.design/plan.json"])).unwrap();
    let result = |i: usize| state["tasks"][i]["result"].as_str().unwrap().to_string();
    assert!(
        result(0).contains("src/main.rs") && result(0).contains("built from it"),
        "{state:#}"
    );
    assert!(
        result(1).contains(".GitHub/actions/x/action.yml")
            && result(1).contains("allow-workflow-changes"),
        "{state:#}"
    );
    assert_eq!(state["tasks"][2]["status"], "completed", "{state:#}");
    let main_rs = git(&origin, &["show", "dagexec/jobs:src/main.rs"]);
    assert_eq!(main_rs, "fn main() {}\n");
}

#[test]
fn a_strangers_comment_with_the_status_and_abort_markers_stops_nothing() {
    let lab = setup();
    let (tmp, repo, _origin, base) = parts(&lab);
    let artifacts = tmp.path().join("artifacts");
    work(&repo, &artifacts, 1, &base);
    let gh = &lab.gh;
    gh.set_permission("mallory", "read");
    let forged = "<!-- dagexec:status -->\n<!-- dagexec:abort-requested -->\nstop";
    // On the pull request finalize is about to open (#1).
    gh.add_comment("acme/widgets", 1, "mallory", forged);
    let matrix = r#"{"include":[{"task":1,"attempt":1,"name":"task 1: B"}]}"#;
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{log}");
    assert!(log.contains("Ignoring comment 1000 by @mallory"), "{log}");
    assert_eq!(
        gh.calls("actions/create-workflow-dispatch").len(),
        1,
        "the next round starts: {log}"
    );
    let state = gh.state();
    assert_eq!(state.comments[0].body, forged);
    let status: Vec<_> = state
        .comments
        .iter()
        .filter(|c| {
            c.user == "github-actions[bot]" && c.body.starts_with("<!-- dagexec:status -->")
        })
        .collect();
    assert_eq!(status.len(), 1, "{:#?}", state.comments);
    gh.assert_clean();
}

#[test]
fn a_round_started_twice_pushes_once_and_the_stale_one_stops_cleanly() {
    let lab = setup();
    let (tmp, repo, origin, base) = parts(&lab);
    let artifacts = tmp.path().join("artifacts");
    work(&repo, &artifacts, 1, &base);
    let gh = &lab.gh;
    let matrix = r#"{"include":[{"task":1,"attempt":1,"name":"task 1: B"}]}"#;
    // Two runs planned the same round on the same base (a dispatch and an `/execute` at
    // once); the first to finish pushes it.
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{log}");
    let pushed = git(&origin, &["rev-parse", "dagexec/jobs"]);
    let prs = gh.calls("pulls/create").len() + gh.calls("pulls/update").len();
    let comments = gh.state().comments.len();
    // The second run's worker said something else, so its round differs; it finds the branch
    // moved and pushes and publishes nothing.
    let result = artifacts.join("dagexec-77-1-task-1-attempt-1/result.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    r["output"] = json!("COMPLETED: b, the second time");
    std::fs::write(&result, r.to_string()).unwrap();
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{log}");
    assert!(log.contains("this round is stale"), "{log}");
    assert_eq!(git(&origin, &["rev-parse", "dagexec/jobs"]), pushed);
    assert_eq!(
        gh.calls("pulls/create").len() + gh.calls("pulls/update").len(),
        prs
    );
    assert_eq!(gh.state().comments.len(), comments);
    assert!(gh.calls("checks/create").is_empty());
    // The round is on the branch already: the first run's dispatch carries on, alone.
    assert!(log.contains("already holds round 1"), "{log}");
    assert_eq!(
        gh.calls("actions/create-workflow-dispatch").len(),
        1,
        "{log}"
    );
    let log_lines = git(&origin, &["log", "--format=%s", "dagexec/jobs"]);
    assert_eq!(
        log_lines.matches("dagexec: round 1").count(),
        1,
        "{log_lines}"
    );
    // Round 2 is planned on that commit, and then someone pushes to the branch by hand: the
    // round is stale, and a fresh one is started from where the branch stands.
    let scratch = tmp.path().join("by-hand");
    let origin_url = origin.to_str().unwrap();
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "-b",
            "dagexec/jobs",
            origin_url,
            scratch.to_str().unwrap(),
        ],
    );
    std::fs::write(scratch.join("notes.txt"), "by hand\n").unwrap();
    git(&scratch, &["add", "-A"]);
    git(&scratch, &["commit", "-qm", "by hand"]);
    git(&scratch, &["push", "-q", "origin", "dagexec/jobs"]);
    let moved = git(&origin, &["rev-parse", "dagexec/jobs"]);
    let out = dagexec(&repo)
        .args(["action", "finalize"])
        .env("GITHUB_RUN_ID", "79")
        .env("GITHUB_REPOSITORY", "acme/widgets")
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_REF_NAME", "dagexec/jobs")
        .env("DAGEXEC_TOKEN", "ghs_token")
        .env("DAGEXEC_BASE", pushed.trim())
        .env("DAGEXEC_ROUND", "2")
        .env("DAGEXEC_CONCLUSION", "incomplete")
        .env("DAGEXEC_MESSAGE", "nothing to do")
        .env("DAGEXEC_BRANCH", "dagexec/jobs")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("this round is stale"), "{log}");
    assert_eq!(git(&origin, &["rev-parse", "dagexec/jobs"]), moved);
    let dispatches = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(dispatches.len(), 2, "{log}");
    assert_eq!(dispatches[1].body.as_ref().unwrap()["ref"], "dagexec/jobs");
    gh.assert_clean();
}

#[test]
fn a_run_started_without_the_branch_starts_round_one_in_the_branchs_group() {
    let lab = setup();
    let (tmp, repo, _origin, base) = parts(&lab);
    let out_file = tmp.path().join("plan-output");
    succeed(
        dagexec(&repo)
            .args(["action", "plan"])
            .env("GITHUB_OUTPUT", &out_file)
            .env("GITHUB_REF_NAME", "main"),
    );
    let outputs: std::collections::BTreeMap<_, _> =
        outputs_in(&std::fs::read_to_string(&out_file).unwrap())
            .into_iter()
            .collect();
    assert_eq!(outputs["conclusion"], "redirect", "{outputs:#?}");
    assert_eq!(outputs["has-work"], "false");
    assert_eq!(outputs["branch"], "dagexec/jobs");
    let gh = &lab.gh;
    succeed(
        in_actions(&repo, gh, "81")
            .args(["action", "finalize"])
            .env("DAGEXEC_BASE", &base)
            .env("DAGEXEC_ROUND", &outputs["round"])
            .env("DAGEXEC_BRANCH", &outputs["branch"])
            .env("DAGEXEC_CONCLUSION", &outputs["conclusion"])
            .env("DAGEXEC_MESSAGE", &outputs["message"]),
    );
    let d = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(d.len(), 1);
    let body = d[0].body.clone().unwrap();
    assert_eq!(body["ref"], "main");
    assert_eq!(body["inputs"]["branch"], "dagexec/jobs");
    assert!(gh.calls("pulls/create").is_empty() && gh.calls("issues/create-comment").is_empty());
    // The dispatched run names the branch: it plans round 1.
    let out = dagexec(&repo)
        .args(["action", "plan"])
        .env("GITHUB_OUTPUT", &out_file)
        .env("GITHUB_REF_NAME", "main")
        .env("DAGEXEC_BRANCH", "dagexec/jobs")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert!(text.contains("\nwork\n"), "{text}");
    gh.assert_clean();
}

#[test]
fn the_template_keeps_one_concurrency_group_per_execution_branch() {
    let text = std::fs::read_to_string(manifest().join("templates/dagexec.yml")).unwrap();
    let wf: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    // Rounds (workflow_dispatch): the branch input, or the ref the run is on.
    let group = wf["concurrency"]["group"].as_str().unwrap();
    assert!(
        group.contains("format('dagexec-{0}', inputs.branch || github.ref_name)"),
        "{group}"
    );
    // Comment events: a group per run, so a comment neither waits for nor cancels a round…
    assert!(
        group.contains(
            "github.event_name == 'issue_comment' && format('dagexec-comment-{0}', github.run_id)"
        ),
        "{group}"
    );
    assert_eq!(wf["concurrency"]["cancel-in-progress"], false);
    // …and the job that commits to the branch waits in the branch's group.
    let steer = &wf["jobs"]["steer"];
    assert_eq!(
        steer["concurrency"]["group"],
        "dagexec-${{ needs.comment.outputs.steer-branch }}"
    );
    assert_eq!(steer["concurrency"]["cancel-in-progress"], false);
    assert_eq!(steer["needs"], "comment");
    let jobs = wf["jobs"].as_mapping().unwrap();
    for (name, job) in jobs {
        let writes = job["permissions"]["contents"] == "write";
        // conduct: the branch's group (a workflow_dispatch without a task).
        let in_group =
            ["steer", "plan", "work", "finalize", "conduct"].contains(&name.as_str().unwrap());
        assert!(
            !writes || in_group,
            "{name:?} writes outside the branch's group"
        );
    }
    assert_eq!(wf["jobs"]["comment"]["permissions"]["contents"], "read");
    assert!(!text.contains("never cancelled"));
    // A task run (schedule: eager) has a group of its own: a shared one would keep one
    // pending run and cancel the rest.
    assert!(
        group.contains("inputs.task != '' && format('dagexec-task-{0}', github.run_id)"),
        "{group}"
    );
}

/// Issue 20 §4: an artifact's `result.json` could carry a status line of up to 32 MiB into the
/// plan, `completedTasks`, the round commit and the pull request. Finalize clips the result as
/// the local runner does (4 KiB, with a marker).
#[test]
fn a_huge_status_line_in_an_artifact_is_clipped_in_the_plan_commit_and_pull_request() {
    let lab = setup();
    let (tmp, repo, origin, base) = parts(&lab);
    let artifacts = tmp.path().join("artifacts");
    work(&repo, &artifacts, 1, &base);
    let real = artifacts.join("dagexec-77-1-task-1-attempt-1");
    let mut result: Value =
        serde_json::from_str(&std::fs::read_to_string(real.join("result.json")).unwrap()).unwrap();
    // Just within the bound of a result.json both writers read (past it the attempt is
    // refused, by finalize as by the conductor).
    let huge = (8 << 20) - (64 << 10);
    result["output"] = json!(format!("COMPLETED: {}\n", "z".repeat(huge)));
    std::fs::write(real.join("result.json"), result.to_string()).unwrap();
    let gh = &lab.gh;
    let matrix = r#"{"include":[{"task":1,"attempt":1,"name":"task 1: B"}]}"#;
    let (ok, log) = finalize_77(&repo, gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{}", &log[..log.len().min(4000)]);
    assert!(log.len() < 64 << 10, "finalize printed {} bytes", log.len());
    let marker =
        format!(" … [clipped: {huge} bytes in all; the whole text is in the attempt's log]");
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/jobs:.design/plan.json"])).unwrap();
    assert_eq!(state["tasks"][1]["status"], "completed");
    let r = state["tasks"][1]["result"].as_str().unwrap();
    assert!(
        r.len() <= 4096 && r.starts_with("zzz") && r.ends_with(&marker),
        "{}",
        r.len()
    );
    // completedTasks, when the round ended with this part.
    for done in state["progress"]["completedTasks"].as_array().unwrap() {
        assert!(done["summary"].as_str().unwrap().len() <= 4096, "{done}");
    }
    let messages = git(&origin, &["log", "--format=%B", "dagexec/jobs"]);
    assert!(
        messages.len() < 16 << 10,
        "commit messages of {} bytes",
        messages.len()
    );
    assert!(messages.contains(&marker), "{messages}");
    for request in gh.requests() {
        let body = request.body.map(|b| b.to_string()).unwrap_or_default();
        assert!(
            body.len() < 64 << 10,
            "{} sent {} bytes",
            request.operation_id,
            body.len()
        );
    }
}

/// A change over the size a task's change may hold (100 MiB, counted by the files' lengths:
/// a sparse file costs no disk here) is refused by the work job before git stores it — the
/// artifact carries an empty patch and the reason — and finalize fails the attempt with it.
#[test]
fn the_work_job_refuses_a_change_over_the_cap_and_finalize_fails_the_attempt_with_it() {
    let lab = lab::lab()
        .plan("Big", vec![task("A", &["a.txt"])])
        .worker("#!/bin/sh\ncat > /dev/null\necho a > a.txt\ntruncate -s 101M big.bin\necho \"COMPLETED: a\"\n")
        .branch("dagexec/jobs")
        .start();
    let (tmp, repo, origin, base) = parts(&lab);
    let artifacts = tmp.path().join("artifacts");
    let dir = artifacts.join("dagexec-77-1-task-0-attempt-1");
    let out = work_job(&repo, ("77", 1), &base, "sh ./worker.sh", &dir);
    let text = lab::text(&out);
    assert!(out.status.success(), "{text}");
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    let reason = result["refused"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.starts_with("refused: its added and changed files hold 101.0 MiB (big.bin 101.0 MiB, a.txt 0.0 MiB), over the 100 MiB"),
        "{result:#}"
    );
    assert_eq!(std::fs::read(dir.join("changes.patch")).unwrap(), b"");
    // git never stored it.
    crate::common::assert_no_large_object(&repo);
    git(&repo, &["reset", "-q", "--hard", &base]);
    git(&repo, &["clean", "-qfdx"]);
    let matrix = r#"{"include":[{"task":0,"attempt":1,"name":"task 0: A"}]}"#;
    let (ok, text) = finalize_77(&repo, &lab.gh, ("1", matrix), &base, &artifacts);
    assert!(ok, "{text}");
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/jobs:.design/plan.json"])).unwrap();
    assert_eq!(state["tasks"][0]["status"], "pending", "{state:#}");
    let said = state["tasks"][0]["result"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(&format!("attempt 1 failed: {reason}")),
        "{state:#}"
    );
    let files = git(&origin, &["ls-tree", "-r", "--name-only", "dagexec/jobs"]);
    assert!(
        !files.contains("big.bin") && !files.contains("a.txt"),
        "{files}"
    );
}

/// A file the worker names with a line break and a workflow command after it is a warning
/// the work job prints on one line: task code never writes a workflow command (a forged
/// `dagexec` annotation, a mask, `stop-commands`) into the job's log through dagexec.
#[test]
fn a_workers_file_name_never_starts_a_workflow_command_in_the_jobs_log() {
    let lab = setup();
    let (tmp, repo, _, base) = parts(&lab);
    let worker = tmp.path().join("forge.sh");
    std::fs::write(
        &worker,
        "cat > /dev/null\necho a > a.txt\necho x > \"$(printf 'x\\n::error title=dagexec::forged')\"\necho 'COMPLETED: a'\n",
    )
    .unwrap();
    let worker = format!("sh {}", worker.display());
    let out = work_job(&repo, ("78", 1), &base, &worker, tmp.path().join("forged"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", lab::text(&out));
    assert!(stdout.contains("unexpected file changed"), "{stdout}");
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("::error title=dagexec::forged")),
        "{stdout}"
    );
}

/// Task code that, as the agent's user, puts a `.git` of its own in place of the checkout's
/// (the original renamed away, a copy with a `core.fsmonitor` command in its config) and then
/// looks at the checkout's top folder and `.git` as it can.
const SWAPPING_WORKER: &str = r#"cat > /dev/null
echo a > a.txt
if mv .git .git-theirs 2>/dev/null; then
  cp -R .git-theirs .git
  printf '[core]\n\tfsmonitor = "id -u >> @RAN@; false"\n' >> .git/config
  echo swapped > swapped.txt
fi
{ printf '[core]\n\tfsmonitor = "id -u >> @RAN@; false"\n' >> .git/config; } 2>/dev/null
echo 'COMPLETED: a'
"#;

/// Defect (issue 34): the agent's user could write the checkout's top folder, so task code
/// could rename `.git` away and put its own there, and the work job's later git calls — as
/// root — obeyed it, running its `core.fsmonitor` command as root. git's ownership check was
/// the only guard, and a runner whose git trusts every folder (`safe.directory = *` in the
/// global config, as many workflows set for container jobs) has none: `.git` stays the job's.
#[test]
fn task_code_as_the_agents_user_cannot_put_its_own_git_directory_in_the_checkout() {
    let _agent_user = crate::common::agent_user::shared();
    let Some(agent) = crate::common::agent_user::made() else {
        return;
    };
    let outside = tempfile::tempdir().unwrap();
    let ran = outside.path().join("fsmonitor-ran");
    let home = outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    let worker = SWAPPING_WORKER.replace("@RAN@", ran.to_str().unwrap());
    let lab = lab::lab()
        .plan("Swap", vec![lab::task("A", &["a.txt"], &[])])
        .worker(&worker)
        .env("HOME", &home)
        .env("DAGEXEC_AGENT_USER", &agent)
        .start();
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    let art = lab.tmp.path().join("art");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &art);
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(
        ran, "",
        "the job's git ran task code's fsmonitor as uid {ran}"
    );
    let patch = std::fs::read_to_string(art.join("changes.patch")).unwrap();
    assert!(patch.contains("a.txt"), "{patch}");
    assert!(!patch.contains("swapped.txt"), "{patch}");
}

/// The commit of [`NESTED`]: the same wherever it is made.
const NESTED: &str = "git init -q && echo hi > f && git add f && GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' git -c user.name=a -c user.email=a@b commit -qm sub && git rev-parse HEAD";

/// Task code that chooses filters for the job's git, which runs as root: `.gitattributes`
/// names a filter the runner's git configures (`lfs`, as `git lfs install` does), and the
/// branch's submodule, cloned by the worker at its commit ([`NESTED`]), configures one for a
/// file it tracks (its stat changed).
const FILTERING_WORKER: &str = r#"cat > /dev/null
echo a > a.txt
printf '* filter=lfs\n' > .gitattributes
cd sub && @NESTED@
printf '* filter=evil\n' > .gitattributes
printf '[filter "evil"]\n\tclean = "id -u >> @RAN@; cat"\n\trequired = true\n' >> .git/config
sleep 1; touch f; cd ..
echo 'COMPLETED: a'
"#;

/// Defect (issue 34): the work job's git, as root, ran the filters task code chose — a
/// globally configured one its `.gitattributes` named (git-lfs, with keys from task code's
/// `.lfsconfig`, outside the egress firewall), and one a nested repository of the agent's
/// configured (git looks into it for a dirty submodule).
#[test]
fn the_work_jobs_git_runs_no_filter_task_code_chose() {
    let _agent_user = crate::common::agent_user::shared();
    let Some(agent) = crate::common::agent_user::made() else {
        return;
    };
    let outside = tempfile::tempdir().unwrap();
    let ran = outside.path().join("filter-ran");
    let home = outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let lfs = format!(
        "[filter \"lfs\"]\n\tclean = \"id -u >> {0}; cat\"\n\tsmudge = \"id -u >> {0}; cat\"\n\tprocess = \"sh -c 'id -u >> {0}; exit 1'\"\n\trequired = true\n",
        ran.display()
    );
    std::fs::write(home.join(".gitconfig"), lfs).unwrap();
    let worker = FILTERING_WORKER
        .replace("@RAN@", ran.to_str().unwrap())
        .replace("@NESTED@", NESTED);
    let lab = lab::lab()
        .plan("Filter", vec![lab::task("A", &["a.txt"], &[])])
        .worker(&worker)
        .env("HOME", &home)
        .env("DAGEXEC_AGENT_USER", &agent)
        .start();
    let nested = outside.path().join("nested");
    std::fs::create_dir_all(&nested).unwrap();
    let made = std::process::Command::new("sh")
        .args(["-c", NESTED])
        .current_dir(&nested)
        .output()
        .unwrap();
    let gitlink = format!(
        "160000,{},sub",
        String::from_utf8_lossy(&made.stdout).trim()
    );
    git(
        &lab.repo,
        &["update-index", "--add", "--cacheinfo", &gitlink],
    );
    git(&lab.repo, &["commit", "-qm", "a submodule"]);
    git(&lab.repo, &["push", "-q", "origin", "main"]);
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    let art = lab.tmp.path().join("art");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &art);
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(ran, "", "the job's git ran task code's filter as uid {ran}");
    let patch = std::fs::read_to_string(art.join("changes.patch")).unwrap();
    assert!(patch.contains("a.txt"), "{patch}");
}

/// Task code that leaves a process behind: out of its group and session, its environment
/// cleared (so no tag finds it), its pid in @PID@.
const ESCAPING_WORKER: &str = r#"cat > /dev/null
echo a > a.txt
setsid env -i sh -c 'echo $$ > @PID@; exec sleep 60' < /dev/null > /dev/null 2>&1 &
while [ ! -s @PID@ ]; do sleep 0.05; done
echo 'COMPLETED: a'
"#;

/// Defect (issue 34): the work job read and wrote the agent's folders as root (the worker's
/// log, a long-run summary, git's staging) while a process the worker left behind still ran
/// as the agent's user — until the reaper at the job's end — free to swap a folder for a
/// link between dagexec's check and its use. Every process the worker left is gone before
/// the job reads its tree: the task's check, which runs after, finds none.
#[test]
fn nothing_the_worker_left_runs_while_the_job_reads_its_tree() {
    let _agent_user = crate::common::agent_user::shared();
    let Some(agent) = crate::common::agent_user::made() else {
        return;
    };
    let pid = std::env::temp_dir().join(format!("dagexec-escapee-{}", fastrand_suffix()));
    let _ = std::fs::remove_file(&pid);
    let mut task = lab::task("A", &["a.txt"], &[]);
    let check = format!("! kill -0 \"$(cat {})\" 2>/dev/null", pid.display());
    task["agent"] = json!({"acceptanceCriteria": [{"criterion": "nothing left", "check": check}]});
    let worker = ESCAPING_WORKER.replace("@PID@", pid.to_str().unwrap());
    let lab = lab::lab()
        .plan("Escape", vec![task])
        .worker(&worker)
        .env("DAGEXEC_AGENT_USER", &agent)
        .start();
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    let art = lab.tmp.path().join("art");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &art);
    let result = std::fs::read_to_string(art.join("result.json")).unwrap();
    let _ = std::fs::remove_file(&pid);
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["acceptance"][0]["passed"], true, "{result:#}");
}

/// A one-task plan's workflow run (plan job, work job, finalize: the round's commit and the
/// completed plan's archive), every job's git calls logged: per job, in order, the
/// arguments after git's `-c` options.
fn git_calls_of_a_run() -> Vec<(&'static str, Vec<String>)> {
    git_calls_of_a_run_of("cat > /dev/null\necho a > a.txt\necho 'COMPLETED: a'\n")
}

/// [`git_calls_of_a_run`] with `worker` as the task's worker.
fn git_calls_of_a_run_of(worker: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut lab = lab::lab()
        .plan("Calls", vec![lab::task("A", &["a.txt"], &[])])
        .worker(worker)
        .start();
    let seen = lab.log_git_calls("${PWD##*/} $*");
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let calls = std::fs::read_to_string(&seen).unwrap();
    // The lab's clones are job-1 (plan), job-2 (work), job-3 (finalize).
    [("plan", "job-1"), ("work", "job-2"), ("finalize", "job-3")]
        .into_iter()
        .map(|(job, dir)| {
            let of_job = calls
                .lines()
                .filter_map(|l| l.strip_prefix(dir)?.strip_prefix(' '))
                .map(|args| {
                    let mut words: Vec<&str> = args.split(' ').collect();
                    while words.first() == Some(&"-c") {
                        words.drain(..2);
                    }
                    words.join(" ")
                })
                .collect();
            (job, of_job)
        })
        .collect()
}

/// The calls of `calls` that start with `prefix`.
fn calls_like<'c>(calls: &'c [String], prefix: &str) -> Vec<&'c String> {
    calls.iter().filter(|c| c.starts_with(prefix)).collect()
}

#[test]
fn every_job_finds_its_repository_with_one_git_call() {
    for (job, calls) in git_calls_of_a_run() {
        let discover = calls_like(&calls, "rev-parse --path-format=absolute");
        assert_eq!(discover.len(), 1, "{job}: {calls:#?}");
        assert!(
            calls_like(&calls, "rev-parse --show-toplevel").is_empty()
                && calls_like(&calls, "rev-parse --git-common-dir").is_empty(),
            "{job}: {calls:#?}"
        );
    }
}

#[test]
fn finalize_reads_the_commit_identity_once_for_all_its_commits() {
    let calls = git_calls_of_a_run();
    let (_, finalize) = &calls[2];
    let commits = calls_like(finalize, "commit-tree").len();
    assert_eq!(commits, 2, "the round's and the archive's: {finalize:#?}");
    let identity = calls_like(finalize, "config --get-regexp");
    assert_eq!(identity.len(), 1, "{finalize:#?}");
}

#[test]
fn a_round_commit_learns_what_it_changed_with_one_diff_tree() {
    let calls = git_calls_of_a_run();
    let (_, finalize) = &calls[2];
    let commits = calls_like(finalize, "commit-tree").len();
    assert_eq!(commits, 2, "the round's and the archive's: {finalize:#?}");
    // Its paths, both sides' files (the sync's) and whether there is anything to commit.
    assert_eq!(
        calls_like(finalize, "diff-tree").len(),
        commits,
        "{finalize:#?}"
    );
    assert!(calls_like(finalize, "ls-tree").is_empty(), "{finalize:#?}");
    let trees: Vec<_> = calls_like(finalize, "rev-parse")
        .into_iter()
        .filter(|c| c.ends_with("^{tree}"))
        .collect();
    assert!(trees.is_empty(), "{finalize:#?}");
}

#[test]
fn the_plan_job_asks_where_head_is_once_when_it_moves_to_the_branch() {
    let mut lab = lab::lab()
        .plan(
            "Head",
            vec![lab::task("A", &["t0"], &[]), lab::task("B", &["t1"], &[0])],
        )
        .worker("cat > /dev/null\necho x > \"t$DAGEXEC_TASK_INDEX\"\necho 'COMPLETED: x'\n")
        .start();
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let seen = lab.log_git_calls("$*");
    // The checkout is main's; the state is on the branch round 1 pushed.
    let planned = lab.plan_job(2, &[]);
    assert!(planned.has_work(), "{}", planned.log);
    let calls = std::fs::read_to_string(&seen).unwrap();
    assert!(
        calls.contains("checkout --quiet --force --detach"),
        "{calls}"
    );
    let heads = calls
        .lines()
        .filter(|c| c.ends_with("rev-parse --verify --quiet HEAD^{commit}"))
        .count();
    assert_eq!(heads, 1, "{calls}");
}

#[test]
fn finalize_does_not_stage_the_plan_again_after_the_round_commit_holds_it() {
    let calls = git_calls_of_a_run();
    let (_, finalize) = &calls[2];
    assert!(
        !calls_like(finalize, "update-ref").is_empty(),
        "{finalize:#?}"
    );
    let plan = calls_like(finalize, "add --all -- :(literal).design/plan.json");
    assert!(plan.is_empty(), "{finalize:#?}");
    assert!(
        calls_like(finalize, "diff --cached --quiet").is_empty(),
        "{finalize:#?}"
    );
}

#[test]
fn a_round_commit_looks_the_plan_up_in_its_index_once() {
    let calls = git_calls_of_a_run();
    let (_, finalize) = &calls[2];
    let lookups: Vec<_> = calls_like(finalize, "ls-files")
        .into_iter()
        .filter(|c| c.ends_with(":(literal).design/plan.json"))
        .collect();
    assert_eq!(lookups.len(), 1, "{finalize:#?}");
}

#[test]
fn a_round_with_no_patch_to_apply_reads_its_index_once_to_commit_the_plan() {
    let calls = git_calls_of_a_run_of("cat > /dev/null\necho 'FAILED: not today'\n");
    let (_, finalize) = &calls[2];
    assert_eq!(
        calls_like(finalize, "commit-tree").len(),
        1,
        "{finalize:#?}"
    );
    assert_eq!(calls_like(finalize, "read-tree").len(), 1, "{finalize:#?}");
}
