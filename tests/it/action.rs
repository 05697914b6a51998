//! The GitHub Action end to end under `act` (host mode, offline): the workflow `dagexec init`
//! writes, using the action from the repository itself (`uses: ./`, built from source), runs a
//! plan round by round against the fake GitHub API and a private repository: a bare remote
//! served over git's HTTP protocol that refuses every fetch and push without the job's token
//! (`tests/act/git-http-server.py`). The harness plays GitHub's part between rounds: it starts
//! the run that finalize dispatched.
//!
//! Needs `act` (`source .ci/install-tools.sh` installs it; `.ci/run` does): without it these
//! tests are skipped with a note saying so, except under `DAGEXEC_REQUIRE_TOOLS=1` (`.ci/run`).

use crate::common::fake_github;

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use fake_github::FakeGitHub;
use serde_json::{Value, json};

use common::{agent_user, dagexec, git, manifest};

const CHECKOUT: &str = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683";
const UPLOAD: &str = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02";
const DOWNLOAD: &str = "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093";
/// `actions/cache` as action.yml pins it (its `restore` and `save` actions).
const CACHE: &str = "actions/cache@5a3ec84eff668545956fd18022155c47e93e2684";
/// The token the runs get (`secrets.GITHUB_TOKEN`); the git server accepts only this one.
const TOKEN: &str = "ghs_fake_actions_token";

/// `act`, from the project's tool prefix or PATH. Every test here begins with `if no_act()
/// { return; }`, so a missing one was already reported (`common::tools`).
fn act() -> PathBuf {
    common::tools::act()
        .expect("act is installed (each test begins with `if no_act() { return; }`)")
}

/// Whether `act` is missing: the test is then skipped with a note saying how to install it, or
/// fails under `DAGEXEC_REQUIRE_TOOLS=1` (`.ci/run`).
fn no_act() -> bool {
    common::tools::act().is_none()
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
    /// Seconds each job's main checkout waits (the benchmark's stand-in for GitHub's job
    /// start-up).
    job_start: Option<u64>,
    /// More arguments for every act run (`--env`, `-s`): the real agents' settings.
    act_args: Vec<String>,
    /// The user (uid, gid) act runs as, instead of the test's own (`home-<uid>` its HOME).
    as_user: Option<(u32, u32)>,
    /// Whether this lab's test holds the agent's user for itself (its runs take no share of
    /// it: [`agent_user`]).
    owns_agent_user: bool,
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
        Lab::with_init(files, worker, "sh ./worker.sh")
    }

    /// A lab whose workflow is the one `dagexec init --worker <init_worker>` writes.
    fn with_init(files: &[(String, String)], worker: &str, init_worker: &str) -> Lab {
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
            .args(["init", "--action", "./", "--worker", init_worker])
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
            job_start: None,
            act_args: Vec::new(),
            as_user: None,
            owns_agent_user: false,
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

    /// Starts the plan as a person does from the Actions tab with `inputs` (the branch named):
    /// run 1, on main, runs no task code (none runs in a run of the default branch): it starts
    /// the round on the execution branch, whose ref and inputs it returns.
    fn redirect(&mut self, inputs: &Value) -> (String, Value) {
        let before = self.gh.calls("actions/create-workflow-dispatch").len();
        let (code, log) = self.run("refs/heads/main", inputs);
        assert_eq!(code, 0, "the run on main:\n{log}");
        assert_eq!(matrix_of(&log), vec![], "no task runs on main:\n{log}");
        let dispatches = self.gh.calls("actions/create-workflow-dispatch");
        assert_eq!(dispatches.len(), before + 1, "{log}");
        let body = dispatches.last().unwrap().body.clone().unwrap();
        assert_eq!(body["ref"], inputs["branch"], "{body:#}");
        (
            format!("refs/heads/{}", body["ref"].as_str().unwrap()),
            body["inputs"].clone(),
        )
    }

    /// Runs the workflow once for an `event_name` event with `payload`, the clone (whose HEAD
    /// is `github.sha`) on `branch` as the remote has it; returns act's exit status and output.
    fn run_event(&mut self, event_name: &str, branch: &str, payload: &Value) -> (i32, String) {
        // The lab's first run builds the action only when no lab before it did (see
        // `shared_build`); it holds the gate meanwhile, so labs starting together wait for
        // that one build instead of each making its own.
        let gate = (self.runs == 0)
            .then(|| self.restore_shared_build())
            .flatten();
        let _agent_user = (!self.owns_agent_user).then(agent_user::shared);
        self.runs += 1;
        let n = self.runs;
        git(&self.repo, &["fetch", "-q", "origin"]);
        git(
            &self.repo,
            &["checkout", "-q", "-B", branch, &format!("origin/{branch}")],
        );
        let home = match self.as_user {
            Some((uid, _)) => self.root.join(format!("home-{uid}")),
            None => self.root.join("home"),
        };
        let mut cmd = self.act_command(
            (n, 4200 + u64::from(n)),
            event_name,
            payload,
            &self.repo,
            &home,
        );
        let out = cmd.output().expect("act runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(self.root.join(format!("act-{n}.log")), &text).unwrap();
        if gate.is_some() {
            self.share_build();
        }
        (out.status.code().unwrap_or(-1), text)
    }

    /// The default branch's scope of the lab's actions/cache store.
    fn main_scope(&self) -> PathBuf {
        self.root.join("actions-cache/refs%2Fheads%2Fmain")
    }

    /// The action's actions/cache key in this lab (platform, profile, a hash of its source
    /// files), as the action's own locate step computes it.
    fn build_key(&self) -> String {
        let out = Command::new("bash")
            .arg(manifest().join("scripts/install-action.sh"))
            .arg("locate")
            .env("GITHUB_ACTION_PATH", &self.repo)
            .env("DAGEXEC_BUILD_PROFILE", "dev")
            .env("DAGEXEC_TOOL_CACHE", self.root.join("locate"))
            .env("GITHUB_OUTPUT", "/dev/null")
            .env_remove("DAGEXEC_ACTION_REPOSITORY")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.split("(cache key ")
            .nth(1)
            .and_then(|t| t.split(')').next())
            .unwrap_or_else(|| panic!("the locate step names no cache key: {text}"))
            .to_string()
    }

    /// Before the lab's first run: copies the build of the action an earlier lab shared
    /// (`shared_build`) for this source into the default branch's scope of this lab's
    /// actions/cache store, as an earlier workflow run of this repository would have saved
    /// it. With none shared yet, returns the gate, held until this run has shared its build.
    fn restore_shared_build(&self) -> Option<std::sync::MutexGuard<'static, ()>> {
        let key = self.build_key();
        let gate = SHARED_BUILD.lock().unwrap_or_else(|e| e.into_inner());
        let shared = shared_build().join(&key);
        if !shared.is_dir() {
            return Some(gate);
        }
        copy_dir(&shared, &self.main_scope().join(&key));
        None
    }

    /// After the lab's first run, when it built the action: shares the build it saved in the
    /// default branch's scope, in place of any shared for another source.
    fn share_build(&self) {
        let key = self.build_key();
        let saved = self.main_scope().join(&key);
        if !saved.is_dir() {
            return;
        }
        let shared = shared_build();
        for e in std::fs::read_dir(&shared).unwrap() {
            let _ = std::fs::remove_dir_all(e.unwrap().path());
        }
        // Copied beside it and renamed into place: no lab copies half of one.
        let part = shared.join(format!(".part-{}", std::process::id()));
        copy_dir(&saved, &part);
        std::fs::rename(&part, shared.join(&key)).unwrap();
    }

    /// The act command for workflow run `n` (id `run_id`) of `event_name` with `payload`, in the clone
    /// `workdir` (whose HEAD is `github.sha`), with `home` as its HOME.
    fn act_command(
        &self,
        (n, run_id): (u32, u64),
        event_name: &str,
        payload: &Value,
        workdir: &Path,
        home: &Path,
    ) -> Command {
        let event = self.root.join(format!("event-{n}.json"));
        std::fs::write(&event, payload.to_string()).unwrap();
        let artifacts = self.root.join(format!("artifacts-{n}"));
        let cache = self.root.join(format!("act-cache-{n}"));
        std::fs::create_dir_all(home).unwrap();
        let standins = manifest().join("tests/act/actions");
        let local = |action: &str, dir: &str| {
            format!("{}/{action}={}", self.server, standins.join(dir).display())
        };
        let cargo_home = std::env::var("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
        let shared = manifest().join("target/act");
        let mut cmd = Command::new(act());
        // `npm install --global` under `NPM_CONFIG_PREFIX=<root>/npm-global` (the real
        // agents' install step) puts its commands here, as on a runner's PATH.
        let path = format!(
            "{}:{}",
            self.root.join("npm-global/bin").display(),
            std::env::var("PATH").unwrap()
        );
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", home)
            .env("LANG", "C.UTF-8")
            .env("CARGO_HOME", &cargo_home)
            .env(
                "RUSTUP_HOME",
                std::env::var("RUSTUP_HOME")
                    .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap())),
            )
            .env("DAGEXEC_ARTIFACT_DIR", &artifacts)
            // The actions/cache stand-in's store: kept across this lab's runs, as GitHub keeps
            // a repository's caches (each test is a repository of its own: tests running side
            // by side never restore each other's build); entries are keyed by the action's
            // source hash.
            .env("DAGEXEC_CACHE_DIR", self.root.join("actions-cache"))
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(workdir)
            .arg(event_name)
            .args(["-W", ".github/workflows/dagexec.yml"])
            .arg("-e")
            .arg(&event)
            .args(["-P", "ubuntu-latest=-self-hosted"])
            .arg("--action-cache-path")
            .arg(&cache)
            .args(["--no-cache-server", "--no-skip-checkout"])
            // GitHub runs a matrix's jobs side by side (up to max-parallel, 8 here).
            .args(["--concurrent-jobs", "8"])
            .args(["--env-file", "/dev/null", "--secret-file", "/dev/null"])
            .args(["--var-file", "/dev/null", "--input-file", "/dev/null"])
            .args(["--local-repository", &local(CHECKOUT, "checkout")])
            .args(["--local-repository", &local(UPLOAD, "upload-artifact")])
            .args(["--local-repository", &local(DOWNLOAD, "download-artifact")])
            .args(["--local-repository", &local(CACHE, "cache")])
            .args(["--env", &format!("GITHUB_SERVER_URL={}", self.server)])
            .args(["--env", &format!("GITHUB_API_URL={}", self.gh.url())])
            .args(["--env", "GITHUB_REPOSITORY=acme/widgets"])
            .args(["--env", &format!("GITHUB_RUN_ID={run_id}")])
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
            // Each build of the action is made from a checkout of its own (another path):
            // rustc's incremental state never serves the next one, so it is not written.
            .args(["--env", "CARGO_INCREMENTAL=0"])
            // Without debug info (symbols kept; only the link differs, so the seeded
            // dependencies still serve it): 34 MB, not 220 MB. Every job restores the build
            // from the cache and reads it whole for the pin's SHA-256, and a released binary
            // is of the smaller size: the jobs' own time is measured on what users run.
            .args(["--env", "CARGO_PROFILE_DEV_STRIP=debuginfo"])
            .args(["-s", &format!("GITHUB_TOKEN={TOKEN}")])
            .args(
                self.job_start
                    .map(|s| vec!["--env".to_string(), format!("DAGEXEC_LAB_JOB_START={s}")])
                    .unwrap_or_default(),
            )
            .args(&self.act_args)
            .stdin(std::process::Stdio::null());
        if let Some((uid, gid)) = self.as_user {
            use std::os::unix::process::CommandExt;
            // As root, std drops the supplementary groups before `setuid`.
            cmd.uid(uid).gid(gid);
        }
        cmd
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

/// Held by a lab's first run while no build of the action is shared (`shared_build`).
static SHARED_BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The build of the action shared between labs: the entry the first lab's first run saved in
/// its default branch's actions/cache scope, named by its cache key (the platform, the
/// profile and a hash of the action's source files), restored into the default branch's
/// scope of every later lab whose source has that key. So the action is built from source once per source, not once
/// per test: a later lab's run on the default branch runs that build as `actions/cache`
/// restored it, as a repository's later runs do. The source build, its cache and the refusal
/// of an untrusted one are `a_plan_runs_round_by_round_to_a_ready_pull_request`'s, whose
/// runs after the poisoned entry build afresh each time.
fn shared_build() -> PathBuf {
    let dir = manifest().join("target/act/shared-build");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The repository of the events: the Lab's `acme/widgets`, whose default branch is `main`.
fn repository() -> Value {
    json!({"full_name": "acme/widgets", "name": "widgets",
           "owner": {"login": "acme"}, "default_branch": "main"})
}

impl Drop for Lab {
    /// A failed test keeps its lab (repositories, events, act logs) for a look, and so does
    /// every lab with `DAGEXEC_LAB_KEEP` set (the benchmark's logs hold its timings).
    fn drop(&mut self) {
        let _ = self.git_server.kill();
        let _ = self.git_server.wait();
        if (std::thread::panicking() || std::env::var_os("DAGEXEC_LAB_KEEP").is_some())
            && let Some(t) = self.tmp.take()
        {
            eprintln!("kept the act lab at {}", t.keep().display());
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
    if no_act() {
        return;
    }
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
    let poisoned = lab.root.join("poisoned-build-ran");
    let branch_scope = lab
        .root
        .join("actions-cache")
        .join("refs%2Fheads%2Fdagexec%2Fwidgets-greet");
    let _ = std::fs::remove_dir_all(&branch_scope);
    // Run 1 is started on main without a branch: it only starts round 1 again with the
    // branch named, on the branch (no task code runs in a run of the default branch).
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
            // What task code that became root can do with its job's ACTIONS_RUNTIME_TOKEN:
            // save a build of its own under the action's cache key in the branch's scope,
            // which actions/cache prefers to the default branch's.
            let key = logs[0]
                .split("(cache key ")
                .nth(1)
                .and_then(|t| t.split(')').next())
                .expect("the locate step names the cache key")
                .to_string();
            let bin = branch_scope.join(&key).join("bin/dagexec");
            common::executable(
                &bin,
                &format!(
                    "#!/bin/sh\necho \"${{GITHUB_JOB:-?}}\" >> '{}'\nexit 1\n",
                    poisoned.display()
                ),
            );
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
    // The poisoned build in the branch's scope ran in no job: each run after it warned,
    // removed it and built afresh (once: its other jobs run the rebuilt binary, pinned).
    let _ = std::fs::remove_dir_all(&branch_scope);
    assert!(
        !poisoned.exists(),
        "jobs ran the poisoned build: {:?}",
        std::fs::read_to_string(&poisoned)
    );
    for (n, log) in logs.iter().enumerate().skip(2) {
        assert!(
            log.contains("not running the dagexec build found in"),
            "run {}: the poisoned build is not refused with a warning",
            n + 1
        );
        let builds = log.matches("Building dagexec from").count();
        assert_eq!(builds, 1, "run {}: dagexec was built {builds} times", n + 1);
    }
    // Before that, the action's source build happens once; every later job and round
    // restores it and runs it, as pinned by the job that started the run.
    let builds: usize = logs[..2]
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
    assert!(
        logs[1].contains("as this run was started with") && !logs[1].contains("not running"),
        "round 1 runs the build its run was started with"
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
        (Some("dagexec/widgets-greet"), Some("dagexec/widgets-greet"))
    );
    // Every dispatch carries the pin of the dispatching job's build.
    for d in lab.gh.calls("actions/create-workflow-dispatch") {
        let build = d.body.as_ref().unwrap()["inputs"]["build"].clone();
        assert!(
            build.as_str().is_some_and(|b| b.len() == 64),
            "a dispatch without the build pin: {build}"
        );
    }
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
    if no_act() {
        return;
    }
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
    let (git_ref, inputs) =
        lab.redirect(&json!({"plan": ".design/plan.json", "branch": "dagexec/break"}));
    let (code, log) = lab.run(&git_ref, &inputs);
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
    // Only the run on main started a round (this one).
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 1);
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

/// `Codertocat` (write access, the fake's default) comments `body` on pull request `pr` of the
/// Lab's repository on `gh`, and GitHub's `issue_comment` event for it.
fn pr_comment_event(gh: &FakeGitHub, pr: u64, body: &str) -> Value {
    let mut p = common::lab::pr_comment_event(gh, "acme/widgets", pr, body);
    p["repository"] = repository();
    p
}

#[test]
fn an_execute_comment_answers_a_question_and_starts_the_next_round() {
    if no_act() {
        return;
    }
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
    let (git_ref, inputs) = lab.redirect(&json!({"plan": ".design/plan.json", "branch": branch}));
    let (code, log) = lab.run(&git_ref, &inputs);
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
    // (The one dispatch is the run on main's, which started this round.)
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 1);
    let round_1 = lab.log(branch);

    // The answer, as a comment: the comment job (on the default branch) acknowledges it,
    // commits it to the execution branch and dispatches a round there.
    let (code, log) = lab.run_event(
        "issue_comment",
        "main",
        &pr_comment_event(&lab.gh, pr, "/execute answer 1 use sqlite"),
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
    assert_eq!(dispatches.len(), 2, "{log}");
    let dispatch = dispatches[1].body.clone().unwrap();
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
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 2);
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
    if no_act() {
        return;
    }
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

/// `schedule: eager` under act: the conductor is one act run (plan job, then the conduct
/// job) that dispatches every task as a run of its own; this harness starts each dispatched
/// run as its own act process at once (so task runs really run side by side), and hands its
/// uploaded artifact to the fake API, which the conductor polls and downloads from.
#[test]
fn eager_runs_every_task_as_its_own_workflow_run_side_by_side() {
    if no_act() {
        return;
    }
    let p = plan(
        "Widgets eager",
        vec![
            task("Slow", &["slow.txt"], &[], "test -s slow.txt"),
            task("Quick", &["quick.txt"], &[], "test -s quick.txt"),
            task("After quick", &["after.txt"], &[1], "test -s after.txt"),
        ],
    );
    let times_dir = tempfile::tempdir().unwrap();
    // The tasks run as the work job's unprivileged user: the trace outside the checkout is
    // theirs to write.
    std::fs::set_permissions(
        times_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let times = times_dir.path().join("times.log");
    // Slow task 0 ends once task 2 has started (at most two minutes), however slow the
    // machine: an eager conductor starts 1 and then 2 meanwhile; one that waited for 0 fails.
    let worker = format!(
        r#"cat > /dev/null
echo "start $DAGEXEC_TASK_INDEX $(date +%s.%N)" >> '{t}'
case "$DAGEXEC_TASK_INDEX" in
0) i=0; while ! grep -q '^start 2 ' '{t}' && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
   echo slow > slow.txt ;;
1) echo quick > quick.txt ;;
2) echo after > after.txt ;;
esac
echo "end $DAGEXEC_TASK_INDEX $(date +%s.%N)" >> '{t}'
echo "COMPLETED: task $DAGEXEC_TASK_INDEX"
"#,
        t = times.display()
    );
    let lab = Lab::new(&p, &worker);
    // The eager workflow (`init --schedule eager`: the plan job conducts), polling every
    // second (the fake API has no rate limit).
    make_eager(&lab, 360_000);
    let (lab, status, log) = conduct(lab);
    assert!(status.success(), "{log}");
    assert!(log.contains("Started task 0 (Slow) attempt 1"), "{log}");

    // Tasks 1 and 2 ran (one after the other) while slow task 0 ran: eager, not rounds.
    let mut at: std::collections::BTreeMap<(String, u64), f64> = Default::default();
    for line in std::fs::read_to_string(&times).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        at.insert(
            (f[0].to_string(), f[1].parse().unwrap()),
            f[2].parse().unwrap(),
        );
    }
    let (slow_start, slow_end) = (at[&("start".into(), 0)], at[&("end".into(), 0)]);
    assert!(at[&("start".into(), 1)] < slow_end, "{at:?}");
    assert!(
        at[&("start".into(), 2)] < slow_end,
        "task 2 waited for slow task 0: {at:?}"
    );
    assert!(at[&("end".into(), 1)] > slow_start - 30.0);

    let branch = "dagexec/widgets-eager";
    let plan = lab.plan_on(branch, ".design/plan.done.json");
    for t in plan["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{t:#}");
    }
    for f in ["slow.txt", "quick.txt", "after.txt"] {
        git(&lab.origin, &["cat-file", "-e", &format!("{branch}:{f}")]);
    }
    let st = lab.gh.state();
    assert_eq!(
        st.check_runs.last().unwrap().conclusion.as_deref(),
        Some("success")
    );
    assert!(!st.pulls[0].draft);
    lab.gh.assert_clean();
}

/// Turns the lab's workflow into the eager one `init --schedule eager` writes (the plan job
/// conducts), its conductor polling every second within `polls_per_hour`.
fn make_eager(lab: &Lab, polls_per_hour: u64) {
    let out = dagexec(&lab.repo)
        .args(["init", "--action", "./", "--worker", "sh ./worker.sh"])
        .args(["--schedule", "eager", "--force"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wf = lab.repo.join(".github/workflows/dagexec.yml");
    let text = std::fs::read_to_string(&wf).unwrap();
    assert!(text.contains("          conduct: true\n"), "{text}");
    let text = text.replace(
        "          conduct: true\n",
        &format!("          conduct: true\n          poll: 1s\n          polls-per-hour: {polls_per_hour}\n"),
    );
    std::fs::write(&wf, text).unwrap();
    git(&lab.repo, &["commit", "-qam", "eager"]);
    git(&lab.repo, &["push", "-q", "origin", "main"]);
}

/// Runs the eager workflow on `lab` to its end: run 1 on main names the branch, run 2 (the
/// dispatch it makes) is the conductor; every task run the conductor dispatches starts at
/// once as its own act process, and its artifact is handed to the fake API when it ends.
/// Returns the lab, the conductor run's exit status and its log.
fn conduct(mut lab: Lab) -> (std::sync::Arc<Lab>, std::process::ExitStatus, String) {
    // Run 1 on main only names the branch; run 2 (dispatched on the branch) conducts.
    let naming = std::time::Instant::now();
    let (code, log) = lab.run(
        "refs/heads/main",
        &json!({"plan": ".design/plan.json", "branch": ""}),
    );
    assert_eq!(code, 0, "{log}");
    std::fs::write(
        lab.root.join("act-1.seconds"),
        naming.elapsed().as_secs_f64().to_string(),
    )
    .unwrap();
    let first = lab.gh.state().dispatches[0].clone();
    // Its act runs start work jobs (task code as the agent's user) until it returns.
    let _agent_user = agent_user::shared();
    git(&lab.repo, &["fetch", "-q", "origin"]);
    let remote = format!("origin/{}", first.git_ref);
    git(
        &lab.repo,
        &["checkout", "-q", "-B", &first.git_ref, &remote],
    );
    lab.runs += 1;
    let n = lab.runs;
    let payload = json!({"inputs": first.inputs, "ref": format!("refs/heads/{}", first.git_ref), "repository": repository()});
    let mut conductor = lab
        .act_command(
            (n, first.run_id),
            "workflow_dispatch",
            &payload,
            &lab.repo,
            &lab.root.join("home"),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let conductor_out = std::thread::spawn({
        let mut out = conductor.stdout.take().unwrap();
        move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut out, &mut s).unwrap();
            s
        }
    });
    let conductor_err = std::thread::spawn({
        let mut err = conductor.stderr.take().unwrap();
        move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut err, &mut s).unwrap();
            s
        }
    });

    // Play GitHub: each dispatched task run starts at once, as its own act process.
    let conductor_start = unix_now();
    let lab = std::sync::Arc::new(lab);
    // (run id, task, attempt, when the harness saw the dispatch, when its act process ended),
    // in Unix seconds: the run's created_at and updated_at on GitHub.
    let timeline = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let mut started = std::collections::BTreeSet::new();
    let mut runners = Vec::new();
    let t0 = std::time::Instant::now();
    let status =
        loop {
            for d in lab.gh.state().dispatches {
                if d.inputs.get("task").is_none() || !started.insert(d.run_id) {
                    continue;
                }
                let lab = lab.clone();
                let timeline = timeline.clone();
                let seen = unix_now();
                let k = 100 + started.len() as u32;
                runners.push(std::thread::spawn(move || {
                lab.gh.start_run(d.run_id);
                let dir = lab.root.join(format!("run-{}", d.run_id));
                git(
                    &lab.root,
                    &["clone", "-q", lab.origin.to_str().unwrap(), dir.to_str().unwrap()],
                );
                git(&dir, &["checkout", "-q", "-B", &d.git_ref, &format!("origin/{}", d.git_ref)]);
                let payload = json!({"inputs": d.inputs, "ref": format!("refs/heads/{}", d.git_ref),
                                     "repository": repository()});
                let home = lab.root.join(format!("home-{}", d.run_id));
                let out = lab
                    .act_command((k, d.run_id), "workflow_dispatch", &payload, &dir, &home)
                    .output()
                    .unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                std::fs::write(lab.root.join(format!("act-task-{}.log", d.run_id)), &text)
                    .unwrap();
                assert!(out.status.success(), "task run {}:\n{text}", d.run_id);
                let stored = lab.root.join(format!("artifacts-{k}"));
                let mut artifacts = Vec::new();
                for e in std::fs::read_dir(&stored).into_iter().flatten().flatten() {
                    artifacts.push((
                        e.file_name().to_string_lossy().to_string(),
                        zip_dir(&e.path()),
                    ));
                }
                lab.gh.finish_run(d.run_id, "success", artifacts);
                timeline.lock().unwrap().push(json!({
                    "run": d.run_id, "task": d.inputs["task"], "attempt": d.inputs["attempt"],
                    "created": seen, "ended": unix_now(),
                }));
            }));
            }
            if let Some(status) = conductor.try_wait().unwrap() {
                break status;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(900),
                "the conductor did not finish"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
    for r in runners {
        r.join().unwrap();
    }
    let log = format!(
        "{}{}",
        conductor_out.join().unwrap(),
        conductor_err.join().unwrap()
    );
    std::fs::write(lab.root.join("act-conductor.log"), &log).unwrap();
    let runs = json!({
        "conductor": {"created": conductor_start, "ended": unix_now()},
        "tasks": *timeline.lock().unwrap(),
    });
    std::fs::write(lab.root.join("timeline.json"), runs.to_string()).unwrap();
    (lab, status, log)
}

fn zip_dir(dir: &Path) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    for name in names {
        w.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(&std::fs::read(dir.join(&name)).unwrap())
            .unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// Issue 13's benchmark: the Actions makespan of `schedule: eager` against `rounds` and the
/// lower bound with job start-ups counted, under act, on a random plan whose tasks sleep for
/// different times, each job delayed by a fixed start-up (`DAGEXEC_LAB_JOB_START`). Prints
/// figures; asserts only that both schedules complete. `bench/actions_makespan.sh` runs it:
/// `DAGEXEC_BENCH_TASKS` (30), `DAGEXEC_BENCH_JOB_START` seconds (5),
/// `DAGEXEC_BENCH_POLLS_PER_HOUR` (4800: a GitHub App token's budget; GITHUB_TOKEN's is 600).
#[test]
#[ignore = "a benchmark of several minutes; bench/actions_makespan.sh runs it"]
fn bench_actions_makespan() {
    if no_act() {
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("DAGEXEC_BENCH_TASKS", 30) as usize;
    let job_start = env("DAGEXEC_BENCH_JOB_START", 5);
    let polls = env("DAGEXEC_BENCH_POLLS_PER_HOUR", 4800);
    // A deterministic random DAG: each task depends on up to two of the 8 before it, and
    // sleeps 2–20 s.
    let mut seed: u64 = 0x5eed;
    let mut rand = move |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let mut tasks = Vec::new();
    let mut deps: Vec<Vec<usize>> = Vec::new();
    let mut secs = Vec::new();
    let mut cases = String::new();
    for i in 0..n {
        let mut d: Vec<usize> = (i.saturating_sub(8)..i).filter(|_| rand(4) == 0).collect();
        d.truncate(2);
        let s = 2 + rand(19);
        cases.push_str(&format!("{i}) sleep {s} ;;\n"));
        let file = format!("t{i}.txt");
        tasks.push(task(&format!("Task {i}"), &[file.as_str()], &d, "true"));
        deps.push(d);
        secs.push(s);
    }
    let worker = format!(
        "cat > /dev/null\ncase \"$DAGEXEC_TASK_INDEX\" in\n{cases}esac\necho done > \"t$DAGEXEC_TASK_INDEX.txt\"\necho \"COMPLETED: task $DAGEXEC_TASK_INDEX\"\n"
    );
    let p = plan("Bench makespan", tasks);
    // The bound: every task costs a job start-up and its sleep, the run starts with the plan
    // job and the conductor (two start-ups), 8 run at once.
    let cost: Vec<u64> = secs.iter().map(|s| s + job_start).collect();
    let mut finish = vec![0u64; n];
    for i in 0..n {
        finish[i] = deps[i].iter().map(|&d| finish[d]).max().unwrap_or(0) + cost[i];
    }
    let critical = *finish.iter().max().unwrap();
    let work: u64 = cost.iter().sum();
    let bound = 2 * job_start + critical.max(work.div_ceil(8));

    // Rounds: the first run only names the branch; the clock starts with the second.
    let mut rounds_lab = Lab::new(&p, &worker);
    literal_max_parallel(&rounds_lab, 8);
    rounds_lab.job_start = Some(job_start);
    let (code, log) = rounds_lab.run(
        "refs/heads/main",
        &json!({"plan": ".design/plan.json", "branch": ""}),
    );
    assert_eq!(code, 0, "{log}");
    let t0 = std::time::Instant::now();
    let mut runs = 0;
    // When each workflow run started and ended (Unix seconds): its created_at and updated_at.
    let mut timeline = Vec::new();
    loop {
        let dispatches = rounds_lab.gh.calls("actions/create-workflow-dispatch");
        if dispatches.len() <= runs {
            break;
        }
        let body = dispatches[runs].body.clone().unwrap();
        runs += 1;
        let created = unix_now();
        let (code, log) = rounds_lab.run(
            &format!("refs/heads/{}", body["ref"].as_str().unwrap()),
            &body["inputs"],
        );
        assert_eq!(code, 0, "{log}");
        timeline.push(json!({"created": created, "ended": unix_now()}));
    }
    let rounds = t0.elapsed().as_secs_f64();
    std::fs::write(
        rounds_lab.root.join("timeline.json"),
        json!({ "runs": timeline }).to_string(),
    )
    .unwrap();
    let branch = "dagexec/bench-makespan";
    let done = rounds_lab.plan_on(branch, ".design/plan.done.json");
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed")
    );

    // Eager: the conductor's run (the first run naming the branch is not timed either).
    let mut eager_lab = Lab::new(&p, &worker);
    make_eager(&eager_lab, polls);
    eager_lab.job_start = Some(job_start);
    let (eager_lab, status, log, eager) = {
        let t = std::time::Instant::now();
        let (lab, status, log) = conduct(eager_lab);
        let setup = log_seconds_before_conductor(&lab);
        (lab, status, log, t.elapsed().as_secs_f64() - setup)
    };
    assert!(status.success(), "{log}");
    let done = eager_lab.plan_on(branch, ".design/plan.done.json");
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed")
    );

    // What `dagexec simulate` predicts, from what a user has after such a run: each plan's
    // recorded attempts (durations), a task run's time besides its attempt (--job-start), the
    // `dagexec finalize` step's time (--integrate), the conductor's inputs.
    let eager_done = eager_lab.plan_on(branch, ".design/plan.done.json");
    let js = median(measured_job_overheads(&eager_lab, &eager_done));
    let integrate = median(finalize_step_seconds(&rounds_lab));
    let predict = |lab: &Lab, schedule: &str| -> f64 {
        let path = lab.root.join("plan.done.json");
        std::fs::write(
            &path,
            serde_json::to_string(&lab.plan_on(branch, ".design/plan.done.json")).unwrap(),
        )
        .unwrap();
        let ms = |s: f64| format!("{}ms", (s * 1000.0).round() as u64);
        let out = dagexec(&manifest())
            .arg("--plan")
            .arg(&path)
            .args(["simulate", "--json", "--jobs", "8", "--max-parallel", "8"])
            .args(["--job-start", &ms(js), "--integrate", &ms(integrate)])
            .args(["--poll", "1s", "--polls-per-hour", &polls.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["where"] == "actions" && s["schedule"] == schedule)
            .and_then(|s| s["seconds"].as_f64())
            .unwrap_or(f64::NAN)
    };
    let (pr, pe) = (predict(&rounds_lab, "rounds"), predict(&eager_lab, "eager"));
    // The same bound with the start-up each job really had (the sleep plus act's own cost).
    let measured_bound = {
        let cost: Vec<f64> = secs.iter().map(|&s| s as f64 + js).collect();
        let mut finish = vec![0f64; n];
        for i in 0..n {
            finish[i] = deps[i].iter().map(|&d| finish[d]).fold(0.0, f64::max) + cost[i];
        }
        let critical = finish.iter().copied().fold(0.0, f64::max);
        2.0 * js + critical.max(cost.iter().sum::<f64>() / 8.0)
    };

    println!(
        "\nActions makespan: {n} tasks (2–20 s each), job start-up {job_start} s, max-parallel 8, conductor polls ≤ {polls}/h"
    );
    println!(
        "  lower bound   {bound:>6} s  (2 start-ups + max(critical path {critical} s, work {work} s / 8))"
    );
    println!(
        "  rounds        {rounds:>6.0} s  ×{:.2} of the bound  ({runs} workflow runs)",
        rounds / bound as f64,
    );
    println!(
        "  eager         {eager:>6.0} s  ×{:.2} of the bound  ×{:.2} of rounds",
        eager / bound as f64,
        eager / rounds,
    );
    println!(
        "  with the measured start-up ({js:.1} s a job): lower bound {measured_bound:.0} s, rounds ×{:.2}, eager ×{:.2}",
        rounds / measured_bound,
        eager / measured_bound,
    );
    println!(
        "simulate, from the plans' recorded attempts, --job-start {js:.1}s (median task run minus its attempt), --integrate {integrate:.1}s (median `dagexec finalize` step), --poll 1s --polls-per-hour {polls}:"
    );
    println!(
        "  rounds        predicted {pr:>6.0} s  measured {rounds:>6.0} s  ×{:.2}",
        pr / rounds
    );
    println!(
        "  eager         predicted {pe:>6.0} s  measured {eager:>6.0} s  ×{:.2}",
        pe / eager
    );
}

/// The median of `v` (NaN when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Each task run's time besides its attempt, in seconds: from the run's creation (the
/// dispatch) to its end, as GitHub shows a run's duration, minus the attempt's `seconds` in
/// the plan's `progress.dagexecAttempts` (`done`).
fn measured_job_overheads(lab: &Lab, done: &Value) -> Vec<f64> {
    let timeline: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.root.join("timeline.json")).unwrap())
            .unwrap();
    let attempts = done["progress"]["dagexecAttempts"].as_array().unwrap();
    let as_u64 = |v: &Value| v.as_u64().or_else(|| v.as_str()?.parse().ok());
    timeline["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let a = attempts.iter().find(|a| {
                as_u64(&a["task"]) == as_u64(&r["task"])
                    && as_u64(&a["attempt"]) == as_u64(&r["attempt"])
            })?;
            Some(r["ended"].as_f64()? - r["created"].as_f64()? - a["seconds"].as_f64()?)
        })
        .collect()
}

/// The `dagexec finalize` step's time in each workflow run of `lab` but the first (which only
/// names the branch), from act's logs (`Success - Main dagexec finalize [2.41s]`), in seconds.
fn finalize_step_seconds(lab: &Lab) -> Vec<f64> {
    const STEP: &str = "Success - Main dagexec finalize [";
    (2..=lab.runs)
        .filter_map(|n| std::fs::read_to_string(lab.root.join(format!("act-{n}.log"))).ok())
        .flat_map(|log| {
            log.lines()
                .filter_map(|l| {
                    let rest = &l[l.find(STEP)? + STEP.len()..];
                    go_duration(&rest[..rest.find(']')?])
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A Go duration as act prints it (`2.41s`, `812.5ms`, `1m5.2s`, `950µs`), in seconds.
fn go_duration(s: &str) -> Option<f64> {
    let (mut total, mut rest) = (0.0, s);
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        total += value
            * match &rest[..unit_end] {
                "h" => 3600.0,
                "m" => 60.0,
                "s" => 1.0,
                "ms" => 1e-3,
                "µs" | "us" => 1e-6,
                "ns" => 1e-9,
                _ => return None,
            };
        rest = &rest[unit_end..];
    }
    Some(total)
}

/// Now, in seconds since the Unix epoch (the benchmark's timeline, to compare with the
/// attempts' recorded start and end).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Runs the work jobs of `lab`'s workflow side by side, `n` at once, as GitHub does: act does
/// not evaluate an expression in `max-parallel` (it logs "Failed to parse 'max-parallel'
/// option" and runs the matrix one job at a time), so the plan job's output is replaced by
/// `n`.
fn literal_max_parallel(lab: &Lab, n: usize) {
    let wf = lab.repo.join(".github/workflows/dagexec.yml");
    let text = std::fs::read_to_string(&wf).unwrap();
    let expr = "max-parallel: ${{ fromJSON(needs.plan.outputs.max-parallel) }}";
    assert!(text.contains(expr), "the template's work job sets {expr}");
    std::fs::write(&wf, text.replace(expr, &format!("max-parallel: {n}"))).unwrap();
    git(
        &lab.repo,
        &["commit", "-qam", "a literal max-parallel for act"],
    );
    git(&lab.repo, &["push", "-q", "origin", "main"]);
}

/// Seconds the first eager run (which only names the branch) took, from its act log; the
/// benchmark does not count it, as it does not for rounds.
fn log_seconds_before_conductor(lab: &Lab) -> f64 {
    std::fs::read_to_string(lab.root.join("act-1.seconds"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Issue 21: the real agent CLIs in the work job. The workflow is the one `dagexec init
/// --worker claude|codex` writes: its install step (`npm install --global` of the pinned
/// version, into a prefix of the lab's), its secret check, and its worker command, run against
/// the scripted model server; a one-task plan completes in one round with the file the model
/// wrote, and the spend the CLI reported is recorded on the branch.
#[test]
fn the_work_job_runs_the_pinned_agent_clis() {
    if no_act() || crate::real_agents::agents_bin().is_none() {
        return;
    }
    let server = crate::common::model_server::ModelServer::start();
    for (cli, secret) in [("claude", "ANTHROPIC_API_KEY"), ("codex", "OPENAI_API_KEY")] {
        let p = plan(
            "Real agents",
            vec![json!({
                "subject": "alpha", "status": "pending", "blockedBy": [],
                "description": "Create alpha.txt. [[write alpha.txt]]",
                "metadata": {"files": {"create": ["alpha.txt"], "modify": []}},
                "agent": {"role": "engineer",
                          "acceptanceCriteria": [{"criterion": "written", "check": "test -s alpha.txt"}]}
            })],
        );
        let files = [(
            ".design/plan.json".to_string(),
            serde_json::to_string_pretty(&p).unwrap(),
        )];
        let mut lab = Lab::with_init(&files, "", cli);
        let codex_home = lab.root.join("codex-home");
        std::fs::create_dir_all(&codex_home).unwrap();
        std::fs::write(
            codex_home.join("config.toml"),
            crate::real_agents::codex_config(&server),
        )
        .unwrap();
        let npm_cache = PathBuf::from(std::env::var("HOME").unwrap()).join(".npm");
        for arg in [
            format!(
                "NPM_CONFIG_PREFIX={}",
                lab.root.join("npm-global").display()
            ),
            format!("npm_config_cache={}", npm_cache.display()),
            // The packages are in the cache (.ci/install-agents.sh put them there): take them
            // from it rather than ask the registry again.
            "npm_config_prefer_offline=true".to_string(),
            format!("ANTHROPIC_BASE_URL={}", server.url()),
            // The gateway's upstream for Codex (the worker's own base URL is the gateway's).
            format!("OPENAI_BASE_URL={}/v1", server.url()),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_string(),
            format!("CODEX_HOME={}", codex_home.display()),
        ] {
            lab.act_args.extend(["--env".to_string(), arg]);
        }
        // A machine behind a TLS-inspecting proxy trusts it through these; act's jobs start
        // from a cleared environment.
        for var in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "npm_config_cafile"] {
            if let Ok(value) = std::env::var(var) {
                lab.act_args
                    .extend(["--env".to_string(), format!("{var}={value}")]);
            }
        }
        lab.act_args
            .extend(["-s".to_string(), format!("{secret}=sk-test-{cli}")]);
        let (mut git_ref, mut inputs) = (
            "refs/heads/main".to_string(),
            json!({"plan": ".design/plan.json", "branch": ""}),
        );
        for round in 1..=3 {
            let (code, log) = lab.run(&git_ref, &inputs);
            assert_eq!(code, 0, "{cli}, run {round}:\n{log}");
            let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
            if dispatches.len() < round {
                break;
            }
            let body = dispatches.last().unwrap().body.clone().unwrap();
            git_ref = format!("refs/heads/{}", body["ref"].as_str().unwrap());
            inputs = body["inputs"].clone();
        }
        let branch = "dagexec/real-agents";
        assert_eq!(
            git(&lab.origin, &["show", &format!("{branch}:alpha.txt")]),
            crate::common::model_server::content_of("alpha.txt"),
            "{cli}"
        );
        let done = lab.plan_on(branch, ".design/plan.done.json");
        let attempts = done["progress"]["dagexecAttempts"].as_array().cloned();
        let attempts = attempts.unwrap_or_default();
        assert_eq!(attempts.len(), 1, "{cli}: {done:#}");
        assert!(
            attempts[0]["inputTokens"].as_u64().unwrap_or(0) > 0
                && attempts[0]["outputTokens"].as_u64().unwrap_or(0) > 0,
            "{cli}: no spend recorded: {:#}",
            attempts[0]
        );
        lab.gh.assert_clean();
    }
}

/// A worker for a plan made of issues: writes `t<task>.txt`, the file its issue lists.
const ISSUE_WORKER: &str =
    "#!/bin/sh\necho done > t$DAGEXEC_TASK_INDEX.txt\necho 'COMPLETED: wrote it'\n";

#[test]
fn execute_on_a_parent_issue_runs_its_sub_issues_to_a_ready_pull_request() {
    if no_act() {
        return;
    }
    use crate::common::fake_github::FakeIssue;
    let p = plan(
        "Another plan",
        vec![task("Unrelated", &["x.txt"], &[], "true")],
    );
    let mut lab = Lab::new(&p, ISSUE_WORKER);
    let repo = "acme/widgets";
    let mut parent = FakeIssue::new(repo, 1, "Ship it", "Everything we need to ship.");
    parent.sub_issues = [2, 3, 4, 6].map(|n| (repo.to_string(), n)).to_vec();
    lab.gh.add_issue(parent);
    lab.gh
        .add_issue(FakeIssue::new(repo, 2, "First step", "Files:\n- t0.txt\n"));
    lab.gh.add_issue(FakeIssue::new(
        repo,
        3,
        "Second step",
        "Depends on #2\n```files\nt1.txt\n```\n",
    ));
    let mut closed = FakeIssue::new(repo, 4, "Done before", "");
    closed.closed = true;
    lab.gh.add_issue(closed);
    let mut last = FakeIssue::new(repo, 6, "Third step", "Files: t3.txt");
    last.blocked_by = vec![(repo.to_string(), 3)];
    lab.gh.add_issue(last);
    let branch = "dagexec/issue-1";

    // `/execute` on the parent issue: the comment job, then the steer job, on main.
    let mut event = pr_comment_event(&lab.gh, 1, "/execute");
    event["issue"]
        .as_object_mut()
        .unwrap()
        .remove("pull_request");
    let (code, log) = lab.run_event("issue_comment", "main", &event);
    assert_eq!(code, 0, "the comment run:\n{log}");
    assert!(
        log.contains(&format!("Started the plan of #1's sub-issues on {branch}.")),
        "{log}"
    );
    assert_eq!(
        lab.log(branch)[0],
        "dagexec: plan read from issue #1 — 4 tasks"
    );

    // The rounds GitHub would start, each from the dispatch before it.
    for round in 1..=5 {
        let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
        let body = dispatches.last().unwrap().body.clone().unwrap();
        assert_eq!(body["ref"], branch, "{body:#}");
        assert_eq!(body["inputs"]["plan"], ".design/issues/1/plan.json");
        let (code, log) = lab.run(&format!("refs/heads/{branch}"), &body["inputs"].clone());
        assert_eq!(code, 0, "round {round}:\n{log}");
        if lab.gh.calls("actions/create-workflow-dispatch").len() == dispatches.len() {
            break;
        }
    }
    let state = lab.gh.state();
    let pr = &state.pulls[0];
    assert!(!pr.draft, "ready for review");
    let body = pr.body.clone().unwrap_or_default();
    for n in [2, 3, 4, 6] {
        assert!(body.contains(&format!("Closes #{n}\n")), "#{n}: {body}");
    }
    let done = lab.plan_on(branch, ".design/issues/1/plan.done.json");
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed"),
        "{done:#}"
    );
    assert!(lab.gh.calls("issues/update").is_empty(), "no issue edited");
    lab.gh.assert_clean();
}

/// Issue 23's Actions benchmark: `overlap: serial` against `overlap: merge` under
/// `schedule: rounds`, under act, on a small plan with hot files like `bench/merge.py`'s:
/// every task changes its own region of one of two shared files (clean merges), two of one
/// file also append to the file's one `shared=` line (a same-line conflict), one also leaves a
/// `TODO` note that breaks the other tasks' checks on its file (a clean merge that fails its
/// re-check). Prints, per overlap: makespan ÷ the lower bound (job start-ups counted), the
/// extra worker seconds spent on rebase attempts, the workflow runs (parts), and an oracle
/// check that the final tree holds every task's change exactly once; asserts only that both
/// complete. `bench/actions_merge.sh` runs it: `DAGEXEC_BENCH_JOB_START` seconds (5).
#[test]
#[ignore = "a benchmark of several minutes; bench/actions_merge.sh runs it"]
fn bench_actions_merge() {
    if no_act() {
        return;
    }
    let job_start: u64 = std::env::var("DAGEXEC_BENCH_JOB_START")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    // (hot file, kind, seconds) of each task; one round, 8 jobs at once.
    let kinds = [
        "region", "region", "conflict", "region", "conflict", "breaker", "region", "region",
    ];
    let n = kinds.len();
    let secs: Vec<u64> = (0..n as u64).map(|i| 2 + (i * 7919) % 5).collect();
    let hot = |i: usize| format!("hot/hot{}.txt", i % 2);
    let mut files = Vec::new();
    for h in 0..2 {
        let mut lines = vec!["shared=base".to_string()];
        for i in (h..n).step_by(2) {
            lines.extend([
                format!("# region {i}"),
                format!("slot-{i}=old"),
                "keep".into(),
                "keep".into(),
                "keep".into(),
            ]);
        }
        files.push((format!("hot/hot{h}.txt"), lines.join("\n") + "\n"));
    }
    let mut tasks = Vec::new();
    let mut cases = String::new();
    for (i, kind) in kinds.iter().enumerate() {
        let f = hot(i);
        let mut checks = vec![format!("grep -qx slot-{i}=new {f}")];
        if *kind != "breaker" {
            checks.push(format!("! grep -q =TODO {f}"));
        }
        if *kind == "conflict" {
            checks.push(format!("grep -Eq '^shared=.*[+]{i}([+]|$)' {f}"));
        }
        tasks.push(json!({
            "subject": format!("task {i} ({kind}) on {f}"),
            "description": "Edit the hot file.",
            "status": "pending",
            "blockedBy": [],
            "metadata": {"files": {"create": [], "modify": [f]}},
            "agent": {"role": "engineer", "acceptanceCriteria":
                checks.iter().map(|c| json!({"criterion": c, "check": c})).collect::<Vec<_>>()},
        }));
        cases.push_str(&format!("{i}) f={f}; kind={kind}; s={} ;;\n", secs[i]));
    }
    let worker = format!(
        r#"prompt=$(cat)
i=$DAGEXEC_TASK_INDEX
case "$i" in
{cases}esac
sleep "$s"
sed -i "s/^slot-$i=old$/slot-$i=new/" "$f"
sed -i 's/=TODO$/=DONE/' "$f"
if [ "$kind" = conflict ]; then sed -i "s/^shared=\(.*\)$/shared=\1+$i/" "$f"; fi
if [ "$kind" = breaker ] && ! grep -q "^note-$i=" "$f"; then
  case "$prompt" in *'## Rebase'*) n=DONE ;; *) n=TODO ;; esac
  sed -i "s/^slot-$i=new$/slot-$i=new\nnote-$i=$n/" "$f"
fi
echo "COMPLETED: task $i"
"#
    );
    let p = plan("Bench merge", tasks);
    // The bound: a job start-up and its sleep per task, the plan and finalize jobs' start-ups.
    let work: u64 = secs.iter().map(|s| s + job_start).sum();
    let critical = secs.iter().max().unwrap() + job_start;
    let bound = 2 * job_start + critical.max(work.div_ceil(8));
    let branch = "dagexec/bench-merge";
    let mut rows = Vec::new();
    for overlap in ["serial", "merge"] {
        let mut files = files.clone();
        files.push((
            ".design/plan.json".into(),
            serde_json::to_string_pretty(&p).unwrap(),
        ));
        files.push((
            ".design/dagexec.yml".into(),
            format!("overlap: {overlap}\n"),
        ));
        let mut lab = Lab::with_files(&files, &worker);
        literal_max_parallel(&lab, 8);
        lab.job_start = Some(job_start);
        // The first run only names the branch; the clock starts with the second.
        let (code, log) = lab.run(
            "refs/heads/main",
            &json!({"plan": ".design/plan.json", "branch": ""}),
        );
        assert_eq!(code, 0, "{log}");
        let t0 = std::time::Instant::now();
        let mut runs = 0;
        loop {
            let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
            if dispatches.len() <= runs {
                break;
            }
            let body = dispatches[runs].body.clone().unwrap();
            runs += 1;
            let (code, log) = lab.run(
                &format!("refs/heads/{}", body["ref"].as_str().unwrap()),
                &body["inputs"],
            );
            assert_eq!(code, 0, "{log}");
        }
        let makespan = t0.elapsed().as_secs_f64();
        let done = lab.plan_on(branch, ".design/plan.done.json");
        let records = done["progress"]["dagexecAttempts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let rebase_secs: f64 = records
            .iter()
            .filter(|r| r["rebase"] == true)
            .filter_map(|r| r["seconds"].as_f64())
            .sum::<f64>()
            .abs();
        let worker_secs: f64 = records.iter().filter_map(|r| r["seconds"].as_f64()).sum();
        let conflicts = records
            .iter()
            .filter(|r| r["outcome"] == "conflict")
            .count();
        let completed = done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["status"] == "completed")
            .count();
        let oracle = merge_oracle(&lab, branch, &kinds);
        rows.push(format!(
            "  {overlap:<7} {makespan:>6.0} s  ×{:.2} of the bound  {runs} workflow runs  rebases {rebase_secs:.1} s of {worker_secs:.1} worker s (+{:.0}%)  {conflicts} conflict(s)  {completed}/{n} completed  oracle {}",
            makespan / bound as f64,
            100.0 * rebase_secs / (worker_secs - rebase_secs).max(1.0),
            if oracle.is_empty() { "ok".to_string() } else { oracle },
        ));
    }
    println!(
        "\nActions merge: {n} tasks on 2 hot files (2–6 s each; 2 edit one shared line, 1 breaks the others' checks), job start-up {job_start} s, max-parallel 8, schedule: rounds"
    );
    println!(
        "  lower bound {bound:>6} s  (2 start-ups + max(critical path {critical} s, work {work} s / 8))"
    );
    for r in rows {
        println!("{r}");
    }
}

/// Every task's change exactly once in the hot files on `branch` (`bench/merge.py`'s oracle):
/// what is wrong, or nothing.
fn merge_oracle(lab: &Lab, branch: &str, kinds: &[&str]) -> String {
    let text: Vec<String> = (0..2)
        .map(|h| git(&lab.origin, &["show", &format!("{branch}:hot/hot{h}.txt")]))
        .collect();
    let mut wrong = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let t = &text[i % 2];
        let lines: Vec<&str> = t.lines().collect();
        let count = |l: &str| lines.iter().filter(|x| **x == l).count();
        if count(&format!("slot-{i}=new")) != 1 || count(&format!("slot-{i}=old")) != 0 {
            wrong.push(format!("task {i}: its slot"));
        }
        let shared = lines
            .iter()
            .find_map(|l| l.strip_prefix("shared="))
            .unwrap_or_default();
        let mine = shared.split('+').filter(|p| *p == i.to_string()).count();
        if mine != usize::from(*kind == "conflict") {
            wrong.push(format!("task {i}: the shared line {shared}"));
        }
        let notes = count(&format!("note-{i}=TODO")) + count(&format!("note-{i}=DONE"));
        if notes != usize::from(*kind == "breaker") {
            wrong.push(format!("task {i}: its note"));
        }
    }
    wrong.join("; ")
}

/// `overlap: merge` (`.design/dagexec.yml`) under act: two tasks that modify one file run in
/// round 1's one matrix; finalize lands the first and merges the second aside (no task code);
/// the next part's work job re-checks the merge without the write token, and only then does
/// finalize land its own copy. Both changes end on the branch exactly once, and the pull
/// request is ready.
#[test]
fn overlap_merge_runs_tasks_sharing_a_file_in_one_matrix_and_rechecks_the_merge() {
    if no_act() {
        return;
    }
    let modify = |subject: &str, check: &str, blocked_by: &[usize]| {
        let mut t = task(subject, &[], blocked_by, check);
        t["metadata"]["files"] = json!({"create": [], "modify": ["routes.txt"]});
        t
    };
    let mut after = task(
        "After",
        &["after.txt"],
        &[0, 1],
        "grep -q beta=new after.txt",
    );
    after["metadata"]["files"]["modify"] = json!([]);
    let p = plan(
        "Routes merged",
        vec![
            modify("Alpha route", "grep -qx alpha=new routes.txt", &[]),
            modify("Beta route", "grep -qx beta=new routes.txt", &[]),
            after,
        ],
    );
    let worker = r#"cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^alpha=old$/alpha=new/' routes.txt ;;
1) sed -i 's/^beta=old$/beta=new/' routes.txt ;;
2) grep '^beta=' routes.txt > after.txt ;;
esac
echo "COMPLETED: task $DAGEXEC_TASK_INDEX"
"#;
    let files = [
        (
            ".design/plan.json".to_string(),
            serde_json::to_string_pretty(&p).unwrap(),
        ),
        (
            ".design/dagexec.yml".to_string(),
            "overlap: merge\n".to_string(),
        ),
        (
            "routes.txt".to_string(),
            "# alpha\nalpha=old\nkeep\nkeep\nkeep\n# beta\nbeta=old\n".to_string(),
        ),
    ];
    let mut lab = Lab::with_files(&files, worker);
    let branch = "dagexec/routes-merged";
    let (mut git_ref, mut inputs) = (
        "refs/heads/main".to_string(),
        json!({"plan": ".design/plan.json", "branch": branch}),
    );
    let mut matrices = Vec::new();
    for run in 1..=8 {
        let (code, log) = lab.run(&git_ref, &inputs);
        assert_eq!(code, 0, "run {run}:\n{log}");
        matrices.push(matrix_of(&log));
        let dispatches = lab.gh.calls("actions/create-workflow-dispatch");
        if dispatches.len() < run {
            break;
        }
        let body = dispatches.last().unwrap().body.clone().unwrap();
        git_ref = format!("refs/heads/{}", body["ref"].as_str().unwrap());
        inputs = body["inputs"].clone();
    }
    // The run on the default branch only starts round 1 on the branch (no task code runs
    // there). Round 1: both tasks on routes.txt in one matrix (serial would run them in two
    // parts); then task 1's re-check part (the same attempt); then task 2.
    assert_eq!(
        matrices,
        vec![vec![], vec![(0, 1), (1, 1)], vec![(1, 1)], vec![(2, 1)]]
    );
    assert_eq!(
        git(&lab.origin, &["show", &format!("{branch}:routes.txt")]),
        "# alpha\nalpha=new\nkeep\nkeep\nkeep\n# beta\nbeta=new\n"
    );
    assert_eq!(
        git(&lab.origin, &["show", &format!("{branch}:after.txt")]),
        "beta=new\n"
    );
    let done = lab.plan_on(branch, ".design/plan.done.json");
    for t in done["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{t:#}");
    }
    let st = lab.gh.state();
    assert_eq!(
        st.check_runs.last().unwrap().conclusion.as_deref(),
        Some("success")
    );
    assert!(!st.pulls[0].draft);
    lab.gh.assert_clean();
}

/// Issue 35: what task code can reach in the work job — its user, its environment, every
/// process's environment it can read, and sudo.
const PROBING_WORKER: &str = r#"#!/bin/sh
{
  echo "user=$(id -un)"
  env
  for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done
  if sudo -n true 2>/dev/null; then echo "sudo=yes"; else echo "sudo=no"; fi
} > probe.txt
echo 'COMPLETED: probed'
"#;

#[test]
fn the_work_jobs_agent_runs_as_an_unprivileged_user_without_the_key_or_sudo() {
    if no_act() {
        return;
    }
    let p = plan("Probe", vec![task("Probe", &["probe.txt"], &[], "true")]);
    let mut lab = Lab::new(&p, PROBING_WORKER);
    // The provider's key is in the job's environment, as a workflow's `env:` from a secret
    // puts it there.
    lab.act_args.extend([
        "--env".to_string(),
        "ANTHROPIC_API_KEY=sk-ant-act-secret-4".to_string(),
    ]);
    let (git_ref, inputs) =
        lab.redirect(&json!({"plan": ".design/plan.json", "branch": "dagexec/probe"}));
    let (code, log) = lab.run(&git_ref, &inputs);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("dagexec's model gateway: http://127.0.0.1:"),
        "{log}"
    );
    let probe = git(&lab.origin, &["show", "dagexec/probe:probe.txt"]);
    assert!(probe.lines().any(|l| l == "user=dagexec-agent"), "{probe}");
    assert!(
        !probe.contains("sk-ant-act-secret-4"),
        "the provider key reached the agent:\n{probe}"
    );
    assert!(probe.contains("ANTHROPIC_API_KEY=dagexec-"), "{probe}");
    assert!(probe.lines().any(|l| l == "sudo=no"), "{probe}");
    lab.gh.assert_clean();
}

/// Issue 35, `egress`: what the agent's user reaches with the input on. Through the proxy
/// (the variables set): a listed registry (pypi.org: the only hosts this machine reaches
/// outside are the registries), an unlisted host, a listed name that resolves to this
/// machine; around it: a listener of this machine on its own non-loopback address, the
/// registry directly, and DNS. `@ADDR@` is that listener's address.
const EGRESS_WORKER: &str = r#"#!/bin/sh
{
  echo "user=$(id -un)"
  echo "proxy=$HTTPS_PROXY"
  echo "listed=$(curl -s -o /dev/null -w '%{http_connect}' --max-time 30 https://pypi.org/simple/)"
  echo "unlisted=$(curl -s -o /dev/null -w '%{http_connect}' --max-time 30 https://evil.example/)"
  echo "loopback-name=$(env -u NO_PROXY -u no_proxy curl -s -o /dev/null -w '%{http_connect}' --max-time 30 https://localhost/)"
  if curl -s --noproxy '*' -o /dev/null --max-time 10 http://@ADDR@/; then echo "direct=reached"; else echo "direct=refused"; fi
  if curl -s --noproxy '*' -o /dev/null --max-time 10 https://pypi.org/simple/; then echo "direct-registry=reached"; else echo "direct-registry=refused"; fi
  if getent hosts pypi.org >/dev/null; then echo "dns=resolved"; else echo "dns=refused"; fi
} > probe.txt
echo 'COMPLETED: probed'
"#;

/// The chains of dagexec's egress firewall on this machine (IPv4 and IPv6), as `-S` lists
/// them (`iptables: -N DAGEXEC-EGRESS-<pid>`, the rules, the jumps to them).
fn egress_chains() -> Vec<String> {
    ["iptables", "ip6tables"]
        .iter()
        .flat_map(|tool| {
            let out = Command::new(tool).args(["-w", "-S"]).output().unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains("DAGEXEC-EGRESS-"))
                .map(|l| format!("{tool}: {l}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The lines of [`egress_chains`] that name `chain` (`DAGEXEC-EGRESS-<pid>`): other jobs'
/// chains (tests side by side) are theirs.
fn chain_left(chain: &str) -> Vec<String> {
    egress_chains()
        .into_iter()
        .filter(|l| l.split_whitespace().any(|w| w == chain))
        .collect()
}

/// Whether the egress act tests can run here (root, a working iptables); when not, they are
/// skipped with a note, or fail under `DAGEXEC_REQUIRE_TOOLS=1`.
fn egress_usable() -> bool {
    let iptables = Command::new("iptables").args(["-w", "-S"]).output();
    let usable = running_as_root() && iptables.is_ok_and(|o| o.status.success());
    crate::common::tools::or_skip(
        usable.then(|| PathBuf::from("iptables")),
        "iptables, run as root,",
        "the egress act tests",
        "run the tests as root with iptables installed (Debian: apt-get install iptables)",
    )
    .is_some()
}

/// Turns the work step's `egress` input on with `hosts` in the lab's workflow, and prints the
/// job's summary after it.
fn with_egress(lab: &Lab, hosts: &str) {
    let wf = lab.repo.join(".github/workflows/dagexec.yml");
    let text = std::fs::read_to_string(&wf).unwrap();
    let text = text.replacen(
        "          command: work\n",
        &format!("          command: work\n          egress: {hosts}\n"),
        1,
    );
    let text = text.replacen(
        "          retention-days: 14\n",
        "          retention-days: 14\n      - if: always()\n        run: cat \"$GITHUB_STEP_SUMMARY\"\n",
        1,
    );
    std::fs::write(&wf, text).unwrap();
    git(&lab.repo, &["commit", "-qam", "egress on"]);
    git(&lab.repo, &["push", "-q", "origin", "main"]);
}

/// This machine's own address off loopback (the source of its default route), where a
/// listener the agent tries to reach directly waits.
fn own_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("203.0.113.1:9").ok()?;
    Some(s.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback())
}

#[test]
fn egress_lets_the_agent_reach_only_the_listed_hosts_through_the_proxy() {
    if no_act() || !egress_usable() {
        return;
    }
    let addr = own_address().expect("this machine has an address off loopback");
    let listener = std::net::TcpListener::bind((addr, 0)).unwrap();
    let at = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    // The listener answers this (root's) process: the agent's refusal below is the firewall's.
    std::net::TcpStream::connect(at).expect("the listener is reachable from here");
    let accepted = |l: &std::net::TcpListener| std::iter::from_fn(|| l.accept().ok()).count();
    assert_eq!(accepted(&listener), 1);
    let worker = EGRESS_WORKER.replace("@ADDR@", &at.to_string());
    let p = plan("Egress", vec![task("Probe", &["probe.txt"], &[], "true")]);
    let mut lab = Lab::new(&p, &worker);
    // A registry, and a name that resolves to this machine.
    with_egress(&lab, "pypi.org, localhost");
    let (git_ref, inputs) =
        lab.redirect(&json!({"plan": ".design/plan.json", "branch": "dagexec/egress"}));
    let (code, log) = lab.run(&git_ref, &inputs);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("dagexec's egress proxy: http://127.0.0.1:"),
        "{log}"
    );
    let chain = log
        .split("the firewall's chain ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_else(|| panic!("the job names no firewall chain:\n{log}"))
        .to_string();
    let probe = git(&lab.origin, &["show", "dagexec/egress:probe.txt"]);
    let has = |line: &str| probe.lines().any(|l| l == line);
    assert!(has("user=dagexec-agent"), "{probe}");
    assert!(probe.contains("proxy=http://127.0.0.1:"), "{probe}");
    assert!(has("listed=200"), "{probe}");
    assert!(has("unlisted=403"), "{probe}");
    assert!(has("loopback-name=403"), "{probe}");
    assert!(has("direct=refused"), "{probe}");
    assert!(has("direct-registry=refused"), "{probe}");
    assert!(has("dns=refused"), "{probe}");
    assert_eq!(
        accepted(&listener),
        0,
        "the agent reached {at} around the proxy"
    );
    // The summary lists what was blocked; the attempt's record carries it.
    assert!(log.contains("egress: restricted"), "{log}");
    assert!(
        log.contains("`evil.example` (not on the egress list)"),
        "{log}"
    );
    assert!(log.contains("`localhost` (it resolves to "), "{log}");
    let results: Vec<Value> = std::fs::read_dir(&lab.root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("artifacts-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .filter_map(|a| std::fs::read_to_string(a.path().join("result.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0]["egressBlocked"],
        json!(["evil.example", "localhost"])
    );
    // And the pull request's body names them, from the attempt's record in the plan.
    let st = lab.gh.state();
    let body = st.pulls[0].body.clone().unwrap_or_default();
    assert!(
        body.contains("**Egress blocked** (hosts outside the `egress` list the agent asked for): task 0 attempt 1: `evil.example`, `localhost`"),
        "{body}"
    );
    // Nothing of the firewall is left once the job ended.
    assert_eq!(chain_left(&chain), Vec::<String>::new());
    lab.gh.assert_clean();
}

/// Task code that runs until it is killed.
const SLEEPING_WORKER: &str = "#!/bin/sh\nexec sleep 3600\n";

/// The processes below `pid` (children first found, then theirs), from `/proc/*/stat`.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            all.push((p, ppid, comm));
        }
    }
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, pp, comm) in &all {
            if *pp == parent {
                found.push((*p, comm.clone()));
                parents.push(*p);
            }
        }
    }
    found
}

#[test]
fn egress_rules_a_killed_dagexec_left_are_removed_when_the_job_ends() {
    if no_act() || !egress_usable() {
        return;
    }
    let p = plan("Killed", vec![task("Sleep", &["never.txt"], &[], "true")]);
    let mut lab = Lab::new(&p, SLEEPING_WORKER);
    with_egress(&lab, "pypi.org");
    let (git_ref, inputs) =
        lab.redirect(&json!({"plan": ".design/plan.json", "branch": "dagexec/killed"}));
    let before = egress_chains();
    // As a cancelled job's or a runner's kill -9: once the job's chain is in and its task
    // code runs, its dagexec is killed (no chance to take the chain down), then the task code.
    let killer = std::thread::spawn(move || {
        for _ in 0..4800 {
            let chain = egress_chains().into_iter().find_map(|l| {
                let name = l.split("-N ").nth(1)?.trim().to_string();
                (!before.iter().any(|b| b.contains(&name))).then_some(name)
            });
            if let Some(chain) = chain {
                let pid: u32 = chain.trim_start_matches("DAGEXEC-EGRESS-").parse().unwrap();
                let below = descendants(pid);
                if below.iter().any(|(_, comm)| comm == "sleep") {
                    let kill = |p: u32| {
                        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
                    };
                    kill(pid);
                    for (p, _) in below {
                        kill(p);
                    }
                    return Some(chain);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        None
    });
    let (code, log) = lab.run(&git_ref, &inputs);
    let chain = killer
        .join()
        .unwrap()
        .unwrap_or_else(|| panic!("no egress chain with task code running appeared:\n{log}"));
    assert_ne!(code, 0, "the job whose dagexec was killed failed:\n{log}");
    assert!(
        log.contains(&format!("removed the egress chain {chain} (iptables)")),
        "{log}"
    );
    assert_eq!(chain_left(&chain), Vec::<String>::new(), "{log}");
}

/// Whether the tests run as root (`Uid:` real, effective, … in `/proc/self/status`).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    })
}

/// The runner's user of the sudo test, as on GitHub's hosted runners (`runner`): not root,
/// sudo without a password.
const SUDO_RUNNER: &str = "dagexec-runner";
/// The agent's user the action makes (`scripts/install-action.sh agent-user`).
const AGENT: &str = "dagexec-agent";
/// The sudo test's sudoers file for [`SUDO_RUNNER`].
const SUDOERS: &str = "/etc/sudoers.d/dagexec-test-runner";

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .args(["-u", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `id <flag> <name>`: a user's uid (`-u`) or group id (`-g`).
fn id_of(name: &str, flag: &str) -> u32 {
    let out = Command::new("id").args([flag, name]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// [`SUDO_RUNNER`], made for the sudo test, with its sudoers file (what sudo ran for it is
/// logged to a file of the lab) — and [`AGENT`] removed, so that the action makes it again
/// through sudo. Dropping it (also when the test fails) removes both and puts the agent's
/// user back as it was: there when it was there before, else not.
struct SudoRunner {
    uid: u32,
    gid: u32,
    agent_before: bool,
    /// Whether the test removed [`AGENT`] (not when a process of another job still ran as it).
    agent_removed: bool,
}

impl SudoRunner {
    fn make(sudo_log: &Path) -> SudoRunner {
        let mut r = SudoRunner {
            uid: 0,
            gid: 0,
            agent_before: user_exists(AGENT),
            agent_removed: false,
        };
        if user_exists(SUDO_RUNNER) {
            // Left by a test run that was killed.
            let _ = Command::new("userdel").arg(SUDO_RUNNER).status();
        }
        let made = Command::new("useradd")
            .args(["--user-group", "--shell", "/bin/sh", SUDO_RUNNER])
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "useradd {SUDO_RUNNER}: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        r.uid = id_of(SUDO_RUNNER, "-u");
        r.gid = id_of(SUDO_RUNNER, "-g");
        // Lines not wrapped, no syslog: the lab's log says what ran through sudo.
        let rules = format!(
            "{SUDO_RUNNER} ALL=(ALL) NOPASSWD: ALL\nDefaults:{SUDO_RUNNER} logfile=\"{}\", loglinelen=0, !syslog\n",
            sudo_log.display()
        );
        let part = PathBuf::from(format!("{SUDOERS}.part"));
        std::fs::write(&part, rules).unwrap();
        let checked = Command::new("visudo")
            .arg("-cf")
            .arg(&part)
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "visudo -cf: {}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o440)).unwrap();
        std::fs::rename(&part, SUDOERS).unwrap();
        if r.agent_before {
            let removed = Command::new("userdel")
                .args(["-r", AGENT])
                .output()
                .unwrap();
            r.agent_removed = removed.status.success();
            if !r.agent_removed {
                eprintln!(
                    "note: {AGENT} was not removed ({}): the sudo test checks its .gitconfig made through sudo, not useradd",
                    String::from_utf8_lossy(&removed.stderr).trim()
                );
            }
        } else {
            r.agent_removed = true;
        }
        r
    }
}

impl Drop for SudoRunner {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(SUDOERS);
        let _ = std::fs::remove_file(format!("{SUDOERS}.part"));
        if user_exists(SUDO_RUNNER)
            && !Command::new("userdel")
                .arg(SUDO_RUNNER)
                .status()
                .is_ok_and(|s| s.success())
        {
            eprintln!("warning: userdel {SUDO_RUNNER} failed");
        }
        let now = user_exists(AGENT);
        let put_back = if self.agent_before && !now {
            // Made as the action makes it.
            Command::new("bash")
                .arg(manifest().join("scripts/install-action.sh"))
                .arg("agent-user")
                .env("GITHUB_OUTPUT", "/dev/null")
                .status()
        } else if !self.agent_before && now {
            Command::new("userdel").args(["-r", AGENT]).status()
        } else {
            return;
        };
        if !put_back.is_ok_and(|s| s.success()) {
            eprintln!("warning: {AGENT} not put back as it was before the sudo test");
        }
    }
}

#[test]
fn through_sudo_as_on_githubs_runners_the_agent_runs_as_its_user_without_the_key_or_sudo() {
    if no_act() {
        return;
    }
    let usable = running_as_root()
        && Command::new("sudo")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
        && Command::new("visudo")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
    if crate::common::tools::or_skip(
        usable.then(|| PathBuf::from("sudo")),
        "sudo, with the tests run as root,",
        "the act test of the action's sudo path (GitHub's runners)",
        "run the tests as root with sudo installed (Debian: apt-get install sudo); the test makes a user with sudo and removes it",
    )
    .is_none()
    {
        return;
    }
    // No other lab's job runs as the agent's user while it is made again.
    let _alone = agent_user::alone();
    let p = plan("Probe", vec![task("Probe", &["probe.txt"], &[], "true")]);
    let mut lab = Lab::new(&p, PROBING_WORKER);
    lab.owns_agent_user = true;
    lab.act_args.extend([
        "--env".to_string(),
        "ANTHROPIC_API_KEY=sk-ant-act-secret-5".to_string(),
    ]);
    let sudo_log = lab.root.join("sudo.log");
    let runner = SudoRunner::make(&sudo_log);
    // The run on main (no task code) as root: it builds the action from source when no lab
    // did yet, with root's Rust toolchain.
    let (git_ref, inputs) =
        lab.redirect(&json!({"plan": ".design/plan.json", "branch": "dagexec/probe"}));
    // The round's run (its plan, work and finalize jobs) as the runner's user: the lab's
    // files are its to write, its HOME its own.
    let opened = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&lab.root)
        .status()
        .unwrap();
    assert!(opened.success());
    let home = lab.root.join(format!("home-{}", runner.uid));
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(runner.uid), Some(runner.gid)).unwrap();
    lab.as_user = Some((runner.uid, runner.gid));
    let (code, log) = lab.run(&git_ref, &inputs);
    assert_eq!(code, 0, "{log}");
    let probe = git(&lab.origin, &["show", "dagexec/probe:probe.txt"]);
    assert!(probe.lines().any(|l| l == "user=dagexec-agent"), "{probe}");
    assert!(
        !probe.contains("sk-ant-act-secret-5"),
        "the provider key reached the agent:\n{probe}"
    );
    assert!(probe.contains("ANTHROPIC_API_KEY=dagexec-"), "{probe}");
    assert!(probe.lines().any(|l| l == "sudo=no"), "{probe}");
    // What went through sudo, as the runner's user: the agent's user made, and dagexec
    // started as root the way action.yml starts it.
    let sudo = std::fs::read_to_string(&sudo_log).unwrap_or_default();
    let ran = |what: &str| {
        sudo.lines().any(|l| {
            l.contains(&format!(": {SUDO_RUNNER} :")) && l.contains("USER=root") && l.contains(what)
        })
    };
    if runner.agent_removed {
        assert!(
            ran(&format!(
                "useradd --create-home --user-group --shell /bin/sh {AGENT}"
            )),
            "{sudo}"
        );
    }
    assert!(ran(&format!("/home/{AGENT}/.gitconfig")), "{sudo}");
    assert!(ran(" action work"), "{sudo}");
    assert!(user_exists(AGENT));
    lab.gh.assert_clean();
}
