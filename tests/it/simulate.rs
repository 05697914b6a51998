//! `dagexec simulate` end to end: a plan carrying a history of attempts, the durations given
//! on the command line, the settings `run` would use, the errors, and the help.

use crate::common;
use crate::common::local::exec;

use std::path::Path;

use common::{dagexec, succeed};
use serde_json::{Value, json};

fn task(subject: &str, deps: &[usize], file: &str) -> Value {
    json!({
        "subject": subject,
        "description": subject,
        "status": "pending",
        "blockedBy": deps,
        "metadata": {"files": {"create": [], "modify": [file]}}
    })
}

/// Task 0 and 2 modify one file; 1 waits for 0. The history: 0 completed in 60 s; 1 failed
/// after 30 s, then completed in 90 s; 2 never ran (it gets the median, 75 s).
fn plan_with_history() -> Value {
    json!({
        "schemaVersion": 2,
        "goal": "predict",
        "progress": {
            "completedTasks": [],
            "surprises": [],
            "decisions": [],
            "dagexecAttempts": [
                {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:01:00Z", "seconds": 60.0, "outcome": "completed"},
                {"task": 1, "attempt": 1, "start": "2026-01-01T00:01:00Z", "end": "2026-01-01T00:01:30Z", "seconds": 30.0, "outcome": "failed", "cost_usd": 0.12},
                {"task": 1, "attempt": 2, "start": "2026-01-01T00:01:30Z", "end": "2026-01-01T00:03:00Z", "seconds": 90.0, "outcome": "completed"}
            ]
        },
        "tasks": [
            task("Add the parser", &[], "src/a.rs"),
            task("Use the parser", &[0], "src/b.rs"),
            task("Tidy the parser's module", &[], "src/a.rs"),
        ]
    })
}

fn write_plan(dir: &Path, plan: &Value) {
    std::fs::create_dir_all(dir.join(".design")).unwrap();
    std::fs::write(
        dir.join(".design/plan.json"),
        serde_json::to_string_pretty(plan).unwrap(),
    )
    .unwrap();
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = succeed(dagexec(dir).arg("simulate").args(args).arg("--json"));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (schedule, where, seconds, jobs) of every prediction.
fn rows(v: &Value) -> Vec<(String, String, f64, u64)> {
    v["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["schedule"].as_str().unwrap().to_string(),
                s["where"].as_str().unwrap().to_string(),
                s["seconds"].as_f64().unwrap(),
                s["jobs"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn predicts_from_the_plans_history() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(dir.path(), &plan_with_history());
    // On Actions 10 s a job; integrations take no time, and the conductor sees a run end at
    // once (no poll wait).
    let actions = [
        "--max-parallel",
        "2",
        "--job-start",
        "10s",
        "--integrate",
        "0",
        "--poll",
        "0",
        "--polls-per-hour",
        "3600000000",
    ];
    let v = json_of(dir.path(), &[&["--jobs", "2"][..], &actions].concat());
    assert_eq!(
        v["durations"]["default"],
        json!({"seconds": 75.0, "source": "median"})
    );
    assert_eq!(v["durations"]["tasks"][1]["attempts"], json!([30.0, 90.0]));
    // Local rounds: round 1 is {0, 2}, sharing a file: 0 (heads a chain) then 2, 60 + 75 s;
    // round 2: 1 fails and is retried at once, 30 + 90 s. 255 s. Waves: {0}, {2}, {1}.
    // Eager: 0, then 1 and 2 at once when 0 lands: 60 + 120 = 180 s.
    // Actions rounds: round 1 {0, 2} in two parts (they share a file): run {0}: 10 + 70 + 10,
    // run {2}: 10 + 85 + 10; round 2 {1}: run {1}: 10 + 40 + 10 (fails), run {1}'s retry:
    // 10 + 100 + 10 = 375 s; 4 runs, 2 × 4 + 4 jobs.
    // Actions eager: the plan job that goes on as the conductor 10, 0 to 80, then 2 to 165
    // and 1 (fails at 120, dispatched again) to 220; 1 + 4 jobs.
    let expected = [
        ("rounds", "local", 255.0, 4),
        ("waves", "local", 255.0, 4),
        ("eager", "local", 180.0, 4),
        ("rounds", "actions", 375.0, 12),
        ("eager", "actions", 220.0, 5),
    ];
    let expected: Vec<(String, String, f64, u64)> = expected
        .iter()
        .map(|&(s, w, t, j)| (s.into(), w.into(), t, j))
        .collect();
    assert_eq!(rows(&v), expected);
    // Bounds: critical path 0 → 1 = 180 s locally; on Actions 70 + 140 = 210 s.
    assert_eq!(v["bounds"]["local"]["seconds"], json!(180.0));
    assert_eq!(v["bounds"]["actions"]["seconds"], json!(210.0));
    assert_eq!(v["schedules"][0]["vsBound"], json!(1.417));
    assert_eq!(v["schedules"][3]["rounds"], json!(4));

    // The table, without charts when the output is not a terminal.
    let out = dagexec(dir.path())
        .args(["simulate", "-j", "2"])
        .args(actions)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(
            "3 tasks; durations: 2 from the plan's history, 1 without history the median, 1m15s.\n"
        ),
        "{text}"
    );
    let row = |cells: &[&str]| {
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == cells)
    };
    assert!(
        row(&["schedule", "where", "wall", "time", "jobs", "×", "bound"]),
        "{text}"
    );
    assert!(row(&["eager", "local", "3m", "4", "1.00"]), "{text}");
    assert!(row(&["rounds", "Actions", "6m15s", "12", "1.79"]), "{text}");
    assert!(!text.contains('█'), "{text}");
    // --gantt draws them anyway, at the width asked.
    let out = exec(
        dir.path(),
        &[
            "simulate", "-j", "2", "--gantt", "--width", "60", "--chart", "local",
        ],
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(text.contains("\neager locally: 3m, 4 jobs"), "{text}");
    assert!(text.contains("\nrounds locally: 4m15s, 4 jobs"), "{text}");
    assert!(text.contains("1 Use the parser"), "{text}");
    assert!(text.contains('▒'), "the failed attempt is drawn: {text}");
    assert!(
        text.lines()
            .filter(|l| l.contains('│'))
            .all(|l| l.chars().count() <= 60),
        "{text}"
    );
}

#[test]
fn given_durations_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(dir.path(), &plan_with_history());
    // --no-history: every task 10 s but task 1 (40 s).
    let v = json_of(
        dir.path(),
        &[
            "--no-history",
            "-d",
            "10s",
            "-d",
            "1=40s",
            "-j",
            "1",
            "--job-start",
            "0",
        ],
    );
    assert_eq!(v["durations"]["sources"]["given"], json!(1));
    assert_eq!(v["durations"]["sources"]["default"], json!(2));
    assert_eq!(v["schedules"][2]["seconds"], json!(60.0));
    // Locally the workers `run` would start: $DAGEXEC_JOBS here.
    let out = dagexec(dir.path())
        .args(["simulate", "--json", "-d", "10s"])
        .env("DAGEXEC_JOBS", "3")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["settings"]["jobs"], json!(3));
    assert_eq!(v["settings"]["maxParallel"], json!(8));
    assert_eq!(v["settings"]["jobStartSeconds"], json!(30.0));
    // The conductor's defaults are the action's: `poll` 10s, `polls-per-hour` 600.
    assert_eq!(v["settings"]["integrateSeconds"], json!(10.0));
    assert_eq!(v["settings"]["pollSeconds"], json!(10.0));
    assert_eq!(v["settings"]["pollsPerHour"], json!(600));
    // --remaining: only what is not completed.
    let mut plan = plan_with_history();
    plan["tasks"][0]["status"] = json!("completed");
    write_plan(dir.path(), &plan);
    let v = json_of(dir.path(), &["--remaining", "-j", "2"]);
    assert_eq!(v["tasks"], json!(2));
    assert_eq!(v["schedules"][2]["seconds"], json!(120.0));
}

#[test]
fn a_completed_run_is_simulated_from_its_archived_plan() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(dir.path(), &plan_with_history());
    std::fs::rename(
        dir.path().join(".design/plan.json"),
        dir.path().join(".design/plan.done.json"),
    )
    .unwrap();
    let out = exec(dir.path(), &["simulate", "--json", "-j", "2"]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert!(
        stderr.contains("simulating the archived plan .design/plan.done.json"),
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["durations"]["sources"]["history"], json!(2));
}

#[test]
fn bad_durations_name_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(dir.path(), &plan_with_history());
    let err = |args: &[&str]| {
        let out = dagexec(dir.path())
            .arg("simulate")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let e = err(&["-d", "7=1m"]);
    assert!(
        e.contains("error: --duration 7=…: the plan has no task 7 (it has 3)"),
        "{e}"
    );
    assert!(
        e.contains("hint: task numbers are plan indices, 0 to 2"),
        "{e}"
    );
    let e = err(&["-d", "1m", "-d", "2m"]);
    assert!(
        e.contains("--duration without a task is given twice"),
        "{e}"
    );
    let e = err(&["-d", "x=1m"]);
    assert!(e.contains("\"x\" is not a task number"), "{e}");
    let e = err(&["-d", "soon"]);
    assert!(e.contains("examples: 30s, 5m, 1h30m"), "{e}");
    let e = err(&["--max-parallel", "0"]);
    assert!(e.contains("must be at least 1"), "{e}");
}

#[test]
fn help_teaches() {
    let dir = tempfile::tempdir().unwrap();
    let out = dagexec(dir.path())
        .args(["simulate", "--help"])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!("help_simulate", String::from_utf8(out.stdout).unwrap());
}
