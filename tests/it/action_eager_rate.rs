//! One back-off for all workers on the Action (issue 35, item 5), against the eager
//! conductor job by job (the harness of [`crate::action_eager`]): a provider's 429 with a
//! `retry-after`, seen by a task run's model gateway, reaches the conductor in the attempt's
//! record and holds the next run of a task on that provider until then, while a task on
//! another provider starts at once; a forged far-future held-until holds for a few minutes
//! at most, and the status comment says what is held.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::action_eager::Lab;
use crate::common::lab::task;
use crate::common::model_server::{CURL_MESSAGES, Fault, ModelServer};

/// Task 0 asks Anthropic once (through the job's gateway); every task logs when it started
/// and writes its file.
fn worker() -> String {
    format!(
        r#"#!/bin/sh
cat > /dev/null
echo "start $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
if [ "$DAGEXEC_TASK_INDEX" = 0 ]; then {CURL_MESSAGES} > answer.txt; fi
echo "end $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"
echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#
    )
}

/// 0 (Claude) first; then 1 (Claude) and 2 (Gemini), each after 0: the worker is a script,
/// so each task's provider is its model's.
fn tasks() -> Vec<Value> {
    let mut t = vec![
        task("limited", &["t0.txt", "answer.txt"], &[]),
        task("claude after", &["t1.txt"], &[0]),
        task("gemini after", &["t2.txt"], &[0]),
    ];
    for (i, model) in ["claude-sonnet-4-5", "claude-sonnet-4-5", "gemini-2.5-pro"]
        .iter()
        .enumerate()
    {
        t[i]["agent"] = json!({"role": "dev", "model": model});
    }
    t
}

fn lab(server: &ModelServer) -> Arc<Lab> {
    let url = server.url();
    let env = [
        ("ANTHROPIC_BASE_URL", url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-secret-1"),
        ("GEMINI_API_KEY", "gm-secret-3"),
    ];
    Arc::new(Lab::with_env(tasks(), &worker(), &[], &env))
}

/// The tasks in the order their runs were dispatched.
fn dispatched(lab: &Lab) -> Vec<String> {
    lab.gh
        .state()
        .dispatches
        .iter()
        .filter_map(|d| d.inputs["task"].as_str().map(String::from))
        .filter(|t| !t.is_empty())
        .collect()
}

#[test]
fn a_429_seen_by_one_task_run_holds_the_next_run_on_that_provider_while_another_provider_goes_on() {
    let server = ModelServer::start();
    server.set_fault(Some(Fault::RateLimitFor(Duration::from_secs(8))));
    let lab = lab(&server);
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(180));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
    }
    // Task 0's record says what its gateway saw: one 429, held until its retry-after.
    let records = plan["progress"]["dagexecAttempts"].as_array().unwrap();
    let first = records.iter().find(|r| r["task"] == 0).unwrap();
    let limits = first["rateLimits"].as_array().expect("rateLimits recorded");
    assert_eq!(limits.len(), 1, "{first:#}");
    assert_eq!(limits[0]["provider"], "anthropic", "{first:#}");
    assert_eq!(limits[0]["answers"], 1, "{first:#}");
    let until: jiff::Timestamp = limits[0]["heldUntil"].as_str().unwrap().parse().unwrap();
    // Gemini's task ran at once; Claude's waited for the hold (the lower index, it would
    // otherwise have been dispatched first), its worker starting after it ended.
    assert_eq!(dispatched(&lab), ["0", "2", "1"], "{log}");
    let times = lab.times();
    let started = |task: u64| times[&(task, 1)].0;
    assert!(
        started(1) >= until.as_second() as f64,
        "task 1 started at {} before the hold ended at {until}\n{log}",
        started(1)
    );
    assert!(
        log.contains("Rate limits: holding 1 task: anthropic rate-limited until "),
        "{log}"
    );
    // The job summary says it too, and when the hold ended.
    let summary = std::fs::read_to_string(lab.tmp.path().join("summary-1.md")).unwrap_or_default();
    let section = summary
        .split("### Rate limits")
        .nth(1)
        .unwrap_or_else(|| panic!("no rate limits in the summary:\n{summary}"));
    assert!(
        section.contains("holding 1 task: anthropic rate-limited until ")
            && section.contains("no task is held any more"),
        "{summary}"
    );
}

#[test]
fn a_forged_far_future_held_until_holds_the_provider_a_few_minutes_at_most() {
    let server = ModelServer::start();
    let lab = lab(&server);
    // Task code forged its job's result: Anthropic held until the year 9999.
    *lab.tamper.lock().unwrap() = Some(|r: &mut Value| {
        if r["task"] == 0 {
            r["rateLimits"] = json!([
                {"provider": "anthropic", "answers": 1, "heldUntil": "9999-01-01T00:00:00Z"},
                {"provider": "acme", "answers": 7}
            ]);
        }
    });
    let begun = jiff::Timestamp::now();
    let conductor = lab.conductor(1, &[]);
    let mut threads = Vec::new();
    let line = "anthropic rate-limited until ";
    let mut conductor = conductor;
    let t0 = std::time::Instant::now();
    let log = loop {
        threads.extend(lab.run_dispatched());
        let log = lab.conduct_log(1);
        // Held, Gemini's task dispatched all the same, and the status comment says so.
        let status = lab.gh.state().comments.iter().any(|c| {
            c.body.starts_with("<!-- dagexec:status -->")
                && c.body
                    .contains("; holding 1 task: anthropic rate-limited until ")
        });
        if log.contains(line) && dispatched(&lab).contains(&"2".to_string()) && status {
            break log;
        }
        assert!(
            conductor.try_wait().unwrap().is_none(),
            "the conductor ended without holding task 1:\n{log}"
        );
        assert!(t0.elapsed() < Duration::from_secs(120), "{log}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = jiff::Timestamp::now();
    let _ = conductor.kill();
    let _ = conductor.wait();
    for t in threads {
        t.join().unwrap();
    }
    // The hold shown ends at most MAX_HOLD (5 minutes) after the arrival, which came
    // between the start and the reading of the log: one of those instants, to the second.
    let shown = log
        .split(line)
        .nth(1)
        .unwrap()
        .get(..9)
        .unwrap()
        .to_string();
    let window = (begun.as_second()..=read.as_second() + 300).map(|s| {
        jiff::Timestamp::from_second(s)
            .unwrap()
            .strftime("%H:%M:%SZ")
            .to_string()
    });
    assert!(
        window.into_iter().any(|w| w == shown),
        "held until {shown}, not within 5 minutes of the arrival\n{log}"
    );
    assert_eq!(dispatched(&lab), ["0", "2"], "{log}");
}
