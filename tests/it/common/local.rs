//! The local runs the end-to-end tests share: `dagexec run` (or any other command) in a
//! committed scratch repository, built with [`local`] and read back through [`Ran`]:
//!
//! ```ignore
//! let o = local(dir.path()).script("echo x > a.txt; echo 'COMPLETED: ok'").jobs(2).run();
//! assert_eq!(o.code(), Some(0), "{}", o.text());
//! assert_eq!(o.plan()["tasks"][0]["status"], "completed");
//! ```
//!
//! Each area's module keeps only its own defaults (a function returning a configured
//! [`Local`]) and its own workers and assertions.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{dagexec, worker};

/// `dagexec run` in the repository `dir`, with nothing set yet: no worker, dagexec's own
/// defaults for `--jobs` and `--timeout`.
pub fn local(dir: &Path) -> Local {
    Local {
        dir: dir.to_path_buf(),
        global: Vec::new(),
        worker: None,
        jobs: None,
        timeout: None,
        args: Vec::new(),
        env: Vec::new(),
        unset: Vec::new(),
        scripts: Vec::new(),
    }
}

/// `dagexec <args>` in `dir` (any command, not only `run`), run to its end.
pub fn exec(dir: &Path, args: &[&str]) -> Ran {
    Ran::of(dir, dagexec(dir).args(args))
}

/// A local run, before it runs. Runs as `dagexec [global] run [--worker W] [--jobs N]
/// [--timeout T] [args]`, each flag only when it was set.
pub struct Local {
    dir: PathBuf,
    global: Vec<OsString>,
    worker: Option<String>,
    jobs: Option<u32>,
    timeout: Option<String>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    unset: Vec<OsString>,
    /// The folders of the worker scripts made by [`Local::script`] (removed with it).
    scripts: Vec<tempfile::TempDir>,
}

impl Local {
    /// The worker command (`--worker`).
    pub fn worker(mut self, cmd: &str) -> Self {
        self.worker = Some(cmd.to_string());
        self
    }

    /// A worker script `body` (after `#!/bin/sh`), kept outside the repository while this
    /// builder lives; it becomes the worker command.
    pub fn script(mut self, body: &str) -> Self {
        let (dir, cmd) = worker(body);
        self.scripts.push(dir);
        self.worker(&cmd)
    }

    /// `--jobs n`.
    pub fn jobs(mut self, n: u32) -> Self {
        self.jobs = Some(n);
        self
    }

    /// `--timeout t`.
    pub fn timeout(mut self, t: &str) -> Self {
        self.timeout = Some(t.to_string());
        self
    }

    /// More arguments of `run`, after the others.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Global flags before `run` (`--plan FILE`).
    pub fn global(mut self, flags: &[&str]) -> Self {
        self.global.extend(flags.iter().map(OsString::from));
        self
    }

    /// An environment variable of the run (and so of its workers).
    pub fn env(mut self, key: &str, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// An environment variable the run does not get (from this process's environment).
    pub fn env_remove(mut self, key: &str) -> Self {
        self.unset.push(key.into());
        self
    }

    /// The command, unstarted (to spawn it, or to set more on it).
    pub fn command(&self) -> Command {
        let mut cmd = dagexec(&self.dir);
        cmd.args(&self.global).arg("run");
        if let Some(w) = &self.worker {
            cmd.args(["--worker", w]);
        }
        if let Some(n) = self.jobs {
            cmd.args(["--jobs", &n.to_string()]);
        }
        if let Some(t) = &self.timeout {
            cmd.args(["--timeout", t]);
        }
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for k in &self.unset {
            cmd.env_remove(k);
        }
        cmd
    }

    /// Runs it to its end (it may be run again: each call is a new run).
    pub fn run(&self) -> Ran {
        Ran::of(&self.dir, &mut self.command())
    }

    /// Runs it with no stdin, killing it (and failing the test) after `limit`: a run that
    /// never ends fails instead of hanging. Its stdout and stderr, interleaved as written,
    /// are [`Ran::text`] (and its stdout).
    pub fn run_within(&self, limit: Duration) -> Ran {
        bounded(&self.dir, self.command(), limit)
    }
}

/// Runs `cmd` (in `dir`) as [`Local::run_within`] does.
pub fn bounded(dir: &Path, mut cmd: Command, limit: Duration) -> Ran {
    let logs = tempfile::tempdir().unwrap();
    let out_path = logs.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let err = out.try_clone().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "dagexec did not finish within {limit:?}:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read(&out_path).unwrap();
    Ran {
        out: Output {
            status,
            stdout,
            stderr: Vec::new(),
        },
        dir: dir.to_path_buf(),
    }
}

/// What a command that ran in `dir` left, from its output (a run the test started itself).
pub fn ran(dir: &Path, out: Output) -> Ran {
    Ran {
        out,
        dir: dir.to_path_buf(),
    }
}

/// What a command left: its output (deref to [`Output`]) and its repository.
pub struct Ran {
    out: Output,
    dir: PathBuf,
}

impl std::ops::Deref for Ran {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.out
    }
}

impl Ran {
    /// Runs `cmd` (in `dir`) to its end.
    pub fn of(dir: &Path, cmd: &mut Command) -> Ran {
        Ran {
            out: cmd.output().expect("dagexec runs"),
            dir: dir.to_path_buf(),
        }
    }

    /// The exit code (`None` when a signal ended it).
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).to_string()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).to_string()
    }

    /// Its stdout and stderr, one after the other.
    pub fn text(&self) -> String {
        super::text(&self.out)
    }

    /// Its text ([`Ran::text`]), after failing the test, showing it, unless it exited with
    /// `code`.
    pub fn expect_code(&self, code: i32) -> String {
        let text = self.text();
        assert_eq!(self.code(), Some(code), "{text}");
        text
    }

    /// The repository's `.design/plan.json` (the test fails when there is none).
    pub fn plan(&self) -> Value {
        plan_json(&self.dir)
    }

    /// `.design/plan.json`, or once archived `.design/plan.done.json`.
    pub fn final_plan(&self) -> Value {
        plan_or_done(&self.dir)
    }
}

/// `dir`'s `.design/plan.json` (the test fails when there is none).
pub fn plan_json(dir: &Path) -> Value {
    let path = dir.join(".design/plan.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `dir`'s `.design/plan.json`, or once the run archived it `.design/plan.done.json`.
pub fn plan_or_done(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".design/plan.json"))
        .or_else(|_| std::fs::read_to_string(dir.join(".design/plan.done.json")))
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `dir`'s archived plan, `.design/plan.done.json` (the test fails when there is none).
pub fn done_plan(dir: &Path) -> Value {
    let path = dir.join(".design/plan.done.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Whether every task of `plan` has the status `status`.
pub fn all_tasks_are(plan: &Value, status: &str) -> bool {
    plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["status"] == status)
}

/// A schema 2 plan for `goal` with one independent task per file of `creates`, each
/// creating it (`make <file>`, role engineer).
pub fn one_file_each(goal: &str, creates: &[&str]) -> Value {
    let tasks: Vec<Value> = creates
        .iter()
        .map(|f| {
            json!({
                "subject": format!("make {f}"), "status": "pending", "blockedBy": [],
                "metadata": {"files": {"create": [f], "modify": []}},
                "agent": {"role": "engineer"}
            })
        })
        .collect();
    json!({"schemaVersion": 2, "goal": goal, "tasks": tasks})
}

/// (subject, blockedBy, files to create, files to modify)
pub type TaskSpec<'a> = (&'a str, &'a [usize], &'a [&'a str], &'a [&'a str]);

/// A schema 2 plan (goal `test`) of pending tasks with role engineer, one per spec.
pub fn simple_plan(tasks: &[TaskSpec]) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(subject, deps, create, modify)| {
            json!({
                "subject": subject, "status": "pending", "blockedBy": deps,
                "metadata": {"files": {"create": create, "modify": modify}},
                "agent": {"role": "engineer"}
            })
        })
        .collect();
    json!({"schemaVersion": 2, "goal": "test", "tasks": tasks})
}
