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
        // The command is kept on the pull request as dagexec's own comment: whichever job
        // writes the branch next applies it (the steer job below, or — when GitHub cancels
        // that pending job because a round got there first — the running round's writer).
        // Found again by its marker, so a re-run of this job queues nothing twice.
        let marker = steer_marker(trigger.comment_id);
        let own = rt
            .block_on(comment::trusted_marked(
                &client,
                trigger.pr_number,
                comment::Identity {
                    app_id: inputs.app_id,
                },
            ))?
            .own;
        if !own.iter().any(|c| c.starts_with(&marker)) {
            rt.block_on(client.comment(
                trigger.pr_number,
                &format!(
                    "{marker}\n⏳ Queued: {} — applied by the next job that writes `{branch}` (at once when no round of it runs, else when the running round ends).\n",
                    command_text(&command)
                ),
            ))?;
        }
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
    // Only the archive is left when the job that completed the plan died before publishing:
    // `/execute` (a round there finishes the run), `status` and `abort` read it; nothing
    // changes it.
    let (mut plan, archived) = super::load_plan(&repo, &inputs.plan_rel)?;
    if let (Some(rel), true) = (&archived, changes_plan(&command)) {
        let text = format!(
            "Every task is completed and the plan is archived as `{rel}`: there is nothing left to change. Comment `/execute` to finish the run on the pull request."
        );
        rt.block_on(client.comment(trigger.pr_number, &text))?;
        return Ok(Steered {
            message: text,
            ..Default::default()
        });
    }
    let dag = plan::validate::check(&plan, Some(archived.as_deref().unwrap_or(&inputs.plan_rel)))?;
    let pr = trigger.pr_number;
    let reply = |text: String| -> Result<(), ActionError> {
        rt.block_on(client.comment(pr, &text))?;
        Ok(())
    };
    let by = format!("`/execute` by @{}", trigger.user);
    // Whether queued changes were committed before this command's own.
    let mut caught_up = false;
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
        Command::Proceed | Command::Answer { .. } | Command::Retry { .. } => {
            // Commands queued earlier whose steer job GitHub cancelled (one pending job per
            // branch group) are applied first, in order; then this one, unless a round's
            // writer applied it already.
            let me = comment::Identity {
                app_id: inputs.app_id,
            };
            let applied = rt.block_on(catch_up(
                &client,
                pr,
                me,
                &repo,
                &plan_path,
                &inputs.plan_rel,
                &mut plan,
                &dag,
                Some(&trigger),
            ))?;
            for line in &applied {
                println!("{line}");
            }
            caught_up = !applied.is_empty();
            if steered(&plan).contains(&trigger.comment_id) {
                None
            } else {
                match apply(&mut plan, &dag, &command, &by) {
                    Ok(message) => {
                        record(&mut plan, trigger.comment_id);
                        Some(message)
                    }
                    Err(refusal) => {
                        reply(refusal.clone())?;
                        return Ok(Steered {
                            message: refusal,
                            ..Default::default()
                        });
                    }
                }
            }
        }
        Command::Unknown(_) => unreachable!("handle replies to unknown commands"),
    };
    if let Some(message) = &change {
        plan::save(&plan, &plan_path).map_err(|source| ActionError::Write {
            path: plan_path.clone(),
            source,
        })?;
        repo.commit(message, std::slice::from_ref(&inputs.plan_rel))?;
    }
    if change.is_some() || caught_up {
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

/// The start of the marker of a queued plan change: `<!-- dagexec:steer:<comment id> -->`,
/// written by the comment job once the commenter's permission is checked.
pub const STEER_MARKER_PREFIX: &str = "<!-- dagexec:steer:";

/// The marker of the plan change asked for in comment `id`.
pub fn steer_marker(id: u64) -> String {
    format!("{STEER_MARKER_PREFIX}{id} -->")
}

/// In the plan's progress: the `/execute` comments whose plan change is applied (oldest
/// first, the newest [`STEERED_KEPT`]): each is applied exactly once, by whichever job writes
/// the branch first, since the record is committed with the change.
pub const STEERED_FIELD: &str = "dagexecSteered";

/// How many applied comments the plan remembers.
pub const STEERED_KEPT: usize = 500;

/// The comments whose change the plan records as applied.
pub fn steered(plan: &Plan) -> Vec<u64> {
    plan.progress
        .extra
        .get(STEERED_FIELD)
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_u64())
        .collect()
}

/// Records comment `id` as applied.
fn record(plan: &mut Plan, id: u64) {
    let mut ids = steered(plan);
    if !ids.contains(&id) {
        ids.push(id);
    }
    let keep = ids.len().saturating_sub(STEERED_KEPT);
    plan.progress
        .extra
        .insert(STEERED_FIELD.into(), ids[keep..].to_vec().into());
}

/// A plan-changing command in words, for the queued reply.
fn command_text(command: &Command) -> String {
    match command {
        Command::Proceed => "`/execute proceed`".into(),
        Command::Answer { task, .. } => format!("the answer to task {task}"),
        Command::Retry { task } => format!("`/execute retry {task}`"),
        _ => "the command".into(),
    }
}

/// Applies a plan-changing `command` to `plan`: the commit message (`by` says who asked),
/// or why it cannot be applied (a reply for the pull request, with the fix).
pub fn apply(
    plan: &mut Plan,
    dag: &crate::graph::Dag,
    command: &Command,
    by: &str,
) -> Result<String, String> {
    match command {
        Command::Proceed => {
            plan.progress
                .extra
                .insert(PROCEED_FIELD.into(), "proceed".into());
            Ok(format!(
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
            match crate::question::answer(plan, dag, index, &text.replace("\r\n", "\n")) {
                Ok(a) => Ok(format!(
                    "dagexec: answer to task {index}\n\nGiven with {by}; task {index}{} pending again.\n",
                    if a.reopened.is_empty() {
                        String::new()
                    } else {
                        format!(" and tasks {:?}", a.reopened)
                    }
                )),
                Err(e) => Err(format!(
                    "dagexec could not take that answer: {e}\n\n{}",
                    e.hint()
                )),
            }
        }
        Command::Retry { task } => match retry(plan, dag, *task) {
            Ok(reopened) => Ok(format!(
                "dagexec: retry task {task}\n\nAsked for with {by}; pending again: {reopened:?}.\n"
            )),
            Err(why) => Err(format!("dagexec cannot retry that: {why}")),
        },
        other => Err(format!("{other:?} does not change the plan")),
    }
}

/// Applies every plan change queued on pull request `pr` that the plan does not record yet,
/// oldest first, each committed in the checkout (`plan_path`) with its record: the queued
/// markers are dagexec's own comments (`me`: a stranger's marker is no command), each naming
/// the `/execute` comment whose author's permission the comment job checked; that comment
/// is read again for the command. A change that cannot be applied any more (the task moved
/// on) is recorded too, and the commenter told why. Each marker is then rewritten to say
/// what became of it. Returns a line per command, for the log.
#[allow(clippy::too_many_arguments)]
pub(super) async fn catch_up(
    client: &Client,
    pr: u64,
    me: comment::Identity,
    repo: &Repo,
    plan_path: &Path,
    plan_rel: &str,
    plan: &mut Plan,
    dag: &crate::graph::Dag,
    known: Option<&Trigger>,
) -> Result<Vec<String>, ActionError> {
    let marked = comment::trusted_marked(client, pr, me).await?;
    let mut queued: Vec<(u64, u64)> = marked
        .own
        .iter()
        .filter_map(|c| {
            let rest = c.body.trim_start().strip_prefix(STEER_MARKER_PREFIX)?;
            let id: u64 = rest.split(" -->").next()?.trim().parse().ok()?;
            Some((id, c.id))
        })
        .filter(|(id, _)| !steered(plan).contains(id))
        .collect();
    queued.sort_unstable();
    queued.dedup_by_key(|q| q.0);
    let mut lines = Vec::new();
    for (id, marker) in queued {
        // The command this job was started for is in its event; any other is read again.
        let (user, command) = match known.filter(|t| t.comment_id == id) {
            Some(t) => (t.user.clone(), Some(t.command.clone())),
            None => match client.get_comment(id).await {
                Ok(c) => (c.author.login, comment::parse(&c.body)),
                // Deleted since: nothing to apply.
                Err(e) if e.status() == Some(404) => {
                    record(plan, id);
                    lines.push(format!("Comment {id} is gone; nothing to apply."));
                    continue;
                }
                Err(e) => return Err(e.into()),
            },
        };
        let by = format!("`/execute` by @{user}");
        let outcome = match command {
            Some(command) if changes_plan(&command) => apply(plan, dag, &command, &by),
            _ => Err(format!(
                "Comment {id} no longer holds a command that changes the plan; nothing was applied."
            )),
        };
        record(plan, id);
        crate::plan::save(plan, plan_path).map_err(|source| ActionError::Write {
            path: plan_path.to_path_buf(),
            source,
        })?;
        let (message, status) = match &outcome {
            Ok(message) => (message.clone(), "✅ Applied".to_string()),
            Err(why) => (
                format!(
                    "dagexec: /execute comment {id} not applied\n\n{}\n",
                    why.lines().next().unwrap_or("")
                ),
                format!("❌ Not applied: {}", why.lines().next().unwrap_or("")),
            ),
        };
        repo.commit(&message, &[plan_rel.to_string()])?;
        if let Err(why) = &outcome {
            client.comment(pr, why).await?;
        }
        let _ = client
            .update_comment(marker, &format!("{}\n{status}.\n", steer_marker(id)))
            .await;
        lines.push(format!(
            "{status}: comment {id} ({}).",
            message.lines().next().unwrap_or("")
        ));
    }
    Ok(lines)
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
