//! Semantic checks of a parsed plan: `blockedBy` indices exist and are not the task itself,
//! the graph has no cycle, declared file paths stay inside the repository and away from
//! `.git/` and the plan, and v3 `fileOverlaps` name other existing tasks.
//!
//! Every problem is reported (in plan order), each naming the task index and the field.

use crate::pure::graph::Dag;
use crate::pure::plan::error::{PathProblem, PlanError, PlanErrors};
use crate::pure::plan::model::Plan;

/// The plan's own path relative to the repository root, as the seed places it.
pub const DEFAULT_PLAN_REL: &str = ".design/plan.json";

/// Checks the plan and builds its DAG. `plan_rel` is the plan file's path relative to the
/// repository root (tasks may not declare it), when the plan lives inside the repository.
pub fn check(plan: &Plan, plan_rel: Option<&str>) -> Result<Dag, PlanErrors> {
    let n = plan.tasks.len();
    let mut errors = Vec::new();
    let mut deps_ok = true;
    let plan_rel = plan_rel.map(crate::pure::paths::key);
    for (i, task) in plan.tasks.iter().enumerate() {
        errors.extend(control_characters(i, task));
        if task.join {
            errors.extend(join_work(task).map(|field| PlanError::JoinWithWork { task: i, field }));
        }
        for (position, &dep) in task.blocked_by.iter().enumerate() {
            if dep >= n {
                deps_ok = false;
                errors.push(PlanError::UnknownDependency {
                    task: i,
                    position,
                    dep,
                    count: n,
                });
            } else if dep == i {
                deps_ok = false;
                errors.push(PlanError::SelfDependency { task: i, position });
            }
        }
        for (field, path) in declared(task) {
            if let Some(reason) = path_problem(path, plan_rel.as_deref()) {
                errors.push(PlanError::UnsafePath {
                    task: i,
                    field,
                    path: path.to_string(),
                    reason,
                });
            }
        }
        for (position, &other) in task.file_overlaps.iter().flatten().enumerate() {
            let problem = if other >= n {
                Some(format!("no task {other} (the plan has {n} tasks)"))
            } else if other == i {
                Some("a task cannot overlap itself".to_string())
            } else {
                None
            };
            if let Some(problem) = problem {
                errors.push(PlanError::BadOverlap {
                    task: i,
                    position,
                    problem,
                });
            }
        }
    }
    if !deps_ok {
        // Every problem at once: a cycle among the dependencies that do exist is reported
        // beside the ones that do not.
        let mut known = plan.clone();
        for (i, t) in known.tasks.iter_mut().enumerate() {
            t.blocked_by.retain(|&d| d < n && d != i);
        }
        if let Err(cycle) = Dag::build(&known) {
            errors.push(PlanError::Cycle { cycle });
        }
        return Err(PlanErrors(errors));
    }
    match Dag::build(plan) {
        Ok(dag) if errors.is_empty() => Ok(dag),
        Ok(_) => Err(PlanErrors(errors)),
        Err(cycle) => {
            errors.push(PlanError::Cycle { cycle });
            Err(PlanErrors(errors))
        }
    }
}

/// What a join declares that only a task a worker runs may: files, an agent, a prompt,
/// acceptance criteria (a join is never run).
fn join_work(task: &crate::pure::plan::model::Task) -> impl Iterator<Item = &'static str> {
    let fields = [
        ("metadata.files", task.files().next().is_some()),
        ("agent", task.agent.is_some()),
        ("prompt", task.prompt.is_some()),
        (
            "acceptance criteria",
            !task.acceptance_criteria().is_empty(),
        ),
    ];
    fields.into_iter().filter(|&(_, has)| has).map(|(f, _)| f)
}

/// Every path a task declares, with the field it is in.
pub(crate) fn declared(task: &crate::pure::plan::model::Task) -> Vec<(String, &str)> {
    let mut paths: Vec<(String, &str)> = Vec::new();
    for (list, files) in [
        ("create", task.creates()),
        ("modify", task.modifies()),
        ("scope", task.scope()),
    ] {
        for (k, p) in files.iter().enumerate() {
            paths.push((format!("metadata.files.{list}[{k}]"), p));
        }
    }
    for (k, c) in task.context_files().iter().enumerate() {
        paths.push((format!("agent.contextFiles[{k}].path"), &c.path));
    }
    paths
}

/// The one-line text fields of task `index` that hold a control character (see
/// [`crate::pure::sanitize::has_control`]): `subject`, `activeForm`, `agent.role`, `agent.model`.
/// They reach commit messages and the terminal as they are, so they are refused, not cleaned.
pub fn control_characters(index: usize, task: &crate::pure::plan::model::Task) -> Vec<PlanError> {
    let agent = task.agent.as_ref();
    let fields = [
        ("subject", Some(task.subject.as_str())),
        ("activeForm", task.active_form.as_deref()),
        ("agent.role", agent.map(|a| a.role.as_str())),
        ("agent.model", agent.and_then(|a| a.model.as_deref())),
    ];
    fields
        .into_iter()
        .filter_map(|(field, value)| {
            let value = value?;
            let bad = value
                .chars()
                .find(|&c| crate::pure::sanitize::has_control(c.encode_utf8(&mut [0; 4])))?;
            Some(PlanError::ControlChar {
                task: index,
                field: field.to_string(),
                value: value.to_string(),
                code: u32::from(bad),
            })
        })
        .collect()
}

/// Why a declared path may not be used, if it may not.
pub fn path_problem(path: &str, plan_rel: Option<&str>) -> Option<PathProblem> {
    use crate::pure::paths::{Unclean, git_dir_prefix, normalize, same_file};
    if path.trim().is_empty() {
        return Some(PathProblem::Empty);
    }
    let norm = match normalize(path) {
        Ok(norm) => norm,
        Err(Unclean::Absolute) => return Some(PathProblem::Absolute),
        Err(Unclean::ParentDir) => return Some(PathProblem::ParentDir),
        Err(Unclean::Empty | Unclean::Nul) => return Some(PathProblem::Empty),
    };
    // `.GIT/config` is `.git/config` on a case-insensitive file system.
    if git_dir_prefix(&norm).is_some() {
        return Some(PathProblem::GitDir);
    }
    if plan_rel.is_some_and(|p| same_file(p, &norm)) {
        return Some(PathProblem::PlanItself);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::load::parse;

    #[test]
    fn path_rules() {
        let plan = Some(".design/plan.json");
        let cases: &[(&str, Option<PathProblem>)] = &[
            ("src/a.rs", None),
            ("./src/a.rs", None),
            ("a..b/c", None),
            (".gitignore", None),
            (".github/workflows/ci.yml", None),
            ("", Some(PathProblem::Empty)),
            ("/etc/passwd", Some(PathProblem::Absolute)),
            ("~/x", Some(PathProblem::Absolute)),
            ("C:\\x", Some(PathProblem::Absolute)),
            ("../outside.txt", Some(PathProblem::ParentDir)),
            ("src/../../x", Some(PathProblem::ParentDir)),
            (".git/config", Some(PathProblem::GitDir)),
            ("./.git/hooks/pre-commit", Some(PathProblem::GitDir)),
            (".GIT/config", Some(PathProblem::GitDir)),
            (".Git/hooks/pre-commit", Some(PathProblem::GitDir)),
            ("src/.git/config", Some(PathProblem::GitDir)),
            (".git./config", Some(PathProblem::GitDir)),
            (".DESIGN/plan.json", Some(PathProblem::PlanItself)),
            (".design//plan.json", Some(PathProblem::PlanItself)),
            ("src//a.rs", None),
            ("a/./../b", Some(PathProblem::ParentDir)),
            (".design/plan.json", Some(PathProblem::PlanItself)),
            ("./.design/plan.json", Some(PathProblem::PlanItself)),
            (".design/notes.md", None),
        ];
        for (p, want) in cases {
            assert_eq!(path_problem(p, plan), *want, "{p}");
        }
    }

    fn errors_of(json: &str) -> Vec<String> {
        let plan = parse(json, std::path::Path::new("p.json")).unwrap();
        match check(&plan, Some(DEFAULT_PLAN_REL)) {
            Ok(_) => vec![],
            Err(e) => e.0.iter().map(std::string::ToString::to_string).collect(),
        }
    }

    #[test]
    fn semantic_errors_name_task_and_field() {
        let cases: &[(&str, &[&str])] = &[
            (
                r#"{"schemaVersion":2,"tasks":[{"blockedBy":[]},{"blockedBy":[0]}]}"#,
                &[],
            ),
            (
                r#"{"schemaVersion":2,"tasks":[{"blockedBy":[5]},{"blockedBy":[1]}]}"#,
                &[
                    "task 0 blockedBy[0]: no task 5 (the plan has 2 tasks)",
                    "task 1 blockedBy[0]: a task cannot block itself",
                ],
            ),
            (
                r#"{"schemaVersion":2,"tasks":[{"blockedBy":[1]},{"blockedBy":[0]}]}"#,
                &["task 0 blockedBy: cycle: 0 → 1 → 0"],
            ),
            (
                r#"{"schemaVersion":2,"tasks":[{"metadata":{"files":{"create":["../x"],"modify":[".design/plan.json"]}},"agent":{"role":"r","contextFiles":[{"path":".git/HEAD"}]}}]}"#,
                &[
                    "task 0 metadata.files.create[0]: \"../x\" contains '..' and could leave the repository",
                    "task 0 metadata.files.modify[0]: \".design/plan.json\" points at the plan file itself",
                    "task 0 agent.contextFiles[0].path: \".git/HEAD\" points into .git/",
                ],
            ),
            (
                r#"{"schemaVersion":3,"tasks":[{"fileOverlaps":[0,7]},{"fileOverlaps":[0]}]}"#,
                &[
                    "task 0 fileOverlaps[0]: a task cannot overlap itself",
                    "task 0 fileOverlaps[1]: no task 7 (the plan has 2 tasks)",
                ],
            ),
            (
                r#"{"schemaVersion":2,"tasks":[{},{"join":true,"blockedBy":[0]},{"join":true,"blockedBy":[0],"metadata":{"files":{"create":["a"]}},"prompt":"p","agent":{"role":"r"}}]}"#,
                &[
                    "task 2 metadata.files: a join (\"join\": true) does no work of its own, so it cannot have metadata.files",
                    "task 2 agent: a join (\"join\": true) does no work of its own, so it cannot have agent",
                    "task 2 prompt: a join (\"join\": true) does no work of its own, so it cannot have prompt",
                ],
            ),
        ];
        for (json, want) in cases {
            assert_eq!(errors_of(json), *want, "{json}");
        }
    }

    /// Regression: a NUL in a subject passed validation and made every round commit fail;
    /// escape sequences in one would be printed and committed as they are.
    #[test]
    fn control_characters_in_one_line_fields_are_refused() {
        let json = r#"{"schemaVersion":2,"tasks":[
            {"subject":"ok — fine ✓","activeForm":"Doing it","agent":{"role":"engineer","model":"opus"}},
            {"subject":"nul\u0000here","activeForm":"bell\u0007","agent":{"role":"esc\u001b]0;pwned\u0007","model":"m\nx"}},
            {"subject":"two\nlines"},
            {"subject":"rtl \u202e override"}
        ]}"#;
        assert_eq!(
            errors_of(json),
            [
                "task 1 subject: \"nul\\0here\" contains a control character (U+0000)",
                "task 1 activeForm: \"bell\\u{7}\" contains a control character (U+0007)",
                "task 1 agent.role: \"esc\\u{1b}]0;pwned\\u{7}\" contains a control character (U+001B)",
                "task 1 agent.model: \"m\\nx\" contains a control character (U+000A)",
                "task 2 subject: \"two\\nlines\" contains a control character (U+000A)",
                "task 3 subject: \"rtl \\u{202e} override\" contains a control character (U+202E)",
            ]
        );
        let plan = parse(json, std::path::Path::new("p.json")).unwrap();
        let first = &check(&plan, None).unwrap_err().0[0];
        assert_eq!(first.task(), Some(1));
        assert!(
            first.hint().contains("one line of printable text"),
            "{}",
            first.hint()
        );
    }
}
