//! `--plan specs/NNN-feature/tasks.md`: a Spec Kit task list run, validated, shown and drawn
//! end to end, with the real binary, real git repositories and a scripted worker.

use crate::common::lab::{self, text};
use crate::common::{dagexec, git, manifest};

use std::path::Path;
use std::process::Output;

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
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["config", "user.name", "t"]);
    git(dir.path(), &["config", "user.email", "t@example.com"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "start"]);
    dir
}

/// The worker: keeps its prompt, appends a line to every file the prompt names, and
/// completes — except for the task whose ID is in $FAIL.
const WORKER: &str = r#"#!/bin/sh
id=$(sed -n 's/^## Task: \(T[0-9]*\) .*/\1/p' "$DAGEXEC_PROMPT_FILE")
cp "$DAGEXEC_PROMPT_FILE" "$OUT/prompt-$id.md"
if [ "$id" = "$FAIL" ]; then echo "FAILED: $id cannot be done"; exit 0; fi
for f in $(sed -n 's/^Files to create: //p; s/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' ' '); do
  [ "$f" = "(none)" ] && continue
  mkdir -p "$(dirname "$f")"
  echo "$id" >> "$f"
done
echo "COMPLETED: $id done"
"#;

/// [`WORKER`] written to `out`, and the command line that runs it.
fn worker(out: &Path) -> String {
    let path = out.join("worker.sh");
    std::fs::write(&path, WORKER).unwrap();
    format!("sh '{}'", path.display())
}

fn run(dir: &Path, out: &Path, fail: &str) -> Output {
    dagexec(dir)
        .args(["--plan", TASKS, "run", "--jobs", "4", "--timeout", "20s"])
        .args(["--worker", &worker(out)])
        .env("OUT", out)
        .env("FAIL", fail)
        .output()
        .unwrap()
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
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
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
        let o = dagexec(dir)
            .args(["--plan", TASKS, "status", "--json"])
            .output()
            .unwrap();
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
            "T007 pending",
            "T008 skipped"
        ]
    );
    // `retry` writes the generated plan: T004 and what it skipped are pending again.
    let o = dagexec(dir.path())
        .args(["--plan", TASKS, "retry", "3"])
        .output()
        .unwrap();
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
    let g = dagexec(dir.path())
        .args(["--plan", TASKS, "graph"])
        .output()
        .unwrap();
    let g = String::from_utf8_lossy(&g.stdout);
    assert!(g.contains("T009 Add a logger in src/log.sh"), "{g}");
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

#[test]
fn validate_and_prompt_read_a_tasks_md_without_writing() {
    let dir = repo();
    let md = read(&dir.path().join(TASKS)).replace(
        "- [ ] T008 Update README.md with usage",
        "- [ ] T008 Update README.md with usage\n- [ ] T010 Add validation and error handling",
    );
    std::fs::write(dir.path().join(TASKS), md).unwrap();
    let o = dagexec(dir.path())
        .args(["--plan", TASKS, "validate", "--no-checks"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: specs/003-todo/tasks.md:51: task T010 names no file"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("Tasks: 9"));
    let o = dagexec(dir.path())
        .args(["--plan", TASKS, "prompt", "5"])
        .output()
        .unwrap();
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
