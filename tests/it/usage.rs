//! Time and cost per attempt, end to end with the real binary and real worker scripts: what
//! `claude -p --output-format json`, `codex exec --json` and a `$DAGEXEC_USAGE_FILE` report is
//! recorded in `progress.dagexecAttempts`, shown by `dagexec status`, and held to the budget of
//! `dagexec run --max-cost`.

use std::path::Path;

use serde_json::{Value, json};

use crate::common;
use common::local::{Local, exec, local, one_file_each, plan_or_done};
use common::{codex_on_path, dagexec, git, repo, text, worker};

/// One independent task per file of `creates`, each creating it.
fn plan(creates: &[&str]) -> Value {
    one_file_each("spend", creates)
}

/// `dagexec run` as these tests run it: 2 s an attempt.
fn run(dir: &Path) -> Local {
    local(dir).timeout("2s")
}

/// The records of task `i`, in the order they were kept.
fn records(plan: &Value, i: u64) -> Vec<Value> {
    plan["progress"]["dagexecAttempts"]
        .as_array()
        .expect("attempts are recorded")
        .iter()
        .filter(|r| r["task"] == i)
        .cloned()
        .collect()
}

/// A claude `-p --output-format json` final result object whose `result` ends in `status`.
fn claude_json(status: &str) -> String {
    json!({
        "type": "result", "subtype": "success", "is_error": false, "duration_ms": 1200,
        "num_turns": 3, "result": format!("I created the file.\n\n{status}"), "session_id": "s-1",
        "total_cost_usd": 0.1, "usage": {"input_tokens": 20, "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 4000, "output_tokens": 55, "service_tier": "standard"},
        "modelUsage": {"claude-sonnet-4-5-20250929": {"inputTokens": 4320, "outputTokens": 55, "costUSD": 0.1}}
    })
    .to_string()
}

/// `codex exec --json` events ending in an agent message saying `status`.
fn codex_jsonl(status: &str) -> String {
    [
        json!({"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"}),
        json!({"type": "turn.started"}),
        json!({"type": "item.completed", "item": {"id": "item_0", "type": "command_execution", "command": "bash -lc 'touch b.txt'", "aggregated_output": "", "exit_code": 0, "status": "completed"}}),
        json!({"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": format!("Done.\n{status}")}}),
        json!({"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect::<Vec<_>>()
    .join("\n")
}

#[test]
fn time_and_cost_are_recorded_per_attempt_and_shown() {
    let dir = repo(&plan(&["a.txt", "b.txt", "c.txt", "d.txt"]), &[]);
    let scripts = tempfile::tempdir().unwrap();
    std::fs::write(
        scripts.path().join("claude.json"),
        claude_json("COMPLETED: via claude"),
    )
    .unwrap();
    std::fs::write(
        scripts.path().join("codex.jsonl"),
        codex_jsonl("COMPLETED: via codex"),
    )
    .unwrap();
    let s = scripts.path().display();
    let (_w, cmd) = worker(&format!(
        r#"case "$DAGEXEC_TASK_INDEX" in
0) echo a > a.txt; cat '{s}/claude.json' ;;
1) echo b > b.txt; cat '{s}/codex.jsonl' ;;
2) printf '{{"cost_usd": 0.25, "input_tokens": 10, "output_tokens": 5, "model": "m-1"}}' > "$DAGEXEC_USAGE_FILE"
   if [ "$DAGEXEC_ATTEMPT" = 1 ]; then echo 'FAILED: not yet'; else echo c > c.txt; echo 'COMPLETED: third time'; fi ;;
3) if [ "$DAGEXEC_ATTEMPT" = 1 ]; then sleep 30; fi; echo 'FAILED: cannot' ;;
esac"#
    ));
    let o = run(dir.path()).worker(&cmd).args(["--jobs", "4"]).run();
    let out = o.expect_code(1);
    let p = plan_or_done(dir.path());
    // The status lines came from claude's `result` and codex's last agent message.
    assert_eq!(p["tasks"][0]["status"], "completed", "{out}");
    let summary = |i: u64| {
        let done = p["progress"]["completedTasks"].as_array().unwrap();
        done.iter()
            .find(|c| c["index"] == i)
            .map(|c| c["summary"].clone())
    };
    assert_eq!(summary(0), Some(json!("via claude")));
    assert_eq!(summary(1), Some(json!("via codex")));
    assert_eq!(p["tasks"][1]["status"], "completed", "{out}");
    assert_eq!(p["tasks"][3]["status"], "failed", "{out}");

    let stamp = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").unwrap();
    let all = p["progress"]["dagexecAttempts"].as_array().unwrap();
    assert_eq!(all.len(), 7, "{all:?}");
    for r in all {
        assert!(stamp.is_match(r["start"].as_str().unwrap()), "{r}");
        assert!(stamp.is_match(r["end"].as_str().unwrap()), "{r}");
        assert!(r["seconds"].as_f64().unwrap() >= 0.0, "{r}");
    }
    let r = &records(&p, 0)[0];
    assert_eq!(
        (
            &r["outcome"],
            &r["costUsd"],
            &r["inputTokens"],
            &r["outputTokens"],
            &r["model"]
        ),
        (
            &json!("completed"),
            &json!(0.1),
            &json!(4320),
            &json!(55),
            &json!("claude-sonnet-4-5-20250929")
        )
    );
    let r = &records(&p, 1)[0];
    assert_eq!(
        (&r["inputTokens"], &r["outputTokens"]),
        (&json!(24763), &json!(122))
    );
    // Codex reports no cost: its tokens are priced from the table's `codex` entry (gpt-5.5's
    // list prices: 315 fresh at $5, 24448 cached at $0.50, 122 out at $30 per million).
    assert_eq!(r["costUsd"], json!(0.017459), "{r}");
    assert!(r.get("model").is_none(), "{r}");
    let two: Vec<_> = records(&p, 2)
        .iter()
        .map(|r| {
            (
                r["attempt"].clone(),
                r["outcome"].clone(),
                r["costUsd"].clone(),
                r["model"].clone(),
            )
        })
        .collect();
    assert_eq!(
        two,
        [
            (json!(1), json!("failed"), json!(0.25), json!("m-1")),
            (json!(2), json!("completed"), json!(0.25), json!("m-1"))
        ]
    );
    let three: Vec<_> = records(&p, 3)
        .iter()
        .map(|r| r["outcome"].clone())
        .collect();
    assert_eq!(three, [json!("timeout"), json!("failed"), json!("failed")]);
    assert!(out.contains(", $0.10 — via claude"), "{out}");

    let status = exec(dir.path(), &["status"]);
    let shown = text(&status);
    assert!(shown.contains("ATTEMPTS  TIME"), "{shown}");
    assert!(shown.contains("Total: 7 attempt(s) · "), "{shown}");
    assert!(shown.contains(" · $0.62\n"), "{shown}");
    let json = exec(dir.path(), &["status", "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows[2]["costUsd"], json!(0.5));
    assert_eq!(rows[2]["inputTokens"], json!(20));
    assert!(rows[3]["seconds"].as_f64().unwrap() >= 2.0, "{}", rows[3]);
}

/// A usage file a worker points elsewhere, or fills with garbage, is ignored with a warning;
/// the attempt is still judged and timed.
#[test]
fn a_bad_usage_file_is_a_warning_not_a_failure() {
    let dir = repo(&plan(&["a.txt"]), &[]);
    let (_w, cmd) = worker(
        r#"printf '{"cost_usd": -4}' > "$DAGEXEC_USAGE_FILE"; echo a > a.txt; echo 'COMPLETED: made'"#,
    );
    let o = run(dir.path()).worker(&cmd).args(["--jobs", "1"]).run();
    let out = o.expect_code(0);
    assert!(
        out.contains("$DAGEXEC_USAGE_FILE was ignored: `cost_usd` -4 is out of range"),
        "{out}"
    );
    let p = plan_or_done(dir.path());
    let r = &records(&p, 0)[0];
    assert_eq!(r["outcome"], "completed");
    assert!(r.get("costUsd").is_none(), "{r}");
}

#[test]
fn the_budget_stops_new_attempts_and_says_what_it_bought() {
    for schedule in ["rounds", "eager"] {
        let dir = repo(&plan(&["a.txt", "b.txt", "c.txt"]), &[]);
        let (_w, cmd) = worker(
            r#"printf '{"cost_usd": 0.4}' > "$DAGEXEC_USAGE_FILE"
f=$(printf 'abc' | cut -c $((DAGEXEC_TASK_INDEX + 1))).txt; echo x > "$f"; echo "COMPLETED: made $f""#,
        );
        let args = ["--jobs", "1", "--schedule", schedule, "--max-cost", "0.5"];
        let o = run(dir.path()).worker(&cmd).args(args).run();
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{schedule}: {out}");
        assert!(
            out.contains("Stopped: the budget of $0.50 is spent: $0.80 recorded over 2 attempt(s) bought 2 of 3 task(s) completed"),
            "{schedule}: {out}"
        );
        // The display says what really starts: one task at a time, the third never.
        assert!(!out.contains("starting 3 task(s)"), "{schedule}: {out}");
        if schedule == "rounds" {
            assert!(
                out.contains("Round 1: 3 task(s): 0, 1, 2; starting 0 now (1 at a time, the others as workers free up)"),
                "{out}"
            );
        }
        assert!(out.contains("starting task(s) 1\n"), "{schedule}: {out}");
        assert!(!out.contains("starting task(s) 2"), "{schedule}: {out}");
        if schedule == "rounds" {
            assert!(
                out.contains("the budget is spent: task(s) 2 not started (they stay pending)"),
                "{out}"
            );
        }
        let p = plan_or_done(dir.path());
        let statuses: Vec<_> = p["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["status"].clone())
            .collect();
        assert_eq!(
            statuses,
            [json!("completed"), json!("completed"), json!("pending")],
            "{schedule}: {out}"
        );
        // The task that never started has no attempt counted, and nothing of it was made.
        assert!(
            p["tasks"][2].get("attempts").is_none(),
            "{schedule}: {}",
            p["tasks"][2]
        );
        assert!(!dir.path().join("c.txt").exists());
        // The spend is committed with the work it bought.
        let committed = git(dir.path(), &["show", "HEAD:.design/plan.json"]);
        assert!(committed.contains("dagexecAttempts"), "{schedule}");
        // Already spent: nothing starts at all.
        let o = run(dir.path()).worker(&cmd).args(args).run();
        assert_eq!(o.status.code(), Some(1), "{schedule}: {}", text(&o));
        assert_eq!(records(&plan_or_done(dir.path()), 2).len(), 0);
        // A higher budget goes on.
        let more = ["--jobs", "1", "--schedule", schedule, "--max-cost", "5"];
        let o = run(dir.path()).worker(&cmd).args(more).run();
        assert_eq!(o.status.code(), Some(0), "{schedule}: {}", text(&o));
        assert!(dir.path().join("c.txt").exists());
    }
}

/// An attempt Ctrl-C stops is recorded too, as `interrupted`, in both schedules.
#[test]
fn an_interrupted_attempt_is_recorded() {
    for schedule in ["rounds", "eager"] {
        let dir = repo(&plan(&["a.txt"]), &[]);
        let marks = tempfile::tempdir().unwrap();
        let started = marks.path().join("started");
        let (_w, cmd) = worker(&format!(
            "echo x > a.txt; touch '{}'; sleep 30; echo 'COMPLETED: late'",
            started.display()
        ));
        let child = dagexec(dir.path())
            .args(["run", "--schedule", schedule, "--worker", &cmd])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        for _ in 0..500 {
            if started.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(started.exists(), "{schedule}: the worker never started");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{schedule}: {}", text(&o));
        let p = plan_or_done(dir.path());
        let r = records(&p, 0);
        assert_eq!(r.len(), 1, "{schedule}: {p:#}");
        assert_eq!(
            (&r[0]["attempt"], &r[0]["outcome"]),
            (&json!(1), &json!("interrupted"))
        );
        assert_eq!(p["tasks"][0]["status"], "in_progress", "{schedule}");
    }
}

/// What the reviewer spends is the attempt's too: a reviewer that answers as
/// `claude -p --output-format json` is read by its result text (its verdict), and its cost
/// adds to the worker's in the attempt's record, so `--max-cost` counts it.
#[test]
fn a_reviewers_cost_is_the_attempts_and_its_structured_verdict_is_read() {
    for schedule in ["rounds", "eager"] {
        let dir = repo(&plan(&["a.txt"]), &[]);
        let (_w, cmd) = worker(
            r#"printf '{"cost_usd": 0.4, "input_tokens": 100}' > "$DAGEXEC_USAGE_FILE"
echo x > a.txt; echo "COMPLETED: made a.txt""#,
        );
        let (_r, reviewer) = worker(&format!(
            "cat > /dev/null\nprintf '%s\\n' '{}'",
            claude_json("APPROVED\nsummary: a.txt is there")
        ));
        let o = run(dir.path())
            .worker(&cmd)
            .args(["--schedule", schedule, "--reviewer", &reviewer])
            .run();
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{schedule}: {out}");
        let r = records(&plan_or_done(dir.path()), 0);
        assert_eq!(r.len(), 1, "{schedule}: {r:?}");
        assert_eq!(r[0]["costUsd"], json!(0.5), "{schedule}: {r:?}");
        // The worker's 100 input tokens and the reviewer's 4,320 (cache reads included).
        assert_eq!(r[0]["inputTokens"], json!(4420), "{schedule}: {r:?}");
    }
}

/// `dagexec status --gantt` after a run: the recorded attempts as a chart (a failed attempt
/// `▒`, a completed one `█`), simulate's prediction for the schedule `run` uses, and the two
/// wall times side by side; before any attempt, a line saying there is nothing to chart.
#[test]
fn status_gantt_draws_the_recorded_attempts_beside_the_prediction() {
    let dir = repo(&plan(&["a.txt", "b.txt"]), &[]);
    let none = exec(dir.path(), &["status", "--gantt"]);
    assert!(
        text(&none).contains("No attempt is recorded yet"),
        "{}",
        text(&none)
    );
    // Task 0 fails its first attempt (a second long: records keep whole seconds), then
    // completes; task 1 completes at once.
    let (_w, cmd) = worker(
        r#"f=$( [ "$DAGEXEC_TASK_INDEX" = 0 ] && echo a.txt || echo b.txt )
if [ "$DAGEXEC_TASK_INDEX" = 0 ] && [ "$DAGEXEC_ATTEMPT" = 1 ]; then sleep 1; echo 'FAILED: not yet'; exit 0; fi
echo x > "$f"; echo 'COMPLETED: made'"#,
    );
    let o = run(dir.path()).worker(&cmd).args(["--jobs", "2"]).run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = dagexec(dir.path())
        .env("DAGEXEC_JOBS", "2")
        .args(["status", "--gantt", "--width", "70"])
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("\nactual: "), "{out}");
    assert!(out.contains(", 3 attempt(s)  (█ completed"), "{out}");
    let row = |task: &str| {
        out.lines()
            .find(|l| l.starts_with(task))
            .unwrap_or_else(|| panic!("no row {task:?} in {out}"))
            .to_string()
    };
    assert!(row("0 make a.txt").contains('▒'), "{out}");
    assert!(row("0 make a.txt").contains('█'), "{out}");
    assert!(!row("1 make b.txt").contains('▒'), "{out}");
    assert!(
        out.contains("predicted by `dagexec simulate`:\nrounds locally: "),
        "{out}"
    );
    assert!(
        out.contains(
            "(`dagexec simulate`: rounds locally on 2 worker(s); each task's time as recorded)"
        ),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("predicted ") && l.contains(" · actual ")),
        "{out}"
    );
}

/// A round where no task completes still commits the plan: its attempt records and spend (and
/// the failures) are on the branch, as the README promises for every round.
#[test]
fn a_round_where_nothing_completes_commits_its_attempt_records() {
    for schedule in ["rounds", "eager"] {
        let dir = repo(&plan(&["a.txt"]), &[]);
        let (_w, cmd) =
            worker(r#"printf '{"cost_usd": 0.5}' > "$DAGEXEC_USAGE_FILE"; echo 'FAILED: cannot'"#);
        let o = run(dir.path())
            .worker(&cmd)
            .args(["--jobs", "1", "--schedule", schedule])
            .run();
        let out = text(&o);
        assert_ne!(o.status.code(), Some(0), "{schedule}: {out}");
        let saved = plan_or_done(dir.path());
        assert_eq!(records(&saved, 0).len(), 3, "{schedule}: {out}");
        let committed: Value =
            serde_json::from_str(&git(dir.path(), &["show", "HEAD:.design/plan.json"])).unwrap();
        assert_eq!(
            committed["progress"]["dagexecAttempts"], saved["progress"]["dagexecAttempts"],
            "{schedule}: the records are not committed\n{out}"
        );
        assert_eq!(committed["tasks"][0]["status"], "failed", "{schedule}");
        let subject = git(dir.path(), &["log", "-1", "--format=%s"]);
        assert!(
            subject.starts_with("dagexec: round 1"),
            "{schedule}: {subject}"
        );
    }
}

/// A reviewer's stdout (as it printed it, structured or not) and stderr are kept beside the
/// attempt's own logs, as `run-R/task-N-attempt-K.review.{stdout,stderr}`, and listed by
/// `dagexec status`.
#[test]
fn a_reviewers_output_is_kept_beside_the_attempts_logs() {
    let dir = repo(&plan(&["a.txt"]), &[]);
    let (_w, cmd) = worker(r#"echo x > a.txt; echo "COMPLETED: made a.txt""#);
    let (_r, reviewer) = worker(&format!(
        "cat > /dev/null\necho 'reviewer says hi on stderr' >&2\nprintf '%s\\n' '{}'",
        claude_json("APPROVED\nsummary: a.txt is there")
    ));
    let o = run(dir.path())
        .worker(&cmd)
        .args(["--reviewer", &reviewer])
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let logs = dir.path().join(".git/dagexec/logs/run-1");
    let read = |name: &str| {
        std::fs::read_to_string(logs.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert!(
        read("task-0-attempt-1.review.stdout").contains("\"total_cost_usd\""),
        "the raw structured output is kept"
    );
    assert_eq!(
        read("task-0-attempt-1.review.stderr"),
        "reviewer says hi on stderr\n"
    );
    assert!(read("task-0-attempt-1.stdout").contains("COMPLETED: made a.txt"));
    let status = exec(dir.path(), &["status"]);
    let shown = text(&status);
    assert!(
        shown.contains("  task 0: run-1 attempt 1 (stdout, stderr, review.stderr, review.stdout)"),
        "{shown}"
    );
}

/// A home whose `~/.codex/config.toml` chooses a provider it never describes.
fn home_with_a_broken_codex_config() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        "model_provider = \"nowhere\"\n",
    )
    .unwrap();
    home
}

#[test]
fn a_codex_configuration_the_gateway_cannot_follow_stops_only_a_codex_worker() {
    let home = home_with_a_broken_codex_config();
    // A run of one task by `worker`, with that home and no OpenAI settings of its own.
    let run_by = |dir: &Path, worker: &str| {
        run(dir)
            .worker(worker)
            .env("HOME", home.path())
            .env_remove("CODEX_HOME")
            .env_remove("OPENAI_BASE_URL")
            .run()
    };
    // A worker that is not Codex: told, and the run goes on.
    let dir = repo(&plan(&["a.txt"]), &[]);
    let (_w, cmd) = worker(r#"echo a > a.txt; echo 'COMPLETED: made'"#);
    let out = run_by(dir.path(), &cmd).expect_code(0);
    assert!(
        out.contains("warning: ")
            && out.contains(".codex/config.toml")
            && out.contains("\"nowhere\"")
            && out.contains("does not run Codex"),
        "{out}"
    );
    // Codex would send its requests there: stopped before anything starts, naming the fix.
    let path = codex_on_path(home.path());
    let dir = repo(&plan(&["a.txt"]), &[]);
    let out = run(dir.path())
        .worker("codex")
        .env("HOME", home.path())
        .env("PATH", path)
        .env_remove("CODEX_HOME")
        .env_remove("OPENAI_BASE_URL")
        .run()
        .expect_code(2);
    assert!(
        out.contains(".codex/config.toml") && out.contains("OPENAI_BASE_URL"),
        "{out}"
    );
    assert!(!dir.path().join("a.txt").exists());
}
