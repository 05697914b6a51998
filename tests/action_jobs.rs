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
