//! `--schedule rounds` to the letter of the seed (execute-v2-ready-set, Step 3): a round is the
//! whole ready set, tasks sharing files run one after another inside it (each starting from the
//! round's tree with the earlier ones' work applied), and the round ends with one update, one
//! circuit-breaker decision and one commit. Real git repositories, real scripted workers.

use std::path::Path;

use crate::common;
use common::local::{Local, local, simple_plan};
use common::{git, repo};

/// `dagexec run` as these tests run it: four jobs, 20 s an attempt.
fn rounds(dir: &Path) -> Local {
    local(dir).jobs(4).timeout("20s")
}

/// The commits on the branch after the first, oldest first (subjects).
fn round_commits(dir: &Path) -> Vec<String> {
    let all = git(dir, &["log", "--reverse", "--format=%s"]);
    all.lines().skip(1).map(String::from).collect()
}

/// Writes the task's declared files (create: a new file; modify: a line appended).
const WRITE_DECLARED: &str = r#"sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' '\n' | sed 's/^ *//' | grep -v '^(none)$' | while read -r f; do echo "made by $DAGEXEC_TASK_INDEX" > "$f"; done
sed -n 's/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' '\n' | sed 's/^ *//' | grep -v '^(none)$' | while read -r f; do echo "by $DAGEXEC_TASK_INDEX" >> "$f"; done"#;

#[test]
fn the_circuit_breaker_weighs_the_whole_round_with_its_conflicting_tasks() {
    // Tasks 0 and 1 share shared.txt; 2 and 3 need 0, 4 and 5 need 1. Task 0 fails three
    // times. The seed's round 1 is {0, 1}: after it 4 tasks are pending and the cascade skips
    // 2 of them (50%) — abort. (Deferring 1 to a later round would weigh 2 of 5 and go on.)
    let plan = simple_plan(&[
        ("zero", &[], &[], &["shared.txt"]),
        ("one", &[], &[], &["shared.txt"]),
        ("two", &[0], &["two.txt"], &[]),
        ("three", &[0], &["three.txt"], &[]),
        ("four", &[1], &["four.txt"], &[]),
        ("five", &[1], &["five.txt"], &[]),
    ]);
    let dir = repo(&plan, &[("shared.txt", "base\n")]);
    let o = rounds(dir.path())
        .script(&format!(
            r#"if [ "$DAGEXEC_TASK_INDEX" = 0 ]; then echo "FAILED: cannot do it"; exit 0; fi
{WRITE_DECLARED}
echo "COMPLETED: done""#
        ))
        .run();
    let out = o.expect_code(3);
    assert!(out.contains("Round 1: starting 2 task(s): 0, 1\n"), "{out}");
    assert!(
        out.contains("Circuit breaker triggered: 2/4 pending tasks would be skipped"),
        "{out}"
    );
    assert!(!out.contains("Round 2"), "{out}");
    let p = o.plan();
    let status = |i: usize| p["tasks"][i]["status"].as_str().unwrap().to_string();
    assert_eq!(status(0), "failed");
    assert_eq!(p["tasks"][0]["attempts"], 3);
    assert_eq!(status(1), "completed");
    assert_eq!(status(2), "skipped");
    assert_eq!(status(3), "skipped");
    assert_eq!(status(4), "pending");
    assert_eq!(status(5), "pending");
    // One commit for the round, with task 1's change.
    let commits = round_commits(dir.path());
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert!(
        commits[0].starts_with("dagexec: round 1 — 1/2 tasks"),
        "{commits:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shared.txt")).unwrap(),
        "base\nby 1\n"
    );
}

#[test]
fn conflicting_tasks_run_one_after_another_in_one_round() {
    // 0, 1 and 2 all modify x.txt; 3 is independent. One round, three groups: each later task
    // starts from the round's tree with the earlier ones' work applied (it sees their lines),
    // and the round ends in one commit holding all of it.
    let plan = simple_plan(&[
        ("a", &[], &[], &["x.txt"]),
        ("b", &[], &[], &["x.txt"]),
        ("c", &[], &[], &["x.txt"]),
        ("d", &[], &["d.txt"], &[]),
        ("e", &[1], &["e.txt"], &[]),
    ]);
    let dir = repo(&plan, &[("x.txt", "base\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = rounds(dir.path())
        .script(&format!(
            r#"cp x.txt '{seen}/seen-by-'"$DAGEXEC_TASK_INDEX"
if [ -e "$(git rev-parse --git-common-dir)/dagexec/round-index" ]; then echo "$DAGEXEC_TASK_INDEX" >> '{seen}/index-present'; fi
{WRITE_DECLARED}
echo "COMPLETED: done""#,
            seen = seen.path().display()
        ))
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Round 1: starting 4 task(s): 0, 1, 2, 3\n"),
        "{out}"
    );
    // 1 heads a chain (1 ← 4), so it goes first; then plan order.
    assert!(
        out.contains(
            "they share files, so they run in 3 groups one after another: 1, 3, then 0, then 2"
        ),
        "{out}"
    );
    assert!(out.contains("Round 2: starting 1 task(s): 4\n"), "{out}");
    assert!(!out.contains("Round 3"), "{out}");
    let saw = |i: usize| std::fs::read_to_string(seen.path().join(format!("seen-by-{i}"))).unwrap();
    assert_eq!(saw(1), "base\n");
    assert_eq!(saw(0), "base\nby 1\n");
    assert_eq!(saw(2), "base\nby 1\nby 0\n");
    // The round's temporary index never exists while a worker runs (a worker could edit it).
    assert!(!seen.path().join("index-present").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x.txt")).unwrap(),
        "base\nby 1\nby 0\nby 2\n"
    );
    let commits = round_commits(dir.path());
    assert_eq!(commits.len(), 3, "two rounds and the archive: {commits:?}");
    assert!(
        commits[0].starts_with("dagexec: round 1 — 4/4 tasks"),
        "{commits:?}"
    );
    assert!(
        commits[1].starts_with("dagexec: round 2 — 1/1 tasks"),
        "{commits:?}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn dry_run_lists_a_rounds_sequential_groups() {
    let plan = simple_plan(&[
        ("a", &[], &[], &["x.txt"]),
        ("b", &[], &[], &["x.txt"]),
        ("c", &[], &["c.txt"], &[]),
        ("d", &[0, 1], &["d.txt"], &[]),
    ]);
    let dir = repo(&plan, &[("x.txt", "base\n")]);
    let o = rounds(dir.path()).worker("false").args(["--dry-run"]).run();
    let out = o.expect_code(0);
    assert!(
        out.contains(
            "Dry run: 2 round(s) if every task completes (nothing is changed).\n\
             Round 1: 0 a | 2 c, then 1 b (sharing files: 2 groups, one after another)\n\
             Round 2: 3 d\n"
        ),
        "{out}"
    );
}
