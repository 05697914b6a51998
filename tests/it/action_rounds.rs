//! Whole runs of the Action's rounds driven job by job, the way a workflow run does it but
//! without act: `action plan` in a fresh clone, one `action work` per matrix entry (each in its
//! own fresh clone at the round's base), then `action finalize`, against a bare remote and the
//! fake GitHub API, until a round does not ask for another. What these runs check is that the
//! things people read are true of a plan that really ran: round commit messages, the circuit
//! breaker's numbers on the check run, and attempt counts after retries in the PR body.

use crate::common::lab::{self, Lab, edit, task};
use crate::common::{self, dagexec, git};

use serde_json::{Value, json};

/// Task 0 fails twice, then completes; task 1 never works; the others complete.
const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) if [ "$DAGEXEC_ATTEMPT" -ge 3 ]; then echo zero > a.txt; echo "COMPLETED: a on attempt $DAGEXEC_ATTEMPT";
   else echo "FAILED: not yet (attempt $DAGEXEC_ATTEMPT)"; fi ;;
1) echo "FAILED: b never works" ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;

/// Task N writes `t{N+1}.txt` and completes.
const WRITES_ITS_FILE: &str = "#!/bin/sh\ncat > /dev/null\necho x > \"t$((DAGEXEC_TASK_INDEX + 1)).txt\"; echo \"COMPLETED: done\"\n";

/// The shared lab ([`crate::common::lab`]) on branch `dagexec/rounds`, run workflow run by
/// workflow run: its plan is `tasks`, its worker the script `worker` (committed as
/// `worker.sh`), and its repository holds `files`.
fn rounds_lab(tasks: Vec<Value>, worker: &str, files: &[(&str, &str)]) -> Lab {
    let mut b = lab::lab()
        .plan("Rounds", tasks)
        .worker(worker)
        .branch("dagexec/rounds");
    for (rel, text) in files {
        b = b.file(rel, text);
    }
    b.start()
}

/// A rounds lab with [`WORKER`] and no other files.
fn new_lab(tasks: Vec<Value>) -> Lab {
    rounds_lab(tasks, WORKER, &[])
}

fn lab_with_worker(tasks: Vec<Value>, worker: &str) -> Lab {
    rounds_lab(tasks, worker, &[])
}

/// Two tasks, the second after the first, each writing its file: the finalize re-run tests'.
fn one_then_two() -> Lab {
    lab_with_worker(
        vec![
            task("one", &["t1.txt"], &[]),
            task("two", &["t2.txt"], &[0]),
        ],
        WRITES_ITS_FILE,
    )
}

#[test]
fn rounds_say_what_happened_breaker_numbers_and_attempt_counts_are_the_real_ones() {
    let lab = new_lab(vec![
        task("Zero", &["a.txt"], &[]),
        task("One", &["b.txt"], &[]),
        task("Two", &["t2.txt"], &[1]),
        task("Three", &["t3.txt"], &[1]),
        task("Four", &["t4.txt"], &[0]),
    ]);
    let (ok, log) = lab.run_rounds(6);
    assert!(!ok, "the circuit breaker fails finalize:\n{log}");

    // The seed's round is the whole ready set, retries included: tasks 0 and 1 take three
    // attempts each in round 1 (three workflow runs: two parts, then the round's end), and
    // the round ends with one commit in the one format, one update and one breaker decision.
    let subjects = lab.branch_log();
    let rounds: Vec<&String> = subjects
        .iter()
        .filter(|s| s.starts_with("dagexec: round"))
        .collect();
    assert_eq!(
        rounds,
        [
            "dagexec: round 1 — 1/2 tasks (1/5 overall)",
            "dagexec: round 1 (part 2) — 0/2 tasks resolved",
            "dagexec: round 1 (part 1) — 0/2 tasks resolved",
        ],
        "{subjects:#?}"
    );

    // The breaker decided on round 1: tasks 2, 3 and 4 were pending before the cascade, and
    // the cascade skipped 2 and 3.
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1, "{log}");
    let summary = checks[0].body.as_ref().unwrap()["output"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("Circuit breaker triggered: 2/3 pending tasks"),
        "{summary}"
    );
    // The round is closed: no open-round record is left on the branch.
    let state: Value = serde_json::from_str(&git(
        &lab.origin,
        &["show", "dagexec/rounds:.design/plan.json"],
    ))
    .unwrap();
    assert!(state["progress"].get("dagexecRound").is_none(), "{state:#}");
    assert_eq!(state["progress"]["round"], 1, "{state:#}");

    // Task 0 took three attempts; completion trims the task's own field, the table does not
    // forget.
    assert_eq!(state["tasks"][0]["status"], "completed", "{state:#}");
    assert_eq!(
        state["progress"]["completedTasks"][0]["attempts"], 3,
        "{state:#}"
    );
    let body = lab
        .gh
        .calls("pulls/update")
        .last()
        .and_then(|c| c.body.clone())
        .and_then(|b| b["body"].as_str().map(str::to_string))
        .expect("the PR body was updated");
    let row = body
        .lines()
        .find(|l| l.starts_with("| 0 |"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(row.contains("completed | 3 |"), "{row}");
    let row = body.lines().find(|l| l.starts_with("| 1 |")).unwrap();
    assert!(row.contains("failed | 3 |"), "{row}");
    lab.gh.assert_clean();
}

/// The issue's example: tasks 0 and 1 share a file, task 0 fails three times. The seed's
/// round is {0, 1} (0 and 1 one after another, 0's retries inside the round), so the breaker
/// is evaluated once the round is resolved: 2 (tasks 2, 3) of the 4 pending (2–5) would be
/// skipped → abort. A workflow run per conflict-free batch evaluated it over {0} alone
/// (2 of 5: it carried on).
#[test]
fn the_circuit_breaker_is_evaluated_over_the_whole_round_after_its_parts_and_retries() {
    const FAILS: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo "FAILED: zero never works (attempt $DAGEXEC_ATTEMPT)" ;;
1) echo one >> shared.txt; echo "COMPLETED: one" ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;
    let lab = rounds_lab(
        vec![
            edit("Zero", &[], &["shared.txt"], &[]),
            edit("One", &[], &["shared.txt"], &[]),
            task("Two", &["t2.txt"], &[0]),
            task("Three", &["t3.txt"], &[0]),
            task("Four", &["t4.txt"], &[1]),
            task("Five", &["t5.txt"], &[1]),
        ],
        FAILS,
        &[("shared.txt", "start\n")],
    );
    // Run by run: the part of round 1 that each plan job chose.
    let mut matrices = Vec::new();
    let mut last = (true, String::new());
    for run_id in 1..=8 {
        let dispatched = lab.gh.calls("actions/create-workflow-dispatch").len();
        let (outputs, ok, log) = lab.round_result(200 + run_id);
        matrices.push((
            outputs.get("round").cloned().unwrap_or_default(),
            outputs.get("matrix").cloned().unwrap_or_default(),
        ));
        last = (ok, log);
        let again = lab.gh.calls("actions/create-workflow-dispatch").len() > dispatched;
        if !ok || !again {
            break;
        }
    }
    let (ok, log) = last;
    assert!(!ok, "the circuit breaker fails finalize:\n{log}");
    // Round 1 took four runs: task 0 three times (its group first: it heads as long a chain
    // as task 1 and comes first in the plan), then task 1 on top of what they left.
    let tasks_of = |m: &str| -> Vec<(u64, u64)> {
        serde_json::from_str::<Value>(m).unwrap()["include"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["task"].as_u64().unwrap(), e["attempt"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(matrices.len(), 4, "{matrices:#?}");
    for (round, _) in &matrices {
        assert_eq!(round, "1", "{matrices:#?}");
    }
    let parts: Vec<Vec<(u64, u64)>> = matrices.iter().map(|(_, m)| tasks_of(m)).collect();
    assert_eq!(
        parts,
        vec![vec![(0, 1)], vec![(0, 2)], vec![(0, 3)], vec![(1, 1)]]
    );
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1, "{log}");
    let summary = checks[0].body.as_ref().unwrap()["output"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("Circuit breaker triggered: 2/4 pending tasks"),
        "{summary}"
    );
    let subjects = lab.branch_log();
    assert_eq!(
        subjects[0], "dagexec: round 1 — 1/2 tasks (1/6 overall)",
        "{subjects:#?}"
    );
    let state: Value = serde_json::from_str(&git(
        &lab.origin,
        &["show", "dagexec/rounds:.design/plan.json"],
    ))
    .unwrap();
    let statuses: Vec<&str> = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "failed",
            "completed",
            "skipped",
            "skipped",
            "pending",
            "pending"
        ]
    );
    let shared = git(&lab.origin, &["show", "dagexec/rounds:shared.txt"]);
    assert_eq!(shared, "start\none\n");
    lab.gh.assert_clean();
}

/// A plan whose ready tasks share files takes as many rounds on Actions as `dagexec run`
/// takes locally, each round with the same tasks: the round commits are the same.
#[test]
fn rounds_with_conflicting_ready_tasks_are_the_seeds_rounds_as_locally() {
    const APPENDS: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0|1|3) echo "t$DAGEXEC_TASK_INDEX" >> shared.txt; echo "COMPLETED: appended t$DAGEXEC_TASK_INDEX" ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;
    let tasks = vec![
        edit("Zero", &[], &["shared.txt"], &[]),
        edit("One", &[], &["shared.txt"], &[]),
        task("Two", &["t2.txt"], &[]),
        edit("Three", &[], &["shared.txt"], &[0]),
        task("Four", &["t4.txt"], &[1, 2]),
    ];
    let files = [("shared.txt", "start\n")];

    // Locally.
    let plan = json!({
        "schemaVersion": 2, "goal": "Rounds", "context": {},
        "progress": {"completedTasks": []}, "tasks": tasks.clone()
    });
    let local = common::repo(&plan, &files);
    let (_w, worker) = common::worker(APPENDS);
    let out = dagexec(local.path())
        .args([
            "run",
            "--worker",
            &worker,
            "--jobs",
            "4",
            "--timeout",
            "20s",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", lab::text(&out));
    let round_commits = |log: String| -> Vec<String> {
        log.lines()
            .filter(|s| s.starts_with("dagexec: round") && !s.contains("(part "))
            .map(str::to_string)
            .collect()
    };
    let locally = round_commits(git(local.path(), &["log", "--format=%s"]));

    // On Actions.
    let lab = rounds_lab(tasks, APPENDS, &files);
    let (ok, log) = lab.run_rounds(8);
    assert!(ok, "{log}");
    let on_actions = round_commits(lab.branch_log().join("\n"));
    assert_eq!(
        locally,
        [
            "dagexec: round 2 — 2/2 tasks (5/5 overall)",
            "dagexec: round 1 — 3/3 tasks (3/5 overall)",
        ]
    );
    assert_eq!(on_actions, locally, "{:#?}", lab.branch_log());
    // The round's second group (task 1) started from the first group's work.
    let shared = git(&lab.origin, &["show", "dagexec/rounds:shared.txt"]);
    assert_eq!(shared, "start\nt0\nt1\nt3\n");
    lab.gh.assert_clean();
}

/// A task of an open round that a person reopens between two of its runs (what
/// `/execute retry` or an answer commits: pending again, fresh attempts) runs again in that
/// round, and the round ends once it is resolved: the record on the branch is reconciled with
/// the plan, not trusted over it.
#[test]
fn a_task_reopened_while_its_round_is_open_runs_again_in_that_round() {
    const ASKS: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) if [ -f unblocked ]; then echo zero >> shared.txt; echo "COMPLETED: zero";
   else echo "BLOCKED: which format?"; fi ;;
1) echo one >> shared.txt; echo "COMPLETED: one" ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;
    let lab = rounds_lab(
        vec![
            edit("Zero", &[], &["shared.txt"], &[]),
            edit("One", &[], &["shared.txt"], &[]),
            task("Two", &["t2.txt"], &[0, 1]),
        ],
        ASKS,
        &[("shared.txt", "start\n")],
    );
    // Part 1 of round 1: task 0 (task 1 shares its file) is blocked; task 1 waits.
    let (outputs, ok, log) = lab.round_result(301);
    assert!(ok, "{log}");
    assert_eq!(outputs["round"], "1");
    let state: Value = serde_json::from_str(&git(
        &lab.origin,
        &["show", "dagexec/rounds:.design/plan.json"],
    ))
    .unwrap();
    assert_eq!(state["tasks"][0]["status"], "blocked", "{state:#}");
    assert_eq!(
        state["progress"]["dagexecRound"],
        json!({"round": 1, "tasks": [0, 1], "parts": 1}),
        "{state:#}"
    );
    // A person reopens task 0 on the branch (as `/execute retry 0` does) and unblocks it.
    let by_hand = lab.tmp.path().join("by-hand");
    git(
        lab.tmp.path(),
        &[
            "clone",
            "-q",
            "-b",
            "dagexec/rounds",
            lab.origin.to_str().unwrap(),
            by_hand.to_str().unwrap(),
        ],
    );
    let mut plan = state.clone();
    plan["tasks"][0]["status"] = json!("pending");
    plan["tasks"][0]["attempts"] = json!(0);
    plan["tasks"][0]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| k != "result" && k != "question");
    std::fs::write(
        by_hand.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    std::fs::write(by_hand.join("unblocked"), "yes\n").unwrap();
    git(&by_hand, &["add", "-A"]);
    git(&by_hand, &["commit", "-qm", "dagexec: retry task 0"]);
    git(&by_hand, &["push", "-q", "origin", "dagexec/rounds"]);

    let (ok, log) = lab.run_rounds(6);
    assert!(ok, "{log}");
    let subjects = lab.branch_log();
    let ours: Vec<&str> = subjects
        .iter()
        .map(String::as_str)
        .filter(|s| s.starts_with("dagexec: round"))
        .collect();
    assert_eq!(
        ours,
        [
            "dagexec: round 2 — 1/1 tasks (3/3 overall)",
            "dagexec: round 1 — 2/2 tasks (2/3 overall)",
            "dagexec: round 1 (part 2) — 1/2 tasks resolved",
            "dagexec: round 1 (part 1) — 1/2 tasks resolved",
        ],
        "{subjects:#?}"
    );
    let shared = git(&lab.origin, &["show", "dagexec/rounds:shared.txt"]);
    assert_eq!(shared, "start\nzero\none\n");
    lab.gh.assert_clean();
}

/// Every task reports $0.40: task 2 as `claude -p --output-format json` does (its status line in
/// `result`), the others in their usage file.
const PAYING_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"
if [ "$DAGEXEC_TASK_INDEX" = 2 ]; then
  cat <<'JSON'
{"type":"result","subtype":"success","is_error":false,"result":"Wrote it.\n\nCOMPLETED: t2","total_cost_usd":0.4,"usage":{"input_tokens":400,"cache_read_input_tokens":600,"output_tokens":50},"modelUsage":{"m-1":{"costUSD":0.4}}}
JSON
else
  printf '{"cost_usd": 0.4, "input_tokens": 1000, "output_tokens": 50, "model": "m-1"}' > "$DAGEXEC_USAGE_FILE"
  echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
fi
"#;

/// "Re-run failed jobs" after a run whose finalize died before its push: the re-run's work
/// job spends again and uploads its artifact as run attempt 2, while attempt 1's artifact is
/// still the run's (GitHub lists every attempt's). Finalize judges the newest and counts both
/// attempts' spend, each once: $0.40 twice, 2,000 tokens.
#[test]
fn a_re_run_of_failed_jobs_counts_every_run_attempts_spend_once() {
    let mut lab = lab_with_worker(vec![task("Zero", &["t0.txt"], &[])], PAYING_WORKER);
    let (round, _) = lab.round_killed_at("after-commit:1", 1);
    lab.set_env("DAGEXEC_FAILPOINT", "");
    lab.set_env("GITHUB_RUN_ATTEMPT", "2");
    let (o, artifacts) = (&round.planned.outputs, lab.tmp.path().join("artifacts-1"));
    let again = artifacts.join("dagexec-1-2-task-0-attempt-1");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &again);
    let (ok, text) = lab.finalize_job(1, &round.planned, &artifacts);
    assert!(ok, "{text}");
    let records = lab.branch_plan()["progress"]["dagexecAttempts"].clone();
    assert_eq!(records.as_array().map(Vec::len), Some(1), "{records}");
    let r = &records[0];
    assert!((r["costUsd"].as_f64().unwrap() - 0.8).abs() < 1e-9, "{r}");
    assert_eq!(r["inputTokens"], 2000, "{r}");
    lab.gh.assert_clean();
}

/// The `max-cost` budget on Actions: the round that spends it is committed with each attempt's
/// time and cost, then nothing more is dispatched and the check run fails naming the budget,
/// what was spent and what it bought; a later run plans no work while it stays spent.
#[test]
fn the_budget_stops_dispatching_with_a_failing_check_run() {
    let mut lab = lab_with_worker(
        vec![
            task("Zero", &["t0.txt"], &[]),
            task("One", &["t1.txt"], &[]),
            task("Two", &["t2.txt"], &[]),
            task("Three", &["t3.txt"], &[0]),
        ],
        PAYING_WORKER,
    );
    lab.set_env("DAGEXEC_MAX_COST", "1");
    let (ok, log) = lab.run_rounds(4);
    assert!(!ok, "a spent budget fails finalize:\n{log}");
    assert!(log.contains("output conclusion=budget"), "{log}");
    assert_eq!(
        lab.gh.calls("actions/create-workflow-dispatch").len(),
        0,
        "{log}"
    );
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 1, "{log}");
    let check = checks[0].body.clone().unwrap();
    assert_eq!(check["conclusion"], "failure", "{check:#}");
    assert_eq!(
        check["output"]["title"],
        "Stopped: the budget of $1.00 is spent ($1.20 recorded)"
    );
    let summary = check["output"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("$1.20 recorded over 3 attempt(s) bought 3 of 4 task(s) completed"),
        "{summary}"
    );
    assert!(
        summary.contains("### What it bought\n- task 0 (Zero): $0.40\n"),
        "{summary}"
    );

    // Each attempt's span and usage were committed with the round.
    let state: Value = serde_json::from_str(&git(
        &lab.origin,
        &["show", "dagexec/rounds:.design/plan.json"],
    ))
    .unwrap();
    let records = state["progress"]["dagexecAttempts"]
        .as_array()
        .expect("records");
    let stamp = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").unwrap();
    let tasks: Vec<_> = records
        .iter()
        .map(|r| r["task"].as_u64().unwrap())
        .collect();
    assert_eq!(tasks, [0, 1, 2], "{records:?}");
    for r in records {
        assert_eq!(
            (r["attempt"].as_u64(), r["outcome"].as_str()),
            (Some(1), Some("completed"))
        );
        assert_eq!(
            (r["costUsd"].as_f64(), r["inputTokens"].as_u64()),
            (Some(0.4), Some(1000))
        );
        assert_eq!(r["model"], "m-1");
        assert!(stamp.is_match(r["start"].as_str().unwrap()), "{r}");
        assert!(r["seconds"].as_f64().unwrap() >= 0.0, "{r}");
    }
    assert_eq!(state["tasks"][3]["status"], "pending");
    let summaries: Vec<_> = state["progress"]["completedTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].clone())
        .collect();
    assert!(summaries.contains(&json!("t2")), "{summaries:?}");
    let body = lab
        .gh
        .calls("pulls/update")
        .last()
        .and_then(|c| c.body.clone())
        .and_then(|b| b["body"].as_str().map(str::to_string))
        .or_else(|| {
            lab.gh
                .calls("pulls/create")
                .last()
                .and_then(|c| c.body.clone())
                .and_then(|b| b["body"].as_str().map(str::to_string))
        })
        .expect("a PR body");
    assert!(body.contains("| Time | Cost |"), "{body}");
    assert!(
        body.contains("**Time and cost:** 3 attempt(s) · "),
        "{body}"
    );
    assert!(body.contains(" · $1.20"), "{body}");

    // A later run (an `/execute`) plans nothing while the budget stays spent.
    let (outputs, _, text) = lab.round_result(200);
    assert_eq!(outputs["conclusion"], "budget", "{text}");
    assert_eq!(
        outputs.get("has-work").map(String::as_str),
        Some("false"),
        "{text}"
    );
    assert!(text.contains("the budget of $1.00 is spent"), "{text}");
    // Its finalize (which always runs) reports the stop again as a failing check run.
    let base = outputs["base"].clone();
    let dir = lab.checkout(&base);
    let out = lab
        .job(&dir, 200)
        .args(["action", "finalize"])
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_ROUND", &outputs["round"])
        .env("DAGEXEC_CONCLUSION", &outputs["conclusion"])
        .env("DAGEXEC_MESSAGE", &outputs["message"])
        .env("DAGEXEC_ARTIFACTS", lab.tmp.path().join("none"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("output conclusion=budget"), "{log}");
    let checks = lab.gh.calls("checks/create");
    assert_eq!(checks.len(), 2, "{log}");
    let check = checks[1].body.clone().unwrap();
    assert_eq!(check["conclusion"], "failure", "{check:#}");
    assert!(
        check["output"]["summary"]
            .as_str()
            .unwrap()
            .contains("bought 3 of 4 task(s) completed"),
        "{check:#}"
    );
    assert_eq!(lab.gh.calls("actions/create-workflow-dispatch").len(), 0);
    // With a higher budget the run goes on.
    lab.set_env("DAGEXEC_MAX_COST", "5");
    let (ok, log) = lab.run_rounds(4);
    assert!(ok, "{log}");
    let state: Value = serde_json::from_str(&git(
        &lab.origin,
        &["show", "dagexec/rounds:.design/plan.done.json"],
    ))
    .unwrap_or_else(|_| panic!("{log}"));
    assert_eq!(
        state["progress"]["dagexecAttempts"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    lab.gh.assert_clean();
}

/// A work job reads a work log its worker left in the checkout only when it is a regular
/// file: a link there (to the job's credentials, say) would carry that file into the public
/// artifact. The worker writes no log of its own, so the fallback is what is tested.
#[test]
fn a_work_log_linked_out_of_the_checkout_is_not_carried_into_the_artifact() {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("credentials");
    std::fs::write(&secret, "ghs_not_for_the_artifact\n").unwrap();
    let worker = format!(
        "#!/bin/sh\ncat > /dev/null\necho a > a.txt\nmkdir -p .design\nln -s '{}' \".design/worker-$DAGEXEC_TASK_INDEX.log\"\necho \"COMPLETED: a\"\n",
        secret.display()
    );
    let lab = lab_with_worker(vec![task("A", &["a.txt"], &[])], &worker);
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    let artifacts = lab.tmp.path().join("artifacts");
    lab.work_job(1, (0, 1), &o["round"], &o["base"], &artifacts);
    let log = std::fs::read_to_string(artifacts.join("worker.log")).unwrap_or_default();
    assert!(
        !log.contains("ghs_not_for_the_artifact"),
        "the artifact's log: {log}"
    );
    // The attempt itself is judged as usual (the link is no declared file of the task's).
    let result = std::fs::read_to_string(artifacts.join("result.json")).unwrap();
    assert!(result.contains("COMPLETED: a"), "{result}");
}

/// Task 0 asks which database to use until its prompt carries the answer; the others
/// complete.
const ASKING: &str = r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) if printf '%s' "$prompt" | grep -q 'use sqlite'; then echo a > a.txt; echo "COMPLETED: used sqlite";
   else echo "BLOCKED: which database should the model use?"; fi ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;

/// GitHub keeps one pending member per concurrency group: a `steer` job queued behind a
/// running round (to commit an `/execute answer`) is cancelled when that round's finalize
/// queues the next round. The answer is not lost: the comment job queued it on the pull
/// request, and the next job that writes the branch — here the running round's finalize —
/// applies it, exactly once (a steer job that does run later finds it applied).
#[test]
fn an_answer_whose_steer_job_github_cancelled_is_applied_by_the_running_round() {
    let lab = lab_with_worker(
        vec![
            task("A", &["a.txt"], &[]),
            task("B", &["t1.txt"], &[]),
            task("C", &["t2.txt"], &[1]),
        ],
        ASKING,
    );
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    assert_eq!(lab.branch_plan()["tasks"][0]["status"], "blocked");
    // Round 2 (task C) is queued; the user answers task 0's question on the pull request:
    // the comment job queues it and hands it to the steer job.
    let (id, text) = lab.comment_jobs(90, 1, "/execute answer 0 use sqlite", false);
    assert!(text.contains("made by the steer job"), "{text}");
    // A re-run of the comment job queues it once.
    std::fs::remove_file(lab.tmp.path().join(format!("comment-{id}.outputs"))).unwrap();
    lab.comment_job_again(91, id, false);
    let markers = lab
        .gh
        .state()
        .comments
        .iter()
        .filter(|c| c.body.starts_with(&format!("<!-- dagexec:steer:{id} -->")))
        .count();
    assert_eq!(markers, 1);
    let queued = |gh: &common::fake_github::FakeGitHub| lab::steer_marker(gh, id);
    assert!(
        queued(&lab.gh).contains("⏳ Queued: the answer to task 0"),
        "{}",
        queued(&lab.gh)
    );
    // A stranger's marker naming their own `/execute retry 1` is no queued change.
    let theirs = lab
        .gh
        .add_comment(&lab.repository, 1, "mallory", "/execute retry 1");
    lab.gh.add_comment(
        &lab.repository,
        1,
        "mallory",
        &format!("<!-- dagexec:steer:{theirs} -->\n⏳ Queued"),
    );
    // The steer job never runs (GitHub cancelled it). Round 2's finalize applies the answer.
    let (_, ok, log) = lab.round_result(2);
    assert!(ok, "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "pending", "{log}");
    assert_eq!(plan["tasks"][0]["question"]["reply"], "use sqlite");
    assert_eq!(plan["progress"]["dagexecSteered"], json!([id]), "{plan:#}");
    assert!(
        queued(&lab.gh).contains("✅ Applied"),
        "{}",
        queued(&lab.gh)
    );
    let subjects = lab.branch_log();
    assert_eq!(
        subjects
            .iter()
            .filter(|s| s.starts_with("dagexec: answer to task 0"))
            .count(),
        1,
        "{subjects:?}"
    );
    // Had the steer job run after all, it applies nothing twice.
    // (It starts the round the answer reopened, as it always does.)
    let before = lab.branch_log();
    let (_, text) = lab.comment_job_again(90, id, true);
    assert_eq!(lab.branch_log(), before, "{text}");
    assert_eq!(lab.branch_plan()["progress"]["dagexecSteered"], json!([id]));
    // Round 3 runs the task with the answer in its prompt.
    let (_, ok, log) = lab.round_result(3);
    assert!(ok, "{log}");
    assert_eq!(lab.branch_plan()["tasks"][0]["status"], "completed");
    lab.gh.assert_clean();
}

/// A queued answer whose comment is edited before a writer applies it: the command the
/// comment job authorised was the original, and GitHub's API does not say who edited it (its
/// author, another writer, any workflow's token), so the edited text is not applied in the
/// author's name — the marker says why, and the author can comment again.
#[test]
fn a_queued_command_edited_before_it_is_applied_is_not_applied() {
    let lab = lab_with_worker(
        vec![
            task("A", &["a.txt"], &[]),
            task("B", &["t1.txt"], &[]),
            task("C", &["t2.txt"], &[1]),
        ],
        ASKING,
    );
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let (edited, _) = lab.comment_jobs(90, 1, "/execute answer 0 use postgres", false);
    lab.gh.edit_comment(edited, "/execute answer 0 use mysql");
    // An edit that leaves the command as it was changes nothing.
    let (kept, _) = lab.comment_jobs(91, 1, "/execute answer 0 use sqlite", false);
    lab.gh
        .edit_comment(kept, "/execute answer 0 use sqlite\r\n");
    let (_, ok, log) = lab.round_result(2);
    assert!(ok, "{log}");
    let marker = lab::steer_marker(&lab.gh, edited);
    assert!(
        marker.contains("❌ Not applied") && marker.contains("edited"),
        "{marker}\n{log}"
    );
    let marker = lab::steer_marker(&lab.gh, kept);
    assert!(marker.contains("✅ Applied"), "{marker}\n{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["question"]["reply"], "use sqlite", "{log}");
    lab.gh.assert_clean();
}

/// Finalize killed (kill -9) right after pushing the round that completed and archived the
/// plan: the branch holds only `.design/plan.done.json`, the pull request is a draft and no
/// check run was written. The next run (Run workflow or `/execute`) finishes it.
#[test]
fn a_finalize_killed_after_its_final_push_is_finished_by_the_next_run() {
    let mut lab = lab_with_worker(
        vec![task("one", &["t1.txt"], &[])],
        "#!/bin/sh\ncat > /dev/null\necho t1 > t1.txt; echo \"COMPLETED: t1\"\n",
    );
    lab.set_env("DAGEXEC_FAILPOINT", "final-push:1");
    let (_, ok, log) = lab.round_result(1);
    assert!(!ok, "killed by its failpoint:\n{log}");
    lab.set_env("DAGEXEC_FAILPOINT", "");
    git(
        &lab.origin,
        &["cat-file", "-e", "dagexec/rounds:.design/plan.done.json"],
    );
    let st = lab.gh.state();
    assert!(st.pulls.iter().all(|p| p.draft), "{log}");
    assert!(st.check_runs.is_empty(), "{:?}", st.check_runs);

    let planned = lab.plan_job(2, &[]);
    assert_eq!(
        planned.outputs["conclusion"], "completed",
        "{}",
        planned.log
    );
    let (ok, text) = lab.finalize_job(2, &planned, &lab.tmp.path().join("none"));
    assert!(ok, "{text}");
    let st = lab.gh.state();
    assert!(!st.pulls[0].draft, "ready for review:\n{text}");
    assert_eq!(
        st.check_runs.last().and_then(|c| c.conclusion.as_deref()),
        Some("success")
    );
    lab.gh.assert_clean();
}

/// Finalize killed (kill -9, or its runner lost) after it pushed round 1 and before it
/// dispatched round 2: the re-run of that job (the same workflow run, its next attempt, the
/// same artifacts) finds its own round on the branch, pushes nothing again and does what the
/// killed one did not — the pull request, the status comment and round 2's dispatch — so the
/// run carries on to its end.
#[test]
fn a_finalize_killed_after_its_push_is_carried_on_by_its_re_run() {
    let mut lab = one_then_two();
    let (round, log) = lab.round_killed_at("push:1", 1);
    lab.set_env("DAGEXEC_FAILPOINT", "");
    let pushed = lab.branch_log();
    assert_eq!(pushed[0], "dagexec: round 1 — 1/1 tasks (1/2 overall)");
    assert_eq!(lab.dispatches(), 0, "{log}");

    // A re-run starts minutes later: its commit of the same round is not the pushed one.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    lab.set_env("GITHUB_RUN_ATTEMPT", "2");
    let artifacts = lab.tmp.path().join("artifacts-1");
    let (ok, text) = lab.finalize_job(1, &round.planned, &artifacts);
    assert!(ok, "{text}");
    assert_eq!(lab.branch_log(), pushed, "the re-run pushed again:\n{text}");
    assert_eq!(lab.dispatches(), 1, "round 2 is dispatched:\n{text}");
    assert!(!text.contains("that run carries on"), "{text}");
    let st = lab.gh.state();
    assert_eq!(st.pulls.len(), 1, "{text}");
    assert!(
        st.comments
            .iter()
            .any(|c| c.body.starts_with("<!-- dagexec:status -->")),
        "{text}"
    );

    lab.set_env("GITHUB_RUN_ATTEMPT", "1");
    let (_, ok, log) = lab.round_result(2);
    assert!(ok, "{log}");
    assert_eq!(
        lab.branch_plan()["tasks"][1]["status"],
        "completed",
        "{log}"
    );
    // Had the killed attempt dispatched round 2 too, the second run that started finds
    // nothing new to do and ends cleanly, starting nothing.
    let (outputs, ok, log) = lab.round_result(3);
    assert!(ok, "{log}");
    assert_eq!(outputs["conclusion"], "completed", "{log}");
    assert_eq!(lab.dispatches(), 1, "{log}");
    lab.gh.assert_clean();
}

/// `/execute abort` given during round 2; its finalize, killed after the status comment it
/// wrote consumed the abort, is re-run: the re-run carries on from its push but starts
/// nothing, as the killed attempt decided.
#[test]
fn a_re_run_of_a_finalize_that_heeded_an_abort_still_starts_nothing() {
    let mut lab = lab_with_worker(
        vec![
            task("one", &["t1.txt"], &[]),
            task("two", &["t2.txt"], &[0]),
            task("three", &["t3.txt"], &[1]),
        ],
        WRITES_ITS_FILE,
    );
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let (_, text) = lab.comment_jobs(50, 1, "/execute abort", false);
    lab.set_env("DAGEXEC_FAILPOINT", "status:2");
    let round = lab.round(2);
    let (ok, log) = round.finalized.clone().unwrap();
    assert!(!ok, "killed by its failpoint:\n{text}\n{log}");
    assert!(log.contains("Pushed to"), "{log}");
    assert_eq!(lab.dispatches(), 1, "the abort held:\n{log}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let text = lab.rerun_finalize(2, &round.planned);
    assert_eq!(lab.dispatches(), 1, "the re-run started a round:\n{text}");
    lab.gh.assert_clean();
}

/// Finalize killed after it dispatched round 2 (and wrote the status comment): its re-run
/// finds round 2's run already dispatched from the commit it pushed and dispatches none
/// again (a second dispatch would cancel a pending run of the branch's concurrency group).
#[test]
fn a_re_run_of_a_finalize_that_had_dispatched_dispatches_nothing_again() {
    let mut lab = one_then_two();
    let (round, log) = lab.round_killed_at("status:1", 1);
    assert_eq!(lab.dispatches(), 1, "{log}");
    let text = lab.rerun_finalize(1, &round.planned);
    assert_eq!(lab.dispatches(), 1, "dispatched again:\n{text}");
    lab.set_env("GITHUB_RUN_ATTEMPT", "1");
    let (outputs, ok, log) = lab.round_result(2);
    assert!(ok, "{log}");
    assert_eq!(outputs["has-work"], "true", "{log}");
    assert_eq!(
        lab.branch_plan()["tasks"][1]["status"],
        "completed",
        "{log}"
    );
    lab.gh.assert_clean();
}

/// Finalize killed after it dispatched round 2, whose run then failed at once (or was
/// cancelled): that run did not carry the branch on, so the re-run dispatches round 2 again.
/// Only a queued, running or successful run of the workflow from that commit counts as
/// dispatched (GitHub's run states: `requested`, `waiting`, `pending`, `queued`,
/// `in_progress`, then `completed` with a conclusion).
#[test]
fn a_re_run_of_a_finalize_whose_dispatched_run_failed_dispatches_again() {
    let mut lab = one_then_two();
    let (round, log) = lab.round_killed_at("status:1", 1);
    assert_eq!(lab.dispatches(), 1, "{log}");
    let next = lab.gh.state().dispatches[0].run_id;
    lab.gh.finish_run(next, "failure", Vec::new());
    let text = lab.rerun_finalize(1, &round.planned);
    assert_eq!(lab.dispatches(), 2, "not dispatched again:\n{text}");
    lab.gh.assert_clean();
}

/// Finalize of the last round wrote the `success` check run, then GitHub failed the pull
/// request's "ready for review" until the job failed: its re-run marks it ready and writes
/// no second check run for the same commit.
#[test]
fn a_re_run_of_a_finalize_that_wrote_its_check_run_writes_none_again() {
    let mut lab = lab_with_worker(
        vec![task("one", &["t1.txt"], &[])],
        "#!/bin/sh\ncat > /dev/null\necho t1 > t1.txt; echo \"COMPLETED: t1\"\n",
    );
    lab.set_env("DAGEXEC_API_RETRY_BASE", "10ms");
    lab.set_env("DAGEXEC_API_RETRY_CAP", "40ms");
    lab.gh.outage("graphql", 6);
    let round = lab.round(1);
    let (ok, log) = round.finalized.clone().unwrap();
    assert!(!ok, "ready for review failed:\n{log}");
    assert_eq!(lab.gh.state().check_runs.len(), 1, "{log}");
    lab.set_env("GITHUB_RUN_ATTEMPT", "2");
    let artifacts = lab.tmp.path().join("artifacts-1");
    let (ok, text) = lab.finalize_job(1, &round.planned, &artifacts);
    assert!(ok, "{text}");
    let st = lab.gh.state();
    assert!(!st.pulls[0].draft, "ready for review:\n{text}");
    assert_eq!(st.check_runs.len(), 1, "a second check run:\n{text}");
    assert_eq!(st.check_runs[0].conclusion.as_deref(), Some("success"));
    lab.gh.assert_clean();
}

/// A finalize that fails after its push (GitHub failing "ready for review" until it gives
/// up) says in its failure that re-running the job is safe and what the re-run does.
#[test]
fn a_finalize_failing_after_its_push_says_a_re_run_carries_on() {
    let mut lab = lab_with_worker(vec![task("one", &["t1.txt"], &[])], WRITES_ITS_FILE);
    lab.set_env("DAGEXEC_API_RETRY_BASE", "10ms");
    lab.set_env("DAGEXEC_API_RETRY_CAP", "40ms");
    lab.gh.outage("graphql", 6);
    let round = lab.round(1);
    let (ok, log) = round.finalized.clone().unwrap();
    assert!(!ok, "ready for review failed:\n{log}");
    assert!(
        log.contains(&format!(
            "The round is pushed to {}: re-running this job is safe — it finds that push, finishes the pull request, its comments and the check run without writing any twice, and dispatches the next run only if none was dispatched from it.",
            lab.branch
        )),
        "{log}"
    );
}

/// A status comment edited to say, in finalize's words, that round 2 stopped at `/execute
/// abort` does not stop the re-run of round 2's finalize (killed after its push): no abort
/// was given, so it dispatches round 3.
#[test]
fn a_status_comment_edited_to_say_the_run_stopped_does_not_stop_a_re_run() {
    let mut lab = lab_with_worker(
        vec![
            task("one", &["t1.txt"], &[]),
            task("two", &["t2.txt"], &[0]),
            task("three", &["t3.txt"], &[1]),
        ],
        WRITES_ITS_FILE,
    );
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let (round, log) = lab.round_killed_at("push:2", 2);
    assert_eq!(lab.dispatches(), 1, "{log}");
    lab.set_env("DAGEXEC_FAILPOINT", "");
    let st = lab.gh.state();
    let status = (st.comments.iter())
        .find(|c| c.body.starts_with("<!-- dagexec:status -->"))
        .expect("round 1's status comment");
    let edited = format!(
        "{}\nWaiting on: you: stopped after round 2 as `/execute abort` asked; comment `/execute` to resume\n",
        status.body
    );
    lab.gh.edit_comment(status.id, &edited);
    let text = lab.rerun_finalize(2, &round.planned);
    assert_eq!(lab.dispatches(), 2, "round 3 is dispatched:\n{text}");
    lab.gh.assert_clean();
}

/// The branch moved by hand after round 2 was planned: its finalize is stale and dispatches
/// a fresh round from where the branch stands; a re-run of that finalize finds that run
/// dispatched from the same commit and dispatches none again.
#[test]
fn a_re_run_of_a_stale_finalize_dispatches_its_fresh_round_once() {
    let mut lab = one_then_two();
    let (_, ok, log) = lab.round_result(1);
    assert!(ok, "{log}");
    let planned = lab.plan_job(2, &[]);
    let (o, artifacts) = (&planned.outputs, lab.tmp.path().join("artifacts-2"));
    for (t, a) in planned.entries() {
        let name = format!("dagexec-2-1-task-{t}-attempt-{a}");
        lab.work_job(2, (t, a), &o["round"], &o["base"], &artifacts.join(name));
    }
    let hand = lab.checkout(&lab.next_base());
    std::fs::write(hand.join("notes.txt"), "by hand\n").unwrap();
    git(&hand, &["add", "-A"]);
    git(&hand, &["commit", "-qm", "by hand"]);
    git(
        &hand,
        &["push", "-q", "origin", &format!("HEAD:{}", lab.branch)],
    );
    let (ok, text) = lab.finalize_job(2, &planned, &artifacts);
    assert!(ok && text.contains("this round is stale"), "{text}");
    assert_eq!(lab.dispatches(), 2, "a fresh round:\n{text}");
    lab.set_env("GITHUB_RUN_ATTEMPT", "2");
    let (ok, text) = lab.finalize_job(2, &planned, &artifacts);
    assert!(ok && text.contains("this round is stale"), "{text}");
    assert_eq!(lab.dispatches(), 2, "dispatched again:\n{text}");
    lab.gh.assert_clean();
}

/// Finalize killed between its round commit and its push: nothing reached the branch, so
/// the re-run of that job integrates the same artifacts again and pushes the round once,
/// then dispatches the next one.
#[test]
fn a_finalize_killed_before_its_push_is_done_once_by_its_re_run() {
    let mut lab = one_then_two();
    let (round, log) = lab.round_killed_at("after-commit:1", 1);
    assert!(lab.branch_log().is_empty(), "nothing pushed:\n{log}");
    lab.set_env("DAGEXEC_FAILPOINT", "");
    lab.set_env("GITHUB_RUN_ATTEMPT", "2");
    let artifacts = lab.tmp.path().join("artifacts-1");
    let (ok, text) = lab.finalize_job(1, &round.planned, &artifacts);
    assert!(ok, "{text}");
    let log = lab.branch_log();
    assert_eq!(
        log[0], "dagexec: round 1 — 1/1 tasks (1/2 overall)",
        "{text}"
    );
    assert_eq!(
        log.iter()
            .filter(|s| s.starts_with("dagexec: round"))
            .count(),
        1,
        "{log:?}"
    );
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{text}");
    assert_eq!(
        plan["progress"]["dagexecAttempts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(lab.dispatches(), 1, "round 2 is dispatched:\n{text}");
    lab.gh.assert_clean();
}

/// A matrix job that GitHub cancelled before it uploaded anything still ended an attempt:
/// finalize records it in `progress.dagexecAttempts`, as every finished attempt is.
#[test]
fn a_matrix_job_without_an_artifact_leaves_an_attempt_record() {
    let lab = new_lab(vec![task("one", &["t1.txt"], &[])]);
    let planned = lab.plan_job(1, &[]);
    assert_eq!(planned.outputs["has-work"], "true", "{}", planned.log);
    let (ok, text) = lab.finalize_job(1, &planned, &lab.tmp.path().join("no-artifacts"));
    assert!(ok, "{text}");
    assert!(text.contains("no artifact from its job"), "{text}");
    let plan = lab.branch_plan();
    let records = plan["progress"]["dagexecAttempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempt record: {plan:#}"));
    assert_eq!(records.len(), 1, "{plan:#}");
    assert_eq!(records[0]["task"], 0);
    assert_eq!(records[0]["attempt"], 1);
    assert_eq!(records[0]["outcome"], "failed");
    lab.gh.assert_clean();
}

/// The next round is started with the `build` pin (the SHA-256 of the finalize job's own
/// dagexec, which the next run's jobs check a restored build against) when the workflow at the
/// execution branch declares that input; a workflow written by an older `dagexec init` does
/// not, GitHub refuses the dispatch (422 "Unexpected inputs provided", which the fake answers
/// from the workflow in the repository), and finalize dispatches the round again without it.
#[test]
fn the_next_round_carries_the_build_pin_and_an_older_workflow_still_gets_its_round() {
    let pin = "0123456789abcdef".repeat(4);
    let old = std::fs::read_to_string(
        common::manifest().join("tests/fixtures/workflows/dagexec-before-build.yml"),
    )
    .unwrap();
    let new = std::fs::read_to_string(common::manifest().join("templates/dagexec.yml")).unwrap();
    for (workflow, declared) in [(new.as_str(), true), (old.as_str(), false)] {
        let mut lab = rounds_lab(
            vec![
                task("one", &["t2.txt"], &[]),
                task("two", &["t3.txt"], &[0]),
            ],
            "#!/bin/sh\ncat > /dev/null\necho x > \"t$((DAGEXEC_TASK_INDEX + 2)).txt\"\necho COMPLETED: done\n",
            &[(".github/workflows/dagexec.yml", workflow)],
        );
        lab.set_env("DAGEXEC_BUILD_SHA256", &pin);
        let (outputs, ok, text) = lab.round_result(1);
        assert!(ok, "{text}");
        assert_eq!(outputs["has-work"], "true", "{text}");
        let st = lab.gh.state();
        assert_eq!(st.dispatches.len(), 1, "the next round is started: {text}");
        let inputs = &st.dispatches[0].inputs;
        assert_eq!(inputs["branch"], "dagexec/rounds");
        if declared {
            assert_eq!(inputs["build"], pin.as_str(), "{inputs}");
            assert!(st.refused_inputs.is_empty());
        } else {
            assert!(inputs.get("build").is_none(), "{inputs}");
            assert_eq!(st.refused_inputs, vec![vec!["build".to_string()]]);
        }
        lab.gh.assert_clean();
    }
    // A pin that is no SHA-256 is refused, naming the input.
    let lab = new_lab(vec![task("one", &["t2.txt"], &[])]);
    let dir = lab.checkout("main");
    let out = lab
        .job(&dir, 1)
        .args(["action", "plan"])
        .env("DAGEXEC_BUILD_SHA256", "not-a-sha")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(lab::text(&out).contains("SHA-256"), "{}", lab::text(&out));
}

/// No task code runs in a run of the default branch: its work jobs' runtime token could write
/// the default branch's Actions cache scope, which every branch restores from and the install
/// step trusts without a pin. A run on the default branch (action.yml passes the event's
/// default branch) only redirects, even with the branch named, and finalize starts the round
/// on the execution branch itself, creating it at the run's commit; a task run started there
/// by hand refuses to run the worker; the default branch cannot be the execution branch.
#[test]
fn a_run_on_the_default_branch_runs_no_task_code_and_starts_the_round_on_its_branch() {
    let mut lab = lab_with_worker(
        vec![task("one", &["t2.txt"], &[])],
        "#!/bin/sh\ncat > /dev/null\ntouch \"$HOME/../worker-ran\"; echo x > t2.txt\necho COMPLETED: done\n",
    );
    lab.set_env("DAGEXEC_DEFAULT_BRANCH", "main");
    let planned = lab.plan_job(1, &[]);
    let o = &planned.outputs;
    assert_eq!(o["conclusion"], "redirect", "{}", planned.log);
    assert_eq!(o["has-work"], "false", "{}", planned.log);
    let (ok, text) = lab.finalize_job(1, &planned, &lab.tmp.path().join("none"));
    assert!(ok, "{text}");
    let st = lab.gh.state();
    assert_eq!(st.dispatches.len(), 1, "{text}");
    assert_eq!(st.dispatches[0].git_ref, "dagexec/rounds", "{text}");
    assert_eq!(st.dispatches[0].inputs["branch"], "dagexec/rounds");
    let main = git(&lab.origin, &["rev-parse", "main"]);
    let started = git(&lab.origin, &["rev-parse", "dagexec/rounds"]);
    assert_eq!(started, main, "the branch starts at the run's commit");

    // A task run started by hand on the default branch.
    let dir = lab.checkout("main");
    let out = lab
        .job(&dir, 2)
        .env_remove("DAGEXEC_TOKEN")
        .env("HOME", dir.join("home"))
        .args(["action", "work"])
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "0")
        .env("DAGEXEC_BASE", &main)
        .env("DAGEXEC_WORKER", "sh ./worker.sh")
        .env("DAGEXEC_ARTIFACTS", lab.tmp.path().join("work"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", lab::text(&out));
    assert!(
        lab::text(&out).contains("this run is on the default branch (main)"),
        "{}",
        lab::text(&out)
    );
    assert!(!dir.join("worker-ran").exists(), "the worker ran");

    // The execution branch cannot be the default branch.
    lab.set_env("DAGEXEC_BRANCH", "main");
    let dir = lab.checkout("main");
    let out = lab
        .job(&dir, 3)
        .args(["action", "plan"])
        .env("DAGEXEC_BRANCH", "main")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", lab::text(&out));
    assert!(
        lab::text(&out).contains("the execution branch is the default branch (main)"),
        "{}",
        lab::text(&out)
    );
    lab.gh.assert_clean();
}

/// A run on the default branch naming a Spec Kit `tasks.md` is started again on the execution
/// branch with the plan as named, not the plan the redirecting job prepared from it (which is
/// not committed anywhere yet).
#[test]
fn a_redirected_spec_kit_run_is_started_with_the_tasks_md_it_was_given() {
    let mut lab = lab::lab()
        .fixture("specs/003-todo", "speckit/003-todo")
        .worker("#!/bin/sh\ncat > /dev/null\necho COMPLETED: done\n")
        .branch("dagexec/todo")
        .start();
    lab.set_env("DAGEXEC_DEFAULT_BRANCH", "main");
    lab.set_env("DAGEXEC_PLAN", "specs/003-todo/tasks.md");
    let planned = lab.plan_job(1, &[]);
    assert_eq!(planned.outputs["conclusion"], "redirect", "{}", planned.log);
    let (ok, text) = lab.finalize_job(1, &planned, &lab.tmp.path().join("none"));
    assert!(ok, "{text}");
    let st = lab.gh.state();
    assert_eq!(st.dispatches.len(), 1, "{text}");
    assert_eq!(st.dispatches[0].git_ref, "dagexec/todo");
    assert_eq!(st.dispatches[0].inputs["plan"], "specs/003-todo/tasks.md");
    lab.gh.assert_clean();
}

/// Refused credentials stop the run as the conductor's `halted` (locally: exit 6), not as a
/// circuit breaker: every task would fail the same way, so nothing more is dispatched, and the
/// conclusion says why (one word for one ending, whichever schedule ran it).
#[test]
fn refused_credentials_conclude_halted_as_under_the_conductor() {
    let refused = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/agents/claude-401.json"),
    )
    .unwrap();
    let worker = format!(
        "#!/bin/sh\ncat > /dev/null\ncat <<'JSON'\n{}\nJSON\nexit 1\n",
        refused.trim()
    );
    let lab = rounds_lab(
        vec![
            task("Zero", &["t0.txt"], &[]),
            task("One", &["t1.txt"], &[0]),
        ],
        &worker,
        &[],
    );
    let (ok, log) = lab.run_rounds(3);
    assert!(!ok, "{log}");
    assert!(log.contains("output conclusion=halted"), "{log}");
    assert!(log.contains("ANTHROPIC_API_KEY"), "{log}");
    assert_eq!(lab.dispatches(), 0, "{log}");
}

/// A budget spent by a part of a round stops the run there, as locally (a round's groups
/// that have not started never start once it is spent): the round's next part is neither
/// dispatched nor, on a later run, planned; the round stays open for a larger budget.
#[test]
fn a_budget_spent_mid_round_starts_no_further_part() {
    const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
echo "t$DAGEXEC_TASK_INDEX" >> shared.txt
printf '{"cost_usd": 0.4, "input_tokens": 1000, "output_tokens": 50, "model": "m-1"}' > "$DAGEXEC_USAGE_FILE"
echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#;
    let mut lab = rounds_lab(
        vec![
            edit("Zero", &[], &["shared.txt"], &[]),
            edit("One", &[], &["shared.txt"], &[]),
        ],
        WORKER,
        &[("shared.txt", "start\n")],
    );
    lab.set_env("DAGEXEC_MAX_COST", "0.3");
    let (ok, log) = lab.run_rounds(4);
    assert!(!ok, "{log}");
    assert!(log.contains("output conclusion=budget"), "{log}");
    assert_eq!(lab.dispatches(), 0, "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][1]["status"], "pending", "{plan:#}");
    assert_eq!(plan["tasks"][1]["attempts"], Value::Null, "{plan:#}");
    assert_eq!(plan["progress"]["dagexecRound"]["parts"], 1, "{plan:#}");
    // A later run plans no part while the budget stays spent.
    let (outputs, _, text) = lab.round_result(200);
    assert_eq!(outputs["conclusion"], "budget", "{text}");
    assert_eq!(outputs["has-work"], "false", "{text}");
}
