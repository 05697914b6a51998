//! `overlap: merge` on the Action's rounds, driven job by job with the lab (as
//! `action_rounds` does): tasks that share a file run in ONE matrix; finalize lands the
//! first, merges the later one without landing it, and the round's next part re-checks the
//! merged tree in a job without the write token (no worker runs) before its finalize lands
//! it; a conflict or a failed re-check runs the task again as an uncounted rebase attempt.

use crate::common::lab::{self, Lab};

use serde_json::{Value, json};

const LIST: &str = "a\n1\n2\n3\n4\nb\n";

/// A task modifying `list.txt`, checked by `check`.
fn on_list(subject: &str, check: &str) -> Value {
    let mut t = lab::edit(subject, &[], &["list.txt"], &[]);
    t["agent"] = json!({"role": "engineer", "acceptanceCriteria": [
        {"criterion": format!("{subject} is in the list"), "check": check}
    ]});
    t
}

/// The lab on `dagexec/merge` with `overlap: merge` in `.design/dagexec.yml`.
fn merge_lab(tasks: Vec<Value>, worker: &str) -> Lab {
    lab::lab()
        .plan("Merge", tasks)
        .worker(worker)
        .branch("dagexec/merge")
        .file("list.txt", LIST)
        .file(".design/dagexec.yml", "overlap: merge\n")
        .start()
}

/// Each workflow run's matrix as (task, attempt) pairs, until a run asks for no other.
fn run_parts(lab: &Lab, limit: u64) -> (Vec<Vec<(u64, u64)>>, bool, String) {
    let mut parts = Vec::new();
    for run_id in 1..=limit {
        let dispatched = lab.gh.calls("actions/create-workflow-dispatch").len();
        let (outputs, ok, log) = lab.round_result(300 + run_id);
        let m: Value = serde_json::from_str(outputs.get("matrix").map_or("{}", String::as_str))
            .unwrap_or_default();
        parts.push(
            m["include"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| (e["task"].as_u64().unwrap(), e["attempt"].as_u64().unwrap()))
                .collect(),
        );
        let again = lab.gh.calls("actions/create-workflow-dispatch").len() > dispatched;
        if !ok || !again || outputs.get("has-work").map(String::as_str) != Some("true") {
            return (parts, ok, log);
        }
    }
    panic!("more than {limit} runs");
}

/// The attempt records of task `task`: (attempt, outcome, rebase).
fn records(plan: &Value, task: u64) -> Vec<(u64, String, bool)> {
    plan["progress"]["dagexecAttempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["task"].as_u64() == Some(task))
        .map(|r| {
            (
                r["attempt"].as_u64().unwrap_or_default(),
                r["outcome"].as_str().unwrap_or_default().to_string(),
                r["rebase"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn two_tasks_on_one_file_run_in_one_matrix_and_the_clean_merge_is_rechecked_before_it_lands() {
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0$' list.txt"),
            on_list("One", "grep -q '^b=1$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 6);
    assert!(ok, "{log}");
    // One matrix for both; the next part is task 1's re-check, attempt 1 again.
    assert_eq!(parts, vec![vec![(0, 1), (1, 1)], vec![(1, 1)]], "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    let subjects = lab.branch_log();
    assert!(
        subjects
            .iter()
            .any(|s| s == "dagexec: round 1 — 2/2 tasks (2/2 overall)"),
        "{subjects:#?}"
    );
    assert!(
        subjects
            .iter()
            .any(|s| s == "dagexec: round 1 (part 1) — 1/2 tasks resolved"),
        "{subjects:#?}"
    );
    let plan = lab.branch_plan();
    // The re-check is not an attempt: one record per task, no rebase.
    assert_eq!(
        records(&plan, 1),
        vec![(1, "completed".into(), false)],
        "{plan:#}"
    );
    assert_eq!(
        plan["progress"]["completedTasks"][1]["attempts"], 1,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_conflict_runs_the_later_task_again_as_a_rebase_attempt_on_the_integrated_tree() {
    // Task 1 rewrites the line task 0 rewrote; told to rebase, it builds on task 0's line.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*'task 0 (Zero)'*'CONFLICT'*) sed -i 's/^a=0$/a=0,1/' list.txt; echo "COMPLETED: one on top of zero" ;;
   *) sed -i 's/^a$/a=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0' list.txt"),
            on_list("One", "grep -q '1$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 6);
    assert!(ok, "{log}");
    assert_eq!(parts, vec![vec![(0, 1), (1, 1)], vec![(1, 1)]], "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0,1\n1\n2\n3\n4\nb\n");
    let plan = lab.branch_plan();
    assert_eq!(
        records(&plan, 1),
        vec![(1, "conflict".into(), false), (1, "completed".into(), true)],
        "{plan:#}"
    );
    // The rebase is not counted.
    assert_eq!(
        plan["progress"]["completedTasks"][1]["attempts"], 1,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_clean_merge_that_breaks_a_landed_tasks_check_is_rebased_and_never_lands() {
    // Task 0's check: exactly one `=` line. Task 1's `b=1` merges cleanly but breaks it on the
    // merged tree; rebased, task 1 writes `b1` instead.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*"task 0's acceptance check"*) sed -i 's/^b$/b1/' list.txt; echo "COMPLETED: one, no =" ;;
   *) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "test \"$(grep -c = list.txt)\" = 1"),
            on_list("One", "grep -q '^b=\\?1$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 8);
    assert!(ok, "{log}");
    // Both in one matrix, the re-check (it fails task 0's check), the rebase.
    assert_eq!(
        parts,
        vec![vec![(0, 1), (1, 1)], vec![(1, 1)], vec![(1, 1)]],
        "{log}"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb1\n");
    // At no commit of the branch is b=1 beside a=0.
    for c in crate::common::git(&lab.origin, &["rev-list", "dagexec/merge"]).lines() {
        let list = crate::common::git(&lab.origin, &["show", &format!("{c}:list.txt")]);
        assert!(!list.contains("b=1"), "{c}: {list}");
    }
    let plan = lab.branch_plan();
    assert_eq!(
        records(&plan, 1),
        vec![(1, "conflict".into(), false), (1, "completed".into(), true)],
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_merge_waiting_for_its_recheck_is_kept_in_the_plan_and_the_recheck_runs_no_worker() {
    // The worker refuses to run twice for task 1: the re-check must not start it.
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) if grep -q '^a=0$' list.txt; then echo "FAILED: ran on the integrated tree"; exit 0; fi
   sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0$' list.txt"),
            on_list("One", "grep -q '^b=1$' list.txt"),
        ],
        WORKER,
    );
    // The first run only: task 0 landed, task 1's merge waits in the record, not in the tree.
    let (_, ok, log) = lab.round_result(401);
    assert!(ok, "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb\n");
    let plan = lab.branch_plan();
    let follow = &plan["progress"]["dagexecRound"]["followUps"];
    assert_eq!(follow[0]["kind"], "recheck", "{plan:#}");
    assert_eq!(follow[0]["task"], 1, "{plan:#}");
    assert_eq!(follow[0]["checks"], json!([0]), "{plan:#}");
    assert_eq!(plan["tasks"][1]["status"], "pending", "{plan:#}");
    // The next run re-checks and lands it (its worker would have failed on this tree).
    let (parts, ok, log) = run_parts(&lab, 4);
    assert!(ok, "{log}");
    assert_eq!(parts[0], vec![(1, 1)], "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    lab.gh.assert_clean();
}

#[test]
fn a_rebase_that_cannot_land_either_is_a_failed_attempt_retried_on_the_integrated_tree() {
    // Tasks 1 and 2 both rewrite task 0's line; rebased side by side, they conflict again.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
n=$DAGEXEC_TASK_INDEX
case "$n" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
*) case "$prompt" in
   *'## Rebase'*) sed -i "1s/\$/,$n/" list.txt; echo "COMPLETED: $n rebased" ;;
   *) if [ "$DAGEXEC_ATTEMPT" -ge 2 ]; then sed -i "1s/\$/,$n/" list.txt; else sed -i "1s/.*/a=$n/" list.txt; fi
      echo "COMPLETED: $n" ;;
   esac ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0' list.txt"),
            on_list("One", "head -n 1 list.txt | grep -q 1"),
            on_list("Two", "head -n 1 list.txt | grep -q 2"),
        ],
        WORKER,
    );
    let (_, ok, log) = lab.round_result(400);
    assert!(ok, "{log}");
    let plan = lab.branch_plan();
    assert_eq!(
        plan["progress"]["dagexecRound"]["followUps"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{log}\n{plan:#}"
    );
    let (parts, ok, log) = run_parts(&lab, 8);
    assert!(ok, "{log}");
    assert_eq!(parts, vec![vec![(1, 1), (2, 1)], vec![(2, 2)]], "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0,1,2\n1\n2\n3\n4\nb\n");
    let plan = lab.branch_plan();
    let two = records(&plan, 2);
    assert_eq!(two.len(), 3, "{plan:#}");
    assert_eq!(two[0], (1, "conflict".into(), false), "{plan:#}");
    // The rebase's own record says it could not land; the retry is an ordinary attempt.
    assert_eq!(two[1], (1, "conflict".into(), true), "{plan:#}");
    assert_eq!(two[2], (2, "completed".into(), false), "{plan:#}");
    lab.gh.assert_clean();
}

#[test]
fn a_reviewed_task_merged_beside_another_lands_on_its_recheck_without_a_second_review() {
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
esac
"#;
    let mut one = on_list("One", "grep -q '^b=1$' list.txt");
    // The task names its own reviewer: its attempt's job runs it; the re-check's does not.
    one["reviewer"] = json!("echo APPROVED; echo 'summary: b is set'");
    let lab = merge_lab(
        vec![on_list("Zero", "grep -q '^a=0$' list.txt"), one],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 6);
    assert!(ok, "{log}");
    assert_eq!(parts, vec![vec![(0, 1), (1, 1)], vec![(1, 1)]], "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    let plan = lab.branch_plan();
    assert_eq!(
        records(&plan, 1),
        vec![(1, "completed".into(), false)],
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_merge_that_carries_a_change_into_a_file_the_task_does_not_declare_is_not_kept() {
    // Task 0 moves the list; git's merge follows the rename and would put task 1's line into
    // moved.txt, which task 1 does not declare: sent back, never kept for a re-check.
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) mv list.txt moved.txt; sed -i 's/^a$/a=0/' moved.txt; echo "COMPLETED: moved" ;;
1) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
esac
"#;
    let mut zero = lab::edit("Zero", &["moved.txt"], &["list.txt"], &[]);
    zero["agent"] = json!({"role": "engineer", "acceptanceCriteria": [
        {"criterion": "moved", "check": "test -f moved.txt"}
    ]});
    let lab = merge_lab(
        vec![zero, on_list("One", "grep -q '^b=1$' list.txt")],
        WORKER,
    );
    let (_, ok, log) = lab.round_result(500);
    assert!(ok, "{log}");
    let plan = lab.branch_plan();
    let follow = &plan["progress"]["dagexecRound"]["followUps"][0];
    assert_eq!(follow["kind"], "rebase", "{log}\n{plan:#}");
    assert_eq!(follow["task"], 1, "{plan:#}");
    assert!(
        follow["why"]
            .as_str()
            .unwrap_or_default()
            .contains("moved.txt, which task 1 does not declare"),
        "{plan:#}"
    );
    assert!(!lab.branch_file("moved.txt").contains("b=1"), "{log}");
}

/// Runs the lab's parts from workflow run `first`, each finalize killed (kill -9) right after
/// its push and run again from the same artifacts (the re-run must push nothing); the number
/// of parts. Every plan here has three tasks.
fn parts_killed_after_each_push(lab: &mut Lab, first: u64) -> usize {
    let mut parts = 0;
    for run_id in first..first + 9 {
        let planned = lab.plan_job(run_id, &[]);
        if !planned.has_work() {
            break;
        }
        parts += 1;
        let o = planned.outputs.clone();
        let artifacts = lab.tmp.path().join(format!("artifacts-{run_id}"));
        for (t, a) in planned.entries() {
            let name = format!("dagexec-{run_id}-1-task-{t}-attempt-{a}");
            lab.work_job(
                run_id,
                (t, a),
                &o["round"],
                &o["base"],
                &artifacts.join(name),
            );
        }
        // (The part that ends the round pushes at `final-push`: it runs to the end.)
        lab.set_env("DAGEXEC_FAILPOINT", "push:1");
        let (ok, log) = lab.finalize_job(run_id, &planned, &artifacts);
        lab.set_env("DAGEXEC_FAILPOINT", "");
        if ok {
            assert!(log.contains("All 3 tasks completed."), "{log}");
            continue;
        }
        let pushed = lab.branch_log();
        let (ok, log) = lab.finalize_job(run_id, &planned, &artifacts);
        assert!(ok, "{log}");
        assert_eq!(lab.branch_log(), pushed, "the re-run pushed again:\n{log}");
    }
    parts
}

/// Every commit of the branch, each with its `list.txt`.
fn lists(lab: &Lab) -> Vec<(String, String)> {
    crate::common::git(&lab.origin, &["rev-list", "dagexec/merge"])
        .lines()
        .map(|c| {
            let list = crate::common::git(&lab.origin, &["show", &format!("{c}:list.txt")]);
            (c.to_string(), list)
        })
        .collect()
}

#[test]
fn three_tasks_on_one_file_that_merge_cleanly_land_with_one_follow_up_part() {
    // Three lines of one file: the second and third candidates are merged aside as a chain
    // and re-checked side by side in ONE follow-up part, each on the tree it lands with.
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) sed -i 's/^2$/two/' list.txt; echo "COMPLETED: one" ;;
2) sed -i 's/^b$/b=2/' list.txt; echo "COMPLETED: two" ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0$' list.txt"),
            on_list("One", "grep -q '^two$' list.txt"),
            on_list("Two", "grep -q '^b=2$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 6);
    assert!(ok, "{log}");
    assert_eq!(
        parts,
        vec![vec![(0, 1), (1, 1), (2, 1)], vec![(1, 1), (2, 1)]],
        "{log}"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\ntwo\n3\n4\nb=2\n");
    let plan = lab.branch_plan();
    for t in 0..3 {
        assert_eq!(
            records(&plan, t),
            vec![(1, "completed".into(), false)],
            "task {t}: {plan:#}"
        );
    }
    let subjects = lab.branch_log();
    assert!(
        subjects
            .iter()
            .any(|s| s == "dagexec: round 1 — 3/3 tasks (3/3 overall)"),
        "{subjects:#?}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_chain_whose_middle_candidate_fails_its_recheck_lands_the_rest_and_never_the_rejected_change() {
    // Task 1's `b=1` merges cleanly but breaks task 0's check (one `=` line); task 2's line is
    // chained after it. Task 1 is rebased (writes `b1`); task 2, re-checked beside `b=1`, is
    // merged again onto what landed and lands on its own re-check.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*"task 0's acceptance check"*) sed -i 's/^b$/b1/' list.txt; echo "COMPLETED: one, no =" ;;
   *) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
2) sed -i 's/^2$/two/' list.txt; echo "COMPLETED: two" ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "test \"$(grep -c = list.txt)\" = 1"),
            on_list("One", "grep -q '^b=\\?1$' list.txt"),
            on_list("Two", "grep -q '^two$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 8);
    assert!(ok, "{log}");
    assert_eq!(
        parts,
        vec![
            // All three in one matrix; the chain (1, 2) re-checked side by side; task 1's
            // rebase, built on task 2's re-merged line, beside task 2's new re-check: it lands
            // right after task 2, with no part of its own.
            vec![(0, 1), (1, 1), (2, 1)],
            vec![(1, 1), (2, 1)],
            vec![(1, 1), (2, 1)],
        ],
        "{log}"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\ntwo\n3\n4\nb1\n");
    for (c, list) in lists(&lab) {
        assert!(!list.contains("b=1"), "{c}: {list}");
    }
    // The rebased task 1, built on task 2's line, lands in the same part: no commit holds
    // `b1` without `two`.
    assert!(
        lists(&lab)
            .iter()
            .all(|(_, l)| !l.contains("b1") || l.contains("two")),
        "{log}"
    );
    let plan = lab.branch_plan();
    assert_eq!(
        records(&plan, 1),
        vec![(1, "conflict".into(), false), (1, "completed".into(), true)],
        "{plan:#}"
    );
    assert_eq!(
        records(&plan, 2),
        vec![(1, "completed".into(), false)],
        "{plan:#}"
    );
    assert_eq!(
        plan["progress"]["completedTasks"][2]["attempts"], 1,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_finalize_killed_after_each_push_and_run_again_lands_every_chained_merge_once() {
    // The middle-failure chain again, each part's finalize killed (kill -9) right after its
    // push and run again from the same artifacts: the branch says what landed; the re-run
    // pushes nothing and nothing lands twice.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*"task 0's acceptance check"*) sed -i 's/^b$/b1/' list.txt; echo "COMPLETED: one, no =" ;;
   *) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
2) sed -i 's/^2$/two/' list.txt; echo "COMPLETED: two" ;;
esac
"#;
    let mut lab = merge_lab(
        vec![
            on_list("Zero", "test \"$(grep -c = list.txt)\" = 1"),
            on_list("One", "grep -q '^b=\\?1$' list.txt"),
            on_list("Two", "grep -q '^two$' list.txt"),
        ],
        WORKER,
    );
    let parts = parts_killed_after_each_push(&mut lab, 501);
    assert_eq!(parts, 3);
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\ntwo\n3\n4\nb1\n");
    for (c, list) in lists(&lab) {
        assert!(!list.contains("b=1"), "{c}: {list}");
    }
    let subjects = lab.branch_log();
    let mut rounds: Vec<&String> = subjects
        .iter()
        .filter(|s| s.starts_with("dagexec: round 1"))
        .collect();
    let n = rounds.len();
    rounds.dedup();
    assert_eq!(rounds.len(), n, "{subjects:#?}");
}

#[test]
fn a_rebase_sent_back_beside_a_chained_candidate_builds_on_it_and_lands_after_it() {
    // Task 1's `b=1` merges cleanly aside (the chain); task 2 rewrites the same line and
    // conflicts with that candidate. Its rebase starts from the part's base WITH task 1's
    // merged change applied, so it writes `b=1,2`, and lands right after task 1 lands.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
2) if grep -q '^b=1$' list.txt; then
     case "$prompt" in
     *'## Rebase'*'task 1 (One)'*) sed -i 's/^b=1$/b=1,2/' list.txt; echo "COMPLETED: two on one" ;;
     *) echo "FAILED: the prompt does not name task 1" ;;
     esac
   else sed -i 's/^b$/b=2/' list.txt; echo "COMPLETED: two"; fi ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list("Zero", "grep -q '^a=0$' list.txt"),
            on_list("One", "grep -q '^b=1' list.txt"),
            on_list("Two", "grep -q '^b=.*2$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 8);
    assert!(ok, "{log}");
    // One matrix; then task 1's re-check beside task 2's rebase, and nothing more.
    assert_eq!(
        parts,
        vec![vec![(0, 1), (1, 1), (2, 1)], vec![(1, 1), (2, 1)]],
        "{log}"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1,2\n");
    // No commit ever holds task 2's first (rejected) change; task 2's never lands before 1's.
    for (c, list) in lists(&lab) {
        assert!(!list.lines().any(|l| l == "b=2"), "{c}: {list}");
        assert!(
            !list.contains(",2") || list.contains("b=1,2"),
            "{c}: {list}"
        );
    }
    let plan = lab.branch_plan();
    // Exactly one rebase, no failed attempt, not counted.
    assert_eq!(
        records(&plan, 2),
        vec![(1, "conflict".into(), false), (1, "completed".into(), true)],
        "{plan:#}"
    );
    assert_eq!(
        records(&plan, 1),
        vec![(1, "completed".into(), false)],
        "{plan:#}"
    );
    assert_eq!(
        plan["progress"]["completedTasks"][2]["attempts"], 1,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_rebase_built_on_a_candidate_that_is_rejected_never_lands_its_change_and_is_sent_back_uncounted()
 {
    // Task 1's `b=1` fails task 0's check on its re-check; task 2's rebase, built on `b=1`,
    // wrote `b=1,2`: it conflicts with what landed (no `b=1`), so it goes back once more,
    // uncounted, and then builds on the tree without task 1's rejected change.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*) sed -i 's/^2$/2=1/' list.txt; echo "COMPLETED: one elsewhere" ;;
   *) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
2) if grep -q '^b=1$' list.txt; then sed -i 's/^b=1$/b=1,2/' list.txt; echo "COMPLETED: two on one"
   else sed -i 's/^b$/b=2/' list.txt; echo "COMPLETED: two"; fi ;;
esac
"#;
    let lab = merge_lab(
        vec![
            on_list(
                "Zero",
                "grep -q '^a=0$' list.txt && ! grep -qx 'b=1' list.txt",
            ),
            on_list("One", "grep -q '=1' list.txt"),
            on_list("Two", "grep -q '^b=.*2$' list.txt"),
        ],
        WORKER,
    );
    let (parts, ok, log) = run_parts(&lab, 8);
    assert!(ok, "{log}");
    assert_eq!(
        parts,
        vec![
            vec![(0, 1), (1, 1), (2, 1)],
            // Task 1's re-check fails; task 2's rebase on it cannot land without it.
            vec![(1, 1), (2, 1)],
            // Both rebased from what landed; task 2's clean merge beside task 1 re-checked.
            vec![(1, 1), (2, 1)],
            vec![(2, 1)],
        ],
        "{log}"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2=1\n3\n4\nb=2\n");
    for (c, list) in lists(&lab) {
        assert!(!list.lines().any(|l| l.starts_with("b=1")), "{c}: {list}");
    }
    let plan = lab.branch_plan();
    let two = records(&plan, 2);
    assert!(two.iter().all(|(a, _, _)| *a == 1), "{plan:#}");
    assert!(two.iter().all(|(_, o, _)| o != "failed"), "{plan:#}");
    assert_eq!(two.last(), Some(&(1, "completed".into(), true)), "{plan:#}");
    assert_eq!(
        plan["progress"]["completedTasks"][2]["attempts"], 1,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_finalize_killed_after_each_push_decides_a_rebase_built_on_the_chain_the_same() {
    // The rejected-candidate case above, each finalize killed after its push and run again.
    const WORKER: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;
1) case "$prompt" in
   *'## Rebase'*) sed -i 's/^2$/2=1/' list.txt; echo "COMPLETED: one elsewhere" ;;
   *) sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;
2) if grep -q '^b=1$' list.txt; then sed -i 's/^b=1$/b=1,2/' list.txt; echo "COMPLETED: two on one"
   else sed -i 's/^b$/b=2/' list.txt; echo "COMPLETED: two"; fi ;;
esac
"#;
    let mut lab = merge_lab(
        vec![
            on_list(
                "Zero",
                "grep -q '^a=0$' list.txt && ! grep -qx 'b=1' list.txt",
            ),
            on_list("One", "grep -q '=1' list.txt"),
            on_list("Two", "grep -q '^b=.*2$' list.txt"),
        ],
        WORKER,
    );
    assert_eq!(parts_killed_after_each_push(&mut lab, 601), 4);
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2=1\n3\n4\nb=2\n");
    for (c, list) in lists(&lab) {
        assert!(!list.lines().any(|l| l.starts_with("b=1")), "{c}: {list}");
    }
    let plan = lab.branch_plan();
    assert!(
        records(&plan, 2)
            .iter()
            .all(|(a, o, _)| *a == 1 && o != "failed"),
        "{plan:#}"
    );
}
