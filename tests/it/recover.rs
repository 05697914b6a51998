//! When a task fails or blocks, the user can see why and put it right without editing JSON:
//! `dagexec retry N`, `dagexec answer N` for a worker that said `BLOCKED:`, `dagexec status`
//! after a completed run, and every problem of a broken plan reported at once (the guide's
//! example in docs/src/commands.md, verbatim).

use crate::common;

use serde_json::{Value, json};

use common::lab::task;
use common::local::{exec, plan_json};
use common::{git, text};

/// A repository with `tasks` as its plan and `worker` as `worker.sh`, committed.
fn repo(tasks: Vec<Value>, worker: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".design")).unwrap();
    let plan = json!({
        "schemaVersion": 2, "goal": "Recover", "context": {},
        "progress": {"completedTasks": []}, "tasks": tasks
    });
    std::fs::write(
        root.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    std::fs::write(root.join("worker.sh"), worker).unwrap();
    std::fs::write(root.join(".gitignore"), "fixed\n").unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "plan"]);
    dir
}

const FLAKY: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) if [ -f "$FIXED/fixed" ]; then echo a > a.txt; echo "COMPLETED: a"; else echo "FAILED: the fixture is missing"; fi ;;
*) echo b > b.txt; echo "COMPLETED: b" ;;
esac
"#;

#[test]
fn retry_puts_a_failed_task_and_what_it_skipped_back_to_pending() {
    let dir = repo(
        vec![task("A", &["a.txt"], &[]), task("B", &["b.txt"], &[0])],
        FLAKY,
    );
    let root = dir.path();
    let worker = format!("FIXED={} sh ./worker.sh", root.display());
    let first = exec(root, &["run", "--yes", "--worker", &worker]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let s = plan_json(root);
    assert_eq!(
        (
            s["tasks"][0]["status"].as_str(),
            s["tasks"][1]["status"].as_str()
        ),
        (Some("failed"), Some("skipped")),
        "{s:#}"
    );
    // The summary says how to put it right, with the command.
    assert!(text(&first).contains("dagexec retry 0"), "{}", text(&first));

    let retried = exec(root, &["retry", "0"]);
    assert_eq!(retried.status.code(), Some(0), "{}", text(&retried));
    assert_eq!(
        String::from_utf8_lossy(&retried.stdout),
        "Task 0 is pending again, with a fresh set of attempts.\n\
         Task 1 is pending again (skipped because of it).\n\
         Run `dagexec run` again, with the same options, to resume.\n"
    );
    let s = plan_json(root);
    assert_eq!(s["tasks"][0]["status"], "pending");
    assert_eq!(s["tasks"][0]["attempts"], 0);
    // Retrying a task that has not failed is refused with the reason.
    let refused = exec(root, &["retry", "0"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused)
            .contains("task 0 is pending; only a failed, blocked or skipped task can be retried"),
        "{}",
        text(&refused)
    );
    assert_eq!(s["tasks"][1]["status"], "pending");

    // The cause is fixed (an ignored file the worker looks for); the run resumes and both
    // tasks complete.
    std::fs::write(root.join("fixed"), "").unwrap();
    let second = exec(root, &["run", "--yes", "--worker", &worker]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b\n");
}

/// `retry` (and `answer`) while a run executes the plan would be saved over by that run's
/// own copy of it: the retry was said ("pending again") and lost. Refused now, naming the
/// run; after it ends the same retry works. Task 0 fails at once; task 1 waits for a file.
#[test]
fn retry_while_a_run_executes_the_plan_is_refused_not_lost() {
    let worker = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo "FAILED: broken" ;;
*) while [ ! -f "$GO" ]; do sleep 0.1; done; echo b > b.txt; echo "COMPLETED: b" ;;
esac
"#;
    let dir = repo(
        vec![task("A", &["a.txt"], &[]), task("B", &["b.txt"], &[])],
        worker,
    );
    let root = dir.path();
    let go = root.join("fixed");
    let mut run = common::dagexec(root)
        .args(["run", "--yes", "--jobs", "2", "--schedule", "eager"])
        .args(["--worker", "sh ./worker.sh"])
        .env("GO", &go)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while plan_json(root)["tasks"][0]["status"] != "failed" {
        assert!(std::time::Instant::now() < deadline, "task 0 never failed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let retried = exec(root, &["retry", "0"]);
    let answered = exec(root, &["answer", "0", "try again"]);
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(1));
    assert_eq!(retried.status.code(), Some(2), "{}", text(&retried));
    assert!(
        text(&retried).contains("another dagexec run (pid ")
            && text(&retried).contains("is executing this repository's plan"),
        "{}",
        text(&retried)
    );
    assert_eq!(answered.status.code(), Some(2), "{}", text(&answered));
    assert_eq!(plan_json(root)["tasks"][0]["status"], "failed");
    let retried = exec(root, &["retry", "0"]);
    assert_eq!(retried.status.code(), Some(0), "{}", text(&retried));
    assert_eq!(plan_json(root)["tasks"][0]["status"], "pending");
}

const BLOCKING: &str = r#"#!/bin/sh
prompt=$(cat)
case "$prompt" in
*"use the staging key"*) echo a > a.txt; echo "COMPLETED: used the staging key" ;;
*) echo "BLOCKED: which API key should the client use?" ;;
esac
"#;

#[test]
fn answer_reaches_a_task_whose_worker_said_blocked() {
    let dir = repo(vec![task("A", &["a.txt"], &[])], BLOCKING);
    let root = dir.path();
    let first = exec(root, &["run", "--yes", "--worker", "sh ./worker.sh"]);
    assert_ne!(first.status.code(), Some(0), "{}", text(&first));
    assert_eq!(plan_json(root)["tasks"][0]["status"], "blocked");

    let answered = exec(root, &["answer", "0", "use the staging key"]);
    assert_eq!(answered.status.code(), Some(0), "{}", text(&answered));
    assert!(
        text(&answered).contains("answered \"use the staging key\""),
        "{}",
        text(&answered)
    );
    // The next attempt's prompt carries the question and the answer.
    let prompt = exec(root, &["prompt", "0"]);
    let p = text(&prompt);
    assert!(p.contains("which API key should the client use?"), "{p}");
    assert!(p.contains("use the staging key"), "{p}");

    let second = exec(root, &["run", "--yes", "--worker", "sh ./worker.sh"]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
}

#[test]
fn status_after_a_completed_run_reports_the_archived_plan() {
    let dir = repo(
        vec![task("A", &["a.txt"], &[]), task("B", &["b.txt"], &[0])],
        "#!/bin/sh\ncat >/dev/null\nif [ \"$DAGEXEC_TASK_INDEX\" = 0 ]; then echo x > a.txt; else echo x > b.txt; fi\necho 'COMPLETED: ok'\n",
    );
    let root = dir.path();
    let done = exec(root, &["run", "--yes", "--worker", "sh ./worker.sh"]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    assert!(!root.join(".design/plan.json").exists());

    let status = exec(root, &["status"]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
    let out = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(
        out.starts_with(
            "The run is complete: All 2 tasks completed. (the plan was archived at .design/plan.done.json).\n"
        ),
        "{out}"
    );
    assert!(out.contains("completed"), "{out}");
    // Attempt counts survive completion's trimming.
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap();
    assert!(row.contains(" 1 "), "{row}");
    let json = exec(root, &["status", "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows[0]["attempts"], 1, "{rows:#}");
    assert_eq!(rows[1]["status"], "completed");
}

#[test]
fn a_broken_plan_reports_every_problem_at_once() {
    // The guide's example (docs/src/commands.md, "A broken plan"): task 2 names a task that
    // does not exist, and 0 → 4 → 2 → 0.
    let dir = repo(
        vec![
            task("T0", &["0"], &[4]),
            task("T1", &["1"], &[]),
            task("T2", &["2"], &[0, 9]),
            task("T3", &["3"], &[]),
            task("T4", &["4"], &[2]),
            task("T5", &["5"], &[]),
        ],
        "",
    );
    let out = exec(dir.path(), &["validate", "--no-checks"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: .design/plan.json: task 2 blockedBy[1]: no task 9 (the plan has 6 tasks)\n  \
         hint: blockedBy holds plan indices (0 to 5); remove the entry or point it at an existing task.\n\
         error: .design/plan.json: task 0 blockedBy: cycle: 0 → 4 → 2 → 0\n  \
         hint: Tasks in a cycle can never start; remove one of these blockedBy edges: task 0 blockedBy 4, task 4 blockedBy 2, task 2 blockedBy 0.\n\
         2 problems in .design/plan.json\n"
    );
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/commands.md"))
            .unwrap();
    assert!(
        guide.contains(String::from_utf8_lossy(&out.stderr).trim_end()),
        "the guide shows what dagexec prints"
    );
}
