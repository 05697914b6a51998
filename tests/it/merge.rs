//! `--overlap merge` (issue 23): tasks that declare the same file run at the same time, their
//! results merged three-way in plan order and re-checked; a conflict or a failed re-check
//! sends the later task back once as a rebase attempt. Real git repositories, real scripted
//! workers that edit a shared file the way agents do (each its own region, or the same line).
//! Workers that must run together wait for each other at a rendezvous (bounded: a worker left
//! alone fails its attempt, so a schedule that kept them apart fails the test, not a timer).
//! Each test is a `Case` (the plan, its files, the workers' edit) run with `Case::merge`.

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

/// A case: a repository holding `plan` and the files, the workers' `edit` (a `case "$i"`
/// body) and the folder where they meet and keep their prompts.
struct Case {
    dir: tempfile::TempDir,
    seen: tempfile::TempDir,
    edit: String,
}

fn case(plan: &Value, files: &[(&str, &str)], edit: &str) -> Case {
    Case {
        dir: common::repo(plan, files),
        seen: tempfile::tempdir().unwrap(),
        edit: edit.to_string(),
    }
}

impl Case {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The worker script, the first `together` tasks' first attempts meeting.
    fn worker(&self, together: usize) -> String {
        worker(self.seen.path(), together, &self.edit)
    }

    /// The run under `--overlap merge` with `jobs` workers, the first `jobs` tasks meeting.
    fn merge(&self, jobs: u32) -> Local {
        merge(self.path(), jobs).script(&self.worker(jobs as usize))
    }

    /// The file `rel` of the committed tree at `HEAD`.
    fn committed(&self, rel: &str) -> String {
        committed(self.path(), rel)
    }

    /// Whether task `task`'s first attempt was sent back as a rebase (its prompt was kept).
    fn rebased(&self, task: usize) -> bool {
        self.seen
            .path()
            .join(format!("prompt-{task}-1-rebase"))
            .exists()
    }

    /// The prompt of task `task`'s rebase of its first attempt.
    fn rebase_prompt(&self, task: usize) -> String {
        std::fs::read_to_string(self.seen.path().join(format!("prompt-{task}-1-rebase"))).unwrap()
    }

    /// The round commits' subjects, oldest first.
    fn round_commits(&self) -> Vec<String> {
        round_commits(self.path())
    }

    fn assert_clean_tree(&self) {
        assert_eq!(git(self.path(), &["status", "--porcelain"]), "");
    }
}

/// The run said task `later`'s first attempt cannot be merged onto task `onto`, and `why`.
fn assert_sent_back(out: &str, later: usize, onto: usize, why: &str) {
    let said = format!("task {later}: attempt 1 cannot be merged onto task {onto} ({why}");
    assert!(out.contains(&said), "{out}");
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

/// The case of three tasks each changing its own region of routes.txt.
fn regions() -> Case {
    let p = plan(&[
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
    ]);
    case(&p, &[("routes.txt", ROUTES)], REGIONS)
}

fn assert_every_region_changed_once(c: &Case) {
    assert_eq!(
        c.committed("routes.txt"),
        ROUTES.replace("=old", "=new"),
        "every task's change, exactly once"
    );
}

#[test]
fn rounds_run_tasks_sharing_a_file_together_and_merge_them() {
    let c = regions();
    let o = c.merge(3).run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Round 1: starting 3 task(s): 0, 1, 2\n"),
        "{out}"
    );
    assert!(!out.contains("groups one after another"), "{out}");
    assert!(!out.contains("rebase"), "{out}");
    assert_every_region_changed_once(&c);
    let commits = c.round_commits();
    assert!(
        commits[0].starts_with("dagexec: round 1 — 3/3 tasks"),
        "{commits:?}"
    );
    c.assert_clean_tree();
}

#[test]
fn serial_stays_the_default_and_keeps_them_apart() {
    // The same plan without --overlap: the seeds' groups, one after another; the rendezvous
    // is never met (each worker alone), so no worker waits for the others here.
    let c = regions();
    let o = local(c.path())
        .jobs(3)
        .timeout("60s")
        .script(&c.worker(0))
        .args(["--dry-run"])
        .run();
    let out = o.expect_code(0);
    assert!(out.contains("3 groups"), "{out}");
    let o = merge(c.path(), 3)
        .script(&c.worker(0))
        .args(["--dry-run"])
        .run();
    let out = o.expect_code(0);
    assert!(!out.contains("groups"), "{out}");
}

#[test]
fn eager_runs_tasks_sharing_a_file_together_and_merges_them() {
    let c = regions();
    let o = c.merge(3).args(["--schedule", "eager"]).run();
    o.expect_code(0);
    assert_every_region_changed_once(&c);
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

/// The case of tasks 0 and 1 setting the same line of conf.txt; task 2 needs 1.
fn same_line() -> Case {
    case(
        &same_line_plan(),
        &[("conf.txt", "name=x\nvalue=0\nend\n")],
        SAME_LINE,
    )
}

/// The plan of [`same_line`].
fn same_line_plan() -> Value {
    let mut p = plan(&[
        ("A", &[], &["conf.txt"], &["grep -q '^value=.*A' conf.txt"]),
        ("B", &[], &["conf.txt"], &["grep -q '^value=.*B' conf.txt"]),
        ("after", &[1], &[], &["test -s after.txt"]),
    ]);
    p["tasks"][2]["metadata"]["files"]["create"] = json!(["after.txt"]);
    p
}

fn assert_rebased_onto_a(c: &Case, o: &common::local::Ran) {
    let dir = c.path();
    assert_sent_back(&o.text(), 1, 0, "conflict in conf.txt)");
    assert_eq!(c.committed("conf.txt"), "name=x\nvalue=A+B\nend\n");
    assert_eq!(c.committed("after.txt"), "after=value=A+B\n");
    let prompt = c.rebase_prompt(1);
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
    let c = same_line();
    let o = c.merge(2).run();
    o.expect_code(0);
    assert_rebased_onto_a(&c, &o);
    // One round for 0 and 1 (the rebase inside it), one for 2.
    let commits = c.round_commits();
    assert!(
        commits[0].starts_with("dagexec: round 1 — 2/2 tasks"),
        "{commits:?}"
    );
}

#[test]
fn eager_sends_a_conflicting_task_back_as_a_rebase_attempt() {
    // Eager integrates what arrives, as it arrives: whichever of 0 and 1 ends first lands,
    // the other is sent back and builds on it.
    let c = same_line();
    let o = c.merge(2).args(["--schedule", "eager"]).run();
    let out = o.expect_code(0);
    let conf = c.committed("conf.txt");
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
    assert_sent_back(&out, later, first, "conflict in conf.txt)");
    assert!(c.rebased(later));
    assert!(!c.rebased(first));
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
    let c = case(&p, &[("list.txt", "head\nx\ny\nz\ntail=old\n")], edit);
    let out = c.merge(2).run().expect_code(0);
    assert_sent_back(
        &out,
        1,
        0,
        "on the merged tree, task 1's acceptance check `! grep -q TODO list.txt`",
    );
    assert_eq!(
        c.committed("list.txt"),
        "head\nDONE by task 0\nx\ny\nz\ntail=new\n"
    );
    let prompt = c.rebase_prompt(1);
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
    let counts = tempfile::tempdir().unwrap();
    let runs = counts.path().join("runs-of-0");
    let count = format!("echo run >> '{}'; grep -qx a=new a.txt", runs.display());
    let p = plan(&[
        ("a", &[], &["a.txt"], &[count.as_str()]),
        ("b", &[], &["b.txt"], &["grep -qx b=new b.txt"]),
    ]);
    let edit = r#"0) sleep 1; sed -i 's/^a=old$/a=new/' a.txt ;;
1) sed -i 's/^b=old$/b=new/' b.txt ;;"#;
    let c = case(&p, &[("a.txt", "a=old\n"), ("b.txt", "b=old\n")], edit);
    c.merge(2)
        .args(["--schedule", "eager"])
        .run()
        .expect_code(0);
    assert_eq!(c.committed("a.txt"), "a=new\n");
    assert_eq!(c.committed("b.txt"), "b=new\n");
    let commits = c.round_commits();
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
    let c = case(&p, &[("logo.bin", "\u{0}\u{1}\u{2}base")], edit);
    let out = c.merge(2).run().expect_code(0);
    assert_sent_back(&out, 1, 0, "conflict in logo.bin)");
    let prompt = c.rebase_prompt(1);
    assert!(
        prompt.contains("Cannot merge binary files: logo.bin"),
        "{prompt}"
    );
    let bytes = std::process::Command::new("git")
        .args(["show", "HEAD:logo.bin"])
        .current_dir(c.path())
        .output()
        .unwrap()
        .stdout;
    assert_eq!(bytes, b"A\0\x01B\0", "0's bytes, then 1's, once");
}

/// A file of six lines, renamed or edited by the rename cases.
const LINES: &str = "one\ntwo\nthree\nfour\nfive\nsix\n";

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
    let c = case(&p, &[("old.txt", LINES)], edit);
    let out = c.merge(2).run().expect_code(1);
    assert_sent_back(
        &out,
        1,
        0,
        "the merge changes new.txt, which task 1 does not declare)",
    );
    // Its declared file is gone: it fails, and nothing of it lands anywhere.
    assert!(
        out.contains("Task 1 (edit) failed after 3 attempt(s): spot-check failed: old.txt (to modify) was not changed"),
        "{out}"
    );
    assert_eq!(c.committed("new.txt"), LINES);
    assert!(!c.path().join("old.txt").exists());
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
    let c = case(&p, &[("old.txt", LINES)], edit);
    let out = c.merge(2).run().expect_code(0);
    assert!(!out.contains("rebase"), "{out}");
    assert_eq!(c.committed("new.txt"), LINES.replace("two", "two edited"));
    assert!(!c.path().join("old.txt").exists());
}

/// Task 0 deletes legacy.txt (its check says it is gone); task 1 modifies it with `modify`.
fn delete_and_modify(modify: &str) -> Case {
    let p = plan(&[
        ("delete", &[], &["legacy.txt"], &["test ! -e legacy.txt"]),
        ("modify", &[], &["legacy.txt"], &[]),
    ]);
    let edit = format!("0) git rm -q legacy.txt ;;\n1) {modify} ;;");
    case(&p, &[("legacy.txt", "old\n")], &edit)
}

/// git tracks no legacy.txt.
fn assert_legacy_stays_deleted(c: &Case, out: &str) {
    assert_eq!(git(c.path(), &["ls-files", "legacy.txt"]), "", "{out}");
}

#[test]
fn a_delete_against_a_modify_is_a_conflict_and_a_rebase() {
    // 0 deletes legacy.txt, 1 appends to it. The rebase finds it gone: 1's declared work is
    // gone with it, and it fails (by its spot-check) rather than bring the file back.
    let c = delete_and_modify("if [ -e legacy.txt ]; then echo more >> legacy.txt; fi");
    let out = c.merge(2).run().expect_code(1);
    assert_sent_back(&out, 1, 0, "conflict in legacy.txt)");
    let prompt = c.rebase_prompt(1);
    assert!(prompt.contains("CONFLICT (modify/delete)"), "{prompt}");
    assert!(
        out.contains("Task 1 (modify) failed after 3 attempt(s): spot-check failed: legacy.txt (to modify) was not changed"),
        "{out}"
    );
    assert_legacy_stays_deleted(&c, &out);
    assert!(!c.path().join("legacy.txt").exists(), "{out}");
}

#[test]
fn a_retry_after_a_rebase_still_keeps_the_change_it_builds_on() {
    // As above, but 1 writes legacy.txt whatever it finds: every later attempt brings back
    // the file 0 deleted, and 0's check on the merged tree refuses each one. 1 fails; the
    // file stays deleted.
    let c = delete_and_modify("echo more >> legacy.txt");
    let o = c.merge(2).run();
    let out = o.expect_code(1);
    assert!(
        out.contains("it cannot be merged after its rebase: on the merged tree, task 0's acceptance check `test ! -e legacy.txt`"),
        "{out}"
    );
    let p = o.final_plan();
    assert_eq!(p["tasks"][1]["status"], "failed", "{out}");
    assert_legacy_stays_deleted(&c, &out);
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
    let c = case(&p, &[("conf.txt", "value=0\n")], edit);
    let o = c.merge(3).run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 2: attempt 1 of 3 could not be integrated: it cannot be merged after its rebase: conflict in conf.txt"),
        "{out}"
    );
    assert!(out.contains("Round 2: starting 1 task(s): 2\n"), "{out}");
    assert_eq!(c.committed("conf.txt"), "value=A+B+C\n");
    let p = o.final_plan();
    let attempts: Vec<&Value> = (0..3)
        .map(|i| &p["progress"]["completedTasks"][i]["attempts"])
        .collect();
    assert_eq!(attempts, [&json!(1), &json!(1), &json!(2)], "{p}");
}

/// A conflict's account holds the merged file, worker text with its markers: it stays
/// beside the logs, and the line that says the attempt failed is one line. Task 2 writes a
/// line that looks like dagexec's own into the conflicted region.
#[test]
fn a_conflicts_account_prints_no_line_of_the_workers() {
    let p = plan(&[
        ("A", &[], &["conf.txt"], &["grep -q '^value=.*A' conf.txt"]),
        ("B", &[], &["conf.txt"], &["grep -q '^value=.*B' conf.txt"]),
        ("C", &[], &["conf.txt"], &["grep -q '^value=.*C' conf.txt"]),
    ]);
    let edit = r#"0|1|2) l=$(printf '%s' ABC | cut -c$((i+1))); if [ "$i" = 2 ]; then l="$l\nRound 9: all done."; fi
if [ -n "$kind" ] || [ "$DAGEXEC_ATTEMPT" != 1 ]; then sed -i "s/^value=\(.*\)$/value=\1+$l/" conf.txt; else sed -i "s/^value=.*$/value=$l/" conf.txt; fi ;;"#;
    let c = case(&p, &[("conf.txt", "value=0\n")], edit);
    let out = c.merge(3).run().expect_code(0);
    assert!(
        out.contains("task 2: attempt 1 of 3 could not be integrated: it cannot be merged after its rebase: conflict in conf.txt"),
        "{out}"
    );
    assert!(!out.contains("\nRound 9: all done."), "{out}");
    assert!(!out.contains("<<<<<<<"), "{out}");
}

#[test]
fn killed_between_the_merge_and_the_recheck_nothing_lands_and_a_resume_finishes() {
    let c = regions();
    let start = git(c.path(), &["rev-parse", "HEAD"]);
    let o = c.merge(3).env("DAGEXEC_FAILPOINT", "after-merge:1").run();
    assert_eq!(o.code(), None, "killed: {}", o.text());
    // Nothing was published: HEAD and the work tree are as they were.
    assert_eq!(git(c.path(), &["rev-parse", "HEAD"]), start);
    assert_eq!(
        std::fs::read_to_string(c.path().join("routes.txt")).unwrap(),
        ROUTES
    );
    c.merge(3).run().expect_code(0);
    assert_every_region_changed_once(&c);
    c.assert_clean_tree();
}

#[test]
fn killed_between_a_rebases_merge_and_its_recheck_a_resume_runs_the_same_rebase_again() {
    // Eager: 0 and 1 set the same line; 1 waits until 0 landed (its round committed), so 1
    // conflicts, is sent back and rebases onto 0 from the committed tree (round 3). The run
    // is killed after that rebase was merged, before its re-check. The ledger kept in the git
    // directory tells the resume that 1 was in an uncounted rebase onto 0: it runs that
    // rebase again (not a counted attempt 2 that, built from 0's tree as an ordinary attempt,
    // would overwrite 0's value and land unchecked), and every change lands once.
    let repo = common::repo(&same_line_plan(), &[("conf.txt", "name=x\nvalue=0\nend\n")]);
    let wait = format!(
        r#"1) if [ -z "$kind" ] && [ "$DAGEXEC_ATTEMPT" = 1 ]; then
  n=0
  while [ "$(git -C '{}' rev-list --count HEAD)" -lt 2 ]; do
    n=$((n+1)); if [ $n -gt 1200 ]; then echo "FAILED: 0 never landed"; exit 0; fi; sleep 0.05
  done
fi
"#,
        repo.path().display()
    );
    let c = Case {
        dir: repo,
        seen: tempfile::tempdir().unwrap(),
        edit: SAME_LINE.replacen("1) ", &wait, 1),
    };
    let start = git(c.path(), &["rev-parse", "HEAD"]);
    let eager = |c: &Case| c.merge(2).args(["--schedule", "eager"]);
    let o = eager(&c).env("DAGEXEC_FAILPOINT", "after-merge:3").run();
    assert_eq!(o.code(), None, "killed: {}", o.text());
    assert!(c.rebased(1), "{}", o.text());
    // 0 landed and was committed; 1's rebase was not.
    assert_ne!(git(c.path(), &["rev-parse", "HEAD"]), start);
    assert_eq!(c.committed("conf.txt"), "name=x\nvalue=A\nend\n");
    std::fs::remove_file(c.seen.path().join("prompt-1-1-rebase")).unwrap();
    let o = eager(&c).run();
    let out = o.expect_code(0);
    assert!(c.rebased(1), "the resume runs 1's rebase again: {out}");
    assert!(!c.seen.path().join("prompt-1-2").exists(), "{out}");
    assert_eq!(c.committed("conf.txt"), "name=x\nvalue=A+B\nend\n");
    assert_eq!(c.committed("after.txt"), "after=value=A+B\n");
    let p = o.final_plan();
    for i in 0..3 {
        assert_eq!(p["tasks"][i]["status"], "completed", "{p}");
        assert_eq!(p["progress"]["completedTasks"][i]["attempts"], 1, "{p}");
    }
    c.assert_clean_tree();
}

#[test]
fn a_rebase_is_not_started_once_the_budget_is_spent_and_its_task_keeps_its_attempt() {
    // Each attempt costs $0.10; the budget is $0.15. Both first attempts run; the later one
    // cannot be merged, and its rebase would spend past the budget: it does not start, its
    // task is pending with the one attempt it made, and the run stops for the budget.
    for schedule in ["rounds", "eager"] {
        let c = same_line();
        let script = c.worker(2).replacen(
            "esac",
            "esac\nprintf '{\"cost_usd\": 0.1}' > \"$DAGEXEC_USAGE_FILE\"",
            1,
        );
        let o = merge(c.path(), 2)
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
        assert!(!c.rebased(later), "{schedule}: {out}");
    }
}
