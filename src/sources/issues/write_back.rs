//! What a plan made of issues says back to GitHub, as values (pure): which issue each task
//! is, the parent issue (where the status comment goes too), the `Closes #N` lines of the
//! pull request body — one per completed task, so merging the pull request closes them and
//! nothing is closed before; `owner/repo#N` for an issue of another repository — and the note
//! a blocked task's sub-issue gets (the question itself is asked on the pull request).

use std::fmt::Write as _;

use super::body::Ref;
use super::convert::{PLAN_FIELD, TASK_FIELD};
use crate::pure::plan::model::{Plan, Status};

/// What the plan's record ([`PLAN_FIELD`]) says under `key`, for a plan made of issues.
pub(crate) fn recorded<'p>(plan: &'p Plan, key: &str) -> Option<&'p serde_json::Value> {
    plan.extra.get(PLAN_FIELD)?.get(key)
}

/// The issue of each task of a plan made of issues, by index (`None` for a plan of another
/// kind). Read from the plan's own record first, as completion trims a task's fields.
pub fn issue_keys(plan: &Plan) -> Vec<Option<Ref>> {
    let listed = recorded(plan, "tasks").and_then(|v| v.as_array());
    let key = |v: &serde_json::Value| {
        Some(Ref::new(
            v.get("repo")?.as_str()?,
            v.get("number")?.as_u64()?,
        ))
    };
    (0..plan.tasks.len())
        .map(|i| {
            listed
                .and_then(|l| l.get(i))
                .and_then(key)
                .or_else(|| plan.tasks[i].extra.get(TASK_FIELD).and_then(key))
        })
        .collect()
}

/// `Closes #N` for each completed task of a plan made of issues (empty for any other plan),
/// in plan order; `#N` relative to the repository the plan was read for.
pub fn closes(plan: &Plan) -> Vec<String> {
    let Some(repo) = recorded(plan, "repo").and_then(|v| v.as_str()) else {
        return Vec::new();
    };
    issue_keys(plan)
        .into_iter()
        .zip(&plan.tasks)
        .filter(|(_, t)| t.status == Status::Completed)
        .filter_map(|(k, _)| k.map(|k| format!("Closes {}", k.show(repo))))
        .collect()
}

/// Where a plan made of issues is kept (`.design/issues/<parent>/plan.json`); `None` for a
/// plan of another kind.
pub fn state_path(plan: &Plan) -> Option<String> {
    let parent = recorded(plan, "parent")?.as_u64()?;
    Some(super::convert::plan_rel(parent))
}

/// The parent issue of a plan made of issues read for `repo` (`owner/name`): its number, when
/// it is an issue of `repo`.
pub fn parent_in(plan: &Plan, repo: &str) -> Option<u64> {
    let record = plan.extra.get(PLAN_FIELD)?;
    let parent_repo = record
        .get("parentRepo")
        .or_else(|| record.get("repo"))?
        .as_str()?;
    parent_repo
        .eq_ignore_ascii_case(repo)
        .then(|| record.get("parent")?.as_u64())
        .flatten()
}

/// The parent's status comment's list of what the reading left out (authors without write
/// access), from the plan's record: one `- left out #N: why` line each ([`note_lines`]).
/// Every rewrite of that comment keeps it, to the run's end.
pub fn left_out_lines(plan: &Plan, inert: impl Fn(&str) -> String) -> String {
    let notes: Vec<super::Note> = recorded(plan, "leftOut")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    note_lines(plan, "left out ", &notes, inert)
}

/// `notes` as the parent's status comment lists them: one `- {label}#N: why` line each, each
/// line starting with a line break; empty when there is none. The why made `inert` (the
/// Action's one rule, `action::report::inert`: it may name an author, whom a mention would
/// ping at every rewrite); the issue linked when it reads as one of `plan`'s repository's.
pub fn note_lines(
    plan: &Plan,
    label: &str,
    notes: &[super::Note],
    inert: impl Fn(&str) -> String,
) -> String {
    let repo = recorded(plan, "repo")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let mut s = String::new();
    for n in notes {
        let issue = super::body::one_ref(repo, &n.issue).map(|r| r.show(repo));
        let _ = write!(
            s,
            "\n- {label}{}: {}",
            issue.unwrap_or_else(|| inert(&crate::pure::sanitize::line(&n.issue))),
            inert(&crate::pure::sanitize::line(&n.text))
        );
    }
    s
}

/// The sub-issues (of `repo`) of the tasks with an open question, with the note each gets:
/// where the question is asked and how to answer it.
pub fn question_notes(plan: &Plan, repo: &str, pr: u64) -> Vec<(usize, u64, String)> {
    let keys = issue_keys(plan);
    crate::pure::question::open(plan)
        .into_iter()
        .filter_map(|(i, _)| {
            let key = keys.get(i)?.as_ref()?;
            key.repo.eq_ignore_ascii_case(repo).then(|| {
                let name = crate::pure::plan::ids::name(plan, i);
                let note = format!(
                    "dagexec's task {name} (this issue) waits for an answer: its question is asked on pull request #{pr}; answer there with `/execute answer {name} …`.\n"
                );
                (i, key.number, note)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::issues::{Issue, ReadIssues, convert};

    #[test]
    fn completed_tasks_close_their_issues_and_only_they() {
        let sub = |repo: &str, n: u64, closed: bool| Issue {
            repo: repo.into(),
            number: n,
            title: format!("t{n}"),
            author: "w".into(),
            closed,
            ..Issue::default()
        };
        let mut parent = sub("o/r", 1, false);
        parent.sub_issues = vec![
            sub("o/r", 2, false),
            sub("x/lib", 3, false),
            sub("o/r", 4, true),
        ];
        let r = ReadIssues {
            repo: "o/r".into(),
            parent,
            writers: ["w".to_string()].into(),
            ..ReadIssues::default()
        };
        let mut plan = convert(&r).unwrap().plan;
        assert_eq!(closes(&plan), ["Closes #4"]);
        plan.tasks[1].status = Status::Completed;
        // Completion trims a task's fields: the plan's record still knows its issue.
        crate::pure::update::trim(&mut plan.tasks[1]);
        assert_eq!(closes(&plan), ["Closes x/lib#3", "Closes #4"]);
        plan.extra.remove(PLAN_FIELD);
        assert!(closes(&plan).is_empty());
    }

    /// The status comment's left-out list mentions nobody (a non-writer's login would be
    /// pinged at every rewrite) and still links the issue.
    #[test]
    fn the_left_out_list_mentions_nobody() {
        let sub = |n: u64, author: &str| Issue {
            repo: "o/r".into(),
            number: n,
            author: author.into(),
            ..Issue::default()
        };
        let mut parent = sub(1, "w");
        parent.sub_issues = vec![sub(2, "w"), sub(3, "stranger")];
        let r = ReadIssues {
            repo: "o/r".into(),
            parent,
            writers: ["w".to_string()].into(),
            ..ReadIssues::default()
        };
        let lines = left_out_lines(&convert(&r).unwrap().plan, crate::action::report::inert);
        assert!(!lines.contains("@stranger"), "{lines}");
        assert!(
            lines.starts_with("\n- left out #3: written by @&#8203;stranger"),
            "{lines}"
        );
        assert!(lines.contains("`/execute include #3`"), "{lines}");
    }
}
