//! Test fixtures shared by the unit tests: the example plans and small synthetic plans.

use std::path::Path;

use crate::pure::plan::model::{Files, Metadata, Plan, Task};

/// `examples/{name}`, parsed.
pub(crate) fn example(name: &str) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    crate::edge::plan_file::load(&path).unwrap()
}

/// A plan of the given tasks.
pub(crate) fn plan_of(tasks: Vec<Task>) -> Plan {
    Plan {
        schema_version: 2,
        goal: String::new(),
        context: None,
        progress: Default::default(),
        tasks,
        extra: Default::default(),
    }
}

/// A task with these blockers and files to create and modify.
pub(crate) fn task(deps: &[usize], create: &[&str], modify: &[&str]) -> Task {
    let strings = |v: &[&str]| v.iter().map(std::string::ToString::to_string).collect();
    Task {
        subject: String::new(),
        blocked_by: deps.to_vec(),
        metadata: Some(Metadata {
            files: Files {
                create: strings(create),
                modify: strings(modify),
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}
