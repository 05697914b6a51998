//! The job-by-job lab the Action's tests share: a repository committed and pushed to a bare
//! remote (`origin.git`, branch `main`), the fake GitHub API, and the Action's jobs
//! (`dagexec action plan|work|finalize|…`) run as real processes in the GitHub context a
//! workflow run gives them — each in a fresh clone, as `actions/checkout` leaves one, or in
//! the seed clone for tests that play one job at a time.
//!
//! Built with [`lab`]: `lab().plan("Goal", tasks).worker(SCRIPT).start()`; each area's module
//! adds only what is its own (the conductor and its task runs, the reviewer, comments).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::fake_github::FakeGitHub;
use super::{commit_push, dagexec, fake_github, git, manifest, write_files};

/// A pending task of a schema 2 plan creating `creates`, after `blocked_by`.
pub fn task(subject: &str, creates: &[&str], blocked_by: &[usize]) -> Value {
    edit(subject, creates, &[], blocked_by)
}

/// A pending task creating `creates` and modifying `modifies`, after `blocked_by`.
pub fn edit(subject: &str, creates: &[&str], modifies: &[&str], blocked_by: &[usize]) -> Value {
    json!({
        "subject": subject, "description": subject, "status": "pending", "blockedBy": blocked_by,
        "metadata": {"files": {"create": creates, "modify": modifies}}
    })
}

/// The person GitHub's example comment event is by (`Codertocat`) comments `body` on pull
/// request `pr` of `repository` on `gh`, and the `issue_comment.created` event GitHub sends
/// for it: its example payload, made this comment (id, body, repository, pull request).
pub fn pr_comment_event(gh: &FakeGitHub, repository: &str, pr: u64, body: &str) -> Value {
    let path = manifest().join("tests/fixtures/github/webhooks/issue_comment.created.0.json");
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let user = p["comment"]["user"]["login"].as_str().unwrap().to_string();
    let id = gh.add_comment(repository, pr, &user, body);
    let api = format!("https://api.github.com/repos/{repository}");
    p["repository"]["full_name"] = json!(repository);
    p["issue"]["number"] = json!(pr);
    p["issue"]["url"] = json!(format!("{api}/issues/{pr}"));
    p["issue"]["pull_request"] = json!({"url": format!("{api}/pulls/{pr}")});
    p["comment"]["id"] = json!(id);
    p["comment"]["body"] = json!(body);
    p["comment"]["issue_url"] = json!(format!("{api}/issues/{pr}"));
    p["comment"]["url"] = json!(format!("{api}/issues/comments/{id}"));
    p["comment"]["html_url"] = json!(format!(
        "https://github.com/{repository}/pull/{pr}#issuecomment-{id}"
    ));
    p
}

/// The body of dagexec's marker comment for the steering comment `id` (empty when there is
/// none).
pub fn steer_marker(gh: &FakeGitHub, id: u64) -> String {
    gh.state()
        .comments
        .iter()
        .find(|c| c.body.starts_with(&format!("<!-- dagexec:steer:{id} -->")))
        .map(|c| c.body.clone())
        .unwrap_or_default()
}

/// What a lab is made of, before it starts.
pub struct LabBuilder {
    plan: Option<Value>,
    files: Vec<(String, Vec<u8>)>,
    repository: String,
    branch: String,
    ref_name: String,
    env: Vec<(String, String)>,
}

/// A lab with no plan, no worker and no files yet; `acme/widgets`, branch `dagexec/lab`.
pub fn lab() -> LabBuilder {
    LabBuilder {
        plan: None,
        files: Vec::new(),
        repository: "acme/widgets".into(),
        branch: "dagexec/lab".into(),
        ref_name: "main".into(),
        env: Vec::new(),
    }
}

impl LabBuilder {
    /// `.design/plan.json`: a schema 2 plan for `goal` with `tasks`, none completed.
    pub fn plan(mut self, goal: &str, tasks: Vec<Value>) -> Self {
        self.plan = Some(json!({
            "schemaVersion": 2, "goal": goal, "context": {},
            "progress": {"completedTasks": []}, "tasks": tasks
        }));
        self
    }

    /// Sets the plan's `progress` (the records of earlier attempts, say); after [`Self::plan`].
    pub fn progress(mut self, progress: Value) -> Self {
        if let Some(plan) = &mut self.plan {
            plan["progress"] = progress;
        }
        self
    }

    /// The worker script, committed as `worker.sh` (jobs run it as `sh ./worker.sh`).
    pub fn worker(self, script: &str) -> Self {
        self.file("worker.sh", script)
    }

    /// A file of the repository (parent folders made).
    pub fn file(mut self, rel: &str, text: &str) -> Self {
        self.files.push((rel.into(), text.as_bytes().to_vec()));
        self
    }

    /// `fixture` (a folder under `tests/fixtures`), its files copied into folder `rel`.
    pub fn fixture(mut self, rel: &str, fixture: &str) -> Self {
        let from = manifest().join("tests/fixtures").join(fixture);
        let mut names: Vec<_> = std::fs::read_dir(&from)
            .unwrap_or_else(|e| panic!("{}: {e}", from.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        for name in names {
            let bytes = std::fs::read(from.join(&name)).unwrap();
            self.files.push((format!("{rel}/{name}"), bytes));
        }
        self
    }

    /// The repository's `owner/name` (`GITHUB_REPOSITORY`).
    pub fn repository(mut self, name: &str) -> Self {
        self.repository = name.into();
        self
    }

    /// The execution branch (`DAGEXEC_BRANCH` of every runner job).
    pub fn branch(mut self, name: &str) -> Self {
        self.branch = name.into();
        self
    }

    /// The ref the workflow runs on (`GITHUB_REF_NAME` of every runner job; `main` unless set).
    pub fn ref_name(mut self, name: &str) -> Self {
        self.ref_name = name.into();
        self
    }

    /// An environment variable of every runner job (an input, or something the worker reads).
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        let value = value.as_ref().to_string_lossy().to_string();
        self.env.push((key.into(), value));
        self
    }

    /// Commits it all in the seed clone, pushes it as `main` and starts the fake API.
    pub fn start(self) -> Lab {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("origin.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(
            &repo,
            &["remote", "add", "origin", origin.to_str().unwrap()],
        );
        if let Some(plan) = &self.plan {
            std::fs::create_dir_all(repo.join(".design")).unwrap();
            std::fs::write(
                repo.join(".design/plan.json"),
                serde_json::to_string_pretty(plan).unwrap(),
            )
            .unwrap();
        }
        write_files(&repo, self.files);
        commit_push(&repo, "plan");
        let gh = fake_github();
        gh.resolve_refs_in(&origin);
        Lab {
            tmp,
            origin,
            repo,
            gh,
            repository: self.repository,
            branch: self.branch,
            ref_name: self.ref_name,
            env: self.env,
            clones: AtomicUsize::new(0),
        }
    }
}

/// A started lab.
pub struct Lab {
    /// Everything lives under it (the remote, clones, artifacts, logs).
    pub tmp: tempfile::TempDir,
    /// The bare remote the jobs fetch from and push to.
    pub origin: PathBuf,
    /// The seed clone (remote `origin`), checked out at `main`.
    pub repo: PathBuf,
    pub gh: FakeGitHub,
    pub repository: String,
    pub branch: String,
    ref_name: String,
    env: Vec<(String, String)>,
    clones: AtomicUsize,
}

/// A job's stdout and stderr, one after the other.
pub use super::text;

/// A job's outputs as it prints them outside a runner (`output key=value` lines).
pub fn printed_outputs(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("output "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A `GITHUB_OUTPUT` file's entries in order (`key<<DELIM` … `DELIM`; a bare line is a key
/// with an empty value).
pub fn output_file(text: &str) -> Vec<(String, String)> {
    let mut outputs = Vec::new();
    let mut lines = text.lines();
    while let Some(head) = lines.next() {
        match head.split_once("<<") {
            Some((key, delim)) => {
                let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delim).collect();
                outputs.push((key.to_string(), value.join("\n")));
            }
            None => outputs.push((head.to_string(), String::new())),
        }
    }
    outputs
}

/// The plan job's outputs and its log.
pub struct Planned {
    pub outputs: BTreeMap<String, String>,
    pub log: String,
}

impl Planned {
    /// It planned a matrix of work jobs.
    pub fn has_work(&self) -> bool {
        self.outputs.get("has-work").map(String::as_str) == Some("true")
    }

    /// The matrix's entries: (task, attempt).
    pub fn entries(&self) -> Vec<(u64, u64)> {
        let matrix: Value = serde_json::from_str(&self.outputs["matrix"]).unwrap();
        matrix["include"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["task"].as_u64().unwrap(), e["attempt"].as_u64().unwrap()))
            .collect()
    }
}

/// One workflow run of the rounds workflow.
pub struct Round {
    pub planned: Planned,
    /// Finalize's success and log (`None` when the plan job planned no work).
    pub finalized: Option<(bool, String)>,
}

impl Lab {
    /// Sets an environment variable of every later runner job.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
    }

    /// From now on the jobs' `git` calls are logged, one line each as the shell `echo` of
    /// `line` says it (`$*`: the call's arguments, `$PWD`: where it runs), into the file
    /// returned.
    pub fn log_git_calls(&mut self, line: &str) -> std::path::PathBuf {
        let seen = self.tmp.path().join("git-calls");
        let front = crate::common::git_in_front(
            self.tmp.path(),
            &format!("echo \"{line}\" >> '{}'", seen.display()),
        );
        let path = format!("{}:{}", front.display(), std::env::var("PATH").unwrap());
        self.set_env("PATH", &path);
        seen
    }

    /// Rewrites the seed clone's `.design/plan.json` with `edit` (left uncommitted).
    pub fn edit_plan(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.repo.join(".design/plan.json");
        let mut plan: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut plan);
        std::fs::write(&path, serde_json::to_string_pretty(&plan).unwrap()).unwrap();
    }

    /// A fresh clone of the remote at `rev`, as `actions/checkout` leaves one.
    pub fn checkout(&self, rev: &str) -> PathBuf {
        let n = self.clones.fetch_add(1, Ordering::SeqCst) + 1;
        let dir = self.tmp.path().join(format!("job-{n}"));
        git(
            self.tmp.path(),
            &[
                "clone",
                "-q",
                self.origin.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        git(&dir, &["checkout", "-q", "--detach", rev]);
        dir
    }

    /// `dagexec` in `dir` with the GitHub context a step gets: run `run_id` of the
    /// repository, the fake API, the ref `main`, a token.
    pub fn context(&self, dir: &Path, run_id: impl ToString) -> Command {
        let mut cmd = dagexec(dir);
        cmd.env("GITHUB_RUN_ID", run_id.to_string())
            .env("GITHUB_REPOSITORY", &self.repository)
            .env("GITHUB_API_URL", self.gh.url())
            .env("GITHUB_REF_NAME", "main")
            .env("DAGEXEC_TOKEN", "ghs_token");
        cmd
    }

    /// `dagexec` in `dir` as a job of the workflow run `run_id` on a runner: the context,
    /// `GITHUB_ACTIONS`, the dispatch event, the lab's ref, branch and environment.
    pub fn job(&self, dir: &Path, run_id: impl ToString) -> Command {
        let mut cmd = self.context(dir, run_id);
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_RUN_ATTEMPT", "1")
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("GITHUB_REF_NAME", &self.ref_name)
            .env("GITHUB_EVENT_NAME", "workflow_dispatch")
            .env("DAGEXEC_BRANCH", &self.branch);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The plan job of run `run_id` in a fresh clone of `main`, with `env` besides; fails the
    /// test if it fails.
    pub fn plan_job(&self, run_id: u64, env: &[(&str, &str)]) -> Planned {
        let dir = self.checkout("main");
        let mut cmd = self.job(&dir, run_id);
        cmd.args(["action", "plan"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let log = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "plan job: {}", text(&out));
        Planned {
            outputs: printed_outputs(&log),
            log,
        }
    }

    /// A work job of run `run_id`: attempt `attempt` of `task` in round `round`, in a fresh
    /// clone of `base`, its files left in `artifacts`. It gets no token (the workflow gives
    /// it none). Fails the test if it fails.
    pub fn work_job(
        &self,
        run_id: u64,
        (task, attempt): (u64, u64),
        round: &str,
        base: &str,
        artifacts: &Path,
    ) {
        let dir = self.checkout(base);
        let out = self
            .job(&dir, run_id)
            .env_remove("DAGEXEC_TOKEN")
            .args(["action", "work"])
            .env("DAGEXEC_TASK", task.to_string())
            .env("DAGEXEC_ATTEMPT", attempt.to_string())
            .env("DAGEXEC_ROUND", round)
            .env("DAGEXEC_BASE", base)
            .env("DAGEXEC_WORKER", "sh ./worker.sh")
            .env("DAGEXEC_ARTIFACTS", artifacts)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "work job {task}/{attempt}: {}",
            text(&out)
        );
    }

    /// `user` (with write access) comments `body` on pull request `pr`, and the `comment` job
    /// of workflow run `run_id` handles the event; then, with `steer`, the `steer` job too
    /// (without: GitHub cancelled it). The comment's id and the jobs' output.
    pub fn comment_jobs(&self, run_id: u64, pr: u64, body: &str, steer: bool) -> (u64, String) {
        let p = pr_comment_event(&self.gh, &self.repository, pr, body);
        let user = p["comment"]["user"]["login"].as_str().unwrap();
        self.gh.set_permission(user, "write");
        let id = p["comment"]["id"].as_u64().unwrap();
        let event = self.tmp.path().join(format!("comment-{id}.json"));
        std::fs::write(&event, p.to_string()).unwrap();
        self.comment_job_again(run_id, id, steer)
    }

    /// The jobs of [`Lab::comment_jobs`] for comment `id`: the `comment` job unless it ran
    /// already, then with `steer` the `steer` job (as it runs once no round of the branch
    /// does).
    pub fn comment_job_again(&self, run_id: u64, id: u64, steer: bool) -> (u64, String) {
        let event = self.tmp.path().join(format!("comment-{id}.json"));
        let outputs = self.tmp.path().join(format!("comment-{id}.outputs"));
        let job = |command: &str| {
            let dir = self.checkout("main");
            let out = self
                .context(&dir, run_id)
                .args(["action", command])
                .env("GITHUB_ACTIONS", "true")
                .env("GITHUB_EVENT_NAME", "issue_comment")
                .env("GITHUB_EVENT_PATH", &event)
                .env("GITHUB_OUTPUT", &outputs)
                .output()
                .unwrap();
            let text = text(&out);
            assert!(out.status.success(), "{command}: {text}");
            text
        };
        let mut log = if outputs.exists() {
            String::new()
        } else {
            job("comment")
        };
        if steer {
            log.push_str(&job("steer"));
        }
        (id, log)
    }

    /// One workflow run of the rounds workflow: the plan job, the matrix's work jobs, then
    /// finalize (when there was work).
    pub fn round(&self, run_id: u64) -> Round {
        let planned = self.plan_job(run_id, &[]);
        if !planned.has_work() {
            return Round {
                planned,
                finalized: None,
            };
        }
        let o = &planned.outputs;
        let base = o["base"].clone();
        let artifacts = self.tmp.path().join(format!("artifacts-{run_id}"));
        for (t, a) in planned.entries() {
            let name = format!("dagexec-{run_id}-1-task-{t}-attempt-{a}");
            self.work_job(run_id, (t, a), &o["round"], &base, &artifacts.join(name));
        }
        let finalized = Some(self.finalize_job(run_id, &planned, &artifacts));
        Round { planned, finalized }
    }

    /// One workflow run, as the rounds tests read it: the plan job's outputs, whether
    /// finalize succeeded, and its log (the plan job's, when it planned no work).
    pub fn round_result(&self, run_id: u64) -> (BTreeMap<String, String>, bool, String) {
        let Round { planned, finalized } = self.round(run_id);
        let (ok, log) = finalized.unwrap_or((true, planned.log));
        (planned.outputs, ok, log)
    }

    /// Workflow runs 101, 102, … until one does not dispatch another (at most `limit`): the
    /// last finalize's success and log.
    pub fn run_rounds(&self, limit: u64) -> (bool, String) {
        for run_id in 1..=limit {
            let dispatched = self.dispatches();
            let (outputs, ok, log) = self.round_result(100 + run_id);
            let again = self.dispatches() > dispatched;
            if !ok || !again || outputs.get("has-work").map(String::as_str) != Some("true") {
                return (ok, log);
            }
        }
        panic!("more than {limit} rounds");
    }

    /// Run `run_id`'s round with its finalize killed at `failpoint` (`NAME:ROUND`, as
    /// `DAGEXEC_FAILPOINT` takes it): the round, and finalize's output.
    pub fn round_killed_at(&mut self, failpoint: &str, run_id: u64) -> (Round, String) {
        self.set_env("DAGEXEC_FAILPOINT", failpoint);
        let round = self.round(run_id);
        let (ok, log) = round.finalized.clone().unwrap();
        assert!(!ok, "killed by its failpoint:\n{log}");
        (round, log)
    }

    /// "Re-run failed jobs" of run `run_id`'s finalize (attempt 2, no failpoint) after
    /// `planned`, with the artifacts its workers uploaded: it succeeds and carries on from its
    /// earlier attempt. Its output.
    pub fn rerun_finalize(&mut self, run_id: u64, planned: &Planned) -> String {
        self.set_env("DAGEXEC_FAILPOINT", "");
        self.set_env("GITHUB_RUN_ATTEMPT", "2");
        let artifacts = self.tmp.path().join(format!("artifacts-{run_id}"));
        let (ok, text) = self.finalize_job(run_id, planned, &artifacts);
        assert!(ok, "{text}");
        assert!(text.contains("earlier attempt of this job"), "{text}");
        text
    }

    /// The finalize job of run `run_id` after `planned` (the template runs it after every
    /// plan job that did not hand over to a conductor), the artifacts in `artifacts`:
    /// whether it succeeded, and its output.
    pub fn finalize_job(&self, run_id: u64, planned: &Planned, artifacts: &Path) -> (bool, String) {
        let o = &planned.outputs;
        let base = o["base"].clone();
        let dir = self.checkout(&base);
        git(
            &dir,
            &[
                "fetch",
                "-q",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
            ],
        );
        let out = self
            .job(&dir, run_id)
            .args(["action", "finalize"])
            .env("DAGEXEC_MATRIX", &o["matrix"])
            .env("DAGEXEC_BASE", &base)
            .env("DAGEXEC_ROUND", &o["round"])
            .env("DAGEXEC_CONCLUSION", &o["conclusion"])
            .env(
                "DAGEXEC_MESSAGE",
                o.get("message").cloned().unwrap_or_default(),
            )
            .env("DAGEXEC_ARTIFACTS", artifacts)
            .output()
            .unwrap();
        (out.status.success(), text(&out))
    }

    /// How many dispatches the fake has seen (a finalize that starts the next run adds one).
    pub fn dispatches(&self) -> usize {
        self.gh.calls("actions/create-workflow-dispatch").len()
    }

    /// The execution branch's commit subjects, newest first (none before it exists).
    pub fn branch_log(&self) -> Vec<String> {
        let out = Command::new("git")
            .args(["log", "--format=%s", &self.branch, "--"])
            .current_dir(&self.origin)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `path` on the execution branch.
    pub fn branch_file(&self, path: &str) -> String {
        git(&self.origin, &["show", &format!("{}:{path}", self.branch)])
    }

    /// The plan on the execution branch (once completed, its archived copy).
    pub fn branch_plan(&self) -> Value {
        let files = git(
            &self.origin,
            &["ls-tree", "-r", "--name-only", &self.branch],
        );
        let path = if files.lines().any(|f| f == ".design/plan.json") {
            ".design/plan.json"
        } else {
            files
                .lines()
                .find(|f| f.starts_with(".design/") && f.ends_with(".json"))
                .unwrap_or_else(|| panic!("no plan on the branch: {files}"))
        };
        serde_json::from_str(&self.branch_file(path)).unwrap()
    }

    /// The commit the next run starts from: the execution branch's tip, or `main` before it
    /// exists.
    pub fn next_base(&self) -> String {
        let refs = git(&self.origin, &["branch", "--list", &self.branch]);
        let r = if refs.trim().is_empty() {
            "main"
        } else {
            self.branch.as_str()
        };
        git(&self.origin, &["rev-parse", r]).trim().to_string()
    }
}
