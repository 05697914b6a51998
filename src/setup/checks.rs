//! The setup facts that need the outside world: `git status --porcelain`, blocking
//! assumption checks (each distinct command run once, a few at a time, each with a timeout),
//! and context-file existence.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use super::{BlockingCheck, Validation};
use crate::plan::model::Plan;
use crate::shell;

/// How many checks run at once.
pub const CHECK_PARALLELISM: usize = 4;

/// Options for [`gather`].
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// Skip the blocking assumption checks (`--no-checks`).
    pub skip_checks: bool,
    /// Per-check timeout.
    pub timeout: Duration,
}

/// `git status --porcelain` in `root`: (clean, output). Outside a repository, or without git,
/// the tree is reported as not clean with git's message.
pub fn git_status(root: &Path) -> (bool, String) {
    match Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(root)
        .output()
    {
        Ok(o) if o.status.success() => {
            let s = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
            (s.is_empty(), s)
        }
        Ok(o) => (false, String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => (false, format!("cannot run git: {e}")),
    }
}

/// Runs the blocking assumption checks of every task, in plan order. Identical commands are
/// run once and share their result.
pub fn blocking_checks(plan: &Plan, root: &Path, timeout: Duration) -> Vec<BlockingCheck> {
    let mut wanted: Vec<(usize, String, String)> = Vec::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        for a in t.assumptions().iter().filter(|a| a.is_blocking()) {
            wanted.push((i, a.claim.clone(), a.verify.clone()));
        }
    }
    let mut distinct: Vec<&str> = wanted.iter().map(|w| w.2.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let results: Mutex<BTreeMap<&str, shell::ShellOutcome>> = Mutex::new(BTreeMap::new());
    let next = Mutex::new(distinct.iter());
    std::thread::scope(|s| {
        for _ in 0..CHECK_PARALLELISM.min(distinct.len()) {
            s.spawn(|| {
                loop {
                    let Some(cmd) = next
                        .lock()
                        .expect("no panics hold this lock")
                        .next()
                        .copied()
                    else {
                        break;
                    };
                    let outcome = shell::run(cmd, root, timeout);
                    results
                        .lock()
                        .expect("no panics hold this lock")
                        .insert(cmd, outcome);
                }
            });
        }
    });
    let results = results.into_inner().expect("no panics hold this lock");
    let v3 = plan.schema_version >= 3;
    wanted
        .iter()
        .map(|(task, claim, verify)| {
            let o = &results[verify.as_str()];
            BlockingCheck {
                task_index: v3.then_some(*task),
                claim: claim.clone(),
                passed: o.passed,
                output: o.output.clone(),
                verify: verify.clone(),
                task: *task,
            }
        })
        .collect()
}

/// Context files that do not exist under `root`, in plan order, each once.
pub fn missing_context_files(plan: &Plan, root: &Path) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for t in &plan.tasks {
        for c in t.context_files() {
            if !root.join(&c.path).exists() && !missing.contains(&c.path) {
                missing.push(c.path.clone());
            }
        }
    }
    missing
}

/// Gathers the seed's `validation` object.
pub fn gather(plan: &Plan, root: &Path, opts: CheckOptions) -> Validation {
    let (git_clean, git_status) = git_status(root);
    let blocking_checks = if opts.skip_checks {
        Vec::new()
    } else {
        blocking_checks(plan, root, opts.timeout)
    };
    let missing = missing_context_files(plan, root);
    Validation {
        git_clean,
        git_status,
        blocking_checks,
        context_files_valid: missing.is_empty(),
        missing_context_files: missing,
        checks_skipped: opts.skip_checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_run_once_per_command_and_report_in_plan_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"schemaVersion":3,"tasks":[
            {"agent":{"role":"r","assumptions":[
                {"claim":"counter","verify":"echo x >> count; echo ok","severity":"blocking"},
                {"claim":"warn only","verify":"exit 1","severity":"warning"}]}},
            {"agent":{"role":"r","assumptions":[
                {"claim":"counter again","verify":"echo x >> count; echo ok","severity":"blocking"},
                {"claim":"fails","verify":"echo broken >&2; exit 1","severity":"blocking"}],
             "contextFiles":[{"path":"here.txt","reason":""},{"path":"gone.txt","reason":""},{"path":"gone.txt","reason":""}]}}]}"#;
        let plan = crate::plan::parse(text, Path::new("p")).unwrap();
        std::fs::write(dir.path().join("here.txt"), "").unwrap();
        let v = gather(
            &plan,
            dir.path(),
            CheckOptions {
                skip_checks: false,
                timeout: Duration::from_secs(10),
            },
        );
        let got: Vec<(Option<usize>, &str, bool, &str)> = v
            .blocking_checks
            .iter()
            .map(|c| (c.task_index, c.claim.as_str(), c.passed, c.output.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(0), "counter", true, "ok"),
                (Some(1), "counter again", true, "ok"),
                (Some(1), "fails", false, "broken")
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("count")).unwrap(),
            "x\n",
            "one run per distinct command"
        );
        assert_eq!(v.missing_context_files, ["gone.txt"]);
        assert!(!v.context_files_valid);
        assert!(!v.git_clean, "a temp dir is not a repository");
        let skipped = gather(
            &plan,
            dir.path(),
            CheckOptions {
                skip_checks: true,
                timeout: Duration::from_secs(1),
            },
        );
        assert!(skipped.blocking_checks.is_empty() && skipped.checks_skipped);
    }
}
