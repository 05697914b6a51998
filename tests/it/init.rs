//! `dagexec init` as a user runs it: without a terminal it takes the default worker and says
//! so, writes a workflow that installs the worker and checks its secret, pins the action by
//! commit, and prints the next three commands.

use crate::common;
use crate::common::local::exec;

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
    // Machine output (spend recorded, max-cost counts) and the plan's model when it names one.
    assert!(
        wf.contains("worker: 'claude -p --output-format json --permission-mode acceptEdits ${DAGEXEC_MODEL:+--model \"$DAGEXEC_MODEL\"}'"),
        "{wf}"
    );
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
    assert_eq!(
        uses.len(),
        7,
        "comment, steer, plan, work, task, conduct, finalize:\n{wf}"
    );
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
    let out = exec(dir.path(), &["init", "--stdout", "--worker", "codex"]);
    assert!(out.status.success());
    let wf = String::from_utf8_lossy(&out.stdout);
    assert!(wf.contains("@openai/codex@"), "{wf}");
    assert!(
        wf.contains("OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}"),
        "{wf}"
    );
    assert!(
        wf.contains("worker: 'codex exec --json --sandbox workspace-write --model gpt-5.5 -'"),
        "{wf}"
    );

    // Gemini CLI: pinned, its key checked, JSON output, edits approved and no shell.
    let out = exec(dir.path(), &["init", "--stdout", "--worker", "gemini"]);
    assert!(out.status.success());
    let wf = String::from_utf8_lossy(&out.stdout);
    assert!(wf.contains("@google/gemini-cli@0.61.0"), "{wf}");
    assert!(
        wf.contains("- name: Check the GEMINI_API_KEY secret"),
        "{wf}"
    );
    assert!(
        wf.contains(
            "worker: 'gemini --output-format json --approval-mode auto_edit --skip-trust --prompt='"
        ),
        "{wf}"
    );

    let out = exec(
        dir.path(),
        &[
            "init",
            "--stdout",
            "--worker",
            "claude",
            "--secret",
            "GITHUB_TOKEN",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--secret \"GITHUB_TOKEN\""), "{err}");
}

/// The secret check as the runner runs it (`bash -e` with the step's `env:`): a missing secret
/// stops the job with the fix; a set one lets it go on.
#[test]
fn the_secret_check_step_fails_early_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), &["init", "--stdout", "--worker", "aider"]);
    assert!(out.status.success());
    let wf: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let steps = wf["jobs"]["work"]["steps"].as_sequence().unwrap();
    let check = steps
        .iter()
        .position(|s| s["name"] == "Check the ANTHROPIC_API_KEY secret")
        .expect("a secret check step");
    let work = steps.iter().position(|s| s["id"] == "work").unwrap();
    assert!(check < work, "the check runs before the worker");
    assert_eq!(
        steps[check]["env"]["ANTHROPIC_API_KEY"],
        "${{ secrets.ANTHROPIC_API_KEY }}"
    );
    let script = steps[check]["run"].as_str().unwrap();
    let run = |value: &str| {
        std::process::Command::new("bash")
            .args([
                "--noprofile",
                "--norc",
                "-e",
                "-o",
                "pipefail",
                "-c",
                script,
            ])
            .env("ANTHROPIC_API_KEY", value)
            .output()
            .unwrap()
    };
    let missing = run("");
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stdout);
    assert!(said.starts_with("::error "), "{said}");
    assert!(said.contains("gh secret set ANTHROPIC_API_KEY"), "{said}");
    assert!(run("sk-test").status.success());
}

/// GitHub reads workflows only from the repository root's `.github/workflows`, and the Action
/// runs the plan from the root: `init` in a subdirectory writes nothing there (where it would
/// never run) and says where to run it.
#[test]
fn init_in_a_subdirectory_of_the_repository_writes_no_workflow_github_would_ignore() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let out = exec(&sub, &["init", "--worker", "claude"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!sub.join(".github").exists(), "no workflow GitHub ignores");
    let top = dir.path().canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("run `dagexec init` in {}", top.display())),
        "{stderr}"
    );
}
