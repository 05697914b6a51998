//! `dagexec init` as a user runs it: without a terminal it takes the default worker and says
//! so, writes a workflow that installs the worker and checks its secret, pins the action by
//! commit, and prints the next three commands.

#[allow(dead_code)] // each test file uses a part of it
mod common;

use std::process::Stdio;

use common::{dagexec, git};

#[test]
fn init_without_a_terminal_uses_the_default_worker_and_says_what_to_run_next() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    let out = dagexec(dir.path())
        .arg("init")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("Not a terminal"), "{stderr}");
    assert!(stderr.contains("--worker"), "{stderr}");
    for line in [
        "  1. gh secret set ANTHROPIC_API_KEY",
        "  2. git add .github/workflows/dagexec.yml && git commit",
        "  3. gh workflow run dagexec.yml",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
    let wf = std::fs::read_to_string(dir.path().join(".github/workflows/dagexec.yml")).unwrap();
    assert!(wf.contains("npm install --global --no-audit --no-fund @anthropic-ai/claude-code@"));
    assert!(wf.contains("- name: Check the ANTHROPIC_API_KEY secret"));
    // Pinned by a full commit (this test binary is built from a git checkout).
    let uses: Vec<&str> = wf
        .lines()
        .filter_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix("uses: org/dagexec@")
        })
        .collect();
    assert_eq!(uses.len(), 4, "{wf}");
    for u in uses {
        let sha = u.split(' ').next().unwrap();
        assert!(
            sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{u}"
        );
        assert!(u.contains(" # "), "the ref is followed by what it is: {u}");
    }
}

#[test]
fn init_names_the_worker_and_its_secret_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dagexec(dir.path())
        .args(["init", "--stdout", "--worker", "codex"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let wf = String::from_utf8_lossy(&out.stdout);
    assert!(wf.contains("@openai/codex@"), "{wf}");
    assert!(
        wf.contains("OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}"),
        "{wf}"
    );
    assert!(wf.contains("worker: 'codex exec --full-auto -'"), "{wf}");

    let out = dagexec(dir.path())
        .args([
            "init",
            "--stdout",
            "--worker",
            "claude",
            "--secret",
            "GITHUB_TOKEN",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--secret \"GITHUB_TOKEN\""), "{err}");
}
