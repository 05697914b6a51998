//! What every end-to-end test file shares: the binary with a neutral environment.

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
    cmd.current_dir(dir).env("NO_COLOR", "1");
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
