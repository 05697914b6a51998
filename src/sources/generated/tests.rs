use super::super::{Format, describe, prepare as prepare_any};
use super::*;
use crate::sources::testing::repo;

const TM: &str = ".taskmaster/tasks/tasks.json";

fn prepare(dir: &tempfile::TempDir, write: bool) -> Result<Prepared, String> {
    prepare_any(Format::Taskmaster, dir.path(), &dir.path().join(TM), write)
        .map_err(|e| describe(&e).0)
}

#[test]
fn formats_are_detected_by_name_and_place() {
    let d = |p: &str| Format::detect(Path::new(p));
    assert_eq!(d("specs/001-x/tasks.md"), Some(Format::SpecKit));
    assert_eq!(d(".kiro/specs/auth/tasks.md"), Some(Format::Kiro));
    assert_eq!(d("/abs/repo/.kiro/specs/auth/tasks.md"), Some(Format::Kiro));
    assert_eq!(d(".taskmaster/tasks/tasks.json"), Some(Format::Taskmaster));
    assert_eq!(d(".design/plan.json"), None);
    assert_eq!(d("plan"), None);
    // A dagexec plan named tasks.json stays a plan.
    let dir = repo(&[(
        "tasks.json",
        r#"{"schemaVersion": 2, "goal": "g", "tasks": []}"#,
    )]);
    assert_eq!(Format::detect(&dir.path().join("tasks.json")), None);
    let dir = repo(&[(".kiro/specs/a/tasks.md", "- [ ] 1. A\n")]);
    let inside = dir.path().join(".kiro/specs/a/./tasks.md");
    assert_eq!(Format::detect(&inside), Some(Format::Kiro));
    let dir = repo(&[("tasks.json", r#"{"tasks": []}"#)]);
    assert_eq!(
        Format::detect(&dir.path().join("tasks.json")),
        Some(Format::Taskmaster)
    );
}

#[test]
fn a_cycle_is_named_at_its_json_path_as_a_path_of_ids() {
    let dir = repo(&[(
        TM,
        r#"{"tasks": [{"id": 1, "title": "a", "dependencies": [3]}, {"id": 2, "title": "b", "dependencies": [1]}, {"id": 3, "title": "c", "dependencies": [2]}]}"#,
    )]);
    let e = prepare(&dir, false).unwrap_err();
    assert_eq!(
        e,
        format!("{TM}: tasks[0]: the tasks wait for each other in a cycle: 1 → 3 → 2 → 1")
    );
}

#[test]
fn a_huge_file_is_refused_before_it_is_read() {
    let dir = repo(&[(TM, "")]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(TM))
        .unwrap();
    f.set_len(MAX_BYTES + 1).unwrap();
    let e = prepare(&dir, false).unwrap_err();
    assert!(e.contains("more than the 64 MiB"), "{e}");
}

#[test]
fn a_file_outside_the_repository_is_refused() {
    let outside = repo(&[("tasks.json", r#"{"tasks": []}"#)]);
    let dir = repo(&[]);
    std::fs::create_dir_all(dir.path().join(".taskmaster/tasks")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("tasks.json"), dir.path().join(TM)).unwrap();
    let e = prepare(&dir, false).unwrap_err();
    assert!(e.contains("is outside the repository"), "{e}");
}

#[test]
fn the_generated_plan_goes_next_to_the_file_and_keeps_its_state() {
    let dir = repo(&[(
        TM,
        r#"{"tasks": [{"id": 1, "title": "a", "status": "done"}, {"id": 2, "title": "b", "dependencies": [1]}]}"#,
    )]);
    let p = prepare(&dir, true).unwrap();
    assert_eq!(p.plan_rel, ".taskmaster/tasks/.dagexec/plan.json");
    assert!(p.scratch.is_none());
    let mut plan = crate::edge::plan_file::load(&p.plan).unwrap();
    assert_eq!(crate::sources::source_of(&plan), Some(TM));
    assert_eq!(crate::sources::own_file(&plan).as_deref(), Some(TM));
    assert_eq!(
        crate::sources::generated_dir_of(&plan).as_deref(),
        Some(".taskmaster/tasks/.dagexec")
    );
    assert_eq!(plan.progress.completed_tasks.len(), 1);
    plan.tasks[1].attempts = Some(2);
    crate::edge::plan_file::save(&plan, &p.plan).unwrap();
    let again = crate::edge::plan_file::load(&prepare(&dir, true).unwrap().plan).unwrap();
    assert_eq!(again.tasks[1].attempts, Some(2));
    // Not written: a temporary directory.
    let p = prepare(&dir, false).unwrap();
    assert!(p.scratch.is_some());
}

#[test]
fn the_current_tag_of_state_json_is_read() {
    let dir = repo(&[
        (
            TM,
            r#"{"master": {"tasks": [{"id": 1, "title": "m"}]}, "feature-x": {"tasks": [{"id": 7, "title": "x"}]}}"#,
        ),
        (".taskmaster/state.json", r#"{"currentTag": "feature-x"}"#),
    ]);
    let plan = crate::edge::plan_file::load(&prepare(&dir, false).unwrap().plan).unwrap();
    assert_eq!(plan.tasks.len(), 1);
    assert_eq!(plan.tasks[0].subject, "7 x");
    assert!(plan.goal.contains("(tag feature-x)"), "{}", plan.goal);
    // A current tag the file lacks: master.
    std::fs::write(
        dir.path().join(".taskmaster/state.json"),
        r#"{"currentTag": "gone"}"#,
    )
    .unwrap();
    let plan = crate::edge::plan_file::load(&prepare(&dir, false).unwrap().plan).unwrap();
    assert_eq!(plan.tasks[0].subject, "1 m");
}

#[test]
fn a_task_naming_the_task_list_itself_is_refused_at_its_line() {
    let rel = ".kiro/specs/a/tasks.md";
    let dir = repo(&[(
        rel,
        "- [ ] 1. Tick myself\n  - _Boundary: .kiro/specs/a/tasks.md_\n",
    )]);
    let e = prepare_any(Format::Kiro, dir.path(), &dir.path().join(rel), false)
        .map(|_| ())
        .map_err(|e| describe(&e).0)
        .unwrap_err();
    assert_eq!(
        e,
        format!(
            "{rel}:1: task 1 names the file \"{rel}\", which is the task list only dagexec writes"
        )
    );
}

/// The plan `prepare` writes next to the file, loaded.
fn prepared(dir: &tempfile::TempDir, format: Format, rel: &str) -> crate::pure::plan::model::Plan {
    let p = prepare_any(format, dir.path(), &dir.path().join(rel), true)
        .unwrap_or_else(|e| panic!("{}", describe(&e).0));
    crate::edge::plan_file::load(&p.plan).unwrap()
}

/// The earlier run's state, as a run leaves it: `edit` applied to the generated plan.
fn remember(
    dir: &tempfile::TempDir,
    rel: &str,
    edit: impl FnOnce(&mut crate::pure::plan::model::Plan),
) {
    let path = dir
        .path()
        .join(join(&join(dir_of(rel), GENERATED_DIR), "plan.json"));
    let mut plan = crate::edge::plan_file::load(&path).unwrap();
    edit(&mut plan);
    crate::edge::plan_file::save(&plan, &path).unwrap();
}

fn statuses(plan: &crate::pure::plan::model::Plan) -> Vec<(String, Status, u32)> {
    plan.tasks
        .iter()
        .map(|t| (t.subject.clone(), t.status, t.attempts()))
        .collect()
}

const TM_ABC: &str = r#"{"master": {"tasks": [
  {"id": 1, "title": "a", "status": "done", "dependencies": []},
  {"id": 2, "title": "b", "status": "pending", "dependencies": [1]},
  {"id": 3, "title": "c", "status": "pending", "dependencies": [2]}
]}}"#;

/// Task 2 failed every attempt and 3 was skipped; the earlier run's plan says so.
fn failed_run(dir: &tempfile::TempDir) {
    prepared(dir, Format::Taskmaster, TM);
    remember(dir, TM, |plan| {
        plan.tasks[1].status = Status::Failed;
        plan.tasks[1].attempts = Some(3);
        plan.tasks[1].result = Some("cannot".into());
        plan.tasks[2].status = Status::Skipped;
        plan.tasks[2].result = Some("Skipped: dependency task 1 (2 b) failed".into());
    });
}

/// The team's edit of the task list: task 2 (`b`) as `b` has it instead of pending; the plan
/// prepared again.
fn team_edits_b(dir: &tempfile::TempDir, b: &str) -> crate::pure::plan::model::Plan {
    std::fs::write(
        dir.path().join(TM),
        TM_ABC.replace(r#""title": "b", "status": "pending""#, b),
    )
    .unwrap();
    prepared(dir, Format::Taskmaster, TM)
}

#[test]
fn a_failed_task_the_team_cancels_frees_what_waited_for_it() {
    let dir = repo(&[(TM, TM_ABC)]);
    failed_run(&dir);
    // Nothing changed in the file: the earlier run's state holds.
    let plan = prepared(&dir, Format::Taskmaster, TM);
    assert_eq!(plan.tasks[1].status, Status::Failed);
    assert_eq!(plan.tasks[2].status, Status::Skipped);
    let plan = team_edits_b(&dir, r#""title": "b", "status": "cancelled""#);
    assert_eq!(
        statuses(&plan),
        [
            ("1 a".to_string(), Status::Completed, 0),
            ("3 c".to_string(), Status::Pending, 0)
        ]
    );
    assert_eq!(plan.tasks[1].result, None);
}

#[test]
fn a_failed_task_the_team_sets_pending_again_gets_fresh_attempts() {
    let dir = repo(&[(TM, TM_ABC)]);
    failed_run(&dir);
    // `task-master set-status --id=2 --status=pending` stamps updatedAt.
    let plan = team_edits_b(
        &dir,
        r#""title": "b", "status": "pending", "updatedAt": "2026-11-28T08:00:00.000Z""#,
    );
    assert_eq!(
        statuses(&plan)[1..],
        [
            ("2 b".to_string(), Status::Pending, 0),
            ("3 c".to_string(), Status::Pending, 0)
        ]
    );
}

#[test]
fn a_failed_task_the_team_marks_done_is_not_run_and_frees_what_waited() {
    let dir = repo(&[(TM, TM_ABC)]);
    failed_run(&dir);
    let plan = team_edits_b(&dir, r#""title": "b", "status": "done""#);
    assert_eq!(plan.tasks[1].status, Status::Completed);
    assert_eq!(plan.tasks[2].status, Status::Pending);
}

#[test]
fn a_task_dagexec_completed_and_the_team_reopens_runs_again() {
    let rel = ".kiro/specs/a/tasks.md";
    let dir = repo(&[(rel, "- [ ] 1. A\n- [ ] 2. B\n")]);
    prepared(&dir, Format::Kiro, rel);
    remember(&dir, rel, |plan| {
        plan.tasks[0].status = Status::Completed;
        plan.tasks[0].attempts = Some(1);
    });
    // Written back, then unticked by the team.
    let plan = prepared(&dir, Format::Kiro, rel);
    assert_eq!(plan.tasks[0].status, Status::Pending, "the file says open");
    // On the Action, a round still open writes its statuses when it ends: not the team's.
    remember(&dir, rel, |plan| {
        plan.tasks[0].status = Status::Completed;
        plan.progress.extra.insert(
            crate::pure::plan::fields::ROUND.into(),
            serde_json::json!({"round": 1, "tasks": [0], "parts": 1}),
        );
    });
    let plan = prepared(&dir, Format::Kiro, rel);
    assert_eq!(plan.tasks[0].status, Status::Completed);
    // Ticked by dagexec's write-back, then unticked by the team.
    std::fs::write(dir.path().join(rel), "- [x] 1. A\n- [ ] 2. B\n").unwrap();
    let plan = prepared(&dir, Format::Kiro, rel);
    assert_eq!(plan.tasks[0].status, Status::Completed);
    std::fs::write(dir.path().join(rel), "- [ ] 1. A\n- [ ] 2. B\n").unwrap();
    let plan = prepared(&dir, Format::Kiro, rel);
    assert_eq!(plan.tasks[0].status, Status::Pending);
}

#[test]
fn a_run_of_another_tag_does_not_take_the_earlier_tags_state() {
    // `task-master add-tag feature --copy-from-current`, then `use-tag feature`: the same IDs
    // and texts, another list.
    let tagged = TM_ABC.replacen(
        "{\"master\": ",
        &format!(
            "{{\"feature\": {},\n\"master\": ",
            &TM_ABC[11..TM_ABC.len() - 1]
        ),
        1,
    );
    let dir = repo(&[(TM, &tagged)]);
    failed_run(&dir);
    std::fs::write(
        dir.path().join(".taskmaster/state.json"),
        r#"{"currentTag": "feature"}"#,
    )
    .unwrap();
    let plan = prepared(&dir, Format::Taskmaster, TM);
    assert!(plan.goal.contains("(tag feature)"), "{}", plan.goal);
    assert_eq!(
        statuses(&plan),
        [
            ("1 a".to_string(), Status::Completed, 0),
            ("2 b".to_string(), Status::Pending, 0),
            ("3 c".to_string(), Status::Pending, 0)
        ]
    );
}

#[test]
fn an_edit_that_marks_a_unit_done_is_not_said_to_undo_it() {
    let open = r#"{"tasks": [
  {"id": 2, "title": "b", "status": "pending", "subtasks": [
    {"id": 1, "title": "x", "status": "pending"},
    {"id": 2, "title": "y", "status": "pending"}]},
  {"id": 3, "title": "c", "status": "pending"}
]}"#;
    let dir = repo(&[(TM, open)]);
    let mut plan = prepared(&dir, Format::Taskmaster, TM);
    for t in &mut plan.tasks {
        t.status = Status::Completed;
    }
    // The run's commit holds every status written; the person's edit during the run set the
    // two subtasks done with `task-master set-status`, which leaves their task as it was.
    let committed = written_back(open, &["2.1", "2.2", "3"]);
    std::fs::write(dir.path().join(TM), &committed).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "run"]);
    let edited = open
        .replace(
            r#""title": "x", "status": "pending""#,
            r#""title": "x", "status": "done""#,
        )
        .replace(
            r#""title": "y", "status": "pending""#,
            r#""title": "y", "status": "done""#,
        );
    std::fs::write(dir.path().join(TM), &edited).unwrap();
    let repo = crate::edge::git::Repo::discover(dir.path()).unwrap();
    let note = crate::sources::edit_would_undo(&repo, &plan).unwrap();
    assert!(
        note.contains("it does not mark done 3 that this run completed"),
        "{note}"
    );
    // Every unit marked done, their task not: the next run runs nothing again.
    let all = edited.replace(
        r#""title": "c", "status": "pending""#,
        r#""title": "c", "status": "done""#,
    );
    std::fs::write(dir.path().join(TM), all).unwrap();
    assert_eq!(crate::sources::edit_would_undo(&repo, &plan), None);
}

fn written_back(text: &str, done: &[&str]) -> String {
    let done: std::collections::BTreeSet<String> = done.iter().map(ToString::to_string).collect();
    Format::Taskmaster
        .reader()
        .write_back(text, &done, &serde_json::json!({"tag": null}))
        .unwrap()
}

/// A record of one failed attempt of task `task` that cost `usd`.
fn spent_on(plan: &mut crate::pure::plan::model::Plan, task: usize, usd: f64) {
    let record = serde_json::json!({"task": task, "attempt": 1, "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-01T00:01:00Z", "seconds": 60.0, "outcome": "failed", "costUsd": usd});
    plan.progress.extra.insert(
        crate::pure::plan::fields::ATTEMPTS.into(),
        vec![record].into(),
    );
}

/// The team cancels the failed task `b`: it leaves the plan, and what its attempts cost and
/// how they failed leave with it, rather than charging `c`, now at its index (its
/// `max-task-cost`, its row in the status table).
#[test]
fn a_cancelled_tasks_attempt_records_do_not_charge_the_task_after_it() {
    let dir = repo(&[(TM, TM_ABC)]);
    failed_run(&dir);
    remember(&dir, TM, |plan| spent_on(plan, 1, 2.0));
    let plan = team_edits_b(&dir, r#""title": "b", "status": "cancelled""#);
    assert_eq!(plan.tasks[1].subject, "3 c");
    let per = crate::pure::usage::per_task(&plan);
    assert!(per.is_empty(), "{per:?}");
}

/// A task the team put first and a failed one whose status mark the team changed: the
/// failed task starts afresh, and its attempts' records stay its own at its new index.
#[test]
fn a_reopened_tasks_attempt_records_follow_it_when_another_is_put_first() {
    let rel = ".kiro/specs/a/tasks.md";
    let dir = repo(&[(rel, "- [ ] 1. A\n- [-] 2. B\n")]);
    prepared(&dir, Format::Kiro, rel);
    remember(&dir, rel, |plan| {
        plan.tasks[1].status = Status::Failed;
        plan.tasks[1].attempts = Some(1);
        spent_on(plan, 1, 2.0);
    });
    std::fs::write(dir.path().join(rel), "- [ ] 0. Z\n- [ ] 1. A\n- [ ] 2. B\n").unwrap();
    let plan = prepared(&dir, Format::Kiro, rel);
    assert_eq!(plan.tasks[2].status, Status::Pending);
    let per = crate::pure::usage::per_task(&plan);
    assert_eq!(per.keys().copied().collect::<Vec<_>>(), [2], "{per:?}");
}
