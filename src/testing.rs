//! Test fixtures shared by the unit tests: the example plans and small synthetic plans, a
//! work job's result, and git for a test's own repository.

use std::path::Path;

use crate::pure::plan::model::{Files, Metadata, Plan, Task};

/// `examples/{name}`, parsed.
pub(crate) fn example(name: &str) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    crate::edge::plan_file::load(&path).unwrap()
}

/// A plan of the given tasks.
pub(crate) fn plan_of(tasks: Vec<Task>) -> Plan {
    Plan::new(String::new(), tasks)
}

/// A task with these blockers and files to create and modify.
pub(crate) fn task(deps: &[usize], create: &[&str], modify: &[&str]) -> Task {
    let strings = |v: &[&str]| v.iter().map(std::string::ToString::to_string).collect();
    Task {
        subject: String::new(),
        blocked_by: deps.to_vec(),
        metadata: Some(Metadata {
            files: Files {
                create: strings(create),
                modify: strings(modify),
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The `result.json` of a work job whose attempt `attempt` of task `task` completed (based on
/// commit `abc`, 5 ms).
pub(crate) fn result_json(task: usize, attempt: u32) -> Vec<u8> {
    let report = crate::pure::outcome::AttemptReport {
        output: "COMPLETED: ok\n".into(),
        ..Default::default()
    };
    let duration = std::time::Duration::from_millis(5);
    let r = crate::action::artifact::WorkResult::new(task, attempt, 1, "abc", &report, duration);
    serde_json::to_vec(&r).expect("serialises")
}

/// Runs git in a test's repository at `root` (its own identity, no user or system config):
/// its output; a failure fails the test.
pub(crate) fn git(root: &Path, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("git")
        .current_dir(root)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}
