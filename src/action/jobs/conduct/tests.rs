use super::*;
use crate::pure::plan::model::Plan;

#[test]
fn polls_stay_under_the_hourly_budget() {
    let poll = Duration::from_secs(30);
    assert_eq!(poll_interval(poll, 1, POLLS_PER_HOUR), poll);
    assert_eq!(
        poll_interval(poll, 8, POLLS_PER_HOUR),
        Duration::from_secs(48)
    );
    for n in 1..=256 {
        let per_hour = 3600 / poll_interval(poll, n, POLLS_PER_HOUR).as_secs() * n as u64;
        assert!(
            per_hour <= POLLS_PER_HOUR,
            "{n} runs: {per_hour} polls an hour"
        );
    }
}

fn read_zip_bytes(bytes: &[u8]) -> Result<crate::action::artifact::Collected, String> {
    read_zip(std::io::Cursor::new(bytes))
}

fn zip_of(entries: &[(&str, &[u8])], link: Option<(&str, &str)>) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in entries {
        w.start_file(*name, o).unwrap();
        w.write_all(data).unwrap();
    }
    if let Some((name, target)) = link {
        w.add_symlink(name, target, o).unwrap();
    }
    w.finish().unwrap().into_inner()
}

use crate::testing::result_json;

#[test]
fn an_artifact_is_read_from_its_zip_without_touching_the_disk() {
    let bytes = zip_of(
        &[
            ("result.json", &result_json(3, 2)),
            ("changes.patch", b"\x00patch"),
            ("worker.log", b"log\n"),
            ("../../evil", b"x"),
        ],
        None,
    );
    let c = read_zip_bytes(&bytes).unwrap();
    assert_eq!((c.result.task, c.result.attempt), (3, 2));
    assert_eq!(c.patch.read_to_vec(), b"\x00patch");
    assert_eq!(c.log.as_deref(), Some("log\n"));
}

#[test]
fn hostile_archives_are_refused_with_the_reason() {
    assert!(
        read_zip_bytes(b"not a zip")
            .unwrap_err()
            .contains("not a zip")
    );
    let none = zip_of(&[("changes.patch", b"")], None);
    assert!(
        read_zip_bytes(&none)
            .unwrap_err()
            .contains("no result.json")
    );
    let linked = zip_of(
        &[("result.json", &result_json(0, 1))],
        Some(("changes.patch", "/etc/passwd")),
    );
    assert!(
        read_zip_bytes(&linked)
            .unwrap_err()
            .contains("changes.patch is not a regular file")
    );
    let junk = zip_of(&[("result.json", b"{\"no\": 1}")], None);
    assert!(
        read_zip_bytes(&junk)
            .unwrap_err()
            .contains("not a dagexec work result")
    );
}

#[test]
fn run_names_say_branch_task_and_attempt() {
    assert_eq!(
        run_name("dagexec/x", 3, 2),
        "dagexec dagexec/x: task 3 attempt 2"
    );
}

#[test]
fn a_follow_up_on_a_task_holds_only_while_it_is_in_progress_at_that_attempt() {
    use crate::action::rounds::FollowUp;
    use crate::pure::plan::model::Status;
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schemaVersion": 2, "goal": "g", "context": {}, "progress": {"completedTasks": []},
        "tasks": [
            {"subject": "zero", "status": "completed"},
            {"subject": "one", "status": "in_progress", "attempts": 2}
        ]
    }))
    .unwrap();
    let f = FollowUp::Rebase {
        task: 1,
        attempt: 2,
        onto: vec![0],
        why: "conflict in a.txt".into(),
    };
    f.record_on(&mut plan);
    assert_eq!(FollowUp::of(&plan, 1, 2), Some(f.clone()));
    // Another attempt's, or another task's, is not it.
    assert_eq!(FollowUp::of(&plan, 1, 3), None);
    assert_eq!(FollowUp::of(&plan, 0, 2), None);
    // A task put back to pending (`/execute retry`, an edit) leaves a record that counts no more.
    plan.tasks[1].status = Status::Pending;
    assert_eq!(FollowUp::of(&plan, 1, 2), None);
}

#[test]
fn a_follow_up_put_back_before_its_run_started_is_dropped_and_its_attempt_interrupted() {
    use crate::action::rounds::FollowUp;
    use crate::pure::plan::fields::{FOLLOW_UP, FOLLOW_UP_CHECKS};
    use crate::pure::plan::model::Status;
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schemaVersion": 2, "goal": "g", "context": {}, "progress": {"completedTasks": [],
            "dagexecAttempts": [{"task": 1, "attempt": 1, "start": "2026-01-01T00:00:00Z",
                "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"}]},
        "tasks": [
            {"subject": "zero", "status": "in_progress", "attempts": 1},
            {"subject": "one", "status": "in_progress", "attempts": 1}
        ]
    }))
    .unwrap();
    for task in [0, 1] {
        FollowUp::recheck(task, 1, b"diff", vec![], false)
            .unwrap()
            .record_on(&mut plan);
    }
    plan.tasks[1]
        .extra
        .insert(FOLLOW_UP_CHECKS.into(), serde_json::json!({}));
    // Task 1 was put back (the budget ran out before its re-check was dispatched).
    plan.tasks[1].status = Status::Pending;
    merging::drop_stale(&mut plan);
    assert!(
        plan.tasks[0].extra.contains_key(FOLLOW_UP),
        "still in progress"
    );
    assert!(!plan.tasks[1].extra.contains_key(FOLLOW_UP));
    assert!(!plan.tasks[1].extra.contains_key(FOLLOW_UP_CHECKS));
    let records = &plan.progress.extra["dagexecAttempts"];
    assert_eq!(records[0]["outcome"], "interrupted", "{records:#}");
}
