use super::*;
use crate::pure::plan::model::Status;
use crate::sources::testing::{deps, ids, messages};
use std::path::Path;

const REL: &str = ".taskmaster/tasks/tasks.json";

fn built(text: &str) -> Result<Built, Vec<Problem>> {
    crate::sources::testing::built(&Taskmaster, REL, text)
}

const PLAIN: &str = r#"{
  "tasks": [
    {"id": 1, "title": "Setup", "description": "d1", "details": "x", "testStrategy": "run the tests", "priority": "high", "status": "done", "dependencies": []},
    {"id": 2, "title": "Models", "status": "pending", "dependencies": [1], "subtasks": [
      {"id": 1, "title": "User model", "status": "pending", "dependencies": []},
      {"id": 2, "title": "Post model", "status": "in-progress", "dependencies": [1]},
      {"id": 3, "title": "Indexes", "status": "pending", "dependencies": ["2.1", 2]}
    ]},
    {"id": 3, "title": "API", "status": "pending", "dependencies": ["2"], "testStrategy": "curl it"},
    {"id": 4, "title": "Docs", "status": "pending", "dependencies": ["2.2"]}
  ]
}"#;

#[test]
fn a_subtask_is_the_unit_when_a_task_has_subtasks_and_the_task_otherwise() {
    let b = built(PLAIN).unwrap();
    assert_eq!(ids(&b), ["1", "2.1", "2.2", "2.3", "3", "4"]);
    assert_eq!(b.plan.tasks[0].status, Status::Completed);
    // A subtask waiting for no sibling waits for what its task waits for.
    assert_eq!(deps(&b, "2.1"), ["1"]);
    assert_eq!(deps(&b, "2.2"), ["2.1"]);
    assert_eq!(deps(&b, "2.3"), ["2.1", "2.2"]);
    // A task named waits for all its units; a subtask can be named in full.
    assert_eq!(deps(&b, "3"), ["2.1", "2.2", "2.3"]);
    assert_eq!(deps(&b, "4"), ["2.2"]);
    assert_eq!(b.units[4].at, format!("{REL}: tasks[2]"));
    assert_eq!(b.units[2].at, format!("{REL}: tasks[1].subtasks[1]"));
}

#[test]
fn the_test_strategy_details_and_parent_reach_the_prompt() {
    let b = built(PLAIN).unwrap();
    let d = b.plan.tasks[4].description.clone().unwrap();
    assert!(d.contains("Test strategy:\ncurl it"), "{d}");
    assert!(
        d.contains("Do not edit .taskmaster/tasks/tasks.json"),
        "{d}"
    );
    let d = b.plan.tasks[1].description.clone().unwrap();
    assert!(d.contains("Part of task 2: Models"), "{d}");
    let task = &b.plan.tasks[4];
    let prompt = crate::pure::prompt::original_prompt(&b.plan, 4, crate::pure::prompt::Unit::Batch);
    assert!(prompt.contains("curl it"), "{prompt}");
    // No file is declared: no assumed conflict.
    assert_eq!(task.files().count(), 0);
}

#[test]
fn cancelled_settles_its_dependents_and_deferred_holds_them_back() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "cancelled"},
      {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "deferred"},
      {"id": 4, "title": "d", "status": "pending", "dependencies": [3]},
      {"id": 5, "title": "e", "status": "pending", "dependencies": [4, 2]},
      {"id": 6, "title": "f", "status": "review"},
      {"id": 7, "title": "g", "status": "pending", "dependencies": [6]}
    ]}"#;
    let b = built(text).unwrap();
    // `review` (worked, waiting for a person) holds back as `deferred` does: `task-master
    // next` counts a dependency as met only when it is `done`.
    assert_eq!(ids(&b), ["2"]);
    assert!(
        deps(&b, "2").is_empty(),
        "a cancelled dependency is settled"
    );
    assert_eq!(
        b.warnings,
        [
            format!(
                "{REL}: not run, as the team set them: task 3 (deferred), task 6 (review) (`task-master set-status --id=ID --status=pending` runs one)"
            ),
            format!("{REL}: tasks 4, 5 wait for deferred task 3, so they are not run either"),
            format!("{REL}: tasks[6]: task 7 waits for review task 6, so it is not run either"),
        ]
    );
}

/// A task with a cancelled subtask stays `in-progress` in Taskmaster (`set-status` makes a
/// parent done only when every subtask is), and `task-master next` counts a dependency met
/// only when `done`: what waits for that task — by its ID, from a task or a subtask — is
/// not run, nor what waits for it, each named with the command that lets it run. Its open
/// subtasks still run, and a dependency on one of them (not on the task) is met as usual.
#[test]
fn what_waits_for_a_task_kept_open_by_a_cancelled_subtask_is_held_back() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "in-progress", "subtasks": [
        {"id": 1, "title": "x", "status": "done"}, {"id": 2, "title": "y", "status": "cancelled"},
        {"id": 3, "title": "z", "status": "pending"}]},
      {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "pending", "dependencies": [2]},
      {"id": 4, "title": "d", "status": "pending", "dependencies": ["1.3"]},
      {"id": 5, "title": "e", "status": "pending", "subtasks": [
        {"id": 2, "title": "v", "status": "pending", "dependencies": [1]}]},
      {"id": 6, "title": "f", "status": "done", "subtasks": [
        {"id": 1, "title": "u", "status": "cancelled"}]},
      {"id": 7, "title": "g", "status": "pending", "dependencies": [6]}
    ]}"#;
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["1.1", "1.3", "4", "6.1", "7"]);
    let why = "task 1, which stays open while its subtask 1.2 is cancelled (Taskmaster counts a dependency met only when done: `task-master set-status --id=1 --status=done` lets it run), so they are not run either";
    assert_eq!(
        b.warnings,
        [format!("{REL}: tasks 2, 3, 5.2 wait for {why}")]
    );
}

/// `blocked` is the team's word for "cannot go on now" (`task-master next` never offers a
/// blocked task, nor one waiting for it): dagexec does not run it, nor what waits for it, as
/// for `deferred`, and the warning says which word held them.
#[test]
fn blocked_holds_a_task_and_its_dependents_back_as_the_team_set_it() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "blocked"},
      {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "pending", "subtasks": [
        {"id": 1, "title": "x", "status": "Blocked"}, {"id": 2, "title": "y", "status": "pending"}]}
    ]}"#;
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["3.2"]);
    // `Blocked` is not Taskmaster's word (it compares them exactly): held, and named. The
    // task set aside is named first: a run of what is left would otherwise end saying every
    // task is resolved.
    assert_eq!(
        b.warnings,
        [
            format!(
                "{REL}: not run, as the team set them: task 1 (blocked) (`task-master set-status --id=ID --status=pending` runs one)"
            ),
            format!("{REL}: tasks[1]: task 2 waits for blocked task 1, so it is not run either"),
            format!(
                "{REL}: tasks[2].subtasks[0]: task 3.1 has the status \"Blocked\", which Taskmaster does not know (it compares status words exactly: `task-master next` offers neither it nor what waits for it), so neither is run: `task-master set-status --id=3.1 --status=blocked` sets the word you meant"
            )
        ]
    );
}

#[test]
fn a_parents_status_holds_for_its_subtasks() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "done", "subtasks": [{"id": 1, "title": "x", "status": "pending"}]},
      {"id": 2, "title": "b", "status": "cancelled", "subtasks": [{"id": 1, "title": "y", "status": "pending"}]},
      {"id": 3, "title": "c", "status": "pending", "dependencies": [2], "subtasks": [{"id": 1, "title": "z", "status": "done"}, {"id": 2, "title": "w"}]}
    ]}"#;
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["1.1", "3.1", "3.2"]);
    assert_eq!(b.plan.tasks[0].status, Status::Completed);
    assert_eq!(b.plan.tasks[1].status, Status::Completed);
    assert_eq!(b.plan.tasks[2].status, Status::Pending);
}

#[test]
fn the_tagged_form_reads_master_or_the_only_tag() {
    let b = built(r#"{"feature": {"tasks": [{"id": 1, "title": "f"}]}, "master": {"tasks": [{"id": "7", "title": "m"}]}}"#).unwrap();
    assert_eq!(ids(&b), ["7"]);
    assert_eq!(b.units[0].at, format!("{REL}: master.tasks[0]"));
    assert_eq!(b.meta, serde_json::json!({"tag": "master"}));
    let b = built(r#"{"feature": {"tasks": [{"id": 1, "title": "f"}]}}"#).unwrap();
    assert_eq!(b.meta, serde_json::json!({"tag": "feature"}));
    let e = built(r#"{"a": {"tasks": []}, "b": {"tasks": []}}"#).unwrap_err();
    assert!(
        messages(&e).contains("several tags and none is `master`"),
        "{}",
        messages(&e)
    );
}

#[test]
fn errors_name_the_json_path_and_the_task() {
    let text = r#"{"master": {"tasks": [
      {"id": 1, "title": "a", "dependencies": [9]},
      {"id": 1, "title": "b"},
      {"id": 2, "title": "c", "dependencies": [2]},
      {"id": 3, "title": "d", "subtasks": [{"id": 1, "title": "s", "dependencies": ["4.1"]}, {"id": 1, "title": "t"}]}
    ]}}"#;
    let e = messages(&built(text).unwrap_err());
    assert_eq!(
        e,
        format!(
            "{REL}: master.tasks[1]: task ID 1 is used twice\n\
             {REL}: master.tasks[3].subtasks[1]: subtask ID 3.1 is used twice\n\
             {REL}: master.tasks[0].dependencies[0]: task 1 depends on 9, which is not a task in this file\n\
             {REL}: master.tasks[2].dependencies[0]: task 2 depends on itself\n\
             {REL}: master.tasks[3].subtasks[0].dependencies[0]: task 3.1 depends on 4.1, which is not a task in this file"
        )
    );
    let e = messages(&built("{\"tasks\": [\n  {\"id\": 1,}\n]}").unwrap_err());
    assert!(e.starts_with(&format!("{REL}:2:")), "{e}");
    assert!(e.contains("malformed JSON"), "{e}");
}

#[test]
fn real_files_read() {
    for (file, units, open) in [
        ("tajdin-tagged.json", 96, 0),
        // Task 17 is in progress with every subtask done: it stays open to Taskmaster, so
        // 18, 19.1–19.4 and 20, which wait for it, are held back.
        ("resourcer-tagged.json", 48, 12),
        ("scrumpoker-plain.json", 36, 1),
        // Task 11 is done and its six subtasks all have the ID 11: Taskmaster reads the file
        // (`validate-dependencies` finds it valid), and a task's status settles its subtasks,
        // which are then never run, written or told apart (under an open task the IDs are
        // ambiguous, and refused: `set-status --id=11.11` sets the first).
        ("ecommerce-duplicate-subtask-ids.json", 14, 7),
    ] {
        let text = fixture(file);
        let b = built(&text).unwrap_or_else(|e| panic!("{file}: {}", messages(&e)));
        let pending = b
            .plan
            .tasks
            .iter()
            .filter(|t| t.status == Status::Pending)
            .count();
        assert_eq!((b.units.len(), pending), (units, open), "{file}");
    }
}

/// `text` written back with the tasks `done` marked done, in the tag `tag` (`None`: the
/// file's only list).
fn written(text: &str, done: &[&str], tag: Option<&str>) -> String {
    let done: BTreeSet<String> = done.iter().map(ToString::to_string).collect();
    Taskmaster
        .write_back(text, &done, &serde_json::json!({ "tag": tag }))
        .unwrap()
}

#[test]
fn write_back_changes_only_the_status_bytes() {
    let out = written(PLAIN, &["2.1", "2.2", "3"], None);
    let expected = PLAIN
        .replace(
            r#"{"id": 1, "title": "User model", "status": "pending""#,
            r#"{"id": 1, "title": "User model", "status": "done""#,
        )
        .replace(
            r#"{"id": 2, "title": "Post model", "status": "in-progress""#,
            r#"{"id": 2, "title": "Post model", "status": "done""#,
        )
        .replace(
            r#"{"id": 3, "title": "API", "status": "pending""#,
            r#"{"id": 3, "title": "API", "status": "done""#,
        );
    assert_eq!(out, expected);
    // The last subtask done: its task is done too.
    let out = written(PLAIN, &["2.1", "2.2", "2.3"], None);
    assert!(
        out.contains(r#"{"id": 2, "title": "Models", "status": "done""#),
        "{out}"
    );
    // A task without a status gets one; the tagged form keeps its other tags.
    let tagged = "{\n  \"other\": {\"tasks\": [{\"id\": 1, \"status\": \"pending\"}]},\n  \"master\": {\"tasks\": [{\"id\": 1, \"title\": \"é\", \"extra\": {\"k\": [1, 2.50]}}]}\n}\n";
    let out = written(tagged, &["1"], Some("master"));
    assert_eq!(
        out,
        tagged.replace(
            "{\"id\": 1, \"title\": \"é\"",
            "{\"status\": \"done\", \"id\": 1, \"title\": \"é\""
        )
    );
    assert!(
        Taskmaster
            .write_back(
                "{\"tasks\": [",
                &["1".to_string()].into(),
                &serde_json::Value::Null
            )
            .is_err()
    );
}

#[test]
fn write_back_of_a_real_file_is_byte_exact_elsewhere() {
    let text = fixture("resourcer-tagged.json");
    let out = written(&text, &["9.1", "10"], Some("master"));
    let before: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut after: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(after["master"]["tasks"][8]["subtasks"][0]["status"], "done");
    assert_eq!(after["master"]["tasks"][9]["status"], "done");
    // Task 17 is in progress with all its subtasks done, none marked now: it stays as the
    // team left it (`set-status` settles a parent only when it sets one of its subtasks).
    assert_eq!(after["master"]["tasks"][16]["status"], "in-progress");
    after["master"]["tasks"][8]["subtasks"][0]["status"] = "pending".into();
    after["master"]["tasks"][9]["status"] = "pending".into();
    assert_eq!(after, before);
    // Two values changed: two "pending" (9 bytes) to "done" (6).
    assert_eq!(text.len() - out.len(), 3 + 3);
}

/// The text of `tests/fixtures/taskmaster/NAME`.
fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/taskmaster")
            .join(name),
    )
    .unwrap()
}

/// A team set tasks done and left their subtasks `pending` (oraclepack's current tag): the
/// subtasks are done to the run, as their task settles them, but they are not dagexec's to
/// mark — `task-master list` still shows them pending, and a run that did nothing rewrote
/// every one of them.
#[test]
fn write_back_leaves_the_subtasks_of_a_task_the_team_set_done_as_written() {
    let text = fixture("oraclepack-done-parents.json");
    let b = built(&text).unwrap();
    assert_eq!(ids(&b), ["1.1", "1.2", "1.3", "2.1", "2.2"]);
    assert!(b.plan.tasks.iter().all(|t| t.status == Status::Completed));
    assert_eq!(written(&text, &ids(&b), Some("chore-overview")), text);
}

/// What waits for one task is named in one warning, not one line each: a public list's task 5
/// (left `pending` with every subtask done: github.com/AdrienCornille/NutriSensia) held back 78
/// subtasks in 78 lines, printed by `validate`, the dry run and the run. Resourcer's task 17
/// holds back six.
#[test]
fn what_waits_for_one_task_is_named_in_one_warning() {
    let b = built(&fixture("resourcer-tagged.json")).unwrap();
    assert_eq!(
        b.warnings,
        [format!(
            "{REL}: tasks 18, 19.1, 19.2, 19.3, 19.4, 20 wait for task 17, which stays open though every subtask of it is done (Taskmaster counts a dependency met only when done: `task-master set-status --id=17 --status=done` lets it run), so they are not run either"
        )]
    );
    let many: Vec<String> = (2..=13)
        .map(|i| format!(r#"{{"id": {i}, "title": "t", "dependencies": [1]}}"#))
        .collect();
    let text = format!(
        r#"{{"tasks": [{{"id": 1, "title": "a", "status": "deferred"}}, {}, {{"id": 14, "title": "free"}}]}}"#,
        many.join(", ")
    );
    assert_eq!(
        built(&text).unwrap().warnings[1],
        format!(
            "{REL}: tasks 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, and 2 more wait for deferred task 1, so they are not run either"
        )
    );
}

/// A title that begins with its own ID (Aesdetic/Aesdetic-Control's "13.8 mDNS Discovery
/// Parity") is not named twice: the dry run listed "13.8 13.8 mDNS Discovery Parity".
#[test]
fn a_title_that_begins_with_its_id_is_not_named_twice() {
    let b = built(
        r#"{"tasks": [{"id": 13, "title": "UI", "subtasks": [
      {"id": 8, "title": "13.8 mDNS Discovery Parity"}, {"id": 9, "title": "13.80 cache"}]}]}"#,
    )
    .unwrap();
    let subjects: Vec<&str> = b.plan.tasks.iter().map(|t| t.subject.as_str()).collect();
    assert_eq!(subjects, ["13.8 mDNS Discovery Parity", "13.9 13.80 cache"]);
}

#[test]
fn a_task_id_that_is_also_a_subtask_id_is_a_duplicate() {
    let e = built(r#"{"tasks": [{"id": 1, "title": "a", "subtasks": [{"id": 2, "title": "s"}]}, {"id": "1.2", "title": "b"}]}"#)
        .unwrap_err();
    assert_eq!(
        messages(&e),
        format!("{REL}: tasks[1]: task ID 1.2 is used twice")
    );
}

#[test]
fn a_status_written_twice_is_written_where_json_readers_read_it() {
    let text =
        r#"{"tasks": [{"id": 1, "status": "pending", "title": "a", "status": "in-progress"}]}"#;
    let b = built(text).unwrap();
    assert_eq!(b.units[0].mark, "in-progress");
    let out = written(text, &["1"], None);
    assert_eq!(
        out,
        r#"{"tasks": [{"id": 1, "status": "pending", "title": "a", "status": "done"}]}"#
    );
    let read: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(read["tasks"][0]["status"], "done");
}

#[test]
fn write_back_keeps_a_status_the_team_set_that_is_already_finished() {
    // `review` is held (never run), a parent `review`, `cancelled` or `deferred` settles
    // its subtasks: dagexec did none of them, so none becomes "done".
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "review"},
      {"id": 2, "title": "b", "status": "cancelled", "subtasks": [{"id": 1, "title": "x", "status": "done"}]},
      {"id": 3, "title": "c", "status": "deferred", "subtasks": [{"id": 1, "title": "y", "status": "cancelled"}]},
      {"id": 4, "title": "d", "status": "review", "subtasks": [{"id": 1, "title": "z", "status": "done"}]},
      {"id": 5, "title": "e", "status": "pending"}
    ]}"#;
    let b = built(text).unwrap();
    let done: Vec<&str> = (b.plan.tasks.iter().zip(&b.units))
        .filter(|(t, _)| t.status == Status::Completed)
        .map(|(_, u)| u.id.as_str())
        .collect();
    assert!(done.is_empty(), "{done:?}");
    assert_eq!(
        written(text, &["1", "4.1", "5"], None),
        text.replace(
            r#""title": "e", "status": "pending""#,
            r#""title": "e", "status": "done""#,
        )
    );
    // A parent is done when every subtask is (`done`, `completed`, compared exactly), as
    // `task-master set-status` settles it: one in review, cancelled, or `Done` (a word
    // Taskmaster does not know) keeps it `in-progress`.
    let last_done = |text: &str| {
        text.replace(
            r#""title": "w", "status": "pending""#,
            r#""title": "w", "status": "done""#,
        )
    };
    let text = r#"{"tasks": [{"id": 1, "title": "a", "status": "in-progress", "subtasks": [
      {"id": 1, "title": "x", "status": "done"}, {"id": 2, "title": "y", "status": "completed"},
      {"id": 4, "title": "w", "status": "pending"}]}]}"#;
    assert_eq!(
        written(text, &["1.4"], None),
        last_done(text).replace(r#""status": "in-progress""#, r#""status": "done""#)
    );
    for other in ["review", "canceled", "Done", "Completed"] {
        let text = text.replace("completed", other);
        assert_eq!(written(&text, &["1.4"], None), last_done(&text), "{other}");
    }
    // A status word Taskmaster does not know is the team's to change: a parent `Pending`
    // whose subtasks are done stays as written.
    let text = r#"{"tasks": [{"id": 1, "title": "a", "status": "Pending", "subtasks": [
      {"id": 1, "title": "x", "status": "done"}]}, {"id": 2, "title": "w", "status": "pending"}]}"#;
    assert_eq!(written(text, &["2"], None), last_done(text));
}

/// Whether a `tasks.json` outside `.taskmaster/` is a dagexec plan is read from its first
/// bytes only: a FIFO there (no writer ever comes) or a link to an endless device is
/// Taskmaster's without waiting or filling memory (reading it then refuses it), and a plan
/// whose `schemaVersion` comes first stays a plan however long it is.
#[test]
fn a_fifo_or_an_endless_file_named_tasks_json_is_claimed_without_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("a/tasks.json");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let zero = dir.path().join("b/tasks.json");
    std::fs::create_dir_all(zero.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let found = [fifo, zero].map(|p| crate::sources::Format::detect(&p));
        tx.send(found).unwrap();
    });
    let found = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("detected without waiting for a writer or reading an endless file");
    assert_eq!(found, [Some(crate::sources::Format::Taskmaster); 2]);
}

/// Taskmaster compares status words exactly. A task's must be one of its seven (`task-master
/// list` and `next` refuse the whole file otherwise: "Invalid task status: Done"); a subtask's
/// is offered by `next` when it is `pending` or `in-progress` in any case (or missing), and is
/// met only when it is `done` (`completed` settles its parent, below). A word Taskmaster does
/// not know is neither run nor done here:
/// it is held back with what waits for it, named with the command that sets the word it means.
#[test]
fn status_words_are_compared_as_taskmaster_compares_them() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "Done"},
      {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "todo"},
      {"id": 4, "title": "d", "status": "completed"},
      {"id": 5, "title": "e", "status": "in-progress", "subtasks": [
        {"id": 1, "title": "v", "status": "DONE"},
        {"id": 2, "title": "w", "status": "Pending", "dependencies": [1]},
        {"id": 3, "title": "x", "status": "In-Progress"},
        {"id": 4, "title": "y"},
        {"id": 5, "title": "z", "status": "canceled"}]}
    ]}"#;
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["5.3", "5.4"]);
    assert!(b.plan.tasks.iter().all(|t| t.status == Status::Pending));
    let unknown = |path: &str, id: &str, word: &str, meant: &str| {
        format!(
            "{REL}: {path}: task {id} has the status \"{word}\", which Taskmaster does not know (it compares status words exactly: `task-master next` offers neither it nor what waits for it), so neither is run: `task-master set-status --id={id} --status={meant}` sets the word you meant"
        )
    };
    let unknown_1 = "task 1, whose status \"Done\" Taskmaster does not know";
    let unknown_5_1 = "task 5.1, whose status \"DONE\" Taskmaster does not know";
    assert_eq!(
        b.warnings,
        [
            unknown("tasks[0]", "1", "Done", "done"),
            format!("{REL}: tasks[1]: task 2 waits for {unknown_1}, so it is not run either"),
            unknown("tasks[2]", "3", "todo", "pending"),
            unknown("tasks[3]", "4", "completed", "done"),
            unknown("tasks[4].subtasks[0]", "5.1", "DONE", "done"),
            format!(
                "{REL}: tasks[4].subtasks[1]: task 5.2 waits for {unknown_5_1}, so it is not run either"
            ),
            unknown("tasks[4].subtasks[4]", "5.5", "canceled", "cancelled"),
        ]
    );
}

/// `task-master set-status` settles a parent when it sets a subtask's status, never by
/// itself: a task the team left (or set) open whose subtasks are all done stays open to
/// Taskmaster — `next` offers it whole, and counts it met only once someone sets it done —
/// so what waits for it is held back, named with that command, and a write-back that marks
/// none of its subtasks leaves its status as the team wrote it.
#[test]
fn a_task_left_open_with_every_subtask_done_stays_open() {
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "pending", "subtasks": [
        {"id": 1, "title": "x", "status": "done"}, {"id": 2, "title": "y", "status": "done"}]},
      {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "pending"}
    ]}"#;
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["1.1", "1.2", "3"]);
    assert_eq!(
        b.warnings,
        [format!(
            "{REL}: tasks[1]: task 2 waits for task 1, which stays open though every subtask of it is done (Taskmaster counts a dependency met only when done: `task-master set-status --id=1 --status=done` lets it run), so it is not run either"
        )]
    );
    assert_eq!(
        written(text, &["1.1", "1.2", "3"], None),
        last_of(text, "c")
    );
    // Marking its last open subtask done settles it, as `set-status` does.
    let text = text.replace(
        r#""title": "y", "status": "done""#,
        r#""title": "y", "status": "pending""#,
    );
    let want = text
        .replace(
            r#""title": "y", "status": "pending""#,
            r#""title": "y", "status": "done""#,
        )
        .replace(
            r#""title": "a", "status": "pending""#,
            r#""title": "a", "status": "done""#,
        );
    assert_eq!(written(&text, &["1.1", "1.2"], None), want);
}

/// `text` with the task titled `title` (`"status": "pending"`) marked done.
fn last_of(text: &str, title: &str) -> String {
    text.replace(
        &format!(r#""title": "{title}", "status": "pending""#),
        &format!(r#""title": "{title}", "status": "done""#),
    )
}
