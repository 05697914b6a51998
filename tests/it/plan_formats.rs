//! Task lists in the formats teams keep (`sources::Format`): a Taskmaster `tasks.json` and a
//! Kiro / cc-sdd `tasks.md` run end to end with the real binary, real git repositories and a
//! scripted worker; their statuses and ticks written back in the round commits.

use crate::common::lab;
use crate::common::local::{Ran, exec, local};
use crate::common::{commit_new, git, manifest};

use std::path::Path;

const TM: &str = ".taskmaster/tasks/tasks.json";

/// A committed repository holding `files`.
fn repo_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    commit_new(dir.path());
    dir
}

/// The worker: keeps its prompt as `$OUT/prompt-<id>.md`, writes `done/<id>.txt` (and, with
/// $SHARED, appends its id to that one file every task changes), then completes. On the task
/// $MEANWHILE_ON it first runs $MEANWHILE in the user's repository $MAIN. The task's ID is
/// the first word of the prompt's `## Task:` heading.
const WORKER: &str = r#"#!/bin/sh
id=$(sed -n 's/^## Task: \([^ ]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE" | head -n 1)
cp "$DAGEXEC_PROMPT_FILE" "$OUT/prompt-$id.md"
if [ -n "$MEANWHILE" ] && [ "$id" = "$MEANWHILE_ON" ]; then
  (cd "$MAIN" && sh -c "$MEANWHILE") || { echo "FAILED: meanwhile"; exit 0; }
fi
mkdir -p done
echo "$id" > "done/$id.txt"
if [ -n "$SHARED" ]; then echo "$id" >> "$SHARED"; fi
echo "$id" >> "$OUT/order"
echo "COMPLETED: $id done"
"#;

fn run(dir: &Path, plan: &str, out: &Path, env: &[(&str, &str)]) -> Ran {
    run_with(dir, plan, out, env, &[])
}

/// [`run`] with more `run` arguments.
fn run_with(dir: &Path, plan: &str, out: &Path, env: &[(&str, &str)], args: &[&str]) -> Ran {
    let path = out.join("worker.sh");
    std::fs::write(&path, WORKER).unwrap();
    let run = local(dir)
        .args(args)
        .global(&["--plan", plan])
        .jobs(4)
        .timeout("20s")
        .worker(&format!("sh '{}'", path.display()))
        .env("OUT", out)
        .env("MAIN", dir);
    env.iter().fold(run, |run, (k, v)| run.env(k, v)).run()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A Taskmaster plan: 1 done; 2 with subtasks (2.2 after 2.1); 3 after 2; 4 cancelled and 5
/// waiting for it; 6 deferred and 7 waiting for it.
const TASKS_JSON: &str = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Setup", "status": "done", "dependencies": [], "subtasks": []},
      {"id": 2, "title": "Models", "description": "the models", "status": "pending", "dependencies": [1], "priority": "high",
       "subtasks": [
         {"id": 1, "title": "User model", "status": "pending", "dependencies": [], "testStrategy": "unit tests for the user model"},
         {"id": 2, "title": "Post model", "status": "in-progress", "dependencies": [1], "custom": {"kept": true}}
       ]},
      {"id": 3, "title": "API", "status": "pending", "dependencies": [2], "testStrategy": "curl the endpoints"},
      {"id": 4, "title": "Old idea", "status": "cancelled", "dependencies": []},
      {"id": 5, "title": "After the old idea", "status": "pending", "dependencies": [4]},
      {"id": 6, "title": "Later", "status": "deferred", "dependencies": []},
      {"id": 7, "title": "After later", "status": "pending", "dependencies": [6]}
    ],
    "metadata": {"created": "2026-01-01T00:00:00.000Z", "description": "Tasks for master context"}
  }
}
"#;

/// What the run writes into [`TASKS_JSON`]: every unit it ran done, and task 2 (its subtasks
/// are); nothing else.
fn tasks_json_written() -> String {
    TASKS_JSON
        .replace(
            r#""title": "Models", "description": "the models", "status": "pending""#,
            r#""title": "Models", "description": "the models", "status": "done""#,
        )
        .replace(
            r#""title": "User model", "status": "pending""#,
            r#""title": "User model", "status": "done""#,
        )
        .replace(
            r#""title": "Post model", "status": "in-progress""#,
            r#""title": "Post model", "status": "done""#,
        )
        .replace(
            r#""title": "API", "status": "pending""#,
            r#""title": "API", "status": "done""#,
        )
        .replace(
            r#""title": "After the old idea", "status": "pending""#,
            r#""title": "After the old idea", "status": "done""#,
        )
}

#[test]
fn a_taskmaster_plan_runs_to_the_end_with_its_statuses_written_back() {
    let dir = repo_of(&[(TM, TASKS_JSON)]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), TM, out.path(), &[]);
    let log = o.expect_code(0);
    assert!(
        log.contains("task 7 waits for deferred task 6, so it is not run either"),
        "{log}"
    );
    // The units that ran, in an order their dependencies allow.
    let order = read(&out.path().join("order"));
    let ran: Vec<&str> = order.lines().collect();
    let mut sorted = ran.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["2.1", "2.2", "3", "5"], "{order}");
    let at = |id: &str| ran.iter().position(|r| *r == id).unwrap();
    assert!(at("2.1") < at("2.2") && at("2.2") < at("3"), "{order}");
    // The statuses are in the committed file, and only they changed.
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{TM}")]),
        tasks_json_written()
    );
    assert_eq!(read(&dir.path().join(TM)), tasks_json_written());
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    for id in ["2.1", "2.2", "3", "5"] {
        assert_eq!(
            read(&dir.path().join(format!("done/{id}.txt"))),
            format!("{id}\n")
        );
    }
    // testStrategy and the parent task reach the prompt.
    let prompt = read(&out.path().join("prompt-2.1.md"));
    for want in [
        "Test strategy:\nunit tests for the user model",
        "Part of task 2: Models — the models",
        "Priority: high",
        &format!("Do not edit {TM}"),
    ] {
        assert!(prompt.contains(want), "{want:?} not in {prompt}");
    }
    // Each round commit writes the statuses of the units it completed.
    let rounds = git(dir.path(), &["log", "--format=%H %s", "--reverse"]);
    let first = rounds
        .lines()
        .find(|l| l.contains("dagexec: round 1"))
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let diff = git(dir.path(), &["show", "--format=", "-U0", first, "--", TM]);
    assert!(
        diff.contains(r#""title": "User model", "status": "done""#),
        "{diff}"
    );
    assert!(
        !diff.contains(r#""title": "API", "status": "done""#),
        "{diff}"
    );
}

/// Taskmaster declares no files, so nothing keeps two tasks apart: both run in one round,
/// both change one file, and the second to integrate — whose patch no longer applies — is
/// retried from the integrated tree; both changes land.
#[test]
fn taskmaster_tasks_changing_one_undeclared_file_both_land() {
    let json = r#"{"tasks": [{"id": 1, "title": "a", "status": "pending"}, {"id": 2, "title": "b", "status": "pending"}]}"#;
    let dir = repo_of(&[(TM, json), ("shared.txt", "start\n")]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), TM, out.path(), &[("SHARED", "shared.txt")]);
    let said = o.expect_code(0);
    // The conflict names its way out: Taskmaster declares no files, `overlap: merge` merges.
    assert!(
        said.contains("  note: task 2 declares no files, so it ran beside the tasks that changed shared.txt; `overlap: merge` (`--overlap merge`) merges such changes three-way, and a conflict there is a rebase that uses no attempt\n"),
        "{said}"
    );
    let shared = read(&dir.path().join("shared.txt"));
    let mut lines: Vec<&str> = shared.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["1", "2", "start"], "{shared}");
    let order = read(&out.path().join("order"));
    assert_eq!(order.lines().count(), 3, "one task ran twice: {order}");
    let written = git(dir.path(), &["show", &format!("HEAD:{TM}")]);
    assert_eq!(written, json.replace("\"pending\"", "\"done\""));
}

/// A person edits tasks.json while the run goes on: the edit stays in the work tree, no
/// commit holds it, the committed file gets the statuses; the next run refuses to start
/// until the edit is committed.
#[test]
fn a_persons_edit_of_tasks_json_during_a_run_is_neither_committed_nor_lost() {
    let dir = repo_of(&[(TM, TASKS_JSON)]);
    let out = tempfile::tempdir().unwrap();
    let edited = TASKS_JSON.replace("Old idea", "Old idea (mine)");
    let edit_file = out.path().join("edited.json");
    std::fs::write(&edit_file, &edited).unwrap();
    let edit = format!("cp '{}' {TM}", edit_file.display());
    let o = run(
        dir.path(),
        TM,
        out.path(),
        &[("MEANWHILE_ON", "2.1"), ("MEANWHILE", &edit)],
    );
    let log = o.expect_code(0);
    // What committing the edit as it is would undo, and how to keep it.
    assert!(
        log.contains(&format!("{TM} in your work tree is an edit made during the run, left uncommitted; it does not mark done 2.1, 2.2, 3, 5 that this run completed and committed. Committing your tasks.json as it is would undo that (the next run runs them again): set them done in it first (`task-master set-status --id=2.1,2.2,3,5 --status=done`), then commit it.")),
        "{log}"
    );
    let history = git(dir.path(), &["log", "-p", "--format=%s", "--", TM]);
    assert!(!history.contains("(mine)"), "{history}");
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{TM}")]),
        tasks_json_written()
    );
    assert_eq!(read(&dir.path().join(TM)), edited);
    let again = run(dir.path(), TM, out.path(), &[]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_ne!(again.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("error: {TM} has uncommitted changes (modified)")),
        "{err}"
    );
}

/// validate, status, graph, prompt and simulate read tasks.json and write nothing.
#[test]
fn the_read_only_commands_read_a_taskmaster_plan_without_writing() {
    let dir = repo_of(&[(TM, TASKS_JSON)]);
    let o = exec(dir.path(), &["--plan", TM, "validate"]);
    let text = o.expect_code(0);
    assert!(text.contains("waits for deferred task 6"), "{text}");
    let o = exec(dir.path(), &["--plan", TM, "status"]);
    assert!(o.expect_code(0).contains("2.1 User model"), "{}", o.text());
    let o = exec(dir.path(), &["--plan", TM, "graph"]);
    assert!(o.expect_code(0).contains("2.2: Post model"), "{}", o.text());
    // `prompt` takes the list's own ID, as `status` shows it: a subtask's too.
    let o = exec(dir.path(), &["--plan", TM, "prompt", "3"]);
    assert!(
        o.expect_code(0).contains("curl the endpoints"),
        "{}",
        o.text()
    );
    let o = exec(dir.path(), &["--plan", TM, "prompt", "2.1"]);
    assert!(
        o.expect_code(0).contains("unit tests for the user model"),
        "{}",
        o.text()
    );
    let o = exec(dir.path(), &["--plan", TM, "simulate", "--jobs", "2"]);
    o.expect_code(0);
    assert_eq!(git(dir.path(), &["status", "--porcelain", "--ignored"]), "");
    // A broken file: its JSON path and the task.
    std::fs::write(
        dir.path().join(TM),
        r#"{"tasks": [{"id": 1, "title": "a", "dependencies": [9]}]}"#,
    )
    .unwrap();
    let o = exec(dir.path(), &["--plan", TM, "validate"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{TM}: tasks[0].dependencies[0]: task 1 depends on 9, which is not a task in this file"
        )),
        "{err}"
    );
}

/// The real Taskmaster files of the fixtures validate.
#[test]
fn real_taskmaster_files_validate() {
    for f in [
        "ecommerce-duplicate-subtask-ids.json",
        "oraclepack-done-parents.json",
        "resourcer-tagged.json",
        "scrumpoker-plain.json",
        "tajdin-tagged.json",
    ] {
        let text = read(&manifest().join("tests/fixtures/taskmaster").join(f));
        let dir = repo_of(&[(TM, &text)]);
        let o = exec(dir.path(), &["--plan", TM, "validate"]);
        assert_eq!(o.status.code(), Some(0), "{f}: {}", o.text());
    }
}

const KIRO: &str = ".kiro/specs/notes/tasks.md";

/// A cc-sdd spec: 1.1 first; 2.1 and 2.2 `(P)` but sharing a boundary file; 2.3 optional; 3.1
/// depends on 2.1 explicitly.
const KIRO_MD: &str = "# Implementation Plan

- [ ] 1. Foundation
- [ ] 1.1 Set up the notes module
  - Create the module skeleton
  - _Requirements: 1.1_

- [ ] 2. Core
- [ ] 2.1 (P) Add note creation
  - _Requirements: 2.1_
  - _Boundary: NotesService (shared.txt)_
- [ ] 2.2 (P) Add note listing
  - _Requirements: 2.2_
  - _Boundary: shared.txt_
- [ ]* 2.3 Property tests for notes
  - _Requirements: 2.1_

- [ ] 3. Wiring
- [ ] 3.1 Wire the CLI
  - _Depends: 2.1_
  - _Requirements: 3.1_
";

#[test]
fn a_kiro_spec_runs_to_the_end_ticked_with_its_requirements_in_the_prompt() {
    let dir = repo_of(&[
        (KIRO, KIRO_MD),
        (
            ".kiro/specs/notes/requirements.md",
            "# Requirements\n\n1.1 notes exist\n",
        ),
        (".kiro/specs/notes/design.md", "# Design\n"),
        ("shared.txt", "start\n"),
    ]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), KIRO, out.path(), &[("SHARED", "shared.txt")]);
    let log = o.expect_code(0);
    assert!(log.contains("optional tasks not run: 2.3"), "{log}");
    // Every unit ran once: the shared boundary file kept 2.1 and 2.2 apart (no retry).
    let order = read(&out.path().join("order"));
    let ran: Vec<&str> = order.lines().collect();
    assert_eq!(ran.len(), 4, "{order}");
    let at = |id: &str| ran.iter().position(|r| *r == id).unwrap();
    assert!(
        at("1.1") < at("2.1") && at("1.1") < at("2.2") && at("2.2") < at("3.1"),
        "{order}"
    );
    // Ticked in the committed tasks.md, majors with their subtasks; the optional one not.
    let ticked = KIRO_MD
        .replace("- [ ] 1", "- [x] 1")
        .replace("- [ ] 2", "- [x] 2")
        .replace("- [ ] 3", "- [x] 3");
    assert!(ticked.contains("- [ ]* 2.3"));
    assert_eq!(git(dir.path(), &["show", &format!("HEAD:{KIRO}")]), ticked);
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    let prompt = read(&out.path().join("prompt-2.1.md"));
    for want in [
        ".kiro/specs/notes/requirements.md",
        ".kiro/specs/notes/design.md",
        "Requirements: 2.1 (see the spec's requirements.md)",
        "Boundary: NotesService (shared.txt)",
        "Part of task 2: Core",
    ] {
        assert!(prompt.contains(want), "{want:?} not in {prompt}");
    }
}

/// cc-sdd's `_Boundary:_` is a scope, not a promise to change a file: a worker that completes
/// the task without touching `routes/index.js` completes it at its first attempt (no spot
/// check of the boundary), and a change inside the boundary is not an unexpected file.
#[test]
fn a_kiro_boundary_path_is_a_scope_no_file_must_change() {
    let md = "- [ ] 1. Serve pages as Markdown
  - _Boundary: PageMarkdownRoute, routes/index.js_
              - [ ] 2. Say what changed
  - _Boundary: done/2.txt_
";
    let dir = repo_of(&[(KIRO, md), ("routes/index.js", "// routes\n")]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), KIRO, out.path(), &[]);
    let log = o.expect_code(0);
    assert_eq!(read(&out.path().join("order")), "1\n2\n", "{log}");
    assert!(!log.contains("(to modify)"), "{log}");
    // Task 1 changed done/1.txt, outside its boundary: said; task 2 changed its own.
    assert!(log.contains("unexpected file changed: done/1.txt"), "{log}");
    assert!(
        !log.contains("unexpected file changed: done/2.txt"),
        "{log}"
    );
    let prompt = read(&out.path().join("prompt-1.md"));
    assert!(
        prompt.contains("Files to modify: (none)\nFiles it may change (its scope; none of them has to change): routes/index.js"),
        "{prompt}"
    );
}

/// A Kiro spec's errors name the line and the task; a boundary out of the repository too; a
/// cycle the `_Depends:_` lines make (one on a later task alone outranks the numbers' order).
#[test]
fn a_broken_kiro_spec_is_refused_at_its_line() {
    let dir = repo_of(&[(
        KIRO,
        "- [ ] 1. A\n- [ ] 1.1 B\n  - _Boundary: ../outside.txt_\n- [ ] 2. C\n  - _Depends: 1.1_\n- [ ] 3. D\n  - _Depends: 4_\n- [ ] 4. E\n  - _Depends: 3_\n",
    )]);
    let o = exec(dir.path(), &["--plan", KIRO, "validate"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{KIRO}:2: task 1.1 names the file \"../outside.txt\""
        )),
        "{err}"
    );
    let dir = repo_of(&[(
        KIRO,
        "- [ ] 1. A\n- [ ] 2. C\n  - _Depends: 3_\n- [ ] 3. D\n  - _Depends: 2_\n",
    )]);
    let o = exec(dir.path(), &["--plan", KIRO, "validate"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains(&format!("{KIRO}:")) && err.contains("cycle: ") && err.contains("2 → 3 → 2"),
        "{err}"
    );
}

/// The real Kiro and cc-sdd specs of the fixtures validate.
#[test]
fn real_kiro_specs_validate() {
    for d in [
        "cc-sdd-rag-backend",
        "cc-sdd-photo-albums",
        "kiro-game-rules",
        "kiro-warband",
    ] {
        let text = read(
            &manifest()
                .join("tests/fixtures/kiro")
                .join(d)
                .join("tasks.md"),
        );
        let dir = repo_of(&[(KIRO, &text)]);
        let o = exec(dir.path(), &["--plan", KIRO, "validate"]);
        assert_eq!(o.status.code(), Some(0), "{d}: {}", o.text());
    }
}

/// The Action's rounds on a Taskmaster plan, job by job as workflow runs do them (the shared
/// lab): the same rounds as locally, statuses written back on the branch.
#[test]
fn the_action_runs_a_taskmaster_plan_and_writes_its_statuses_back() {
    let out = tempfile::tempdir().unwrap();
    let lab = lab::lab()
        .file(TM, TASKS_JSON)
        .worker(WORKER)
        .branch("dagexec/tm")
        .env("DAGEXEC_PLAN", TM)
        .env("OUT", out.path())
        .start();
    rounds_to_the_end(&lab);
    assert_eq!(lab.branch_file(TM), tasks_json_written());
    for id in ["2.1", "2.2", "3", "5"] {
        assert_eq!(
            lab.branch_file(&format!("done/{id}.txt")),
            format!("{id}\n")
        );
    }
    lab.gh.assert_clean();
}

/// Drives the lab's Action round by round until no round is dispatched any more.
fn rounds_to_the_end(lab: &lab::Lab) {
    let mut runs = 0;
    loop {
        let dispatched = lab.dispatches();
        let lab::Round { finalized, .. } = lab.round(300 + runs);
        let Some((ok, log)) = finalized else { break };
        assert!(ok, "finalize: {log}");
        runs += 1;
        assert!(runs < 10, "more rounds than the DAG has");
        if lab.dispatches() == dispatched {
            break;
        }
    }
}

/// The Action runs a Kiro spec round by round as it runs a Taskmaster one: each round commit
/// on the branch ticks what it completed, the optional task stays unticked.
#[test]
fn the_action_runs_a_kiro_spec_and_ticks_its_tasks_md() {
    let out = tempfile::tempdir().unwrap();
    let lab = lab::lab()
        .file(KIRO, KIRO_MD)
        .file(".kiro/specs/notes/requirements.md", "# Requirements\n")
        .file("shared.txt", "start\n")
        .worker(WORKER)
        .branch("dagexec/kiro")
        .env("DAGEXEC_PLAN", KIRO)
        .env("SHARED", "shared.txt")
        .env("OUT", out.path())
        .start();
    rounds_to_the_end(&lab);
    let ticked = KIRO_MD
        .replace("- [ ] 1", "- [x] 1")
        .replace("- [ ] 2", "- [x] 2")
        .replace("- [ ] 3", "- [x] 3");
    assert_eq!(lab.branch_file(KIRO), ticked);
    for id in ["1.1", "2.1", "2.2", "3.1"] {
        assert_eq!(
            lab.branch_file(&format!("done/{id}.txt")),
            format!("{id}\n")
        );
    }
    lab.gh.assert_clean();
}

/// Without `--plan`, a repository with no `.design/` plan and exactly one task list in its
/// usual place runs that list; with two, `.design/plan.json` stays the plan looked for.
#[test]
fn without_plan_the_one_task_list_in_its_usual_place_is_the_plan() {
    let dir = repo_of(&[(TM, TASKS_JSON)]);
    let o = exec(dir.path(), &["status"]);
    assert!(o.expect_code(0).contains("2.1 User model"), "{}", o.text());
    let dir = repo_of(&[(TM, TASKS_JSON), (KIRO, KIRO_MD)]);
    let o = exec(dir.path(), &["status"]);
    assert_ne!(o.status.code(), Some(0), "{}", o.text());
    assert!(o.text().contains(".design/plan.json"), "{}", o.text());
    // A plan of dagexec's own wins over any task list.
    let plan = r#"{"schemaVersion": 2, "goal": "g", "tasks": [{"subject": "own task", "status": "pending", "blockedBy": []}]}"#;
    let dir = repo_of(&[(TM, TASKS_JSON), (".design/plan.json", plan)]);
    let o = exec(dir.path(), &["status"]);
    assert!(o.expect_code(0).contains("own task"), "{}", o.text());
}

/// A person edits a Kiro tasks.md during the run: kept out of every commit, left in the work
/// tree; the committed tasks.md is ticked.
#[test]
fn a_persons_edit_of_a_kiro_tasks_md_during_a_run_is_neither_committed_nor_lost() {
    let dir = repo_of(&[(KIRO, KIRO_MD), ("shared.txt", "start\n")]);
    let out = tempfile::tempdir().unwrap();
    let note = "<!-- a note of mine -->";
    let edit = format!("printf '%s\\n' '{note}' >> {KIRO}");
    let o = run(
        dir.path(),
        KIRO,
        out.path(),
        &[
            ("MEANWHILE_ON", "1.1"),
            ("MEANWHILE", &edit),
            ("SHARED", "shared.txt"),
        ],
    );
    o.expect_code(0);
    let history = git(dir.path(), &["log", "-p", "--format=%s", "--", KIRO]);
    assert!(!history.contains(note), "{history}");
    let committed = git(dir.path(), &["show", &format!("HEAD:{KIRO}")]);
    assert!(committed.contains("- [x] 3.1 Wire the CLI"), "{committed}");
    assert_eq!(read(&dir.path().join(KIRO)), format!("{KIRO_MD}{note}\n"));
}

/// The eager schedule (a task starts when its blockers land) writes the statuses back in each
/// batch's commit as the rounds do.
#[test]
fn an_eager_run_of_a_taskmaster_plan_writes_its_statuses_back() {
    let dir = repo_of(&[(TM, TASKS_JSON)]);
    let out = tempfile::tempdir().unwrap();
    let o = run_with(dir.path(), TM, out.path(), &[], &["--schedule", "eager"]);
    o.expect_code(0);
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{TM}")]),
        tasks_json_written()
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// Issue 32 §3: a plan error of a Kiro list names the list's line and task ID, never the
/// generated plan's index (`task 0 metadata.files.scope[0]`) nor a temporary path.
#[test]
fn a_kiro_plan_error_names_the_lists_task_never_a_plan_index() {
    let tasks = "# Implementation Plan\n\n- [ ] 1. Build the model\n  - _Boundary: src/models/user.py_\n\n- [ ] 2. Test it\n  - _Boundary: tests/test_user.py_\n";
    let dir = repo_of(&[(".kiro/specs/x/tasks.md", tasks), ("outside/keep", "")]);
    std::os::unix::fs::symlink("outside", dir.path().join("src")).unwrap();
    let o = exec(
        dir.path(),
        &["--plan", ".kiro/specs/x/tasks.md", "validate"],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(".kiro/specs/x/tasks.md:3: task 1 names the file \"src/models/user.py\", which goes through src, a symbolic link to outside"),
        "{err}"
    );
    assert!(!err.contains("task 0"), "{err}");
    assert!(!err.contains("/tmp"), "{err}");
}

/// A Taskmaster list that gives nothing to run (no task in its tag, or only tasks the team
/// set aside or cancelled) is refused naming the list and why, never the generated plan (a
/// temporary file for `validate`) nor `/design`, which a Taskmaster user does not run.
#[test]
fn a_taskmaster_list_with_nothing_to_run_names_the_list_and_why() {
    let cases = [
        (r#"{"master": {"tasks": []}}"#, "it lists no task"),
        (
            r#"{"master": {"tasks": [
              {"id": 1, "title": "a", "status": "blocked", "dependencies": []},
              {"id": 2, "title": "b", "status": "deferred", "dependencies": [],
               "subtasks": [{"id": 1, "title": "b1", "status": "pending", "dependencies": []}]},
              {"id": 3, "title": "c", "status": "cancelled", "dependencies": []}
            ]}}"#,
            "task 1 (blocked), task 2.1 (deferred), task 3 (cancelled)",
        ),
        (
            r#"{"master": {"tasks": [
              {"id": 1, "title": "a", "status": "review", "dependencies": []},
              {"id": 2, "title": "b", "status": "pending", "dependencies": [1]}
            ]}}"#,
            "task 1 (review), and 1 task(s) waiting for them",
        ),
    ];
    for (text, why) in cases {
        let dir = repo_of(&[(TM, text)]);
        for cmd in [&["validate"][..], &["run", "--worker", "true"][..]] {
            let o = exec(dir.path(), &[&["--plan", TM][..], cmd].concat());
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert!(
                err.contains(&format!("{TM} (tag master): no task to run: {why}")),
                "{err}"
            );
            assert!(
                !err.contains(".dagexec") && !err.contains("/tmp") && !err.contains("/design"),
                "{err}"
            );
        }
        assert_eq!(git(dir.path(), &["status", "--porcelain", "--ignored"]), "");
    }
}
