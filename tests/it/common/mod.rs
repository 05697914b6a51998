//! What every end-to-end test file shares: the binary with a neutral environment.

// Each test binary uses a subset of these helpers.
#![allow(dead_code)]

pub mod fake_github;
pub mod lab;
pub mod model_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

/// The crate's root directory.
pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary in `dir`, with the environment of a CI runner, dagexec's own settings and git's
/// repository variables stripped, so tests behave the same inside GitHub Actions, a git hook
/// or a laptop.
pub fn dagexec(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dagexec").expect("binary built");
    for (k, _) in std::env::vars() {
        if k.starts_with("GITHUB_")
            || k.starts_with("RUNNER_")
            || k.starts_with("ACTIONS_")
            || k == "CI"
            || k.starts_with("DAGEXEC_")
            || k.starts_with("GIT_")
        {
            cmd.env_remove(k);
        }
    }
    // Worker worktrees go to the cache: the build's temporary folder, not the developer's.
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache");
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("XDG_CACHE_HOME", cache);
    cmd
}

/// Runs git in `dir` with a test identity and no signing; fails the test if git fails.
/// Returns its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A committed repository with `plan` as `.design/plan.json` and `files` beside it.
pub fn repo(plan: &serde_json::Value, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::create_dir_all(dir.path().join(".design")).unwrap();
    std::fs::write(
        dir.path().join(".design/plan.json"),
        serde_json::to_string_pretty(plan).unwrap(),
    )
    .unwrap();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["config", "user.name", "t"]);
    git(dir.path(), &["config", "user.email", "t@example.com"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "start"]);
    dir
}

/// A worker script `body` in its own temp dir (outside the repository), and the command line
/// that runs it.
pub fn worker(body: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let cmd = format!("sh '{}'", path.display());
    (dir, cmd)
}
