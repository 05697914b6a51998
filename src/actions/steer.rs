//! `dagexec action comment`: an `/execute` comment on a pull request, acted on. The comment
//! is classified and its author's permission checked ([`super::comment`]); then the command
//! changes the plan on the pull request's head branch (committed and pushed), and usually
//! starts a round there with `workflow_dispatch`. The comment's text is data throughout: it
//! goes into the plan as an answer, never into a shell.
//!
//! Two jobs, because a command that commits to the execution branch must wait for a running
//! round of that branch (one concurrency group per branch, `dagexec-<branch>`), and the
//! branch is known only after asking the API for the pull request's head:
//! - [`Phase::Route`] (job `comment`, no group): permission, 👀, replies; `/execute`,
//!   `status` and `abort` are done here (they push nothing; an abort must reach the running
//!   round, not wait for it); `proceed`, `answer` and `retry` are handed on with the branch.
//! - [`Phase::Apply`] (job `steer`, in the branch's group): checks the permission again,
//!   commits the change to the plan, pushes and starts a round.

use std::path::Path;

use super::comment::{self, Command, Outcome, Trigger};
use super::report::Links;
use super::runtime::Context;
use super::{ActionError, Inputs};
use crate::git::{RemoteAuth, Repo};
use crate::github::Client;
use crate::plan::{self, Plan, model::Status};

/// In the status comment: the user asked to stop after the current round.
pub const ABORT_MARKER: &str = "<!-- dagexec:abort-requested -->";
/// In the plan's progress: the user answered "proceed anyway" to failed pre-flight checks.
pub const PROCEED_FIELD: &str = "dagexecPreflight";

/// What the command did, for the log and the job's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Steered {
    pub message: String,
    /// A round was dispatched on this branch.
    pub dispatched: Option<String>,
    /// The change to the plan is left to the `steer` job, in this branch's group.
    pub to_apply: Option<String>,
}

/// Which half of a command this job does (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Route,
    Apply,
}

/// Whether `command` changes the plan (and so runs in the `steer` job).
pub fn changes_plan(command: &Command) -> bool {
    matches!(
        command,
        Command::Proceed | Command::Answer { .. } | Command::Retry { .. }
    )
}

/// Handles the event at `ctx.event_path` in the checkout at `root`.
pub fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Context,
    client_for: impl FnOnce(&Trigger) -> Result<Client, ActionError>,
    rt: &tokio::runtime::Runtime,
    phase: Phase,
) -> Result<Steered, ActionError> {
    let payload: serde_json::Value = match &ctx.event_path {
        Some(p) => std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| {
                ActionError::Input(format!("cannot read the event at {}", p.display()))
            })?,
        None => {
            return Err(ActionError::Input(
                "no GITHUB_EVENT_PATH: `comment` handles an issue_comment event".into(),
            ));
        }
    };
    let trigger = match comment::classify(&ctx.event_name, &payload) {
        Ok(t) => t,
        Err(why) => {
            return Ok(Steered {
                message: format!("Ignoring this event: {why}."),
                ..Default::default()
            });
        }
    };
    if phase == Phase::Apply && !changes_plan(&trigger.command) {
        return Ok(Steered {
            message: "The comment job handled this command.".into(),
            ..Default::default()
        });
    }
    let client = client_for(&trigger)?;
    let (branch, command) =
        match rt.block_on(comment::handle_as(&client, &trigger, phase == Phase::Route))? {
            Outcome::Denied => {
                return Ok(Steered {
                    message: format!("@{} may not run dagexec here; replied.", trigger.user),
                    ..Default::default()
                });
            }
            Outcome::Replied => {
                return Ok(Steered {
                    message: "Replied to the comment.".into(),
                    ..Default::default()
                });
            }
            Outcome::Run {
                head_branch,
                command,
            } => (head_branch, command),
        };
    if phase == Phase::Route && changes_plan(&command) {
        return Ok(Steered {
            message: format!(
                "The change to the plan is made by the steer job, once no round of {branch} runs."
            ),
            to_apply: Some(branch),
            ..Default::default()
        });
    }
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    let Some(tip) = repo.fetch_branch(&branch, &auth)? else {
        return Err(ActionError::Input(format!(
            "the pull request's branch {branch} is not on the remote"
        )));
    };
    repo.checkout_detached(&tip)?;
    let inputs = &super::with_plan(repo.root(), inputs)?;
    let plan_path = repo.root().join(&inputs.plan_rel);
    let mut plan = plan::load(&plan_path).map_err(crate::plan::error::PlanErrors::from)?;
    let dag = plan::validate::check(&plan, Some(&inputs.plan_rel))?;
    let pr = trigger.pr_number;
    let reply = |text: String| -> Result<(), ActionError> {
        rt.block_on(client.comment(pr, &text))?;
        Ok(())
    };
    let by = format!("`/execute` by @{}", trigger.user);
    let change: Option<String> = match &command {
        Command::Start => None,
        Command::Status => {
            let round = crate::run::round_counter(&plan);
            let body = comment::status_body(
                &plan,
                round,
                &Links {
                    run: ctx.run_url(),
                    logs: Default::default(),
                },
                &waiting_on(&plan),
            );
            let marked = rt.block_on(comment::trusted_marked(
                &client,
                pr,
                comment::Identity::default(),
            ))?;
            rt.block_on(client.upsert_marked_comment(
                pr,
                comment::STATUS_MARKER,
                &body,
                &marked.own,
            ))?;
            return Ok(Steered {
                message: "Refreshed the status comment.".into(),
                ..Default::default()
            });
        }
        Command::Abort => {
            let round = crate::run::round_counter(&plan);
            let body = format!(
                "{}\n{ABORT_MARKER}\n**Stopping after the current round** ({by}; a round that takes several workflow runs stops after the current one). Comment `/execute` to resume.\n",
                comment::status_body(
                    &plan,
                    round,
                    &Links {
                        run: ctx.run_url(),
                        logs: Default::default()
                    },
                    "the current round to end"
                )
            );
            let marked = rt.block_on(comment::trusted_marked(
                &client,
                pr,
                comment::Identity::default(),
            ))?;
            rt.block_on(client.upsert_marked_comment(
                pr,
                comment::STATUS_MARKER,
                &body,
                &marked.own,
            ))?;
            return Ok(Steered {
                message: "Abort requested: the run stops after the current round.".into(),
                ..Default::default()
            });
        }
        Command::Proceed => {
            plan.progress
                .extra
                .insert(PROCEED_FIELD.into(), "proceed".into());
            Some(format!(
                "dagexec: proceed despite failed pre-flight checks\n\nAsked for with {by}.\n"
            ))
        }
        Command::Answer { task, text } => {
            let index = *task;
            if let Some(t) = plan.tasks.get_mut(index) {
                // A plain BLOCKED (no question recorded) is answered like a review: free text.
                if t.status == Status::Blocked && crate::question::get(t).is_none() {
                    crate::question::set(
                        t,
                        &blocked_question(index, t.result.as_deref().unwrap_or("")),
                    );
                }
            }
            match crate::question::answer(&mut plan, &dag, index, &text.replace("\r\n", "\n")) {
                Ok(a) => Some(format!(
                    "dagexec: answer to task {index}\n\nGiven with {by}; task {index}{} pending again.\n",
                    if a.reopened.is_empty() {
                        String::new()
                    } else {
                        format!(" and tasks {:?}", a.reopened)
                    }
                )),
                Err(e) => {
                    reply(format!(
                        "dagexec could not take that answer: {e}\n\n{}",
                        e.hint()
                    ))?;
                    return Ok(Steered {
                        message: format!("Answer refused: {e}"),
                        ..Default::default()
                    });
                }
            }
        }
        Command::Retry { task } => match retry(&mut plan, &dag, *task) {
            Ok(reopened) => Some(format!(
                "dagexec: retry task {task}\n\nAsked for with {by}; pending again: {reopened:?}.\n"
            )),
            Err(why) => {
                reply(format!("dagexec cannot retry that: {why}"))?;
                return Ok(Steered {
                    message: format!("Retry refused: {why}"),
                    ..Default::default()
                });
            }
        },
        Command::Unknown(_) => unreachable!("handle replies to unknown commands"),
    };
    if let Some(message) = change {
        plan::save(&plan, &plan_path).map_err(|source| ActionError::Write {
            path: plan_path.clone(),
            source,
        })?;
        repo.commit(&message, std::slice::from_ref(&inputs.plan_rel))?;
        super::push_with_rebase(&repo, &branch, &auth, |line| println!("{line}"))?;
    }
    let dispatch = super::dispatch_inputs(&inputs.plan_rel, &branch);
    rt.block_on(client.dispatch(&inputs.workflow, &branch, &dispatch))?;
    Ok(Steered {
        message: format!("Started a round on {branch}."),
        dispatched: Some(branch),
        to_apply: None,
    })
}

/// The question a plain BLOCKED result asks.
pub fn blocked_question(index: usize, reason: &str) -> crate::question::Question {
    crate::question::Question {
        kind: crate::question::Kind::Review,
        text: format!("Task {index} is blocked: {reason}"),
        options: Vec::new(),
        blocked_at: None,
        reply: None,
    }
}

/// `/execute retry N`: a failed, blocked or skipped task gets a fresh set of attempts, and
/// what the cascade skipped because of it is pending again.
pub fn retry(plan: &mut Plan, dag: &crate::graph::Dag, index: usize) -> Result<Vec<usize>, String> {
    let count = plan.tasks.len();
    let Some(t) = plan.tasks.get_mut(index) else {
        return Err(format!("task {index}: no such task (the plan has {count})"));
    };
    if !matches!(t.status, Status::Failed | Status::Blocked | Status::Skipped) {
        return Err(format!(
            "task {index} is {}; only a failed, blocked or skipped task can be retried",
            t.status
        ));
    }
    t.status = Status::Pending;
    t.attempts = Some(0);
    t.result = None;
    t.extra.shift_remove(super::work::RETRY_PROMPT_FIELD);
    t.extra.shift_remove(crate::question::QUESTION_FIELD);
    let mut all = vec![index];
    all.extend(crate::update::reopen_skipped_dependents(plan, dag, index));
    all.sort_unstable();
    Ok(all)
}

/// What the status comment says the run waits on.
pub fn waiting_on(plan: &Plan) -> String {
    let open = crate::question::open(plan);
    let blocked: Vec<usize> = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Blocked)
        .map(|(i, _)| i)
        .collect();
    if plan.tasks.iter().all(|t| t.status == Status::Completed) {
        "nothing: every task completed".into()
    } else if !open.is_empty() || !blocked.is_empty() {
        let mut ids: Vec<usize> = open.iter().map(|(i, _)| *i).chain(blocked).collect();
        ids.sort_unstable();
        ids.dedup();
        format!("you: answer the question(s) of task(s) {ids:?} (`/execute answer N …`)")
    } else if plan.count(Status::Pending) > 0 {
        "the next round".into()
    } else {
        "you: nothing is pending; `/execute retry N` runs a failed task again".into()
    }
}

/// The comment a question gets on the pull request, found again by its marker.
pub fn question_marker(key: &str) -> String {
    format!("<!-- dagexec:question:{key} -->")
}

/// The text of a task's question comment: the question, its options, the exact replies.
pub fn question_comment(index: usize, subject: &str, q: &crate::question::Question) -> String {
    let mut s = format!(
        "{}\n### dagexec: task {index} ({}) needs you\n\n{}\n",
        question_marker(&index.to_string()),
        subject.lines().next().unwrap_or(""),
        q.text.trim()
    );
    if !q.options.is_empty() {
        s.push_str("\nOptions:\n");
        for (n, c) in q.options.iter().enumerate() {
            s.push_str(&format!("{}. `{}` — {}\n", n + 1, c.key, c.description));
        }
    }
    let example = match q.kind {
        crate::question::Kind::Decision => q
            .options
            .first()
            .map(|c| c.key.clone())
            .unwrap_or_else(|| "<option>".into()),
        crate::question::Kind::Action => "done".into(),
        crate::question::Kind::Review => "<your answer>".into(),
    };
    s.push_str(&format!(
        "\nReply with a comment:\n\n```\n/execute answer {index} {example}\n```\n\nor `/execute retry {index}` to run it again as it is.\n"
    ));
    s
}

/// The pre-flight question: the failed checks and the reply that proceeds anyway.
pub fn preflight_comment(message: &str) -> String {
    format!(
        "{}\n### dagexec: pre-flight checks failed\n\n```\n{}\n```\n\nFix what they check and comment `/execute`, or reply with a comment:\n\n```\n/execute proceed\n```\n\nto run anyway.\n",
        question_marker("preflight"),
        message.trim()
    )
}
