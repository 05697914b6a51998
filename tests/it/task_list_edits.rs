//! What the team changes in its task list counts on the next run (issue 32, item 3): after a
//! run in which a task failed every attempt, the next run says what waits and the command
//! that moves it (never "nothing to do" while tasks are skipped); the team settles the task
//! in its own file, commits, and the file's status wins over the run's memory.

use crate::common::local::{Ran, local};
use crate::common::{commit_new, git};

use std::path::Path;

const TM: &str = ".taskmaster/tasks/tasks.json";

const TASKS: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "a", "description": "a", "status": "pending", "dependencies": []},
      {"id": 2, "title": "b", "description": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "description": "c", "status": "pending", "dependencies": [2]}
    ]
  }
}
"#;

/// Fails the unit whose ID is in $FAIL, completes every other (writing `done/<id>.txt`).
const WORKER: &str = r#"id=$(sed -n 's/^## Task: \([^ ]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE" | head -n 1)
if [ "$id" = "$FAIL" ]; then echo "FAILED: $id cannot be done"; exit 0; fi
mkdir -p done && echo "$id" > "done/$id.txt"
echo "COMPLETED: $id done"
"#;

fn run(dir: &Path, fail: &str) -> Ran {
    local(dir)
        .global(&["--plan", TM])
        .script(WORKER)
        .env("FAIL", fail)
        .timeout("20s")
        .run()
}

#[test]
fn a_failed_task_the_team_cancels_in_tasks_json_frees_what_waited_for_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    std::fs::write(dir.path().join(TM), TASKS).unwrap();
    commit_new(dir.path());
    let first = run(dir.path(), "2");
    let log = first.text();
    assert!(log.contains("failed after 3 attempt(s)"), "{log}");
    // Again, nothing changed: not "nothing to do" while task 3 is skipped.
    let again = run(dir.path(), "2").text();
    assert!(!again.contains("nothing to do"), "{again}");
    assert!(again.contains("Nothing can run now:"), "{again}");
    assert!(again.contains("`dagexec retry 2`"), "{again}");
    assert!(
        again.contains("1 task(s) wait for them (skipped): 3 c."),
        "{again}"
    );
    // The team cancels task 2 the way Taskmaster does, and commits.
    let text = std::fs::read_to_string(dir.path().join(TM)).unwrap();
    let cancelled = text.replace(
        r#""title": "b", "description": "b", "status": "pending""#,
        r#""title": "b", "description": "b", "status": "cancelled", "updatedAt": "2026-11-28T08:00:00.000Z""#,
    );
    assert_ne!(cancelled, text);
    std::fs::write(dir.path().join(TM), cancelled).unwrap();
    git(dir.path(), &["commit", "-qam", "cancel 2"]);
    let last = run(dir.path(), "2");
    let log = last.expect_code(0);
    assert!(dir.path().join("done/3.txt").is_file(), "{log}");
    let written = git(dir.path(), &["show", &format!("HEAD:{TM}")]);
    assert!(
        written.contains(r#""title": "c", "description": "c", "status": "done""#),
        "{written}"
    );
    assert!(written.contains(r#""status": "cancelled""#), "{written}");
}

/// Issue 32 §3: `retry`, `answer` and the run's report go by the task list's own IDs, never
/// by plan indices.
#[test]
fn retry_takes_and_names_the_task_lists_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    std::fs::write(dir.path().join(TM), TASKS).unwrap();
    commit_new(dir.path());
    let first = run(dir.path(), "2").text();
    assert!(
        first.contains("- Task 2 (b) failed after 3 attempt(s)"),
        "{first}"
    );
    assert!(first.contains("`dagexec retry 2`"), "{first}");
    // The run's own lines too: task-list ID 2 is plan index 1, never shown.
    assert!(
        first.contains("Round 2: starting 1 task(s): 2\n"),
        "{first}"
    );
    assert!(first.contains("  task 2 (b) attempt 1 failed"), "{first}");
    assert!(!first.contains("task 1 (b)"), "{first}");
    assert!(
        first.contains("  task 2 (files task-1-…): run-1 attempt 1 (stdout, stderr)"),
        "{first}"
    );
    let exec = |args: &[&str]| {
        let out = crate::common::dagexec(dir.path())
            .args(["--plan", TM])
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), crate::common::text(&out))
    };
    let (code, text) = exec(&["retry", "9"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no task \"9\" in the task list: its task IDs are 1, 2, 3"),
        "{text}"
    );
    let (code, text) = exec(&["retry", "2"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Task 2 is pending again"), "{text}");
    assert!(
        text.contains("Task 3 is pending again (skipped because of it)"),
        "{text}"
    );
    assert!(!text.contains("/tmp"), "{text}");
}

/// A run of the task list whose first attempt is running: its worker touches `$MARK`, then
/// sleeps. What the test keeps alive, the worker's command and the run's process.
struct Running {
    dir: tempfile::TempDir,
    _marks: tempfile::TempDir,
    _worker: tempfile::TempDir,
    cmd: String,
    child: std::process::Child,
}

/// Starts `dagexec run` on the task list with `worker` (output piped or not) and waits until
/// the worker has touched `$MARK`.
fn running(worker: &str, output: fn() -> std::process::Stdio) -> Running {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    std::fs::write(dir.path().join(TM), TASKS).unwrap();
    commit_new(dir.path());
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("started");
    let (w, cmd) = crate::common::worker(worker);
    let child = crate::common::dagexec(dir.path())
        .args(["--plan", TM, "run", "--worker", &cmd])
        .env("MARK", &mark)
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !mark.exists() {
        assert!(std::time::Instant::now() < deadline, "task 1 never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Running {
        dir,
        _marks: marks,
        _worker: w,
        cmd,
        child,
    }
}

#[test]
fn a_resumed_run_names_the_interrupted_task_by_its_task_list_id() {
    // Task-list ID 1 is plan index 0: the resume message must say the ID the team knows.
    let mut r = running(
        r#"if [ -n "$MARK" ]; then touch "$MARK"; sleep 60; fi; echo "COMPLETED: ok""#,
        std::process::Stdio::null,
    );
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    let again = local(r.dir.path())
        .global(&["--plan", TM])
        .worker(&r.cmd)
        .env("MARK", "")
        .timeout("20s")
        .run();
    let out = again.text();
    assert!(
        out.contains("Task 1 was in progress when the last run stopped; it starts again."),
        "{out}"
    );
}

/// Ctrl-C says which attempt it stopped by the task list's own ID (Taskmaster's task 1 is plan
/// index 0), as the resume after it does.
#[test]
fn an_interrupt_names_the_stopped_task_by_its_task_list_id() {
    let r = running(
        r#"touch "$MARK"; sleep 60; echo "COMPLETED: ok""#,
        std::process::Stdio::piped,
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(r.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = r.child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("stopped task 1 attempt 1; an attempt you interrupt is not counted."),
        "{text}"
    );
}

/// A run refused before it starts (its worker program missing, a `--branch` git refuses)
/// leaves the tree as it found it: the plan it generated from the task list
/// (`.taskmaster/tasks/.dagexec/`) is not left behind untracked.
#[test]
fn a_refused_run_leaves_no_generated_plan_behind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    std::fs::write(dir.path().join(TM), TASKS).unwrap();
    commit_new(dir.path());
    let refusals = [
        local(dir.path())
            .global(&["--plan", TM])
            .worker("dagexec-no-such-worker-program"),
        local(dir.path())
            .global(&["--plan", TM])
            .script(WORKER)
            .args(["--branch", "bad..name"]),
    ];
    for run in refusals {
        let out = run.run();
        assert_ne!(out.code(), Some(0), "{}", out.text());
        assert_eq!(
            git(
                dir.path(),
                &["status", "--porcelain", "--untracked-files=all"]
            ),
            "",
            "{}",
            out.text()
        );
    }
    assert!(!dir.path().join("done").exists());
}

/// Four tasks in a chain; task 2's worker plays the team: in the repository's work tree it
/// cancels task 1 (already run and committed) and task 3 (not yet started), the way
/// Taskmaster writes it.
const CHAIN: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "a", "description": "a", "status": "pending", "dependencies": []},
      {"id": 2, "title": "b", "description": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "description": "c", "status": "pending", "dependencies": [2]},
      {"id": 4, "title": "d", "description": "d", "status": "pending", "dependencies": [3]}
    ]
  }
}
"#;

const CANCELS: &str = r#"id=$(sed -n 's/^## Task: \([^ ]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE" | head -n 1)
if [ "$id" = 2 ]; then
  sed -i -e 's/"title": "a", "description": "a", "status": "done"/"title": "a", "description": "a", "status": "cancelled"/' \
    -e 's/"title": "c", "description": "c", "status": "pending"/"title": "c", "description": "c", "status": "cancelled"/' "$MAIN/.taskmaster/tasks/tasks.json"
fi
mkdir -p done && echo "$id" > "done/$id.txt"
echo "COMPLETED: $id done"
"#;

/// A task the team cancels in its task list while the run runs is not started, nor what
/// waits for it (rounds and eager alike), said in one line; a cancel of a task already run
/// is named at the end (its work is committed).
#[test]
fn a_task_the_team_cancels_during_the_run_is_not_started() {
    for schedule in ["rounds", "eager"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
        std::fs::write(dir.path().join(TM), CHAIN).unwrap();
        commit_new(dir.path());
        let out = local(dir.path())
            .global(&["--plan", TM])
            .script(CANCELS)
            .env("MAIN", dir.path())
            .args(["--schedule", schedule])
            .timeout("20s")
            .run();
        let log = out.text();
        let files = git(
            dir.path(),
            &["ls-tree", "-r", "--name-only", "HEAD", "done"],
        );
        assert_eq!(files, "done/1.txt\ndone/2.txt\n", "{schedule}: {log}");
        assert!(
            log.contains(&format!("Not starting task(s) 3, nor 4 that wait(s) for it: {TM} in your work tree, edited during the run,")),
            "{schedule}: {log}"
        );
        assert!(
            log.contains(&format!("{TM} in your work tree, edited during the run, takes out 1 (cancelled, deferred, blocked or removed there) after it completed: its work is committed")),
            "{schedule}: {log}"
        );
        assert!(
            log.contains(
                "2 task(s) were not run because the task list, edited during the run, takes them"
            ) && !log.contains("because a dependency failed"),
            "{schedule}: {log}"
        );
        // The team's edit stays theirs: in the work tree, uncommitted.
        let status = git(dir.path(), &["status", "--porcelain"]);
        assert_eq!(status, format!(" M {TM}\n"), "{schedule}: {log}");
    }
}

/// A Spec Kit run of `tasks` (tasks.md's task lines) whose worker runs `work`, and whose
/// task at index `by` first ticks task `id` in the work tree's tasks.md, as the team would
/// during the run.
fn ticked_during_the_run(tasks: &str, by: u32, id: &str, work: &str) -> (tempfile::TempDir, Ran) {
    const MD: &str = "specs/001-x/tasks.md";
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("specs/001-x")).unwrap();
    std::fs::write(dir.path().join(MD), format!("# Tasks\n\n{tasks}")).unwrap();
    commit_new(dir.path());
    let out = local(dir.path())
        .global(&["--plan", MD])
        .script(&format!(
            r#"if [ "$DAGEXEC_TASK_INDEX" = {by} ]; then sed -i 's/- \[ \] {id}/- [x] {id}/' "$MAIN/{MD}"; fi
{work}
echo "COMPLETED: done""#
        ))
        .env("MAIN", dir.path())
        .timeout("20s")
        .run();
    (dir, out)
}

/// Spec Kit alike: a task the team ticks in tasks.md during the run (done by hand) is not run
/// by it, nor what waits for it.
#[test]
fn a_task_the_team_ticks_in_tasks_md_during_the_run_is_not_started() {
    let (dir, out) = ticked_during_the_run(
        "- [ ] T001 One\n- [ ] T002 Two\n- [ ] T003 Three\n- [ ] T004 Four\n",
        1,
        "T003",
        r#"mkdir -p done && echo x > "done/$DAGEXEC_TASK_INDEX.txt""#,
    );
    let log = out.text();
    let files = git(
        dir.path(),
        &["ls-tree", "-r", "--name-only", "HEAD", "done"],
    );
    assert_eq!(files, "done/0.txt\ndone/1.txt\n", "{log}");
    assert!(
        log.contains("Not starting task(s) T003, nor T004 that wait(s) for it"),
        "{log}"
    );
}

/// What a task's attempts cost stays spent when the team takes the task out of its list:
/// `--max-cost` on the next run counts it (its records leave the plan with the task).
#[test]
fn a_removed_tasks_spend_still_counts_against_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    let two = r#"{"master": {"tasks": [
      {"id": 1, "title": "a", "description": "a", "status": "pending", "dependencies": []},
      {"id": 2, "title": "b", "description": "b", "status": "pending", "dependencies": []}
    ]}}"#;
    std::fs::write(dir.path().join(TM), two).unwrap();
    commit_new(dir.path());
    let costly = format!("printf '{{\"cost_usd\": 0.4}}' > \"$DAGEXEC_USAGE_FILE\"\n{WORKER}");
    let spend = |fail: &str, budget: &str| {
        local(dir.path())
            .global(&["--plan", TM])
            .script(&costly)
            .env("FAIL", fail)
            .args(["--jobs", "1", "--max-cost", budget])
            .timeout("20s")
            .run()
    };
    // Task 1 costs $0.40, task 2 three failed attempts of $0.40.
    let first = spend("2", "10").text();
    assert!(first.contains("failed after 3 attempt(s)"), "{first}");
    // The team drops task 2 and adds task 3.
    let text = std::fs::read_to_string(dir.path().join(TM)).unwrap();
    let edited = text.replace(
        r#""id": 2, "title": "b", "description": "b""#,
        r#""id": 3, "title": "c", "description": "c""#,
    );
    assert_ne!(edited, text);
    std::fs::write(dir.path().join(TM), edited).unwrap();
    git(dir.path(), &["commit", "-qam", "drop task 2, add task 3"]);
    // $1.60 is spent: a budget of $1.50 starts nothing.
    let next = spend("none", "1.5");
    let said = next.text();
    assert_eq!(next.code(), Some(1), "{said}");
    assert!(
        said.contains("the budget of $1.50 is spent: $1.60 recorded over 1 attempt(s), $1.20 of it by tasks no longer in the plan, bought 1 of 2 task(s) completed"),
        "{said}"
    );
    assert!(!dir.path().join("done/3.txt").exists(), "{said}");
}

/// A round's later group (tasks that share a file run one group after another) reads the
/// task list again before it starts: a task the team ticks while an earlier group runs is
/// not run, as at a round's start.
#[test]
fn a_task_the_team_ticks_while_an_earlier_group_runs_is_not_started() {
    let (dir, out) = ticked_during_the_run(
        "- [ ] T001 [P] Write a line in src/shared.txt\n- [ ] T002 [P] Write another line in src/shared.txt\n",
        0,
        "T002",
        r#"mkdir -p src && echo "$DAGEXEC_TASK_INDEX" >> src/shared.txt"#,
    );
    let log = out.text();
    assert!(
        log.contains("they share files, so they run in 2 groups one after another"),
        "{log}"
    );
    let shared = git(dir.path(), &["show", "HEAD:src/shared.txt"]);
    assert_eq!(shared, "0\n", "{log}");
    // Said among the round's lines, indented as they are.
    assert!(log.contains("\n  Not starting task(s) T002"), "{log}");
    assert!(!log.contains("task T002 (Write another line"), "{log}");
    assert!(
        log.contains("1 task(s) were not run because the task list, edited during the run"),
        "{log}"
    );
}
