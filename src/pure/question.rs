//! Questions to the user: what a task asks when it cannot go on alone — the reviewer loop
//! escalated, or a long-run worker returned `NEEDS_DECISION` / `NEEDS_ACTION` — and the
//! user's answer, passed to the task's next attempt.
//!
//! A question lives in the plan, in the blocked task's `question` field (see
//! [`QUESTION_FIELD`]): `{kind, text, options, blockedAt, reply}`. Locally the run prints it
//! and ends resumable (exit 5); `dagexec answer` records the reply and puts the task (and the
//! tasks skipped because of it) back to pending. Pure: the CLI loads and saves the plan.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::pure::graph::Dag;
use crate::pure::plan::model::{Plan, Status, Task};

pub use crate::pure::plan::fields::QUESTION as QUESTION_FIELD;

/// What kind of answer the question wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The reviewer loop escalated: free-text guidance.
    Review,
    /// A long-run worker's `NEEDS_DECISION`: one of `options` (or `defer`).
    Decision,
    /// A long-run worker's `NEEDS_ACTION`: `done` once the action is done.
    Action,
}

/// One option of a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub key: String,
    #[serde(default)]
    pub description: String,
}

/// A question and, once given, its reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub kind: Kind,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<Choice>,
    /// Where the worker stopped (long-run `blocked_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_at: Option<String>,
    #[serde(default)]
    pub reply: Option<String>,
}

impl Question {
    /// A question of `kind` with no options, asked where the task stopped, not answered yet.
    pub fn new(kind: Kind, text: String) -> Question {
        Question {
            kind,
            text,
            options: Vec::new(),
            blocked_at: None,
            reply: None,
        }
    }
}

/// The task's question, if it has one.
pub fn get(task: &Task) -> Option<Question> {
    task.extra
        .get(QUESTION_FIELD)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// The most options a question keeps, and the most characters of an option's key and of its
/// description: the rest is worker output no one would read in a comment.
pub const MAX_OPTIONS: usize = 20;
const MAX_KEY_CHARS: usize = 80;
const MAX_DESCRIPTION_CHARS: usize = 300;

/// Sets the task's question, its text clipped as a result is ([`crate::pure::outcome::clip_result`]:
/// it is worker output, on its way to the plan and a pull request comment), its options at
/// most [`MAX_OPTIONS`], each key one line and each part clipped, and `blocked_at` one line.
pub fn set(task: &mut Task, q: &Question) {
    let mut q = q.clone();
    q.text = crate::pure::outcome::clip_result(&q.text);
    q.options.truncate(MAX_OPTIONS);
    let line = crate::pure::clip::line;
    for c in &mut q.options {
        c.key = line(&c.key, MAX_KEY_CHARS);
        c.description = line(&c.description, MAX_DESCRIPTION_CHARS);
    }
    q.blocked_at = q.blocked_at.map(|b| line(&b, MAX_DESCRIPTION_CHARS));
    task.extra.insert(
        QUESTION_FIELD.into(),
        serde_json::to_value(&q).expect("questions serialise"),
    );
}

/// The question a worker asks in its status line (the worker contract's last non-empty
/// stdout line): `NEEDS_DECISION: …` or `NEEDS_ACTION: …`, the text after the colon. The
/// long-run seed's `OUTPUT_JSON` form is [`crate::sources::longrun::output`]'s.
pub fn from_status_line(output: &str) -> Option<Question> {
    let last = crate::pure::outcome::last_nonempty_line(output)?;
    let (kind, text) = if let Some(t) = last.strip_prefix("NEEDS_DECISION:") {
        (Kind::Decision, t)
    } else if let Some(t) = last.strip_prefix("NEEDS_ACTION:") {
        (Kind::Action, t)
    } else {
        return None;
    };
    let text = text.trim();
    (!text.is_empty()).then(|| Question::new(kind, text.to_string()))
}

/// Whether the user deferred the task's decision (`dagexec answer N defer`): skipped by
/// choice, not because a dependency failed.
pub fn deferred(task: &Task) -> bool {
    task.status == Status::Skipped
        && get(task)
            .is_some_and(|q| q.kind == Kind::Decision && q.reply.as_deref() == Some("defer"))
}

/// Blocked tasks with a question still waiting for its reply, in plan order.
pub fn open(plan: &Plan) -> Vec<(usize, Question)> {
    plan.tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Blocked)
        .filter_map(|(i, t)| get(t).filter(|q| q.reply.is_none()).map(|q| (i, q)))
        .collect()
}

/// The open questions as the run prints them: each question, its options, and the command
/// that answers it. `plan_arg` is `""` for the default plan or ` --plan <path>`.
pub fn render_open(plan: &Plan, plan_arg: &str) -> String {
    let mut s = String::new();
    for (i, q) in open(plan) {
        // What the task needs, and an answer the command line that answers it may give.
        let (heading, example) = match q.kind {
            Kind::Review => ("needs your guidance", "\"<your guidance>\""),
            Kind::Decision => (
                "needs a decision",
                q.options.first().map_or("<choice>", |c| c.key.as_str()),
            ),
            Kind::Action => ("needs an action from you", "done"),
        };
        // A task list's own ID (`13.3`), else the plan index: what `answer` takes.
        let name = crate::pure::plan::ids::name(plan, i);
        let _ = write!(s, "\nTask {name} ({}) {heading}", plan.tasks[i].subject);
        if let Some(at) = &q.blocked_at {
            let _ = write!(s, " at {at}");
        }
        let _ = write!(s, ":\n{}\n", q.text.trim_end());
        for (n, c) in q.options.iter().enumerate() {
            let _ = writeln!(s, "  {}. {}: {}", n + 1, c.key, c.description);
        }
        if q.kind == Kind::Decision {
            s.push_str("  (or: defer — skip this task for now)\n");
        }
        let _ = writeln!(s, "Answer with: dagexec{plan_arg} answer {name} {example}");
    }
    s
}

/// The prompt block that passes the reply back to the task's next attempt, empty when the
/// task has no answered question. The long-run wording is the seed's.
pub fn reply_section(task: &Task) -> String {
    let Some(q) = get(task) else {
        return String::new();
    };
    let Some(reply) = q.reply.as_deref() else {
        return String::new();
    };
    let at = q.blocked_at.as_deref().unwrap_or("where you stopped");
    match q.kind {
        Kind::Decision => format!("## User decision\nUser decided: {reply}. Continue from {at}.\n"),
        Kind::Action => "## User action\nUser completed action. Verify and continue.\n".into(),
        Kind::Review => format!(
            "## The user's answer\nThe review loop was escalated to the user with this question:\n{}\n\nThe user answered:\n{reply}\n",
            q.text.trim_end()
        ),
    }
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("no task {index} (the plan has {count} tasks)")]
    NoTask { index: usize, count: usize },
    #[error("task {task} has no open question (it is {status})")]
    NoQuestion { task: String, status: Status },
    #[error("task {task}: {given:?} is not one of the options ({options})")]
    NotAnOption {
        task: String,
        given: String,
        options: String,
    },
    #[error("task {task} waits for an action: answer `done` once it is done, not {given:?}")]
    NotDone { task: String, given: String },
    #[error("task {task}: the answer is empty")]
    Empty { task: String },
}

impl AnswerError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            AnswerError::NoTask { .. } | AnswerError::NoQuestion { .. } => {
                "`dagexec status` lists the tasks; a run prints the questions that wait for you."
                    .into()
            }
            AnswerError::NotAnOption { .. } => {
                "Answer with an option's key or number, or `defer` to skip the task.".into()
            }
            AnswerError::NotDone { .. } => "Do the action first, then answer `done`.".into(),
            AnswerError::Empty { .. } => "Give the answer as the last argument.".into(),
        }
    }
}

/// What an answer changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The reply as recorded (an option's number resolved to its key).
    pub reply: String,
    /// The task's new status: pending, or skipped when a decision was deferred.
    pub status: Status,
    /// Tasks that were skipped because of this one and are pending again.
    pub reopened: Vec<usize>,
}

/// Records `text` as the reply to task `index`'s open question. The task goes back to
/// pending with a fresh set of attempts (its review history stays, so its next prompt has
/// all the feedback and the answer), and so do the tasks the cascade skipped because of it.
/// `defer` on a decision marks it skipped instead (the seed's "defer").
pub fn answer(
    plan: &mut Plan,
    dag: &Dag,
    index: usize,
    text: &str,
) -> Result<Answered, AnswerError> {
    let count = plan.tasks.len();
    let task = plan
        .tasks
        .get(index)
        .ok_or(AnswerError::NoTask { index, count })?;
    // Named as messages name it: a task list's own ID (`T004`), else the plan index.
    let name = crate::pure::plan::ids::name(plan, index);
    let mut q = open_question(task, &name)?;
    let given = text.trim();
    if given.is_empty() {
        return Err(AnswerError::Empty { task: name });
    }
    let (reply, status) = reply_to(&q, &name, given)?;
    q.reply = Some(reply.clone());
    let task = &mut plan.tasks[index];
    set(task, &q);
    task.status = status;
    task.attempts = Some(0);
    task.result = Some(if status == Status::Skipped {
        "deferred by the user".to_string()
    } else {
        format!("answered: {reply}")
    });
    // A deferred long-run plan does not stop the plans after it (the seed: "CONTINUE to next
    // plan"); the next run skips again those that name it in depends_on.
    let long_run = plan.tasks[index]
        .extra
        .contains_key(crate::pure::plan::fields::LONG_RUN);
    let reopened = if status == Status::Pending || long_run {
        crate::pure::update::reopen_skipped_dependents(plan, dag, index)
    } else {
        Vec::new()
    };
    Ok(Answered {
        reply,
        status,
        reopened,
    })
}

/// The open question of `task` (named `name`): its own, or for a task a worker blocked, one
/// in the worker's words.
fn open_question(task: &Task, name: &str) -> Result<Question, AnswerError> {
    match get(task) {
        Some(q) if q.reply.is_none() && task.status == Status::Blocked => Ok(q),
        // A worker that answered `BLOCKED: reason` asks in its own words: the answer goes
        // to its next attempt like an escalated review's.
        _ if task.status == Status::Blocked => Ok(Question::new(
            Kind::Review,
            format!(
                "Task {name} is blocked: {}",
                task.result.as_deref().unwrap_or("no reason given")
            ),
        )),
        _ => Err(AnswerError::NoQuestion {
            task: name.to_string(),
            status: task.status,
        }),
    }
}

/// The reply `given` makes to `q`, and the status it gives the task (skipped for a deferred
/// decision, else pending).
fn reply_to(q: &Question, name: &str, given: &str) -> Result<(String, Status), AnswerError> {
    let mut status = Status::Pending;
    let reply = match q.kind {
        Kind::Review => given.to_string(),
        Kind::Action if given.eq_ignore_ascii_case("done") => "done".to_string(),
        Kind::Action => {
            return Err(AnswerError::NotDone {
                task: name.to_string(),
                given: given.into(),
            });
        }
        Kind::Decision if given.eq_ignore_ascii_case("defer") => {
            status = Status::Skipped;
            "defer".to_string()
        }
        Kind::Decision => {
            let by_number = given
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|n| q.options.get(n));
            let by_key = q.options.iter().find(|c| c.key.eq_ignore_ascii_case(given));
            match by_number.or(by_key) {
                Some(c) => c.key.clone(),
                None if q.options.is_empty() => given.to_string(),
                None => {
                    return Err(AnswerError::NotAnOption {
                        task: name.to_string(),
                        given: given.into(),
                        options: q
                            .options
                            .iter()
                            .map(|c| c.key.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
        }
    };
    Ok((reply, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20 §4: a question is worker output on its way to the plan and a comment.
    #[test]
    fn a_questions_text_is_clipped_as_a_result_is() {
        let line = format!("NEEDS_DECISION: {}", "which? ".repeat(100_000));
        let q = from_status_line(&line).expect("a question");
        let mut task: Task = serde_json::from_value(serde_json::json!({
            "subject": "s", "status": "blocked", "blockedBy": []
        }))
        .expect("a task");
        set(&mut task, &q);
        let text = get(&task).expect("kept").text;
        assert!(
            text.len() <= crate::pure::outcome::RESULT_MAX_BYTES,
            "{}",
            text.len()
        );
        assert!(text.starts_with("which? which?") && text.contains("clipped: 699999 bytes"));
    }

    /// A worker's question options are worker output too: few, one line each, short.
    #[test]
    fn a_questions_options_are_bounded() {
        let q = Question {
            kind: Kind::Decision,
            text: "which?".into(),
            options: (0..1000)
                .map(|n| Choice {
                    key: format!("k{n}\n## injected {}", "x".repeat(10_000)),
                    description: "d".repeat(100_000),
                })
                .collect(),
            blocked_at: Some(format!("here\n{}", "y".repeat(100_000))),
            reply: None,
        };
        let mut task: Task = serde_json::from_value(serde_json::json!({
            "subject": "s", "status": "blocked", "blockedBy": []
        }))
        .expect("a task");
        set(&mut task, &q);
        let kept = get(&task).expect("kept");
        assert_eq!(kept.options.len(), MAX_OPTIONS);
        for c in &kept.options {
            assert!(!c.key.contains('\n'), "{:?}", c.key);
            assert!(
                c.key.chars().count() <= MAX_KEY_CHARS + 1,
                "{}",
                c.key.len()
            );
            assert!(c.description.chars().count() <= MAX_DESCRIPTION_CHARS + 1);
        }
        assert!(kept.options[0].key.starts_with("k0"));
        let at = kept.blocked_at.expect("kept");
        assert!(!at.contains('\n') && at.chars().count() <= MAX_DESCRIPTION_CHARS + 1);
        assert!(serde_json::to_string(&task).unwrap().len() < 20_000);
    }

    #[test]
    fn a_status_line_question() {
        let q = from_status_line("work\nNEEDS_DECISION: Which db?\n\n").unwrap();
        assert_eq!((q.kind, q.text.as_str()), (Kind::Decision, "Which db?"));
        let q = from_status_line("NEEDS_ACTION:  verify the email ").unwrap();
        assert_eq!(
            (q.kind, q.text.as_str()),
            (Kind::Action, "verify the email")
        );
        assert_eq!(from_status_line("NEEDS_DECISION:"), None);
        assert_eq!(from_status_line("NEEDS_DECISION: x\nCOMPLETED: y"), None);
        assert_eq!(from_status_line("needs_decision: x"), None);
    }
    use crate::testing::{plan_of, task};

    #[expect(clippy::needless_pass_by_value, reason = "a test fixture")]
    fn blocked(q: Question) -> Plan {
        let mut plan = plan_of(vec![
            task(&[], &[], &[]),
            task(&[0], &[], &[]),
            task(&[1], &[], &[]),
        ]);
        plan.tasks[0].status = Status::Blocked;
        plan.tasks[0].subject = "Pick a store".into();
        plan.tasks[0].attempts = Some(3);
        set(&mut plan.tasks[0], &q);
        plan.tasks[1].status = Status::Skipped;
        plan.tasks[2].status = Status::Skipped;
        plan
    }

    fn decision() -> Question {
        Question {
            kind: Kind::Decision,
            text: "Which database?".into(),
            options: vec![
                Choice {
                    key: "postgres".into(),
                    description: "relational".into(),
                },
                Choice {
                    key: "sqlite".into(),
                    description: "embedded".into(),
                },
            ],
            blocked_at: Some("Task 2".into()),
            reply: None,
        }
    }

    #[test]
    fn a_decision_by_number_reopens_the_task_and_its_dependents() {
        let mut plan = blocked(decision());
        let dag = Dag::build(&plan).unwrap();
        let a = answer(&mut plan, &dag, 0, "2").unwrap();
        assert_eq!(a.reply, "sqlite");
        assert_eq!(a.reopened, vec![1, 2]);
        assert_eq!(plan.tasks[0].status, Status::Pending);
        assert_eq!(plan.tasks[0].attempts(), 0);
        assert!(open(&plan).is_empty());
        assert_eq!(
            reply_section(&plan.tasks[0]),
            "## User decision\nUser decided: sqlite. Continue from Task 2.\n"
        );
        // Answered once: no second answer.
        assert_eq!(
            answer(&mut plan, &dag, 0, "postgres").unwrap_err(),
            AnswerError::NoQuestion {
                task: "0".into(),
                status: Status::Pending
            }
        );
    }

    #[test]
    fn wrong_answers_are_refused_with_what_is_expected() {
        let mut plan = blocked(decision());
        let dag = Dag::build(&plan).unwrap();
        let e = answer(&mut plan, &dag, 0, "mysql").unwrap_err();
        assert_eq!(
            e.to_string(),
            "task 0: \"mysql\" is not one of the options (postgres, sqlite)"
        );
        assert_eq!(
            answer(&mut plan, &dag, 7, "x").unwrap_err().to_string(),
            "no task 7 (the plan has 3 tasks)"
        );
        let mut plan = blocked(Question {
            kind: Kind::Action,
            text: "Verify the email".into(),
            options: vec![],
            blocked_at: None,
            reply: None,
        });
        let e = answer(&mut plan, &dag, 0, "later").unwrap_err();
        assert!(matches!(e, AnswerError::NotDone { .. }));
        answer(&mut plan, &dag, 0, "DONE").unwrap();
        assert!(
            reply_section(&plan.tasks[0]).contains("User completed action. Verify and continue.")
        );
    }

    #[test]
    fn defer_skips_and_keeps_dependents_skipped() {
        let mut plan = blocked(decision());
        let dag = Dag::build(&plan).unwrap();
        let a = answer(&mut plan, &dag, 0, "defer").unwrap();
        assert_eq!((a.status, a.reopened.len()), (Status::Skipped, 0));
        assert_eq!(plan.tasks[1].status, Status::Skipped);
    }

    #[test]
    fn snapshot_open_questions() {
        let mut plan = blocked(decision());
        plan.tasks[1].status = Status::Blocked;
        plan.tasks[1].subject = "Write the handler".into();
        set(
            &mut plan.tasks[1],
            &Question {
                kind: Kind::Review,
                text: "The reviewer rejected task 1 on all 3 attempts.".into(),
                options: vec![],
                blocked_at: None,
                reply: None,
            },
        );
        insta::assert_snapshot!(render_open(&plan, ""));
    }
}
