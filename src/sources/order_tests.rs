//! The order a task list gives holds through its finished and started tasks: an open unit
//! waits for every open unit the format orders before it, transitively, whatever lies between
//! (a finished subtask, a started parent, a parent whose subtasks are all done). The shapes of
//! issue 32 (Taskmaster 13/14, Kiro 12.x → 13 and 3.3, 3.4 → 3.7 → 4.3), Spec Kit's phase
//! edge through a ticked task, and the property over generated task lists.

use std::collections::BTreeSet;
use std::path::Path;

use super::testing::repo;
use super::{Format, describe, prepare};
use crate::pure::plan::model::{Plan, Status};

/// The plan `prepare` makes of the one file `rel` (in `format`).
fn plan_of(format: Format, rel: &str, text: &str) -> Plan {
    let dir = repo(&[(rel, text)]);
    let p = prepare(format, dir.path(), &dir.path().join(rel), false)
        .unwrap_or_else(|e| panic!("{}", describe(&e).0));
    crate::edge::plan_file::load(&p.plan).unwrap()
}

/// The source ID of each plan task.
fn ids(plan: &Plan) -> Vec<String> {
    plan.tasks
        .iter()
        .map(|t| {
            t.extra
                .values()
                .find_map(|v| v.get("id").and_then(|i| i.as_str()))
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The IDs of the units the engine would start now.
fn ready(plan: &Plan) -> Vec<String> {
    let dag = crate::pure::graph::Dag::build(plan).unwrap();
    let ids = ids(plan);
    crate::pure::engine::ready_set(plan, &dag)
        .into_iter()
        .map(|i| ids[i].clone())
        .collect()
}

const TM: &str = ".taskmaster/tasks/tasks.json";
const KIRO: &str = ".kiro/specs/f/tasks.md";
const SPECKIT: &str = "specs/001-f/tasks.md";

#[test]
fn taskmaster_an_in_progress_task_waits_for_its_dependency_through_its_done_subtasks() {
    // resourcer's real file: task 14 is in-progress and depends on 13, whose 13.3 is pending;
    // 14.1–14.3 are done and 14.4 waits for them. Task 17 is in-progress with every subtask
    // done and depends on 16 (pending); 18 depends on 17.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/taskmaster/resourcer-tagged.json"),
    )
    .unwrap();
    let plan = plan_of(Format::Taskmaster, TM, &text);
    assert_eq!(ready(&plan), ["9.1", "10", "11", "12", "13.3"]);
}

#[test]
fn taskmaster_the_issue_shape_in_small() {
    let text = r#"{"tasks": [
      {"id": 13, "title": "a", "status": "pending", "dependencies": [], "subtasks": [
        {"id": 1, "title": "a1", "status": "done", "dependencies": []},
        {"id": 2, "title": "a2", "status": "done", "dependencies": []},
        {"id": 3, "title": "a3", "status": "pending", "dependencies": [1, 2]}]},
      {"id": 14, "title": "b", "status": "in-progress", "dependencies": [13], "subtasks": [
        {"id": 1, "title": "b1", "status": "done", "dependencies": []},
        {"id": 2, "title": "b2", "status": "done", "dependencies": []},
        {"id": 3, "title": "b3", "status": "done", "dependencies": []},
        {"id": 4, "title": "b4", "status": "pending", "dependencies": [1, 2, 3]}]}
    ]}"#;
    let plan = plan_of(Format::Taskmaster, TM, text);
    assert_eq!(ready(&plan), ["13.3"]);
}

#[test]
fn taskmaster_a_cancelled_task_settles_its_own_wait_but_not_the_order_through_it() {
    // 3 waits for 2 (cancelled), which waited for 1: 3 still comes after 1. 6 waits for 5
    // (done), which waited for 4 (deferred): 6 is not run in this run either.
    let text = r#"{"tasks": [
      {"id": 1, "title": "a", "status": "pending"},
      {"id": 2, "title": "b", "status": "cancelled", "dependencies": [1]},
      {"id": 3, "title": "c", "status": "pending", "dependencies": [2]},
      {"id": 4, "title": "d", "status": "deferred"},
      {"id": 5, "title": "e", "status": "done", "dependencies": [4]},
      {"id": 6, "title": "f", "status": "pending", "dependencies": [5]}
    ]}"#;
    let plan = plan_of(Format::Taskmaster, TM, text);
    assert_eq!(ids(&plan), ["1", "3", "5"]);
    assert_eq!(ready(&plan), ["1"]);
}

#[test]
fn kiro_a_major_task_waits_for_the_open_subtasks_before_a_ticked_last_one() {
    let text = "- [x] 11. Eleven\n\
                - [-] 12. Twelve\n  \
                  - [x] 12.1 A\n  \
                  - [ ] 12.2 B\n  \
                  - [x] 12.3 C\n  \
                  - [x] 12.4 D\n\
                - [ ] 13. Thirteen\n";
    let plan = plan_of(Format::Kiro, KIRO, text);
    assert_eq!(ready(&plan), ["12.2"]);
}

#[test]
fn kiro_flat_subtasks_keep_their_order_through_ticked_ones() {
    let text = "- [ ] 3. Three\n\
                - [ ] 3.1 (P) a\n\
                - [ ] 3.2 (P) b\n\
                - [ ] 3.3 (P) c\n\
                - [ ] 3.4 (P) d\n\
                - [x] 3.5 (P) e\n\
                - [x] 3.6 (P) f\n\
                - [x] 3.7 g\n  \
                  - _Depends: 3.3, 3.4_\n\
                - [ ] 4. Four\n\
                - [x] 4.1 (P) h\n\
                - [x] 4.2 (P) i\n\
                - [ ] 4.3 j\n  \
                  - _Depends: 3.7_\n";
    let plan = plan_of(Format::Kiro, KIRO, text);
    assert_eq!(ready(&plan), ["3.1", "3.2", "3.3", "3.4"]);
}

#[test]
fn speckit_a_phase_waits_for_the_open_tasks_before_a_ticked_last_one() {
    let text = "## Phase 1: Setup\n\n\
                - [ ] T001 Create `a.txt`\n\
                - [x] T002 Create `b.txt`\n\n\
                ## Phase 2: Build\n\n\
                - [ ] T003 Create `c.txt`\n";
    let plan = plan_of(Format::SpecKit, SPECKIT, text);
    assert_eq!(ready(&plan), ["T001"]);
}

/// The transitive closure of `deps` (task → what it waits for), as (waiter, waited-for) pairs.
fn closure(deps: &[Vec<usize>]) -> BTreeSet<(usize, usize)> {
    let mut out = BTreeSet::new();
    for start in 0..deps.len() {
        let mut stack: Vec<usize> = deps[start].clone();
        let mut seen = BTreeSet::new();
        while let Some(d) = stack.pop() {
            if seen.insert(d) {
                out.insert((start, d));
                stack.extend(deps[d].iter().copied());
            }
        }
    }
    out
}

/// (waiter, waited-for) pairs of IDs.
type Pairs = BTreeSet<(String, String)>;

/// Who waits for whom among the open units (by ID): the closure of the format's order (the
/// plan made of the same file with nothing finished), restricted to the units open in
/// `statuses`; and the closure of the edges between open units in `plan`, which is what the
/// engine waits for.
fn orders(all_open: &Plan, plan: &Plan) -> (Pairs, Pairs) {
    let (all_ids, ids) = (ids(all_open), ids(plan));
    let open: BTreeSet<&String> = plan
        .tasks
        .iter()
        .zip(&ids)
        .filter(|(t, _)| t.status != Status::Completed && !t.join)
        .map(|(_, id)| id)
        .collect();
    let named = |pairs: BTreeSet<(usize, usize)>, ids: &[String]| {
        pairs
            .into_iter()
            .map(|(a, b)| (ids[a].clone(), ids[b].clone()))
            .filter(|(a, b)| open.contains(a) && open.contains(b))
            .collect::<BTreeSet<_>>()
    };
    let format: Vec<Vec<usize>> = all_open
        .tasks
        .iter()
        .map(|t| t.blocked_by.clone())
        .collect();
    let derived: Vec<Vec<usize>> = plan
        .tasks
        .iter()
        .map(|t| {
            t.blocked_by
                .iter()
                .copied()
                .filter(|&d| plan.tasks[d].status != Status::Completed)
                .collect()
        })
        .collect();
    (
        named(closure(&format), &all_ids),
        named(closure(&derived), &ids),
    )
}

/// A generated major task: `(P)`, its mark, its subtasks (`(P)`, mark, `_Depends:_` back).
type KiroGroup = (bool, u8, Vec<(bool, u8, usize)>);

/// A nested Kiro tasks.md: major tasks, each a leaf or holding subtasks, `(P)` markers,
/// `_Depends:_` back to earlier units, each checkbox `[ ]`, `[x]` or `[-]`.
fn kiro_text(groups: &[KiroGroup], all_open: bool) -> String {
    let mark = |m: u8| match (all_open, m % 3) {
        (true, _) | (false, 0) => ' ',
        (false, 1) => 'x',
        _ => '-',
    };
    let mut text = String::new();
    let mut earlier: Vec<String> = Vec::new();
    for (g, (parallel, m, subs)) in groups.iter().enumerate() {
        let n = g + 1;
        let p = if *parallel && g > 0 { " (P)" } else { "" };
        // A major task ticked by hand stands for its subtasks: only a leaf gets a tick here.
        let major_mark = if subs.is_empty() {
            mark(*m)
        } else if mark(*m) == '-' {
            '-'
        } else {
            ' '
        };
        text.push_str(&format!("- [{major_mark}] {n}.{p} Major {n}\n"));
        if subs.is_empty() {
            earlier.push(n.to_string());
        }
        for (s, (sp, sm, back)) in subs.iter().enumerate() {
            let id = format!("{n}.{}", s + 1);
            let p = if *sp { " (P)" } else { "" };
            text.push_str(&format!("  - [{}] {id}{p} Sub {id}\n", mark(*sm)));
            if *back > 0 && earlier.len() >= *back {
                text.push_str(&format!(
                    "    - _Depends: {}_\n",
                    earlier[earlier.len() - back]
                ));
            }
            earlier.push(id);
        }
    }
    text
}

/// A generated task: its status, dependencies, subtasks (status, sibling dependencies).
type TmTask = (u8, Vec<usize>, Vec<(u8, Vec<usize>)>);

/// A nested Taskmaster tasks.json: tasks, each a leaf or holding subtasks, with dependencies
/// on earlier tasks and on earlier siblings, each status one of pending, done (half the
/// time), in-progress (`review` holds back what waits for it, as `deferred` does: not an
/// order through a finished unit; `completed` is not Taskmaster's word, held too).
fn taskmaster_text(tasks: &[TmTask], all_open: bool) -> String {
    let status = |m: u8| match (all_open, m % 4) {
        (true, _) | (false, 0) => "pending",
        (false, 2) => "in-progress",
        _ => "done",
    };
    let mut out = Vec::new();
    for (i, (m, deps, subs)) in tasks.iter().enumerate() {
        let id = i + 1;
        let deps: BTreeSet<usize> = deps
            .iter()
            .filter(|&&d| d >= 1 && d < id)
            .copied()
            .collect();
        let subtasks: Vec<serde_json::Value> = subs
            .iter()
            .enumerate()
            .map(|(j, (sm, sdeps))| {
                let sid = j + 1;
                let sdeps: BTreeSet<usize> =
                    sdeps.iter().filter(|&&d| d >= 1 && d < sid).copied().collect();
                serde_json::json!({"id": sid, "title": format!("s{id}.{sid}"), "status": status(*sm), "dependencies": sdeps})
            })
            .collect();
        // A parent's own status is in-progress or pending when it has subtasks (done, it
        // would stand for them).
        let own = if subs.is_empty() {
            status(*m)
        } else if status(*m) == "in-progress" {
            "in-progress"
        } else {
            "pending"
        };
        out.push(serde_json::json!({"id": id, "title": format!("t{id}"), "status": own, "dependencies": deps, "subtasks": subtasks}));
    }
    serde_json::to_string_pretty(&serde_json::json!({"tasks": out})).unwrap()
}

/// A Spec Kit tasks.md: phases of tasks with `[P]`, `depends on` an earlier task, ticked or
/// not.
fn speckit_text(phases: &[Vec<(bool, bool, usize)>], all_open: bool) -> String {
    let mut text = String::new();
    let mut n = 0;
    for (p, tasks) in phases.iter().enumerate() {
        text.push_str(&format!("## Phase {}: Build\n\n", p + 1));
        for (parallel, done, back) in tasks {
            n += 1;
            let tick = if *done && !all_open { 'x' } else { ' ' };
            let marker = if *parallel { "[P] " } else { "" };
            let dep = if *back > 0 && n > *back + 1 {
                format!(" (depends on T{:03})", n - back - 1)
            } else {
                String::new()
            };
            text.push_str(&format!(
                "- [{tick}] T{n:03} {marker}Create `f{n}.txt`{dep}\n"
            ));
        }
    }
    text
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn kiro_order_over_open_units_is_the_formats(
        groups in proptest::collection::vec(
            (proptest::bool::ANY, 0u8..3, proptest::collection::vec((proptest::bool::ANY, 0u8..3, 0usize..4), 0..4)),
            1..6,
        )
    ) {
        let (format, plan) = (plan_of(Format::Kiro, KIRO, &kiro_text(&groups, true)), plan_of(Format::Kiro, KIRO, &kiro_text(&groups, false)));
        let (want, got) = orders(&format, &plan);
        proptest::prop_assert_eq!(want, got, "{}", kiro_text(&groups, false));
    }

    #[test]
    fn taskmaster_order_over_open_units_is_the_formats(
        tasks in proptest::collection::vec(
            (0u8..4, proptest::collection::vec(1usize..6, 0..3), proptest::collection::vec((0u8..4, proptest::collection::vec(1usize..4, 0..2)), 0..4)),
            1..6,
        )
    ) {
        let (format, plan) = (plan_of(Format::Taskmaster, TM, &taskmaster_text(&tasks, true)), plan_of(Format::Taskmaster, TM, &taskmaster_text(&tasks, false)));
        let (want, got) = orders(&format, &plan);
        proptest::prop_assert_eq!(want, got, "{}", taskmaster_text(&tasks, false));
    }

    #[test]
    fn speckit_order_over_open_units_is_the_formats(
        phases in proptest::collection::vec(
            proptest::collection::vec((proptest::bool::ANY, proptest::bool::ANY, 0usize..4), 1..6),
            1..4,
        )
    ) {
        let (format, plan) = (plan_of(Format::SpecKit, SPECKIT, &speckit_text(&phases, true)), plan_of(Format::SpecKit, SPECKIT, &speckit_text(&phases, false)));
        let (want, got) = orders(&format, &plan);
        proptest::prop_assert_eq!(want, got, "{}", speckit_text(&phases, false));
    }
}
