//! `--plan specs/NNN-feature/tasks.md`: a Spec Kit task list run, validated, shown and drawn
//! end to end, with the real binary, real git repositories and a scripted worker.

use crate::common::lab::{self, text};
use crate::common::local::{Ran, exec, local};
use crate::common::{commit_new, dagexec, git, manifest};

use std::path::Path;

const TASKS: &str = "specs/003-todo/tasks.md";

/// A repository holding the 003-todo feature folder (and the Makefile its ticked T001 made).
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let feature = dir.path().join("specs/003-todo");
    std::fs::create_dir_all(&feature).unwrap();
    for f in ["tasks.md", "spec.md", "plan.md"] {
        std::fs::copy(
            manifest().join("tests/fixtures/speckit/003-todo").join(f),
            feature.join(f),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("Makefile"), "all:\n").unwrap();
    commit_new(dir.path());
    dir
}

/// The worker: keeps its prompt, appends a line to every file the prompt names, and
/// completes — except for the task whose ID is in $FAIL. On the task $MEANWHILE_ON it first
/// runs $MEANWHILE in the user's repository $MAIN (what a user does during a run); with $TICK
/// (a tasks.md path) it ticks its own line there, as Spec Kit's `/implement` tells agents to.
const WORKER: &str = r#"#!/bin/sh
id=$(sed -n 's/^## Task: \(T[0-9]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE")
cp "$DAGEXEC_PROMPT_FILE" "$OUT/prompt-$id.md"
if [ "$id" = "$FAIL" ]; then echo "FAILED: $id cannot be done"; exit 0; fi
if [ -n "$MEANWHILE" ] && [ "$id" = "$MEANWHILE_ON" ]; then
  (cd "$MAIN" && sh -c "$MEANWHILE") || { echo "FAILED: meanwhile"; exit 0; }
fi
for f in $(sed -n 's/^Files to create: //p; s/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' ' '); do
  [ "$f" = "(none)" ] && continue
  mkdir -p "$(dirname "$f")"
  echo "$id" >> "$f"
done
if [ -n "$TICK" ]; then
  sed "s/^- \[ \] $id /- [x] $id /" "$TICK" > "$TICK.new" && mv "$TICK.new" "$TICK"
fi
echo "COMPLETED: $id done"
"#;

/// [`WORKER`] written to `out`, and the command line that runs it.
fn worker(out: &Path) -> String {
    let path = out.join("worker.sh");
    std::fs::write(&path, WORKER).unwrap();
    format!("sh '{}'", path.display())
}

fn run(dir: &Path, out: &Path, fail: &str) -> Ran {
    run_with(dir, out, &[("FAIL", fail)])
}

/// A run of `--plan TASKS` with the worker's environment `env` (see [`WORKER`]).
fn run_with(dir: &Path, out: &Path, env: &[(&str, &str)]) -> Ran {
    run_plan(dir, TASKS, out, env)
}

/// `--plan tasks run` with four jobs, 20 s an attempt, [`WORKER`] (kept in `out`) and its
/// environment: `$OUT`, `$MAIN` (the repository) and `env`.
fn run_plan(dir: &Path, tasks: &str, out: &Path, env: &[(&str, &str)]) -> Ran {
    let run = local(dir)
        .global(&["--plan", tasks])
        .jobs(4)
        .timeout("20s")
        .worker(&worker(out))
        .env("OUT", out)
        .env("MAIN", dir);
    env.iter().fold(run, |run, (k, v)| run.env(k, v)).run()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The T-ids a commit's message lists and the ones its tasks.md change ticks.
fn round_ticks(dir: &Path, sha: &str) -> (Vec<String>, Vec<String>) {
    let body = git(dir, &["show", "-s", "--format=%b", sha]);
    let mut listed: Vec<String> = body
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .filter_map(|s| s.split(' ').next())
        .map(String::from)
        .collect();
    let diff = git(dir, &["show", "--format=", "-U0", sha, "--", TASKS]);
    let mut ticked: Vec<String> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("+- [x] "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    listed.sort();
    ticked.sort();
    (listed, ticked)
}

#[test]
fn a_tasks_md_runs_to_the_end_ticked_one_commit_per_round() {
    let dir = repo();
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), out.path(), "");
    let log = o.expect_code(0);
    assert!(
        !log.contains("uncommitted changes"),
        "the generated plan is not the user's change: {log}"
    );
    // Every task ticked, nothing else in tasks.md changed.
    let md = read(&dir.path().join(TASKS));
    let fixture = read(&manifest().join("tests/fixtures/speckit/003-todo/tasks.md"));
    assert!(!md.contains("- [ ] T"), "{md}");
    assert_eq!(md, fixture.replace("- [ ] T", "- [x] T"));
    // The rounds the rules give: T002 | T003 T004 | T005 T007 | T006 | T008.
    let subjects = git(dir.path(), &["log", "--reverse", "--format=%H %s"]);
    let rounds: Vec<&str> = subjects
        .lines()
        .filter(|l| l.contains(" dagexec: round "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(rounds.len(), 5, "{subjects}");
    let mut per_round = Vec::new();
    for sha in &rounds {
        let (listed, ticked) = round_ticks(dir.path(), sha);
        assert_eq!(listed, ticked, "round commit {sha} ticks its own tasks");
        per_round.push(ticked.join(" "));
    }
    assert_eq!(
        per_round,
        ["T002", "T003 T004", "T005 T007", "T006", "T008"]
    );
    assert!(
        subjects
            .lines()
            .last()
            .unwrap()
            .ends_with("dagexec: all 8 tasks completed"),
        "{subjects}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    assert!(
        dir.path()
            .join("specs/003-todo/.dagexec/plan.done.json")
            .is_file()
    );
    // The worker saw the feature's documents, its phase's goal and independent test.
    let prompt = read(&out.path().join("prompt-T006.md"));
    for want in [
        "specs/003-todo/spec.md",
        "specs/003-todo/plan.md",
        "Goal: Add a todo from the command line",
        "Independent Test: `todo add x` then `todo list` shows x",
        "Files to create: src/add.sh",
    ] {
        assert!(prompt.contains(want), "{want:?} not in {prompt}");
    }
    assert_eq!(read(&dir.path().join("README.md")), "T008\n");
    // Run again: everything is ticked, nothing to do.
    let again = run(dir.path(), out.path(), "");
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(text(&again).contains("nothing to do"), "{}", text(&again));
}

#[test]
fn state_lives_next_to_tasks_md_and_survives_an_edit() {
    let dir = repo();
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), out.path(), "T004");
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    let status = |dir: &Path| {
        let o = exec(dir, &["--plan", TASKS, "status", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["subject"].as_str().unwrap().split(' ').next().unwrap(),
                    r["status"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let before = status(dir.path());
    assert_eq!(
        &before[..4],
        [
            "T001 completed",
            "T002 completed",
            "T003 completed",
            "T004 failed"
        ]
    );
    let md = read(&dir.path().join(TASKS));
    assert!(
        md.contains("- [x] T003") && md.contains("- [ ] T004"),
        "{md}"
    );
    // Edit tasks.md: a new task, and T007's text changed; the state of the others stays.
    let edited = md
        .replace(
            "- [ ] T004 [P] Create config loader in src/config.sh",
            "- [ ] T004 [P] Create config loader in src/config.sh\n- [ ] T009 [P] Add a logger in src/log.sh",
        )
        .replace("Implement list command", "Implement the list command");
    std::fs::write(dir.path().join(TASKS), edited).unwrap();
    // dagexec ticks the committed tasks.md: a run starts once the edit is committed.
    git(dir.path(), &["commit", "-qm", "a new task", "--", TASKS]);
    let after = status(dir.path());
    assert_eq!(
        after,
        [
            "T001 completed",
            "T002 completed",
            "T003 completed",
            "T004 failed",
            "T009 pending",
            "T005 skipped",
            "T006 skipped",
            // Reworded, it starts afresh — and waits for the failed T004 like the others.
            "T007 skipped",
            "T008 skipped"
        ]
    );
    // `retry` writes the generated plan: T004 and what it skipped are pending again.
    let o = exec(dir.path(), &["--plan", TASKS, "retry", "T004"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let retried = status(dir.path());
    assert_eq!(
        &retried[3..],
        [
            "T004 pending",
            "T009 pending",
            "T005 pending",
            "T006 pending",
            "T007 pending",
            "T008 pending"
        ]
    );
    // `graph` draws the derived DAG with the IDs.
    let g = exec(dir.path(), &["--plan", TASKS, "graph"]);
    let g = String::from_utf8_lossy(&g.stdout);
    assert!(g.contains("T009: Add a logger in src/log.sh"), "{g}");
    assert!(g.contains("t4 --> t5"), "T005 waits for the new T009: {g}");
    // The run resumes on the edited file and ends with all of it ticked.
    let o = run(dir.path(), out.path(), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = read(&dir.path().join(TASKS));
    assert!(
        !md.contains("- [ ] T") && md.contains("- [x] T009 [P] Add a logger"),
        "{md}"
    );
    assert_eq!(
        read(&dir.path().join("src/store.sh")),
        "T003\n",
        "T003 ran once"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_broken_tasks_md_is_refused_with_its_line_and_a_hint() {
    let dir = repo();
    let path = dir.path().join(TASKS);
    let md = read(&path).replace("(depends on T003)", "(depends on T003, T077)");
    std::fs::write(&path, md).unwrap();
    for cmd in [&["validate"][..], &["run", "--dry-run"], &["graph"]] {
        let o = dagexec(dir.path())
            .args(["--plan", TASKS])
            .args(cmd)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(
                "error: specs/003-todo/tasks.md:34: task T006 depends on T077, which is not a task in this file\n  hint: fix the ID or drop it"
            ),
            "{err}"
        );
    }
    assert!(!dir.path().join("specs/003-todo/.dagexec").exists());
}

/// Every line a user reads names a task of a task list by its own ID (`T006`), never by the
/// plan index behind it: the run's progress, the setup report, the dry run, the graph, the
/// simulation and a prompt's dependency results.
#[test]
fn every_line_a_user_reads_names_a_task_by_its_task_list_id() {
    let dir = repo();
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), out.path(), "T007");
    let log = text(&o);
    for line in [
        "Round 1: starting 1 task(s): T002\n",
        "Round 2: starting 2 task(s): T003, T004\n",
        "  task T003 (Create storage layer in src/store.sh): completed",
        "  task T007 (Implement list command in src/list.sh) attempt 1 failed: T007 cannot be done",
        "- Task T003: Create storage layer in src/store.sh — completed",
        "  skipped because a dependency failed or was blocked: T008\n",
        "Skipped: 1 — T008 Update README.md with usage",
    ] {
        assert!(log.contains(line), "{line:?} missing from:\n{log}");
    }
    // T005's prompt names its blockers' results by their IDs.
    let prompt = read(&out.path().join("prompt-T005.md"));
    assert!(
        prompt.contains("- Task T003: T003 done\n- Task T004: T004 done"),
        "{prompt}"
    );

    let dir = repo();
    let o = exec(dir.path(), &["--plan", TASKS, "validate", "--no-checks"]);
    let setup = String::from_utf8_lossy(&o.stdout);
    assert!(setup.contains("  depth 2: T003, T004\n"), "{setup}");
    let o = exec(dir.path(), &["--plan", TASKS, "run", "--dry-run"]);
    let dry = String::from_utf8_lossy(&o.stdout);
    assert!(
        dry.contains("T003 Create storage layer in src/store.sh | T004 Create config loader"),
        "{dry}"
    );
    let o = exec(dir.path(), &["--plan", TASKS, "graph"]);
    let graph = String::from_utf8_lossy(&o.stdout);
    assert!(
        graph.contains(
            "t5[\"T006: Implement add command in src/add.sh (depends on T003)<br/>pending\"]"
        ),
        "{graph}"
    );
    let o = exec(dir.path(), &["--plan", TASKS, "simulate", "--gantt"]);
    let sim = String::from_utf8_lossy(&o.stdout);
    assert!(sim.contains("T006 Implement add command"), "{sim}");
}

#[test]
fn validate_and_prompt_read_a_tasks_md_without_writing() {
    let dir = repo();
    let md = read(&dir.path().join(TASKS)).replace(
        "- [ ] T008 Update README.md with usage",
        "- [ ] T008 Update README.md with usage\n- [ ] T010 Add validation and error handling",
    );
    std::fs::write(dir.path().join(TASKS), md).unwrap();
    let o = exec(dir.path(), &["--plan", TASKS, "validate", "--no-checks"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: specs/003-todo/tasks.md:51: task T010 names no file"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("Tasks: 9"));
    // The task goes by its own ID, as `status` shows it.
    let o = exec(dir.path(), &["--plan", TASKS, "prompt", "T006"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let prompt = String::from_utf8_lossy(&o.stdout);
    assert!(
        prompt.contains("## Task: T006 Implement add command in src/add.sh"),
        "{prompt}"
    );
    assert!(!dir.path().join("specs/003-todo/.dagexec").exists());
    assert_eq!(
        git(dir.path(), &["status", "--porcelain"]),
        " M specs/003-todo/tasks.md\n"
    );
}

#[test]
fn a_task_that_changes_no_file_is_ticked_in_its_round_commit() {
    let dir = repo();
    let path = dir.path().join(TASKS);
    let md = read(&path).replace(
        "- [ ] T008 Update README.md with usage",
        "- [ ] T008 Run quickstart.md validation",
    );
    std::fs::write(&path, &md).unwrap();
    git(dir.path(), &["commit", "-qam", "T008 only checks"]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), out.path(), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("task T008 names no file"), "{}", text(&o));
    let subjects = git(dir.path(), &["log", "--format=%H %s"]);
    let last_round = subjects
        .lines()
        .find(|l| l.contains(" dagexec: round "))
        .unwrap();
    assert!(
        last_round.ends_with("round 5 — 1/1 tasks (8/8 overall)"),
        "{subjects}"
    );
    let sha = last_round.split(' ').next().unwrap();
    assert_eq!(
        round_ticks(dir.path(), sha),
        (vec!["T008".to_string()], vec!["T008".to_string()])
    );
    assert!(!read(&path).contains("- [ ] T"));
}

/// The Action's rounds on a tasks.md, job by job as a workflow run does them (the way
/// action_rounds.rs drives them, without act), in the shared lab ([`crate::common::lab`]).
fn action_lab(prompts: &Path) -> lab::Lab {
    lab::lab()
        .fixture("specs/003-todo", "speckit/003-todo")
        .file("Makefile", "all:\n")
        .worker(WORKER)
        .branch("dagexec/todo")
        .env("DAGEXEC_PLAN", TASKS)
        .env("OUT", prompts)
        .start()
}

/// One workflow run, whose finalize must succeed; whether it asked for another.
fn round(lab: &lab::Lab, run_id: u64) -> bool {
    let dispatched = lab.dispatches();
    let lab::Round { finalized, .. } = lab.round(run_id);
    let Some((ok, log)) = finalized else {
        return false;
    };
    assert!(ok, "finalize: {log}");
    lab.dispatches() > dispatched
}

#[test]
fn the_action_runs_a_tasks_md_round_by_round_and_ticks_it() {
    let prompts = tempfile::tempdir().unwrap();
    let lab = action_lab(prompts.path());
    let mut runs = 0;
    while round(&lab, 200 + runs) {
        runs += 1;
        assert!(runs < 10, "more rounds than the DAG has");
    }
    let branch = "dagexec/todo";
    let md = git(&lab.origin, &["show", &format!("{branch}:{TASKS}")]);
    assert!(!md.contains("- [ ] T"), "{md}");
    let subjects = git(&lab.origin, &["log", "--reverse", "--format=%H %s", branch]);
    let rounds: Vec<&str> = subjects
        .lines()
        .filter(|l| l.contains(" dagexec: round "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(rounds.len(), 5, "{subjects}");
    let mut per_round = Vec::new();
    for sha in &rounds {
        let (listed, ticked) = round_ticks(&lab.origin, sha);
        assert_eq!(listed, ticked, "round commit {sha} ticks its own tasks");
        per_round.push(ticked.join(" "));
    }
    assert_eq!(
        per_round,
        ["T002", "T003 T004", "T005 T007", "T006", "T008"]
    );
    let files = git(&lab.origin, &["ls-tree", "-r", "--name-only", branch]);
    for f in ["src/add.sh", "README.md", "tests/add_test.sh"] {
        assert!(files.lines().any(|l| l == f), "{f} not in\n{files}");
    }
    lab.gh.assert_clean();
}

/// Four `[P]` tasks of one phase, in `specs/004-four/tasks.md`.
const FOUR: &str = "specs/004-four/tasks.md";
const FOUR_MD: &str = "# Tasks: Four\n\n## Phase 1: Setup\n\n- [ ] T001 [P] Create `a.txt`\n- [ ] T002 [P] Create `b.txt`\n- [ ] T003 [P] Create `c.txt`\n- [ ] T004 [P] Create `d.txt`\n";

/// A committed repository holding `files`.
fn repo_of(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    commit_new(dir.path());
    dir
}

/// The subjects of the round commits, oldest first.
fn round_subjects(dir: &Path, rev: &str) -> Vec<String> {
    git(dir, &["log", "--reverse", "--format=%s", rev])
        .lines()
        .filter(|l| l.starts_with("dagexec: round "))
        .map(String::from)
        .collect()
}

/// Spec Kit's `/implement` has each agent tick its own task in tasks.md: those edits are
/// dropped from the patches (with a warning), so four `[P]` tasks land in one round instead of
/// conflicting on tasks.md.
#[test]
fn workers_that_tick_their_own_line_all_land_in_one_round() {
    let dir = repo_of(&[(FOUR, FOUR_MD.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let o = run_plan(dir.path(), FOUR, out.path(), &[("TICK", FOUR)]);
    let log = o.expect_code(0);
    assert_eq!(
        round_subjects(dir.path(), "HEAD"),
        ["dagexec: round 1 — 4/4 tasks (4/4 overall)"],
        "{log}"
    );
    for id in ["T001", "T002", "T003", "T004"] {
        assert!(
            log.contains(&format!("warning: edited {FOUR} (the edit is discarded; dagexec ticks the task there when its work is committed)")),
            "{id}: {log}"
        );
    }
    let committed = git(dir.path(), &["show", &format!("HEAD:{FOUR}")]);
    assert_eq!(committed, FOUR_MD.replace("- [ ] T", "- [x] T"));
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// The same on the Action: the work job drops the worker's tick from its patch, finalize
/// commits the four tasks in one round and ticks them itself.
#[test]
fn on_the_action_workers_that_tick_their_own_line_all_land_in_one_round() {
    let prompts = tempfile::tempdir().unwrap();
    let lab = lab::lab()
        .file(FOUR, FOUR_MD)
        .worker(WORKER)
        .branch("dagexec/four")
        .env("DAGEXEC_PLAN", FOUR)
        .env("OUT", prompts.path())
        .env("TICK", FOUR)
        .start();
    let mut runs = 0;
    while round(&lab, 300 + runs) {
        runs += 1;
        assert!(runs < 4, "more rounds than the DAG has");
    }
    let branch = "dagexec/four";
    assert_eq!(
        round_subjects(&lab.origin, branch),
        ["dagexec: round 1 — 4/4 tasks (4/4 overall)"]
    );
    let md = git(&lab.origin, &["show", &format!("{branch}:{FOUR}")]);
    assert_eq!(md, FOUR_MD.replace("- [ ] T", "- [x] T"));
    lab.gh.assert_clean();
}

/// Ticking reads tasks.md as the parser does: a fence inside a comment stops nothing, a
/// commented-out task line is never ticked, a BOM before the first task line keeps the task.
#[test]
fn ticking_reads_tasks_md_as_the_parser_does() {
    let md = "\u{feff}- [ ] T001 Create `a.txt`\n<!--\nAn example, not a task:\n```\n- [ ] T009 Example\n-->\n<!--\n- [ ] T002 Create `old.txt`\n-->\n- [ ] T002 Create `b.txt`\n";
    let dir = repo_of(&[(FOUR, md.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let o = run_plan(dir.path(), FOUR, out.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        read(&dir.path().join("a.txt")),
        "T001\n",
        "the BOM's task ran"
    );
    let want = md
        .replace("\u{feff}- [ ] T001", "\u{feff}- [x] T001")
        .replace("\n- [ ] T002 Create `b.txt`", "\n- [x] T002 Create `b.txt`");
    assert_eq!(git(dir.path(), &["show", &format!("HEAD:{FOUR}")]), want);
    assert_eq!(read(&dir.path().join(FOUR)), want);
    let again = run_plan(dir.path(), FOUR, out.path(), &[]);
    assert!(text(&again).contains("nothing to do"), "{}", text(&again));
}

/// The ticked IDs of tasks.md at `rev`, and the IDs its committed generated plan records
/// completed (`plan` its path).
fn ticked_and_completed(dir: &Path, rev: &str, plan: &str) -> (Vec<String>, Vec<String>) {
    let md = git(dir, &["show", &format!("{rev}:{TASKS}")]);
    let ticked = md
        .lines()
        .filter_map(|l| l.strip_prefix("- [x] "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let plan: serde_json::Value =
        serde_json::from_str(&git(dir, &["show", &format!("{rev}:{plan}")])).unwrap();
    let ids = plan["specKit"]["tasks"].as_array().unwrap();
    let completed = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ids)
        .filter(|(t, _)| t["status"] == "completed")
        .map(|(_, id)| id["id"].as_str().unwrap().to_string())
        .collect();
    (ticked, completed)
}

/// Killed between the tick and the commit, then resumed (where a task that had completed
/// fails this time): the committed tasks.md ticks exactly the completed tasks.
#[test]
fn killed_between_the_tick_and_the_commit_the_resumed_run_ticks_exactly_the_completed() {
    let dir = repo();
    let out = tempfile::tempdir().unwrap();
    // Round 2 is T003 and T004; the run dies after ticking, before its commit.
    let o = run_with(
        dir.path(),
        out.path(),
        &[("DAGEXEC_FAILPOINT", "after-apply:2")],
    );
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    assert_eq!(
        git(dir.path(), &["status", "--porcelain", "--", TASKS]),
        "",
        "nothing is ticked before the commit"
    );
    let o = run(dir.path(), out.path(), "T003");
    let log = text(&o);
    assert_ne!(o.status.code(), Some(0), "{log}");
    let (ticked, completed) =
        ticked_and_completed(dir.path(), "HEAD", "specs/003-todo/.dagexec/plan.json");
    assert_eq!(ticked, completed, "{log}");
    assert!(ticked.contains(&"T004".to_string()) && !ticked.contains(&"T003".to_string()));
    assert_eq!(git(dir.path(), &["status", "--porcelain", "--", TASKS]), "");
}

/// The user edits tasks.md while the run goes on: the edit stays in the work tree, no
/// commit of dagexec holds it, and the committed tasks.md is ticked; the next run refuses to
/// start until the edit is committed.
#[test]
fn a_users_edit_of_tasks_md_during_a_run_is_neither_committed_nor_lost() {
    let dir = repo();
    let out = tempfile::tempdir().unwrap();
    let note = "<!-- a note of mine -->";
    let edit = format!("printf '%s\\n' '{note}' >> {TASKS}");
    let o = run_with(
        dir.path(),
        out.path(),
        &[("MEANWHILE_ON", "T002"), ("MEANWHILE", &edit)],
    );
    let log = o.expect_code(0);
    assert!(
        log.contains(&format!("{TASKS}: left as you changed it")),
        "{log}"
    );
    let history = git(dir.path(), &["log", "-p", "--format=%s", "--", TASKS]);
    assert!(!history.contains(note), "{history}");
    let fixture = read(&manifest().join("tests/fixtures/speckit/003-todo/tasks.md"));
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{TASKS}")]),
        fixture.replace("- [ ] T", "- [x] T")
    );
    assert_eq!(read(&dir.path().join(TASKS)), format!("{fixture}{note}\n"));
    let again = run(dir.path(), out.path(), "");
    let err = String::from_utf8_lossy(&again.stderr);
    assert_ne!(again.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "error: {TASKS} has uncommitted changes (modified)"
        )) && err.contains(&format!("git add {TASKS} && git commit")),
        "{err}"
    );
    assert_eq!(read(&dir.path().join(TASKS)), format!("{fixture}{note}\n"));
}

/// tasks.md made unreadable during a round (committed as bytes that are not UTF-8, or
/// deleted): every round is still committed, the tick is skipped with a warning naming the
/// file, and each task is attempted once.
#[test]
fn tasks_md_made_unreadable_during_a_round_still_commits_the_round() {
    for (meanwhile, why) in [
        (
            format!(
                "printf '\\377\\376 not text\\n' > {TASKS} && git commit -qm unreadable -- {TASKS}"
            ),
            "it is not UTF-8 text",
        ),
        (
            format!("git rm -q {TASKS} && git commit -qm deleted"),
            "the commit holds no such file (deleted?)",
        ),
    ] {
        let dir = repo();
        let out = tempfile::tempdir().unwrap();
        let o = run_with(
            dir.path(),
            out.path(),
            &[("MEANWHILE_ON", "T002"), ("MEANWHILE", &meanwhile)],
        );
        let log = text(&o);
        assert_eq!(o.status.code(), Some(0), "{meanwhile}: {log}");
        assert!(
            log.contains(&format!(
                "warning: {TASKS} is not ticked in this commit: {why}"
            )),
            "{log}"
        );
        assert_eq!(round_subjects(dir.path(), "HEAD").len(), 5, "{log}");
        let plan: serde_json::Value = serde_json::from_str(&git(
            dir.path(),
            &["show", "HEAD:specs/003-todo/.dagexec/plan.done.json"],
        ))
        .unwrap();
        let attempts: Vec<(u64, u64)> = plan["progress"]["dagexecAttempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["task"].as_u64().unwrap(), r["attempt"].as_u64().unwrap()))
            .collect();
        let mut sorted = attempts.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (1..8).map(|t| (t, 1)).collect::<Vec<_>>(),
            "one attempt each: {attempts:?}"
        );
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    }
}

/// A path no task may name is reported at its line in tasks.md with the task's ID, never
/// with the name of a temporary plan file.
#[test]
fn a_refused_path_names_the_tasks_md_line_and_the_task() {
    let dir = repo();
    let path = dir.path().join(TASKS);
    let md = read(&path).replace(
        "- [ ] T008 Update README.md with usage",
        "- [ ] T008 Update README.md with usage\n- [ ] T009 Harden `.git/config`\n- [ ] T010 Tidy `../x`",
    );
    std::fs::write(&path, md).unwrap();
    git(dir.path(), &["commit", "-qam", "bad paths"]);
    for cmd in [
        &["validate", "--no-checks"][..],
        &["run", "--worker", "true"],
    ] {
        let o = dagexec(dir.path())
            .args(["--plan", TASKS])
            .args(cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "error: {TASKS}:51: task T009 names the file \".git/config\", which points into .git/"
            )) && err.contains(&format!(
                "{TASKS}:52: task T010 names the file \"../x\", which must not contain `..`"
            )),
            "{err}"
        );
        assert!(!err.contains("/tmp") && !err.contains("plan.json"), "{err}");
    }
}

/// Two all-`[P]` phases of three: the plan joins them with one join (3 + 3 edges, not 9),
/// which no one is shown.
const SIX: &str = "specs/006-six/tasks.md";
const SIX_MD: &str = "# Tasks: Six\n\n## Phase 1: Setup\n\n- [ ] T001 [P] Create `a.txt`\n- [ ] T002 [P] Create `b.txt`\n- [ ] T003 [P] Create `c.txt`\n\n## Phase 2: Tests\n\n- [ ] T004 [P] Create `d.txt`\n- [ ] T005 [P] Create `e.txt`\n- [ ] T006 [P] Create `f.txt`\n";

/// Every commit message on `rev`'s history (subjects and bodies).
fn messages(dir: &Path, rev: &str) -> String {
    git(dir, &["log", "--format=%B", rev])
}

#[test]
fn a_phase_after_a_parallel_phase_runs_through_a_join_no_one_sees() {
    let dir = repo_of(&[(SIX, SIX_MD.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let o = run_plan(dir.path(), SIX, out.path(), &[]);
    let log = o.expect_code(0);
    assert!(log.contains("All 6 tasks completed."), "{log}");
    assert!(!log.contains("Phase 1: Setup done"), "{log}");
    assert_eq!(
        round_subjects(dir.path(), "HEAD"),
        [
            "dagexec: round 1 — 3/3 tasks (3/6 overall)",
            "dagexec: round 2 — 3/3 tasks (6/6 overall)"
        ],
        "{log}"
    );
    let all = messages(dir.path(), "HEAD");
    assert!(!all.contains("Setup done"), "{all}");
    assert!(all.contains("dagexec: all 6 tasks completed"), "{all}");
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{SIX}")]),
        SIX_MD.replace("- [ ] T", "- [x] T")
    );
    // T004's prompt gives the results of the tasks the join joins.
    let prompt = read(&out.path().join("prompt-T004.md"));
    for id in ["T001", "T002", "T003"] {
        assert!(
            prompt.contains(&format!("- Task {id}: {id} done")),
            "{id}: {prompt}"
        );
    }
    // The archived plan: six tasks, then the join, completed with its blockers.
    let done: serde_json::Value = serde_json::from_str(&read(
        &dir.path().join("specs/006-six/.dagexec/plan.done.json"),
    ))
    .unwrap();
    let tasks = done["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 7);
    assert_eq!(tasks[6]["join"], true);
    assert_eq!(tasks[6]["status"], "completed");
    assert!(tasks[..6].iter().all(|t| t.get("join").is_none()));
    let entries = done["progress"]["completedTasks"].as_array().unwrap();
    assert_eq!(entries.len(), 6, "the join did no work to record");
}

#[test]
fn a_failed_task_skips_the_next_phase_through_the_join_naming_itself() {
    let dir = repo_of(&[(SIX, SIX_MD.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let o = run_plan(dir.path(), SIX, out.path(), &[("FAIL", "T002")]);
    let log = text(&o);
    assert_ne!(o.status.code(), Some(0), "{log}");
    assert!(
        log.contains("skipped because a dependency failed or was blocked: T004, T005, T006"),
        "{log}"
    );
    assert!(!log.contains("Setup done"), "{log}");
    let plan: serde_json::Value =
        serde_json::from_str(&read(&dir.path().join("specs/006-six/.dagexec/plan.json"))).unwrap();
    for t in 3..6 {
        assert_eq!(plan["tasks"][t]["status"], "skipped");
        let result = plan["tasks"][t]["result"].as_str().unwrap();
        assert!(
            result.starts_with("Skipped: dependency task T002 (Create `b.txt`) failed"),
            "{result}"
        );
    }
    assert_eq!(plan["tasks"][6]["status"], "skipped");
    let status = exec(dir.path(), &["--plan", SIX, "status"]);
    let shown = text(&status);
    assert!(
        shown.contains("6 tasks: 0 pending, 2 completed, 1 failed, 3 skipped"),
        "{shown}"
    );
    assert!(!shown.contains("Setup done"), "{shown}");
    assert!(!messages(dir.path(), "HEAD").contains("Setup done"));
}

#[test]
fn killed_between_the_phases_the_resumed_run_goes_on_through_the_join() {
    let dir = repo_of(&[(SIX, SIX_MD.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let o = run_plan(
        dir.path(),
        SIX,
        out.path(),
        &[("DAGEXEC_FAILPOINT", "after-commit:1")],
    );
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    let o = run_plan(dir.path(), SIX, out.path(), &[]);
    let log = o.expect_code(0);
    assert!(log.contains("All 6 tasks completed."), "{log}");
    let rounds = round_subjects(dir.path(), "HEAD");
    assert_eq!(rounds.len(), 2, "{rounds:?}\n{log}");
    assert_eq!(rounds[1], "dagexec: round 2 — 3/3 tasks (6/6 overall)");
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{SIX}")]),
        SIX_MD.replace("- [ ] T", "- [x] T")
    );
}

/// The Action's rounds on the same tasks.md: the join is in no job matrix, phase 2 runs in
/// the round after phase 1, the pull request counts six tasks and ticks them all.
#[test]
fn on_the_action_a_phase_after_a_parallel_phase_runs_through_the_join() {
    let prompts = tempfile::tempdir().unwrap();
    let lab = lab::lab()
        .file(SIX, SIX_MD)
        .worker(WORKER)
        .branch("dagexec/six")
        .env("DAGEXEC_PLAN", SIX)
        .env("OUT", prompts.path())
        .start();
    let mut runs = 0;
    while round(&lab, 600 + runs) {
        runs += 1;
        assert!(runs < 4, "more rounds than the DAG has");
    }
    let branch = "dagexec/six";
    assert_eq!(
        round_subjects(&lab.origin, branch),
        [
            "dagexec: round 1 — 3/3 tasks (3/6 overall)",
            "dagexec: round 2 — 3/3 tasks (6/6 overall)"
        ]
    );
    let md = git(&lab.origin, &["show", &format!("{branch}:{SIX}")]);
    assert_eq!(md, SIX_MD.replace("- [ ] T", "- [x] T"));
    assert!(!messages(&lab.origin, branch).contains("Setup done"));
    let prompt = read(&prompts.path().join("prompt-T005.md"));
    // (Through the join, to the tasks it joins; on the Action their results read "ticked in
    // …", the plan being made again from the ticked tasks.md.)
    for id in ["T001", "T002", "T003"] {
        assert!(prompt.contains(&format!("- Task {id}: ")), "{prompt}");
    }
    let body = lab.gh.state().pulls[0].body.clone().unwrap_or_default();
    assert!(!body.contains("Setup done"), "{body}");
    assert!(body.contains("6/6 tasks completed"), "{body}");
    lab.gh.assert_clean();
}

/// Local eager runs through the join too: phase 2 starts once phase 1 has landed, every task
/// is ticked and the dry run counts six tasks.
#[test]
fn eager_runs_a_phase_after_a_parallel_phase_through_the_join() {
    let dir = repo_of(&[(SIX, SIX_MD.as_bytes())]);
    let out = tempfile::tempdir().unwrap();
    let dry = exec(
        dir.path(),
        &["--plan", SIX, "run", "--dry-run", "--schedule", "eager"],
    );
    let shown = text(&dry);
    assert!(dry.status.success(), "{shown}");
    assert!(!shown.contains("Setup done"), "{shown}");
    let o = local(dir.path())
        .global(&["--plan", SIX])
        .jobs(4)
        .timeout("20s")
        .worker(&worker(out.path()))
        .env("OUT", out.path())
        .env("MAIN", dir.path())
        .args(["--schedule", "eager"])
        .run();
    let log = o.expect_code(0);
    assert!(log.contains("All 6 tasks completed."), "{log}");
    assert!(!log.contains("Setup done"), "{log}");
    assert!(!messages(dir.path(), "HEAD").contains("Setup done"));
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{SIX}")]),
        SIX_MD.replace("- [ ] T", "- [x] T")
    );
}

/// A ticked task whose declared file is missing runs again, and the run says so by the
/// list's own ID (`T001`), never by the plan index behind it.
#[test]
fn a_ticked_task_whose_file_is_missing_is_named_by_its_id_when_it_runs_again() {
    let dir = repo();
    git(dir.path(), &["rm", "-q", "Makefile"]);
    git(dir.path(), &["commit", "-qm", "no Makefile"]);
    let out = tempfile::tempdir().unwrap();
    let o = run(dir.path(), out.path(), "");
    let log = o.expect_code(0);
    assert!(
        log.contains("Task T001 was marked completed but Makefile does not exist; it runs again."),
        "{log}"
    );
}

/// `simulate --duration T004=1h` names a task of the list by its own ID, as `prompt`,
/// `answer` and `retry` do (and as simulate's own charts name it).
#[test]
fn simulate_takes_a_task_lists_own_ids_for_durations() {
    let dir = repo();
    let o = exec(
        dir.path(),
        &[
            "--plan", TASKS, "simulate", "-d", "5m", "-d", "T004=1h", "--json",
        ],
    );
    let out = o.expect_code(0);
    let json: serde_json::Value =
        serde_json::from_str(&o.stdout()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let given: Vec<&serde_json::Value> = json["durations"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["source"] == "given")
        .collect();
    assert_eq!(given.len(), 1, "{out}");
    assert_eq!(given[0]["task"], 3, "T004 is the plan's task 3: {out}");
    assert_eq!(given[0]["attempts"], serde_json::json!([3600.0]), "{out}");
    let o = exec(dir.path(), &["--plan", TASKS, "simulate", "-d", "T404=1h"]);
    let err = o.stderr();
    assert_eq!(o.code(), Some(2), "{err}");
    assert!(err.contains("no task \"T404\" in the task list"), "{err}");
}
