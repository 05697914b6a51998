use super::super::{Format, describe, prepare as prepare_any};
use super::*;

fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

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
