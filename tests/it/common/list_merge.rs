//! What the Action's two merge test files share (`action_merge`: finalize's rounds,
//! `action_eager_merge`: the conductor): the plan of tasks editing lines of one `list.txt`,
//! the worker scripts that edit it (each task a `case` line, with an optional `lead` run
//! before a first attempt's edit, e.g. a pause that orders arrivals under the conductor),
//! and the oracle checks on the branch's record: the attempt records, every change counted
//! once, no commit holding a rejected change.

use std::path::Path;

use serde_json::{Value, json};

use super::git;

/// The file every task edits, one line each.
pub const LIST: &str = "a\n1\n2\n3\n4\nb\n";

/// A task modifying `list.txt`, checked by `check`.
pub fn on_list(subject: &str, check: &str) -> Value {
    let mut t = super::lab::edit(subject, &[], &["list.txt"], &[]);
    t["agent"] = json!({"role": "engineer", "acceptanceCriteria": [
        {"criterion": format!("{subject} is in the list"), "check": check}
    ]});
    t
}

/// Task 0 sets `a=0`, task 1 `b=1`: two lines of one file, merging cleanly.
pub fn clean_tasks() -> Vec<Value> {
    vec![
        on_list("Zero", "grep -q '^a=0$' list.txt"),
        on_list("One", "grep -q '^b=1$' list.txt"),
    ]
}

/// Task 0's check says the list has exactly one `=` line; task 1 sets `b=1` (or `b1`): its
/// clean merge breaks task 0's check on the merged tree.
pub fn breaking_tasks() -> Vec<Value> {
    vec![
        on_list("Zero", "test \"$(grep -c = list.txt)\" = 1"),
        on_list("One", "grep -q '^b=\\?1$' list.txt"),
    ]
}

/// Task 0 moves the list to `moved.txt` (declaring both names).
pub fn moving_zero() -> Value {
    let mut zero = super::lab::edit("Zero", &["moved.txt"], &["list.txt"], &[]);
    zero["agent"] = json!({"role": "engineer", "acceptanceCriteria": [
        {"criterion": "moved", "check": "test -f moved.txt"}
    ]});
    zero
}

/// A worker script: the prompt read into `$prompt`, the task in `$n`, then `cases` (the
/// lines of a `case "$n"`).
pub fn worker(cases: &[&str]) -> String {
    format!(
        "#!/bin/sh\nprompt=$(cat)\nn=$DAGEXEC_TASK_INDEX\ncase \"$n\" in\n{}\nesac\n",
        cases.join("\n")
    )
}

/// Task 0 sets `a=0`.
pub fn zero(lead: &str) -> String {
    format!(r#"0) {lead}sed -i 's/^a$/a=0/' list.txt; echo "COMPLETED: zero" ;;"#)
}

/// Task 1 sets `b=1`.
pub fn one(lead: &str) -> String {
    format!(r#"1) {lead}sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;"#)
}

/// Task 1 sets `a=1` (task 0's line); told to rebase onto task 0's conflict, `a=0,1`.
pub fn one_on_zero(lead: &str) -> String {
    format!(
        r#"1) case "$prompt" in
   *'## Rebase'*'task 0 (Zero)'*'CONFLICT'*) sed -i 's/^a=0$/a=0,1/' list.txt; echo "COMPLETED: one on top of zero" ;;
   *) {lead}sed -i 's/^a$/a=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;"#
    )
}

/// Task 1 sets `b=1`; told to rebase because of task 0's check, `b1` (no `=`).
pub fn one_without_eq_on_rebase(lead: &str) -> String {
    format!(
        r#"1) case "$prompt" in
   *'## Rebase'*"task 0's acceptance check"*) sed -i 's/^b$/b1/' list.txt; echo "COMPLETED: one, no =" ;;
   *) {lead}sed -i 's/^b$/b=1/' list.txt; echo "COMPLETED: one" ;;
   esac ;;"#
    )
}

/// Every other task `$n` rewrites the first line to `a=$n`; rebased (or on a later attempt)
/// it appends `,$n` to it.
pub fn others_on_the_first_line(lead: &str) -> String {
    format!(
        r#"*) case "$prompt" in
   *'## Rebase'*) sed -i "1s/\$/,$n/" list.txt; echo "COMPLETED: $n rebased" ;;
   *) if [ "$DAGEXEC_ATTEMPT" -ge 2 ]; then sed -i "1s/\$/,$n/" list.txt; else {lead}sed -i "1s/.*/a=$n/" list.txt; fi
      echo "COMPLETED: $n" ;;
   esac ;;"#
    )
}

/// The attempt records of task `task`: (attempt, outcome, rebase).
pub fn records(plan: &Value, task: u64) -> Vec<(u64, String, bool)> {
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

/// Task `task` has exactly the attempt records `want`.
pub fn assert_records(plan: &Value, task: u64, want: &[(u64, &str, bool)]) {
    let want: Vec<(u64, String, bool)> = want
        .iter()
        .map(|&(a, o, r)| (a, o.to_string(), r))
        .collect();
    assert_eq!(records(plan, task), want, "task {task}: {plan:#}");
}

/// Task `task` landed at its first attempt, with no rebase (a re-check is not an attempt).
pub fn assert_landed_first_time(plan: &Value, task: u64) {
    assert_records(plan, task, &[(1, "completed", false)]);
}

/// Task `task`'s first attempt was sent back once and its rebase landed.
pub fn assert_rebased_once(plan: &Value, task: u64) {
    assert_records(
        plan,
        task,
        &[(1, "conflict", false), (1, "completed", true)],
    );
}

/// Task `task` completed with one counted attempt (a rebase is not counted).
pub fn assert_counted_once(plan: &Value, task: usize) {
    assert_eq!(
        plan["progress"]["completedTasks"][task]["attempts"], 1,
        "{plan:#}"
    );
}

/// `list.txt` at every commit of `branch` in `origin`.
pub fn every_list(origin: &Path, branch: &str) -> Vec<(String, String)> {
    git(origin, &["rev-list", branch])
        .lines()
        .map(|c| {
            let list = git(origin, &["show", &format!("{c}:list.txt")]);
            (c.to_string(), list)
        })
        .collect()
}

/// No commit of `branch` holds a `list.txt` for which `held` is true.
pub fn assert_no_list(origin: &Path, branch: &str, held: impl Fn(&str) -> bool, log: &str) {
    for (c, list) in every_list(origin, branch) {
        assert!(!held(&list), "{c}: {list}\n{log}");
    }
}
