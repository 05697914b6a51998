//! What every end-to-end test file shares: the binary with a neutral environment.

// Each test binary uses a subset of these helpers.
#![allow(dead_code)]

pub mod agent_user;
pub mod fake_github;
pub mod lab;
pub mod list_merge;
pub mod local;
pub mod model_server;
pub mod tools;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// A command's stdout and stderr, one after the other.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

/// Fails when the repository at `dir` stores any object of 1 MB or more (a change refused
/// before staging never reaches git's object store).
pub fn assert_no_large_object(dir: &Path) {
    let sizes = git(
        dir,
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectsize)",
        ],
    );
    assert!(
        sizes.lines().all(|n| n.parse::<u64>().unwrap() < 1_000_000),
        "a large object was stored"
    );
}

/// A committed repository with `plan` as `.design/plan.json` and `files` beside it.
pub fn repo(plan: &serde_json::Value, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files.iter().copied());
    std::fs::create_dir_all(dir.path().join(".design")).unwrap();
    std::fs::write(
        dir.path().join(".design/plan.json"),
        serde_json::to_string_pretty(plan).unwrap(),
    )
    .unwrap();
    commit_new(dir.path());
    dir
}

/// Writes `files` (path relative to `root`, contents) under `root`, making their folders.
pub fn write_files<P: AsRef<Path>, C: AsRef<[u8]>>(
    root: &Path,
    files: impl IntoIterator<Item = (P, C)>,
) {
    for (rel, bytes) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// Makes `dir` a repository (identity `t`) whose one commit, `start`, holds all it has.
pub fn commit_new(dir: &Path) {
    git(dir, &["init", "-q"]);
    git(dir, &["config", "user.name", "t"]);
    git(dir, &["config", "user.email", "t@example.com"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "start"]);
}

/// Commits everything in `repo` as `message` and pushes it to `origin` as `main`.
pub fn commit_push(repo: &Path, message: &str) {
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", message]);
    git(repo, &["push", "-q", "origin", "main"]);
}

/// Runs `cmd` to its end; fails the test, showing its stderr, unless it succeeded.
pub fn succeed(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The fake GitHub API, started.
pub fn fake_github() -> fake_github::FakeGitHub {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fake_github::FakeGitHub::start())
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

/// A `git` in front of the real one, in `dir/bin`: `before` (shell, with the call's
/// arguments as `$*`) runs first and may end the call itself; otherwise the real git runs.
/// Returns `dir/bin`, to put first on a run's PATH.
pub fn git_in_front(dir: &Path, before: &str) -> PathBuf {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let bin = dir.join("bin");
    executable(
        &bin.join("git"),
        &format!("#!/bin/sh\n{before}\nexec '{}' \"$@\"\n", real.trim()),
    );
    bin
}

/// An executable file at `path` (its folder made) holding `script`.
pub fn executable(path: &Path, script: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stand-in `codex` that fails at once, in `dir/bin`: the PATH with that folder first (a
/// run checks that the worker's CLI is installed before it reads the CLI's configuration).
pub fn codex_on_path(dir: &Path) -> String {
    let bin = dir.join("bin");
    executable(&bin.join("codex"), "#!/bin/sh\nexit 1\n");
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}
