//! `--overlap merge` (issue 23): tasks that declare the same file run at the same time, their
//! results merged three-way in plan order and re-checked; a conflict or a failed re-check
//! sends the later task back once as a rebase attempt. Real git repositories, real scripted
//! workers that edit a shared file the way agents do (each its own region, or the same line).
//! Workers that must run together wait for each other at a rendezvous (bounded: a worker left
//! alone fails its attempt, so a schedule that kept them apart fails the test, not a timer).

use std::path::Path;

use serde_json::{Value, json};

use crate::common;
use common::git;
use common::local::{Local, local};

/// A task: `(subject, blockedBy, files to modify, acceptance checks)`.
type Spec<'a> = (&'a str, &'a [usize], &'a [&'a str], &'a [&'a str]);

/// A plan of tasks.
fn plan(tasks: &[Spec<'_>]) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(subject, deps, modify, checks)| {
            let criteria: Vec<Value> = checks
                .iter()
                .map(|c| json!({"criterion": format!("{subject}: {c}"), "check": c}))
                .collect();
            json!({
                "subject": subject, "status": "pending", "blockedBy": deps,
                "metadata": {"files": {"create": [], "modify": modify}},
                "agent": {"role": "engineer", "acceptanceCriteria": criteria}
            })
        })
        .collect();
    json!({"schemaVersion": 2, "goal": "merge", "tasks": tasks})
}

/// A worker script: first attempts (not rebases) of the tasks in `together` meet at a
/// rendezvous in `seen` before working; every prompt is kept in `seen` as
/// `prompt-<task>-<attempt>[-rebase]`; then `edit` runs (a `case "$i"` body, `$i` the task).
fn worker(seen: &Path, together: usize, edit: &str) -> String {
    format!(
        r#"i=$DAGEXEC_TASK_INDEX
seen='{seen}'
if grep -q '^## Rebase' "$DAGEXEC_PROMPT_FILE"; then kind=-rebase; else kind=; fi
cp "$DAGEXEC_PROMPT_FILE" "$seen/prompt-$i-$DAGEXEC_ATTEMPT$kind"
if [ -z "$kind" ] && [ "$DAGEXEC_ATTEMPT" = 1 ] && [ "$i" -lt {together} ]; then
  touch "$seen/started-$i"
  n=0
  while [ "$(ls "$seen" | grep -c '^started-')" -lt {together} ]; do
    n=$((n+1)); if [ $n -gt 600 ]; then echo "FAILED: ran alone"; exit 0; fi; sleep 0.05
  done
fi
case "$i" in
{edit}
esac
echo "COMPLETED: done""#,
        seen = seen.display()
    )
}

fn merge(dir: &Path, jobs: u32) -> Local {
    local(dir)
        .jobs(jobs)
        .timeout("60s")
        .args(["--overlap", "merge"])
}

/// The file `rel` of the committed tree at `HEAD`.
fn committed(dir: &Path, rel: &str) -> String {
    git(dir, &["show", &format!("HEAD:{rel}")])
}

fn round_commits(dir: &Path) -> Vec<String> {
    let all = git(dir, &["log", "--reverse", "--format=%s"]);
    all.lines().skip(1).map(String::from).collect()
}

const ROUTES: &str = "# alpha\nalpha=old\n# middle\nkeep\nkeep\n# beta\nbeta=old\n# more\nkeep\nkeep\n# gamma\ngamma=old\n";

/// Three tasks, each changing its own region of routes.txt.
const REGIONS: &str = r#"0) sed -i 's/^alpha=old$/alpha=new/' routes.txt ;;
1) sed -i 's/^beta=old$/beta=new/' routes.txt ;;
2) sed -i 's/^gamma=old$/gamma=new/' routes.txt ;;"#;

fn regions_plan() -> Value {
    plan(&[
        (
            "alpha",
            &[],
            &["routes.txt"],
            &["grep -qx alpha=new routes.txt"],
        ),
        (
            "beta",
            &[],
            &["routes.txt"],
            &["grep -qx beta=new routes.txt"],
        ),
        (
            "gamma",
            &[],
            &["routes.txt"],
            &["grep -qx gamma=new routes.txt"],
        ),
    ])
}

fn assert_every_region_changed_once(dir: &Path) {
    let routes = committed(dir, "routes.txt");
    assert_eq!(
        routes,
        ROUTES.replace("=old", "=new"),
        "every task's change, exactly once"
    );
}

#[test]
fn rounds_run_tasks_sharing_a_file_together_and_merge_them() {
    let dir = common::repo(&regions_plan(), &[("routes.txt", ROUTES)]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 3)
        .script(&worker(seen.path(), 3, REGIONS))
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Round 1: starting 3 task(s): 0, 1, 2\n"),
        "{out}"
    );
    assert!(!out.contains("groups one after another"), "{out}");
    assert!(!out.contains("rebase"), "{out}");
    assert_every_region_changed_once(dir.path());
    let commits = round_commits(dir.path());
    assert!(
        commits[0].starts_with("dagexec: round 1 — 3/3 tasks"),
        "{commits:?}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn serial_stays_the_default_and_keeps_them_apart() {
    // The same plan without --overlap: the seeds' groups, one after another; the rendezvous
    // is never met (each worker alone), so no worker waits for the others here.
    let dir = common::repo(&regions_plan(), &[("routes.txt", ROUTES)]);
    let seen = tempfile::tempdir().unwrap();
    let o = local(dir.path())
        .jobs(3)
        .timeout("60s")
        .script(&worker(seen.path(), 0, REGIONS))
        .args(["--dry-run"])
        .run();
    let out = o.expect_code(0);
    assert!(out.contains("3 groups"), "{out}");
    let o = merge(dir.path(), 3)
        .script(&worker(seen.path(), 0, REGIONS))
        .args(["--dry-run"])
        .run();
    let out = o.expect_code(0);
    assert!(!out.contains("groups"), "{out}");
}

#[test]
fn eager_runs_tasks_sharing_a_file_together_and_merges_them() {
    let dir = common::repo(&regions_plan(), &[("routes.txt", ROUTES)]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 3)
        .args(["--schedule", "eager"])
        .script(&worker(seen.path(), 3, REGIONS))
        .run();
    o.expect_code(0);
    assert_every_region_changed_once(dir.path());
    let p = o.final_plan();
    for i in 0..3 {
        assert_eq!(p["tasks"][i]["status"], "completed");
        assert_eq!(p["progress"]["completedTasks"][i]["attempts"], 1);
    }
}

/// Tasks 0 and 1 set the same line; a rebase of 1 builds on 0's value. Task 2 needs 1.
const SAME_LINE: &str = r#"0) if [ -n "$kind" ]; then sed -i 's/^value=\(.*\)$/value=\1+A/' conf.txt; else sed -i 's/^value=.*$/value=A/' conf.txt; fi ;;
1) if [ -n "$kind" ]; then sed -i 's/^value=\(.*\)$/value=\1+B/' conf.txt; else sed -i 's/^value=.*$/value=B/' conf.txt; fi ;;
2) echo "after=$(grep '^value=' conf.txt)" > after.txt ;;"#;

fn same_line_plan() -> Value {
    let mut p = plan(&[
        ("A", &[], &["conf.txt"], &["grep -q '^value=.*A' conf.txt"]),
        ("B", &[], &["conf.txt"], &["grep -q '^value=.*B' conf.txt"]),
        ("after", &[1], &[], &["test -s after.txt"]),
    ]);
    p["tasks"][2]["metadata"]["files"]["create"] = json!(["after.txt"]);
    p
}

fn assert_rebased_onto_a(dir: &Path, seen: &Path, o: &common::local::Ran) {
    let out = o.text();
    assert!(
        out.contains("task 1: attempt 1 cannot be merged onto task 0 (conflict in conf.txt)"),
        "{out}"
    );
    assert_eq!(committed(dir, "conf.txt"), "name=x\nvalue=A+B\nend\n");
    assert_eq!(committed(dir, "after.txt"), "after=value=A+B\n");
    let prompt = std::fs::read_to_string(seen.join("prompt-1-1-rebase")).unwrap();
    assert!(prompt.contains("## Rebase"), "{prompt}");
    assert!(prompt.contains("task 0 (A)"), "{prompt}");
    assert!(prompt.contains("CONFLICT (content)"), "{prompt}");
    assert!(prompt.contains("<<<<<<<"), "{prompt}");
    let p = o.final_plan();
    // The rebase is not a failed attempt.
    assert_eq!(p["tasks"][1]["status"], "completed");
    assert_eq!(p["progress"]["completedTasks"][1]["attempts"], 1, "{p}");
    // The attempt sent back is recorded as a conflict, the rebase with its own outcome.
    let records: Vec<&Value> = p["progress"]["dagexecAttempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["task"] == 1)
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["outcome"], "conflict", "{records:?}");
    assert_eq!(records[0].get("rebase"), None, "{records:?}");
    assert_eq!(records[1]["outcome"], "completed", "{records:?}");
    assert_eq!(records[1]["rebase"], true, "{records:?}");
    assert_eq!(records[1]["attempt"], 1, "{records:?}");
    // Its logs are kept apart from the attempt it repeats.
    let logs = git(dir, &["rev-parse", "--git-common-dir"]);
    let logs = dir.join(logs.trim()).join("dagexec/logs");
    let found: Vec<String> = walk(&logs);
    assert!(
        found
            .iter()
            .any(|f| f.ends_with("task-1-attempt-1.rebase.stdout")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|f| f.ends_with("task-1-attempt-1.stdout")),
        "{found:?}"
    );
    // Why it was sent back, beside the attempt's logs.
    let note = found
        .iter()
        .find(|f| f.ends_with("task-1-attempt-1.merge"))
        .unwrap_or_else(|| panic!("{found:?}"));
    let note = std::fs::read_to_string(note).unwrap();
    assert!(note.starts_with("conflict in conf.txt\n"), "{note}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(walk(&p));
        } else {
            found.push(p.display().to_string());
        }
    }
    found
}

#[test]
fn rounds_send_a_conflicting_task_back_as_a_rebase_attempt() {
    let dir = common::repo(&same_line_plan(), &[("conf.txt", "name=x\nvalue=0\nend\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, SAME_LINE))
        .run();
    o.expect_code(0);
    assert_rebased_onto_a(dir.path(), seen.path(), &o);
    // One round for 0 and 1 (the rebase inside it), one for 2.
    let commits = round_commits(dir.path());
    assert!(
        commits[0].starts_with("dagexec: round 1 — 2/2 tasks"),
        "{commits:?}"
    );
}

#[test]
fn eager_sends_a_conflicting_task_back_as_a_rebase_attempt() {
    // Eager integrates what arrives, as it arrives: whichever of 0 and 1 ends first lands,
    // the other is sent back and builds on it.
    let dir = common::repo(&same_line_plan(), &[("conf.txt", "name=x\nvalue=0\nend\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .args(["--schedule", "eager"])
        .script(&worker(seen.path(), 2, SAME_LINE))
        .run();
    let out = o.expect_code(0);
    let conf = committed(dir.path(), "conf.txt");
    let (first, later) = if conf == "name=x\nvalue=A+B\nend\n" {
        (0, 1)
    } else {
        (1, 0)
    };
    assert_eq!(
        conf,
        ["name=x\nvalue=A+B\nend\n", "name=x\nvalue=B+A\nend\n"][first],
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "task {later}: attempt 1 cannot be merged onto task {first} (conflict in conf.txt)"
        )),
        "{out}"
    );
    assert!(
        seen.path()
            .join(format!("prompt-{later}-1-rebase"))
            .exists()
    );
    assert!(
        !seen
            .path()
            .join(format!("prompt-{first}-1-rebase"))
            .exists()
    );
    let p = o.final_plan();
    assert!(common::local::all_tasks_are(&p, "completed"), "{p}");
    for i in 0..2 {
        assert_eq!(p["progress"]["completedTasks"][i]["attempts"], 1, "{p}");
    }
}

#[test]
fn a_clean_merge_that_breaks_a_check_is_rechecked_and_rebased() {
    // 0 marks the list with a TODO for 1 at the top; 1 edits the bottom and its check says
    // the list has no TODO. Both merge cleanly (different regions), but on the merged tree
    // 1's check fails: 1 runs again as a rebase and resolves the TODO.
    let p = plan(&[
        (
            "mark",
            &[],
            &["list.txt"],
            &["grep -q 'by task 0' list.txt"],
        ),
        (
            "tail",
            &[],
            &["list.txt"],
            &["! grep -q TODO list.txt", "grep -qx tail=new list.txt"],
        ),
    ]);
    let edit = r#"0) sed -i 's/^head$/head\nTODO by task 0/' list.txt ;;
1) sed -i 's/^tail=old$/tail=new/' list.txt; sed -i 's/^TODO by task 0$/DONE by task 0/' list.txt ;;"#;
    let dir = common::repo(&p, &[("list.txt", "head\nx\ny\nz\ntail=old\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 1: attempt 1 cannot be merged onto task 0 (on the merged tree, task 1's acceptance check `! grep -q TODO list.txt`"),
        "{out}"
    );
    assert_eq!(
        committed(dir.path(), "list.txt"),
        "head\nDONE by task 0\nx\ny\nz\ntail=new\n"
    );
    let prompt = std::fs::read_to_string(seen.path().join("prompt-1-1-rebase")).unwrap();
    assert!(prompt.contains("task 0 (mark)"), "{prompt}");
    assert!(
        prompt.contains("acceptance check `! grep -q TODO list.txt`"),
        "{prompt}"
    );
}

#[test]
fn a_result_whose_files_nothing_else_touched_lands_without_a_second_run_of_its_checks() {
    // 0 and 1 start from one base; 1 lands first (b.txt), then 0 arrives (a.txt). The tree
    // moved since 0's base, but not in a path 0 changed and no landed task declared a.txt:
    // 0 lands as under `serial`, its check run once (when its attempt was judged).
    let seen = tempfile::tempdir().unwrap();
    let runs = seen.path().join("runs-of-0");
    let count = format!("echo run >> '{}'; grep -qx a=new a.txt", runs.display());
    let p = plan(&[
        ("a", &[], &["a.txt"], &[count.as_str()]),
        ("b", &[], &["b.txt"], &["grep -qx b=new b.txt"]),
    ]);
    let edit = r#"0) sleep 1; sed -i 's/^a=old$/a=new/' a.txt ;;
1) sed -i 's/^b=old$/b=new/' b.txt ;;"#;
    let dir = common::repo(&p, &[("a.txt", "a=old\n"), ("b.txt", "b=old\n")]);
    let o = merge(dir.path(), 2)
        .args(["--schedule", "eager"])
        .script(&worker(seen.path(), 2, edit))
        .run();
    o.expect_code(0);
    assert_eq!(committed(dir.path(), "a.txt"), "a=new\n");
    assert_eq!(committed(dir.path(), "b.txt"), "b=new\n");
    let commits = round_commits(dir.path());
    assert!(
        commits[0].contains("1/2") || commits[0].contains("task 1"),
        "1 landed first: {commits:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "run\n",
        "0's check ran once"
    );
}

// ---- bad input and faults ----

#[test]
fn a_binary_file_both_changed_is_a_conflict_and_a_rebase() {
    let p = plan(&[
        ("A", &[], &["logo.bin"], &[]),
        ("B", &[], &["logo.bin"], &["grep -q B logo.bin"]),
    ]);
    let edit = r#"0) printf 'A\000\001' > logo.bin ;;
1) if [ -n "$kind" ]; then printf 'B\000' >> logo.bin; else printf 'B\000\002' > logo.bin; fi ;;"#;
    let dir = common::repo(&p, &[("logo.bin", "\u{0}\u{1}\u{2}base")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 1: attempt 1 cannot be merged onto task 0 (conflict in logo.bin)"),
        "{out}"
    );
    let prompt = std::fs::read_to_string(seen.path().join("prompt-1-1-rebase")).unwrap();
    assert!(
        prompt.contains("Cannot merge binary files: logo.bin"),
        "{prompt}"
    );
    let bytes = std::process::Command::new("git")
        .args(["show", "HEAD:logo.bin"])
        .current_dir(dir.path())
        .output()
        .unwrap()
        .stdout;
    assert_eq!(bytes, b"A\0\x01B\0", "0's bytes, then 1's, once");
}

#[test]
fn a_rename_carrying_another_tasks_edit_into_an_undeclared_file_is_a_rebase() {
    // 0 renames old.txt to new.txt; 1 edits old.txt and declares only it. git follows the
    // rename: merged, 1's edit would land in new.txt, which 1 said it would not touch. It is
    // not accepted behind its back: 1 is sent back to rebase.
    let mut p = plan(&[
        (
            "rename",
            &[],
            &["old.txt"],
            &["test -f new.txt", "test ! -e old.txt"],
        ),
        (
            "edit",
            &[],
            &["old.txt"],
            &["grep -q edited old.txt new.txt 2>/dev/null || grep -q edited new.txt"],
        ),
    ]);
    p["tasks"][0]["metadata"]["files"]["create"] = json!(["new.txt"]);
    let edit = r#"0) git mv old.txt new.txt ;;
1) if [ -n "$kind" ]; then sed -i 's/^two$/two edited/' new.txt; else sed -i 's/^two$/two edited/' old.txt; fi ;;"#;
    let lines = "one\ntwo\nthree\nfour\nfive\nsix\n";
    let dir = common::repo(&p, &[("old.txt", lines)]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(1);
    assert!(
        out.contains("task 1: attempt 1 cannot be merged onto task 0 (the merge changes new.txt, which task 1 does not declare)"),
        "{out}"
    );
    // Its declared file is gone: it fails, and nothing of it lands anywhere.
    assert!(
        out.contains("Task 1 (edit) failed after 3 attempt(s): spot-check failed: old.txt (to modify) was not changed"),
        "{out}"
    );
    assert_eq!(committed(dir.path(), "new.txt"), lines);
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn a_rename_after_an_edit_merges_cleanly_and_keeps_the_edit() {
    // The other order: 0 edits old.txt, 1 renames it (declaring both names): the merge
    // carries 0's edit into new.txt, which 1 declared. Nothing to rebase.
    let mut p = plan(&[
        (
            "edit",
            &[],
            &["old.txt"],
            &["cat old.txt new.txt 2>/dev/null | grep -q edited"],
        ),
        ("rename", &[], &["old.txt"], &["test -f new.txt"]),
    ]);
    p["tasks"][1]["metadata"]["files"]["create"] = json!(["new.txt"]);
    let edit = r#"0) sed -i 's/^two$/two edited/' old.txt ;;
1) git mv old.txt new.txt ;;"#;
    let lines = "one\ntwo\nthree\nfour\nfive\nsix\n";
    let dir = common::repo(&p, &[("old.txt", lines)]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(0);
    assert!(!out.contains("rebase"), "{out}");
    assert_eq!(
        committed(dir.path(), "new.txt"),
        lines.replace("two", "two edited")
    );
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn a_delete_against_a_modify_is_a_conflict_and_a_rebase() {
    // 0 deletes legacy.txt, 1 appends to it. The rebase finds it gone: 1's declared work is
    // gone with it, and it fails (by its spot-check) rather than bring the file back.
    let p = plan(&[
        ("delete", &[], &["legacy.txt"], &["test ! -e legacy.txt"]),
        ("modify", &[], &["legacy.txt"], &[]),
    ]);
    let edit = r#"0) git rm -q legacy.txt ;;
1) if [ -e legacy.txt ]; then echo more >> legacy.txt; fi ;;"#;
    let dir = common::repo(&p, &[("legacy.txt", "old\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(1);
    assert!(
        out.contains("task 1: attempt 1 cannot be merged onto task 0 (conflict in legacy.txt)"),
        "{out}"
    );
    let prompt = std::fs::read_to_string(seen.path().join("prompt-1-1-rebase")).unwrap();
    assert!(prompt.contains("CONFLICT (modify/delete)"), "{prompt}");
    assert!(
        out.contains("Task 1 (modify) failed after 3 attempt(s): spot-check failed: legacy.txt (to modify) was not changed"),
        "{out}"
    );
    assert_eq!(git(dir.path(), &["ls-files", "legacy.txt"]), "", "{out}");
    assert!(!dir.path().join("legacy.txt").exists(), "{out}");
}

#[test]
fn a_retry_after_a_rebase_still_keeps_the_change_it_builds_on() {
    // As above, but 1 writes legacy.txt whatever it finds: every later attempt brings back
    // the file 0 deleted, and 0's check on the merged tree refuses each one. 1 fails; the
    // file stays deleted.
    let p = plan(&[
        ("delete", &[], &["legacy.txt"], &["test ! -e legacy.txt"]),
        ("modify", &[], &["legacy.txt"], &[]),
    ]);
    let edit = r#"0) git rm -q legacy.txt ;;
1) echo more >> legacy.txt ;;"#;
    let dir = common::repo(&p, &[("legacy.txt", "old\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 2)
        .script(&worker(seen.path(), 2, edit))
        .run();
    let out = o.expect_code(1);
    assert!(
        out.contains("it cannot be merged after its rebase: on the merged tree, task 0's acceptance check `test ! -e legacy.txt`"),
        "{out}"
    );
    let p = o.final_plan();
    assert_eq!(p["tasks"][1]["status"], "failed", "{out}");
    assert_eq!(git(dir.path(), &["ls-files", "legacy.txt"]), "", "{out}");
}

#[test]
fn a_rebase_that_conflicts_again_is_a_failed_attempt_retried_later() {
    // 0, 1 and 2 set one line. 0 lands; 1 and 2 rebase side by side from 0's tree; 1's
    // lands, 2's conflicts again: a failed attempt (counted), run again next round.
    let p = plan(&[
        ("A", &[], &["conf.txt"], &["grep -q '^value=.*A' conf.txt"]),
        ("B", &[], &["conf.txt"], &["grep -q '^value=.*B' conf.txt"]),
        ("C", &[], &["conf.txt"], &["grep -q '^value=.*C' conf.txt"]),
    ]);
    let edit = r#"0|1|2) l=$(printf '%s' ABC | cut -c$((i+1)))
if [ -n "$kind" ] || [ "$DAGEXEC_ATTEMPT" != 1 ]; then sed -i "s/^value=\(.*\)$/value=\1+$l/" conf.txt; else sed -i "s/^value=.*$/value=$l/" conf.txt; fi ;;"#;
    let dir = common::repo(&p, &[("conf.txt", "value=0\n")]);
    let seen = tempfile::tempdir().unwrap();
    let o = merge(dir.path(), 3)
        .script(&worker(seen.path(), 3, edit))
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 2: attempt 1 of 3 could not be integrated: it cannot be merged after its rebase: conflict in conf.txt"),
        "{out}"
    );
    assert!(out.contains("Round 2: starting 1 task(s): 2\n"), "{out}");
    assert_eq!(committed(dir.path(), "conf.txt"), "value=A+B+C\n");
    let p = o.final_plan();
    let attempts: Vec<&Value> = (0..3)
        .map(|i| &p["progress"]["completedTasks"][i]["attempts"])
        .collect();
    assert_eq!(attempts, [&json!(1), &json!(1), &json!(2)], "{p}");
}

#[test]
fn killed_between_the_merge_and_the_recheck_nothing_lands_and_a_resume_finishes() {
    let dir = common::repo(&regions_plan(), &[("routes.txt", ROUTES)]);
    let seen = tempfile::tempdir().unwrap();
    let start = git(dir.path(), &["rev-parse", "HEAD"]);
    let o = merge(dir.path(), 3)
        .env("DAGEXEC_FAILPOINT", "after-merge:1")
        .script(&worker(seen.path(), 3, REGIONS))
        .run();
    assert_eq!(o.code(), None, "killed: {}", o.text());
    // Nothing was published: HEAD and the work tree are as they were.
    assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), start);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("routes.txt")).unwrap(),
        ROUTES
    );
    let o = merge(dir.path(), 3)
        .script(&worker(seen.path(), 3, REGIONS))
        .run();
    o.expect_code(0);
    assert_every_region_changed_once(dir.path());
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_rebase_is_not_started_once_the_budget_is_spent_and_its_task_keeps_its_attempt() {
    // Each attempt costs $0.10; the budget is $0.15. Both first attempts run; the later one
    // cannot be merged, and its rebase would spend past the budget: it does not start, its
    // task is pending with the one attempt it made, and the run stops for the budget.
    for schedule in ["rounds", "eager"] {
        let dir = common::repo(&same_line_plan(), &[("conf.txt", "name=x\nvalue=0\nend\n")]);
        let seen = tempfile::tempdir().unwrap();
        let script = worker(seen.path(), 2, SAME_LINE).replacen(
            "esac",
            "esac\nprintf '{\"cost_usd\": 0.1}' > \"$DAGEXEC_USAGE_FILE\"",
            1,
        );
        let o = merge(dir.path(), 2)
            .args(["--schedule", schedule, "--max-cost", "0.15"])
            .script(&script)
            .run();
        let out = o.expect_code(1);
        assert!(
            out.contains("cannot be merged onto task"),
            "{schedule}: {out}"
        );
        let p = o.plan();
        let later = if p["tasks"][0]["status"] == "completed" {
            1
        } else {
            0
        };
        assert_eq!(p["tasks"][later]["status"], "pending", "{schedule}: {out}");
        assert_eq!(p["tasks"][later]["attempts"], 1, "{schedule}: {out}");
        assert!(
            !seen
                .path()
                .join(format!("prompt-{later}-1-rebase"))
                .exists(),
            "{schedule}: {out}"
        );
    }
}
