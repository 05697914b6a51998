use super::*;
use crate::sources::testing::{deps, ids, messages};
use std::path::Path;

const REL: &str = ".kiro/specs/auth/tasks.md";

fn built(text: &str) -> Result<Built, Vec<Problem>> {
    crate::sources::testing::built(&Kiro, REL, text)
}

/// cc-sdd's own example of its rules (tasks-generation.md), with a boundary path and an
/// optional test task added.
const CC_SDD: &str = "# Implementation Plan

- [ ] 1. Foundation: environment and test infrastructure setup
- [ ] 1.1 Sub-task description
  - Detail item 1
  - _Requirements: 1.1_

- [ ] 2. Core feature A
- [ ] 2.1 (P) Build the auth service
  - Detail items...
  - _Requirements: 2.1_
  - _Boundary: AuthService (src/auth/service.ts)_

- [ ] 2.2 (P) Build the user repository
  - _Requirements: 2.2_
  - _Boundary: UserRepository_

- [ ]* 2.3 Write property tests for the repository
  - _Requirements: 2.2_

- [ ] 3. Integration and wiring
- [ ] 3.1 Sub-task description
  - _Depends: 2.1, 2.2_
  - _Requirements: 3.1_
- [ ] 3.2 Wire the routes
";

#[test]
fn subtasks_are_the_units_and_run_in_the_order_the_rules_give() {
    let b = built(CC_SDD).unwrap();
    assert_eq!(ids(&b), ["1.1", "2.1", "2.2", "3.1", "3.2"]);
    assert!(deps(&b, "1.1").is_empty());
    // (P) subtasks wait for none of their siblings, and for the major task before.
    assert_eq!(deps(&b, "2.1"), ["1.1"]);
    assert_eq!(deps(&b, "2.2"), ["1.1"]);
    // The optional 2.3 is bypassed: 3.1 waits for what it waited for.
    assert_eq!(deps(&b, "3.1"), ["2.1", "2.2"]);
    assert_eq!(deps(&b, "3.2"), ["3.1"]);
    assert_eq!(b.warnings, [format!("{REL}: optional tasks not run: 2.3")]);
    assert_eq!(b.units[1].at, format!("{REL}:9"));
}

#[test]
fn requirements_boundary_and_the_major_task_reach_the_prompt() {
    let b = built(CC_SDD).unwrap();
    let t = &b.plan.tasks[1];
    let d = t.description.clone().unwrap();
    for want in [
        "Kiro task 2.1 of .kiro/specs/auth/tasks.md (line 9):\nBuild the auth service",
        "Part of task 2: Core feature A",
        "Requirements: 2.1 (see the spec's requirements.md)",
        "Boundary: AuthService (src/auth/service.ts)",
    ] {
        assert!(d.contains(want), "{want:?} not in {d}");
    }
    // A boundary path is a file of the task's scope, not one it must change; a component
    // name is none.
    assert_eq!(t.files().collect::<Vec<_>>(), ["src/auth/service.ts"]);
    assert_eq!(t.scope(), ["src/auth/service.ts"]);
    assert!(t.modifies().is_empty() && t.creates().is_empty());
    assert_eq!(b.plan.tasks[2].files().count(), 0);
}

#[test]
fn a_parallel_major_task_runs_beside_the_ones_before_it() {
    let b = built(
        "- [ ] 1. Setup\n- [ ] 2. (P) Docs\n- [ ] 3. (P) Lint\n- [ ] 4. Build\n- [x] 5. Ship\n",
    )
    .unwrap();
    assert_eq!(ids(&b), ["1", "2", "3", "4", "5"]);
    assert_eq!(deps(&b, "2"), ["1"]);
    assert_eq!(deps(&b, "3"), ["1"]);
    assert_eq!(deps(&b, "4"), ["1", "2", "3"]);
    assert_eq!(
        b.plan.tasks[4].status,
        crate::pure::plan::model::Status::Completed
    );
}

#[test]
fn a_ticked_major_completes_its_subtasks_and_headings_stand_for_majors() {
    let b = built(
        "## 1. Base\n\n- [ ] 1.1 A\n- [ ] 1.2 B (P)\n\n## Task 2: Next\n\n- [x] 2. Done already\n  - [ ] 2.1 C\n",
    )
    .unwrap();
    assert_eq!(ids(&b), ["1.1", "1.2", "2.1"]);
    assert!(deps(&b, "1.2").is_empty(), "a trailing (P) counts");
    assert_eq!(deps(&b, "2.1"), ["1.1", "1.2"]);
    assert_eq!(
        b.plan.tasks[2].status,
        crate::pure::plan::model::Status::Completed
    );
    assert!(
        b.plan.tasks[0]
            .description
            .clone()
            .unwrap()
            .contains("Part of task 1: Base")
    );
}

#[test]
fn a_major_with_only_optional_subtasks_is_the_unit() {
    // Kiro's own habit: `- [x] 2. Implement X` with `- [ ]* 2.1 Write property test`.
    let b = built("- [ ] 1. Model\n- [ ]* 1.1 Property test\n- [ ] 2. Service\n").unwrap();
    assert_eq!(ids(&b), ["1", "2"]);
    assert_eq!(deps(&b, "2"), ["1"]);
}

#[test]
fn errors_name_the_line_and_the_task() {
    let e = messages(
        &built("- [ ] 1. A\n- [ ] 1.1 B\n  - _Depends: 9.9_\n- [ ] 1.1 C\n- [ ] 2. D\n  - _Depends: 2_\n")
            .unwrap_err(),
    );
    assert_eq!(
        e,
        format!("{REL}:4: task ID 1.1 is used twice (first on line 2)")
    );
    let e = messages(
        &built("- [ ] 1. A\n- [ ] 1.1 B\n  - _Depends: 9.9_\n- [ ] 2. D\n  - _Depends: 2_\n")
            .unwrap_err(),
    );
    assert_eq!(
        e,
        format!(
            "{REL}:2: task 1.1 depends on 9.9, which is not a task in this file\n\
             {REL}:4: task 2 depends on itself"
        )
    );
    let e = messages(&built("# Plan\n\nNothing here.\n").unwrap_err());
    assert!(e.contains("no numbered task lines"), "{e}");
}

#[test]
fn ticking_changes_only_checkboxes_and_completes_majors() {
    let done: BTreeSet<String> = ["1.1", "2.1", "2.2"]
        .iter()
        .map(ToString::to_string)
        .collect();
    let out = parse::tick(REL, CC_SDD, &done).unwrap();
    let expected = CC_SDD
        .replace("- [ ] 1. Foundation", "- [x] 1. Foundation")
        .replace("- [ ] 1.1 Sub", "- [x] 1.1 Sub")
        .replace("- [ ] 2. Core", "- [x] 2. Core")
        .replace("- [ ] 2.1 (P)", "- [x] 2.1 (P)")
        .replace("- [ ] 2.2 (P)", "- [x] 2.2 (P)");
    assert_eq!(
        out, expected,
        "the optional 2.3 stays open, its major is done"
    );
    // A fenced example is never ticked.
    let fenced = "```\n- [ ] 1. Example\n```\n- [ ] 1. Real\n";
    let out = parse::tick(REL, fenced, &["1".to_string()].into()).unwrap();
    assert_eq!(out, "```\n- [ ] 1. Example\n```\n- [x] 1. Real\n");
}

#[test]
fn real_files_read() {
    for (dir, units, open) in [
        ("cc-sdd-rag-backend", 27, 27),
        ("cc-sdd-photo-albums", 28, 28),
        ("kiro-game-rules", 12, 0),
        ("kiro-warband", 73, 0),
    ] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/kiro")
                .join(dir)
                .join("tasks.md"),
        )
        .unwrap();
        let b = built(&text).unwrap_or_else(|e| panic!("{dir}: {}", messages(&e)));
        let pending = b
            .plan
            .tasks
            .iter()
            .filter(|t| t.status == crate::pure::plan::model::Status::Pending)
            .count();
        assert_eq!(
            (b.units.len(), pending),
            (units, open),
            "{dir}: {:?}",
            ids(&b)
        );
    }
}

#[test]
fn boundary_entries_name_files_only_when_they_are_paths() {
    let f = |entry| parse::boundary_files(entry, REL);
    assert_eq!(
        f("AuthService (src/auth/service.ts)"),
        ["src/auth/service.ts"]
    );
    assert_eq!(f("install.sh (setup_repo block)"), ["install.sh"]);
    assert_eq!(f("DB Layer (src/db.ts)."), ["src/db.ts"]);
    assert_eq!(f("`README.md`"), ["README.md"]);
    assert_eq!(f("../outside.txt"), ["../outside.txt"]);
    assert!(f("target/release/").is_empty());
    assert!(f("UserRepository").is_empty());
    assert!(f("phase モデル").is_empty());
    assert!(f("API Layer, e.g. the router").is_empty());
    assert_eq!(f(".env"), Vec::<String>::new());
    assert_eq!(f("config/.env"), ["config/.env"]);
    assert_eq!(f("`src/a.rs`, `src/b.rs`"), ["src/a.rs", "src/b.rs"]);
}

#[test]
fn a_started_major_task_is_ticked_when_its_subtasks_are_done() {
    let text = "- [-] 1. Started\n  - [x] 1.1 A\n  - [-] 1.2 B\n- [ ] 2. Next\n";
    let b = built(text).unwrap();
    assert_eq!(ids(&b), ["1.1", "1.2", "2"]);
    assert_eq!(
        b.plan.tasks[1].status,
        crate::pure::plan::model::Status::Pending
    );
    let done: BTreeSet<String> = ["1.2".to_string()].into();
    let out = Kiro
        .write_back(text, &done, &serde_json::Value::Null)
        .unwrap();
    assert_eq!(
        out,
        "- [x] 1. Started\n  - [x] 1.1 A\n  - [x] 1.2 B\n- [ ] 2. Next\n"
    );
}

/// An annotation ends at its closing underscore, the last one a space or the line's end
/// follows: one written without it keeps an underscore of its own (`my_module.rs`), and a
/// note after it may hold one (`see_design`).
#[test]
fn an_annotation_ends_at_its_closing_underscore_not_at_one_inside_it() {
    let text = "- [ ] 1. A\n  - _Boundary: src/my_module.rs\n\
                - [ ] 2. B\n  - _Boundary: app/__init__.py_ (see_design)\n\
                - [ ] 3. C\n  - _Depends: 1_\n";
    let b = built(text).unwrap();
    let files = |i: usize| b.plan.tasks[i].scope().to_vec();
    assert_eq!(files(0), ["src/my_module.rs"]);
    assert_eq!(files(1), ["app/__init__.py"]);
    assert_eq!(deps(&b, "3"), ["1", "2"]);
}

/// A task line whose checkbox holds a mark Kiro does not write (`[~]`, `[/]`, `[]`) is
/// refused at its line, never left out without a word (what waited for it would run first).
#[test]
fn a_task_marked_with_a_mark_kiro_does_not_write_is_refused_at_its_line() {
    let e = built("- [ ] 1. A\n- [~] 2. B\n- [] 3. C\n- [ ] 4. D\n").unwrap_err();
    assert_eq!(
        messages(&e),
        format!(
            "{REL}:2: task 2 is marked `[~]`, which is not a Kiro mark\n\
             {REL}:3: task 3 is marked `[]`, which is not a Kiro mark"
        )
    );
}

/// cc-sdd lists write `_Depends: none (independent of 1.1)_` for a task that waits for none,
/// and a note after an ID (`_Depends: 1.1 (asset …), 2.1 (file scaffold)_`): the notes in
/// parentheses are no IDs, `none` no task.
#[test]
fn depends_reads_none_and_ids_with_notes() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kiro/cc-sdd-depends-notes/tasks.md"
    ))
    .unwrap()
    .replace("- [x]", "- [ ]");
    let b = built(&text).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(ids(&b), ["1.1", "1.2", "2.1", "2.3"]);
    assert!(deps(&b, "1.2").is_empty());
    assert_eq!(deps(&b, "2.1"), ["1.1", "1.2"]);
    assert_eq!(deps(&b, "2.3"), ["1.1", "2.1"]);
}

/// `- [x] 8.1 (P) Add an assertion …` with `_Depends: 1.1, 9.1_`: a subtask waiting for one
/// of a later major task. The order the numbers give (9 after 8) yields to what the team
/// wrote: major task 9 waits for what 8 waited for, and 8.1 for 9.1; no cycle; 10 comes
/// after both.
#[test]
fn an_explicit_dependency_on_a_later_major_task_overrides_the_number_order() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kiro/cc-sdd-forward-depends/tasks.md"
    ))
    .unwrap()
    .replace("- [x]", "- [ ]");
    let b = built(&text).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(ids(&b), ["1.1", "2.1", "8.1", "9.1", "10.1"]);
    assert_eq!(deps(&b, "2.1"), ["1.1"]);
    assert_eq!(deps(&b, "9.1"), ["2.1"]);
    assert_eq!(deps(&b, "8.1"), ["1.1", "2.1", "9.1"]);
    // Major task 10 still comes after both.
    assert_eq!(deps(&b, "10.1"), ["8.1", "9.1"]);
}

/// `- [ ] 1.1 …` with `_Depends: 1.3_`: a subtask waiting for a later sibling. The order the
/// numbers give (1.1, 1.2, 1.3) yields to what the team wrote, as between major tasks: 1.3
/// moves to just before 1.1 (it waits for what 1.1 waited for), 1.2 still comes after 1.1;
/// no cycle. Two siblings that wait for each other still are one (the plan's validation
/// names it).
#[test]
fn an_explicit_dependency_on_a_later_sibling_overrides_the_number_order() {
    let text = "\
- [ ] 1. Foundation
- [ ] 1.1 Wire the client
  - _Depends: 1.3_
- [ ] 1.2 Add retries
- [ ] 1.3 Define the config
- [ ] 2. Feature
- [ ] 2.1 Use it
";
    let b = built(text).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert!(deps(&b, "1.3").is_empty());
    assert_eq!(deps(&b, "1.1"), ["1.3"]);
    assert_eq!(deps(&b, "1.2"), ["1.1"]);
    assert_eq!(deps(&b, "2.1"), ["1.2"]);
    let both = text.replace(
        "- [ ] 1.3 Define the config",
        "- [ ] 1.3 Define the config\n  - _Depends: 1.1_",
    );
    let b = built(&both).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(
        (deps(&b, "1.1"), deps(&b, "1.3")),
        (vec!["1.3".to_string()], vec!["1.1".to_string()])
    );
}

/// `_Boundary: [src/x.ts](../../../src/x.ts)_`: a boundary named as a Markdown link is its
/// target, from the tasks.md's folder as GitHub renders it (the list was refused: the target
/// `../../../src/x.ts` "contains '..'"); its text is only its label. A target out of the
/// repository is still one.
#[test]
fn a_boundary_named_as_a_markdown_link_is_its_target() {
    let text = "- [ ] 1. A\n- [ ] 1.1 Do it\n  - _Boundary: Client ([src/x.ts](../../../src/x.ts#L3))_\n\
                - [ ] 1.2 Then\n  - _Boundary: [`src/y.ts`](src/y.ts), [z](/src/z.ts)_\n";
    let b = built(text).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(b.plan.tasks[0].scope(), ["src/x.ts"]);
    assert_eq!(b.plan.tasks[1].scope(), ["src/y.ts", "src/z.ts"]);
    let out = text.replace("../../../src/x.ts", "../../../../x.ts");
    let b = built(&out).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(b.plan.tasks[0].scope(), ["../../../../x.ts"]);
}
