//! `dagexec run` end to end: real git repositories in temp dirs, real worker processes
//! (scripts that succeed, fail, lie, crash, hang), the plan and the commits checked after.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common;
use common::local::{Local, TaskSpec, all_tasks_are, done_plan, exec, local, plan_json};
use common::{dagexec, git, manifest, repo, text, worker};

fn demo_worker() -> String {
    format!(
        "sh '{}'",
        manifest().join("examples/demo/worker.sh").display()
    )
}

/// `dagexec run` as these tests run it: two jobs, 20 s an attempt, the demo worker without
/// its delay.
fn run(dir: &Path) -> Local {
    local(dir)
        .jobs(2)
        .timeout("20s")
        .env("DAGEXEC_DEMO_DELAY", "0")
}

/// Waits (up to 30 s) until `ready` holds: a run has reached the state a test needs.
fn wait_for(ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the run"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The files task `i` of a genplan plan declares.
fn declared_files(plan: &Value, i: usize) -> Vec<String> {
    let files = &plan["tasks"][i]["metadata"]["files"];
    files["create"]
        .as_array()
        .unwrap()
        .iter()
        .chain(files["modify"].as_array().unwrap())
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// Every task of a 40-task genplan plan run by the demo worker left its marker exactly once
/// in each file it declares, and nothing is left uncommitted.
fn assert_each_change_once(dir: &Path, plan: &Value, label: &str) {
    for i in 0..40 {
        for f in declared_files(plan, i) {
            let content = std::fs::read_to_string(dir.join(&f)).unwrap();
            let n = content.matches(&format!("dagexec-task-{i}:")).count();
            assert_eq!(n, 1, "{label}: task {i} in {f}: {content}");
        }
    }
    assert_eq!(git(dir, &["status", "--porcelain"]), "", "{label}");
}

fn example(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(manifest().join("examples").join(name)).unwrap())
        .unwrap()
}

#[test]
fn the_random_40_plan_runs_to_completion_round_by_round() {
    let plan = example("random-40-v2.json");
    let dir = repo(&plan, &[("README.md", "x\n")]);
    let o = run(dir.path()).worker(&demo_worker()).run();
    let out = o.expect_code(0);
    assert!(out.contains("All 40 tasks completed."), "{out}");
    assert!(
        out.contains("task 1 (") && out.contains("retrying (attempt 2 of 3)"),
        "the flaky task was retried: {out}"
    );
    // Archived, committed, nothing left behind.
    assert!(!dir.path().join(".design/plan.json").exists());
    let done = done_plan(dir.path());
    assert!(all_tasks_are(&done, "completed"));
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    let log = git(dir.path(), &["log", "--format=%s"]);
    assert!(
        log.starts_with("dagexec: all 40 tasks completed\n"),
        "{log}"
    );
    assert!(log.contains("dagexec: round 1 — "), "{log}");
    // Every task's marker is in exactly one round commit.
    assert_each_change_once(dir.path(), &plan, "rounds");
}

#[test]
fn a_lying_worker_fails_three_times_and_dependents_are_skipped() {
    let plan = example("auth-v2.json");
    // No blocking checks that need node/npx on this machine.
    let mut plan = plan;
    for t in plan["tasks"].as_array_mut().unwrap() {
        t["agent"]["assumptions"] = serde_json::json!([]);
        t["agent"]["acceptanceCriteria"] = serde_json::json!([]);
    }
    let dir = repo(
        &plan,
        &[
            ("prisma/schema.prisma", "model A {}\n"),
            ("package.json", "{}\n"),
            ("src/middleware.ts", "\n"),
        ],
    );
    // Claims success, writes nothing.
    let o = run(dir.path()).script("echo 'COMPLETED: trust me'").run();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(3), "circuit breaker: {out}");
    assert!(out.contains("spot-check failed"), "{out}");
    assert!(out.contains("Circuit breaker triggered: "), "{out}");
    let p = plan_json(dir.path());
    assert_eq!(p["tasks"][0]["status"], "failed");
    assert_eq!(p["tasks"][0]["attempts"], 3);
    assert_eq!(p["tasks"][2]["status"], "skipped");
    assert!(
        p["tasks"][2]["result"]
            .as_str()
            .unwrap()
            .starts_with("Skipped: dependency task 0 (Create user model) failed")
    );
    // Task 5 declares no files, so it completed (nothing to spot-check).
    assert_eq!(p["tasks"][5]["status"], "completed");
}

#[test]
fn failure_modes_have_reasons() {
    let plan = serde_json::json!({
        "schemaVersion": 2, "goal": "modes",
        "tasks": [
            {"subject": "garbage", "metadata": {"files": {"create": ["a.txt"], "modify": []}}, "agent": {"role": "r"}},
            {"subject": "crash", "metadata": {"files": {"create": ["b.txt"], "modify": []}}, "agent": {"role": "r"}},
            {"subject": "hang", "metadata": {"files": {"create": ["c.txt"], "modify": []}}, "agent": {"role": "r"}},
            {"subject": "blocked", "metadata": {"files": {"create": ["d.txt"], "modify": []}}, "agent": {"role": "r"}},
            {"subject": "after blocked", "blockedBy": [3], "metadata": {"files": {"create": ["e.txt"], "modify": []}}, "agent": {"role": "r"}}
        ]
    });
    let dir = repo(&plan, &[]);
    let o = run(dir.path())
        .script(
            r#"case "$DAGEXEC_TASK_INDEX" in
  0) echo "I did some things" ;;
  1) kill -9 $$ ;;
  2) sleep 30 ;;
  3) echo "BLOCKED: needs a database" ;;
esac"#,
        )
        .timeout("1s")
        .run();
    let out = text(&o);
    // Task 4's skip is 1 of 1 pending: the circuit breaker (5 tasks > 3) stops the run.
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("Circuit breaker triggered: 1/1 pending tasks would be skipped due to cascading failures."), "{out}");
    let p = plan_json(dir.path());
    let result = |i: usize| p["tasks"][i]["result"].as_str().unwrap().to_string();
    assert!(
        result(0).starts_with("No status line returned"),
        "{}",
        result(0)
    );
    assert_eq!(
        result(1),
        "worker crashed: killed by signal 9 (exit status 137); stderr: Killed"
    );
    assert_eq!(result(2), "timed out after 1s");
    assert_eq!(p["tasks"][3]["status"], "blocked");
    assert_eq!(p["tasks"][3]["attempts"], 1, "BLOCKED is not retried");
    assert_eq!(p["tasks"][4]["status"], "skipped");
    assert_eq!(
        p["tasks"][4]["result"],
        "Skipped: dependency task 3 (blocked) was blocked"
    );
    assert_eq!(p["tasks"][2]["attempts"], 3);
}

#[test]
fn no_worker_shows_how_to_set_one() {
    let dir = repo(&example("auth-v2.json"), &[]);
    let o = exec(dir.path(), &["run"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no worker command"), "{err}");
    assert!(
        err.contains("claude -p") && err.contains("codex exec") && err.contains("aider"),
        "{err}"
    );
}

#[test]
fn dry_run_shows_rounds_and_changes_nothing() {
    let dir = repo(&example("auth-v2.json"), &[]);
    let before = std::fs::read_to_string(dir.path().join(".design/plan.json")).unwrap();
    let o = exec(dir.path(), &["run", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    // Tasks 2 and 3 both modify package.json: the seed runs them one after another inside
    // round 2, so there are maxDepth (3) rounds.
    assert_eq!(
        out,
        "Dry run: 3 round(s) if every task completes (nothing is changed).\n\
         Round 1: 0 Create user model | 1 Add password hashing helper | 5 Research rate limiting options\n\
         Round 2: 2 Implement sign-up endpoint, then 3 Implement session middleware (sharing files: 2 groups, one after another)\n\
         Round 3: 4 Implement login endpoint\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".design/plan.json")).unwrap(),
        before
    );
}

#[test]
fn resume_after_kill_9_commits_each_change_once() {
    let plan = example("random-40-v2.json");
    let dir = repo(&plan, &[]);
    let mut child = dagexec(dir.path())
        .args(["run", "--worker", &demo_worker(), "--jobs", "2"])
        .env("DAGEXEC_DEMO_DELAY", "0.3")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Let it get a few rounds in, then kill it without warning.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while git(dir.path(), &["log", "--format=%s"])
        .matches("dagexec: round")
        .count()
        < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(250));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let o = run(dir.path()).worker(&demo_worker()).run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Took over the lock") || out.contains("Resuming execution."),
        "{out}"
    );
    assert_each_change_once(dir.path(), &plan, "run");
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// A plan whose tasks each create their own file, with the given blockers, and a fallback.
fn simple_plan(tasks: &[TaskSpec]) -> Value {
    let mut plan = common::local::simple_plan(tasks);
    for t in plan["tasks"].as_array_mut().unwrap() {
        t["agent"]["fallback"] = "Write the file by hand.".into();
    }
    plan
}

#[test]
fn retry_prompt_carries_reason_fallback_and_failed_checks() {
    let mut plan = simple_plan(&[("make out", &[], &["out.txt"], &[])]);
    plan["tasks"][0]["agent"]["acceptanceCriteria"] =
        serde_json::json!([{"criterion": "says done", "check": "grep -q done out.txt"}]);
    let dir = repo(&plan, &[]);
    let record = tempfile::tempdir().unwrap();
    let o = run(dir.path())
        .script(&format!(
            r#"cp "$DAGEXEC_PROMPT_FILE" '{rec}/prompt-'"$DAGEXEC_ATTEMPT"
if [ "$DAGEXEC_ATTEMPT" = 1 ]; then echo nope > out.txt; else echo done > out.txt; fi
echo "COMPLETED: wrote out.txt""#,
            rec = record.path().display()
        ))
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let first = std::fs::read_to_string(record.path().join("prompt-1")).unwrap();
    let second = std::fs::read_to_string(record.path().join("prompt-2")).unwrap();
    assert!(!first.contains("## Retry context"));
    assert!(
        second.starts_with(first.trim_end()),
        "the retry prompt extends the original"
    );
    let tail = &second[first.trim_end().len()..];
    assert_eq!(
        tail,
        "\n\n## Retry context\nThis is attempt 2 of 3. The previous attempt failed.\n\nPrevious failure reason:\nacceptance check failed: `grep -q done out.txt`: no output\n\nIMPORTANT: The primary approach failed. Use this strategy instead: Write the file by hand.\n\nThe following acceptance checks failed — ensure they pass before reporting COMPLETED:\n- `grep -q done out.txt` (says done)\n  (no output)\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "done\n"
    );
}

#[test]
fn stray_files_are_flagged_and_plan_edits_discarded() {
    let plan = simple_plan(&[("a", &[], &["a.txt"], &[]), ("b", &[], &["b.txt"], &[])]);
    let dir = repo(&plan, &[]);
    let o = run(dir.path())
        .script(
            r#"echo x > "$( [ "$DAGEXEC_TASK_INDEX" = 0 ] && echo a.txt || echo b.txt )"
if [ "$DAGEXEC_TASK_INDEX" = 0 ]; then echo stray > notes.txt; echo '{}' > .design/plan.json; fi
echo "COMPLETED: ok""#,
        )
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 0: warning: unexpected file changed: notes.txt"),
        "{out}"
    );
    assert!(out.contains("task 0: warning: edited .design/plan.json (the edit is discarded; only dagexec writes the plan)"), "{out}");
    let done = done_plan(dir.path());
    assert_eq!(
        done["goal"], "test",
        "the worker's edit of the plan did not land"
    );
}

#[test]
fn an_undeclared_conflict_is_retried_on_the_new_base() {
    // Both tasks declare their own file but also rewrite shared.txt without saying so.
    let plan = simple_plan(&[("a", &[], &["a.txt"], &[]), ("b", &[], &["b.txt"], &[])]);
    let dir = repo(&plan, &[("shared.txt", "base\n")]);
    let o = run(dir.path())
        .script(
            r#"f=$( [ "$DAGEXEC_TASK_INDEX" = 0 ] && echo a.txt || echo b.txt )
echo x > "$f"
echo "changed by $DAGEXEC_TASK_INDEX" > shared.txt
echo "COMPLETED: ok""#,
        )
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 1: attempt 1 of 3 could not be integrated: conflicts with task 0"),
        "{out}"
    );
    assert!(out.contains("Round 2: starting 1 task(s): 1"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shared.txt")).unwrap(),
        "changed by 1\n"
    );
}

/// A patch that no longer applies names the landed task whose change it does not apply after,
/// not the first task that changed its file: task 0 changed line 1 of shared.txt, far from the
/// lines task 1 and task 2 change (8 and 9), so task 2's patch fails on task 1's change alone.
/// It used to say "conflicts with task 0", a change it never met. Task 3 changes line 12, away
/// from them all.
#[test]
fn an_undeclared_conflict_names_the_task_whose_change_it_met() {
    let plan = simple_plan(&[
        ("a", &[], &["a.txt"], &[]),
        ("b", &[], &["b.txt"], &[]),
        ("c", &[], &["c.txt"], &[]),
        ("d", &[], &["d.txt"], &[]),
    ]);
    let lines: String = (1..=12).map(|n| format!("line {n}\n")).collect();
    let dir = repo(&plan, &[("shared.txt", &lines)]);
    let o = run(dir.path())
        .script(
            r#"i=$DAGEXEC_TASK_INDEX
echo x > "$(printf 'abcd' | cut -c$((i + 1))).txt"
case $i in 0) n=1 ;; 1) n=8 ;; 2) n=9 ;; 3) n=12 ;; esac
[ "$DAGEXEC_ATTEMPT" = 1 ] && sed -i "${n}s/.*/line $n by $i/" shared.txt
echo "COMPLETED: ok""#,
        )
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("task 2: attempt 1 of 3 could not be integrated: conflicts with task 1:"),
        "{out}"
    );
    // Working that out leaves the round's own index as it was: task 3, after it, lands.
    assert!(out.contains("Round 1: 3/4 tasks"), "{out}");
}

#[test]
fn conflicting_tasks_never_run_at_the_same_time() {
    // Six independent tasks, pairs of which modify the same file.
    let plan = simple_plan(&[
        ("a", &[], &[], &["x.txt"]),
        ("b", &[], &[], &["x.txt"]),
        ("c", &[], &[], &["y.txt"]),
        ("d", &[], &[], &["y.txt"]),
        ("e", &[], &["e.txt"], &[]),
        ("f", &[], &["f.txt"], &[]),
    ]);
    let dir = repo(&plan, &[("x.txt", "\n"), ("y.txt", "\n")]);
    let record = tempfile::tempdir().unwrap();
    let o = run(dir.path())
        .script(&format!(
        r#"echo "start $DAGEXEC_TASK_INDEX $(date +%s%N)" >> '{rec}/times'
sed -n -e 's/^Files to create: //p' -e 's/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' '\n' | sed 's/^ *//' | grep -v '^(none)$' | while read -r f; do echo "by $DAGEXEC_TASK_INDEX" >> "$f"; done
sleep 1
echo "end $DAGEXEC_TASK_INDEX $(date +%s%N)" >> '{rec}/times'
echo "COMPLETED: ok""#,
        rec = record.path().display()
    ))
        .jobs(6)
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let times = std::fs::read_to_string(record.path().join("times")).unwrap();
    let mut span: BTreeMap<u32, (u128, u128)> = BTreeMap::new();
    for line in times.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let (i, t): (u32, u128) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
        let e = span.entry(i).or_insert((0, 0));
        if parts[0] == "start" {
            e.0 = t
        } else {
            e.1 = t
        }
    }
    for (a, b) in [(0, 1), (2, 3)] {
        let (x, y) = (span[&a], span[&b]);
        assert!(
            x.1 <= y.0 || y.1 <= x.0,
            "tasks {a} and {b} overlapped: {x:?} {y:?}"
        );
    }
    // The others did run together with the first ones.
    let (e, a) = (span[&4], span[&0]);
    assert!(e.0 < a.1 && a.0 < e.1, "independent tasks run in parallel");
}

#[test]
fn waves_mode_waits_for_each_wave() {
    let mut plan = simple_plan(&[
        ("a", &[], &["a.txt"], &[]),
        ("b", &[0], &["b.txt"], &[]),
        ("c", &[], &["c.txt"], &[]),
    ]);
    for (i, w) in [1, 2, 2].iter().enumerate() {
        plan["tasks"][i]["wave"] = (*w).into();
    }
    plan["progress"] = serde_json::json!({"completedTasks": [], "surprises": [], "decisions": [], "currentWave": 0});
    let dir = repo(&plan, &[]);
    let o = run(dir.path())
        .script(
        r#"sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE" | while read -r f; do echo x > "$f"; done; echo "COMPLETED: ok""#,
    )
        .args(["--schedule", "waves"])
        .run();
    let out = o.expect_code(0);
    assert!(out.contains("Round 1: starting 1 task(s): 0\n"), "{out}");
    assert!(out.contains("Round 2: starting 2 task(s): 1, 2\n"), "{out}");
    let done = done_plan(dir.path());
    assert_eq!(done["progress"]["currentWave"], 2);
    assert_eq!(done["progress"]["completedTasks"][0]["wave"], 1);
}

#[test]
fn failed_blocking_checks_stop_without_yes() {
    let mut plan = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    plan["tasks"][0]["agent"]["assumptions"] =
        serde_json::json!([{"claim": "tool present", "verify": "exit 1", "severity": "blocking"}]);
    let dir = repo(&plan, &[]);
    let (_w, cmd) = worker(r#"echo x > a.txt; echo "COMPLETED: ok""#);
    let o = dagexec(dir.path())
        .args(["run", "--worker", &cmd])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("✗ task 0: tool present — `exit 1`"), "{out}");
    assert!(
        out.contains("error: 1 blocking assumption check(s) failed") && out.contains("--yes"),
        "{out}"
    );
    assert!(!dir.path().join("a.txt").exists());
    let o = run(dir.path()).worker(&cmd).args(["--yes"]).run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn ctrl_c_stops_and_the_next_run_resumes() {
    let plan = simple_plan(&[
        ("slow", &[], &["a.txt"], &[]),
        ("after", &[0], &["b.txt"], &[]),
    ]);
    let dir = repo(&plan, &[]);
    let cache = tempfile::tempdir().unwrap();
    let (_w, cmd) = worker(
        r#"sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE" | while read -r f; do echo x > "$f"; done; if [ -n "$MARK" ]; then touch "$MARK"; fi; sleep "${SLOW:-0}"; echo "COMPLETED: ok""#,
    );
    let marks = tempfile::tempdir().unwrap();
    // Ctrl-C, then a polite SIGTERM on the next try: both stop cleanly with 130.
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        let child = dagexec(dir.path())
            .args(["run", "--worker", &cmd])
            .env("SLOW", "30")
            .env("MARK", marks.path().join(signal.as_str()))
            .env("XDG_CACHE_HOME", cache.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        // The worker is running (an attempt stopped before its worker started is given back
        // as not started at all).
        wait_for(|| marks.path().join(signal.as_str()).exists());
        nix::sys::signal::kill(pid, signal).unwrap();
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(130), "{signal}: {out}");
        assert_eq!(plan_json(dir.path())["tasks"][0]["status"], "in_progress");
        // Nothing left behind: no worktree (in the cache, where they are made, nor registered),
        // no prompt files, no worker still sleeping.
        let leftovers: Vec<_> = [
            cache.path().join("dagexec/worktrees"),
            dir.path().join(".git/dagexec/prompts"),
            dir.path().join(".git/worktrees"),
        ]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .collect();
        assert!(leftovers.is_empty(), "{signal}: {leftovers:?}");
    }
    let o = run(dir.path()).worker(&cmd).run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Task 0 was in progress when the last run stopped; it starts again."),
        "{out}"
    );
    let done = done_plan(dir.path());
    assert_eq!(done["tasks"][0]["status"], "completed");
}

#[test]
fn a_second_run_on_the_same_repository_is_refused() {
    let plan = simple_plan(&[("slow", &[], &["a.txt"], &[])]);
    let dir = repo(&plan, &[]);
    let (_w, cmd) = worker(r#"echo x > a.txt; sleep 5; echo "COMPLETED: ok""#);
    let mut first = dagexec(dir.path())
        .args(["run", "--worker", &cmd])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(|| dir.path().join(".git/dagexec/run.lock").exists());
    let o = exec(dir.path(), &["run", "--worker", &cmd]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another dagexec run (pid"),
        "{}",
        text(&o)
    );
    first.wait().unwrap();
}

/// Runs started together over the lock a killed run left (its pid, no process): exactly one
/// takes it over and runs, every other is refused. With a pid file as the lock, two could
/// each judge it stale, and the second removed the first's fresh lock and ran beside it.
#[test]
fn runs_started_together_over_a_dead_runs_lock_run_once() {
    let plan = simple_plan(&[("slow", &[], &["a.txt"], &[])]);
    let dir = repo(&plan, &[]);
    let (_w, cmd) = worker(r#"echo x > a.txt; sleep 2; echo "COMPLETED: ok""#);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let lock = dir.path().join(".git/dagexec/run.lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, dead.to_string()).unwrap();
    let runs: Vec<_> = (0..6)
        .map(|_| {
            dagexec(dir.path())
                .args(["run", "--worker", &cmd])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = runs
        .into_iter()
        .map(|r| r.wait_with_output().unwrap())
        .collect();
    let ran: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(
        ran.len(),
        1,
        "{}",
        outs.iter().map(text).collect::<Vec<_>>().join("\n---\n")
    );
    assert!(
        text(ran[0]).contains(&format!("earlier run (pid {dead})")),
        "{}",
        text(ran[0])
    );
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(2), "{}", text(o));
        assert!(text(o).contains("another dagexec run (pid"), "{}", text(o));
    }
    assert_eq!(done_plan(dir.path())["tasks"][0]["status"], "completed");
}

/// Kill -9 at each step of a round commit (and inside a worker), then run again: the final
/// plan is complete, every task's change is in exactly one commit, the tree is clean.
#[test]
fn resume_after_a_crash_at_each_step_of_a_round() {
    let plan = example("random-40-v2.json");
    // Each point in a repository of its own, side by side (the runs mostly wait on workers).
    let points = [
        // Round 3 runs its tasks sharing files in two groups: a crash between them.
        "between-groups:3",
        "after-workers:3",
        "before-commit:3",
        "after-commit:3",
        "in-worker",
    ];
    std::thread::scope(|s| {
        let runs: Vec<_> = points
            .iter()
            .map(|point| s.spawn(|| crash_at_and_resume(&plan, point)))
            .collect();
        for r in runs {
            r.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}

/// One run of `plan` crashed at `point`, and the run after it: every change once, in exactly
/// one commit, and nothing left uncommitted.
fn crash_at_and_resume(plan: &Value, point: &str) {
    let dir = repo(plan, &[]);
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = dagexec(dir.path());
    cmd.args(["run", "--jobs", "2"])
        .env("DAGEXEC_DEMO_DELAY", "0");
    let mut _keep = None;
    if point == "in-worker" {
        // Task 9's worker kills dagexec itself (its grandparent) in the middle of a round.
        let (w, c) = worker(&format!(
            r#"if [ "$DAGEXEC_TASK_INDEX" = 9 ] && [ ! -e '{marker}' ]; then touch '{marker}'; kill -9 "$(ps -o ppid= -p $PPID | tr -d ' ')"; sleep 1; fi
exec {demo}"#,
            marker = scratch.path().join("killed-once").display(),
            demo = demo_worker()
        ));
        _keep = Some(w);
        cmd.args(["--worker", &c]);
    } else {
        cmd.args(["--worker", &demo_worker()])
            .env("DAGEXEC_FAILPOINT", point);
    }
    let o = cmd.output().unwrap();
    assert_eq!(
        o.status.code(),
        None,
        "{point}: dagexec was killed: {}",
        text(&o)
    );
    let o = run(dir.path()).worker(&demo_worker()).run();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{point}: {out}");
    assert_each_change_once(dir.path(), plan, point);
    for i in 0..40 {
        for f in declared_files(plan, i) {
            let marker = format!("dagexec-task-{i}:");
            let commits = git(dir.path(), &["log", "--format=%h", "-G", &marker, "--", &f]);
            assert_eq!(
                commits.lines().count(),
                1,
                "{point}: task {i}'s change to {f} is in exactly one commit"
            );
        }
    }
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "", "{point}");
}

#[test]
fn eager_mode_completes_the_random_plan_with_each_change_once() {
    let plan = example("random-40-v2.json");
    let dir = repo(&plan, &[]);
    let o = run(dir.path())
        .worker(&demo_worker())
        .jobs(3)
        .args(["--schedule", "eager"])
        .run();
    let out = o.expect_code(0);
    assert!(out.contains("All 40 tasks completed."), "{out}");
    assert_each_change_once(dir.path(), &plan, "run");
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn eager_starts_a_task_as_soon_as_its_blocker_lands() {
    // 0 works until 2 has finished (15 s at most: the tests time a worker out at 20); 1 → 2
    // are quick. Rounds would hold 2 until 0 finishes (0 gives up waiting and finishes first);
    // eager does not. Waiting for 2's record, not for a set time, keeps a loaded machine from
    // reordering them.
    let plan = simple_plan(&[
        ("slow", &[], &["a.txt"], &[]),
        ("quick", &[], &["b.txt"], &[]),
        ("after quick", &[1], &["c.txt"], &[]),
    ]);
    let dir = repo(&plan, &[]);
    let record = tempfile::tempdir().unwrap();
    let o = run(dir.path())
        .script(&format!(
        r#"sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE" | while read -r f; do echo x > "$f"; done
if [ "$DAGEXEC_TASK_INDEX" = 0 ]; then
  i=0; while [ $i -lt 150 ] && ! grep -qx 2 '{rec}/finished' 2>/dev/null; do sleep 0.1; i=$((i+1)); done
fi
echo "$DAGEXEC_TASK_INDEX" >> '{rec}/finished'
echo "COMPLETED: ok""#,
        rec = record.path().display()
    ))
        .jobs(2)
        .args(["--schedule", "eager"])
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let order = std::fs::read_to_string(record.path().join("finished")).unwrap();
    assert_eq!(
        order, "1\n2\n0\n",
        "task 2 ran while task 0 was still working"
    );
}
