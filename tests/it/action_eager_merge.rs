//! `overlap: merge` under `schedule: eager` on Actions, with the conductor harness of
//! `action_eager` (the conductor a real process, every task run `action work` in its own
//! clone): tasks that share a file are dispatched side by side; the later arrival is merged
//! onto the branch without landing and lands only after a re-check run (no worker, no write
//! token) passed; a conflict or a failed re-check runs the task again as an uncounted rebase
//! run from the integrated tree; a conductor killed after dispatching a re-check is replaced
//! by one that adopts the run and lands it once. The plans, worker scripts and oracle checks
//! are `common::list_merge`'s, shared with `action_merge`; the pauses in the workers order
//! the arrivals.

use crate::action_eager::{BRANCH, Lab};
use crate::common::git;
use crate::common::list_merge::{
    LIST, assert_counted_once, assert_landed_first_time, assert_no_list, assert_rebased_once,
    assert_records, breaking_tasks, clean_tasks, moving_zero, on_list, one, one_on_zero,
    one_without_eq_on_rebase, others_on_the_first_line, worker, zero,
};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

/// The conductor lab with `list.txt`, and `overlap: merge` in `.design/dagexec.yml` when
/// `merge`.
fn lab(tasks: Vec<Value>, worker: &str, merge: bool) -> Arc<Lab> {
    let overlap = if merge {
        "overlap: merge\n"
    } else {
        "overlap: serial\n"
    };
    Arc::new(Lab::with_files(
        tasks,
        worker,
        &[("list.txt", LIST), (".design/dagexec.yml", overlap)],
    ))
}

/// Conductor `n` (with `env`) run to its end, which must be a success; its log.
fn conduct(lab: &Arc<Lab>, n: u64, env: &[(&str, &str)]) -> String {
    let conductor = lab.conductor(n, env);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(n);
    assert_eq!(code, 0, "{log}");
    log
}

/// Conductor 1, with task 1's first run held until task 0 landed (its base stays the first
/// commit): the workers' pauses alone ordered it after task 0's, and under CI's load it could
/// arrive first and land without meeting task 0.
fn conduct_after_zero(lab: &Arc<Lab>) -> String {
    let conductor = lab.conductor(1, &[]);
    let code = drive_holding(lab, conductor, |d, _| {
        run_ids(lab, "1").first() == Some(&d.run_id) && !lab.branch_file("list.txt").contains("a=0")
    });
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    log
}

/// Conductor 1, killed by the failpoint `failpoint`.
fn killed_at(lab: &Arc<Lab>, failpoint: &str) {
    let first = lab.conductor(1, &[("DAGEXEC_FAILPOINT", failpoint)]);
    let code = lab.drive(first, Duration::from_secs(60));
    assert_eq!(code, -1, "killed by its failpoint:\n{}", lab.conduct_log(1));
}

/// Every dispatched task run: (task, attempt, base).
fn dispatched(lab: &Lab) -> Vec<(String, String, String)> {
    lab.gh
        .state()
        .dispatches
        .iter()
        .filter_map(|d| {
            Some((
                d.inputs.get("task")?.as_str()?.to_string(),
                d.inputs.get("attempt")?.as_str()?.to_string(),
                d.inputs.get("base")?.as_str()?.to_string(),
            ))
        })
        .filter(|(t, _, _)| !t.is_empty())
        .collect()
}

/// The dispatched runs of `task`, in order.
fn runs_of<'a>(
    runs: &'a [(String, String, String)],
    task: &str,
) -> Vec<&'a (String, String, String)> {
    runs.iter().filter(|r| r.0 == task).collect()
}

/// The workflow run ids dispatched for `task`, in order.
fn run_ids(lab: &Lab, task: &str) -> Vec<u64> {
    lab.gh
        .state()
        .dispatches
        .iter()
        .filter(|d| d.inputs["task"] == task)
        .map(|d| d.run_id)
        .collect()
}

/// The follow-up a task run's base recorded on `task` (`dagexecFollowUp`), if any.
fn follow_up_at(lab: &Lab, base: &str, task: usize) -> Value {
    plan_at(lab, base)["tasks"][task]["dagexecFollowUp"].clone()
}

/// The plan at commit `rev` of the origin.
fn plan_at(lab: &Lab, rev: &str) -> Value {
    serde_json::from_str(&git(
        &lab.origin,
        &["show", &format!("{rev}:.design/plan.json")],
    ))
    .unwrap()
}

/// Task 0 edits the first line quickly; task 1 the last line, later (so it arrives after 0
/// landed).
fn clean() -> String {
    worker(&[&zero("sleep 0.3; "), &one("sleep 3; ")])
}

#[test]
fn two_tasks_on_one_file_run_side_by_side_and_the_later_lands_after_a_recheck_run() {
    let lab = lab(clean_tasks(), &clean(), true);
    let log = conduct(&lab, 1, &[]);
    let runs = dispatched(&lab);
    // Both first attempts were dispatched from the same base: side by side.
    let first = |t: &str| {
        runs.iter()
            .find(|(task, a, _)| task == t && a == "1")
            .unwrap_or_else(|| panic!("task {t} never dispatched: {runs:?}\n{log}"))
            .2
            .clone()
    };
    assert_eq!(first("0"), first("1"), "{runs:?}\n{log}");
    // Task 1 attempt 1 ran twice: its attempt, then its re-check from a base that keeps the
    // merged change on the task.
    let ones = runs_of(&runs, "1");
    assert_eq!(ones.len(), 2, "{runs:?}\n{log}");
    assert_eq!(ones[1].1, "1", "{runs:?}");
    let follow = follow_up_at(&lab, &ones[1].2, 1);
    assert_eq!(follow["kind"], "recheck", "{follow:#}\n{log}");
    assert_eq!(follow["checks"], json!([0]), "{follow:#}");
    assert_eq!(runs.len(), 3, "{runs:?}\n{log}");
    // Both landed; the re-check is not an attempt.
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
        assert!(t.get("dagexecFollowUp").is_none(), "{t:#}");
        assert!(t.get("dagexecRun").is_none(), "{t:#}");
    }
    assert_landed_first_time(&plan, 1);
    // b=1 never landed before its re-check: no commit holds it without a=0.
    assert_no_list(
        &lab.origin,
        BRANCH,
        |l| l.contains("b=1") && !l.contains("a=0"),
        &log,
    );
    lab.gh.assert_clean();
}

#[test]
fn under_serial_tasks_on_one_file_are_not_dispatched_side_by_side() {
    let lab = lab(clean_tasks(), &clean(), false);
    let log = conduct(&lab, 1, &[]);
    let runs = dispatched(&lab);
    assert_eq!(runs.len(), 2, "{runs:?}\n{log}");
    assert_ne!(runs[0].2, runs[1].2, "{runs:?}\n{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
}

#[test]
fn a_same_line_conflict_runs_the_later_task_again_as_a_rebase_that_lands() {
    // Task 1 rewrites the line task 0 rewrote; told to rebase, it builds on task 0's line.
    let lab = lab(
        vec![
            on_list("Zero", "grep -q '^a=0' list.txt"),
            on_list("One", "head -n 1 list.txt | grep -q '1$'"),
        ],
        &worker(&[&zero("sleep 0.3; "), &one_on_zero("sleep 2; ")]),
        true,
    );
    let log = conduct_after_zero(&lab);
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0,1\n1\n2\n3\n4\nb\n",
        "{log}"
    );
    let runs = dispatched(&lab);
    let ones = runs_of(&runs, "1");
    assert_eq!(ones.len(), 2, "{runs:?}\n{log}");
    let follow = follow_up_at(&lab, &ones[1].2, 1);
    assert_eq!(follow["kind"], "rebase", "{follow:#}");
    assert_eq!(follow["onto"], json!([0]), "{follow:#}");
    let plan = lab.branch_plan();
    assert_rebased_once(&plan, 1);
    // The rebase is not counted.
    assert_counted_once(&plan, 1);
    lab.gh.assert_clean();
}

#[test]
fn a_clean_merge_that_breaks_a_landed_tasks_check_is_rebased_and_never_lands() {
    // Task 0's check: exactly one `=` line. Task 1's `b=1` merges cleanly but breaks it on the
    // merged tree; rebased, task 1 writes `b1` instead.
    let lab = lab(
        breaking_tasks(),
        &worker(&[&zero("sleep 0.3; "), &one_without_eq_on_rebase("sleep 2; ")]),
        true,
    );
    let log = conduct_after_zero(&lab);
    // At no commit of the branch is b=1 beside a=0.
    assert_no_list(&lab.origin, BRANCH, |l| l.contains("b=1"), &log);
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0\n1\n2\n3\n4\nb1\n",
        "{log}"
    );
    // The attempt, its re-check, the rebase.
    let runs = dispatched(&lab);
    let ones = runs_of(&runs, "1");
    assert_eq!(ones.len(), 3, "{runs:?}\n{log}");
    assert_eq!(follow_up_at(&lab, &ones[1].2, 1)["kind"], "recheck");
    assert_eq!(follow_up_at(&lab, &ones[2].2, 1)["kind"], "rebase");
    assert_rebased_once(&lab.branch_plan(), 1);
    lab.gh.assert_clean();
}

#[test]
fn a_conductor_killed_after_dispatching_a_recheck_is_replaced_and_its_successor_lands_it_once() {
    let lab = lab(clean_tasks(), &clean(), true);
    killed_at(&lab, "follow-up-dispatched:1");
    // The re-check's run is on GitHub; the branch records its follow-up, not its run.
    let runs = dispatched(&lab);
    assert_eq!(runs.len(), 3, "{runs:?}");
    let recheck = &runs[2];
    assert_eq!((recheck.0.as_str(), recheck.1.as_str()), ("1", "1"));
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][1]["dagexecFollowUp"]["kind"], "recheck");
    assert!(plan["tasks"][1].get("dagexecRun").is_none(), "{plan:#}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb\n");

    let log = conduct(&lab, 2, &[]);
    assert!(
        log.contains("Adopting task 1 attempt 1")
            && log.contains("dispatched by a conductor that died"),
        "{log}"
    );
    // Nothing dispatched again; the merged change landed once.
    assert_eq!(dispatched(&lab), runs, "{log}");
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
    }
    assert_landed_first_time(&plan, 1);
    lab.gh.assert_clean();
}

#[test]
fn a_successor_rechecks_a_merge_with_the_checks_of_a_task_landed_before_it_started() {
    // As above, but the conductor that landed task 0 dies right after pushing it: its
    // successor (whose plan holds task 0 trimmed, without its checks) merges task 1's arrival,
    // and the re-check still runs task 0's check, read from the branch's history.
    let lab = lab(
        breaking_tasks(),
        &worker(&[&zero("sleep 0.3; "), &one_without_eq_on_rebase("sleep 4; ")]),
        true,
    );
    killed_at(&lab, "push:1");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert!(
        plan["tasks"][0]["agent"]
            .get("acceptanceCriteria")
            .is_none(),
        "{plan:#}"
    );

    let log = conduct(&lab, 2, &[]);
    assert_no_list(&lab.origin, BRANCH, |l| l.contains("b=1"), &log);
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0\n1\n2\n3\n4\nb1\n",
        "{log}"
    );
    let runs = dispatched(&lab);
    let ones = runs_of(&runs, "1");
    assert_eq!(ones.len(), 3, "{runs:?}\n{log}");
    let plan = plan_at(&lab, &ones[1].2);
    assert_eq!(
        plan["tasks"][1]["dagexecFollowUpChecks"]["0"][0]["check"],
        "test \"$(grep -c = list.txt)\" = 1",
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

/// Plays GitHub's runners as [`Lab::drive`] does, but holds back a dispatched task run while
/// `hold(run's dispatch, the runs finished so far)` says so.
fn drive_holding(
    lab: &Arc<Lab>,
    mut conductor: std::process::Child,
    hold: impl Fn(&crate::common::fake_github::Dispatch, &[u64]) -> bool,
) -> i32 {
    let finished: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
    let mut threads = Vec::new();
    let t0 = std::time::Instant::now();
    loop {
        let done = finished.lock().unwrap().clone();
        for d in lab.gh.state().dispatches {
            let task = d.inputs["task"].as_str().unwrap_or_default().to_string();
            if task.is_empty() || lab.started.lock().unwrap().contains(&d.run_id) || hold(&d, &done)
            {
                continue;
            }
            lab.started.lock().unwrap().insert(d.run_id);
            let (lab, finished) = (lab.clone(), finished.clone());
            threads.push(std::thread::spawn(move || {
                lab.task_run(&d);
                finished.lock().unwrap().push(d.run_id);
            }));
        }
        if let Some(status) = conductor.try_wait().unwrap() {
            for t in threads {
                t.join().unwrap();
            }
            return status.code().unwrap_or(-1);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the conductor did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rechecked_merge_is_merged_again_when_the_branch_moved_under_it_before_its_verdict() {
    // Tasks 1 and 2 each edit their own line of the list task 0 edited first: both merge
    // cleanly and wait for re-checks. Task 1's re-check run is held until task 2's change
    // landed, so it lands under task 1's kept copy first: that copy is merged again and
    // re-checked again before it lands.
    const TWO: &str = r#"2) sleep 2.5; sed -i 's/^3$/3=2/' list.txt; echo "COMPLETED: two" ;;"#;
    let mut tasks = clean_tasks();
    tasks.push(on_list("Two", "grep -q '^3=2$' list.txt"));
    let lab = lab(
        tasks,
        &worker(&[&zero("sleep 0.3; "), &one("sleep 1; "), TWO]),
        true,
    );
    let conductor = lab.conductor(1, &[]);
    // The first runs of tasks 1 and 2 are held until task 0 landed (their bases stay the
    // first commit): their pauses alone ordered them after task 0's, and on a loaded machine
    // task 1 once arrived first and landed without a merge. Task 1's re-check run is held
    // until task 2's re-checked change is on the branch.
    let code = drive_holding(&lab, conductor, |d, _| {
        let list = lab.branch_file("list.txt");
        let first_of = |t: &str| run_ids(&lab, t).first() == Some(&d.run_id);
        ((first_of("1") || first_of("2")) && !list.contains("a=0"))
            || (run_ids(&lab, "1").get(1) == Some(&d.run_id) && !list.contains("3=2"))
    });
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0\n1\n2\n3=2\n4\nb=1\n",
        "{log}"
    );
    // Task 1: its attempt, its re-check, and the re-check of its change merged again.
    let runs = dispatched(&lab);
    let ones = runs_of(&runs, "1");
    assert_eq!(ones.len(), 3, "{runs:?}\n{log}");
    for r in &ones[1..] {
        assert_eq!(follow_up_at(&lab, &r.2, 1)["kind"], "recheck", "{log}");
    }
    // The second re-check ran on a tree that holds task 2's line.
    let at = git(&lab.origin, &["show", &format!("{}:list.txt", ones[2].2)]);
    assert!(at.contains("3=2"), "{at}\n{log}");
    assert_eq!(
        log.matches("task 1: attempt 1 merges cleanly").count(),
        2,
        "{log}"
    );
    assert_landed_first_time(&lab.branch_plan(), 1);
    lab.gh.assert_clean();
}

#[test]
fn a_merge_that_carries_a_change_into_a_file_the_task_does_not_declare_is_rebased_not_kept() {
    // Task 0 moves the list; git's merge follows the rename and would put task 1's line into
    // moved.txt, which task 1 does not declare: sent back as a rebase, never re-checked.
    const MOVE: &str = r#"0) sleep 0.3; mv list.txt moved.txt; sed -i 's/^a$/a=0/' moved.txt; echo "COMPLETED: moved" ;;"#;
    const ONE: &str = r#"1) case "$prompt" in
   *'## Rebase'*'moved.txt, which task 1 does not declare'*) echo "FAILED: the list moved away" ;;
   *) sleep 1.5; sed -i 's/^b$/b=1/' list.txt 2>/dev/null; echo "COMPLETED: one" ;;
   esac ;;"#;
    let lab = lab(
        vec![moving_zero(), on_list("One", "grep -q '^b=1$' list.txt")],
        &worker(&[MOVE, ONE]),
        true,
    );
    let conductor = lab.conductor(1, &[]);
    lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    let runs = dispatched(&lab);
    let ones = runs_of(&runs, "1");
    assert!(ones.len() >= 2, "{runs:?}\n{log}");
    assert_eq!(
        (ones[1].0.as_str(), ones[1].1.as_str()),
        ("1", "1"),
        "{runs:?}"
    );
    let follow = follow_up_at(&lab, &ones[1].2, 1);
    assert_eq!(follow["kind"], "rebase", "{follow:#}\n{log}");
    assert!(
        follow["why"]
            .as_str()
            .unwrap_or_default()
            .contains("moved.txt, which task 1 does not declare"),
        "{follow:#}"
    );
    for c in git(&lab.origin, &["rev-list", BRANCH]).lines() {
        if git(&lab.origin, &["ls-tree", "--name-only", c, "moved.txt"]).is_empty() {
            continue;
        }
        let moved = git(&lab.origin, &["show", &format!("{c}:moved.txt")]);
        assert!(!moved.contains("b=1"), "{c}: {moved}\n{log}");
    }
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][1]["status"], "failed", "{plan:#}\n{log}");
}

#[test]
fn a_rebase_that_cannot_land_either_is_a_failed_attempt_retried_on_the_integrated_tree() {
    // Tasks 1 and 2 both rewrite task 0's line: each is sent back as a rebase. Task 2's
    // rebase is held until task 1's rebase ran (and landed), so it conflicts again: a failed
    // attempt, retried as an ordinary attempt on the integrated tree.
    let lab = lab(
        vec![
            on_list("Zero", "grep -q '^a=0' list.txt"),
            on_list("One", "head -n 1 list.txt | grep -q 1"),
            on_list("Two", "head -n 1 list.txt | grep -q 2"),
        ],
        &worker(&[
            &zero("sleep 0.3; "),
            &others_on_the_first_line("sleep \"$n\"; "),
        ]),
        true,
    );
    let conductor = lab.conductor(1, &[]);
    // The first runs of tasks 1 and 2 are held until task 0 landed (their bases stay the
    // first commit), as in the test above: their pauses alone ordered them after task 0's,
    // and on a loaded machine one arrived first, landed, and the holds below never ended.
    let code = drive_holding(&lab, conductor, |d, done| {
        let (ones, twos) = (run_ids(&lab, "1"), run_ids(&lab, "2"));
        let first = ones.first() == Some(&d.run_id) || twos.first() == Some(&d.run_id);
        (first && !lab.branch_file("list.txt").contains("a=0"))
            || (ones.get(1) == Some(&d.run_id) && twos.len() < 2)
            || (twos.get(1) == Some(&d.run_id) && !ones.get(1).is_some_and(|r| done.contains(r)))
    });
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0,1,2\n1\n2\n3\n4\nb\n",
        "{log}"
    );
    let plan = lab.branch_plan();
    assert_records(
        &plan,
        2,
        &[
            (1, "conflict", false),
            (1, "conflict", true),
            (2, "completed", false),
        ],
    );
    assert_rebased_once(&plan, 1);
    lab.gh.assert_clean();
}

/// Issue 31 §4: killed right after pushing the commit that keeps task 1's merge (round 2:
/// task 0 landed in round 1), before the re-check run is dispatched. The successor counted
/// the attempt as interrupted and the merged work was lost (task 1's worker ran again); it
/// finds no run of the re-check, dispatches it from the commit that keeps the merge, and the
/// merged change lands — no worker runs twice, no attempt is lost.
#[test]
fn a_conductor_killed_between_a_merge_and_its_recheck_run_keeps_the_merged_work() {
    let lab = lab(clean_tasks(), &clean(), true);
    killed_at(&lab, "push:2");
    assert_eq!(dispatched(&lab).len(), 2, "{:?}", dispatched(&lab));
    let plan = lab.branch_plan();
    assert_eq!(
        plan["tasks"][1]["dagexecFollowUp"]["kind"], "recheck",
        "{plan:#}"
    );

    let log = conduct(&lab, 2, &[]);
    assert!(
        log.contains("Task 1 attempt 1: its re-check was not started before the conductor stopped"),
        "{log}"
    );
    let runs = dispatched(&lab);
    assert_eq!(runs.len(), 3, "{runs:?}\n{log}");
    assert_eq!((runs[2].0.as_str(), runs[2].1.as_str()), ("1", "1"));
    assert_eq!(
        follow_up_at(&lab, &runs[2].2, 1)["kind"],
        "recheck",
        "the re-check runs from the commit that keeps the merge"
    );
    assert_eq!(lab.branch_file("list.txt"), "a=0\n1\n2\n3\n4\nb=1\n");
    assert_landed_first_time(&lab.branch_plan(), 1);
    lab.gh.assert_clean();
}

#[test]
fn a_merge_beside_a_task_landing_in_the_same_batch_is_rechecked_with_that_tasks_checks() {
    // Both runs end within one poll: task 0 lands in the batch's commit (its checks trimmed
    // there), task 1's merge beside it is re-checked at that commit, and must still run task
    // 0's check, which it breaks.
    let lab = lab(
        breaking_tasks(),
        &worker(&[&zero(""), &one_without_eq_on_rebase("")]),
        true,
    );
    let log = conduct(&lab, 1, &[("DAGEXEC_POLL", "5s")]);
    assert!(log.contains("Round 1: integrating task(s) 0, 1"), "{log}");
    assert_no_list(&lab.origin, BRANCH, |l| l.contains("b=1"), &log);
    assert_eq!(
        lab.branch_file("list.txt"),
        "a=0\n1\n2\n3\n4\nb1\n",
        "{log}"
    );
}

#[test]
fn a_merge_put_back_by_execute_abort_is_committed_as_the_conductor_says_it() {
    // Task 1's clean merge waits for its re-check when `/execute abort` is found at its
    // batch's push: no re-check starts, and the task is put back to pending. The branch the
    // conductor leaves says so too (not in progress with a follow-up no run will ever take).
    let lab = lab(clean_tasks(), &clean(), true);
    let conductor = lab.conductor(1, &[]);
    let t0 = std::time::Instant::now();
    let first = loop {
        if let Some((_, body)) = lab.status_comment() {
            break body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            lab.conduct_log(1)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Task 1's run is held until task 0 landed and the status comment told it; then
    // `/execute abort` marks the status comment (as the comment job does), found at task 1's
    // batch.
    let code = drive_holding(&lab, conductor, |d, _| {
        if run_ids(&lab, "1").first() != Some(&d.run_id) {
            return false;
        }
        let Some((_, body)) = lab.status_comment() else {
            return true;
        };
        if !lab.branch_file("list.txt").contains("a=0") || body == first {
            return true;
        }
        if !body.contains("abort-requested") {
            lab.ask_abort();
        }
        false
    });
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: aborted."), "{log}");
    assert!(log.contains("merges cleanly onto"), "{log}");
    let plan = lab.branch_plan();
    let one = &plan["tasks"][1];
    assert_eq!(one["status"], "pending", "{one:#}\n{log}");
    assert!(one.get("dagexecFollowUp").is_none(), "{one:#}\n{log}");
    // Its result does not say that a re-check runs.
    let result = one["result"].as_str().unwrap_or_default();
    assert!(
        !result.contains("runs now") && result.contains("not re-checked"),
        "{one:#}"
    );
    // Its merged change never landed: the attempt's record says it was interrupted.
    let records = &plan["progress"]["dagexecAttempts"];
    assert_eq!(records[1]["outcome"], "interrupted", "{records:#}");
    // No re-check was dispatched after the abort.
    assert_eq!(runs_of(&dispatched(&lab), "1").len(), 1, "{log}");
    lab.gh.assert_clean();
}

#[test]
fn a_merge_whose_recheck_never_started_is_put_back_when_the_next_conductor_finds_an_abort() {
    let lab = lab(clean_tasks(), &clean(), true);
    killed_at(&lab, "push:2");
    assert_eq!(dispatched(&lab).len(), 2, "{:?}", dispatched(&lab));
    // `/execute abort` marks the status comment (as the comment job does) before the next
    // conductor starts.
    assert!(lab.ask_abort(), "the status comment");
    let log = conduct(&lab, 2, &[]);
    assert!(log.contains("Conductor: aborted."), "{log}");
    assert!(
        log.contains("Task 1: it does not start after all, as `/execute abort` asked"),
        "{log}"
    );
    assert_eq!(dispatched(&lab).len(), 2, "nothing dispatched:\n{log}");
    let plan = lab.branch_plan();
    let one = &plan["tasks"][1];
    assert_eq!(one["status"], "pending", "{one:#}\n{log}");
    assert!(one.get("dagexecFollowUp").is_none(), "{one:#}");
    lab.gh.assert_clean();
}
