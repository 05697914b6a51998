//! The reviewer loop and long-run plans end to end: real git repositories, scripted workers
//! and reviewers (shell scripts that record what they were given in `$OUT`), the plan, the
//! commits and the exit codes checked after.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common;
use common::local::{Local, Ran, exec, local};
use common::{commit_new, dagexec, git, text, write_files};

/// A committed repository holding `files`.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files.iter().copied());
    commit_new(dir.path());
    dir
}

/// A one-task plan: create `a.txt`.
fn one_task_plan() -> String {
    serde_json::to_string_pretty(&json!({
        "schemaVersion": 2,
        "goal": "Write a",
        "tasks": [{
            "subject": "Write a", "description": "Create a.txt.", "status": "pending", "blockedBy": [],
            "metadata": {"files": {"create": ["a.txt"], "modify": []}},
            "agent": {"role": "engineer"}
        }]
    }))
    .unwrap()
}

/// A script file in `scripts`, as a command line.
fn script(scripts: &Path, name: &str, body: &str) -> String {
    let path = scripts.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    format!("sh '{}'", path.display())
}

/// `dagexec run` as these tests run it: one job, 20 s an attempt, `$OUT` the folder the
/// scripts record in.
fn run(dir: &Path, out: &Path) -> Local {
    local(dir).jobs(1).timeout("20s").env("OUT", out)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn json_of(p: &Path) -> Value {
    serde_json::from_str(&read(p)).unwrap()
}

/// The worker of the reviewer tests: records its prompt and whether `a.txt` was already
/// there, then writes it.
const WORKER: &str = r#"cp "$DAGEXEC_PROMPT_FILE" "$OUT/worker-$DAGEXEC_ATTEMPT.md"
if [ -f a.txt ]; then echo carried > "$OUT/tree-$DAGEXEC_ATTEMPT"; else echo clean > "$OUT/tree-$DAGEXEC_ATTEMPT"; fi
echo "attempt $DAGEXEC_ATTEMPT" >> a.txt
echo "COMPLETED: wrote a (attempt $DAGEXEC_ATTEMPT)""#;

struct Setup {
    dir: tempfile::TempDir,
    out: tempfile::TempDir,
    worker: String,
    reviewer: String,
}

fn reviewed(reviewer_body: &str) -> Setup {
    let dir = repo(&[(".design/plan.json", &one_task_plan())]);
    let out = tempfile::tempdir().unwrap();
    let worker = script(out.path(), "worker.sh", WORKER);
    let reviewer = script(
        out.path(),
        "reviewer.sh",
        &format!(
            "cp \"$DAGEXEC_PROMPT_FILE\" \"$OUT/review-$DAGEXEC_ATTEMPT.md\"\n{reviewer_body}"
        ),
    );
    Setup {
        dir,
        out,
        worker,
        reviewer,
    }
}

impl Setup {
    /// The run of the worker with the reviewer.
    fn runner(&self) -> Local {
        run(self.dir.path(), self.out.path())
            .worker(&self.worker)
            .args(["--reviewer", &self.reviewer])
    }
    fn run(&self) -> Ran {
        self.runner().run()
    }
    fn run_with(&self, extra: &[&str]) -> Ran {
        self.runner().args(extra).run()
    }
    fn recorded(&self, name: &str) -> String {
        read(&self.out.path().join(name))
    }
    fn plan(&self) -> Value {
        json_of(&self.dir.path().join(".design/plan.json"))
    }
}

#[test]
fn an_approved_task_completes_with_the_review_in_commit_and_summary() {
    let s = reviewed("printf 'Looks fine.\\nAPPROVED\\nsummary: a.txt is there\\n'");
    let o = s.run();
    let out = o.expect_code(0);
    let prompt = s.recorded("review-1.md");
    assert!(prompt.contains("**Title:** Write a"), "{prompt}");
    assert!(
        prompt.contains("- `a.txt`") && prompt.contains("+attempt 1"),
        "{prompt}"
    );
    assert!(prompt.contains("- [ ] **Security** - No obvious security issues introduced"));
    let log = git(s.dir.path(), &["log", "--format=%B", "-n", "2"]);
    assert!(
        log.contains(
            "- task 0: Write a — completed: wrote a (attempt 1) (reviewer approved: a.txt is there)"
        ),
        "{log}"
    );
    assert!(
        out.contains("Reviews:\n- Task 0: approved after 0 rejection(s): a.txt is there"),
        "{out}"
    );
}

#[test]
fn a_rejection_is_fixed_in_the_same_tree_then_approved() {
    let s = reviewed(
        r#"if [ "$DAGEXEC_ATTEMPT" = 1 ]; then
printf 'REJECTED\nsummary: Missing tests\nissues:\n- no test for a\nsuggestions:\n- add one\n'
else printf 'APPROVED\nsummary: now tested\n'; fi"#,
    );
    let o = s.run();
    let out = o.expect_code(0);
    assert!(
        out.contains(
            "attempt 1 failed: reviewer rejected: Missing tests — retrying (attempt 2 of 3)"
        ),
        "{out}"
    );
    let second = s.recorded("worker-2.md");
    assert!(
        second.contains("**Attempt 1 Feedback:**\nMissing tests"),
        "{second}"
    );
    assert!(
        second.contains("- no test for a") && second.contains("- add one"),
        "{second}"
    );
    assert!(second.contains("already in this tree"), "{second}");
    assert_eq!(
        s.recorded("tree-2").trim(),
        "carried",
        "attempt 2 continues attempt 1's work"
    );
    assert_eq!(read(&s.dir.path().join("a.txt")), "attempt 1\nattempt 2\n");
    assert!(
        out.contains("approved after 1 rejection(s): now tested"),
        "{out}"
    );
}

#[test]
fn the_eager_schedule_reviews_and_retries_the_same_way() {
    let s = reviewed(
        r#"if [ "$DAGEXEC_ATTEMPT" = 1 ]; then printf 'REJECTED\nsummary: no\nissues:\n- x\n'
else printf 'APPROVED\nsummary: yes\n'; fi"#,
    );
    let o = s.run_with(&["--schedule", "eager"]);
    let out = o.expect_code(0);
    assert_eq!(s.recorded("tree-2").trim(), "carried");
    assert!(out.contains("approved after 1 rejection(s): yes"), "{out}");
}

#[test]
fn three_rejections_escalate_then_the_answer_reopens_the_task() {
    let s = reviewed(
        r#"if [ -f "$OUT/approve" ]; then printf 'APPROVED\nsummary: ok\n'; exit 0; fi
printf 'REJECTED\nsummary: try %s\nissues:\n- issue %s\n' "$DAGEXEC_ATTEMPT" "$DAGEXEC_ATTEMPT""#,
    );
    let o = s.run();
    let out = o.expect_code(5);
    assert_eq!(
        s.recorded("tree-3").trim(),
        "clean",
        "attempt 3 starts from a clean tree"
    );
    let third = s.recorded("worker-3.md");
    assert!(
        third.contains("**Attempt 2 Feedback:**\ntry 2") && third.contains("clean tree"),
        "{third}"
    );
    let plan = s.plan();
    let task = &plan["tasks"][0];
    assert_eq!(task["status"], "blocked");
    assert_eq!(task["reviews"].as_array().unwrap().len(), 3);
    assert_eq!(task["question"]["kind"], "review");
    assert_eq!(
        git(s.dir.path(), &["status", "--porcelain"]),
        "",
        "the question is committed"
    );
    assert!(out.contains("Questions for you"), "{out}");
    assert!(out.contains("Task 0 (Write a) needs your guidance:\nThe reviewer rejected task 0 (Write a) on all 3 attempts."), "{out}");
    assert!(
        out.contains("Answer with: dagexec answer 0 \"<your guidance>\""),
        "{out}"
    );
    assert!(
        !s.dir.path().join("a.txt").exists(),
        "nothing rejected was applied"
    );

    let a = exec(s.dir.path(), &["answer", "0", "keep", "it", "short"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    let plan = s.plan();
    assert_eq!(plan["tasks"][0]["status"], "pending");
    assert_eq!(plan["tasks"][0]["question"]["reply"], "keep it short");
    // A second answer is refused: nothing is open.
    let again = exec(s.dir.path(), &["answer", "0", "x"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("task 0 has no open question (it is pending)"));

    std::fs::write(s.out.path().join("approve"), "").unwrap();
    let o = s.run();
    o.expect_code(0);
    let first = s.recorded("worker-1.md");
    assert!(
        first.contains("The user answered:\nkeep it short"),
        "{first}"
    );
    assert!(
        first.contains("**Attempt 3 Feedback:**\ntry 3"),
        "all feedback is kept: {first}"
    );
    assert_eq!(s.recorded("tree-1").trim(), "clean");
}

#[test]
fn the_same_rejection_three_times_in_a_row_escalates_early() {
    let s = reviewed("printf 'REJECTED\\nsummary: same\\nissues:\\n- b\\n- a\\n'");
    // Two identical rejections from an earlier run (issues in another order: same hash).
    let mut plan = s.plan();
    let hash = dagexec::pure::review::issues_hash(&["a".into(), "b".into()]);
    plan["tasks"][0]["reviews"] = json!([
        {"attempt": 1, "verdict": "rejected", "summary": "same", "issues": ["a", "b"], "suggestions": [], "hash": hash},
        {"attempt": 2, "verdict": "rejected", "summary": "same", "issues": ["a", "b"], "suggestions": [], "hash": hash}
    ]);
    std::fs::write(
        s.dir.path().join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    git(s.dir.path(), &["commit", "-qam", "earlier reviews"]);
    let o = s.run();
    let out = o.expect_code(5);
    assert!(
        !s.out.path().join("worker-2.md").exists(),
        "escalated after one attempt: {out}"
    );
    let plan = s.plan();
    assert_eq!(plan["tasks"][0]["attempts"], 1);
    assert!(
        plan["tasks"][0]["question"]["text"]
            .as_str()
            .unwrap()
            .contains("with the same issues 3 times in a row"),
        "{plan}"
    );
}

#[test]
fn a_reviewer_without_a_verdict_fails_the_attempt() {
    let s = reviewed("echo 'looks good to me'");
    let o = s.run();
    let out = o.expect_code(1);
    assert!(
        out.contains("review failed: the reviewer's output has no line APPROVED or REJECTED"),
        "{out}"
    );
    assert_eq!(s.plan()["tasks"][0]["status"], "failed");
}

/// A reviewer that rejects the first review it ever gives (remembered in `$OUT`) and
/// approves every later one, whatever the attempt number; the worker keeps its last prompt.
fn reject_once() -> Setup {
    let s = reviewed(
        r#"if [ ! -f "$OUT/rejected" ]; then touch "$OUT/rejected"
printf 'REJECTED\nsummary: Missing tests\nissues:\n- no test for a\nsuggestions:\n- add one\n'
else printf 'APPROVED\nsummary: now tested\n'; fi"#,
    );
    let worker = script(
        s.out.path(),
        "worker.sh",
        &format!("cp \"$DAGEXEC_PROMPT_FILE\" \"$OUT/last-prompt.md\"\n{WORKER}"),
    );
    Setup { worker, ..s }
}

#[test]
fn a_rejection_survives_a_crash_before_the_next_review() {
    let s = reject_once();
    // The runner dies (SIGKILL) right after the first verdict is recorded.
    let o = s.runner().env("DAGEXEC_FAILPOINT", "after-review:1").run();
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    let plan = s.plan();
    let reviews = plan["tasks"][0]["reviews"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        reviews.len(),
        1,
        "the rejection is in the plan file: {plan}"
    );
    assert_eq!(reviews[0]["verdict"], "rejected");
    assert_eq!(reviews[0]["summary"], "Missing tests");

    let o = s.run();
    let out = o.expect_code(0);
    let resumed = s.recorded("last-prompt.md");
    assert!(
        resumed.contains("**Attempt 1 Feedback:**\nMissing tests")
            && resumed.contains("- no test for a"),
        "the resumed attempt has the feedback: {resumed}"
    );
    assert!(
        out.contains("Reviews:\n- Task 0: approved after 1 rejection(s): now tested"),
        "{out}"
    );
}

#[test]
fn every_rejection_is_in_the_plan_file_before_the_next_attempt_starts() {
    // The worker of attempt 2 reads the plan file as it is on disk at that moment.
    let s = reject_once();
    let worker = script(
        s.out.path(),
        "worker2.sh",
        &format!("cp \"$DAGEXEC_ROOT_PLAN\" \"$OUT/plan-at-$DAGEXEC_ATTEMPT.json\"\n{WORKER}"),
    );
    let plan_path = s.dir.path().join(".design/plan.json");
    let o = run(s.dir.path(), s.out.path())
        .worker(&worker)
        .args(["--reviewer", &s.reviewer])
        .env("DAGEXEC_ROOT_PLAN", &plan_path)
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let seen: Value = serde_json::from_str(&s.recorded("plan-at-2.json")).unwrap();
    assert_eq!(seen["tasks"][0]["status"], "in_progress");
    assert_eq!(
        seen["tasks"][0]["reviews"][0]["verdict"], "rejected",
        "{seen}"
    );
}

#[test]
fn a_missing_reviewer_is_found_before_any_worker_runs() {
    let s = reviewed("true");
    let o = run(s.dir.path(), s.out.path())
        .worker(&s.worker)
        .args(["--reviewer", "dagexec-no-such-reviewer --strict"])
        .run();
    let out = o.expect_code(2);
    assert!(
        out.contains("dagexec-no-such-reviewer") && out.contains("not found"),
        "{out}"
    );
    assert!(
        !s.out.path().join("worker-1.md").exists(),
        "no worker ran: {out}"
    );
    assert_eq!(s.plan()["tasks"][0]["status"], "pending");
}

#[test]
fn a_crashing_reviewer_is_reported_in_words_with_its_stderr() {
    let s = reviewed("echo 'reviewer: cannot open the model' >&2\nexit 3");
    let o = s.run();
    let out = o.expect_code(1);
    assert!(!out.contains("Code(3)"), "{out}");
    assert!(
        out.contains("review failed: the reviewer exited with status 3")
            && out.contains("reviewer: cannot open the model"),
        "{out}"
    );
}

// ---- long-run plans ----

/// A repository with a `.long-run` folder: spec, and plans 01 and 02 (02 after 01 by number
/// order), plus `extra` files.
fn long_run_repo(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files = vec![
        (".long-run/spec/spec.md", "# Spec\nA tiny app.\n"),
        (".long-run/spec/planning/requirements.md", "- be small\n"),
        (
            ".long-run/plans/01-PLAN.md",
            "# Models\n<task>1. m.txt</task>\n",
        ),
        (
            ".long-run/plans/02-PLAN.md",
            "---\ntitle: Routes\n---\n<task>1. r.txt</task>\n",
        ),
    ];
    files.extend_from_slice(extra);
    repo(&files)
}

/// The long-run worker: records its prompt per plan and attempt, then runs `body` (which
/// prints an OUTPUT_JSON block). `$N` is the plan number (01, 02).
fn lr_worker(out: &Path, body: &str) -> String {
    script(
        out,
        "lr.sh",
        &format!(
            r#"N=$(grep -o '[0-9][0-9]-CHECKPOINT' "$DAGEXEC_PROMPT_FILE" | head -1 | cut -c1-2)
cp "$DAGEXEC_PROMPT_FILE" "$OUT/plan-$N-$DAGEXEC_ATTEMPT.md"
done_block() {{ printf 'OUTPUT_JSON_START\n{{"status":"COMPLETED","summary":"plan %s done","tasks_completed":["1"],"files_modified":["%s.txt"]}}\nOUTPUT_JSON_END\n' "$N" "$N"; }}
{body}"#
        ),
    )
}

/// A long run of `.long-run` with `worker`.
fn lr(dir: &Path, out: &Path, worker: &str) -> Local {
    run(dir, out)
        .worker(worker)
        .args(["--long-run", ".long-run"])
}

fn lr_run(dir: &Path, out: &Path, worker: &str) -> Ran {
    lr(dir, out, worker).run()
}

fn answer(dir: &Path, args: &[&str]) -> Output {
    dagexec(dir)
        .args(["--plan", ".long-run/plan.json", "answer"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn long_run_plans_run_in_number_order_and_write_summaries() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(out.path(), "echo $N > $N.txt\necho working\ndone_block");
    let o = lr_run(dir.path(), out.path(), &w);
    o.expect_code(0);
    let p1 = read(&out.path().join("plan-01-1.md"));
    assert!(
        p1.starts_with("You are a long-run-executor subagent."),
        "{p1}"
    );
    assert!(
        p1.contains("# Models") && p1.contains("A tiny app.") && p1.contains("- be small"),
        "{p1}"
    );
    assert!(p1.contains("Starting fresh from Task 1."), "{p1}");
    // Plan 02 ran after 01 was committed: it sees 01's file.
    assert!(dir.path().join("01.txt").exists() && dir.path().join("02.txt").exists());
    let summary = read(&dir.path().join(".long-run/summaries/02-SUMMARY.md"));
    assert!(
        summary.starts_with(
            "---\nplan: \"02\"\nstatus: completed\n---\n# Plan 02: Routes\n\nplan 02 done\n"
        ),
        "{summary}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    let state = read(&dir.path().join(".long-run/STATE.md"));
    assert!(
        state.contains("## Current Position\n- Current plan: none\n- Plans completed: 2/2\n- Progress: [██████████] 100%"),
        "{state}"
    );
    let rounds = git(dir.path(), &["log", "--format=%s"]);
    assert!(
        rounds.contains("dagexec: round 1 — 1/1 tasks (1/2 overall)"),
        "{rounds}"
    );
    assert!(
        rounds.contains("dagexec: round 2 — 1/1 tasks (2/2 overall)"),
        "{rounds}"
    );
    // A second run: every summary says completed, nothing runs.
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing to do"), "{}", text(&o));
}

#[test]
fn the_generated_plan_is_not_an_uncommitted_change_of_the_user() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"printf 'OUTPUT_JSON_START\n{"status":"FAILED","error":"no"}\nOUTPUT_JSON_END\n'"#,
    );
    // The first run writes .long-run/plan.json (untracked until its first round commit).
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(1);
    assert!(!log.contains("uncommitted changes"), "{log}");
    // A second run regenerates it beside the committed one.
    std::fs::write(
        dir.path().join(".long-run/plans/01-PLAN.md"),
        "# Models\n<task>1. m2</task>\n",
    )
    .unwrap();
    git(dir.path(), &["commit", "-qam", "edit plan 01"]);
    let o = lr_run(dir.path(), out.path(), &w);
    let log = text(&o);
    assert!(!log.contains("uncommitted changes"), "{log}");
}

#[test]
fn needs_decision_asks_and_the_choice_reaches_the_next_attempt() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"if [ "$N" = 01 ] && ! grep -q 'User decided' "$DAGEXEC_PROMPT_FILE"; then
echo model > model.txt
printf '{"last_completed_task": 1}\n' > .long-run/plans/01-CHECKPOINT.json
printf 'OUTPUT_JSON_START\n{"status":"NEEDS_DECISION","blocked_at":"Task 2","decision_needed":"Which store?","options":[{"key":"postgres","description":"server"},{"key":"sqlite","description":"file"}]}\nOUTPUT_JSON_END\n'
exit 0; fi
done_block"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(5);
    assert!(log.contains("Task 0 (Models) needs a decision at Task 2:\nWhich store?\n  1. postgres: server\n  2. sqlite: file"), "{log}");
    assert!(
        log.contains("Answer with: dagexec --plan .long-run/plan.json answer 0 postgres"),
        "{log}"
    );
    let plan = json_of(&dir.path().join(".long-run/plan.json"));
    assert_eq!(plan["tasks"][0]["status"], "blocked");
    assert_eq!(plan["tasks"][1]["status"], "skipped");
    let committed = git(dir.path(), &["show", "HEAD:.long-run/plan.json"]);
    assert!(
        committed.contains("\"decision\"") && committed.contains("Which store?"),
        "the question is committed"
    );
    let bad = answer(dir.path(), &["0", "mysql"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("\"mysql\" is not one of the options (postgres, sqlite)"));
    let a = answer(dir.path(), &["0", "2"]);
    assert!(
        text(&a).contains("Task 1 is pending again."),
        "{}",
        text(&a)
    );
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let p = read(&out.path().join("plan-01-1.md"));
    assert!(
        p.contains("User decided: sqlite. Continue from Task 2."),
        "{p}"
    );
    // The work done before the question was committed; the next attempt resumed from its
    // checkpoint.
    assert!(
        p.contains("Resuming from checkpoint. Skip to Task 2."),
        "{p}"
    );
    assert_eq!(read(&dir.path().join("model.txt")), "model\n");
    let log = git(dir.path(), &["log", "--reverse", "--stat", "--format=%s"]);
    let first_round = log.split("dagexec: round 2").next().unwrap();
    assert!(
        first_round.contains("model.txt") && first_round.contains("01-CHECKPOINT.json"),
        "{first_round}"
    );
}

#[test]
fn a_deferred_decision_is_logged_summarised_and_the_run_continues() {
    // 02 follows 01 by number order; 03 names 01 in depends_on.
    let dir = long_run_repo(&[(
        ".long-run/plans/03-PLAN.md",
        "---\ndepends_on: [\"01\"]\n---\n# Docs\n",
    )]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"if [ "$N" = 01 ]; then
printf 'OUTPUT_JSON_START\n{"status":"NEEDS_DECISION","blocked_at":"Task 2","decision_needed":"Which store?","options":[{"key":"postgres","description":"server"}]}\nOUTPUT_JSON_END\n'
exit 0; fi
echo $N > $N.txt
done_block"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let a = answer(dir.path(), &["0", "defer"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    let issues = read(&dir.path().join(".long-run/ISSUES.md"));
    assert!(
        issues.contains("Plan 01 (Models)")
            && issues.contains("Which store?")
            && issues.contains("Task 2"),
        "{issues}"
    );
    let summary = read(&dir.path().join(".long-run/summaries/01-SUMMARY.md"));
    assert!(
        summary.starts_with("---\nplan: \"01\"\nstatus: skipped\n---\n# Plan 01: Models\n"),
        "{summary}"
    );

    let o = lr_run(dir.path(), out.path(), &w);
    let log = text(&o);
    assert!(!log.contains("because a dependency failed"), "{log}");
    assert!(log.contains("Task 0 (Models) was deferred"), "{log}");
    // The next plan ran; the one that named 01 in depends_on is skipped, saying why.
    assert!(dir.path().join("02.txt").exists(), "{log}");
    let plan = json_of(&dir.path().join(".long-run/plan.json"));
    assert_eq!(plan["tasks"][0]["status"], "skipped");
    assert_eq!(plan["tasks"][1]["status"], "completed");
    assert_eq!(plan["tasks"][2]["status"], "skipped");
    assert!(
        plan["tasks"][2]["result"]
            .as_str()
            .unwrap()
            .contains("was deferred"),
        "{plan}"
    );
    assert_eq!(o.status.code(), Some(1), "{log}");
    let committed = git(dir.path(), &["ls-files", ".long-run"]);
    assert!(
        committed.contains(".long-run/ISSUES.md")
            && committed.contains(".long-run/summaries/01-SUMMARY.md"),
        "{committed}"
    );
}

#[test]
fn a_needs_decision_last_line_asks_like_the_output_json_block() {
    // A plan.json task: the worker contract allows `NEEDS_DECISION: …` as the status line.
    let dir = repo(&[(".design/plan.json", &one_task_plan())]);
    let out = tempfile::tempdir().unwrap();
    let w = script(
        out.path(),
        "w.sh",
        r#"cp "$DAGEXEC_PROMPT_FILE" "$OUT/prompt-$DAGEXEC_ATTEMPT.md"
if grep -q 'User decided' "$DAGEXEC_PROMPT_FILE"; then echo a > a.txt; echo 'COMPLETED: wrote a'; exit 0; fi
echo thinking
echo 'NEEDS_DECISION: Which encoding, utf-8 or latin-1?'"#,
    );
    let o = run(dir.path(), out.path()).worker(&w).run();
    let log = o.expect_code(5);
    assert!(
        !out.path().join("prompt-2.md").exists(),
        "not retried: {log}"
    );
    assert!(
        log.contains("Task 0 (Write a) needs a decision:\nWhich encoding, utf-8 or latin-1?"),
        "{log}"
    );
    let plan = json_of(&dir.path().join(".design/plan.json"));
    assert_eq!(plan["tasks"][0]["status"], "blocked");
    assert_eq!(plan["tasks"][0]["question"]["kind"], "decision");
    let a = exec(dir.path(), &["answer", "0", "utf-8"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    let o = run(dir.path(), out.path()).worker(&w).run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(&out.path().join("prompt-1.md")).contains("User decided: utf-8."));

    // A long-run plan: `NEEDS_ACTION: …` as the last line, no OUTPUT_JSON block.
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"if [ "$N" = 01 ] && ! grep -q 'User completed action' "$DAGEXEC_PROMPT_FILE"; then
echo 'NEEDS_ACTION: Verify the email address'; exit 0; fi
done_block"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(5);
    assert!(!log.contains("OUTPUT_JSON"), "{log}");
    assert!(
        log.contains("Task 0 (Models) needs an action from you:\nVerify the email address"),
        "{log}"
    );
    answer(dir.path(), &["0", "done"]);
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn needs_action_waits_for_done() {
    let dir = long_run_repo(&[(
        ".long-run/plans/02-PLAN.md",
        "---\ndepends_on: []\n---\n# Routes\n",
    )]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"if [ "$N" = 01 ] && ! grep -q 'User completed action' "$DAGEXEC_PROMPT_FILE"; then
printf 'OUTPUT_JSON_START\n{"status":"NEEDS_ACTION","blocked_at":"Task 1","action_needed":"Verify the email","instructions":["open the inbox","click the link"]}\nOUTPUT_JSON_END\n'
exit 0; fi
done_block"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(5);
    assert!(log.contains("needs an action from you at Task 1:\nVerify the email\nSteps:\n1. open the inbox\n2. click the link"), "{log}");
    // 02 declared no dependency: it completed beside the question.
    let plan = json_of(&dir.path().join(".long-run/plan.json"));
    assert_eq!(plan["tasks"][1]["status"], "completed");
    let a = answer(dir.path(), &["0", "later"]);
    assert!(
        text(&a).contains("answer `done` once it is done"),
        "{}",
        text(&a)
    );
    answer(dir.path(), &["0", "done"]);
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        read(&out.path().join("plan-01-1.md"))
            .contains("User completed action. Verify and continue.")
    );
}

#[test]
fn failed_and_malformed_blocks_are_failures_with_the_raw_output_kept() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"case "$N-$DAGEXEC_ATTEMPT" in
01-1) printf 'OUTPUT_JSON_START\n{"status": COMPLETED}\nOUTPUT_JSON_END\n' ;;
01-2) printf 'OUTPUT_JSON_START\n{"status":"FAILED","failed_at":"Task 1","error":"tests fail"}\nOUTPUT_JSON_END\n' ;;
*) done_block ;;
esac"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(0);
    assert!(
        log.contains("attempt 1 failed: the OUTPUT_JSON_START block is not valid JSON"),
        "{log}"
    );
    assert!(
        log.contains("the raw output is in .long-run/logs/01-attempt-1.log"),
        "{log}"
    );
    let raw = read(&dir.path().join(".long-run/logs/01-attempt-1.log"));
    assert!(raw.contains("{\"status\": COMPLETED}"), "{raw}");
    let second = read(&out.path().join("plan-01-2.md"));
    assert!(
        second.contains("## Retry context") && second.contains("not valid JSON"),
        "{second}"
    );
    let third = read(&out.path().join("plan-01-3.md"));
    assert!(third.contains("failed at Task 1: tests fail"), "{third}");
}

#[test]
fn a_committed_checkpoint_resumes_the_plan_and_a_completed_summary_skips_it() {
    let dir = long_run_repo(&[
        (
            ".long-run/plans/01-CHECKPOINT.json",
            "{\"last_completed_task\": 2}\n",
        ),
        (
            ".long-run/plans/03-PLAN.md",
            "---\ndepends_on: [\"01\"]\n---\n# Docs\n",
        ),
        (
            ".long-run/summaries/02-SUMMARY.md",
            "---\nplan: \"02\"\nstatus: completed\n---\n# Plan 02\n",
        ),
    ]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(out.path(), "done_block");
    let o = lr_run(dir.path(), out.path(), &w);
    o.expect_code(0);
    let p = read(&out.path().join("plan-01-1.md"));
    assert!(p.contains("Resuming from checkpoint. Skip to Task 3.\nPrevious progress:\n{\"last_completed_task\": 2}"), "{p}");
    assert!(
        p.contains("1. Execute tasks sequentially starting from Task 3"),
        "{p}"
    );
    assert!(
        !out.path().join("plan-02-1.md").exists(),
        "plan 02 was completed already"
    );
    assert!(out.path().join("plan-03-1.md").exists());
}

/// The long-run worker of the resume tests, for plan 01: done Task 1 (committed `m1.txt`,
/// checkpoint `last_completed_task: 1`) unless its tree already has it, then `$1`.
fn checkpointing_worker(out: &Path, then: &str) -> String {
    lr_worker(
        out,
        &format!(
            r#"if [ "$N" = 01 ]; then
  if grep -q 'Skip to Task 2' "$DAGEXEC_PROMPT_FILE" && [ -f m1.txt ]; then
    echo resumed > "$OUT/resumed"; echo m2 > m2.txt; done_block; exit 0
  fi
  echo m1 > m1.txt; git add m1.txt; git commit -qm "feat(01): task 1"
  printf '{{"last_completed_task": 1}}\n' > .long-run/plans/01-CHECKPOINT.json
  {then}
fi
done_block"#
        ),
    )
}

#[test]
fn a_retry_after_failed_resumes_from_the_attempts_checkpoint() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = checkpointing_worker(
        out.path(),
        r#"printf 'OUTPUT_JSON_START\n{"status":"FAILED","failed_at":"Task 2","error":"tests fail"}\nOUTPUT_JSON_END\n'; exit 0"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(0);
    let second = read(&out.path().join("plan-01-2.md"));
    assert!(
        second.contains("Resuming from checkpoint. Skip to Task 2.")
            && second.contains("starting from Task 2"),
        "the retry says where to resume: {second}"
    );
    assert!(
        out.path().join("resumed").exists(),
        "task 1's work was in the tree: {log}"
    );
    // Task 1's work (from attempt 1) and Task 2's (attempt 2) are both integrated.
    assert_eq!(read(&dir.path().join("m1.txt")), "m1\n");
    assert_eq!(read(&dir.path().join("m2.txt")), "m2\n");
}

#[test]
fn a_crash_mid_plan_keeps_the_checkpoint_and_the_work_it_describes() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    // After Task 1 the worker keeps working (until the runner is gone).
    let w = checkpointing_worker(
        out.path(),
        r#"i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 1"#,
    );
    let o = lr(dir.path(), out.path(), &w)
        .env("DAGEXEC_FAILPOINT", "checkpoint-saved:1")
        .run();
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(0);
    assert!(out.path().join("resumed").exists(), "{log}");
    assert_eq!(read(&dir.path().join("m1.txt")), "m1\n");
    assert_eq!(read(&dir.path().join("m2.txt")), "m2\n");
}

/// The issue's case: the worker did Task 1 without committing it (the seed's executor
/// stages only the files a task lists), wrote its checkpoint, and was killed with the runner.
/// The next attempt is told to resume from the checkpoint, so it must find Task 1's work in its
/// tree: the tree the checkpoint was written in, not only the commits.
#[test]
fn a_crash_after_an_uncommitted_checkpoint_resumes_from_the_tree_it_was_written_in() {
    let dir = long_run_repo(&[]);
    let out = tempfile::tempdir().unwrap();
    let w = lr_worker(
        out.path(),
        r#"if [ "$N" = 01 ]; then
  if grep -q 'Skip to Task 2' "$DAGEXEC_PROMPT_FILE"; then
    cat half.txt > "$OUT/found" 2>/dev/null; echo second >> half.txt; done_block; exit 0
  fi
  echo first > half.txt; mkdir -p notes; echo n > notes/new.txt
  printf '{"last_completed_task": 1}\n' > .long-run/plans/01-CHECKPOINT.json
  i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 1
fi
done_block"#,
    );
    let o = lr(dir.path(), out.path(), &w)
        .env("DAGEXEC_FAILPOINT", "checkpoint-saved:1")
        .run();
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    let o = lr_run(dir.path(), out.path(), &w);
    let log = o.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(out.path().join("found")).unwrap_or_default(),
        "first\n",
        "the resumed attempt found Task 1's work: {log}"
    );
    assert_eq!(read(&dir.path().join("half.txt")), "first\nsecond\n");
    assert_eq!(read(&dir.path().join("notes/new.txt")), "n\n");
}

#[test]
fn a_long_run_folder_with_an_unknown_dependency_is_refused() {
    let dir = long_run_repo(&[(
        ".long-run/plans/02-PLAN.md",
        "---\ndepends_on: [\"07\"]\n---\n",
    )]);
    let out = tempfile::tempdir().unwrap();
    let o = lr_run(dir.path(), out.path(), "true");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: .long-run/plans/02-PLAN.md: depends_on names plan \"07\", which is not in the folder (plans: 01, 02)"),
        "{err}"
    );
    assert!(err.contains("hint: depends_on lists plan numbers"), "{err}");
}

#[test]
fn a_cycle_among_the_plan_files_names_them_and_writes_nothing() {
    let dir = long_run_repo(&[(
        ".long-run/plans/01-PLAN.md",
        "---\ndepends_on: [\"02\"]\n---\n# Models\n",
    )]);
    let out = tempfile::tempdir().unwrap();
    let o = lr_run(dir.path(), out.path(), "true");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: .long-run/plans/01-PLAN.md: depends_on makes a cycle: .long-run/plans/01-PLAN.md → .long-run/plans/02-PLAN.md → .long-run/plans/01-PLAN.md"),
        "{err}"
    );
    assert!(
        !err.contains("blockedBy") && !err.contains("plan.json"),
        "{err}"
    );
    assert!(!dir.path().join(".long-run/plan.json").exists());
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");

    let dir = long_run_repo(&[(
        ".long-run/plans/02-PLAN.md",
        "---\ndepends_on: [2]\n---\n# Routes\n",
    )]);
    let o = lr_run(dir.path(), out.path(), "true");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: .long-run/plans/02-PLAN.md: depends_on names the plan itself (02)"),
        "{err}"
    );
    assert!(!err.contains("blockedBy"), "{err}");
    assert!(!dir.path().join(".long-run/plan.json").exists());
}

#[test]
fn dry_run_writes_nothing_and_prompt_shows_the_resume_state() {
    let dir = long_run_repo(&[(
        ".long-run/plans/01-CHECKPOINT.json",
        "{\"last_completed_task\": 4}\n",
    )]);
    let out = tempfile::tempdir().unwrap();
    let o = exec(dir.path(), &["run", "--dry-run", "--long-run", ".long-run"]);
    let log = o.expect_code(0);
    assert!(
        log.contains("Round 1: 0 Models\nRound 2: 1 Routes"),
        "{log}"
    );
    assert!(!dir.path().join(".long-run/plan.json").exists());
    // A run that fails leaves the plan; `prompt` shows what the next worker gets.
    let w = lr_worker(
        out.path(),
        r#"printf 'OUTPUT_JSON_START\n{"status":"FAILED","error":"no"}\nOUTPUT_JSON_END\n'"#,
    );
    let o = lr_run(dir.path(), out.path(), &w);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let p = exec(
        dir.path(),
        &["--plan", ".long-run/plan.json", "prompt", "0"],
    );
    let prompt = String::from_utf8_lossy(&p.stdout);
    assert!(prompt.contains("Skip to Task 5."), "{prompt}");
    assert!(prompt.contains("starting from Task 5"), "{prompt}");
}
