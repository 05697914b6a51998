//! How a message names a task, and which task a name given on the command line means: a
//! plan generated from a task list (Taskmaster, Kiro / cc-sdd, Spec Kit) names its tasks by
//! the list's own IDs (`13.3`, `T004`) — the plan index is an internal number there —, a
//! `plan.json` by its plan index. Pure: read from the plan's record of its task list.

use super::fields::{SOURCE, SPEC_KIT};
use super::model::Plan;

/// The task list's own ID of each task, in plan order; `None` for a plan not generated from
/// a task list (or whose record does not name every task but the joins after them).
pub fn list_ids(plan: &Plan) -> Option<Vec<String>> {
    [SOURCE, SPEC_KIT].iter().find_map(|field| {
        let tasks = plan.extra.get(*field)?.get("tasks")?.as_array()?;
        let ids: Vec<String> = tasks
            .iter()
            .map(|t| t["id"].as_str().unwrap_or("").to_string())
            .collect();
        // Joins (`pure::join`) come after the list's tasks and have no ID of their own.
        let listed = ids.len() == plan.tasks.len()
            || (ids.len() < plan.tasks.len() && plan.tasks[ids.len()..].iter().all(|t| t.join));
        (listed && ids.iter().all(|id| !id.is_empty())).then_some(ids)
    })
}

/// How messages name task `index`: its task-list ID, else its plan index.
pub fn name(plan: &Plan, index: usize) -> String {
    TaskNames::of(plan).get(index)
}

/// How messages name every task of one plan ([`name`]), read once: what a run's display,
/// its reports and the setup report name tasks by, so a task list's `T004` or `13.3` is the
/// one name a user reads everywhere, never the plan index behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskNames(Option<Vec<String>>);

impl TaskNames {
    /// The names of `plan`'s tasks.
    pub fn of(plan: &Plan) -> TaskNames {
        TaskNames(list_ids(plan))
    }

    /// Names taken from a task list's `ids`, in plan order (tests).
    #[cfg(test)]
    pub fn from_ids<const N: usize>(ids: [&str; N]) -> TaskNames {
        TaskNames(Some(ids.iter().map(|s| (*s).to_string()).collect()))
    }

    /// Task `index`'s name: its task-list ID, else its plan index.
    pub fn get(&self, index: usize) -> String {
        self.0
            .as_ref()
            .and_then(|ids| ids.get(index).cloned())
            .unwrap_or_else(|| index.to_string())
    }

    /// `T001, T004`: the tasks' names, comma-separated.
    pub fn list(&self, tasks: &[usize]) -> String {
        tasks
            .iter()
            .map(|&i| self.get(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Task `index`'s subject without the name it begins with (Spec Kit's subjects start
    /// with their ID: `T004 Add the parser`), for a line that names the task already.
    pub fn subject<'a>(&self, index: usize, subject: &'a str) -> &'a str {
        let Some(id) = self.0.as_ref().and_then(|ids| ids.get(index)) else {
            return subject;
        };
        match subject.strip_prefix(id.as_str()) {
            Some(rest) if rest.starts_with([' ', ':', '\t']) => {
                let rest = rest.trim_start_matches([' ', ':', '\t']);
                if rest.is_empty() { subject } else { rest }
            }
            _ => subject,
        }
    }

    /// `T004 Add the parser` (`3 Add the parser` in a `plan.json`): the task's name, then
    /// its subject as [`TaskNames::subject`] gives it.
    pub fn label(&self, index: usize, subject: &str) -> String {
        format!("{} {}", self.get(index), self.subject(index, subject))
    }
}

/// `Task 13.3 is` / `Tasks 2, 13.3 are` (the verb in its `singular` and `plural` forms), the
/// tasks named as [`name`] does.
pub fn tasks_subject(plan: &Plan, indices: &[usize], singular: &str, plural: &str) -> String {
    let names = TaskNames::of(plan).list(indices);
    if indices.len() == 1 {
        format!("Task {names} {singular}")
    } else {
        format!("Tasks {names} {plural}")
    }
}

/// The task `given` names: a task-list ID in a plan generated from a task list, a plan
/// index in a `plan.json`. The error says which names the plan has.
pub fn find(plan: &Plan, given: &str) -> Result<usize, String> {
    let given = given.trim();
    if let Some(ids) = list_ids(plan) {
        if let Some(i) = ids.iter().position(|id| id == given) {
            return Ok(i);
        }
        let shown: Vec<&str> = ids.iter().take(12).map(String::as_str).collect();
        let more = if ids.len() > shown.len() { ", …" } else { "" };
        return Err(format!(
            "no task {given:?} in the task list: its task IDs are {}{more}",
            shown.join(", ")
        ));
    }
    match given.parse::<usize>() {
        Ok(i) if i < plan.tasks.len() => Ok(i),
        _ if plan.tasks.is_empty() => Err(format!("no task {given:?}: the plan has no tasks")),
        _ => Err(format!(
            "no task {given:?}: the plan's tasks are numbered 0 to {}",
            plan.tasks.len() - 1
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::Task;
    use serde_json::json;

    fn plan(n: usize) -> Plan {
        let mut p = crate::testing::example("auth-v2.json");
        p.tasks = (0..n)
            .map(|i| Task {
                subject: format!("t{i}"),
                ..Default::default()
            })
            .collect();
        p
    }

    #[test]
    fn a_task_list_names_its_tasks_by_its_own_ids_a_plan_by_index() {
        let mut p = plan(3);
        assert_eq!(name(&p, 2), "2");
        assert_eq!(tasks_subject(&p, &[0], "was", "were"), "Task 0 was");
        assert_eq!(tasks_subject(&p, &[0, 2], "was", "were"), "Tasks 0, 2 were");
        assert_eq!(find(&p, "1"), Ok(1));
        assert_eq!(
            find(&p, "3").unwrap_err(),
            "no task \"3\": the plan's tasks are numbered 0 to 2"
        );
        p.extra.insert(
            SOURCE.into(),
            json!({"format": "taskmaster", "tasks": [
                {"id": "13.1", "text": "a"}, {"id": "13.3", "text": "b"}, {"id": "14", "text": "c"}
            ]}),
        );
        assert_eq!(name(&p, 1), "13.3");
        assert_eq!(find(&p, "13.3"), Ok(1));
        assert_eq!(
            find(&p, "1").unwrap_err(),
            "no task \"1\" in the task list: its task IDs are 13.1, 13.3, 14"
        );
        assert_eq!(
            tasks_subject(&p, &[0, 2], "is", "are"),
            "Tasks 13.1, 14 are"
        );
        let mut s = plan(1);
        s.extra.insert(
            SPEC_KIT.into(),
            json!({"tasks": [{"id": "T004", "text": "x"}]}),
        );
        assert_eq!(name(&s, 0), "T004");
    }

    #[test]
    fn names_label_a_task_once_and_keep_a_plans_subjects_whole() {
        let p = plan(2);
        let names = TaskNames::of(&p);
        assert_eq!(names.list(&[1, 0]), "1, 0");
        assert_eq!(names.label(1, "t1 stays"), "1 t1 stays");
        let mut s = plan(3);
        s.extra.insert(
            SPEC_KIT.into(),
            json!({"tasks": [{"id": "T001"}, {"id": "T002"}, {"id": "T010"}]}),
        );
        let names = TaskNames::of(&s);
        assert_eq!(names.list(&[0, 2]), "T001, T010");
        assert_eq!(
            names.label(0, "T001 [P] Add the model"),
            "T001 [P] Add the model"
        );
        assert_eq!(
            names.subject(0, "T001 [P] Add the model"),
            "[P] Add the model"
        );
        assert_eq!(names.subject(1, "T002: Wire it"), "Wire it");
        // Only the whole ID at the start is the name: T0010 is not T001, nor is a bare ID.
        assert_eq!(names.subject(0, "T0010 x"), "T0010 x");
        assert_eq!(names.subject(2, "T010"), "T010");
        assert_eq!(names.label(1, "Wire it"), "T002 Wire it");
    }
}
