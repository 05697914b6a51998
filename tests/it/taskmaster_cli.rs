//! Taskmaster's own CLI (`task-master-ai`, pinned in `.ci/install-agents.sh`) reads what
//! dagexec writes back: after a run, `task-master list --format json` reads every status as
//! Taskmaster knows it, `validate-dependencies` is clean, `next` offers only open work, and a
//! `task-master set-status` is honoured by the next `dagexec run`. These commands need no API
//! key and no network.
//!
//! The CLI is installed by `.ci/install-agents.sh` (npm, into `.ci/tools/agents`; `.ci/run`
//! does it). Without it this test is skipped, saying how to install it, and fails instead under
//! `DAGEXEC_REQUIRE_TOOLS=1` (`.ci/run` sets it); `DAGEXEC_SKIP_REAL_AGENTS=1` skips it
//! knowingly, as for the agent CLIs (`real_agents`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::local::{Local, Ran, local};
use crate::common::{commit_new, git};

const TM: &str = ".taskmaster/tasks/tasks.json";

/// Where the pinned `task-master` is, or `None` when the test is skipped.
fn task_master() -> Option<PathBuf> {
    if std::env::var_os("DAGEXEC_SKIP_REAL_AGENTS").is_some_and(|v| v == "1") {
        eprintln!("task-master skipped (DAGEXEC_SKIP_REAL_AGENTS=1)");
        return None;
    }
    crate::common::tools::agents(
        &["task-master"],
        "Taskmaster's CLI test (tests/it/taskmaster_cli.rs)",
    )
    .map(|dir| dir.join("task-master"))
}

/// `task-master ARGS` in `dir`; its stdout, after failing the test unless it succeeded.
fn tm(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let o = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "task-master {args:?}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A plan as `task-master` writes one (every field it requires): 2 has subtasks, 3 waits
/// for 2, 4 for 3.
const TASKS: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Setup", "description": "set up", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []},
      {"id": 2, "title": "Models", "description": "models", "status": "pending", "priority": "medium", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": [
        {"id": 1, "title": "User model", "description": "user", "status": "pending", "details": "", "dependencies": []},
        {"id": 2, "title": "Post model", "description": "post", "status": "in-progress", "details": "", "dependencies": [1]}
      ]},
      {"id": 3, "title": "API", "description": "api", "status": "pending", "priority": "medium", "details": "", "testStrategy": "", "dependencies": [2], "subtasks": []},
      {"id": 4, "title": "Docs", "description": "docs", "status": "pending", "priority": "low", "details": "", "testStrategy": "", "dependencies": [3], "subtasks": []}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// Fails the unit whose ID is in $FAIL, completes every other.
const WORKER: &str = r#"id=$(sed -n 's/^## Task: \([^ ]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE" | head -n 1)
if [ "$id" = "$FAIL" ]; then echo "FAILED: $id cannot be done"; exit 0; fi
mkdir -p done && echo "$id" > "done/$id.txt"
echo "COMPLETED: $id done"
"#;

fn run(dir: &Path) -> Ran {
    worked_by(dir).env("FAIL", "3").run()
}

/// `dagexec run` of the list in `dir` by [`WORKER`], with no unit failing unless `FAIL` is set.
fn worked_by(dir: &Path) -> Local {
    local(dir)
        .global(&["--plan", TM])
        .script(WORKER)
        .timeout("20s")
}

/// A committed repository whose `.taskmaster/tasks/tasks.json` is `text`.
fn committed(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_list(dir.path(), text);
    commit_new(dir.path());
    dir
}

/// A Taskmaster project in `dir` whose `.taskmaster/tasks/tasks.json` is `text`, with the
/// `.taskmaster/config.json` `task-master init` writes, its anonymous telemetry turned off: the
/// tests never report to Taskmaster's Sentry, and each `task-master` call is a second of CPU
/// shorter (with it on, Sentry hooks every module Node loads).
fn write_list(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join(".taskmaster/tasks")).unwrap();
    std::fs::write(dir.join(TM), text).unwrap();
    std::fs::write(
        dir.join(".taskmaster/config.json"),
        r#"{"global": {"anonymousTelemetry": false}}"#,
    )
    .unwrap();
}

/// What `task-master next` offers in `dir`, and the IDs (JSON-quoted) `list --ready` lists.
fn next_and_ready(bin: &Path, dir: &Path) -> (Value, Vec<String>) {
    let next = first_json(&tm(bin, dir, &["next", "--format", "json"]));
    let ready = first_json(&tm(bin, dir, &["list", "--ready", "--format", "json"]));
    let ids = ready["tasks"].as_array().unwrap().iter();
    (next, ids.map(|t| t["id"].to_string()).collect())
}

/// What `dagexec validate` says of the list in `dir`.
fn validated(dir: &Path) -> String {
    let out = crate::common::succeed(crate::common::dagexec(dir).args(["--plan", TM, "validate"]));
    crate::common::text(&out)
}

/// The first JSON value of `out` (`task-master` may print a line before it, saying telemetry
/// is off, and more after it).
fn first_json(out: &str) -> Value {
    let from = out
        .find(['{', '['])
        .unwrap_or_else(|| panic!("no JSON in: {out}"));
    serde_json::Deserializer::from_str(&out[from..])
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no JSON in: {out}"))
}

/// Every task's and subtask's status as `task-master list` reads it.
fn statuses(bin: &Path, dir: &Path) -> Vec<(String, String)> {
    let out = tm(bin, dir, &["list", "--format", "json", "--with-subtasks"]);
    statuses_of(&first_json(&out))
}

/// Every task's and subtask's status in `master` of a tasks.json only Taskmaster wrote (its
/// own `set-status`): the file is what `list` would read back, without a call of 3 s of CPU.
fn written_statuses(dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir.join(TM)).unwrap();
    statuses_of(&serde_json::from_str::<Value>(&text).unwrap()["master"])
}

/// The `(ID, status)` of every task in `list`'s `tasks`, each followed by its subtasks'.
fn statuses_of(v: &Value) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for t in v["tasks"].as_array().unwrap() {
        all.push((
            t["id"].to_string().replace('"', ""),
            t["status"].as_str().unwrap().to_string(),
        ));
        for s in t["subtasks"].as_array().into_iter().flatten() {
            all.push((
                format!(
                    "{}.{}",
                    t["id"].to_string().replace('"', ""),
                    s["id"].to_string().replace('"', "")
                ),
                s["status"].as_str().unwrap().to_string(),
            ));
        }
    }
    all
}

#[test]
fn taskmaster_reads_what_dagexec_writes_and_dagexec_honours_its_set_status() {
    let Some(bin) = task_master() else { return };
    let dir = committed(TASKS);
    let first = run(dir.path());
    let log = first.text();
    assert!(log.contains("failed after 3 attempt(s)"), "{log}");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        statuses(&bin, dir.path()),
        [
            s("1", "done"),
            s("2", "done"),
            s("2.1", "done"),
            s("2.2", "done"),
            s("3", "pending"),
            s("4", "pending")
        ]
    );
    let next = first_json(&tm(&bin, dir.path(), &["next", "--format", "json"]));
    assert_eq!(
        next["task"]["id"].to_string().replace('"', ""),
        "3",
        "{next}"
    );
    // The team gives task 3 up the way Taskmaster teaches, commits, and runs again: 4 runs.
    tm(
        &bin,
        dir.path(),
        &["set-status", "--id=3", "--status=cancelled"],
    );
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "cancel 3"]);
    let last = run(dir.path());
    let log = last.expect_code(0);
    assert!(dir.path().join("done/4.txt").is_file(), "{log}");
    assert!(!dir.path().join("done/3.txt").exists(), "{log}");
    assert_eq!(
        statuses(&bin, dir.path())[4..],
        [s("3", "cancelled"), s("4", "done")]
    );
    let check = tm(&bin, dir.path(), &["validate-dependencies"]);
    assert!(check.contains("All Dependencies Are Valid"), "{check}");
}

/// Review tasks as Taskmaster has them: 1 and 6.1 are in `review` (worked, waiting for a
/// person), 2 and 6.2 wait for them; 7.2 is cancelled beside 7.1 done. Leaves are
/// `high`, the parents `low`, so `next` offers a parent (whose open subtasks all wait)
/// only once no leaf is left.
const REVIEW: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Auth", "description": "auth", "status": "review", "priority": "high", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []},
      {"id": 2, "title": "Sessions", "description": "sessions", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": []},
      {"id": 3, "title": "Setup", "description": "setup", "status": "done", "priority": "high", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []},
      {"id": 4, "title": "Models", "description": "models", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [3], "subtasks": []},
      {"id": 6, "title": "UI", "description": "ui", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [3], "subtasks": [
        {"id": 1, "title": "Layout", "description": "layout", "status": "review", "details": "", "dependencies": []},
        {"id": 2, "title": "Theme", "description": "theme", "status": "pending", "details": "", "dependencies": [1]},
        {"id": 3, "title": "Icons", "description": "icons", "status": "pending", "details": "", "dependencies": []},
        {"id": 4, "title": "Fonts", "description": "fonts", "status": "done", "details": "", "dependencies": []}
      ]},
      {"id": 7, "title": "Docs", "description": "docs", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": [
        {"id": 1, "title": "Guide", "description": "guide", "status": "done", "details": "", "dependencies": []},
        {"id": 2, "title": "Video", "description": "video", "status": "cancelled", "details": "", "dependencies": []},
        {"id": 3, "title": "FAQ", "description": "faq", "status": "pending", "details": "", "dependencies": []}
      ]},
      {"id": 8, "title": "Release", "description": "release", "status": "pending", "priority": "low", "details": "", "testStrategy": "", "dependencies": [7], "subtasks": []}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// What Taskmaster lets start, in the order `next` offers it, each set `done` with
/// `set-status` as it is offered (so its parent is settled by Taskmaster's own rule), until
/// `next` offers nothing or a task with subtasks (whose units are its subtasks, none of which
/// `next` offers any more).
fn taskmaster_would_run(bin: &Path, dir: &Path) -> Vec<String> {
    let mut ran = Vec::new();
    loop {
        let next = first_json(&tm(bin, dir, &["next", "--format", "json"]));
        let task = &next["task"];
        if task.is_null() || task["subtasks"].as_array().is_some_and(|s| !s.is_empty()) {
            return ran;
        }
        let id = task["id"].to_string().replace('"', "");
        tm(
            bin,
            dir,
            &["set-status", &format!("--id={id}"), "--status=done"],
        );
        assert!(!ran.contains(&id), "offered twice: {id}");
        ran.push(id);
    }
}

/// `review` is Taskmaster's "worked, waiting for a person": `next` never offers it nor what
/// waits for it, and `set-status` keeps a parent `in-progress` while a subtask is in review
/// or cancelled, so what waits for that parent is never offered either (task 8). dagexec
/// runs exactly what `next` lets start, and writes every status as `set-status` leaves it.
#[test]
fn dagexec_runs_what_taskmaster_next_offers_past_review_and_cancelled_tasks() {
    let Some(bin) = task_master() else { return };
    let log = runs_what_next_offers(&bin, REVIEW);
    assert!(log.contains("waits for review task 1"), "{log}");
}

/// dagexec runs `tasks` (in one repository) as `next` offers them (in another, each set done
/// as offered): the same units run, and every status is left as `set-status` leaves it.
/// Returns dagexec's log.
fn runs_what_next_offers(bin: &Path, tasks: &str) -> String {
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    for dir in [ours.path(), theirs.path()] {
        write_list(dir, tasks);
    }
    commit_new(ours.path());
    let mut want = taskmaster_would_run(bin, theirs.path());
    let ran = worked_by(ours.path()).run();
    let log = ran.text();
    let got = worked(ours.path());
    want.sort();
    assert_eq!(got, want, "{log}");
    assert_eq!(
        statuses(bin, ours.path()),
        written_statuses(theirs.path()),
        "{log}"
    );
    log
}

/// The units the worker worked on in `dir` (its `done/<id>.txt`), sorted.
fn worked(dir: &Path) -> Vec<String> {
    let mut got: Vec<String> = std::fs::read_dir(dir.join("done"))
        .map(|d| {
            d.map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.trim_end_matches(".txt").to_string()
            })
            .collect()
        })
        .unwrap_or_default();
    got.sort();
    got
}

/// Status words as a team writes them by hand. Taskmaster compares them exactly: a subtask's
/// `Pending` is offered (`next` reads a subtask's open words in any case), its `Done` and
/// `todo` never are, nor what waits for them (a dependency is met only when `done`), and
/// `set-status` settles a parent done only when each subtask is `done` or `completed` — so
/// task 1 stays open and 4 waits for ever, while 2 is done once 2.2 is and 3 follows.
/// Parents are `low`, leaves `high` (see [`REVIEW`]).
const WORDS: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "UI", "description": "ui", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": [
        {"id": 1, "title": "Layout", "description": "layout", "status": "Done", "details": "", "dependencies": []},
        {"id": 2, "title": "Theme", "description": "theme", "status": "pending", "details": "", "dependencies": [1]},
        {"id": 3, "title": "Icons", "description": "icons", "status": "Pending", "details": "", "dependencies": []},
        {"id": 4, "title": "Fonts", "description": "fonts", "status": "todo", "details": "", "dependencies": []}
      ]},
      {"id": 2, "title": "Models", "description": "models", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": [
        {"id": 1, "title": "User", "description": "user", "status": "completed", "details": "", "dependencies": []},
        {"id": 2, "title": "Post", "description": "post", "status": "pending", "details": "", "dependencies": []}
      ]},
      {"id": 3, "title": "API", "description": "api", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [2], "subtasks": []},
      {"id": 4, "title": "Docs", "description": "docs", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": []}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// A status word Taskmaster does not know is not run, nor what waits for it, as `next` never
/// offers them; one it reads in any case runs; a task's word it does not know makes
/// Taskmaster refuse the file (`next` says so), and dagexec names the command that sets the
/// word meant.
#[test]
fn dagexec_compares_status_words_as_taskmaster_does() {
    let Some(bin) = task_master() else { return };
    let log = runs_what_next_offers(&bin, WORDS);
    assert!(
        log.contains("task 1.1 has the status \"Done\", which Taskmaster does not know"),
        "{log}"
    );
    assert!(
        log.contains("`task-master set-status --id=1.1 --status=done`"),
        "{log}"
    );
    // A task's `Done` (not a subtask's): Taskmaster reads no task of the file.
    let dir = tempfile::tempdir().unwrap();
    let done = WORDS.replace(
        r#""title": "Docs", "description": "docs", "status": "pending""#,
        r#""title": "Docs", "description": "docs", "status": "Done""#,
    );
    write_list(dir.path(), &done);
    let o = Command::new(&bin)
        .arg("next")
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("Invalid task status: Done"), "{said}");
}

/// Task 2 is `in-progress` and depends on 1, still pending; its subtask 2.1 waits for nothing
/// of its own.
const STARTED: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Setup", "description": "setup", "status": "pending", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []},
      {"id": 2, "title": "Models", "description": "models", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": [
        {"id": 1, "title": "User", "description": "user", "status": "pending", "details": "", "dependencies": []},
        {"id": 2, "title": "Post", "description": "post", "status": "pending", "details": "", "dependencies": [1]}
      ]}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// Where Taskmaster disagrees with itself, dagexec takes its dependencies' meaning ("must be
/// completed before this task"): `next` offers a subtask of an `in-progress` task checking
/// only the subtask's own dependencies, `list --ready` does not list that task while its
/// dependencies are open, and dagexec runs its subtasks after them (docs/src/taskmaster.md).
#[test]
fn a_started_tasks_subtasks_wait_for_its_dependencies_as_list_ready_has_it() {
    let Some(bin) = task_master() else { return };
    let dir = committed(STARTED);
    let (next, ready) = next_and_ready(&bin, dir.path());
    assert_eq!(next["task"]["id"], "2.1", "{next}");
    assert_eq!(ready, ["\"1\""], "{ready:?}");
    let said = validated(dir.path());
    assert!(
        said.contains("depth 1: 1\n") && said.contains("depth 2: 2.1\n"),
        "{said}"
    );
}

/// 1 is cancelled and 2 waits for it; 3.1 is cancelled and 3.2 waits for it.
const CANCELLED: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Old idea", "description": "old", "status": "cancelled", "priority": "high", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []},
      {"id": 2, "title": "After it", "description": "after", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": []},
      {"id": 3, "title": "Models", "description": "models", "status": "in-progress", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": [
        {"id": 1, "title": "Video", "description": "video", "status": "cancelled", "details": "", "dependencies": []},
        {"id": 2, "title": "Guide", "description": "guide", "status": "pending", "details": "", "dependencies": [1]}
      ]}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// A cancelled dependency: `next` never counts it met (neither 2 nor 3.2 is offered: it falls
/// back to task 3 as a whole), `list --ready` does (2 is ready), and so does dagexec, which
/// runs 2 and 3.2 at once (docs/src/taskmaster.md).
#[test]
fn a_cancelled_dependency_is_met_as_list_ready_has_it() {
    let Some(bin) = task_master() else { return };
    let dir = committed(CANCELLED);
    let (next, ready) = next_and_ready(&bin, dir.path());
    assert_eq!(next["task"]["id"], "3", "{next}");
    assert!(ready.contains(&"\"2\"".to_string()), "{ready:?}");
    let said = validated(dir.path());
    assert!(said.contains("depth 1: 2, 3.2\n"), "{said}");
}

/// Task 1 was done and the team reopened it (`task-master set-status --id=1 --status=pending`
/// leaves its subtasks done); 2 waits for it, 3 for nothing.
const REOPENED: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Models", "description": "models", "status": "pending", "priority": "low", "details": "", "testStrategy": "", "dependencies": [], "subtasks": [
        {"id": 1, "title": "User", "description": "user", "status": "done", "details": "", "dependencies": []},
        {"id": 2, "title": "Post", "description": "post", "status": "done", "details": "", "dependencies": []}
      ]},
      {"id": 2, "title": "API", "description": "api", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [1], "subtasks": []},
      {"id": 3, "title": "CI", "description": "ci", "status": "pending", "priority": "high", "details": "", "testStrategy": "", "dependencies": [], "subtasks": []}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// A task the team reopened keeps its status: `next` offers it whole and never what waits for
/// it, and `set-status` never settles it by itself; dagexec runs what `next` offers and writes
/// no `done` over the team's `pending`.
#[test]
fn a_task_the_team_reopens_stays_open_with_its_subtasks_done() {
    let Some(bin) = task_master() else { return };
    let log = runs_what_next_offers(&bin, REOPENED);
    assert!(
        log.contains(
            "task 2 waits for task 1, which stays open though every subtask of it is done"
        ),
        "{log}"
    );
}

/// oraclepack's current tag (`.taskmaster/state.json`): tasks set `done` over `pending`
/// subtasks, which `task-master list` shows pending and `next` never offers. A run has
/// nothing to do, and leaves tasks.json as Taskmaster reads it: it rewrote every such
/// subtask `done`.
#[test]
fn a_run_leaves_the_subtasks_of_a_task_set_done_as_the_team_wrote_them() {
    let Some(bin) = task_master() else { return };
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        crate::common::manifest().join("tests/fixtures/taskmaster/oraclepack-done-parents.json"),
    )
    .unwrap();
    write_list(dir.path(), &text);
    std::fs::write(
        dir.path().join(".taskmaster/state.json"),
        r#"{"currentTag": "chore-overview"}"#,
    )
    .unwrap();
    commit_new(dir.path());
    let before = statuses(&bin, dir.path());
    assert!(
        before.contains(&("1.1".into(), "pending".into())),
        "{before:?}"
    );
    let ran = run(dir.path());
    assert_eq!(statuses(&bin, dir.path()), before, "{}", ran.text());
    assert_eq!(git(dir.path(), &["show", &format!("HEAD:{TM}")]), text);
}

/// A public list whose done task 11 has six subtasks all with the ID 11: `task-master list`
/// reads it (`validate-dependencies` finds it valid), and dagexec runs its open tasks and
/// leaves every status as `set-status --status=done` would (it refused the file: "subtask ID
/// 11.11 is used twice"). Nothing in it is held, so every open task is what `next` would
/// offer in turn; two `task-master` calls say it (a walk of `next` and `set-status` took 17,
/// about 5 s of CPU each).
#[test]
fn subtask_ids_used_twice_under_a_done_task_run_as_taskmaster_reads_them() {
    let Some(bin) = task_master() else { return };
    let text = std::fs::read_to_string(
        crate::common::manifest()
            .join("tests/fixtures/taskmaster/ecommerce-duplicate-subtask-ids.json"),
    )
    .unwrap();
    let dir = committed(&text);
    let before = statuses(&bin, dir.path());
    let mut open: Vec<String> = before
        .iter()
        .filter(|(_, status)| status == "pending")
        .map(|(id, _)| id.clone())
        .collect();
    open.sort();
    assert_eq!(open, ["10", "4", "5", "6", "7", "8", "9"], "{before:?}");
    let ran = worked_by(dir.path()).run();
    let log = ran.text();
    assert_eq!(worked(dir.path()), open, "{log}");
    let done = |(id, status): &(String, String)| {
        let status = if open.contains(id) { "done" } else { status };
        (id.clone(), status.to_string())
    };
    let want: Vec<(String, String)> = before.iter().map(done).collect();
    assert_eq!(statuses(&bin, dir.path()), want, "{log}");
}
